//! Authentication Header (RFC 4302 §2).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Next Header   |  Payload Len  |          RESERVED             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                 Security Parameters Index (SPI)               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Sequence Number Field                      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                Integrity Check Value-ICV (variable)           |
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Payload Len is the header length in 32-bit words minus 2 (RFC 4302
//! §2.2). The ICV field may end in padding that aligns the header to 4
//! octets over IPv4 and 8 over IPv6 (RFC 4302 §2.6); this view calls all of
//! it the ICV.

use crate::error::{Error, Result};
use crate::field::{clamp, read_u16, read_u32, view, write_u16, write_u32};
use crate::iana::IpProtocol;

/// Length of the fixed part: up to and including the sequence number.
pub const FIXED_LEN: usize = 12;
/// Longest header Payload Len can describe: (255 + 2) × 4 octets.
pub const MAX_HEADER_LEN: usize = (255 + 2) * 4;
/// Longest ICV field (padding included).
pub const MAX_ICV_LEN: usize = MAX_HEADER_LEN - FIXED_LEN;

mod field {
    pub(super) const NEXT_HEADER: usize = 0;
    pub(super) const PAYLOAD_LEN: usize = 1;
    pub(super) const RESERVED: usize = 2;
    pub(super) const SPI: usize = 4;
    pub(super) const SEQUENCE: usize = 8;
}

view! {
    /// A read (and, over `AsMut` buffers, write) view of an AH header and
    /// what follows it. Give it the IP payload, bounded by the IP length.
    AhPacket
}

impl<T: AsRef<[u8]>> AhPacket<T> {
    /// Checks that the fixed part fits, that the header is at least 12
    /// octets (Payload Len >= 1) and that all of it fits in the buffer.
    /// Alignment depends on the IP version: [`Self::check_alignment`].
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < FIXED_LEN {
            return Err(Error::Truncated);
        }
        if self.header_len() < FIXED_LEN {
            return Err(Error::Malformed);
        }
        if self.header_len() > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// RFC 4302 §2.6 / §3.3.3.2.1: the header is a multiple of 8 octets over
    /// IPv6 and of 4 over IPv4 (always true by construction).
    pub fn check_alignment(&self, is_ipv6: bool) -> Result<()> {
        let align = if is_ipv6 { 8 } else { 4 };
        if self.header_len() % align != 0 {
            return Err(Error::Malformed);
        }
        Ok(())
    }

    /// The Next Header field: the protected payload's protocol.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    /// The raw Payload Len field (32-bit words minus 2).
    pub fn payload_len(&self) -> u8 {
        self.buffer.as_ref()[field::PAYLOAD_LEN]
    }

    /// Header length in octets: `(Payload Len + 2) × 4`.
    pub fn header_len(&self) -> usize {
        (usize::from(self.payload_len()) + 2) * 4
    }

    /// The RESERVED field (zero from the sender; covered by the ICV and
    /// otherwise ignored, RFC 4302 §2.3).
    pub fn reserved(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::RESERVED)
    }

    /// The Security Parameters Index.
    pub fn spi(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::SPI)
    }

    /// The Sequence Number field (the low 32 bits with ESN).
    pub fn sequence_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::SEQUENCE)
    }

    /// The ICV field, alignment padding included.
    pub fn icv(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[clamp(FIXED_LEN, self.header_len(), buf.len())]
    }

    /// What AH protects after itself, to the end of the buffer.
    pub fn payload(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[clamp(self.header_len(), buf.len(), buf.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AhPacket<T> {
    /// Sets the Next Header field.
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = value.0;
    }

    /// Sets the raw Payload Len field.
    pub fn set_payload_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PAYLOAD_LEN] = value;
    }

    /// Sets the RESERVED field.
    pub fn set_reserved(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::RESERVED, value);
    }

    /// Sets the SPI.
    pub fn set_spi(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::SPI, value);
    }

    /// Sets the Sequence Number field.
    pub fn set_sequence_number(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::SEQUENCE, value);
    }

    /// The ICV field, writable (zero it before computing the ICV, RFC 4302
    /// §3.3.3.1).
    pub fn icv_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        let buf = self.buffer.as_mut();
        let range = clamp(FIXED_LEN, end, buf.len());
        &mut buf[range]
    }

    /// The protected payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        let buf = self.buffer.as_mut();
        let range = clamp(start, buf.len(), buf.len());
        &mut buf[range]
    }
}

/// ICV field length, padding included, that aligns an AH header carrying an
/// `icv_len`-octet ICV to 8 octets over IPv6 or 4 over IPv4 (RFC 4302 §2.6).
/// E.g. HMAC-SHA-256-128 (16 octets): 16 over IPv4, 20 over IPv6.
pub const fn padded_icv_len(icv_len: usize, is_ipv6: bool) -> usize {
    let align = if is_ipv6 { 8 } else { 4 };
    (FIXED_LEN + icv_len).div_ceil(align) * align - FIXED_LEN
}

/// A high-level description of an AH header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AhRepr {
    /// Protocol of the protected payload.
    pub next_header: IpProtocol,
    /// Security Parameters Index (never 0 on the wire).
    pub spi: u32,
    /// Low 32 bits of the sequence number.
    pub sequence_number: u32,
    /// Length of the ICV field, alignment padding included (see
    /// [`padded_icv_len`]); a multiple of 4, at most [`MAX_ICV_LEN`].
    pub icv_len: usize,
}

impl AhRepr {
    /// Reads a checked header. SPI 0 is refused (RFC 4302 §2.4: reserved
    /// for local use, never sent).
    pub fn parse<T: AsRef<[u8]>>(packet: &AhPacket<T>) -> Result<Self> {
        packet.check_len()?;
        if packet.spi() == 0 {
            return Err(Error::Malformed);
        }
        Ok(AhRepr {
            next_header: packet.next_header(),
            spi: packet.spi(),
            sequence_number: packet.sequence_number(),
            icv_len: packet.header_len() - FIXED_LEN,
        })
    }

    /// Octets [`Self::emit`] writes: the whole header. An `icv_len` that is
    /// not a multiple of 4 is rounded up (the padding RFC 4302 §2.6 asks
    /// for); one above [`MAX_ICV_LEN`] is cut to it.
    pub const fn header_len(&self) -> usize {
        let icv = if self.icv_len > MAX_ICV_LEN {
            MAX_ICV_LEN
        } else {
            self.icv_len
        };
        (FIXED_LEN + icv).div_ceil(4) * 4
    }

    /// Same as [`Self::header_len`]: the payload is not described here.
    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Writes the header with RESERVED and the ICV field zeroed, ready for
    /// the ICV computation.
    ///
    /// Panics if the buffer is shorter than [`Self::header_len`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut AhPacket<T>) {
        let words = self.header_len() / 4 - 2;
        packet.set_next_header(self.next_header);
        // header_len() <= MAX_HEADER_LEN, so words <= 255.
        packet.set_payload_len(u8::try_from(words).unwrap_or(u8::MAX));
        packet.set_reserved(0);
        packet.set_spi(self.spi);
        packet.set_sequence_number(self.sequence_number);
        packet.icv_mut().fill(0);
    }
}

#[cfg(test)]
mod tests;
