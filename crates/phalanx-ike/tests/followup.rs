//! RFC 9370 §2.2.4: additional key exchanges (ML-KEM-768 beside x25519)
//! in IKE_FOLLOWUP_KE after CREATE_CHILD_SA, so that a hybrid IKE SA and
//! its Child SAs stay hybrid across rekeys.
//!
//! ```text
//! Initiator                         Responder
//! -------------------------------------------------------------------
//! HDR(CREATE_CHILD_SA), SK {[N(REKEY_SA)], SA(KE x25519, ADDKE1
//!     ML-KEM-768), Ni, KEi(x25519), [TSi, TSr]}  -->
//!                      <--  HDR(CREATE_CHILD_SA), SK {SA, Nr, KEr(x25519),
//!                               [TSi, TSr], N(ADDITIONAL_KEY_EXCHANGE)(link1)}
//! HDR(IKE_FOLLOWUP_KE), SK {KEi(1)(ML-KEM-768),
//!     N(ADDITIONAL_KEY_EXCHANGE)(link1)}  -->
//!                      <--  HDR(IKE_FOLLOWUP_KE), SK {KEr(1)(ML-KEM-768)}
//!
//! KEYMAT   = prf+(SK_d, SK(0) | Ni | Nr | SK(1))    (Child SA)
//! SKEYSEED = prf(SK_d, SK(0) | Ni | Nr | SK(1))     (IKE SA rekey)
//! ```
//!
//! The SA is installed only after the last IKE_FOLLOWUP_KE; a request
//! whose link the responder no longer knows is answered STATE_NOT_FOUND.
#![allow(clippy::unwrap_used)]

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use common::*;
use phalanx_ike::config::{ChildConfig, ChildProposal, Connection, SaLifetimeConfig};
use phalanx_ike::{Counter, SaEvent};
use phalanx_testkit::ike_pair::{IkePair, Side};
use phalanx_wire::ike::iana::{ExchangeType, KeId, NotifyType};

const HYBRID_IKE: &str = "aes256gcm16-prfsha256-x25519-ke1_mlkem768";
const HYBRID_ESP: &str = "aes256gcm16-x25519-ke1_mlkem768";
const CLASSIC_ESP: &str = "aes256gcm16-x25519";

/// A side with a hybrid IKE SA whose Child SA `net` uses `esp`.
fn side(side: Side, esp: &str) -> Connection {
    let mut conn = connection(side, HYBRID_IKE);
    conn.children[0].proposals = ChildProposal::parse_list(esp).unwrap();
    conn
}

/// Both sides hybrid, established.
fn hybrid_pair(seed: u64) -> IkePair {
    let mut p = pair_of(side(Side::A, HYBRID_ESP), side(Side::B, HYBRID_ESP), seed);
    established(&mut p);
    p
}

/// Each side's outbound SAs are keyed as the other side's inbound ones.
fn same_keys(p: &IkePair) {
    assert_eq!(
        installed_keys(p, Side::A, false),
        installed_keys(p, Side::B, true)
    );
    assert_eq!(
        installed_keys(p, Side::B, false),
        installed_keys(p, Side::A, true)
    );
}

/// The exchanges of the requests sent from wire record `from` on, once
/// each (retransmissions and fragments counted once).
fn requests_since(p: &IkePair, from: usize) -> Vec<ExchangeType> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for w in &p.wire()[from..] {
        let key = (w.from, w.info.message_id);
        if !w.info.response && !seen.contains(&key) {
            seen.push(key);
            out.push(w.info.exchange);
        }
    }
    out
}

fn count(p: &IkePair, side: Side, counter: Counter) -> u64 {
    p.endpoint_ref(side).counters().get(counter)
}

/// A's current (not rekeyed) Child SAs' key exchange methods, by name.
fn child_kes(p: &IkePair, side: Side) -> Vec<(String, Vec<KeId>)> {
    let sas = p.endpoint_ref(side).ike_sas();
    let mut out: Vec<_> = sas
        .iter()
        .flat_map(|sa| sa.children.iter())
        .filter(|c| !c.rekeyed)
        .map(|c| (c.name.clone(), c.key_exchanges.clone()))
        .collect();
    out.sort();
    out
}

/// Rekeys A's first inbound SA and waits for the old one to go.
fn rekey_child(p: &mut IkePair) {
    let spi = p.installed(Side::A).0[0];
    p.with(Side::A, |e, now| e.handle_child_expiry(now, spi, false));
    p.run_for(Duration::from_secs(5));
}

/// Drops every IKE_FOLLOWUP_KE request (all fragments) while the
/// returned switch is on.
fn followup_request_switch(p: &mut IkePair) -> Rc<Cell<bool>> {
    let on = Rc::new(Cell::new(false));
    let rule = Rc::clone(&on);
    p.drop_matching(usize::MAX, move |i| {
        rule.get() && i.exchange == ExchangeType::IKE_FOLLOWUP_KE && !i.response
    });
    on
}

const HYBRID_KES: [KeId; 2] = [KeId::CURVE25519, KeId::ML_KEM_768];

// A Child SA rekey with PFS keeps ML-KEM:
// HDR(CREATE_CHILD_SA), SK {N(REKEY_SA), SA, Ni, KEi, TSi, TSr}  -->
//        <--  HDR(CREATE_CHILD_SA), SK {SA, Nr, KEr, TSi, TSr, N(ADDKE)(link1)}
// HDR(IKE_FOLLOWUP_KE), SK {KEi(1), N(ADDKE)(link1)}  -->
//        <--  HDR(IKE_FOLLOWUP_KE), SK {KEr(1)}
// HDR(INFORMATIONAL), SK {D(old)}  -->  (after the overlap)
// and so does the next rekey of the new SA.
#[test]
fn child_sa_rekey_keeps_mlkem() {
    let mut p = hybrid_pair(900);
    let mark = p.wire().len();
    rekey_child(&mut p);
    assert_eq!(
        requests_since(&p, mark),
        [
            ExchangeType::CREATE_CHILD_SA,
            ExchangeType::IKE_FOLLOWUP_KE,
            ExchangeType::INFORMATIONAL
        ]
    );
    for s in [Side::A, Side::B] {
        assert_eq!(count(&p, s, Counter::FollowupKeExchanges), 1);
        assert_eq!(count(&p, s, Counter::ChildSasRekeyed), 1);
        assert_eq!(child_kes(&p, s), [("net".to_owned(), HYBRID_KES.to_vec())]);
    }
    same_keys(&p);
    // The rekeyed SA rekeys hybrid again.
    let mark = p.wire().len();
    rekey_child(&mut p);
    assert_eq!(
        requests_since(&p, mark)[..2],
        [ExchangeType::CREATE_CHILD_SA, ExchangeType::IKE_FOLLOWUP_KE]
    );
    assert_eq!(count(&p, Side::B, Counter::FollowupKeExchanges), 2);
    same_keys(&p);
    assert!(up(&p, 1));
    teardown(&mut p);
    p.check_removed_once().unwrap();
}

// The responder installs nothing before the last IKE_FOLLOWUP_KE: while
// it is outstanding, B has only the Child SA of IKE_AUTH.
#[test]
fn nothing_is_installed_before_the_last_followup() {
    let mut p = hybrid_pair(901);
    let switch = followup_request_switch(&mut p);
    switch.set(true);
    let spi = p.installed(Side::A).0[0];
    p.with(Side::A, |e, now| e.handle_child_expiry(now, spi, false));
    p.run_for(Duration::from_millis(300));
    assert_eq!(p.installed(Side::A).0.len(), 1);
    assert_eq!(p.installed(Side::B).0.len(), 1);
    switch.set(false);
    p.run_for(Duration::from_secs(5));
    assert_eq!(count(&p, Side::B, Counter::ChildSasRekeyed), 1);
    same_keys(&p);
}

// A new Child SA with PFS is hybrid:
// HDR(CREATE_CHILD_SA), SK {SA, Ni, KEi, TSi, TSr}  -->
//        <--  HDR(CREATE_CHILD_SA), SK {SA, Nr, KEr, TSi, TSr, N(ADDKE)(link1)}
// HDR(IKE_FOLLOWUP_KE), SK {KEi(1), N(ADDKE)(link1)}  -->
//        <--  HDR(IKE_FOLLOWUP_KE), SK {KEr(1)}
#[test]
fn new_child_sa_with_pfs_is_hybrid() {
    let pq = |local: &str, remote: &str| -> ChildConfig {
        let mut c = child("pq", local, remote);
        c.proposals = ChildProposal::parse_list(HYBRID_ESP).unwrap();
        c
    };
    let mut a = side(Side::A, CLASSIC_ESP);
    a.children.push(pq("10.3.0.0", "10.4.0.0"));
    let mut b = side(Side::B, CLASSIC_ESP);
    b.children.push(pq("10.4.0.0", "10.3.0.0"));
    let mut p = pair_of(a, b, 902);
    // IKE_AUTH creates `net`; `pq` follows in CREATE_CHILD_SA.
    established(&mut p);
    assert!(p.run_until(|p| up(p, 2), Duration::from_secs(5)));
    let auth = p
        .wire()
        .iter()
        .position(|w| w.info.exchange == ExchangeType::IKE_AUTH)
        .unwrap();
    assert_eq!(
        requests_since(&p, auth),
        [
            ExchangeType::IKE_AUTH,
            ExchangeType::CREATE_CHILD_SA,
            ExchangeType::IKE_FOLLOWUP_KE
        ]
    );
    for s in [Side::A, Side::B] {
        assert_eq!(
            child_kes(&p, s),
            [
                ("net".to_owned(), vec![KeId::CURVE25519]),
                ("pq".to_owned(), HYBRID_KES.to_vec())
            ]
        );
        assert_eq!(count(&p, s, Counter::FollowupKeExchanges), 1);
    }
    same_keys(&p);
}

// An IKE SA rekey keeps ML-KEM; the new IKE SA's keys agree (the Child SA
// rekey after it runs under them and derives from its SK_d):
// HDR(CREATE_CHILD_SA), SK {SA(IKE, ADDKE1), Ni, KEi}  -->
//        <--  HDR(CREATE_CHILD_SA), SK {SA, Nr, KEr, N(ADDKE)(link1)}
// HDR(IKE_FOLLOWUP_KE), SK {KEi(1), N(ADDKE)(link1)}  -->
//        <--  HDR(IKE_FOLLOWUP_KE), SK {KEr(1)}
// HDR(INFORMATIONAL), SK {D}  -->  (the old IKE SA)
#[test]
fn ike_sa_rekey_keeps_mlkem() {
    let mut a = side(Side::A, HYBRID_ESP);
    a.ike_lifetime = SaLifetimeConfig {
        rekey_time: Duration::from_secs(100),
        jitter: Duration::ZERO,
        hard_time: Duration::from_secs(200),
        rekey_bytes: None,
        rekey_packets: None,
    };
    let mut p = pair_of(a, side(Side::B, HYBRID_ESP), 903);
    established(&mut p);
    let before = p.endpoint_ref(Side::A).ike_sas()[0].clone();
    let mark = p.wire().len();
    p.run_for(Duration::from_secs(101));
    assert_eq!(
        requests_since(&p, mark),
        [
            ExchangeType::CREATE_CHILD_SA,
            ExchangeType::IKE_FOLLOWUP_KE,
            ExchangeType::INFORMATIONAL
        ]
    );
    for s in [Side::A, Side::B] {
        let sas = p.endpoint_ref(s).ike_sas();
        assert_eq!(sas.len(), 1);
        assert_ne!(sas[0].spi_i, before.spi_i);
        assert!(sas[0].algorithms.contains("+ "), "{}", sas[0].algorithms);
        assert_eq!(count(&p, s, Counter::IkeSasRekeyed), 1);
        assert_eq!(count(&p, s, Counter::FollowupKeExchanges), 1);
    }
    rekey_child(&mut p);
    assert_eq!(count(&p, Side::B, Counter::ChildSasRekeyed), 1);
    assert_eq!(count(&p, Side::B, Counter::FollowupKeExchanges), 2);
    same_keys(&p);
    teardown(&mut p);
    p.check_removed_once().unwrap();
}

// A peer that offers only the classic group rekeys classically, against
// a responder whose ML-KEM is optional (ke1_mlkem768 or NONE), and the
// other way round: no IKE_FOLLOWUP_KE.
#[test]
fn classic_peer_rekeys_classically() {
    let optional = format!("{HYBRID_ESP}-ke1_none");
    for (a, b, seed) in [
        (CLASSIC_ESP, optional.as_str(), 904),
        (optional.as_str(), CLASSIC_ESP, 905),
    ] {
        let mut p = pair_of(side(Side::A, a), side(Side::B, b), seed);
        established(&mut p);
        let mark = p.wire().len();
        rekey_child(&mut p);
        assert_eq!(
            requests_since(&p, mark),
            [ExchangeType::CREATE_CHILD_SA, ExchangeType::INFORMATIONAL]
        );
        assert_eq!(count(&p, Side::B, Counter::ChildSasRekeyed), 1);
        assert_eq!(count(&p, Side::B, Counter::FollowupKeExchanges), 0);
        assert_eq!(
            child_kes(&p, Side::B),
            [("net".to_owned(), vec![KeId::CURVE25519])]
        );
        same_keys(&p);
    }
}

// A lost IKE_FOLLOWUP_KE request is retransmitted; a lost answer is
// answered again from the cache, never reprocessed.
#[test]
fn lost_followup_messages_are_retransmitted() {
    let mut p = hybrid_pair(906);
    let switch = followup_request_switch(&mut p);
    switch.set(true);
    let spi = p.installed(Side::A).0[0];
    p.with(Side::A, |e, now| e.handle_child_expiry(now, spi, false));
    p.run_for(Duration::from_millis(300));
    switch.set(false);
    p.run_for(Duration::from_secs(5));
    assert!(count(&p, Side::A, Counter::RetransmitsSent) >= 1);
    assert_eq!(count(&p, Side::B, Counter::FollowupKeExchanges), 1);
    assert_eq!(count(&p, Side::A, Counter::ChildSasRekeyed), 1);
    same_keys(&p);

    let mut p = hybrid_pair(907);
    p.drop_matching(1, |i| {
        i.exchange == ExchangeType::IKE_FOLLOWUP_KE && i.response
    });
    rekey_child(&mut p);
    assert!(count(&p, Side::B, Counter::RetransmitsAnswered) >= 1);
    assert_eq!(count(&p, Side::B, Counter::FollowupKeExchanges), 1);
    assert_eq!(count(&p, Side::A, Counter::ChildSasRekeyed), 1);
    same_keys(&p);
}

// The responder gives the exchange up when the next IKE_FOLLOWUP_KE does
// not come within 10 s; the retransmission that finally arrives is
// answered STATE_NOT_FOUND and the initiator gives the rekey up: nothing
// new installed, the old SA stays in use, every step counted.
// HDR(IKE_FOLLOWUP_KE), SK {KEi(1), N(ADDKE)(link1)}  -->  (lost, 5 times)
//                   (10 s: B drops its state)
// HDR(IKE_FOLLOWUP_KE), SK {KEi(1), N(ADDKE)(link1)}  -->
//        <--  HDR(IKE_FOLLOWUP_KE), SK {N(STATE_NOT_FOUND)}
#[test]
fn state_not_found_fails_the_rekey_cleanly() {
    let mut p = hybrid_pair(908);
    let installed = (p.installed(Side::A), p.installed(Side::B));
    let switch = followup_request_switch(&mut p);
    switch.set(true);
    let spi = installed.0 .0[0];
    p.with(Side::A, |e, now| e.handle_child_expiry(now, spi, false));
    p.run_for(Duration::from_secs(12));
    assert_eq!(count(&p, Side::B, Counter::FollowupKeTimeouts), 1);
    switch.set(false);
    p.run_for(Duration::from_secs(20));
    assert_eq!(count(&p, Side::B, Counter::FollowupStateNotFound), 1);
    let a = p.endpoint_ref(Side::A).counters();
    assert_eq!(a.notify_received(NotifyType::STATE_NOT_FOUND), 1);
    assert_eq!(a.get(Counter::FollowupKeFailed), 1);
    assert_eq!(a.get(Counter::ChildSasFailed), 1);
    assert_eq!(a.get(Counter::ChildSasRekeyed), 0);
    assert_eq!(a.get(Counter::IkeSasDead), 0);
    assert!(p
        .events(Side::A)
        .iter()
        .any(|e| matches!(e, SaEvent::ChildSaFailed { .. })));
    // Nothing was installed; the old SA carries on, the IKE SA lives.
    assert_eq!((p.installed(Side::A), p.installed(Side::B)), installed);
    assert!(up(&p, 1));
    // It can be rekeyed again.
    rekey_child(&mut p);
    assert_eq!(count(&p, Side::A, Counter::ChildSasRekeyed), 1);
    same_keys(&p);
}

// Both sides rekey the same hybrid Child SA at once (RFC 7296 §2.8.1 with
// RFC 9370 §2.2.4): each CREATE_CHILD_SA is followed by its own
// IKE_FOLLOWUP_KE; the collision is settled once both series are done,
// with the CREATE_CHILD_SA nonces, and the SA made with the lowest nonce is
// deleted by its maker. One pair is left on each side, still hybrid.
#[test]
fn simultaneous_hybrid_rekeys_leave_one_pair() {
    simultaneous_rekeys(HYBRID_ESP, &HYBRID_KES);
}

// The same crossing with a classic Child SA (no IKE_FOLLOWUP_KE).
#[test]
fn simultaneous_classic_rekeys_leave_one_pair() {
    simultaneous_rekeys(CLASSIC_ESP, &HYBRID_KES[..1]);
}

/// A and B rekey the same Child SA, B `lag` later, over many seeds and
/// lags; the Child SAs left run `kes`.
fn simultaneous_rekeys(esp: &str, kes: &[KeId]) {
    for (seed, lag_ms) in (0..72).zip(
        [0, 2, 5, 9, 13, 17, 21, 25, 29, 33, 41, 55, 89, 144]
            .iter()
            .cycle(),
    ) {
        let mut p = pair_of(side(Side::A, esp), side(Side::B, esp), 900 + seed);
        established(&mut p);
        let (a, b) = (p.installed(Side::A).0[0], p.installed(Side::B).0[0]);
        p.with(Side::A, |e, now| e.handle_child_expiry(now, a, false));
        p.run_for(Duration::from_millis(*lag_ms));
        p.with(Side::B, |e, now| e.handle_child_expiry(now, b, false));
        p.run_for(Duration::from_secs(15));
        let (a_in, a_out) = p.installed(Side::A);
        let (b_in, b_out) = p.installed(Side::B);
        assert_eq!(
            (a_in.len(), a_out.len(), b_in.len(), b_out.len()),
            (1, 1, 1, 1),
            "seed {seed}, lag {lag_ms} ms: {:#?}",
            p.sa_balance()
        );
        assert_eq!((a_out, b_out), (b_in, a_in), "seed {seed}");
        let collisions = (
            count(&p, Side::A, Counter::RekeyCollisions),
            count(&p, Side::B, Counter::RekeyCollisions),
        );
        let redundant = count(&p, Side::A, Counter::RedundantSasDeleted)
            + count(&p, Side::B, Counter::RedundantSasDeleted);
        // A collision is seen by both sides, or by one only when the
        // other's rekey was done before the crossing request arrived; each
        // leaves exactly one redundant SA, deleted by its maker.
        assert_eq!(
            redundant,
            collisions.0.max(collisions.1),
            "seed {seed}, lag {lag_ms} ms: collisions {collisions:?}, redundant SAs deleted {redundant}"
        );
        for side in [Side::A, Side::B] {
            assert_eq!(child_kes(&p, side)[0].1, kes, "seed {seed}");
        }
    }
}
