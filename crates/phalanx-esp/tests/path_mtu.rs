//! The path MTU of an outbound SA (RFC 4301 §8.2.1): a packet whose
//! encapsulation does not fit is refused as `path_mtu_exceeded`, counted
//! on the worker and on the SA, before it takes a sequence number; and
//! `max_inner_len` is exactly the largest inner packet that fits, for
//! every suite, mode, family and encapsulation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use phalanx_crypto::Suite;
use phalanx_esp::{
    finish_outbound, max_inner_len, prepare_outbound, DropReason, IvSource, OutboundContext,
    Verdict,
};
use phalanx_sa::limits::PMTU_EXPIRES;
use phalanx_sa::OutboundSa;
use phalanx_wire::IntegId;

/// The learned path MTU of every case.
const MTU: u32 = 1280;

/// An inner packet of exactly `len` bytes of family `ip`.
fn inner_of(ip: Ip, len: usize) -> Vec<u8> {
    let headers = match ip {
        Ip::V4 => 28,
        Ip::V6 => 48,
    };
    udp_of(ip, len - headers)
}

/// Prepares one packet at `now`: its sealed length, or the drop reason.
fn try_seal(sa: &OutboundSa, packet: &[u8], now: Instant) -> Result<usize, DropReason> {
    let mut rng = counting_rng();
    let iv = if sa.transform.suite().iv_len() == 16 {
        IvSource::Random(&mut rng)
    } else {
        IvSource::Sequence
    };
    let mut ctx = OutboundContext::new(now, iv);
    match prepare_outbound(sa, outbound_buf(packet), &mut ctx) {
        Ok(op) => {
            let mut engine = phalanx_crypto::InlineEngine::new();
            let (buf, verdict) = finish_outbound(run_engine(&mut engine, vec![op]).remove(0));
            assert_eq!(verdict, Verdict::Forward);
            Ok(buf.len())
        }
        Err((_, reason)) => Err(reason),
    }
}

fn every_spec() -> Vec<PairSpec> {
    let mut suites = esp_suites();
    suites.push(Suite::ah(IntegId::HMAC_SHA2_256_128));
    suites.push(Suite::ah(IntegId::HMAC_SHA2_512_256));
    let mut specs = Vec::new();
    for suite in suites {
        for mode in mode_cases() {
            for encap in [false, true] {
                if encap && suite.ah {
                    continue;
                }
                let mut spec = PairSpec::esp(suite, mode);
                spec.encap = encap;
                specs.push(spec);
            }
        }
    }
    specs
}

#[test]
fn max_inner_len_is_the_largest_packet_that_fits() {
    for spec in every_spec() {
        let now = Instant::now();
        let sa = spec.outbound(now);
        sa.path_mtu.learn(MTU, false, now);
        let largest = max_inner_len(&sa, MTU as usize);
        let ip = spec.mode.inner();
        let sealed = try_seal(&sa, &inner_of(ip, largest), now)
            .unwrap_or_else(|r| panic!("{spec:?}: {largest} refused as {r}"));
        assert!(sealed <= MTU as usize, "{spec:?}: {largest} -> {sealed}");
        // Tunnel mode is exact: one more byte no longer fits. Transport
        // mode's bound allows for the worst padding, within two blocks.
        let over = match spec.mode {
            ModeCase::Tunnel { .. } => largest + 1,
            ModeCase::Transport(_) => largest + 32,
        };
        assert_eq!(
            try_seal(&sa, &inner_of(ip, over), now),
            Err(DropReason::PathMtuExceeded),
            "{spec:?}: {over}"
        );
    }
}

#[test]
fn a_refused_packet_takes_no_sequence_number_and_is_left_to_the_caller_to_count() {
    let now = Instant::now();
    let sa = PairSpec::esp(
        gcm128(),
        ModeCase::Tunnel {
            inner: Ip::V4,
            outer: Ip::V4,
        },
    )
    .outbound(now);
    sa.path_mtu.learn(MTU, false, now);
    let big = inner_of(Ip::V4, 1400);
    assert_eq!(try_seal(&sa, &big, now), Err(DropReason::PathMtuExceeded));
    assert_eq!(try_seal(&sa, &big, now), Err(DropReason::PathMtuExceeded));
    // The caller may still send it fragmented; it counts the drop.
    assert_eq!(sa.drops.total(), 0);
    assert_eq!(sa.seq.peek_next(), Some(1));
    assert_eq!(sa.stats.snapshot().packets, 0);
}

#[test]
fn without_a_learned_mtu_or_after_it_expired_the_packet_goes() {
    let now = Instant::now();
    let sa = PairSpec::esp(
        gcm128(),
        ModeCase::Tunnel {
            inner: Ip::V4,
            outer: Ip::V4,
        },
    )
    .outbound(now);
    let big = inner_of(Ip::V4, 1400);
    assert!(try_seal(&sa, &big, now).is_ok());
    sa.path_mtu.learn(MTU, false, now);
    assert_eq!(
        try_seal(&sa, &big, now + Duration::from_secs(1)),
        Err(DropReason::PathMtuExceeded)
    );
    assert!(try_seal(&sa, &big, now + PMTU_EXPIRES).is_ok());
}

#[test]
fn a_packet_sent_fragmented_skips_the_check() {
    let now = Instant::now();
    let sa = PairSpec::esp(
        gcm128(),
        ModeCase::Tunnel {
            inner: Ip::V6,
            outer: Ip::V4,
        },
    )
    .outbound(now);
    sa.path_mtu.learn(MTU, false, now);
    let mut ctx = OutboundContext::new(now, IvSource::Sequence);
    ctx.check_path_mtu = false;
    let op = prepare_outbound(&sa, outbound_buf(&inner_of(Ip::V6, 1280)), &mut ctx).unwrap();
    assert!(op.buf.len() > MTU as usize);
}
