//! Two nodes ran one IKE SA (takeovers decided on views that differed):
//! the one the cluster's agreed order names stays, the other demotes its
//! copy to standby (`Endpoint::demote_ike_sa`) without a word to the peer.
//!
//! Y is a standby of A that takes the IKE SA over outside the pair (its
//! datagrams go nowhere); A, still in the pair, is then delivered Y's
//! state and demotes.

use std::time::Duration;

use phalanx_ike::ha::{HaError, IkeSaState};
use phalanx_ike::{Counter, Endpoint, SaEvent};
use phalanx_testkit::ike_pair::{IkePair, Side};
use phalanx_wire::ike::iana::ExchangeType;

use crate::common::*;
use crate::support::*;

/// Y: a standby of A that took the IKE SA over; its first state (the
/// one the log delivers to A) and the endpoint.
fn rival(p: &IkePair, seed: u64) -> (Endpoint, IkeSaState) {
    let mut y = Standby::new(p, seed);
    y.follow(p);
    let (spi_i, spi_r) = last_state(p, Side::A).spis();
    let mut e = core::mem::replace(&mut y.endpoint, fresh(p, Side::A, seed + 1));
    e.take_over_ike_sa(p.now, spi_i, spi_r).unwrap();
    let state = drain_states(&mut e).pop().unwrap();
    (e, state)
}

/// The states an endpoint emitted since it was last drained; its
/// datagrams are dropped (it is outside the pair).
fn drain_states(e: &mut Endpoint) -> Vec<IkeSaState> {
    while e.poll_transmit().is_some() {}
    std::iter::from_fn(|| e.poll_event())
        .filter_map(|event| match event {
            SaEvent::IkeStateChanged { state } => Some(*state),
            _ => None,
        })
        .collect()
}

/// A's events from log index `from` on, by kind.
fn kinds_since(p: &IkePair, from: usize) -> Vec<&'static str> {
    events_since(p, Side::A, from).map(kind).collect()
}

// A and Y both took the IKE SA over; Y's state is delivered last: A
// demotes, then takes over again from Y's later state when Y fails, and
// answers B's liveness checks with the Message IDs Y left.
//                                   <--  HDR(#n), SK {}   (to A, after)
// HDR(#n, R), SK {}  -->
#[test]
fn demoted_copy_takes_later_states_and_is_taken_over_again() {
    let mut p = ha_pair(Some(10), 40);
    established(&mut p);
    let (mut y, s_y) = rival(&p, 400);
    let before = last_state(&p, Side::A);
    assert_eq!(s_y.generation, before.generation + 1);
    let log = p.log().len();
    p.with(Side::A, |e, now| e.demote_ike_sa(now, s_y.clone()).unwrap());
    let a = p.endpoint_ref(Side::A);
    assert!(a.ike_sas().is_empty());
    assert!(!a.runs_ike_sa(s_y.spi_i, s_y.spi_r));
    assert_eq!(a.imported_ike_sas(), vec![&s_y]);
    // No IkeStateRemoved (the IKE SA moved, it is not gone) and no data
    // plane change (both hold the same Child SAs).
    assert!(
        kinds_since(&p, log).is_empty(),
        "{:?}",
        kinds_since(&p, log)
    );
    // Y goes on (its generations count on from its own); A's copy takes
    // them, not refusing them as stale.
    y.set_ha_replication(p.now, false);
    y.set_ha_replication(p.now, true);
    let later = drain_states(&mut y).pop().unwrap();
    assert_eq!(later.generation, s_y.generation + 1);
    p.with(Side::A, |e, now| {
        e.import_ike_sa(now, later, false).unwrap()
    });
    // Y fails; A runs the IKE SA again and B notices nothing.
    let at = At {
        log: p.log().len(),
        wire: p.wire().len(),
    };
    p.with(Side::A, |e, now| {
        e.take_over_ike_sa(now, s_y.spi_i, s_y.spi_r).unwrap();
    });
    p.run_for(Duration::from_secs(12));
    let answers = wire_since(&p, at, |w| w.from == Side::A && w.info.response);
    assert!(!answers.is_empty(), "{:#?}", p.log());
    let b = p.endpoint_ref(Side::B).counters();
    assert_eq!(b.get(Counter::IkeSasDead), 0);
    assert_eq!(b.get(Counter::InvalidMessageId), 0);
    assert_eq!(
        p.endpoint_ref(Side::A).counters().get(Counter::HaTakeovers),
        1
    );
    no_renegotiation(&p);
}

// The state A is demoted with lacks A's Child SA and has one A never had:
// the one A had goes (outbound first), the new one comes (inbound
// first); forgetting the copy later removes exactly what it holds, once.
#[test]
fn demotion_keeps_shared_child_sas_and_reconciles_the_rest() {
    let mut p = ha_pair(None, 41);
    established(&mut p);
    let (_, s_y) = rival(&p, 410);
    let (a_in, a_out) = live_spis(&p, Side::A, 0);
    assert_eq!((a_in.len(), a_out.len()), (1, 1));
    // Kept: the same Child SA on both sides.
    let log = p.log().len();
    p.with(Side::A, |e, now| e.demote_ike_sa(now, s_y.clone()).unwrap());
    assert!(kinds_since(&p, log).is_empty());
    assert_eq!(live_spis(&p, Side::A, 0), (a_in.clone(), a_out.clone()));
    // Forgetting the standby copy lets them go, once each.
    p.with(Side::A, |e, _| {
        assert!(e.forget_ike_sa(s_y.spi_i, s_y.spi_r))
    });
    assert_eq!(
        kinds_since(&p, log),
        ["RemoveOutbound", "RemoveInbound"],
        "{:#?}",
        p.log()
    );
    assert_eq!(live_spis(&p, Side::A, 0), Default::default());
}

#[test]
fn demotion_swaps_child_sas_the_states_do_not_share() {
    let mut p = ha_pair(None, 42);
    established(&mut p);
    let (_, mut s_y) = rival(&p, 420);
    let (a_in, a_out) = live_spis(&p, Side::A, 0);
    let mut other = s_y.children[0].clone();
    other.spi_in ^= 0x0101_0000;
    other.spi_out ^= 0x0101_0000;
    s_y.children = vec![other.clone()];
    let log = p.log().len();
    p.with(Side::A, |e, now| e.demote_ike_sa(now, s_y.clone()).unwrap());
    assert_eq!(
        kinds_since(&p, log),
        [
            "InstallInbound",
            "InstallOutbound",
            "RemoveOutbound",
            "RemoveInbound"
        ]
    );
    let (now_in, now_out) = live_spis(&p, Side::A, 0);
    assert_eq!(now_in.into_iter().collect::<Vec<_>>(), [other.spi_in]);
    assert_eq!(now_out.into_iter().collect::<Vec<_>>(), [other.spi_out]);
    assert!(!a_in.contains(&other.spi_in) && !a_out.contains(&other.spi_out));
}

// A's liveness check is in flight (B's answer lost) when A is demoted:
// HDR(#2), SK {}  -->      <--  HDR(#2, R), SK {}  --X
// (demoted: no retransmission, no Delete, no further liveness check)
#[test]
fn nothing_is_sent_for_a_demoted_ike_sa() {
    let mut p = ha_pair_with(|a, _| a.dpd_delay = Some(Duration::from_secs(10)), 43);
    established(&mut p);
    let sent = p.wire().len();
    p.drop_matching(1, |i| i.from == Side::B && i.response);
    p.run_until(|p| p.wire().len() > sent + 1, Duration::from_secs(11));
    assert_eq!(last_state(&p, Side::A).in_flight.len(), 1);
    let (_, s_y) = rival(&p, 430);
    let at = At {
        log: p.log().len(),
        wire: p.wire().len(),
    };
    p.with(Side::A, |e, now| e.demote_ike_sa(now, s_y.clone()).unwrap());
    assert_eq!(p.endpoint_ref(Side::A).poll_timeout(), None);
    p.run_for(Duration::from_secs(120));
    let later = p.now + Duration::from_secs(3600);
    p.with(Side::A, |e, _| {
        e.handle_timeout(later);
        assert_eq!(e.poll_transmit(), None);
    });
    assert!(wire_since(&p, at, |w| w.from == Side::A).is_empty());
    assert!(kinds_since(&p, at.log).is_empty(), "{:#?}", p.log());
    let a = p.endpoint_ref(Side::A).counters();
    assert_eq!(a.exchange(ExchangeType::INFORMATIONAL).requests_sent, 1);
}

#[test]
fn only_an_ike_sa_running_here_is_demoted() {
    let mut p = ha_pair(None, 44);
    established(&mut p);
    let (_, s_y) = rival(&p, 440);
    // Nothing of it here.
    let mut empty = fresh(&p, Side::A, 441);
    let refused = empty.demote_ike_sa(p.now, s_y.clone());
    assert_eq!(refused, Err(HaError::NotRunning));
    assert!(empty.imported_ike_sas().is_empty());
    assert_eq!(empty.poll_event().map(|e| kind(&e)), None);
    assert_eq!(empty.counters().get(Counter::HaImportsRefused), 1);
    // A standby copy only: it stays as it was.
    let mut standby = Standby::new(&p, 442);
    standby.follow(&p);
    let held = standby.endpoint.imported_ike_sas()[0].clone();
    let refused = standby.endpoint.demote_ike_sa(p.now, s_y.clone());
    assert_eq!(refused, Err(HaError::NotRunning));
    assert_eq!(standby.endpoint.imported_ike_sas(), vec![&held]);
    // Running here, but the state cannot run here: nothing changes.
    let mut unknown = s_y.clone();
    unknown.connection = "elsewhere".to_owned();
    let now = p.now;
    let refused = p.endpoint(Side::A).demote_ike_sa(now, unknown);
    assert_eq!(
        refused,
        Err(HaError::UnknownConnection("elsewhere".to_owned()))
    );
    assert!(p.endpoint_ref(Side::A).runs_ike_sa(s_y.spi_i, s_y.spi_r));
}

// A third node held A's latest state when Y's first one (numbered on from
// an older copy) comes: a plain import finds it stale, the new owner's
// import takes it, and Y's next state is newer than it.
#[test]
fn a_new_owner_state_replaces_the_copy_whatever_its_generation() {
    let mut p = ha_pair(None, 45);
    established(&mut p);
    let (mut y, s_y) = rival(&p, 450);
    // A emits two more states after Y took over from the first.
    for _ in 0..2 {
        p.with(Side::A, |e, now| {
            e.set_ha_replication(now, false);
            e.set_ha_replication(now, true);
        });
    }
    let mut z = Standby::new(&p, 451);
    z.follow(&p);
    let held = z.endpoint.imported_ike_sas()[0].generation;
    assert!(held > s_y.generation);
    let stale = z.endpoint.import_ike_sa(p.now, s_y.clone(), false);
    assert!(matches!(stale, Err(HaError::Stale { .. })));
    z.endpoint
        .import_ike_sa_of_new_owner(p.now, s_y.clone())
        .unwrap();
    assert_eq!(z.endpoint.imported_ike_sas(), vec![&s_y]);
    // Same Child SAs: the data plane saw nothing.
    assert_eq!(z.endpoint.poll_event().map(|e| kind(&e)), None);
    y.set_ha_replication(p.now, false);
    y.set_ha_replication(p.now, true);
    let next = drain_states(&mut y).pop().unwrap();
    z.endpoint.import_ike_sa(p.now, next, false).unwrap();
    // A running IKE SA is never replaced this way.
    let now = p.now;
    let own = p.endpoint(Side::A).import_ike_sa_of_new_owner(now, s_y);
    assert_eq!(own, Err(HaError::ActiveHere));
}
