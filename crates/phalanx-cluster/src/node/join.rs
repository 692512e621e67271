//! Joining: buffering the log while fresh, installing a state transfer
//! (or founding a cluster), catching up the replay checkpoints, `Ready`.

use std::collections::BTreeSet;
use std::time::Instant;

use super::log::Replicated;
use super::{ClusterEvent, ClusterNode};
use crate::codec::{decode, Message, StateSnapshot, StateTransfer};
use crate::dispatch::Direction;
use crate::limits::{
    CHECKPOINT_INTERVAL, FOUND_AFTER_SUSPECT_PERIODS, JOIN_BUFFER_EVENTS, JOIN_SYNC_TIMEOUT,
};
use crate::view::NodeId;

/// One event of the agreed log.
#[derive(Clone, Debug)]
pub(super) enum LogEvent {
    /// A membership change.
    Membership(Vec<NodeId>),
    /// A delivered message, still encoded.
    Delivery(NodeId, Vec<u8>),
}

/// A synced node waiting for the replay checkpoints before `Ready`.
#[derive(Clone, Debug)]
struct CatchUp {
    installed: Instant,
    pending: BTreeSet<u32>,
    /// The last state version published before the install: `Ready`
    /// waits until the data path adopted a later one.
    published: u64,
}

/// Where a node stands in joining. See the `node` module docs.
#[derive(Clone, Debug, Default)]
pub(super) struct JoinState {
    /// Fresh: a membership change made this node a member.
    in_group: bool,
    /// Fresh: every log event from that change on.
    buffer: Vec<LogEvent>,
    /// Fresh: the buffer overflowed; this membership cannot be joined.
    overflowed: bool,
    founding_sent: Option<Instant>,
    /// A peer's heartbeat said it held a state: a cluster exists (or
    /// existed), so this node must never found a new one (that would
    /// start every SA's sequence space over).
    pub(super) seen_state: bool,
    catch_up: Option<CatchUp>,
    /// Yielded after a lost partition merge: the winners count this
    /// node's join from its own `Yield` on, so the buffer starts there.
    awaiting_yield: bool,
    /// The agreed membership when the buffer started at this node's own
    /// `Yield` (the membership in force for its first events).
    yield_members: Option<Vec<NodeId>>,
}

impl JoinState {
    /// Join again from this node's own `Yield`: every event before it is
    /// dropped (see [`ClusterNode::defeated`]).
    pub(super) fn await_yield(&mut self) {
        self.in_group = true;
        self.awaiting_yield = true;
        self.buffer = Vec::new();
    }
}

impl ClusterNode {
    /// A membership change: applied when synced, buffered when fresh.
    pub(super) fn on_membership(&mut self, now: Instant, members: Vec<NodeId>, was_member: bool) {
        let local = self.config.local;
        if let Some(log) = &self.log {
            let returning = !log.agreed.contains(&local) && members.contains(&local);
            if !returning {
                self.apply_event(now, LogEvent::Membership(members));
                return;
            }
            // Back after leaving the group: the others treat it as a new
            // member, so it becomes one (its state may have diverged).
            self.become_fresh();
        }
        let seen_state = self.join.seen_state;
        if !members.contains(&local) {
            self.join = JoinState {
                seen_state,
                ..JoinState::default()
            };
            return;
        }
        if !self.join.in_group || (self.join.awaiting_yield && !was_member) {
            self.join = JoinState {
                in_group: true,
                seen_state,
                ..JoinState::default()
            };
        }
        if self.join.awaiting_yield {
            // Still a member: the winners count from this node's Yield.
            return;
        }
        self.buffer(LogEvent::Membership(members));
    }

    /// A delivered message: applied when synced, buffered when fresh (and
    /// a state transfer for this node installed).
    pub(super) fn on_delivery(&mut self, now: Instant, from: NodeId, bytes: Vec<u8>) {
        if self.log.is_some() {
            self.apply_event(now, LogEvent::Delivery(from, bytes));
            return;
        }
        if !self.join.in_group {
            return;
        }
        let message = decode(&bytes);
        // Only a node holding the state sends these: a cluster exists.
        self.join.seen_state |= from != self.config.local
            && match &message {
                Ok(Message::StateTransfer(st)) => !st.founding,
                Ok(m) => !matches!(m, Message::Hello(_) | Message::Heartbeat(_)),
                Err(_) => false,
            };
        if self.join.awaiting_yield {
            let own = from == self.config.local
                && matches!(&message, Ok(Message::Yield { node, .. }) if *node == from);
            if !own {
                return;
            }
            self.join.awaiting_yield = false;
            self.join.yield_members = Some(self.members.clone());
        }
        let transfer = match message {
            Ok(Message::StateTransfer(transfer)) => Some(transfer),
            _ => None,
        };
        self.buffer(LogEvent::Delivery(from, bytes));
        if let Some(transfer) = transfer {
            self.install(now, &transfer);
        }
    }

    fn buffer(&mut self, event: LogEvent) {
        if self.join.overflowed {
            return;
        }
        if self.join.buffer.len() >= JOIN_BUFFER_EVENTS {
            self.join.buffer = Vec::new();
            self.join.overflowed = true;
            self.counters.join_buffer_overflows += 1;
            return;
        }
        self.join.buffer.push(event);
    }

    /// Drop the state: this node joins again like a new one.
    pub(super) fn become_fresh(&mut self) {
        self.log = None;
        self.local_suspects.clear();
        self.rejoin_sent.clear();
        self.join = JoinState {
            seen_state: true,
            ..JoinState::default()
        };
        self.publisher.unsync();
    }

    /// Install a state transfer for this node, or found with a founding
    /// one. The transfer is the last buffered event.
    fn install(&mut self, now: Instant, transfer: &StateTransfer) {
        if transfer.founding {
            self.found(now, transfer.state.lease_len);
            return;
        }
        let local = self.config.local;
        let Some(target) = transfer.targets.iter().find(|t| t.node == local) else {
            return;
        };
        let last = self.join.buffer.len().saturating_sub(1);
        let position = usize::try_from(target.position).unwrap_or(usize::MAX);
        let state = Replicated::restore(&transfer.state, self.policy)
            .filter(|s| s.agreed.contains(&local) && !s.synced.contains(&local))
            .filter(|s| position < last && self.membership_at(position) == Some(&s.agreed));
        let Some(state) = state else {
            self.counters.transfers_refused += 1;
            return;
        };
        let rest: Vec<LogEvent> = self.join.buffer.drain(position + 1..).collect();
        self.join.buffer = Vec::new();
        self.log = Some(state);
        self.publisher.sync_from(self.log.as_ref());
        self.event(ClusterEvent::StateReceived);
        for event in rest {
            self.apply_event(now, event);
        }
        self.after_sync(now, false);
    }

    /// The membership in force at buffered event `position`: a transfer
    /// taken there must name the same (a transfer counted from another
    /// event, such as another side's in a partition merge, mostly does
    /// not).
    fn membership_at(&self, position: usize) -> Option<&Vec<NodeId>> {
        self.join
            .buffer
            .get(..=position)?
            .iter()
            .rev()
            .find_map(|event| match event {
                LogEvent::Membership(members) => Some(members),
                LogEvent::Delivery(..) => None,
            })
            .or(self.join.yield_members.as_ref())
    }

    /// Every member without a state adopts an empty one: all own traffic.
    fn found(&mut self, now: Instant, lease_len: u64) {
        let mut fx = Vec::new();
        let members = self.members.clone();
        self.log = Some(Replicated::founded(
            &members,
            lease_len,
            self.policy,
            &mut fx,
        ));
        self.join.buffer = Vec::new();
        self.publisher.sync_from(self.log.as_ref());
        self.event(ClusterEvent::Founded { members });
        self.apply_effects(now, fx);
        self.after_sync(now, true);
    }

    /// Share the SAs registered here that the log does not know, and start
    /// catching up (a founder owns traffic already).
    fn after_sync(&mut self, now: Instant, founding: bool) {
        let Some(log) = &self.log else { return };
        let missing: Vec<_> = self
            .registrations
            .values()
            .filter(|sa| !log.sas.contains_key(&(sa.direction, sa.spi)))
            .copied()
            .collect();
        let pending: BTreeSet<u32> = log
            .sas
            .keys()
            .filter(|(d, _)| *d == Direction::Inbound)
            .map(|&(_, spi)| spi)
            .collect();
        for sa in missing {
            self.multicast(&Message::SaAdd(sa));
        }
        if !founding {
            self.join.catch_up = Some(CatchUp {
                installed: now,
                pending,
                published: self.publisher.current().version,
            });
            self.finish_catch_up(now);
        }
    }

    /// A replay checkpoint of `spi` arrived: it counts for the catch-up
    /// once it was taken after this node started observing (one tick after
    /// the install).
    pub(super) fn caught_up(&mut self, now: Instant, spi: u32) {
        if let Some(catch_up) = &mut self.join.catch_up {
            if now >= catch_up.installed + CHECKPOINT_INTERVAL {
                catch_up.pending.remove(&spi);
            }
        }
        self.finish_catch_up(now);
    }

    /// `Ready` once every inbound SA caught up (or after the timeout) and
    /// the data path runs with the state installed: a data path that
    /// starts only after `Ready` works off what its ring collected under
    /// the new view, packets the others already processed under the old
    /// one, and its counters enter the new lineage ahead of theirs.
    pub(super) fn finish_catch_up(&mut self, now: Instant) {
        let Some(catch_up) = &self.join.catch_up else {
            return;
        };
        if self.datapath_adopted <= catch_up.published {
            return;
        }
        if catch_up.pending.is_empty() || now >= catch_up.installed + JOIN_SYNC_TIMEOUT {
            self.join.catch_up = None;
            let node = self.config.local;
            self.multicast(&Message::Ready { node });
        }
    }

    /// Founding and catch-up timers.
    pub(super) fn join_timers(&mut self, now: Instant) {
        self.finish_catch_up(now);
        if self.log.is_none() && self.join.in_group && self.may_found(now) {
            self.join.founding_sent = Some(now);
            let state = empty_state(self.config.lease_len);
            let transfer = StateTransfer {
                founding: true,
                targets: Vec::new(),
                state,
            };
            self.multicast(&Message::StateTransfer(Box::new(transfer)));
        }
    }

    /// How long the membership must be stable before founding.
    fn found_after(&self) -> std::time::Duration {
        self.config
            .suspect_after
            .saturating_mul(FOUND_AFTER_SUSPECT_PERIODS)
    }

    /// Found when this is the lowest member, the membership was stable
    /// long enough, every other member's recent heartbeats say it holds
    /// no state either, and no peer ever said it held one. (If every node
    /// holding the state failed, the cluster stays down rather than start
    /// the SAs' sequence spaces over: a restart of every node founds anew,
    /// and static SAs must then be rekeyed.)
    fn may_found(&self, now: Instant) -> bool {
        let wait = self.found_after();
        let local = self.config.local;
        let stable = now >= self.membership_since + wait;
        let not_again = self.join.founding_sent.is_none_or(|t| now >= t + wait);
        let lowest = self.members.first() == Some(&local);
        let all_fresh = self.members.iter().filter(|&&n| n != local).all(|n| {
            self.peers.get(n).is_some_and(|p| {
                !p.synced && now.saturating_duration_since(p.at) <= self.config.suspect_after
            })
        });
        let never_saw_state = !self.join.seen_state;
        stable && not_again && lowest && all_fresh && never_saw_state && !self.join.overflowed
    }

    /// When the join timers want to run.
    pub(super) fn join_deadline(&self) -> Option<Instant> {
        if let Some(catch_up) = &self.join.catch_up {
            return Some(catch_up.installed + JOIN_SYNC_TIMEOUT);
        }
        if self.log.is_none() && self.join.in_group {
            let wait = self.found_after();
            let after = self
                .join
                .founding_sent
                .map_or(self.membership_since, |t| t.max(self.membership_since));
            return Some(after + wait);
        }
        None
    }
}

/// The state a founding transfer carries: nothing but the lease length.
fn empty_state(lease_len: u64) -> StateSnapshot {
    StateSnapshot {
        applied: 0,
        epoch: 0,
        generation: 0,
        transfers: 0,
        lease_len,
        agreed: Vec::new(),
        synced: Vec::new(),
        ready: Vec::new(),
        joined_at: Vec::new(),
        suspects: Vec::new(),
        quorum: crate::codec::QuorumState::default(),
        sas: Vec::new(),
    }
}
