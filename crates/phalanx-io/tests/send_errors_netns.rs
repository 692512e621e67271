//! Sends that do not fit the path, across network namespaces (needs
//! root; fails, does not skip, without it): what the sender is told, by
//! `take_send_failures` and by the error queue.
//!
//! Two namespaces, a link of MTU 1280 (`pair`):
//!
//! ```text
//!  netns phxio-<pid>-<tag>-a                 netns phxio-<pid>-<tag>-b
//!  va 10.11.0.1/24 fd11::1/64 ═══ mtu 1280 ═══ vb 10.11.0.2/24 fd11::2/64
//! ```
//!
//! Three, a router between a link of MTU 1500 and one of 1280 (`path`):
//!
//! ```text
//!  netns …-a                    netns …-r (forwarding)                      netns …-b
//!  va 10.12.1.1 ══ mtu 1500 ══ ra 10.12.1.2   rb 10.12.2.1 ══ mtu 1280 ══ vb 10.12.2.2
//!     fd12:1::1                   fd12:1::2      fd12:2::1                   fd12:2::2
//!  default via r                                                         default via r
//! ```
// A panic is the failure report in a test.
#![allow(clippy::unwrap_used)]

mod common;

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use common::NetNs;
use phalanx_io::limits::DEFAULT_HEADROOM;
use phalanx_io::path_mtu::route_mtu;
use phalanx_io::poll::{Interest, PollSet};
use phalanx_io::raw::{RawEspConfig, RawEspSocket};
use phalanx_io::udp::{UdpConfig, UdpSocket};
use phalanx_io::{ErrorOrigin, PacketBatch, PacketMeta, SocketError};

/// The two namespaces of `pair`, their link's MTU 1280 on both ends.
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
        (&a, "va", "10.11.0.1/24", "fd11::1/64"),
        (&b, "vb", "10.11.0.2/24", "fd11::2/64"),
    ] {
        ns.ip(&["link", "set", dev, "mtu", "1280", "up"]);
        ns.ip(&["addr", "add", v4, "dev", dev]);
        ns.ip(&["addr", "add", v6, "dev", dev, "nodad"]);
    }
    (a, b)
}

fn udp(ns: &NetNs, bind: &str, gso: bool) -> UdpSocket {
    let mut config = UdpConfig::new(bind.parse().unwrap());
    (config.gro, config.gso, config.nonblocking) = (false, gso, true);
    ns.run(|| UdpSocket::bind(&config)).unwrap()
}

/// Datagrams to `to` of `sizes`, each starting with its index.
fn datagrams(to: SocketAddr, sizes: &[usize]) -> PacketBatch {
    let mut batch = PacketBatch::new(sizes.len(), 2048, DEFAULT_HEADROOM);
    for (i, &len) in sizes.iter().enumerate() {
        let mut data = vec![0x5a; len];
        data[..2].copy_from_slice(&(i as u16).to_be_bytes());
        let meta = PacketMeta {
            remote: to,
            ..PacketMeta::default()
        };
        batch.push(&data, meta).unwrap();
    }
    batch
}

/// The indices of the datagrams `rx` receives within a second (or
/// until `want` arrived).
fn received(rx: &mut UdpSocket, want: usize) -> Vec<u16> {
    let mut got = Vec::new();
    let mut batch = PacketBatch::new(16, 2048, DEFAULT_HEADROOM);
    let deadline = Instant::now() + Duration::from_secs(1);
    while got.len() < want && Instant::now() < deadline {
        batch.clear();
        match rx.recv_batch(&mut batch) {
            Ok(_) => got.extend(batch.iter().map(|(p, _)| u16::from_be_bytes([p[0], p[1]]))),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(e) => panic!("recv_batch: {e}"),
        }
    }
    got
}

/// The refusals of the last send: (packets, errno).
fn failures(tx: &mut UdpSocket) -> Vec<(std::ops::Range<usize>, i32)> {
    let mut got = Vec::new();
    tx.take_send_failures(|f| got.push((f.packets(), f.errno)));
    got
}

/// A GSO message whose segments exceed the path MTU is refused with
/// `EINVAL`; its datagrams go again one by one: the 1400-byte ones are
/// refused with `EMSGSIZE`, each reported with its index, the 1000-byte
/// one that closed the message goes out, and GSO stays on for the next
/// run of 1000-byte datagrams.
///
/// ```text
///  index  0    1    2    3    4    5    6    7
///  size   1000 1000 1400 1400 1400 1000 1000 1000
///  GSO    [ ok    ] [ EINVAL: retried alone  ] [ ok    ]
///  alone            EMSG EMSG EMSG sent
/// ```
fn gso_shrinking_path(tag: &str, from: &str, to: &str) {
    let (a, b) = pair(tag);
    let mut tx = udp(&a, from, true);
    let mut rx = udp(&b, to, false);
    assert!(tx.gso_enabled(), "kernel with UDP GSO (4.18+)");
    let sizes = [1000, 1000, 1400, 1400, 1400, 1000, 1000, 1000];
    let batch = datagrams(rx.local_addr().unwrap(), &sizes);
    assert_eq!(tx.send_batch(&batch).unwrap(), 8, "all consumed");
    assert_eq!(failures(&mut tx), vec![(2..5, libc::EMSGSIZE)]);
    assert!(tx.gso_enabled(), "the path, not GSO, was the problem");
    let stats = tx.stats();
    assert_eq!(
        (stats.gso_refusals, stats.gso_messages, stats.packets_sent),
        (0, 2, 5)
    );
    assert_eq!((stats.send_dropped, stats.send_too_big), (3, 3));
    let mut got = received(&mut rx, 5);
    got.sort_unstable();
    assert_eq!(got, vec![0, 1, 5, 6, 7]);
}

#[test]
fn gso_over_a_shrunk_ipv4_path_reports_each_datagram_too_big() {
    gso_shrinking_path("gso4", "10.11.0.1:0", "10.11.0.2:0");
}

#[test]
fn gso_over_a_shrunk_ipv6_path_reports_each_datagram_too_big() {
    gso_shrinking_path("gso6", "[fd11::1]:0", "[fd11::2]:0");
}

/// The three namespaces of `path`: a, r, b.
fn path(tag: &str) -> (NetNs, NetNs, NetNs) {
    let [a, r, b] = ["a", "r", "b"].map(|n| NetNs::create(&format!("{tag}-{n}")));
    a.ip(&[
        "link",
        "add",
        "va",
        "type",
        "veth",
        "peer",
        "name",
        "ra",
        "netns",
        r.name(),
    ]);
    b.ip(&[
        "link",
        "add",
        "vb",
        "type",
        "veth",
        "peer",
        "name",
        "rb",
        "netns",
        r.name(),
    ]);
    for (ns, dev, mtu, v4, v6) in [
        (&a, "va", "1500", "10.12.1.1/24", "fd12:1::1/64"),
        (&r, "ra", "1500", "10.12.1.2/24", "fd12:1::2/64"),
        (&r, "rb", "1280", "10.12.2.1/24", "fd12:2::1/64"),
        (&b, "vb", "1280", "10.12.2.2/24", "fd12:2::2/64"),
    ] {
        ns.ip(&["link", "set", dev, "mtu", mtu, "up"]);
        ns.ip(&["addr", "add", v4, "dev", dev]);
        ns.ip(&["addr", "add", v6, "dev", dev, "nodad"]);
    }
    for (ns, v4, v6) in [
        (&a, "10.12.1.2", "fd12:1::2"),
        (&b, "10.12.2.1", "fd12:2::1"),
    ] {
        ns.ip(&["route", "add", "default", "via", v4]);
        ns.ip(&["-6", "route", "add", "default", "via", v6]);
    }
    r.exec(&[
        "sysctl",
        "-qw",
        "net.ipv4.ip_forward=1",
        "net.ipv6.conf.all.forwarding=1",
    ]);
    (a, r, b)
}

/// The first bytes of every ESP-shaped payload sent here: SPI 0x00001001,
/// sequence number 1 (RFC 4303 §2), then 8 bytes of IV-like data.
const ESP_HEAD: [u8; 16] = [
    0x00, 0x00, 0x10, 0x01, 0x00, 0x00, 0x00, 0x01, 0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
];

/// One ESP-shaped packet of `len` bytes to `to`.
fn esp(to: SocketAddr, len: usize) -> PacketBatch {
    let mut batch = PacketBatch::new(1, 2048, DEFAULT_HEADROOM);
    let mut data = vec![0x5a; len];
    data[..ESP_HEAD.len()].copy_from_slice(&ESP_HEAD);
    let meta = PacketMeta {
        remote: to,
        ..PacketMeta::default()
    };
    batch.push(&data, meta).unwrap();
    batch
}

/// What `recv_errors` hands out within two seconds, until `want` came.
fn queued_errors(
    mut recv: impl FnMut(&mut dyn FnMut(SocketError)) -> io::Result<usize>,
    want: usize,
) -> Vec<SocketError> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    while got.len() < want && Instant::now() < deadline {
        let n = recv(&mut |e| got.push(e)).unwrap();
        if n == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    got
}

/// Waits (two seconds at most) until `poll` reports an error on `socket`:
/// its error queue holds an entry.
fn wait_for_pollerr(socket: &impl AsFd) {
    let mut set = PollSet::with_capacity(1);
    // POLLERR is reported whatever was asked for.
    let token = set.add(socket.as_fd(), Interest::READ);
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        set.wait(Some(Duration::from_millis(100))).unwrap();
        if set.readiness(token).error {
            return;
        }
    }
    panic!("no error queued within two seconds");
}

/// The one error queued, which must be a local `EMSGSIZE` with the MTU
/// 1280 about a packet to `to`.
fn assert_local_too_big(errors: &[SocketError], to: IpAddr) {
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = errors[0];
    assert_eq!(
        (e.origin, e.errno, e.info),
        (ErrorOrigin::Local, libc::EMSGSIZE, 1280)
    );
    assert_eq!((e.icmp_type, e.icmp_code), (0, 0));
    assert_eq!(e.destination.map(|d| d.ip()), Some(to));
    assert_eq!((e.offender, e.payload()), (None, &[][..]));
}

/// (a) A datagram larger than the link's MTU fails locally: the send
/// reports `EMSGSIZE` for its index, the error queue the MTU.
fn udp_local_too_big(tag: &str, from: &str, to: &str) {
    let (a, b) = pair(tag);
    let mut tx = udp(&a, from, false);
    let rx = udp(&b, to, false);
    let to = rx.local_addr().unwrap();
    assert_eq!(tx.send_batch(&esp(to, 1400)).unwrap(), 1);
    assert_eq!(failures(&mut tx), vec![(0..1, libc::EMSGSIZE)]);
    let errors = queued_errors(|f| tx.recv_errors(8, f), 1);
    assert_local_too_big(&errors, to.ip());
    // ip_local_error takes the connected port (none: 0), ipv6_local_error
    // the flow's.
    let port = errors[0].destination.unwrap().port();
    assert_eq!(port, if to.is_ipv6() { to.port() } else { 0 });
    assert_eq!(tx.recv_errors(8, |_| {}).unwrap(), 0, "drained");
}

#[test]
fn an_ipv4_datagram_above_the_link_mtu_is_refused_with_the_mtu() {
    udp_local_too_big("big4", "10.11.0.1:0", "10.11.0.2:0");
}

#[test]
fn an_ipv6_datagram_above_the_link_mtu_is_refused_with_the_mtu() {
    udp_local_too_big("big6", "[fd11::1]:0", "[fd11::2]:0");
}

fn raw(ns: &NetNs, bind: &str) -> RawEspSocket {
    let mut config = RawEspConfig::new(bind.parse().unwrap());
    config.nonblocking = true;
    ns.run(|| RawEspSocket::open(&config)).unwrap()
}

#[test]
fn a_raw_esp_packet_above_the_link_mtu_is_refused_with_the_mtu() {
    let (a, _b) = pair("bigraw");
    for (bind, to) in [("0.0.0.0", "10.11.0.2"), ("::", "fd11::2")] {
        let mut tx = raw(&a, bind);
        let to: IpAddr = to.parse().unwrap();
        let batch = esp(SocketAddr::new(to, 0), 1400);
        assert_eq!(tx.send_batch(&batch).unwrap(), 1);
        let mut refused = Vec::new();
        tx.take_send_failures(|f| refused.push(f));
        assert_eq!(refused.len(), 1);
        assert_eq!(
            (refused[0].packets(), refused[0].errno),
            (0..1, libc::EMSGSIZE)
        );
        assert_local_too_big(&queued_errors(|f| tx.recv_errors(8, f), 1), to);
        assert_eq!(tx.stats().send_too_big, 1);
    }
}

/// The ICMP error r sent about a 1400-byte packet to `to`: from r's
/// address towards a, Fragmentation Needed (IPv4, RFC 1191 §4) or Packet
/// Too Big (IPv6, RFC 4443 §3.2) with the MTU 1280 of r's link to b,
/// quoting the packet from its ESP header on.
fn assert_too_big_from_r(errors: &[SocketError], to: SocketAddr) {
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = errors[0];
    let (origin, icmp_type, icmp_code, r) = if to.is_ipv6() {
        (ErrorOrigin::Icmp6, 2, 0, "fd12:1::2")
    } else {
        (ErrorOrigin::Icmp, 3, 4, "10.12.1.2")
    };
    assert_eq!(
        (e.origin, e.icmp_type, e.icmp_code),
        (origin, icmp_type, icmp_code)
    );
    assert_eq!((e.errno, e.info), (libc::EMSGSIZE, 1280));
    assert_eq!(e.destination, Some(to));
    assert_eq!(e.offender, Some(r.parse().unwrap()));
    assert_eq!(e.payload(), &ESP_HEAD[..], "the payload, SPI first");
}

/// (b) r cannot forward a's 1400-byte datagram to b: a's error queue gets
/// r's ICMP error, a's next receive call the pending error (`Ok(0)`),
/// and (c) the kernel has learned the path MTU: the next 1400-byte
/// datagram fails locally.
fn udp_icmp_too_big(tag: &str, from: &str, to: &str) {
    let (a, _r, b) = path(tag);
    let mut tx = udp(&a, from, false);
    let rx = udp(&b, to, false);
    let to = rx.local_addr().unwrap();
    let path_mtu = || a.run(|| route_mtu(to.ip(), None)).unwrap();
    assert_eq!(path_mtu(), 1500, "a's link");
    assert_eq!(tx.send_batch(&esp(to, 1400)).unwrap(), 1);
    assert_eq!(failures(&mut tx), vec![], "a's link takes 1400 bytes");
    wait_for_pollerr(&tx);
    // Received before the error queue is read (which would clear it):
    // the pending error.
    let mut batch = PacketBatch::new(4, 2048, DEFAULT_HEADROOM);
    assert_eq!(tx.recv_batch(&mut batch).unwrap(), 0, "the pending error");
    assert_eq!(tx.stats().recv_pending_errors, 1);
    let again = tx.recv_batch(&mut batch).unwrap_err();
    assert_eq!(again.kind(), io::ErrorKind::WouldBlock, "returned once");
    assert_too_big_from_r(&queued_errors(|f| tx.recv_errors(8, f), 1), to);
    // (c)
    assert_eq!(path_mtu(), 1280, "learned from r's error");
    assert_eq!(tx.send_batch(&esp(to, 1400)).unwrap(), 1);
    assert_eq!(failures(&mut tx), vec![(0..1, libc::EMSGSIZE)]);
    assert_local_too_big(&queued_errors(|f| tx.recv_errors(8, f), 1), to.ip());
}

#[test]
fn a_router_reports_fragmentation_needed_and_the_path_mtu_is_learned() {
    udp_icmp_too_big("icmp4", "10.12.1.1:0", "10.12.2.2:0");
}

#[test]
fn a_router_reports_packet_too_big_and_the_path_mtu_is_learned() {
    udp_icmp_too_big("icmp6", "[fd12:1::1]:0", "[fd12:2::2]:0");
}

/// (b) and (c) for raw ESP sockets: the ICMP error's data is the ESP
/// header on, the quoted IP header skipped.
#[test]
fn raw_esp_sockets_get_the_routers_error_from_the_esp_header_on() {
    let (a, _r, _b) = path("icmpraw");
    for (bind, to) in [("0.0.0.0", "10.12.2.2"), ("::", "fd12:2::2")] {
        let mut tx = raw(&a, bind);
        let to = SocketAddr::new(to.parse().unwrap(), 0);
        assert_eq!(tx.send_batch(&esp(to, 1400)).unwrap(), 1);
        assert_eq!(tx.stats().send_dropped, 0, "a's link takes 1400 bytes");
        wait_for_pollerr(&tx);
        let mut batch = PacketBatch::new(4, 2048, DEFAULT_HEADROOM);
        assert_eq!(tx.recv_batch(&mut batch).unwrap(), 0, "the pending error");
        assert_eq!(tx.stats().recv_pending_errors, 1);
        assert_too_big_from_r(&queued_errors(|f| tx.recv_errors(8, f), 1), to);
        assert_eq!(tx.send_batch(&esp(to, 1400)).unwrap(), 1);
        assert_eq!(tx.stats().send_too_big, 1, "the path MTU was learned");
        assert_local_too_big(&queued_errors(|f| tx.recv_errors(8, f), 1), to.ip());
    }
}

/// The payloads `rx` receives within two seconds (or until `want` came).
fn received_whole(
    rx: &mut dyn FnMut(&mut PacketBatch) -> io::Result<usize>,
    want: usize,
) -> Vec<(Vec<u8>, PacketMeta)> {
    let mut got = Vec::new();
    let mut batch = PacketBatch::new(4, 2048, DEFAULT_HEADROOM);
    let deadline = Instant::now() + Duration::from_secs(2);
    while got.len() < want && Instant::now() < deadline {
        batch.clear();
        match rx(&mut batch) {
            Ok(_) => got.extend(batch.iter().map(|(p, m)| (p.to_vec(), *m))),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(e) => panic!("recv_batch: {e}"),
        }
    }
    got
}

/// A 1400-byte ESP-shaped payload.
fn esp_payload() -> Vec<u8> {
    let mut payload = vec![0x5a; 1400];
    payload[..ESP_HEAD.len()].copy_from_slice(&ESP_HEAD);
    payload
}

/// A datagram above the link's MTU sent fragmentable goes out in
/// fragments (with its TOS) and arrives whole, reassembled by b; the
/// socket refuses the next one of that size again.
fn udp_fragmentable(tag: &str, from: &str, to: &str) {
    let (a, b) = pair(tag);
    let mut tx = udp(&a, from, false);
    let mut rx = udp(&b, to, false);
    let to = rx.local_addr().unwrap();
    let packets_before = b.link_counter("vb", "rx_packets");
    let meta = PacketMeta {
        remote: to,
        tos: 0xb8,
        ..PacketMeta::default()
    };
    tx.send_fragmentable(&esp_payload(), meta).unwrap();
    let got = received_whole(&mut |batch| rx.recv_batch(batch), 1);
    assert_eq!(got.len(), 1, "one datagram, reassembled");
    assert_eq!(
        (got[0].0.as_slice(), got[0].1.tos),
        (esp_payload().as_slice(), 0xb8)
    );
    let fragments = b.link_counter("vb", "rx_packets") - packets_before;
    assert!(
        fragments >= 2,
        "it crossed the link in fragments: {fragments} packets"
    );
    assert_eq!(tx.stats().packets_sent, 1);
    assert_eq!(tx.send_batch(&esp(to, 1400)).unwrap(), 1);
    assert_eq!(
        failures(&mut tx),
        vec![(0..1, libc::EMSGSIZE)],
        "\"do\" again"
    );
}

#[test]
fn a_fragmentable_ipv4_datagram_arrives_whole() {
    udp_fragmentable("frag4", "10.11.0.1:0", "10.11.0.2:0");
}

/// A dual-stack socket sends to IPv4 peers through the IPv4 level, whose
/// path-MTU discovery it sets too.
#[test]
fn a_dual_stack_socket_sends_ipv4_fragmentable_and_refuses_too_big() {
    udp_fragmentable("frag4d", "[::]:0", "10.11.0.2:0");
}

#[test]
fn a_fragmentable_ipv6_datagram_arrives_whole() {
    udp_fragmentable("frag6", "[fd11::1]:0", "[fd11::2]:0");
}

/// The same for raw ESP sockets of both families: b's raw socket sees
/// the reassembled ESP payload.
#[test]
fn a_fragmentable_raw_esp_packet_arrives_whole() {
    let (a, b) = pair("fragraw");
    for (bind, to) in [("0.0.0.0", "10.11.0.2"), ("::", "fd11::2")] {
        let mut tx = raw(&a, bind);
        let mut rx = raw(&b, bind);
        let to = SocketAddr::new(to.parse().unwrap(), 0);
        let meta = PacketMeta {
            remote: to,
            ..PacketMeta::default()
        };
        tx.send_fragmentable(&esp_payload(), meta).unwrap();
        let got = received_whole(&mut |batch| rx.recv_batch(batch), 1);
        assert_eq!(got.len(), 1, "{bind}: one ESP packet, reassembled");
        assert_eq!(got[0].0, esp_payload());
        assert_eq!(tx.send_batch(&esp(to, 1400)).unwrap(), 1);
        assert_eq!(tx.stats().send_too_big, 1, "{bind}: \"do\" again");
    }
}
