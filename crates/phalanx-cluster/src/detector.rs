//! The fast failure detector: heartbeats on the cluster link, sans-IO.
//!
//! Corosync's own membership takes 0.7 to 3.6 s to notice a dead node; the
//! cluster needs to take over in well under 100 ms. Every node sends a
//! heartbeat every `heartbeat_interval` (default 5 ms) and suspects a peer
//! it has not heard for `suspect_after` (default 30 ms). A suspicion is a
//! local opinion: the node takes over the suspect's share at once (see
//! `sequencer`), and only the agreed log (`Suspect`, `Rejoin`, membership)
//! turns it into a cluster decision. A suspected peer that is heard again
//! counts its heartbeats, so that the node can ask the log to take it back
//! once it is steady.
//!
//! Silence counts only while this node itself runs. The node checks at
//! least once per heartbeat interval; when two checks lie further apart
//! than halfway between the heartbeat interval and `suspect_after`, the
//! node was stalled (its thread or its CPU did not run: a loaded or
//! overcommitted machine stalls every process on it at once, and the
//! first to wake would otherwise suspect every peer before they could
//! send). The check then gives every unsuspected peer a fresh
//! `suspect_after` instead of judging silence it did not watch, and
//! counts the stall. A dead peer is found at most `suspect_after` later,
//! and only right after a stall.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::limits::REJOIN_HEARTBEATS;
use crate::view::NodeId;

/// A peer that has just been suspected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Suspicion {
    /// The peer.
    pub node: NodeId,
    /// When it was last heard (or became a peer, when never heard).
    pub last_heard: Instant,
    /// How long it had been silent when suspected.
    pub silent_for: Duration,
}

/// What the detector knows of one peer.
#[derive(Clone, Copy, Debug)]
struct Peer {
    last_heard: Instant,
    /// Where its silence is counted from: `last_heard`, or later when
    /// this node stalled since (see the module docs).
    silence_from: Instant,
    heard_ever: bool,
    suspected: bool,
    /// Heartbeats received since it was suspected.
    heard_since_suspected: u32,
}

/// A stall of this node, found by [`FailureDetector::check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    /// The time between the two checks.
    pub gap: Duration,
}

/// Heartbeat failure detector over the current peers. See the module docs.
#[derive(Clone, Debug)]
pub struct FailureDetector {
    suspect_after: Duration,
    /// Checks further apart than this mean this node stalled.
    stall_after: Duration,
    last_check: Option<Instant>,
    peers: BTreeMap<NodeId, Peer>,
}

impl FailureDetector {
    /// A detector that suspects a peer after `suspect_after` of silence,
    /// checked at least every `heartbeat_interval` (which must be shorter
    /// than `suspect_after`; the configuration asks for less than half).
    pub fn new(heartbeat_interval: Duration, suspect_after: Duration) -> FailureDetector {
        let slack = suspect_after.saturating_sub(heartbeat_interval);
        FailureDetector {
            suspect_after,
            stall_after: heartbeat_interval + slack / 2,
            last_check: None,
            peers: BTreeMap::new(),
        }
    }

    /// Watch exactly `peers`: new ones start as heard `now` (a grace
    /// period of `suspect_after`), absent ones are forgotten.
    pub fn set_peers(&mut self, now: Instant, peers: &[NodeId]) {
        self.peers.retain(|node, _| peers.contains(node));
        for &node in peers {
            self.peers.entry(node).or_insert(Peer {
                last_heard: now,
                silence_from: now,
                heard_ever: false,
                suspected: false,
                heard_since_suspected: 0,
            });
        }
    }

    /// A heartbeat from `node` arrived. Returns how many heartbeats it has
    /// sent since it was suspected (0 when it is not suspected, or not a
    /// peer).
    pub fn heard(&mut self, now: Instant, node: NodeId) -> u32 {
        let Some(peer) = self.peers.get_mut(&node) else {
            return 0;
        };
        peer.last_heard = peer.last_heard.max(now);
        peer.silence_from = peer.silence_from.max(now);
        peer.heard_ever = true;
        if peer.suspected {
            peer.heard_since_suspected += 1;
            return peer.heard_since_suspected;
        }
        0
    }

    /// Suspect every peer silent for longer than `suspect_after`; appends
    /// the new suspicions to `out`. Returns the stall when this check
    /// came so late after the previous one that this node was not running
    /// (see the module docs): it then suspects nobody new.
    pub fn check(&mut self, now: Instant, out: &mut Vec<Suspicion>) -> Option<Stall> {
        let stall = self
            .last_check
            .map(|prev| now.saturating_duration_since(prev))
            .filter(|&gap| gap > self.stall_after)
            .map(|gap| Stall { gap });
        self.last_check = Some(self.last_check.map_or(now, |prev| prev.max(now)));
        for (&node, peer) in &mut self.peers {
            if stall.is_some() && !peer.suspected {
                peer.silence_from = peer.silence_from.max(now);
                continue;
            }
            let silent_for = now.saturating_duration_since(peer.last_heard);
            if peer.suspected {
                if silent_for > self.suspect_after {
                    // Silent again: its recovery starts over.
                    peer.heard_since_suspected = 0;
                }
                continue;
            }
            if now.saturating_duration_since(peer.silence_from) > self.suspect_after {
                peer.suspected = true;
                peer.heard_since_suspected = 0;
                out.push(Suspicion {
                    node,
                    last_heard: peer.last_heard,
                    silent_for,
                });
            }
        }
        stall
    }

    /// Trust `node` again (the log took it back): a fresh grace period.
    pub fn clear(&mut self, now: Instant, node: NodeId) {
        if let Some(peer) = self.peers.get_mut(&node) {
            peer.suspected = false;
            peer.heard_since_suspected = 0;
            peer.last_heard = peer.last_heard.max(now);
            peer.silence_from = peer.silence_from.max(now);
        }
    }

    /// Whether `node` is suspected and has not been heard steadily since
    /// (fewer than `REJOIN_HEARTBEATS` heartbeats since it was suspected,
    /// or silent again): it counts for nothing in this node's quorum.
    pub fn is_silent(&self, node: NodeId) -> bool {
        self.peers
            .get(&node)
            .is_some_and(|p| p.suspected && p.heard_since_suspected < REJOIN_HEARTBEATS)
    }

    /// Whether the detector suspects `node`.
    pub fn is_suspected(&self, node: NodeId) -> bool {
        self.peers.get(&node).is_some_and(|p| p.suspected)
    }

    /// Whether this node's silence clock for `node` restarted after a
    /// stall of its own and `node` was not heard since: how long ago it
    /// was last heard then says nothing about when it may be suspected.
    pub fn in_stall_grace(&self, node: NodeId) -> bool {
        self.peers
            .get(&node)
            .is_some_and(|p| !p.suspected && p.silence_from > p.last_heard)
    }

    /// When `node` was last heard (`None`: never, or not a peer).
    pub fn last_heard(&self, node: NodeId) -> Option<Instant> {
        self.peers
            .get(&node)
            .filter(|p| p.heard_ever)
            .map(|p| p.last_heard)
    }

    /// Since when `node` counts as silent: its last heartbeat, or when it
    /// became a peer if it was never heard.
    pub fn silent_since(&self, node: NodeId) -> Option<Instant> {
        self.peers.get(&node).map(|p| p.last_heard)
    }

    /// Whether `node` was heard within `within` of `now`.
    pub fn heard_within(&self, now: Instant, node: NodeId, within: Duration) -> bool {
        self.last_heard(node)
            .is_some_and(|t| now.saturating_duration_since(t) <= within)
    }

    /// When the next unsuspected peer becomes suspect if it stays silent.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.peers
            .values()
            .filter(|p| !p.suspected)
            .filter_map(|p| {
                p.silence_from
                    .checked_add(self.suspect_after.saturating_add(Duration::from_nanos(1)))
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Heartbeat interval 5 ms, suspect_after 30 ms; peers n2 and n3
    /// heard every 5 ms from 0 to 20 ms, no check yet.
    fn two_peers_heard_until_20ms() -> (Instant, FailureDetector) {
        let t0 = Instant::now();
        let mut d = FailureDetector::new(5 * MS, 30 * MS);
        d.set_peers(t0, &[NodeId(2), NodeId(3)]);
        for ms in (0..=20).step_by(5) {
            d.heard(t0 + ms * MS, NodeId(2));
            d.heard(t0 + ms * MS, NodeId(3));
        }
        (t0, d)
    }

    /// Numbered table on a virtual clock: heartbeats from n2 every 5 ms
    /// until 20 ms; suspect_after 30 ms; n2 is suspected just after 50 ms.
    #[test]
    fn suspects_after_silence() {
        let (t0, mut d) = two_peers_heard_until_20ms();
        let mut out = Vec::new();
        for ms in (25..=60).step_by(5) {
            d.heard(t0 + ms * MS, NodeId(3));
        }
        d.check(t0 + 50 * MS, &mut out);
        assert!(out.is_empty());
        assert_eq!(
            d.poll_timeout(),
            Some(t0 + 50 * MS + Duration::from_nanos(1))
        );
        d.check(t0 + 51 * MS, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].node, NodeId(2));
        assert_eq!(out[0].last_heard, t0 + 20 * MS);
        assert!(d.is_suspected(NodeId(2)));
        d.check(t0 + 52 * MS, &mut out);
        assert_eq!(out.len(), 1, "suspected once");
    }

    #[test]
    fn recovery_counts_heartbeats() {
        let t0 = Instant::now();
        let mut d = FailureDetector::new(5 * MS, 30 * MS);
        d.set_peers(t0, &[NodeId(2)]);
        let mut out = Vec::new();
        d.check(t0 + 31 * MS, &mut out);
        assert_eq!(out.len(), 1, "never heard: suspected after the grace");
        assert_eq!(d.heard(t0 + 32 * MS, NodeId(2)), 1);
        assert_eq!(d.heard(t0 + 37 * MS, NodeId(2)), 2);
        d.check(t0 + 80 * MS, &mut out);
        assert_eq!(
            d.heard(t0 + 81 * MS, NodeId(2)),
            1,
            "silent again: start over"
        );
        d.clear(t0 + 82 * MS, NodeId(2));
        assert!(!d.is_suspected(NodeId(2)));
        assert_eq!(d.heard(t0 + 83 * MS, NodeId(9)), 0, "not a peer");
        d.set_peers(t0 + 90 * MS, &[]);
        assert_eq!(d.poll_timeout(), None);
    }

    /// The whole machine stops for 45 ms (every node at once): the first
    /// check after it sees both peers silent for longer than
    /// `suspect_after` but was not running either, so it suspects nobody
    /// and gives them a fresh `suspect_after`. A peer that stays silent is
    /// suspected one `suspect_after` later; one heard in time never is.
    #[test]
    fn a_stall_of_this_node_suspects_nobody() {
        let (t0, mut d) = two_peers_heard_until_20ms();
        let mut out = Vec::new();
        assert_eq!(d.check(t0 + 20 * MS, &mut out), None);
        // Stalled from 20 to 65 ms: silent 45 ms, more than suspect_after.
        assert_eq!(
            d.check(t0 + 65 * MS, &mut out),
            Some(Stall { gap: 45 * MS })
        );
        assert!(out.is_empty(), "no suspicion from a stall: {out:?}");
        assert_eq!(
            d.last_heard(NodeId(2)),
            Some(t0 + 20 * MS),
            "last heard stays true"
        );
        assert_eq!(
            d.poll_timeout(),
            Some(t0 + 95 * MS + Duration::from_nanos(1))
        );
        // n3 speaks again, n2 stays silent; checks run every 5 ms again.
        for ms in (70..=95).step_by(5) {
            d.heard(t0 + ms * MS, NodeId(3));
            assert_eq!(d.check(t0 + ms * MS, &mut out), None);
        }
        assert!(
            out.is_empty(),
            "not yet: 30 ms of watched silence end after 95 ms"
        );
        d.check(t0 + 96 * MS, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].node, NodeId(2));
        assert_eq!(out[0].silent_for, 76 * MS, "the true silence is reported");
        assert!(!d.is_suspected(NodeId(3)));
    }

    /// Checks late by less than halfway between heartbeat interval and
    /// `suspect_after` are jitter, not a stall: a silent peer is still
    /// suspected on time.
    #[test]
    fn late_checks_short_of_a_stall_still_suspect() {
        let t0 = Instant::now();
        let mut d = FailureDetector::new(5 * MS, 30 * MS);
        d.set_peers(t0, &[NodeId(2)]);
        let mut out = Vec::new();
        d.heard(t0, NodeId(2));
        for ms in [0, 17, 34] {
            assert_eq!(
                d.check(t0 + ms * MS, &mut out),
                None,
                "17 ms is not more than 17.5 ms"
            );
        }
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].silent_for, 34 * MS);
        assert_eq!(
            d.check(t0 + 52 * MS, &mut out),
            Some(Stall { gap: 18 * MS })
        );
    }
}
