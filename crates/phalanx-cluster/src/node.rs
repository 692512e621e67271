//! One cluster node's control side, sans-IO: the replicated log, the
//! failure detector, joins, takeovers and their records.
//!
//! # Driving it (quinn style)
//! In: `handle_membership` and `handle_delivery` for the events of the
//! agreed log, in log order; `handle_heartbeat` for each heartbeat datagram;
//! `handle_report` for what the data path reports; `handle_timeout` when
//! `poll_timeout` says. Out: `poll_group` (multicast through the log),
//! `poll_heartbeat` (send to every peer), `poll_event` (log lines),
//! `shared` (the state the data path adopts; a new `Arc` whenever it
//! changed). Time is always an argument; nothing here reads a clock.
//!
//! # Life of a node
//! 1. *Fresh*: no state. It buffers every log event from the membership
//!    change that made it a member, and waits for a `StateTransfer` naming
//!    it, which the lowest member holding the state sends right after that
//!    change. The transfer says at which of the buffered events the state
//!    was taken; the node installs it and applies the rest of its buffer.
//!    If nobody holds a state (a new cluster), the lowest member founds one
//!    once the membership has been stable for a while and every member's
//!    heartbeats say it holds none (`founding` transfer; all founders own
//!    traffic at once). A node that ever heard of a state (a synced peer's
//!    heartbeat, a message only synced nodes send) never founds: if every
//!    node holding the state failed, the cluster stays down rather than
//!    start every SA's sequence space over (restarting all nodes founds
//!    anew; static SAs must then be rekeyed).
//! 2. *Synced*: it applies the log; it waits until each inbound SA's replay
//!    checkpoint arrived (so its replay windows continue from what the
//!    others observed), then multicasts `Ready`.
//! 3. *Ready*: when `Ready` is applied every member adds it to the base
//!    view, which starts a new lease generation: everyone (the joiner
//!    included) moves to fresh blocks, counters and dispatch state restart
//!    together, and the joiner owns its share from then on.
//!
//! # Failover
//! The detector suspects a silent member of the base view: the node takes
//! over its share at once (the shared state's view loses it and the data
//! path switches every outbound SA to the suspect's takeover block), and
//! multicasts `Suspect`. When the log applies it, everyone moves to a new
//! generation without the suspect (the suspect too: it then owns nothing).
//! If the suspect is heard again, the node that suspected it multicasts
//! `Rejoin`, and the log takes it back in a new generation; if Corosync
//! removes it instead, the takeover is confirmed. Each takeover is
//! recorded with its handover time: from the suspect's last heartbeat to
//! the data path's switch.
//!
//! A second suspicion while the first is not in the log yet shrinks the
//! dispatch view at once too, but the lease switch waits for the log (the
//! data path stays in its takeover block, which stays safe; counted as
//! `deferred_takeovers`).
//!
//! Inbound ESP takes over less: it is dispatched over the base view,
//! suspects included, and only a packet whose owner there is a suspect
//! still silent goes to the others (`InboundDispatcher`). A suspect heard
//! steadily again owns its inbound share at once, before the log's
//! `Rejoin`, which may wait seconds for Corosync to reform its ring after
//! a real failure: a falsely suspected node never stops processing its
//! share, so keeping it would deliver each of those packets twice. Its
//! outbound share stays with the suspecter until the log agrees (the
//! suspecter's numbers come from the takeover block, ahead of the
//! suspect's, which the peer then refuses as too old).
//!
//! # Quorum and partitions
//! A node owns traffic only while the members it hears are quorate: the
//! base view without the suspects still silent must hold a strict
//! majority of the last agreed membership in which the state was quorate,
//! or exactly half of it with its lowest node (see `log::quorum`). So the
//! minority side of a partition stands down as soon as its detector
//! suspects the others, before Corosync reforms; its log, once Corosync
//! agrees, grants nothing either. A suspect heard steadily again counts
//! at once (the log's `Rejoin` may wait for Corosync to reform its ring
//! after a real failure), so a false suspicion during a real failure
//! costs no more than its silence. Cases:
//! - `kill -9` of one node of three: two of three remain, quorate; the
//!   survivors take over at once, as without quorum.
//! - a 1 | 2 cut: the two keep going; the one stands down at once (owns
//!   nothing, sends nothing, grants nothing; `quorum_losses`, `no_quorum`
//!   and an empty view in the status).
//! - two nodes of three dying at once: the survivor holds one vote of
//!   three and stands down, and Corosync's agreed membership `[survivor]`
//!   does not change that: from inside, it cannot be told apart from the
//!   survivor being cut off while the two others go on (Corosync's
//!   votequorum refuses it for the same reason). Nodes that fail one at a
//!   time, each loss agreed by Corosync while quorate, step the base down
//!   (3 -> 2 -> the lower of the two). An operator who prefers
//!   availability sets [`QuorumPolicy::Off`] (`set_quorum_policy`).
//! - a false suspicion (the suspect still in Corosync's membership and
//!   reading the log): as before, the suspicion goes through the log and
//!   is corrected by `Rejoin`; the log refuses a suspicion that would
//!   leave a quorate state without quorum (a node cut off from the others
//!   cannot push them all out). A loaded node that stops hearing both
//!   others stands down while they are silent.
//!
//! When Corosync merges the sides again, each side's state reaches the
//! other as a state transfer; the side that was quorate (else the one
//! with the lowest node) keeps its state, the others yield and join
//! again through the ordinary state transfer, and the log first moves
//! every lease floor above what the yielding side granted.
//!
//! Known limits: a node restarted without state that joins a minority
//! side counts as a vote there once ready (as in votequorum without
//! `wait_for_all`), so a restart inside a partition can make both sides
//! quorate; a fresh node joining at the moment of a merge may install the
//! losing side's transfer first (it then yields with that side); the
//! founding rule trusts heartbeats; state transfers are
//! one message (Corosync fragments them; very large SA tables need
//! chunking); a joiner can refuse replays of packets sent before it
//! started only as far as another node's replay checkpoint told it.

mod join;
mod log;
mod publish;
mod quorum;
mod react;
mod status;

use core::net::IpAddr;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::codec::{encode, HeardPeer, Hearing, Heartbeat, Message, MAX_APP_PAYLOAD};
use crate::datapath::shared::Head;
use crate::datapath::{DataPathReport, DataPathStats, SharedState};
use crate::detector::FailureDetector;
use crate::dispatch::{Direction, DispatchScheme};
use crate::fence::FenceWriter;
use crate::lease::Grant;
use crate::limits::{
    CHECKPOINT_INTERVAL, DEFAULT_CHECKPOINT_EVERY, DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_LEASE_LEN,
    DEFAULT_SUSPECT_AFTER, EVENT_QUEUE, MAX_DATAGRAMS,
};
use crate::view::{NodeId, View};
use join::JoinState;
use log::Replicated;
use publish::Publisher;

pub use log::quorum::QuorumPolicy;
pub use quorum::QuorumStatus;
pub use status::{
    ClusterCounters, ClusterStatus, FailoverOutcome, FailoverRecord, MemberStatus, SaStatus,
};

/// A node's cluster configuration (every node must use the same scheme,
/// lease length and checkpoint period).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// This node (1..=65535, its Corosync node id).
    pub local: NodeId,
    /// The dispatch scheme.
    pub scheme: DispatchScheme,
    /// Interval between heartbeats.
    pub heartbeat_interval: Duration,
    /// Silence after which a member is suspected.
    pub suspect_after: Duration,
    /// Lease block length in sequence numbers.
    pub lease_len: u64,
    /// Outbound checkpoint period in packets.
    pub checkpoint_every: u64,
}

impl ClusterConfig {
    /// The defaults of the cluster contract for `local` and `scheme`.
    pub fn new(local: NodeId, scheme: DispatchScheme) -> ClusterConfig {
        ClusterConfig {
            local,
            scheme,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            suspect_after: DEFAULT_SUSPECT_AFTER,
            lease_len: DEFAULT_LEASE_LEN,
            checkpoint_every: DEFAULT_CHECKPOINT_EVERY,
        }
    }
}

/// An SA the cluster shares: static (from the configuration) or
/// negotiated by IKE on one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SaDescriptor {
    /// Outbound or inbound.
    pub direction: Direction,
    /// The SPI (RFC 4303 §2.1).
    pub spi: u32,
    /// Whether it uses extended sequence numbers (RFC 4303 §2.2.1).
    pub esn: bool,
    /// The remote gateway's address.
    pub peer: IpAddr,
    /// Outbound: the replay window the peer applies to this SA (RFC 4303
    /// §3.4.3), as configured; 0 when unknown. It decides whether the
    /// SA's packets may leave from several nodes
    /// ([`crate::dispatch::spreads_outbound`]).
    pub peer_window: u32,
}

/// Something that happened, for logs and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClusterEvent {
    /// This node founded a new cluster with these members.
    Founded {
        /// The founders.
        members: Vec<NodeId>,
    },
    /// This node installed a state transfer.
    StateReceived,
    /// This node sent a state transfer.
    StateTransferSent {
        /// The joining nodes.
        targets: Vec<NodeId>,
    },
    /// A member (maybe this one) declared itself ready.
    Ready {
        /// The member.
        node: NodeId,
    },
    /// This node's view lost quorum: it stands down (owns nothing).
    QuorumLost,
    /// This node's view is quorate again.
    QuorumRegained,
    /// A partition merge: this node's side keeps its state; `rival`'s
    /// side yields.
    MergeWon {
        /// The rival side's sender.
        rival: NodeId,
    },
    /// A partition merge: this node's side yields to `winner`'s; it drops
    /// its state and joins again.
    MergeLost {
        /// The winning side's sender.
        winner: NodeId,
    },
    /// The dispatch view changed.
    ViewChanged {
        /// The new view.
        view: View,
    },
    /// This node did not run for `gap` (its thread or CPU stalled): its
    /// detector judged no silence over that time (see `detector`).
    Stalled {
        /// The time between two checks of the detector.
        gap: Duration,
    },
    /// This node's failure detector suspects a member: takeover.
    Suspected {
        /// The suspect.
        node: NodeId,
        /// Its silence when suspected.
        silent_for: Duration,
    },
    /// The log took a suspicion: the suspect is out of the base view.
    SuspectedInLog {
        /// The suspect.
        node: NodeId,
        /// Who suspected it.
        by: NodeId,
    },
    /// The data path switched over after a suspicion.
    TakeoverApplied {
        /// The suspect.
        suspect: NodeId,
        /// From its last heartbeat to the switch.
        handover: Duration,
    },
    /// Corosync removed a suspect: the takeover is confirmed.
    Confirmed {
        /// The former suspect.
        node: NodeId,
    },
    /// A suspect was heard again and taken back: the suspicion was false.
    Corrected {
        /// The former suspect.
        node: NodeId,
    },
    /// A lease block was granted.
    LeaseGranted(Grant),
    /// An SA's sequence space is used up: it must be rekeyed.
    LeaseExhausted {
        /// The outbound SA.
        spi: u32,
    },
    /// An SA was registered cluster-wide.
    SaAdded(SaDescriptor),
    /// An SA was deleted cluster-wide.
    SaRemoved {
        /// Its direction.
        direction: Direction,
        /// Its SPI.
        spi: u32,
    },
}

/// Another component's payload, delivered by the agreed log
/// ([`ClusterNode::poll_app`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppMessage {
    /// The member that replicated it (this node for its own).
    pub from: NodeId,
    /// The component ([`APP_CHANNEL_IKE`](crate::codec::APP_CHANNEL_IKE)).
    pub channel: u8,
    /// Its octets, as given to [`ClusterNode::replicate`].
    pub payload: Vec<u8>,
}

/// Why [`ClusterNode::replicate`] refused a payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplicateError {
    /// This node does not hold the replicated state yet (joining): what it
    /// sent could be ordered before its own state transfer.
    NotSynced,
    /// Larger than [`MAX_APP_PAYLOAD`].
    TooLarge,
}

impl core::fmt::Display for ReplicateError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ReplicateError::NotSynced => {
                f.write_str("this node does not hold the cluster state yet")
            }
            ReplicateError::TooLarge => f.write_str("payload larger than the App message limit"),
        }
    }
}

impl std::error::Error for ReplicateError {}

/// What the last heartbeat of a peer said.
#[derive(Clone, Copy, Debug)]
struct PeerFlags {
    synced: bool,
    at: Instant,
    /// Its counter.
    counter: u64,
}

/// What this node reports of a peer in its [`Hearing`]s besides the last
/// heartbeat heard: when it last took over the peer's inbound share, and
/// how often it handed it back.
#[derive(Clone, Copy, Debug, Default)]
struct Holding {
    silent: bool,
    silent_after: u64,
    handbacks: u32,
}

/// Own progress per outbound SA, from the data path's checkpoints.
#[derive(Clone, Copy, Debug)]
struct Progress {
    lineage: u64,
    c: u64,
    at: Instant,
}

/// One cluster node. See the module docs.
#[derive(Debug)]
pub struct ClusterNode {
    config: ClusterConfig,
    /// The replicated state, once synced.
    log: Option<Replicated>,
    join: JoinState,
    /// The latest agreed membership seen, sorted.
    members: Vec<NodeId>,
    membership_since: Instant,
    detector: FailureDetector,
    /// Members this node's detector suspects (until `Rejoin` or they leave).
    local_suspects: BTreeSet<NodeId>,
    rejoin_sent: BTreeSet<NodeId>,
    peers: BTreeMap<NodeId, PeerFlags>,
    /// SAs registered on this node.
    registrations: BTreeMap<(Direction, u32), SaDescriptor>,
    outgoing: VecDeque<Vec<u8>>,
    /// Counter checkpoints for the heartbeat channel too (see
    /// [`ClusterNode::poll_datagram`]).
    datagrams: VecDeque<Vec<u8>>,
    events: VecDeque<ClusterEvent>,
    heartbeat_next: Instant,
    heartbeats_sent: u64,
    /// The gaps between heartbeats sent and the peers' reports, for the
    /// data path (see `fence`).
    fence: FenceWriter,
    /// Per peer: whether this node takes over its inbound share (for the
    /// hearing reports).
    holding: BTreeMap<NodeId, Holding>,
    tick: u64,
    tick_next: Instant,
    publisher: Publisher,
    counters: ClusterCounters,
    failovers: VecDeque<FailoverRecord>,
    progress: BTreeMap<u32, Progress>,
    datapath: DataPathStats,
    /// The newest state version the data path reported adopting while
    /// synced and not ready (see [`DataPathReport::Adopted`]).
    datapath_adopted: u64,
    /// App messages delivered, for [`ClusterNode::poll_app`].
    apps: VecDeque<AppMessage>,
    policy: QuorumPolicy,
    /// The view is not quorate: this node owns nothing.
    stood_down: bool,
}

impl ClusterNode {
    /// A fresh node at `now`: no state, not in the group yet.
    pub fn new(config: ClusterConfig, now: Instant) -> ClusterNode {
        let fence = FenceWriter::new(now, config.suspect_after);
        let shared_fence = Arc::clone(fence.fence());
        ClusterNode {
            config,
            log: None,
            join: JoinState::default(),
            members: Vec::new(),
            membership_since: now,
            detector: FailureDetector::new(config.heartbeat_interval, config.suspect_after),
            local_suspects: BTreeSet::new(),
            rejoin_sent: BTreeSet::new(),
            peers: BTreeMap::new(),
            registrations: BTreeMap::new(),
            outgoing: VecDeque::new(),
            datagrams: VecDeque::new(),
            events: VecDeque::new(),
            heartbeat_next: now,
            heartbeats_sent: 0,
            fence,
            holding: BTreeMap::new(),
            tick: 0,
            tick_next: now + CHECKPOINT_INTERVAL,
            publisher: Publisher::new(config.local, config.checkpoint_every, shared_fence),
            counters: ClusterCounters::default(),
            failovers: VecDeque::new(),
            progress: BTreeMap::new(),
            datapath: DataPathStats::default(),
            datapath_adopted: 0,
            apps: VecDeque::new(),
            policy: QuorumPolicy::default(),
            stood_down: false,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// Share an SA with the cluster (multicast `SaAdd` once this node
    /// holds the state; until then the data path observes it locally).
    pub fn register_sa(&mut self, now: Instant, sa: SaDescriptor) {
        self.registrations.insert((sa.direction, sa.spi), sa);
        self.publisher.set_local_sa(sa);
        if self.log.is_some() {
            self.multicast(&Message::SaAdd(sa));
        }
        self.refresh_at(now);
    }

    /// Delete an SA cluster-wide.
    pub fn remove_sa(&mut self, now: Instant, direction: Direction, spi: u32) {
        self.registrations.remove(&(direction, spi));
        self.publisher.remove_local_sa(direction, spi);
        if self.log.is_some() {
            self.multicast(&Message::SaDelete { direction, spi });
        }
        self.refresh_at(now);
    }

    /// Multicasts another component's `payload` through the agreed log:
    /// every synced member, this one included, gets it from
    /// [`poll_app`](Self::poll_app) in the same order relative to every
    /// other replicated change.
    pub fn replicate(&mut self, channel: u8, payload: Vec<u8>) -> Result<(), ReplicateError> {
        if self.log.is_none() {
            return Err(ReplicateError::NotSynced);
        }
        if payload.len() > MAX_APP_PAYLOAD {
            return Err(ReplicateError::TooLarge);
        }
        self.counters.app_replicated += 1;
        self.multicast(&Message::App { channel, payload });
        Ok(())
    }

    /// The next App message the agreed log delivered, own ones included.
    /// Only messages applied while this node holds the state: a joining
    /// node gets none ordered before its state transfer (whoever sent the
    /// transfer re-replicates what the joiner needs, on
    /// [`ClusterEvent::StateTransferSent`]). The caller drains it every
    /// turn: the queue is not bounded.
    pub fn poll_app(&mut self) -> Option<AppMessage> {
        self.apps.pop_front()
    }

    /// An agreed membership change (Corosync confchg), in log order.
    pub fn handle_membership(&mut self, now: Instant, members: &[NodeId]) {
        let mut members = members.to_vec();
        members.sort_unstable();
        members.dedup();
        let was_member = self.members.contains(&self.config.local);
        self.members = members.clone();
        self.membership_since = now;
        let peers: Vec<NodeId> = members
            .iter()
            .copied()
            .filter(|&n| n != self.config.local)
            .collect();
        self.detector.set_peers(now, &peers);
        self.peers.retain(|node, _| members.contains(node));
        self.holding.retain(|node, _| members.contains(node));
        for node in self.known_reporters() {
            if !members.contains(&node) {
                self.fence.forget(node);
            }
        }
        self.on_membership(now, members, was_member);
        self.refresh_at(now);
    }

    /// A message delivered by the agreed log, in log order.
    pub fn handle_delivery(&mut self, now: Instant, from: NodeId, message: &[u8]) {
        self.on_delivery(now, from, message.to_vec());
        self.refresh_at(now);
    }

    /// A heartbeat datagram from `from` (as the socket layer maps its
    /// source address).
    ///
    /// The heartbeat channel also carries counter checkpoints
    /// ([`poll_datagram`](Self::poll_datagram)): healing only ever moves a
    /// counter forward to where a peer saw the same packet, so it needs no
    /// agreed order, and it must work while Corosync re-forms its ring
    /// after a failure — exactly when survivors that took over a packet
    /// apart disagree.
    pub fn handle_heartbeat(&mut self, now: Instant, from: NodeId, message: &[u8]) {
        let heartbeat = match crate::codec::decode(message) {
            Ok(Message::Hello(hb) | Message::Heartbeat(hb)) => hb,
            Ok(Message::Hearing(hearing)) => {
                self.on_hearing(now, from, &hearing);
                return;
            }
            Ok(Message::Checkpoint(checkpoint)) if from != self.config.local => {
                self.counters.datagram_checkpoints += 1;
                self.publisher.note(&checkpoint);
                self.refresh_at(now);
                return;
            }
            Ok(_) => {
                self.counters.heartbeats_refused += 1;
                return;
            }
            Err(_) => {
                self.counters.decode_errors += 1;
                return;
            }
        };
        if heartbeat.node != from || from == self.config.local {
            self.counters.heartbeats_refused += 1;
            return;
        }
        self.peers.insert(
            from,
            PeerFlags {
                synced: heartbeat.synced,
                at: now,
                counter: heartbeat.counter,
            },
        );
        self.join.seen_state |= heartbeat.synced;
        let recovered = self.detector.heard(now, from);
        self.on_recovery(now, from, recovered);
        self.refresh_at(now);
    }

    /// A report of the data path.
    pub fn handle_report(&mut self, now: Instant, report: DataPathReport) {
        match report {
            DataPathReport::Stats(stats) => self.datapath = stats,
            DataPathReport::TakeoverApplied { suspect } => self.takeover_applied(now, suspect),
            DataPathReport::Adopted { version } => {
                self.datapath_adopted = self.datapath_adopted.max(version);
                self.finish_catch_up(now);
            }
            DataPathReport::LeaseRequest { spi, after_end } => {
                self.forward(Message::LeaseRequest { spi, after_end });
            }
            DataPathReport::Checkpoint(checkpoint) => {
                self.progress.insert(
                    checkpoint.spi,
                    Progress {
                        lineage: checkpoint.lineage,
                        c: checkpoint.c,
                        at: now,
                    },
                );
                let message = Message::Checkpoint(checkpoint);
                self.send_datagram(&message);
                self.forward(message);
            }
            DataPathReport::EntryCheckpoint(checkpoint) => {
                self.send_datagram(&Message::Checkpoint(checkpoint));
            }
            DataPathReport::ReplayCheckpoint(replay) => {
                self.forward(Message::ReplayCheckpoint(replay));
            }
        }
        self.refresh_at(now);
    }

    /// Queue `message` for the heartbeat channel once this node holds the
    /// state (at most `MAX_DATAGRAMS`; the rest is left to the log).
    fn send_datagram(&mut self, message: &Message) {
        if self.log.is_some() && self.datagrams.len() < MAX_DATAGRAMS {
            self.datagrams.push_back(encode(message));
        }
    }

    /// Multicast a data-path message once this node holds the state.
    fn forward(&mut self, message: Message) {
        if self.log.is_some() {
            self.multicast(&message);
        } else {
            self.counters.reports_dropped += 1;
        }
    }

    /// Timers: suspicions, checkpoint ticks, founding, the end of a join.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.check_suspicions(now);
        if now >= self.tick_next {
            self.tick += 1;
            self.tick_next = (self.tick_next + CHECKPOINT_INTERVAL).max(now);
            self.publisher.set_tick(self.tick);
        }
        self.join_timers(now);
        self.refresh_at(now);
    }

    /// The next message to multicast through the group transport.
    pub fn poll_group(&mut self) -> Option<Vec<u8>> {
        self.outgoing.pop_front()
    }

    /// The heartbeat to send to every peer, when one is due.
    pub fn poll_heartbeat(&mut self, now: Instant) -> Option<Vec<u8>> {
        if now < self.heartbeat_next {
            return None;
        }
        self.heartbeat_next = (self.heartbeat_next + self.config.heartbeat_interval).max(now);
        let heartbeat = Heartbeat {
            node: self.config.local,
            counter: self.heartbeats_sent,
            synced: self.log.is_some(),
            ready: self.is_ready(),
        };
        self.heartbeats_sent += 1;
        self.fence.sent(now, heartbeat.counter);
        let message = if heartbeat.counter == 0 {
            Message::Hello(heartbeat)
        } else {
            Message::Heartbeat(heartbeat)
        };
        let hearing = self.hearing();
        if !hearing.peers.is_empty() && self.datagrams.len() < MAX_DATAGRAMS {
            self.datagrams.push_back(encode(&Message::Hearing(hearing)));
        }
        Some(encode(&message))
    }

    /// What this node hears from each member (see [`Hearing`]).
    fn hearing(&self) -> Hearing {
        let peers = self
            .members
            .iter()
            .filter(|&&n| n != self.config.local)
            .map(|&node| {
                let holding = self.holding.get(&node).copied().unwrap_or_default();
                // After a stall of its own this node has not read what
                // arrived meanwhile: it reports nothing heard rather than
                // a last heartbeat that would make the peer fence itself.
                let heard = match self.detector.in_stall_grace(node) {
                    true => None,
                    false => self.peers.get(&node).map(|p| p.counter),
                };
                HeardPeer {
                    node,
                    heard,
                    silent: holding.silent,
                    silent_after: holding.silent_after,
                    handbacks: holding.handbacks,
                }
            })
            .collect();
        Hearing {
            node: self.config.local,
            peers,
        }
    }

    /// A peer's hearing report: what it says of this node goes to the
    /// fence.
    fn on_hearing(&mut self, now: Instant, from: NodeId, hearing: &Hearing) {
        if hearing.node != from || from == self.config.local || !self.members.contains(&from) {
            self.counters.heartbeats_refused += 1;
            return;
        }
        self.counters.hearings += 1;
        if let Some(me) = hearing.peers.iter().find(|p| p.node == self.config.local) {
            self.fence.report(now, from, me);
        }
    }

    /// Peers whose reports the fence may hold.
    fn known_reporters(&self) -> Vec<NodeId> {
        self.fence.reporters()
    }

    /// A datagram to send to every peer over the heartbeat channel (not
    /// through the log): this node's counter checkpoints, which the peers
    /// heal from at once even while the log is blocked.
    pub fn poll_datagram(&mut self) -> Option<Vec<u8>> {
        self.datagrams.pop_front()
    }

    /// When `handle_timeout` wants to run next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut next = self.heartbeat_next.min(self.tick_next);
        if let Some(t) = self.detector.poll_timeout() {
            next = next.min(t);
        }
        // A join deadline that has passed stays past while the node waits
        // for others (a member that is not the lowest never founds): it
        // is looked at with the next heartbeat, never in a loop.
        if let Some(t) = self.join_deadline() {
            next = next.min(t.max(self.heartbeat_next));
        }
        Some(next)
    }

    /// The next event, for logs.
    pub fn poll_event(&mut self) -> Option<ClusterEvent> {
        self.events.pop_front()
    }

    /// The state the data path adopts; a new `Arc` whenever it changed.
    pub fn shared(&self) -> Arc<SharedState> {
        self.publisher.current()
    }

    /// [`refresh`](Self::refresh), and tell the fence whether the log
    /// holds this node in the base view (see `FenceWriter::set_in_view`).
    fn refresh_at(&mut self, now: Instant) {
        if let Some(log) = &self.log {
            let in_view = log.base_view().contains(self.config.local);
            self.fence.set_in_view(now, in_view);
        }
        self.refresh();
    }

    /// Publish a new shared state if anything changed (every `handle_*`
    /// and `register_sa` / `remove_sa` ends with it).
    fn refresh(&mut self) {
        self.track_quorum();
        let suspects: Vec<NodeId> = self.local_suspects.iter().copied().collect();
        let silent = self.silent_suspects();
        self.track_holding(&silent);
        let silent_since = silent
            .iter()
            .filter_map(|&n| self.detector.silent_since(n))
            .map(|last_heard| last_heard + self.config.suspect_after)
            .collect();
        let head = Head {
            view: self.dispatch_view(),
            inbound_view: self.inbound_dispatch_view(),
            silent,
            silent_since,
            generation: self.log.as_ref().map_or(0, |log| log.generation),
            ready: self.is_ready(),
            transfers: self.log.as_ref().map_or(0, |log| log.transfers),
            replay_sender: self.log.as_ref().is_some_and(|log| {
                log.base_view().without(&suspects).first() == Some(self.config.local)
            }),
            suspects,
        };
        self.publisher.publish(head);
    }

    /// True once this node holds the state and owns traffic.
    pub fn is_ready(&self) -> bool {
        self.log
            .as_ref()
            .is_some_and(|log| log.base_members().contains(&self.config.local))
    }

    /// True once this node holds the replicated state.
    pub fn is_synced(&self) -> bool {
        self.log.is_some()
    }

    /// The view packets are dispatched over: the base view without the
    /// members this node suspects; empty while that is not quorate.
    pub fn dispatch_view(&self) -> View {
        match &self.log {
            Some(log) => {
                let suspects: Vec<NodeId> = self.local_suspects.iter().copied().collect();
                self.quorate_view(log.base_view().without(&suspects))
            }
            None => View::default(),
        }
    }

    /// The view inbound ESP is dispatched over: the base view, suspects
    /// included (a packet of a [silent](Self::silent_suspects) one is
    /// taken over; see [`SharedState::inbound_view`]); empty while not
    /// quorate.
    pub fn inbound_dispatch_view(&self) -> View {
        match &self.log {
            Some(log) => self.quorate_view(log.base_view()),
            None => View::default(),
        }
    }

    /// The members of the base view this node suspects that have not
    /// been heard steadily since: they count for nothing in its quorum,
    /// and it takes over their inbound share.
    pub fn silent_suspects(&self) -> Vec<NodeId> {
        let base = self.log.as_ref().map(|log| log.base_view());
        self.local_suspects
            .iter()
            .copied()
            .filter(|&n| self.detector.is_silent(n))
            .filter(|&n| base.as_ref().is_some_and(|b| b.contains(n)))
            .collect()
    }

    /// Which peers' inbound share this node takes over now (`silent`),
    /// for the hearing reports: when it started to, the counter of the
    /// peer's last heartbeat heard; when it stops, one more hand-back.
    fn track_holding(&mut self, silent: &[NodeId]) {
        for (&node, holding) in &mut self.holding {
            if holding.silent && !silent.contains(&node) {
                holding.silent = false;
                holding.handbacks = holding.handbacks.wrapping_add(1);
            }
        }
        for &node in silent {
            let heard = self.peers.get(&node).map_or(0, |p| p.counter);
            let holding = self.holding.entry(node).or_default();
            if !holding.silent {
                holding.silent = true;
                holding.silent_after = heard;
            }
        }
    }

    /// Queue a message for the group.
    fn multicast(&mut self, message: &Message) {
        self.outgoing.push_back(encode(message));
        self.counters.messages_sent += 1;
    }

    /// Queue an event; the oldest goes when nobody polls.
    fn event(&mut self, event: ClusterEvent) {
        if self.events.len() >= EVENT_QUEUE {
            self.events.pop_front();
            self.counters.events_dropped += 1;
        }
        self.events.push_back(event);
    }
}

#[cfg(test)]
mod tests;
