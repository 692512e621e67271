//! These need `bpf(2)` (root, or `CAP_BPF`), the last one a packet
//! socket too (`CAP_NET_RAW`): without them they fail, saying so
//! (`PHALANX_ALLOW_PRIVILEGED_SKIP=1` makes them skip loudly instead; see
//! [`crate::test_support`]).

use super::asm::{AluOp, Assembler, Helper, JmpOp, Reg, Size};
use super::*;
use crate::packet::PacketSocketConfig;

/// What the `bpf(2)` tests need.
const NEEDS_BPF: &str = "root or CAP_BPF (bpf(2))";

/// The map or program, or `None` when `bpf()` is not permitted and
/// skipping was allowed ([`crate::test_support::permitted`]).
fn permitted<T>(result: io::Result<T>) -> Option<T> {
    crate::test_support::permitted(result, NEEDS_BPF)
}

/// A program returning `verdict` for every packet.
fn constant(verdict: i32) -> Vec<Insn> {
    let mut asm = Assembler::new();
    asm.mov_imm(Reg::R0, verdict).exit();
    asm.finish().unwrap()
}

/// Loads what `asm` holds as a socket filter; panics with the verifier's
/// log if refused.
fn load_socket_filter(asm: &Assembler, name: &str) -> Program {
    Program::load(
        ProgramType::SOCKET_FILTER,
        &asm.finish().unwrap(),
        "GPL",
        name,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A test-run input: 14 octets the kernel strips (an IPv4 EtherType
/// among them), then the 60-octet frame the program sees, with
/// `ethertype` at its octets 12-13.
fn test_run_frame(ethertype: [u8; 2]) -> [u8; 14 + 60] {
    let mut frame = [0u8; 14 + 60];
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    frame[14 + 12..14 + 14].copy_from_slice(&ethertype);
    frame
}

#[test]
fn hash_map_elements_update_lookup_delete() {
    let Some(map) = permitted(Map::hash(4, 4, 16, "phx_test_hash")) else {
        return;
    };
    let key = 0xdead_beef_u32.to_ne_bytes();
    let mut value = [0u8; 4];
    assert!(!map.lookup(&key, &mut value).unwrap());
    map.update(&key, &7u32.to_ne_bytes()).unwrap();
    assert!(map.lookup(&key, &mut value).unwrap());
    assert_eq!(u32::from_ne_bytes(value), 7);
    assert!(map.delete(&key).unwrap());
    assert!(!map.delete(&key).unwrap());
    assert_eq!(
        map.update(&[0; 3], &[0; 4]).unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );
}

#[test]
fn mapped_array_is_the_map_seen_by_system_calls() {
    let Some(array) = permitted(MappedArray::create(20, 3, "phx_test_arr")) else {
        return;
    };
    assert_eq!(array.stride(), 24);
    assert!(array.store_u32(2, 16, 0x1234_5678));
    assert!(array.store_u64(1, 8, u64::MAX - 1));
    let mut value = [0u8; 20];
    assert!(array.map().lookup(&2u32.to_ne_bytes(), &mut value).unwrap());
    assert_eq!(&value[16..20], &0x1234_5678u32.to_ne_bytes());
    value[4..8].copy_from_slice(&99u32.to_ne_bytes());
    array.map().update(&0u32.to_ne_bytes(), &value).unwrap();
    assert_eq!(array.load_u32(0, 4), Some(99));
    assert_eq!(array.load_u64(1, 8), Some(u64::MAX - 1));
    let mut words = [0u32; 5];
    assert!(array.read_u32s(0, 0, &mut words));
    assert_eq!(words[1], 99);
    assert!(array.zero_u32s(0, 0, 5));
    assert_eq!(array.load_u32(0, 4), Some(0));
    assert_eq!(array.load_u32(3, 0), None, "past the last element");
    assert_eq!(array.load_u32(0, 18), None, "past the element's end");
    assert_eq!(array.load_u32(0, 2), None, "unaligned");
}

#[test]
fn test_run_returns_the_verdict_and_a_time() {
    let Some(prog) = permitted(
        Program::load(ProgramType::SOCKET_FILTER, &constant(-1), "GPL", "phx_pass")
            .map_err(|e| e.error),
    ) else {
        return;
    };
    let frame = [0u8; 64];
    let run = prog.test_run(&frame, 1000).unwrap();
    assert_eq!(run.retval, u32::MAX);
    assert!(run.ns_per_run < 1_000_000, "{run:?}");
}

#[test]
fn refused_programs_come_with_the_verifier_log() {
    // Reads r2, which is never written: the verifier refuses it.
    let mut asm = Assembler::new();
    asm.mov(Reg::R0, Reg::R2).exit();
    let insns = asm.finish().unwrap();
    match Program::load(ProgramType::SOCKET_FILTER, &insns, "GPL", "phx_bad") {
        Ok(_) => panic!("the verifier accepted a read of an uninitialised register"),
        Err(e) if e.error.raw_os_error() == Some(libc::EPERM) => {
            crate::test_support::cannot_run(NEEDS_BPF, &e.error);
        }
        Err(e) => {
            assert!(e.log.contains("R2 !read_ok"), "{e}");
            assert!(e.to_string().contains("verifier log"));
        }
    }
}

/// A program that counts into an array map and looks up a hash map:
/// helpers, map descriptors, atomic adds and memory accesses pass the
/// verifier as the filter will use them.
#[test]
fn maps_are_reachable_from_a_program() {
    let Some(counts) = permitted(MappedArray::create(16, 1, "phx_test_cnt")) else {
        return;
    };
    let hash = Map::hash(4, 4, 4, "phx_test_h").unwrap();
    hash.update(&0x0800u32.to_ne_bytes(), &5u32.to_ne_bytes())
        .unwrap();
    let mut asm = Assembler::new();
    let out = asm.label();
    asm.mov(Reg::R6, Reg::R1)
        .ld_abs(Size::H, 12)
        .store(Size::W, Reg::FP, -4, Reg::R0)
        .ld_map_fd(Reg::R1, map_fd(&hash))
        .mov(Reg::R2, Reg::FP)
        .alu64_imm(AluOp::ADD, Reg::R2, -4)
        .call(Helper::MAP_LOOKUP_ELEM)
        .jump_imm(JmpOp::JEQ, Reg::R0, 0, out)
        .load(Size::W, Reg::R7, Reg::R0, 0)
        .store_imm(Size::W, Reg::FP, -4, 0)
        .ld_map_fd(Reg::R1, map_fd(counts.map()))
        .mov(Reg::R2, Reg::FP)
        .alu64_imm(AluOp::ADD, Reg::R2, -4)
        .call(Helper::MAP_LOOKUP_ELEM)
        .jump_imm(JmpOp::JEQ, Reg::R0, 0, out)
        .atomic_add64(Reg::R0, 8, Reg::R7)
        .bind(out)
        .mov_imm(Reg::R0, 0)
        .exit();
    let prog = load_socket_filter(&asm, "phx_count");
    let mut frame = test_run_frame([0x08, 0x00]);
    prog.test_run(&frame, 3).unwrap();
    assert_eq!(counts.load_u64(0, 8), Some(15), "3 runs, 5 each");
    frame[14 + 12..14 + 14].copy_from_slice(&[0x86, 0xdd]);
    prog.test_run(&frame, 3).unwrap();
    assert_eq!(counts.load_u64(0, 8), Some(15), "not in the hash map");
}

/// One `bpf_skb_load_bytes` into the stack, a byte swap of what it
/// copied, and a per-CPU counter the program adds to without atomics;
/// user space sums the CPUs' copies.
#[test]
fn copied_headers_and_per_cpu_counters() {
    let Some(counts) = permitted(Map::per_cpu_array(16, 1, "phx_test_pcpu")) else {
        return;
    };
    let mut asm = Assembler::new();
    let out = asm.label();
    // Copy octets 12..16 of the frame (EtherType and 2 more) to fp-8.
    asm.mov(Reg::R6, Reg::R1)
        .mov(Reg::R1, Reg::R6)
        .mov_imm(Reg::R2, 12)
        .mov(Reg::R3, Reg::FP)
        .alu64_imm(AluOp::ADD, Reg::R3, -8)
        .mov_imm(Reg::R4, 4)
        .call(Helper::SKB_LOAD_BYTES)
        .jump_imm(JmpOp::JNE, Reg::R0, 0, out)
        .load(Size::H, Reg::R7, Reg::FP, -8)
        .to_be(Reg::R7, 16)
        .store_imm(Size::W, Reg::FP, -12, 0)
        .ld_map_fd(Reg::R1, map_fd(&counts))
        .mov(Reg::R2, Reg::FP)
        .alu64_imm(AluOp::ADD, Reg::R2, -12)
        .call(Helper::MAP_LOOKUP_ELEM)
        .jump_imm(JmpOp::JEQ, Reg::R0, 0, out)
        // word 0 += 1, word 1 += the EtherType.
        .load(Size::DW, Reg::R1, Reg::R0, 0)
        .alu64_imm(AluOp::ADD, Reg::R1, 1)
        .store(Size::DW, Reg::R0, 0, Reg::R1)
        .load(Size::DW, Reg::R1, Reg::R0, 8)
        .alu64_reg(AluOp::ADD, Reg::R1, Reg::R7)
        .store(Size::DW, Reg::R0, 8, Reg::R1)
        .bind(out)
        .mov_imm(Reg::R0, 0)
        .exit();
    let prog = load_socket_filter(&asm, "phx_pcpu");
    let frame = test_run_frame([0x86, 0xdd]);
    prog.test_run(&frame, 3).unwrap();
    let mut sums = [0u64; 2];
    counts.sum_per_cpu_u64s(0, &mut sums).unwrap();
    assert_eq!(sums, [3, 3 * 0x86dd]);
    assert!(
        counts.sum_per_cpu_u64s(1, &mut sums).is_err(),
        "no element 1"
    );
    assert!(counts.sum_per_cpu_u64s(0, &mut [0u64; 1]).is_err());
}

/// With run-time stats held, the kernel counts every run (test runs
/// too) and its time; without, nothing.
#[test]
fn run_stats_count_runs_while_enabled() {
    let Some(prog) = permitted(
        Program::load(ProgramType::SOCKET_FILTER, &constant(0), "GPL", "phx_stats")
            .map_err(|e| e.error),
    ) else {
        return;
    };
    let frame = [0u8; 14 + 60];
    let before = prog.run_stats().unwrap();
    {
        let _stats = RunTimeStats::enable().unwrap();
        prog.test_run(&frame, 1000).unwrap();
    }
    let during = prog.run_stats().unwrap();
    assert_eq!(during.runs - before.runs, 1000);
    assert!(during.nanos > before.nanos);
    prog.test_run(&frame, 1000).unwrap();
    let after = prog.run_stats().unwrap();
    assert_eq!(after.runs, during.runs, "not counted once dropped");
}

#[test]
fn possible_cpu_lists() {
    assert_eq!(possible_cpus("0\n"), Some(1));
    assert_eq!(possible_cpus("0-1\n"), Some(2));
    assert_eq!(possible_cpus("0-3,8-11"), Some(12));
    assert_eq!(possible_cpus(""), None);
    assert_eq!(possible_cpus("x"), None);
}

/// A drop-all filter attached to a packet socket on `lo`: the ring stays
/// empty while a pass-all socket beside it sees the traffic.
#[test]
fn attached_filter_keeps_frames_out_of_the_ring() {
    let Some(drop_all) = permitted(
        Program::load(ProgramType::SOCKET_FILTER, &constant(0), "GPL", "phx_drop")
            .map_err(|e| e.error),
    ) else {
        return;
    };
    let pass_all =
        Program::load(ProgramType::SOCKET_FILTER, &constant(-1), "GPL", "phx_pass").unwrap();
    let config = PacketSocketConfig::new("lo");
    let needs = "root or CAP_NET_RAW (a packet socket on lo)";
    let Some(mut dropped) = crate::test_support::permitted(PacketSocket::open(&config), needs)
    else {
        return;
    };
    let mut passed = PacketSocket::open(&config).unwrap();
    drop_all.attach_to(&dropped).unwrap();
    pass_all.attach_to(&passed).unwrap();
    // Frames of other tests queued between open and attach: let their
    // blocks retire (2 ms timeout) and give them back.
    std::thread::sleep(std::time::Duration::from_millis(20));
    dropped.recv_batch(|_, _| {});
    passed.recv_batch(|_, _| {});
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = udp.local_addr().unwrap();
    for _ in 0..20 {
        udp.send_to(b"phalanx bpf attach test", to).unwrap();
    }
    // Blocks retire after the 2 ms timeout.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let mut seen = 0;
    while seen < 20 && std::time::Instant::now() < deadline {
        seen += passed.recv_batch(|_, _| {});
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(seen >= 20, "the pass-all ring saw {seen} frames");
    assert_eq!(dropped.recv_batch(|_, _| {}), 0);
}
