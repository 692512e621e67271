//! Outbound processing entry points: one per step, dispatching on the SA's
//! protocol.

use phalanx_crypto::{Op, OpStatus, PacketBuf};
use phalanx_sa::{IpsecProtocol, OutboundSa};
use phalanx_wire::{Ipv6Packet, UdpPacket};

use crate::context::OutboundContext;
use crate::drop::{DropReason, Verdict};
use crate::note::{Kind, Note};
use crate::{ah, esp};

/// First half of outbound processing: protects the IP packet in `packet`
/// with `sa` and returns the crypto operation to run.
///
/// In order: the inner packet is read (tunnel: a whole IPv4/IPv6 packet;
/// transport: the split after the IP header), sizes and buffer room are
/// checked, the lifetime is counted (hard limit → drop; soft → the SPI is
/// pushed to `ctx.soft_expired`), the sequence number taken, and the ESP
/// header, IV, TFC padding, trailer, outer IP header and UDP header (or the
/// AH header) are written around the packet in its head- and tailroom.
///
/// The op's `user` field belongs to this crate until [`finish_outbound`].
/// On error the buffer comes back with the drop reason, which is counted
/// on the SA's drops, except [`DropReason::PathMtuExceeded`]: the caller
/// may still send that packet fragmented ([`too_big_action`](crate::too_big_action))
/// and counts it if it does not.
pub fn prepare_outbound(
    sa: &OutboundSa,
    packet: PacketBuf,
    ctx: &mut OutboundContext<'_>,
) -> Result<Op, (PacketBuf, DropReason)> {
    let prepared = match sa.params.protocol {
        IpsecProtocol::Esp => esp::outbound::prepare(sa, packet, ctx),
        IpsecProtocol::Ah => ah::outbound::prepare(sa, packet, ctx),
    };
    // A packet too big for the path may still go, fragmented: the caller
    // counts it on the SA if it ends up dropped.
    prepared.inspect_err(|(_, reason)| {
        if *reason != DropReason::PathMtuExceeded {
            reason.record_on(&sa.drops);
        }
    })
}

/// The largest inner packet `sa` can carry over an outer path MTU of
/// `mtu` bytes (tunnel mode: the whole inner IP packet; transport: the IP
/// packet it protects). What a sender that must shrink its packets is
/// told (RFC 4301 §8.2.1: ICMP with the MTU less the IPsec overhead).
pub fn max_inner_len(sa: &OutboundSa, mtu: usize) -> usize {
    match sa.params.protocol {
        IpsecProtocol::Esp => esp::outbound::max_inner_len(sa, mtu),
        IpsecProtocol::Ah => ah::outbound::max_inner_len(sa, mtu),
    }
}

/// Builds an ESP dummy packet (RFC 4303 §2.6) of `len` zero payload bytes
/// with Next Header 59 into `packet` (its data is discarded; its headroom
/// is kept). The receiver authenticates and discards it. Tunnel-mode ESP
/// SAs only ([`DropReason::Unsupported`] otherwise).
pub fn prepare_dummy(
    sa: &OutboundSa,
    packet: PacketBuf,
    len: usize,
    ctx: &mut OutboundContext<'_>,
) -> Result<Op, (PacketBuf, DropReason)> {
    match sa.params.protocol {
        IpsecProtocol::Esp => esp::outbound::prepare_dummy(sa, packet, len, ctx),
        IpsecProtocol::Ah => Err((packet, DropReason::Unsupported)),
    }
}

/// Second half of outbound processing, after the engine ran `op`. The
/// buffer then holds the complete outer IP packet (with the UDP header
/// when the SA is UDP-encapsulated, its IPv6 checksum filled in).
pub fn finish_outbound(op: Op) -> (PacketBuf, Verdict) {
    let note = Note::unpack(op.user);
    let completed = op.status == OpStatus::Completed;
    let mut buf = op.buf;
    match note.kind {
        Kind::Esp if completed => {
            if let Some(offset) = note.udp6_offset {
                fill_udp6_checksum(buf.as_mut_slice(), usize::from(offset));
            }
            (buf, Verdict::Forward)
        }
        Kind::Ah => ah::outbound::finish(buf, usize::from(note.ah_saved), completed),
        Kind::Esp | Kind::Unknown => (buf, Verdict::Drop(DropReason::InvalidLayout)),
    }
}

/// UDP over IPv6 must carry a checksum (RFC 8200 §8.1); it covers the
/// ciphertext, so it is computed after the engine.
fn fill_udp6_checksum(packet: &mut [u8], offset: usize) {
    let Ok(ip) = Ipv6Packet::new_checked(&*packet) else {
        return;
    };
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let Some(datagram) = packet.get_mut(offset..) else {
        return;
    };
    if let Ok(mut udp) = UdpPacket::new_checked(datagram) {
        udp.fill_checksum_v6(src, dst);
    }
}
