//! Phalanx's path-MTU builders against scapy, byte for byte: ICMP
//! Fragmentation Needed (RFC 1191 §4), ICMPv6 Packet Too Big (RFC 4443
//! §3.2) and IPv4 fragments (RFC 791). The vectors are scapy's output,
//! written by `tests/interop/gen_icmp_vectors.py` (which the interop suite
//! reruns and compares).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv6Addr;

use phalanx_wire::icmp::{self, IcmpPacket};
use phalanx_wire::Ipv4Fragments;

const VECTORS: &str = include_str!("vectors/icmp.txt");

fn bytes(hex_text: &str) -> Vec<u8> {
    hex::decode(hex_text).unwrap()
}

fn vectors(kind: &str) -> Vec<Vec<&'static str>> {
    let found: Vec<Vec<&str>> = VECTORS
        .lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .filter(|f| f[0] == kind)
        .collect();
    assert!(!found.is_empty(), "no {kind} vectors");
    found
}

#[test]
fn frag_needed_v4_is_what_scapy_builds() {
    for v in vectors("frag_needed_v4") {
        let mtu: u16 = v[1].parse().unwrap();
        let (original, expected) = (bytes(v[2]), bytes(v[3]));
        let mut out = [0u8; 1500];
        let len = icmp::frag_needed_v4(&mut out, mtu, &original).unwrap();
        assert_eq!(hex::encode(&out[..len]), v[3], "mtu {mtu}");
        let view = IcmpPacket::new_checked(&out[..len]).unwrap();
        assert_eq!(
            (view.msg_type(), view.code(), view.next_hop_mtu()),
            (3, 4, mtu)
        );
        assert!(view.verify_checksum_v4());
        assert_eq!(expected.len(), len);
    }
}

#[test]
fn packet_too_big_v6_is_what_scapy_builds() {
    for v in vectors("packet_too_big_v6") {
        let mtu: u32 = v[1].parse().unwrap();
        let src: Ipv6Addr = v[2].parse().unwrap();
        let dst: Ipv6Addr = v[3].parse().unwrap();
        let original = bytes(v[4]);
        let mut out = [0u8; 1500];
        let len = icmp::packet_too_big_v6(&mut out, mtu, &original, src, dst).unwrap();
        assert_eq!(hex::encode(&out[..len]), v[5], "mtu {mtu}");
        let view = IcmpPacket::new_checked(&out[..len]).unwrap();
        assert_eq!((view.msg_type(), view.code(), view.mtu()), (2, 0, mtu));
    }
}

#[test]
fn ipv4_fragments_are_what_scapy_builds() {
    for v in vectors("fragment_v4") {
        let mtu: usize = v[1].parse().unwrap();
        let original = bytes(v[2]);
        let expected: Vec<&str> = v[3].split(',').collect();
        let mut fragments = Ipv4Fragments::new(&original, mtu).unwrap();
        assert_eq!(fragments.remaining(), expected.len(), "mtu {mtu}");
        let mut out = [0u8; 1500];
        for want in expected {
            let len = fragments.write_next(&mut out).unwrap();
            assert!(len <= mtu);
            assert_eq!(hex::encode(&out[..len]), want, "mtu {mtu}");
        }
        assert_eq!(fragments.write_next(&mut out), None);
    }
}
