//! A packet whose ESP packet would not fit the SA's path MTU (RFC 4301
//! §8.2.1, RFC 4459), through the worker's outbound path in memory: the
//! inner sender gets ICMP (DF set, IPv6), an IPv4 packet without DF is
//! fragmented before encryption (or sent fragmentable with `fragment =
//! "outer"`), the ICMP is rate-limited, and every packet not sent is
//! counted as `path_mtu_exceeded`, on the SA too.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use nix::libc::{ECONNREFUSED, EMSGSIZE};
use phalanx_esp::{max_inner_len, DropReason, FragmentPolicy};
use phalanx_io::{ErrorOrigin, PacketBatch, PacketMeta, SocketError};
use phalanx_sa::OutboundSa;
use phalanx_wire::icmp::IcmpPacket;

use super::io::learn_from_error;
use super::zero_copy_tests::{ipv4_udp, store};
use super::{CryptoEngine, DaemonCounter, DaemonCounters, Egress, OutboundPath, WorkerStats};
use crate::install::{SaHandle, SaStore};

/// The path MTU every case learns.
const MTU: u32 = 1280;

#[derive(Default)]
struct Capture {
    udp: Vec<Vec<u8>>,
    fragmentable: Vec<Vec<u8>>,
    icmp: Vec<(Vec<u8>, IpAddr)>,
}

impl Egress for Capture {
    fn udp(&mut self, payload: &[u8], _: PacketMeta) {
        self.udp.push(payload.to_vec());
    }
    fn raw(&mut self, _: &[u8], _: PacketMeta) {
        panic!("the test SAs use UDP encapsulation");
    }
    fn ah(&mut self, _: &[u8], _: PacketMeta) {
        panic!("the test SAs are ESP");
    }
    fn udp_fragmentable(&mut self, payload: &[u8], _: PacketMeta) {
        self.fragmentable.push(payload.to_vec());
    }
    fn icmp(&mut self, message: &[u8], to: IpAddr) -> bool {
        self.icmp.push((message.to_vec(), to));
        true
    }
}

fn v4(len: usize, df: bool) -> Vec<u8> {
    ipv4_udp(len, 77, df)
}

fn v6(len: usize) -> Vec<u8> {
    let mut p = vec![0x5a; len];
    p[..8].copy_from_slice(&[0x60, 0, 0, 0, 0, 0, 17, 64]);
    p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
    p[8..24].copy_from_slice(&"fd01::2".parse::<std::net::Ipv6Addr>().unwrap().octets());
    p[24..40].copy_from_slice(&"fd02::2".parse::<std::net::Ipv6Addr>().unwrap().octets());
    p
}

/// Gateway a (IPv4 outside, `inner` prefixes inside) with a path MTU of
/// [`MTU`] learned on its outbound SA.
fn gateway(inner: (&str, &str)) -> (SaStore, Arc<OutboundSa>) {
    let a = store("a", "192.0.2.1", "192.0.2.2", (0x1001, 0x2001), inner);
    let sa = match &a.load().sa("o").expect("SA o").handle {
        SaHandle::Outbound { sa, .. } => Arc::clone(sa),
        SaHandle::Inbound(_) => unreachable!("o is outbound"),
    };
    sa.path_mtu.learn(MTU, false, Instant::now());
    (a, sa)
}

fn send(a: &SaStore, policy: FragmentPolicy, packets: &[Vec<u8>]) -> (Capture, WorkerStats) {
    let mut input = PacketBatch::new(packets.len().max(1), 2048, 128);
    for p in packets {
        input.push(p, PacketMeta::default()).unwrap();
    }
    let mut path = OutboundPath::new("192.0.2.1".parse().unwrap(), 2048, 64);
    path.set_fragment_policy(policy);
    let (mut out, mut stats) = (Capture::default(), WorkerStats::default());
    let mut engine = CryptoEngine::new(0);
    path.process(
        &a.load(),
        &input,
        &mut engine,
        &mut out,
        &mut stats,
        Instant::now(),
    );
    (out, stats)
}

fn path_mtu_drops(stats: &WorkerStats) -> u64 {
    stats.outbound.drops(DropReason::PathMtuExceeded)
}

#[test]
fn df_set_gets_frag_needed_with_the_inner_mtu_and_is_counted() {
    let (a, sa) = gateway(("10.1.0.0/24", "10.2.0.0/24"));
    let big = v4(1400, true);
    let (out, stats) = send(&a, FragmentPolicy::Inner, &[big.clone(), v4(1000, true)]);
    assert_eq!(out.udp.len(), 1, "the packet that fits goes");
    assert!(out.udp[0].len() + 28 <= MTU as usize);
    let (message, to) = &out.icmp[0];
    assert_eq!(*to, "10.1.0.2".parse::<IpAddr>().unwrap());
    let icmp = IcmpPacket::new_checked(&message[..]).unwrap();
    let inner_mtu = max_inner_len(&sa, MTU as usize);
    assert_eq!((icmp.msg_type(), icmp.code()), (3, 4));
    assert_eq!(usize::from(icmp.next_hop_mtu()), inner_mtu);
    assert_eq!(
        inner_mtu, 1218,
        "1280 - 20 - 8 - 8 - 8 - 16, 4-aligned, - 2"
    );
    assert_eq!(&icmp.quoted()[..28], &big[..28]);
    assert_eq!(path_mtu_drops(&stats), 1);
    assert_eq!(stats.daemon.get(DaemonCounter::IcmpTooBigSent), 1);
    assert_eq!(sa.drops.snapshot()[DropReason::PathMtuExceeded.index()], 1);
}

#[test]
fn df_clear_is_fragmented_before_encryption() {
    let (a, sa) = gateway(("10.1.0.0/24", "10.2.0.0/24"));
    let (out, stats) = send(&a, FragmentPolicy::Inner, &[v4(1400, false)]);
    assert_eq!(out.udp.len(), 2);
    assert!(out.udp.iter().all(|d| d.len() + 28 <= MTU as usize));
    assert!(out.icmp.is_empty());
    assert_eq!(path_mtu_drops(&stats), 0);
    assert_eq!(stats.daemon.get(DaemonCounter::InnerFragmented), 1);
    assert_eq!(stats.outbound.forwarded_packets, 2);
    assert_eq!(sa.drops.total(), 0);
}

#[test]
fn df_clear_with_fragment_outer_goes_whole_and_fragmentable() {
    let (a, _) = gateway(("10.1.0.0/24", "10.2.0.0/24"));
    let (out, stats) = send(&a, FragmentPolicy::Outer, &[v4(1400, false), v4(100, true)]);
    assert_eq!(out.fragmentable.len(), 1);
    assert!(out.fragmentable[0].len() + 28 > MTU as usize);
    assert_eq!(out.udp.len(), 1);
    assert_eq!(stats.daemon.get(DaemonCounter::OuterFragmented), 1);
    assert_eq!(path_mtu_drops(&stats), 0);
}

#[test]
fn ipv6_gets_packet_too_big_or_goes_fragmentable_up_to_1280() {
    let (a, _) = gateway(("fd01::/64", "fd02::/64"));
    let (out, stats) = send(&a, FragmentPolicy::Inner, &[v6(1280), v6(1400)]);
    // The path carries only 1218 inside: 1280 must still get through
    // (RFC 8200 §5), fragmented outside; larger packets are told 1280.
    assert_eq!(out.fragmentable.len(), 1);
    let (message, to) = &out.icmp[0];
    assert_eq!(*to, "fd01::2".parse::<IpAddr>().unwrap());
    let icmp = IcmpPacket::new_checked(&message[..]).unwrap();
    assert_eq!((icmp.msg_type(), icmp.code(), icmp.mtu()), (2, 0, 1280));
    assert_eq!(path_mtu_drops(&stats), 1);
}

#[test]
fn icmp_is_rate_limited_and_every_packet_still_counted() {
    let (a, sa) = gateway(("10.1.0.0/24", "10.2.0.0/24"));
    let packets: Vec<Vec<u8>> = (0..64).map(|_| v4(1400, true)).collect();
    let (out, stats) = send(&a, FragmentPolicy::Inner, &packets);
    let limited = stats.daemon.get(DaemonCounter::IcmpTooBigRateLimited);
    assert_eq!(out.icmp.len() as u64 + limited, 64);
    assert_eq!(
        out.icmp.len(),
        phalanx_esp::limits::ICMP_RATE_BURST as usize
    );
    assert_eq!(path_mtu_drops(&stats), 64);
    assert_eq!(sa.drops.total(), 64);
}

#[test]
fn without_a_learned_mtu_nothing_changes() {
    let (a, sa) = gateway(("10.1.0.0/24", "10.2.0.0/24"));
    sa.path_mtu.forget();
    let (out, stats) = send(&a, FragmentPolicy::Inner, &[v4(1400, true)]);
    assert_eq!(out.udp.len(), 1);
    assert_eq!(path_mtu_drops(&stats), 0);
}

/// A kernel report about one of our packets.
fn report(origin: ErrorOrigin, errno: i32, info: u32, spi: Option<u32>) -> SocketError {
    let mut payload = [0u8; phalanx_io::errqueue::ERROR_PAYLOAD_LEN];
    let payload_len = match spi {
        Some(spi) => {
            payload[..4].copy_from_slice(&spi.to_be_bytes());
            payload[4..8].copy_from_slice(&7u32.to_be_bytes());
            8
        }
        None => 0,
    };
    SocketError {
        origin,
        errno,
        icmp_type: 3,
        icmp_code: 4,
        info,
        destination: Some("192.0.2.2:4500".parse().unwrap()),
        offender: None,
        payload,
        payload_len,
    }
}

#[test]
fn kernel_reports_teach_the_sa_they_are_about() {
    let (a, sa) = gateway(("10.1.0.0/24", "10.2.0.0/24"));
    sa.path_mtu.forget();
    let rt = a.load();
    let now = Instant::now();
    let mut counters = DaemonCounters::default();
    // An ICMP Fragmentation Needed quoting our ESP header: learned by SPI.
    let spi = sa.params.spi;
    learn_from_error(
        &report(ErrorOrigin::Icmp, EMSGSIZE, 1200, Some(spi)),
        &rt,
        now,
        &mut counters,
    );
    assert_eq!(sa.path_mtu.current(now), Some(1200));
    // Another SA's SPI teaches this one nothing.
    learn_from_error(
        &report(ErrorOrigin::Icmp, EMSGSIZE, 1000, Some(spi ^ 1)),
        &rt,
        now,
        &mut counters,
    );
    assert_eq!(sa.path_mtu.current(now), Some(1200));
    // A local refusal quotes nothing: learned by the destination.
    learn_from_error(
        &report(ErrorOrigin::Local, EMSGSIZE, 1100, None),
        &rt,
        now,
        &mut counters,
    );
    assert_eq!(sa.path_mtu.current(now), Some(1100));
    // A forged tiny MTU is raised to the floor (RFC 5927 §7.1).
    learn_from_error(
        &report(ErrorOrigin::Icmp, EMSGSIZE, 68, Some(spi)),
        &rt,
        now,
        &mut counters,
    );
    assert_eq!(sa.path_mtu.current(now), Some(552));
    // Port unreachable is counted, teaches no MTU.
    learn_from_error(
        &report(ErrorOrigin::Icmp, ECONNREFUSED, 0, Some(spi)),
        &rt,
        now,
        &mut counters,
    );
    assert_eq!(sa.path_mtu.current(now), Some(552));
    assert_eq!(counters.get(DaemonCounter::IcmpErrorsReceived), 4);
    assert_eq!(counters.get(DaemonCounter::PathMtuLearned), 3);
}

/// Cluster mode: each packet carries the one sequence number the
/// dispatcher assigned. A packet without DF too big for the path goes as
/// one ESP packet with that number, fragmented outside, whatever the
/// `fragment` setting: inner fragments would take numbers of other nodes'
/// leases, and two nodes would send one (SPI, seq).
#[test]
fn cluster_packets_too_big_keep_their_one_sequence_number() {
    use super::outbound::Assigned;
    let (_a, sa) = gateway(("10.1.0.0/24", "10.2.0.0/24"));
    let mut input = PacketBatch::new(2, 2048, 128);
    input.push(&v4(1400, false), PacketMeta::default()).unwrap();
    input.push(&v4(1400, false), PacketMeta::default()).unwrap();
    // This node owns 10 and 13 (another node sends 11 and 12).
    let assigned = [
        Assigned {
            sa: Arc::clone(&sa),
            seq: 10,
        },
        Assigned {
            sa: Arc::clone(&sa),
            seq: 13,
        },
    ];
    let mut path = OutboundPath::new("192.0.2.1".parse().unwrap(), 2048, 64);
    path.set_fragment_policy(FragmentPolicy::Inner);
    let (mut out, mut stats) = (Capture::default(), WorkerStats::default());
    let mut engine = CryptoEngine::new(0);
    path.process_assigned(
        &mut input,
        &assigned,
        &mut engine,
        &mut out,
        &mut stats,
        Instant::now(),
    );
    assert!(out.udp.is_empty(), "no inner fragments");
    let seqs: Vec<u32> = out
        .fragmentable
        .iter()
        .map(|d| u32::from_be_bytes(d[4..8].try_into().unwrap()))
        .collect();
    assert_eq!(seqs, [10, 13]);
    assert_eq!(stats.daemon.get(DaemonCounter::InnerFragmented), 0);
}
