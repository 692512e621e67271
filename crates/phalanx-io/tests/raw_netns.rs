//! Raw ESP sockets over the loopback of a fresh network namespace (needs
//! root; fails, does not skip, without it).
//!
//! ```text
//!  netns phxio-<pid>-<tag>:  tx RawEspSocket ── lo (127.0.0.1, ::1) ── rx RawEspSocket
//! ```
// A panic is the failure report in a test.
#![allow(clippy::unwrap_used)]

mod common;

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use common::NetNs;
use phalanx_io::limits::DEFAULT_HEADROOM;
use phalanx_io::raw::{RawEspConfig, RawEspSocket};
use phalanx_io::{PacketBatch, PacketMeta};

fn open(ns: &NetNs, bind: &str) -> RawEspSocket {
    let mut config = RawEspConfig::new(bind.parse().unwrap());
    config.nonblocking = true;
    ns.run(|| RawEspSocket::open(&config)).unwrap()
}

/// Outer TOS octets the packets cycle through: Not-ECT, ECT(1), ECT(0), CE
/// (RFC 3168 §5) and DSCP EF with ECT(0) (RFC 3246).
const TOS_CYCLE: [u8; 5] = [0, 1, 2, 3, 0xb8 | 2];

/// ESP-shaped payloads (SPI, sequence number, data; RFC 4303 §2) to `to`,
/// from `from` if given, packet `i` with outer TOS `TOS_CYCLE[i % 5]`.
fn esp_batch(to: IpAddr, from: Option<IpAddr>, count: u32) -> PacketBatch {
    let mut batch = PacketBatch::new(count as usize, 2048, DEFAULT_HEADROOM);
    for i in 0..count {
        let mut payload = Vec::new();
        payload.extend_from_slice(&(0x1000 + i).to_be_bytes());
        payload.extend_from_slice(&(i + 1).to_be_bytes());
        payload.extend(std::iter::repeat_n(i as u8, 100 + i as usize));
        let meta = PacketMeta {
            remote: SocketAddr::new(to, 0),
            local: from,
            stride: 0,
            tos: TOS_CYCLE[i as usize % TOS_CYCLE.len()],
        };
        batch.push(&payload, meta).unwrap();
    }
    batch
}

fn receive(rx: &mut RawEspSocket, want: usize) -> Vec<(Vec<u8>, PacketMeta)> {
    let mut got = Vec::new();
    let mut batch = PacketBatch::new(16, 2048, DEFAULT_HEADROOM);
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < want && Instant::now() < deadline {
        batch.clear();
        match rx.recv_batch(&mut batch) {
            Ok(_) => got.extend(batch.iter().map(|(p, m)| (p.to_vec(), *m))),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(e) => panic!("recv_batch: {e}"),
        }
    }
    got
}

/// Sends five payloads from `tx` to `to` and checks what `rx` hands out:
/// the ESP payload alone, whatever the family, with both addresses and
/// the outer TOS / Traffic Class each was sent with.
fn round_trip(tx: &mut RawEspSocket, rx: &mut RawEspSocket, to: IpAddr, from: Option<IpAddr>) {
    let sent = esp_batch(to, from, 5);
    assert_eq!(tx.send_batch(&sent).unwrap(), 5);
    assert_eq!(tx.stats().send_dropped, 0);
    let got = receive(rx, 5);
    assert_eq!(got.len(), 5, "five ESP packets");
    for (i, (payload, meta)) in got.iter().enumerate() {
        assert_eq!(
            payload.as_slice(),
            sent.packet(i),
            "packet {i}: the payload, no IP header"
        );
        assert_eq!(meta.remote, SocketAddr::new(from.unwrap_or(to), 0));
        assert_eq!(meta.local, Some(to));
        assert_eq!(meta.tos, sent.meta(i).tos, "packet {i}: outer TOS");
    }
}

#[test]
fn ipv4_raw_esp_strips_the_ip_header() {
    let ns = NetNs::create("raw4");
    let (mut tx, mut rx) = (open(&ns, "0.0.0.0"), open(&ns, "0.0.0.0"));
    assert!(!rx.is_ipv6());
    let lo: IpAddr = "127.0.0.1".parse().unwrap();
    round_trip(&mut tx, &mut rx, lo, None);
    // The source address chosen with IP_PKTINFO.
    round_trip(&mut tx, &mut rx, lo, Some("127.0.0.2".parse().unwrap()));
    let stats = rx.stats();
    assert_eq!((stats.packets_received, stats.recv_dropped), (10, 0));
}

#[test]
fn ipv6_raw_esp_reports_the_destination() {
    let ns = NetNs::create("raw6");
    let (mut tx, mut rx) = (open(&ns, "::"), open(&ns, "::"));
    assert!(rx.is_ipv6());
    round_trip(&mut tx, &mut rx, "::1".parse().unwrap(), None);
    assert_eq!(rx.stats().packets_received, 5);
}

#[test]
fn a_bound_raw_socket_sees_only_its_address() {
    let ns = NetNs::create("rawb");
    let mut tx = open(&ns, "0.0.0.0");
    let mut rx = open(&ns, "127.0.0.1");
    let other = esp_batch("127.0.0.3".parse().unwrap(), None, 3);
    assert_eq!(tx.send_batch(&other).unwrap(), 3);
    round_trip(&mut tx, &mut rx, "127.0.0.1".parse().unwrap(), None);
    assert_eq!(rx.stats().packets_received, 5, "nothing for 127.0.0.3");
}

/// `freebind`: a raw socket bound to an address no interface holds (a
/// cluster's virtual address) sends from it; without the option the bind
/// is refused.
#[test]
fn a_freebind_raw_socket_sends_from_an_address_no_interface_holds() {
    freebind_sends_from("rawf", "192.0.2.77", "127.0.0.1");
}

/// The same for an IPv6 virtual address (`IPV6_FREEBIND`,
/// `IPV6_TRANSPARENT`).
#[test]
fn a_freebind_raw_socket_sends_from_an_ipv6_address_no_interface_holds() {
    freebind_sends_from("rawf6", "2001:db8::77", "::1");
}

fn freebind_sends_from(tag: &str, vip: &str, lo: &str) {
    let ns = NetNs::create(tag);
    let vip: IpAddr = vip.parse().unwrap();
    let mut plain = RawEspConfig::new(vip);
    plain.nonblocking = true;
    let refused = ns.run(|| RawEspSocket::open(&plain)).unwrap_err();
    assert_eq!(refused.kind(), io::ErrorKind::AddrNotAvailable, "{refused}");
    let mut config = plain.clone();
    config.freebind = true;
    let mut tx = ns.run(|| RawEspSocket::open(&config)).unwrap();
    let mut rx = open(&ns, lo);
    let lo: IpAddr = lo.parse().unwrap();
    assert_eq!(tx.send_batch(&esp_batch(lo, None, 3)).unwrap(), 3);
    assert_eq!(tx.stats().send_dropped, 0);
    let got = receive(&mut rx, 3);
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|(_, m)| m.remote == SocketAddr::new(vip, 0)));
}
