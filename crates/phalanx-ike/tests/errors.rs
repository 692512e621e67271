//! Every error path answers with its Notify, or drops silently where
//! RFC 7296 §2.21 says so, and counts (STYLE.md: errors map to the wire).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use phalanx_ike::config::EndpointConfig;
use phalanx_ike::{Counter, Datagram};
use phalanx_testkit::ike_pair::{IkePair, Side, WireRecord};
use phalanx_wire::ike::iana::{ExchangeType, NotifyType, PayloadType};
use phalanx_wire::ike::{MessageRepr, Payload};

/// A's first IKE_SA_INIT request of an established session, and the
/// session.
fn recorded() -> (IkePair, WireRecord) {
    let mut p = pair(DEFAULT_IKE, 400);
    established(&mut p);
    let init = p.wire()[0].clone();
    assert_eq!(init.info.exchange, ExchangeType::IKE_SA_INIT);
    (p, init)
}

/// A responder B alone (its peer A idle), with `limits` changed.
fn responder(change: impl FnOnce(&mut EndpointConfig)) -> IkePair {
    let mut b = config(connection(Side::B, DEFAULT_IKE));
    change(&mut b);
    IkePair::new(
        (config(connection(Side::A, DEFAULT_IKE)), ip(ADDR_A)),
        (b, ip(ADDR_B)),
        401,
    )
}

/// Delivers `bytes` to B as if from A's record's addresses; returns the
/// notify types of B's answers.
fn to_b(p: &mut IkePair, like: &WireRecord, bytes: &[u8]) -> Vec<NotifyType> {
    let before = p.wire().len();
    let now = p.now;
    let datagram = Datagram {
        local: like.transmit.remote,
        remote: like.transmit.local,
        bytes,
    };
    p.endpoint(Side::B).handle_datagram(now, datagram);
    p.flush();
    let mut out = Vec::new();
    for w in &p.wire()[before..] {
        if let Ok(msg) = MessageRepr::parse(&w.transmit.bytes) {
            out.extend(msg.notifies().map(|n| n.notify_type));
        }
    }
    out
}

fn init_with(like: &WireRecord, spi: u64, change: impl FnOnce(&mut Vec<Payload>)) -> Vec<u8> {
    let mut msg = MessageRepr::parse(&like.transmit.bytes).unwrap();
    msg.initiator_spi = spi;
    change(&mut msg.payloads);
    msg.emit_to_vec().unwrap()
}

fn counter(p: &IkePair, c: Counter) -> u64 {
    p.endpoint_ref(Side::B).counters().get(c)
}

// HDR(version 3.0), ...         -->
//                               <--  HDR, N(INVALID_MAJOR_VERSION)
#[test]
fn invalid_major_version() {
    let (mut p, init) = recorded();
    let mut bytes = init.transmit.bytes.clone();
    bytes[17] = 0x30;
    assert_eq!(
        to_b(&mut p, &init, &bytes),
        [NotifyType::INVALID_MAJOR_VERSION]
    );
    assert_eq!(counter(&p, Counter::UnsupportedVersion), 1);
}

// HDR, SAi1, KEi, Ni, <unknown critical> -->
//                               <--  HDR, N(UNSUPPORTED_CRITICAL_PAYLOAD)
#[test]
fn unsupported_critical_payload() {
    let (mut p, init) = recorded();
    let bytes = init_with(&init, 77, |payloads| {
        payloads.push(Payload::Unknown {
            ty: PayloadType(200),
            critical: true,
            body: vec![1, 2, 3],
        })
    });
    assert_eq!(
        to_b(&mut p, &init, &bytes),
        [NotifyType::UNSUPPORTED_CRITICAL_PAYLOAD]
    );
    assert_eq!(counter(&p, Counter::UnsupportedCritical), 1);
}

// HDR, SAi1, KEi (no Ni)        -->
//                               <--  HDR, N(INVALID_SYNTAX)
#[test]
fn missing_payload_is_invalid_syntax() {
    let (mut p, init) = recorded();
    let bytes = init_with(&init, 78, |payloads| {
        payloads.retain(|x| !matches!(x, Payload::Nonce(_)))
    });
    assert_eq!(to_b(&mut p, &init, &bytes), [NotifyType::INVALID_SYNTAX]);
    assert_eq!(counter(&p, Counter::Malformed), 1);
}

// A KE payload of the wrong size for its group.
#[test]
fn malformed_ke_is_invalid_syntax() {
    let (mut p, init) = recorded();
    let bytes = init_with(&init, 79, |payloads| {
        for x in payloads.iter_mut() {
            if let Payload::Ke(ke) = x {
                ke.data.truncate(5);
            }
        }
    });
    assert_eq!(to_b(&mut p, &init, &bytes), [NotifyType::INVALID_SYNTAX]);
}

// More half-open SAs than allowed: dropped without an answer; the
// half-open ones expire.
#[test]
fn half_open_limit() {
    let (_, init) = recorded();
    let mut p = responder(|c| {
        c.limits.half_open_max = 2;
        c.limits.cookie_threshold = 100;
    });
    for spi in 1..=3 {
        let bytes = init_with(&init, spi, |_| {});
        let answers = to_b(&mut p, &init, &bytes);
        assert_eq!(answers.is_empty(), spi == 3, "{spi}: {answers:?}");
    }
    assert_eq!(counter(&p, Counter::HalfOpenLimit), 1);
    assert_eq!(p.endpoint_ref(Side::B).ike_sas().len(), 2);
    p.run_for(Duration::from_secs(31));
    assert_eq!(counter(&p, Counter::HalfOpenExpired), 2);
    assert!(p.endpoint_ref(Side::B).ike_sas().is_empty());
}

// A cookie we did not make: refused, and a fresh cookie sent.
#[test]
fn bad_cookie_is_refused() {
    let (_, init) = recorded();
    let mut p = responder(|c| c.limits.cookie_threshold = 0);
    let bytes = init_with(&init, 5, |payloads| {
        payloads.insert(
            0,
            phalanx_wire::ike::Payload::Notify(phalanx_wire::ike::NotifyPayload::new(
                NotifyType::COOKIE,
                vec![0; 36],
            )),
        )
    });
    assert_eq!(to_b(&mut p, &init, &bytes), [NotifyType::COOKIE]);
    assert_eq!(counter(&p, Counter::CookiesRejected), 1);
    assert_eq!(counter(&p, Counter::CookiesSent), 1);
    assert!(p.endpoint_ref(Side::B).ike_sas().is_empty());
}

// An IKE_SA_INIT from an address no connection accepts.
#[test]
fn no_connection() {
    let (mut p, mut init) = recorded();
    init.transmit.local = "203.0.113.99:500".parse().unwrap();
    let bytes = init_with(&init, 6, |_| {});
    assert_eq!(
        to_b(&mut p, &init, &bytes),
        [NotifyType::NO_PROPOSAL_CHOSEN]
    );
    assert_eq!(counter(&p, Counter::NoConnection), 1);
}

fn auth_request(p: &IkePair) -> WireRecord {
    p.wire()
        .iter()
        .find(|w| w.info.exchange == ExchangeType::IKE_AUTH && !w.info.response)
        .unwrap()
        .clone()
}

// A request with a Message ID outside the window: dropped, counted.
#[test]
fn out_of_window_request() {
    let (mut p, _) = recorded();
    let auth = auth_request(&p);
    let mut bytes = auth.transmit.bytes.clone();
    bytes[20..24].copy_from_slice(&7u32.to_be_bytes());
    assert!(to_b(&mut p, &auth, &bytes).is_empty());
    assert_eq!(counter(&p, Counter::InvalidMessageId), 1);
}

// The next Message ID, but not authentic: dropped silently (§2.21.2).
#[test]
fn integrity_failure_is_silent() {
    let (mut p, _) = recorded();
    let auth = auth_request(&p);
    let mut bytes = auth.transmit.bytes.clone();
    bytes[20..24].copy_from_slice(&2u32.to_be_bytes());
    assert!(to_b(&mut p, &auth, &bytes).is_empty());
    assert!(p.wire().last().unwrap().info.exchange == ExchangeType::IKE_AUTH);
    assert_eq!(counter(&p, Counter::IntegrityFailed), 1);
}

// A response to nothing we asked: dropped, counted.
#[test]
fn unexpected_response() {
    let (mut p, _) = recorded();
    let answer = p
        .wire()
        .iter()
        .find(|w| w.info.exchange == ExchangeType::IKE_AUTH && w.info.response)
        .unwrap()
        .clone();
    let now = p.now;
    p.endpoint(Side::A).handle_datagram(
        now,
        Datagram {
            local: answer.transmit.remote,
            remote: answer.transmit.local,
            bytes: &answer.transmit.bytes,
        },
    );
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::UnexpectedResponse),
        1
    );
}

// Unknown IKE SPIs: dropped, counted (§2.21.4 makes answering optional).
#[test]
fn unknown_spi() {
    let (mut p, _) = recorded();
    let auth = auth_request(&p);
    let mut bytes = auth.transmit.bytes.clone();
    bytes[8..16].copy_from_slice(&[9; 8]);
    assert!(to_b(&mut p, &auth, &bytes).is_empty());
    assert_eq!(counter(&p, Counter::UnknownSpi), 1);
}
