//! Windows above one (RFC 7296 §2.3): SET_WINDOW_SIZE in IKE_AUTH, several
//! requests outstanding at once, and the response cache that answers
//! their retransmissions.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use phalanx_ike::config::Connection;
use phalanx_ike::Counter;
use phalanx_testkit::ike_pair::{IkePair, Side};
use phalanx_wire::ike::iana::{ExchangeType, NotifyType};

/// A connection of `side` with three children (one in IKE_AUTH, two by
/// CREATE_CHILD_SA).
fn three_children(side: Side) -> Connection {
    let mut conn = connection(side, DEFAULT_IKE);
    let nets = [("10.3.0.0", "10.4.0.0"), ("10.5.0.0", "10.6.0.0")];
    for (i, (a, b)) in nets.iter().enumerate() {
        let (local, remote) = match side {
            Side::A => (a, b),
            Side::B => (b, a),
        };
        conn.children
            .push(child(&format!("net{}", i + 2), local, remote));
    }
    conn
}

fn windowed(window_a: u32, window_b: u32, seed: u64) -> IkePair {
    let mut a = config(three_children(Side::A));
    a.limits.window_size = window_a;
    let mut b = config(three_children(Side::B));
    b.limits.window_size = window_b;
    IkePair::new((a, ip(ADDR_A)), (b, ip(ADDR_B)), seed)
}

fn all_up(p: &mut IkePair) {
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    assert!(
        p.run_until(|p| up(p, 3), Duration::from_secs(30)),
        "{:#?}",
        p.log()
    );
}

/// When A sent each first transmission of a CREATE_CHILD_SA request.
fn create_child_requests(p: &IkePair) -> Vec<(u32, Duration)> {
    let mut seen: Vec<(u32, Duration)> = Vec::new();
    for w in p.wire() {
        let i = w.info;
        let request = i.from == Side::A && i.exchange == ExchangeType::CREATE_CHILD_SA;
        if request && !i.response && !seen.iter().any(|(id, _)| *id == i.message_id) {
            seen.push((i.message_id, w.at - p.start));
        }
    }
    seen
}

// HDR, SK {IDi, AUTH, N(SET_WINDOW_SIZE 4), SAi2, TSi, TSr} -->
//                 <--  HDR, SK {IDr, AUTH, N(SET_WINDOW_SIZE 4), SAr2, TSi, TSr}
// HDR(MID=2), SK {SA, Ni, TSi, TSr} -->
// HDR(MID=3), SK {SA, Ni, TSi, TSr} -->   (without waiting)
#[test]
fn both_windows_let_requests_overlap() {
    let mut p = windowed(4, 4, 500);
    all_up(&mut p);
    let requests = create_child_requests(&p);
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].1, requests[1].1, "{requests:?}");
    for side in [Side::A, Side::B] {
        let c = p.endpoint_ref(side).counters();
        assert_eq!(c.notify_sent(NotifyType::SET_WINDOW_SIZE), 1);
        assert_eq!(c.notify_received(NotifyType::SET_WINDOW_SIZE), 1);
    }
    teardown(&mut p);
    p.check_removed_once().unwrap();
}

// The peer keeps the default window of one: one request at a time, and
// no SET_WINDOW_SIZE from it.
#[test]
fn the_smaller_window_wins() {
    let mut p = windowed(4, 1, 501);
    all_up(&mut p);
    let requests = create_child_requests(&p);
    assert_eq!(requests.len(), 2);
    assert!(requests[1].1 > requests[0].1, "{requests:?}");
    let b = p.endpoint_ref(Side::B).counters();
    assert_eq!(b.notify_sent(NotifyType::SET_WINDOW_SIZE), 0);
    assert_eq!(b.notify_received(NotifyType::SET_WINDOW_SIZE), 1);
}

// MID=2 and MID=3 in flight; the answer to 2 is lost after 3 was
// processed: the retransmitted 2 is answered from the cache of the last
// four responses, not reprocessed.
#[test]
fn older_response_is_resent_from_the_cache() {
    let mut p = windowed(4, 4, 502);
    p.drop_matching(1, |i| {
        i.exchange == ExchangeType::CREATE_CHILD_SA && i.response && i.message_id == 2
    });
    all_up(&mut p);
    let b = p.endpoint_ref(Side::B).counters();
    assert_eq!(b.get(Counter::RetransmitsAnswered), 1);
    assert_eq!(
        b.exchange(ExchangeType::CREATE_CHILD_SA).requests_received,
        2
    );
    teardown(&mut p);
    p.check_removed_once().unwrap();
}

// MID=2 is lost, MID=3 arrives first: it is ahead of the window's start
// and dropped; both retransmissions are then processed in order.
#[test]
fn request_ahead_of_a_lost_one_waits_for_its_retransmission() {
    let mut p = windowed(4, 4, 503);
    p.drop_matching(1, |i| {
        i.exchange == ExchangeType::CREATE_CHILD_SA && !i.response && i.message_id == 2
    });
    all_up(&mut p);
    let b = p.endpoint_ref(Side::B).counters();
    assert_eq!(
        b.exchange(ExchangeType::CREATE_CHILD_SA).requests_received,
        2
    );
    assert_eq!(b.get(Counter::InvalidMessageId), 0);
    assert!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::RetransmitsSent)
            >= 2
    );
}

/// Rekeys every Child SA of A at once; returns when A first sent each
/// CREATE_CHILD_SA request from `since` on.
fn rekey_all_children(p: &mut IkePair) -> Vec<Duration> {
    let since = p.elapsed();
    let spis: Vec<u32> = p.installed(Side::A).0;
    p.with(Side::A, |e, now| {
        for spi in &spis {
            e.handle_child_expiry(now, *spi, false);
        }
    });
    p.run_for(Duration::from_secs(10));
    let mut sent: Vec<Duration> = p
        .wire()
        .iter()
        .filter(|w| {
            w.from == Side::A
                && w.info.exchange == ExchangeType::CREATE_CHILD_SA
                && !w.info.response
                && w.at - p.start >= since
        })
        .map(|w| w.at - p.start)
        .collect();
    sent.dedup();
    sent
}

// Three Child SA rekeys at once: three CREATE_CHILD_SA requests leave
// together; every rekey completes.
#[test]
fn child_rekeys_overlap() {
    let mut p = windowed(4, 4, 504);
    all_up(&mut p);
    let sent = rekey_all_children(&mut p);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::ChildSasRekeyed),
        3
    );
    let (inbound, outbound) = p.installed(Side::A);
    assert_eq!((inbound.len(), outbound.len()), (3, 3));
    teardown(&mut p);
    p.check_removed_once().unwrap();
}

// The IKE SA's rekey runs alone; the new IKE SA keeps both windows, so
// rekeys over it overlap again.
#[test]
fn rekeyed_ike_sa_keeps_the_window() {
    let mut a = config(three_children(Side::A));
    a.limits.window_size = 4;
    a.connections[0].ike_lifetime = phalanx_ike::config::SaLifetimeConfig {
        rekey_time: Duration::from_secs(100),
        jitter: Duration::ZERO,
        hard_time: Duration::from_secs(300),
        rekey_bytes: None,
        rekey_packets: None,
    };
    let mut b = config(three_children(Side::B));
    b.limits.window_size = 4;
    let mut p = IkePair::new((a, ip(ADDR_A)), (b, ip(ADDR_B)), 505);
    all_up(&mut p);
    p.run_for(Duration::from_secs(101));
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::IkeSasRekeyed),
        1
    );
    let sent = rekey_all_children(&mut p);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::ChildSasRekeyed),
        3
    );
    teardown(&mut p);
    p.check_removed_once().unwrap();
}
