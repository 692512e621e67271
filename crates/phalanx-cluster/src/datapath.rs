//! What a data-plane thread owns: the dispatcher, one sequencer per
//! outbound SA and one observer per inbound SA. Sans-IO and lock-free:
//! the thread adopts the cluster thread's latest [`SharedState`] once per
//! batch (`update`), decides each packet (`outbound` / `inbound`) and hands
//! its reports back (`poll_report`).
//!
//! Every node runs this over every packet. Outbound: the packet is counted
//! (`c`), dispatched by `c` (or its flow), and its owner gets its ESP
//! sequence number from the leases (see `sequencer`). Inbound: the
//! sequence number is observed (see `observer`) and the packet dispatched
//! by it (or its SA, or its peer) over the base view, taking over only
//! the share of silent suspects (`InboundDispatcher`,
//! `SharedState::inbound_view`), by the packet's arrival time. A node
//! that is not in the dispatch view (not ready yet, or suspected) owns
//! nothing but keeps counting and observing; one that stopped sending
//! heartbeats for longer than `suspect_after` drops its inbound share
//! that arrived while the others may have taken it over (`fence`).
//!
//! Before each owned inbound packet the daemon marks in the SA's replay
//! window the numbers other nodes owned that this node observed
//! (`drain_takeover_marks`, then `InboundSa::replay_commit`, "already
//! seen" ignored): after a view change, and with the shortest-queue
//! schemes always. A packet replayed after a failover (or, with SQF,
//! landing on another node than the original) is refused by its owner.

pub(crate) mod shared;

use core::net::IpAddr;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use crate::codec::{Checkpoint, ReplayCheckpoint};
use crate::dispatch::{
    pins_outbound, Direction, DispatchScheme, Dispatcher, InboundDispatcher, PacketKey,
};
use crate::fence::{Fence, Takers};
use crate::limits::REPLAY_CHECKPOINT_TICKS;
use crate::observer::InboundObserver;
use crate::sequencer::{CounterMark, OutboundSequencer, Spacing, TakeoverOutcome};
use crate::view::{NodeId, View};
use shared::{InboundShared, OutboundShared};

pub use shared::SharedState;

/// Reports kept until polled; older ones are dropped (counted).
const REPORT_QUEUE: usize = 65_536;

/// Ticks after a state transfer during which the first member sends the
/// replay checkpoints a joining node waits for.
const TRANSFER_REPLAY_TICKS: u8 = 3;

/// What to do with an outbound packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutboundDecision {
    /// This node sends it with this ESP sequence number.
    Send {
        /// The sequence number (RFC 4303 §2.2).
        seq: u64,
    },
    /// Another node sends it.
    NotOwned,
    /// This node owns it but holds no leased number (drop, counted).
    NoLease,
    /// The SA is not known to the cluster.
    UnknownSa,
}

/// What to do with an inbound packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InboundDecision {
    /// This node processes it (after draining the takeover marks).
    Process,
    /// Another node processes it.
    NotOwned,
    /// This node owns it, but it arrived while this node sent no
    /// heartbeats and another node may have processed it (see `fence`):
    /// drop, counted.
    Fenced,
    /// The SA is not known to the cluster.
    UnknownSa,
}

/// What the data path tells the cluster thread.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DataPathReport {
    /// Multicast a lease request.
    LeaseRequest {
        /// The outbound SA.
        spi: u32,
        /// The last number of the block to continue.
        after_end: u64,
    },
    /// Multicast a counter checkpoint.
    Checkpoint(Checkpoint),
    /// Send a counter checkpoint to the peers at once, over the heartbeat
    /// channel only: one of the first few after entering a lineage, so
    /// that a node that entered it later heals at once (see
    /// `OutboundSequencer::entry_checkpoint`). The log does not carry
    /// them: a view change would put one burst per SA into it.
    EntryCheckpoint(Checkpoint),
    /// Multicast an observer checkpoint.
    ReplayCheckpoint(ReplayCheckpoint),
    /// The data path adopted state `version` of a node that holds the
    /// replicated state but owns no traffic yet (a joiner before
    /// `Ready`): it runs, counts and observes, so the node may declare
    /// itself ready.
    Adopted {
        /// The [`SharedState::version`] adopted.
        version: u64,
    },
    /// The data path switched over after suspecting `suspect`.
    TakeoverApplied {
        /// The suspect.
        suspect: NodeId,
    },
    /// The counters, once per checkpoint tick when they changed.
    Stats(DataPathStats),
}

/// The data path's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataPathStats {
    /// Outbound packets this node sent.
    pub outbound_owned: u64,
    /// Outbound packets another node sends.
    pub outbound_not_owned: u64,
    /// Owned outbound packets dropped for want of a leased number.
    pub outbound_no_lease: u64,
    /// Outbound packets of an unknown SA.
    pub outbound_unknown_sa: u64,
    /// Inbound packets this node processed.
    pub inbound_owned: u64,
    /// Inbound packets another node processed.
    pub inbound_not_owned: u64,
    /// Owned inbound packets dropped because they arrived while this
    /// node sent no heartbeats (see `fence`).
    pub inbound_fenced: u64,
    /// Inbound packets of an unknown SA.
    pub inbound_unknown_sa: u64,
    /// Counter heals from other nodes' checkpoints.
    pub heals: u64,
    /// Outbound SAs switched to a takeover block.
    pub takeovers: u64,
    /// Takeovers that found the SA already in a takeover block (the lease
    /// switch waits for the log).
    pub deferred_takeovers: u64,
    /// Lease generations entered.
    pub generations: u64,
    /// Lease requests sent.
    pub lease_requests: u64,
    /// Counter checkpoints sent.
    pub checkpoints: u64,
    /// Counter checkpoints sent right after entering a lineage (heartbeat
    /// channel only).
    pub entry_checkpoints: u64,
    /// Outbound stream states (flow tables, queue models) started over at
    /// a lineage position (see `limits::STATE_RESTART_POSITIONS`).
    pub state_restarts: u64,
    /// Replay checkpoints sent.
    pub replay_checkpoints: u64,
    /// Reports dropped because nobody polled them.
    pub reports_dropped: u64,
}

/// One outbound SA in the data path.
#[derive(Debug)]
struct OutboundStream {
    shared: Arc<OutboundShared>,
    sequencer: OutboundSequencer,
    /// The scheme would spread the SA but its peer's window is too small
    /// for that: one node sends all of it (`dispatch::spreads_outbound`).
    pinned: bool,
    /// Serial of the last checkpoint note applied.
    noted: u64,
}

impl OutboundStream {
    /// The stream of a new outbound SA (or of one added again) on node
    /// `local`, whose scheme spaces its numbers by `spacing`.
    fn new(
        local: NodeId,
        scheme: DispatchScheme,
        spacing: Spacing,
        shared: &Arc<OutboundShared>,
    ) -> Self {
        let pinned = pins_outbound(scheme, shared.descriptor.peer_window);
        // One sender per SA: each packet needs a number of that sender's
        // class, whatever the packet's position (see `sequencer`).
        let spacing = if pinned { Spacing::Strided } else { spacing };
        OutboundStream {
            shared: Arc::clone(shared),
            sequencer: OutboundSequencer::new(local, spacing),
            pinned,
            noted: 0,
        }
    }
}

/// One inbound SA in the data path.
#[derive(Debug)]
struct InboundStream {
    shared: Arc<InboundShared>,
    observer: InboundObserver,
    /// Serial of the last replay checkpoint merged.
    merged: u64,
    /// The view changed since the last drain of the marks.
    armed: bool,
    /// Packets observed since the last replay checkpoint sent.
    traffic: bool,
}

/// A data-plane thread's cluster state. See the module docs.
#[derive(Debug)]
pub struct NodeDataPath {
    local: NodeId,
    spacing: Spacing,
    /// Inbound ownership is not a function of the number and the view
    /// (shortest-queue schemes): marks are due before every owned packet.
    continuous_marks: bool,
    /// Outbound packets, over the shared state's `view`.
    dispatcher: Dispatcher,
    /// Inbound ESP, over its `inbound_view` and `silent`.
    inbound_dispatcher: InboundDispatcher,
    version: Option<u64>,
    generation: u64,
    active: bool,
    inbound_active: bool,
    /// This node's fence, from the first state adopted.
    fence: Option<Arc<Fence>>,
    /// Stateless schemes: inbound dispatch over the inbound view without
    /// this node, the owner a peer that takes over from this node alone
    /// computes (see `fence`).
    without_me: Option<Dispatcher>,
    suspects: Vec<NodeId>,
    tick: u64,
    transfers: u64,
    replay_ticks_left: u8,
    checkpoint_every: u64,
    outbound: HashMap<u32, OutboundStream>,
    inbound: HashMap<u32, InboundStream>,
    reports: VecDeque<DataPathReport>,
    stats: DataPathStats,
    reported: DataPathStats,
}

impl NodeDataPath {
    /// The data path of node `local` with `scheme`; owns nothing until it
    /// adopts a state in which it is live.
    pub fn new(local: NodeId, scheme: DispatchScheme) -> NodeDataPath {
        let spacing = match scheme {
            DispatchScheme::PacketRoundRobin => Spacing::Dense,
            _ => Spacing::Strided,
        };
        let continuous_marks = matches!(
            scheme,
            DispatchScheme::PacketShortestQueue | DispatchScheme::SessionShortestQueue
        );
        NodeDataPath {
            local,
            spacing,
            continuous_marks,
            dispatcher: Dispatcher::new(scheme, View::default()),
            inbound_dispatcher: InboundDispatcher::new(scheme, View::default(), &[]),
            version: None,
            generation: 0,
            active: false,
            inbound_active: false,
            fence: None,
            without_me: None,
            suspects: Vec::new(),
            tick: 0,
            transfers: 0,
            replay_ticks_left: 0,
            checkpoint_every: crate::limits::DEFAULT_CHECKPOINT_EVERY,
            outbound: HashMap::new(),
            inbound: HashMap::new(),
            reports: VecDeque::new(),
            stats: DataPathStats::default(),
            reported: DataPathStats::default(),
        }
    }

    /// Decide an outbound packet of SA `spi` (cleartext from the site, to
    /// `peer`): `flow` is `flow_hash` of its 5-tuple, `len` its length and
    /// `fingerprint` a fixed hash of its first bytes.
    #[inline]
    pub fn outbound(
        &mut self,
        spi: u32,
        peer: IpAddr,
        flow: u64,
        len: u32,
        fingerprint: u64,
    ) -> OutboundDecision {
        let Some(stream) = self.outbound.get_mut(&spi) else {
            self.stats.outbound_unknown_sa += 1;
            return OutboundDecision::UnknownSa;
        };
        let c = stream.sequencer.count(fingerprint);
        if self.dispatcher.scheme().is_stateful() && stream.sequencer.at_state_restart() {
            self.dispatcher.forget_stream(Direction::Outbound, spi);
            self.stats.state_restarts += 1;
        }
        if let Some(mark) = stream.sequencer.checkpoint(self.checkpoint_every, false) {
            push_checkpoint(&mut self.reports, &mut self.stats, spi, mark);
        } else if let Some(mark) = stream.sequencer.entry_checkpoint() {
            let checkpoint = mark.of(spi);
            push(
                &mut self.reports,
                &mut self.stats,
                DataPathReport::EntryCheckpoint(checkpoint),
            );
            self.stats.entry_checkpoints += 1;
        }
        let leases = stream.shared.leases.as_deref();
        if let Some(after_end) = leases.and_then(|l| stream.sequencer.lease_request(l)) {
            push(
                &mut self.reports,
                &mut self.stats,
                DataPathReport::LeaseRequest { spi, after_end },
            );
            self.stats.lease_requests += 1;
        }
        let key = PacketKey {
            direction: Direction::Outbound,
            spi,
            index: c,
            len,
            flow,
            peer,
        };
        let owner = if stream.pinned {
            self.dispatcher.sa_owner(&key)
        } else {
            self.dispatcher.owner(&key)
        };
        if !self.active || owner != Some(self.local) {
            self.stats.outbound_not_owned += 1;
            return OutboundDecision::NotOwned;
        }
        match leases.and_then(|l| stream.sequencer.assign(c, l)) {
            Some(seq) => {
                self.stats.outbound_owned += 1;
                OutboundDecision::Send { seq }
            }
            None => {
                self.stats.outbound_no_lease += 1;
                OutboundDecision::NoLease
            }
        }
    }

    /// Decide an inbound ESP packet of SA `spi` from `peer` with sequence
    /// number field `seq_low` (RFC 4303 §2.2; with ESN the high half is
    /// inferred) and length `len`, which arrived at `arrival` (when the
    /// kernel received it: a suspect's share is taken over, and this
    /// node's own fenced, by arrival time).
    #[inline]
    pub fn inbound(
        &mut self,
        spi: u32,
        peer: IpAddr,
        seq_low: u32,
        len: u32,
        arrival: Instant,
    ) -> InboundDecision {
        let Some(stream) = self.inbound.get_mut(&spi) else {
            self.stats.inbound_unknown_sa += 1;
            return InboundDecision::UnknownSa;
        };
        let observed = stream.observer.observe(seq_low);
        stream.traffic = true;
        let key = PacketKey {
            direction: Direction::Inbound,
            spi,
            index: observed.map_or(u64::from(seq_low), |o| o.seq),
            len,
            flow: 0,
            peer,
        };
        let owner = self.inbound_dispatcher.owner_at(&key, arrival);
        if self.inbound_active && owner == Some(self.local) {
            let alone = self.inbound_dispatcher.view().len() < 2;
            let fenced = match self.fence.as_deref().map(|f| (f, f.takers(arrival))) {
                None | Some((_, Takers::Nobody)) => false,
                Some((_, Takers::Anyone)) => true,
                Some((fence, Takers::Peers(mask))) => match &mut self.without_me {
                    Some(d) => d.owner(&key).is_some_and(|t| fence.is_among(mask, t)),
                    None => true,
                },
            };
            if !alone && fenced {
                // Its number is marked in the replay window like another
                // node's, before the next owned packet.
                stream.armed = true;
                self.stats.inbound_fenced += 1;
                return InboundDecision::Fenced;
            }
            if let Some(o) = observed.filter(|o| o.first) {
                stream.observer.own(o.seq);
            }
            self.stats.inbound_owned += 1;
            InboundDecision::Process
        } else {
            self.stats.inbound_not_owned += 1;
            InboundDecision::NotOwned
        }
    }

    /// The sequence numbers `spi`'s replay window must treat as seen
    /// before this node processes its packets: the numbers observed (by
    /// any node) but not owned here, each handed out once. Call it before
    /// every owned packet of `spi` and `replay_commit` each number ("already
    /// seen" ignored); it is cheap when nothing is due. Numbers are due
    /// after every view change, and with the shortest-queue schemes (whose
    /// inbound owner is not a function of the number) after every packet.
    pub fn drain_takeover_marks(&mut self, spi: u32, out: &mut Vec<u64>) {
        let Some(stream) = self.inbound.get_mut(&spi) else {
            return;
        };
        if stream.armed || self.continuous_marks {
            stream.observer.drain_marks(out);
            stream.armed = false;
        }
    }

    /// Whether `spi`'s takeover marks are due at its next owned packet
    /// (after a view change; always with the shortest-queue schemes): the
    /// moment to [`absorb_observed`](Self::absorb_observed) what a kernel
    /// filter recorded, before [`drain_takeover_marks`](Self::drain_takeover_marks).
    pub fn marks_due(&self, spi: u32) -> bool {
        self.inbound
            .get(&spi)
            .is_some_and(|s| s.armed || self.continuous_marks)
    }

    /// Numbers of inbound SA `spi` a kernel filter saw and dropped (other
    /// nodes own them) join its observer as observed, not owned (see
    /// `InboundObserver::absorb`), so the replay window continues from
    /// them at the next drain and the replay checkpoints carry them.
    /// Returns how many were new.
    pub fn absorb_observed(&mut self, spi: u32, cells: &[u32]) -> usize {
        let Some(stream) = self.inbound.get_mut(&spi) else {
            return 0;
        };
        let fresh = stream.observer.absorb(cells);
        if fresh > 0 {
            stream.traffic = true;
        }
        fresh
    }

    /// The next report for the cluster thread.
    pub fn poll_report(&mut self) -> Option<DataPathReport> {
        self.reports.pop_front()
    }

    /// The counters.
    pub fn stats(&self) -> DataPathStats {
        self.stats
    }

    /// Whether this node owns traffic under the adopted state.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// The view outbound packets are dispatched over.
    pub fn view(&self) -> &View {
        self.dispatcher.view()
    }

    /// The view inbound ESP is dispatched over (see
    /// [`SharedState::inbound_view`]).
    pub fn inbound_view(&self) -> &View {
        self.inbound_dispatcher.view()
    }

    /// The suspects whose inbound share this node takes over.
    pub fn silent(&self) -> &[NodeId] {
        self.inbound_dispatcher.silent()
    }

    /// This node's counter of outbound SA `spi` (the last packet's `c`).
    pub fn counter(&self, spi: u32) -> Option<u64> {
        self.outbound.get(&spi).map(|s| s.sequencer.counter())
    }

    /// The lineage outbound SA `spi`'s counter runs in.
    pub fn lineage(&self, spi: u32) -> Option<u64> {
        self.outbound.get(&spi).map(|s| s.sequencer.lineage())
    }
}

/// Queue a report; the oldest goes when nobody polls.
fn push(reports: &mut VecDeque<DataPathReport>, stats: &mut DataPathStats, report: DataPathReport) {
    if reports.len() >= REPORT_QUEUE {
        reports.pop_front();
        stats.reports_dropped += 1;
    }
    reports.push_back(report);
}

/// Queues `mark`, a checkpoint of `spi`'s counter, for the cluster thread.
fn push_checkpoint(
    reports: &mut VecDeque<DataPathReport>,
    stats: &mut DataPathStats,
    spi: u32,
    mark: CounterMark,
) {
    push(reports, stats, DataPathReport::Checkpoint(mark.of(spi)));
    stats.checkpoints += 1;
}

mod adopt;

#[cfg(test)]
mod tests;
