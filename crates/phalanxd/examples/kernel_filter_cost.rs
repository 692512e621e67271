//! The kernel's time for the cluster's ESP pre-filter on one 1400-byte
//! frame (`BPF_PROG_TEST_RUN`, the kernel's own clock over many runs):
//! an owned frame (passed), a not-owned one (recorded, counted, dropped),
//! one of an unregistered SA and a non-ESP frame (both passed early),
//! and, for the harness's own cost, a program that only returns.
//! Node 2 of a 3-node packet-rr view. Needs root (`bpf(2)`).
//!
//! `cargo run --release -p phalanxd --example kernel_filter_cost [repeat]`
//!
//! With `--receive-path [frames] [rounds]` it times the program on live
//! frames instead: in a namespace of its own, a veth pair; not-owned ESP
//! frames sent on one end (`sendmmsg`, paced so no backlog drops), a
//! ring on the other end filtered by the program, and the kernel timing
//! each run (`BPF_ENABLE_STATS`); then the same with a program that only
//! drops, for the timing's own cost. Alternating, median of the rounds.
#![allow(clippy::unwrap_used)]

use std::fs::File;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use nix::sched::{setns, CloneFlags};

use phalanx_cluster::dispatch::{Direction, DispatchScheme};
use phalanx_cluster::{NodeId, SaDescriptor, View};
use phalanx_io::bpf::asm::{Assembler, Reg};
use phalanx_io::bpf::{Program, ProgramType, RunTimeStats};
use phalanx_io::packet::{PacketSocket, PacketSocketConfig};
use phalanx_testkit::netns::VethNamespace;
use phalanx_wire::ethernet::MacAddress;
use phalanxd::dataplane::cluster::kernel_filter::{FilterAddresses, KernelFilter};

const MAC: MacAddress = MacAddress([0x02, 0, 0x5e, 0x10, 0, 1]);
const VIP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
const SPI: u32 = 0x2001;
const LEN: usize = 1400;
/// `--receive-path`: frames per `sendmmsg`, and the pause after each, so
/// the receiving end keeps up (no backlog drops).
const PACE_BATCH: usize = 16;
const PACE: Duration = Duration::from_micros(40);

/// 14 octets the test run strips, then an Ethernet frame carrying a
/// `LEN`-octet IPv4 packet with protocol `proto` and ESP (SPI, seq).
fn frame(proto: u8, spi: u32, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; 14];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&MAC.octets());
    f.extend_from_slice(&[0x02, 0xbb, 0, 0, 0, 1, 0x08, 0x00]);
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(LEN as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&PEER.octets());
    ip[16..20].copy_from_slice(&VIP.octets());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&spi.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(14 + 14 + LEN, 0x5a);
    f
}

/// Node 2's filter of a 3-node packet-rr view with SA `SPI` registered.
fn node_two_filter() -> KernelFilter {
    let mut filter = KernelFilter::load(
        NodeId(2),
        DispatchScheme::PacketRoundRobin,
        FilterAddresses {
            outside_mac: MAC,
            outside_v4: Some(VIP),
            outside_v6: None,
            inside_mac: MacAddress([0x02, 0, 0x5e, 0x10, 0, 2]),
        },
        4500,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let sa = SaDescriptor {
        direction: Direction::Inbound,
        spi: SPI,
        esn: false,
        peer: IpAddr::V4(PEER),
    };
    let view = View::new(1, [1, 2, 3].map(NodeId));
    filter.sync(&view, &[], [sa].iter());
    filter
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
    let filter = node_two_filter();
    let cases = [
        ("owned ESP (passed)", frame(50, SPI, 1)),
        ("not-owned ESP (recorded, dropped)", frame(50, SPI, 2)),
        ("ESP of an unregistered SA (passed)", frame(50, SPI + 1, 2)),
        ("not ESP: UDP to port 0 (passed)", frame(17, 0, 0)),
        ("to another unicast MAC (dropped)", {
            let mut f = frame(50, SPI, 2);
            f[14 + 5] ^= 0x10;
            f
        }),
    ];
    println!("kernel filter, {LEN}-byte IP packets, {repeat} runs each (BPF_PROG_TEST_RUN):");
    // The harness's own time per run: a program that only returns.
    let empty = constant_program(-1);
    let run = empty.test_run(&cases[0].1, repeat).unwrap();
    println!(
        "  {:38} {:>4} ns/run",
        "baseline: a program that only returns", run.ns_per_run
    );
    for (what, data) in cases {
        let run = filter.program().test_run(&data, repeat).unwrap();
        let verdict = if run.retval == 0 { "drop" } else { "pass" };
        println!("  {what:38} {:>4} ns/run  -> {verdict}", run.ns_per_run);
    }
}

/// A socket filter that only returns `verdict` (-1 pass, 0 drop).
fn constant_program(verdict: i32) -> Program {
    let mut asm = Assembler::new();
    asm.mov_imm(Reg::R0, verdict).exit();
    Program::load(
        ProgramType::SOCKET_FILTER,
        &asm.finish().unwrap(),
        "GPL",
        "phx_constant",
    )
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
        .map(|i| frame(50, SPI, 3 * i + 2)[14..].to_vec())
        .collect();
    let filter = node_two_filter();
    let drop_all = constant_program(0);
    // `frames` frames through a ring on the other end filtered by
    // `program`, the kernel timing each run: its mean ns per run.
    let mut in_situ = |program: &Program| {
        let mut config = PacketSocketConfig::new("pxb");
        config.promiscuous = true;
        let ring = PacketSocket::open(&config).unwrap();
        program.attach_to(&ring).unwrap();
        let before = program.run_stats().unwrap();
        let stats = RunTimeStats::enable().unwrap();
        let mut sent = 0;
        while sent < frames {
            sent += tx.send_batch(batch.iter().map(Vec::as_slice)).unwrap_or(0);
            std::thread::sleep(PACE);
        }
        std::thread::sleep(Duration::from_millis(20));
        drop(stats);
        let after = program.run_stats().unwrap();
        let runs = after.runs - before.runs;
        assert!(runs >= frames as u64, "{runs} runs for {frames} frames");
        (after.nanos - before.nanos) as f64 / runs as f64
    };
    let backlog_before = backlog_drops();
    let dropped_before = filter.drops();
    let (mut filtered, mut empty) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        filtered.push(in_situ(filter.program()));
        empty.push(in_situ(&drop_all));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (filtered, empty) = (median(&mut filtered), median(&mut empty));
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
    println!(
        "  filter drops counted: {} of {}; receive backlog drops: {}",
        filter.drops() - dropped_before,
        frames * rounds,
        backlog_drops() - backlog_before
    );
}
