//! A per-worker cache of SPD decisions by flow.
//!
//! One worker owns one cache (`&mut self`, no locks, no atomics). The table
//! is 4-way set associative with LRU replacement inside a set, allocated
//! once: a lookup never allocates. Entries are tagged with an epoch that
//! changes whenever the SPD's identity or generation does, so a change to
//! the SPD invalidates the whole cache in O(1). "No policy matched" is
//! cached too. Each entry keeps the matched policy's id and action, so
//! [`FlowCache::lookup_action`] answers a hit from two cache lines (the
//! set's tags and the entry) without touching the SPD.
//!
//! Flow keys come from the network, so the set index uses a keyed hash: a
//! seed from [`FlowCache::with_seed`] keeps an attacker from aiming
//! packets at one set (they could only cause misses anyway).

use super::{Policy, PolicyAction, PolicyId, PolicyMatch, Spd, NO_SLOT};
use crate::hash::{hash_pair, K2};
use crate::limits::{FLOW_CACHE_MAX_ENTRIES, FLOW_CACHE_MIN_ENTRIES, FLOW_CACHE_WAYS};
use crate::selector::{addr_bits, FlowKey};
use core::net::IpAddr;

/// Ways per set.
const WAYS: usize = FLOW_CACHE_WAYS;

/// One cached decision, one cache line.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
struct CacheEntry {
    src: u128,
    dst: u128,
    /// Entry is valid when equal to the cache's epoch (0 never is).
    epoch: u32,
    /// Last use, for LRU within the set.
    last_use: u32,
    /// Policy slot in the SPD, or `NO_SLOT`.
    slot: u32,
    /// Id and action of the policy in `slot` (meaningless for `NO_SLOT`).
    id: PolicyId,
    action: PolicyAction,
    src_port: u16,
    dst_port: u16,
    protocol: u8,
    is_v6: bool,
}

const _: () = assert!(core::mem::size_of::<CacheEntry>() == 64);

impl CacheEntry {
    const EMPTY: CacheEntry = CacheEntry {
        src: 0,
        dst: 0,
        epoch: 0,
        last_use: 0,
        slot: NO_SLOT,
        id: PolicyId(0),
        action: PolicyAction::Discard,
        src_port: 0,
        dst_port: 0,
        protocol: 0,
        is_v6: false,
    };

    #[inline(always)]
    fn decision(&self) -> Option<PolicyMatch> {
        (self.slot != NO_SLOT).then_some(PolicyMatch {
            id: self.id,
            action: self.action,
        })
    }
}

/// A flow key flattened for comparison and hashing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Probe {
    src: u128,
    dst: u128,
    src_port: u16,
    dst_port: u16,
    protocol: u8,
    is_v6: bool,
}

impl Probe {
    #[inline(always)]
    fn of(key: &FlowKey) -> Probe {
        Probe {
            src: addr_bits(key.src),
            dst: addr_bits(key.dst),
            src_port: key.src_port,
            dst_port: key.dst_port,
            protocol: key.protocol.0,
            // A key mixing families still needs a distinct, stable tag.
            is_v6: matches!(key.src, IpAddr::V6(_)) || matches!(key.dst, IpAddr::V6(_)),
        }
    }

    #[inline(always)]
    fn hash(&self, seed: u64) -> u64 {
        let meta = u64::from(self.src_port)
            | (u64::from(self.dst_port) << 16)
            | (u64::from(self.protocol) << 32)
            | (u64::from(self.is_v6) << 40);
        hash_pair(self.src, self.dst, seed ^ meta.wrapping_mul(K2))
    }

    #[inline(always)]
    fn is(&self, e: &CacheEntry) -> bool {
        self.src == e.src
            && self.dst == e.dst
            && self.src_port == e.src_port
            && self.dst_port == e.dst_port
            && self.protocol == e.protocol
            && self.is_v6 == e.is_v6
    }
}

/// Hit and miss counters of a [`FlowCache`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowCacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that went to the classifier.
    pub misses: u64,
}

/// A per-worker, fixed-size cache of flow → policy in front of an [`Spd`].
///
/// Each set has its four 32-bit hash tags packed together, so a hit reads
/// one tag line and one entry line.
#[derive(Clone, Debug)]
pub struct FlowCache {
    /// Per set: a non-zero hash tag per way (0: never filled).
    tags: Box<[[u32; WAYS]]>,
    /// Per set: the entries.
    sets: Box<[[CacheEntry; WAYS]]>,
    /// Number of sets minus one (a power of two minus one).
    set_mask: usize,
    seed: u64,
    epoch: u32,
    /// (SPD instance, SPD generation) the current epoch belongs to.
    bound: Option<(u64, u64)>,
    clock: u32,
    stats: FlowCacheStats,
}

impl FlowCache {
    /// A cache of about `entries` flows (rounded up to a power of two, at
    /// least 4 and at most 2^24), with a fixed hash seed.
    pub fn new(entries: usize) -> FlowCache {
        FlowCache::with_seed(entries, 0)
    }

    /// As [`new`](Self::new), with the set index keyed by `seed` (draw it
    /// from a random source the caller owns).
    pub fn with_seed(entries: usize, seed: u64) -> FlowCache {
        let entries = entries
            .clamp(FLOW_CACHE_MIN_ENTRIES, FLOW_CACHE_MAX_ENTRIES)
            .next_power_of_two();
        let sets = entries / WAYS;
        FlowCache {
            tags: vec![[0; WAYS]; sets].into_boxed_slice(),
            sets: vec![[CacheEntry::EMPTY; WAYS]; sets].into_boxed_slice(),
            set_mask: sets - 1,
            seed,
            epoch: 0,
            bound: None,
            clock: 0,
            stats: FlowCacheStats::default(),
        }
    }

    /// Number of entries.
    pub fn capacity(&self) -> usize {
        self.sets.len() * WAYS
    }

    /// Hit and miss counts since creation.
    pub fn stats(&self) -> FlowCacheStats {
        self.stats
    }

    /// Forget every entry.
    pub fn clear(&mut self) {
        self.bound = None;
    }

    /// The first policy of `spd` matching `key`, as [`Spd::lookup`] would
    /// answer it: from the cache when this flow was seen since the SPD last
    /// changed, otherwise from the classifier (and then remembered).
    #[inline]
    pub fn lookup<'s>(&mut self, spd: &'s Spd, key: &FlowKey) -> Option<&'s Policy> {
        spd.policy_at(self.entry(spd, key).slot)
    }

    /// Like [`lookup`](Self::lookup), returning only the id and action of
    /// the policy: a hit then reads nothing of the SPD. This is the data
    /// plane's call.
    #[inline]
    pub fn lookup_action(&mut self, spd: &Spd, key: &FlowKey) -> Option<PolicyMatch> {
        self.entry(spd, key).decision()
    }

    /// The valid entry for `key`, filled from the classifier on a miss.
    #[inline(always)]
    fn entry(&mut self, spd: &Spd, key: &FlowKey) -> &CacheEntry {
        self.sync(spd);
        let probe = Probe::of(key);
        let hash = probe.hash(self.seed);
        let set = (hash >> 32) as usize & self.set_mask;
        // Tags are never 0, so an empty way never matches.
        let tag = (hash as u32) | 1;
        self.clock = self.clock.wrapping_add(1);
        let (epoch, clock) = (self.epoch, self.clock);
        let tags = &mut self.tags[set];
        let ways = &mut self.sets[set];
        let hit =
            (0..WAYS).find(|&w| tags[w] == tag && ways[w].epoch == epoch && probe.is(&ways[w]));
        let way = match hit {
            Some(way) => {
                self.stats.hits += 1;
                ways[way].last_use = clock;
                way
            }
            None => {
                self.stats.misses += 1;
                let way = victim(ways, epoch, clock);
                tags[way] = tag;
                ways[way] = fill(spd, key, &probe, epoch, clock);
                way
            }
        };
        &ways[way]
    }

    /// Start a new epoch when the SPD is another one or has changed.
    #[inline(always)]
    fn sync(&mut self, spd: &Spd) {
        let token = spd.cache_token();
        if self.bound == Some(token) {
            return;
        }
        self.bound = Some(token);
        if self.epoch == u32::MAX {
            // Epochs are about to repeat: make every old entry invalid for
            // good before they do (once per 2^32 SPD changes).
            for ways in self.sets.iter_mut() {
                ways.iter_mut().for_each(|e| e.epoch = 0);
            }
            self.epoch = 0;
        }
        self.epoch += 1;
    }
}

/// A new entry for `probe` from the SPD's classifier.
#[inline(never)]
fn fill(spd: &Spd, key: &FlowKey, probe: &Probe, epoch: u32, clock: u32) -> CacheEntry {
    let slot = spd.lookup_slot(key);
    let (slot, id, action) = match spd.policy_at(slot) {
        Some(policy) => (slot, policy.id, policy.action),
        None => (NO_SLOT, PolicyId(0), PolicyAction::Discard),
    };
    CacheEntry {
        src: probe.src,
        dst: probe.dst,
        epoch,
        last_use: clock,
        slot,
        id,
        action,
        src_port: probe.src_port,
        dst_port: probe.dst_port,
        protocol: probe.protocol,
        is_v6: probe.is_v6,
    }
}

/// The way to overwrite: an invalid one, else the least recently used.
#[inline]
fn victim(ways: &[CacheEntry; WAYS], epoch: u32, clock: u32) -> usize {
    let mut best = 0;
    let mut best_age = 0;
    for (index, entry) in ways.iter().enumerate() {
        if entry.epoch != epoch {
            return index;
        }
        let age = clock.wrapping_sub(entry.last_use);
        if age > best_age {
            best = index;
            best_age = age;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::Selector;
    use phalanx_wire::IpProtocol;

    fn key(port: u16) -> FlowKey {
        FlowKey {
            src: "10.0.0.1".parse().expect("addr"),
            dst: "10.0.0.2".parse().expect("addr"),
            protocol: IpProtocol::UDP,
            src_port: 1,
            dst_port: port,
        }
    }

    #[test]
    fn epoch_wrap_invalidates_old_entries() {
        let mut spd = Spd::new();
        let policy = |id| Policy {
            id: PolicyId(id),
            priority: id,
            selector: Selector::ANY_V4,
            action: PolicyAction::Protect(id),
        };
        spd.insert(policy(1)).expect("insert");
        let mut cache = FlowCache::new(16);
        assert_eq!(cache.lookup(&spd, &key(1)).map(|p| p.id), Some(PolicyId(1)));
        // Pretend 2^32 - 2 SPD changes went by since the entry was filled.
        cache.epoch = u32::MAX;
        cache.bound = None;
        spd.insert(policy(0)).expect("insert");
        let hit = cache.lookup_action(&spd, &key(1));
        assert_eq!(
            hit,
            Some(PolicyMatch {
                id: PolicyId(0),
                action: PolicyAction::Protect(0)
            })
        );
        assert_eq!(cache.epoch, 1);
        assert_eq!(cache.stats().misses, 2);
    }

    #[test]
    fn lookup_action_matches_lookup() {
        let mut spd = Spd::new();
        let selector = Selector {
            protocol: Some(IpProtocol::UDP),
            ..Selector::ANY_V4
        };
        let p = Policy {
            id: PolicyId(9),
            priority: 1,
            selector,
            action: PolicyAction::Bypass,
        };
        spd.insert(p).expect("insert");
        let mut cache = FlowCache::new(8);
        for _ in 0..2 {
            assert_eq!(
                cache.lookup_action(&spd, &key(5)),
                Some(PolicyMatch {
                    id: PolicyId(9),
                    action: PolicyAction::Bypass
                })
            );
            let tcp = FlowKey {
                protocol: IpProtocol::TCP,
                ..key(5)
            };
            assert_eq!(cache.lookup_action(&spd, &tcp), None);
        }
        assert_eq!(cache.stats(), FlowCacheStats { hits: 2, misses: 2 });
    }
}
