//! Every outbound drop reason, each asserting the exact counter deltas.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use phalanx_crypto::{PacketBuf, Suite};
use phalanx_esp::{
    finish_outbound, prepare_dummy, prepare_outbound, Counters, DropReason, IvSource,
    OutboundContext, Verdict,
};
use phalanx_sa::{LifetimeLimits, OutboundSa};
use phalanx_testkit::assert_delta;
use phalanx_wire::{EncrId, IntegId, Ipv4Packet};

fn tunnel44() -> ModeCase {
    ModeCase::Tunnel {
        inner: Ip::V4,
        outer: Ip::V4,
    }
}

/// Sends one packet and asserts that exactly `name` moved by one.
#[track_caller]
fn expect(
    sa: &OutboundSa,
    buf: PacketBuf,
    ctx: &mut OutboundContext<'_>,
    counters: &mut Counters,
    name: &str,
) {
    let set = counter_set();
    let before = set.snapshot(counters);
    let (buf, verdict) = match prepare_outbound(sa, buf, ctx) {
        Ok(op) => {
            let mut engine = phalanx_crypto::InlineEngine::new();
            finish_outbound(run_engine(&mut engine, vec![op]).remove(0))
        }
        Err((buf, reason)) => (buf, Verdict::Drop(reason)),
    };
    counters.record(verdict, buf.len());
    assert_delta!(set, before, counters, name => 1);
}

#[test]
fn hard_lifetime_and_soft_event_once() {
    let mut spec = PairSpec::esp(gcm128(), tunnel44());
    spec.lifetime = LifetimeLimits {
        soft_packets: Some(2),
        hard_packets: Some(3),
        ..Default::default()
    };
    let sa = spec.outbound(Instant::now());
    let mut ctx = OutboundContext::new(Instant::now(), IvSource::Sequence);
    let mut counters = Counters::new();
    for _ in 0..3 {
        expect(
            &sa,
            outbound_buf(&udp4(10, 0, false)),
            &mut ctx,
            &mut counters,
            "forwarded",
        );
    }
    assert_eq!(ctx.soft_expired, vec![spec.spi]);
    expect(
        &sa,
        outbound_buf(&udp4(10, 0, false)),
        &mut ctx,
        &mut counters,
        "sa_hard_expired",
    );
    assert_eq!(ctx.soft_expired, vec![spec.spi], "reported once");

    spec.lifetime = LifetimeLimits {
        hard_time: Some(Duration::from_secs(5)),
        ..Default::default()
    };
    let created = Instant::now();
    let sa = spec.outbound(created);
    let mut late = OutboundContext::new(created + Duration::from_secs(6), IvSource::Sequence);
    expect(
        &sa,
        outbound_buf(&udp4(10, 0, false)),
        &mut late,
        &mut counters,
        "sa_hard_expired",
    );
}

#[test]
fn sequence_numbers_never_cycle() {
    for (esn, last) in [(false, u64::from(u32::MAX)), (true, u64::MAX)] {
        let spec = PairSpec {
            esn,
            ..PairSpec::esp(gcm128(), tunnel44())
        };
        let sa = spec.outbound(Instant::now());
        sa.seq.advance_to(last);
        let mut ctx = OutboundContext::new(Instant::now(), IvSource::Sequence);
        let mut counters = Counters::new();
        expect(
            &sa,
            outbound_buf(&udp4(10, 0, false)),
            &mut ctx,
            &mut counters,
            "forwarded",
        );
        for _ in 0..2 {
            let packet = outbound_buf(&udp4(10, 0, false));
            expect(&sa, packet, &mut ctx, &mut counters, "sequence_exhausted");
        }
    }
}

#[test]
fn no_room_and_too_big() {
    let sa = PairSpec::esp(gcm128(), tunnel44()).outbound(Instant::now());
    let mut ctx = OutboundContext::new(Instant::now(), IvSource::Sequence);
    let mut counters = Counters::new();
    let packet = udp4(100, 0, false);
    let no_head = PacketBuf::from_slice(&packet, 10, 512);
    expect(&sa, no_head, &mut ctx, &mut counters, "no_room");
    let no_tail = PacketBuf::from_slice(&packet, 128, 10);
    expect(&sa, no_tail, &mut ctx, &mut counters, "no_room");
    let huge = udp4(65_535 - 28, 0, false);
    expect(&sa, outbound_buf(&huge), &mut ctx, &mut counters, "too_big");
    // Nothing above consumed a sequence number.
    assert_eq!(sa.seq.peek_next(), Some(1));
}

#[test]
fn iv_source_must_fit_the_cipher() {
    let cbc = Suite::esp(EncrId::AES_CBC, 128, IntegId::HMAC_SHA2_256_128);
    let sa = PairSpec::esp(cbc, tunnel44()).outbound(Instant::now());
    let mut counters = Counters::new();
    let mut sequence = OutboundContext::new(Instant::now(), IvSource::Sequence);
    let packet = || outbound_buf(&udp4(10, 0, false));
    expect(&sa, packet(), &mut sequence, &mut counters, "iv_refused");
    let mut short = OutboundContext::new(Instant::now(), IvSource::Fixed(&[1; 8]));
    expect(&sa, packet(), &mut short, &mut counters, "iv_refused");
    let mut rng = counting_rng();
    let mut random = OutboundContext::new(Instant::now(), IvSource::Random(&mut rng));
    expect(&sa, packet(), &mut random, &mut counters, "forwarded");
}

#[test]
fn malformed_inner_packets_and_transport_fragments() {
    let mut counters = Counters::new();
    let mut ctx = OutboundContext::new(Instant::now(), IvSource::Sequence);
    for mode in [tunnel44(), ModeCase::Transport(Ip::V4)] {
        let sa = PairSpec::esp(gcm128(), mode).outbound(Instant::now());
        let mut short = udp4(10, 0, false);
        short.truncate(30);
        expect(
            &sa,
            outbound_buf(&short),
            &mut ctx,
            &mut counters,
            "inner_malformed",
        );
        expect(
            &sa,
            outbound_buf(&[0x70; 60]),
            &mut ctx,
            &mut counters,
            "inner_malformed",
        );
        expect(
            &sa,
            outbound_buf(&[]),
            &mut ctx,
            &mut counters,
            "inner_malformed",
        );
    }
    // RFC 4303 §3.1.1: transport mode takes whole datagrams only; tunnel
    // mode carries fragments like any packet.
    let mut fragment = udp4(10, 0, false);
    let mut ip = Ipv4Packet::new_unchecked(&mut fragment[..]);
    ip.set_more_frags(true);
    ip.fill_checksum();
    let transport = PairSpec::esp(gcm128(), ModeCase::Transport(Ip::V4)).outbound(Instant::now());
    expect(
        &transport,
        outbound_buf(&fragment),
        &mut ctx,
        &mut counters,
        "fragment",
    );
    let tunnel = PairSpec::esp(gcm128(), tunnel44()).outbound(Instant::now());
    expect(
        &tunnel,
        outbound_buf(&fragment),
        &mut ctx,
        &mut counters,
        "forwarded",
    );
}

#[test]
fn dummy_packets_need_tunnel_mode_esp() {
    let mut ctx = OutboundContext::new(Instant::now(), IvSource::Sequence);
    let transport = PairSpec::esp(gcm128(), ModeCase::Transport(Ip::V4)).outbound(Instant::now());
    let refused = prepare_dummy(&transport, outbound_buf(&[]), 10, &mut ctx).err();
    assert_eq!(refused.map(|(_, r)| r), Some(DropReason::Unsupported));
    let ah = PairSpec::esp(Suite::ah(IntegId::HMAC_SHA2_256_128), tunnel44());
    let refused = prepare_dummy(
        &ah.outbound(Instant::now()),
        outbound_buf(&[]),
        10,
        &mut ctx,
    );
    assert_eq!(refused.err().map(|(_, r)| r), Some(DropReason::Unsupported));
}

#[test]
fn an_op_that_did_not_complete_is_not_sent() {
    let sa = PairSpec::esp(gcm128(), tunnel44()).outbound(Instant::now());
    let mut ctx = OutboundContext::new(Instant::now(), IvSource::Sequence);
    let op = prepare_outbound(&sa, outbound_buf(&udp4(10, 0, false)), &mut ctx).unwrap();
    // Never given to an engine: still Pending.
    let (_, verdict) = finish_outbound(op);
    assert_eq!(verdict, Verdict::Drop(DropReason::InvalidLayout));
    let mut foreign = prepare_outbound(&sa, outbound_buf(&udp4(10, 0, false)), &mut ctx).unwrap();
    foreign.execute();
    foreign.user = 0;
    let (_, verdict) = finish_outbound(foreign);
    assert_eq!(verdict, Verdict::Drop(DropReason::InvalidLayout));
}

#[test]
fn node_partitioned_iv_refuses_sequence_numbers_past_48_bits() {
    let spec = PairSpec {
        esn: true,
        ..PairSpec::esp(gcm128(), tunnel44())
    };
    let sa = spec.outbound(Instant::now());
    sa.seq.advance_to((1 << 48) - 1);
    let mut ctx = OutboundContext::new(Instant::now(), IvSource::NodePartitioned(3));
    let mut counters = Counters::new();
    let packet = || outbound_buf(&udp4(10, 0, false));
    expect(&sa, packet(), &mut ctx, &mut counters, "forwarded");
    expect(&sa, packet(), &mut ctx, &mut counters, "iv_refused");
}
