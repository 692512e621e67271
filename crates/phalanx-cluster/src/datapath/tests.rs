use super::shared::{CheckpointNote, InboundShared, OutboundShared};
use super::*;
use crate::lease::LeaseTable;
use crate::limits::SPREAD_MIN_PEER_WINDOW;
use crate::node::SaDescriptor;
use core::net::Ipv4Addr;
use std::collections::{BTreeMap, BTreeSet};

const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
const OUT: u32 = 0x10;
const IN: u32 = 0x20;

/// One arrival time for every packet (nothing here is fenced: no state
/// carries a fence).
fn t0() -> Instant {
    static T0: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *T0.get_or_init(Instant::now)
}

fn view(ids: &[u32]) -> View {
    View::new(1, ids.iter().map(|&i| NodeId(i)))
}

/// A state as a cluster of `ids` would publish it for `local`, its SAs'
/// peer a Phalanx gateway (a window that takes the nodes' skew).
fn state(local: u32, ids: &[u32], version: u64) -> SharedState {
    state_with_window(local, ids, version, SPREAD_MIN_PEER_WINDOW)
}

/// [`state`] with a peer whose replay window is `peer_window`.
fn state_with_window(local: u32, ids: &[u32], version: u64, peer_window: u32) -> SharedState {
    let mut table = LeaseTable::new(64);
    let mut out = Vec::new();
    table.set_view(view(ids), &mut out);
    table.add_sa(OUT, false, &mut out);
    let mut s = SharedState::empty(NodeId(local));
    s.version = version;
    set_views(&mut s, ids);
    s.head.replay_sender = ids.first() == Some(&local);
    s.head.generation = 1;
    s.head.ready = true;
    s.checkpoint_every = 4;
    let descriptor = |direction, spi| SaDescriptor {
        direction,
        spi,
        esn: false,
        peer: PEER,
        peer_window,
    };
    let outbound = OutboundShared {
        descriptor: descriptor(Direction::Outbound, OUT),
        incarnation: 1,
        leases: table.sa(OUT).cloned().map(Arc::new),
        notes: VecDeque::new(),
    };
    let inbound = InboundShared {
        descriptor: descriptor(Direction::Inbound, IN),
        incarnation: 1,
        replay: None,
    };
    s.outbound = BTreeMap::from([(OUT, Arc::new(outbound))]);
    s.inbound = BTreeMap::from([(IN, Arc::new(inbound))]);
    s
}

/// Both views: no suspect heard again.
fn set_views(s: &mut SharedState, ids: &[u32]) {
    s.head.view = view(ids);
    s.head.inbound_view = view(ids);
}

fn reports(path: &mut NodeDataPath) -> Vec<DataPathReport> {
    std::iter::from_fn(|| path.poll_report()).collect()
}

#[test]
fn unknown_sa_and_inactive_node() {
    let mut path = NodeDataPath::new(NodeId(3), DispatchScheme::PacketRoundRobin);
    assert_eq!(
        path.outbound(OUT, PEER, 0, 100, 1),
        OutboundDecision::UnknownSa
    );
    assert_eq!(
        path.inbound(IN, PEER, 1, 100, t0()),
        InboundDecision::UnknownSa
    );
    path.update(&state(3, &[1, 2], 1));
    assert!(!path.is_active());
    for p in 0..6 {
        assert_eq!(
            path.outbound(OUT, PEER, 0, 100, p),
            OutboundDecision::NotOwned
        );
    }
    assert_eq!(path.counter(OUT), Some(path.lineage(OUT).unwrap() + 5));
    let stats = path.stats();
    assert_eq!(
        (stats.outbound_unknown_sa, stats.inbound_unknown_sa),
        (1, 1)
    );
    assert_eq!(stats.outbound_not_owned, 6);
}

/// "n1,n2 packet-rr": each node sends every other packet, with the
/// number of its position; checkpoints every 4 packets; a lease request
/// past half of the block.
#[test]
fn round_robin_pair() {
    let mut a = NodeDataPath::new(NodeId(1), DispatchScheme::PacketRoundRobin);
    let mut b = NodeDataPath::new(NodeId(2), DispatchScheme::PacketRoundRobin);
    a.update(&state(1, &[1, 2], 1));
    b.update(&state(2, &[1, 2], 1));
    let head = a.lineage(OUT).unwrap();
    for p in 0..40u64 {
        let (da, db) = (
            a.outbound(OUT, PEER, 0, 100, p),
            b.outbound(OUT, PEER, 0, 100, p),
        );
        let seq = head + p;
        let want = |mine| {
            if mine {
                OutboundDecision::Send { seq }
            } else {
                OutboundDecision::NotOwned
            }
        };
        assert_eq!(da, want(seq % 2 == 0), "packet {p}");
        assert_eq!(db, want(seq % 2 == 1), "packet {p}");
    }
    let ra = reports(&mut a);
    let checkpoints = ra
        .iter()
        .filter(|r| matches!(r, DataPathReport::Checkpoint(_)))
        .count();
    assert_eq!(checkpoints, 10);
    assert!(ra.contains(&DataPathReport::LeaseRequest {
        spi: OUT,
        after_end: head + 63
    }));
}

/// "n1,n2,n3 packet-rr, peer window 128 (strongSwan), 32 (Linux XFRM) or
/// unknown": the scheme would spread the SA over the three nodes, whose
/// skew could put packets behind the peer's window; instead one node sends
/// every packet, with numbers that only grow (so the peer sees them in
/// order), and the other two count them. With the window of a Phalanx
/// peer the same stream is spread.
#[test]
fn small_peer_window_pins_the_sa() {
    for window in [0, 32, 128, SPREAD_MIN_PEER_WINDOW - 1] {
        let mut paths: Vec<NodeDataPath> = (1..=3)
            .map(|i| NodeDataPath::new(NodeId(i), DispatchScheme::PacketRoundRobin))
            .collect();
        for (i, path) in paths.iter_mut().enumerate() {
            path.update(&state_with_window(i as u32 + 1, &[1, 2, 3], 1, window));
        }
        let mut senders = BTreeSet::new();
        let mut last = 0;
        // 64-number blocks, 3 numbers a packet (strided): 20 packets fit.
        for p in 0..20u64 {
            let sent: Vec<(usize, u64)> = paths
                .iter_mut()
                .enumerate()
                .filter_map(|(i, path)| match path.outbound(OUT, PEER, p, 100, p) {
                    OutboundDecision::Send { seq } => Some((i, seq)),
                    OutboundDecision::NotOwned => None,
                    other => panic!("window {window}, packet {p}: {other:?}"),
                })
                .collect();
            assert_eq!(sent.len(), 1, "window {window}, packet {p}: {sent:?}");
            let (node, seq) = sent[0];
            assert!(
                seq > last,
                "window {window}, packet {p}: {seq} after {last}"
            );
            senders.insert(node);
            last = seq;
        }
        assert_eq!(senders.len(), 1, "window {window}: sent by {senders:?}");
    }
    let mut spread = BTreeSet::new();
    let mut paths: Vec<NodeDataPath> = (1..=3)
        .map(|i| NodeDataPath::new(NodeId(i), DispatchScheme::PacketRoundRobin))
        .collect();
    for (i, path) in paths.iter_mut().enumerate() {
        path.update(&state_with_window(
            i as u32 + 1,
            &[1, 2, 3],
            1,
            SPREAD_MIN_PEER_WINDOW,
        ));
    }
    for p in 0..30u64 {
        for (i, path) in paths.iter_mut().enumerate() {
            if let OutboundDecision::Send { .. } = path.outbound(OUT, PEER, p, 100, p) {
                spread.insert(i);
            }
        }
    }
    assert_eq!(spread.len(), 3);
}

/// A suspicion in the state: the data path switches to the takeover block
/// and reports it; the next packets are numbered in that block.
#[test]
fn takeover_on_suspicion() {
    let mut path = NodeDataPath::new(NodeId(1), DispatchScheme::PacketRoundRobin);
    let mut s = state(1, &[1, 2], 1);
    path.update(&s);
    path.outbound(OUT, PEER, 0, 100, 1);
    s.version = 2;
    s.head.suspects = vec![NodeId(2)];
    set_views(&mut s, &[1]);
    path.update(&s);
    assert!(reports(&mut path).contains(&DataPathReport::TakeoverApplied { suspect: NodeId(2) }));
    assert_eq!(path.stats().takeovers, 1);
    let t = s
        .leases(OUT)
        .unwrap()
        .takeover_for(s.leases(OUT).unwrap().regular_lineage().unwrap(), NodeId(2))
        .unwrap()
        .clone();
    for p in 0..3u64 {
        assert_eq!(
            path.outbound(OUT, PEER, 0, 100, 10 + p),
            OutboundDecision::Send { seq: t.start + p }
        );
    }
}

/// A view change makes the numbers observed but owned elsewhere due as
/// marks, once.
#[test]
fn takeover_marks() {
    let mut path = NodeDataPath::new(NodeId(2), DispatchScheme::PacketRoundRobin);
    let mut s = state(2, &[1, 2], 1);
    path.update(&s);
    let mut marks = Vec::new();
    path.drain_takeover_marks(IN, &mut marks);
    assert!(marks.is_empty(), "nothing observed yet");
    for seq in [1u32, 2, 3, 5] {
        let owned = path.inbound(IN, PEER, seq, 100, t0()) == InboundDecision::Process;
        assert_eq!(owned, seq % 2 == 1, "n2 is member 1 of 2");
    }
    path.drain_takeover_marks(IN, &mut marks);
    assert!(marks.is_empty(), "no change since the first view");
    s.version = 2;
    set_views(&mut s, &[2]);
    path.update(&s);
    path.drain_takeover_marks(IN, &mut marks);
    assert_eq!(marks, vec![2], "n1's number; never n2's own");
    marks.clear();
    path.drain_takeover_marks(IN, &mut marks);
    assert!(marks.is_empty());
    assert_eq!(
        path.inbound(IN, PEER, 7, 100, t0()),
        InboundDecision::Process
    );
}

/// A kernel filter dropped n1's packets on n2 (2, 4, 6): after the view
/// change their numbers are marked, as if n2 had observed them itself.
#[test]
fn absorbed_kernel_cells_become_takeover_marks() {
    let mut path = NodeDataPath::new(NodeId(2), DispatchScheme::PacketRoundRobin);
    let mut s = state(2, &[1, 2], 1);
    path.update(&s);
    let mut marks = Vec::new();
    assert!(path.marks_due(IN), "the first view is a change");
    path.drain_takeover_marks(IN, &mut marks);
    for seq in [1u32, 3, 5] {
        assert_eq!(
            path.inbound(IN, PEER, seq, 100, t0()),
            InboundDecision::Process
        );
    }
    assert!(!path.marks_due(IN), "no view change since");
    s.version = 2;
    set_views(&mut s, &[2]);
    path.update(&s);
    assert!(path.marks_due(IN));
    assert_eq!(path.absorb_observed(IN, &[0, 0, 2, 0, 4, 0, 6, 0]), 3);
    assert_eq!(path.absorb_observed(0x999, &[2]), 0, "unknown SA");
    path.drain_takeover_marks(IN, &mut marks);
    assert_eq!(marks, vec![2, 4, 6]);
    assert!(!path.marks_due(IN));
}

/// Shortest queue: marks are due after every packet another node owned.
#[test]
fn continuous_marks_with_sqf() {
    let mut path = NodeDataPath::new(NodeId(1), DispatchScheme::PacketShortestQueue);
    path.update(&state(1, &[1, 2], 1));
    let mut marks = Vec::new();
    let mut owned = Vec::new();
    for seq in 1..=20u32 {
        if path.inbound(IN, PEER, seq, 1000, t0()) == InboundDecision::Process {
            owned.push(u64::from(seq));
        }
        path.drain_takeover_marks(IN, &mut marks);
    }
    assert!(!owned.is_empty() && owned.len() < 20);
    let mut all: Vec<u64> = owned.iter().chain(&marks).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (1..=20).collect::<Vec<u64>>());
}

/// Inbound ESP is dispatched over the base view, outbound packets over
/// the view without every suspect: a suspect heard again (not silent)
/// keeps its inbound share; a silent one's is taken over.
#[test]
fn inbound_takes_over_only_silent_suspects() {
    let mut path = NodeDataPath::new(NodeId(1), DispatchScheme::PacketRoundRobin);
    let mut s = state(1, &[1, 2], 1);
    s.head.view = view(&[1]);
    s.head.suspects = vec![NodeId(2)];
    path.update(&s);
    assert_eq!(path.inbound_view(), &view(&[1, 2]));
    for seq in 1..=4u32 {
        let owned = path.inbound(IN, PEER, seq, 100, t0()) == InboundDecision::Process;
        assert_eq!(owned, seq % 2 == 0, "n1 is member 0 of [1, 2]");
    }
    for p in 0..4u64 {
        assert!(matches!(
            path.outbound(OUT, PEER, 0, 100, p),
            OutboundDecision::Send { .. }
        ));
    }
    // Silent: its inbound share is taken over, marks are due.
    s.version = 2;
    s.head.silent = vec![NodeId(2)];
    path.update(&s);
    assert!(path.marks_due(IN));
    for seq in 5..=8u32 {
        assert_eq!(
            path.inbound(IN, PEER, seq, 100, t0()),
            InboundDecision::Process
        );
    }
    // Heard steadily again: handed back before the log says anything.
    s.version = 3;
    s.head.silent = Vec::new();
    path.update(&s);
    assert_eq!(
        path.inbound(IN, PEER, 9, 100, t0()),
        InboundDecision::NotOwned
    );
    assert_eq!(
        path.inbound(IN, PEER, 10, 100, t0()),
        InboundDecision::Process
    );
}

/// With three nodes, a suspicion held by n1 alone moves only the
/// suspect's packets: n1 never takes n2's, nor leaves its own.
#[test]
fn one_sided_suspicion_moves_only_the_suspects_share() {
    let mut path = NodeDataPath::new(NodeId(1), DispatchScheme::PacketRoundRobin);
    let mut s = state(1, &[1, 2, 3], 1);
    s.head.view = view(&[1, 2]);
    s.head.suspects = vec![NodeId(3)];
    s.head.silent = vec![NodeId(3)];
    path.update(&s);
    for seq in 0..60u32 {
        let owned = path.inbound(IN, PEER, seq, 100, t0()) == InboundDecision::Process;
        // [1, 2, 3][seq % 3]; n3's (2) go to [1, 2][seq % 2].
        let expected = match seq % 3 {
            0 => true,
            1 => false,
            _ => seq % 2 == 0,
        };
        assert_eq!(owned, expected, "seq {seq}");
    }
}

/// Session round robin: the inbound SA (one session) n1 took over from a
/// silent suspect goes back to it when the suspect is heard again, as
/// the suspect (which never moved it) still sees it; the base view's
/// table never changed.
#[test]
fn inbound_session_goes_back_to_a_returning_member() {
    let mut path = NodeDataPath::new(NodeId(1), DispatchScheme::SessionRoundRobin);
    let mut s = state(1, &[1, 2], 1);
    let spi = 0x21;
    let mut other = (*s.inbound[&IN]).clone();
    other.descriptor.spi = spi;
    s.inbound.insert(spi, Arc::new(other));
    path.update(&s);
    // A session's first owner is member SPI % 2: IN = 0x20 is n1's.
    assert_eq!(
        path.inbound(IN, PEER, 1, 100, t0()),
        InboundDecision::Process
    );
    assert_eq!(
        path.inbound(spi, PEER, 1, 100, t0()),
        InboundDecision::NotOwned,
        "n2's"
    );
    s.version = 2;
    s.head.silent = vec![NodeId(2)];
    path.update(&s);
    assert_eq!(
        path.inbound(spi, PEER, 2, 100, t0()),
        InboundDecision::Process,
        "taken over"
    );
    s.version = 3;
    s.head.silent = Vec::new();
    path.update(&s);
    assert_eq!(
        path.inbound(spi, PEER, 3, 100, t0()),
        InboundDecision::NotOwned,
        "handed back"
    );
    assert_eq!(
        path.inbound(IN, PEER, 2, 100, t0()),
        InboundDecision::Process,
        "n1's stays"
    );
}

/// Another node's checkpoint heals a node that missed a packet.
#[test]
fn heal_from_notes() {
    let mut a = NodeDataPath::new(NodeId(1), DispatchScheme::PacketRoundRobin);
    let mut s = state(1, &[1, 2], 1);
    a.update(&s);
    for p in 0..10u64 {
        if p != 4 {
            a.outbound(OUT, PEER, 0, 100, p);
        }
    }
    let lineage = a.lineage(OUT).unwrap();
    let behind = a.counter(OUT).unwrap();
    s.version = 2;
    let mut out = (*s.outbound[&OUT]).clone();
    out.notes.push_back(CheckpointNote {
        serial: 1,
        lineage,
        c: lineage + 9,
        fingerprint: 9,
    });
    s.outbound.insert(OUT, Arc::new(out));
    a.update(&s);
    assert_eq!(a.counter(OUT), Some(behind + 1));
    assert_eq!(a.stats().heals, 1);
}

/// Ticks: forced checkpoints, replay checkpoints by the first member after
/// a transfer, and the counters.
#[test]
fn ticks() {
    let mut path = NodeDataPath::new(NodeId(1), DispatchScheme::PacketRoundRobin);
    let mut s = state(1, &[1, 2], 1);
    path.update(&s);
    path.outbound(OUT, PEER, 0, 100, 1);
    path.inbound(IN, PEER, 9, 100, t0());
    reports(&mut path);
    s.version = 2;
    s.tick = 1;
    s.head.transfers = 1;
    path.update(&s);
    let r = reports(&mut path);
    assert!(r.iter().any(|r| matches!(r, DataPathReport::Checkpoint(_))));
    assert!(r
        .iter()
        .any(|r| matches!(r, DataPathReport::ReplayCheckpoint(rc) if rc.top == 9)));
    assert!(r.iter().any(|r| matches!(r, DataPathReport::Stats(_))));
}

/// An SA deleted and added again starts over: a new sequencer, whose
/// numbers come from the new table.
#[test]
fn re_added_sa_gets_a_new_sequencer() {
    let mut path = NodeDataPath::new(NodeId(1), DispatchScheme::PacketRoundRobin);
    let s = state(1, &[1], 1);
    path.update(&s);
    for p in 0..100 {
        path.outbound(OUT, PEER, 0, 100, p);
    }
    // The same SA again, its table started over (smaller than the sent).
    let mut again = state(1, &[1], 2);
    let mut out = (*again.outbound[&OUT]).clone();
    let mut table = LeaseTable::new(64);
    let mut grants = Vec::new();
    table.set_view(view(&[1]), &mut grants);
    table.add_sa(OUT, false, &mut grants);
    out.leases = table.sa(OUT).cloned().map(Arc::new);
    out.incarnation = 2;
    again.outbound.insert(OUT, Arc::new(out));
    path.update(&again);
    assert_eq!(
        path.outbound(OUT, PEER, 0, 100, 1),
        OutboundDecision::Send { seq: 1 }
    );
}
