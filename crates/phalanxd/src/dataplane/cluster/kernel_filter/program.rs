//! The ESP pre-filter program and the layout of its maps, shared with
//! user space ([`super::KernelFilter`]).
//!
//! Maps:
//! - `index`: array of [`INDEX_BUCKETS`] u32, bucket [`bucket`]`(SPI)`
//!   -> element of `slots` (0: none). A direct-mapped table rather than a
//!   hash map: the lookup is inlined by the verifier instead of a helper
//!   call that hashes (about 20 ns here). The slot repeats the SPI, so a
//!   bucket shared by two SAs is detected: only the first gets a slot,
//!   the other's packets all reach user space, as unregistered ones do;
//! - `slots`: mmapable array of [`SLOT_BYTES`] elements. Element 0 is the
//!   global header ([`global`]); element `i >= 1` is one inbound SA
//!   ([`slot`]): its mode, the precomputed ownership of whole-SA modes,
//!   its peer, and [`CELLS`] cells of observed sequence numbers;
//! - `counters`: per-CPU array of one element, the drop counters
//!   ([`counter`]); each CPU adds to its own copy, so receive queues on
//!   different CPUs never contend for a cache line, and user space sums.
//!
//! Per frame of at least [`COPY`] octets, one `bpf_skb_load_bytes` copies
//! the headers to the stack and every check reads the copy; shorter
//! frames only get the MAC check (legacy loads).
//!
//! Per frame (from the Ethernet header, as a `SOCK_RAW` packet socket's
//! filter sees it), the program first **drops** a frame to another
//! unicast MAC address than the outside virtual MAC (counted in
//! [`global::OTHER_MAC_DROPS`]): the classifier ignores those anyway
//! (`cluster_ignored_other_mac`), and a segment that floods frames for
//! the virtual MAC floods the other nodes' and hosts' unicast too. The
//! inside ring gets only that part ([`other_mac_filter`]). Then it
//! **passes** (returns `0xffffffff`: the frame reaches the ring and user
//! space decides, as without the filter) anything it does not positively
//! recognise as a not-owned ESP packet of a registered SA: VLAN-tagged,
//! to a group (broadcast, multicast) address, not
//! IPv4, IPv4 options (a header longer than 20 octets) or total length
//! inconsistent with the frame, not to
//! the outside virtual address, a fragment, neither ESP (protocol 50) nor
//! UDP to the ESP-in-UDP port with a non-zero first word (RFC 3948 §2.2:
//! the non-ESP marker is zero), or an SPI that is not registered. It
//! never reads past the frame (the copy is only made of a frame at least
//! as long, and a legacy load past the end would end the program with 0,
//! a drop). For a registered SA it applies the SA's mode:
//! - [`SlotMode::ROUND_ROBIN`]: owned when `seq % n == position`
//!   (`DispatchScheme::PacketRoundRobin`: `view.member(index % n)`, the
//!   index being the 32-bit field of a non-ESN SA);
//! - [`SlotMode::WHOLE_SA`]: owned when the slot says so; a packet whose
//!   source is not the SA's peer passes (the hash schemes hash the
//!   packet's source, which user space did not precompute);
//! - any other mode passes.
//!
//! A not-owned packet's 32-bit sequence number is stored in cell `seq &
//! 4095` of its slot (a plain store: the latest number that mapped there),
//! this CPU's drop counter is incremented, and the program returns 0:
//! the frame is never copied to the ring.

use std::net::Ipv4Addr;

use phalanx_io::bpf::asm::{AluOp, AsmError, Assembler, Helper, Insn, JmpOp, Label, Reg, Size};
use phalanx_wire::ethernet::MacAddress;

/// Observed cells per SA: the observer's window (`OBSERVER_WINDOW`), so
/// a number stays in its cell while it is in the window, unless a number
/// 4096 higher, out of the window of that one, replaced it.
pub const CELLS: usize = 4096;
/// Most inbound SAs with a slot; more are passed to user space.
pub const MAX_SLOTS: u32 = 1024;
/// log2 of [`INDEX_BUCKETS`].
pub const INDEX_BITS: u32 = 14;
/// Buckets of the `index` map (64 KiB): with 1,024 SAs of random SPIs
/// about 3 % share a bucket with another and are not filtered.
pub const INDEX_BUCKETS: u32 = 1 << INDEX_BITS;
/// Fibonacci hashing (2^32 / golden ratio, odd): consecutive SPIs fall
/// in different buckets.
const BUCKET_MULTIPLIER: u32 = 0x9e37_79b1;

/// The `index` bucket of SPI `spi`, as the program computes it.
pub fn bucket(spi: u32) -> u32 {
    spi.wrapping_mul(BUCKET_MULTIPLIER) >> (32 - INDEX_BITS)
}
/// Octets of one `slots` element: the slot header and the cells.
pub const SLOT_BYTES: u32 = slot::CELLS as u32 + 4 * CELLS as u32;
/// The position stored while this node is not in the dispatch view (it
/// owns nothing): never equal to `seq % n`.
pub const NOT_ACTIVE: u32 = u32::MAX;

/// Octet offsets in element 0, the global header.
pub mod global {
    /// u64: the dispatch view as one word, so one store changes it: `n`
    /// (members) in the low half, this node's position in the high half
    /// ([`super::NOT_ACTIVE`] when it is not a member).
    pub const VIEW: usize = 0;
    /// u32: bumped by user space at every header change (for debugging).
    pub const GENERATION: usize = 8;
}

/// Octet offsets in a slot element.
pub mod slot {
    /// u32: the [`super::SlotMode`].
    pub const MODE: usize = 0;
    /// u32: whole-SA modes: 1 when this node owns the SA.
    pub const OWNED: usize = 4;
    /// u32: the SA's peer IPv4 address as its octets in network order
    /// (as the program reads them from the copied header); whole-SA
    /// modes only.
    pub const PEER: usize = 8;
    /// u32: the SA's SPI (the bucket is not unique).
    pub const SPI: usize = 12;
    /// The first of the u32 cells.
    pub const CELLS: usize = 16;
}

/// How the program decides a registered SA's packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotMode(pub u32);

impl SlotMode {
    /// Every packet goes to user space.
    pub const PASS: SlotMode = SlotMode(0);
    /// Owned when `seq % n == position`.
    pub const ROUND_ROBIN: SlotMode = SlotMode(1);
    /// Owned as the slot's `owned` says, for packets from its peer.
    pub const WHOLE_SA: SlotMode = SlotMode(2);
}

/// Ethernet header length and EtherType offset (IEEE 802.3).
const ETH_HLEN: i32 = 14;
const ETH_TYPE: i16 = 12;
/// `ETH_P_IP`.
const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
/// IPv4 header fields, from the frame start (RFC 791 §3.1). Only
/// 20-octet headers (version 4, IHL 5) are decided here; options pass.
const IP_VERSION_IHL: i16 = 14;
const IP_VERSION_4_IHL_5: i32 = 0x45;
const IP_TOTAL_LENGTH: i16 = 16;
const IP_FLAGS_FRAGMENT: i16 = 20;
const IP_PROTOCOL: i16 = 23;
const IP_SOURCE: i16 = 26;
const IP_DESTINATION: i16 = 30;
const IP_HEADER: i32 = 20;
/// More-fragments flag and fragment offset (RFC 791 §3.1), as the two
/// octets in network order read as a little-endian u16.
const IP_MF_AND_OFFSET: i32 = u16::from_le_bytes(0x3fff_u16.to_be_bytes()) as i32;
/// IANA protocol numbers.
const PROTO_ESP: i32 = 50;
const PROTO_UDP: i32 = 17;
/// UDP header (RFC 768), 8 octets; the ESP header (RFC 4303 §2): SPI,
/// then the sequence number field, 8 octets.
const UDP_HEADER: i32 = 8;
const ESP_HEADER: i32 = 8;
/// Frame offsets of the ESP-in-UDP destination port, ESP's SPI, and the
/// SPI of ESP in UDP (RFC 3948 §2.1; also the non-ESP marker, §2.2).
const UDP_DST_PORT: i16 = 36;
const ESP_SPI: i16 = 34;
const UDP_ESP_SPI: i16 = 42;
/// Octets copied to the stack: Ethernet, a 20-octet IPv4 header, UDP
/// and the ESP header. A shorter frame cannot be ESP the program drops
/// (the smallest AES-GCM ESP frame is 68 octets); it only gets the MAC
/// check.
const COPY: i32 = ETH_HLEN + IP_HEADER + UDP_HEADER + ESP_HEADER;
/// The frame's octet 0 on the stack. The verifier wants aligned stack
/// loads, so this sits at 2 mod 4: the addresses (frame offsets 26, 30)
/// and the SPIs and sequence numbers (34, 38; 42, 46) are then 4-aligned,
/// the 16-bit fields 2-aligned.
const FRAME: i16 = -66;
/// `struct __sk_buff` fields (linux/bpf.h).
const SKB_LEN: i16 = 0;
const SKB_VLAN_PRESENT: i16 = 20;
/// Stack slots: the slot index key, the key 0 (above the frame copy).
const KEY_SLOT: i16 = -8;
const KEY_ZERO: i16 = -12;
/// What the program returns: keep the whole frame, or drop it.
const PASS: i32 = -1;
const DROP: i32 = 0;

/// Octet offsets of the u64 counters in the `counters` per-CPU element.
pub mod counter {
    /// Not-owned ESP frames dropped by the outside program.
    pub const DROPS: i16 = 0;
    /// Frames to another unicast MAC dropped (both rings).
    pub const OTHER_MAC_DROPS: i16 = 8;
    /// Octets of the element.
    pub const BYTES: u32 = 16;
}

/// The stack offset of frame octet `at` in the copy.
const fn copied(at: i16) -> i16 {
    FRAME + at
}

/// `octets` as a little-endian load from memory returns them: what a
/// copied network-order field is compared with.
fn raw32(octets: [u8; 4]) -> u32 {
    u32::from_le_bytes(octets)
}

fn raw16(octets: [u8; 2]) -> u32 {
    u32::from(u16::from_le_bytes(octets))
}

/// What the program is built for.
#[derive(Clone, Copy, Debug)]
pub struct FilterTarget {
    /// The outside virtual MAC.
    pub mac: MacAddress,
    /// The outside virtual address.
    pub address: Ipv4Addr,
    /// The ESP-in-UDP port (4500).
    pub udp_port: u16,
    /// Descriptor of the `index` map.
    pub index_fd: i32,
    /// Descriptor of the `slots` map.
    pub slots_fd: i32,
    /// Descriptor of the `counters` per-CPU map ([`counter`]).
    pub counters_fd: i32,
}

/// The outside ring's program. See the module docs.
///
/// One `bpf_skb_load_bytes` copies the first [`COPY`] octets to the
/// stack and every field is read from there: the legacy packet loads it
/// replaced were one helper call each (14 per ESP frame).
pub fn esp_filter(target: &FilterTarget) -> Result<Vec<Insn>, AsmError> {
    let mut asm = Assembler::new();
    let pass = asm.label();
    let short = asm.label();
    let esp = asm.label();
    let have_esp = asm.label();
    let other_mac = asm.label();
    prologue(&mut asm, pass);
    asm.jump_imm(JmpOp::JLT, Reg::R9, COPY, short)
        .mov(Reg::R1, Reg::R6)
        .mov_imm(Reg::R2, 0)
        .mov(Reg::R3, Reg::FP)
        .alu64_imm(AluOp::ADD, Reg::R3, i32::from(FRAME))
        .mov_imm(Reg::R4, COPY)
        .call(Helper::SKB_LOAD_BYTES)
        .jump_imm(JmpOp::JNE, Reg::R0, 0, pass);
    let mac = target.mac.octets();
    asm.load(Size::H, Reg::R0, Reg::FP, copied(0))
        .jump32_imm(JmpOp::JNE, Reg::R0, raw16([mac[0], mac[1]]), other_mac)
        .load(Size::W, Reg::R0, Reg::FP, copied(2))
        .jump32_imm(
            JmpOp::JNE,
            Reg::R0,
            raw32([mac[2], mac[3], mac[4], mac[5]]),
            other_mac,
        );
    ip_checks(&mut asm, target, pass);
    // r8: where the IP packet ends in the frame.
    asm.load(Size::B, Reg::R0, Reg::FP, copied(IP_PROTOCOL))
        .jump_imm(JmpOp::JEQ, Reg::R0, PROTO_ESP, esp)
        .jump_imm(JmpOp::JNE, Reg::R0, PROTO_UDP, pass);
    // ESP in UDP: inside the IP packet, the port, then a non-zero
    // marker (zero: IKE). r7: the SPI's stack address.
    asm.jump_imm(JmpOp::JLT, Reg::R8, COPY, pass)
        .load(Size::H, Reg::R0, Reg::FP, copied(UDP_DST_PORT))
        .jump32_imm(
            JmpOp::JNE,
            Reg::R0,
            raw16(target.udp_port.to_be_bytes()),
            pass,
        )
        .load(Size::W, Reg::R0, Reg::FP, copied(UDP_ESP_SPI))
        .jump_imm(JmpOp::JEQ, Reg::R0, 0, pass)
        .mov(Reg::R7, Reg::FP)
        .alu64_imm(AluOp::ADD, Reg::R7, i32::from(copied(UDP_ESP_SPI)))
        .jump(have_esp);
    asm.bind(esp)
        .jump_imm(JmpOp::JLT, Reg::R8, ETH_HLEN + IP_HEADER + ESP_HEADER, pass)
        .mov(Reg::R7, Reg::FP)
        .alu64_imm(AluOp::ADD, Reg::R7, i32::from(copied(ESP_SPI)));
    asm.bind(have_esp);
    decide(&mut asm, target, pass);
    // Too short to copy: only the MAC matters (legacy loads).
    asm.bind(short);
    mac_check(&mut asm, target.mac, other_mac);
    asm.jump(pass);
    asm.bind(other_mac);
    drop_other_mac(&mut asm, target.counters_fd, pass);
    asm.bind(pass).mov_imm(Reg::R0, PASS).exit();
    asm.finish()
}

/// r6 = the context, r9 = the frame's length; `pass` for a VLAN-tagged
/// frame (the tag is outside the frame here) or one shorter than an
/// Ethernet header.
fn prologue(asm: &mut Assembler, pass: Label) {
    asm.mov(Reg::R6, Reg::R1)
        .load(Size::W, Reg::R9, Reg::R6, SKB_LEN)
        .load(Size::W, Reg::R0, Reg::R6, SKB_VLAN_PRESENT)
        .jump_imm(JmpOp::JNE, Reg::R0, 0, pass)
        .jump_imm(JmpOp::JLT, Reg::R9, ETH_HLEN, pass);
}

/// The inside ring's program: drops (and counts) frames to another
/// unicast MAC than `mac`, passes everything else.
pub fn other_mac_filter(mac: MacAddress, counters_fd: i32) -> Result<Vec<Insn>, AsmError> {
    let mut asm = Assembler::new();
    let pass = asm.label();
    let other_mac = asm.label();
    prologue(&mut asm, pass);
    mac_check(&mut asm, mac, other_mac);
    asm.jump(pass);
    asm.bind(other_mac);
    drop_other_mac(&mut asm, counters_fd, pass);
    asm.bind(pass).mov_imm(Reg::R0, PASS).exit();
    asm.finish()
}

/// Jumps to `other` unless the destination MAC is `mac` (legacy loads).
fn mac_check(asm: &mut Assembler, mac: MacAddress, other: Label) {
    let mac = mac.octets();
    let mac_high = u32::from_be_bytes([mac[0], mac[1], mac[2], mac[3]]);
    let mac_low = u32::from(u16::from_be_bytes([mac[4], mac[5]]));
    asm.ld_abs(Size::W, 0)
        .jump32_imm(JmpOp::JNE, Reg::R0, mac_high, other)
        .ld_abs(Size::H, 4)
        .jump32_imm(JmpOp::JNE, Reg::R0, mac_low, other);
}

/// A frame not to our MAC: a group address (IEEE 802: the I/G bit, bit 0
/// of the first octet) passes; another unicast address is counted and
/// dropped.
fn drop_other_mac(asm: &mut Assembler, counters_fd: i32, pass: Label) {
    asm.ld_abs(Size::B, 0)
        .jump_imm(JmpOp::JSET, Reg::R0, 1, pass);
    count_and_drop(asm, counters_fd, counter::OTHER_MAC_DROPS, pass);
}

/// Adds 1 to this CPU's counter at `at` (no atomics: the element is
/// this CPU's own) and drops the frame.
fn count_and_drop(asm: &mut Assembler, counters_fd: i32, at: i16, pass: Label) {
    asm.store_imm(Size::W, Reg::FP, KEY_ZERO, 0);
    lookup(asm, counters_fd, KEY_ZERO, pass);
    asm.load(Size::DW, Reg::R1, Reg::R0, at)
        .alu64_imm(AluOp::ADD, Reg::R1, 1)
        .store(Size::DW, Reg::R0, at, Reg::R1)
        .mov_imm(Reg::R0, DROP)
        .exit();
}

/// IPv4 checks on the copy; leaves r8 = the end of the IPv4 packet in
/// the frame. Jumps to `pass` unless it is an unfragmented IPv4 packet
/// with a 20-octet header to the virtual address, within the frame.
fn ip_checks(asm: &mut Assembler, target: &FilterTarget, pass: Label) {
    asm.load(Size::H, Reg::R0, Reg::FP, copied(ETH_TYPE))
        .jump32_imm(JmpOp::JNE, Reg::R0, raw16(ETHERTYPE_IPV4), pass)
        .load(Size::B, Reg::R0, Reg::FP, copied(IP_VERSION_IHL))
        .jump_imm(JmpOp::JNE, Reg::R0, IP_VERSION_4_IHL_5, pass)
        .load(Size::W, Reg::R0, Reg::FP, copied(IP_DESTINATION))
        .jump32_imm(JmpOp::JNE, Reg::R0, raw32(target.address.octets()), pass)
        .load(Size::H, Reg::R0, Reg::FP, copied(IP_FLAGS_FRAGMENT))
        .jump_imm(JmpOp::JSET, Reg::R0, IP_MF_AND_OFFSET, pass)
        .load(Size::H, Reg::R8, Reg::FP, copied(IP_TOTAL_LENGTH))
        .to_be(Reg::R8, 16)
        .alu64_imm(AluOp::ADD, Reg::R8, ETH_HLEN)
        .jump_reg(JmpOp::JGT, Reg::R8, Reg::R9, pass);
}

/// r7 = the copied SPI's stack address (the sequence number follows):
/// look the SA up and decide.
fn decide(asm: &mut Assembler, target: &FilterTarget, pass: Label) {
    let round_robin = asm.label();
    let not_owned = asm.label();
    // r9: the sequence number; r7: the SPI.
    asm.load(Size::W, Reg::R9, Reg::R7, 4)
        .to_be(Reg::R9, 32)
        .load(Size::W, Reg::R7, Reg::R7, 0)
        .to_be(Reg::R7, 32)
        .alu32_reg(AluOp::MOV, Reg::R1, Reg::R7)
        .alu32_imm(AluOp::MUL, Reg::R1, BUCKET_MULTIPLIER as i32)
        .alu32_imm(AluOp::RSH, Reg::R1, (32 - INDEX_BITS) as i32)
        .store(Size::W, Reg::FP, KEY_SLOT, Reg::R1);
    lookup(asm, target.index_fd, KEY_SLOT, pass);
    asm.load(Size::W, Reg::R1, Reg::R0, 0)
        .jump_imm(JmpOp::JEQ, Reg::R1, 0, pass)
        .store(Size::W, Reg::FP, KEY_SLOT, Reg::R1);
    // r7: the slot, if it is this SPI's.
    lookup(asm, target.slots_fd, KEY_SLOT, pass);
    asm.load(Size::W, Reg::R1, Reg::R0, slot::SPI as i16)
        .jump_reg(JmpOp::JNE, Reg::R1, Reg::R7, pass)
        .mov(Reg::R7, Reg::R0)
        .load(Size::W, Reg::R1, Reg::R7, slot::MODE as i16)
        .jump_imm(
            JmpOp::JEQ,
            Reg::R1,
            SlotMode::ROUND_ROBIN.0 as i32,
            round_robin,
        )
        .jump_imm(JmpOp::JNE, Reg::R1, SlotMode::WHOLE_SA.0 as i32, pass)
        .load(Size::W, Reg::R2, Reg::R7, slot::PEER as i16)
        .load(Size::W, Reg::R3, Reg::FP, copied(IP_SOURCE))
        .jump_reg(JmpOp::JNE, Reg::R2, Reg::R3, pass)
        .load(Size::W, Reg::R2, Reg::R7, slot::OWNED as i16)
        .jump_imm(JmpOp::JNE, Reg::R2, 0, pass)
        .jump(not_owned);
    // Round robin: the view from the global header (only this mode
    // needs it); r3 = n, r2 = position, r4 = seq % n.
    asm.bind(round_robin)
        .store_imm(Size::W, Reg::FP, KEY_ZERO, 0);
    lookup(asm, target.slots_fd, KEY_ZERO, pass);
    asm.load(Size::DW, Reg::R2, Reg::R0, global::VIEW as i16)
        .alu32_reg(AluOp::MOV, Reg::R3, Reg::R2)
        .alu64_imm(AluOp::RSH, Reg::R2, 32)
        .jump_imm(JmpOp::JEQ, Reg::R3, 0, not_owned)
        .alu32_reg(AluOp::MOV, Reg::R4, Reg::R9)
        .alu32_reg(AluOp::MOD, Reg::R4, Reg::R3)
        .jump_reg(JmpOp::JEQ, Reg::R4, Reg::R2, pass);
    // Not owned: record the number, count, drop.
    asm.bind(not_owned)
        .mov(Reg::R1, Reg::R9)
        .alu64_imm(AluOp::AND, Reg::R1, CELLS as i32 - 1)
        .alu64_imm(AluOp::LSH, Reg::R1, 2)
        .alu64_reg(AluOp::ADD, Reg::R7, Reg::R1)
        .store(Size::W, Reg::R7, slot::CELLS as i16, Reg::R9);
    count_and_drop(asm, target.counters_fd, counter::DROPS, pass);
}

/// `r0 = bpf_map_lookup_elem(map, fp + key)`; `pass` when absent.
fn lookup(asm: &mut Assembler, map_fd: i32, key: i16, pass: Label) {
    asm.ld_map_fd(Reg::R1, map_fd)
        .mov(Reg::R2, Reg::FP)
        .alu64_imm(AluOp::ADD, Reg::R2, i32::from(key))
        .call(Helper::MAP_LOOKUP_ELEM)
        .jump_imm(JmpOp::JEQ, Reg::R0, 0, pass);
}
