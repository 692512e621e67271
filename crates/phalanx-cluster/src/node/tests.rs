//! Scenario tests of the node on a virtual clock, with a minimal in-crate
//! group (the full harness lives in phalanx-testkit).

use super::*;
use crate::codec::APP_CHANNEL_IKE;
use crate::datapath::NodeDataPath;
use core::net::Ipv4Addr;

const MS: Duration = Duration::from_millis(1);

/// A tiny group: one log, every member reads it from its join on.
struct Mini {
    now: Instant,
    nodes: BTreeMap<NodeId, ClusterNode>,
    paths: BTreeMap<NodeId, NodeDataPath>,
    log: Vec<(Option<NodeId>, Vec<u8>, Vec<NodeId>)>,
    cursors: BTreeMap<NodeId, usize>,
    members: Vec<NodeId>,
    dead: BTreeSet<NodeId>,
    /// (receiver, sender) pairs whose heartbeats are dropped.
    deaf: BTreeSet<(NodeId, NodeId)>,
    /// The log delivers nothing (Corosync re-forming its ring).
    stalled: bool,
    /// Nodes whose data path is not running yet.
    no_path: BTreeSet<NodeId>,
}

impl Mini {
    fn new(ids: &[u32]) -> Mini {
        let mut mini = Mini {
            now: Instant::now(),
            nodes: BTreeMap::new(),
            paths: BTreeMap::new(),
            log: Vec::new(),
            cursors: BTreeMap::new(),
            members: Vec::new(),
            dead: BTreeSet::new(),
            deaf: BTreeSet::new(),
            stalled: false,
            no_path: BTreeSet::new(),
        };
        for &id in ids {
            mini.add(NodeId(id));
        }
        mini.membership();
        mini
    }

    fn add(&mut self, id: NodeId) {
        let mut config = ClusterConfig::new(id, DispatchScheme::PacketRoundRobin);
        config.lease_len = 100;
        let mut node = ClusterNode::new(config, self.now);
        node.register_sa(self.now, sa(Direction::Outbound, 1));
        node.register_sa(self.now, sa(Direction::Inbound, 2));
        self.nodes.insert(id, node);
        self.paths
            .insert(id, NodeDataPath::new(id, DispatchScheme::PacketRoundRobin));
        self.members.push(id);
        self.cursors.insert(id, self.log.len());
    }

    fn membership(&mut self) {
        self.log.push((None, Vec::new(), self.members.clone()));
    }

    fn remove(&mut self, id: NodeId) {
        self.members.retain(|&m| m != id);
        self.cursors.remove(&id);
        self.membership();
    }

    fn node(&self, id: u32) -> &ClusterNode {
        &self.nodes[&NodeId(id)]
    }

    fn run(&mut self, duration: Duration) {
        let end = self.now + duration;
        while self.now < end {
            self.now += MS / 2;
            self.pump();
        }
    }

    fn pump(&mut self) {
        let now = self.now;
        for _ in 0..20 {
            let mut beats = Vec::new();
            for (&id, node) in self
                .nodes
                .iter_mut()
                .filter(|(id, _)| !self.dead.contains(id))
            {
                if node.poll_timeout().is_some_and(|t| t <= now) {
                    node.handle_timeout(now);
                }
                while let Some(bytes) = node.poll_heartbeat(now) {
                    beats.push((id, bytes));
                }
                while let Some(bytes) = node.poll_datagram() {
                    beats.push((id, bytes));
                }
                while let Some(message) = node.poll_group() {
                    if self.members.contains(&id) {
                        self.log.push((Some(id), message, Vec::new()));
                    }
                }
                if self.no_path.contains(&id) {
                    continue;
                }
                let path = self.paths.get_mut(&id).unwrap();
                while let Some(report) = path.poll_report() {
                    node.handle_report(now, report);
                }
                path.update(&node.shared());
            }
            for (from, bytes) in beats {
                for (&to, node) in self.nodes.iter_mut() {
                    let dropped = self.dead.contains(&to) || self.deaf.contains(&(to, from));
                    if to != from && !dropped {
                        node.handle_heartbeat(now, from, &bytes);
                    }
                }
            }
            for (&id, cursor) in self.cursors.iter_mut() {
                if self.dead.contains(&id) || self.stalled {
                    continue;
                }
                let node = self.nodes.get_mut(&id).unwrap();
                while let Some((from, bytes, members)) = self.log.get(*cursor) {
                    match from {
                        Some(from) => node.handle_delivery(now, *from, bytes),
                        None => node.handle_membership(now, members),
                    }
                    *cursor += 1;
                }
            }
        }
    }
}

fn sa(direction: Direction, spi: u32) -> SaDescriptor {
    SaDescriptor {
        direction,
        spi,
        esn: false,
        peer: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
        peer_window: 0,
    }
}

fn events(node: &mut ClusterNode) -> Vec<ClusterEvent> {
    std::iter::from_fn(|| node.poll_event()).collect()
}

/// "n1,n2 start together": nobody holds a state; after the founding wait
/// n1 founds, both are ready, and the SAs are registered.
#[test]
fn t01_founding() {
    let mut mini = Mini::new(&[1, 2]);
    mini.run(50 * MS);
    assert!(
        !mini.node(1).is_synced(),
        "founding waits for a stable membership"
    );
    mini.run(150 * MS);
    assert!(mini.node(1).is_ready() && mini.node(2).is_ready());
    let n1 = mini.nodes.get_mut(&NodeId(1)).unwrap();
    let ev = events(n1);
    assert!(ev.contains(&ClusterEvent::Founded {
        members: vec![NodeId(1), NodeId(2)]
    }));
    let status = mini.node(2).status();
    assert_eq!(status.sas.len(), 2);
    assert_eq!(status.view.members(), &[NodeId(1), NodeId(2)]);
    assert!(status.sas.iter().any(|s| s.block.is_some()));
}

/// "n1,n2 ready; n3 joins": a transfer, the catch-up, Ready, and a new
/// generation with n3 in it.
#[test]
fn t02_join() {
    let mut mini = Mini::new(&[1, 2]);
    mini.run(250 * MS);
    let generation = mini.node(1).status().generation;
    mini.add(NodeId(3));
    mini.membership();
    mini.run(5 * MS);
    assert!(mini.node(3).is_synced());
    assert!(!mini.node(3).is_ready(), "waits for the replay checkpoints");
    mini.run(300 * MS);
    assert!(mini.node(3).is_ready());
    let status = mini.node(1).status();
    assert_eq!(status.view.members(), &[NodeId(1), NodeId(2), NodeId(3)]);
    assert!(status.generation > generation);
    assert_eq!(status.counters.transfers_sent, 1);
    assert!(mini.paths[&NodeId(3)].is_active());
}

/// "n3 joins, its data path starts 400 ms later": n3 declares itself
/// ready only once its data path runs with the installed state, however
/// long the replay checkpoints have been there (a data path that started
/// after `Ready` would work off its ring under the new view: packets the
/// others already processed).
#[test]
fn t10_ready_waits_for_the_data_path() {
    let mut mini = Mini::new(&[1, 2]);
    mini.run(250 * MS);
    mini.add(NodeId(3));
    mini.no_path.insert(NodeId(3));
    mini.membership();
    mini.run(400 * MS);
    assert!(mini.node(3).is_synced());
    assert!(!mini.node(3).is_ready(), "ready without a data path");
    assert_eq!(mini.node(1).status().view.len(), 2);
    mini.no_path.clear();
    mini.run(50 * MS);
    assert!(mini.node(3).is_ready());
    assert_eq!(mini.node(1).status().view.len(), 3);
    assert!(mini.paths[&NodeId(3)].is_active());
}

/// "n1,n2,n3; kill n3": both survivors suspect it within 30 ms, the data
/// paths take over, the log agrees, Corosync confirms.
#[test]
fn t03_kill_and_confirm() {
    let mut mini = Mini::new(&[1, 2, 3]);
    mini.run(250 * MS);
    mini.dead.insert(NodeId(3));
    mini.run(40 * MS);
    let status = mini.node(1).status();
    assert_eq!(status.view.members(), &[NodeId(1), NodeId(2)]);
    let record = status.failovers.last().copied().unwrap();
    assert_eq!(record.suspect, NodeId(3));
    assert!(record.detected_after > 30 * MS && record.detected_after < 40 * MS);
    assert!(record.handover.is_some());
    assert_eq!(record.confirmed_by_corosync(), None);
    assert!(status
        .members
        .iter()
        .any(|m| m.node == NodeId(3) && m.suspected_in_log));
    mini.remove(NodeId(3));
    mini.run(5 * MS);
    let status = mini.node(1).status();
    assert_eq!(
        status.failovers.last().unwrap().outcome,
        FailoverOutcome::Confirmed
    );
    assert_eq!(status.counters.confirmed, 1);
}

/// "n1 deaf to n3 for 60 ms": n1 suspects n3, the log takes n3 out (n3
/// owns nothing), n1 hears it again and takes it back: corrected.
#[test]
fn t04_false_suspicion_is_corrected() {
    let mut mini = Mini::new(&[1, 2, 3]);
    mini.run(250 * MS);
    mini.deaf.insert((NodeId(1), NodeId(3)));
    mini.run(40 * MS);
    assert!(!mini.node(3).is_ready(), "out of the base view");
    assert!(!mini.paths[&NodeId(3)].is_active());
    assert_eq!(
        mini.node(2).dispatch_view().members(),
        &[NodeId(1), NodeId(2)]
    );
    mini.deaf.clear();
    mini.run(40 * MS);
    assert!(mini.node(3).is_ready());
    let status = mini.node(1).status();
    assert_eq!(
        status.failovers.last().unwrap().outcome,
        FailoverOutcome::Corrected
    );
    assert_eq!(status.counters.rejoins_sent, 1);
    assert_eq!(status.view.len(), 3);
}

/// Heartbeats that lie about their sender, and garbage, are refused.
#[test]
fn t05_heartbeat_refusals() {
    let mut mini = Mini::new(&[1, 2]);
    let now = mini.now;
    let node = mini.nodes.get_mut(&NodeId(1)).unwrap();
    let hb = node.poll_heartbeat(now).unwrap();
    node.handle_heartbeat(now, NodeId(2), &hb);
    node.handle_heartbeat(now, NodeId(2), &[1, 2, 3]);
    node.handle_heartbeat(now, NodeId(2), &encode(&Message::Ready { node: NodeId(2) }));
    let status = node.status();
    assert_eq!(status.counters.heartbeats_refused, 2);
    assert_eq!(status.counters.decode_errors, 1);
}

/// A node whose Corosync failed applies an empty membership: it owns
/// nothing.
#[test]
fn t06_empty_membership_owns_nothing() {
    let mut mini = Mini::new(&[1, 2]);
    mini.run(250 * MS);
    let now = mini.now;
    let node = mini.nodes.get_mut(&NodeId(2)).unwrap();
    node.handle_membership(now, &[]);
    assert!(!node.is_ready());
    assert!(node.shared().view().is_empty() || !node.shared().view().contains(NodeId(2)));
}

/// "n1,n2 packet-rr; n2 misses packet 10; the log stalls (Corosync
/// re-forming its ring)": n1's counter checkpoints reach n2 over the
/// heartbeat channel and n2's counter heals forward without the log.
#[test]
fn t07_checkpoints_heal_over_the_heartbeat_channel_while_the_log_stalls() {
    let mut mini = Mini::new(&[1, 2]);
    mini.run(250 * MS);
    mini.stalled = true;
    let peer = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
    // Fewer packets than a lease of 100 holds: no renewal is needed.
    for i in 1..=60_u64 {
        for id in [1, 2] {
            if id == 2 && i == 10 {
                continue;
            }
            let path = mini.paths.get_mut(&NodeId(id)).unwrap();
            let _ = path.outbound(1, peer, 0, 100, i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        }
    }
    assert_eq!(
        mini.paths[&NodeId(1)].counter(1).unwrap(),
        mini.paths[&NodeId(2)].counter(1).unwrap() + 1,
        "n2 missed one packet"
    );
    mini.run(60 * MS);
    assert_eq!(
        mini.paths[&NodeId(1)].counter(1),
        mini.paths[&NodeId(2)].counter(1),
        "healed with the log stalled"
    );
    assert!(mini.node(2).status().counters.datagram_checkpoints > 0);
}

/// "n1 never founds (dead from the start); n2 waits": n2's next timer is
/// never in the past after a turn, so a thread that sleeps until it does
/// not spin (as it did under SCHED_FIFO, starving the founder).
#[test]
fn t09_a_waiting_joiner_has_no_timer_in_the_past() {
    let mut mini = Mini::new(&[1, 2]);
    mini.dead.insert(NodeId(1));
    mini.run(300 * MS);
    let now = mini.now;
    let n2 = mini.nodes.get_mut(&NodeId(2)).unwrap();
    assert!(!n2.is_synced());
    n2.handle_timeout(now);
    while n2.poll_heartbeat(now).is_some() {}
    assert!(
        n2.poll_timeout().is_some_and(|t| t > now),
        "timer due again at once"
    );
}

fn apps(node: &mut ClusterNode) -> Vec<(u32, Vec<u8>)> {
    std::iter::from_fn(|| node.poll_app())
        .map(|m| (m.from.0, m.payload))
        .collect()
}

/// "n1,n2 ready; both replicate; n3 joins; n2 replicates again": the log
/// delivers App payloads to every synced member, the sender included, in
/// one order; nothing before it holds the state; the joiner gets only what
/// was ordered after its transfer.
#[test]
fn t08_app_payloads_follow_the_agreed_order() {
    let mut mini = Mini::new(&[1, 2]);
    let n1 = mini.nodes.get_mut(&NodeId(1)).unwrap();
    assert_eq!(
        n1.replicate(APP_CHANNEL_IKE, vec![0]),
        Err(ReplicateError::NotSynced)
    );
    mini.run(250 * MS);
    for (id, payload) in [(1, 1u8), (2, 2), (1, 3)] {
        let node = mini.nodes.get_mut(&NodeId(id)).unwrap();
        node.replicate(APP_CHANNEL_IKE, vec![payload]).unwrap();
    }
    let too_big = vec![0; MAX_APP_PAYLOAD + 1];
    let n2 = mini.nodes.get_mut(&NodeId(2)).unwrap();
    assert_eq!(
        n2.replicate(APP_CHANNEL_IKE, too_big),
        Err(ReplicateError::TooLarge)
    );
    mini.run(5 * MS);
    let n1 = apps(mini.nodes.get_mut(&NodeId(1)).unwrap());
    let n2 = apps(mini.nodes.get_mut(&NodeId(2)).unwrap());
    assert_eq!(n1, n2, "one order on every member");
    let mut sorted = n1.clone();
    sorted.sort();
    assert_eq!(sorted, vec![(1, vec![1]), (1, vec![3]), (2, vec![2])]);
    let first = n1.iter().position(|m| m.1 == [1]);
    assert!(
        first < n1.iter().position(|m| m.1 == [3]),
        "a sender's order is kept"
    );
    assert_eq!(mini.node(2).status().counters.app_delivered, 3);
    mini.add(NodeId(3));
    mini.membership();
    mini.run(5 * MS);
    assert!(mini.node(3).is_synced());
    let n2 = mini.nodes.get_mut(&NodeId(2)).unwrap();
    n2.replicate(APP_CHANNEL_IKE, vec![4]).unwrap();
    mini.run(5 * MS);
    for id in [1, 2, 3] {
        let node = mini.nodes.get_mut(&NodeId(id)).unwrap();
        assert_eq!(apps(node), vec![(2, vec![4])], "n{id}");
    }
}

mod hostile {
    use super::*;
    use crate::codec::{Checkpoint, ReplayCheckpoint, StateTransfer, TransferTarget};
    use proptest::prelude::*;

    fn message() -> impl Strategy<Value = Message> {
        let node = (1u32..8).prop_map(NodeId);
        let big = prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>(), 0u64..500];
        prop_oneof![
            (0u32..3, big.clone())
                .prop_map(|(spi, after_end)| Message::LeaseRequest { spi, after_end }),
            (0u32..3, big.clone(), big.clone(), any::<u64>()).prop_map(
                |(spi, lineage, c, fingerprint)| {
                    Message::Checkpoint(Checkpoint {
                        spi,
                        lineage,
                        c,
                        fingerprint,
                    })
                }
            ),
            (
                0u32..3,
                big.clone(),
                proptest::collection::vec(any::<u64>(), 0..64)
            )
                .prop_map(|(spi, top, words)| Message::ReplayCheckpoint(
                    ReplayCheckpoint { spi, top, words }
                )),
            node.clone().prop_map(|node| Message::Suspect { node }),
            node.clone().prop_map(|node| Message::Rejoin { node }),
            node.clone().prop_map(|node| Message::Ready { node }),
            (any::<bool>(), 0u32..3).prop_map(|(out, spi)| {
                let direction = if out {
                    Direction::Outbound
                } else {
                    Direction::Inbound
                };
                Message::SaAdd(sa(direction, spi))
            }),
            (node, big, any::<bool>()).prop_map(|(node, position, founding)| {
                let mini = Mini::new(&[1]);
                let mut state = mini
                    .node(1)
                    .log
                    .as_ref()
                    .map(|l| l.snapshot())
                    .unwrap_or_else(|| {
                        crate::node::log::Replicated::founded(
                            &[NodeId(1)],
                            5,
                            Default::default(),
                            &mut Vec::new(),
                        )
                        .snapshot()
                    });
                state.agreed.push(NodeId(9));
                Message::StateTransfer(Box::new(StateTransfer {
                    founding,
                    targets: vec![TransferTarget { node, position }],
                    state,
                }))
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever other members multicast, in whatever order, a node (and
        /// its data path) never panics, and keeps a consistent status.
        #[test]
        fn hostile_log_never_panics(
            events in proptest::collection::vec((1u32..8, message(), any::<bool>()), 1..40),
        ) {
            let mut mini = Mini::new(&[1, 2]);
            mini.run(250 * MS);
            let now = mini.now;
            for (from, message, packet) in events {
                let node = mini.nodes.get_mut(&NodeId(1)).unwrap();
                node.handle_delivery(now, NodeId(from), &encode(&message));
                node.handle_heartbeat(now, NodeId(from), &encode(&message));
                let path = mini.paths.get_mut(&NodeId(1)).unwrap();
                path.update(&node.shared());
                if packet {
                    path.outbound(1, IpAddr::V4(Ipv4Addr::LOCALHOST), 0, 100, from.into());
                    path.inbound(2, IpAddr::V4(Ipv4Addr::LOCALHOST), from, 100, now);
                }
                let status = node.status();
                prop_assert!(status.view.members().iter().all(|m| status.agreed.contains(m)));
            }
        }
    }
}
