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
