//! The cluster's Prometheus families (only on a cluster node), written
//! with the exposition helpers of [`crate::metrics`].

use phalanx_control::{ClusterMember, ClusterReport};

use crate::metrics::{family, sample, Float};

/// Cluster members by state, the failover record and the cluster
/// counters (only on a cluster node). The counters the issue names get
/// families of their own; every counter is also in
/// `phalanx_cluster_counter_total` by name.
pub(crate) fn render(out: &mut String, report: &ClusterReport) {
    let name = "phalanx_cluster_members";
    family(out, name, "gauge", "Cluster nodes this node knows, by state (agreed: in Corosync's membership; live: in the dispatch view; suspected: heartbeats stopped; ready: state-transferred).");
    type MemberState = fn(&ClusterMember) -> bool;
    let states: [(&str, MemberState); 4] = [
        ("agreed", |m| m.agreed),
        ("live", |m| m.live),
        ("suspected", |m| m.suspected),
        ("ready", |m| m.ready),
    ];
    for (state, test) in states {
        let n = report.members.iter().filter(|m| test(m)).count();
        sample(out, name, &[("state", state)], n);
    }
    family(
        out,
        "phalanx_cluster_ready",
        "gauge",
        "1 once this node has its state transfer and owns traffic.",
    );
    sample(out, "phalanx_cluster_ready", &[], u8::from(report.ready));
    if let Some(quorum) = &report.quorum {
        let name = "phalanx_cluster_quorate";
        family(out, name, "gauge", "1 while this node's side of the cluster is quorate and may own traffic (policy as label).");
        sample(
            out,
            name,
            &[("policy", &quorum.policy)],
            u8::from(quorum.quorate),
        );
    }
    let count = |name: &str| {
        report
            .counters
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.count)
    };
    let named: [(&str, &str, &str); 4] = [
        ("phalanx_cluster_takeovers_total", "takeovers", "Takeovers of a suspected node's share."),
        ("phalanx_cluster_heals_total", "heals", "Stream counters advanced to a peer's checkpoint (a missed packet healed)."),
        ("phalanx_cluster_lease_grants_total", "lease_grants", "Sequence-number lease blocks granted through the replicated log (takeover reservations included)."),
        ("phalanx_cluster_no_lease_drops_total", "outbound_no_lease", "Owned outbound packets dropped for want of a leased sequence number."),
    ];
    for (metric, counter, help) in named {
        if let Some(n) = count(counter) {
            family(out, metric, "counter", help);
            sample(out, metric, &[], n);
        }
    }
    let name = "phalanx_cluster_not_owned_packets_total";
    family(
        out,
        name,
        "counter",
        "Packets this node saw and left to their owner, by direction.",
    );
    for direction in ["outbound", "inbound"] {
        if let Some(n) = count(&format!("{direction}_not_owned")) {
            sample(out, name, &[("direction", direction)], n);
        }
    }
    if let Some(handover) = report.failovers.iter().rev().find_map(|f| f.handover_ms) {
        let name = "phalanx_cluster_handover_seconds";
        family(out, name, "gauge", "Handover time of the last takeover: the suspect's last heartbeat to this node's data path switching over.");
        sample(out, name, &[], Float(handover / 1000.0));
    }
    let name = "phalanx_cluster_counter_total";
    family(out, name, "counter", "Cluster events, by name.");
    for counter in &report.counters {
        sample(out, name, &[("name", &counter.name)], counter.count);
    }
}
