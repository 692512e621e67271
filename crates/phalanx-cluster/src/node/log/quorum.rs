//! Quorum and partition merges in the replicated state.
//!
//! # Quorum
//! A state is *quorate* while its votes (the base view: ready, agreed,
//! unsuspected members) hold a strict majority of its *quorum base*, or
//! exactly half of it including the base's lowest node (the tie-break
//! that lets a two-node cluster survive the failure of its higher node).
//! The quorum base is the last agreed (Corosync) membership in which the
//! state was quorate: a membership change moves it only when the state is
//! quorate against the old base, so a minority can never make itself a
//! majority by shrinking its own base, and suspicions (applied one at a
//! time) never move it at all. A state that is not quorate grants no
//! lease block (its lease view is empty) and its nodes own nothing.
//!
//! # Merges
//! Each side of a partition applies its own membership changes, so its
//! `history` (a hash chain over them) differs from the other side's. When
//! Corosync merges the sides, each side's lowest member sends its state
//! transfer to the "joiners" (the other side) as usual; a transfer whose
//! history is not one of this state's recent ones is a *rival* claim.
//! Both sides compare the same two standings, recorded by each side at
//! the merging membership change: quorate before it wins; then the lowest
//! ready member. The losing side's nodes yield (`Yield`, with their
//! side's lease high-water marks) and join again through the ordinary
//! state transfer; the winners' log raises every SA's lease floor above
//! the rival's grants, at the claim and again at each `Yield`, before any
//! loser owns anything again.

use core::cmp::Reverse;

use super::{Effect, Replicated};
use crate::codec::{QuorumState, StateSnapshot};
use crate::lease::Grant;
use crate::view::NodeId;

/// History values kept to recognise a transfer of this lineage taken a
/// few membership changes ago.
const RECENT_HISTORIES: usize = 16;

/// Whether a side of a partition may keep owning traffic and granting
/// leases. Every node of a cluster must use the same policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum QuorumPolicy {
    /// A majority of the last quorate agreed membership, or exactly half
    /// of it with its lowest node (the default: two sides of a partition
    /// never both own traffic, so no `(SPI, seq)` is ever sent twice).
    #[default]
    Majority,
    /// Every side keeps going (availability first). The explicit IVs stay
    /// unique (they carry the node id), but two sides of a partition can
    /// send the same `(SPI, seq)`; the merge still keeps every number sent
    /// after it above everything both sides used.
    Off,
}

impl QuorumPolicy {
    /// The configuration name (`majority`, `off`).
    pub fn name(self) -> &'static str {
        match self {
            QuorumPolicy::Majority => "majority",
            QuorumPolicy::Off => "off",
        }
    }

    /// The policy of a configuration name; `None` for any other.
    pub fn from_name(name: &str) -> Option<QuorumPolicy> {
        [QuorumPolicy::Majority, QuorumPolicy::Off]
            .into_iter()
            .find(|p| p.name() == name)
    }
}

/// The quorum rule: `votes` hold a strict majority of `base`, or exactly
/// half including `base`'s lowest node. An empty base is quorate.
pub(crate) fn is_quorate(votes: &[NodeId], base: &[NodeId]) -> bool {
    let present = base.iter().filter(|n| votes.contains(n)).count();
    let lowest_present = base.iter().min().is_some_and(|n| votes.contains(n));
    base.is_empty() || 2 * present > base.len() || (2 * present == base.len() && lowest_present)
}

/// The next link of the history chain: a fixed hash (every node computes
/// the same) of the previous link and the new membership.
fn chain(previous: u64, members: &[NodeId]) -> u64 {
    let mut h = mix(previous ^ 0x7068_616c_616e_7821);
    for node in members {
        h = mix(h ^ u64::from(node.0));
    }
    mix(h ^ members.len() as u64)
}

/// splitmix64's finaliser.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A side's standing in a merge: quorate first, then the lowest node.
fn standing(q: &QuorumState) -> (bool, Reverse<u32>) {
    (q.was_quorate, Reverse(q.lowest.map_or(u32::MAX, |n| n.0)))
}

impl Replicated {
    /// The quorum state of a new cluster founded by `members`.
    pub(crate) fn founding_quorum(members: &[NodeId]) -> QuorumState {
        let history = chain(0, members);
        QuorumState {
            history,
            recent: vec![history],
            base: members.to_vec(),
            refused: Vec::new(),
            quorate: true,
            was_quorate: true,
            lowest: members.iter().min().copied(),
        }
    }

    /// Whether `votes` make this state quorate under its policy.
    pub(crate) fn quorate_with(&self, votes: &[NodeId]) -> bool {
        self.policy == QuorumPolicy::Off || is_quorate(votes, &self.quorum.base)
    }

    /// Before a membership change is applied: record this side's standing
    /// for a merge it may start, and extend the history.
    pub(super) fn note_membership(&mut self, members: &[NodeId]) {
        self.quorum.was_quorate = self.quorum.quorate;
        self.quorum.lowest = self
            .ready
            .iter()
            .copied()
            .filter(|n| members.contains(n))
            .min();
        self.quorum.history = chain(self.quorum.history, members);
        self.quorum.recent.push(self.quorum.history);
        let excess = self.quorum.recent.len().saturating_sub(RECENT_HISTORIES);
        self.quorum.recent.drain(..excess);
    }

    /// After a membership change: a quorate state takes it as its new
    /// quorum base.
    pub(super) fn settle_quorum(&mut self, fx: &mut Vec<Effect>) {
        if self.quorum.quorate && self.quorum.base != self.agreed {
            self.quorum.base = self.agreed.clone();
            self.recompute_base(fx);
        }
    }

    /// Whether a transfer's state is of this lineage (possibly a few
    /// membership changes old) rather than another side's.
    pub(super) fn own_lineage(&self, q: &QuorumState) -> bool {
        q.history == self.quorum.history || self.quorum.recent.contains(&q.history)
    }

    /// Another side's state transfer (its claim in a merge). A claim for
    /// another membership than the current one is stale and ignored. The
    /// weaker side yields (`Effect::Defeated`); the stronger raises its
    /// lease floors above everything the other side's log granted.
    pub(super) fn apply_rival(
        &mut self,
        from: NodeId,
        rival: &StateSnapshot,
        fx: &mut Vec<Effect>,
    ) {
        if rival.agreed != self.agreed || rival.quorum.lowest == self.quorum.lowest {
            return;
        }
        if standing(&rival.quorum) > standing(&self.quorum) {
            fx.push(Effect::Defeated { by: from });
            return;
        }
        let marks: Vec<(u32, u64)> = rival
            .sas
            .iter()
            .filter_map(|r| Some((r.descriptor.spi, r.leases.as_ref()?.max_end())))
            .collect();
        self.raise_floors(&marks, fx);
        fx.push(Effect::Outranked { rival: from });
    }

    /// `Yield` from `node`: raise the floors above its side's marks, then
    /// it is a joiner like any other (a transfer is due).
    pub(super) fn apply_yield(&mut self, node: NodeId, marks: &[(u32, u64)], fx: &mut Vec<Effect>) {
        if !self.agreed.contains(&node) {
            return;
        }
        self.raise_floors(marks, fx);
        self.synced.remove(&node);
        self.ready.remove(&node);
        self.suspects.remove(&node);
        for accusers in self.suspects.values_mut() {
            accusers.remove(&node);
        }
        self.suspects.retain(|_, accusers| !accusers.is_empty());
        self.joined_at.insert(node, self.applied);
        self.recompute_base(fx);
        fx.push(Effect::TransferDue);
    }

    fn raise_floors(&mut self, marks: &[(u32, u64)], fx: &mut Vec<Effect>) {
        for &(spi, high) in marks {
            let mut grants: Vec<Grant> = Vec::new();
            self.leases.raise_floor(spi, high, &mut grants);
            fx.extend(grants.into_iter().map(Effect::Granted));
            self.check_exhausted(spi, fx);
        }
    }

    /// The lease high-water mark of every outbound SA (for `Yield`).
    pub(crate) fn high_water(&self) -> Vec<(u32, u64)> {
        self.leases
            .sas()
            .iter()
            .map(|(&spi, leases)| (spi, leases.max_end()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(ids: &[u32]) -> Vec<NodeId> {
        ids.iter().copied().map(NodeId).collect()
    }

    #[test]
    fn policy_names_round_trip() {
        for policy in [QuorumPolicy::Majority, QuorumPolicy::Off] {
            assert_eq!(QuorumPolicy::from_name(policy.name()), Some(policy));
        }
        assert_eq!(QuorumPolicy::from_name("Majority"), None);
        assert_eq!(QuorumPolicy::from_name(""), None);
    }

    #[test]
    fn majority_and_tie_break() {
        let base = n(&[1, 2, 3]);
        assert!(is_quorate(&n(&[1, 2]), &base));
        assert!(is_quorate(&n(&[2, 3]), &base));
        assert!(!is_quorate(&n(&[3]), &base));
        assert!(!is_quorate(&n(&[1]), &base));
        let two = n(&[1, 2]);
        assert!(is_quorate(&n(&[1]), &two), "half with the lowest");
        assert!(!is_quorate(&n(&[2]), &two), "half without the lowest");
        let four = n(&[1, 2, 3, 4]);
        assert!(is_quorate(&n(&[1, 4]), &four));
        assert!(!is_quorate(&n(&[2, 3]), &four));
        // Votes outside the base do not count.
        assert!(!is_quorate(&n(&[3, 4, 5]), &base));
        assert!(is_quorate(&n(&[]), &[]));
    }

    #[test]
    fn histories_differ_per_side() {
        let h0 = chain(0, &n(&[1, 2, 3]));
        let a = chain(chain(h0, &n(&[1, 2])), &n(&[1, 2, 3]));
        let b = chain(chain(h0, &n(&[3])), &n(&[1, 2, 3]));
        assert_ne!(a, b);
        assert_eq!(a, chain(chain(h0, &n(&[1, 2])), &n(&[1, 2, 3])));
    }
}
