//! ESP outbound processing (RFC 4303 §3.3), the half before the engine.
//!
//! Tunnel mode (RFC 4303 §3.1.2):
//! ```text
//! | outer IP | [UDP] | SPI | Seq | IV | inner IP packet | TFC | pad | pl | nh | ICV |
//! ```
//! Transport mode (RFC 4303 §3.1.1): the original IP header (IPv6: with the
//! extension headers that stay in front) is moved forward and the ESP
//! header spliced in behind it:
//! ```text
//! | IP hdr [+ ext] | [UDP] | SPI | Seq | IV | upper layer | pad | pl | nh | ICV |
//! ```
//! The buffer is grown in place into its head- and tailroom; only the
//! transport-mode IP header (20-60 bytes) is moved.

use phalanx_crypto::{Op, OpKind, OpLayout, PacketBuf};
use phalanx_sa::{OutboundSa, SaMode};
use phalanx_wire::esp::{EspPacket, EspRepr, HEADER_LEN as ESP_HEADER_LEN};
use phalanx_wire::{IpProtocol, UdpPacket, UdpRepr};

use super::trailer;
use crate::context::OutboundContext;
use crate::drop::DropReason;
use crate::ip::{self, Family, FamilyExt, OuterHeader};
use crate::note::Note;
use crate::sa_state;
use phalanx_wire::esp::TRAILER_LEN as ESP_TRAILER_LEN;
use phalanx_wire::udp::HEADER_LEN as UDP_HEADER_LEN;

/// How one packet is encapsulated, computed before any byte moves.
#[derive(Clone, Copy, Debug)]
struct Plan {
    /// Family of the IP header in front.
    family: Family,
    /// Tunnel mode: the outer header to build; transport: `None`.
    outer: Option<OuterHeader>,
    /// Bytes of IP header in front of UDP/ESP (built or kept).
    front: usize,
    /// Transport mode: offset of the octet that will name ESP or UDP.
    next_header_offset: usize,
    /// ESP Next Header.
    next_header: IpProtocol,
    /// Bytes protected behind the split point (inner packet / upper layer).
    payload_len: usize,
    /// TFC padding bytes (RFC 4303 §2.7).
    tfc: usize,
}

impl Plan {
    /// Length of the packet as the caller handed it over, by its own IP
    /// length fields.
    fn inner_len(&self) -> usize {
        match self.outer {
            Some(_) => self.payload_len,
            None => self.front + self.payload_len,
        }
    }
}

/// Sizes of the pieces around the payload.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    udp: usize,
    iv: usize,
    pad: usize,
    icv: usize,
}

impl Sizes {
    /// Bytes prepended to the buffer.
    fn head(&self, plan: &Plan) -> usize {
        let outer = if plan.outer.is_some() { plan.front } else { 0 };
        outer + self.udp + ESP_HEADER_LEN + self.iv
    }

    /// Bytes appended to the buffer.
    fn tail(&self, plan: &Plan) -> usize {
        plan.tfc + self.pad + ESP_TRAILER_LEN + self.icv
    }

    /// Bytes from the ESP header to the end of the ICV.
    fn esp_len(&self, plan: &Plan) -> usize {
        ESP_HEADER_LEN + self.iv + plan.payload_len + self.tail(plan)
    }
}

/// Builds the ESP packet around the inner packet in `packet` and the seal
/// operation for it.
pub(crate) fn prepare(
    sa: &OutboundSa,
    mut packet: PacketBuf,
    ctx: &mut OutboundContext<'_>,
) -> Result<Op, (PacketBuf, DropReason)> {
    let plan = match plan_for(sa, packet.as_slice()) {
        Ok(plan) => plan,
        Err(reason) => return Err((packet, reason)),
    };
    // Bytes behind the IP length (e.g. link padding) are not the packet's.
    packet.truncate(plan.inner_len());
    seal(sa, packet, plan, ctx)
}

/// Builds a dummy packet (RFC 4303 §2.6): `len` zero bytes with Next
/// Header 59, which the receiver discards. Tunnel mode only: a transport
/// SA has no addresses of its own to build a header from.
pub(crate) fn prepare_dummy(
    sa: &OutboundSa,
    mut packet: PacketBuf,
    len: usize,
    ctx: &mut OutboundContext<'_>,
) -> Result<Op, (PacketBuf, DropReason)> {
    let SaMode::Tunnel { local, remote } = sa.params.mode else {
        return Err((packet, DropReason::Unsupported));
    };
    let headroom = packet.headroom();
    packet.reset(headroom);
    let Some(body) = packet.append(len) else {
        return Err((packet, DropReason::NoRoom));
    };
    body.fill(0);
    let outer = OuterHeader {
        src: local,
        dst: remote,
        protocol: outer_protocol(sa),
        tos: 0,
        dont_frag: false,
        ident: 0,
    };
    let Some(family) = outer.family() else {
        return Err((packet, DropReason::Unsupported));
    };
    let plan = Plan {
        family,
        outer: Some(outer),
        front: family.header_len(),
        next_header_offset: 0,
        next_header: IpProtocol::NO_NEXT_HEADER,
        payload_len: len,
        tfc: 0,
    };
    seal(sa, packet, plan, ctx)
}

/// The largest inner packet (tunnel: the whole inner IP packet;
/// transport: the IP packet whose payload is protected) whose ESP packet
/// fits an outer path MTU of `mtu` bytes. In transport mode the padding
/// depends on the IP header length, so the bound assumes the worst case.
pub(crate) fn max_inner_len(sa: &OutboundSa, mtu: usize) -> usize {
    let transform = &sa.transform;
    let outer = match sa.params.mode {
        SaMode::Tunnel { local, .. } => Family::of_addr(local).header_len(),
        SaMode::Transport => 0,
    };
    let udp = if sa.params.encap.is_some() {
        UDP_HEADER_LEN
    } else {
        0
    };
    let fixed = outer + udp + ESP_HEADER_LEN + transform.iv_len() + transform.icv_len();
    // RFC 4303 §2.4: payload plus trailer fill whole blocks, at least
    // 4-octet aligned (the alignment `trailer::pad_len` pads to).
    let align = transform.block_size().next_power_of_two().max(4);
    let room = mtu.saturating_sub(fixed) / align * align;
    let slack = match sa.params.mode {
        SaMode::Tunnel { .. } => 0,
        SaMode::Transport => align - 1,
    };
    room.saturating_sub(ESP_TRAILER_LEN + slack)
}

/// The protocol of the header after the IP header: UDP when encapsulated
/// (RFC 3948 §2.1), else ESP.
fn outer_protocol(sa: &OutboundSa) -> IpProtocol {
    match sa.params.encap {
        Some(_) => IpProtocol::UDP,
        None => IpProtocol::ESP,
    }
}

/// Reads the inner packet and decides the encapsulation.
fn plan_for(sa: &OutboundSa, packet: &[u8]) -> Result<Plan, DropReason> {
    match sa.params.mode {
        SaMode::Tunnel { local, remote } => {
            let inner = ip::inner_header(packet).ok_or(DropReason::InnerMalformed)?;
            let outer = OuterHeader {
                src: local,
                dst: remote,
                protocol: outer_protocol(sa),
                tos: inner.tos,
                dont_frag: inner.dont_frag,
                // Set once the sequence number is known.
                ident: 0,
            };
            let family = outer.family().ok_or(DropReason::Unsupported)?;
            let tfc_to = sa.params.tfc_pad_to.map_or(0, usize::from);
            Ok(Plan {
                family,
                outer: Some(outer),
                front: family.header_len(),
                next_header_offset: 0,
                next_header: inner.family.tunnel_protocol(),
                payload_len: inner.len,
                // RFC 4303 §2.7: zeros after the inner packet, whose own
                // length field lets the receiver strip them.
                tfc: tfc_to.saturating_sub(inner.len),
            })
        }
        SaMode::Transport => {
            let split = ip::transport_split(packet)?;
            Ok(Plan {
                family: split.family,
                outer: None,
                front: split.header_len,
                next_header_offset: split.next_header_offset,
                next_header: split.next_header,
                payload_len: split.len - split.header_len,
                tfc: 0,
            })
        }
    }
}

/// Checks sizes, admits the packet against lifetime and sequence space,
/// writes headers and trailer, and returns the seal operation.
fn seal(
    sa: &OutboundSa,
    mut packet: PacketBuf,
    plan: Plan,
    ctx: &mut OutboundContext<'_>,
) -> Result<Op, (PacketBuf, DropReason)> {
    let transform = &sa.transform;
    let sizes = Sizes {
        udp: if sa.params.encap.is_some() {
            UDP_HEADER_LEN
        } else {
            0
        },
        iv: transform.iv_len(),
        pad: trailer::pad_len(plan.payload_len + plan.tfc, transform.block_size()),
        icv: transform.icv_len(),
    };
    let path_mtu = sa.path_mtu.current(ctx.now).filter(|_| ctx.check_path_mtu);
    if let Err(reason) = check(&packet, &plan, &sizes, path_mtu, ctx) {
        return Err((packet, reason));
    }
    let seq = match admit(sa, packet.len(), ctx) {
        Ok(seq) => seq,
        Err(reason) => return Err((packet, reason)),
    };
    if sizes.iv > 0 && !ctx.iv.covers(seq) {
        return Err((packet, DropReason::IvRefused));
    }
    let layout = write(sa, &mut packet, &plan, &sizes, seq, ctx);
    let note = match (sa.params.encap.is_some(), plan.family) {
        (true, Family::V6) => Note::esp_udp6(plan.front),
        _ => Note::esp(),
    };
    // Built straight into the return value (an op is 120 bytes).
    Ok(Op {
        user: note.pack(),
        ..Op::new(OpKind::EspSeal, sa.transform.clone(), layout, packet)
    })
}

/// Everything that can refuse the packet before it is changed.
fn check(
    packet: &PacketBuf,
    plan: &Plan,
    sizes: &Sizes,
    path_mtu: Option<u32>,
    ctx: &OutboundContext<'_>,
) -> Result<(), DropReason> {
    if !ctx.iv.serves(sizes.iv) {
        return Err(DropReason::IvRefused);
    }
    let after_front = sizes.udp + sizes.esp_len(plan);
    if after_front > ip::max_payload(plan.family, plan.front) {
        return Err(DropReason::TooBig);
    }
    // RFC 4301 §8.2.1: a packet the path cannot carry is not sent; the
    // caller has the inner packet back to answer its sender or fragment it.
    if path_mtu.is_some_and(|mtu| plan.front + after_front > mtu as usize) {
        return Err(DropReason::PathMtuExceeded);
    }
    if packet.headroom() < sizes.head(plan) || packet.tailroom() < sizes.tail(plan) {
        return Err(DropReason::NoRoom);
    }
    Ok(())
}

/// Lifetime (RFC 4301 §4.4.2.1) and the next sequence number
/// (RFC 4303 §3.3.3). Counts the SA's statistics.
fn admit(sa: &OutboundSa, bytes: usize, ctx: &mut OutboundContext<'_>) -> Result<u64, DropReason> {
    let spi = sa.params.spi;
    sa_state::admit_outbound(&sa.usage, ctx.now, bytes, spi, &mut ctx.soft_expired)?;
    let seq = sa
        .next_sequence()
        .map_err(|_| DropReason::SequenceExhausted)?;
    sa_state::count(&sa.stats, bytes);
    Ok(seq)
}

/// Grows the buffer and writes every header and the trailer. Cannot fail:
/// [`check`] proved the room and the sizes.
fn write(
    sa: &OutboundSa,
    packet: &mut PacketBuf,
    plan: &Plan,
    sizes: &Sizes,
    seq: u64,
    ctx: &mut OutboundContext<'_>,
) -> OpLayout {
    write_tail(packet, plan, sizes);
    let head = sizes.head(plan);
    if packet.prepend(head).is_none() {
        // Unreachable: check() verified the headroom.
        return OpLayout::default();
    }
    let data = packet.as_mut_slice();
    match plan.outer {
        Some(mut outer) => {
            // Identification = low 16 bits of the sequence number: unique
            // per SA for 2^16 packets, and reproducible for test vectors.
            outer.ident = seq as u16;
            let (hdr, rest) = data.split_at_mut(plan.front);
            outer.emit(hdr, rest.len());
        }
        None => {
            data.copy_within(head..head + plan.front, 0);
            let protocol = outer_protocol(sa);
            ip::finish_splice(data, plan.family, plan.next_header_offset, protocol);
        }
    }
    let esp_at = plan.front + sizes.udp;
    if let Some(encap) = sa.params.encap {
        let repr = UdpRepr {
            src_port: encap.local_port,
            dst_port: encap.remote_port,
            payload_len: sizes.esp_len(plan),
        };
        // RFC 3948 §2.1: checksum 0 over IPv4; over IPv6 finish fills it
        // once the ciphertext is in place.
        repr.emit(&mut UdpPacket::new_unchecked(&mut data[plan.front..esp_at]));
    }
    write_esp_header(
        &mut data[esp_at..esp_at + ESP_HEADER_LEN],
        sa.params.spi,
        seq,
    );
    let iv_at = esp_at + ESP_HEADER_LEN;
    ctx.iv.fill(seq, &mut data[iv_at..iv_at + sizes.iv]);
    layout(
        plan,
        sizes,
        esp_at,
        sa.params.esn.then_some((seq >> 32) as u32),
    )
}

/// Appends TFC padding, the ESP trailer and room for the ICV (which the
/// engine fills; an op that fails is dropped, so it is never sent as is).
fn write_tail(packet: &mut PacketBuf, plan: &Plan, sizes: &Sizes) {
    let Some(tail) = packet.append(sizes.tail(plan)) else {
        // Unreachable: check() verified the tailroom.
        return;
    };
    let (tfc, rest) = tail.split_at_mut(plan.tfc);
    if !tfc.is_empty() {
        tfc.fill(0);
    }
    trailer::write(&mut rest[..sizes.pad + ESP_TRAILER_LEN], plan.next_header);
}

/// SPI and the low 32 bits of the sequence number (RFC 4303 §2.1, §2.2;
/// with ESN the high bits are authenticated but not sent, §2.2.1).
fn write_esp_header(out: &mut [u8], spi: u32, seq: u64) {
    let repr = EspRepr {
        spi,
        sequence_number: seq as u32,
    };
    repr.emit(&mut EspPacket::new_unchecked(out));
}

/// The engine's view of the packet.
fn layout(plan: &Plan, sizes: &Sizes, esp_at: usize, esn_high: Option<u32>) -> OpLayout {
    let iv_start = esp_at + ESP_HEADER_LEN;
    let payload_start = iv_start + sizes.iv;
    let auth_end = payload_start + plan.payload_len + plan.tfc + sizes.pad + ESP_TRAILER_LEN;
    // Every offset is below 65536 + headers: check() bounded the packet.
    OpLayout {
        auth_start: esp_at as u32,
        iv_start: iv_start as u32,
        payload_start: payload_start as u32,
        auth_end: auth_end as u32,
        icv_start: auth_end as u32,
        esn_high,
    }
}
