//! Establishing IKE and Child SAs with pre-shared keys.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use phalanx_ike::{Counter, SaEvent};
use phalanx_testkit::ike_pair::Side;

// Initiator                         Responder
// HDR, SAi1, KEi, Ni            -->
//                               <--  HDR, SAr1, KEr, Nr
// HDR, SK {IDi, AUTH, SAi2, TSi, TSr} -->
//                               <--  HDR, SK {IDr, AUTH, SAr2, TSi, TSr}
#[test]
fn psk_establishes_ike_and_child_sa() {
    let mut p = pair(DEFAULT_IKE, 1);
    established(&mut p);
    assert_eq!(
        kinds(&p, Side::A),
        ["IkeSaUp", "InstallInbound", "InstallOutbound"]
    );
    assert_eq!(
        kinds(&p, Side::B),
        ["IkeSaUp", "InstallInbound", "InstallOutbound"]
    );
    p.check_inbound_first().unwrap();
    // Both derive the same keys: A's outbound is B's inbound, and back.
    let (a, b) = (p.events(Side::A), p.events(Side::B));
    let (SaEvent::InstallInbound(a_in), SaEvent::InstallOutbound(a_out)) = (a[1], a[2]) else {
        panic!()
    };
    let (SaEvent::InstallInbound(b_in), SaEvent::InstallOutbound(b_out)) = (b[1], b[2]) else {
        panic!()
    };
    assert_eq!(a_out.spi, b_in.spi);
    assert_eq!(a_out.encr_key, b_in.encr_key);
    assert_eq!(a_out.integ_key, b_in.integ_key);
    assert_eq!(b_out.spi, a_in.spi);
    assert_eq!(b_out.encr_key, a_in.encr_key);
    assert_ne!(a_out.encr_key, a_in.encr_key);
    let counters = p.endpoint_ref(Side::B).counters();
    assert_eq!(counters.get(Counter::IkeSasEstablished), 1);
    assert_eq!(counters.get(Counter::ChildSasEstablished), 1);
    teardown(&mut p);
    p.check_removed_once().unwrap();
    let _ = Duration::ZERO;
}

const SUITES: [&str; 6] = [
    "aes128gcm16-prfsha256",
    "aes256gcm16-prfsha384",
    "chacha20poly1305-prfsha256",
    "aes128-sha256",
    "aes256-sha384",
    "aes256-sha512",
];
const GROUPS: [&str; 4] = ["x25519", "ecp256", "ecp384", "modp2048"];

// Every IKE suite with every key exchange group, each establishing.
#[test]
fn every_ike_suite_and_group_establishes() {
    for (i, suite) in SUITES.iter().enumerate() {
        for (j, group) in GROUPS.iter().enumerate() {
            let proposal = format!("{suite}-{group}");
            let mut p = pair(&proposal, (i * 10 + j) as u64);
            p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
            assert!(
                p.run_until(|p| up(p, 1), Duration::from_secs(5)),
                "{proposal}"
            );
            let sa = &p.endpoint_ref(Side::A).ike_sas()[0];
            assert!(
                sa.algorithms.contains(&format!("{:?}", sa_group(group))),
                "{proposal}: {}",
                sa.algorithms
            );
            p.check_inbound_first().unwrap();
        }
    }
}

fn sa_group(name: &str) -> phalanx_wire::ike::iana::KeId {
    use phalanx_wire::ike::iana::KeId;
    match name {
        "x25519" => KeId::CURVE25519,
        "ecp256" => KeId::ECP_256,
        "ecp384" => KeId::ECP_384,
        _ => KeId::MODP_2048,
    }
}

// Initiator                         Responder
// HDR, SAi1, KEi(x25519), Ni    -->
//                               <--  HDR, N(INVALID_KE_PAYLOAD, ecp256)
// HDR, SAi1, KEi(ecp256), Ni    -->
//                               <--  HDR, SAr1, KEr, Nr
#[test]
fn invalid_ke_payload_restarts_with_the_wanted_group() {
    let a = connection(Side::A, "aes256gcm16-prfsha256-x25519-ecp256");
    let b = connection(Side::B, "aes256gcm16-prfsha256-ecp256");
    let mut p = pair_of(a, b, 3);
    established(&mut p);
    let a = p.endpoint_ref(Side::A).counters();
    assert_eq!(a.get(Counter::InvalidKeRestarts), 1);
    assert_eq!(
        a.notify_received(phalanx_wire::ike::iana::NotifyType::INVALID_KE_PAYLOAD),
        1
    );
    let b = p.endpoint_ref(Side::B).counters();
    assert_eq!(
        b.notify_sent(phalanx_wire::ike::iana::NotifyType::INVALID_KE_PAYLOAD),
        1
    );
    assert!(p.endpoint_ref(Side::A).ike_sas()[0]
        .algorithms
        .contains("ECP_256"));
}

// Initiator                         Responder (cookies on)
// HDR, SAi1, KEi, Ni            -->
//                               <--  HDR, N(COOKIE)
// HDR, N(COOKIE), SAi1, KEi, Ni -->
//                               <--  HDR, SAr1, KEr, Nr
#[test]
fn cookie_round_trip() {
    let a = connection(Side::A, DEFAULT_IKE);
    let b = connection(Side::B, DEFAULT_IKE);
    let mut cfg_b = config(b);
    cfg_b.limits.cookie_threshold = 0;
    let mut p =
        phalanx_testkit::ike_pair::IkePair::new((config(a), ip(ADDR_A)), (cfg_b, ip(ADDR_B)), 4);
    established(&mut p);
    let b = p.endpoint_ref(Side::B).counters();
    assert_eq!(b.get(Counter::CookiesSent), 1);
    assert_eq!(b.get(Counter::CookiesRejected), 0);
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::CookieRestarts),
        1
    );
}

// Initiator                         Responder
// HDR, SAi1, KEi, Ni            -->
//                               <--  HDR, N(NO_PROPOSAL_CHOSEN)
#[test]
fn no_proposal_chosen_fails_the_ike_sa() {
    let a = connection(Side::A, "aes128gcm16-prfsha256-x25519");
    let b = connection(Side::B, "aes256-sha256-modp2048");
    let mut p = pair_of(a, b, 5);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(2));
    assert_eq!(kinds(&p, Side::A), ["IkeSaFailed"]);
    assert!(kinds(&p, Side::B).is_empty());
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::ProposalsRefused),
        1
    );
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::ProposalsRefused),
        1
    );
    assert!(p.endpoint_ref(Side::A).ike_sas().is_empty());
    assert!(p.endpoint_ref(Side::B).ike_sas().is_empty());
}

// Initiator                         Responder (other PSK)
// HDR, SK {IDi, AUTH, SAi2, TSi, TSr} -->
//                               <--  HDR, SK {N(AUTHENTICATION_FAILED)}
#[test]
fn wrong_psk_is_authentication_failed() {
    let a = connection(Side::A, DEFAULT_IKE);
    let mut b = connection(Side::B, DEFAULT_IKE);
    b.remote_auth =
        phalanx_ike::config::RemoteAuth::Psk(zeroize::Zeroizing::new(b"other".to_vec()));
    let mut p = pair_of(a, b, 6);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(60));
    assert_eq!(kinds(&p, Side::A), ["IkeSaFailed"]);
    assert_eq!(kinds(&p, Side::B), ["IkeSaFailed"]);
    assert_eq!(
        p.endpoint_ref(Side::B).counters().get(Counter::AuthFailed),
        1
    );
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::AuthRejectedByPeer),
        1
    );
    assert!(p.endpoint_ref(Side::A).ike_sas().is_empty());
    assert!(p.endpoint_ref(Side::B).ike_sas().is_empty());
}

// The responder's AUTH fails at the initiator:
// HDR, SK {IDi, AUTH, SAi2, TSi, TSr} -->
//                               <--  HDR, SK {IDr, AUTH, SAr2, TSi, TSr}
// HDR, SK {N(AUTHENTICATION_FAILED)} -->
//                               <--  HDR, SK {}
#[test]
fn initiator_refusing_the_responder_tears_down_both() {
    let mut a = connection(Side::A, DEFAULT_IKE);
    a.remote_auth =
        phalanx_ike::config::RemoteAuth::Psk(zeroize::Zeroizing::new(b"other".to_vec()));
    let b = connection(Side::B, DEFAULT_IKE);
    let mut p = pair_of(a, b, 7);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(60));
    assert_eq!(kinds(&p, Side::A), ["IkeSaFailed"]);
    assert_eq!(
        p.endpoint_ref(Side::A).counters().get(Counter::AuthFailed),
        1
    );
    // B was up for one round trip, then told.
    assert_eq!(
        kinds(&p, Side::B),
        [
            "IkeSaUp",
            "InstallInbound",
            "InstallOutbound",
            "RemoveOutbound",
            "RemoveInbound",
            "IkeSaDown"
        ]
    );
    assert!(p.endpoint_ref(Side::B).ike_sas().is_empty());
    p.check_removed_once().unwrap();
}

// HDR, SK {IDi, AUTH, SAi2, TSi, TSr} -->
//                               <--  HDR, SK {IDr, AUTH, N(TS_UNACCEPTABLE)}
#[test]
fn ts_unacceptable_keeps_the_ike_sa() {
    let a = connection(Side::A, DEFAULT_IKE);
    let mut b = connection(Side::B, DEFAULT_IKE);
    b.children[0].remote_ts = vec![net("10.9.0.0")];
    let mut p = pair_of(a, b, 8);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(2));
    assert_eq!(kinds(&p, Side::A), ["IkeSaUp", "ChildSaFailed"]);
    assert_eq!(kinds(&p, Side::B), ["IkeSaUp", "ChildSaFailed"]);
    assert_eq!(
        p.endpoint_ref(Side::B).counters().get(Counter::TsRefused),
        1
    );
    assert_eq!(
        p.endpoint_ref(Side::A).counters().get(Counter::TsRefused),
        1
    );
    assert_eq!(p.endpoint_ref(Side::A).ike_sas().len(), 1);
}

// HDR, SK {IDi, AUTH, SAi2, TSi, TSr} -->
//                               <--  HDR, SK {IDr, AUTH, N(NO_PROPOSAL_CHOSEN)}
#[test]
fn child_proposal_mismatch_keeps_the_ike_sa() {
    let a = connection(Side::A, DEFAULT_IKE);
    let mut b = connection(Side::B, DEFAULT_IKE);
    b.children[0].proposals =
        phalanx_ike::config::ChildProposal::parse_list("chacha20poly1305").unwrap();
    let mut p = pair_of(a, b, 9);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(2));
    assert_eq!(kinds(&p, Side::A), ["IkeSaUp", "ChildSaFailed"]);
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::ProposalsRefused),
        1
    );
}

// IKE_AUTH carries the first Child SA; the second follows:
// HDR, SK {SA, Ni, TSi, TSr}    -->
//                               <--  HDR, SK {SA, Nr, TSi, TSr}
#[test]
fn second_child_comes_by_create_child_sa() {
    let mut a = connection(Side::A, DEFAULT_IKE);
    let mut b = connection(Side::B, DEFAULT_IKE);
    a.children.push(child("web", "10.3.0.0", "10.4.0.0"));
    b.children.push(child("web", "10.4.0.0", "10.3.0.0"));
    let mut p = pair_of(a, b, 10);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    assert!(p.run_until(|p| up(p, 2), Duration::from_secs(5)));
    let names: Vec<_> = p.endpoint_ref(Side::B).ike_sas()[0]
        .children
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(names, ["net", "web"]);
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .exchange(phalanx_wire::ike::iana::ExchangeType::CREATE_CHILD_SA)
            .requests_sent,
        1
    );
    p.check_inbound_first().unwrap();
    teardown(&mut p);
    p.check_removed_once().unwrap();
}

// A behind a NAT: NAT_DETECTION_* disagree, IKE moves to port 4500 and
// every Child SA is UDP-encapsulated (RFC 7296 §2.23).
#[test]
fn nat_moves_to_4500_and_encapsulates() {
    let a = connection(Side::A, DEFAULT_IKE);
    let mut b = connection(Side::B, DEFAULT_IKE);
    b.remote_addr = None;
    let mut p = pair_of(a, b, 11);
    p.net.nat_a = Some(ip("203.0.113.5"));
    established(&mut p);
    for side in [Side::A, Side::B] {
        for e in p.events(side) {
            if let SaEvent::InstallInbound(i) | SaEvent::InstallOutbound(i) = e {
                let encap = i.encap.expect("encapsulated");
                assert!(encap.local_port == 4500 || encap.remote_port == 4500);
            }
        }
    }
    let b_sa = &p.endpoint_ref(Side::B).ike_sas()[0];
    assert_eq!(b_sa.remote, "203.0.113.5:34500".parse().unwrap());
    assert_eq!(b_sa.local.port(), 4500);
    assert!(b_sa.nat);
    assert_eq!(
        p.endpoint_ref(Side::A).counters().get(Counter::NatDetected),
        1
    );
    assert_eq!(
        p.endpoint_ref(Side::B).counters().get(Counter::NatDetected),
        1
    );
    // RFC 3948 §2.3/§4: only the side behind the NAT keeps the mapping
    // open, one keepalive every 20 s.
    p.run_for(Duration::from_secs(65));
    assert_eq!(p.net.keepalives, [3, 0]);
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::NatKeepalivesSent),
        3
    );
}

// force_encap fakes the NAT: both sides encapsulate without one.
#[test]
fn forced_encapsulation() {
    let mut a = connection(Side::A, DEFAULT_IKE);
    a.force_encap = true;
    let b = connection(Side::B, DEFAULT_IKE);
    let mut p = pair_of(a, b, 12);
    established(&mut p);
    let SaEvent::InstallOutbound(out) = p.events(Side::B)[2] else {
        panic!()
    };
    assert_eq!(
        out.encap.map(|e| (e.local_port, e.remote_port)),
        Some((4500, 4500))
    );
}
