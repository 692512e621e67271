//! UDP header (RFC 768) and its checksum over the IPv4 (RFC 768) and IPv6
//! (RFC 8200 §8.1) pseudo-headers.
//!
//! ```text
//!  0      7 8     15 16    23 24    31
//! +--------+--------+--------+--------+
//! |     Source      |   Destination   |
//! |      Port       |      Port       |
//! +--------+--------+--------+--------+
//! |                 |                 |
//! |     Length      |    Checksum     |
//! +--------+--------+--------+--------+
//! |
//! |          data octets ...
//! +---------------- ...
//! ```

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::error::{Error, Result};
use crate::field::{clamp, read_u16, view, write_u16};
use crate::iana::IpProtocol;

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

mod field {
    pub(super) const SRC_PORT: usize = 0;
    pub(super) const DST_PORT: usize = 2;
    pub(super) const LENGTH: usize = 4;
    pub(super) const CHECKSUM: usize = 6;
}

view! {
    /// A read (and, over `AsMut` buffers, write) view of a UDP datagram.
    UdpPacket
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Checks that the header fits and that `8 <= Length <= buffer`.
    /// (UDP jumbograms, RFC 2675 Length 0, are not supported.)
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let length = usize::from(self.len());
        if length < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if length > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The Source Port.
    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// The Destination Port.
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// The Length field: header and data, in octets.
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// True when Length says there is no data.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }

    /// The Checksum field (0: none transmitted, IPv4 only).
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The data, ending at Length.
    pub fn payload(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[clamp(HEADER_LEN, usize::from(self.len()), buf.len())]
    }

    /// Header and data, ending at Length.
    pub fn datagram(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[clamp(0, usize::from(self.len()), buf.len())]
    }

    fn sum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
        let pseudo = checksum::pseudo_header_v4(src, dst, IpProtocol::UDP, self.len());
        checksum::add(pseudo, checksum::data(self.datagram()))
    }

    fn sum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> u16 {
        let length = u32::from(self.len());
        let pseudo = checksum::pseudo_header_v6(src, dst, IpProtocol::UDP, length);
        checksum::add(pseudo, checksum::data(self.datagram()))
    }

    /// Verifies the checksum over the IPv4 pseudo-header. A zero checksum
    /// means the sender computed none and verifies (RFC 768).
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        self.checksum() == 0 || self.sum_v4(src, dst) == 0xffff
    }

    /// Verifies the checksum over the IPv6 pseudo-header. A zero checksum
    /// does not verify: it is mandatory over IPv6 (RFC 8200 §8.1).
    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        self.checksum() != 0 && self.sum_v6(src, dst) == 0xffff
    }
}

/// RFC 768: a computed checksum of zero is sent as all ones, since zero
/// means "no checksum".
fn nonzero(value: u16) -> u16 {
    if value == 0 {
        0xffff
    } else {
        value
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the Source Port.
    pub fn set_src_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::SRC_PORT, value);
    }

    /// Sets the Destination Port.
    pub fn set_dst_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::DST_PORT, value);
    }

    /// Sets the Length field.
    pub fn set_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, value);
    }

    /// Sets the Checksum field as is.
    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Computes and stores the checksum over the IPv4 pseudo-header and the
    /// datagram (Length octets). RFC 3948 §3.1 lets UDP-encapsulated ESP
    /// over IPv4 send zero instead: use `set_checksum(0)` for that.
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let sum = self.sum_v4(src, dst);
        self.set_checksum(nonzero(!sum));
    }

    /// Computes and stores the checksum over the IPv6 pseudo-header and the
    /// datagram (RFC 8200 §8.1).
    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.set_checksum(0);
        let sum = self.sum_v6(src, dst);
        self.set_checksum(nonzero(!sum));
    }

    /// The data (up to Length), writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        let buf = self.buffer.as_mut();
        let range = clamp(HEADER_LEN, end, buf.len());
        &mut buf[range]
    }
}

/// A high-level description of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Octets of data after the header (at most [`UdpRepr::MAX_PAYLOAD_LEN`]).
    pub payload_len: usize,
}

impl UdpRepr {
    /// The largest payload the 16-bit Length can describe.
    pub const MAX_PAYLOAD_LEN: usize = u16::MAX as usize - HEADER_LEN;

    /// Reads a checked datagram. The checksum needs the IP addresses and is
    /// verified apart: [`UdpPacket::verify_checksum_v4`] / `_v6`.
    pub fn parse<T: AsRef<[u8]>>(packet: &UdpPacket<T>) -> Result<Self> {
        packet.check_len()?;
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.len()) - HEADER_LEN,
        })
    }

    /// Octets [`Self::emit`] writes: the 8-octet header.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Octets of the whole datagram: header and data.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the header with a zero checksum; once the data is in place,
    /// call [`UdpPacket::fill_checksum_v4`] or (mandatory over IPv6)
    /// [`UdpPacket::fill_checksum_v6`]. A `payload_len` above
    /// [`Self::MAX_PAYLOAD_LEN`] is written as Length 65535.
    ///
    /// Panics if the buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut UdpPacket<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(u16::try_from(self.buffer_len()).unwrap_or(u16::MAX));
        packet.set_checksum(0);
    }
}

#[cfg(test)]
mod tests;
