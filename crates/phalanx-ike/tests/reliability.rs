//! Retransmission, the response cache, liveness and dead peers
//! (RFC 7296 §1.4, §2.1, §2.4).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use phalanx_ike::Counter;
use phalanx_testkit::ike_pair::{Fate, Side};
use phalanx_wire::ike::iana::ExchangeType;

// HDR, SK {IDi, AUTH, SAi2, TSi, TSr} -->  (lost)
// HDR, SK {IDi, AUTH, SAi2, TSi, TSr} -->  (retransmitted after 0.5 s)
//                               <--  HDR, SK {IDr, AUTH, SAr2, TSi, TSr}
#[test]
fn lost_request_is_retransmitted() {
    let mut p = pair(DEFAULT_IKE, 20);
    p.drop_matching(1, |i| i.exchange == ExchangeType::IKE_AUTH && !i.response);
    established(&mut p);
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::RetransmitsSent),
        1
    );
    let b = p.endpoint_ref(Side::B).counters();
    assert_eq!(b.exchange(ExchangeType::IKE_AUTH).requests_received, 1);
    assert_eq!(
        kinds(&p, Side::B),
        ["IkeSaUp", "InstallInbound", "InstallOutbound"]
    );
    assert!(p.elapsed() >= Duration::from_millis(500));
}

// HDR, SK {IDi, AUTH, SAi2, TSi, TSr} -->
//                               <--  HDR, SK {IDr, AUTH, SAr2, TSi, TSr}  (lost)
// HDR, SK {IDi, AUTH, SAi2, TSi, TSr} -->  (retransmitted)
//                               <--  the cached response, not reprocessed
#[test]
fn lost_response_is_resent_from_the_cache() {
    let mut p = pair(DEFAULT_IKE, 21);
    p.drop_matching(1, |i| i.exchange == ExchangeType::IKE_AUTH && i.response);
    established(&mut p);
    let b = p.endpoint_ref(Side::B).counters();
    assert_eq!(b.get(Counter::RetransmitsAnswered), 1);
    assert_eq!(b.exchange(ExchangeType::IKE_AUTH).requests_received, 1);
    assert_eq!(b.exchange(ExchangeType::IKE_AUTH).responses_sent, 1);
    assert_eq!(
        kinds(&p, Side::B),
        ["IkeSaUp", "InstallInbound", "InstallOutbound"]
    );
    assert_eq!(
        kinds(&p, Side::A),
        ["IkeSaUp", "InstallInbound", "InstallOutbound"]
    );
}

// A lost IKE_SA_INIT answer: the retransmitted request gets the same
// answer from the half-open SA (same SPIr, same keys).
#[test]
fn lost_init_response_is_resent() {
    let mut p = pair(DEFAULT_IKE, 22);
    p.drop_matching(1, |i| i.exchange == ExchangeType::IKE_SA_INIT && i.response);
    established(&mut p);
    let b = p.endpoint_ref(Side::B).counters();
    assert_eq!(b.get(Counter::RetransmitsAnswered), 1);
    assert_eq!(b.exchange(ExchangeType::IKE_SA_INIT).responses_sent, 1);
    assert_eq!(p.endpoint_ref(Side::B).ike_sas().len(), 1);
}

// Every datagram from B lost after establishment: A's liveness check goes
// unanswered through every retransmission; A declares B dead.
// HDR, SK {}                    -->  (x6, no answer)
#[test]
fn dead_peer_is_detected() {
    let mut a = connection(Side::A, DEFAULT_IKE);
    a.dpd_delay = Some(Duration::from_secs(30));
    let mut p = pair_of(a, connection(Side::B, DEFAULT_IKE), 23);
    established(&mut p);
    p.drop_matching(usize::MAX, |i| i.from == Side::B);
    let dead =
        |p: &phalanx_testkit::ike_pair::IkePair| p.endpoint_ref(Side::A).ike_sas().is_empty();
    assert!(p.run_until(dead, Duration::from_secs(120)));
    let a = p.endpoint_ref(Side::A).counters();
    assert_eq!(a.get(Counter::DpdSent), 1);
    assert_eq!(a.get(Counter::RetransmitsSent), 5);
    assert_eq!(a.get(Counter::IkeSasDead), 1);
    assert_eq!(
        kinds(&p, Side::A),
        [
            "IkeSaUp",
            "InstallInbound",
            "InstallOutbound",
            "RemoveOutbound",
            "RemoveInbound",
            "IkeSaDown"
        ]
    );
    // 30 s quiet, then 0.5 + 1 + 2 + 4 + 8 + 16 s of retransmissions.
    assert!(p.elapsed() >= Duration::from_millis(61_500));
}

// Liveness checks while both are alive: answered, nothing changes.
// HDR, SK {}                    -->
//                               <--  HDR, SK {}
#[test]
fn dpd_keeps_a_quiet_sa() {
    let mut a = connection(Side::A, DEFAULT_IKE);
    a.dpd_delay = Some(Duration::from_secs(10));
    let mut p = pair_of(a, connection(Side::B, DEFAULT_IKE), 24);
    established(&mut p);
    p.run_for(Duration::from_secs(35));
    assert_eq!(p.endpoint_ref(Side::A).counters().get(Counter::DpdSent), 3);
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .exchange(ExchangeType::INFORMATIONAL)
            .requests_received,
        3
    );
    assert!(up(&p, 1));
    assert_eq!(kinds(&p, Side::A).len(), 3);
}

// The responder never answers IKE_SA_INIT: the initiator gives up.
#[test]
fn unanswered_init_fails() {
    let mut p = pair(DEFAULT_IKE, 25);
    p.drop_matching(usize::MAX, |i| i.from == Side::B);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(60));
    assert_eq!(kinds(&p, Side::A), ["IkeSaFailed"]);
    assert!(p.endpoint_ref(Side::A).ike_sas().is_empty());
    // B's half-open SA expires.
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::HalfOpenExpired),
        1
    );
    assert!(p.endpoint_ref(Side::B).ike_sas().is_empty());
}

// Random loss of 30 % both ways: the exchanges still complete, each
// request processed once.
#[test]
fn survives_random_loss() {
    for seed in 0..8 {
        let mut p = pair(DEFAULT_IKE, 100 + seed);
        p.net.loss = 0.3;
        p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
        if !p.run_until(|p| up(p, 1), Duration::from_secs(30)) {
            // Losing six transmissions in a row is possible; then A gave up.
            assert!(
                p.fates().iter().filter(|f| **f == Fate::Lost).count() >= 6,
                "seed {seed}"
            );
            continue;
        }
        let b = p.endpoint_ref(Side::B).counters();
        assert_eq!(
            b.exchange(ExchangeType::IKE_AUTH).requests_received,
            1,
            "seed {seed}"
        );
        // (No make-before-break check: a new Child SA's responder sends
        // once its answer is out; if that answer is lost, the initiator
        // installs only on the retransmission. Rekeys do not have this
        // gap: see rekey.rs.)
    }
}

// Out-of-window requests are dropped and counted.
#[test]
fn replayed_old_request_is_answered_or_dropped() {
    let mut p = pair(DEFAULT_IKE, 26);
    established(&mut p);
    // Replay A's IKE_SA_INIT: B's half-open index no longer has it; it is a
    // new request for a new SA (a restart), not reprocessing.
    let init = p
        .wire()
        .iter()
        .find(|w| w.info.exchange == ExchangeType::IKE_SA_INIT && w.from == Side::A)
        .unwrap()
        .clone();
    let auth = p
        .wire()
        .iter()
        .find(|w| w.info.exchange == ExchangeType::IKE_AUTH && w.from == Side::A)
        .unwrap()
        .clone();
    let now = p.now;
    let local: std::net::SocketAddr = auth.transmit.remote;
    let remote: std::net::SocketAddr = auth.transmit.local;
    // The IKE_AUTH request again: answered from the cache, not reprocessed.
    p.endpoint(Side::B).handle_datagram(
        now,
        phalanx_ike::Datagram {
            local,
            remote,
            bytes: &auth.transmit.bytes,
        },
    );
    p.flush();
    let b = p.endpoint_ref(Side::B).counters();
    assert_eq!(b.get(Counter::RetransmitsAnswered), 1);
    assert_eq!(b.exchange(ExchangeType::IKE_AUTH).requests_received, 1);
    let _ = init;
}
