//! Rekeying Child and IKE SAs, make-before-break, and collisions
//! (RFC 7296 §1.3.2, §1.3.3, §2.8, §2.8.1, §2.25).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use phalanx_ike::config::{ChildProposal, SaLifetimeConfig};
use phalanx_ike::{Counter, SaEvent};
use phalanx_testkit::ike_pair::{IkePair, Side};

fn spis(p: &IkePair, side: Side) -> (Vec<u32>, Vec<u32>) {
    p.installed(side)
}

/// After every rekey: one pair left per side, and A's outbound is B's
/// inbound and back.
fn one_consistent_pair(p: &IkePair) {
    let (a_in, a_out) = spis(p, Side::A);
    let (b_in, b_out) = spis(p, Side::B);
    assert_eq!(
        (a_in.len(), a_out.len(), b_in.len(), b_out.len()),
        (1, 1, 1, 1),
        "{:#?}",
        p.sa_balance()
    );
    assert_eq!(a_out, b_in);
    assert_eq!(b_out, a_in);
}

fn installs(p: &IkePair, side: Side) -> Vec<(bool, u32, Vec<u8>)> {
    p.events(side)
        .into_iter()
        .filter_map(|e| match e {
            SaEvent::InstallInbound(i) => Some((true, i.spi, i.encr_key.to_vec())),
            SaEvent::InstallOutbound(i) => Some((false, i.spi, i.encr_key.to_vec())),
            _ => None,
        })
        .collect()
}

// HDR, SK {N(REKEY_SA), SA, Ni, [KEi], TSi, TSr} -->
//                               <--  HDR, SK {SA, Nr, [KEr], TSi, TSr}
// (overlap: both SAs carry traffic)
// HDR, SK {D(ESP, old SPIa)}    -->
//                               <--  HDR, SK {D(ESP, old SPIb)}
fn child_rekey(esp: &str, seed: u64) {
    let mut a = connection(Side::A, DEFAULT_IKE);
    let mut b = connection(Side::B, DEFAULT_IKE);
    a.children[0].proposals = ChildProposal::parse_list(esp).unwrap();
    b.children[0].proposals = ChildProposal::parse_list(esp).unwrap();
    let mut p = pair_of(a, b, seed);
    established(&mut p);
    let (old_a, old_b) = (spis(&p, Side::A).0[0], spis(&p, Side::B).0[0]);
    p.with(Side::A, |e, now| e.handle_child_expiry(now, old_a, false));
    p.run_for(Duration::from_secs(5));
    one_consistent_pair(&p);
    let (new_a, new_b) = (spis(&p, Side::A).0[0], spis(&p, Side::B).0[0]);
    assert!(new_a != old_a && new_b != old_b);
    assert_eq!(
        &kinds(&p, Side::A)[3..],
        [
            "InstallInbound",
            "InstallOutbound",
            "RemoveOutbound",
            "RemoveInbound"
        ]
    );
    assert_eq!(
        &kinds(&p, Side::B)[3..],
        [
            "InstallInbound",
            "InstallOutbound",
            "RemoveOutbound",
            "RemoveInbound"
        ]
    );
    // Make-before-break, strictly: each side installs its new inbound SA
    // before the peer switches to it.
    p.check_inbound_strictly_first(new_a).unwrap();
    p.check_inbound_strictly_first(new_b).unwrap();
    p.check_inbound_first().unwrap();
    // Keys changed, and both sides agree.
    let (ia, ib) = (installs(&p, Side::A), installs(&p, Side::B));
    assert_ne!(ia[0].2, ia[2].2);
    let b_in_new = ib.iter().find(|x| x.0 && x.1 == new_b).unwrap();
    let a_out_new = ia.iter().find(|x| !x.0 && x.1 == new_b).unwrap();
    assert_eq!(b_in_new.2, a_out_new.2);
    // The old SAs went after the overlap.
    let removed_at = p
        .log()
        .iter()
        .find(|e| matches!(e.event, SaEvent::RemoveInbound { .. }))
        .unwrap()
        .at;
    assert!(removed_at - p.start >= Duration::from_secs(2));
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::ChildSasRekeyed),
        1
    );
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::ChildSasRekeyed),
        1
    );
    teardown(&mut p);
    p.check_removed_once().unwrap();
}

#[test]
fn child_rekey_without_pfs() {
    child_rekey("aes256gcm16-esn-noesn", 40);
}

#[test]
fn child_rekey_with_pfs() {
    child_rekey("aes128-sha256-x25519", 41);
}

// Both sides rekey the same Child SA at once (§2.8.1):
// HDR, SK {N(REKEY_SA), SA, Ni1, TSi, TSr} -->  <-- HDR, SK {N(REKEY_SA), SA, Ni2, TSi, TSr}
// <-- HDR, SK {SA, Nr1, TSi, TSr}               HDR, SK {SA, Nr2, TSi, TSr} -->
// The SA made with the lowest of the four nonces is deleted by its maker:
// HDR, SK {D(ESP, redundant)}   -->
// and the winner's maker deletes the old SA after the overlap.
#[test]
fn child_child_collision() {
    for seed in 0..12 {
        let mut p = pair(DEFAULT_IKE, 50 + seed);
        established(&mut p);
        let (a, b) = (spis(&p, Side::A).0[0], spis(&p, Side::B).0[0]);
        p.with(Side::A, |e, now| e.handle_child_expiry(now, a, false));
        p.with(Side::B, |e, now| e.handle_child_expiry(now, b, false));
        p.run_for(Duration::from_secs(15));
        one_consistent_pair(&p);
        let (ca, cb) = (
            p.endpoint_ref(Side::A).counters(),
            p.endpoint_ref(Side::B).counters(),
        );
        assert_eq!(ca.get(Counter::RekeyCollisions), 1, "seed {seed}");
        assert_eq!(cb.get(Counter::RekeyCollisions), 1, "seed {seed}");
        assert_eq!(
            ca.get(Counter::RedundantSasDeleted) + cb.get(Counter::RedundantSasDeleted),
            1
        );
        p.check_inbound_first().unwrap();
        let survivor = spis(&p, Side::A).0[0];
        p.check_inbound_strictly_first(survivor).unwrap();
        teardown(&mut p);
        p.check_removed_once().unwrap();
    }
}

// A rekeys a Child SA while B deletes it (§2.25.1): B answers the rekey
// TEMPORARY_FAILURE, A answers the delete; the SA is gone on both sides.
#[test]
fn rekey_versus_delete() {
    let mut p = pair(DEFAULT_IKE, 60);
    established(&mut p);
    let (a, b) = (spis(&p, Side::A).0[0], spis(&p, Side::B).0[0]);
    p.with(Side::A, |e, now| e.handle_child_expiry(now, a, false));
    p.with(Side::B, |e, now| e.handle_child_expiry(now, b, true));
    p.run_for(Duration::from_secs(20));
    assert_eq!(spis(&p, Side::A), (vec![], vec![]));
    assert_eq!(spis(&p, Side::B), (vec![], vec![]));
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::TemporaryFailures),
        1
    );
    assert_eq!(p.endpoint_ref(Side::A).ike_sas().len(), 1);
    p.check_removed_once().unwrap();
}

/// Connections whose IKE SA rekeys after `secs` (no jitter) on the sides
/// given.
fn ike_rekeying(a_secs: Option<u64>, b_secs: Option<u64>, seed: u64) -> IkePair {
    let life = |secs: u64| SaLifetimeConfig {
        rekey_time: Duration::from_secs(secs),
        jitter: Duration::ZERO,
        hard_time: Duration::from_secs(secs * 2),
        rekey_bytes: None,
        rekey_packets: None,
    };
    let mut a = connection(Side::A, DEFAULT_IKE);
    let mut b = connection(Side::B, DEFAULT_IKE);
    if let Some(s) = a_secs {
        a.ike_lifetime = life(s);
    }
    if let Some(s) = b_secs {
        b.ike_lifetime = life(s);
    }
    pair_of(a, b, seed)
}

// HDR, SK {SA(SPIi'), Ni, KEi}  -->
//                               <--  HDR, SK {SA(SPIr'), Nr, KEr}
// HDR, SK {D(IKE)}  (on the old IKE SA) -->
//                               <--  HDR, SK {}
#[test]
fn ike_rekey_keeps_children() {
    let mut p = ike_rekeying(Some(100), None, 70);
    established(&mut p);
    let before = p.endpoint_ref(Side::A).ike_sas()[0].clone();
    p.run_for(Duration::from_secs(101));
    let after_a = p.endpoint_ref(Side::A).ike_sas();
    let after_b = p.endpoint_ref(Side::B).ike_sas();
    assert_eq!((after_a.len(), after_b.len()), (1, 1), "{after_a:#?}");
    assert_ne!(after_a[0].spi_i, before.spi_i);
    assert_ne!(after_a[0].spi_r, before.spi_r);
    assert_eq!(
        (after_a[0].spi_i, after_a[0].spi_r),
        (after_b[0].spi_i, after_b[0].spi_r)
    );
    assert_eq!(after_a[0].children.len(), 1);
    assert_eq!(
        kinds(&p, Side::A),
        [
            "IkeSaUp",
            "InstallInbound",
            "InstallOutbound",
            "IkeSaRekeyed"
        ]
    );
    assert_eq!(
        kinds(&p, Side::B),
        [
            "IkeSaUp",
            "InstallInbound",
            "InstallOutbound",
            "IkeSaRekeyed"
        ]
    );
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::IkeSasRekeyed),
        1
    );
    // The new IKE SA works: rekey the child over it, then close it.
    let spi = spis(&p, Side::A).0[0];
    p.with(Side::A, |e, now| e.handle_child_expiry(now, spi, false));
    p.run_for(Duration::from_secs(5));
    one_consistent_pair(&p);
    teardown(&mut p);
    p.check_removed_once().unwrap();
}

// Both sides rekey the IKE SA at once (§2.8.1): the new IKE SA made with
// the lowest nonce is deleted by its maker; the other takes the children.
#[test]
fn ike_ike_collision() {
    for seed in 0..8 {
        let mut p = ike_rekeying(Some(100), Some(100), 80 + seed);
        established(&mut p);
        // B came up 10 ms before A; with 50 ms of latency the two rekey
        // requests cross.
        p.net.latency = [Duration::from_millis(50); 2];
        // Rekeys at 100 s; the redundant and the old IKE SA go at once.
        p.run_for(Duration::from_secs(102) - p.elapsed());
        let (a, b) = (
            p.endpoint_ref(Side::A).ike_sas(),
            p.endpoint_ref(Side::B).ike_sas(),
        );
        assert_eq!((a.len(), b.len()), (1, 1), "seed {seed}: {a:#?} {b:#?}");
        assert_eq!((a[0].spi_i, a[0].spi_r), (b[0].spi_i, b[0].spi_r));
        assert_eq!(a[0].children.len(), 1);
        assert_eq!(
            p.endpoint_ref(Side::A)
                .counters()
                .get(Counter::RekeyCollisions),
            1
        );
        assert_eq!(
            p.endpoint_ref(Side::B)
                .counters()
                .get(Counter::RekeyCollisions),
            1
        );
        one_consistent_pair(&p);
        teardown(&mut p);
        p.check_removed_once().unwrap();
    }
}

// A child rekey meets an IKE rekey (§2.25.2): the one refused with
// TEMPORARY_FAILURE waits and retries; in the end both are done.
#[test]
fn child_rekey_during_ike_rekey() {
    let mut p = ike_rekeying(Some(100), None, 90);
    established(&mut p);
    let rekey_at = p.endpoint_ref(Side::A).ike_sas()[0].rekey_at.unwrap();
    assert!(p.run_until(|p| p.now >= rekey_at, Duration::from_secs(101)));
    let b = spis(&p, Side::B).0[0];
    p.with(Side::B, |e, now| e.handle_child_expiry(now, b, false));
    p.run_for(Duration::from_secs(30));
    let temp = p
        .endpoint_ref(Side::A)
        .counters()
        .get(Counter::TemporaryFailures)
        + p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::TemporaryFailures);
    assert!(temp >= 1);
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::ChildSasRekeyed),
        1
    );
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::IkeSasRekeyed),
        1
    );
    one_consistent_pair(&p);
    teardown(&mut p);
    p.check_removed_once().unwrap();
}

// Child SA lifetimes drive rekeys by themselves.
#[test]
fn child_rekeys_on_its_timer() {
    let mut a = connection(Side::A, DEFAULT_IKE);
    a.children[0].lifetime = SaLifetimeConfig {
        rekey_time: Duration::from_secs(60),
        jitter: Duration::from_secs(10),
        hard_time: Duration::from_secs(90),
        rekey_bytes: None,
        rekey_packets: None,
    };
    let mut p = pair_of(a, connection(Side::B, DEFAULT_IKE), 95);
    established(&mut p);
    p.run_for(Duration::from_secs(200));
    assert!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::ChildSasRekeyed)
            >= 3
    );
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::ChildSasExpired),
        0
    );
    one_consistent_pair(&p);
    p.check_inbound_first().unwrap();
}
