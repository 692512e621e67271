//! From what the cluster thread knows to what `phalanxctl cluster` and
//! the metrics show: [`ClusterSnapshot`] (taken on the thread) into
//! `phalanx_control::ClusterReport` (plain data for the socket).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use phalanx_cluster::{
    BlockKind, ClusterStatus, FailoverOutcome, FailoverRecord, LeaseBlock, NodeId, SaStatus,
};
use phalanx_control::{
    ClusterMember, ClusterReport, ClusterSaReport, Direction, FailoverReport, LeaseBlockReport,
    NamedCounter, QuorumReport, TakeoverBlockReport, VirtualSideReport,
};
use phalanx_wire::ethernet::MacAddress;

use super::corosync::CpgStats;
use super::heartbeat::HeartbeatStats;
use super::thread::LoopCounters;
use crate::config::{ClusterSettings, ClusterSide};

/// Everything the cluster thread knows, taken at one instant.
#[derive(Clone, Debug)]
pub struct ClusterSnapshot {
    /// The node's own status.
    pub status: ClusterStatus,
    /// The Corosync transport's counters.
    pub cpg: CpgStats,
    /// Messages waiting for Corosync (`CS_ERR_TRY_AGAIN`).
    pub corosync_backlog: usize,
    /// The heartbeat socket's counters.
    pub heartbeat: HeartbeatStats,
    /// The thread loop's counters.
    pub loop_counters: LoopCounters,
    /// Why Corosync was lost, if it was.
    pub corosync_error: Option<String>,
    /// When it was taken (ages are measured from here).
    pub taken_at: Instant,
}

/// The control-socket answer for `snapshot`; `reports_dropped` is what
/// the data plane's report queue refused.
pub fn cluster_report(
    settings: &ClusterSettings,
    snapshot: &ClusterSnapshot,
    reports_dropped: u64,
) -> ClusterReport {
    let status = &snapshot.status;
    let at = snapshot.taken_at;
    ClusterReport {
        node_id: status.local.0,
        scheme: status.scheme.to_string(),
        group: settings.group.clone(),
        ready: status.ready,
        generation: status.generation,
        corosync_error: snapshot.corosync_error.clone(),
        quorum: Some(QuorumReport {
            policy: status.quorum.policy.name().to_owned(),
            quorate: status.quorum.quorate,
            base: status.quorum.base.iter().map(|n| n.0).collect(),
        }),
        members: members(settings, status, at),
        segment_owners: status.segment_owners.iter().map(|n| n.0).collect(),
        sas: status.sas.iter().map(|sa| sa_report(sa, at)).collect(),
        counters: counters(snapshot, reports_dropped),
        failovers: status.failovers.iter().map(|f| failover(f, at)).collect(),
        virtual_sides: vec![
            virtual_side("inside", &settings.inside),
            virtual_side("outside", &settings.outside),
        ],
        resolver: status.view.first().map(|n| n.0),
    }
}

/// A side's virtual addresses as the report shows them.
fn virtual_side(name: &str, side: &ClusterSide) -> VirtualSideReport {
    VirtualSideReport {
        side: name.to_owned(),
        interface: side.interface.clone(),
        addresses: side.addresses.iter().map(|a| a.to_string()).collect(),
        mac: MacAddress(side.mac).to_string(),
    }
}

/// Whole milliseconds from `then` to `at` (0 when `then` is later).
fn millis_since(at: Instant, then: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(then).as_millis()).unwrap_or(u64::MAX)
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Every configured node and every agreed member, ascending.
fn members(settings: &ClusterSettings, status: &ClusterStatus, at: Instant) -> Vec<ClusterMember> {
    let ids: BTreeSet<NodeId> = settings
        .nodes
        .iter()
        .map(|n| n.0)
        .chain(status.agreed.iter().copied())
        .chain(status.members.iter().map(|m| m.node))
        .collect();
    ids.into_iter()
        .map(|id| {
            let member = status.members.iter().find(|m| m.node == id);
            ClusterMember {
                node_id: id.0,
                local: id == status.local,
                agreed: status.agreed.contains(&id),
                live: status.view.contains(id),
                suspected: status.suspects.contains(&id)
                    || member.is_some_and(|m| m.suspected_here || m.suspected_in_log),
                heard_again: member.is_some_and(|m| m.heard_again),
                ready: member.is_some_and(|m| m.ready),
                address: settings.address_of(id).map(|a| a.to_string()),
                last_heartbeat_ms: member
                    .and_then(|m| m.last_heartbeat)
                    .map(|t| millis_since(at, t)),
            }
        })
        .collect()
}

fn block(b: &LeaseBlock) -> LeaseBlockReport {
    LeaseBlockReport {
        start: b.start,
        end: b.end,
        view: b.view.members().iter().map(|n| n.0).collect(),
    }
}

fn sa_report(sa: &SaStatus, at: Instant) -> ClusterSaReport {
    let (direction, counter) = match sa.direction {
        phalanx_cluster::Direction::Outbound => (Direction::Out, sa.counter.unwrap_or(0)),
        phalanx_cluster::Direction::Inbound => (Direction::In, sa.replay_top.unwrap_or(0)),
    };
    ClusterSaReport {
        spi: sa.spi,
        direction,
        peer: Some(sa.peer.to_string()),
        counter,
        exhausted: sa.exhausted,
        peer_window: (direction == Direction::Out && sa.peer_window != 0).then_some(sa.peer_window),
        spread: (direction == Direction::Out).then_some(sa.spread),
        block: sa.block.as_ref().map(block),
        class: sa.class.map(|c| u32::try_from(c).unwrap_or(u32::MAX)),
        takeover_blocks: sa
            .takeover_blocks
            .iter()
            .filter_map(|b| match b.kind {
                BlockKind::Takeover(suspect) => Some(TakeoverBlockReport {
                    suspect: suspect.0,
                    block: block(b),
                }),
                BlockKind::Regular => None,
            })
            .collect(),
        checkpoint_age_ms: sa.last_checkpoint_at.map(|t| millis_since(at, t)),
    }
}

fn failover(f: &FailoverRecord, at: Instant) -> FailoverReport {
    FailoverReport {
        suspect: f.suspect.0,
        detected_after_ms: millis(f.detected_after),
        handover_ms: f.handover.map(millis),
        outcome: match f.outcome {
            FailoverOutcome::Pending => "pending",
            FailoverOutcome::Confirmed => "confirmed",
            FailoverOutcome::Corrected => "corrected",
        }
        .to_owned(),
        age_seconds: at.saturating_duration_since(f.detected_at).as_secs(),
    }
}

/// Every counter by a unique snake_case name: the node's control side,
/// the data path's last report, Corosync, the heartbeats and the loop.
fn counters(snapshot: &ClusterSnapshot, reports_dropped: u64) -> Vec<NamedCounter> {
    let s = &snapshot.status;
    let d = &s.datapath;
    let (cpg, hb, lp) = (&snapshot.cpg, &snapshot.heartbeat, &snapshot.loop_counters);
    let mut out: Vec<(&'static str, u64)> = s.counters.named().to_vec();
    out.extend([
        ("outbound_owned", d.outbound_owned),
        ("outbound_not_owned", d.outbound_not_owned),
        ("outbound_no_lease", d.outbound_no_lease),
        ("outbound_unknown_sa", d.outbound_unknown_sa),
        ("inbound_owned", d.inbound_owned),
        ("inbound_not_owned", d.inbound_not_owned),
        ("inbound_fenced", d.inbound_fenced),
        ("inbound_unknown_sa", d.inbound_unknown_sa),
        ("heals", d.heals),
        ("sa_takeovers", d.takeovers),
        ("deferred_takeovers", d.deferred_takeovers),
        ("generations", d.generations),
        ("lease_requests", d.lease_requests),
        ("checkpoints", d.checkpoints),
        ("entry_checkpoints", d.entry_checkpoints),
        ("stream_state_restarts", d.state_restarts),
        ("replay_checkpoints", d.replay_checkpoints),
        ("datapath_reports_unpolled", d.reports_dropped),
        ("report_queue_full", reports_dropped),
        ("reports_received", lp.reports),
        ("corosync_sent", cpg.sent),
        ("corosync_delivered", cpg.delivered),
        ("corosync_confchgs", cpg.confchgs),
        ("corosync_try_again", cpg.try_again),
        ("corosync_backlogged", cpg.backlogged),
        ("corosync_send_failures", cpg.send_failures),
        ("corosync_dispatch_failures", cpg.dispatch_failures),
        ("heartbeats_sent", hb.sent),
        ("heartbeat_send_errors", hb.send_errors),
        ("heartbeats_received", hb.received),
        ("heartbeats_unknown_source", hb.unknown_source),
        ("heartbeats_from_self", hb.from_self),
        ("heartbeats_oversize", hb.oversize),
        ("heartbeat_receive_errors", hb.receive_errors),
        ("multicast_failures", lp.multicast_failures),
        ("state_publications", lp.publications),
    ]);
    out.into_iter()
        .map(|(name, count)| NamedCounter {
            name: name.to_owned(),
            count,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use core::net::{IpAddr, Ipv4Addr};

    use phalanx_cluster::{
        ClusterCounters, DataPathStats, DispatchScheme, MemberStatus, QuorumPolicy, QuorumStatus,
        View,
    };

    use super::*;
    use crate::config::ClusterSide;

    fn settings() -> ClusterSettings {
        let side = |last: u8| ClusterSide {
            interface: format!("if{last}"),
            addresses: IpAddr::V4(Ipv4Addr::new(192, 0, 2, last)).into(),
            mac: [2, 0, 0, 0, 0, last],
        };
        let node = |id: u8| {
            (
                NodeId(u32::from(id)),
                IpAddr::V4(Ipv4Addr::new(10, 99, 0, 10 + id)),
            )
        };
        ClusterSettings {
            node_id: NodeId(1),
            scheme: DispatchScheme::HashSegments { with_spi: true },
            group: "phalanx".into(),
            heartbeat_port: 7400,
            heartbeat_interval: Duration::from_millis(5),
            suspect_after: Duration::from_millis(30),
            lease_len: 4096,
            checkpoint_every: 64,
            quorum: QuorumPolicy::Majority,
            kernel_filter: true,
            kernel_filter_xdp: true,
            outside: side(1),
            inside: side(2),
            // Node 3 is configured but not (yet) in Corosync's membership.
            nodes: vec![node(1), node(2), node(3)],
        }
    }

    fn member(at: Instant, node: u32, suspected: bool) -> MemberStatus {
        MemberStatus {
            node: NodeId(node),
            agreed: true,
            synced: true,
            ready: true,
            live: !suspected,
            suspected_here: suspected,
            heard_again: false,
            suspected_in_log: false,
            last_heartbeat: (node != 1).then(|| at - Duration::from_millis(40)),
        }
    }

    fn lease(start: u64, members: &[u32], kind: BlockKind) -> LeaseBlock {
        LeaseBlock {
            start,
            end: start + 4095,
            view: View::new(2, members.iter().map(|&n| NodeId(n))),
            kind,
            lineage: start,
            offset: 0,
            backs: 0,
        }
    }

    /// Node 1 of {1, 2}, suspecting 2 for 40 ms, one outbound and one
    /// inbound SA, one pending takeover.
    fn snapshot() -> ClusterSnapshot {
        let at = Instant::now();
        let peer = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
        let outbound = SaStatus {
            spi: 0x1001,
            direction: phalanx_cluster::Direction::Outbound,
            peer,
            esn: false,
            peer_window: 128,
            spread: false,
            counter: Some(5000),
            block: Some(lease(4097, &[1, 2], BlockKind::Regular)),
            class: Some(0),
            takeover_blocks: vec![
                lease(8193, &[2], BlockKind::Takeover(NodeId(1))),
                lease(12_289, &[1], BlockKind::Takeover(NodeId(2))),
            ],
            exhausted: false,
            last_checkpoint_at: Some(at - Duration::from_millis(12)),
            replay_top: None,
        };
        let inbound = SaStatus {
            spi: 0x2001,
            direction: phalanx_cluster::Direction::Inbound,
            counter: None,
            block: None,
            class: None,
            takeover_blocks: Vec::new(),
            last_checkpoint_at: None,
            replay_top: Some(777),
            peer_window: 0,
            ..outbound.clone()
        };
        let status = ClusterStatus {
            local: NodeId(1),
            scheme: DispatchScheme::HashSegments { with_spi: true },
            synced: true,
            ready: true,
            generation: 3,
            agreed: vec![NodeId(1), NodeId(2)],
            view: View::new(2, [NodeId(1)]),
            suspects: vec![NodeId(2)],
            members: vec![member(at, 1, false), member(at, 2, true)],
            sas: vec![outbound, inbound],
            segment_owners: vec![NodeId(1); 256],
            counters: ClusterCounters {
                lease_grants: 6,
                takeovers: 1,
                ..ClusterCounters::default()
            },
            datapath: DataPathStats {
                heals: 2,
                outbound_not_owned: 9,
                ..DataPathStats::default()
            },
            failovers: vec![FailoverRecord {
                suspect: NodeId(2),
                last_heartbeat: at - Duration::from_millis(40),
                detected_at: at - Duration::from_millis(9),
                detected_after: Duration::from_micros(31_250),
                handover: Some(Duration::from_micros(31_500)),
                outcome: FailoverOutcome::Pending,
            }],
            quorum: QuorumStatus {
                policy: QuorumPolicy::Majority,
                quorate: false,
                base: vec![NodeId(1), NodeId(2), NodeId(3)],
            },
        };
        ClusterSnapshot {
            status,
            cpg: CpgStats {
                try_again: 4,
                ..CpgStats::default()
            },
            corosync_backlog: 0,
            heartbeat: HeartbeatStats {
                unknown_source: 1,
                ..HeartbeatStats::default()
            },
            loop_counters: LoopCounters::default(),
            corosync_error: None,
            taken_at: at,
        }
    }

    #[test]
    fn members_are_configured_and_agreed_nodes() {
        let mut settings = settings();
        settings.inside.addresses.v6 = Some("fd01::1".parse().unwrap());
        let report = cluster_report(&settings, &snapshot(), 0);
        let ids: Vec<u32> = report.members.iter().map(|m| m.node_id).collect();
        assert_eq!(ids, [1, 2, 3]);
        let [one, two, three] = &report.members[..] else {
            panic!("three members");
        };
        assert!(one.local && one.live && one.ready && !one.suspected);
        assert_eq!(one.last_heartbeat_ms, None);
        assert!(two.agreed && two.suspected && !two.live);
        assert_eq!(two.address.as_deref(), Some("10.99.0.12"));
        assert_eq!(two.last_heartbeat_ms, Some(40));
        assert!(
            !three.agreed && !three.live && !three.ready,
            "configured only"
        );
        assert_eq!((report.node_id, report.generation), (1, 3));
        assert_eq!(
            report.resolver,
            Some(1),
            "the view's first answers ARP and ND"
        );
        let sides: Vec<(&str, &str, Vec<String>, &str)> = report
            .virtual_sides
            .iter()
            .map(|v| {
                (
                    &v.side[..],
                    &v.interface[..],
                    v.addresses.clone(),
                    &v.mac[..],
                )
            })
            .collect();
        assert_eq!(
            sides,
            [
                (
                    "inside",
                    "if2",
                    vec!["192.0.2.2".into(), "fd01::1".into()],
                    "02:00:00:00:00:02"
                ),
                (
                    "outside",
                    "if1",
                    vec!["192.0.2.1".to_owned()],
                    "02:00:00:00:00:01"
                ),
            ]
        );
        assert_eq!(report.scheme, "hash-src-spi");
        assert_eq!(report.segment_owners, vec![1; 256]);
        let quorum = report.quorum.expect("the daemon always reports quorum");
        assert_eq!(
            (quorum.policy.as_str(), quorum.quorate, quorum.base),
            ("majority", false, vec![1, 2, 3])
        );
    }

    #[test]
    fn sas_show_blocks_classes_and_checkpoint_age() {
        let report = cluster_report(&settings(), &snapshot(), 0);
        let out = &report.sas[0];
        assert_eq!(
            (out.spi, out.direction, out.counter),
            (0x1001, Direction::Out, 5000)
        );
        assert_eq!(out.peer.as_deref(), Some("192.0.2.2"));
        let block = out.block.as_ref().unwrap();
        assert_eq!(
            (block.start, block.end, &block.view[..]),
            (4097, 8192, &[1, 2][..])
        );
        assert_eq!(out.class, Some(0));
        let suspects: Vec<u32> = out.takeover_blocks.iter().map(|t| t.suspect).collect();
        assert_eq!(suspects, [1, 2]);
        assert_eq!(out.takeover_blocks[1].block.view, [1]);
        assert_eq!(out.checkpoint_age_ms, Some(12));
        let inbound = &report.sas[1];
        assert_eq!((inbound.direction, inbound.counter), (Direction::In, 777));
        assert_eq!((inbound.block.as_ref(), inbound.class), (None, None));
        assert_eq!((out.peer_window, out.spread), (Some(128), Some(false)));
        assert_eq!((inbound.peer_window, inbound.spread), (None, None));
    }

    #[test]
    fn failovers_and_counters() {
        let report = cluster_report(&settings(), &snapshot(), 5);
        let f = &report.failovers[0];
        assert_eq!(
            (f.suspect, f.outcome.as_str(), f.age_seconds),
            (2, "pending", 0)
        );
        assert!((f.detected_after_ms - 31.25).abs() < 1e-9);
        assert_eq!(
            f.handover_ms.map(|ms| (ms * 1000.0).round()),
            Some(31_500.0)
        );
        let count = |name: &str| {
            report
                .counters
                .iter()
                .find(|c| c.name == name)
                .map(|c| c.count)
        };
        assert_eq!(count("lease_grants"), Some(6));
        assert_eq!(count("takeovers"), Some(1));
        assert_eq!(count("heals"), Some(2));
        assert_eq!(count("outbound_not_owned"), Some(9));
        assert_eq!(count("corosync_try_again"), Some(4));
        assert_eq!(count("heartbeats_unknown_source"), Some(1));
        assert_eq!(count("report_queue_full"), Some(5));
        let mut names: Vec<&str> = report.counters.iter().map(|c| c.name.as_str()).collect();
        let total = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), total, "counter names are unique");
    }
}
