//! TUN devices in network namespaces (needs root; fails, does not skip,
//! without it).
//!
//! ```text
//!  netns phxio-<pid>-<tag>a                     netns phxio-<pid>-<tag>b
//!  client ── phxa 10.201.0.1/24 ═══ forwarder ═══ phxb 10.201.0.2/24 ── server :5201
//!                          (TunDevice::recv_batch → TunDevice::send_batch, both ways)
//! ```
//! The forwarder copies IP packets unchanged between two TUN devices, one
//! per namespace, so a TCP connection between the namespaces runs through
//! the batch API in both directions.
// A panic is the failure report in a test.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket as StdUdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::NetNs;
use phalanx_io::limits::DEFAULT_HEADROOM;
use phalanx_io::poll::{Interest, PollSet, Waker};
use phalanx_io::tun::{TunConfig, TunDevice};
use phalanx_io::udp::{UdpConfig, UdpSocket};
use phalanx_io::{PacketBatch, PacketMeta, TunStats};

const MTU: u16 = 1500;
const TRANSFER: usize = 8 << 20;

fn tun_config(name: &str, addr: [u8; 4], offload: bool) -> TunConfig {
    let mut config = TunConfig::new(name);
    config.mtu = Some(MTU);
    config.offload = offload;
    config.ipv4 = Some((addr.into(), 24));
    config
}

/// Room for a whole GRO super-packet behind each packet, as the daemon's
/// TUN-bound batches will have.
fn big_batch() -> PacketBatch {
    PacketBatch::new(128, 65_536, DEFAULT_HEADROOM)
}

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(7) ^ (i >> 11)) as u8
}

/// What the forwarder saw.
struct Forwarded {
    a: TunStats,
    b: TunStats,
    longest: usize,
}

/// Moves packets between `a` and `b` until `stop` is woken; gives the
/// devices back (closing them would delete the interfaces).
fn forward(
    mut a: TunDevice,
    mut b: TunDevice,
    stop: Arc<Waker>,
    done: Arc<AtomicBool>,
) -> (Forwarded, TunDevice, TunDevice) {
    let (mut batch, mut longest) = (big_batch(), 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done.load(Ordering::Relaxed) && Instant::now() < deadline {
        let mut set = PollSet::with_capacity(3);
        let (ta, tb) = (
            set.add(a.as_fd(), Interest::READ),
            set.add(b.as_fd(), Interest::READ),
        );
        set.add(stop.as_fd(), Interest::READ);
        set.wait(Some(Duration::from_millis(50))).unwrap();
        let (ready_a, ready_b) = (set.readiness(ta).readable, set.readiness(tb).readable);
        drop(set);
        if ready_a {
            longest = longest.max(pump(&mut a, &mut b, &mut batch));
        }
        if ready_b {
            longest = longest.max(pump(&mut b, &mut a, &mut batch));
        }
    }
    (
        Forwarded {
            a: a.stats(),
            b: b.stats(),
            longest,
        },
        a,
        b,
    )
}

/// Drains `from` into `to`; returns the longest packet seen.
fn pump(from: &mut TunDevice, to: &mut TunDevice, batch: &mut PacketBatch) -> usize {
    let mut longest = 0;
    for _ in 0..64 {
        batch.clear();
        match from.recv_batch(batch) {
            Ok(_) => {
                longest = batch
                    .iter()
                    .map(|(p, _)| p.len())
                    .max()
                    .unwrap_or(0)
                    .max(longest);
                to.send_batch(batch).unwrap();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("recv_batch: {e}"),
        }
    }
    longest
}

/// Sends `TRANSFER` bytes over TCP from namespace a to b through the
/// forwarder; returns what the forwarder saw and phxb's `rx_packets` (the
/// writes the kernel counted).
fn tcp_through_forwarder(tag: &str, offload: bool) -> (Forwarded, u64) {
    let (ns_a, ns_b) = (
        NetNs::create(&format!("{tag}a")),
        NetNs::create(&format!("{tag}b")),
    );
    let a = ns_a
        .run(|| TunDevice::open(&tun_config("phxa", [10, 201, 0, 1], offload)))
        .unwrap();
    let b = ns_b
        .run(|| TunDevice::open(&tun_config("phxb", [10, 201, 0, 2], offload)))
        .unwrap();
    assert_eq!(a.offload(), offload);
    let listener = ns_b.run(|| TcpListener::bind("10.201.0.2:5201")).unwrap();

    let stop = Arc::new(Waker::new().unwrap());
    let done = Arc::new(AtomicBool::new(false));
    let forwarder = {
        let (stop, done) = (Arc::clone(&stop), Arc::clone(&done));
        std::thread::spawn(move || forward(a, b, stop, done))
    };
    let server = std::thread::spawn(move || receive_all(listener));

    let to: SocketAddr = "10.201.0.2:5201".parse().unwrap();
    let mut client = ns_a
        .run(|| TcpStream::connect_timeout(&to, Duration::from_secs(5)))
        .unwrap();
    client
        .set_write_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let data: Vec<u8> = (0..TRANSFER).map(pattern).collect();
    client.write_all(&data).unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    let received = server.join().unwrap();

    done.store(true, Ordering::Relaxed);
    stop.wake().unwrap();
    let (seen, a, b) = forwarder.join().unwrap();
    assert_eq!(received, Ok(TRANSFER), "every byte arrives, in order");
    let rx_b = ns_b.link_counter("phxb", "rx_packets");
    drop((a, b));
    (seen, rx_b)
}

/// Accepts one connection and checks the stream against `pattern`.
fn receive_all(listener: TcpListener) -> Result<usize, String> {
    let (mut stream, _) = listener.accept().map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    let (mut total, mut buf) = (0, vec![0u8; 1 << 16]);
    loop {
        let n = stream
            .read(&mut buf)
            .map_err(|e| format!("after {total} bytes: {e}"))?;
        if n == 0 {
            return Ok(total);
        }
        if let Some(k) = (0..n).find(|&k| buf[k] != pattern(total + k)) {
            return Err(format!("byte {} differs", total + k));
        }
        total += n;
    }
}

#[test]
fn tcp_super_packets_are_split_on_read_and_coalesced_on_write() {
    let (seen, rx_b) = tcp_through_forwarder("off", true);
    // The client's stack hands phxa TSO super-packets; recv_batch splits them.
    assert!(
        seen.a.super_packets > 0,
        "TSO super-packets read from phxa: {:?}",
        seen.a
    );
    assert!(seen.a.packets_received > seen.a.reads, "{:?}", seen.a);
    assert!(
        seen.longest <= usize::from(MTU),
        "every packet handed out fits the MTU: {}",
        seen.longest
    );
    assert_eq!(seen.a.read_dropped + seen.b.read_dropped, 0);
    // send_batch coalesced runs of the flow: the kernel counted fewer
    // packets entering phxb than the forwarder wrote.
    assert!(
        rx_b < seen.b.packets_sent,
        "GRO on write: phxb rx_packets {rx_b} vs {} packets sent",
        seen.b.packets_sent
    );
}

#[test]
fn tcp_without_offload_moves_one_packet_per_syscall() {
    let (seen, rx_b) = tcp_through_forwarder("pln", false);
    assert_eq!(seen.a.super_packets, 0);
    assert_eq!(seen.a.packets_received, seen.a.reads);
    assert!(seen.longest <= usize::from(MTU));
    assert_eq!(rx_b, seen.b.packets_sent, "one write per packet");
}

/// Receives from `tun` until `want` IPv4/UDP packets to port 9 arrived (or
/// 5 s passed); other packets (IPv6 router solicitations…) are ignored.
fn udp_packets_from(tun: &mut TunDevice, want: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut batch = big_batch();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < want && Instant::now() < deadline {
        batch.clear();
        match tun.recv_batch(&mut batch) {
            Ok(_) => got.extend(
                batch
                    .iter()
                    .map(|(p, _)| p.to_vec())
                    .filter(|p| is_udp_to_port_9(p)),
            ),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(e) => panic!("recv_batch: {e}"),
        }
    }
    got
}

fn is_udp_to_port_9(p: &[u8]) -> bool {
    p.len() >= 28 && p[0] == 0x45 && p[9] == 17 && p[22..24] == [0, 9]
}

#[test]
fn udp_gso_super_packet_from_the_kernel_comes_back_segmented() {
    let ns = NetNs::create("uso");
    let mut tun = ns
        .run(|| TunDevice::open(&tun_config("phxu", [10, 202, 0, 1], true)))
        .unwrap();
    let mut udp = ns
        .run(|| {
            let mut c = UdpConfig::new("10.202.0.1:0".parse().unwrap());
            c.gro = false;
            UdpSocket::bind(&c)
        })
        .unwrap();
    // One GSO send of 10 × 1000 bytes towards the TUN's subnet.
    let to: SocketAddr = "10.202.0.2:9".parse().unwrap();
    let mut out = PacketBatch::new(10, 2048, DEFAULT_HEADROOM);
    for i in 0..10u8 {
        out.push(
            &[i; 1000],
            PacketMeta {
                remote: to,
                ..PacketMeta::default()
            },
        )
        .unwrap();
    }
    assert_eq!(udp.send_batch(&out).unwrap(), 10);
    assert_eq!(udp.stats().gso_messages, 1);

    let got = udp_packets_from(&mut tun, 10);
    assert_eq!(got.len(), 10, "ten datagrams");
    for (i, p) in got.iter().enumerate() {
        assert_eq!(p.len(), 20 + 8 + 1000, "IPv4 + UDP + payload");
        assert!(
            p[28..].iter().all(|&b| b == i as u8),
            "datagram {i} in order"
        );
        assert_eq!(
            internet_checksum(&p[..20]),
            0,
            "valid IPv4 header checksum on segment {i}"
        );
        assert_eq!(udp_checksum(p), 0, "valid UDP checksum on segment {i}");
    }
    if tun.udp_offload() {
        assert!(
            tun.stats().super_packets >= 1,
            "USO: one read, ten packets: {:?}",
            tun.stats()
        );
    }
}

/// RFC 1071 ones'-complement sum; 0 over data that includes a valid
/// checksum.
fn internet_checksum(data: &[u8]) -> u16 {
    fold(sum_words(data))
}

fn sum_words(data: &[u8]) -> u32 {
    data.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum()
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// UDP checksum over the IPv4 pseudo-header (RFC 768), 0 when valid.
fn udp_checksum(p: &[u8]) -> u16 {
    let udp = &p[20..];
    let pseudo = sum_words(&p[12..20]) + 17 + udp.len() as u32;
    fold(pseudo + sum_words(udp))
}

#[test]
fn multi_queue_spreads_flows_over_queues() {
    let ns = NetNs::create("mq");
    let mut config = tun_config("phxm", [10, 203, 0, 1], true);
    config.multi_queue = true;
    let first = ns.run(|| TunDevice::open(&config)).unwrap();
    // Outside the namespace the name means nothing: refused, nothing created.
    let err = first.open_queue().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    let mut queues = ns.run(|| vec![first.open_queue().unwrap(), first.open_queue().unwrap()]);
    queues.insert(0, first);
    assert!(queues
        .iter()
        .all(|q| q.name().unwrap() == "phxm" && q.offload()));
    let listed = ns.exec(&["ls", "/sys/class/net/phxm/queues"]);
    assert_eq!(
        listed
            .split_whitespace()
            .filter(|q| q.starts_with("tx-"))
            .count(),
        3,
        "{listed}"
    );

    // 24 flows (distinct source ports), one datagram each.
    ns.run(|| {
        for _ in 0..24 {
            let s = StdUdpSocket::bind("10.203.0.1:0").unwrap();
            s.send_to(&[0u8; 100], "10.203.0.2:9").unwrap();
        }
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut per_queue = vec![0usize; queues.len()];
    let mut batch = big_batch();
    while per_queue.iter().sum::<usize>() < 24 && Instant::now() < deadline {
        for (q, count) in queues.iter_mut().zip(per_queue.iter_mut()) {
            batch.clear();
            if q.recv_batch(&mut batch).is_ok() {
                *count += batch.iter().filter(|(p, _)| is_udp_to_port_9(p)).count();
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        per_queue.iter().sum::<usize>(),
        24,
        "every datagram read once: {per_queue:?}"
    );
    assert!(
        per_queue.iter().filter(|&&n| n > 0).count() > 1,
        "flows spread by hash: {per_queue:?}"
    );
}

#[test]
fn packets_without_room_for_the_virtio_header_are_counted_not_written() {
    let ns = NetNs::create("hdr");
    let mut tun = ns
        .run(|| TunDevice::open(&tun_config("phxh", [10, 204, 0, 1], true)))
        .unwrap();
    let mut batch = PacketBatch::new(2, 2048, 4);
    batch.push(&[0x45; 40], PacketMeta::default()).unwrap();
    assert_eq!(tun.send_batch(&mut batch).unwrap(), 0);
    assert_eq!(tun.stats().send_dropped, 1);
    assert!(batch.is_empty(), "send_batch consumes the batch");
}
