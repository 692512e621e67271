//! UDP GRO across a veth pair between two fresh network namespaces (needs
//! root; fails, does not skip, without it): what the kernel coalesces on
//! receive, and the outer TOS each datagram keeps.
//!
//! ```text
//!  netns phxio-<pid>-groa                 netns phxio-<pid>-grob
//!  tx UdpSocket (no GSO) ── veth0 10.203.0.1 ═══ veth1 10.203.0.2 ── rx UdpSocket (GRO)
//!                                                  (GRO on: NAPI coalesces)
//! ```
// A panic is the failure report in a test.
#![allow(clippy::unwrap_used)]

mod common;

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::NetNs;
use phalanx_io::limits::DEFAULT_HEADROOM;
use phalanx_io::udp::{UdpConfig, UdpSocket};
use phalanx_io::{PacketBatch, PacketMeta};

/// Two namespaces joined by a veth pair whose receiving end runs GRO
/// (veth(4) turns NAPI on when GRO is asked for with ethtool).
fn veth_pair() -> (NetNs, NetNs) {
    let (a, b) = (NetNs::create("groa"), NetNs::create("grob"));
    a.ip(&[
        "link",
        "add",
        "veth0",
        "type",
        "veth",
        "peer",
        "name",
        "veth1",
        "netns",
        b.name(),
    ]);
    a.ip(&["addr", "add", "10.203.0.1/24", "dev", "veth0"]);
    b.ip(&["addr", "add", "10.203.0.2/24", "dev", "veth1"]);
    a.ip(&["link", "set", "veth0", "up"]);
    b.ip(&["link", "set", "veth1", "up"]);
    // veth starts its NAPI (GRO) instance when GRO is switched on while
    // the link is up; GRO may already read "on", so switch it off first.
    for (ns, dev) in [(&a, "veth0"), (&b, "veth1")] {
        ns.exec(&["ethtool", "-K", dev, "gro", "off"]);
        ns.exec(&["ethtool", "-K", dev, "gro", "on"]);
    }
    // A sender with TSO on hands its skbs to the peer's NAPI only when the
    // peer does UDP GRO forwarding (`veth_skb_is_eligible_for_gro`).
    b.exec(&["ethtool", "-K", "veth1", "rx-udp-gro-forwarding", "on"]);
    // The sender's softirq runs each datagram through the receiver's NAPI
    // poll as it is sent, so consecutive datagrams never meet in one poll;
    // a GRO flush timeout keeps them in the GRO list across polls, as a
    // busy NIC's interrupt moderation does.
    b.exec(&[
        "sh",
        "-c",
        "echo 2000000 > /sys/class/net/veth1/gro_flush_timeout",
    ]);
    (a, b)
}

fn open(ns: &NetNs, bind: &str, gro: bool) -> UdpSocket {
    let mut config = UdpConfig::new(bind.parse().unwrap());
    (config.gro, config.gso, config.nonblocking) = (gro, false, true);
    ns.run(|| UdpSocket::bind(&config)).unwrap()
}

/// Datagram `i` of a burst: its index, then filler.
fn burst(to: SocketAddr, tos: &[u8]) -> PacketBatch {
    let mut batch = PacketBatch::new(tos.len(), 2048, DEFAULT_HEADROOM);
    for (i, &t) in tos.iter().enumerate() {
        let mut data = vec![0x5a; 1000];
        data[..2].copy_from_slice(&(i as u16).to_be_bytes());
        let meta = PacketMeta {
            remote: to,
            tos: t,
            ..PacketMeta::default()
        };
        batch.push(&data, meta).unwrap();
    }
    batch
}

fn receive(rx: &mut UdpSocket, want: usize) -> Vec<(u16, PacketMeta)> {
    let mut got = Vec::new();
    let mut batch = PacketBatch::new(64, 2048, DEFAULT_HEADROOM);
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < want && Instant::now() < deadline {
        batch.clear();
        match rx.recv_batch(&mut batch) {
            Ok(_) => got.extend(
                batch
                    .iter()
                    .map(|(p, m)| (u16::from_be_bytes([p[0], p[1]]), *m)),
            ),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(e) => panic!("recv_batch: {e}"),
        }
    }
    got
}

/// Bursts of plain datagrams (no GSO: one skb each on the wire) whose TOS
/// changes in runs: GRO coalesces within a run, never across one
/// (`inet_gro_receive` flushes on a TOS difference), so every datagram
/// handed out carries its own TOS, and the TOS of a super-datagram is
/// that of each of its segments.
#[test]
fn gro_coalesces_only_datagrams_of_one_tos() {
    let (a, b) = veth_pair();
    let mut rx = open(&b, "10.203.0.2:0", true);
    let mut tx = open(&a, "10.203.0.1:0", false);
    assert!(rx.gro_enabled(), "kernel with UDP GRO (5.0+)");
    let to = rx.local_addr().unwrap();
    // Not-ECT, ECT(0), CE, EF, EF + ECT(1), ECT(0) again: runs of eight.
    let runs: [u8; 6] = [0, 2, 3, 0xb8, 0xb9, 2];
    let tos: Vec<u8> = runs.iter().flat_map(|&t| [t; 8]).collect();
    let mut got = Vec::new();
    // A few bursts: GRO depends on the datagrams meeting in one NAPI poll,
    // which one burst on an idle machine nearly always does.
    for _ in 0..5 {
        let batch = burst(to, &tos);
        assert_eq!(tx.send_batch(&batch).unwrap(), tos.len());
        got = receive(&mut rx, tos.len());
        assert_eq!(got.len(), tos.len(), "every datagram arrives");
        for (k, (index, meta)) in got.iter().enumerate() {
            let i = usize::from(*index);
            assert_eq!(i, k, "in order");
            assert_eq!(meta.tos, tos[i], "datagram {i}: its own outer TOS");
        }
        if rx.stats().coalesced_received > 0 {
            break;
        }
    }
    let stats = rx.stats();
    assert!(
        stats.coalesced_received > 0,
        "the kernel coalesced nothing, so this proved nothing: {stats:?}"
    );
    // A super-datagram never spans two TOS runs: its segments (equal
    // stride, consecutive indices) all carry the run's TOS, checked above;
    // and there are at least as many receive messages as runs.
    assert!(got.iter().all(|(_, m)| m.stride == 1000));
    assert!(stats.recv_calls >= 1);
}

/// `freebind`: a UDP socket bound to an address no interface holds (a
/// cluster's virtual address) sends from it over the namespace's
/// loopback; without the option the bind is refused.
#[test]
fn a_freebind_socket_sends_from_an_address_no_interface_holds() {
    freebind_sends_from("udpf", "192.0.2.77:4500", "127.0.0.1:0");
}

/// The same for an IPv6 virtual address (`IPV6_FREEBIND`,
/// `IPV6_TRANSPARENT`).
#[test]
fn a_freebind_socket_sends_from_an_ipv6_address_no_interface_holds() {
    freebind_sends_from("udpf6", "[2001:db8::77]:4500", "[::1]:0");
}

fn freebind_sends_from(tag: &str, vip: &str, lo: &str) {
    let ns = NetNs::create(tag);
    let vip: SocketAddr = vip.parse().unwrap();
    let mut config = UdpConfig::new(vip);
    (config.gro, config.gso, config.nonblocking) = (false, false, true);
    let refused = ns.run(|| UdpSocket::bind(&config)).unwrap_err();
    assert_eq!(refused.kind(), io::ErrorKind::AddrNotAvailable, "{refused}");
    config.freebind = true;
    let mut tx = ns.run(|| UdpSocket::bind(&config)).unwrap();
    let mut rx = open(&ns, lo, false);
    let to = rx.local_addr().unwrap();
    assert_eq!(tx.send_batch(&burst(to, &[0; 4])).unwrap(), 4);
    assert_eq!(tx.stats().send_dropped, 0);
    let got = receive(&mut rx, 4);
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|(_, m)| m.remote == vip), "{got:?}");
}
