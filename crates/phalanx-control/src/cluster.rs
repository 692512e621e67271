//! The cluster answer (`phalanxctl cluster`): members and who is live,
//! who owns what, the sequence-number leases of every SA, how far each
//! SA's last counter checkpoint lags, the cluster counters, the last
//! failovers with their measured handover times, and the virtual
//! addresses with the node that answers for them.

use serde::{Deserialize, Serialize};

use crate::types::{Direction, NamedCounter};

/// One node's view of the cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterReport {
    /// This node's id (its Corosync nodeid).
    pub node_id: u32,
    /// The dispatch scheme (`"packet-rr"`, `"hash-src-spi"`, ...).
    pub scheme: String,
    /// The Corosync CPG group.
    pub group: String,
    /// Whether this node has its state transfer and owns traffic.
    pub ready: bool,
    /// Lease generations so far: each change of the base view (a join, a
    /// failure the log agreed on) starts one, with fresh blocks for all.
    pub generation: u64,
    /// Why this node lost Corosync, if it did (it then sends no heartbeats
    /// and owns nothing).
    #[serde(default)]
    pub corosync_error: Option<String>,
    /// Where this node stands on quorum (absent from older daemons).
    #[serde(default)]
    pub quorum: Option<QuorumReport>,
    /// Every configured or agreed node, ascending by id.
    pub members: Vec<ClusterMember>,
    /// Hash schemes: the owner of each of the 256 segments, by segment
    /// number (0: no live owner). Empty for the other schemes.
    #[serde(default)]
    pub segment_owners: Vec<u32>,
    /// Per-SA sequence state.
    pub sas: Vec<ClusterSaReport>,
    /// Cluster counters by name (heals, lease grants, takeovers, no-lease
    /// drops, decode errors, Corosync retries, heartbeats, ...).
    pub counters: Vec<NamedCounter>,
    /// The most recent failovers, oldest first.
    pub failovers: Vec<FailoverReport>,
    /// The virtual addresses of both sides (absent from older daemons).
    #[serde(default)]
    pub virtual_sides: Vec<VirtualSideReport>,
    /// The node that answers ARP and neighbour solicitations for them:
    /// the view's first (`None`: no view yet).
    #[serde(default)]
    pub resolver: Option<u32>,
}

/// One side's virtual addresses, shared by every node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VirtualSideReport {
    /// `"inside"` (the clear side) or `"outside"` (the tunnel endpoint).
    pub side: String,
    /// The interface every node receives that side's frames on.
    pub interface: String,
    /// The virtual IP addresses (IPv4 answered by ARP, IPv6 by neighbour
    /// discovery).
    pub addresses: Vec<String>,
    /// The virtual MAC address.
    pub mac: String,
}

/// Quorum as one node sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumReport {
    /// `"majority"` (a minority side stands down) or `"off"`.
    pub policy: String,
    /// This node holds the state and its side is quorate: it may own
    /// traffic. False while it stands down (or before its transfer).
    pub quorate: bool,
    /// The last agreed membership in which the state was quorate: the
    /// votes a side counts against.
    pub base: Vec<u32>,
}

/// One node as this node sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMember {
    /// The node id.
    pub node_id: u32,
    /// Whether it is this node.
    pub local: bool,
    /// In Corosync's agreed membership.
    pub agreed: bool,
    /// In the dispatch view (agreed, not suspected, ready).
    pub live: bool,
    /// Its heartbeats stopped and this node took over its share.
    pub suspected: bool,
    /// Suspected, and heard steadily again since: its inbound share is
    /// its own again, its outbound share waits for the log's `Rejoin`.
    #[serde(default)]
    pub heard_again: bool,
    /// Joined with a state transfer (multicast `Ready`).
    pub ready: bool,
    /// Its heartbeat address, when configured.
    #[serde(default)]
    pub address: Option<String>,
    /// Milliseconds since its last heartbeat reached this node.
    #[serde(default)]
    pub last_heartbeat_ms: Option<u64>,
}

/// A block of sequence numbers and the classes that may send from it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseBlockReport {
    /// First number of the block.
    pub start: u64,
    /// Last number of the block (inclusive).
    pub end: u64,
    /// The view it was granted for: node ids in class order.
    pub view: Vec<u32>,
}

/// A takeover block reserved for the failure of one member.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TakeoverBlockReport {
    /// The member whose failure it is reserved for.
    pub suspect: u32,
    /// The block (its view leaves `suspect` out).
    pub block: LeaseBlockReport,
}

/// One SA's cluster sequence state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterSaReport {
    /// The SPI.
    pub spi: u32,
    /// Outbound (leased sequence numbers) or inbound (observed ones).
    pub direction: Direction,
    /// The remote gateway's address.
    #[serde(default)]
    pub peer: Option<String>,
    /// Outbound: the stream's packet counter at this node's last
    /// checkpoint; inbound: the highest sequence number in the replay
    /// checkpoint the log holds.
    pub counter: u64,
    /// Outbound: the sequence space is used up; the SA must be rekeyed.
    #[serde(default)]
    pub exhausted: bool,
    /// Outbound: the replay window the peer applies to it, when
    /// configured (`peer_replay_window`).
    #[serde(default)]
    pub peer_window: Option<u32>,
    /// Outbound: whether several nodes send its packets (false: one node
    /// does, its peer's window being too small or unknown for the
    /// reordering spreading causes); `None` for inbound SAs.
    #[serde(default)]
    pub spread: Option<bool>,
    /// Outbound: the block this node sends from now.
    #[serde(default)]
    pub block: Option<LeaseBlockReport>,
    /// This node's class in that block (its index in the block's view).
    #[serde(default)]
    pub class: Option<u32>,
    /// The takeover blocks reserved for it.
    #[serde(default)]
    pub takeover_blocks: Vec<TakeoverBlockReport>,
    /// Milliseconds since the last counter checkpoint of this SA was
    /// delivered; `None` before the first.
    #[serde(default)]
    pub checkpoint_age_ms: Option<u64>,
}

/// One takeover: a node's heartbeats stopped and this node took over.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FailoverReport {
    /// The suspected node.
    pub suspect: u32,
    /// Milliseconds from its last heartbeat to the suspicion.
    pub detected_after_ms: f64,
    /// Milliseconds from its last heartbeat to this node's data path
    /// switching over (the handover time the issue measures); `None`
    /// until the data path reported the switch.
    #[serde(default)]
    pub handover_ms: Option<f64>,
    /// `"pending"` (Corosync has not spoken yet), `"confirmed"` (the node
    /// left the agreed membership) or `"corrected"` (it rejoined: a false
    /// suspicion).
    pub outcome: String,
    /// Seconds since the takeover.
    pub age_seconds: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode_response, encode_request, encode_response};
    use crate::{Request, Response};

    fn block(start: u64, view: &[u32]) -> LeaseBlockReport {
        LeaseBlockReport {
            start,
            end: start + 4095,
            view: view.to_vec(),
        }
    }

    fn sample() -> ClusterReport {
        ClusterReport {
            node_id: 2,
            scheme: "packet-rr".into(),
            group: "phalanx".into(),
            ready: true,
            generation: 3,
            corosync_error: None,
            quorum: Some(QuorumReport {
                policy: "majority".into(),
                quorate: true,
                base: vec![1, 2, 3],
            }),
            members: vec![ClusterMember {
                node_id: 1,
                agreed: true,
                suspected: true,
                address: Some("10.99.0.11".into()),
                last_heartbeat_ms: Some(41),
                ..ClusterMember::default()
            }],
            segment_owners: vec![],
            sas: vec![ClusterSaReport {
                spi: 0x1001,
                direction: Direction::Out,
                peer: Some("192.0.2.2".into()),
                counter: 4242,
                exhausted: false,
                peer_window: Some(128),
                spread: Some(false),
                block: Some(block(4097, &[2, 3])),
                class: Some(0),
                takeover_blocks: vec![TakeoverBlockReport {
                    suspect: 3,
                    block: block(16_385, &[2]),
                }],
                checkpoint_age_ms: Some(7),
            }],
            counters: vec![NamedCounter {
                name: "takeovers".into(),
                count: 1,
            }],
            failovers: vec![FailoverReport {
                suspect: 1,
                detected_after_ms: 31.5,
                handover_ms: Some(31.75),
                outcome: "pending".into(),
                age_seconds: 2,
            }],
            virtual_sides: vec![],
            resolver: None,
        }
    }

    #[test]
    fn cluster_request_and_answer_round_trip() {
        let line = encode_request(4, &Request::Cluster);
        assert_eq!(
            line,
            "{\"version\":1,\"id\":4,\"request\":{\"type\":\"cluster\"}}\n"
        );
        let response = Response::Cluster(sample());
        let line = encode_response(4, &Ok(response.clone()));
        let decoded = decode_response(line.as_bytes()).expect("decodes");
        assert_eq!(decoded.outcome, Ok(response));
        assert!(line.contains("\"type\":\"cluster\""));
        assert!(line.contains("\"handover_ms\":31.75"));
    }

    #[test]
    fn optional_cluster_fields_may_be_absent() {
        let line = concat!(
            r#"{"version":1,"id":1,"result":{"type":"cluster","data":{"node_id":1,"#,
            r#""scheme":"hash-src","group":"g","ready":false,"generation":0,"#,
            r#""members":[{"node_id":1,"local":true,"agreed":true,"live":true,"#,
            r#""suspected":false,"ready":true}],"#,
            r#""sas":[{"spi":9,"direction":"in","counter":0,"newer":1}],"#,
            r#""counters":[],"failovers":[]}}}"#
        );
        let decoded = decode_response(line.as_bytes()).expect("decodes");
        let Ok(Response::Cluster(report)) = decoded.outcome else {
            panic!("not a cluster answer");
        };
        assert!(report.segment_owners.is_empty());
        assert_eq!(report.members[0].address, None);
        assert_eq!(report.sas[0].block, None);
        assert!(report.sas[0].takeover_blocks.is_empty());
        assert_eq!(
            (report.sas[0].peer.as_ref(), report.sas[0].exhausted),
            (None, false)
        );
        assert_eq!(report.corosync_error, None);
        assert_eq!(report.quorum, None);
    }
}
