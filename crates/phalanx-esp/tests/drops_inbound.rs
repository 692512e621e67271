//! Every inbound drop reason, each produced by a test that asserts the
//! exact counter deltas (every other counter must stay put).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use phalanx_crypto::Suite;
use phalanx_esp::{Counters, DropReason, Verdict};
use phalanx_sa::{IpPrefix, LifetimeLimits, PortRange, Selector};
use phalanx_testkit::assert_delta;
use phalanx_wire::{EncrId, IntegId, IpProtocol, Ipv4Packet};

/// A receiving gateway with its counters.
struct Receiver {
    spec: PairSpec,
    sad: phalanx_sa::Sad,
    counters: Counters,
}

impl Receiver {
    fn new(spec: PairSpec) -> Receiver {
        let (sad, _) = spec.sad(Instant::now());
        Receiver {
            spec,
            sad,
            counters: Counters::new(),
        }
    }

    /// Seals `inner` with a fresh sender at sequence number `seq`.
    fn seal_at(&self, inner: &[u8], seq: u64) -> Vec<u8> {
        let sa = self.spec.outbound(Instant::now());
        sa.seq.advance_to(seq);
        seal_one(&sa, inner)
    }

    /// Opens `packet` and asserts that exactly `name` moved by one.
    #[track_caller]
    fn expect(&mut self, packet: &[u8], name: &str) -> Vec<u8> {
        let set = counter_set();
        let before = set.snapshot(&self.counters);
        let (_, out) = open_one(&self.sad, packet, &mut self.counters);
        assert_delta!(set, before, &self.counters, name => 1);
        out
    }
}

fn tunnel44() -> ModeCase {
    ModeCase::Tunnel {
        inner: Ip::V4,
        outer: Ip::V4,
    }
}

/// Rewrites an IPv4 header's total length and checksum after an edit.
fn fix_v4(packet: &mut [u8]) {
    let len = packet.len() as u16;
    let mut ip = Ipv4Packet::new_unchecked(packet);
    ip.set_total_len(len);
    ip.fill_checksum();
}

/// NULL + HMAC-SHA-256-128: edits the plaintext ESP payload of a tunnel
/// v4-in-v4 packet (bytes after the ESP header, before the ICV) and
/// computes a valid ICV again, as a peer with the key could.
fn reseal_null(spec: &PairSpec, outer: &mut [u8], edit: impl FnOnce(&mut [u8])) {
    let icv_at = outer.len() - 16;
    edit(&mut outer[20 + 8..icv_at]);
    let key = spec.keys().1;
    let mac = spec
        .provider
        .integrity(IntegId::HMAC_SHA2_256_128, &key)
        .unwrap();
    let (body, icv) = outer.split_at_mut(icv_at);
    mac.sign(&[&body[20..]], icv);
}

#[test]
fn truncated_at_every_length() {
    for suite in [gcm128(), Suite::ah(IntegId::HMAC_SHA2_256_128)] {
        for mode in [
            tunnel44(),
            ModeCase::Tunnel {
                inner: Ip::V6,
                outer: Ip::V6,
            },
        ] {
            for encap in [false, !suite.ah] {
                let spec = PairSpec {
                    encap,
                    ..PairSpec::esp(suite, mode)
                };
                let mut rx = Receiver::new(spec);
                let packet = rx.seal_at(&udp_of(mode.inner(), 40), 1);
                for len in 0..packet.len() {
                    rx.expect(&packet[..len], "truncated");
                }
                rx.expect(&packet, "forwarded");
            }
        }
    }
}

#[test]
fn esp_shorter_than_its_fixed_parts_is_truncated_and_longer_fails_auth() {
    for suite in [gcm128(), null_sha256()] {
        let mut rx = Receiver::new(PairSpec::esp(suite, tunnel44()));
        let packet = rx.seal_at(&udp4(40, 0, false), 1);
        let minimum = 20 + 8 + suite.iv_len() + 2 + suite.icv_len();
        for len in 20..packet.len() {
            let mut cut = packet[..len].to_vec();
            fix_v4(&mut cut);
            let expected = if len < minimum {
                "truncated"
            } else {
                "auth_failed"
            };
            rx.expect(&cut, expected);
        }
    }
}

#[test]
fn malformed_outer_header() {
    let mut rx = Receiver::new(PairSpec::esp(gcm128(), tunnel44()));
    let packet = rx.seal_at(&udp4(40, 0, false), 1);
    let mut bad_checksum = packet.clone();
    bad_checksum[10] ^= 1;
    rx.expect(&bad_checksum, "malformed_header");
    let mut bad_version = packet.clone();
    bad_version[0] = 0x55;
    rx.expect(&bad_version, "malformed_header");
    let mut bad_ihl = packet;
    bad_ihl[0] = 0x44;
    rx.expect(&bad_ihl, "malformed_header");
}

#[test]
fn not_ipsec_unknown_spi_wrong_destination() {
    let mut rx = Receiver::new(PairSpec::esp(gcm128(), tunnel44()));
    let mut tcp = udp4(40, 0, false);
    Ipv4Packet::new_unchecked(&mut tcp[..]).set_protocol(IpProtocol::TCP);
    fix_v4(&mut tcp);
    rx.expect(&tcp, "not_ipsec");
    // Any UDP datagram here is taken as ESP-in-UDP (RFC 3948): its first
    // four bytes are an SPI we do not know.
    rx.expect(&udp4(40, 0, false), "unknown_spi");
    let packet = rx.seal_at(&udp4(40, 0, false), 1);
    let mut other_spi = packet.clone();
    other_spi[20 + 3] ^= 0x40;
    rx.expect(&other_spi, "unknown_spi");
    let mut other_dst = packet;
    other_dst[19] ^= 1;
    fix_v4(&mut other_dst);
    rx.expect(&other_dst, "wrong_destination");
}

#[test]
fn encapsulation_must_match_the_sa() {
    let plain = PairSpec::esp(gcm128(), tunnel44());
    let encap = PairSpec {
        encap: true,
        ..plain.clone()
    };
    let mut rx_plain = Receiver::new(plain);
    let mut rx_encap = Receiver::new(encap);
    let udp_packet = rx_encap.seal_at(&udp4(40, 0, false), 1);
    let esp_packet = rx_plain.seal_at(&udp4(40, 0, false), 1);
    rx_plain.expect(&udp_packet, "encap_mismatch");
    rx_encap.expect(&esp_packet, "encap_mismatch");
}

#[test]
fn replayed_too_old_and_sequence_zero() {
    let mut rx = Receiver::new(PairSpec::esp(gcm128(), tunnel44()));
    let old = rx.seal_at(&udp4(40, 0, false), 1);
    let new = rx.seal_at(&udp4(40, 0, false), 100);
    rx.expect(&new, "forwarded");
    rx.expect(&new, "replayed");
    rx.expect(&old, "too_old");
    let mut zero = new;
    zero[24..28].fill(0);
    rx.expect(&zero, "invalid_sequence");
}

#[test]
fn auth_failed_for_any_flipped_byte_and_window_unchanged() {
    for suite in esp_suites() {
        let mut rx = Receiver::new(PairSpec::esp(suite, tunnel44()));
        let packet = rx.seal_at(&udp4(30, 0, false), 7);
        // Every byte after the SPI and sequence number: IV, payload, ICV.
        for at in 28..packet.len() {
            let mut bad = packet.clone();
            bad[at] ^= 0x80;
            rx.expect(&bad, "auth_failed");
        }
        // RFC 4303 §3.4.3: forgeries did not move the window.
        rx.expect(&packet, "forwarded");
    }
}

#[test]
fn bad_padding_pad_length_next_header_and_inner_packet() {
    let spec = PairSpec::esp(null_sha256(), tunnel44());
    let mut rx = Receiver::new(spec.clone());
    let inner = udp4(41, 0, false); // 69 bytes: 1 byte of padding, then pl, nh.
    let mut seq = 1;
    let mut case = |rx: &mut Receiver, name: &str, edit: &dyn Fn(&mut [u8])| {
        let mut packet = rx.seal_at(&inner, seq);
        seq += 1;
        reseal_null(&spec, &mut packet, |p| edit(p));
        rx.expect(&packet, name);
    };
    case(&mut rx, "forwarded", &|_| {});
    case(&mut rx, "bad_padding", &|p| {
        let n = p.len();
        p[n - 3] = 9;
    });
    case(&mut rx, "bad_pad_length", &|p| {
        let n = p.len();
        p[n - 2] = 250;
    });
    case(&mut rx, "bad_next_header", &|p| {
        let n = p.len();
        p[n - 1] = IpProtocol::TCP.0;
    });
    case(&mut rx, "inner_malformed", &|p| {
        let n = p.len();
        p[n - 1] = IpProtocol::IPV6.0; // the inner header says version 4
    });
    case(&mut rx, "inner_malformed", &|p| {
        p[2..4].copy_from_slice(&9999u16.to_be_bytes()); // inner total length
    });
    case(&mut rx, "inner_malformed", &|p| {
        p[10] ^= 0xff; // inner header checksum
    });
}

#[test]
fn dummy_packets_are_counted() {
    let spec = PairSpec::esp(gcm128(), tunnel44());
    let mut rx = Receiver::new(spec.clone());
    let sa = spec.outbound(Instant::now());
    let mut ctx =
        phalanx_esp::OutboundContext::new(Instant::now(), phalanx_esp::IvSource::Sequence);
    for len in [0, 1, 100] {
        let op = phalanx_esp::prepare_dummy(&sa, outbound_buf(&[]), len, &mut ctx).unwrap();
        let (buf, verdict) = phalanx_esp::finish_outbound(
            run_engine(&mut phalanx_crypto::InlineEngine::new(), vec![op]).remove(0),
        );
        assert_eq!(verdict, Verdict::Forward);
        rx.expect(buf.as_slice(), "dummy");
    }
    // Dummies are authenticated traffic: their numbers are taken.
    let replay = rx.seal_at(&udp4(1, 0, false), 1);
    rx.expect(&replay, "replayed");
}

#[test]
fn selector_mismatch() {
    let mut spec = PairSpec::esp(gcm128(), tunnel44());
    let net = |a: std::net::Ipv4Addr, l| IpPrefix::new(v4(a), l).unwrap();
    spec.selectors = vec![Selector {
        src: net(HOST_A4, 24),
        dst: net(HOST_B4, 24),
        protocol: Some(IpProtocol::UDP),
        src_ports: PortRange::ANY,
        dst_ports: PortRange::single(5678),
    }];
    let mut rx = Receiver::new(spec);
    rx.expect(&rx.seal_at(&udp4(10, 0, false), 1), "forwarded");
    let outside = udp4_between(HOST_A4, std::net::Ipv4Addr::new(10, 9, 9, 9), 10, 0, false);
    rx.expect(&rx.seal_at(&outside, 2), "selector_mismatch");
}

#[test]
fn hard_lifetime_by_packets_and_by_time() {
    let mut spec = PairSpec::esp(gcm128(), tunnel44());
    spec.lifetime = LifetimeLimits {
        hard_packets: Some(2),
        ..Default::default()
    };
    let mut rx = Receiver::new(spec);
    for seq in 1..=2 {
        rx.expect(&rx.seal_at(&udp4(10, 0, false), seq), "forwarded");
    }
    let third = rx.seal_at(&udp4(10, 0, false), 3);
    rx.expect(&third, "sa_hard_expired");
    rx.expect(&rx.seal_at(&udp4(10, 0, false), 4), "sa_hard_expired");

    let mut spec = PairSpec::esp(gcm128(), tunnel44());
    spec.lifetime = LifetimeLimits {
        hard_time: Some(Duration::from_secs(60)),
        ..Default::default()
    };
    let created = Instant::now();
    let (sad, _) = spec.sad(created);
    let sa = spec.outbound(created);
    let packet = seal_one(&sa, &udp4(10, 0, false));
    let later = created + Duration::from_secs(61);
    let refused = phalanx_esp::prepare_inbound(&sad, inbound_buf(&packet), later).err();
    assert_eq!(refused.map(|(_, r)| r), Some(DropReason::SaHardExpired));
}

#[test]
fn soft_lifetime_is_reported_once() {
    let mut spec = PairSpec::esp(gcm128(), tunnel44());
    spec.lifetime = LifetimeLimits {
        soft_packets: Some(2),
        ..Default::default()
    };
    let (sad, _) = spec.sad(Instant::now());
    let sender = spec.outbound(Instant::now());
    let mut events = Vec::new();
    let mut engine = phalanx_crypto::InlineEngine::new();
    for _ in 0..4 {
        let packet = seal_one(&sender, &udp4(10, 0, false));
        let (pending, op) =
            phalanx_esp::prepare_inbound(&sad, inbound_buf(&packet), Instant::now()).unwrap();
        let op = run_engine(&mut engine, vec![op]).remove(0);
        let (_, verdict) = phalanx_esp::finish_inbound_with_events(pending, op, &mut events);
        assert_eq!(verdict, Verdict::Forward);
    }
    assert_eq!(events, vec![spec.spi]);
}

#[test]
fn cbc_ciphertext_not_block_aligned() {
    let suite = Suite::esp(EncrId::AES_CBC, 128, IntegId::HMAC_SHA2_256_128);
    let mut rx = Receiver::new(PairSpec::esp(suite, tunnel44()));
    let packet = rx.seal_at(&udp4(40, 0, false), 1);
    // Remove 4 bytes of ciphertext: the ICV stays at the end.
    let n = packet.len();
    let mut cut = [&packet[..n - 20], &packet[n - 16..]].concat();
    fix_v4(&mut cut);
    rx.expect(&cut, "invalid_layout");
}

#[test]
fn natt_keepalive_and_ike_marker() {
    let mut rx = Receiver::new(PairSpec {
        encap: true,
        ..PairSpec::esp(gcm128(), tunnel44())
    });
    let packet = rx.seal_at(&udp4(40, 0, false), 1);
    let udp_payload = |payload: &[u8]| {
        let mut p = packet[..28].to_vec();
        p.extend_from_slice(payload);
        let udp_len = (8 + payload.len()) as u16;
        p[24..26].copy_from_slice(&udp_len.to_be_bytes());
        fix_v4(&mut p);
        p
    };
    rx.expect(&udp_payload(&[0xff]), "natt_keepalive");
    rx.expect(
        &udp_payload(&[0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]),
        "ike_marker",
    );
    rx.expect(&udp_payload(&[1, 2, 3]), "truncated");
}

#[test]
fn fragments_are_dropped() {
    let mut rx = Receiver::new(PairSpec::esp(gcm128(), tunnel44()));
    let packet = rx.seal_at(&udp4(40, 0, false), 1);
    let mut first = packet.clone();
    Ipv4Packet::new_unchecked(&mut first[..]).set_more_frags(true);
    fix_v4(&mut first);
    rx.expect(&first, "fragment");
    let mut later = packet;
    Ipv4Packet::new_unchecked(&mut later[..]).set_frag_offset(10);
    fix_v4(&mut later);
    rx.expect(&later, "fragment");

    let mode = ModeCase::Tunnel {
        inner: Ip::V6,
        outer: Ip::V6,
    };
    let mut rx6 = Receiver::new(PairSpec::esp(gcm128(), mode));
    let packet = rx6.seal_at(&udp6(40, 0), 1);
    // Insert a Fragment header (offset 0, M = 1) in front of ESP.
    let mut frag = packet[..40].to_vec();
    frag[6] = IpProtocol::IPV6_FRAG.0;
    frag.extend_from_slice(&[IpProtocol::ESP.0, 0, 0, 1, 0, 0, 0, 9]);
    frag.extend_from_slice(&packet[40..]);
    let plen = (frag.len() - 40) as u16;
    frag[4..6].copy_from_slice(&plen.to_be_bytes());
    rx6.expect(&frag, "fragment");
}

#[test]
fn outer_ce_on_not_ect_inner_is_dropped() {
    let mut rx = Receiver::new(PairSpec::esp(gcm128(), tunnel44()));
    let mut packet = rx.seal_at(&udp4(40, 0, false), 1);
    let mut ip = Ipv4Packet::new_unchecked(&mut packet[..]);
    ip.set_dscp_ecn(0b11);
    ip.fill_checksum();
    rx.expect(&packet, "ecn_not_ect");
}

#[test]
fn ah_forgery_mutable_fields_and_next_header() {
    for family in [Ip::V4, Ip::V6] {
        for transport in [false, true] {
            let mode = if transport {
                ModeCase::Transport(family)
            } else {
                ModeCase::Tunnel {
                    inner: family,
                    outer: family,
                }
            };
            let mut rx = Receiver::new(PairSpec::esp(Suite::ah(IntegId::HMAC_SHA2_256_128), mode));
            let packet = rx.seal_at(&udp_of(family, 20), 1);
            // Routers change TTL / hop limit and TOS: still authentic.
            let mut routed = packet.clone();
            match family {
                Ip::V4 => {
                    let mut ip = Ipv4Packet::new_unchecked(&mut routed[..]);
                    ip.set_ttl(3);
                    ip.set_dscp_ecn(0xb8);
                    ip.fill_checksum();
                }
                Ip::V6 => {
                    routed[7] = 3;
                    routed[1] ^= 0x0f;
                }
            }
            let out = rx.expect(&routed, "forwarded");
            if transport {
                // The delivered packet carries the fields as received.
                assert_eq!(out[..2], routed[..2]);
            }
            // Anything else changed is a forgery.
            let mut forged = rx.seal_at(&udp_of(family, 20), 2);
            let last = forged.len() - 1;
            forged[last] ^= 1;
            rx.expect(&forged, "auth_failed");
            let mut spoofed = rx.seal_at(&udp_of(family, 20), 3);
            let src_at = if family == Ip::V4 { 12 } else { 8 };
            spoofed[src_at] ^= 1;
            if family == Ip::V4 {
                fix_v4(&mut spoofed);
            }
            rx.expect(&spoofed, "auth_failed");
            rx.expect(&packet, "replayed");
        }
    }
}

#[test]
fn ah_needs_tailroom_and_an_aligned_header() {
    let mode = ModeCase::Tunnel {
        inner: Ip::V6,
        outer: Ip::V6,
    };
    let spec = PairSpec::esp(Suite::ah(IntegId::HMAC_SHA2_256_128), mode);
    let mut rx = Receiver::new(spec);
    let packet = rx.seal_at(&udp6(20, 0), 1);
    // The header in front of AH is kept behind the packet during the engine.
    let set = counter_set();
    let before = set.snapshot(&rx.counters);
    let cramped = phalanx_crypto::PacketBuf::from_slice(&packet, 0, 39);
    let refused = phalanx_esp::prepare_inbound(&rx.sad, cramped, Instant::now()).err();
    let (buf, reason) = refused.expect("no room for the saved header");
    rx.counters.record(Verdict::Drop(reason), buf.len());
    assert_delta!(set, before, &rx.counters, "no_room" => 1);
    // RFC 4302 §2.2: over IPv6 the AH header is a multiple of 8 bytes. With
    // HMAC-SHA-256-128 it is 12 + 16 + 4 bytes of padding = 32; a header
    // claiming 36 bytes is malformed.
    let mut misaligned = packet.clone();
    misaligned[41] += 1;
    rx.expect(&misaligned, "malformed_header");
    rx.expect(&packet, "forwarded");
}

/// Drops after the SA was found are counted on the SA too, per reason
/// (what `phalanxctl sas` and `phalanx_sa_drops_total` show); drops before
/// it (no SA for the SPI) are not.
#[test]
fn drops_are_counted_on_the_sa_they_belong_to() {
    let now = Instant::now();
    let spec = PairSpec::esp(
        gcm128(),
        ModeCase::Tunnel {
            inner: Ip::V4,
            outer: Ip::V4,
        },
    );
    let tx = spec.outbound(now);
    let (sad, rx) = spec.sad(now);
    let sealed = seal_one(&tx, &udp4(100, 0, false));
    let mut counters = Counters::new();
    assert_eq!(open_one(&sad, &sealed, &mut counters).0, Verdict::Forward);
    let (verdict, _) = open_one(&sad, &sealed, &mut counters);
    assert_eq!(verdict, Verdict::Drop(DropReason::Replayed));
    let mut forged = seal_one(&tx, &udp4(100, 0, false));
    let last = forged.len() - 1;
    forged[last] ^= 1;
    let (verdict, _) = open_one(&sad, &forged, &mut counters);
    assert_eq!(verdict, Verdict::Drop(DropReason::AuthFailed));
    let drops = rx.drops.snapshot();
    assert_eq!(drops[DropReason::Replayed.index()], 1);
    assert_eq!(drops[DropReason::AuthFailed.index()], 1);
    assert_eq!(rx.drops.total(), 2);
    // An unknown SPI belongs to no SA.
    let mut unknown = sealed.clone();
    unknown[20] ^= 0xff;
    let (verdict, _) = open_one(&sad, &unknown, &mut counters);
    assert_eq!(verdict, Verdict::Drop(DropReason::UnknownSpi));
    assert_eq!(rx.drops.total(), 2);
}
