//! The cluster request through the real control socket and the cluster
//! families of a real scrape, with a test double for the daemon.

use std::sync::Arc;

use phalanx_control::{
    Client, ClusterMember, ClusterReport, ControlError, CounterReport, ErrorBody, ErrorCode,
    FailoverReport, NamedCounter, PolicyInfo, ReloadSummary, Request, Response, SaInfo, Status,
};

use crate::control::{self, ControlHandler};
use crate::metrics;

/// A daemon that is a cluster node when it holds a report.
struct FakeNode(Option<ClusterReport>);

impl ControlHandler for FakeNode {
    fn status(&self) -> Status {
        Status::default()
    }
    fn sas(&self) -> Vec<SaInfo> {
        Vec::new()
    }
    fn policies(&self) -> Vec<PolicyInfo> {
        Vec::new()
    }
    fn counters(&self) -> CounterReport {
        CounterReport::default()
    }
    fn reload(&self) -> Result<ReloadSummary, String> {
        Err("not in this test".into())
    }
    fn cluster(&self) -> Result<ClusterReport, ErrorBody> {
        self.0.clone().ok_or_else(control::cluster_disabled)
    }
}

fn member(node_id: u32, suspected: bool) -> ClusterMember {
    ClusterMember {
        node_id,
        local: node_id == 1,
        agreed: true,
        live: !suspected,
        suspected,
        heard_again: false,
        ready: true,
        address: None,
        last_heartbeat_ms: None,
    }
}

fn report() -> ClusterReport {
    let counter = |name: &str, count| NamedCounter {
        name: name.into(),
        count,
    };
    ClusterReport {
        node_id: 1,
        scheme: "packet-rr".into(),
        group: "phalanx".into(),
        ready: true,
        generation: 2,
        corosync_error: None,
        quorum: Some(phalanx_control::QuorumReport {
            policy: "majority".into(),
            quorate: true,
            base: vec![1, 2, 3],
        }),
        members: vec![member(1, false), member(2, false), member(3, true)],
        segment_owners: Vec::new(),
        sas: Vec::new(),
        counters: vec![
            counter("takeovers", 2),
            counter("heals", 5),
            counter("lease_grants", 9),
            counter("outbound_not_owned", 40),
            counter("inbound_not_owned", 41),
        ],
        failovers: vec![
            FailoverReport {
                suspect: 2,
                detected_after_ms: 30.0,
                handover_ms: Some(99.0),
                outcome: "corrected".into(),
                age_seconds: 50,
            },
            FailoverReport {
                suspect: 3,
                detected_after_ms: 31.0,
                handover_ms: Some(31.5),
                outcome: "pending".into(),
                age_seconds: 1,
            },
        ],
        virtual_sides: vec![],
        resolver: None,
    }
}

fn socket_path(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("phx-cluster-{tag}-{}.sock", std::process::id()))
}

#[test]
fn cluster_request_is_answered_or_refused() {
    let path = socket_path("on");
    let server = control::serve(Arc::new(FakeNode(Some(report()))), &path).unwrap();
    let mut client = Client::connect(server.path()).unwrap();
    match client.call(Request::Cluster).unwrap() {
        Response::Cluster(r) => assert_eq!(r, report()),
        other => panic!("{other:?}"),
    }
    drop(server);
    let path = socket_path("off");
    let server = control::serve(Arc::new(FakeNode(None)), &path).unwrap();
    let mut client = Client::connect(server.path()).unwrap();
    let e = client.call(Request::Cluster).unwrap_err();
    assert!(
        matches!(e, ControlError::Remote(ref b) if b.code == ErrorCode::CLUSTER_DISABLED),
        "{e}"
    );
}

#[test]
fn scrape_has_the_cluster_families() {
    let text = metrics::render(&FakeNode(Some(report())));
    for line in [
        "phalanx_cluster_members{state=\"agreed\"} 3",
        "phalanx_cluster_members{state=\"live\"} 2",
        "phalanx_cluster_members{state=\"suspected\"} 1",
        "phalanx_cluster_ready 1",
        "phalanx_cluster_quorate{policy=\"majority\"} 1",
        "phalanx_cluster_takeovers_total 2",
        "phalanx_cluster_heals_total 5",
        "phalanx_cluster_lease_grants_total 9",
        "phalanx_cluster_not_owned_packets_total{direction=\"outbound\"} 40",
        "phalanx_cluster_not_owned_packets_total{direction=\"inbound\"} 41",
        "phalanx_cluster_handover_seconds 0.0315",
        "phalanx_cluster_counter_total{name=\"heals\"} 5",
        "# TYPE phalanx_cluster_takeovers_total counter",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
    }
    let host = metrics::render(&FakeNode(None));
    assert!(
        !host.contains("phalanx_cluster_"),
        "no cluster families in host mode"
    );
}
