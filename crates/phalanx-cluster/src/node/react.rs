//! Applying log events, and this node's reactions: state transfers,
//! suspicions and their records, `Rejoin`, the shared state.

use std::time::Instant;

use super::join::LogEvent;
use super::log::Effect;
use super::status::{FailoverOutcome, FailoverRecord};
use super::{AppMessage, ClusterEvent, ClusterNode};
use crate::codec::{decode, DecodeError, Message, StateTransfer};
use crate::limits::{FAILOVER_HISTORY, REJOIN_HEARTBEATS};
use crate::view::NodeId;

impl ClusterNode {
    /// Apply one log event to the replicated state and react.
    pub(super) fn apply_event(&mut self, now: Instant, event: LogEvent) {
        let Some(log) = self.log.as_mut() else {
            return;
        };
        let mut fx = Vec::new();
        match event {
            LogEvent::Membership(members) => log.apply_membership(&members, &mut fx),
            LogEvent::Delivery(from, bytes) => match decode(&bytes) {
                Ok(message) => log.apply_message(from, &message, &mut fx),
                Err(DecodeError::UnknownType(_)) => {
                    log.skip();
                    self.counters.unknown_messages += 1;
                }
                Err(_) => {
                    log.skip();
                    self.counters.decode_errors += 1;
                }
            },
        }
        self.apply_effects(now, fx);
    }

    /// This node's reactions to what the log did.
    pub(super) fn apply_effects(&mut self, now: Instant, fx: Vec<Effect>) {
        for effect in fx {
            match effect {
                Effect::BaseChanged => {
                    let view = self.dispatch_view();
                    self.event(ClusterEvent::ViewChanged { view });
                }
                Effect::Granted(grant) => {
                    self.counters.lease_grants += 1;
                    self.publisher.refresh_leases(self.log.as_ref(), grant.spi);
                    self.event(ClusterEvent::LeaseGranted(grant));
                }
                Effect::Exhausted(spi) => self.event(ClusterEvent::LeaseExhausted { spi }),
                Effect::SaAdded(sa) => {
                    self.publisher.add_sa(self.log.as_ref(), sa);
                    self.event(ClusterEvent::SaAdded(sa));
                }
                Effect::SaRemoved(direction, spi) => {
                    self.publisher.remove_sa(direction, spi);
                    self.event(ClusterEvent::SaRemoved { direction, spi });
                }
                Effect::Suspected { node, by } => {
                    self.event(ClusterEvent::SuspectedInLog { node, by });
                }
                Effect::Rejoined { node, .. } => self.rejoined(now, node),
                Effect::Left(nodes) => self.left(&nodes),
                Effect::Joined(_) => {}
                Effect::TransferDue => self.send_transfer(),
                Effect::Transferred(_) => {}
                Effect::Ready(node) => self.event(ClusterEvent::Ready { node }),
                Effect::Checkpoint { from, checkpoint } => {
                    if from != self.config.local {
                        self.publisher.note(&checkpoint);
                    }
                }
                Effect::Replay { from, replay } => {
                    if from != self.config.local {
                        self.publisher.replay(&replay);
                    }
                    self.caught_up(now, replay.spi);
                }
                Effect::App {
                    from,
                    channel,
                    payload,
                } => {
                    self.counters.app_delivered += 1;
                    self.apps.push_back(AppMessage {
                        from,
                        channel,
                        payload,
                    });
                }
                Effect::Defeated { by } => self.defeated(now, by),
                Effect::Outranked { rival } => {
                    self.counters.merges_won += 1;
                    self.event(ClusterEvent::MergeWon { rival });
                }
            }
        }
    }

    /// The lowest member holding the state sends it to those without.
    fn send_transfer(&mut self) {
        let Some(log) = &self.log else { return };
        if log.lowest_synced() != Some(self.config.local) {
            return;
        }
        let targets = log.transfer_targets();
        if targets.is_empty() {
            return;
        }
        let nodes = targets.iter().map(|t| t.node).collect();
        let transfer = StateTransfer {
            founding: false,
            targets,
            state: log.snapshot(),
        };
        self.multicast(&Message::StateTransfer(Box::new(transfer)));
        self.counters.transfers_sent += 1;
        self.event(ClusterEvent::StateTransferSent { targets: nodes });
    }

    /// `Rejoin { node }` was applied: trust it again, everywhere.
    fn rejoined(&mut self, now: Instant, node: NodeId) {
        let had = self.local_suspects.remove(&node);
        self.rejoin_sent.remove(&node);
        self.detector.clear(now, node);
        if had && self.resolve(node, FailoverOutcome::Corrected) {
            self.event(ClusterEvent::Corrected { node });
        }
        if had {
            let view = self.dispatch_view();
            self.event(ClusterEvent::ViewChanged { view });
        }
    }

    /// Members left: the suspicions about them are confirmed.
    fn left(&mut self, nodes: &[NodeId]) {
        for &node in nodes {
            self.local_suspects.remove(&node);
            self.rejoin_sent.remove(&node);
            if self.resolve(node, FailoverOutcome::Confirmed) {
                self.counters.confirmed += 1;
                self.event(ClusterEvent::Confirmed { node });
            }
        }
    }

    /// Close the pending failover records of `node`; true if there was one.
    fn resolve(&mut self, node: NodeId, outcome: FailoverOutcome) -> bool {
        let mut any = false;
        for record in self.failovers.iter_mut() {
            if record.suspect == node && record.outcome == FailoverOutcome::Pending {
                record.outcome = outcome;
                any = true;
            }
        }
        if any && outcome == FailoverOutcome::Corrected {
            self.counters.corrected += 1;
        }
        any
    }

    /// Act on the detector: take over every silent member of the base view
    /// (this node must own traffic itself).
    pub(super) fn check_suspicions(&mut self, now: Instant) {
        let mut fresh = Vec::new();
        if let Some(stall) = self.detector.check(now, &mut fresh) {
            self.counters.stalls += 1;
            self.event(ClusterEvent::Stalled { gap: stall.gap });
        }
        let Some(log) = &self.log else { return };
        let local = self.config.local;
        let base = log.base_members();
        if !base.contains(&local) {
            return;
        }
        let silent: Vec<NodeId> = base
            .into_iter()
            .filter(|&n| n != local && self.detector.is_suspected(n))
            .filter(|n| !self.local_suspects.contains(n))
            .collect();
        for node in silent {
            self.suspect(now, node);
        }
    }

    /// Take over `node`'s share at once; ask the log to agree.
    fn suspect(&mut self, now: Instant, node: NodeId) {
        let last_heard = self.detector.silent_since(node).unwrap_or(now);
        self.local_suspects.insert(node);
        self.multicast(&Message::Suspect { node });
        self.counters.suspicions += 1;
        if self.failovers.len() >= FAILOVER_HISTORY {
            self.failovers.pop_front();
        }
        let detected_after = now.saturating_duration_since(last_heard);
        self.failovers.push_back(FailoverRecord {
            suspect: node,
            last_heartbeat: last_heard,
            detected_at: now,
            detected_after,
            handover: None,
            outcome: FailoverOutcome::Pending,
        });
        self.event(ClusterEvent::Suspected {
            node,
            silent_for: detected_after,
        });
        let view = self.dispatch_view();
        self.event(ClusterEvent::ViewChanged { view });
    }

    /// A suspected peer is heard again: once steady, ask the log to take
    /// it back (only a node that suspected it can tell it is back).
    pub(super) fn on_recovery(&mut self, now: Instant, node: NodeId, heartbeats: u32) {
        if heartbeats < REJOIN_HEARTBEATS {
            return;
        }
        if !self.local_suspects.contains(&node) {
            // Suspected by the detector but never acted on.
            self.detector.clear(now, node);
            return;
        }
        if self.log.is_some() && self.rejoin_sent.insert(node) {
            self.counters.rejoins_sent += 1;
            self.multicast(&Message::Rejoin { node });
        }
    }

    /// The data path switched after suspecting `suspect`: the handover.
    pub(super) fn takeover_applied(&mut self, now: Instant, suspect: NodeId) {
        let record = self
            .failovers
            .iter_mut()
            .rev()
            .find(|r| r.suspect == suspect && r.handover.is_none());
        if let Some(record) = record {
            let handover = now.saturating_duration_since(record.last_heartbeat);
            record.handover = Some(handover);
            self.counters.takeovers += 1;
            self.event(ClusterEvent::TakeoverApplied { suspect, handover });
        }
    }
}
