//! INFORMATIONAL deletes (RFC 7296 §1.4.1).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use phalanx_ike::{Counter, SaEvent};
use phalanx_testkit::ike_pair::{IkePair, Side};
use phalanx_wire::ike::iana::ExchangeType;

fn inbound_spi(p: &IkePair, side: Side) -> u32 {
    p.installed(side).0[0]
}

// HDR, SK {D(ESP, SPIa)}        -->
//                               <--  HDR, SK {D(ESP, SPIb)}
#[test]
fn delete_child_sa() {
    let mut p = pair(DEFAULT_IKE, 30);
    established(&mut p);
    let spi = inbound_spi(&p, Side::A);
    p.with(Side::A, |e, now| e.handle_child_expiry(now, spi, true));
    p.run_for(Duration::from_secs(1));
    assert_eq!(
        &kinds(&p, Side::A)[3..],
        ["RemoveOutbound", "RemoveInbound"]
    );
    assert_eq!(
        &kinds(&p, Side::B)[3..],
        ["RemoveOutbound", "RemoveInbound"]
    );
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::ChildSasExpired),
        1
    );
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::ChildSasDeleted),
        1
    );
    // The IKE SA stays.
    assert_eq!(p.endpoint_ref(Side::B).ike_sas().len(), 1);
    p.check_removed_once().unwrap();
}

// Both delete the same Child SA at once: each removes outbound on its
// request, inbound on the answer, and names nothing in its answer.
// HDR, SK {D(ESP, SPIa)}  -->   <--  HDR, SK {D(ESP, SPIb)}
//                         <-- HDR, SK {}  /  HDR, SK {} -->
#[test]
fn crossed_child_deletes() {
    let mut p = pair(DEFAULT_IKE, 31);
    established(&mut p);
    let (a, b) = (inbound_spi(&p, Side::A), inbound_spi(&p, Side::B));
    p.with(Side::A, |e, now| e.handle_child_expiry(now, a, true));
    p.with(Side::B, |e, now| e.handle_child_expiry(now, b, true));
    p.run_for(Duration::from_secs(1));
    assert_eq!(
        &kinds(&p, Side::A)[3..],
        ["RemoveOutbound", "RemoveInbound"]
    );
    assert_eq!(
        &kinds(&p, Side::B)[3..],
        ["RemoveOutbound", "RemoveInbound"]
    );
    p.check_removed_once().unwrap();
}

// HDR, SK {D(IKE)}              -->
//                               <--  HDR, SK {}
#[test]
fn delete_ike_sa_takes_its_children() {
    let mut p = pair(DEFAULT_IKE, 32);
    established(&mut p);
    teardown(&mut p);
    assert_eq!(
        &kinds(&p, Side::A)[3..],
        ["RemoveOutbound", "RemoveInbound", "IkeSaDown"]
    );
    assert_eq!(
        &kinds(&p, Side::B)[3..],
        ["RemoveOutbound", "RemoveInbound", "IkeSaDown"]
    );
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::IkeSasDeleted),
        1
    );
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::IkeSasDeleted),
        1
    );
    p.check_removed_once().unwrap();
}

// The responder deletes: same exchange the other way.
#[test]
fn responder_terminates() {
    let mut p = pair(DEFAULT_IKE, 33);
    established(&mut p);
    p.with(Side::B, |e, now| e.terminate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(1));
    assert!(p.endpoint_ref(Side::A).ike_sas().is_empty());
    assert!(p.endpoint_ref(Side::B).ike_sas().is_empty());
    p.check_removed_once().unwrap();
    let down = p.events(Side::A).into_iter().find_map(|e| match e {
        SaEvent::IkeSaDown { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    assert_eq!(down.as_deref(), Some("deleted by peer"));
}

// The Delete's answer is lost: the Delete is retransmitted and answered
// from the closed SA's cache while it lingers.
#[test]
fn lost_delete_answer() {
    let mut p = pair(DEFAULT_IKE, 34);
    established(&mut p);
    p.drop_matching(1, |i| {
        i.exchange == ExchangeType::INFORMATIONAL && i.response
    });
    teardown(&mut p);
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::RetransmitsAnswered),
        1
    );
    assert_eq!(
        p.endpoint_ref(Side::A).counters().get(Counter::IkeSasDead),
        0
    );
    p.check_removed_once().unwrap();
}

// Reloading without the connection deletes its IKE SA.
#[test]
fn reconfigure_removes_deleted_connections() {
    let mut p = pair(DEFAULT_IKE, 35);
    established(&mut p);
    p.with(Side::A, |e, now| {
        e.reconfigure(phalanx_ike::config::EndpointConfig::default(), now)
    });
    p.run_for(Duration::from_secs(1));
    assert!(p.endpoint_ref(Side::B).ike_sas().is_empty());
    p.check_removed_once().unwrap();
    // Unchanged connections keep their SA.
    let mut p = pair(DEFAULT_IKE, 36);
    established(&mut p);
    let before = p.endpoint_ref(Side::A).ike_sas()[0].spi_i;
    let same = config(connection(Side::A, DEFAULT_IKE));
    p.with(Side::A, |e, now| e.reconfigure(same, now));
    p.run_for(Duration::from_secs(1));
    assert_eq!(p.endpoint_ref(Side::A).ike_sas()[0].spi_i, before);
    assert_eq!(kinds(&p, Side::A).len(), 3);
}
