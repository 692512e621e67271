//! ESP inbound processing (RFC 4303 §3.4): SA lookup and replay pre-check
//! before the engine; authentication result, replay commit, trailer,
//! inner packet and selector checks after it.

use std::time::Instant;

use phalanx_crypto::{Op, OpKind, OpLayout, OpStatus, PacketBuf, SaTransform};
use phalanx_sa::{InboundSa, IpsecProtocol, SaMode, Sad};
use phalanx_wire::esp::{EspPacket, HEADER_LEN as ESP_HEADER_LEN};
use phalanx_wire::IpProtocol;

use super::trailer::{self, Trailer};
use crate::drop::{DropReason, Verdict};
use crate::inbound::{InboundPending, Kept, Outer, PendingProtocol};
use crate::ip::{self, Family};
use crate::{sa_state, selectors};
use phalanx_wire::esp::TRAILER_LEN as ESP_TRAILER_LEN;

/// Builds the open operation for the ESP packet at `outer.front + udp_len`
/// (the buffer ends where the ESP packet ends).
pub(crate) fn prepare(
    sad: &Sad,
    packet: PacketBuf,
    outer: Outer,
    udp_len: usize,
    now: Instant,
) -> Result<(InboundPending, Op), (PacketBuf, DropReason)> {
    let esp_at = outer.front + udp_len;
    let (sa, seq, layout) = match lookup_and_check(sad, packet.as_slice(), &outer, esp_at, now) {
        Ok(found) => found,
        Err(reason) => return Err((packet, reason)),
    };
    let op = Op::new(OpKind::EspOpen, sa.transform.clone(), layout, packet);
    let pending = InboundPending {
        sa,
        seq,
        protocol: PendingProtocol::Esp,
        outer: Kept::of(&outer),
    };
    Ok((pending, op))
}

/// SPI → SA, encapsulation, lifetime, replay pre-check and layout.
fn lookup_and_check(
    sad: &Sad,
    packet: &[u8],
    outer: &Outer,
    esp_at: usize,
    now: Instant,
) -> Result<(std::sync::Arc<InboundSa>, u64, OpLayout), DropReason> {
    let esp_bytes = packet.get(esp_at..).unwrap_or_default();
    let header = esp_bytes
        .first_chunk::<ESP_HEADER_LEN>()
        .ok_or(DropReason::Truncated)?;
    // A view over the fixed-size header: field offsets checked at compile time.
    let esp = EspPacket::new_unchecked(&header[..]);
    let sa = crate::inbound::lookup(sad, esp.spi(), IpsecProtocol::Esp, outer.dst)?;
    let (seq, layout) = crate::inbound::on_sa(&sa, || {
        if sa.params.encap.is_some() != (esp_at != outer.front) {
            return Err(DropReason::EncapMismatch);
        }
        sa_state::usable_inbound(&sa.usage, now)?;
        let layout = layout(&sa.transform, esp_at, packet.len())?;
        // RFC 4303 §3.4.3: the replay check comes before the ICV, so
        // replayed packets cost no cryptography.
        let seq = sa
            .replay_check(esp.sequence_number())
            .map_err(sa_state::replay_reason)?;
        Ok((seq, layout))
    })?;
    let layout = OpLayout {
        esn_high: sa.params.esn.then_some((seq >> 32) as u32),
        ..layout
    };
    Ok((sa, seq, layout))
}

/// Where IV, ciphertext and ICV are, for an ESP packet from `esp_at` to
/// `end`.
fn layout(transform: &SaTransform, esp_at: usize, end: usize) -> Result<OpLayout, DropReason> {
    let iv_start = esp_at + ESP_HEADER_LEN;
    let payload_start = iv_start + transform.iv_len();
    let icv_start = end
        .checked_sub(transform.icv_len())
        .filter(|&icv| icv >= payload_start + ESP_TRAILER_LEN)
        .ok_or(DropReason::Truncated)?;
    // RFC 4303 §2.4: the ciphertext is a whole number of cipher blocks
    // (AES-CBC: 16 bytes, RFC 3602 §2.4).
    let block = transform.block_size();
    if block > 4 && (icv_start - payload_start) % block != 0 {
        return Err(DropReason::InvalidLayout);
    }
    // Every offset is at most `end`: one conversion bounds them all.
    u32::try_from(end).map_err(|_| DropReason::TooBig)?;
    Ok(OpLayout {
        auth_start: esp_at as u32,
        iv_start: iv_start as u32,
        payload_start: payload_start as u32,
        auth_end: icv_start as u32,
        icv_start: icv_start as u32,
        esn_high: None,
    })
}

/// Second half: the engine's verdict, then everything that needs the
/// plaintext.
pub(crate) fn finish(
    pending: &InboundPending,
    op: Op,
    soft_expired: &mut Vec<u32>,
) -> (PacketBuf, Verdict) {
    let Op {
        mut buf,
        layout,
        status,
        ..
    } = op;
    let verdict = match open(pending, &mut buf, &layout, status, soft_expired) {
        Ok(()) => Verdict::Forward,
        Err(reason) => Verdict::Drop(reason),
    };
    (buf, verdict)
}

fn open(
    pending: &InboundPending,
    buf: &mut PacketBuf,
    layout: &OpLayout,
    status: OpStatus,
    soft_expired: &mut Vec<u32>,
) -> Result<(), DropReason> {
    crate::inbound::authenticated(status)?;
    let sa = &pending.sa;
    // RFC 4303 §3.4.3: the window moves only after the ICV verified; a
    // packet that raced us to the same number while the engine ran loses.
    sa.replay_commit(pending.seq)
        .map_err(sa_state::replay_reason)?;
    let payload_start = layout.payload_start as usize;
    let plaintext = buf
        .as_slice()
        .get(payload_start..layout.auth_end as usize)
        .ok_or(DropReason::InvalidLayout)?;
    let trailer = trailer::parse(plaintext)?;
    if trailer.next_header == IpProtocol::NO_NEXT_HEADER {
        // RFC 4303 §2.6: a dummy packet, authenticated and then discarded.
        return Err(DropReason::Dummy);
    }
    match sa.params.mode {
        SaMode::Tunnel { .. } => decapsulate(buf, pending, payload_start, &trailer)?,
        SaMode::Transport => rejoin(buf, pending, payload_start, &trailer)?,
    }
    selectors::check(sa, buf.as_slice())?;
    sa_state::account_inbound(&sa.usage, buf.len(), sa.params.spi, soft_expired)?;
    sa_state::count(&sa.stats, buf.len());
    Ok(())
}

/// Tunnel mode: the payload is an IP packet named by Next Header (4 or
/// 41); anything behind its own length is TFC padding (RFC 4303 §2.7).
fn decapsulate(
    buf: &mut PacketBuf,
    pending: &InboundPending,
    payload_start: usize,
    trailer: &Trailer,
) -> Result<(), DropReason> {
    let family = match trailer.next_header {
        IpProtocol::IPV4 => Family::V4,
        IpProtocol::IPV6 => Family::V6,
        _ => return Err(DropReason::BadNextHeader),
    };
    buf.trim_front(payload_start);
    buf.truncate(trailer.payload_len);
    crate::inbound::take_inner(buf, family, pending.outer.tos)
}

/// Transport mode: moves the kept IP header up against the payload and
/// restores its next header and lengths (RFC 4303 §3.4.4 reassembly).
fn rejoin(
    buf: &mut PacketBuf,
    pending: &InboundPending,
    payload_start: usize,
    trailer: &Trailer,
) -> Result<(), DropReason> {
    let outer = &pending.outer;
    let front = outer.front();
    let gap = payload_start
        .checked_sub(front)
        .ok_or(DropReason::InvalidLayout)?;
    if payload_start > buf.len() {
        return Err(DropReason::InvalidLayout);
    }
    buf.as_mut_slice().copy_within(..front, gap);
    buf.trim_front(gap);
    buf.truncate(front + trailer.payload_len);
    let protocol = trailer.next_header;
    ip::finish_splice(
        buf.as_mut_slice(),
        outer.family,
        outer.next_header_offset(),
        protocol,
    );
    Ok(())
}
