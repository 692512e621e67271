//! Peer slots: the outbound side of End-Users' Child SAs.
//!
//! A child of a connection with virtual-IP pools serves many End-Users,
//! each with its own Child SA narrowed to its virtual IP (RFC 7296 §2.19),
//! so one slot per configured child cannot work. Instead each End-User's
//! Child SA gets a *peer slot*, keyed by the child and the SA's selectors
//! (our side → its address), with policies of its own that protect with
//! the slot's outbound id:
//!
//! - the first outbound SA of a key creates the slot and its policies
//!   (the SPD is rebuilt from the installed policies and published);
//! - a rekey's outbound SA (same selectors) switches the slot in one
//!   replace, as for configured children: no packet finds no SA;
//! - removing the slot's current SA removes the slot and its policies:
//!   the End-User is gone, and its packets match no policy of it.
//!
//! Reloads keep peer slots whose child is still per-peer.

use std::collections::HashMap;
use std::sync::Arc;

use phalanx_sa::{PolicyId, Selector};

use super::{InstalledPolicy, InstalledSa, Runtime, SaHandle};
use crate::config::{ChildRef, PolicyConfig, PolicyTarget};

/// Which End-User's Child SA: the configured child and the SA's
/// selectors.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PeerKey {
    /// The configured child.
    pub child: ChildRef,
    /// The outbound SA's selectors (source = our side).
    pub selectors: Vec<Selector>,
}

/// One End-User's place in the outbound SAD.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerSlot {
    /// The outbound id its policies protect with.
    pub id: u32,
    /// The name of the SA the id holds.
    pub current: String,
}

/// The policies of a peer slot: one per selector, named after the child
/// and the destination (`rw/net@10.3.0.1/32#0`), with the child's
/// priority.
pub(super) fn policies(key: &PeerKey, slot: u32, priority: u32) -> Vec<PolicyConfig> {
    key.selectors
        .iter()
        .enumerate()
        .map(|(n, selector)| PolicyConfig {
            name: format!("{}@{}#{n}", key.child, selector.dst),
            priority,
            selector: *selector,
            target: PolicyTarget::Peer {
                child: key.child.clone(),
                slot,
            },
            line: 0,
        })
        .collect()
}

/// The peer slot whose current SA is `name`.
pub(super) fn current_of<'a>(rt: &'a Runtime, name: &str) -> Option<(&'a PeerKey, &'a PeerSlot)> {
    rt.peers.iter().find(|(_, slot)| slot.current == name)
}

/// Every policy of the peer slots of `peers`, for a rebuild.
pub(super) fn all_policies(
    peers: &HashMap<PeerKey, PeerSlot>,
    per_peer: &HashMap<ChildRef, u32>,
) -> Vec<PolicyConfig> {
    let mut out: Vec<(&PeerKey, &PeerSlot)> = peers.iter().collect();
    // A stable order: policy ids are given in this order.
    out.sort_by_key(|(_, slot)| slot.id);
    out.into_iter()
        .flat_map(|(key, slot)| {
            let priority = per_peer.get(&key.child).copied().unwrap_or_default();
            policies(key, slot.id, priority)
        })
        .collect()
}

/// The peer slots of `current` that a new configuration keeps: their
/// child is still per-peer and their SA still installed.
pub(super) fn kept(
    current: &Runtime,
    per_peer: &HashMap<ChildRef, u32>,
    sas: &[Arc<InstalledSa>],
) -> HashMap<PeerKey, PeerSlot> {
    current
        .peers
        .iter()
        .filter(|(key, slot)| {
            per_peer.contains_key(&key.child) && sas.iter().any(|sa| sa.config.name == slot.current)
        })
        .map(|(k, s)| (k.clone(), s.clone()))
        .collect()
}

/// Puts each peer slot's current SA under the slot's id in `outbound`.
pub(super) fn alias(
    peers: &HashMap<PeerKey, PeerSlot>,
    sas: &[Arc<InstalledSa>],
    outbound: &phalanx_sa::OutboundSad,
) {
    for slot in peers.values() {
        let found = sas.iter().find(|sa| sa.config.name == slot.current);
        if let Some(SaHandle::Outbound { sa, .. }) = found.map(|s| &s.handle) {
            // The id is the slot's alone; an insert cannot collide.
            let _ = outbound.insert(slot.id, Arc::clone(sa));
        }
    }
}

/// `policies` with those of the removed slot `slot` left out.
pub(super) fn without_slot(policies: &[InstalledPolicy], slot: u32) -> Vec<InstalledPolicy> {
    policies
        .iter()
        .filter(|p| !matches!(p.config.target, PolicyTarget::Peer { slot: s, .. } if s == slot))
        .cloned()
        .collect()
}

/// The lowest policy ids `policies` does not use, `n` of them.
pub(super) fn free_ids(policies: &[InstalledPolicy], n: usize) -> Vec<PolicyId> {
    let used = policies.iter().map(|p| p.id).collect();
    super::free_policy_ids(used).take(n).collect()
}
