//! Inbound processing, the protocol-independent part: the outer IP header,
//! UDP encapsulation (RFC 3948), the dispatch to ESP or AH, and the
//! [`InboundPending`] that carries a packet's state across the engine.
//!
//! Order of checks (RFC 4301 §5.2, RFC 4303 §3.4): outer header, fragment
//! (reassembly is not done here, §3.4.1), UDP encapsulation markers, SPI →
//! SA, lifetime, replay pre-check, then the engine; after it (`finish`):
//! authentication, replay commit, trailer, inner packet, selectors.

use core::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use phalanx_crypto::{Op, OpStatus, PacketBuf};
use phalanx_sa::{InboundSa, IpsecProtocol, Sad};
use phalanx_wire::natt::{classify, UdpEncapPayload};
use phalanx_wire::udp::{UdpPacket, HEADER_LEN as UDP_HEADER_LEN};
use phalanx_wire::{Error as WireError, IpProtocol, Ipv4Packet, Ipv6Packet};

use crate::drop::{DropReason, Verdict};
use crate::ip::{self, fixed_v4, Family, FamilyExt};
use crate::{ah, esp};
use phalanx_wire::ipv6::HEADER_LEN as IPV6_HEADER_LEN;

/// What the outer header says, and where the IPsec header starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Outer {
    /// Outer IP version.
    pub(crate) family: Family,
    /// Outer destination: the SAD lookup key (RFC 4301 §4.1).
    pub(crate) dst: IpAddr,
    /// Outer TOS / Traffic Class, for ECN decapsulation (RFC 6040).
    pub(crate) tos: u8,
    /// Bytes of IP header (IPv6: with the extension headers) in front of
    /// the UDP, ESP or AH header.
    pub(crate) front: usize,
    /// Offset of the octet that names the protocol at `front`.
    pub(crate) next_header_offset: usize,
    /// That protocol.
    pub(crate) protocol: IpProtocol,
    /// The packet length by its IP length fields.
    pub(crate) len: usize,
}

/// What `finish` needs of the outer header. Kept small: a pending moves
/// with every packet, into the caller's array and back out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Kept {
    /// Outer IP version.
    pub(crate) family: Family,
    /// Outer TOS / Traffic Class, for ECN decapsulation (RFC 6040).
    pub(crate) tos: u8,
    /// [`Outer::front`]; packets are shorter than 2^32 bytes.
    front: u32,
    /// [`Outer::next_header_offset`].
    next_header_offset: u32,
}

impl Kept {
    /// What `finish` needs of `outer`.
    pub(crate) fn of(outer: &Outer) -> Kept {
        Kept {
            family: outer.family,
            tos: outer.tos,
            // Both lie inside a packet whose length came from a 16-bit
            // IP length field.
            front: outer.front as u32,
            next_header_offset: outer.next_header_offset as u32,
        }
    }

    /// Bytes of IP header (with IPv6 extension headers) in front.
    pub(crate) fn front(&self) -> usize {
        self.front as usize
    }

    /// Offset of the octet that named the IPsec protocol.
    pub(crate) fn next_header_offset(&self) -> usize {
        self.next_header_offset as usize
    }
}

/// State of one inbound packet between `prepare_inbound` and
/// `finish_inbound`. Frames keep their ops in order, so callers keep the
/// pendings in a parallel array.
#[derive(Debug)]
pub struct InboundPending {
    /// The SA the packet belongs to.
    pub(crate) sa: Arc<InboundSa>,
    /// The full (ESN-inferred) sequence number.
    pub(crate) seq: u64,
    /// ESP or AH.
    pub(crate) protocol: PendingProtocol,
    /// What is left to know of the outer header.
    pub(crate) outer: Kept,
}

/// Which protocol a pending packet is in, with its protocol-specific state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PendingProtocol {
    /// ESP (RFC 4303).
    Esp,
    /// AH (RFC 4302), with the bytes of saved mutable fields behind the
    /// packet and the AH header length.
    Ah {
        /// Bytes of mutable fields saved behind the packet (the IP
        /// header: below 2^32).
        saved: u32,
        /// Length of the AH header, ICV and padding included (at most
        /// 1024 bytes, RFC 4302 §2.2).
        header_len: u32,
    },
}

// A pending travels with every packet (into the caller's array and back):
// keep it small, 40 bytes on 64-bit targets.
const _: () = assert!(core::mem::size_of::<InboundPending>() <= 48);

impl InboundPending {
    /// The SA the packet belongs to.
    pub fn sa(&self) -> &Arc<InboundSa> {
        &self.sa
    }

    /// The packet's full sequence number (with ESN, the inferred 64 bits).
    pub fn sequence(&self) -> u64 {
        self.seq
    }
}

/// First half of inbound processing: parses the outer packet (IPv4 with
/// options or IPv6 with extension headers, possibly UDP-encapsulated ESP,
/// RFC 3948), finds the SA by SPI, checks its lifetime and the replay
/// window (before the ICV, RFC 4303 §3.4.3) and builds the verify/decrypt
/// operation. On error the buffer comes back with the drop reason.
pub fn prepare_inbound(
    sad: &Sad,
    mut packet: PacketBuf,
    now: Instant,
) -> Result<(InboundPending, Op), (PacketBuf, DropReason)> {
    let outer = match parse_outer(packet.as_slice()) {
        Ok(outer) => outer,
        Err(reason) => return Err((packet, reason)),
    };
    // Bytes behind the IP length (e.g. Ethernet padding) are not the packet's.
    packet.truncate(outer.len);
    match outer.protocol {
        IpProtocol::ESP => esp::inbound::prepare(sad, packet, outer, 0, now),
        IpProtocol::AH => ah::inbound::prepare(sad, packet, outer, now),
        IpProtocol::UDP => match udp_encapsulated(packet.as_slice(), &outer) {
            Ok(esp_end) => {
                packet.truncate(esp_end);
                esp::inbound::prepare(sad, packet, outer, UDP_HEADER_LEN, now)
            }
            Err(reason) => Err((packet, reason)),
        },
        _ => Err((packet, DropReason::NotIpsec)),
    }
}

/// Second half of inbound processing, after the engine ran `op`. The
/// buffer then holds the inner IP packet: in tunnel mode the decapsulated
/// packet, in transport mode the IP header joined again with the payload
/// (next header restored, lengths and IPv4 checksum fixed).
///
/// Soft-lifetime events are not reported here (the SA keeps them:
/// `usage.is_soft_expired()`); see [`finish_inbound_with_events`].
pub fn finish_inbound(pending: InboundPending, op: Op) -> (PacketBuf, Verdict) {
    let mut events = Vec::new();
    finish_inbound_with_events(pending, op, &mut events)
}

/// [`finish_inbound`] that also pushes the SPI of an SA whose soft byte or
/// packet limit this packet crossed onto `soft_expired` (once per SA).
pub fn finish_inbound_with_events(
    pending: InboundPending,
    op: Op,
    soft_expired: &mut Vec<u32>,
) -> (PacketBuf, Verdict) {
    let (buf, verdict) = match pending.protocol {
        PendingProtocol::Esp => esp::inbound::finish(&pending, op, soft_expired),
        PendingProtocol::Ah { saved, header_len } => {
            let (saved, header_len) = (saved as usize, header_len as usize);
            ah::inbound::finish(&pending, saved, header_len, op, soft_expired)
        }
    };
    if let Verdict::Drop(reason) = verdict {
        reason.record_on(&pending.sa.drops);
    }
    (buf, verdict)
}

/// The drop reason of an outer-header parse error.
fn outer_reason(error: WireError) -> DropReason {
    match error {
        WireError::Truncated => DropReason::Truncated,
        WireError::Fragment => DropReason::Fragment,
        _ => DropReason::MalformedHeader,
    }
}

/// Reads the outer IP header up to the first header that is not an IPv6
/// extension header.
pub(crate) fn parse_outer(packet: &[u8]) -> Result<Outer, DropReason> {
    match Family::of(packet) {
        Some(Family::V4) => parse_outer_v4(packet),
        Some(Family::V6) => parse_outer_v6(packet),
        None if packet.is_empty() => Err(DropReason::Truncated),
        None => Err(DropReason::MalformedHeader),
    }
}

fn parse_outer_v4(packet: &[u8]) -> Result<Outer, DropReason> {
    let front = Ipv4Packet::new_checked(packet)
        .map_err(outer_reason)?
        .header_len();
    if !fixed_v4::checksum_ok(packet, front) {
        return Err(DropReason::MalformedHeader);
    }
    // new_checked saw at least the fixed header; through a view over it
    // the field offsets are checked at compile time.
    let fixed = fixed_v4::header(packet).ok_or(DropReason::Truncated)?;
    let ip = Ipv4Packet::new_unchecked(&fixed[..]);
    if ip.is_fragment() {
        return Err(DropReason::Fragment);
    }
    Ok(Outer {
        family: Family::V4,
        dst: IpAddr::V4(ip.dst_addr()),
        tos: ip.dscp_ecn(),
        front,
        next_header_offset: 9,
        protocol: ip.protocol(),
        len: usize::from(ip.total_len()),
    })
}

fn parse_outer_v6(packet: &[u8]) -> Result<Outer, DropReason> {
    let ip = Ipv6Packet::new_checked(packet).map_err(outer_reason)?;
    let upper = phalanx_wire::ipv6::upper_layer(&ip).map_err(outer_reason)?;
    if upper.is_fragment {
        return Err(DropReason::Fragment);
    }
    Ok(Outer {
        family: Family::V6,
        dst: IpAddr::V6(ip.dst_addr()),
        tos: ip.traffic_class(),
        front: upper.offset,
        next_header_offset: upper.last_next_header_offset,
        protocol: upper.protocol,
        len: IPV6_HEADER_LEN + usize::from(ip.payload_len()),
    })
}

/// RFC 3948 §2: what a UDP datagram on the encapsulation port carries.
/// Returns the end of the ESP packet (the end of the UDP datagram); a
/// NAT-keepalive or an IKE message (non-ESP marker) is refused with its
/// own reason so the caller can hand it to the IKE daemon.
fn udp_encapsulated(packet: &[u8], outer: &Outer) -> Result<usize, DropReason> {
    let datagram = packet.get(outer.front..).unwrap_or_default();
    let udp = UdpPacket::new_checked(datagram).map_err(outer_reason)?;
    match classify(udp.payload()) {
        Ok(UdpEncapPayload::Esp(_)) => Ok(outer.front + usize::from(udp.len())),
        Ok(UdpEncapPayload::Keepalive) => Err(DropReason::NattKeepalive),
        Ok(UdpEncapPayload::Ike(_)) => Err(DropReason::IkeMarker),
        Err(_) => Err(DropReason::Truncated),
    }
}

/// SPI → SA (RFC 4301 §4.1: by SPI and protocol), then the outer
/// destination must be the SA's (tunnel mode: our tunnel address).
pub(crate) fn lookup(
    sad: &Sad,
    spi: u32,
    protocol: IpsecProtocol,
    dst: IpAddr,
) -> Result<Arc<InboundSa>, DropReason> {
    let sa = sad.get(spi, protocol).ok_or(DropReason::UnknownSpi)?;
    if !sa.accepts_destination(dst) {
        DropReason::WrongDestination.record_on(&sa.drops);
        return Err(DropReason::WrongDestination);
    }
    Ok(sa)
}

/// Runs the checks that follow a successful SA lookup; a refusal is also
/// counted on the SA.
pub(crate) fn on_sa<T>(
    sa: &InboundSa,
    checks: impl FnOnce() -> Result<T, DropReason>,
) -> Result<T, DropReason> {
    checks().inspect_err(|reason| reason.record_on(&sa.drops))
}

/// The engine's verdict as a drop reason.
pub(crate) fn authenticated(status: OpStatus) -> Result<(), DropReason> {
    match status {
        OpStatus::Completed => Ok(()),
        OpStatus::AuthenticationFailed => Err(DropReason::AuthFailed),
        // Pending: no engine ran the op; nothing was verified.
        OpStatus::InvalidLayout | OpStatus::Pending => Err(DropReason::InvalidLayout),
    }
}

/// Tunnel mode: `buf` starts with the inner packet that Next Header named
/// `family`. Cuts it to its own length (removing TFC padding, RFC 4303
/// §2.7), checks it, and carries an outer CE mark in (RFC 6040 §4.2).
pub(crate) fn take_inner(
    buf: &mut PacketBuf,
    family: Family,
    outer_tos: u8,
) -> Result<(), DropReason> {
    let len = ip::received_len(buf.as_slice(), family).ok_or(DropReason::InnerMalformed)?;
    buf.truncate(len);
    if !ip::propagate_ecn(buf.as_mut_slice(), outer_tos) {
        return Err(DropReason::EcnNotEct);
    }
    Ok(())
}
