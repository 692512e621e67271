//! The kernel's time for the cluster's ESP pre-filter on one 1400-byte
//! frame (`BPF_PROG_TEST_RUN`, the kernel's own clock over many runs):
//! an owned frame (passed), a not-owned one (recorded, counted, dropped),
//! one of an unregistered SA and a non-ESP frame (both passed early),
//! and, for the harness's own cost, a program that only returns.
//! Node 2 of a 3-node packet-rr view. Needs root (`bpf(2)`).
//!
//! `cargo run --release -p phalanxd --example kernel_filter_cost [repeat]`
#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr};

use phalanx_cluster::dispatch::{Direction, DispatchScheme};
use phalanx_cluster::{NodeId, SaDescriptor, View};
use phalanx_io::bpf::asm::{Assembler, Reg};
use phalanx_io::bpf::{Program, ProgramType};
use phalanx_wire::ethernet::MacAddress;
use phalanxd::dataplane::cluster::kernel_filter::{FilterAddresses, KernelFilter};

const MAC: MacAddress = MacAddress([0x02, 0, 0x5e, 0x10, 0, 1]);
const VIP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
const SPI: u32 = 0x2001;
const LEN: usize = 1400;

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

fn main() {
    let repeat: u32 = std::env::args()
        .nth(1)
        .map_or(1_000_000, |a| a.parse().unwrap());
    let mut filter = KernelFilter::load(
        NodeId(2),
        DispatchScheme::PacketRoundRobin,
        FilterAddresses {
            outside_mac: MAC,
            outside: VIP,
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
    filter.sync(&view, [sa].iter());
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
    let mut asm = Assembler::new();
    asm.mov_imm(Reg::R0, -1).exit();
    let empty = Program::load(
        ProgramType::SOCKET_FILTER,
        &asm.finish().unwrap(),
        "GPL",
        "phx_empty",
    )
    .unwrap_or_else(|e| panic!("{e}"));
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
