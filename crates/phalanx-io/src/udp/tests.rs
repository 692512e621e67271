//! UDP over loopback: no privileges needed.

use super::*;
use crate::limits::DEFAULT_HEADROOM;
use std::time::{Duration, Instant};

const LOOPBACK: &str = "127.0.0.1:0";

fn socket(gro: bool, gso: bool) -> UdpSocket {
    let mut config = UdpConfig::new(LOOPBACK.parse().unwrap());
    config.gro = gro;
    config.gso = gso;
    config.nonblocking = true;
    UdpSocket::bind(&config).unwrap()
}

/// A batch of `sizes.len()` datagrams to `to`, each filled with its index.
fn outgoing(to: SocketAddr, sizes: &[usize]) -> PacketBatch {
    let mut batch = PacketBatch::new(sizes.len(), 2048, DEFAULT_HEADROOM);
    for (i, &len) in sizes.iter().enumerate() {
        let mut data = vec![i as u8; len];
        if len >= 2 {
            data[..2].copy_from_slice(&(i as u16).to_be_bytes());
        }
        let meta = PacketMeta {
            remote: to,
            ..PacketMeta::default()
        };
        batch.push(&data, meta).unwrap();
    }
    batch
}

/// Receives until `want` packets arrived or 5 s passed.
fn receive(rx: &mut UdpSocket, want: usize, batch_capacity: usize) -> Vec<(Vec<u8>, PacketMeta)> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    let mut batch = PacketBatch::new(batch_capacity, 2048, DEFAULT_HEADROOM);
    while got.len() < want && Instant::now() < deadline {
        batch.clear();
        match rx.recv_batch(&mut batch) {
            Ok(_) => got.extend(batch.iter().map(|(p, m)| (p.to_vec(), *m))),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(e) => panic!("recv_batch: {e}"),
        }
    }
    got
}

fn assert_in_order(got: &[(Vec<u8>, PacketMeta)], sizes: &[usize]) {
    assert_eq!(got.len(), sizes.len(), "all datagrams arrive");
    for (i, ((data, _), &len)) in got.iter().zip(sizes).enumerate() {
        assert_eq!(data.len(), len, "datagram {i} length");
        assert_eq!(
            &data[..2],
            &(i as u16).to_be_bytes(),
            "datagram {i} in order"
        );
    }
}

#[test]
fn gso_send_and_gro_receive_64_datagrams() {
    let mut rx = socket(true, false);
    let mut tx = socket(false, true);
    assert!(
        rx.gro_enabled() && tx.gso_enabled(),
        "kernel with UDP GRO/GSO (4.18+/5.0+)"
    );
    let sizes = [1200; 64];
    let batch = outgoing(rx.local_addr().unwrap(), &sizes);
    assert_eq!(tx.send_batch(&batch).unwrap(), 64);
    let sent = tx.stats();
    // 64 × 1200 B exceed one datagram's 65507 B: two GSO messages, one call.
    assert_eq!(
        (sent.packets_sent, sent.gso_messages, sent.send_calls),
        (64, 2, 1)
    );

    let got = receive(&mut rx, 64, 64);
    assert_in_order(&got, &sizes);
    let meta = got[0].1;
    assert_eq!(meta.remote, tx.local_addr().unwrap());
    assert_eq!(meta.local, Some("127.0.0.1".parse().unwrap()));
    assert_eq!(meta.stride, 1200);
    let stats = rx.stats();
    assert_eq!(stats.packets_received, 64);
    assert!(
        stats.coalesced_received >= 1,
        "loopback keeps GSO super-datagrams whole: {stats:?}"
    );
    assert!(
        stats.recv_calls < 64,
        "fewer calls than datagrams: {stats:?}"
    );
}

#[test]
fn shorter_last_segment_rides_in_the_same_message() {
    let mut rx = socket(true, false);
    let mut tx = socket(false, true);
    let mut sizes = vec![1000; 10];
    sizes.push(300);
    let batch = outgoing(rx.local_addr().unwrap(), &sizes);
    assert_eq!(tx.send_batch(&batch).unwrap(), 11);
    assert_eq!(tx.stats().gso_messages, 1);
    let got = receive(&mut rx, 11, 64);
    assert_in_order(&got, &sizes);
    assert!(got.iter().all(|(_, m)| m.stride == 1000));
}

#[test]
fn segments_that_do_not_fit_wait_for_the_next_call() {
    let mut rx = socket(true, false);
    let mut tx = socket(false, true);
    let sizes = [500; 50];
    let batch = outgoing(rx.local_addr().unwrap(), &sizes);
    assert_eq!(tx.send_batch(&batch).unwrap(), 50);
    // Batches of 8: the 50-segment super-datagram is handed out over 7 calls.
    let got = receive(&mut rx, 50, 8);
    assert_in_order(&got, &sizes);
    assert_eq!(rx.stats().recv_dropped, 0);
}

#[test]
fn plain_path_without_offload() {
    let mut rx = socket(false, false);
    let mut tx = socket(false, false);
    let sizes: Vec<usize> = (0..64).map(|i| 100 + i * 7).collect();
    let batch = outgoing(rx.local_addr().unwrap(), &sizes);
    assert_eq!(tx.send_batch(&batch).unwrap(), 64);
    let sent = tx.stats();
    assert_eq!(
        (sent.packets_sent, sent.gso_messages, sent.send_calls),
        (64, 0, 1)
    );
    let got = receive(&mut rx, 64, 64);
    assert_in_order(&got, &sizes);
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, (_, m))| m.stride == sizes[i]));
    assert_eq!(rx.stats().coalesced_received, 0);
}

#[test]
fn gso_refused_by_the_kernel_falls_back_to_plain_sends() {
    let mut rx = socket(true, false);
    let mut tx = socket(false, true);
    // SO_NO_CHECK makes udp_send_skb refuse GSO with EINVAL.
    crate::sys::set_no_check(tx.as_fd()).unwrap();
    let sizes = [800; 20];
    let batch = outgoing(rx.local_addr().unwrap(), &sizes);
    assert_eq!(tx.send_batch(&batch).unwrap(), 20);
    let sent = tx.stats();
    assert_eq!(
        (sent.gso_refusals, sent.gso_messages, sent.packets_sent),
        (1, 0, 20)
    );
    assert!(!tx.gso_enabled(), "off for good");
    assert_in_order(&receive(&mut rx, 20, 64), &sizes);
}

#[test]
fn destinations_split_gso_runs() {
    let mut rx1 = socket(true, false);
    let mut rx2 = socket(true, false);
    let mut tx = socket(false, true);
    let (a, b) = (rx1.local_addr().unwrap(), rx2.local_addr().unwrap());
    let mut batch = PacketBatch::new(8, 2048, DEFAULT_HEADROOM);
    for (i, to) in [a, a, a, b, b, a, a, b].into_iter().enumerate() {
        batch
            .push(
                &[i as u8; 600],
                PacketMeta {
                    remote: to,
                    ..PacketMeta::default()
                },
            )
            .unwrap();
    }
    assert_eq!(tx.send_batch(&batch).unwrap(), 8);
    // Runs: [a a a] [b b] [a a] [b]: three GSO messages and one plain.
    assert_eq!(tx.stats().gso_messages, 3);
    let firsts =
        |got: Vec<(Vec<u8>, PacketMeta)>| got.iter().map(|(d, _)| d[0]).collect::<Vec<_>>();
    assert_eq!(firsts(receive(&mut rx1, 5, 64)), vec![0, 1, 2, 5, 6]);
    assert_eq!(firsts(receive(&mut rx2, 3, 64)), vec![3, 4, 7]);
}

#[test]
fn source_address_is_chosen_with_pktinfo() {
    let mut rx = socket(false, false);
    let mut tx = socket(false, true);
    let to = rx.local_addr().unwrap();
    let mut batch = outgoing(to, &[100, 100]);
    for i in 0..2 {
        batch.meta_mut(i).local = Some("127.0.0.2".parse().unwrap());
    }
    assert_eq!(tx.send_batch(&batch).unwrap(), 2);
    let got = receive(&mut rx, 2, 8);
    assert_eq!(got.len(), 2);
    assert!(got
        .iter()
        .all(|(_, m)| m.remote.ip() == "127.0.0.2".parse::<IpAddr>().unwrap()));
}

#[test]
fn dual_stack_socket_reports_ipv4_peers_as_ipv4() {
    let mut config = UdpConfig::new("[::]:0".parse().unwrap());
    config.nonblocking = true;
    let mut rx = UdpSocket::bind(&config).unwrap();
    let port = rx.local_addr().unwrap().port();
    let mut tx = socket(false, true);
    let batch = outgoing(SocketAddr::from(([127, 0, 0, 1], port)), &[300; 4]);
    assert_eq!(tx.send_batch(&batch).unwrap(), 4);
    let got = receive(&mut rx, 4, 8);
    assert_eq!(got.len(), 4);
    assert_eq!(got[0].1.remote, tx.local_addr().unwrap());
    assert_eq!(got[0].1.local, Some("127.0.0.1".parse().unwrap()));

    // And the dual-stack socket sends to IPv4 destinations (mapped).
    let back = outgoing(tx.local_addr().unwrap(), &[200; 3]);
    assert_eq!(rx.send_batch(&back).unwrap(), 3);
    assert_eq!(receive(&mut tx, 3, 8).len(), 3);
}

#[test]
fn unsendable_packets_are_dropped_and_counted() {
    let mut tx = socket(false, true);
    let mut rx = socket(false, false);
    let mut batch = outgoing(rx.local_addr().unwrap(), &[100; 3]);
    // An IPv6 destination on an IPv4 socket is refused by the kernel.
    batch.meta_mut(1).remote = "[::1]:9".parse().unwrap();
    assert_eq!(tx.send_batch(&batch).unwrap(), 3, "all consumed");
    let stats = tx.stats();
    assert_eq!((stats.packets_sent, stats.send_dropped), (2, 1));
    assert_eq!((stats.send_too_big, stats.send_other_errors), (0, 1));
    assert_eq!(failures(&mut tx), vec![(1..2, libc::EAFNOSUPPORT)]);
    assert_eq!(failures(&mut tx), vec![], "taking drains");
    assert_eq!(receive(&mut rx, 2, 8).len(), 2);
}

/// The refusals `take_send_failures` reports: (packets, errno).
fn failures(tx: &mut UdpSocket) -> Vec<(std::ops::Range<usize>, i32)> {
    let mut got = Vec::new();
    tx.take_send_failures(|f| got.push((f.packets(), f.errno)));
    got
}

/// A batch of `sizes.len()` datagrams to `to`, room for 70,000 bytes each.
fn outgoing_large(to: SocketAddr, sizes: &[usize]) -> PacketBatch {
    let mut batch = PacketBatch::new(sizes.len(), 70_000, DEFAULT_HEADROOM);
    for &len in sizes {
        let meta = PacketMeta {
            remote: to,
            ..PacketMeta::default()
        };
        batch.push(&vec![7; len], meta).unwrap();
    }
    batch
}

/// Datagrams above the 65,507 bytes UDP/IPv4 carries fail with
/// `EMSGSIZE`: a run of them is one report, counted as too big.
#[test]
fn too_big_datagrams_are_reported_by_index_and_errno() {
    let mut tx = socket(false, false);
    let rx = socket(false, false);
    let big = 66_000;
    let sizes = [100, big, big, big, 100, big];
    let batch = outgoing_large(rx.local_addr().unwrap(), &sizes);
    assert_eq!(tx.send_batch(&batch).unwrap(), 6);
    assert_eq!(
        failures(&mut tx),
        vec![(1..4, libc::EMSGSIZE), (5..6, libc::EMSGSIZE)]
    );
    let stats = tx.stats();
    assert_eq!(
        (stats.packets_sent, stats.send_dropped, stats.send_too_big),
        (2, 4, 4)
    );
    assert_eq!(stats.send_other_errors, 0);
    // The next call forgets what was not taken.
    assert_eq!(tx.send_batch_from(&batch, 4).unwrap(), 2);
    assert_eq!(failures(&mut tx), vec![(5..6, libc::EMSGSIZE)]);
}

/// A datagram that fits UDP but not the loopback's MTU fails in
/// `ip_append_data`, which also queues a local error with the MTU (the
/// loopback's 65,536 capped at `IP_MAX_MTU`, 65,535).
#[test]
fn a_local_too_big_error_is_queued_with_the_mtu() {
    let mut tx = socket(false, false);
    let rx = socket(false, false);
    let to = rx.local_addr().unwrap();
    let batch = outgoing_large(to, &[65_510]);
    assert_eq!(tx.send_batch(&batch).unwrap(), 1);
    assert_eq!(failures(&mut tx), vec![(0..1, libc::EMSGSIZE)]);
    let mut errors = Vec::new();
    assert_eq!(tx.recv_errors(8, |e| errors.push(e)).unwrap(), 1);
    let e = errors[0];
    assert_eq!(e.origin, crate::ErrorOrigin::Local);
    assert_eq!((e.errno, e.info), (libc::EMSGSIZE, 65_535));
    assert_eq!(e.destination, Some(SocketAddr::new(to.ip(), 0)));
    assert_eq!((e.offender, e.payload_len), (None, 0));
    assert_eq!(tx.recv_errors(8, |_| {}).unwrap(), 0);
}

/// `send_fragmentable` puts path-MTU discovery back to "do" even when
/// its send fails; the failure is returned and counted.
#[test]
fn a_failed_fragmentable_send_restores_path_mtu_discovery() {
    let mut tx = socket(false, false);
    let meta = PacketMeta {
        remote: "[::1]:9".parse().unwrap(),
        ..PacketMeta::default()
    };
    let err = tx.send_fragmentable(&[1; 100], meta).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EAFNOSUPPORT));
    let mode = crate::sys::mtu_discover(tx.as_fd(), false).unwrap();
    assert_eq!(mode, libc::IP_PMTUDISC_DO);
    let stats = tx.stats();
    assert_eq!((stats.send_dropped, stats.send_other_errors), (1, 1));
    assert_eq!(failures(&mut tx), vec![], "returned, not recorded");
}

/// The record holds `max_batch` refusals; what does not fit is counted.
#[test]
fn refusals_past_the_record_are_counted() {
    let mut config = UdpConfig::new(LOOPBACK.parse().unwrap());
    (config.gso, config.nonblocking, config.max_batch) = (false, true, 2);
    let mut tx = UdpSocket::bind(&config).unwrap();
    let rx = socket(false, false);
    let big = 66_000;
    let sizes = [big, 100, big, 100, big, big];
    let batch = outgoing_large(rx.local_addr().unwrap(), &sizes);
    assert_eq!(tx.send_batch(&batch).unwrap(), 6);
    assert_eq!(
        failures(&mut tx),
        vec![(0..1, libc::EMSGSIZE), (2..3, libc::EMSGSIZE)]
    );
    let stats = tx.stats();
    assert_eq!((stats.send_dropped, stats.send_failures_unrecorded), (4, 2));
}

#[test]
fn would_block_when_nothing_is_queued() {
    let mut rx = socket(true, false);
    let mut batch = PacketBatch::new(4, 2048, DEFAULT_HEADROOM);
    let err = rx.recv_batch(&mut batch).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    let mut plain = socket(false, false);
    assert_eq!(
        plain.recv_batch(&mut batch).unwrap_err().kind(),
        io::ErrorKind::WouldBlock
    );
}

#[test]
fn oversize_datagrams_are_dropped_not_truncated() {
    let mut rx = socket(false, false);
    let mut tx = socket(false, false);
    let to = rx.local_addr().unwrap();
    let mut batch = PacketBatch::new(2, 3000, DEFAULT_HEADROOM);
    batch
        .push(
            &[1; 3000],
            PacketMeta {
                remote: to,
                ..PacketMeta::default()
            },
        )
        .unwrap();
    batch
        .push(
            &[2; 100],
            PacketMeta {
                remote: to,
                ..PacketMeta::default()
            },
        )
        .unwrap();
    assert_eq!(tx.send_batch(&batch).unwrap(), 2);
    // The receiving batch's buffers hold 2048 bytes: the first datagram is
    // truncated by the kernel and dropped here.
    let got = receive(&mut rx, 1, 8);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, vec![2; 100]);
    assert_eq!(rx.stats().recv_dropped, 1);
}

/// Outer TOS octets the TOS tests cycle through: Not-ECT, ECT(0), ECT(1),
/// CE (RFC 3168 §5), DSCP EF (RFC 3246) with Not-ECT and with ECT(0).
const TOS_CYCLE: [u8; 6] = [0, 2, 1, 3, 0xb8, 0xb8 | 2];

/// `outgoing` with packet `i` sent with outer TOS `tos[i]`.
fn with_tos(to: SocketAddr, sizes: &[usize], tos: &[u8]) -> PacketBatch {
    let mut batch = outgoing(to, sizes);
    for (i, &t) in tos.iter().enumerate() {
        batch.meta_mut(i).tos = t;
    }
    batch
}

fn assert_tos(got: &[(Vec<u8>, PacketMeta)], tos: &[u8]) {
    assert_eq!(got.len(), tos.len(), "all datagrams arrive");
    for (i, ((data, meta), &want)) in got.iter().zip(tos).enumerate() {
        let index = u16::from_be_bytes([data[0], data[1]]);
        assert_eq!(usize::from(index), i, "datagram {i} in order");
        assert_eq!(meta.tos, want, "datagram {i}: outer TOS");
    }
}

#[test]
fn ecn_and_dscp_travel_with_each_datagram() {
    let mut rx = socket(false, false);
    let mut tx = socket(false, false);
    let sizes = [200; 12];
    let tos: Vec<u8> = (0..12).map(|i| TOS_CYCLE[i % TOS_CYCLE.len()]).collect();
    let batch = with_tos(rx.local_addr().unwrap(), &sizes, &tos);
    assert_eq!(tx.send_batch(&batch).unwrap(), 12);
    assert_tos(&receive(&mut rx, 12, 64), &tos);
}

#[test]
fn gso_runs_split_where_the_tos_changes() {
    let mut rx = socket(true, false);
    let mut tx = socket(false, true);
    // Runs: [ECT(0) x3] [CE x2] [EF x1] [EF+ECT(0) x3] [0 x2].
    let tos = [2, 2, 2, 3, 3, 0xb8, 0xba, 0xba, 0xba, 0, 0];
    let sizes = [900; 11];
    let batch = with_tos(rx.local_addr().unwrap(), &sizes, &tos);
    assert_eq!(tx.send_batch(&batch).unwrap(), 11);
    let sent = tx.stats();
    assert_eq!(
        (sent.packets_sent, sent.gso_messages, sent.send_calls),
        (11, 4, 1),
        "one GSO message per run of two or more"
    );
    let got = receive(&mut rx, 11, 64);
    assert_tos(&got, &tos);
    assert!(
        rx.stats().coalesced_received >= 1,
        "loopback keeps GSO super-datagrams whole, so the split is tested"
    );
}

#[test]
fn ipv6_traffic_class_travels_with_each_datagram() {
    let bind = |gro, gso| {
        let mut config = UdpConfig::new("[::1]:0".parse().unwrap());
        (config.gro, config.gso, config.nonblocking) = (gro, gso, true);
        UdpSocket::bind(&config).unwrap()
    };
    let (mut rx, mut tx) = (bind(true, false), bind(false, true));
    let tos = [3, 3, 1, 0xb8, 0xb8, 2];
    let batch = with_tos(rx.local_addr().unwrap(), &[700; 6], &tos);
    assert_eq!(tx.send_batch(&batch).unwrap(), 6);
    assert_eq!(tx.stats().gso_messages, 2);
    assert_tos(&receive(&mut rx, 6, 64), &tos);
}

#[test]
fn dual_stack_socket_carries_the_tos_of_ipv4_peers() {
    let mut config = UdpConfig::new("[::]:0".parse().unwrap());
    config.nonblocking = true;
    let mut dual = UdpSocket::bind(&config).unwrap();
    let port = dual.local_addr().unwrap().port();
    let mut v4 = socket(false, true);
    let tos = [2, 3, 0xb8];
    let batch = with_tos(SocketAddr::from(([127, 0, 0, 1], port)), &[300; 3], &tos);
    assert_eq!(v4.send_batch(&batch).unwrap(), 3);
    assert_tos(&receive(&mut dual, 3, 8), &tos);
    // And back: the IPv4-mapped destination takes IP_TOS.
    let back = with_tos(v4.local_addr().unwrap(), &[300; 3], &tos);
    assert_eq!(dual.send_batch(&back).unwrap(), 3);
    assert_tos(&receive(&mut v4, 3, 8), &tos);
}

/// `SO_RXQ_OVFL`: datagrams the kernel dropped for lack of receive-buffer
/// room are reported with the next datagram received, here on a
/// dual-stack socket's IPv4 path with GRO, whose datagrams carry the most
/// control messages (`UDP_GRO`, both PKTINFOs, TOS, the drop count): none
/// is lost.
#[test]
fn receive_buffer_drops_are_reported_with_the_next_datagram() {
    let mut config = UdpConfig::new("[::]:0".parse().unwrap());
    (config.nonblocking, config.recv_buffer) = (true, 1);
    let mut rx = UdpSocket::bind(&config).unwrap();
    assert!(rx.gro_enabled());
    let port = rx.local_addr().unwrap().port();
    let to = SocketAddr::from(([127, 0, 0, 1], port));
    let mut tx = socket(false, true);
    let burst = 200;
    for _ in 0..burst / 50 {
        let plain = outgoing(to, &[1000; 50]);
        let mut alone = PacketBatch::new(1, 2048, DEFAULT_HEADROOM);
        for (i, (p, m)) in plain.iter().enumerate() {
            // One datagram per send: no GSO, each its own skb.
            alone.clear();
            alone.push(p, *m).unwrap();
            assert_eq!(tx.send_batch(&alone).unwrap(), 1, "datagram {i}");
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    let first = drain(&mut rx);
    assert!(
        first < burst,
        "the tiny buffer overflowed: {first} of {burst}"
    );
    // The drop count travels with datagrams queued after the drops: a GSO
    // run, received as one GRO super-datagram.
    let run = with_tos(to, &[1000; 3], &[0xb8; 3]);
    assert_eq!(tx.send_batch(&run).unwrap(), 3);
    assert_eq!(tx.stats().gso_messages, 1);
    let got = receive(&mut rx, 3, 8);
    assert_eq!(got.len(), 3);
    let meta = got[0].1;
    assert_eq!(meta.stride, 1000, "UDP_GRO read");
    assert_eq!(
        meta.local,
        Some("127.0.0.1".parse().unwrap()),
        "PKTINFO read"
    );
    assert_eq!(meta.tos, 0xb8, "IP_TOS read");
    assert_eq!(rx.stats().kernel_rx_dropped, (burst - first) as u64);
}

/// Receives until the socket has nothing more; returns how many came.
fn drain(rx: &mut UdpSocket) -> usize {
    let mut batch = PacketBatch::new(64, 2048, DEFAULT_HEADROOM);
    let mut got = 0;
    loop {
        batch.clear();
        match rx.recv_batch(&mut batch) {
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return got,
            Err(e) => panic!("recv_batch: {e}"),
        }
    }
}
