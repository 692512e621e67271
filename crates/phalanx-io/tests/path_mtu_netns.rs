//! The route MTU query and the ICMP sender (`icmp::IcmpSocket`) over a
//! veth pair whose MTU is 1280 (needs root; fails, does not skip, without
//! it).
//!
//! ```text
//!  netns phxio-<pid>-<test>-a: va (10.9.0.1/24, fd09::1/64, mtu 1280)
//!        ── veth ──
//!  netns phxio-<pid>-<test>-b: vb (10.9.0.2/24, fd09::2/64, mtu 1280)
//! ```
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Read;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use common::NetNs;
use phalanx_io::icmp::IcmpSocket;
use phalanx_io::path_mtu::route_mtu;
use socket2::{Domain, Protocol, Socket, Type};

/// The two namespaces, named per test (tests of one binary run in parallel).
fn pair(tag: &str) -> (NetNs, NetNs) {
    let (a, b) = (
        NetNs::create(&format!("{tag}-a")),
        NetNs::create(&format!("{tag}-b")),
    );
    a.ip(&[
        "link",
        "add",
        "va",
        "type",
        "veth",
        "peer",
        "name",
        "vb",
        "netns",
        b.name(),
    ]);
    for (ns, dev, v4, v6) in [
        (&a, "va", "10.9.0.1/24", "fd09::1/64"),
        (&b, "vb", "10.9.0.2/24", "fd09::2/64"),
    ] {
        ns.ip(&["link", "set", dev, "mtu", "1280", "up"]);
        ns.ip(&["addr", "add", v4, "dev", dev]);
        ns.ip(&["addr", "add", v6, "dev", dev, "nodad"]);
    }
    (a, b)
}

#[test]
fn route_mtu_is_the_link_mtu_for_both_families() {
    let (a, _b) = pair("pmtu-route");
    let v4: IpAddr = "10.9.0.2".parse().unwrap();
    let v6: IpAddr = "fd09::2".parse().unwrap();
    assert_eq!(a.run(|| route_mtu(v4, None)).unwrap(), 1280);
    assert_eq!(a.run(|| route_mtu(v6, None)).unwrap(), 1280);
    a.ip(&["link", "set", "va", "mtu", "1400"]);
    assert_eq!(a.run(|| route_mtu(v4, None)).unwrap(), 1400);
    // A route with its own MTU wins over the link's.
    a.ip(&["route", "add", "10.9.0.2/32", "dev", "va", "mtu", "1000"]);
    assert_eq!(a.run(|| route_mtu(v4, None)).unwrap(), 1000);
}

/// With a source address, the route is the one policy routing picks for
/// it: here table 100, for a source no interface holds (a cluster's
/// virtual address, bound with freebind).
#[test]
fn route_mtu_follows_the_source_address() {
    let (a, _b) = pair("pmtu-src");
    a.ip(&["link", "set", "va", "mtu", "1500"]);
    a.ip(&[
        "route",
        "add",
        "10.9.0.2/32",
        "dev",
        "va",
        "mtu",
        "1400",
        "table",
        "100",
    ]);
    a.ip(&["rule", "add", "from", "10.9.1.7", "table", "100"]);
    a.ip(&[
        "-6",
        "route",
        "add",
        "fd09::2/128",
        "dev",
        "va",
        "mtu",
        "1300",
        "table",
        "100",
    ]);
    a.ip(&["-6", "rule", "add", "from", "fd09:1::7", "table", "100"]);
    let mtu = |remote: &str, local: Option<&str>| {
        let remote: IpAddr = remote.parse().unwrap();
        let local: Option<IpAddr> = local.map(|l| l.parse().unwrap());
        a.run(|| route_mtu(remote, local)).unwrap()
    };
    assert_eq!(mtu("10.9.0.2", None), 1500);
    assert_eq!(mtu("10.9.0.2", Some("10.9.0.1")), 1500, "a's own address");
    assert_eq!(mtu("10.9.0.2", Some("10.9.1.7")), 1400, "table 100");
    assert_eq!(mtu("fd09::2", None), 1500);
    assert_eq!(mtu("fd09::2", Some("fd09::1")), 1500);
    assert_eq!(mtu("fd09::2", Some("fd09:1::7")), 1300);
    let mismatch = a.run(|| {
        route_mtu(
            "fd09::2".parse().unwrap(),
            Some("10.9.0.1".parse().unwrap()),
        )
    });
    assert_eq!(
        mismatch.unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
}

/// Receives one ICMP(v6) message whose type octet (at `offset`: behind
/// the IPv4 header a raw IPv4 socket delivers, 0 for ICMPv6) is
/// `msg_type`, within two seconds.
fn receive(mut socket: &Socket, msg_type: u8, offset: usize) -> Vec<u8> {
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut buf = [0u8; 2048];
    while Instant::now() < deadline {
        if let Ok(n) = socket.read(&mut buf) {
            if buf.get(offset) == Some(&msg_type) {
                return buf[..n].to_vec();
            }
        }
    }
    panic!("no ICMP type {msg_type} arrived");
}

#[test]
fn icmp_messages_arrive_with_the_source_routing_picks() {
    let (a, b) = pair("pmtu-icmp");
    let listen = |v6: bool| {
        let (domain, protocol) = if v6 {
            (Domain::IPV6, Protocol::ICMPV6)
        } else {
            (Domain::IPV4, Protocol::ICMPV4)
        };
        b.run(|| Socket::new(domain, Type::RAW, Some(protocol)))
            .unwrap()
    };
    let (rx4, rx6) = (listen(false), listen(true));
    let (tx4, tx6) = a.run(|| (IcmpSocket::open(false), IcmpSocket::open(true)));
    let (tx4, tx6) = (tx4.unwrap(), tx6.unwrap());
    // Fragmentation Needed, MTU 1218, quoting a 28-octet original.
    let original = [0x45u8; 28];
    let mut message = [0u8; 64];
    let n = phalanx_wire_free_frag_needed(&mut message, 1218, &original);
    tx4.send(&message[..n], "10.9.0.2".parse().unwrap())
        .unwrap();
    let got = receive(&rx4, 3, 20);
    assert_eq!(
        &got[12..16],
        &[10, 9, 0, 1],
        "source: a's address on the route"
    );
    assert_eq!(&got[20..20 + n], &message[..n]);
    assert_eq!(checksum(&got[20..20 + n]), 0, "ICMPv4 checksum verifies");
    // Packet Too Big, checksum left 0: the kernel fills it.
    let mut ptb = [0u8; 48];
    ptb[0] = 2;
    ptb[4..8].copy_from_slice(&1280u32.to_be_bytes());
    ptb[8] = 0x60;
    tx6.send(&ptb, "fd09::2".parse().unwrap()).unwrap();
    let got = receive(&rx6, 2, 0);
    assert_eq!(&got[4..8], &1280u32.to_be_bytes());
    assert_ne!(&got[2..4], &[0, 0], "the kernel filled the ICMPv6 checksum");
    // RFC 4443 §2.3: the checksum covers the RFC 8200 §8.1 pseudo-header;
    // it verifies with a's address as the source routing picked.
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&"fd09::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
    pseudo.extend_from_slice(&"fd09::2".parse::<std::net::Ipv6Addr>().unwrap().octets());
    pseudo.extend_from_slice(&(got.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 58]);
    pseudo.extend_from_slice(&got);
    assert_eq!(checksum(&pseudo), 0, "ICMPv6 checksum verifies");
    assert!(
        tx4.send(&ptb, "fd09::2".parse().unwrap()).is_err(),
        "family mismatch"
    );
    // b's messages reach a, whose kernel answers them, but never the
    // send-only sockets: their filters block every type.
    b.exec(&["ping", "-c", "1", "-W", "1", "10.9.0.1"]);
    b.exec(&["ping", "-6", "-c", "1", "-W", "1", "fd09::1"]);
    for tx in [&tx4, &tx6] {
        let mut buf = [0u8; 64];
        let got = nix::sys::socket::recv(
            tx.as_fd().as_raw_fd(),
            &mut buf,
            nix::sys::socket::MsgFlags::MSG_DONTWAIT,
        );
        assert_eq!(got, Err(nix::errno::Errno::EAGAIN), "nothing queued");
    }
}

/// RFC 792 Fragmentation Needed, built by hand (phalanx-io knows no
/// protocol and has no phalanx-wire dependency).
fn phalanx_wire_free_frag_needed(out: &mut [u8], mtu: u16, original: &[u8]) -> usize {
    out[..8].copy_from_slice(&[3, 4, 0, 0, 0, 0, 0, 0]);
    out[6..8].copy_from_slice(&mtu.to_be_bytes());
    out[8..8 + original.len()].copy_from_slice(original);
    let n = 8 + original.len();
    let sum = !fold(&out[..n]);
    out[2..4].copy_from_slice(&sum.to_be_bytes());
    n
}

fn fold(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

fn checksum(data: &[u8]) -> u16 {
    !fold(data)
}
