//! AH inbound processing (RFC 4302 §3.4).
//!
//! Before the engine: SA lookup, lifetime, replay pre-check; the received
//! ICV is copied into the op and its field zeroed, the header in front of
//! AH is saved behind the packet and its mutable fields zeroed
//! (RFC 4302 §3.4.3). After: the header is restored, then authentication,
//! replay commit, decapsulation (tunnel) or removal of AH (transport),
//! selectors.

use std::sync::Arc;
use std::time::Instant;

use phalanx_crypto::{Op, OpKind, OpLayout, OpStatus, PacketBuf, MAX_ICV_LEN};
use phalanx_sa::{InboundSa, IpsecProtocol, SaMode, Sad};
use phalanx_wire::ah::{AhPacket, FIXED_LEN as AH_FIXED_LEN};
use phalanx_wire::{Error as WireError, IpProtocol};

use super::{mutable, outbound};
use crate::drop::{DropReason, Verdict};
use crate::inbound::{self, InboundPending, Kept, Outer, PendingProtocol};
use crate::ip::{self, Family};
use crate::{sa_state, selectors};

/// What the AH header says.
struct Header {
    spi: u32,
    seq_low: u32,
    len: usize,
}

/// Builds the verify operation for the AH packet at `outer.front`.
pub(crate) fn prepare(
    sad: &Sad,
    mut packet: PacketBuf,
    outer: Outer,
    now: Instant,
) -> Result<(InboundPending, Op), (PacketBuf, DropReason)> {
    let checked = parse(packet.as_slice(), &outer)
        .and_then(|header| admit(sad, &outer, &header, now).map(|found| (header, found)));
    let (header, (sa, seq)) = match checked {
        Ok(found) => found,
        Err(reason) => return Err((packet, reason)),
    };
    let icv_len = sa.transform.suite().icv_len();
    let mut received_icv = [0u8; MAX_ICV_LEN];
    if let Err(reason) = zero_for_icv(&mut packet, &outer, icv_len, &mut received_icv) {
        return Err((packet, reason));
    }
    let layout = OpLayout {
        auth_start: 0,
        iv_start: 0,
        payload_start: 0,
        auth_end: outer.len as u32,
        icv_start: (outer.front + AH_FIXED_LEN) as u32,
        esn_high: sa.params.esn.then_some((seq >> 32) as u32),
    };
    let mut op = Op::new(OpKind::AhVerify, sa.transform.clone(), layout, packet);
    op.received_icv = received_icv;
    // Both fit: the IP header and the AH header (at most 1024 bytes)
    // lie inside a packet of at most 2^16 + 40 bytes.
    let protocol = PendingProtocol::Ah {
        saved: outer.front as u32,
        header_len: header.len as u32,
    };
    Ok((
        InboundPending {
            sa,
            seq,
            protocol,
            outer: Kept::of(&outer),
        },
        op,
    ))
}

/// Reads the AH header at `outer.front` and checks its length and
/// alignment (RFC 4302 §2.2).
fn parse(packet: &[u8], outer: &Outer) -> Result<Header, DropReason> {
    let bytes = packet.get(outer.front..).unwrap_or_default();
    let ah = AhPacket::new_checked(bytes).map_err(|e| match e {
        WireError::Truncated => DropReason::Truncated,
        _ => DropReason::MalformedHeader,
    })?;
    ah.check_alignment(outer.family == Family::V6)
        .map_err(|_| DropReason::MalformedHeader)?;
    Ok(Header {
        spi: ah.spi(),
        seq_low: ah.sequence_number(),
        len: ah.header_len(),
    })
}

/// SA, lifetime, ICV length and replay pre-check (RFC 4302 §3.4.3).
fn admit(
    sad: &Sad,
    outer: &Outer,
    header: &Header,
    now: Instant,
) -> Result<(Arc<InboundSa>, u64), DropReason> {
    let sa = inbound::lookup(sad, header.spi, IpsecProtocol::Ah, outer.dst)?;
    let seq = inbound::on_sa(&sa, || {
        sa_state::usable_inbound(&sa.usage, now)?;
        if header.len < AH_FIXED_LEN + sa.transform.suite().icv_len() {
            return Err(DropReason::MalformedHeader);
        }
        sa.replay_check(header.seq_low)
            .map_err(sa_state::replay_reason)
    })?;
    Ok((sa, seq))
}

/// Moves the received ICV into `received_icv` and zeroes it in the packet
/// (RFC 4302 §3.4.3: ICV field zero; explicit padding after the ICV stays
/// as sent, it is part of the computation), saves the header in front of
/// AH behind the packet and zeroes its mutable fields.
fn zero_for_icv(
    packet: &mut PacketBuf,
    outer: &Outer,
    icv_len: usize,
    received_icv: &mut [u8; MAX_ICV_LEN],
) -> Result<(), DropReason> {
    let icv_at = outer.front + AH_FIXED_LEN;
    let len = packet.len();
    if icv_len > MAX_ICV_LEN || icv_at + icv_len > len {
        return Err(DropReason::Truncated);
    }
    if packet.append(outer.front).is_none() {
        return Err(DropReason::NoRoom);
    }
    let data = packet.as_mut_slice();
    received_icv[..icv_len].copy_from_slice(&data[icv_at..icv_at + icv_len]);
    data[icv_at..icv_at + icv_len].fill(0);
    data.copy_within(..outer.front, len);
    let (body, saved) = data.split_at_mut(len);
    if !mutable::zero(&mut body[..outer.front], saved, outer.family) {
        return Err(DropReason::MalformedHeader);
    }
    Ok(())
}

/// Second half, after the engine.
pub(crate) fn finish(
    pending: &InboundPending,
    saved: usize,
    header_len: usize,
    op: Op,
    soft_expired: &mut Vec<u32>,
) -> (PacketBuf, Verdict) {
    let Op {
        mut buf, status, ..
    } = op;
    let verdict = match verify(pending, saved, header_len, &mut buf, status, soft_expired) {
        Ok(()) => Verdict::Forward,
        Err(reason) => Verdict::Drop(reason),
    };
    (buf, verdict)
}

fn verify(
    pending: &InboundPending,
    saved: usize,
    header_len: usize,
    buf: &mut PacketBuf,
    status: OpStatus,
    soft_expired: &mut Vec<u32>,
) -> Result<(), DropReason> {
    if !outbound::restore(buf, saved) {
        return Err(DropReason::InvalidLayout);
    }
    inbound::authenticated(status)?;
    let sa = &pending.sa;
    // RFC 4302 §3.4.3: the window moves only after the ICV verified.
    sa.replay_commit(pending.seq)
        .map_err(sa_state::replay_reason)?;
    let front = pending.outer.front();
    let next_header = IpProtocol(*buf.as_slice().get(front).ok_or(DropReason::InvalidLayout)?);
    let payload_start = front + header_len;
    if payload_start > buf.len() {
        return Err(DropReason::InvalidLayout);
    }
    match sa.params.mode {
        SaMode::Tunnel { .. } => {
            let family = match next_header {
                IpProtocol::IPV4 => Family::V4,
                IpProtocol::IPV6 => Family::V6,
                _ => return Err(DropReason::BadNextHeader),
            };
            buf.trim_front(payload_start);
            inbound::take_inner(buf, family, pending.outer.tos)?;
        }
        SaMode::Transport => remove_header(buf, &pending.outer, header_len, next_header),
    }
    selectors::check(sa, buf.as_slice())?;
    sa_state::account_inbound(&sa.usage, buf.len(), sa.params.spi, soft_expired)?;
    sa_state::count(&sa.stats, buf.len());
    Ok(())
}

/// Transport mode: the IP header moves up over the AH header and names
/// AH's Next Header; lengths and IPv4 checksum are fixed.
fn remove_header(buf: &mut PacketBuf, outer: &Kept, header_len: usize, next_header: IpProtocol) {
    buf.as_mut_slice().copy_within(..outer.front(), header_len);
    buf.trim_front(header_len);
    ip::finish_splice(
        buf.as_mut_slice(),
        outer.family,
        outer.next_header_offset(),
        next_header,
    );
}
