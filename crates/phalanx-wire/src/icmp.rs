//! The ICMP errors a gateway sends for path MTU discovery, and the view
//! that reads them back: IPv4 Destination Unreachable, Fragmentation
//! Needed (RFC 792, next-hop MTU from RFC 1191 §4) and ICMPv6 Packet Too
//! Big (RFC 4443 §3.2).
//!
//! ```text
//! RFC 1191 §4 (type 3, code 4)          RFC 4443 §3.2 (type 2, code 0)
//!  0      7 8     15 16            31    0      7 8     15 16            31
//! +--------+--------+----------------+  +--------+--------+----------------+
//! |  Type  |  Code  |    Checksum    |  |  Type  |  Code  |    Checksum    |
//! +--------+--------+----------------+  +--------+--------+----------------+
//! |   unused = 0    | Next-Hop MTU   |  |               MTU                |
//! +-----------------+----------------+  +----------------------------------+
//! | Internet header + leading octets |  | As much of the invoking packet   |
//! | of the original datagram         |  | as fits the minimum IPv6 MTU     |
//! ```
//!
//! The message is built without the IP header in front: the gateway hands
//! it to a raw ICMP socket, and the kernel adds the header with the source
//! address a router would use. The ICMPv4 checksum covers the message
//! alone (RFC 792); the ICMPv6 one covers a pseudo-header (RFC 4443 §2.3),
//! which the builder fills when given the addresses (a raw ICMPv6 socket
//! recomputes it anyway, RFC 3542 §3.1).

use core::net::Ipv6Addr;

use crate::checksum;
use crate::error::{Error, Result};
use crate::iana::IpProtocol;

/// Fixed part of both messages: type, code, checksum, MTU word.
pub const HEADER_LEN: usize = 8;

/// ICMPv4 type Destination Unreachable (RFC 792).
pub const TYPE_DEST_UNREACHABLE: u8 = 3;
/// Its code Fragmentation Needed and DF Set (RFC 792).
pub const CODE_FRAG_NEEDED: u8 = 4;
/// ICMPv6 type Packet Too Big (RFC 4443 §3.2).
pub const TYPE_PACKET_TOO_BIG: u8 = 2;

/// Most octets of the original datagram an ICMPv4 error quotes: RFC 1812
/// §4.3.2.3 keeps the whole ICMP datagram within 576 octets (576 less a
/// 20-octet IP header and this header).
pub const QUOTE_MAX_V4: usize = 576 - 20 - HEADER_LEN;

/// Most octets of the invoking packet an ICMPv6 error quotes: RFC 4443
/// §3.2 keeps the packet within the minimum IPv6 MTU (1280 less the
/// 40-octet header and this header).
pub const QUOTE_MAX_V6: usize = 1280 - 40 - HEADER_LEN;

mod field {
    use core::ops::Range;
    pub(super) const TYPE: usize = 0;
    pub(super) const CODE: usize = 1;
    pub(super) const CHECKSUM: Range<usize> = 2..4;
    /// RFC 1191 §4: the low 16 bits of the second word in ICMPv4.
    pub(super) const NEXT_HOP_MTU: Range<usize> = 6..8;
    /// RFC 4443 §3.2: the whole second word in ICMPv6.
    pub(super) const MTU: Range<usize> = 4..8;
}

/// A read-only view of an ICMP or ICMPv6 message (the part after the IP
/// header).
#[derive(Debug, Clone, Copy)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    /// A view, checked to hold the fixed header.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(IcmpPacket { buffer })
    }

    /// Type.
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// Code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum as sent.
    pub fn checksum(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::CHECKSUM];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// ICMPv4 Fragmentation Needed: the next-hop MTU (RFC 1191 §4).
    pub fn next_hop_mtu(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::NEXT_HOP_MTU];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// ICMPv6 Packet Too Big: the MTU (RFC 4443 §3.2).
    pub fn mtu(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::MTU];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The quoted original packet.
    pub fn quoted(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// Whether the ICMPv4 checksum over the whole message verifies.
    pub fn verify_checksum_v4(&self) -> bool {
        checksum::data(self.buffer.as_ref()) == 0xffff
    }
}

/// Writes an ICMPv4 Fragmentation Needed message into `out` telling the
/// sender of `original` (its IP header first) that `mtu` octets fit;
/// quotes up to [`QUOTE_MAX_V4`] octets of it. Returns the length written,
/// or `None` if `out` cannot hold the header and the original's first 28
/// octets (its IP header and 64 bits, RFC 792's minimum).
pub fn frag_needed_v4(out: &mut [u8], mtu: u16, original: &[u8]) -> Option<usize> {
    let len = write(
        out,
        TYPE_DEST_UNREACHABLE,
        CODE_FRAG_NEEDED,
        original,
        QUOTE_MAX_V4,
        28,
    )?;
    out[field::NEXT_HOP_MTU].copy_from_slice(&mtu.to_be_bytes());
    let sum = checksum::checksum(&out[..len]);
    out[field::CHECKSUM].copy_from_slice(&sum.to_be_bytes());
    Some(len)
}

/// Writes an ICMPv6 Packet Too Big message into `out` for `original` (its
/// IPv6 header first), with `mtu`, and its checksum over the pseudo-header
/// of a packet from `src` to `dst`; quotes up to [`QUOTE_MAX_V6`] octets.
/// Returns the length written, or `None` if `out` cannot hold the header
/// and the original's IPv6 header.
pub fn packet_too_big_v6(
    out: &mut [u8],
    mtu: u32,
    original: &[u8],
    src: Ipv6Addr,
    dst: Ipv6Addr,
) -> Option<usize> {
    let len = write(out, TYPE_PACKET_TOO_BIG, 0, original, QUOTE_MAX_V6, 40)?;
    out[field::MTU].copy_from_slice(&mtu.to_be_bytes());
    // `len` is at most 1240: it fits the pseudo-header's 32-bit length.
    let pseudo = checksum::pseudo_header_v6(src, dst, IpProtocol::ICMPV6, len as u32);
    let sum = !checksum::combine(&[pseudo, checksum::data(&out[..len])]);
    out[field::CHECKSUM].copy_from_slice(&sum.to_be_bytes());
    Some(len)
}

/// The common layout: type, code, zero checksum and MTU word, the quote.
fn write(
    out: &mut [u8],
    msg_type: u8,
    code: u8,
    original: &[u8],
    quote_max: usize,
    quote_min: usize,
) -> Option<usize> {
    let quote = original
        .len()
        .min(quote_max)
        .min(out.len().checked_sub(HEADER_LEN)?);
    if quote < quote_min.min(original.len()) {
        return None;
    }
    let len = HEADER_LEN + quote;
    out[..HEADER_LEN].fill(0);
    out[field::TYPE] = msg_type;
    out[field::CODE] = code;
    out[HEADER_LEN..len].copy_from_slice(&original[..quote]);
    Some(len)
}

#[cfg(test)]
mod tests;
