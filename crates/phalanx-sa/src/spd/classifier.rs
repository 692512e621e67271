//! The SPD's miss-path classifier: tuple space search.
//!
//! Policies are grouped by their "tuple" (source prefix length, destination
//! prefix length) within one address family. In a group every policy's
//! addresses are exact values once masked, so one hash probe with the
//! packet's masked (source, destination) finds the bucket of candidates;
//! the bucket, sorted by rank, is scanned for protocol and ports. Groups
//! are visited in order of the best rank they hold, and the search stops at
//! the first group whose best rank cannot beat the match already found.
//!
//! Complexity: a lookup is O(G · (1 + B)) where G is the number of distinct
//! (source length, destination length) tuples in the packet's family and B
//! the number of policies sharing one masked address pair (they differ in
//! protocol or ports). Insert and remove are O(log n + B + G log G)
//! (amortised hash growth). The assumption that makes this fast: real
//! policy sets use few prefix-length pairs (G is tens, not thousands) and
//! few protocol/port variants per address pair, whatever n is. An
//! adversarial set with every length pair (33 · 33 for IPv4) is still
//! correct, only slower.

use crate::hash::{folded_mul, hash_pair, BuildPrehashedHasher, K0, K1};
use crate::selector::{addr_bits, prefix_mask, AddressFamily, FlowKey, PortRange, Selector};
use core::hash::{Hash, Hasher};
use phalanx_wire::IpProtocol;
use std::collections::{hash_map, BTreeSet, HashMap};

/// Evaluation order of a policy: by priority, then by insertion (RFC 4301
/// §4.4.1: the SPD is ordered and the first match wins).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Rank {
    pub(crate) priority: u32,
    pub(crate) order: u64,
}

/// A packet's selector fields as integers, computed once per lookup.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PacketFields {
    pub(crate) family: AddressFamily,
    pub(crate) src: u128,
    pub(crate) dst: u128,
    pub(crate) protocol: IpProtocol,
    pub(crate) src_port: u16,
    pub(crate) dst_port: u16,
}

impl PacketFields {
    /// The fields of `key`, or `None` when its addresses are of different
    /// families (no selector can match such a key).
    #[inline]
    pub(crate) fn of(key: &FlowKey) -> Option<PacketFields> {
        let family = AddressFamily::of(key.src);
        if AddressFamily::of(key.dst) != family {
            return None;
        }
        Some(PacketFields {
            family,
            src: addr_bits(key.src),
            dst: addr_bits(key.dst),
            protocol: key.protocol,
            src_port: key.src_port,
            dst_port: key.dst_port,
        })
    }
}

/// An address as the integer the classifier masks and hashes: `u32` for
/// IPv4 (keys half the size, one multiplication to hash), `u128` for IPv6.
trait AddressBits: Copy + Eq + core::fmt::Debug {
    /// From the 128-bit form of [`addr_bits`] (IPv4 in the low 32 bits).
    fn from_bits(bits: u128) -> Self;
    /// Bitwise and.
    fn and(self, mask: Self) -> Self;
    /// A well-mixed hash of a (source, destination) pair.
    fn pair_hash(src: Self, dst: Self) -> u64;
}

impl AddressBits for u32 {
    #[inline(always)]
    fn from_bits(bits: u128) -> Self {
        bits as u32
    }

    #[inline(always)]
    fn and(self, mask: Self) -> Self {
        self & mask
    }

    #[inline(always)]
    fn pair_hash(src: Self, dst: Self) -> u64 {
        folded_mul(((u64::from(src) << 32) | u64::from(dst)) ^ K0, K1)
    }
}

impl AddressBits for u128 {
    #[inline(always)]
    fn from_bits(bits: u128) -> Self {
        bits
    }

    #[inline(always)]
    fn and(self, mask: Self) -> Self {
        self & mask
    }

    #[inline(always)]
    fn pair_hash(src: Self, dst: Self) -> u64 {
        hash_pair(src, dst, 0)
    }
}

/// A masked (source, destination) pair: the exact-match part of a policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PairKey<A> {
    src: A,
    dst: A,
}

impl<A: AddressBits> Hash for PairKey<A> {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(A::pair_hash(self.src, self.dst));
    }
}

/// The part of a policy checked after the hash probe.
#[derive(Clone, Copy, Debug)]
struct Entry {
    rank: Rank,
    slot: u32,
    protocol: Option<IpProtocol>,
    src_ports: PortRange,
    dst_ports: PortRange,
}

impl Entry {
    #[inline(always)]
    fn matches(&self, packet: &PacketFields) -> bool {
        self.protocol.is_none_or(|p| p == packet.protocol)
            && self.src_ports.contains(packet.src_port)
            && self.dst_ports.contains(packet.dst_port)
    }
}

/// The policies sharing one masked address pair, sorted by rank. The best
/// is kept inline in the hash table: most buckets hold one policy, and a
/// hit then needs no second memory access.
#[derive(Clone, Debug)]
struct Bucket {
    first: Entry,
    more: Vec<Entry>,
}

impl Bucket {
    fn iter(&self) -> impl Iterator<Item = &Entry> {
        core::iter::once(&self.first).chain(self.more.iter())
    }

    fn insert(&mut self, mut entry: Entry) {
        if entry.rank < self.first.rank {
            core::mem::swap(&mut entry, &mut self.first);
        }
        let at = self.more.partition_point(|e| e.rank < entry.rank);
        self.more.insert(at, entry);
    }

    /// Remove the entry with `rank`; false when the bucket is then empty.
    fn remove(&mut self, rank: Rank) -> bool {
        if self.first.rank != rank {
            self.more.retain(|e| e.rank != rank);
            return true;
        }
        if self.more.is_empty() {
            return false;
        }
        self.first = self.more.remove(0);
        true
    }
}

/// All policies of one family with one (source length, destination length).
#[derive(Clone, Debug)]
struct Group<A> {
    src_len: u8,
    dst_len: u8,
    src_mask: A,
    dst_mask: A,
    /// Best (smallest) rank in the group; groups are sorted by it.
    best: Rank,
    /// Every rank in the group, to find the next best after a removal.
    ranks: BTreeSet<Rank>,
    /// Masked address pair -> its bucket.
    buckets: HashMap<PairKey<A>, Bucket, BuildPrehashedHasher>,
}

impl<A: AddressBits> Group<A> {
    fn new(family: AddressFamily, src_len: u8, dst_len: u8, rank: Rank) -> Group<A> {
        Group {
            src_len,
            dst_len,
            src_mask: A::from_bits(prefix_mask(family, src_len)),
            dst_mask: A::from_bits(prefix_mask(family, dst_len)),
            best: rank,
            ranks: BTreeSet::new(),
            buckets: HashMap::default(),
        }
    }

    fn key_of(&self, selector: &Selector) -> PairKey<A> {
        PairKey {
            src: A::from_bits(addr_bits(selector.src.addr())).and(self.src_mask),
            dst: A::from_bits(addr_bits(selector.dst.addr())).and(self.dst_mask),
        }
    }

    /// The best entry of this group matching `packet` (whose addresses are
    /// `src`, `dst`) and ranked before `bound`.
    #[inline]
    fn find(&self, src: A, dst: A, packet: &PacketFields, bound: Option<Rank>) -> Option<&Entry> {
        let key = PairKey {
            src: src.and(self.src_mask),
            dst: dst.and(self.dst_mask),
        };
        let bucket = self.buckets.get(&key)?;
        bucket
            .iter()
            .take_while(|e| bound.is_none_or(|b| e.rank < b))
            .find(|e| e.matches(packet))
    }
}

/// The groups of one address family, sorted by their best rank.
#[derive(Clone, Debug)]
struct TupleSpace<A> {
    groups: Vec<Group<A>>,
}

impl<A> Default for TupleSpace<A> {
    fn default() -> Self {
        TupleSpace { groups: Vec::new() }
    }
}

impl<A: AddressBits> TupleSpace<A> {
    #[inline]
    fn lookup(&self, packet: &PacketFields) -> Option<(Rank, u32)> {
        let (src, dst) = (A::from_bits(packet.src), A::from_bits(packet.dst));
        let mut best: Option<(Rank, u32)> = None;
        for group in &self.groups {
            let bound = best.map(|(rank, _)| rank);
            if bound.is_some_and(|b| group.best > b) {
                // Every later group starts even further down the order.
                break;
            }
            if let Some(entry) = group.find(src, dst, packet, bound) {
                best = Some((entry.rank, entry.slot));
            }
        }
        best
    }

    fn insert(&mut self, family: AddressFamily, selector: &Selector, rank: Rank, slot: u32) {
        let (src_len, dst_len) = (selector.src.len(), selector.dst.len());
        let index = match self.position(src_len, dst_len) {
            Some(index) => index,
            None => {
                self.groups.push(Group::new(family, src_len, dst_len, rank));
                self.groups.len() - 1
            }
        };
        let group = &mut self.groups[index];
        let entry = Entry {
            rank,
            slot,
            protocol: selector.protocol,
            src_ports: selector.src_ports,
            dst_ports: selector.dst_ports,
        };
        match group.buckets.entry(group.key_of(selector)) {
            hash_map::Entry::Occupied(mut bucket) => bucket.get_mut().insert(entry),
            hash_map::Entry::Vacant(slot) => {
                slot.insert(Bucket {
                    first: entry,
                    more: Vec::new(),
                });
            }
        }
        group.ranks.insert(rank);
        if rank <= group.best {
            group.best = rank;
            self.sort();
        }
    }

    fn remove(&mut self, selector: &Selector, rank: Rank) {
        let Some(index) = self.position(selector.src.len(), selector.dst.len()) else {
            return;
        };
        let group = &mut self.groups[index];
        let key = group.key_of(selector);
        if let Some(bucket) = group.buckets.get_mut(&key) {
            if !bucket.remove(rank) {
                group.buckets.remove(&key);
            }
        }
        group.ranks.remove(&rank);
        match group.ranks.first() {
            None => {
                self.groups.remove(index);
            }
            Some(&next_best) if next_best != group.best => {
                group.best = next_best;
                self.sort();
            }
            Some(_) => {}
        }
    }

    fn position(&self, src_len: u8, dst_len: u8) -> Option<usize> {
        self.groups
            .iter()
            .position(|g| g.src_len == src_len && g.dst_len == dst_len)
    }

    fn sort(&mut self) {
        self.groups.sort_by_key(|g| g.best);
    }
}

/// One tuple space per address family.
#[derive(Clone, Debug, Default)]
pub(crate) struct Classifier {
    v4: TupleSpace<u32>,
    v6: TupleSpace<u128>,
}

impl Classifier {
    /// Slot of the first policy in order that matches.
    #[inline]
    pub(crate) fn lookup(&self, packet: &PacketFields) -> Option<u32> {
        let best = match packet.family {
            AddressFamily::V4 => self.v4.lookup(packet),
            AddressFamily::V6 => self.v6.lookup(packet),
        };
        best.map(|(_, slot)| slot)
    }

    /// Add a policy whose selector is of `family`.
    pub(crate) fn insert(
        &mut self,
        family: AddressFamily,
        selector: &Selector,
        rank: Rank,
        slot: u32,
    ) {
        match family {
            AddressFamily::V4 => self.v4.insert(family, selector, rank, slot),
            AddressFamily::V6 => self.v6.insert(family, selector, rank, slot),
        }
    }

    /// Remove the policy inserted with `selector` and `rank`.
    pub(crate) fn remove(&mut self, family: AddressFamily, selector: &Selector, rank: Rank) {
        match family {
            AddressFamily::V4 => self.v4.remove(selector, rank),
            AddressFamily::V6 => self.v6.remove(selector, rank),
        }
    }

    /// Number of (family, source length, destination length) groups.
    pub(crate) fn group_count(&self) -> usize {
        self.v4.groups.len() + self.v6.groups.len()
    }
}
