//! Hybrid post-quantum IKE SAs: RFC 9370 additional key exchanges
//! (ML-KEM-768) in IKE_INTERMEDIATE (RFC 9242) before IKE_AUTH.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use phalanx_ike::config::{ChildProposal, SaLifetimeConfig};
use phalanx_ike::Counter;
use phalanx_testkit::ike_pair::{IkePair, Side};
use phalanx_wire::ike::iana::ExchangeType;

const HYBRID: &str = "aes256gcm16-prfsha256-x25519-ke1_mlkem768";

/// (request, response) IKE_INTERMEDIATE messages seen on the wire, by
/// Message ID, fragments counted once.
fn intermediate_ids(p: &IkePair) -> Vec<(bool, u32)> {
    let mut ids: Vec<(bool, u32)> = p
        .wire()
        .iter()
        .filter(|w| w.info.exchange == ExchangeType::IKE_INTERMEDIATE)
        .map(|w| (w.info.response, w.info.message_id))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

fn additional(p: &IkePair, side: Side) -> u64 {
    p.endpoint_ref(side)
        .counters()
        .get(Counter::AdditionalKeyExchanges)
}

// HDR(IKE_SA_INIT), SAi1(ADDKE1 ML-KEM-768), KEi(x25519), Ni,
//     N(INTERMEDIATE_EXCHANGE_SUPPORTED)  -->
//                   <--  HDR(IKE_SA_INIT), SAr1, KEr, Nr, N(INTERMEDIATE_...)
// HDR(IKE_INTERMEDIATE, MID=1), SK {KEi(1)(ML-KEM-768)}  -->
//                   <--  HDR(IKE_INTERMEDIATE, MID=1), SK {KEr(1)}
// HDR(IKE_AUTH, MID=2), SK {IDi, AUTH, SAi2, TSi, TSr}  -->
//                   <--  HDR(IKE_AUTH, MID=2), SK {IDr, AUTH, SAr2, TSi, TSr}
#[test]
fn x25519_and_mlkem768_establish() {
    let mut p = pair(HYBRID, 400);
    established(&mut p);
    assert_eq!(intermediate_ids(&p), [(false, 1), (true, 1)]);
    // The 1184-octet encapsulation key does not fit 1280 octets whole.
    assert!(p
        .wire()
        .iter()
        .any(|w| w.info.exchange == ExchangeType::IKE_INTERMEDIATE && w.info.fragment));
    assert!(p
        .wire()
        .iter()
        .any(|w| w.info.exchange == ExchangeType::IKE_AUTH && w.info.message_id == 2));
    assert_eq!((additional(&p, Side::A), additional(&p, Side::B)), (1, 1));
    // Both sides derived the same keys: each one's outbound SA is keyed
    // as the other's inbound SA.
    assert_eq!(
        installed_keys(&p, Side::A, false),
        installed_keys(&p, Side::B, true)
    );
    assert_eq!(
        installed_keys(&p, Side::B, false),
        installed_keys(&p, Side::A, true)
    );
    let sa = &p.endpoint_ref(Side::A).ike_sas()[0];
    assert!(sa.algorithms.contains("+ "), "{}", sa.algorithms);
    teardown(&mut p);
    p.check_removed_once().unwrap();
}

// Two additional exchanges, in ADDKE type order: MIDs 1 and 2, IKE_AUTH 3.
#[test]
fn two_additional_key_exchanges() {
    let mut p = pair(
        "aes128-sha256-prfsha384-ecp256-ke1_mlkem768-ke2_x25519",
        401,
    );
    established(&mut p);
    assert_eq!(
        intermediate_ids(&p),
        [(false, 1), (false, 2), (true, 1), (true, 2)]
    );
    assert_eq!((additional(&p, Side::A), additional(&p, Side::B)), (2, 2));
    assert_eq!(
        installed_keys(&p, Side::A, false),
        installed_keys(&p, Side::B, true)
    );
    assert_eq!(
        installed_keys(&p, Side::B, false),
        installed_keys(&p, Side::A, true)
    );
}

// The same suite without ML-KEM derives other Child SA keys: the
// additional exchange went into SK_d (RFC 9370 §2.2.2).
#[test]
fn the_additional_exchange_changes_the_keys() {
    let mut hybrid = pair(HYBRID, 402);
    established(&mut hybrid);
    let mut plain = pair(DEFAULT_IKE, 402);
    established(&mut plain);
    assert_ne!(
        installed_keys(&hybrid, Side::A, true),
        installed_keys(&plain, Side::A, true)
    );
    assert_eq!(intermediate_ids(&plain), []);
}

// ADDKE1 = {ML-KEM-768, NONE} against a responder without additional key
// exchanges: it selects NONE, and there is no IKE_INTERMEDIATE.
#[test]
fn optional_addke_falls_back_to_none() {
    let a = connection(Side::A, &format!("{HYBRID}-ke1_none"));
    let b = connection(Side::B, DEFAULT_IKE);
    let mut p = pair_of(a, b, 403);
    established(&mut p);
    assert_eq!(intermediate_ids(&p), []);
    assert_eq!((additional(&p, Side::A), additional(&p, Side::B)), (0, 0));
    assert_eq!(
        installed_keys(&p, Side::A, false),
        installed_keys(&p, Side::B, true)
    );
}

// A hybrid proposal first, a classic one second: a responder without
// ML-KEM takes the second.
#[test]
fn second_proposal_without_addke_is_taken() {
    let a = connection(Side::A, &format!("{HYBRID},{DEFAULT_IKE}"));
    let b = connection(Side::B, DEFAULT_IKE);
    let mut p = pair_of(a, b, 404);
    established(&mut p);
    assert_eq!(intermediate_ids(&p), []);
}

// An initiator that requires ML-KEM and a responder without it: nothing
// acceptable (NO_PROPOSAL_CHOSEN), the IKE SA fails.
#[test]
fn required_addke_against_a_responder_without_it_fails() {
    let a = connection(Side::A, HYBRID);
    let b = connection(Side::B, DEFAULT_IKE);
    let mut p = pair_of(a, b, 405);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(5));
    assert_eq!(kinds(&p, Side::A), ["IkeSaFailed"]);
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::ProposalsRefused),
        1
    );
}

// HDR(IKE_INTERMEDIATE), SK {KEi(1)}  -->
//                   <--  HDR(IKE_INTERMEDIATE), SK {KEr(1)}  (lost)
// HDR(IKE_INTERMEDIATE), SK {KEi(1)}  -->  (retransmitted, old keys)
//                   <--  the cached response (old keys), not reprocessed
#[test]
fn lost_intermediate_response_is_resent_from_the_cache() {
    let mut p = pair(HYBRID, 406);
    p.drop_matching(1, |i| {
        i.exchange == ExchangeType::IKE_INTERMEDIATE && i.response
    });
    established(&mut p);
    let a = p.endpoint_ref(Side::A).counters();
    let b = p.endpoint_ref(Side::B).counters();
    assert!(a.get(Counter::RetransmitsSent) >= 1);
    assert!(b.get(Counter::RetransmitsAnswered) >= 1);
    assert_eq!((additional(&p, Side::A), additional(&p, Side::B)), (1, 1));
    assert_eq!(
        installed_keys(&p, Side::A, false),
        installed_keys(&p, Side::B, true)
    );
}

#[test]
fn lost_intermediate_request_is_retransmitted() {
    let mut p = pair(HYBRID, 407);
    p.drop_matching(1, |i| {
        i.exchange == ExchangeType::IKE_INTERMEDIATE && !i.response
    });
    established(&mut p);
    assert!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::RetransmitsSent)
            >= 1
    );
    assert_eq!((additional(&p, Side::A), additional(&p, Side::B)), (1, 1));
}

// A retransmitted IKE_SA_INIT request that arrives after IKE_INTERMEDIATE
// (B still half-open) is answered with the IKE_SA_INIT response, not the
// last response B sent.
#[test]
fn late_init_retransmission_gets_the_init_answer() {
    let mut p = pair(HYBRID, 408);
    p.drop_matching(1, |i| i.exchange == ExchangeType::IKE_AUTH && !i.response);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    let auth_sent = |p: &IkePair| {
        p.wire()
            .iter()
            .any(|w| w.info.exchange == ExchangeType::IKE_AUTH)
    };
    assert!(p.run_until(auth_sent, Duration::from_secs(5)));
    let init = p
        .wire()
        .iter()
        .find(|w| w.info.exchange == ExchangeType::IKE_SA_INIT && !w.info.response)
        .unwrap()
        .clone();
    let now = p.now;
    let datagram = phalanx_ike::Datagram {
        local: init.transmit.remote,
        remote: init.transmit.local,
        bytes: &init.transmit.bytes,
    };
    p.endpoint(Side::B).handle_datagram(now, datagram);
    p.flush();
    let answer = p.wire().last().unwrap();
    assert_eq!(answer.from, Side::B);
    assert_eq!(answer.info.exchange, ExchangeType::IKE_SA_INIT);
    assert!(answer.info.response);
    // The IKE_AUTH retransmission still completes the SA.
    assert!(p.run_until(|p| up(p, 1), Duration::from_secs(10)));
}

// After a hybrid IKE_SA_INIT, the IKE SA and its Child SA rekey with
// their additional key exchanges, in IKE_FOLLOWUP_KE (RFC 9370 §2.2.4;
// the exchanges themselves are tested in followup.rs), PFS stays.
#[test]
fn hybrid_ike_sa_rekeys() {
    let esp = ChildProposal::parse_list("aes256gcm16-x25519-ke1_mlkem768").unwrap();
    let mut a = connection(Side::A, HYBRID);
    a.children[0].proposals = esp.clone();
    a.ike_lifetime = SaLifetimeConfig {
        rekey_time: Duration::from_secs(100),
        jitter: Duration::ZERO,
        hard_time: Duration::from_secs(200),
        rekey_bytes: None,
        rekey_packets: None,
    };
    let mut b = connection(Side::B, HYBRID);
    b.children[0].proposals = esp;
    let mut p = pair_of(a, b, 409);
    established(&mut p);
    let before = p.endpoint_ref(Side::A).ike_sas()[0].clone();
    p.run_for(Duration::from_secs(101));
    let after = p.endpoint_ref(Side::A).ike_sas();
    assert_eq!(after.len(), 1);
    assert_ne!(after[0].spi_i, before.spi_i);
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::IkeSasRekeyed),
        1
    );
    let spi = p.installed(Side::A).0[0];
    p.with(Side::A, |e, now| e.handle_child_expiry(now, spi, false));
    p.run_for(Duration::from_secs(5));
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::ChildSasRekeyed),
        1
    );
    let followups = p
        .wire()
        .iter()
        .filter(|w| w.info.exchange == ExchangeType::IKE_FOLLOWUP_KE && !w.info.response)
        .map(|w| w.info.message_id)
        .collect::<std::collections::BTreeSet<_>>();
    // One for the IKE SA rekey, one for the Child SA rekey.
    assert_eq!(followups.len(), 2, "{followups:?}");
    teardown(&mut p);
    p.check_removed_once().unwrap();
}
