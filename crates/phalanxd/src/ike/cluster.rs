//! IKE on a cluster node (issue 5, "replicate IKE state too"): one node
//! runs each IKE SA, every other node holds its replicated state in
//! standby, and a survivor carries it on when its node fails — same SPIs,
//! keys and Message IDs, no renegotiation (phalanx-ike `ha` module doc,
//! "What the cluster must do", which this module carries out).
//!
//! - **Datagrams**: IKE to the outside virtual address (UDP 500, or 4500
//!   behind the non-ESP marker) reaches every node through the cluster
//!   worker's ring; the IKE thread of every node gets it. A request that
//!   opens a new IKE SA is admitted only by the owner its peer's segment
//!   has ([`ownership`]); everything else goes to the endpoint, which
//!   drops what belongs to no IKE SA it runs (standby copies do not
//!   answer). IKE leaves from the virtual address (sockets bound with
//!   `IP_FREEBIND`; port 4500 is the ESP socket's duplicate).
//! - **Write-ahead** ([`hold`]): the `IkeStateChanged` / `IkeStateRemoved`
//!   events of one round go to the cluster thread, which multicasts them
//!   through Corosync; that round's installs and datagrams wait until this
//!   node's own message comes back from the agreed log.
//! - **Standby**: every delivered state is imported (`takeover = false`)
//!   or forgotten; the import's Child SA installs and removals go to the
//!   local SA store, so every node's data plane holds the same Child SAs.
//!   The owner registers its negotiated Child SAs with the cluster (as the
//!   static SAs are) once their install is released; the log's `SaAdd`
//!   makes every node dispatch them.
//! - **Takeover**: when the dispatch view loses an IKE SA's node, every
//!   node computes the successor; the successor calls `take_over_ike_sa`.
//! - **Demotion**: a node that finds itself out of the dispatch view
//!   (falsely suspected, lost Corosync) stops transmitting at once: its
//!   endpoint is rebuilt holding every IKE SA it ran as a standby copy,
//!   and what waited in the hold queue is never sent.
//! - **One owner, by the log's order** ([`order`]): takeovers are decided
//!   on each node's own dispatch view, which can differ for a moment
//!   (false suspicions on a loaded machine), so two nodes can both take an
//!   IKE SA over. The owner is the node named by the last state the log
//!   delivered for it. A node running the IKE SA that is delivered another
//!   node's state keeps it while a state of its own for it is on the way
//!   (`owner_conflicts`: that one comes later and wins), and otherwise
//!   demotes that one IKE SA (`owner_demotions`): it stops running it
//!   without a word to the peer, drops its held datagrams for it, and
//!   holds the delivered state in standby; the Child SAs stay installed.
//!   A state naming a node out of the dispatch view changes no owner
//!   (`stale_owner_states`): a failed node's late message must not make
//!   its successor stand down. Standbys import a new owner's first state
//!   whatever its generation, and every owner table records the last
//!   owner delivered, so a later takeover starts from the agreed one.
//! - **Joiners**: on `StateTransferSent` the sender multicasts every IKE
//!   SA state it holds, so the joiner learns them after its transfer.
//! - **Configured connections** (`start_action = "start"`): initiated by
//!   the segment owner of their peer once the view has been stable for
//!   [`START_SETTLE`], and again after [`START_RETRY`] while no node holds
//!   an IKE SA of the connection (the cluster keeps it up). `phalanxctl
//!   initiate` is refused on other nodes (it names the owner).

pub mod bridge;
pub mod hold;
mod import;
pub mod order;
pub mod ownership;
pub mod wire;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use phalanx_cluster::{Direction, NodeId, SaDescriptor, SharedState, View};
use phalanx_control::NamedCounter;
use phalanx_ike::config::{EndpointConfig, StartAction};
use phalanx_ike::ha::{HaError, IkeSaState};
use phalanx_ike::{Endpoint, SaEvent, Transmit};
use phalanx_wire::ike::iana::ExchangeType;
use phalanx_wire::ike::{IkeHeader, IkeHeaderRepr};

use super::apply::{apply, Notes, PeerOf};
use super::sockets::IkeSockets;
use crate::install::SaStore;
use bridge::{FromCluster, IkeEnd, ToCluster};
use hold::HoldQueue;
use order::OwnInFlight;
use ownership::{dispatch_view, new_sa_owner, OwnerTable, Spis};
use wire::IkeAppMessage;

/// Rounds' batches held at most; beyond, a batch's datagrams are dropped
/// (counted) rather than memory grown without bound.
pub const HOLD_LIMIT: usize = 4096;

/// Messages from the cluster thread handled per round at most.
const DELIVERY_BURST: usize = 1024;

/// How long the dispatch view must be unchanged before a configured
/// connection is initiated (nodes joining one by one would otherwise
/// each see themselves as the owner for a moment).
pub const START_SETTLE: Duration = Duration::from_secs(2);

/// How long after an initiation the owner tries again while no node
/// holds an IKE SA of the connection.
pub const START_RETRY: Duration = Duration::from_secs(30);

/// What the cluster part of the IKE thread counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterIkeCounters {
    /// New-SA requests left to the segment's owner.
    pub not_owner: u64,
    /// New-SA requests admitted here (this node owns the segment).
    pub admitted: u64,
    /// State messages handed to the cluster thread.
    pub replicated: u64,
    /// Rounds held for their replication.
    pub held: u64,
    /// Rounds released (held or not).
    pub released: u64,
    /// Own messages back from the log.
    pub own_delivered: u64,
    /// Replications the node refused (not synced, too large) or the full
    /// queue dropped: their round went without waiting.
    pub unreplicated: u64,
    /// Standby states imported.
    pub imported: u64,
    /// States older than the copy held (ignored).
    pub stale: u64,
    /// States refused for another reason (logged).
    pub import_refused: u64,
    /// Standby copies forgotten.
    pub forgotten: u64,
    /// IKE SAs taken over from a node that left the dispatch view.
    pub takeovers: u64,
    /// Takeovers refused by the endpoint (logged).
    pub takeover_failures: u64,
    /// Times this node found itself out of the dispatch view and demoted
    /// its IKE SAs to standby.
    pub demotions: u64,
    /// Datagrams not sent: demoted, or the hold queue full.
    pub datagrams_dropped: u64,
    /// Rounds whose datagrams were dropped because the hold queue was full.
    pub hold_overflow: u64,
    /// State transfers followed by a resend of every IKE SA state.
    pub resyncs: u64,
    /// States sent in those resends.
    pub resync_states: u64,
    /// States the log delivered naming another owner for an IKE SA this
    /// node runs while a state of its own for it was on the way: two
    /// nodes ran it at once (takeovers decided on views that differed for
    /// a moment); this node keeps it, its own state comes later and wins.
    pub owner_conflicts: u64,
    /// IKE SAs this node ran, demoted while out of the view, and ran
    /// again when it came back with the log still naming it the owner.
    pub resumed: u64,
    /// IKE SAs this node stopped running because the log delivered another
    /// owner's state for them last (module doc).
    pub owner_demotions: u64,
    /// States naming an owner out of this node's dispatch view, or this
    /// node for an IKE SA it no longer runs: no owner changed.
    pub stale_owner_states: u64,
    /// Child SAs registered with the cluster / removed from it.
    pub sas_registered: u64,
    /// Child SAs removed from the cluster.
    pub sas_removed: u64,
    /// App messages that did not decode.
    pub decode_errors: u64,
    /// Configured connections initiated by this node as their owner.
    pub starts: u64,
}

/// What the IKE thread needs in cluster mode.
#[derive(Debug)]
pub struct ClusterIkeParts {
    /// This node.
    pub local: NodeId,
    /// The cluster thread's published state (the dispatch view).
    pub shared: Arc<ArcSwap<SharedState>>,
    /// The queues to and from the cluster thread.
    pub bridge: IkeEnd,
    /// This node's share of the pools' fresh addresses.
    pub pool_partition: phalanx_ike::pool::Partition,
}

/// One round's output: the endpoint's events but the state ones, and its
/// datagrams.
#[derive(Debug, Default)]
struct Batch {
    events: Vec<SaEvent>,
    transmits: Vec<Transmit>,
    /// What the cluster is told about the batch's Child SA events.
    register: Registration,
}

/// Which Child SA events of a batch go to the cluster.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Registration {
    /// None: a takeover (the cluster knows them from their first owner).
    #[default]
    Nothing,
    /// Installs and removals: the owner's own rounds.
    All,
    /// Removals only: a demotion (the new owner registered what it
    /// negotiated; what only this node had goes).
    Removals,
}

/// Everything of the IKE thread a cluster step touches.
pub struct Io<'a> {
    /// The endpoint (replaced on demotion).
    pub endpoint: &'a mut Endpoint,
    /// Where datagrams go.
    pub sockets: &'a mut IkeSockets,
    /// Where SAs are installed.
    pub store: &'a SaStore,
    /// What the round noted.
    pub notes: &'a mut Notes,
    /// Peers for log lines.
    pub peer: PeerOf<'a>,
}

/// The cluster part of the IKE thread (module doc).
#[derive(Debug)]
pub struct ClusterIke {
    local: NodeId,
    shared: Arc<ArcSwap<SharedState>>,
    bridge: IkeEnd,
    /// The configuration, start actions removed (for demotion rebuilds).
    config: EndpointConfig,
    /// Connections with `start_action = "start"`: name and peer.
    starts: Vec<(String, IpAddr)>,
    start_attempts: HashMap<String, Instant>,
    seen_version: Option<u64>,
    view: View,
    view_since: Instant,
    in_view: bool,
    owners: OwnerTable,
    hold: HoldQueue<Batch>,
    next_hold: u64,
    /// Own states on their way through the log, per IKE SA.
    in_flight: OwnInFlight,
    counters: ClusterIkeCounters,
    /// EAP messages of End-Users for the driver's EAP backend: they wait
    /// for nothing in the log (an exchange in progress is not replicated).
    eap_requests: Vec<SaEvent>,
}

/// Removes `start_action = "start"` from `config` (in cluster mode the
/// owner starts those, [`ClusterIke`]) and returns those connections with
/// their peer.
pub fn take_starts(config: &mut EndpointConfig) -> Vec<(String, IpAddr)> {
    let mut starts = Vec::new();
    for conn in &mut config.connections {
        if conn.start_action == StartAction::Start {
            conn.start_action = StartAction::None;
            if let Some(peer) = conn.remote_addr {
                starts.push((conn.name.clone(), peer));
            }
        }
    }
    starts
}

/// Whether `bytes` opens a new IKE SA (RFC 7296 §1.2: IKE_SA_INIT request,
/// responder SPI zero) or cannot be read as IKEv2 at all (which the
/// endpoint may answer statelessly): the segment owner alone handles it.
pub fn is_new_exchange(bytes: &[u8]) -> bool {
    let Ok(header) = IkeHeader::new_checked(bytes) else {
        return true;
    };
    let Ok(hdr) = IkeHeaderRepr::parse(&header) else {
        return true;
    };
    hdr.exchange_type == ExchangeType::IKE_SA_INIT
        && !hdr.response
        && hdr.initiator
        && hdr.responder_spi == 0
}

impl ClusterIke {
    /// The cluster part for `parts`; `config` is the endpoint's, start
    /// actions already taken out, `starts` what [`take_starts`] returned.
    pub fn new(
        parts: ClusterIkeParts,
        config: EndpointConfig,
        starts: Vec<(String, IpAddr)>,
        now: Instant,
    ) -> ClusterIke {
        ClusterIke {
            local: parts.local,
            shared: parts.shared,
            bridge: parts.bridge,
            config,
            starts,
            start_attempts: HashMap::new(),
            seen_version: None,
            view: View::new(0, []),
            view_since: now,
            in_view: false,
            owners: OwnerTable::default(),
            hold: HoldQueue::new(HOLD_LIMIT),
            next_hold: 1,
            in_flight: OwnInFlight::default(),
            counters: ClusterIkeCounters::default(),
            eap_requests: Vec::new(),
        }
    }

    /// The EAP messages the last flushes set aside, oldest first.
    pub fn take_eap_requests(&mut self) -> Vec<SaEvent> {
        std::mem::take(&mut self.eap_requests)
    }

    /// The bridge's descriptor, to poll.
    pub fn bridge(&self) -> &IkeEnd {
        &self.bridge
    }

    /// A new configuration (reload): start actions are taken out here too.
    pub fn reconfigure(&mut self, config: &mut EndpointConfig) {
        self.starts = take_starts(config);
        self.config = config.clone();
    }

    /// Whether a received datagram goes to the endpoint here (module doc).
    pub fn admit(&mut self, remote: SocketAddr, bytes: &[u8]) -> bool {
        if !is_new_exchange(bytes) {
            return true;
        }
        if self.in_view && new_sa_owner(&self.view, remote.ip()) == Some(self.local) {
            self.counters.admitted += 1;
            true
        } else {
            self.counters.not_owner += 1;
            false
        }
    }

    /// Whether this node may initiate to `peer` (`phalanxctl initiate`):
    /// the message names the owner otherwise.
    pub fn may_initiate(&self, peer: Option<IpAddr>) -> Result<(), String> {
        let owner = peer.and_then(|p| new_sa_owner(&self.view, p));
        match owner {
            Some(owner) if owner == self.local && self.in_view => Ok(()),
            Some(owner) => Err(format!(
                "node {} runs this connection in the cluster; initiate it there",
                owner.0
            )),
            None => Err("this node owns no IKE SA now (not in the cluster's dispatch view, or no remote_addr)".into()),
        }
    }

    /// Start of a round: the cluster thread's messages, the view (takeover,
    /// demotion), the configured connections.
    pub fn turn(&mut self, now: Instant, io: &mut Io<'_>) {
        self.bridge.reset();
        let mut drained = false;
        for _ in 0..DELIVERY_BURST {
            let Some(message) = self.bridge.try_recv() else {
                drained = true;
                break;
            };
            match message {
                FromCluster::Delivered { from, payload } => self.delivered(now, io, from, &payload),
                FromCluster::Refused { hold } => {
                    self.counters.unreplicated += 1;
                    self.own_refused(hold);
                }
                FromCluster::StateTransferSent => self.resync(now, io),
                FromCluster::View(view) => self.adopt_view(now, io, view, true),
            }
        }
        self.release(now, io);
        if drained {
            self.follow_view(now, io);
        }
        self.start_connections(now, io);
    }

    /// One App message of the IKE channel, in the agreed order.
    fn delivered(&mut self, now: Instant, io: &mut Io<'_>, from: NodeId, payload: &[u8]) {
        let message = match IkeAppMessage::decode(payload) {
            Ok(m) => m,
            Err(e) => {
                self.counters.decode_errors += 1;
                tracing::warn!(from = from.0, error = ?e, "cluster IKE: undecodable message");
                return;
            }
        };
        if from == self.local && message.hold() != 0 {
            self.counters.own_delivered += 1;
            self.hold.delivered(message.hold());
            self.in_flight.delivered(message.hold());
        }
        match message {
            IkeAppMessage::State { owner, state, .. } => self.import(now, io, from, owner, &state),
            IkeAppMessage::Removed { spis, .. } => {
                if io.endpoint.forget_ike_sa(spis.0, spis.1) {
                    self.counters.forgotten += 1;
                }
                self.owners.remove(spis);
            }
        }
        self.apply_local(now, io);
    }

    /// The events of a standby import or removal: the local data plane
    /// follows; nothing is registered, nothing sent.
    fn apply_local(&mut self, now: Instant, io: &mut Io<'_>) {
        while let Some(event) = io.endpoint.poll_event() {
            apply(io.store, event, now, io.notes, io.peer);
        }
        while io.endpoint.poll_transmit().is_some() {
            self.counters.datagrams_dropped += 1;
        }
    }

    /// A joiner got this node's state transfer: every IKE SA state held
    /// here follows it through the log (the joiner imports them; members
    /// that hold them find them stale).
    fn resync(&mut self, now: Instant, io: &mut Io<'_>) {
        self.counters.resyncs += 1;
        let own = io.endpoint.export_ike_sas(now);
        let mut sent = 0;
        for state in &own {
            // A claim like any own state: tracked while on its way (module
            // doc of `order`), though no batch waits for it.
            let hold = self.next_hold();
            let ok = self.send_state(self.local, hold, state);
            self.track(state.spis(), hold, ok);
            sent += u64::from(ok);
        }
        for state in io.endpoint.imported_ike_sas() {
            if let Some(owner) = self.owners.owner(state.spis()) {
                let message = IkeAppMessage::State {
                    owner,
                    hold: 0,
                    state: state.encode().to_vec(),
                };
                sent += u64::from(self.bridge.send(ToCluster::Replicate {
                    hold: 0,
                    payload: message.encode(),
                }));
            }
        }
        self.counters.resync_states += sent;
        tracing::info!(
            states = sent,
            "cluster IKE: IKE SA states re-sent for a joining node"
        );
    }

    /// Hands one state to the cluster thread; false when its queue is full.
    fn send_state(&mut self, owner: NodeId, hold: u64, state: &IkeSaState) -> bool {
        let message = IkeAppMessage::State {
            owner,
            hold,
            state: state.encode().to_vec(),
        };
        self.bridge.send(ToCluster::Replicate {
            hold,
            payload: message.encode(),
        })
    }

    /// A new hold number.
    fn next_hold(&mut self) -> u64 {
        let hold = self.next_hold;
        self.next_hold += 1;
        hold
    }

    /// This node's message with hold number `hold` never comes back from
    /// the log (refused, or not handed over): what waits for it goes.
    fn own_refused(&mut self, hold: u64) {
        self.hold.delivered(hold);
        self.in_flight.refused(hold);
    }

    /// An own message for `spis` with hold number `hold` is on its way
    /// (`sent`), or will never come back.
    fn track(&mut self, spis: Spis, hold: u64, sent: bool) {
        self.in_flight.sent(spis, hold);
        if !sent {
            self.own_refused(hold);
        }
    }

    /// Replicates one state event; the hold number to wait for.
    fn replicate(&mut self, event: SaEvent) -> Option<u64> {
        let hold = self.next_hold();
        let (spis, sent) = match event {
            SaEvent::IkeStateChanged { state } => {
                (state.spis(), self.send_state(self.local, hold, &state))
            }
            SaEvent::IkeStateRemoved {
                connection,
                ike_spi_i,
                ike_spi_r,
            } => {
                let spis = (ike_spi_i, ike_spi_r);
                let message = IkeAppMessage::Removed {
                    owner: self.local,
                    hold,
                    spis,
                    connection,
                };
                let sent = self.bridge.send(ToCluster::Replicate {
                    hold,
                    payload: message.encode(),
                });
                (spis, sent)
            }
            _ => return None,
        };
        self.counters.replicated += 1;
        if !sent {
            // Nothing will come back for it: the round goes unheld.
            self.counters.unreplicated += 1;
        }
        self.track(spis, hold, sent);
        Some(hold)
    }

    /// After the endpoint was called: its state events are replicated,
    /// everything else waits in the hold queue for them (module doc).
    pub fn flush(&mut self, now: Instant, io: &mut Io<'_>, register: bool) {
        let mut batch = Batch {
            register: if register {
                Registration::All
            } else {
                Registration::Nothing
            },
            ..Batch::default()
        };
        let mut waits = None;
        while let Some(event) = io.endpoint.poll_event() {
            match event {
                SaEvent::IkeStateChanged { .. } | SaEvent::IkeStateRemoved { .. } => {
                    waits = self.replicate(event).or(waits);
                }
                SaEvent::EapRequest { .. } => self.eap_requests.push(event),
                other => batch.events.push(other),
            }
        }
        while let Some(transmit) = io.endpoint.poll_transmit() {
            batch.transmits.push(transmit);
        }
        if batch.events.is_empty() && batch.transmits.is_empty() {
            return;
        }
        if waits.is_some() {
            self.counters.held += 1;
        }
        if let Err(batch) = self.hold.push(waits, batch) {
            self.counters.hold_overflow += 1;
            self.counters.datagrams_dropped += batch.transmits.len() as u64;
            self.carry_out(
                now,
                io,
                Batch {
                    transmits: Vec::new(),
                    ..batch
                },
            );
        }
        self.release(now, io);
    }

    /// Every batch whose replication came back, in order.
    fn release(&mut self, now: Instant, io: &mut Io<'_>) {
        while let Some(batch) = self.hold.pop_ready() {
            self.counters.released += 1;
            self.carry_out(now, io, batch);
        }
    }

    /// Installs, then sends (make-before-break, as in host mode); the
    /// owner registers its Child SAs with the cluster.
    fn carry_out(&mut self, now: Instant, io: &mut Io<'_>, batch: Batch) {
        for event in batch.events {
            let change = match batch.register {
                Registration::All => registration(&event),
                Registration::Removals => {
                    registration(&event).filter(|c| matches!(c, ToCluster::Remove { .. }))
                }
                Registration::Nothing => None,
            };
            let errors = io.notes.install_errors;
            apply(io.store, event, now, io.notes, io.peer);
            let Some(change) = change else {
                continue;
            };
            let installed = io.notes.install_errors == errors;
            match change {
                // An SA the data plane refused is not offered to the cluster.
                ToCluster::Register(_) if !installed => continue,
                ToCluster::Register(_) => self.counters.sas_registered += 1,
                _ => self.counters.sas_removed += 1,
            }
            if !self.bridge.send(change) {
                // The cluster then drops the SA's packets as unknown.
                tracing::warn!("cluster IKE: a Child SA registration was dropped (queue full)");
            }
        }
        for transmit in &batch.transmits {
            if self.in_view {
                io.sockets.send(transmit);
            } else {
                self.counters.datagrams_dropped += 1;
            }
        }
    }

    /// Adopts a new dispatch view: takeovers of IKE SAs whose node left
    /// it, or demotion when this node left it.
    /// The latest published state, when it is new (a fallback: the views
    /// normally arrive one by one from the bridge).
    fn follow_view(&mut self, now: Instant, io: &mut Io<'_>) {
        let state = self.shared.load();
        if self.seen_version == Some(state.version()) {
            return;
        }
        self.seen_version = Some(state.version());
        let view = dispatch_view(&state);
        let ready = state.is_ready();
        self.adopt_view(now, io, view, ready);
    }

    /// Adopts one dispatch view (every one the node went through, in
    /// order: a node out of the view for a moment must see it, even if the
    /// state published around it already has it back).
    fn adopt_view(&mut self, now: Instant, io: &mut Io<'_>, view: View, ready: bool) {
        let in_view = ready && view.contains(self.local);
        if view.members() == self.view.members() && in_view == self.in_view {
            return;
        }
        if view.members() != self.view.members() {
            self.view_since = now;
            tracing::info!(view = ?view.members().iter().map(|n| n.0).collect::<Vec<_>>(), "cluster IKE: dispatch view");
        }
        self.view = view;
        let was = self.in_view;
        self.in_view = in_view;
        let moved = self.owners.rehome(&self.view);
        if !self.in_view {
            if was || !io.endpoint.ike_sas().is_empty() {
                self.demote(now, io);
            }
            return;
        }
        let mut taken = false;
        for (spis, successor) in moved {
            if successor == self.local {
                self.take_over(now, io, spis);
                taken = true;
            }
        }
        if !was {
            taken |= self.resume(now, io);
        }
        if taken {
            self.flush(now, io, false);
        }
    }

    /// Back in the dispatch view: the IKE SAs the log still names this
    /// node as the runner of, and that it holds only as standby copies (it
    /// demoted itself while out of the view — a false suspicion, a moment
    /// without quorum — and nobody took them over since, because every
    /// other node saw their owner stay or come back), run here again.
    /// Without this nobody would run them. True if one was taken.
    fn resume(&mut self, now: Instant, io: &mut Io<'_>) -> bool {
        let mut taken = false;
        for spis in self.owners.owned_by(self.local) {
            if !io.endpoint.runs_ike_sa(spis.0, spis.1) {
                self.counters.resumed += 1;
                self.take_over(now, io, spis);
                taken = true;
            }
        }
        taken
    }

    fn take_over(&mut self, now: Instant, io: &mut Io<'_>, spis: Spis) {
        match io.endpoint.take_over_ike_sa(now, spis.0, spis.1) {
            Ok(()) => {
                self.counters.takeovers += 1;
                tracing::warn!(spi_i = %hex::encode(spis.0), spi_r = %hex::encode(spis.1), "cluster IKE: took over the IKE SA of a node that left the view");
            }
            // It runs here already: this node kept it after another
            // node's state (its own came later), and that node left.
            Err(HaError::ActiveHere) => {
                tracing::info!(spi_i = %hex::encode(spis.0), "cluster IKE: the IKE SA of a node that left the view runs here already");
            }
            Err(e) => {
                self.counters.takeover_failures += 1;
                tracing::error!(spi_i = %hex::encode(spis.0), spi_r = %hex::encode(spis.1), error = %e, "cluster IKE: takeover refused");
            }
        }
    }

    /// This node is out of the dispatch view: it stops transmitting for
    /// every IKE SA it runs. The endpoint is rebuilt with all of them as
    /// standby copies (unlike `demote_ike_sa` of one IKE SA, a rebuild also
    /// drops half-open IKE SAs and whatever the endpoint still queued); the
    /// data plane keeps its Child SAs.
    fn demote(&mut self, now: Instant, io: &mut Io<'_>) {
        let held = self.hold.drain_all();
        for batch in held {
            self.counters.datagrams_dropped += batch.transmits.len() as u64;
            self.carry_out(
                now,
                io,
                Batch {
                    transmits: Vec::new(),
                    ..batch
                },
            );
        }
        let mut states = io.endpoint.export_ike_sas(now);
        states.extend(io.endpoint.imported_ike_sas().into_iter().cloned());
        let mut fresh = match super::build_endpoint(self.config.clone(), now) {
            Ok(fresh) => fresh,
            Err(e) => {
                tracing::error!(error = %e, "cluster IKE: demotion failed; datagrams stay blocked while out of the view");
                return;
            }
        };
        fresh.set_ha_replication(now, true);
        let count = states.len();
        for state in states {
            // Each was running or held here, under this configuration.
            let _ = fresh.import_ike_sa(now, state, false);
        }
        // The data plane holds these Child SAs already; nothing is sent.
        while fresh.poll_event().is_some() {}
        while fresh.poll_transmit().is_some() {}
        *io.endpoint = fresh;
        self.counters.demotions += 1;
        tracing::warn!(
            ike_sas = count,
            "cluster IKE: this node left the dispatch view; its IKE SAs are standby copies now"
        );
    }

    /// Configured connections whose peer's segment this node owns are
    /// initiated once the view settled, while no node holds an IKE SA of
    /// them.
    fn start_connections(&mut self, now: Instant, io: &mut Io<'_>) {
        if !self.in_view || self.starts.is_empty() || now < self.view_since + START_SETTLE {
            return;
        }
        let due: Vec<String> = self
            .starts
            .iter()
            .filter(|(_, peer)| new_sa_owner(&self.view, *peer) == Some(self.local))
            .filter(|(name, _)| {
                self.start_attempts
                    .get(name)
                    .is_none_or(|at| now >= *at + START_RETRY)
            })
            .map(|(name, _)| name.clone())
            .collect();
        if due.is_empty() {
            return;
        }
        let live = io.endpoint.ike_sas();
        let standby: Vec<String> = io
            .endpoint
            .imported_ike_sas()
            .into_iter()
            .map(|s| s.connection.clone())
            .collect();
        for name in due {
            let held = live.iter().any(|sa| sa.connection == name) || standby.contains(&name);
            self.start_attempts.insert(name.clone(), now);
            if held {
                continue;
            }
            self.counters.starts += 1;
            tracing::info!(connection = %name, "cluster IKE: initiating (this node owns the peer's segment)");
            if let Err(e) = io.endpoint.initiate(now, &name) {
                tracing::warn!(connection = %name, error = %e, "cluster IKE: initiation refused");
            }
        }
        self.flush(now, io, true);
    }

    /// The counters, for `phalanxctl counters`/`cluster` and metrics.
    pub fn counters(&self) -> ClusterIkeCounters {
        self.counters
    }

    /// The counters by name, with what waits now and the bridge's drops.
    pub fn named(&self) -> Vec<NamedCounter> {
        let c = &self.counters;
        let (to_cluster, from_cluster) = self.bridge.dropped();
        NamedCounter::prefixed(
            "cluster_ike_",
            &[
                ("not_owner", c.not_owner),
                ("admitted", c.admitted),
                ("replicated", c.replicated),
                ("held", c.held),
                ("released", c.released),
                ("holding", self.hold.len() as u64),
                ("own_delivered", c.own_delivered),
                ("unreplicated", c.unreplicated),
                ("imported", c.imported),
                ("stale", c.stale),
                ("import_refused", c.import_refused),
                ("forgotten", c.forgotten),
                ("takeovers", c.takeovers),
                ("takeover_failures", c.takeover_failures),
                ("demotions", c.demotions),
                ("datagrams_dropped", c.datagrams_dropped),
                ("hold_overflow", c.hold_overflow),
                ("resyncs", c.resyncs),
                ("resync_states", c.resync_states),
                ("owner_conflicts", c.owner_conflicts),
                ("resumed", c.resumed),
                ("owner_demotions", c.owner_demotions),
                ("stale_owner_states", c.stale_owner_states),
                ("sas_registered", c.sas_registered),
                ("sas_removed", c.sas_removed),
                ("decode_errors", c.decode_errors),
                ("starts", c.starts),
                ("known_ike_sas", self.owners.len() as u64),
                ("bridge_dropped_out", to_cluster),
                ("bridge_delayed_in", from_cluster),
            ],
        )
    }
}

/// What the owner tells the cluster about a Child SA event.
fn registration(event: &SaEvent) -> Option<ToCluster> {
    let describe = |install: &phalanx_ike::ChildSaInstall, direction| SaDescriptor {
        direction,
        spi: install.spi,
        esn: install.esn,
        peer: install.remote,
        peer_window: install.peer_replay_window,
    };
    match event {
        SaEvent::InstallInbound(i) => Some(ToCluster::Register(describe(i, Direction::Inbound))),
        SaEvent::InstallOutbound(i) => Some(ToCluster::Register(describe(i, Direction::Outbound))),
        SaEvent::RemoveInbound { spi, .. } => Some(ToCluster::Remove {
            direction: Direction::Inbound,
            spi: *spi,
        }),
        SaEvent::RemoveOutbound { spi, .. } => Some(ToCluster::Remove {
            direction: Direction::Outbound,
            spi: *spi,
        }),
        _ => None,
    }
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;
