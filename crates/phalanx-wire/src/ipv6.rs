//! IPv6 fixed header (RFC 8200 §3), extension headers (RFC 8200 §4) and the
//! walk from the fixed header to the upper layer ([`upper_layer`]).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Version| Traffic Class |           Flow Label                  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |         Payload Length        |  Next Header  |   Hop Limit   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                                                               +
//! |                                                               |
//! +                         Source Address                        +
//! |                                                               |
//! +                                                               +
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                                                               +
//! |                                                               |
//! +                      Destination Address                      +
//! |                                                               |
//! +                                                               +
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Jumbograms (RFC 2675, Payload Length 0 with a Jumbo Payload option) are
//! not supported: such a packet reads as one with an empty payload.

use core::net::Ipv6Addr;

use crate::error::{Error, Result};
use crate::field::{clamp, read_u16, read_u32, view, write_u16, write_u32, Field};
use crate::iana::IpProtocol;

mod ext;
mod walk;

pub use ext::{Ipv6ExtHeader, Ipv6FragmentHeader, Ipv6Option, Ipv6Options, FRAGMENT_HEADER_LEN};
pub(crate) use walk::walk;
pub use walk::{ipsec_insertion_point, upper_layer, UpperLayer, MAX_EXTENSION_HEADERS};

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;

mod field {
    use super::Field;
    pub(super) const VER_TC_FLOW: usize = 0;
    pub(super) const PAYLOAD_LEN: usize = 4;
    pub(super) const NEXT_HEADER: usize = 6;
    pub(super) const HOP_LIMIT: usize = 7;
    pub(super) const SRC: Field = 8..24;
    pub(super) const DST: Field = 24..40;
}

/// Offset of the Next Header byte in the fixed header (RFC 8200 §3).
pub const NEXT_HEADER_OFFSET: usize = field::NEXT_HEADER;

const FLOW_LABEL_MASK: u32 = 0x000f_ffff;

view! {
    /// A read (and, over `AsMut` buffers, write) view of an IPv6 packet.
    Ipv6Packet
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Checks that the fixed header and `Payload Length` octets after it fit
    /// in the buffer (which may be longer: [`Self::payload`] ends where the
    /// Payload Length says).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || HEADER_LEN + usize::from(self.payload_len()) > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    fn first_word(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::VER_TC_FLOW)
    }

    /// The Version field (6 for IPv6).
    pub fn version(&self) -> u8 {
        (self.first_word() >> 28) as u8
    }

    /// The Traffic Class field: DSCP (6 bits) and ECN (2 bits).
    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }

    /// The 20-bit Flow Label.
    pub fn flow_label(&self) -> u32 {
        self.first_word() & FLOW_LABEL_MASK
    }

    /// The Payload Length field: octets after the fixed header, extension
    /// headers included.
    pub fn payload_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::PAYLOAD_LEN)
    }

    /// The Next Header field.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    /// The Hop Limit field.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// The Source Address.
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.address(field::SRC))
    }

    /// The Destination Address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.address(field::DST))
    }

    fn address(&self, range: Field) -> [u8; 16] {
        let mut octets = [0u8; 16];
        octets.copy_from_slice(&self.buffer.as_ref()[range]);
        octets
    }

    /// The fixed header.
    pub fn header(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[clamp(0, HEADER_LEN, buf.len())]
    }

    /// Everything after the fixed header (extension headers included), up to
    /// Payload Length.
    pub fn payload(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[self.payload_range(buf.len())]
    }

    /// The fixed header and the payload: the packet without trailing octets.
    pub fn packet(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[clamp(0, self.payload_range(buf.len()).end, buf.len())]
    }

    fn payload_range(&self, len: usize) -> core::ops::Range<usize> {
        clamp(
            HEADER_LEN,
            HEADER_LEN + usize::from(self.payload_len()),
            len,
        )
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn set_first_word(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::VER_TC_FLOW, value);
    }

    /// Sets the Version field.
    pub fn set_version(&mut self, version: u8) {
        let word = self.first_word() & 0x0fff_ffff;
        self.set_first_word(word | (u32::from(version & 0x0f) << 28));
    }

    /// Sets the Traffic Class field.
    pub fn set_traffic_class(&mut self, value: u8) {
        let word = self.first_word() & 0xf00f_ffff;
        self.set_first_word(word | (u32::from(value) << 20));
    }

    /// Sets the Flow Label (low 20 bits kept).
    pub fn set_flow_label(&mut self, value: u32) {
        let word = self.first_word() & !FLOW_LABEL_MASK;
        self.set_first_word(word | (value & FLOW_LABEL_MASK));
    }

    /// Sets the Payload Length field.
    pub fn set_payload_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::PAYLOAD_LEN, value);
    }

    /// Sets the Next Header field.
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = value.0;
    }

    /// Sets the Hop Limit field.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }

    /// Sets the Source Address.
    pub fn set_src_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&addr.octets());
    }

    /// Sets the Destination Address.
    pub fn set_dst_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&addr.octets());
    }

    /// The payload (up to Payload Length), writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.payload_range(self.buffer.as_ref().len());
        &mut self.buffer.as_mut()[range]
    }
}

/// A high-level description of an IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Next Header: the first extension header or the upper layer.
    pub next_header: IpProtocol,
    /// Payload Length in octets (at most [`Ipv6Repr::MAX_PAYLOAD_LEN`]).
    pub payload_len: usize,
    /// Hop Limit.
    pub hop_limit: u8,
    /// Traffic Class (DSCP + ECN).
    pub traffic_class: u8,
    /// Flow Label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// The largest payload without a jumbogram.
    pub const MAX_PAYLOAD_LEN: usize = u16::MAX as usize;

    /// Reads a checked packet; the version must be 6.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Self> {
        packet.check_len()?;
        if packet.version() != 6 {
            return Err(Error::BadVersion);
        }
        Ok(Ipv6Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    /// Octets [`Self::emit`] writes: the 40-octet fixed header.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Octets of the whole packet: fixed header and payload.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the fixed header; the payload is the caller's. A
    /// `payload_len` above [`Self::MAX_PAYLOAD_LEN`] is written as 65535.
    ///
    /// Panics if the buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) {
        packet.set_first_word(0);
        packet.set_version(6);
        packet.set_traffic_class(self.traffic_class);
        packet.set_flow_label(self.flow_label);
        packet.set_payload_len(u16::try_from(self.payload_len).unwrap_or(u16::MAX));
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src);
        packet.set_dst_addr(self.dst);
    }
}

#[cfg(test)]
mod tests;
