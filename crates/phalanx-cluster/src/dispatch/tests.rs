//! Numbered table tests: small inputs whose owners were worked out by hand.

use super::*;
use crate::segments::segment_owner;
use core::net::Ipv4Addr;

const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10));

fn view(ids: &[u32]) -> View {
    View::new(1, ids.iter().map(|&id| NodeId(id)))
}

fn outbound(spi: u32, index: u64, len: u32, flow: u64) -> PacketKey {
    PacketKey {
        direction: Direction::Outbound,
        spi,
        index,
        len,
        flow,
        peer: PEER,
    }
}

/// Run `rows` of (case, index, len, flow, expected node) through `dispatcher`.
fn check(dispatcher: &mut Dispatcher, spi: u32, rows: &[(u32, u64, u32, u64, u32)]) {
    for &(case, index, len, flow, expected) in rows {
        let owner = dispatcher.owner(&outbound(spi, index, len, flow));
        assert_eq!(owner, Some(NodeId(expected)), "case {case}");
    }
}

#[test]
fn packet_round_robin_table() {
    let mut d = Dispatcher::new(DispatchScheme::PacketRoundRobin, view(&[1, 2, 3]));
    #[rustfmt::skip]
    check(&mut d, 9, &[
        (1, 1, 100, 0, 2),
        (2, 2, 100, 0, 3),
        (3, 3, 100, 0, 1),
        (4, 4, 1500, 0, 2),
        (5, 5, 64, 0, 3),
        (6, 6, 64, 0, 1),
        (7, 7, 64, 0, 2),
    ]);
    assert_eq!(d.streams(), 0, "round robin keeps no state");
}

#[test]
fn packet_shortest_queue_table() {
    // Queues in bytes after each packet (drain len/3 from each, then add):
    // 1:[1500,0,0] 2:[1479,64,0] 3:[1457,43,64] 4:[1436,85,43]
    // 5:[936,0,1500] 6:[915,64,1479] 7:[415,1500,979] 8:[457,1479,957]
    let mut d = Dispatcher::new(DispatchScheme::PacketShortestQueue, view(&[1, 2, 3]));
    #[rustfmt::skip]
    check(&mut d, 0, &[
        (1, 1, 1500, 0, 1), // all empty: ties start at spi % 3 = 0
        (2, 2, 64, 0, 2),   // tie between 2 and 3: the one after node 1
        (3, 3, 64, 0, 3),   // node 3 empty
        (4, 4, 64, 0, 2),   // node 2 (21 B) shorter than node 3 (43 B)
        (5, 5, 1500, 0, 3), // 2 and 3 drained to 0: tie, after node 2
        (6, 6, 64, 0, 2),   // node 2 empty
        (7, 7, 1500, 0, 2), // node 2 still shortest (0 B after drain)
        (8, 8, 64, 0, 1),   // node 1 (393 B after drain) now shortest
    ]);
    assert_eq!(d.streams(), 1);
}

#[test]
fn packet_shortest_queue_restarts_each_epoch() {
    let mut d = Dispatcher::new(DispatchScheme::PacketShortestQueue, view(&[1, 2, 3]));
    let last = SQF_RESYNC_PACKETS - 1;
    #[rustfmt::skip]
    check(&mut d, 1, &[
        (1, last - 1, 1500, 0, 2), // empty: ties start at spi % 3 = 1
        (2, last, 1500, 0, 3),
        (3, last + 1, 1500, 0, 2), // new epoch: empty again, start at 1
        (4, last + 2, 1500, 0, 3),
    ]);
}

#[test]
fn session_round_robin_table() {
    let (a, b, c, d_flow) = (0xa, 0xb, 0xc, 0xd);
    let mut d = Dispatcher::new(DispatchScheme::SessionRoundRobin, view(&[1, 2, 3]));
    #[rustfmt::skip]
    check(&mut d, 5, &[
        (1, 1, 100, a, 3), // first new flow: member 5 % 3 = 2
        (2, 2, 100, b, 1), // next member
        (3, 3, 100, a, 3), // a keeps its owner
        (4, 4, 100, c, 2),
        (5, 5, 100, b, 1),
        (6, 6, 100, d_flow, 3),
    ]);
    assert_eq!(d.flows(), 4);
    // Node 3 leaves: its flows are new flows again, turns 9 and 10 over two.
    d.set_view(view(&[1, 2]));
    #[rustfmt::skip]
    check(&mut d, 5, &[
        (7, 7, 100, a, 2),      // turn 9 % 2 = 1
        (8, 8, 100, b, 1),      // b's owner stayed
        (9, 9, 100, d_flow, 1), // turn 10 % 2 = 0
        (10, 10, 100, a, 2),    // a keeps its new owner
    ]);
}

#[test]
fn session_shortest_queue_table() {
    // Queues in bytes (two members, drain len/2 each packet):
    // 1:[1500,0] 2:[1450,100] 3:[1400,150] 4:[1350,200] 5:[1400,150]
    let mut d = Dispatcher::new(DispatchScheme::SessionShortestQueue, view(&[1, 2]));
    #[rustfmt::skip]
    check(&mut d, 0, &[
        (1, 1, 1500, 0xa, 1), // empty: ties start at spi % 2 = 0
        (2, 2, 100, 0xb, 2),  // node 2 empty
        (3, 3, 100, 0xb, 2),  // b keeps node 2
        (4, 4, 100, 0xc, 2),  // new flow c: node 2 (100 B) < node 1
        (5, 5, 100, 0xa, 1),  // a keeps node 1
    ]);
}

#[test]
fn inbound_session_is_the_sa() {
    for scheme in [
        DispatchScheme::SessionRoundRobin,
        DispatchScheme::SessionShortestQueue,
    ] {
        let mut d = Dispatcher::new(scheme, view(&[1, 2, 3, 4]));
        for (seq, flow) in (1..50u64).zip([7u64, 8, 9].into_iter().cycle()) {
            let key = PacketKey {
                direction: Direction::Inbound,
                spi: 0x1002,
                index: seq,
                len: 1000,
                flow,
                peer: PEER,
            };
            // 0x1002 % 4 = 2: the third member, whatever the flow field.
            assert_eq!(d.owner(&key), Some(NodeId(3)), "{scheme} seq {seq}");
        }
        assert_eq!(d.flows(), 1);
    }
}

#[test]
fn session_table_evicts_least_recently_used() {
    let mut d = Dispatcher::new(DispatchScheme::SessionRoundRobin, view(&[1, 2]));
    let flows = FLOWS_PER_STREAM as u64;
    for flow in 0..flows {
        d.owner(&outbound(0, flow + 1, 100, flow));
    }
    assert_eq!(d.flows(), FLOWS_PER_STREAM);
    d.owner(&outbound(0, flows + 1, 100, 0)); // flow 0 is used again
                                              // Two new flows (turns 4096, 4097) evict flows 1 and 2, the oldest.
    assert_eq!(
        d.owner(&outbound(0, flows + 2, 100, flows)),
        Some(NodeId(1))
    );
    assert_eq!(
        d.owner(&outbound(0, flows + 3, 100, flows + 1)),
        Some(NodeId(2))
    );
    assert_eq!(d.flows(), FLOWS_PER_STREAM);
    // Flow 1 had node 2 (turn 1); forgotten, it is new at turn 4098: node 1.
    assert_eq!(d.owner(&outbound(0, flows + 4, 100, 1)), Some(NodeId(1)));
    // Flow 0 was used recently and kept node 1 (turn 0).
    assert_eq!(d.owner(&outbound(0, flows + 5, 100, 0)), Some(NodeId(1)));
    // Flow 3 (node 2 at turn 3) was evicted by flow 1: new at turn 4099.
    assert_eq!(d.owner(&outbound(0, flows + 6, 100, 3)), Some(NodeId(2)));
}

#[test]
fn hash_segments_follow_the_peer() {
    let members = view(&[1, 2, 3, 4]);
    let mut d = Dispatcher::new(
        DispatchScheme::HashSegments { with_spi: false },
        members.clone(),
    );
    let expected = segment_owner(&members, segment_of(PEER, None));
    for spi in 1..20 {
        assert_eq!(d.owner(&outbound(spi, u64::from(spi), 64, 0)), expected);
    }
    let mut d = Dispatcher::new(
        DispatchScheme::HashSegments { with_spi: true },
        members.clone(),
    );
    let key = outbound(77, 1, 64, 0);
    assert_eq!(
        d.owner(&key),
        segment_owner(&members, segment_of(PEER, Some(77)))
    );
}

#[test]
fn empty_view_owns_nothing() {
    for scheme in DispatchScheme::ALL {
        let mut d = Dispatcher::new(scheme, View::default());
        assert_eq!(d.owner(&outbound(1, 1, 64, 1)), None, "{scheme}");
    }
}

#[test]
fn forget_stream_drops_state() {
    let mut d = Dispatcher::new(DispatchScheme::SessionRoundRobin, view(&[1, 2, 3]));
    assert_eq!(d.owner(&outbound(0, 1, 64, 1)), Some(NodeId(1)));
    assert_eq!(d.owner(&outbound(0, 2, 64, 2)), Some(NodeId(2)));
    d.forget_stream(Direction::Outbound, 0);
    assert_eq!((d.flows(), d.streams()), (0, 0));
    // Flow 2 is new again: turn 0.
    assert_eq!(d.owner(&outbound(0, 3, 64, 2)), Some(NodeId(1)));
    d.forget_stream(Direction::Inbound, 0); // unknown stream: nothing happens
    assert_eq!(d.streams(), 1);
}

#[test]
fn set_view_to_a_joiner_keeps_queues() {
    let mut d = Dispatcher::new(DispatchScheme::PacketShortestQueue, view(&[1, 2]));
    assert_eq!(d.owner(&outbound(0, 1, 1500, 0)), Some(NodeId(1)));
    d.set_view(view(&[1, 2, 3]));
    assert_eq!(d.view().len(), 3);
    assert_eq!(d.scheme(), DispatchScheme::PacketShortestQueue);
    // Node 1 still holds 1500 B; nodes 2 and 3 are empty: node 2 first.
    assert_eq!(d.owner(&outbound(0, 2, 1500, 0)), Some(NodeId(2)));
    assert_eq!(d.owner(&outbound(0, 3, 1500, 0)), Some(NodeId(3)));
}

#[test]
fn a_wrapped_index_restarts_too() {
    // A 32-bit inbound sequence number wraps to 0: another epoch.
    let mut d = Dispatcher::new(DispatchScheme::PacketShortestQueue, view(&[1, 2, 3]));
    let top = u64::from(u32::MAX);
    #[rustfmt::skip]
    check(&mut d, 0, &[
        (1, top - 1, 1500, 0, 1), // empty: ties start at spi % 3 = 0
        (2, top, 1500, 0, 2),
        (3, 0, 1500, 0, 1),       // restarted (node 3 without the restart)
    ]);
}
