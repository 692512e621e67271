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
//!   its peer (16 octets: an IPv6 address, or an IPv4 one and zeros),
//!   and [`CELLS`] cells of observed sequence numbers;
//! - `counters`: per-CPU array of one element, the drop counters
//!   ([`counter`]); each CPU adds to its own copy, so receive queues on
//!   different CPUs never contend for a cache line, and user space sums.
//!
//! The program is built for the outside virtual IPv4 address, the IPv6
//! one, or both (a dual-stack side); it parses only the versions it has
//! an address for, and frames of the other pass. Per frame of at least
//! the shortest copy, one `bpf_skb_load_bytes` copies the headers to the
//! stack and every check reads the copy: 50 octets (Ethernet, a 20-octet
//! IPv4 header, UDP, ESP) or, when the program parses IPv6 and the frame
//! has them, 70 (a 40-octet IPv6 header instead). The IPv6 checks need
//! the longer copy, so an IPv6 frame of fewer than 70 octets passes (no
//! ESP packet with an ICV is that short). Frames shorter than the
//! shortest copy only get the MAC check (legacy loads).
//!
//! Per frame (from the Ethernet header, as a `SOCK_RAW` packet socket's
//! filter sees it), the program first **drops** a frame to another
//! unicast MAC address than the outside virtual MAC (counted in
//! [`counter::OTHER_MAC_DROPS`]): the classifier ignores those anyway
//! (`cluster_ignored_other_mac`), and a segment that floods frames for
//! the virtual MAC floods the other nodes' and hosts' unicast too. The
//! inside ring gets only that part ([`other_mac_filter`]). Then it
//! **passes** (returns `0xffffffff`: the frame reaches the ring and user
//! space decides, as without the filter) anything it does not positively
//! recognise as a not-owned ESP packet of a registered SA:
//! - VLAN-tagged, or to a group (broadcast, multicast) address;
//! - neither IPv4 nor IPv6, or a version the program has no address for;
//! - IPv4 (RFC 791) with options (a header longer than 20 octets), a
//!   total length past the frame, or a fragment;
//! - IPv6 (RFC 8200) whose Next Header is not ESP or UDP directly (any
//!   extension header, fragments included: user space walks the chain),
//!   or whose payload length runs past the frame;
//! - not to the outside virtual address of its version;
//! - neither ESP (protocol 50) nor UDP to the ESP-in-UDP port with a
//!   non-zero first word (RFC 3948 §2.2: the non-ESP marker is zero), or
//!   an ESP header past the IP packet's end;
//! - an SPI that is not registered.
//!
//! It never reads past the frame (the copy is only made of a frame at
//! least as long, and a legacy load past the end would end the program
//! with 0, a drop). For a registered SA it applies the SA's mode, the
//! same for both IP versions:
//! - [`SlotMode::ROUND_ROBIN`]: owned when `seq % n == position`
//!   (`DispatchScheme::PacketRoundRobin`: `view.member(index % n)`, the
//!   index being the 32-bit field of a non-ESN SA), or, when that
//!   position is a silent suspect's, `seq % m == position` among the
//!   members that are not silent (`InboundDispatcher`'s takeover, see
//!   [`view_word`]);
//! - [`SlotMode::WHOLE_SA_V4`], [`SlotMode::WHOLE_SA_V6`]: owned when the
//!   slot says so; a packet whose source is not the SA's peer passes (the
//!   hash schemes hash the packet's source, which user space did not
//!   precompute), and so does a packet of the other IP version than the
//!   peer's (its source cannot be the peer);
//! - any other mode passes.
//!
//! A not-owned packet's 32-bit sequence number is stored in cell `seq &
//! 4095` of its slot (a plain store: the latest number that mapped there),
//! this CPU's drop counter is incremented, and the program returns 0:
//! the frame is never copied to the ring.

use std::net::{Ipv4Addr, Ipv6Addr};

use phalanx_cluster::{NodeId, View};
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
/// The position stored while this node is not in a view (it owns nothing
/// there): never equal to `seq % n`, as views of more members are not
/// encoded ([`view_word`]).
pub const NOT_ACTIVE: u8 = u8::MAX;
/// Most members a view word encodes; with more every frame passes.
pub const MAX_VIEW: usize = NOT_ACTIVE as usize - 1;
/// Most members a view with silent suspects may have: the silent
/// positions are a 32-bit mask.
pub const MAX_VIEW_SILENT: usize = 32;

/// The inbound dispatch of packet round robin as one 64-bit word
/// (`InboundDispatcher` over `view` taking over `silent`, for node
/// `local`), so one store changes it:
/// - octet 0: `n`, the base view's members (0: none, this node owns
///   nothing);
/// - octet 1: this node's position in it ([`NOT_ACTIVE`] if absent);
/// - octet 2: `m`, the members of the view without the silent ones;
/// - octet 3: this node's position there;
/// - octets 4..8: the silent positions of the base view, a bit each.
///
/// A packet is owned when `seq % n` is this node's position, or is a
/// silent position and `seq % m` is this node's position among the
/// others. A view of more than [`MAX_VIEW`] members, or of more than
/// [`MAX_VIEW_SILENT`] with a silent one, is written as a view of one
/// with this node in it: every frame passes and user space decides.
pub fn view_word(view: &View, silent: &[NodeId], local: NodeId) -> u64 {
    let pass_all = u64::from(1u8);
    let n = view.len();
    if n > MAX_VIEW || (n > MAX_VIEW_SILENT && !silent.is_empty()) {
        return pass_all;
    }
    let position = |v: &View| {
        v.index_of(local)
            .and_then(|i| u8::try_from(i).ok())
            .unwrap_or(NOT_ACTIVE)
    };
    let mut mask = 0u32;
    for (i, member) in view.members().iter().enumerate() {
        if silent.contains(member) {
            mask |= 1 << i;
        }
    }
    let others = view.without(silent);
    let octet = |v: usize| u64::from(u8::try_from(v).unwrap_or(0));
    octet(n)
        | u64::from(position(view)) << 8
        | octet(others.len()) << 16
        | u64::from(position(&others)) << 24
        | u64::from(mask) << 32
}

/// Octet offsets in element 0, the global header.
pub mod global {
    /// u64: the packet round robin dispatch ([`super::view_word`]).
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
    /// u32: the SA's SPI (the bucket is not unique).
    pub const SPI: usize = 8;
    /// [`PEER_BYTES`] octets: the SA's peer address as its octets in
    /// network order (as the program reads them from the copied header):
    /// an IPv6 address, or an IPv4 address in the first 4 and zeros;
    /// whole-SA modes only. Octets 12..16 are unused, so the peer and the
    /// cells are 8-aligned.
    pub const PEER: usize = 16;
    /// Octets of the peer: an IPv6 address.
    pub const PEER_BYTES: usize = 16;
    /// The first of the u32 cells.
    pub const CELLS: usize = PEER + PEER_BYTES;
}

/// How the program decides a registered SA's packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotMode(pub u32);

impl SlotMode {
    /// Every packet goes to user space.
    pub const PASS: SlotMode = SlotMode(0);
    /// Owned as [`view_word`] says.
    pub const ROUND_ROBIN: SlotMode = SlotMode(1);
    /// Owned as the slot's `owned` says, for IPv4 packets from its peer,
    /// an IPv4 address.
    pub const WHOLE_SA_V4: SlotMode = SlotMode(2);
    /// Owned as the slot's `owned` says, for IPv6 packets from its peer,
    /// an IPv6 address.
    pub const WHOLE_SA_V6: SlotMode = SlotMode(3);
}

/// Ethernet header length and EtherType offset (IEEE 802.3).
const ETH_HLEN: i32 = 14;
const ETH_TYPE: i16 = 12;
/// IPv4 header fields, from the frame start (RFC 791 §3.1). Only
/// 20-octet headers (version 4, IHL 5) are decided here; options pass.
const IP_VERSION_IHL: i16 = 14;
const IP_VERSION_4_IHL_5: i32 = 0x45;
const IP_TOTAL_LENGTH: i16 = 16;
const IP_FLAGS_FRAGMENT: i16 = 20;
const IP_DESTINATION: i16 = 30;
/// More-fragments flag and fragment offset (RFC 791 §3.1), as the two
/// octets in network order read as a little-endian u16.
const IP_MF_AND_OFFSET: i32 = u16::from_le_bytes(0x3fff_u16.to_be_bytes()) as i32;
/// IPv6 header fields, from the frame start (RFC 8200 §3): the version
/// in the high four bits of the first octet, then the Payload Length
/// (the octets after the 40-octet header) and the destination address.
const IP6_VERSION: i16 = 14;
const IP6_VERSION_MASK: i32 = 0xf0;
const IP6_VERSION_6: i32 = 0x60;
const IP6_PAYLOAD_LENGTH: i16 = 18;
const IP6_DESTINATION: i16 = 38;
/// IANA protocol numbers.
const PROTO_ESP: i32 = 50;
const PROTO_UDP: i32 = 17;
/// UDP header (RFC 768), 8 octets; the ESP header (RFC 4303 §2): SPI,
/// then the sequence number field, 8 octets.
const UDP_HEADER: i32 = 8;
const ESP_HEADER: i32 = 8;

/// Where one IP version's fields sit in the frame, and the mode of the
/// whole-SA slots whose peer is of that version.
struct IpLayout {
    /// `ETH_P_IP`, `ETH_P_IPV6`.
    ethertype: [u8; 2],
    /// Octets of the header the program decides: IPv4 without options,
    /// IPv6 without extension headers.
    header: i32,
    /// Frame offset of the Protocol (IPv4) or Next Header (IPv6) octet.
    protocol: i16,
    /// Frame offset of the source address, and its 32-bit words.
    source: i16,
    source_words: i16,
    /// The mode of whole-SA slots whose peer can send these packets.
    whole_sa: SlotMode,
}

impl IpLayout {
    /// Frame offset of what follows the header: ESP's SPI (RFC 4303 §2),
    /// or the UDP header.
    const fn transport(&self) -> i16 {
        (ETH_HLEN + self.header) as i16
    }

    /// Frame offset of the UDP destination port.
    const fn udp_destination_port(&self) -> i16 {
        self.transport() + 2
    }

    /// Frame offset of the SPI of ESP in UDP (RFC 3948 §2.1; also the
    /// non-ESP marker, §2.2).
    const fn udp_esp_spi(&self) -> i16 {
        self.transport() + UDP_HEADER as i16
    }

    /// Octets the checks read: Ethernet, the header, UDP and the ESP
    /// header. A shorter frame cannot be ESP the program drops (the
    /// smallest AES-GCM ESP frame is 68 octets over IPv4, 88 over IPv6).
    const fn copy(&self) -> i32 {
        ETH_HLEN + self.header + UDP_HEADER + ESP_HEADER
    }
}

/// IPv4 (RFC 791 §3.1): a 20-octet header.
const IPV4: IpLayout = IpLayout {
    ethertype: [0x08, 0x00],
    header: 20,
    protocol: 23,
    source: 26,
    source_words: 1,
    whole_sa: SlotMode::WHOLE_SA_V4,
};
/// IPv6 (RFC 8200 §3): the fixed 40-octet header.
const IPV6: IpLayout = IpLayout {
    ethertype: [0x86, 0xdd],
    header: 40,
    protocol: 20,
    source: 22,
    source_words: 4,
    whole_sa: SlotMode::WHOLE_SA_V6,
};

/// The frame's octet 0 on the stack, the longest copy (IPv6, 70 octets)
/// ending below the keys. The verifier wants aligned stack loads, so
/// this sits at 2 mod 4: the addresses (IPv4 frame offsets 26, 30; IPv6
/// 22 to 54) and the SPIs and sequence numbers (IPv4 34, 38 and 42, 46;
/// IPv6 54, 58 and 62, 66) are then 4-aligned, the 16-bit fields
/// 2-aligned.
const FRAME: i16 = -86;
/// `struct __sk_buff` fields (linux/bpf.h).
const SKB_LEN: i16 = 0;
const SKB_VLAN_PRESENT: i16 = 20;
/// `struct xdp_md` fields (linux/bpf.h): the frame's first octet and the
/// octet past its end, as the verifier's packet pointers.
const XDP_DATA: i16 = 0;
const XDP_DATA_END: i16 = 4;
/// Stack slots: the slot index key, the key 0 (above the frame copy).
const KEY_SLOT: i16 = -8;
const KEY_ZERO: i16 = -12;

/// Where the ESP decision runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    /// The outside ring's socket filter (`SO_ATTACH_BPF`): runs when the
    /// packet tap hands it the skb; also drops frames to other unicast
    /// MACs from the ring.
    Socket,
    /// The outside interface's XDP program: runs in the driver before an
    /// skb exists (or first thing in the generic receive path). It
    /// decides only ESP to the virtual MAC and address; every other
    /// frame, other MACs included (the node's own address is one), passes
    /// to the kernel and the socket filter behind it.
    Xdp,
}

impl Hook {
    /// What the program returns to keep the frame: the whole frame for a
    /// socket filter, `XDP_PASS`.
    const fn pass(self) -> i32 {
        match self {
            Hook::Socket => -1,
            Hook::Xdp => phalanx_io::bpf::xdp_action::PASS as i32,
        }
    }

    /// What it returns to drop it: 0 octets kept, `XDP_DROP`.
    const fn drop(self) -> i32 {
        match self {
            Hook::Socket => 0,
            Hook::Xdp => phalanx_io::bpf::xdp_action::DROP as i32,
        }
    }

    /// The register the header fields are read through: the stack
    /// (the socket filter's copy), or the frame itself (XDP reads the
    /// packet directly, r6 = its start).
    const fn base(self) -> Reg {
        match self {
            Hook::Socket => Reg::FP,
            Hook::Xdp => Reg::R6,
        }
    }

    /// The offset of frame octet `at` from [`base`](Self::base).
    const fn at(self, at: i16) -> i16 {
        match self {
            Hook::Socket => copied(at),
            Hook::Xdp => at,
        }
    }

    /// Jumps to `short` unless the frame has `len` octets. r9 is the
    /// frame's length on a socket and its end (`data_end`) in XDP, where
    /// the test also tells the verifier how far r6 may be read.
    fn need(self, asm: &mut Assembler, len: i32, short: Label) {
        match self {
            Hook::Socket => {
                asm.jump_imm(JmpOp::JLT, Reg::R9, len, short);
            }
            Hook::Xdp => {
                asm.mov(Reg::R1, Reg::R6)
                    .alu64_imm(AluOp::ADD, Reg::R1, len)
                    .jump_reg(JmpOp::JGT, Reg::R1, Reg::R9, short);
            }
        }
    }

    /// Jumps to `past` if frame offset `end` (a register) lies past the
    /// frame's end.
    fn past_end(self, asm: &mut Assembler, end: Reg, past: Label) {
        match self {
            Hook::Socket => {
                asm.jump_reg(JmpOp::JGT, end, Reg::R9, past);
            }
            Hook::Xdp => {
                asm.mov(Reg::R1, Reg::R6)
                    .alu64_reg(AluOp::ADD, Reg::R1, end)
                    .jump_reg(JmpOp::JGT, Reg::R1, Reg::R9, past);
            }
        }
    }
}

// The longest copy ends below the keys, and every 32-bit field the
// program loads from it is 4-aligned (see FRAME).
const _: () = assert!(FRAME as i32 + IPV6.copy() <= KEY_ZERO as i32);
const _: () = {
    let words = [
        IPV4.source,
        IP_DESTINATION,
        IPV4.transport(),
        IPV4.udp_esp_spi(),
        IPV6.source,
        IP6_DESTINATION,
        IPV6.transport(),
        IPV6.udp_esp_spi(),
    ];
    let mut i = 0;
    while i < words.len() {
        assert!(copied(words[i]).rem_euclid(4) == 0);
        i += 1;
    }
};

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

/// An IPv6 address as the four words little-endian loads of its copy
/// return.
fn raw_words(octets: &[u8; 16]) -> [u32; 4] {
    let word = |i: usize| raw32([octets[i], octets[i + 1], octets[i + 2], octets[i + 3]]);
    [word(0), word(4), word(8), word(12)]
}

/// What the program is built for.
#[derive(Clone, Copy, Debug)]
pub struct FilterTarget {
    /// The outside virtual MAC.
    pub mac: MacAddress,
    /// The outside virtual IPv4 address, if the side has one.
    pub ipv4: Option<Ipv4Addr>,
    /// The outside virtual IPv6 address, if the side has one.
    pub ipv6: Option<Ipv6Addr>,
    /// The ESP-in-UDP port (4500).
    pub udp_port: u16,
    /// Descriptor of the `index` map.
    pub index_fd: i32,
    /// Descriptor of the `slots` map.
    pub slots_fd: i32,
    /// Descriptor of the `counters` per-CPU map ([`counter`]).
    pub counters_fd: i32,
}

/// An outside virtual address the program decides ESP to.
#[derive(Clone, Copy)]
enum Destination {
    V4(Ipv4Addr),
    V6(Ipv6Addr),
}

impl Destination {
    fn layout(&self) -> &'static IpLayout {
        match self {
            Destination::V4(_) => &IPV4,
            Destination::V6(_) => &IPV6,
        }
    }
}

/// The outside program for `hook`. See the module docs. Without an
/// address it is the [`other_mac_filter`] (for [`Hook::Xdp`]: a program
/// that passes everything).
///
/// On a socket one `bpf_skb_load_bytes` copies the headers to the stack
/// and every field is read from there: the legacy packet loads it
/// replaced were one helper call each (14 per ESP frame). The XDP program
/// is the same decision over the same maps, reading the frame in place
/// (direct packet access behind length tests: no helper call, no copy);
/// it passes what the socket filter would drop for its MAC alone, and
/// frames shorter than the shortest copy.
pub fn esp_filter(target: &FilterTarget, hook: Hook) -> Result<Vec<Insn>, AsmError> {
    let destinations: Vec<Destination> = (target.ipv4.map(Destination::V4).into_iter())
        .chain(target.ipv6.map(Destination::V6))
        .collect();
    let copies = destinations.iter().map(|d| d.layout().copy());
    let (Some(shortest), Some(longest)) = (copies.clone().min(), copies.max()) else {
        if hook == Hook::Xdp {
            let mut asm = Assembler::new();
            asm.mov_imm(Reg::R0, hook.pass()).exit();
            return asm.finish();
        }
        return other_mac_filter(target.mac, target.counters_fd);
    };
    let mut asm = Assembler::new();
    let pass = asm.label();
    let short = asm.label();
    let other_mac = asm.label();
    prologue(&mut asm, pass, hook);
    copy_headers(&mut asm, (shortest, longest), short, pass, hook);
    let mac = target.mac.octets();
    asm.load(Size::H, Reg::R0, hook.base(), hook.at(0))
        .jump32_imm(JmpOp::JNE, Reg::R0, raw16([mac[0], mac[1]]), other_mac)
        .load(Size::W, Reg::R0, hook.base(), hook.at(2))
        .jump32_imm(
            JmpOp::JNE,
            Reg::R0,
            raw32([mac[2], mac[3], mac[4], mac[5]]),
            other_mac,
        );
    // r0: the EtherType, for each version's first test (a version that
    // does not match jumps before r0 changes).
    asm.load(Size::H, Reg::R0, hook.base(), hook.at(ETH_TYPE));
    for (i, destination) in destinations.iter().enumerate() {
        let last = i + 1 == destinations.len();
        let other_version = if last { pass } else { asm.label() };
        let layout = destination.layout();
        asm.jump32_imm(JmpOp::JNE, Reg::R0, raw16(layout.ethertype), other_version);
        if layout.copy() > shortest {
            // The frame was copied (may be read) this far only if it is
            // this long.
            hook.need(&mut asm, layout.copy(), pass);
        }
        match *destination {
            Destination::V4(address) => ipv4_checks(&mut asm, address, pass, hook),
            Destination::V6(address) => ipv6_checks(&mut asm, address, pass, hook),
        }
        transport(&mut asm, layout, target.udp_port, pass, hook);
        decide(&mut asm, target, layout, pass, hook);
        if !last {
            asm.bind(other_version);
        }
    }
    match hook {
        Hook::Socket => {
            // Too short to copy: only the MAC matters (legacy loads).
            asm.bind(short);
            mac_check(&mut asm, target.mac, other_mac);
            asm.jump(pass);
            asm.bind(other_mac);
            drop_other_mac(&mut asm, target.counters_fd, pass);
        }
        // Legacy loads do not exist in XDP; the socket filter decides
        // these frames.
        Hook::Xdp => {
            asm.bind(short).bind(other_mac);
        }
    }
    asm.bind(pass).mov_imm(Reg::R0, hook.pass()).exit();
    asm.finish()
}

/// On a socket r6 = the context, r9 = the frame's length; in XDP r6 =
/// the frame's start, r9 = its end (`xdp_md`'s `data`, `data_end`).
/// `pass` for a frame shorter than an Ethernet header and, on a socket, a
/// VLAN-tagged one (the tag is outside the frame there; in XDP it is in
/// the frame, whose EtherType then matches no IP version).
fn prologue(asm: &mut Assembler, pass: Label, hook: Hook) {
    match hook {
        Hook::Socket => {
            asm.mov(Reg::R6, Reg::R1)
                .load(Size::W, Reg::R9, Reg::R6, SKB_LEN)
                .load(Size::W, Reg::R0, Reg::R6, SKB_VLAN_PRESENT)
                .jump_imm(JmpOp::JNE, Reg::R0, 0, pass);
        }
        Hook::Xdp => {
            asm.load(Size::W, Reg::R6, Reg::R1, XDP_DATA).load(
                Size::W,
                Reg::R9,
                Reg::R1,
                XDP_DATA_END,
            );
        }
    }
    hook.need(asm, ETH_HLEN, pass);
}

/// Copies the frame's first `shortest` octets to the stack at [`FRAME`],
/// or its first `longest` when it has them: one helper call either way,
/// and an IPv4 frame costs the same as in a program without IPv6. A
/// frame shorter than `shortest` goes to `short`. The verifier follows
/// both lengths: a load past the shorter copy is only reachable behind a
/// length test that excludes it.
///
/// XDP copies nothing: it reads the frame in place, and only checks that
/// it holds `shortest` octets (the longer reads have their own test).
fn copy_headers(
    asm: &mut Assembler,
    (shortest, longest): (i32, i32),
    short: Label,
    pass: Label,
    hook: Hook,
) {
    if hook == Hook::Xdp {
        hook.need(asm, shortest, short);
        return;
    }
    let copy = asm.label();
    asm.jump_imm(JmpOp::JLT, Reg::R9, shortest, short)
        .mov_imm(Reg::R4, shortest);
    if longest > shortest {
        asm.jump_imm(JmpOp::JLT, Reg::R9, longest, copy)
            .mov_imm(Reg::R4, longest);
    }
    asm.bind(copy)
        .mov(Reg::R1, Reg::R6)
        .mov_imm(Reg::R2, 0)
        .mov(Reg::R3, Reg::FP)
        .alu64_imm(AluOp::ADD, Reg::R3, i32::from(FRAME))
        .call(Helper::SKB_LOAD_BYTES)
        .jump_imm(JmpOp::JNE, Reg::R0, 0, pass);
}

/// The inside ring's program: drops (and counts) frames to another
/// unicast MAC than `mac`, passes everything else.
pub fn other_mac_filter(mac: MacAddress, counters_fd: i32) -> Result<Vec<Insn>, AsmError> {
    let mut asm = Assembler::new();
    let pass = asm.label();
    let other_mac = asm.label();
    prologue(&mut asm, pass, Hook::Socket);
    mac_check(&mut asm, mac, other_mac);
    asm.jump(pass);
    asm.bind(other_mac);
    drop_other_mac(&mut asm, counters_fd, pass);
    asm.bind(pass).mov_imm(Reg::R0, Hook::Socket.pass()).exit();
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
    count_and_drop(
        asm,
        counters_fd,
        counter::OTHER_MAC_DROPS,
        pass,
        Hook::Socket,
    );
}

/// Adds 1 to this CPU's counter at `at` (no atomics: the element is
/// this CPU's own) and drops the frame.
fn count_and_drop(asm: &mut Assembler, counters_fd: i32, at: i16, pass: Label, hook: Hook) {
    asm.store_imm(Size::W, Reg::FP, KEY_ZERO, 0);
    lookup(asm, counters_fd, KEY_ZERO, pass);
    asm.load(Size::DW, Reg::R1, Reg::R0, at)
        .alu64_imm(AluOp::ADD, Reg::R1, 1)
        .store(Size::DW, Reg::R0, at, Reg::R1)
        .mov_imm(Reg::R0, hook.drop())
        .exit();
}

/// IPv4 checks on the copy (in XDP, the frame); leaves r8 = the end of the IPv4 packet in
/// the frame. Jumps to `pass` unless it is an unfragmented IPv4 packet
/// with a 20-octet header to `address`, within the frame.
fn ipv4_checks(asm: &mut Assembler, address: Ipv4Addr, pass: Label, hook: Hook) {
    asm.load(Size::B, Reg::R0, hook.base(), hook.at(IP_VERSION_IHL))
        .jump_imm(JmpOp::JNE, Reg::R0, IP_VERSION_4_IHL_5, pass)
        .load(Size::W, Reg::R0, hook.base(), hook.at(IP_DESTINATION))
        .jump32_imm(JmpOp::JNE, Reg::R0, raw32(address.octets()), pass)
        .load(Size::H, Reg::R0, hook.base(), hook.at(IP_FLAGS_FRAGMENT))
        .jump_imm(JmpOp::JSET, Reg::R0, IP_MF_AND_OFFSET, pass)
        .load(Size::H, Reg::R8, hook.base(), hook.at(IP_TOTAL_LENGTH))
        .to_be(Reg::R8, 16)
        .alu64_imm(AluOp::ADD, Reg::R8, ETH_HLEN);
    hook.past_end(asm, Reg::R8, pass);
}

/// IPv6 checks on the copy (in XDP, the frame); leaves r8 = the end of the IPv6 packet in
/// the frame. Jumps to `pass` unless it is version 6, to `address`
/// (four words), within the frame (RFC 8200 §3: the Payload Length
/// counts the octets after the 40-octet header). The Next Header is
/// [`transport`]'s: anything but ESP or UDP, extension headers
/// included, passes there.
fn ipv6_checks(asm: &mut Assembler, address: Ipv6Addr, pass: Label, hook: Hook) {
    asm.load(Size::B, Reg::R0, hook.base(), hook.at(IP6_VERSION))
        .alu32_imm(AluOp::AND, Reg::R0, IP6_VERSION_MASK)
        .jump_imm(JmpOp::JNE, Reg::R0, IP6_VERSION_6, pass);
    for (word, at) in raw_words(&address.octets()).into_iter().zip(0i16..) {
        asm.load(
            Size::W,
            Reg::R0,
            hook.base(),
            hook.at(IP6_DESTINATION + 4 * at),
        )
        .jump32_imm(JmpOp::JNE, Reg::R0, word, pass);
    }
    asm.load(Size::H, Reg::R8, hook.base(), hook.at(IP6_PAYLOAD_LENGTH))
        .to_be(Reg::R8, 16)
        .alu64_imm(AluOp::ADD, Reg::R8, ETH_HLEN + IPV6.header);
    hook.past_end(asm, Reg::R8, pass);
}

/// r8 = the end of the IP packet: ESP directly behind the header, or in
/// UDP to `udp_port` with a non-zero marker (zero: IKE, RFC 3948 §2.2),
/// its header inside the IP packet; leaves r7 = the copied SPI's stack
/// address (in XDP, its address in the frame). Anything else jumps to
/// `pass`.
fn transport(asm: &mut Assembler, layout: &IpLayout, udp_port: u16, pass: Label, hook: Hook) {
    let esp = asm.label();
    let have_esp = asm.label();
    asm.load(Size::B, Reg::R0, hook.base(), hook.at(layout.protocol))
        .jump_imm(JmpOp::JEQ, Reg::R0, PROTO_ESP, esp)
        .jump_imm(JmpOp::JNE, Reg::R0, PROTO_UDP, pass);
    asm.jump_imm(JmpOp::JLT, Reg::R8, layout.copy(), pass)
        .load(
            Size::H,
            Reg::R0,
            hook.base(),
            hook.at(layout.udp_destination_port()),
        )
        .jump32_imm(JmpOp::JNE, Reg::R0, raw16(udp_port.to_be_bytes()), pass)
        .load(Size::W, Reg::R0, hook.base(), hook.at(layout.udp_esp_spi()))
        .jump_imm(JmpOp::JEQ, Reg::R0, 0, pass)
        .mov(Reg::R7, hook.base())
        .alu64_imm(
            AluOp::ADD,
            Reg::R7,
            i32::from(hook.at(layout.udp_esp_spi())),
        )
        .jump(have_esp);
    asm.bind(esp)
        .jump_imm(
            JmpOp::JLT,
            Reg::R8,
            i32::from(layout.transport()) + ESP_HEADER,
            pass,
        )
        .mov(Reg::R7, hook.base())
        .alu64_imm(AluOp::ADD, Reg::R7, i32::from(hook.at(layout.transport())));
    asm.bind(have_esp);
}

/// r7 = the copied SPI's stack address (the sequence number follows):
/// look the SA up and decide. A whole-SA slot decides only packets of
/// `layout`'s version from its peer.
fn decide(asm: &mut Assembler, target: &FilterTarget, layout: &IpLayout, pass: Label, hook: Hook) {
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
        .jump_imm(JmpOp::JNE, Reg::R1, layout.whole_sa.0 as i32, pass);
    // Whole SA: from its peer (word by word), then as the slot says.
    for word in 0..layout.source_words {
        asm.load(Size::W, Reg::R2, Reg::R7, slot::PEER as i16 + 4 * word)
            .load(
                Size::W,
                Reg::R3,
                hook.base(),
                hook.at(layout.source + 4 * word),
            )
            .jump_reg(JmpOp::JNE, Reg::R2, Reg::R3, pass);
    }
    asm.load(Size::W, Reg::R2, Reg::R7, slot::OWNED as i16)
        .jump_imm(JmpOp::JNE, Reg::R2, 0, pass)
        .jump(not_owned);
    // Round robin: the view word from the global header (only this mode
    // needs it, see `view_word`); r2 = the word, r3 = n, then m,
    // r4 = seq % n, then seq % m, r5 = this node's positions, then the
    // silent bit.
    asm.bind(round_robin)
        .store_imm(Size::W, Reg::FP, KEY_ZERO, 0);
    lookup(asm, target.slots_fd, KEY_ZERO, pass);
    asm.load(Size::DW, Reg::R2, Reg::R0, global::VIEW as i16);
    owned_in_level(asm, (0, 8), not_owned, pass);
    // Another member's: taken over only if it is silent (the mask is 0
    // above position 31, and n <= 32 whenever it is not 0).
    asm.mov(Reg::R5, Reg::R2)
        .alu64_imm(AluOp::RSH, Reg::R5, 32)
        .alu64_reg(AluOp::RSH, Reg::R5, Reg::R4)
        .alu64_imm(AluOp::AND, Reg::R5, 1)
        .jump_imm(JmpOp::JEQ, Reg::R5, 0, not_owned);
    owned_in_level(asm, (16, 24), not_owned, pass);
    // Not owned: record the number, count, drop.
    asm.bind(not_owned)
        .mov(Reg::R1, Reg::R9)
        .alu64_imm(AluOp::AND, Reg::R1, CELLS as i32 - 1)
        .alu64_imm(AluOp::LSH, Reg::R1, 2)
        .alu64_reg(AluOp::ADD, Reg::R7, Reg::R1)
        .store(Size::W, Reg::R7, slot::CELLS as i16, Reg::R9);
    count_and_drop(asm, target.counters_fd, counter::DROPS, pass, hook);
}

/// One level of the view word in r2 (see [`view_word`]): its member
/// count at bit `count`, this node's position at bit `position`. With
/// r9 the sequence number: `not_owned` when the level is empty, `pass`
/// when `seq % count` (left in r4) is this node's position; falls
/// through otherwise. Uses r3 and r5.
fn owned_in_level(
    asm: &mut Assembler,
    (count, position): (i32, i32),
    not_owned: Label,
    pass: Label,
) {
    let octet = |asm: &mut Assembler, dst: Reg, shift: i32| {
        asm.mov(dst, Reg::R2);
        if shift > 0 {
            asm.alu64_imm(AluOp::RSH, dst, shift);
        }
        asm.alu64_imm(AluOp::AND, dst, 0xff);
    };
    octet(asm, Reg::R3, count);
    asm.jump_imm(JmpOp::JEQ, Reg::R3, 0, not_owned)
        .alu32_reg(AluOp::MOV, Reg::R4, Reg::R9)
        .alu32_reg(AluOp::MOD, Reg::R4, Reg::R3);
    octet(asm, Reg::R5, position);
    asm.jump_reg(JmpOp::JEQ, Reg::R4, Reg::R5, pass);
}

/// `r0 = bpf_map_lookup_elem(map, fp + key)`; `pass` when absent.
fn lookup(asm: &mut Assembler, map_fd: i32, key: i16, pass: Label) {
    asm.ld_map_fd(Reg::R1, map_fd)
        .mov(Reg::R2, Reg::FP)
        .alu64_imm(AluOp::ADD, Reg::R2, i32::from(key))
        .call(Helper::MAP_LOOKUP_ELEM)
        .jump_imm(JmpOp::JEQ, Reg::R0, 0, pass);
}
