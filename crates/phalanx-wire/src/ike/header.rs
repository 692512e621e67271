//! The IKE header (RFC 7296 §3.1).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       IKE SA Initiator's SPI                  |
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       IKE SA Responder's SPI                  |
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Next Payload | MjVer | MnVer | Exchange Type |     Flags     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                          Message ID                           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                            Length                             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! Flags: +-+-+-+-+-+-+-+-+
//!        |X|X|R|V|I|X|X|X|
//!        +-+-+-+-+-+-+-+-+
//! ```
//!
//! `new_checked` verifies the Length field (at least the header, at most the
//! buffer) but not the version: a major version other than 2 is reported
//! only by [`IkeHeader::check_version`], so the endpoint can still read the
//! SPIs and answer INVALID_MAJOR_VERSION (RFC 7296 §2.5).

use crate::error::{Error, Result};
use crate::field::{clamp, read_u32, view, write_u32};
use crate::ike::iana::{ExchangeType, PayloadType};
use crate::ike::limits::HEADER_LEN;
use crate::ike::payload::PayloadIter;

/// The IKE major version this codec reads and writes (RFC 7296 §3.1).
pub const MAJOR_VERSION: u8 = 2;
/// Flags bit I: set by the original initiator of the IKE SA (RFC 7296 §3.1).
pub const FLAG_INITIATOR: u8 = 0x08;
/// Flags bit V: the sender speaks a higher major version; cleared when
/// sending, ignored on receipt (RFC 7296 §3.1).
pub const FLAG_VERSION: u8 = 0x10;
/// Flags bit R: the message is a response (RFC 7296 §3.1).
pub const FLAG_RESPONSE: u8 = 0x20;

mod field {
    pub(super) const INITIATOR_SPI: usize = 0;
    pub(super) const RESPONDER_SPI: usize = 8;
    pub(super) const NEXT_PAYLOAD: usize = 16;
    pub(super) const VERSION: usize = 17;
    pub(super) const EXCHANGE_TYPE: usize = 18;
    pub(super) const FLAGS: usize = 19;
    pub(super) const MESSAGE_ID: usize = 20;
    pub(super) const LENGTH: usize = 24;
}

fn read_u64(buf: &[u8], at: usize) -> u64 {
    (u64::from(read_u32(buf, at)) << 32) | u64::from(read_u32(buf, at + 4))
}

fn write_u64(buf: &mut [u8], at: usize, value: u64) {
    buf[at..at + 8].copy_from_slice(&value.to_be_bytes());
}

view! {
    /// A read (and, over `AsMut` buffers, write) view of an IKE message:
    /// the header and the payload chain it bounds. Give it the UDP payload
    /// (after the non-ESP marker on port 4500).
    IkeHeader
}

impl<T: AsRef<[u8]>> IkeHeader<T> {
    /// Checks that the header fits and that the Length field is at least
    /// [`HEADER_LEN`] ([`Error::Malformed`]) and at most the buffer
    /// ([`Error::Truncated`]).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let length = self.length_usize();
        if length < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if length > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// [`Error::BadVersion`] unless the major version is 2. RFC 7296 §2.5:
    /// such a message is answered with INVALID_MAJOR_VERSION, not parsed.
    pub fn check_version(&self) -> Result<()> {
        if self.major_version() != MAJOR_VERSION {
            return Err(Error::BadVersion);
        }
        Ok(())
    }

    /// IKE SA Initiator's SPI.
    pub fn initiator_spi(&self) -> u64 {
        read_u64(self.buffer.as_ref(), field::INITIATOR_SPI)
    }

    /// IKE SA Responder's SPI (zero in the first IKE_SA_INIT request).
    pub fn responder_spi(&self) -> u64 {
        read_u64(self.buffer.as_ref(), field::RESPONDER_SPI)
    }

    /// Next Payload: the type of the first payload.
    pub fn next_payload(&self) -> PayloadType {
        PayloadType(self.buffer.as_ref()[field::NEXT_PAYLOAD])
    }

    /// Major Version (MjVer), the high nibble.
    pub fn major_version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION] >> 4
    }

    /// Minor Version (MnVer), the low nibble; ignored on receipt.
    pub fn minor_version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION] & 0x0f
    }

    /// Exchange Type.
    pub fn exchange_type(&self) -> ExchangeType {
        ExchangeType(self.buffer.as_ref()[field::EXCHANGE_TYPE])
    }

    /// The raw Flags octet.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// Flag I: sent by the original initiator of the IKE SA.
    pub fn initiator(&self) -> bool {
        self.flags() & FLAG_INITIATOR != 0
    }

    /// Flag V: the sender speaks a higher major version.
    pub fn version_flag(&self) -> bool {
        self.flags() & FLAG_VERSION != 0
    }

    /// Flag R: the message is a response.
    pub fn response(&self) -> bool {
        self.flags() & FLAG_RESPONSE != 0
    }

    /// Message ID.
    pub fn message_id(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::MESSAGE_ID)
    }

    /// Length of the whole message, header included.
    pub fn length(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::LENGTH)
    }

    fn length_usize(&self) -> usize {
        usize::try_from(self.length()).unwrap_or(usize::MAX)
    }

    /// The payload chain: the octets after the header, up to Length.
    pub fn payload_chain(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[clamp(HEADER_LEN, self.length_usize(), buf.len())]
    }

    /// Walks the payload chain from [`Self::next_payload`].
    pub fn payloads(&self) -> PayloadIter<'_> {
        PayloadIter::new(self.next_payload(), self.payload_chain())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IkeHeader<T> {
    /// Sets the IKE SA Initiator's SPI.
    pub fn set_initiator_spi(&mut self, value: u64) {
        write_u64(self.buffer.as_mut(), field::INITIATOR_SPI, value);
    }

    /// Sets the IKE SA Responder's SPI.
    pub fn set_responder_spi(&mut self, value: u64) {
        write_u64(self.buffer.as_mut(), field::RESPONDER_SPI, value);
    }

    /// Sets Next Payload.
    pub fn set_next_payload(&mut self, value: PayloadType) {
        self.buffer.as_mut()[field::NEXT_PAYLOAD] = value.0;
    }

    /// Sets both version nibbles.
    pub fn set_version(&mut self, major: u8, minor: u8) {
        self.buffer.as_mut()[field::VERSION] = (major << 4) | (minor & 0x0f);
    }

    /// Sets Exchange Type.
    pub fn set_exchange_type(&mut self, value: ExchangeType) {
        self.buffer.as_mut()[field::EXCHANGE_TYPE] = value.0;
    }

    /// Sets the raw Flags octet.
    pub fn set_flags(&mut self, value: u8) {
        self.buffer.as_mut()[field::FLAGS] = value;
    }

    /// Sets Message ID.
    pub fn set_message_id(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::MESSAGE_ID, value);
    }

    /// Sets Length.
    pub fn set_length(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::LENGTH, value);
    }
}

/// A high-level description of an IKE header.
///
/// The minor version and the V flag are not described: RFC 7296 §3.1 has
/// them sent as 0 and ignored on receipt. Other flag bits likewise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IkeHeaderRepr {
    /// IKE SA Initiator's SPI.
    pub initiator_spi: u64,
    /// IKE SA Responder's SPI.
    pub responder_spi: u64,
    /// Type of the first payload.
    pub next_payload: PayloadType,
    /// Exchange Type.
    pub exchange_type: ExchangeType,
    /// Flag I: the sender is the original initiator.
    pub initiator: bool,
    /// Flag R: the message is a response.
    pub response: bool,
    /// Message ID.
    pub message_id: u32,
    /// Length of the whole message, header included.
    pub length: u32,
}

impl IkeHeaderRepr {
    /// Reads a checked header of major version 2 ([`Error::BadVersion`]
    /// otherwise).
    pub fn parse<T: AsRef<[u8]>>(header: &IkeHeader<T>) -> Result<Self> {
        header.check_len()?;
        header.check_version()?;
        Ok(IkeHeaderRepr {
            initiator_spi: header.initiator_spi(),
            responder_spi: header.responder_spi(),
            next_payload: header.next_payload(),
            exchange_type: header.exchange_type(),
            initiator: header.initiator(),
            response: header.response(),
            message_id: header.message_id(),
            length: header.length(),
        })
    }

    /// Octets [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// The Flags octet these flags make.
    pub fn flags(&self) -> u8 {
        let i = if self.initiator { FLAG_INITIATOR } else { 0 };
        let r = if self.response { FLAG_RESPONSE } else { 0 };
        i | r
    }

    /// Writes the header, version 2.0.
    ///
    /// Panics if the buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut IkeHeader<T>) {
        header.set_initiator_spi(self.initiator_spi);
        header.set_responder_spi(self.responder_spi);
        header.set_next_payload(self.next_payload);
        header.set_version(MAJOR_VERSION, 0);
        header.set_exchange_type(self.exchange_type);
        header.set_flags(self.flags());
        header.set_message_id(self.message_id);
        header.set_length(self.length);
    }
}
