//! The kernel's time for the cluster's ESP pre-filter on one frame
//! carrying a 1400-byte IP packet (`BPF_PROG_TEST_RUN`, the kernel's own
//! clock over many runs), over IPv4 and over IPv6, side by side: each
//! version with the program a node whose outside address is of that
//! version loads, then both with the dual-stack program (both
//! addresses). Per version: an owned frame (passed), not-owned ESP and
//! ESP in UDP (recorded, counted, dropped), one of an unregistered SA and
//! a non-ESP frame (both passed early), one to another unicast MAC
//! (dropped); under `hash-segments` a whole SA owned (passed) and not
//! owned (dropped), whose peer is compared with the source (one word for
//! IPv4, four for IPv6); and, for the harness's own cost, a program that
//! only returns. Node 2 of a 3-node view (packet-rr unless the row says
//! otherwise). The last two columns time the same decision built for
//! XDP (`kernel_filter_xdp`), over the frame as a driver hands it over;
//! it passes frames to another MAC (the socket filter behind it drops
//! them). Needs root (`bpf(2)`).
//!
//! `cargo run --release -p phalanxd --example kernel_filter_cost [repeat]`
//!
//! With `--receive-path [frames] [rounds]` it times the program on live
//! frames instead (IPv4): in a namespace of its own, a veth pair;
//! not-owned ESP frames sent on one end (`sendmmsg`, paced so no backlog
//! drops), a ring on the other end filtered by the program, and the
//! kernel timing each run (`BPF_ENABLE_STATS`); then the same with a
//! program that only drops, for the timing's own cost. Alternating,
//! median of the rounds. Then the same with the XDP program attached to
//! the receiving veth (in its driver) and a ring without a filter, beside
//! an XDP program that only drops. Per frame it also reports the CPU time
//! of the sending thread, whose system calls run the veth's receive path
//! (`RUSAGE_THREAD`), for each way of dropping.
#![allow(clippy::unwrap_used)]

use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use nix::sched::{setns, CloneFlags};

use phalanx_cluster::dispatch::{Direction, DispatchScheme, Dispatcher, PacketKey};
use phalanx_cluster::{NodeId, SaDescriptor, View};
use phalanx_io::bpf::asm::{Assembler, Reg};
use phalanx_io::bpf::{xdp_action, Program, ProgramType, RunTimeStats, XdpMode};
use phalanx_io::packet::{PacketSocket, PacketSocketConfig};
use phalanx_testkit::netns::VethNamespace;
use phalanx_wire::ethernet::MacAddress;
use phalanxd::dataplane::cluster::kernel_filter::{FilterAddresses, KernelFilter};

const MAC: MacAddress = MacAddress([0x02, 0, 0x5e, 0x10, 0, 1]);
const VIP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
const VIP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xf, 0, 0, 0, 0, 1);
const PEER6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xe, 0, 0, 0, 0, 2);
const SPI: u32 = 0x2001;
const NATT: u16 = 4500;
const LEN: usize = 1400;
/// `--receive-path`: frames per `sendmmsg`, and the pause after each, so
/// the receiving end keeps up (no backlog drops).
const PACE_BATCH: usize = 16;
const PACE: Duration = Duration::from_micros(40);

/// The outer IP version.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Version {
    V4,
    V6,
}

impl Version {
    fn peer(self) -> IpAddr {
        match self {
            Version::V4 => IpAddr::V4(PEER),
            Version::V6 => IpAddr::V6(PEER6),
        }
    }
}

/// 14 octets the test run strips, then an Ethernet frame carrying a
/// `LEN`-octet IP packet of `version` from the peer to the virtual
/// address: ESP (SPI, seq) directly, or behind a UDP header to
/// `udp_port`.
fn frame(version: Version, udp_port: Option<u16>, spi: u32, seq: u32) -> Vec<u8> {
    let ethertype = match version {
        Version::V4 => [0x08, 0x00],
        Version::V6 => [0x86, 0xdd],
    };
    let mut f = vec![0u8; 14];
    f[12..14].copy_from_slice(&ethertype);
    f.extend_from_slice(&MAC.octets());
    f.extend_from_slice(&[0x02, 0xbb, 0, 0, 0, 1]);
    f.extend_from_slice(&ethertype);
    let proto = if udp_port.is_some() { 17 } else { 50 };
    let header = match version {
        Version::V4 => {
            let mut ip = [0u8; 20];
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&(LEN as u16).to_be_bytes());
            ip[8] = 64;
            ip[9] = proto;
            ip[12..16].copy_from_slice(&PEER.octets());
            ip[16..20].copy_from_slice(&VIP.octets());
            f.extend_from_slice(&ip);
            ip.len()
        }
        Version::V6 => {
            let mut ip = [0u8; 40];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&((LEN - 40) as u16).to_be_bytes());
            ip[6] = proto;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&PEER6.octets());
            ip[24..40].copy_from_slice(&VIP6.octets());
            f.extend_from_slice(&ip);
            ip.len()
        }
    };
    if let Some(port) = udp_port {
        f.extend_from_slice(&40000u16.to_be_bytes());
        f.extend_from_slice(&port.to_be_bytes());
        f.extend_from_slice(&((LEN - header) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
    }
    f.extend_from_slice(&spi.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(14 + 14 + LEN, 0x5a);
    f
}

fn inbound(spi: u32, peer: IpAddr) -> SaDescriptor {
    SaDescriptor {
        direction: Direction::Inbound,
        spi,
        esn: false,
        peer,
        peer_window: 0,
    }
}

fn view() -> View {
    View::new(1, [1, 2, 3].map(NodeId))
}

/// Node 2's filter of a 3-node view under `scheme`, for the outside
/// addresses `v4` and `v6`, with `sas` registered.
fn node_two_filter(
    scheme: DispatchScheme,
    (v4, v6): (Option<Ipv4Addr>, Option<Ipv6Addr>),
    sas: &[SaDescriptor],
) -> KernelFilter {
    let mut filter = KernelFilter::load(
        NodeId(2),
        scheme,
        FilterAddresses {
            outside_mac: MAC,
            outside_v4: v4,
            outside_v6: v6,
            inside_mac: MacAddress([0x02, 0, 0x5e, 0x10, 0, 2]),
        },
        NATT,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    filter.sync(&view(), &[], sas.iter());
    filter
}

/// The hash scheme of the `hash:` rows: `hash-segments` with the SPI in
/// the hash, so one peer's SAs spread over the nodes.
const HASH: DispatchScheme = DispatchScheme::HashSegments { with_spi: true };

/// Under [`HASH`], an SPI whose SA from `version`'s peer node 2 owns
/// whole, and one it does not.
fn hash_spis(version: Version) -> (u32, u32) {
    let mut dispatcher = Dispatcher::new(HASH, view());
    let mut owned =
        |spi: u32| dispatcher.owner(&PacketKey::inbound_sa(spi, version.peer())) == Some(NodeId(2));
    let mine = (0x3000..).find(|&spi| owned(spi)).unwrap();
    let theirs = (0x3000..).find(|&spi| !owned(spi)).unwrap();
    (mine, theirs)
}

/// One row: what it times, whether the frame must be dropped, whether it
/// runs on the hash-scheme filter, and its frame per version.
type Row = (&'static str, bool, bool, Box<dyn Fn(Version) -> Vec<u8>>);

fn rows() -> Vec<Row> {
    let (v4_hash, v6_hash) = (hash_spis(Version::V4), hash_spis(Version::V6));
    let hash = move |version| match version {
        Version::V4 => v4_hash,
        Version::V6 => v6_hash,
    };
    vec![
        (
            "owned ESP (passed)",
            false,
            false,
            Box::new(|v| frame(v, None, SPI, 1)),
        ),
        (
            "not-owned ESP (recorded, dropped)",
            true,
            false,
            Box::new(|v| frame(v, None, SPI, 2)),
        ),
        (
            "not-owned ESP in UDP (recorded, dropped)",
            true,
            false,
            Box::new(|v| frame(v, Some(NATT), SPI, 3)),
        ),
        (
            "ESP of an unregistered SA (passed)",
            false,
            false,
            Box::new(|v| frame(v, None, SPI + 1, 2)),
        ),
        (
            "not ESP: UDP to port 0 (passed)",
            false,
            false,
            Box::new(|v| frame(v, Some(0), 0, 0)),
        ),
        (
            "to another unicast MAC (dropped)",
            true,
            false,
            Box::new(|v| {
                let mut f = frame(v, None, SPI, 2);
                f[14 + 5] ^= 0x10;
                f
            }),
        ),
        (
            "hash: whole SA owned (passed)",
            false,
            true,
            Box::new(move |v| frame(v, None, hash(v).0, 2)),
        ),
        (
            "hash: whole SA not owned (dropped)",
            true,
            true,
            Box::new(move |v| frame(v, None, hash(v).1, 2)),
        ),
    ]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let first = args.next();
    if first.as_deref() == Some("--receive-path") {
        let frames = args.next().map_or(200_000, |a| a.parse().unwrap());
        let rounds = args.next().map_or(7, |a| a.parse().unwrap());
        receive_path(frames, rounds);
        return;
    }
    let repeat: u32 = first.map_or(1_000_000, |a| a.parse().unwrap());
    let (v4, v6) = (Some(VIP), Some(VIP6));
    let mut hash_sas = Vec::new();
    for version in [Version::V4, Version::V6] {
        let (mine, theirs) = hash_spis(version);
        hash_sas.push(inbound(mine, version.peer()));
        hash_sas.push(inbound(theirs, version.peer()));
    }
    // Columns: the frame's version and the program's addresses.
    let columns = [
        ("IPv4", Version::V4, (v4, None)),
        ("IPv6", Version::V6, (None, v6)),
        ("IPv4 dual", Version::V4, (v4, v6)),
        ("IPv6 dual", Version::V6, (v4, v6)),
    ];
    let mut filters: Vec<(KernelFilter, KernelFilter)> = (columns.iter())
        .map(|&(_, version, addresses)| {
            let rr = [inbound(SPI, version.peer())];
            let rr = node_two_filter(DispatchScheme::PacketRoundRobin, addresses, &rr);
            (rr, node_two_filter(HASH, addresses, &hash_sas))
        })
        .collect();
    // The XDP columns: the single-address filters' XDP programs.
    for (rr, hashed) in filters.iter_mut().take(2) {
        rr.load_xdp().unwrap_or_else(|e| panic!("{e}"));
        hashed.load_xdp().unwrap_or_else(|e| panic!("{e}"));
    }
    let xdp_columns = [("IPv4 xdp", Version::V4, 0), ("IPv6 xdp", Version::V6, 1)];
    println!(
        "kernel filter, {LEN}-byte IP packets, {repeat} runs each (BPF_PROG_TEST_RUN), ns/run;"
    );
    println!("columns: the frame's IP version; \"dual\": the program for both outside addresses");
    print!("  {:42}", "");
    for (name, _, _) in &columns {
        print!(" {name:>9}");
    }
    for (name, _, _) in &xdp_columns {
        print!(" {name:>9}");
    }
    println!();
    // The harness's own time per run: a program that only returns.
    let empty = constant_program(-1);
    print!("  {:42}", "baseline: a program that only returns");
    for &(_, version, _) in &columns {
        let run = empty
            .test_run(&frame(version, None, SPI, 1), repeat)
            .unwrap();
        print!(" {:>9}", run.ns_per_run);
    }
    let empty_xdp = constant_xdp(xdp_action::PASS);
    for &(_, version, _) in &xdp_columns {
        let run = empty_xdp
            .test_run(&frame(version, None, SPI, 1)[14..], repeat)
            .unwrap();
        print!(" {:>9}", run.ns_per_run);
    }
    println!();
    for (what, drops, hash, build) in rows() {
        print!("  {what:42}");
        for (&(name, version, _), (rr, hashed)) in columns.iter().zip(&filters) {
            let filter = if hash { hashed } else { rr };
            let run = filter.program().test_run(&build(version), repeat).unwrap();
            assert_eq!(run.retval == 0, drops, "{what}, {name}: wrong verdict");
            print!(" {:>9}", run.ns_per_run);
        }
        // XDP leaves frames to another MAC to the socket filter.
        let xdp_drops = drops && !what.starts_with("to another unicast MAC");
        for &(name, version, at) in &xdp_columns {
            let (rr, hashed) = &filters[at];
            let program = (if hash { hashed } else { rr }).xdp_program().unwrap();
            let run = program.test_run(&build(version)[14..], repeat).unwrap();
            assert_eq!(
                run.retval == xdp_action::DROP,
                xdp_drops,
                "{what}, {name}: wrong verdict"
            );
            print!(" {:>9}", run.ns_per_run);
        }
        println!();
    }
}

/// This thread's CPU time so far (user and system), nanoseconds.
fn thread_cpu_ns() -> u64 {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_THREAD).unwrap();
    let ns =
        |t: nix::sys::time::TimeVal| t.tv_sec() as u64 * 1_000_000_000 + t.tv_usec() as u64 * 1000;
    ns(usage.user_time()) + ns(usage.system_time())
}

/// A socket filter that only returns `verdict` (-1 pass, 0 drop).
fn constant_program(verdict: i32) -> Program {
    constant(ProgramType::SOCKET_FILTER, verdict)
}

/// An XDP program that only returns `action`.
fn constant_xdp(action: u32) -> Program {
    constant(ProgramType::XDP, action as i32)
}

/// A program of `kind` that only returns `value`.
fn constant(kind: ProgramType, value: i32) -> Program {
    let mut asm = Assembler::new();
    asm.mov_imm(Reg::R0, value).exit();
    Program::load(kind, &asm.finish().unwrap(), "GPL", "phx_constant")
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The softnet backlog drops so far (`/proc/net/softnet_stat`, second
/// column): frames the kernel dropped before any tap saw them.
fn backlog_drops() -> u64 {
    let softnet = std::fs::read_to_string("/proc/net/softnet_stat").unwrap();
    softnet
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(|v| u64::from_str_radix(v, 16).unwrap())
        .sum()
}

/// See the module docs.
fn receive_path(frames: usize, rounds: usize) {
    let ns = VethNamespace::create("phxrp");
    setns(File::open(ns.path()).unwrap(), CloneFlags::CLONE_NEWNET).unwrap();
    let mut tx = PacketSocket::open(&PacketSocketConfig::new("pxa")).unwrap();
    // Not owned by node 2 of 3: seq % 3 != 1.
    let batch: Vec<Vec<u8>> = (0..PACE_BATCH as u32)
        .map(|i| frame(Version::V4, None, SPI, 3 * i + 2)[14..].to_vec())
        .collect();
    let sa = [inbound(SPI, IpAddr::V4(PEER))];
    let mut filter = node_two_filter(DispatchScheme::PacketRoundRobin, (Some(VIP), None), &sa);
    filter.load_xdp().unwrap_or_else(|e| panic!("{e}"));
    let drop_all = constant_program(0);
    let drop_all_xdp = constant_xdp(xdp_action::DROP);
    // `frames` frames through a ring on the other end, filtered by
    // `program` there (`Hook::Socket`) or by `program` in the veth's
    // driver (`Hook::Xdp`, the ring unfiltered), the kernel timing each
    // run: (its mean ns per run, the sender's CPU ns per frame).
    let mut in_situ = |program: &Program, xdp: bool| {
        let mut config = PacketSocketConfig::new("pxb");
        config.promiscuous = true;
        let ring = PacketSocket::open(&config).unwrap();
        let link = if xdp {
            let link = program.attach_xdp(ring.ifindex()).unwrap();
            assert_eq!(link.mode(), XdpMode::Native);
            Some(link)
        } else {
            program.attach_to(&ring).unwrap();
            None
        };
        let before = program.run_stats().unwrap();
        let stats = RunTimeStats::enable().unwrap();
        let cpu = thread_cpu_ns();
        let mut sent = 0;
        while sent < frames {
            sent += tx.send_batch(batch.iter().map(Vec::as_slice)).unwrap_or(0);
            std::thread::sleep(PACE);
        }
        let cpu = (thread_cpu_ns() - cpu) as f64 / sent as f64;
        std::thread::sleep(Duration::from_millis(20));
        drop(stats);
        drop(link);
        let after = program.run_stats().unwrap();
        let runs = after.runs - before.runs;
        assert!(runs >= frames as u64, "{runs} runs for {frames} frames");
        ((after.nanos - before.nanos) as f64 / runs as f64, cpu)
    };
    let backlog_before = backlog_drops();
    let dropped_before = filter.drops();
    let xdp_program = filter.xdp_program().unwrap();
    let mut runs: [Vec<(f64, f64)>; 4] = Default::default();
    for _ in 0..rounds {
        runs[0].push(in_situ(filter.program(), false));
        runs[1].push(in_situ(&drop_all, false));
        runs[2].push(in_situ(xdp_program, true));
        runs[3].push(in_situ(&drop_all_xdp, true));
    }
    let median = |v: &[(f64, f64)], part: fn(&(f64, f64)) -> f64| {
        let mut v: Vec<f64> = v.iter().map(part).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let program_ns = |i: usize| median(&runs[i], |r| r.0);
    let cpu_ns = |i: usize| median(&runs[i], |r| r.1);
    let (filtered, empty) = (program_ns(0), program_ns(1));
    println!(
        "receive path, {LEN}-byte IP packets, {frames} not-owned frames x {rounds} rounds, {PACE_BATCH} per {PACE:?}"
    );
    println!("(the kernel's time per run of the ring's filter, BPF_ENABLE_STATS, median):");
    println!(
        "  the cluster's ESP filter (not owned: recorded, counted, dropped) {filtered:5.0} ns"
    );
    println!("  a program that only drops (the timing's own cost)              {empty:5.0} ns");
    println!(
        "  difference                                                     {:+5.0} ns",
        filtered - empty
    );
    let (xdp, xdp_empty) = (program_ns(2), program_ns(3));
    println!("the same decision in the veth's driver (XDP, native), the ring unfiltered:");
    println!("  the cluster's ESP program as XDP                               {xdp:5.0} ns");
    println!("  an XDP program that only drops                                 {xdp_empty:5.0} ns");
    println!(
        "  difference                                                     {:+5.0} ns",
        xdp - xdp_empty
    );
    println!("the sending thread's CPU time per frame (send and the veth's receive path), median:");
    for (i, what) in [
        "socket filter: the cluster's ESP filter",
        "socket filter: a program that only drops",
        "XDP: the cluster's ESP program",
        "XDP: a program that only drops",
    ]
    .iter()
    .enumerate()
    {
        println!("  {what:62} {:5.0} ns", cpu_ns(i));
    }
    println!(
        "  filter drops counted: {} of {}; receive backlog drops: {}",
        filter.drops() - dropped_before,
        frames * rounds * 2,
        backlog_drops() - backlog_before
    );
}
