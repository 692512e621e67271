//! AH Child SAs (RFC 4302) negotiated by IKEv2: the SA payload's Protocol
//! ID is AH and its proposals carry INTEG, [KE] and ESN, never ENCR
//! (RFC 7296 §3.3.1, §3.3.3); KEYMAT holds integrity keys only (§2.17);
//! rekeys name the SA with N(REKEY_SA) of protocol AH and deletes with
//! D(AH, SPI). AH protects the outer addresses, so it never crosses a NAT
//! (RFC 3948 encapsulates ESP only).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use phalanx_ike::config::{ChildProposal, Connection};
use phalanx_ike::{ChildSaInstall, Counter, IkeSaState, SaEvent};
use phalanx_sa::IpsecProtocol;
use phalanx_testkit::ike_pair::{IkePair, Side};

fn ah_child(conn: &mut Connection, proposals: &str) {
    conn.children[0].protocol = IpsecProtocol::Ah;
    conn.children[0].proposals = ChildProposal::parse_ah_list(proposals).unwrap();
}

fn ah_pair(a_proposals: &str, b_proposals: &str, seed: u64) -> IkePair {
    let mut a = connection(Side::A, DEFAULT_IKE);
    let mut b = connection(Side::B, DEFAULT_IKE);
    ah_child(&mut a, a_proposals);
    ah_child(&mut b, b_proposals);
    pair_of(a, b, seed)
}

fn installs(p: &IkePair, side: Side) -> Vec<(bool, ChildSaInstall)> {
    p.events(side)
        .into_iter()
        .filter_map(|e| match e {
            SaEvent::InstallInbound(i) => Some((true, i.clone())),
            SaEvent::InstallOutbound(i) => Some((false, i.clone())),
            _ => None,
        })
        .collect()
}

/// Every installation is AH with `integ_len` bytes of integrity key and
/// none of encryption, and each side's outbound is the other's inbound.
fn all_ah(p: &IkePair, integ_len: usize) {
    let (a, b) = (installs(p, Side::A), installs(p, Side::B));
    assert!(!a.is_empty() && !b.is_empty());
    for (_, i) in a.iter().chain(&b) {
        assert!(i.suite.ah, "{i:?}");
        assert!(i.encr_key.is_empty());
        assert_eq!(i.integ_key.len(), integ_len);
        assert_eq!(i.encap, None);
    }
    for (inbound, i) in &a {
        let peer = b.iter().find(|(bi, bs)| bi != inbound && bs.spi == i.spi);
        let (_, peer) = peer.unwrap_or_else(|| panic!("no peer SA for {:#x}", i.spi));
        assert_eq!(peer.integ_key, i.integ_key);
        assert_eq!(peer.suite, i.suite);
    }
}

// HDR, SK {IDi, AUTH, SA(AH: INTEG, ESN), TSi, TSr}  -->
//                       <--  HDR, SK {IDr, AUTH, SA(AH: INTEG, ESN), TSi, TSr}
#[test]
fn ah_child_from_ike_auth() {
    let mut p = ah_pair("sha512-sha256-esn", "sha256-sha512-esn-noesn", 70);
    established(&mut p);
    // The initiator's order wins (§2.7): HMAC-SHA2-512-256, 64-byte keys.
    all_ah(&p, 64);
    let (_, i) = &installs(&p, Side::A)[0];
    assert_eq!(
        i.suite.integ,
        phalanx_wire::ike::iana::IntegId::HMAC_SHA2_512_256
    );
    assert!(i.esn);
    teardown(&mut p);
    p.check_removed_once().unwrap();
}

// HDR, SK {N(REKEY_SA, AH, SPI), SA(AH), Ni, KEi, TSi, TSr}  -->
//                            <--  HDR, SK {SA(AH), Nr, KEr, TSi, TSr}
// HDR, SK {D(AH, old SPIa)}  -->
//                            <--  HDR, SK {D(AH, old SPIb)}
#[test]
fn ah_child_rekey_with_pfs_then_delete() {
    let mut p = ah_pair("sha256-x25519-esn", "sha256-x25519-esn", 71);
    established(&mut p);
    let old_a = p.installed(Side::A).0[0];
    p.with(Side::A, |e, now| e.handle_child_expiry(now, old_a, false));
    p.run_for(Duration::from_secs(5));
    // One pair left per side: the peer found the old SA by REKEY_SA's
    // protocol and SPI, and both removed it on D(AH, …).
    let (a_in, a_out) = p.installed(Side::A);
    let (b_in, b_out) = p.installed(Side::B);
    assert_eq!(
        (a_in.len(), a_out.len(), b_in.len(), b_out.len()),
        (1, 1, 1, 1)
    );
    assert_ne!(a_in[0], old_a);
    assert_eq!((a_out.clone(), b_out.clone()), (b_in.clone(), a_in.clone()));
    for side in [Side::A, Side::B] {
        let counters = p.endpoint_ref(side).counters();
        assert_eq!(counters.get(Counter::ChildSasRekeyed), 1, "{side:?}");
        assert_eq!(counters.get(Counter::ChildSasFailed), 0, "{side:?}");
    }
    all_ah(&p, 32);
    // The new keys differ from the old ones (PFS and new nonces).
    let a = installs(&p, Side::A);
    assert_ne!(a[0].1.integ_key, a[2].1.integ_key);

    // A deletes the new Child SA alone: D(AH, SPI) must be understood.
    let spi = p.installed(Side::A).0[0];
    let deleted = |p: &IkePair| {
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::ChildSasDeleted)
    };
    let before = deleted(&p);
    p.with(Side::A, |e, now| e.handle_child_expiry(now, spi, true));
    p.run_for(Duration::from_secs(1));
    assert_eq!(p.installed(Side::A), (vec![], vec![]));
    assert_eq!(p.installed(Side::B), (vec![], vec![]));
    assert_eq!(deleted(&p), before + 1);
    assert_eq!(p.endpoint_ref(Side::B).ike_sas().len(), 1);
    p.check_removed_once().unwrap();
}

// HDR, SK {IDi, AUTH, SA(AH), TSi, TSr}  -->
//                            <--  HDR, SK {IDr, AUTH, N(NO_PROPOSAL_CHOSEN)}
#[test]
fn ah_offer_to_an_esp_child_is_refused() {
    let mut a = connection(Side::A, DEFAULT_IKE);
    ah_child(&mut a, "sha256-esn");
    // B keeps its ESP child, whose proposals share HMAC-SHA2-256.
    let b = connection(Side::B, DEFAULT_IKE);
    let mut p = pair_of(a, b, 72);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(2));
    assert_eq!(p.installed(Side::A), (vec![], vec![]));
    assert_eq!(p.installed(Side::B), (vec![], vec![]));
    let b_counters = p.endpoint_ref(Side::B).counters();
    assert_eq!(b_counters.get(Counter::ProposalsRefused), 1);
    assert!(kinds(&p, Side::A).contains(&"ChildSaFailed"));
    // The IKE SA itself is up (§1.2: a failed Child SA leaves it).
    let sas = p.endpoint_ref(Side::A).ike_sas();
    assert!(sas.iter().any(|s| s.state == IkeSaState::Established));
}

// NAT detected (here faked by force_encap on the responder, which sends a
// NAT_DETECTION_SOURCE_IP that matches nothing): no AH child is offered.
#[test]
fn ah_is_never_negotiated_through_a_nat() {
    let mut a = connection(Side::A, DEFAULT_IKE);
    let mut b = connection(Side::B, DEFAULT_IKE);
    ah_child(&mut a, "sha256-esn");
    ah_child(&mut b, "sha256-esn");
    b.force_encap = true;
    let mut p = pair_of(a, b, 73);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(2));
    assert_eq!(p.installed(Side::A), (vec![], vec![]));
    assert_eq!(p.installed(Side::B), (vec![], vec![]));
    let reason = p.events(Side::A).into_iter().find_map(|e| match e {
        SaEvent::ChildSaFailed { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    assert!(
        reason.as_deref().is_some_and(|r| r.contains("AH cannot")),
        "{reason:?}"
    );
}
