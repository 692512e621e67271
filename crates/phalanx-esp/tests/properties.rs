//! Property tests: random inner packets survive a round trip; nothing a
//! peer sends makes inbound processing panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::IpAddr;
use std::time::Instant;

use common::*;
use phalanx_crypto::{InlineEngine, PacketBuf};
use phalanx_esp::{finish_inbound, prepare_inbound, Counters, Verdict};
use phalanx_sa::{SaMode, Sad};
use phalanx_testkit::fuzzing::{ah_sas, esp_sas, inbound_sad, FuzzSa};
use phalanx_wire::{IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr};
use proptest::prelude::*;

/// An inner packet of `family` with an arbitrary upper layer and payload.
fn inner_packet(family: Ip, protocol: u8, tos: u8, df: bool, payload: &[u8]) -> Vec<u8> {
    let protocol = IpProtocol(protocol);
    match family {
        Ip::V4 => {
            let repr = Ipv4Repr {
                src: HOST_A4,
                dst: HOST_B4,
                protocol,
                payload_len: payload.len(),
                ttl: 64,
                dscp_ecn: tos,
                ident: 1,
                dont_frag: df,
            };
            let mut buf = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
            buf[20..].copy_from_slice(payload);
            buf
        }
        Ip::V6 => {
            let repr = Ipv6Repr {
                src: HOST_A6,
                dst: HOST_B6,
                next_header: protocol,
                payload_len: payload.len(),
                hop_limit: 64,
                traffic_class: tos,
                flow_label: 7,
            };
            let mut buf = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
            buf[40..].copy_from_slice(payload);
            buf
        }
    }
}

/// Upper-layer protocols that keep the packet simple to walk: not an IPv6
/// extension header, not ESP/AH (those would be walked or spliced).
fn plain_protocol() -> impl Strategy<Value = u8> {
    prop_oneof![
        Just(1u8),
        Just(6),
        Just(17),
        Just(58),
        Just(47),
        Just(132),
        143u8..=252
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn random_inner_packets_round_trip(
        suite in 0usize..14,
        ah in any::<bool>(),
        mode in 0usize..6,
        encap in any::<bool>(),
        esn in any::<bool>(),
        protocol in plain_protocol(),
        tos in any::<u8>(),
        df in any::<bool>(),
        tfc in proptest::option::of(0u16..600),
        payload in proptest::collection::vec(any::<u8>(), 0..1500),
    ) {
        let mode = mode_cases()[mode];
        let suite = if ah {
            phalanx_crypto::Suite::ah(hmacs()[suite % 3])
        } else {
            esp_suites()[suite]
        };
        // A Not-ECT inner packet under a CE outer one would be dropped;
        // the sender copies ECN, so the outer is never CE unless the inner is.
        let spec = PairSpec {
            encap: encap && !ah,
            esn,
            tfc_pad_to: tfc,
            ..PairSpec::esp(suite, mode)
        };
        let packet = inner_packet(mode.inner(), protocol, tos, df, &payload);
        let now = Instant::now();
        let outer = seal_one(&spec.outbound(now), &packet);
        let (sad, _) = spec.sad(now);
        let (verdict, got) = open_one(&sad, &outer, &mut Counters::new());
        prop_assert_eq!(verdict, Verdict::Forward);
        prop_assert_eq!(got, packet);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let sad = fuzz_sad();
        feed(&sad, &bytes);
    }

    #[test]
    fn random_payloads_behind_real_headers_never_panic(
        which in 0usize..10,
        seq in any::<u32>(),
        aligned in any::<bool>(),
        mut body in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        if aligned {
            // CBC needs whole blocks to get past prepare: IV + n blocks + ICV.
            body.resize(body.len() / 16 * 16 + 16, 0);
        }
        let sas: Vec<FuzzSa> = esp_sas().into_iter().chain(ah_sas()).collect();
        let sa = &sas[which % sas.len()];
        let packet = with_headers(sa, seq, &body);
        let sad = fuzz_sad();
        feed(&sad, &packet);
    }
}

/// The SAD of the fuzz targets: insecure null crypto that accepts every
/// ICV, so random bytes reach the trailer, inner packet and selector checks.
fn fuzz_sad() -> Sad {
    let sas: Vec<FuzzSa> = esp_sas().into_iter().chain(ah_sas()).collect();
    inbound_sad(&sas, Instant::now())
}

/// Runs `packet` through both halves; only the absence of a panic and a
/// consistent verdict are checked.
fn feed(sad: &Sad, packet: &[u8]) {
    let mut engine = InlineEngine::new();
    for (head, tail) in [(64, 128), (0, 0)] {
        match prepare_inbound(
            sad,
            PacketBuf::from_slice(packet, head, tail),
            Instant::now(),
        ) {
            Ok((pending, op)) => {
                let op = run_engine(&mut engine, vec![op]).remove(0);
                let (buf, verdict) = finish_inbound(pending, op);
                if verdict == Verdict::Forward {
                    assert_whole_ip_packet(buf.as_slice());
                }
            }
            Err((buf, _)) => assert!(buf.len() <= packet.len()),
        }
    }
}

/// A forwarded packet is one whole IP packet: its length fields say
/// exactly its length.
fn assert_whole_ip_packet(packet: &[u8]) {
    let len = match packet.first().map(|b| b >> 4) {
        Some(4) => usize::from(Ipv4Packet::new_checked(packet).unwrap().total_len()),
        Some(6) => 40 + usize::from(Ipv6Packet::new_checked(packet).unwrap().payload_len()),
        other => panic!("forwarded a packet of IP version {other:?}"),
    };
    assert_eq!(len, packet.len());
}

/// An outer packet that reaches `sa`: IP header to its address (UDP on
/// port 4500 when encapsulated), SPI and sequence number, then `body`.
fn with_headers(sa: &FuzzSa, seq: u32, body: &[u8]) -> Vec<u8> {
    let protocol = if sa.suite.ah {
        IpProtocol::AH
    } else {
        IpProtocol::ESP
    };
    let mut ipsec = Vec::new();
    if protocol == IpProtocol::AH {
        // A 48-byte header: room for every ICV, aligned for IPv6 too.
        ipsec.extend_from_slice(&[IpProtocol::IPV4.0, 48 / 4 - 2, 0, 0]);
    }
    ipsec.extend_from_slice(&sa.spi.to_be_bytes());
    ipsec.extend_from_slice(&seq.to_be_bytes());
    ipsec.extend_from_slice(body);
    let (payload, next) = match sa.encap {
        Some(encap) => {
            let mut udp = Vec::new();
            udp.extend_from_slice(&encap.remote_port.to_be_bytes());
            udp.extend_from_slice(&encap.local_port.to_be_bytes());
            udp.extend_from_slice(&((ipsec.len() + 8) as u16).to_be_bytes());
            udp.extend_from_slice(&[0, 0]);
            udp.extend_from_slice(&ipsec);
            (udp, IpProtocol::UDP)
        }
        None => (ipsec, protocol),
    };
    let dst = match sa.mode {
        SaMode::Tunnel { local, .. } => local,
        SaMode::Transport => phalanx_testkit::fuzzing::LOCAL_V4,
    };
    let mut packet = match dst {
        IpAddr::V4(_) => inner_packet(Ip::V4, next.0, 0, false, &payload),
        IpAddr::V6(_) => inner_packet(Ip::V6, next.0, 0, false, &payload),
    };
    match dst {
        IpAddr::V4(dst) => {
            let mut ip = Ipv4Packet::new_unchecked(&mut packet[..]);
            ip.set_dst_addr(dst);
            ip.fill_checksum();
        }
        IpAddr::V6(dst) => Ipv6Packet::new_unchecked(&mut packet[..]).set_dst_addr(dst),
    }
    packet
}

#[test]
fn with_headers_reaches_every_fuzzing_sa() {
    let sad = fuzz_sad();
    let sas: Vec<FuzzSa> = esp_sas().into_iter().chain(ah_sas()).collect();
    for sa in &sas {
        // 16 bytes of CBC IV, 96 of ciphertext, a 16-byte ICV.
        let packet = with_headers(sa, 5, &[0u8; 128]);
        let result = prepare_inbound(
            &sad,
            PacketBuf::from_slice(&packet, 64, 128),
            Instant::now(),
        );
        assert!(
            result.is_ok(),
            "SA {:#x}: {:?}",
            sa.spi,
            result.err().map(|(_, r)| r)
        );
    }
}
