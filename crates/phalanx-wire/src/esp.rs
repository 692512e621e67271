//! ESP header and trailer (RFC 4303 §2).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+ ----
//! |               Security Parameters Index (SPI)                 | ^Int.
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+ |Cov-
//! |                      Sequence Number                          | |ered
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+ | ----
//! |                    Payload Data* (variable)                   | |   ^
//! ~                                                               ~ |   |
//! |                                                               | |Conf.
//! +               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+ |Cov-
//! |               |     Padding (0-255 bytes)                     | |ered*
//! +-+-+-+-+-+-+-+-+               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+ |   |
//! |                               |  Pad Length   | Next Header   | v   v
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+ ------
//! |         Integrity Check Value-ICV   (variable)                |
//! ~                                                               ~
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! On the wire everything after the sequence number (IV, ciphertext, ICV) is
//! opaque here: its layout depends on the SA's algorithms. After decryption
//! the plaintext `Payload Data | Padding | Pad Length | Next Header` is read
//! with [`split_plaintext`]. The sequence number field carries the low 32
//! bits; with ESN the high 32 bits are never sent (RFC 4303 §2.2.1).

use crate::error::{Error, Result};
use crate::field::{clamp, read_u32, view, write_u32};
use crate::iana::IpProtocol;

/// Length of the ESP header: SPI and sequence number.
pub const HEADER_LEN: usize = 8;
/// Length of the trailer fields after the padding: Pad Length, Next Header.
pub const TRAILER_LEN: usize = 2;
/// Most padding octets the Pad Length field can describe.
pub const MAX_PAD_LEN: usize = 255;

view! {
    /// A read (and, over `AsMut` buffers, write) view of an ESP packet.
    EspPacket
}

impl<T: AsRef<[u8]>> EspPacket<T> {
    /// Checks that SPI and sequence number fit.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The Security Parameters Index.
    pub fn spi(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 0)
    }

    /// The Sequence Number field (the low 32 bits with ESN).
    pub fn sequence_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 4)
    }

    /// Everything after the header: IV, ciphertext and ICV.
    pub fn payload(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[clamp(HEADER_LEN, buf.len(), buf.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EspPacket<T> {
    /// Sets the SPI.
    pub fn set_spi(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), 0, value);
    }

    /// Sets the Sequence Number field.
    pub fn set_sequence_number(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), 4, value);
    }

    /// Everything after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let buf = self.buffer.as_mut();
        let range = clamp(HEADER_LEN, buf.len(), buf.len());
        &mut buf[range]
    }
}

/// A high-level description of an ESP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EspRepr {
    /// Security Parameters Index (never 0 on the wire).
    pub spi: u32,
    /// Low 32 bits of the sequence number.
    pub sequence_number: u32,
}

impl EspRepr {
    /// Reads a checked header. SPI 0 is refused: it is reserved for local
    /// use and "MUST NOT be sent on the wire" (RFC 4303 §2.1); over UDP it is
    /// the non-ESP marker instead (RFC 3948 §2.2).
    pub fn parse<T: AsRef<[u8]>>(packet: &EspPacket<T>) -> Result<Self> {
        packet.check_len()?;
        if packet.spi() == 0 {
            return Err(Error::Malformed);
        }
        Ok(EspRepr {
            spi: packet.spi(),
            sequence_number: packet.sequence_number(),
        })
    }

    /// Octets [`Self::emit`] writes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Octets [`Self::emit`] writes (the payload's length depends on the
    /// SA's algorithms and is not described here).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes SPI and sequence number.
    ///
    /// Panics if the buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut EspPacket<T>) {
        packet.set_spi(self.spi);
        packet.set_sequence_number(self.sequence_number);
    }
}

/// The two trailer fields at the end of the decrypted payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EspTrailer {
    /// Pad Length: padding octets immediately before this field.
    pub pad_len: u8,
    /// Next Header: the protected payload's protocol (4 or 41 in tunnel
    /// mode, the upper layer in transport mode, 59 for a dummy packet).
    pub next_header: IpProtocol,
}

impl EspTrailer {
    /// Reads the last two octets of `plaintext` and checks that the padding
    /// fits in front of them.
    pub fn parse(plaintext: &[u8]) -> Result<Self> {
        let [.., pad_len, next_header] = *plaintext else {
            return Err(Error::Truncated);
        };
        if usize::from(pad_len) + TRAILER_LEN > plaintext.len() {
            return Err(Error::Malformed);
        }
        Ok(EspTrailer {
            pad_len,
            next_header: IpProtocol(next_header),
        })
    }

    /// Writes Pad Length and Next Header as the last two octets of
    /// `plaintext` (padding is the caller's: [`fill_default_padding`]).
    pub fn write(&self, plaintext: &mut [u8]) -> Result<()> {
        let [.., pad_len, next_header] = plaintext else {
            return Err(Error::Truncated);
        };
        *pad_len = self.pad_len;
        *next_header = self.next_header.0;
        Ok(())
    }
}

/// A decrypted ESP payload cut into its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EspPlaintext<'a> {
    /// The protected data (an IP packet in tunnel mode, possibly followed by
    /// TFC padding, RFC 4303 §2.7).
    pub payload: &'a [u8],
    /// The padding octets.
    pub padding: &'a [u8],
    /// Pad Length and Next Header.
    pub trailer: EspTrailer,
}

/// Cuts decrypted `Payload Data | Padding | Pad Length | Next Header` (IV
/// and ICV already removed). Errors: [`Error::Truncated`] under two
/// octets, [`Error::Malformed`] when Pad Length exceeds what precedes it.
pub fn split_plaintext(plaintext: &[u8]) -> Result<EspPlaintext<'_>> {
    let trailer = EspTrailer::parse(plaintext)?;
    // parse() checked pad_len + TRAILER_LEN <= len: no underflow.
    let padding_start = plaintext.len() - TRAILER_LEN - usize::from(trailer.pad_len);
    let (payload, rest) = plaintext.split_at(padding_start);
    let padding = &rest[..usize::from(trailer.pad_len)];
    Ok(EspPlaintext {
        payload,
        padding,
        trailer,
    })
}

/// True when `padding` is RFC 4303 §2.4's default: 1, 2, 3, ...
pub fn is_default_padding(padding: &[u8]) -> bool {
    padding.len() <= MAX_PAD_LEN
        && padding
            .iter()
            .zip(1u8..=u8::MAX)
            .all(|(&byte, expected)| byte == expected)
}

/// Writes RFC 4303 §2.4's default padding 1, 2, 3, ... into `padding`
/// (wrapping after 255; ESP never needs more than 255).
pub fn fill_default_padding(padding: &mut [u8]) {
    for (byte, value) in padding.iter_mut().zip((1..=u8::MAX).cycle()) {
        *byte = value;
    }
}

/// Padding octets that make `payload_len + padding + 2` a multiple of the
/// cipher's block size and of 4 (RFC 4303 §2.4). `block_size` is taken as
/// the next power of two, at least 4 and at most 256 (ESP ciphers have
/// power-of-two blocks of 1 to 16 octets), so the result always fits in
/// Pad Length.
pub fn pad_len_for(payload_len: usize, block_size: usize) -> u8 {
    let align = block_size.next_power_of_two().clamp(4, 256);
    let rem = (payload_len + TRAILER_LEN) % align;
    // align <= 256, so (align - rem) % align <= 255.
    ((align - rem) % align) as u8
}

#[cfg(test)]
mod tests;
