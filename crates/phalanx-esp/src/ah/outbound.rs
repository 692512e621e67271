//! AH outbound processing (RFC 4302 §3.3).
//!
//! ```text
//! tunnel:    | outer IP | AH (12 + ICV + pad) | inner IP packet |
//! transport: | IP hdr [+ ext] | AH | upper layer |
//! ```
//! The ICV covers the whole packet with the mutable IP fields and the ICV
//! field as zero (RFC 4302 §3.3.3.1). The header bytes in front of AH are
//! saved behind the packet while the engine runs and restored by
//! `finish_outbound`.

use phalanx_crypto::{Op, OpKind, OpLayout, PacketBuf};
use phalanx_sa::{OutboundSa, SaMode};
use phalanx_wire::ah::{padded_icv_len, AhPacket, AhRepr, FIXED_LEN as AH_FIXED_LEN};
use phalanx_wire::IpProtocol;

use super::mutable;
use crate::context::OutboundContext;
use crate::drop::{DropReason, Verdict};
use crate::ip::{self, Family, FamilyExt, OuterHeader};
use crate::note::Note;
use crate::sa_state;

/// How one packet is encapsulated.
#[derive(Clone, Copy, Debug)]
struct Plan {
    family: Family,
    outer: Option<OuterHeader>,
    /// Bytes of IP header in front of AH.
    front: usize,
    /// Transport: the octet that will name AH.
    next_header_offset: usize,
    /// AH Next Header.
    next_header: IpProtocol,
    /// Bytes behind AH.
    payload_len: usize,
    /// AH header length, ICV padding included.
    ah_len: usize,
}

impl Plan {
    fn head(&self) -> usize {
        match self.outer {
            Some(_) => self.front + self.ah_len,
            None => self.ah_len,
        }
    }

    fn inner_len(&self) -> usize {
        match self.outer {
            Some(_) => self.payload_len,
            None => self.front + self.payload_len,
        }
    }
}

/// Builds the AH packet and its sign operation.
pub(crate) fn prepare(
    sa: &OutboundSa,
    mut packet: PacketBuf,
    ctx: &mut OutboundContext<'_>,
) -> Result<Op, (PacketBuf, DropReason)> {
    let plan = match plan_for(sa, packet.as_slice()) {
        Ok(plan) => plan,
        Err(reason) => return Err((packet, reason)),
    };
    packet.truncate(plan.inner_len());
    if let Err(reason) = check(
        &packet,
        &plan,
        sa.path_mtu.current(ctx.now).filter(|_| ctx.check_path_mtu),
    ) {
        return Err((packet, reason));
    }
    let spi = sa.params.spi;
    let admitted =
        sa_state::admit_outbound(&sa.usage, ctx.now, packet.len(), spi, &mut ctx.soft_expired)
            .and_then(|()| {
                sa.next_sequence()
                    .map_err(|_| DropReason::SequenceExhausted)
            });
    let seq = match admitted {
        Ok(seq) => seq,
        Err(reason) => return Err((packet, reason)),
    };
    let bytes = packet.len();
    write(sa, &mut packet, &plan, seq);
    let total = packet.len();
    if !save_and_zero(&mut packet, &plan) {
        return Err((packet, DropReason::InnerMalformed));
    }
    sa_state::count(&sa.stats, bytes);
    let layout = OpLayout {
        auth_start: 0,
        iv_start: 0,
        payload_start: 0,
        auth_end: total as u32,
        icv_start: (plan.front + AH_FIXED_LEN) as u32,
        esn_high: sa.params.esn.then_some((seq >> 32) as u32),
    };
    let mut op = Op::new(OpKind::AhSign, sa.transform.clone(), layout, packet);
    // front < 65536: it is part of a checked IP packet.
    op.user = Note::ah(plan.front as u16).pack();
    Ok(op)
}

fn plan_for(sa: &OutboundSa, packet: &[u8]) -> Result<Plan, DropReason> {
    let icv_len = sa.transform.suite().icv_len();
    match sa.params.mode {
        SaMode::Tunnel { local, remote } => {
            let inner = ip::inner_header(packet).ok_or(DropReason::InnerMalformed)?;
            let outer = OuterHeader {
                src: local,
                dst: remote,
                protocol: IpProtocol::AH,
                tos: inner.tos,
                dont_frag: inner.dont_frag,
                ident: 0,
            };
            let family = outer.family().ok_or(DropReason::Unsupported)?;
            Ok(Plan {
                family,
                outer: Some(outer),
                front: family.header_len(),
                next_header_offset: 0,
                next_header: inner.family.tunnel_protocol(),
                payload_len: inner.len,
                ah_len: ah_len(icv_len, family),
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
                ah_len: ah_len(icv_len, split.family),
            })
        }
    }
}

/// The AH header length: 12 bytes, the ICV and the padding that aligns
/// the header to 4 (IPv4) or 8 (IPv6) bytes (RFC 4302 §2.2, §3.3.3.2.1).
pub(crate) fn ah_len(icv_len: usize, family: Family) -> usize {
    AH_FIXED_LEN + padded_icv_len(icv_len, family == Family::V6)
}

fn check(packet: &PacketBuf, plan: &Plan, path_mtu: Option<u32>) -> Result<(), DropReason> {
    if plan.ah_len + plan.payload_len > ip::max_payload(plan.family, plan.front) {
        return Err(DropReason::TooBig);
    }
    // RFC 4301 §8.2.1, as for ESP.
    let total = plan.front + plan.ah_len + plan.payload_len;
    if path_mtu.is_some_and(|mtu| total > mtu as usize) {
        return Err(DropReason::PathMtuExceeded);
    }
    // The tail keeps a copy of the header in front of AH during the engine.
    if packet.headroom() < plan.head() || packet.tailroom() < plan.front {
        return Err(DropReason::NoRoom);
    }
    Ok(())
}

/// The largest inner packet whose AH packet fits an outer path MTU of
/// `mtu` bytes (tunnel: the inner IP packet; transport: the whole packet).
pub(crate) fn max_inner_len(sa: &OutboundSa, mtu: usize) -> usize {
    let icv_len = sa.transform.suite().icv_len();
    let (outer, family) = match sa.params.mode {
        SaMode::Tunnel { local, .. } => {
            let family = Family::of_addr(local);
            (family.header_len(), family)
        }
        // The AH header's alignment is the packet's family's; take the
        // larger (IPv6: 8 octets).
        SaMode::Transport => (0, Family::V6),
    };
    mtu.saturating_sub(outer + ah_len(icv_len, family))
}

/// The outer IPv4 Identification of AH packet `seq`: its low 16 bits, as
/// for ESP, but 1 where those are 0, because a kernel sending the header
/// as it is (`IP_HDRINCL`) would put its own Identification in place of
/// a 0, and the ICV covers it (RFC 4302 §3.3.3.1.1.1).
pub fn ah_ident(seq: u64) -> u16 {
    match seq as u16 {
        0 => 1,
        id => id,
    }
}

/// Prepends the headers. Cannot fail: [`check`] proved the room.
fn write(sa: &OutboundSa, packet: &mut PacketBuf, plan: &Plan, seq: u64) {
    let head = plan.head();
    if packet.prepend(head).is_none() {
        return;
    }
    let data = packet.as_mut_slice();
    match plan.outer {
        Some(mut outer) => {
            // Never 0: a kernel sending the header as it is (IP_HDRINCL)
            // would put its own Identification there, which the ICV covers
            // (RFC 4302 §3.3.3.1.1.1).
            outer.ident = ah_ident(seq);
            let (hdr, rest) = data.split_at_mut(plan.front);
            outer.emit(hdr, rest.len());
        }
        None => {
            data.copy_within(head..head + plan.front, 0);
            ip::finish_splice(data, plan.family, plan.next_header_offset, IpProtocol::AH);
        }
    }
    let repr = AhRepr {
        next_header: plan.next_header,
        spi: sa.params.spi,
        sequence_number: seq as u32,
        icv_len: plan.ah_len - AH_FIXED_LEN,
    };
    repr.emit(&mut AhPacket::new_unchecked(
        &mut data[plan.front..plan.front + plan.ah_len],
    ));
}

/// Copies the header in front of AH behind the packet and zeroes its
/// mutable fields. False for malformed IPv4 options or IPv6 options.
fn save_and_zero(packet: &mut PacketBuf, plan: &Plan) -> bool {
    let len = packet.len();
    if packet.append(plan.front).is_none() {
        return false;
    }
    let data = packet.as_mut_slice();
    data.copy_within(..plan.front, len);
    let (body, saved) = data.split_at_mut(len);
    mutable::zero(&mut body[..plan.front], saved, plan.family)
}

/// After the engine: the saved header goes back, the copy is cut off.
pub(crate) fn finish(mut buf: PacketBuf, saved: usize, completed: bool) -> (PacketBuf, Verdict) {
    if !restore(&mut buf, saved) || !completed {
        return (buf, Verdict::Drop(DropReason::InvalidLayout));
    }
    (buf, Verdict::Forward)
}

/// Copies the `saved` bytes behind the packet back over its start and cuts
/// them off. False when the buffer cannot hold them.
pub(crate) fn restore(buf: &mut PacketBuf, saved: usize) -> bool {
    let Some(len) = buf.len().checked_sub(saved) else {
        return false;
    };
    if saved > len {
        return false;
    }
    buf.as_mut_slice().copy_within(len.., 0);
    buf.truncate(len);
    true
}

#[cfg(test)]
mod tests {
    use super::ah_ident;

    /// The low 16 bits of the number, never 0 (a kernel would replace it).
    #[test]
    fn identification_is_never_zero() {
        assert_eq!(ah_ident(5), 5);
        assert_eq!(ah_ident(0xffff), 0xffff);
        assert_eq!(ah_ident(0x1_0000), 1);
        assert_eq!(ah_ident(0x1_0000_0000), 1);
        assert_eq!(ah_ident(0x1_0001), 1);
        assert!((0..300_000u64).all(|seq| ah_ident(seq) != 0));
    }
}
