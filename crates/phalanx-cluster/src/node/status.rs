//! What `phalanxctl cluster` shows: members, who owns what, leases,
//! checkpoint lag, counters and the last failovers with their handover.

use core::net::IpAddr;
use std::time::{Duration, Instant};

use super::{ClusterNode, QuorumStatus};
use crate::datapath::DataPathStats;
use crate::dispatch::{spreads_outbound, Direction, DispatchScheme};
use crate::lease::{BlockKind, LeaseBlock, SaLeases};
use crate::segments::segment_table;
use crate::view::{NodeId, View};

/// How a takeover ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailoverOutcome {
    /// Neither confirmed nor corrected yet.
    Pending,
    /// Corosync removed the suspect: it had failed.
    Confirmed,
    /// The suspect was heard again and taken back: a false suspicion.
    Corrected,
}

/// One takeover, as this node saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailoverRecord {
    /// The suspect.
    pub suspect: NodeId,
    /// Its last heartbeat before the suspicion.
    pub last_heartbeat: Instant,
    /// When this node suspected it.
    pub detected_at: Instant,
    /// From its last heartbeat to the suspicion.
    pub detected_after: Duration,
    /// From its last heartbeat to the data path's switch (`None` until
    /// the data path reported it).
    pub handover: Option<Duration>,
    /// Confirmed, corrected or pending.
    pub outcome: FailoverOutcome,
}

impl FailoverRecord {
    /// `Some(true)`: Corosync confirmed the failure; `Some(false)`: it was
    /// corrected (a false suspicion); `None`: pending.
    pub fn confirmed_by_corosync(&self) -> Option<bool> {
        match self.outcome {
            FailoverOutcome::Pending => None,
            FailoverOutcome::Confirmed => Some(true),
            FailoverOutcome::Corrected => Some(false),
        }
    }
}

/// One member as this node sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberStatus {
    /// The member.
    pub node: NodeId,
    /// In Corosync's agreed membership.
    pub agreed: bool,
    /// Holds the replicated state.
    pub synced: bool,
    /// Declared itself ready.
    pub ready: bool,
    /// In this node's dispatch view (owns traffic).
    pub live: bool,
    /// This node's failure detector suspects it.
    pub suspected_here: bool,
    /// Suspected here, and heard steadily since: its inbound share is its
    /// own again; its outbound share waits for the log's `Rejoin`.
    pub heard_again: bool,
    /// The log suspects it (out of the base view).
    pub suspected_in_log: bool,
    /// Its last heartbeat.
    pub last_heartbeat: Option<Instant>,
}

/// One SA as this node sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaStatus {
    /// Its SPI.
    pub spi: u32,
    /// Its direction.
    pub direction: Direction,
    /// The remote gateway.
    pub peer: IpAddr,
    /// Extended sequence numbers.
    pub esn: bool,
    /// Outbound: the replay window the peer applies to it (0: unknown).
    pub peer_window: u32,
    /// Outbound: several nodes send its packets (the scheme spreads one
    /// SA and the peer's window is large enough:
    /// [`crate::dispatch::spreads_outbound`]); false when one node does.
    pub spread: bool,
    /// Outbound: this node's counter at its last checkpoint.
    pub counter: Option<u64>,
    /// Outbound: the block the counter is in.
    pub block: Option<LeaseBlock>,
    /// Outbound: this node's class in that block.
    pub class: Option<usize>,
    /// Outbound: the takeover blocks reserved for that block.
    pub takeover_blocks: Vec<LeaseBlock>,
    /// Outbound: the space is used up (rekey).
    pub exhausted: bool,
    /// Outbound: when this node last checkpointed it (checkpoint lag).
    pub last_checkpoint_at: Option<Instant>,
    /// Inbound: the highest number in the log's replay checkpoint.
    pub replay_top: Option<u64>,
}

/// Counters of the control side (the data path's are in
/// [`ClusterStatus::datapath`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterCounters {
    /// Lease blocks granted (takeover reservations included).
    pub lease_grants: u64,
    /// Members this node suspected.
    pub suspicions: u64,
    /// Checks of the failure detector that found this node had stalled
    /// (it then suspected nobody new).
    pub stalls: u64,
    /// Gaps longer than `suspect_after` between two heartbeats this node
    /// sent: its inbound share that arrived then is fenced (see `fence`).
    pub heartbeat_gaps: u64,
    /// Hearing reports received from peers.
    pub hearings: u64,
    /// Times a peer reported it had taken over this node's inbound share
    /// and handed it back (that share was fenced meanwhile).
    pub fenced_handbacks: u64,
    /// Takeovers the data path applied.
    pub takeovers: u64,
    /// Suspicions Corosync confirmed.
    pub confirmed: u64,
    /// Suspicions corrected by a `Rejoin`.
    pub corrected: u64,
    /// `Rejoin`s this node sent.
    pub rejoins_sent: u64,
    /// State transfers this node sent.
    pub transfers_sent: u64,
    /// State transfers for this node that were malformed.
    pub transfers_refused: u64,
    /// Messages queued for the group.
    pub messages_sent: u64,
    /// Messages that did not decode.
    pub decode_errors: u64,
    /// Messages of a type this build does not know (newer peers).
    pub unknown_messages: u64,
    /// Heartbeats whose node id did not match their source, or that
    /// were not heartbeats.
    pub heartbeats_refused: u64,
    /// Data-path reports dropped because this node holds no state yet.
    pub reports_dropped: u64,
    /// Events dropped because nobody polled them.
    pub events_dropped: u64,
    /// Joins given up because the log buffer overflowed.
    pub join_buffer_overflows: u64,
    /// Counter checkpoints received over the heartbeat channel.
    pub datagram_checkpoints: u64,
    /// App payloads this node multicast ([`ClusterNode::replicate`]).
    pub app_replicated: u64,
    /// App payloads the log delivered to this node (own ones included).
    pub app_delivered: u64,
    /// Times this node's view lost quorum (it stood down).
    pub quorum_losses: u64,
    /// 1 while this node stands down for want of quorum, else 0 (a gauge).
    pub no_quorum: u64,
    /// Partition merges this node's side won (the other side yielded).
    pub merges_won: u64,
    /// Partition merges this node's side lost (it yielded and rejoined).
    pub merges_lost: u64,
}

impl ClusterCounters {
    /// Every counter with its name, for metrics and `phalanxctl`.
    pub fn named(&self) -> [(&'static str, u64); 26] {
        [
            ("lease_grants", self.lease_grants),
            ("suspicions", self.suspicions),
            ("stalls", self.stalls),
            ("heartbeat_gaps", self.heartbeat_gaps),
            ("hearings", self.hearings),
            ("fenced_handbacks", self.fenced_handbacks),
            ("takeovers", self.takeovers),
            ("confirmed", self.confirmed),
            ("corrected", self.corrected),
            ("rejoins_sent", self.rejoins_sent),
            ("transfers_sent", self.transfers_sent),
            ("transfers_refused", self.transfers_refused),
            ("messages_sent", self.messages_sent),
            ("decode_errors", self.decode_errors),
            ("unknown_messages", self.unknown_messages),
            ("heartbeats_refused", self.heartbeats_refused),
            ("reports_dropped", self.reports_dropped),
            ("events_dropped", self.events_dropped),
            ("join_buffer_overflows", self.join_buffer_overflows),
            ("datagram_checkpoints", self.datagram_checkpoints),
            ("app_replicated", self.app_replicated),
            ("app_delivered", self.app_delivered),
            ("quorum_losses", self.quorum_losses),
            ("no_quorum", self.no_quorum),
            ("merges_won", self.merges_won),
            ("merges_lost", self.merges_lost),
        ]
    }
}

/// The node's status, for `phalanxctl cluster`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterStatus {
    /// This node.
    pub local: NodeId,
    /// The dispatch scheme.
    pub scheme: DispatchScheme,
    /// Holds the replicated state.
    pub synced: bool,
    /// Owns traffic.
    pub ready: bool,
    /// Lease generations so far (base-view changes).
    pub generation: u64,
    /// Corosync's agreed membership.
    pub agreed: Vec<NodeId>,
    /// The dispatch view: who owns traffic, as this node sees it.
    pub view: View,
    /// Members this node suspects.
    pub suspects: Vec<NodeId>,
    /// Every member and its state.
    pub members: Vec<MemberStatus>,
    /// Every SA.
    pub sas: Vec<SaStatus>,
    /// Hash schemes: the owner of each segment.
    pub segment_owners: Vec<NodeId>,
    /// Control-side counters.
    pub counters: ClusterCounters,
    /// The data path's counters (heals, no-lease drops, ...), as last
    /// reported.
    pub datapath: DataPathStats,
    /// The last takeovers, oldest first.
    pub failovers: Vec<FailoverRecord>,
    /// Where this node stands on quorum.
    pub quorum: QuorumStatus,
}

impl ClusterNode {
    /// The node's status.
    pub fn status(&self) -> ClusterStatus {
        let view = self.dispatch_view();
        let segment_owners = match self.config.scheme {
            DispatchScheme::HashSegments { .. } => segment_table(&view),
            _ => Vec::new(),
        };
        ClusterStatus {
            local: self.config.local,
            scheme: self.config.scheme,
            synced: self.log.is_some(),
            ready: self.is_ready(),
            generation: self.log.as_ref().map_or(0, |log| log.generation),
            agreed: self.members.clone(),
            members: self.member_status(&view),
            sas: self.sa_status(),
            view,
            suspects: self.local_suspects.iter().copied().collect(),
            segment_owners,
            counters: ClusterCounters {
                heartbeat_gaps: self.fence.gaps(),
                fenced_handbacks: self.fence.handbacks(),
                ..self.counters
            },
            datapath: self.datapath,
            failovers: self.failovers.iter().copied().collect(),
            quorum: self.quorum(),
        }
    }

    fn member_status(&self, view: &View) -> Vec<MemberStatus> {
        let log = self.log.as_ref();
        self.members
            .iter()
            .map(|&node| MemberStatus {
                node,
                agreed: true,
                synced: log.is_some_and(|l| l.synced.contains(&node)),
                ready: log.is_some_and(|l| l.ready.contains(&node)),
                live: view.contains(node),
                suspected_here: self.local_suspects.contains(&node),
                heard_again: self.local_suspects.contains(&node) && !self.detector.is_silent(node),
                suspected_in_log: log.is_some_and(|l| l.suspects.contains_key(&node)),
                last_heartbeat: self.detector.last_heard(node),
            })
            .collect()
    }

    fn sa_status(&self) -> Vec<SaStatus> {
        let Some(log) = &self.log else {
            return Vec::new();
        };
        log.sas
            .values()
            .map(|entry| {
                let d = entry.descriptor;
                let mut status = SaStatus {
                    spi: d.spi,
                    direction: d.direction,
                    peer: d.peer,
                    esn: d.esn,
                    peer_window: d.peer_window,
                    spread: d.direction == Direction::Outbound
                        && spreads_outbound(self.config.scheme, d.peer_window),
                    counter: None,
                    block: None,
                    class: None,
                    takeover_blocks: Vec::new(),
                    exhausted: false,
                    last_checkpoint_at: None,
                    replay_top: entry.replay.as_ref().map(|r| r.top),
                };
                if let (Direction::Outbound, Some(leases)) = (d.direction, log.leases.sa(d.spi)) {
                    self.fill_outbound(&mut status, leases);
                }
                status
            })
            .collect()
    }

    /// The block and class of this node's last checkpointed counter.
    fn fill_outbound(&self, status: &mut SaStatus, leases: &SaLeases) {
        status.exhausted = leases.is_exhausted();
        let progress = self.progress.get(&status.spi);
        status.counter = progress.map(|p| p.c);
        status.last_checkpoint_at = progress.map(|p| p.at);
        let block = progress
            .and_then(|p| {
                let any = leases.last_of(p.lineage)?;
                let stride = match self.config.scheme {
                    DispatchScheme::PacketRoundRobin => 1,
                    _ => any.view.len() as u64,
                };
                let q = p.c.saturating_sub(p.lineage).saturating_mul(stride);
                leases.block_at(p.lineage, q).or(Some(any))
            })
            .or_else(|| {
                let lineage = leases.regular_lineage()?;
                leases.block_at(lineage, 0)
            });
        if let Some(block) = block {
            status.class = block.class_of(self.config.local);
            if block.kind == BlockKind::Regular {
                status.takeover_blocks = leases.takeovers_of(block.start).cloned().collect();
            }
            status.block = Some(block.clone());
        }
    }
}
