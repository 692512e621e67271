//! An in-memory cluster: a group transport with one agreed total order
//! (what Corosync CPG gives), and a harness that runs N cluster nodes with
//! their data paths on a virtual clock.
//!
//! ```text
//!          shared packet stream (every node sees every packet,
//!          each may miss some)
//!     +-----------+-----------+-----------+
//!     v           v           v           v
//!  [n1 path]   [n2 path]   [n3 path]   [n4 path]     NodeDataPath
//!     |  ^        |  ^        |  ^        |  ^         reports / shared state
//!  [n1 node]<->[n2 node]<->[n3 node]<->[n4 node]     ClusterNode
//!     |   heartbeats: latency, per-pair deafness |
//!     +------ MemoryGroup: one log, one order ---+   (membership changes too)
//! ```
//!
//! The group keeps one log of events; every member reads it from the
//! membership event that made it a member, in the same order, each with
//! its own delivery delay. A killed node stops sending heartbeats and
//! reading the log; the group removes it after `corosync_delay`, as
//! Corosync does once its token times out.
//!
//! Partitions, as Corosync has them: when the cluster link is cut
//! ([`MemoryGroup::cut`]) nothing more is delivered (the token is lost);
//! when the sides reform ([`MemoryGroup::reform`]) each side gets its own
//! membership event and then the messages its members sent, each side in
//! its own order; a cut healed before that delivers everything to all as
//! if nothing happened. [`MemoryGroup::merge`] joins the sides again with
//! one membership event. The harness drives this with
//! [`ClusterHarness::partition`] and [`ClusterHarness::reconnect`], which
//! also cut and restore the heartbeats between the sides (every node still
//! sees every packet: only the cluster link is cut).
//!
//! The harness records every sequence number sent and checks, as it goes,
//! the cluster's safety properties: no `(SPI, sequence number)` and no
//! `(SPI, IV)` pair twice (IV = node id << 48 | sequence number), every
//! number inside a granted block and of the sender's class, every node's
//! grants equal and disjoint, and no node owning traffic before it is
//! ready. Violations are collected in [`Record::violations`].
//!
//! A stalled node ([`ClusterHarness::stall`]) runs nothing for a while:
//! its heartbeats, log deliveries and packets queue. When it runs again
//! its data path works off the packets that arrived meanwhile, with
//! their arrival times and under the state it adopted before the stall,
//! as soon as its fence is not uncertain (at once, before its control
//! side reads anything, if the fence allows: the order that gives it the
//! least knowledge), and at the latest after the fence's wait limit, as
//! the daemon's workers do; packets that arrive until then queue behind,
//! and it adopts no new state before, but for the inbound packets that
//! arrived after the stall: those it decides under the state its control
//! side holds then, as the daemon's workers do. What its owners accept
//! then is in [`Record::late_inbound`].
//!
//! Like the cores, nothing here reads the clock but once, for the start.

use core::net::{IpAddr, Ipv4Addr};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::time::{Duration, Instant};

use phalanx_cluster::{
    ClusterConfig, ClusterEvent, ClusterNode, Direction, DispatchScheme, GroupEvent,
    GroupTransport, InboundDecision, LeaseBlock, NodeDataPath, NodeId, OutboundDecision,
    QuorumPolicy, SaDescriptor, TransportError,
};
use phalanx_sa::ReplayWindow;

/// One entry of the group's log.
#[derive(Clone, Debug)]
struct Entry {
    at: Instant,
    event: GroupEvent,
    /// Only these members read it (one side of a partition); `None`: all.
    to: Option<BTreeSet<NodeId>>,
}

/// The shared log of a group.
#[derive(Debug)]
struct Bus {
    now: Instant,
    log: Vec<Entry>,
    members: BTreeSet<NodeId>,
    /// Next entry each member reads.
    cursors: BTreeMap<NodeId, usize>,
    delays: BTreeMap<NodeId, Duration>,
    /// Cut, not reformed yet: entries from this index on are held.
    held: Option<usize>,
    /// Removals while held, announced when the cut heals.
    held_removals: bool,
    /// Reformed sides of a partition.
    sides: Option<Vec<BTreeSet<NodeId>>>,
}

impl Bus {
    /// Append an event at the current time for `to` (all: `None`).
    fn push(&mut self, event: GroupEvent, to: Option<BTreeSet<NodeId>>) {
        let at = self.now;
        self.log.push(Entry { at, event, to });
    }

    /// The side `node` is on, when partitioned.
    fn side_of(&self, node: NodeId) -> Option<&BTreeSet<NodeId>> {
        self.sides
            .as_ref()?
            .iter()
            .find(|side| side.contains(&node))
    }

    /// A membership event: everybody's, or the side's of `node`.
    fn membership_for(&mut self, node: NodeId) {
        if self.held.is_some() {
            self.held_removals = true;
            return;
        }
        let side = self.side_of(node).cloned();
        let members: Vec<NodeId> = match &side {
            Some(side) => side
                .iter()
                .copied()
                .filter(|n| self.members.contains(n))
                .collect(),
            None => self.members.iter().copied().collect(),
        };
        self.push(GroupEvent::Membership { members }, side);
    }

    /// The next entry `node` reads from `cursor` on (skipping the other
    /// sides' and stopping at held ones).
    fn next_for(&self, node: NodeId, mut cursor: usize) -> (usize, Option<&Entry>) {
        let end = self.held.unwrap_or(self.log.len()).min(self.log.len());
        while cursor < end {
            let entry = &self.log[cursor];
            if entry.to.as_ref().is_none_or(|to| to.contains(&node)) {
                return (cursor, Some(entry));
            }
            cursor += 1;
        }
        (cursor, None)
    }
}

/// An in-memory closed process group: totally ordered multicast with
/// agreed membership. Cloning gives another handle to the same group.
#[derive(Clone, Debug)]
pub struct MemoryGroup {
    bus: Rc<RefCell<Bus>>,
}

impl MemoryGroup {
    /// An empty group at `now`.
    pub fn new(now: Instant) -> MemoryGroup {
        MemoryGroup {
            bus: Rc::new(RefCell::new(Bus {
                now,
                log: Vec::new(),
                members: BTreeSet::new(),
                cursors: BTreeMap::new(),
                delays: BTreeMap::new(),
                held: None,
                held_removals: false,
                sides: None,
            })),
        }
    }

    /// Move the group's clock (deliveries become visible with it).
    pub fn set_now(&self, now: Instant) {
        self.bus.borrow_mut().now = now;
    }

    /// Members join at once: one membership event (while partitioned,
    /// they join the first side).
    pub fn join(&self, nodes: &[NodeId]) -> Vec<MemoryTransport> {
        let mut bus = self.bus.borrow_mut();
        let at = bus.log.len();
        for &node in nodes {
            bus.members.insert(node);
            bus.cursors.insert(node, at);
            if let Some(first) = bus.sides.as_mut().and_then(|s| s.first_mut()) {
                first.insert(node);
            }
        }
        if let Some(&node) = nodes.first() {
            bus.membership_for(node);
        }
        nodes
            .iter()
            .map(|&local| MemoryTransport {
                bus: Rc::clone(&self.bus),
                local,
            })
            .collect()
    }

    /// A member leaves (Corosync removed it): one membership event; it
    /// reads nothing more.
    pub fn remove(&self, node: NodeId) {
        let mut bus = self.bus.borrow_mut();
        if !bus.members.remove(&node) {
            return;
        }
        bus.cursors.remove(&node);
        bus.membership_for(node);
        if let Some(sides) = &mut bus.sides {
            for side in sides.iter_mut() {
                side.remove(&node);
            }
        }
    }

    /// The cluster link is cut: nothing more is delivered until the sides
    /// reform (or the cut heals).
    pub fn cut(&self) {
        let mut bus = self.bus.borrow_mut();
        if bus.held.is_none() {
            bus.held = Some(bus.log.len());
        }
    }

    /// Corosync reforms one ring per side: each side gets its membership,
    /// then the messages its members sent since the cut, in their order.
    /// Members in no side form one more side.
    pub fn reform(&self, sides: &[Vec<NodeId>]) {
        let mut bus = self.bus.borrow_mut();
        let mut sides: Vec<BTreeSet<NodeId>> = sides
            .iter()
            .map(|side| {
                side.iter()
                    .copied()
                    .filter(|n| bus.members.contains(n))
                    .collect()
            })
            .filter(|side: &BTreeSet<NodeId>| !side.is_empty())
            .collect();
        let rest: BTreeSet<NodeId> = bus
            .members
            .iter()
            .copied()
            .filter(|n| !sides.iter().any(|side| side.contains(n)))
            .collect();
        if !rest.is_empty() {
            sides.push(rest);
        }
        let start = bus.held.take().unwrap_or(bus.log.len()).min(bus.log.len());
        let held = bus.log.split_off(start);
        bus.held_removals = false;
        for side in &sides {
            let members = side.iter().copied().collect();
            bus.push(GroupEvent::Membership { members }, Some(side.clone()));
        }
        for entry in held {
            if let GroupEvent::Delivered { from, .. } = &entry.event {
                if let Some(side) = sides.iter().find(|side| side.contains(from)) {
                    bus.push(entry.event.clone(), Some(side.clone()));
                }
            }
        }
        bus.sides = Some(sides);
    }

    /// A cut healed before the sides reformed: everything held goes to
    /// everyone, in its order, as if nothing had happened.
    pub fn unhold(&self) {
        let mut bus = self.bus.borrow_mut();
        bus.held = None;
        if std::mem::take(&mut bus.held_removals) {
            let members = bus.members.iter().copied().collect();
            bus.push(GroupEvent::Membership { members }, None);
        }
    }

    /// Corosync merges the sides into one ring: one membership event for
    /// all.
    pub fn merge(&self) {
        let mut bus = self.bus.borrow_mut();
        if bus.sides.take().is_none() {
            return;
        }
        let members = bus.members.iter().copied().collect();
        bus.push(GroupEvent::Membership { members }, None);
    }

    /// Whether the group is partitioned (cut or reformed into sides).
    pub fn is_partitioned(&self) -> bool {
        let bus = self.bus.borrow();
        bus.held.is_some() || bus.sides.is_some()
    }

    /// The current members.
    pub fn members(&self) -> Vec<NodeId> {
        self.bus.borrow().members.iter().copied().collect()
    }

    /// Deliver to `node` this long after each event was ordered.
    pub fn set_delay(&self, node: NodeId, delay: Duration) {
        self.bus.borrow_mut().delays.insert(node, delay);
    }

    /// Whether some member has not read every event meant for it yet
    /// (or a cut holds some).
    pub fn pending(&self) -> bool {
        let bus = self.bus.borrow();
        let held = bus.held.is_some_and(|h| h < bus.log.len());
        held || bus
            .cursors
            .iter()
            .any(|(&node, &c)| bus.next_for(node, c).1.is_some())
    }
}

/// One member's end of a [`MemoryGroup`].
#[derive(Debug)]
pub struct MemoryTransport {
    bus: Rc<RefCell<Bus>>,
    local: NodeId,
}

impl GroupTransport for MemoryTransport {
    fn local(&self) -> NodeId {
        self.local
    }

    fn multicast(&mut self, message: &[u8]) -> Result<(), TransportError> {
        let mut bus = self.bus.borrow_mut();
        if !bus.members.contains(&self.local) {
            return Err(TransportError::Closed);
        }
        let to = match bus.held {
            Some(_) => None,
            None => bus.side_of(self.local).cloned(),
        };
        let event = GroupEvent::Delivered {
            from: self.local,
            message: message.to_vec(),
        };
        bus.push(event, to);
        Ok(())
    }

    fn poll(&mut self) -> Option<GroupEvent> {
        let mut bus = self.bus.borrow_mut();
        let cursor = *bus.cursors.get(&self.local)?;
        let delay = bus.delays.get(&self.local).copied().unwrap_or_default();
        let (cursor, entry) = bus.next_for(self.local, cursor);
        let Some(entry) = entry else {
            bus.cursors.insert(self.local, cursor);
            return None;
        };
        if entry.at + delay > bus.now {
            return None;
        }
        let event = entry.event.clone();
        bus.cursors.insert(self.local, cursor + 1);
        Some(event)
    }
}

/// The harness's parameters.
#[derive(Clone, Copy, Debug)]
pub struct HarnessConfig {
    /// Nodes 1..=n found the cluster.
    pub nodes: u32,
    /// The dispatch scheme.
    pub scheme: DispatchScheme,
    /// Lease block length.
    pub lease_len: u64,
    /// Checkpoint period in packets.
    pub checkpoint_every: u64,
    /// Heartbeat interval.
    pub heartbeat_interval: Duration,
    /// Silence before suspicion.
    pub suspect_after: Duration,
    /// From a kill to Corosync's membership without the node.
    pub corosync_delay: Duration,
    /// Virtual time between two packets of the stream.
    pub packet_gap: Duration,
    /// Heartbeat latency.
    pub heartbeat_latency: Duration,
    /// Replay window of the inbound SAs' models.
    pub replay_window: u32,
    /// Every node's quorum policy. The default is `Off` (every side goes
    /// on, as before quorum existed), for the data-plane tests that kill
    /// one node of two; the cluster's own tests ask for `Majority`, the
    /// daemon's default.
    pub quorum: QuorumPolicy,
}

impl Default for HarnessConfig {
    fn default() -> HarnessConfig {
        HarnessConfig {
            nodes: 3,
            scheme: DispatchScheme::PacketRoundRobin,
            lease_len: 4096,
            checkpoint_every: 256,
            heartbeat_interval: Duration::from_millis(5),
            suspect_after: Duration::from_millis(30),
            corosync_delay: Duration::from_millis(300),
            packet_gap: Duration::from_micros(50),
            heartbeat_latency: Duration::from_micros(100),
            replay_window: 1024,
            quorum: QuorumPolicy::Off,
        }
    }
}

/// What the harness observed; `violations` must stay empty.
#[derive(Debug, Default)]
pub struct Record {
    /// `(spi, seq)` -> (sender, packet).
    pub sent: HashMap<(u32, u64), (NodeId, u64)>,
    /// `(spi, iv)` pairs sent.
    pub ivs: BTreeSet<(u32, u64)>,
    /// Every block granted, per SPI and start, as the first node saw it.
    pub grants: BTreeMap<u32, BTreeMap<u64, LeaseBlock>>,
    /// Owned outbound packets dropped for want of a lease.
    pub no_lease: u64,
    /// Safety violations, in words.
    pub violations: Vec<String>,
    /// Inbound packets a stalled node's replay window accepted when it
    /// ran again: `(spi, seq, node)`.
    pub late_inbound: Vec<(u32, u64, NodeId)>,
    /// Outbound packets a stalled node sent when it ran again:
    /// `(packet, node, seq)`.
    pub late_outbound: Vec<(u64, NodeId, u64)>,
}

/// A packet that reached a stalled node, in arrival order.
#[derive(Clone, Copy, Debug)]
enum Queued {
    Inbound {
        spi: u32,
        seq: u64,
        arrival: Instant,
    },
    Outbound {
        spi: u32,
        flow: u64,
        len: u32,
        packet: u64,
        arrival: Instant,
    },
}

impl Queued {
    fn arrival(&self) -> Instant {
        match *self {
            Queued::Inbound { arrival, .. } | Queued::Outbound { arrival, .. } => arrival,
        }
    }
}

/// The outcome of one outbound packet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The packet's number in the stream.
    pub packet: u64,
    /// Who sent it with which sequence number.
    pub senders: Vec<(NodeId, u64)>,
    /// Who owned it but had no leased number.
    pub no_lease: Vec<NodeId>,
}

/// The outcome of one inbound packet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InboundOutcome {
    /// Owners whose replay window accepted it.
    pub accepted: Vec<NodeId>,
    /// Owners whose replay window refused it.
    pub refused: Vec<NodeId>,
}

/// One node of the harness.
#[derive(Debug)]
struct Member {
    node: ClusterNode,
    path: NodeDataPath,
    transport: MemoryTransport,
    alive: bool,
    /// Heartbeats from these nodes are dropped until the instant.
    deaf: BTreeMap<NodeId, Instant>,
    /// Packets still to miss.
    miss: u64,
    /// Extra latency of the heartbeats this node receives.
    heartbeat_delay: Duration,
    windows: BTreeMap<u32, ReplayWindow>,
    events: Vec<ClusterEvent>,
    /// Runs nothing until then (see the module docs).
    stalled_until: Option<Instant>,
    /// What arrived during the stall.
    backlog: Vec<Queued>,
}

impl Member {
    /// It runs nothing.
    fn stalled(&self, now: Instant) -> bool {
        self.stalled_until.is_some_and(|until| now < until)
    }

    /// Its data path has not worked off what arrived during a stall:
    /// new packets queue behind.
    fn queueing(&self, now: Instant) -> bool {
        self.stalled(now) || !self.backlog.is_empty()
    }

    /// Runs inbound packet `seq` of `spi`, arrived at `arrival`, through
    /// the data path and, if owned, the replay window model: `None` when
    /// not owned, else whether the window accepted it. A packet of a
    /// stall's backlog (`late`) is judged under the state adopted before
    /// the stall, whatever the node learnt since.
    fn inbound(
        &mut self,
        id: NodeId,
        (spi, seq, arrival): (u32, u64, Instant),
        late: bool,
        violations: &mut Vec<String>,
    ) -> Option<bool> {
        let decision = self.path.inbound(spi, PEER, seq as u32, 100, arrival);
        if decision != InboundDecision::Process {
            return None;
        }
        if !late && !self.node.is_ready() {
            violations.push(format!("{id} processed inbound {seq} before it was ready"));
        }
        let mut marks = Vec::new();
        self.path.drain_takeover_marks(spi, &mut marks);
        let window = self.windows.get_mut(&spi)?;
        for mark in marks {
            // "Already seen" and "too old" are expected here.
            let _ = window.commit(mark);
        }
        // With ESN the ICV covers the inferred high half (RFC 4303
        // §2.2.1): a number inferred wrong fails authentication.
        Some(window.check(seq as u32) == Ok(seq) && window.commit(seq).is_ok())
    }
}

/// A heartbeat on its way.
#[derive(Clone, Debug)]
struct Flight {
    at: Instant,
    from: NodeId,
    to: NodeId,
    bytes: Vec<u8>,
}

/// N cluster nodes and their data paths on a virtual clock. See the module
/// docs.
#[derive(Debug)]
pub struct ClusterHarness {
    config: HarnessConfig,
    now: Instant,
    group: MemoryGroup,
    members: BTreeMap<NodeId, Member>,
    flights: Vec<Flight>,
    removals: Vec<(Instant, NodeId)>,
    /// The cluster link is cut between these sides (heartbeats dropped).
    sides: Option<Vec<Vec<NodeId>>>,
    /// When Corosync reforms the cut sides into rings of their own.
    reform_at: Option<Instant>,
    /// When Corosync merges the reformed sides again.
    merge_at: Option<Instant>,
    sas: Vec<SaDescriptor>,
    packets: u64,
    /// What happened so far.
    pub record: Record,
}

/// The peer gateway's address in the harness.
pub const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));

impl ClusterHarness {
    /// Nodes 1..=`config.nodes` join at once and found the cluster.
    pub fn new(config: HarnessConfig) -> ClusterHarness {
        let now = Instant::now();
        let mut harness = ClusterHarness {
            config,
            now,
            group: MemoryGroup::new(now),
            members: BTreeMap::new(),
            flights: Vec::new(),
            removals: Vec::new(),
            sides: None,
            reform_at: None,
            merge_at: None,
            sas: Vec::new(),
            packets: 0,
            record: Record::default(),
        };
        let ids: Vec<NodeId> = (1..=config.nodes).map(NodeId).collect();
        let transports = harness.group.join(&ids);
        for transport in transports {
            harness.add_member(transport);
        }
        harness
    }

    fn add_member(&mut self, transport: MemoryTransport) {
        let local = transport.local();
        let config = ClusterConfig {
            local,
            scheme: self.config.scheme,
            heartbeat_interval: self.config.heartbeat_interval,
            suspect_after: self.config.suspect_after,
            lease_len: self.config.lease_len,
            checkpoint_every: self.config.checkpoint_every,
        };
        let mut node = ClusterNode::new(config, self.now);
        node.set_quorum_policy(self.config.quorum);
        for &sa in &self.sas {
            node.register_sa(self.now, sa);
        }
        let mut member = Member {
            node,
            path: NodeDataPath::new(local, self.config.scheme),
            transport,
            alive: true,
            deaf: BTreeMap::new(),
            miss: 0,
            heartbeat_delay: Duration::ZERO,
            windows: BTreeMap::new(),
            events: Vec::new(),
            stalled_until: None,
            backlog: Vec::new(),
        };
        for sa in self
            .sas
            .iter()
            .filter(|sa| sa.direction == Direction::Inbound)
        {
            member.windows.insert(sa.spi, self.window(sa.esn));
        }
        self.members.insert(local, member);
    }

    fn window(&self, esn: bool) -> ReplayWindow {
        // The window size is a harness constant in the valid range.
        ReplayWindow::new(self.config.replay_window, esn).expect("valid replay window")
    }

    /// The virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The group.
    pub fn group(&self) -> &MemoryGroup {
        &self.group
    }

    /// Share an SA, as every node's configuration would (registered on
    /// every live node and on nodes that join later).
    pub fn add_sa(&mut self, direction: Direction, spi: u32, esn: bool) {
        let sa = SaDescriptor {
            direction,
            spi,
            esn,
            peer: PEER,
            // A Phalanx peer: its window takes the nodes' skew.
            peer_window: phalanx_cluster::limits::SPREAD_MIN_PEER_WINDOW,
        };
        self.sas.push(sa);
        let now = self.now;
        let window = self.window(esn);
        for member in self.members.values_mut().filter(|m| m.alive) {
            member.node.register_sa(now, sa);
            if direction == Direction::Inbound {
                member.windows.insert(spi, window.clone());
            }
        }
        self.pump();
    }

    /// The live nodes.
    pub fn alive(&self) -> Vec<NodeId> {
        self.members
            .iter()
            .filter(|(_, m)| m.alive)
            .map(|(&id, _)| id)
            .collect()
    }

    /// A node's cluster side.
    pub fn node(&self, id: NodeId) -> Option<&ClusterNode> {
        self.members.get(&id).map(|m| &m.node)
    }

    /// A node's data path.
    pub fn path(&self, id: NodeId) -> Option<&NodeDataPath> {
        self.members.get(&id).map(|m| &m.path)
    }

    /// The events a node emitted so far.
    pub fn events(&self, id: NodeId) -> &[ClusterEvent] {
        self.members.get(&id).map_or(&[], |m| &m.events)
    }

    /// `kill -9`: no more heartbeats, log reading or packets; Corosync
    /// removes it after `corosync_delay`.
    pub fn kill(&mut self, id: NodeId) {
        if let Some(member) = self.members.get_mut(&id) {
            member.alive = false;
            self.removals
                .push((self.now + self.config.corosync_delay, id));
        }
    }

    /// `node` stops running for `duration` (SIGSTOP, or a starved CPU):
    /// see the module docs.
    pub fn stall(&mut self, node: NodeId, duration: Duration) {
        if let Some(member) = self.members.get_mut(&node) {
            member.stalled_until = Some(self.now + duration);
        }
    }

    /// `node` drops heartbeats from `from` for `duration` (a false
    /// suspicion when longer than `suspect_after`).
    pub fn deafen(&mut self, node: NodeId, from: NodeId, duration: Duration) {
        if let Some(member) = self.members.get_mut(&node) {
            member.deaf.insert(from, self.now + duration);
        }
    }

    /// Cut the cluster link between `sides` (nodes in none form one more
    /// side): heartbeats stop crossing at once, the log delivers nothing
    /// until Corosync reforms one ring per side after `corosync_delay`.
    /// Every node still sees every packet.
    pub fn partition(&mut self, sides: &[Vec<NodeId>]) {
        let mut sides: Vec<Vec<NodeId>> = sides.to_vec();
        let rest: Vec<NodeId> = self
            .members
            .keys()
            .copied()
            .filter(|n| !sides.iter().any(|side| side.contains(n)))
            .collect();
        if !rest.is_empty() {
            sides.push(rest);
        }
        self.sides = Some(sides);
        self.merge_at = None;
        if !self.group.is_partitioned() {
            self.group.cut();
            self.reform_at = Some(self.now + self.config.corosync_delay);
        }
    }

    /// Restore the cluster link: heartbeats cross again; a cut the group
    /// had not reformed yet heals as if nothing happened, reformed sides
    /// merge after `corosync_delay`.
    pub fn reconnect(&mut self) {
        if self.sides.take().is_none() {
            return;
        }
        if self.reform_at.take().is_some() {
            self.group.unhold();
        } else {
            self.merge_at = Some(self.now + self.config.corosync_delay);
        }
    }

    /// Whether the group is (still) partitioned.
    pub fn partitioned(&self) -> bool {
        self.group.is_partitioned()
    }

    /// `node` misses the next `packets` packets of the stream.
    pub fn miss(&mut self, node: NodeId, packets: u64) {
        if let Some(member) = self.members.get_mut(&node) {
            member.miss += packets;
        }
    }

    /// Delay the heartbeats `node` receives by `delay` more (so survivors
    /// suspect a failed node at different times).
    pub fn set_heartbeat_delay(&mut self, node: NodeId, delay: Duration) {
        if let Some(member) = self.members.get_mut(&node) {
            member.heartbeat_delay = delay;
        }
    }

    /// Delay the log's deliveries to `node`.
    pub fn set_log_delay(&mut self, node: NodeId, delay: Duration) {
        self.group.set_delay(node, delay);
    }

    /// A new node (or a restarted one: a fresh process with the same id,
    /// once the group removed the old one) joins.
    pub fn join(&mut self, id: NodeId) {
        // Corosync removes the old incarnation first; its pending removal
        // must not remove the new one.
        self.removals.retain(|&(_, old)| old != id);
        self.group.remove(id);
        self.pump();
        let transport = self.group.join(&[id]).remove(0);
        self.add_member(transport);
        self.pump();
    }

    /// Run with no packets until every live node is ready (at most
    /// `limit`); true when they are.
    pub fn run_until_ready(&mut self, limit: Duration) -> bool {
        let end = self.now + limit;
        while self.now < end {
            let ready = self
                .members
                .values()
                .filter(|m| m.alive)
                .all(|m| m.node.is_ready() && m.path.is_active());
            if ready {
                return true;
            }
            self.run_for(Duration::from_millis(1));
        }
        false
    }

    /// Advance the virtual clock by `duration`, with no packets.
    pub fn run_for(&mut self, duration: Duration) {
        let end = self.now + duration;
        let step = (self.config.heartbeat_interval / 5).max(Duration::from_micros(100));
        while self.now < end {
            self.now = (self.now + step).min(end);
            self.pump();
        }
    }

    /// One outbound packet of `spi` with inner flow `flow`, seen by every
    /// live node (but those missing it).
    pub fn outbound(&mut self, spi: u32, flow: u64, len: u32) -> Outcome {
        self.packets += 1;
        let packet = self.packets;
        let fingerprint = mix(packet);
        let mut outcome = Outcome {
            packet,
            ..Outcome::default()
        };
        let now = self.now;
        for (&id, member) in self.members.iter_mut().filter(|(_, m)| m.alive) {
            if member.miss > 0 {
                member.miss -= 1;
                continue;
            }
            if member.queueing(now) {
                member.backlog.push(Queued::Outbound {
                    spi,
                    flow,
                    len,
                    packet,
                    arrival: now,
                });
                continue;
            }
            match member.path.outbound(spi, PEER, flow, len, fingerprint) {
                OutboundDecision::Send { seq } => {
                    if !member.node.is_ready() {
                        self.record
                            .violations
                            .push(format!("{id} sent packet {packet} before it was ready"));
                    }
                    outcome.senders.push((id, seq));
                }
                OutboundDecision::NoLease => outcome.no_lease.push(id),
                OutboundDecision::NotOwned | OutboundDecision::UnknownSa => {}
            }
        }
        for &(id, seq) in &outcome.senders {
            self.record_send(spi, id, seq, packet);
        }
        self.record.no_lease += outcome.no_lease.len() as u64;
        self.tick_packet();
        outcome
    }

    /// Check and record one sequence number sent.
    fn record_send(&mut self, spi: u32, id: NodeId, seq: u64, packet: u64) {
        if let Some((other, earlier)) = self.record.sent.insert((spi, seq), (id, packet)) {
            self.record.violations.push(format!(
                "(spi {spi:#x}, seq {seq}) sent twice: {other} packet {earlier}, {id} packet {packet}"
            ));
        }
        let iv = u64::from(id.0) << 48 | (seq & ((1 << 48) - 1));
        if !self.record.ivs.insert((spi, iv)) {
            self.record
                .violations
                .push(format!("(spi {spi:#x}, iv {iv:#x}) sent twice"));
        }
        let allowed = self.record.grants.get(&spi).is_some_and(|blocks| {
            blocks
                .range(..=seq)
                .next_back()
                .is_some_and(|(_, b)| b.may_send(id, seq))
        });
        if !allowed {
            self.record.violations.push(format!(
                "{id} sent seq {seq} outside its class of a granted block"
            ));
        }
    }

    /// One inbound ESP packet of `spi` with number `seq`: every live node
    /// observes it, owners run it through their replay window model
    /// (after marking the takeover marks).
    pub fn inbound(&mut self, spi: u32, seq: u64) -> InboundOutcome {
        let mut outcome = InboundOutcome::default();
        let now = self.now;
        for (&id, member) in self.members.iter_mut().filter(|(_, m)| m.alive) {
            if member.miss > 0 {
                member.miss -= 1;
                continue;
            }
            if member.queueing(now) {
                member.backlog.push(Queued::Inbound {
                    spi,
                    seq,
                    arrival: now,
                });
                continue;
            }
            match member.inbound(id, (spi, seq, now), false, &mut self.record.violations) {
                Some(true) => outcome.accepted.push(id),
                Some(false) => outcome.refused.push(id),
                None => {}
            }
        }
        self.tick_packet();
        outcome
    }

    fn tick_packet(&mut self) {
        self.now += self.config.packet_gap;
        self.pump();
    }

    /// Run everything due at the current time until nothing moves.
    pub fn pump(&mut self) {
        self.group.set_now(self.now);
        self.resume_stalled();
        loop {
            let mut moved = self.corosync_removals() | self.corosync_rings();
            let ids: Vec<NodeId> = self.alive();
            for id in ids {
                moved |= self.step_member(id);
            }
            moved |= self.deliver_heartbeats();
            if !moved {
                break;
            }
        }
    }

    /// Members whose stall is over work off their backlog once their
    /// fence allows (see the module docs).
    fn resume_stalled(&mut self) {
        let now = self.now;
        let mut sent = Vec::new();
        for (&id, member) in &mut self.members {
            let Some(until) = member.stalled_until.filter(|&until| until <= now) else {
                continue;
            };
            let shared = member.node.shared();
            let waits = shared.fence().is_some_and(|fence| {
                fence.uncertain(now) && now.saturating_duration_since(until) < fence.wait_limit()
            });
            if waits {
                continue;
            }
            member.stalled_until = None;
            // Under the state adopted before the stall, but for inbound
            // packets that arrived after it, under the state adopted now
            // (see the module docs); the fence read live.
            let (mut backlog, later): (Vec<Queued>, Vec<Queued>) =
                std::mem::take(&mut member.backlog)
                    .into_iter()
                    .partition(|q| matches!(q, Queued::Outbound { .. }) || q.arrival() < until);
            let adopt_at = backlog.len();
            backlog.extend(later);
            for (i, queued) in backlog.into_iter().enumerate() {
                if !member.alive {
                    break;
                }
                if i == adopt_at {
                    member.path.update(&member.node.shared());
                }
                match queued {
                    Queued::Inbound { spi, seq, arrival } => {
                        let violations = &mut self.record.violations;
                        if member.inbound(id, (spi, seq, arrival), true, violations) == Some(true) {
                            self.record.late_inbound.push((spi, seq, id));
                        }
                    }
                    Queued::Outbound {
                        spi,
                        flow,
                        len,
                        packet,
                        ..
                    } => {
                        let decision = member.path.outbound(spi, PEER, flow, len, mix(packet));
                        if let OutboundDecision::Send { seq } = decision {
                            sent.push((spi, id, seq, packet));
                        }
                    }
                }
            }
        }
        for (spi, id, seq, packet) in sent {
            self.record_send(spi, id, seq, packet);
            self.record.late_outbound.push((packet, id, seq));
        }
    }

    /// Corosync reforms or merges rings when due.
    fn corosync_rings(&mut self) -> bool {
        let now = self.now;
        if self.reform_at.is_some_and(|at| at <= now) {
            self.reform_at = None;
            let sides = self.sides.clone().unwrap_or_default();
            self.group.reform(&sides);
            return true;
        }
        if self.merge_at.is_some_and(|at| at <= now) {
            self.merge_at = None;
            self.group.merge();
            return true;
        }
        false
    }

    fn corosync_removals(&mut self) -> bool {
        let now = self.now;
        let due: Vec<NodeId> = self
            .removals
            .iter()
            .filter(|(at, _)| *at <= now)
            .map(|&(_, id)| id)
            .collect();
        self.removals.retain(|(at, _)| *at > now);
        for &id in &due {
            self.group.remove(id);
        }
        !due.is_empty()
    }

    /// One round of one member's I/O; true when something moved.
    fn step_member(&mut self, id: NodeId) -> bool {
        let now = self.now;
        let latency = self.config.heartbeat_latency;
        let peers: Vec<(NodeId, Duration)> = self
            .members
            .iter()
            .filter(|(&p, _)| p != id)
            .map(|(&p, m)| (p, m.heartbeat_delay))
            .collect();
        let Some(member) = self.members.get_mut(&id) else {
            return false;
        };
        if member.stalled(now) {
            return false;
        }
        let mut moved = false;
        if member.node.poll_timeout().is_some_and(|t| t <= now) {
            member.node.handle_timeout(now);
        }
        while let Some(bytes) = member.node.poll_heartbeat(now) {
            for &(to, delay) in &peers {
                self.flights.push(Flight {
                    at: now + latency + delay,
                    from: id,
                    to,
                    bytes: bytes.clone(),
                });
            }
        }
        // Counter checkpoints also travel the heartbeat channel.
        while let Some(bytes) = member.node.poll_datagram() {
            for &(to, delay) in &peers {
                self.flights.push(Flight {
                    at: now + latency + delay,
                    from: id,
                    to,
                    bytes: bytes.clone(),
                });
            }
        }
        while let Some(message) = member.node.poll_group() {
            // A node the group removed cannot send; it learns so from the
            // membership it reads.
            let _ = member.transport.multicast(&message);
            moved = true;
        }
        while let Some(event) = member.transport.poll() {
            match event {
                GroupEvent::Delivered { from, message } => {
                    member.node.handle_delivery(now, from, &message)
                }
                GroupEvent::Membership { members } => member.node.handle_membership(now, &members),
            }
            moved = true;
        }
        while let Some(report) = member.path.poll_report() {
            member.node.handle_report(now, report);
            moved = true;
        }
        if member.backlog.is_empty() {
            member.path.update(&member.node.shared());
        }
        while let Some(event) = member.node.poll_event() {
            if let ClusterEvent::LeaseGranted(grant) = &event {
                record_grant(&mut self.record, id, grant.spi, &grant.block);
            }
            member.events.push(event);
        }
        moved
    }

    /// Hand every heartbeat due to its (live, listening) receiver.
    fn deliver_heartbeats(&mut self) -> bool {
        let now = self.now;
        let (due, later): (Vec<Flight>, Vec<Flight>) =
            self.flights.drain(..).partition(|f| f.at <= now);
        self.flights = later;
        let mut moved = false;
        for flight in due {
            if self.members.get(&flight.to).is_some_and(|m| m.stalled(now)) {
                // Queued in its socket until it runs again.
                self.flights.push(flight);
                continue;
            }
            let apart = self.sides.as_ref().is_some_and(|sides| {
                !sides
                    .iter()
                    .any(|side| side.contains(&flight.from) && side.contains(&flight.to))
            });
            let Some(member) = self.members.get_mut(&flight.to) else {
                continue;
            };
            if apart {
                continue;
            }
            let deaf = member
                .deaf
                .get(&flight.from)
                .is_some_and(|&until| now < until);
            if member.alive && !deaf {
                member
                    .node
                    .handle_heartbeat(now, flight.from, &flight.bytes);
                moved = true;
            }
        }
        moved
    }

    /// True when the cluster is at rest: every live node ready, nobody
    /// suspected anywhere, the log read by all, and every outbound
    /// counter equal on every live node.
    pub fn steady(&self) -> bool {
        let alive: Vec<&Member> = self.members.values().filter(|m| m.alive).collect();
        let settled = alive.iter().all(|m| {
            let status = m.node.status();
            m.node.is_ready() && status.suspects.is_empty() && m.path.is_active()
        });
        let views_equal = alive
            .windows(2)
            .all(|w| w[0].path.view() == w[1].path.view());
        let counters_equal = self.sas.iter().all(|sa| {
            sa.direction == Direction::Inbound
                || alive.windows(2).all(|w| {
                    w[0].path.counter(sa.spi) == w[1].path.counter(sa.spi)
                        && w[0].path.lineage(sa.spi) == w[1].path.lineage(sa.spi)
                })
        });
        let all_alive_in_group = self.group.members().len() == alive.len();
        settled && views_equal && counters_equal && !self.group.pending() && all_alive_in_group
    }
}

/// Record a grant seen by node `id`; every node must see the same block
/// at the same start, and blocks of one SA must not overlap.
fn record_grant(record: &mut Record, id: NodeId, spi: u32, block: &LeaseBlock) {
    let blocks = record.grants.entry(spi).or_default();
    if let Some(known) = blocks.get(&block.start) {
        if known != block {
            record.violations.push(format!(
                "{id} saw another block at {}: {block:?} vs {known:?}",
                block.start
            ));
        }
        return;
    }
    let before = blocks.range(..block.start).next_back().map(|(_, b)| b);
    let after = blocks.range(block.start..).next().map(|(_, b)| b);
    for other in before.into_iter().chain(after) {
        if other.overlaps(block) {
            record.violations.push(format!(
                "lease overlap on spi {spi:#x}: {block:?} and {other:?}"
            ));
        }
    }
    blocks.insert(block.start, block.clone());
}

/// A fixed 64-bit mix (splitmix64's finaliser): the packets' fingerprints.
pub fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(t: &mut MemoryTransport) -> Vec<GroupEvent> {
        std::iter::from_fn(|| t.poll()).collect()
    }

    /// One order for every member, from the membership that made it one.
    #[test]
    fn total_order_and_membership() {
        let now = Instant::now();
        let group = MemoryGroup::new(now);
        let mut ts = group.join(&[NodeId(1), NodeId(2)]);
        ts[0].multicast(b"a").unwrap();
        ts[1].multicast(b"b").unwrap();
        let mut late = group.join(&[NodeId(3)]).remove(0);
        ts[0].multicast(b"c").unwrap();
        let one = drain(&mut ts[0]);
        assert_eq!(one, drain(&mut ts[1]));
        assert_eq!(one.len(), 5);
        let three = drain(&mut late);
        assert_eq!(three, one[3..].to_vec());
        group.remove(NodeId(2));
        assert_eq!(ts[1].multicast(b"d"), Err(TransportError::Closed));
        assert!(drain(&mut ts[1]).is_empty());
        assert_eq!(drain(&mut ts[0]).len(), 1);
        assert_eq!(group.members(), vec![NodeId(1), NodeId(3)]);
    }

    /// A member with a delivery delay sees events that much later.
    #[test]
    fn delivery_delay() {
        let now = Instant::now();
        let group = MemoryGroup::new(now);
        let mut ts = group.join(&[NodeId(1), NodeId(2)]);
        group.set_delay(NodeId(2), Duration::from_millis(2));
        ts[0].multicast(b"x").unwrap();
        assert_eq!(drain(&mut ts[0]).len(), 2);
        assert!(drain(&mut ts[1]).is_empty());
        assert!(group.pending());
        group.set_now(now + Duration::from_millis(2));
        assert_eq!(drain(&mut ts[1]).len(), 2);
        assert!(!group.pending());
    }

    /// A cut holds everything; the reformed sides each get their
    /// membership, then their own members' messages; a merge is one
    /// membership for all. A cut healed before the reform loses nothing.
    #[test]
    fn partition_reform_merge() {
        let now = Instant::now();
        let group = MemoryGroup::new(now);
        let mut ts = group.join(&[NodeId(1), NodeId(2), NodeId(3)]);
        for t in &mut ts {
            drain(t);
        }
        group.cut();
        ts[0].multicast(b"a").unwrap();
        ts[2].multicast(b"c").unwrap();
        assert!(drain(&mut ts[0]).is_empty() && group.pending());
        group.reform(&[vec![NodeId(3)], vec![NodeId(1), NodeId(2)]]);
        let side = |members: &[u32]| GroupEvent::Membership {
            members: members.iter().copied().map(NodeId).collect(),
        };
        let said = |from: u32, m: &[u8]| GroupEvent::Delivered {
            from: NodeId(from),
            message: m.to_vec(),
        };
        assert_eq!(drain(&mut ts[1]), vec![side(&[1, 2]), said(1, b"a")]);
        assert_eq!(drain(&mut ts[2]), vec![side(&[3]), said(3, b"c")]);
        ts[2].multicast(b"d").unwrap();
        assert_eq!(drain(&mut ts[0]), vec![side(&[1, 2]), said(1, b"a")]);
        group.merge();
        assert_eq!(drain(&mut ts[0]), vec![side(&[1, 2, 3])]);
        assert_eq!(drain(&mut ts[2]), vec![said(3, b"d"), side(&[1, 2, 3])]);
        group.cut();
        ts[1].multicast(b"e").unwrap();
        group.unhold();
        assert_eq!(drain(&mut ts[2]), vec![said(2, b"e")]);
        assert!(!group.is_partitioned());
    }

    /// The harness founds a cluster and sends each packet once.
    #[test]
    fn harness_smoke() {
        let mut h = ClusterHarness::new(HarnessConfig::default());
        h.add_sa(Direction::Outbound, 7, false);
        assert!(h.run_until_ready(Duration::from_secs(1)));
        for i in 0..100 {
            assert_eq!(h.outbound(7, mix(i), 100).senders.len(), 1);
        }
        assert!(h.record.violations.is_empty());
        assert!(h.steady());
    }
}
