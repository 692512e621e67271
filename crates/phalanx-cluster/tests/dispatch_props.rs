//! Property tests of dispatch: every node that holds the same view and sees
//! the same packets picks the same owner, so exactly one live node
//! processes each packet, for every scheme and across membership changes;
//! plus the balance properties of each scheme against slow reference
//! models.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use phalanx_cluster::dispatch::{SESSION_RESYNC_PACKETS, SQF_RESYNC_PACKETS};
use phalanx_cluster::{
    segment_owner, Direction, DispatchScheme, Dispatcher, NodeId, PacketKey, View, SEGMENTS,
};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One packet as generated: which stream, its size, flow and peer.
#[derive(Clone, Copy, Debug)]
struct Arrival {
    inbound: bool,
    spi: u32,
    len: u32,
    flow: u64,
    peer: u8,
}

fn arrival() -> impl Strategy<Value = Arrival> {
    (any::<bool>(), 0u32..4, 40u32..=1500, 0u64..24, 0u8..3).prop_map(
        |(inbound, spi, len, flow, peer)| Arrival {
            inbound,
            spi,
            len,
            flow,
            peer,
        },
    )
}

fn scheme() -> impl Strategy<Value = DispatchScheme> {
    prop::sample::select(DispatchScheme::ALL.to_vec())
}

fn members(max: usize) -> impl Strategy<Value = BTreeSet<u32>> {
    prop::collection::btree_set(1u32..=64, 1..=max)
}

fn view(epoch: u64, ids: &BTreeSet<u32>) -> View {
    View::new(epoch, ids.iter().map(|&id| NodeId(id)))
}

/// Turns arrivals into keys, numbering each stream's packets from `start`
/// (the outbound counter `c`, or the inbound sequence number).
struct Numbering {
    start: u64,
    next: BTreeMap<(bool, u32), u64>,
}

impl Numbering {
    fn new(start: u64) -> Numbering {
        Numbering {
            start,
            next: BTreeMap::new(),
        }
    }

    fn key(&mut self, a: &Arrival) -> PacketKey {
        let next = self.next.entry((a.inbound, a.spi)).or_insert(self.start);
        let index = *next;
        *next += 1;
        let direction = if a.inbound {
            Direction::Inbound
        } else {
            Direction::Outbound
        };
        PacketKey {
            direction,
            spi: a.spi,
            index,
            len: a.len,
            flow: if a.inbound { 0 } else { a.flow },
            peer: IpAddr::V4(Ipv4Addr::new(198, 51, 100, a.peer)),
        }
    }
}

/// Every node's dispatcher decides; returns the owner all agreed on,
/// after checking that exactly one live node considers itself owner.
fn decide(nodes: &mut [(NodeId, Dispatcher)], key: &PacketKey) -> NodeId {
    let owners: Vec<Option<NodeId>> = nodes.iter_mut().map(|(_, d)| d.owner(key)).collect();
    let first = owners[0].expect("a non-empty view always has an owner");
    assert!(
        owners.iter().all(|&o| o == Some(first)),
        "nodes disagree: {owners:?}"
    );
    let view = nodes[0].1.view().clone();
    assert!(
        view.contains(first),
        "owner {first} is not live in {view:?}"
    );
    let claimed = nodes
        .iter()
        .filter(|(id, _)| view.contains(*id) && *id == first)
        .count();
    assert_eq!(claimed, 1, "exactly one live node owns the packet");
    first
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn equal_views_agree_on_one_live_owner(
        scheme in scheme(),
        ids in members(8),
        packets in prop::collection::vec(arrival(), 1..300),
        start in 0u64..3000,
    ) {
        let v = view(1, &ids);
        let mut nodes: Vec<(NodeId, Dispatcher)> =
            v.members().iter().map(|&id| (id, Dispatcher::new(scheme, v.clone()))).collect();
        let mut numbering = Numbering::new(start);
        for a in &packets {
            decide(&mut nodes, &numbering.key(a));
        }
    }

    #[test]
    fn membership_changes_keep_exactly_one_owner(
        scheme in scheme(),
        universe in members(8),
        packets in prop::collection::vec(arrival(), 1..300),
        changes in prop::collection::vec((0usize..300, any::<u64>()), 0..6),
    ) {
        let all: Vec<u32> = universe.iter().copied().collect();
        let mut nodes: Vec<(NodeId, Dispatcher)> = all
            .iter()
            .map(|&id| (NodeId(id), Dispatcher::new(scheme, view(1, &universe))))
            .collect();
        let mut numbering = Numbering::new(1);
        for (position, a) in packets.iter().enumerate() {
            for (epoch, &(at, mask)) in changes.iter().enumerate() {
                if at == position {
                    // A non-empty subset of the universe, applied by every
                    // node at the same stream position.
                    let mut live: BTreeSet<u32> = all
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| mask & (1 << i) != 0)
                        .map(|(_, &id)| id)
                        .collect();
                    if live.is_empty() {
                        live.insert(all[(mask as usize >> 8) % all.len()]);
                    }
                    for (_, d) in &mut nodes {
                        d.set_view(view(2 + epoch as u64, &live));
                    }
                }
            }
            decide(&mut nodes, &numbering.key(a));
        }
    }

    #[test]
    fn a_diverged_node_agrees_again_from_the_next_epoch(
        scheme in scheme(),
        ids in members(6),
        packets in prop::collection::vec(arrival(), 60..260),
        before in 1u64..50,
        missed in prop::collection::vec(any::<bool>(), 50),
        fresh in any::<bool>(),
    ) {
        // Streams start `before` packets ahead of an epoch boundary. Node B
        // misses some of those packets, or (when `fresh`) holds no state for
        // the stream when it reaches the boundary, like a joiner.
        let period = if scheme.is_session_based() { SESSION_RESYNC_PACKETS } else { SQF_RESYNC_PACKETS };
        let boundary = 4 * period;
        let v = view(1, &ids);
        let mut a_node = Dispatcher::new(scheme, v.clone());
        let mut b_node = Dispatcher::new(scheme, v.clone());
        let mut numbering = Numbering::new(boundary - before);
        for (i, a) in packets.iter().enumerate() {
            let key = numbering.key(a);
            let owner_a = a_node.owner(&key);
            if key.index < boundary {
                if fresh {
                    b_node.forget_stream(key.direction, key.spi);
                } else if !missed[i % missed.len()] {
                    b_node.owner(&key);
                }
            } else {
                prop_assert_eq!(owner_a, b_node.owner(&key), "index {}", key.index);
            }
        }
    }

    #[test]
    fn removing_a_node_moves_only_its_segments(
        ids in prop::collection::btree_set(1u32..=65_535, 2..=8),
        pick in any::<prop::sample::Index>(),
    ) {
        let before = view(1, &ids);
        let removed = before.members()[pick.index(before.len())];
        let after = before.without(&[removed]);
        for segment in 0..SEGMENTS {
            let old = segment_owner(&before, segment);
            let new = segment_owner(&after, segment);
            if old == Some(removed) {
                prop_assert!(new.is_some() && new != Some(removed));
            } else {
                prop_assert_eq!(old, new, "segment {} moved", segment);
            }
        }
    }

    #[test]
    fn segments_spread_within_twice_the_fair_share(
        ids in prop::collection::btree_set(1u32..=65_535, 1..=8),
    ) {
        let v = view(1, &ids);
        let mut held: BTreeMap<NodeId, usize> = BTreeMap::new();
        for segment in 0..SEGMENTS {
            let owner = segment_owner(&v, segment).expect("non-empty view");
            *held.entry(owner).or_default() += 1;
        }
        let fair = usize::from(SEGMENTS) / v.len();
        for (node, count) in held {
            prop_assert!(count <= 2 * fair, "{} holds {} of {} segments", node, count, SEGMENTS);
        }
    }

    #[test]
    fn packet_round_robin_is_within_one_of_fair(
        ids in members(8),
        len in 1u64..2000,
        start in 0u64..1_000_000,
    ) {
        let v = view(1, &ids);
        let mut d = Dispatcher::new(DispatchScheme::PacketRoundRobin, v.clone());
        let mut counts: BTreeMap<NodeId, u64> = BTreeMap::new();
        let mut numbering = Numbering::new(start);
        let a = Arrival { inbound: false, spi: 1, len: 100, flow: 0, peer: 0 };
        for _ in 0..len {
            let owner = d.owner(&numbering.key(&a)).expect("non-empty view");
            *counts.entry(owner).or_default() += 1;
        }
        let fair = len as f64 / v.len() as f64;
        for &node in v.members() {
            let count = counts.get(&node).copied().unwrap_or(0) as f64;
            prop_assert!((count - fair).abs() < 1.0, "{} got {} of {}", node, count, len);
        }
    }

    #[test]
    fn packet_sqf_matches_the_reference_model(
        ids in members(8),
        sizes in prop::collection::vec(40u32..=1500, 1..500),
        spi in any::<u32>(),
    ) {
        let v = view(1, &ids);
        let mut d = Dispatcher::new(DispatchScheme::PacketShortestQueue, v.clone());
        let mut model = ReferenceQueues::new(v.len());
        let mut previous: Option<usize> = None;
        for (i, &len) in sizes.iter().enumerate() {
            model.drain(len);
            let start = previous.map_or(spi as usize % v.len(), |p| (p + 1) % v.len());
            let expected = model.shortest_from(start);
            model.add(expected, len);
            previous = Some(expected);
            let key = PacketKey {
                direction: Direction::Outbound,
                spi,
                index: 1 + i as u64,
                len,
                flow: 0,
                peer: IpAddr::V4(Ipv4Addr::LOCALHOST),
            };
            prop_assert_eq!(d.owner(&key), v.member(expected), "packet {}", i);
            // SQF keeps the queues within one packet of each other.
            prop_assert!(model.spread_bytes() <= 1500.0 + 1e-9);
        }
    }
}

/// A slow reference for the SQF model: queues in bytes as f64.
struct ReferenceQueues {
    bytes: Vec<f64>,
}

impl ReferenceQueues {
    fn new(n: usize) -> ReferenceQueues {
        ReferenceQueues {
            bytes: vec![0.0; n],
        }
    }

    fn drain(&mut self, len: u32) {
        let share = f64::from(len) / self.bytes.len() as f64;
        for q in &mut self.bytes {
            *q = (*q - share).max(0.0);
        }
    }

    /// The first shortest queue in cyclic order from `start`. Queues are
    /// multiples of 1/n byte, so distinct values differ by far more than
    /// the rounding error the tolerance absorbs.
    fn shortest_from(&self, start: usize) -> usize {
        let n = self.bytes.len();
        let order = (0..n).map(|step| (start + step) % n);
        let min = self.bytes.iter().copied().fold(f64::INFINITY, f64::min);
        order
            .into_iter()
            .find(|&i| (self.bytes[i] - min).abs() < 1e-6)
            .expect("n > 0")
    }

    fn add(&mut self, index: usize, len: u32) {
        self.bytes[index] += f64::from(len);
    }

    fn spread_bytes(&self) -> f64 {
        let max = self.bytes.iter().copied().fold(0.0, f64::max);
        let min = self.bytes.iter().copied().fold(f64::INFINITY, f64::min);
        max - min
    }
}

/// The largest queue spread (max - min, bytes) over a stream when each
/// packet goes to the owner `scheme` picks.
fn worst_spread(scheme: DispatchScheme, n: u32, sizes: &[u32]) -> f64 {
    let v = View::new(1, (1..=n).map(NodeId));
    let mut d = Dispatcher::new(scheme, v.clone());
    let mut model = ReferenceQueues::new(v.len());
    let mut worst: f64 = 0.0;
    for (i, &len) in sizes.iter().enumerate() {
        let key = PacketKey {
            direction: Direction::Outbound,
            spi: 7,
            index: 1 + i as u64,
            len,
            flow: 0,
            peer: IpAddr::V4(Ipv4Addr::LOCALHOST),
        };
        let owner = d.owner(&key).expect("non-empty view");
        model.drain(len);
        model.add(v.index_of(owner).expect("owner is a member"), len);
        worst = worst.max(model.spread_bytes());
    }
    worst
}

#[test]
fn sqf_balances_mixed_sizes_better_than_round_robin() {
    // A fixed IMIX-like sequence (64/576/1500 B at 7:4:1), under one epoch.
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let sizes: Vec<u32> = (0..1000)
        .map(|_| match rng.gen_range(0..12) {
            0..=6 => 64,
            7..=10 => 576,
            _ => 1500,
        })
        .collect();
    for n in [2, 3, 4, 8] {
        let rr = worst_spread(DispatchScheme::PacketRoundRobin, n, &sizes);
        let sqf = worst_spread(DispatchScheme::PacketShortestQueue, n, &sizes);
        assert!(sqf <= rr, "n={n}: sqf spread {sqf} > rr spread {rr}");
        assert!(sqf <= 1500.0, "n={n}: sqf spread {sqf}");
        // Round robin lets a run of large packets pile onto some nodes.
        assert!(
            rr > sqf,
            "n={n}: the sequence should separate the schemes ({rr} vs {sqf})"
        );
    }
}
