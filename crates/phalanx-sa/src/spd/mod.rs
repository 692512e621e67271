//! The Security Policy Database (RFC 4301 §4.4.1): an ordered list of
//! policies, each a selector and an action; a packet gets the action of
//! the first policy, in order, whose selector matches it.
//!
//! Order is by `priority` (lower first), ties broken by insertion order.
//! Lookups go through a tuple-space classifier, updated incrementally on
//! insert and remove: policies are grouped by (address family, source
//! prefix length, destination prefix length); each group is a hash table
//! from the masked address pair to the policies sharing it, sorted by
//! order, whose protocol and ports are then checked. Groups are probed in
//! order of the best policy they hold, and the search stops at the first
//! group that cannot beat the match already found.
//!
//! Cost: a lookup is O(G · (1 + B)) — G distinct prefix-length pairs in
//! the packet's family, B policies per masked address pair — whatever the
//! number of policies; insert and remove are O(log n + B + G log G). It
//! relies on real policy sets using few prefix-length pairs (tens, not the
//! 1089 IPv4 allows) and few protocol/port variants per address pair. A
//! per-worker [`FlowCache`] in front answers repeated flows without the
//! classifier. Keep one `Spd` per direction (RFC 4301 §4.4.1: SPD-O and
//! SPD-I).

mod cache;
mod classifier;

pub use cache::{FlowCache, FlowCacheStats};

use crate::hash::BuildFoldHasher;
use crate::selector::{AddressFamily, FlowKey, Selector};
use classifier::{Classifier, PacketFields, Rank};
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};
use std::collections::HashMap;

/// The caller's name for a policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PolicyId(pub u32);

/// What to do with a matching packet (RFC 4301 §4.4.1: PROTECT, BYPASS,
/// DISCARD).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PolicyAction {
    /// Apply IPsec with the outbound SA the caller registered under this id
    /// (see [`OutboundSad`](crate::sad::OutboundSad)).
    Protect(u32),
    /// Pass in the clear.
    Bypass,
    /// Drop.
    Discard,
}

/// What a lookup decided, without the selector: all the data plane needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PolicyMatch {
    /// The matching policy.
    pub id: PolicyId,
    /// Its action.
    pub action: PolicyAction,
}

/// One SPD entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Policy {
    /// Unique within one SPD.
    pub id: PolicyId,
    /// Evaluation order: lower first; equal priorities in insertion order.
    pub priority: u32,
    /// Which packets the policy applies to. Source and destination must be
    /// of the same address family.
    pub selector: Selector,
    /// What to do with them.
    pub action: PolicyAction,
}

/// Why an SPD change was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpdError {
    /// A policy with this id is already installed.
    DuplicateId(PolicyId),
    /// The selector's source and destination are of different address
    /// families: it could never match.
    MixedAddressFamilies,
    /// The SPD holds the maximum number of policies (2^32 - 2).
    Full,
}

impl fmt::Display for SpdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpdError::DuplicateId(id) => write!(f, "policy id {} already installed", id.0),
            SpdError::MixedAddressFamilies => f.write_str("selector mixes IPv4 and IPv6 addresses"),
            SpdError::Full => f.write_str("SPD full"),
        }
    }
}

impl std::error::Error for SpdError {}

/// Slot number that never holds a policy: "no policy matched".
pub(crate) const NO_SLOT: u32 = u32::MAX;

/// Source of SPD instance numbers, so a [`FlowCache`] never mistakes one
/// SPD (or a clone) for another with the same generation.
static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

fn new_instance() -> u64 {
    NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed)
}

/// A policy slot, alone on its cache line: a lookup that reads the policy
/// it found touches exactly one line of the policy store.
#[repr(align(64))]
#[derive(Clone, Copy, Debug)]
struct Slot(Option<Policy>);

const _: () = assert!(core::mem::size_of::<Slot>() == 64);

/// What removal needs about a policy, apart from the hot policy store.
#[derive(Clone, Copy, Debug)]
struct SlotMeta {
    rank: Rank,
    family: AddressFamily,
}

/// The Security Policy Database of one direction.
#[derive(Debug)]
pub struct Spd {
    slots: Vec<Slot>,
    meta: Vec<SlotMeta>,
    free: Vec<u32>,
    by_id: HashMap<PolicyId, u32, BuildFoldHasher>,
    classifier: Classifier,
    next_order: u64,
    generation: u64,
    instance: u64,
}

impl Spd {
    /// An empty SPD.
    pub fn new() -> Spd {
        Spd {
            slots: Vec::new(),
            meta: Vec::new(),
            free: Vec::new(),
            by_id: HashMap::default(),
            classifier: Classifier::default(),
            next_order: 0,
            generation: 0,
            instance: new_instance(),
        }
    }

    /// Add a policy. It goes after every installed policy of the same
    /// priority (a removed and re-inserted policy goes last among its
    /// peers).
    pub fn insert(&mut self, policy: Policy) -> Result<(), SpdError> {
        let family = policy
            .selector
            .family()
            .ok_or(SpdError::MixedAddressFamilies)?;
        if self.by_id.contains_key(&policy.id) {
            return Err(SpdError::DuplicateId(policy.id));
        }
        let slot = self.free_slot()?;
        let rank = Rank {
            priority: policy.priority,
            order: self.next_order,
        };
        self.next_order += 1;
        self.classifier.insert(family, &policy.selector, rank, slot);
        self.by_id.insert(policy.id, slot);
        self.slots[slot as usize] = Slot(Some(policy));
        self.meta[slot as usize] = SlotMeta { rank, family };
        self.generation += 1;
        Ok(())
    }

    /// Remove the policy with `id` and return it.
    pub fn remove(&mut self, id: PolicyId) -> Option<Policy> {
        let slot = self.by_id.remove(&id)?;
        let policy = self.slots.get_mut(slot as usize)?.0.take()?;
        let meta = *self.meta.get(slot as usize)?;
        self.classifier
            .remove(meta.family, &policy.selector, meta.rank);
        self.free.push(slot);
        self.generation += 1;
        Some(policy)
    }

    /// The first policy in order whose selector matches `key` (RFC 4301
    /// §4.4.1), through the classifier. `None`: no policy matched; RFC 4301
    /// §5.1 has such packets discarded, but that is the caller's call.
    #[inline]
    pub fn lookup(&self, key: &FlowKey) -> Option<&Policy> {
        self.policy_at(self.lookup_slot(key))
    }

    /// The policy with `id`.
    pub fn get(&self, id: PolicyId) -> Option<&Policy> {
        self.by_id.get(&id).and_then(|&slot| self.policy_at(slot))
    }

    /// Number of policies.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether there is no policy.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Changes with every insert and remove; flow caches compare it.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Every policy in evaluation order.
    pub fn policies(&self) -> Vec<&Policy> {
        let mut all: Vec<(Rank, &Policy)> = self
            .slots
            .iter()
            .zip(&self.meta)
            .filter_map(|(slot, meta)| slot.0.as_ref().map(|p| (meta.rank, p)))
            .collect();
        all.sort_by_key(|(rank, _)| *rank);
        all.into_iter().map(|(_, p)| p).collect()
    }

    /// Number of tuple-space groups the classifier probes at most per
    /// lookup (for the operator and benchmarks).
    pub fn classifier_groups(&self) -> usize {
        self.classifier.group_count()
    }

    /// Slot of the first matching policy, or [`NO_SLOT`].
    #[inline]
    pub(crate) fn lookup_slot(&self, key: &FlowKey) -> u32 {
        PacketFields::of(key)
            .and_then(|p| self.classifier.lookup(&p))
            .unwrap_or(NO_SLOT)
    }

    /// The policy in `slot`; `None` for [`NO_SLOT`] or an empty slot.
    #[inline]
    pub(crate) fn policy_at(&self, slot: u32) -> Option<&Policy> {
        self.slots.get(slot as usize)?.0.as_ref()
    }

    /// Identifies this SPD's current contents for a [`FlowCache`].
    #[inline]
    pub(crate) fn cache_token(&self) -> (u64, u64) {
        (self.instance, self.generation)
    }

    fn free_slot(&mut self) -> Result<u32, SpdError> {
        if let Some(slot) = self.free.pop() {
            return Ok(slot);
        }
        let slot = u32::try_from(self.slots.len()).map_err(|_| SpdError::Full)?;
        if slot == NO_SLOT {
            return Err(SpdError::Full);
        }
        self.slots.push(Slot(None));
        self.meta.push(SlotMeta {
            rank: Rank {
                priority: 0,
                order: 0,
            },
            family: AddressFamily::V4,
        });
        Ok(slot)
    }
}

impl Default for Spd {
    fn default() -> Self {
        Spd::new()
    }
}

impl Clone for Spd {
    /// A copy with its own identity: flow caches filled from the original
    /// do not answer for the copy.
    fn clone(&self) -> Self {
        Spd {
            slots: self.slots.clone(),
            meta: self.meta.clone(),
            free: self.free.clone(),
            by_id: self.by_id.clone(),
            classifier: self.classifier.clone(),
            next_order: self.next_order,
            generation: self.generation,
            instance: new_instance(),
        }
    }
}

#[cfg(test)]
mod tests;
