//! Cluster high availability: an IKE SA replicated from the node that runs
//! it (A, or B for the responder side) and carried on by a successor
//! endpoint without renegotiation (`phalanx_ike::ha`).
//!
//! Each test kills a side by replacing its endpoint in the pair with a
//! fresh one that imported a snapshot; datagrams in flight to the dead
//! node arrive at the successor, as on a cluster's shared address.
#![allow(clippy::unwrap_used)]

#[path = "ha/codec.rs"]
mod codec;
mod common;
#[path = "ha/demote.rs"]
mod demote;
#[path = "ha/pools.rs"]
mod pools;
#[path = "ha/support.rs"]
mod support;

use std::time::Duration;

use common::*;
use phalanx_ike::ha::{HaError, RequestPurpose};
use phalanx_ike::limits::HA_IV_MARGIN;
use phalanx_ike::{Counter, SaEvent};
use phalanx_testkit::ike_pair::{Fate, Side};
use phalanx_wire::ike::iana::ExchangeType;
use support::*;

// B (responder) checks A's liveness; A answers, dies, A' answers the next:
//                                   <--  HDR(#0), SK {}       (answered by A)
//   A dies; A' takes over with expected Message ID 1
//                                   <--  HDR(#1), SK {}
// HDR(#1, R), SK {}  -->                                      (from A')
#[test]
fn successor_answers_liveness_checks_with_the_next_message_id() {
    let (mut p, state, at) = taken_over(Some(10), 1, Duration::from_secs(12));
    assert_eq!(state.message_ids.expected_request_id, 1);
    p.run_for(Duration::from_secs(12));
    let answers = wire_since(&p, at, |w| {
        w.from == Side::A && w.info.response && w.info.exchange == ExchangeType::INFORMATIONAL
    });
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].info.message_id, 1);
    assert!(matches!(answers[0].fate, Fate::Delivered(_)));
    let b = p.endpoint_ref(Side::B).counters();
    assert_eq!(b.get(Counter::DpdSent), 2);
    assert_eq!(b.get(Counter::IkeSasDead), 0);
    no_renegotiation(&p);
}

// A' rekeys the Child SA with A's next Message ID (2), and B accepts:
// HDR(#2), SK {N(REKEY_SA), SA, Ni, TSi, TSr}  -->
//                                   <--  HDR(#2, R), SK {SA, Nr, TSi, TSr}
// HDR(#3), SK {D(ESP, old)}  -->   <--  HDR(#3, R), SK {D(ESP, old)}
#[test]
fn successor_rekeys_a_child_sa_the_peer_accepts() {
    let (mut p, state, at) = taken_over(None, 2, Duration::ZERO);
    let old = state.children[0].spi_in;
    p.with(Side::A, |e, now| e.handle_child_expiry(now, old, false));
    p.run_for(Duration::from_secs(5));
    let requests = wire_since(&p, at, |w| {
        w.from == Side::A && !w.info.response && w.info.exchange == ExchangeType::CREATE_CHILD_SA
    });
    assert_eq!(
        requests[0].info.message_id,
        state.message_ids.next_request_id
    );
    // The AEAD IV (RFC 5282 §3.1: the explicit IV after the IKE header and
    // the SK payload header) jumped past anything A may have used.
    let iv = u64::from_be_bytes(requests[0].transmit.bytes[32..40].try_into().unwrap());
    assert_eq!(iv, state.iv_counter + HA_IV_MARGIN);
    // A' replicated that before sending anything.
    let first = events_since(&p, Side::A, at.log)
        .find_map(|e| match e {
            SaEvent::IkeStateChanged { state } => Some(state.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(first.generation, state.generation + 1);
    assert_eq!(first.iv_counter, state.iv_counter + HA_IV_MARGIN);
    assert_one_new_pair(&p, at, old);
    no_renegotiation(&p);
}

// HDR(#2), SK {D(IKE)}  -->   <--  HDR(#2, R), SK {}
#[test]
fn successor_deletes_the_ike_sa_cleanly() {
    let (mut p, _, at) = taken_over(None, 3, Duration::ZERO);
    p.with(Side::A, |e, now| e.terminate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(5));
    for side in [Side::A, Side::B] {
        assert!(p.endpoint_ref(side).ike_sas().is_empty());
    }
    assert_eq!(live_spis(&p, Side::A, at.log), Default::default());
    assert_eq!(live_spis(&p, Side::B, 0), Default::default());
    let down = p
        .events(Side::B)
        .into_iter()
        .filter(|e| matches!(e, SaEvent::IkeSaDown { reason, .. } if reason == "deleted by peer"))
        .count();
    assert_eq!(down, 1);
    // The successor says so to the rest of the cluster, once.
    let removed = events_since(&p, Side::A, at.log)
        .filter(|e| matches!(e, SaEvent::IkeStateRemoved { .. }))
        .count();
    assert_eq!(removed, 1);
    no_renegotiation(&p);
}

// A answered B's liveness check, but the answer is lost and A dies:
//                                   <--  HDR(#0), SK {}
// HDR(#0, R), SK {}  --X   (A dies)
//                                   <--  HDR(#0), SK {}   (retransmission)
// HDR(#0, R), SK {}  -->   (A', the same octets from the replicated cache)
#[test]
fn retransmitted_request_gets_the_same_answer() {
    let mut p = ha_pair(Some(10), 4);
    established(&mut p);
    let lost = p.wire().len();
    p.drop_matching(1, |i| i.from == Side::A && i.response);
    p.run_until(|p| p.wire().len() > lost + 1, Duration::from_secs(11));
    let original = p.wire()[lost + 1].clone();
    assert_eq!(original.fate, Fate::Dropped);
    let state = last_state(&p, Side::A);
    assert_eq!(
        state.responses[0].datagrams,
        vec![original.transmit.bytes.clone()]
    );
    let at = take_over(&mut p, Side::A, state);
    p.run_for(Duration::from_secs(3));
    let again = wire_since(&p, at, |w| w.from == Side::A && w.info.response);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].transmit.bytes, original.transmit.bytes);
    let a = p.endpoint_ref(Side::A).counters();
    assert_eq!(a.get(Counter::RetransmitsAnswered), 1);
    assert_eq!(
        p.endpoint_ref(Side::B).counters().get(Counter::IkeSasDead),
        0
    );
    no_renegotiation(&p);
}

// A's own liveness check is in flight when A dies; A' sends the same
// octets again and completes it:
// HDR(#2), SK {}  -->          <--  HDR(#2, R), SK {}  --X   (A dies)
// HDR(#2), SK {}  -->   (A')   <--  HDR(#2, R), SK {}   (from B's cache)
#[test]
fn unanswered_request_is_resent_as_it_was() {
    let mut p = ha_pair_with(|a, _| a.dpd_delay = Some(Duration::from_secs(10)), 5);
    established(&mut p);
    let sent = p.wire().len();
    p.drop_matching(1, |i| i.from == Side::B && i.response);
    p.run_until(|p| p.wire().len() > sent + 1, Duration::from_secs(11));
    let request = p.wire()[sent].clone();
    let state = last_state(&p, Side::A);
    assert_eq!(state.in_flight.len(), 1);
    assert_eq!(state.in_flight[0].purpose, RequestPurpose::Informational);
    assert_eq!(
        state.message_ids.next_request_id,
        request.info.message_id + 1
    );
    let at = take_over(&mut p, Side::A, state);
    p.run_for(Duration::from_secs(2));
    let resent = wire_since(&p, at, |w| w.from == Side::A && !w.info.response);
    assert_eq!(resent[0].transmit.bytes, request.transmit.bytes);
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::RetransmitsAnswered),
        1
    );
    let a = p.endpoint_ref(Side::A);
    assert!(a.export_ike_sas(p.now)[0].in_flight.is_empty());
    no_renegotiation(&p);
}

// A's Child SA rekey is in flight when A dies: A' cannot use B's answer
// (Ni and the SPI's keys stayed on A), so it deletes what B created,
// creates a fresh Child SA and retires the old one:
// HDR(#2), SK {N(REKEY_SA), SA, Ni, TSi, TSr}  -->   (A; answer lost)
// HDR(#2), ... -->  (A', resent)  <--  HDR(#2, R), SK {SA, Nr, TSi, TSr}
// HDR(#3), SK {D(ESP, B's new SA)}  -->
// HDR(#4), SK {SA, Ni', TSi, TSr}  -->  ...  HDR(#5), SK {D(ESP, old)}  -->
#[test]
fn lost_child_rekey_is_undone_and_redone() {
    let mut p = ha_pair(None, 6);
    established(&mut p);
    let old = live_spis(&p, Side::A, 0).0.into_iter().next().unwrap();
    p.drop_matching(1, |i| i.from == Side::B && i.response);
    p.with(Side::A, |e, now| e.handle_child_expiry(now, old, false));
    p.run_for(Duration::from_millis(100));
    let state = last_state(&p, Side::A);
    assert!(matches!(
        state.in_flight[0].purpose,
        RequestPurpose::CreateChild { rekey_of: Some(o), .. } if o == old
    ));
    let at = take_over(&mut p, Side::A, state);
    p.run_for(Duration::from_secs(15));
    let a = p.endpoint_ref(Side::A).counters();
    assert_eq!(a.get(Counter::HaLostRequests), 1);
    assert_one_new_pair(&p, at, old);
    no_renegotiation(&p);
}

// A hybrid Child SA rekey (RFC 9370 §2.2.4) whose IKE_FOLLOWUP_KE answer
// is lost when A dies: the snapshot names the request (and round-trips
// through the codec); A' resends it, B answers from its cache (B created
// the SA), A' holds no keys for it, so it is undone and redone as for a
// lost CREATE_CHILD_SA:
// HDR(#2), SK {N(REKEY_SA), SA, Ni, KEi, TSi, TSr}  -->
//               <--  HDR(#2, R), SK {SA, Nr, KEr, TSi, TSr, N(ADDKE)(link1)}
// HDR(#3), SK {KEi(1), N(ADDKE)(link1)}  -->
//               <--  HDR(#3, R), SK {KEr(1)}  --X  (A dies)
// HDR(#3), ...  -->  (from A')  <--  the same octets
// HDR(#4), SK {D(ESP, B's new SA)}  -->  ...  a new hybrid Child SA
#[test]
fn lost_followup_ke_is_undone_and_redone() {
    const HYBRID_ESP: &str = "aes256gcm16-x25519-ke1_mlkem768";
    let hybrid = |c: &mut phalanx_ike::config::Connection| {
        c.children[0].proposals =
            phalanx_ike::config::ChildProposal::parse_list(HYBRID_ESP).unwrap();
    };
    let mut p = ha_pair_with(
        |a, b| {
            hybrid(a);
            hybrid(b);
        },
        16,
    );
    established(&mut p);
    let old = live_spis(&p, Side::A, 0).0.into_iter().next().unwrap();
    let lost = std::rc::Rc::new(std::cell::Cell::new(true));
    let rule = std::rc::Rc::clone(&lost);
    p.drop_matching(usize::MAX, move |i| {
        rule.get() && i.from == Side::B && i.response && i.exchange == ExchangeType::IKE_FOLLOWUP_KE
    });
    p.with(Side::A, |e, now| e.handle_child_expiry(now, old, false));
    p.run_for(Duration::from_millis(100));
    lost.set(false);
    let state = last_state(&p, Side::A);
    assert_eq!(state.in_flight.len(), 1);
    assert_eq!(state.in_flight[0].exchange, ExchangeType::IKE_FOLLOWUP_KE);
    assert!(matches!(
        state.in_flight[0].purpose,
        RequestPurpose::CreateChild { rekey_of: Some(o), .. } if o == old
    ));
    let decoded = phalanx_ike::ha::IkeSaState::decode(&state.encode()).unwrap();
    assert_eq!(decoded, state);
    let mut conn = connection(Side::A, DEFAULT_IKE);
    hybrid(&mut conn);
    let mut successor = fresh_with(&p, conn, 0x5eed);
    successor.import_ike_sa(p.now, decoded, true).unwrap();
    let at = replace(&mut p, Side::A, successor);
    p.run_for(Duration::from_secs(15));
    let a = p.endpoint_ref(Side::A).counters();
    assert_eq!(a.get(Counter::HaLostRequests), 1);
    assert_eq!(a.get(Counter::FollowupKeExchanges), 1);
    assert_one_new_pair(&p, at, old);
    let children = &p.endpoint_ref(Side::A).ike_sas()[0].children;
    assert!(children.iter().all(|c| c.rekeyed
        || c.key_exchanges
            == [
                phalanx_wire::ike::iana::KeId::CURVE25519,
                phalanx_wire::ike::iana::KeId::ML_KEM_768
            ]));
    no_renegotiation(&p);
}

// The responder side: B's IKE_AUTH answer is lost and B dies; B' answers
// A's retransmission from the replicated cache, then accepts a rekey:
// HDR(#1), SK {IDi, AUTH, SAi2, TSi, TSr}  -->
//               <--  HDR(#1, R), SK {IDr, AUTH, SAr2, TSi, TSr}  --X (B dies)
// HDR(#1), ...  -->  (retransmission)  <--  the same octets, from B'
#[test]
fn responder_takeover_answers_a_retransmitted_ike_auth() {
    let mut p = ha_pair(None, 7);
    p.with(Side::B, |e, now| e.set_ha_replication(now, true));
    p.drop_matching(1, |i| {
        i.from == Side::B && i.response && i.exchange == ExchangeType::IKE_AUTH
    });
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_millis(100));
    let state = last_state(&p, Side::B);
    assert!(!state.initiator);
    let answer = p
        .wire()
        .iter()
        .find(|w| w.from == Side::B && w.info.exchange == ExchangeType::IKE_AUTH)
        .unwrap()
        .clone();
    let at = take_over(&mut p, Side::B, state);
    assert!(p.run_until(|p| up(p, 1), Duration::from_secs(5)));
    let again = wire_since(&p, at, |w| w.from == Side::B);
    assert_eq!(again[0].transmit.bytes, answer.transmit.bytes);
    let spi = live_spis(&p, Side::A, 0).0.into_iter().next().unwrap();
    p.with(Side::A, |e, now| e.handle_child_expiry(now, spi, false));
    p.run_for(Duration::from_secs(5));
    let (a_in, a_out) = live_spis(&p, Side::A, 0);
    let (b_in, b_out) = live_spis(&p, Side::B, at.log);
    assert_eq!((a_in.len(), b_in.len()), (1, 1), "{:#?}", p.log());
    assert_eq!((a_out, a_in), (b_in, b_out));
    let ups = p
        .events(Side::A)
        .into_iter()
        .filter(|e| matches!(e, SaEvent::IkeSaUp { .. }));
    assert_eq!(ups.count(), 1);
}

// A third endpoint imports A's snapshots as they come (standby: nothing
// sent, the data plane mirrored), then takes over when A dies.
#[test]
fn standby_mirrors_the_child_sas_and_takes_over() {
    let mut p = ha_pair(Some(10), 8);
    established(&mut p);
    let mut standby = Standby::new(&p, 80);
    standby.follow(&p);
    let (first_in, first_out) = standby.installed();
    assert_eq!((first_in, first_out), live_spis(&p, Side::A, 0));
    let old = live_spis(&p, Side::A, 0).0.into_iter().next().unwrap();
    p.with(Side::A, |e, now| e.handle_child_expiry(now, old, false));
    p.run_for(Duration::from_secs(5));
    standby.follow(&p);
    assert_eq!(standby.installed(), live_spis(&p, Side::A, 0));
    assert_eq!(standby.endpoint.poll_transmit(), None);
    // A stale snapshot is refused.
    let first = first_state(&p, Side::A);
    let stale = standby.endpoint.import_ike_sa(p.now, first, false);
    assert!(matches!(stale, Err(HaError::Stale { .. })));
    // A dies; the standby takes over and answers B's next liveness check.
    let (spi_i, spi_r) = last_state(&p, Side::A).spis();
    let at = standby.promote(&mut p, spi_i, spi_r);
    p.run_for(Duration::from_secs(12));
    let answers = wire_since(&p, at, |w| w.from == Side::A && w.info.response);
    assert_eq!(answers.len(), 1);
    assert_eq!(
        p.endpoint_ref(Side::B).counters().get(Counter::IkeSasDead),
        0
    );
    no_renegotiation(&p);
}

// An IKE SA rekey (§1.3.2): the new IKE SA's snapshot goes out before the
// old one is removed, so a standby never holds Child SAs without an IKE SA.
#[test]
fn ike_sa_rekey_replicates_the_successor_first() {
    let mut p = ha_pair_with(|a, _| a.ike_lifetime = short_ike_lifetime(30), 9);
    established(&mut p);
    let mut standby = Standby::new(&p, 90);
    standby.follow(&p);
    let before = standby.installed();
    let seen = standby.events.len();
    p.run_for(Duration::from_secs(40));
    let rekeyed = p
        .events(Side::A)
        .into_iter()
        .any(|e| matches!(e, SaEvent::IkeSaRekeyed { .. }));
    assert!(rekeyed);
    let order: Vec<_> = events_since(&p, Side::A, 0)
        .filter_map(|e| match e {
            SaEvent::IkeStateChanged { state } => Some((true, state.spis())),
            SaEvent::IkeStateRemoved {
                ike_spi_i,
                ike_spi_r,
                ..
            } => Some((false, (*ike_spi_i, *ike_spi_r))),
            _ => None,
        })
        .collect();
    let removed = order.iter().position(|(changed, _)| !changed).unwrap();
    let new_spis = last_state(&p, Side::A).spis();
    let first_new = order.iter().position(|(_, s)| *s == new_spis).unwrap();
    assert!(first_new < removed, "{order:?}");
    standby.follow(&p);
    assert_eq!(standby.endpoint.imported_ike_sas().len(), 1);
    // The Child SAs moved between IKE SAs: the data plane saw nothing.
    assert_eq!(standby.installed(), before);
    assert!(
        standby.events[seen..].is_empty(),
        "{:#?}",
        &standby.events[seen..]
    );
}

// A snapshot older than what the peer has seen (taken before a Child SA
// rekey A completed) cannot be repaired without RFC 6311: B drops what A'
// sends with an old Message ID, and A' gives the IKE SA up cleanly (no
// wrong SA installed at B, `IkeSaDown` at A').
#[test]
fn stale_snapshot_fails_cleanly_after_takeover() {
    let mut p = ha_pair(None, 10);
    established(&mut p);
    let stale = last_state(&p, Side::A);
    let old = stale.children[0].spi_in;
    p.with(Side::A, |e, now| e.handle_child_expiry(now, old, false));
    p.run_for(Duration::from_secs(5));
    let b_installs = installs(&p, Side::B);
    let at = take_over(&mut p, Side::A, stale);
    p.with(Side::A, |e, now| e.handle_child_expiry(now, old, false));
    p.run_for(Duration::from_secs(60));
    let down = events_since(&p, Side::A, at.log).any(
        |e| matches!(e, SaEvent::IkeSaDown { reason, .. } if reason.contains("not answering")),
    );
    assert!(down, "{:#?}", p.log());
    assert!(p.endpoint_ref(Side::A).ike_sas().is_empty());
    assert_eq!(live_spis(&p, Side::A, at.log), Default::default());
    assert_eq!(installs(&p, Side::B), b_installs);
    assert!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::InvalidMessageId)
            > 0
    );
    no_renegotiation(&p);
}

#[test]
fn replication_is_off_by_default() {
    let mut p = pair(DEFAULT_IKE, 11);
    established(&mut p);
    let any = p.log().iter().any(|e| {
        matches!(
            e.event,
            SaEvent::IkeStateChanged { .. } | SaEvent::IkeStateRemoved { .. }
        )
    });
    assert!(!any);
    // Turning it on emits every established IKE SA at once.
    p.with(Side::A, |e, now| e.set_ha_replication(now, true));
    let state = last_state(&p, Side::A);
    assert_eq!(state.generation, 1);
    assert_eq!(state.children.len(), 1);
    // Off and on again: everything again, generations going on (a
    // standby holding generation 1 takes it).
    p.with(Side::A, |e, now| {
        e.set_ha_replication(now, false);
        e.set_ha_replication(now, true);
    });
    assert_eq!(last_state(&p, Side::A).generation, 2);
}

#[test]
fn export_is_the_last_snapshot_and_the_owner_refuses_its_own() {
    let mut p = ha_pair(None, 12);
    established(&mut p);
    let state = last_state(&p, Side::A);
    let (spi_i, spi_r) = state.spis();
    let now = p.now;
    let exported = p
        .endpoint_ref(Side::A)
        .export_ike_sa(now, spi_i, spi_r)
        .unwrap();
    assert_eq!(exported, state);
    let own = p.endpoint(Side::A).import_ike_sa(now, state.clone(), false);
    assert_eq!(own, Err(HaError::ActiveHere));
    let text = format!("{state:?}");
    let key = &state.keys.sk_ei;
    assert!(!text.contains(&format!("{:?}", key.as_slice())));
    assert!(text.contains("IkeKeys"));
}

// A's IKE SA rekey is in flight when A dies. The new IKE SA B creates from
// A's (resent) request holds the Child SAs on B's side, and A' has no
// keys for it: A' deletes the IKE SA, and the connection has to come up
// again (the one takeover that renegotiates; see `phalanx_ike::ha`).
// HDR(#2), SK {SA, Ni, KEi}  -->  (A; answer lost)
// HDR(#2), ...  -->  (A')       <--  HDR(#2, R), SK {SA, Nr, KEr}
// HDR(#3), SK {D(IKE)}  -->     <--  HDR(#3, R), SK {}
#[test]
fn lost_ike_sa_rekey_takes_the_ike_sa_down() {
    let mut p = ha_pair_with(|a, _| a.ike_lifetime = short_ike_lifetime(30), 13);
    established(&mut p);
    p.drop_matching(1, |i| {
        i.from == Side::B && i.response && i.exchange == ExchangeType::CREATE_CHILD_SA
    });
    let rekey_sent = |p: &phalanx_testkit::ike_pair::IkePair| {
        p.wire()
            .iter()
            .any(|w| w.from == Side::B && w.info.exchange == ExchangeType::CREATE_CHILD_SA)
    };
    assert!(p.run_until(rekey_sent, Duration::from_secs(31)));
    let state = last_state(&p, Side::A);
    assert!(matches!(
        state.in_flight[0].purpose,
        RequestPurpose::RekeyIke { .. }
    ));
    let at = take_over(&mut p, Side::A, state);
    p.run_for(Duration::from_secs(5));
    assert_eq!(
        p.endpoint_ref(Side::A)
            .counters()
            .get(Counter::HaLostRequests),
        1
    );
    assert!(p.endpoint_ref(Side::A).ike_sas().is_empty());
    assert_eq!(live_spis(&p, Side::A, at.log), Default::default());
    let down = events_since(&p, Side::A, at.log)
        .filter(|e| matches!(e, SaEvent::IkeSaDown { .. }))
        .count();
    assert_eq!(down, 1);
}

// A is behind a NAT that rebinds (RFC 7296 §2.23): B follows A's new
// port, and B's standby moves its outbound SAs along (PeerMoved), then
// takes over and answers from the new address.
#[test]
fn standby_follows_a_nat_rebinding() {
    let mut p = ha_pair_with(
        |a, b| {
            a.dpd_delay = Some(Duration::from_secs(10));
            b.remote_addr = None;
        },
        14,
    );
    p.net.nat_a = Some(ip("203.0.113.9"));
    p.with(Side::B, |e, now| e.set_ha_replication(now, true));
    established(&mut p);
    let mut standby = Standby::of(&p, Side::B, 140);
    standby.follow(&p);
    let before = last_state(&p, Side::B);
    assert!(before.nat.encap);
    p.net.nat_port_offset = 31_000;
    p.run_for(Duration::from_secs(11));
    standby.follow(&p);
    let after = last_state(&p, Side::B);
    assert_eq!(after.remote.port(), 4500 + 31_000);
    let moved: Vec<_> = standby
        .events
        .iter()
        .filter_map(|e| match e {
            SaEvent::PeerMoved {
                remote,
                encap,
                outbound_spis,
                ..
            } => Some((*remote, *encap, outbound_spis.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(moved.len(), 1, "{:#?}", standby.events);
    assert_eq!(moved[0].0, after.remote);
    assert_eq!(moved[0].1.map(|e| e.remote_port), Some(after.remote.port()));
    assert_eq!(moved[0].2, vec![after.children[0].spi_out]);
    // B dies; its standby answers A's next liveness check at the new port.
    let (spi_i, spi_r) = after.spis();
    let at = standby.promote(&mut p, spi_i, spi_r);
    p.run_for(Duration::from_secs(11));
    let answers = wire_since(&p, at, |w| w.from == Side::B && w.info.response);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].transmit.remote, after.remote);
    assert_eq!(
        p.endpoint_ref(Side::A).counters().get(Counter::IkeSasDead),
        0
    );
}

// HDR, SK {D(IKE)} from A: the standby forgets the IKE SA and its data
// plane lets the Child SAs go, outbound first.
#[test]
fn standby_removes_what_a_deleted_ike_sa_held() {
    let mut p = ha_pair(None, 15);
    established(&mut p);
    let mut standby = Standby::new(&p, 150);
    standby.follow(&p);
    assert_eq!(standby.installed(), live_spis(&p, Side::A, 0));
    let seen = standby.events.len();
    p.with(Side::A, |e, now| e.terminate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(2));
    standby.follow(&p);
    assert!(standby.endpoint.imported_ike_sas().is_empty());
    assert_eq!(standby.installed(), Default::default());
    let kinds: Vec<_> = standby.events[seen..].iter().map(kind).collect();
    assert_eq!(kinds, ["RemoveOutbound", "RemoveInbound"]);
    let (spi_i, spi_r) = last_state(&p, Side::A).spis();
    let gone = standby.endpoint.take_over_ike_sa(p.now, spi_i, spi_r);
    assert_eq!(gone, Err(HaError::NotImported));
}

#[test]
fn unusable_snapshots_are_refused() {
    let mut p = ha_pair(None, 16);
    established(&mut p);
    let state = last_state(&p, Side::A);
    let mut e = fresh(&p, Side::A, 160);
    let mut other = state.clone();
    other.connection = "elsewhere".to_owned();
    let refused = e.import_ike_sa(p.now, other, true);
    assert_eq!(
        refused,
        Err(HaError::UnknownConnection("elsewhere".to_owned()))
    );
    let mut short = state.clone();
    short.keys.sk_d.pop();
    assert!(matches!(
        e.import_ike_sa(p.now, short, false),
        Err(HaError::Unusable(_))
    ));
    let mut child = state.clone();
    child.children[0].name = "other".to_owned();
    let refused = e.import_ike_sa(p.now, child, false);
    assert_eq!(refused, Err(HaError::UnknownChild("other".to_owned())));
    assert_eq!(e.counters().get(Counter::HaImportsRefused), 3);
    assert_eq!(e.poll_event().map(|e| kind(&e)), None);
    assert_eq!(e.poll_transmit(), None);
    // The same snapshot twice: the second is not newer.
    e.import_ike_sa(p.now, state.clone(), false).unwrap();
    let again = e.import_ike_sa(p.now, state.clone(), false);
    assert!(matches!(again, Err(HaError::Stale { .. })));
}
