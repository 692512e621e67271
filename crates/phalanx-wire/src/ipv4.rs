//! IPv4 header (RFC 791 §3.1).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Version|  IHL  |   DSCP    |ECN|          Total Length         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |         Identification        |Flags|      Fragment Offset    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Time to Live |    Protocol   |         Header Checksum       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       Source Address                          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Destination Address                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Options                    |    Padding    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The Type of Service octet is DSCP + ECN since RFC 2474 and RFC 3168; this
//! module reads and writes it whole (`dscp_ecn`), as tunnel-mode IPsec copies
//! it (RFC 4301 §5.1.2.1, RFC 6040).

use core::net::Ipv4Addr;

use crate::checksum;
use crate::error::{Error, Result};
use crate::field::{clamp, read_u16, view, write_u16, Field};
use crate::iana::IpProtocol;

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;
/// Longest header: IHL is four bits of 32-bit words.
pub const MAX_HEADER_LEN: usize = 60;

mod field {
    use super::Field;
    pub(super) const VER_IHL: usize = 0;
    pub(super) const DSCP_ECN: usize = 1;
    pub(super) const TOTAL_LEN: usize = 2;
    pub(super) const IDENT: usize = 4;
    pub(super) const FLAGS_FRAG: usize = 6;
    pub(super) const TTL: usize = 8;
    pub(super) const PROTOCOL: usize = 9;
    pub(super) const CHECKSUM: usize = 10;
    pub(super) const SRC: Field = 12..16;
    pub(super) const DST: Field = 16..20;
}

/// RFC 791: flag bit 1, "Don't Fragment".
const FLAG_DF: u16 = 0x4000;
/// RFC 791: flag bit 2, "More Fragments".
const FLAG_MF: u16 = 0x2000;
/// RFC 791: the 13-bit fragment offset, in units of 8 octets.
const FRAG_OFFSET_MASK: u16 = 0x1fff;

view! {
    /// A read (and, over `AsMut` buffers, write) view of an IPv4 packet.
    Ipv4Packet
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Checks that the fixed header fits, that `20 <= header_len <=
    /// total_len`, and that `total_len` fits in the buffer (which may be
    /// longer, e.g. Ethernet padding: [`Self::payload`] ends at `total_len`).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = self.header_len();
        let total_len = usize::from(self.total_len());
        if header_len < HEADER_LEN || total_len < header_len {
            return Err(Error::Malformed);
        }
        if total_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The Version field (4 for IPv4).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// The IHL field: header length in 32-bit words.
    pub fn ihl(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] & 0x0f
    }

    /// Header length in octets, options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.ihl()) * 4
    }

    /// The former Type of Service octet: DSCP (6 bits) and ECN (2 bits).
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }

    /// The Total Length field: header and data, in octets.
    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::TOTAL_LEN)
    }

    /// The Identification field.
    pub fn ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::IDENT)
    }

    fn flags_frag(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::FLAGS_FRAG)
    }

    /// The three Flags bits (reserved, DF, MF) as the top bits of a `u8`
    /// shifted down: `0b0rdm` where r is the reserved bit.
    pub fn flags(&self) -> u8 {
        (self.flags_frag() >> 13) as u8
    }

    /// The DF ("Don't Fragment") flag.
    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & FLAG_DF != 0
    }

    /// The MF ("More Fragments") flag.
    pub fn more_frags(&self) -> bool {
        self.flags_frag() & FLAG_MF != 0
    }

    /// The Fragment Offset field, in units of 8 octets (RFC 791).
    pub fn frag_offset(&self) -> u16 {
        self.flags_frag() & FRAG_OFFSET_MASK
    }

    /// True for any fragment: MF set or a non-zero offset.
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }

    /// The Time to Live field.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// The Protocol field.
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// The Header Checksum field.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The Source Address.
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.address(field::SRC))
    }

    /// The Destination Address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.address(field::DST))
    }

    fn address(&self, range: Field) -> [u8; 4] {
        let mut octets = [0u8; 4];
        octets.copy_from_slice(&self.buffer.as_ref()[range]);
        octets
    }

    /// True when the header checksum verifies (RFC 791: the one's-complement
    /// sum over the header, checksum included, is all ones).
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.header()) == 0xffff
    }

    /// The whole header, options included.
    pub fn header(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[clamp(0, self.header_len(), buf.len())]
    }

    /// The options and padding between the fixed header and the payload.
    pub fn options(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[clamp(HEADER_LEN, self.header_len(), buf.len())]
    }

    /// The data after the header, ending at Total Length, not at the end of
    /// the buffer.
    pub fn payload(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[self.payload_range(buf.len())]
    }

    fn payload_range(&self, len: usize) -> core::ops::Range<usize> {
        clamp(self.header_len(), usize::from(self.total_len()), len)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the Version field.
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (version << 4);
    }

    /// Sets IHL from a header length in octets (a multiple of 4, at most 60).
    pub fn set_header_len(&mut self, header_len: usize) {
        let words = ((header_len / 4) & 0x0f) as u8;
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | words;
    }

    /// Sets the DSCP + ECN octet.
    pub fn set_dscp_ecn(&mut self, value: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = value;
    }

    /// Sets the Total Length field.
    pub fn set_total_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::TOTAL_LEN, value);
    }

    /// Sets the Identification field.
    pub fn set_ident(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::IDENT, value);
    }

    fn set_flags_frag(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::FLAGS_FRAG, value);
    }

    /// Clears all three flag bits and the fragment offset.
    pub fn clear_flags_frag(&mut self) {
        self.set_flags_frag(0);
    }

    /// Sets or clears DF.
    pub fn set_dont_frag(&mut self, value: bool) {
        let raw = self.flags_frag() & !FLAG_DF;
        self.set_flags_frag(raw | if value { FLAG_DF } else { 0 });
    }

    /// Sets or clears MF.
    pub fn set_more_frags(&mut self, value: bool) {
        let raw = self.flags_frag() & !FLAG_MF;
        self.set_flags_frag(raw | if value { FLAG_MF } else { 0 });
    }

    /// Sets the fragment offset, in units of 8 octets (13 bits kept).
    pub fn set_frag_offset(&mut self, value: u16) {
        let raw = self.flags_frag() & !FRAG_OFFSET_MASK;
        self.set_flags_frag(raw | (value & FRAG_OFFSET_MASK));
    }

    /// Sets the Time to Live field.
    pub fn set_ttl(&mut self, value: u8) {
        self.buffer.as_mut()[field::TTL] = value;
    }

    /// Sets the Protocol field.
    pub fn set_protocol(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = value.0;
    }

    /// Sets the Header Checksum field as is (see [`Self::fill_checksum`]).
    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Sets the Source Address.
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&addr.octets());
    }

    /// Sets the Destination Address.
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&addr.octets());
    }

    /// Computes and stores the header checksum over `header_len` octets.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::checksum(self.header());
        self.set_checksum(sum);
    }

    /// The options, writable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let header_len = self.header_len();
        let buf = self.buffer.as_mut();
        let range = clamp(HEADER_LEN, header_len, buf.len());
        &mut buf[range]
    }

    /// The payload (up to Total Length), writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.payload_range(self.buffer.as_ref().len());
        &mut self.buffer.as_mut()[range]
    }
}

/// A high-level description of an unfragmented IPv4 header without options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol of the payload.
    pub protocol: IpProtocol,
    /// Payload length in octets (at most [`Ipv4Repr::MAX_PAYLOAD_LEN`]).
    pub payload_len: usize,
    /// Time to Live.
    pub ttl: u8,
    /// DSCP + ECN octet.
    pub dscp_ecn: u8,
    /// Identification.
    pub ident: u16,
    /// DF flag.
    pub dont_frag: bool,
}

impl Ipv4Repr {
    /// The largest payload a 20-octet header can describe.
    pub const MAX_PAYLOAD_LEN: usize = u16::MAX as usize - HEADER_LEN;

    /// Reads a checked packet: version 4, valid header checksum, not a
    /// fragment (a fragment has no representation here: re-emitting it as
    /// a whole datagram would be wrong). Options are accepted and not kept.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Result<Self> {
        packet.check_len()?;
        if packet.version() != 4 {
            return Err(Error::BadVersion);
        }
        if !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        if packet.is_fragment() {
            return Err(Error::Fragment);
        }
        Ok(Ipv4Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()) - packet.header_len(),
            ttl: packet.ttl(),
            dscp_ecn: packet.dscp_ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
        })
    }

    /// Octets [`Self::emit`] writes: the 20-octet header.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Octets of the whole packet: header and payload.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes a 20-octet header with its checksum; the payload is the
    /// caller's. A `payload_len` above [`Self::MAX_PAYLOAD_LEN`] is written as
    /// the largest Total Length (the caller must not build such packets).
    ///
    /// Panics if the buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv4Packet<T>) {
        let total = u16::try_from(self.buffer_len()).unwrap_or(u16::MAX);
        packet.set_version(4);
        packet.set_header_len(HEADER_LEN);
        packet.set_dscp_ecn(self.dscp_ecn);
        packet.set_total_len(total);
        packet.set_ident(self.ident);
        packet.clear_flags_frag();
        packet.set_dont_frag(self.dont_frag);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src);
        packet.set_dst_addr(self.dst);
        packet.fill_checksum();
    }
}

mod fragment;
pub use fragment::Ipv4Fragments;

#[cfg(test)]
mod tests;
