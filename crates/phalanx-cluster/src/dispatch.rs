//! Deterministic dispatch: which live member processes a packet.
//!
//! Every node receives every frame and runs a [`Dispatcher`] over the same
//! view and the same packets in the same order; each node then processes
//! only the packets whose owner is itself. No per-packet message is needed
//! because the decision is a function of data every node holds:
//!
//! - the view (agreed membership minus suspects), set with
//!   [`Dispatcher::set_view`] at the same stream position on every node;
//! - the packet's [`PacketKey`]: its stream (direction and SPI), its index
//!   in the stream (outbound: the sequencer's packet counter `c`; inbound:
//!   the ESP sequence number, RFC 4303 §2.2), its length, its inner flow
//!   and the peer gateway's address;
//! - per-stream state (queue models, flow tables) computed only from that
//!   stream's packets, so it does not depend on how data-plane threads
//!   interleave different SAs.
//!
//! Nothing here reads a clock, draws randomness or uses a per-process hash
//! seed. A lookup allocates nothing in steady state; creating a stream,
//! inserting a flow and changing the view may.
//!
//! # Resynchronisation
//! The stateful schemes (shortest queue first, session tables) depend on
//! the stream's whole history, so a node that missed a packet, or joined
//! with empty tables, would disagree with the others for as long as the
//! stream lives. To bound that, every stream restarts its state whenever
//! a packet's index falls in another epoch of [`SQF_RESYNC_PACKETS`]
//! (queue models) or [`SESSION_RESYNC_PACKETS`] (flow tables) packets than
//! the stream's previous packet. Indices are
//! agreed (outbound counters are healed by checkpoints; inbound sequence
//! numbers are in the packet), so disagreement lasts at most one epoch. A
//! session restart may move an outbound flow to another node once per
//! epoch; inbound sessions land where they were.
//!
//! A view change is the common case of a node disagreeing: each node
//! starts its outbound streams over when its data path adopts the change,
//! a few packets apart from the others. The data path therefore also
//! restarts them at fixed positions of the new counter lineage
//! (`limits::STATE_RESTART_POSITIONS`, 64 to 16,384 packets in), which
//! every node reaches at the same packet once the entry checkpoints have
//! healed its counter (see `sequencer`).
//!
//! # Inbound sessions
//! An inbound SA is one session. With per-stream state only, the first
//! owner of stream `spi` is member `spi % n` (round robin) or the shortest
//! queue with ties starting at `spi % n` (SQF, whose model then holds only
//! that SA's bytes): different SAs spread by their SPIs, not by load.
//! Balancing across SAs by load would need state shared between streams,
//! which data-plane threads do not see in one order.

mod flows;
pub(crate) mod hash;
mod inbound;
mod queue;
mod scheme;
#[cfg(test)]
mod tests;

use core::net::IpAddr;
use std::collections::BTreeMap;

use crate::limits::SPREAD_MIN_PEER_WINDOW;
use crate::segments::{segment_of, segment_table};
use crate::view::{NodeId, View};
use flows::FlowTable;
use queue::QueueModel;

pub use hash::flow_hash;
pub use inbound::InboundDispatcher;
pub use scheme::{Direction, DispatchScheme, UnknownScheme};

/// Flows a session-scheme stream remembers; past this the flow least
/// recently used (in the stream's packets) is forgotten.
pub const FLOWS_PER_STREAM: usize = 4096;

/// Queue models (packet and session SQF) restart at every multiple of this
/// many stream packets (the default checkpoint period), so a node that
/// diverged agrees again within one epoch.
pub const SQF_RESYNC_PACKETS: u64 = 1024;

/// Flow tables restart at every multiple of this many stream packets.
/// Longer than [`SQF_RESYNC_PACKETS`]: a restart may move outbound flows.
pub const SESSION_RESYNC_PACKETS: u64 = 65_536;

/// Whether the outbound packets of an SA whose peer applies a replay
/// window of `peer_window` (0: unknown) leave from several nodes under
/// `scheme`. Nodes process the shared stream at slightly different times,
/// so packets of one SA sent by several nodes arrive out of order, and a
/// peer refuses those further behind than its window as too old (RFC 4303
/// §3.4.3). Only a peer known to have a window of at least
/// [`SPREAD_MIN_PEER_WINDOW`] gets them spread; any other SA is *pinned*:
/// all its outbound packets go to one node ([`Dispatcher::sa_owner`]), in
/// order, with [`crate::Spacing::Strided`] numbers, so a takeover only
/// ever jumps forward. Inbound dispatch is not affected (the reordering
/// then happens behind this cluster's own replay windows).
pub fn spreads_outbound(scheme: DispatchScheme, peer_window: u32) -> bool {
    scheme.spreads_one_sa() && peer_window >= SPREAD_MIN_PEER_WINDOW
}

/// Whether `scheme` would spread an outbound SA over the nodes but the
/// peer's window (0: unknown) keeps it on one node ([`spreads_outbound`]).
pub fn pins_outbound(scheme: DispatchScheme, peer_window: u32) -> bool {
    scheme.spreads_one_sa() && !spreads_outbound(scheme, peer_window)
}

/// What the dispatcher needs to know about one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketKey {
    /// The stream's direction.
    pub direction: Direction,
    /// The SA's SPI (RFC 4303 §2.1); with `direction`, names the stream.
    pub spi: u32,
    /// Outbound: `c` from `OutboundSequencer::count` (1, 2, 3 ...);
    /// inbound: the ESP sequence number of the packet.
    pub index: u64,
    /// Bytes the owner will process (the queue models' unit).
    pub len: u32,
    /// Outbound: [`flow_hash`] of the inner 5-tuple; inbound: 0 (the SA
    /// is the session).
    pub flow: u64,
    /// The remote gateway's address (the hash schemes' input).
    pub peer: IpAddr,
}

impl PacketKey {
    /// An inbound packet of SA `spi` from `peer` as the hash schemes see
    /// every packet of it (they decide by the peer and the SPI alone).
    pub fn inbound_sa(spi: u32, peer: IpAddr) -> PacketKey {
        PacketKey {
            direction: Direction::Inbound,
            spi,
            index: 0,
            len: 0,
            flow: 0,
            peer,
        }
    }
}

/// A stream: one SA in one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct StreamId {
    direction: Direction,
    spi: u32,
}

/// The dispatch state of one stream.
#[derive(Clone, Debug)]
struct StreamState {
    /// `index / period` of the stream's previous packet.
    epoch: u64,
    /// Per-member queue model (SQF schemes only; empty otherwise).
    queues: QueueModel,
    /// Flow to owner (session schemes only).
    flows: FlowTable,
    /// Flows assigned since the last restart (session round robin).
    new_flows: u64,
}

/// The deterministic owner function of one node. See the module docs.
#[derive(Clone, Debug)]
pub struct Dispatcher {
    scheme: DispatchScheme,
    view: View,
    /// Owner of each segment under `view` (the hash schemes' owners and
    /// the pinned SAs').
    segments: Vec<NodeId>,
    streams: BTreeMap<StreamId, StreamState>,
}

impl Dispatcher {
    /// A dispatcher for `scheme` over `view`, with no stream state yet.
    pub fn new(scheme: DispatchScheme, view: View) -> Dispatcher {
        let mut dispatcher = Dispatcher {
            scheme,
            view: View::default(),
            segments: Vec::new(),
            streams: BTreeMap::new(),
        };
        dispatcher.set_view(view);
        dispatcher
    }

    /// Dispatch over `view` from the next packet on. Queue models keep the
    /// backlog of the members that stay; flows owned by departed members
    /// are re-assigned as new flows when next seen.
    pub fn set_view(&mut self, view: View) {
        if models_queues(self.scheme) {
            for stream in self.streams.values_mut() {
                stream.queues.remap(&self.view, &view);
            }
        }
        self.segments = segment_table(&view);
        self.view = view;
    }

    /// The view decisions are taken over.
    pub fn view(&self) -> &View {
        &self.view
    }

    /// The scheme.
    pub fn scheme(&self) -> DispatchScheme {
        self.scheme
    }

    /// The live member that processes this packet; `None` only when the
    /// view is empty. Call it once per packet, in stream order: the
    /// stateful schemes account the packet.
    pub fn owner(&mut self, key: &PacketKey) -> Option<NodeId> {
        let n = self.view.len() as u64;
        if n == 0 {
            return None;
        }
        match self.scheme {
            DispatchScheme::PacketRoundRobin => self.view.member((key.index % n) as usize),
            DispatchScheme::HashSegments { with_spi } => {
                let segment = segment_of(key.peer, with_spi.then_some(key.spi));
                self.segments.get(usize::from(segment)).copied()
            }
            DispatchScheme::PacketShortestQueue => {
                stream(&mut self.streams, self.scheme, &self.view, key)
                    .shortest_queue(&self.view, key)
            }
            DispatchScheme::SessionRoundRobin | DispatchScheme::SessionShortestQueue => {
                stream(&mut self.streams, self.scheme, &self.view, key).session(
                    self.scheme,
                    &self.view,
                    key,
                )
            }
        }
    }

    /// The one live member that sends every outbound packet of a pinned
    /// SA (see [`spreads_outbound`]): the owner of the segment of its peer
    /// and SPI, as with `hash-src-spi`. Stateless: every packet of the SA
    /// gets the same answer until the view changes. `None` only when the
    /// view is empty.
    pub fn sa_owner(&self, key: &PacketKey) -> Option<NodeId> {
        let segment = segment_of(key.peer, Some(key.spi));
        self.segments.get(usize::from(segment)).copied()
    }

    /// Drop the state of a stream (its SA was deleted).
    pub fn forget_stream(&mut self, direction: Direction, spi: u32) {
        self.streams.remove(&StreamId { direction, spi });
    }

    /// Flows held in all session tables.
    pub fn flows(&self) -> usize {
        self.streams.values().map(|stream| stream.flows.len()).sum()
    }

    /// Streams with dispatch state (stateful schemes only).
    pub fn streams(&self) -> usize {
        self.streams.len()
    }
}

/// The state of `key`'s stream, created on its first packet.
fn stream<'a>(
    streams: &'a mut BTreeMap<StreamId, StreamState>,
    scheme: DispatchScheme,
    view: &View,
    key: &PacketKey,
) -> &'a mut StreamState {
    let id = StreamId {
        direction: key.direction,
        spi: key.spi,
    };
    let members = if models_queues(scheme) { view.len() } else { 0 };
    let epoch = key.index / resync_period(scheme);
    streams
        .entry(id)
        .or_insert_with(|| StreamState::new(members, epoch))
}

/// The restart period of `scheme`'s stream state, in stream packets.
fn resync_period(scheme: DispatchScheme) -> u64 {
    if scheme.is_session_based() {
        SESSION_RESYNC_PACKETS
    } else {
        SQF_RESYNC_PACKETS
    }
}

/// Whether `scheme` keeps per-member queue models.
fn models_queues(scheme: DispatchScheme) -> bool {
    matches!(
        scheme,
        DispatchScheme::PacketShortestQueue | DispatchScheme::SessionShortestQueue
    )
}

impl StreamState {
    /// Empty state for `members` queues, first seen in `epoch`.
    fn new(members: usize, epoch: u64) -> StreamState {
        StreamState {
            epoch,
            queues: QueueModel::new(members),
            flows: FlowTable::new(FLOWS_PER_STREAM),
            new_flows: 0,
        }
    }

    /// Restart when `index` is in another epoch of `period` packets than
    /// the stream's previous packet. Any change counts, not only forward:
    /// a 32-bit inbound sequence number wraps, and a packet reordered
    /// across a boundary restarts every node alike (they see one order).
    fn resync(&mut self, index: u64, period: u64) {
        let epoch = index / period;
        if epoch != self.epoch {
            self.epoch = epoch;
            self.queues.reset();
            self.flows.clear();
            self.new_flows = 0;
        }
    }

    /// Packet SQF: drain, pick the shortest queue, charge it.
    fn shortest_queue(&mut self, view: &View, key: &PacketKey) -> Option<NodeId> {
        self.resync(key.index, SQF_RESYNC_PACKETS);
        self.queues.drain(key.len);
        let index = self.queues.shortest(view, key.spi as usize);
        self.queues.charge(view, index, key.len);
        view.member(index)
    }

    /// Session schemes: the flow's owner, assigning new flows (and flows of
    /// departed members) by round robin or shortest queue.
    fn session(&mut self, scheme: DispatchScheme, view: &View, key: &PacketKey) -> Option<NodeId> {
        self.resync(key.index, SESSION_RESYNC_PACKETS);
        let sqf = scheme == DispatchScheme::SessionShortestQueue;
        if sqf {
            self.queues.drain(key.len);
        }
        let flow = match key.direction {
            Direction::Outbound => key.flow,
            Direction::Inbound => 0,
        };
        let owner = match self.flows.touch(flow) {
            Some(owner) if view.contains(*owner) => *owner,
            Some(owner) => {
                *owner = assign(&self.queues, &mut self.new_flows, sqf, view, key.spi)?;
                *owner
            }
            None => {
                let fresh = assign(&self.queues, &mut self.new_flows, sqf, view, key.spi)?;
                self.flows.insert(flow, fresh);
                fresh
            }
        };
        if sqf {
            // The owner is a member: it came from the view or was kept
            // only while `view.contains` it.
            let index = view.index_of(owner)?;
            self.queues.charge(view, index, key.len);
        }
        Some(owner)
    }
}

/// The owner of a new flow of stream `spi`: the next member in turn from
/// `spi % n` (round robin) or the shortest modelled queue (SQF).
fn assign(
    queues: &QueueModel,
    new_flows: &mut u64,
    sqf: bool,
    view: &View,
    spi: u32,
) -> Option<NodeId> {
    let n = view.len() as u64;
    let turn = u64::from(spi).wrapping_add(*new_flows);
    *new_flows += 1;
    if sqf {
        view.member(queues.shortest(view, spi as usize))
    } else {
        view.member((turn % n.max(1)) as usize)
    }
}
