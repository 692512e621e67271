//! `AF_PACKET` sockets with a `TPACKET_V3` ring, in fresh network
//! namespaces (needs root; fails, does not skip, without it).
//!
//! ```text
//!  netns phxio-<pid>-pkt-lo*:  UDP 127.0.0.1 ──▶ lo ──▶ PacketSocket(lo)
//!
//!  netns phxio-<pid>-pkt-a                         netns phxio-<pid>-pkt-b ("cluster node")
//!  pa0 02:00:00:00:00:0a 192.0.2.1/24 ═══ veth ═══ pb0 02:00:00:00:00:0b, no address
//!  kernel ARPs for 192.0.2.100                     PacketSocket(pb0, promiscuous) answers for
//!  PacketSocket(pa0) sees what B sends             192.0.2.100 at virtual MAC 02:00:5e:10:00:01
//! ```
// A panic is the failure report in a test.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::UdpSocket;
use std::os::fd::AsFd;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::NetNs;
use phalanx_io::packet::{FrameMeta, PacketSocket, PacketSocketConfig, PacketType};
use phalanx_io::poll::{Interest, PollSet};

/// A received frame, copied out of the ring.
#[derive(Debug)]
struct Frame {
    data: Vec<u8>,
    meta: FrameMeta,
}

impl Frame {
    fn ethertype(&self) -> u16 {
        u16::from_be_bytes([self.data[12], self.data[13]])
    }

    /// The UDP payload of an untagged IPv4/UDP frame to `port`.
    fn udp_payload_to(&self, port: u16) -> Option<&[u8]> {
        let d = &self.data;
        let ihl = usize::from(d.get(14)? & 0x0f) * 4;
        let udp = d.get(14 + ihl..)?;
        let is_udp = self.ethertype() == 0x0800 && d[14 + 9] == 17;
        (is_udp && u16::from_be_bytes([udp[2], udp[3]]) == port).then(|| &udp[8..])
    }
}

fn small_ring(interface: &str) -> PacketSocketConfig {
    let mut config = PacketSocketConfig::new(interface);
    config.block_size = 64 << 10;
    config.block_count = 8;
    config
}

fn open(ns: &NetNs, config: &PacketSocketConfig) -> PacketSocket {
    ns.run(|| PacketSocket::open(config))
        .unwrap_or_else(|e| panic!("open {}: {e}", config.interface))
}

/// Receives until `done` holds for what was received, or `within` passes.
fn collect_until(
    socket: &mut PacketSocket,
    within: Duration,
    mut done: impl FnMut(&[Frame]) -> bool,
) -> Vec<Frame> {
    let mut frames = Vec::new();
    let deadline = Instant::now() + within;
    while !done(&frames) && Instant::now() < deadline {
        let mut set = PollSet::with_capacity(1);
        set.add(socket.as_fd(), Interest::READ);
        set.wait(Some(Duration::from_millis(20))).unwrap();
        socket.recv_batch(|data, meta| {
            frames.push(Frame {
                data: data.to_vec(),
                meta,
            })
        });
    }
    frames
}

/// Sends `count` datagrams `phx-<i>` to 127.0.0.1 inside `ns`; returns
/// the destination port.
fn send_local_datagrams(ns: &NetNs, count: usize, len: usize) -> u16 {
    ns.run(|| {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = rx.local_addr().unwrap().port();
        for i in 0..count {
            let mut payload = format!("phx-{i}").into_bytes();
            payload.resize(len.max(payload.len()), b'.');
            tx.send_to(&payload, ("127.0.0.1", port)).unwrap();
        }
        port
    })
}

fn datagrams_to(frames: &[Frame], port: u16) -> Vec<&Frame> {
    frames
        .iter()
        .filter(|f| f.udp_payload_to(port).is_some())
        .collect()
}

/// With the default ring (64 × 256 KiB) on `lo`: each datagram shows up
/// once, as HOST, whole and in order; our own sends are not read back.
#[test]
fn loopback_frames_are_seen_once_as_host() {
    let ns = NetNs::create("pkt-lo");
    let mut socket = open(&ns, &PacketSocketConfig::new("lo"));
    assert_eq!(socket.interface(), "lo");
    let port = send_local_datagrams(&ns, 20, 0);
    let frames = collect_until(&mut socket, Duration::from_secs(3), |f| {
        datagrams_to(f, port).len() >= 20
    });
    // Anything late (a second, outgoing copy) would arrive within a block
    // timeout; wait ten.
    let mut late = collect_until(&mut socket, Duration::from_millis(20), |_| false);
    let mut frames = frames;
    frames.append(&mut late);
    let seen = datagrams_to(&frames, port);
    assert_eq!(seen.len(), 20, "each datagram exactly once: {seen:#?}");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    for (i, frame) in seen.iter().enumerate() {
        let payload = frame.udp_payload_to(port).unwrap();
        assert_eq!(payload, format!("phx-{i}").as_bytes(), "in order");
        assert_eq!(frame.meta.packet_type, PacketType::HOST);
        assert_eq!(frame.meta.len as usize, frame.data.len());
        assert_eq!(frame.data.len(), 14 + 20 + 8 + payload.len());
        assert!(!frame.meta.truncated && frame.meta.vlan.is_none());
        assert_eq!(&frame.data[..12], &[0; 12], "lo has all-zero addresses");
        assert!(now.abs_diff(frame.meta.timestamp) < Duration::from_secs(60));
    }
    let stats = socket.stats().unwrap();
    assert!(stats.frames_received >= 20 && stats.blocks_received >= 1);
    assert!(stats.kernel_packets >= 20, "{stats:?}");
    assert_eq!(
        (stats.ring_drops, stats.truncated, stats.malformed_blocks),
        (0, 0, 0)
    );
}

/// With `ignore_outgoing` off, `lo` shows each datagram twice: leaving
/// (OUTGOING) and arriving (HOST). This is what the default turns off.
#[test]
fn outgoing_frames_are_seen_when_asked_for() {
    let ns = NetNs::create("pkt-lo-out");
    let mut config = small_ring("lo");
    config.ignore_outgoing = false;
    let mut socket = open(&ns, &config);
    let port = send_local_datagrams(&ns, 5, 0);
    let frames = collect_until(&mut socket, Duration::from_secs(3), |f| {
        datagrams_to(f, port).len() >= 10
    });
    let seen = datagrams_to(&frames, port);
    assert_eq!(seen.len(), 10, "{seen:#?}");
    let outgoing = seen
        .iter()
        .filter(|f| f.meta.packet_type == PacketType::OUTGOING)
        .count();
    let host = seen
        .iter()
        .filter(|f| f.meta.packet_type == PacketType::HOST)
        .count();
    assert_eq!((outgoing, host), (5, 5));
}

/// A frame longer than a block is cut and flagged; one longer than
/// `frame_size` but shorter than a block is not (TPACKET_V3 packs frames).
#[test]
fn frames_longer_than_a_block_are_truncated_and_counted() {
    let ns = NetNs::create("pkt-lo-trunc");
    let mut config = small_ring("lo");
    config.block_size = 4096;
    config.frame_size = 2048;
    let mut socket = open(&ns, &config);
    let port = send_local_datagrams(&ns, 1, 3000);
    let big_port = send_local_datagrams(&ns, 1, 6000);
    let frames = collect_until(&mut socket, Duration::from_secs(3), |f| {
        !datagrams_to(f, port).is_empty() && !datagrams_to(f, big_port).is_empty()
    });
    let medium = datagrams_to(&frames, port)[0];
    assert!(!medium.meta.truncated);
    assert_eq!(medium.data.len(), 14 + 28 + 3000);
    let big = datagrams_to(&frames, big_port)[0];
    assert!(big.meta.truncated, "{:?}", big.meta);
    assert_eq!(big.meta.len as usize, 14 + 28 + 6000);
    assert!(big.data.len() < 4096 && big.data.len() > 3000);
    assert_eq!(socket.stats().unwrap().truncated, 1);
}

/// A ring nobody reads fills up: the kernel drops and freezes, counts
/// both, and the ring works again once blocks come back.
#[test]
fn a_full_ring_drops_counts_and_recovers() {
    let ns = NetNs::create("pkt-lo-full");
    let mut config = small_ring("lo");
    config.block_size = 4096;
    config.block_count = 2;
    let mut socket = open(&ns, &config);
    send_local_datagrams(&ns, 300, 200);
    std::thread::sleep(Duration::from_millis(20));
    let stats = socket.stats().unwrap();
    assert!(stats.ring_drops > 0, "{stats:?}");
    assert!(stats.ring_freezes > 0, "{stats:?}");
    assert!(stats.kernel_packets >= 300, "{stats:?}");
    let drained = collect_until(&mut socket, Duration::from_millis(50), |_| false);
    assert!(!drained.is_empty() && drained.len() < 300);
    let port = send_local_datagrams(&ns, 3, 0);
    let frames = collect_until(&mut socket, Duration::from_secs(3), |f| {
        datagrams_to(f, port).len() >= 3
    });
    assert_eq!(datagrams_to(&frames, port).len(), 3, "received again");
}

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];
const VIRTUAL_MAC: [u8; 6] = [2, 0, 0x5e, 0x10, 0, 1];
const IP_A: [u8; 4] = [192, 0, 2, 1];
const VIRTUAL_IP: [u8; 4] = [192, 0, 2, 100];

/// Two namespaces joined by a veth pair, as drawn in the module doc.
struct Pair {
    a: NetNs,
    b: NetNs,
}

impl Pair {
    /// `tag` names the namespaces (`<tag>-a`, `<tag>-b`): the tests of
    /// this file run in parallel in one process, and namespace names only
    /// tell processes apart.
    fn create(tag: &str) -> Pair {
        let a = NetNs::create(&format!("{tag}-a"));
        let b = NetNs::create(&format!("{tag}-b"));
        a.ip(&[
            "link",
            "add",
            "pa0",
            "type",
            "veth",
            "peer",
            "name",
            "pb0",
            "netns",
            b.name(),
        ]);
        a.ip(&["link", "set", "pa0", "address", "02:00:00:00:00:0a", "up"]);
        a.ip(&["addr", "add", "192.0.2.1/24", "dev", "pa0"]);
        b.ip(&["link", "set", "pb0", "address", "02:00:00:00:00:0b", "up"]);
        Pair { a, b }
    }

    fn b_flags(&self) -> u32 {
        let text = self.b.exec(&["cat", "/sys/class/net/pb0/flags"]);
        u32::from_str_radix(text.trim().trim_start_matches("0x"), 16).unwrap()
    }
}

/// Whether `f` is an ARP request (RFC 826, Ethernet/IPv4) for `target`.
fn is_arp_request_for(f: &Frame, target: [u8; 4]) -> bool {
    let d = &f.data;
    f.ethertype() == 0x0806 && d.len() >= 42 && d[20..22] == [0, 1] && d[38..42] == target
}

/// An ARP reply frame (RFC 826): `ip` is at `mac`, to the requester.
fn arp_reply(mac: [u8; 6], ip: [u8; 4], to_mac: [u8; 6], to_ip: [u8; 4]) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&to_mac);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 2]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&to_mac);
    f.extend_from_slice(&to_ip);
    f.resize(60, 0);
    f
}

/// The cluster node's part: promiscuous membership while open, the
/// neighbour's ARP request seen, answered for the virtual address with
/// the virtual MAC (the neighbour's kernel takes the answer), and the
/// traffic that follows, to the virtual MAC, seen as OTHER_HOST.
#[test]
fn a_node_answers_arp_for_the_virtual_mac_and_sees_its_traffic() {
    let pair = Pair::create("pkt-arp");
    assert_eq!(pair.b_flags() & libc::IFF_PROMISC as u32, 0);
    let mut config = small_ring("pb0");
    config.promiscuous = true;
    let mut node = open(&pair.b, &config);
    assert_ne!(
        pair.b_flags() & libc::IFF_PROMISC as u32,
        0,
        "promiscuous while open"
    );

    // A's kernel resolves 192.0.2.100 before sending; the datagram waits.
    pair.a.run(|| {
        let tx = UdpSocket::bind("192.0.2.1:0").unwrap();
        tx.send_to(b"to the cluster", "192.0.2.100:9").unwrap();
    });
    let frames = collect_until(&mut node, Duration::from_secs(3), |f| {
        f.iter().any(|f| is_arp_request_for(f, VIRTUAL_IP))
    });
    let request = frames
        .iter()
        .find(|f| is_arp_request_for(f, VIRTUAL_IP))
        .expect("A's ARP request");
    assert_eq!(request.meta.packet_type, PacketType::BROADCAST);
    assert_eq!(&request.data[6..12], &MAC_A);

    node.send(&arp_reply(VIRTUAL_MAC, VIRTUAL_IP, MAC_A, IP_A))
        .unwrap();
    let frames = collect_until(&mut node, Duration::from_secs(3), |f| {
        !datagrams_to(f, 9).is_empty()
    });
    let datagram = datagrams_to(&frames, 9)[0];
    assert_eq!(datagram.udp_payload_to(9).unwrap(), b"to the cluster");
    assert_eq!(&datagram.data[..6], &VIRTUAL_MAC);
    assert_eq!(datagram.meta.packet_type, PacketType::OTHER_HOST);
    let neighbour = pair.a.ip(&["neigh", "show", "192.0.2.100", "dev", "pa0"]);
    assert!(neighbour.contains("02:00:5e:10:00:01"), "{neighbour}");
    let stats = node.stats().unwrap();
    assert_eq!(
        (stats.frames_sent, stats.send_errors, stats.ring_drops),
        (1, 0, 0)
    );

    drop(node);
    assert_eq!(
        pair.b_flags() & libc::IFF_PROMISC as u32,
        0,
        "membership left on close"
    );
}

/// A local experimental EtherType (IEEE 802 "Local Experimental 1").
const EXPERIMENTAL: [u8; 2] = [0x88, 0xb5];

fn experimental_frame(dst: [u8; 6], tag: Option<u16>, index: u8) -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&VIRTUAL_MAC);
    if let Some(tci) = tag {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&EXPERIMENTAL);
    f.extend_from_slice(&[index; 46]);
    f
}

/// `send_batch` delivers every frame in order; a frame the kernel refuses
/// (longer than the MTU: `EMSGSIZE`) is counted and skipped; an 802.1Q
/// tag arrives as metadata, taken off the frame by the receiving kernel.
#[test]
fn batches_arrive_in_order_and_tags_become_metadata() {
    let pair = Pair::create("pkt-batch");
    let mut node = open(&pair.b, &small_ring("pb0"));
    let mut peer = open(&pair.a, &small_ring("pa0"));
    let frames: Vec<Vec<u8>> = (0..10)
        .map(|i| experimental_frame(MAC_A, None, i))
        .collect();
    let mut batch: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let oversized = experimental_frame(MAC_A, None, 0xee).repeat(50);
    batch.insert(5, &oversized);
    assert_eq!(node.send_batch(batch).unwrap(), 10);
    node.send(&experimental_frame(MAC_A, Some(0xa02a), 99))
        .unwrap();

    let ours = |f: &Frame| f.data[6..12] == VIRTUAL_MAC;
    let got = collect_until(&mut peer, Duration::from_secs(3), |f| {
        f.iter().filter(|f| ours(f)).count() >= 11
    });
    let got: Vec<&Frame> = got.iter().filter(|f| ours(f)).collect();
    assert_eq!(got.len(), 11);
    for (i, frame) in got[..10].iter().enumerate() {
        assert_eq!(frame.data, frames[i], "frame {i} in order, unchanged");
        assert_eq!(frame.meta.packet_type, PacketType::HOST);
        assert_eq!(frame.meta.vlan, None);
    }
    let tagged = got[10];
    assert_eq!(tagged.meta.vlan, Some(0xa02a));
    assert_eq!(
        tagged.data,
        experimental_frame(MAC_A, None, 99),
        "tag taken off"
    );
    let stats = node.stats().unwrap();
    assert_eq!((stats.frames_sent, stats.send_errors), (11, 1));
}
