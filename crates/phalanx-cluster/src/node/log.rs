//! The replicated state: a deterministic state machine over the agreed
//! log. Every synced member applies the same events in the same order and
//! holds the same state; a joining node receives it in a state transfer.
//!
//! It holds the agreed membership, which members hold the state (synced)
//! and own traffic (ready), the suspicions raised through the log, the SA
//! registry with the last replay checkpoint of each inbound SA, and the
//! lease table. The *base view* is the ready members that nobody suspects;
//! every change of it starts a new lease generation. Quorum and partition
//! merges: see `quorum`.

use std::collections::{BTreeMap, BTreeSet};

pub(crate) mod quorum;

use crate::codec::{
    Checkpoint, Message, QuorumState, ReplayCheckpoint, SaRecord, StateSnapshot, TransferTarget,
};
use crate::dispatch::Direction;
use crate::lease::{Grant, LeaseTable};
use crate::node::SaDescriptor;
use crate::view::{NodeId, View};
use quorum::QuorumPolicy;

/// What applying one event did, for the node to react to locally.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Effect {
    /// The base view changed (a new lease generation).
    BaseChanged,
    /// A lease block was granted.
    Granted(Grant),
    /// An SA was registered.
    SaAdded(SaDescriptor),
    /// An SA was deleted.
    SaRemoved(Direction, u32),
    /// The log took a suspicion: `node` is out of the base view.
    Suspected { node: NodeId, by: NodeId },
    /// A `Rejoin` for `node` was applied (`was_suspected`: it was out).
    Rejoined { node: NodeId, was_suspected: bool },
    /// An SA's sequence space is used up.
    Exhausted(u32),
    /// Members left the agreed membership.
    Left(Vec<NodeId>),
    /// Members joined the agreed membership.
    Joined(Vec<NodeId>),
    /// Members without the state remain: the lowest synced member sends
    /// a state transfer.
    TransferDue,
    /// A state transfer was applied; its targets now hold the state.
    Transferred(Vec<NodeId>),
    /// A member declared itself ready.
    Ready(NodeId),
    /// An outbound counter checkpoint.
    Checkpoint {
        from: NodeId,
        checkpoint: Checkpoint,
    },
    /// An inbound replay checkpoint.
    Replay {
        from: NodeId,
        replay: ReplayCheckpoint,
    },
    /// Another component's payload, for the application.
    App {
        from: NodeId,
        channel: u8,
        payload: Vec<u8>,
    },
    /// A partition merge: this side lost to `by`'s; every local node of
    /// the state must yield.
    Defeated { by: NodeId },
    /// A partition merge: this side outranks `rival`'s, which yields.
    Outranked { rival: NodeId },
}

/// One registered SA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SaEntry {
    pub(crate) descriptor: SaDescriptor,
    /// Inbound: the most advanced replay checkpoint in the log.
    pub(crate) replay: Option<ReplayCheckpoint>,
}

/// The replicated state. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Replicated {
    pub(crate) applied: u64,
    pub(crate) epoch: u64,
    pub(crate) generation: u64,
    pub(crate) transfers: u64,
    pub(crate) agreed: Vec<NodeId>,
    pub(crate) synced: BTreeSet<NodeId>,
    pub(crate) ready: BTreeSet<NodeId>,
    pub(crate) joined_at: BTreeMap<NodeId, u64>,
    /// Suspect -> the members that suspect it.
    pub(crate) suspects: BTreeMap<NodeId, BTreeSet<NodeId>>,
    pub(crate) leases: LeaseTable,
    pub(crate) sas: BTreeMap<(Direction, u32), SaEntry>,
    /// Local configuration (the same on every node), not replicated.
    pub(crate) policy: QuorumPolicy,
    pub(crate) quorum: QuorumState,
}

impl Replicated {
    /// The state of a new cluster whose founders are `members`: all hold
    /// the (empty) state and all are ready.
    pub(crate) fn founded(
        members: &[NodeId],
        lease_len: u64,
        policy: QuorumPolicy,
        fx: &mut Vec<Effect>,
    ) -> Self {
        let agreed: BTreeSet<NodeId> = members.iter().copied().collect();
        let mut state = Replicated {
            applied: 0,
            epoch: 0,
            generation: 0,
            transfers: 0,
            agreed: agreed.iter().copied().collect(),
            synced: agreed.clone(),
            ready: agreed,
            joined_at: BTreeMap::new(),
            suspects: BTreeMap::new(),
            leases: LeaseTable::new(lease_len),
            sas: BTreeMap::new(),
            policy,
            quorum: Self::founding_quorum(members),
        };
        state.recompute_base(fx);
        state
    }

    /// The members that own traffic: ready, agreed and unsuspected.
    pub(crate) fn base_members(&self) -> Vec<NodeId> {
        self.agreed
            .iter()
            .copied()
            .filter(|n| self.ready.contains(n) && !self.suspects.contains_key(n))
            .collect()
    }

    /// The base view, its epoch the generation.
    pub(crate) fn base_view(&self) -> View {
        View::new(self.generation, self.base_members())
    }

    /// Agreed members that do not hold the state yet.
    pub(crate) fn unsynced(&self) -> Vec<NodeId> {
        self.agreed
            .iter()
            .copied()
            .filter(|n| !self.synced.contains(n))
            .collect()
    }

    /// The lowest agreed member holding the state: it sends transfers.
    pub(crate) fn lowest_synced(&self) -> Option<NodeId> {
        self.agreed
            .iter()
            .copied()
            .find(|n| self.synced.contains(n))
    }

    /// Where each member without the state finds this state in its log.
    pub(crate) fn transfer_targets(&self) -> Vec<TransferTarget> {
        self.unsynced()
            .into_iter()
            .filter_map(|node| {
                let at = *self.joined_at.get(&node)?;
                Some(TransferTarget {
                    node,
                    position: self.applied.checked_sub(at)?,
                })
            })
            .collect()
    }

    /// Apply an agreed membership change.
    pub(crate) fn apply_membership(&mut self, members: &[NodeId], fx: &mut Vec<Effect>) {
        self.applied += 1;
        self.epoch += 1;
        self.note_membership(members);
        let new: BTreeSet<NodeId> = members.iter().copied().collect();
        let old: BTreeSet<NodeId> = self.agreed.iter().copied().collect();
        let left: Vec<NodeId> = old.difference(&new).copied().collect();
        let joined: Vec<NodeId> = new.difference(&old).copied().collect();
        for &node in &joined {
            self.joined_at.insert(node, self.applied);
            self.synced.remove(&node);
            self.ready.remove(&node);
        }
        for node in &left {
            self.forget_member(*node);
        }
        self.agreed = new.into_iter().collect();
        self.recompute_base(fx);
        self.settle_quorum(fx);
        if !left.is_empty() {
            fx.push(Effect::Left(left));
        }
        if !joined.is_empty() {
            fx.push(Effect::Joined(joined));
        }
        if !self.unsynced().is_empty() {
            fx.push(Effect::TransferDue);
        }
    }

    /// A member left: it holds nothing, suspects nobody, and nobody needs
    /// to suspect it any more.
    fn forget_member(&mut self, node: NodeId) {
        self.quorum.refused.retain(|&n| n != node);
        self.synced.remove(&node);
        self.ready.remove(&node);
        self.joined_at.remove(&node);
        self.suspects.remove(&node);
        for accusers in self.suspects.values_mut() {
            accusers.remove(&node);
        }
        self.suspects.retain(|_, accusers| !accusers.is_empty());
    }

    /// Count a delivered message that could not be decoded: it is still
    /// an event of the log (positions count it).
    pub(crate) fn skip(&mut self) {
        self.applied += 1;
    }

    /// Apply a delivered message from `from`.
    pub(crate) fn apply_message(&mut self, from: NodeId, message: &Message, fx: &mut Vec<Effect>) {
        self.applied += 1;
        match message {
            Message::LeaseRequest { spi, after_end } => {
                let mut grants = Vec::new();
                self.leases.request(*spi, *after_end, &mut grants);
                fx.extend(grants.into_iter().map(Effect::Granted));
                self.check_exhausted(*spi, fx);
            }
            Message::Checkpoint(checkpoint) => fx.push(Effect::Checkpoint {
                from,
                checkpoint: *checkpoint,
            }),
            Message::ReplayCheckpoint(replay) => self.apply_replay(from, replay, fx),
            Message::Suspect { node } => self.apply_suspect(from, *node, fx),
            Message::Rejoin { node } => self.apply_rejoin(*node, fx),
            Message::StateTransfer(transfer) if !transfer.founding => {
                if !self.own_lineage(&transfer.state.quorum) {
                    self.apply_rival(from, &transfer.state, fx);
                    return;
                }
                let targets: Vec<NodeId> = transfer.targets.iter().map(|t| t.node).collect();
                self.apply_transfer(&targets, fx);
            }
            Message::Yield { node, marks } if *node == from => self.apply_yield(from, marks, fx),
            Message::Ready { node } if *node == from => self.apply_ready(from, fx),
            Message::SaAdd(sa) => self.apply_sa_add(*sa, fx),
            Message::SaDelete { direction, spi } => self.apply_sa_delete(*direction, *spi, fx),
            Message::App { channel, payload } => fx.push(Effect::App {
                from,
                channel: *channel,
                payload: payload.clone(),
            }),
            // Founding transfers matter only to nodes without state;
            // heartbeats never travel through the log; a Ready for
            // another node is forged.
            _ => {}
        }
    }

    fn apply_replay(&mut self, from: NodeId, replay: &ReplayCheckpoint, fx: &mut Vec<Effect>) {
        let Some(entry) = self.sas.get_mut(&(Direction::Inbound, replay.spi)) else {
            return;
        };
        if entry
            .replay
            .as_ref()
            .is_none_or(|old| replay.top >= old.top)
        {
            entry.replay = Some(replay.clone());
        }
        fx.push(Effect::Replay {
            from,
            replay: replay.clone(),
        });
    }

    /// A suspicion counts when its author owns traffic (a suspected node
    /// cannot push out the others), its target does, and it leaves a
    /// quorate state quorate (the suspect is still in Corosync's
    /// membership: a node that lost contact with the majority cannot take
    /// it down, it stands down itself).
    fn apply_suspect(&mut self, from: NodeId, node: NodeId, fx: &mut Vec<Effect>) {
        let base = self.base_members();
        if node == from || !base.contains(&from) || !base.contains(&node) {
            return;
        }
        let rest: Vec<NodeId> = base.iter().copied().filter(|&n| n != node).collect();
        if self.quorum.quorate && !self.quorate_with(&rest) {
            if let Err(at) = self.quorum.refused.binary_search(&node) {
                self.quorum.refused.insert(at, node);
            }
            return;
        }
        self.suspects.entry(node).or_default().insert(from);
        self.recompute_base(fx);
        fx.push(Effect::Suspected { node, by: from });
    }

    /// `Rejoin` from a node that suspected `node` locally. When the log
    /// had refused that suspicion (it would have cost the quorum), the
    /// suspecter dispatched without `node` all the same: a new generation
    /// restarts everyone's dispatch state together.
    fn apply_rejoin(&mut self, node: NodeId, fx: &mut Vec<Effect>) {
        let was_suspected = self.suspects.remove(&node).is_some();
        let refused = self.quorum.refused.binary_search(&node).ok();
        if let Some(at) = refused {
            self.quorum.refused.remove(at);
        }
        if was_suspected {
            self.recompute_base(fx);
        } else if refused.is_some() && self.base_members().contains(&node) {
            self.start_generation(fx);
        }
        fx.push(Effect::Rejoined {
            node,
            was_suspected,
        });
    }

    fn apply_transfer(&mut self, targets: &[NodeId], fx: &mut Vec<Effect>) {
        let mut done = Vec::new();
        for &node in targets {
            if self.agreed.contains(&node) && self.synced.insert(node) {
                self.joined_at.remove(&node);
                done.push(node);
            }
        }
        self.transfers += 1;
        fx.push(Effect::Transferred(done));
    }

    fn apply_ready(&mut self, node: NodeId, fx: &mut Vec<Effect>) {
        if !self.synced.contains(&node) || !self.agreed.contains(&node) {
            return;
        }
        if self.ready.insert(node) {
            self.recompute_base(fx);
            fx.push(Effect::Ready(node));
        }
    }

    fn apply_sa_add(&mut self, sa: SaDescriptor, fx: &mut Vec<Effect>) {
        let key = (sa.direction, sa.spi);
        if self.sas.contains_key(&key) {
            return;
        }
        self.sas.insert(
            key,
            SaEntry {
                descriptor: sa,
                replay: None,
            },
        );
        fx.push(Effect::SaAdded(sa));
        if sa.direction == Direction::Outbound {
            let mut grants = Vec::new();
            self.leases.add_sa(sa.spi, sa.esn, &mut grants);
            fx.extend(grants.into_iter().map(Effect::Granted));
            self.check_exhausted(sa.spi, fx);
        }
    }

    fn apply_sa_delete(&mut self, direction: Direction, spi: u32, fx: &mut Vec<Effect>) {
        if self.sas.remove(&(direction, spi)).is_none() {
            return;
        }
        if direction == Direction::Outbound {
            self.leases.remove_sa(spi);
        }
        fx.push(Effect::SaRemoved(direction, spi));
    }

    /// A new generation when the members leases are granted for changed:
    /// the base view's while the state is quorate, nobody's otherwise.
    fn recompute_base(&mut self, fx: &mut Vec<Effect>) {
        let base = self.base_members();
        self.quorum.quorate = self.quorate_with(&base);
        let members = self.leases_members();
        if members.as_slice() == self.leases.view().members() && self.generation > 0 {
            return;
        }
        self.start_generation(fx);
    }

    /// A new generation for the lease view (the base view while quorate,
    /// nobody otherwise).
    fn start_generation(&mut self, fx: &mut Vec<Effect>) {
        let members = self.leases_members();
        self.generation += 1;
        let mut grants = Vec::new();
        self.leases
            .set_view(View::new(self.generation, members), &mut grants);
        fx.push(Effect::BaseChanged);
        fx.extend(grants.into_iter().map(Effect::Granted));
        let spis: Vec<u32> = self.leases.sas().keys().copied().collect();
        for spi in spis {
            self.check_exhausted(spi, fx);
        }
    }

    /// The members lease blocks are granted for: the base view's while
    /// the state is quorate, nobody's otherwise.
    fn leases_members(&self) -> Vec<NodeId> {
        if self.quorum.quorate {
            self.base_members()
        } else {
            Vec::new()
        }
    }

    /// Report an SA whose space ran out.
    fn check_exhausted(&self, spi: u32, fx: &mut Vec<Effect>) {
        if self.leases.sa(spi).is_some_and(|sa| sa.is_exhausted()) {
            fx.push(Effect::Exhausted(spi));
        }
    }

    /// The state as a transfer carries it.
    pub(crate) fn snapshot(&self) -> StateSnapshot {
        StateSnapshot {
            applied: self.applied,
            epoch: self.epoch,
            generation: self.generation,
            transfers: self.transfers,
            lease_len: self.leases.lease_len(),
            agreed: self.agreed.clone(),
            synced: self.synced.iter().copied().collect(),
            ready: self.ready.iter().copied().collect(),
            joined_at: self.joined_at.iter().map(|(&n, &a)| (n, a)).collect(),
            suspects: self
                .suspects
                .iter()
                .map(|(&n, by)| (n, by.iter().copied().collect()))
                .collect(),
            quorum: self.quorum.clone(),
            sas: self
                .sas
                .values()
                .map(|entry| SaRecord {
                    descriptor: entry.descriptor,
                    leases: self
                        .leases
                        .sa(entry.descriptor.spi)
                        .cloned()
                        .filter(|_| entry.descriptor.direction == Direction::Outbound),
                    replay: entry.replay.clone(),
                })
                .collect(),
        }
    }

    /// The state a transfer carries; `None` when it contradicts itself
    /// (an outbound SA without leases, a ready member that is not synced).
    pub(crate) fn restore(snapshot: &StateSnapshot, policy: QuorumPolicy) -> Option<Replicated> {
        let synced: BTreeSet<NodeId> = snapshot.synced.iter().copied().collect();
        let ready: BTreeSet<NodeId> = snapshot.ready.iter().copied().collect();
        if !ready.is_subset(&synced) {
            return None;
        }
        let mut sas = BTreeMap::new();
        let mut leases = BTreeMap::new();
        for record in &snapshot.sas {
            let d = record.descriptor;
            if d.direction == Direction::Outbound {
                leases.insert(d.spi, record.leases.clone()?);
            }
            let entry = SaEntry {
                descriptor: d,
                replay: record.replay.clone(),
            };
            sas.insert((d.direction, d.spi), entry);
        }
        let mut state = Replicated {
            applied: snapshot.applied,
            epoch: snapshot.epoch,
            generation: snapshot.generation,
            transfers: snapshot.transfers,
            agreed: snapshot.agreed.clone(),
            synced,
            ready,
            joined_at: snapshot.joined_at.iter().copied().collect(),
            suspects: snapshot
                .suspects
                .iter()
                .map(|(n, by)| (*n, by.iter().copied().collect()))
                .collect(),
            leases: LeaseTable::new(snapshot.lease_len),
            sas,
            policy,
            quorum: snapshot.quorum.clone(),
        };
        let mut view = state.base_view();
        if !state.quorum.quorate {
            view = View::new(view.epoch(), []);
        }
        state.leases = LeaseTable::restore(snapshot.lease_len, view, leases);
        Some(state)
    }
}

#[cfg(test)]
mod tests;
