//! The API the daemon drives: initiate, acquire, terminate, reconfigure,
//! status, and following a peer whose NAT mapping changes.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use phalanx_ike::config::StartAction;
use phalanx_ike::{Counter, IkeError, IkeSaState, SaEvent};
use phalanx_testkit::ike_pair::Side;
use phalanx_wire::ike::iana::ExchangeType;

// Traffic hit a trap: the Child SA (and the IKE SA first) is created, the
// triggering packet's addresses offered first (RFC 7296 §2.9).
#[test]
fn acquire_creates_the_sa_once() {
    let mut p = pair(DEFAULT_IKE, 500);
    let trigger = Some((ip("10.1.0.5"), ip("10.2.0.9")));
    p.with(Side::A, |e, now| e.acquire(now, "gw", "net", trigger));
    p.with(Side::A, |e, now| e.acquire(now, "gw", "net", trigger));
    assert!(p.run_until(|p| up(p, 1), Duration::from_secs(5)));
    p.with(Side::A, |e, now| e.acquire(now, "gw", "net", trigger));
    p.run_for(Duration::from_secs(2));
    let a = p.endpoint_ref(Side::A);
    assert_eq!(a.ike_sas().len(), 1);
    assert_eq!(
        a.counters()
            .exchange(ExchangeType::CREATE_CHILD_SA)
            .requests_sent,
        0
    );
    // The narrowed selectors still cover the configured subnets.
    assert_eq!(a.ike_sas()[0].children[0].local_ts, vec![net(NET_A)]);
    // Unknown names are ignored.
    p.with(Side::A, |e, now| e.acquire(now, "nope", "net", None));
    p.with(Side::A, |e, now| e.acquire(now, "gw", "nope", None));
    assert_eq!(p.endpoint_ref(Side::A).ike_sas().len(), 1);
}

#[test]
fn initiate_twice_and_errors() {
    let mut p = pair(DEFAULT_IKE, 501);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    assert!(p.run_until(|p| up(p, 1), Duration::from_secs(5)));
    assert_eq!(p.endpoint_ref(Side::A).ike_sas().len(), 1);
    let now = p.now;
    assert_eq!(
        p.endpoint(Side::A).initiate(now, "nope"),
        Err(IkeError::UnknownConnection("nope".into()))
    );
    let mut passive = connection(Side::B, DEFAULT_IKE);
    passive.remote_addr = None;
    let mut q = pair_of(connection(Side::A, DEFAULT_IKE), passive, 502);
    let now = q.now;
    assert_eq!(
        q.endpoint(Side::B).initiate(now, "gw"),
        Err(IkeError::NoRemoteAddress("gw".into()))
    );
    assert_eq!(
        q.endpoint(Side::B).terminate(now, "gw"),
        Err(IkeError::NotEstablished("gw".into()))
    );
}

// Terminating while IKE_SA_INIT is in flight abandons the attempt.
#[test]
fn terminate_while_connecting() {
    let mut p = pair(DEFAULT_IKE, 503);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.with(Side::A, |e, now| e.terminate(now, "gw").unwrap());
    assert_eq!(kinds(&p, Side::A), ["IkeSaFailed"]);
    p.run_for(Duration::from_secs(40));
    assert!(p.endpoint_ref(Side::A).ike_sas().is_empty());
    // B's half-open SA expires by itself.
    assert!(p.endpoint_ref(Side::B).ike_sas().is_empty());
}

// start_action = Start initiates on creation and on reload.
#[test]
fn start_action_start() {
    let mut a = connection(Side::A, DEFAULT_IKE);
    a.start_action = StartAction::Start;
    let mut p = pair_of(a.clone(), connection(Side::B, DEFAULT_IKE), 504);
    assert!(p.run_until(|p| up(p, 1), Duration::from_secs(5)));
    let mut q = pair(DEFAULT_IKE, 505);
    q.with(Side::A, |e, now| e.reconfigure(config(a), now));
    assert!(q.run_until(|p| up(p, 1), Duration::from_secs(5)));
}

#[test]
fn status_snapshot() {
    let mut p = pair(DEFAULT_IKE, 506);
    established(&mut p);
    let sa = &p.endpoint_ref(Side::A).ike_sas()[0];
    assert_eq!(sa.connection, "gw");
    assert_eq!(sa.state, IkeSaState::Established);
    assert!(sa.initiator);
    assert_eq!(sa.remote_id, "b.example");
    assert!(sa.algorithms.contains("AES_GCM_16"));
    assert!(sa.rekey_at.is_some());
    let child = &sa.children[0];
    assert_eq!(child.name, "net");
    assert!(child.rekey_at.unwrap() < child.expires_at.unwrap());
    assert_eq!(child.remote_ts, vec![net(NET_B)]);
    let b = &p.endpoint_ref(Side::B).ike_sas()[0];
    assert!(!b.initiator);
    assert_eq!((b.spi_i, b.spi_r), (sa.spi_i, sa.spi_r));
    assert_eq!(b.children[0].spi_out, child.spi_in);
    // Every counter has a name and a description.
    for (c, _) in p.endpoint_ref(Side::A).counters().iter() {
        assert!(!c.name().is_empty() && !c.description().is_empty());
    }
}

// The NAT in front of A changes its mapping: B follows the new address
// of A's next authenticated message and tells the data plane (§2.23).
#[test]
fn peer_moved_behind_nat() {
    let mut a = connection(Side::A, DEFAULT_IKE);
    a.dpd_delay = Some(Duration::from_secs(10));
    let mut b = connection(Side::B, DEFAULT_IKE);
    b.remote_addr = None;
    let mut p = pair_of(a, b, 507);
    p.net.nat_a = Some(ip("203.0.113.5"));
    established(&mut p);
    p.net.nat_port_offset = 40_000;
    p.run_for(Duration::from_secs(11));
    let moved = p.events(Side::B).into_iter().find_map(|e| match e {
        SaEvent::PeerMoved {
            remote,
            encap,
            outbound_spis,
            ..
        } => Some((*remote, *encap, outbound_spis.clone())),
        _ => None,
    });
    let (remote, encap, spis) = moved.expect("PeerMoved");
    assert_eq!(remote, "203.0.113.5:44500".parse().unwrap());
    assert_eq!(encap.map(|e| e.remote_port), Some(44500));
    assert_eq!(spis, p.installed(Side::B).1);
    assert_eq!(
        p.endpoint_ref(Side::B).counters().get(Counter::PeerMoved),
        1
    );
    // And the answers reach A at its new mapping.
    assert!(up(&p, 1));
    assert_eq!(
        p.endpoint_ref(Side::A).counters().get(Counter::IkeSasDead),
        0
    );
}
