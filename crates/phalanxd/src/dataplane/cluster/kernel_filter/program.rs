//! The ESP pre-filter program and the layout of its maps, shared with
//! user space ([`super::KernelFilter`]).
//!
//! Maps:
//! - `spis`: hash, SPI (u32) -> element index (u32) of `slots`;
//! - `slots`: mmapable array of [`SLOT_BYTES`] elements. Element 0 is the
//!   global header ([`global`]); element `i >= 1` is one inbound SA
//!   ([`slot`]): its mode, the precomputed ownership of whole-SA modes,
//!   its peer, and [`CELLS`] cells of observed sequence numbers.
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
//! IPv4, IPv4 options or total length inconsistent with the frame, not to
//! the outside virtual address, a fragment, neither ESP (protocol 50) nor
//! UDP to the ESP-in-UDP port with a non-zero first word (RFC 3948 §2.2:
//! the non-ESP marker is zero), or an SPI that is not registered. It
//! never reads past the frame (a legacy load past the end would end the
//! program with 0, a drop). For a registered SA it applies the SA's mode:
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
//! the global drop counter is incremented atomically, and the program
//! returns 0: the frame is never copied to the ring.

use std::net::Ipv4Addr;

use phalanx_io::bpf::asm::{AluOp, AsmError, Assembler, Helper, Insn, JmpOp, Label, Reg, Size};
use phalanx_wire::ethernet::MacAddress;

/// Observed cells per SA: the observer's window (`OBSERVER_WINDOW`), so
/// a number stays in its cell while it is in the window, unless a number
/// 4096 higher, out of the window of that one, replaced it.
pub const CELLS: usize = 4096;
/// Most inbound SAs with a slot; more are passed to user space.
pub const MAX_SLOTS: u32 = 1024;
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
    /// u64: not-owned ESP frames dropped by the program (atomic adds).
    pub const DROPS: usize = 16;
    /// u64: frames to another unicast MAC dropped (both rings).
    pub const OTHER_MAC_DROPS: usize = 24;
}

/// Octet offsets in a slot element.
pub mod slot {
    /// u32: the [`super::SlotMode`].
    pub const MODE: usize = 0;
    /// u32: whole-SA modes: 1 when this node owns the SA.
    pub const OWNED: usize = 4;
    /// u32: the SA's peer IPv4 address (host order, as legacy packet
    /// loads return it); whole-SA modes only.
    pub const PEER: usize = 8;
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
const ETH_TYPE: i32 = 12;
/// `ETH_P_IP`.
const ETHERTYPE_IPV4: u32 = 0x0800;
/// IPv4 header fields, from the frame start (RFC 791 §3.1).
const IP_VERSION_IHL: i32 = ETH_HLEN;
const IP_TOTAL_LENGTH: i32 = ETH_HLEN + 2;
const IP_FLAGS_FRAGMENT: i32 = ETH_HLEN + 6;
const IP_PROTOCOL: i32 = ETH_HLEN + 9;
const IP_SOURCE: i32 = ETH_HLEN + 12;
const IP_DESTINATION: i32 = ETH_HLEN + 16;
const IP_MIN_HEADER: i32 = 20;
/// More-fragments flag and fragment offset (RFC 791 §3.1).
const IP_MF_AND_OFFSET: i32 = 0x3fff;
/// IANA protocol numbers.
const PROTO_ESP: i32 = 50;
const PROTO_UDP: i32 = 17;
/// UDP header (RFC 768): destination port at 2, 8 octets.
const UDP_DST_PORT: i32 = 2;
const UDP_HEADER: i32 = 8;
/// ESP header (RFC 4303 §2): SPI, then the sequence number field.
const ESP_SPI: i32 = 0;
const ESP_SEQ: i32 = 4;
const ESP_HEADER: i32 = 8;
/// `struct __sk_buff` fields (linux/bpf.h).
const SKB_LEN: i16 = 0;
const SKB_VLAN_PRESENT: i16 = 20;
/// Stack slots: the SPI key, the slot index key, the global key.
const KEY_SPI: i16 = -4;
const KEY_SLOT: i16 = -8;
const KEY_GLOBAL: i16 = -12;
/// What the program returns: keep the whole frame, or drop it.
const PASS: i32 = -1;
const DROP: i32 = 0;

/// What the program is built for.
#[derive(Clone, Copy, Debug)]
pub struct FilterTarget {
    /// The outside virtual MAC.
    pub mac: MacAddress,
    /// The outside virtual address.
    pub address: Ipv4Addr,
    /// The ESP-in-UDP port (4500).
    pub udp_port: u16,
    /// Descriptor of the `spis` map.
    pub spis_fd: i32,
    /// Descriptor of the `slots` map.
    pub slots_fd: i32,
}

/// The outside ring's program. See the module docs.
pub fn esp_filter(target: &FilterTarget) -> Result<Vec<Insn>, AsmError> {
    let mut asm = Assembler::new();
    let pass = asm.label();
    let esp = asm.label();
    let have_esp = asm.label();
    let other_mac = asm.label();
    ip_checks(&mut asm, target, pass, other_mac);
    // r7: the transport header's offset in the frame; r8: where the IP
    // packet ends in the frame.
    asm.alu64_imm(AluOp::ADD, Reg::R7, ETH_HLEN)
        .ld_abs(Size::B, IP_PROTOCOL)
        .jump_imm(JmpOp::JEQ, Reg::R0, PROTO_ESP, esp)
        .jump_imm(JmpOp::JNE, Reg::R0, PROTO_UDP, pass);
    // ESP in UDP: the port, then a non-zero marker (zero: IKE).
    asm.mov(Reg::R1, Reg::R7)
        .alu64_imm(AluOp::ADD, Reg::R1, UDP_HEADER + ESP_HEADER)
        .jump_reg(JmpOp::JGT, Reg::R1, Reg::R8, pass)
        .ld_ind(Size::H, Reg::R7, UDP_DST_PORT)
        .jump_imm(JmpOp::JNE, Reg::R0, i32::from(target.udp_port), pass)
        .ld_ind(Size::W, Reg::R7, UDP_HEADER)
        .jump_imm(JmpOp::JEQ, Reg::R0, 0, pass)
        .alu64_imm(AluOp::ADD, Reg::R7, UDP_HEADER)
        .jump(have_esp);
    asm.bind(esp)
        .mov(Reg::R1, Reg::R7)
        .alu64_imm(AluOp::ADD, Reg::R1, ESP_HEADER)
        .jump_reg(JmpOp::JGT, Reg::R1, Reg::R8, pass);
    asm.bind(have_esp);
    decide(&mut asm, target, pass);
    asm.bind(other_mac);
    drop_other_mac(&mut asm, target.slots_fd, pass);
    asm.bind(pass).mov_imm(Reg::R0, PASS).exit();
    asm.finish()
}

/// The inside ring's program: drops (and counts) frames to another
/// unicast MAC than `mac`, passes everything else.
pub fn other_mac_filter(mac: MacAddress, slots_fd: i32) -> Result<Vec<Insn>, AsmError> {
    let mut asm = Assembler::new();
    let pass = asm.label();
    let other_mac = asm.label();
    asm.mov(Reg::R6, Reg::R1)
        .load(Size::W, Reg::R9, Reg::R6, SKB_LEN)
        .load(Size::W, Reg::R0, Reg::R6, SKB_VLAN_PRESENT)
        .jump_imm(JmpOp::JNE, Reg::R0, 0, pass)
        .jump_imm(JmpOp::JLT, Reg::R9, ETH_HLEN, pass);
    mac_check(&mut asm, mac, other_mac);
    asm.jump(pass);
    asm.bind(other_mac);
    drop_other_mac(&mut asm, slots_fd, pass);
    asm.bind(pass).mov_imm(Reg::R0, PASS).exit();
    asm.finish()
}

/// Jumps to `other` unless the destination MAC is `mac`.
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
fn drop_other_mac(asm: &mut Assembler, slots_fd: i32, pass: Label) {
    asm.ld_abs(Size::B, 0)
        .jump_imm(JmpOp::JSET, Reg::R0, 1, pass)
        .store_imm(Size::W, Reg::FP, KEY_GLOBAL, 0);
    lookup(asm, slots_fd, KEY_GLOBAL, pass);
    asm.mov_imm(Reg::R1, 1)
        .atomic_add64(Reg::R0, global::OTHER_MAC_DROPS as i16, Reg::R1)
        .mov_imm(Reg::R0, DROP)
        .exit();
}

/// Ethernet and IPv4 checks; leaves r7 = the IPv4 header length and r8 =
/// the end of the IPv4 packet in the frame. Jumps to `other_mac` for a
/// frame to another MAC, to `pass` on anything else.
fn ip_checks(asm: &mut Assembler, target: &FilterTarget, pass: Label, other_mac: Label) {
    asm.mov(Reg::R6, Reg::R1)
        .load(Size::W, Reg::R9, Reg::R6, SKB_LEN)
        .load(Size::W, Reg::R0, Reg::R6, SKB_VLAN_PRESENT)
        .jump_imm(JmpOp::JNE, Reg::R0, 0, pass)
        .jump_imm(JmpOp::JLT, Reg::R9, ETH_HLEN, pass);
    mac_check(asm, target.mac, other_mac);
    let min_len = ETH_HLEN + IP_MIN_HEADER + ESP_HEADER;
    asm.jump_imm(JmpOp::JLT, Reg::R9, min_len, pass)
        .ld_abs(Size::H, ETH_TYPE)
        .jump32_imm(JmpOp::JNE, Reg::R0, ETHERTYPE_IPV4, pass)
        .ld_abs(Size::B, IP_VERSION_IHL)
        .mov(Reg::R7, Reg::R0)
        .alu64_imm(AluOp::AND, Reg::R7, 0x0f)
        .alu64_imm(AluOp::LSH, Reg::R7, 2)
        .alu64_imm(AluOp::RSH, Reg::R0, 4)
        .jump_imm(JmpOp::JNE, Reg::R0, 4, pass)
        .jump_imm(JmpOp::JLT, Reg::R7, IP_MIN_HEADER, pass)
        .ld_abs(Size::W, IP_DESTINATION)
        .jump32_imm(JmpOp::JNE, Reg::R0, u32::from(target.address), pass)
        .ld_abs(Size::H, IP_FLAGS_FRAGMENT)
        .jump_imm(JmpOp::JSET, Reg::R0, IP_MF_AND_OFFSET, pass)
        .ld_abs(Size::H, IP_TOTAL_LENGTH)
        .mov(Reg::R8, Reg::R0)
        .alu64_imm(AluOp::ADD, Reg::R8, ETH_HLEN)
        .jump_reg(JmpOp::JGT, Reg::R8, Reg::R9, pass);
}

/// r7 = the ESP header's offset: look the SA up and decide.
fn decide(asm: &mut Assembler, target: &FilterTarget, pass: Label) {
    let round_robin = asm.label();
    let not_owned = asm.label();
    // r9: the sequence number field; r7: the source address.
    asm.ld_ind(Size::W, Reg::R7, ESP_SPI)
        .store(Size::W, Reg::FP, KEY_SPI, Reg::R0)
        .ld_ind(Size::W, Reg::R7, ESP_SEQ)
        .mov(Reg::R9, Reg::R0)
        .ld_abs(Size::W, IP_SOURCE)
        .mov(Reg::R7, Reg::R0);
    lookup(asm, target.spis_fd, KEY_SPI, pass);
    asm.load(Size::W, Reg::R1, Reg::R0, 0)
        .store(Size::W, Reg::FP, KEY_SLOT, Reg::R1)
        .store_imm(Size::W, Reg::FP, KEY_GLOBAL, 0);
    // r8: the global header.
    lookup(asm, target.slots_fd, KEY_GLOBAL, pass);
    asm.mov(Reg::R8, Reg::R0);
    // r0: the slot.
    lookup(asm, target.slots_fd, KEY_SLOT, pass);
    asm.load(Size::W, Reg::R1, Reg::R0, slot::MODE as i16)
        .jump_imm(
            JmpOp::JEQ,
            Reg::R1,
            SlotMode::ROUND_ROBIN.0 as i32,
            round_robin,
        )
        .jump_imm(JmpOp::JNE, Reg::R1, SlotMode::WHOLE_SA.0 as i32, pass)
        .load(Size::W, Reg::R2, Reg::R0, slot::PEER as i16)
        .jump_reg(JmpOp::JNE, Reg::R2, Reg::R7, pass)
        .load(Size::W, Reg::R2, Reg::R0, slot::OWNED as i16)
        .jump_imm(JmpOp::JNE, Reg::R2, 0, pass)
        .jump(not_owned);
    // Round robin: r3 = n, r2 = position, r4 = seq % n.
    asm.bind(round_robin)
        .load(Size::DW, Reg::R2, Reg::R8, global::VIEW as i16)
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
        .alu64_reg(AluOp::ADD, Reg::R0, Reg::R1)
        .store(Size::W, Reg::R0, slot::CELLS as i16, Reg::R9)
        .mov_imm(Reg::R1, 1)
        .atomic_add64(Reg::R8, global::DROPS as i16, Reg::R1)
        .mov_imm(Reg::R0, DROP)
        .exit();
}

/// `r0 = bpf_map_lookup_elem(map, fp + key)`; `pass` when absent.
fn lookup(asm: &mut Assembler, map_fd: i32, key: i16, pass: Label) {
    asm.ld_map_fd(Reg::R1, map_fd)
        .mov(Reg::R2, Reg::FP)
        .alu64_imm(AluOp::ADD, Reg::R2, i32::from(key))
        .call(Helper::MAP_LOOKUP_ELEM)
        .jump_imm(JmpOp::JEQ, Reg::R0, 0, pass);
}
