//! Helpers of the HA tests: pairs that replicate, killing a side by
//! replacing its endpoint with a successor, a standby endpoint fed the
//! replication events, and views of what happened since a takeover.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::time::Duration;

use phalanx_ike::config::{Connection, SaLifetimeConfig};
use phalanx_ike::ha::IkeSaState;
use phalanx_ike::{Endpoint, SaEvent};
use phalanx_testkit::ike_pair::{IkePair, Side, WireRecord};
use phalanx_wire::ike::iana::ExchangeType;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::common::*;

/// Where the record stood when a side was taken over.
#[derive(Clone, Copy, Debug)]
pub(crate) struct At {
    /// Index of the first log entry after the takeover.
    pub(crate) log: usize,
    /// Index of the first datagram after the takeover.
    pub(crate) wire: usize,
}

/// A and B; A replicates. B checks liveness every `b_dpd` seconds.
pub(crate) fn ha_pair(b_dpd: Option<u64>, seed: u64) -> IkePair {
    ha_pair_with(|_, b| b.dpd_delay = b_dpd.map(Duration::from_secs), seed)
}

/// A and B with changed connections; A replicates.
pub(crate) fn ha_pair_with(
    change: impl FnOnce(&mut Connection, &mut Connection),
    seed: u64,
) -> IkePair {
    let mut a = connection(Side::A, DEFAULT_IKE);
    let mut b = connection(Side::B, DEFAULT_IKE);
    change(&mut a, &mut b);
    let mut p = pair_of(a, b, seed);
    p.with(Side::A, |e, now| e.set_ha_replication(now, true));
    p
}

/// An IKE SA that rekeys after `secs` seconds, exactly.
pub(crate) fn short_ike_lifetime(secs: u64) -> SaLifetimeConfig {
    SaLifetimeConfig {
        rekey_time: Duration::from_secs(secs),
        jitter: Duration::ZERO,
        hard_time: Duration::from_secs(secs * 3),
        rekey_bytes: None,
        rekey_packets: None,
    }
}

/// A fresh endpoint of `side`'s connection, replicating, at the pair's time.
pub(crate) fn fresh(p: &IkePair, side: Side, seed: u64) -> Endpoint {
    fresh_with(p, connection(side, DEFAULT_IKE), seed)
}

/// A fresh endpoint of `conn`, replicating, at the pair's time.
pub(crate) fn fresh_with(p: &IkePair, conn: Connection, seed: u64) -> Endpoint {
    let rng = Box::new(ChaCha20Rng::seed_from_u64(seed));
    let mut e = Endpoint::new(config(conn), phalanx_crypto::default_provider(), rng, p.now);
    e.set_ha_replication(p.now, true);
    e
}

fn index(side: Side) -> usize {
    match side {
        Side::A => 0,
        Side::B => 1,
    }
}

/// `side` dies; a fresh endpoint that imported `state` runs in its place.
pub(crate) fn take_over(p: &mut IkePair, side: Side, state: IkeSaState) -> At {
    let mut successor = fresh(p, side, 0x5eed + p.wire().len() as u64);
    successor.import_ike_sa(p.now, state, true).unwrap();
    replace(p, side, successor)
}

/// Puts `endpoint` in `side`'s place and sends what it queued.
pub(crate) fn replace(p: &mut IkePair, side: Side, endpoint: Endpoint) -> At {
    let at = At {
        log: p.log().len(),
        wire: p.wire().len(),
    };
    p.nodes[index(side)].endpoint = endpoint;
    p.flush();
    at
}

/// A replicating pair, established, run for `run`, then A taken over
/// from its last snapshot.
pub(crate) fn taken_over(
    b_dpd: Option<u64>,
    seed: u64,
    run: Duration,
) -> (IkePair, IkeSaState, At) {
    let mut p = ha_pair(b_dpd, seed);
    established(&mut p);
    p.run_for(run);
    let state = last_state(&p, Side::A);
    let at = take_over(&mut p, Side::A, state.clone());
    (p, state, at)
}

/// The snapshots a side emitted, oldest first.
pub(crate) fn states(p: &IkePair, side: Side) -> Vec<IkeSaState> {
    p.events(side)
        .into_iter()
        .filter_map(|e| match e {
            SaEvent::IkeStateChanged { state } => Some((**state).clone()),
            _ => None,
        })
        .collect()
}

/// The last snapshot a side emitted.
pub(crate) fn last_state(p: &IkePair, side: Side) -> IkeSaState {
    states(p, side).pop().expect("no snapshot emitted")
}

/// The first snapshot a side emitted.
pub(crate) fn first_state(p: &IkePair, side: Side) -> IkeSaState {
    states(p, side).remove(0)
}

/// The datagrams since `at` that match.
pub(crate) fn wire_since(
    p: &IkePair,
    at: At,
    pred: impl Fn(&WireRecord) -> bool,
) -> Vec<WireRecord> {
    p.wire()[at.wire..]
        .iter()
        .filter(|w| pred(w))
        .cloned()
        .collect()
}

/// A side's events from log index `from` on.
pub(crate) fn events_since(p: &IkePair, side: Side, from: usize) -> impl Iterator<Item = &SaEvent> {
    p.log()[from..]
        .iter()
        .filter(move |e| e.side == side)
        .map(|e| &e.event)
}

/// The data-plane SAs a run of events leaves installed: (inbound, outbound).
pub(crate) fn installed_by<'a>(
    events: impl Iterator<Item = &'a SaEvent>,
) -> (BTreeSet<u32>, BTreeSet<u32>) {
    let (mut inbound, mut outbound) = (BTreeSet::new(), BTreeSet::new());
    for e in events {
        match e {
            SaEvent::InstallInbound(i) => {
                inbound.insert(i.spi);
            }
            SaEvent::InstallOutbound(i) => {
                outbound.insert(i.spi);
            }
            SaEvent::RemoveInbound { spi, .. } => {
                inbound.remove(spi);
            }
            SaEvent::RemoveOutbound { spi, .. } => {
                outbound.remove(spi);
            }
            _ => {}
        }
    }
    (inbound, outbound)
}

/// What a side's data plane holds, counting its events from `from` on
/// (a successor's start at its takeover).
pub(crate) fn live_spis(p: &IkePair, side: Side, from: usize) -> (BTreeSet<u32>, BTreeSet<u32>) {
    installed_by(events_since(p, side, from))
}

/// Every install of a side: (inbound, SPI).
pub(crate) fn installs(p: &IkePair, side: Side) -> Vec<(bool, u32)> {
    events_since(p, side, 0)
        .filter_map(|e| match e {
            SaEvent::InstallInbound(i) => Some((true, i.spi)),
            SaEvent::InstallOutbound(i) => Some((false, i.spi)),
            _ => None,
        })
        .collect()
}

/// A sends on `spi` with the key B receives it with.
pub(crate) fn assert_same_keys(p: &IkePair, spi: u32) {
    let key = |side: Side, inbound: bool| {
        events_since(p, side, 0)
            .filter_map(|e| match e {
                SaEvent::InstallInbound(i) if inbound && i.spi == spi => Some(i.encr_key.to_vec()),
                SaEvent::InstallOutbound(i) if !inbound && i.spi == spi => {
                    Some(i.encr_key.to_vec())
                }
                _ => None,
            })
            .last()
            .unwrap()
    };
    assert_eq!(key(Side::A, false), key(Side::B, true));
}

/// B set up one IKE SA and never another: the takeover renegotiated
/// nothing.
pub(crate) fn no_renegotiation(p: &IkePair) {
    let ups = p
        .events(Side::B)
        .into_iter()
        .filter(|e| matches!(e, SaEvent::IkeSaUp { .. }))
        .count();
    assert_eq!(ups, 1);
    let b = p.endpoint_ref(Side::B).counters();
    assert_eq!(b.exchange(ExchangeType::IKE_SA_INIT).requests_received, 1);
}

/// A third endpoint holding one side's IKE SAs in standby.
pub(crate) struct Standby {
    /// The endpoint.
    pub(crate) endpoint: Endpoint,
    /// Everything it emitted so far.
    pub(crate) events: Vec<SaEvent>,
    /// The side it stands by for.
    side: Side,
    /// Log entries already applied.
    seen: usize,
}

impl Standby {
    /// A standby for A.
    pub(crate) fn new(p: &IkePair, seed: u64) -> Standby {
        Standby::of(p, Side::A, seed)
    }

    /// A standby for `side`.
    pub(crate) fn of(p: &IkePair, side: Side, seed: u64) -> Standby {
        Standby {
            endpoint: fresh(p, side, seed),
            events: Vec::new(),
            side,
            seen: 0,
        }
    }

    /// A standby for `side` made of `endpoint` (a configuration of its own).
    pub(crate) fn with(endpoint: Endpoint, side: Side) -> Standby {
        Standby {
            endpoint,
            events: Vec::new(),
            side,
            seen: 0,
        }
    }

    /// Applies the side's replication events since the last call, in
    /// order, as the cluster delivers them.
    pub(crate) fn follow(&mut self, p: &IkePair) {
        for entry in &p.log()[self.seen..] {
            if entry.side != self.side {
                continue;
            }
            match &entry.event {
                SaEvent::IkeStateChanged { state } => {
                    let state = (**state).clone();
                    self.endpoint.import_ike_sa(entry.at, state, false).unwrap();
                }
                SaEvent::IkeStateRemoved {
                    ike_spi_i,
                    ike_spi_r,
                    ..
                } => {
                    assert!(self.endpoint.forget_ike_sa(*ike_spi_i, *ike_spi_r));
                }
                _ => {}
            }
        }
        self.seen = p.log().len();
        while let Some(e) = self.endpoint.poll_event() {
            self.events.push(e);
        }
    }

    /// What its data plane holds.
    pub(crate) fn installed(&self) -> (BTreeSet<u32>, BTreeSet<u32>) {
        installed_by(self.events.iter())
    }

    /// The side dies; the standby takes the IKE SA over in its place.
    pub(crate) fn promote(&mut self, p: &mut IkePair, spi_i: [u8; 8], spi_r: [u8; 8]) -> At {
        let mut endpoint = core::mem::replace(&mut self.endpoint, fresh(p, self.side, 1));
        endpoint.take_over_ike_sa(p.now, spi_i, spi_r).unwrap();
        replace(p, self.side, endpoint)
    }
}

/// Since the takeover at `at`: A holds one Child SA pair, B the mirrored
/// one, the SA of inbound SPI `old` is gone, and both sides' keys agree.
pub(crate) fn assert_one_new_pair(p: &IkePair, at: At, old: u32) {
    let (a_in, a_out) = live_spis(p, Side::A, at.log);
    let (b_in, b_out) = live_spis(p, Side::B, 0);
    assert_eq!((a_in.len(), a_out.len()), (1, 1), "{:#?}", p.log());
    assert_eq!(
        (a_out.clone(), a_in.clone()),
        (b_in, b_out),
        "{:#?}",
        p.log()
    );
    assert!(!a_in.contains(&old));
    assert_same_keys(p, *a_out.iter().next().unwrap());
}
