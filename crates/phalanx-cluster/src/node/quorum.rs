//! This node's side of quorum and partition merges (the rule itself is in
//! `log::quorum`): standing down while its view is not quorate, and
//! yielding when its side lost a merge.

use std::time::Instant;

use super::log::quorum::QuorumPolicy;
use super::{ClusterEvent, ClusterNode};
use crate::codec::Message;
use crate::view::{NodeId, View};

/// Where this node stands on quorum, for `phalanxctl cluster`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumStatus {
    /// The policy.
    pub policy: QuorumPolicy,
    /// This node holds the state and its view is quorate: it may own
    /// traffic. False while it stands down (or holds no state).
    pub quorate: bool,
    /// The last agreed membership in which the state was quorate (empty
    /// without state).
    pub base: Vec<NodeId>,
}

impl ClusterNode {
    /// Set the quorum policy (every node of a cluster must use the same;
    /// the default is [`QuorumPolicy::Majority`]).
    pub fn set_quorum_policy(&mut self, policy: QuorumPolicy) {
        self.policy = policy;
        if let Some(log) = &mut self.log {
            log.policy = policy;
        }
        self.refresh();
    }

    /// Where this node stands on quorum.
    pub fn quorum(&self) -> QuorumStatus {
        QuorumStatus {
            policy: self.policy,
            quorate: self.log.is_some() && !self.stood_down,
            base: self
                .log
                .as_ref()
                .map_or_else(Vec::new, |log| log.quorum.base.clone()),
        }
    }

    /// `view` (the base view without this node's suspects), emptied
    /// while this node's votes are not quorate: it then owns nothing, and
    /// answers no ARP.
    pub(super) fn quorate_view(&self, view: View) -> View {
        if self.log.is_some() && !self.has_quorum() {
            return View::new(view.epoch(), []);
        }
        view
    }

    /// Whether the members this node hears make its state quorate: the
    /// base view without the suspects that are still silent. A suspect
    /// heard steadily again counts at once, before the log takes it back
    /// (which may wait for Corosync to reform its ring after a real
    /// failure), so a false suspicion costs no more than its silence.
    fn has_quorum(&self) -> bool {
        let Some(log) = &self.log else { return false };
        let votes = log.base_view().without(&self.silent_suspects());
        log.quorate_with(votes.members())
    }

    /// Count and report the moments this node stands down or comes back.
    pub(super) fn track_quorum(&mut self) {
        if self.log.is_none() {
            // Without a state there is nothing to stand down from.
            self.stood_down = false;
            self.counters.no_quorum = 0;
            return;
        }
        let down = !self.has_quorum();
        if down == self.stood_down {
            return;
        }
        self.stood_down = down;
        self.counters.no_quorum = u64::from(down);
        if down {
            self.counters.quorum_losses += 1;
            self.event(ClusterEvent::QuorumLost);
        } else {
            self.event(ClusterEvent::QuorumRegained);
        }
    }

    /// This node's side lost a partition merge to `winner`'s: tell the
    /// winners how far this side's leases went, drop the state and join
    /// again from this `Yield` on (the winners' log answers it with a
    /// state transfer, as for any joiner).
    pub(super) fn defeated(&mut self, _now: Instant, winner: NodeId) {
        let Some(log) = &self.log else { return };
        let marks = log.high_water();
        let node = self.config.local;
        self.multicast(&Message::Yield { node, marks });
        self.counters.merges_lost += 1;
        self.event(ClusterEvent::MergeLost { winner });
        self.become_fresh();
        self.join.await_yield();
        // The SAs start over (new sequencers and observers), as in a
        // restarted node: the winners' leases are another lineage.
        self.publisher.restart();
    }
}
