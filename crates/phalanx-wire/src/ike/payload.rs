//! The generic payload header (RFC 7296 §3.2) and the walk along a payload
//! chain.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Next Payload  |C|  RESERVED   |         Payload Length        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Each payload names the type of the one after it; the type of the first
//! comes from the IKE header (or, inside SK, from the SK payload). The
//! Encrypted (SK) and Encrypted Fragment (SKF) payloads are always last: their
//! Next Payload names the first payload *inside* the ciphertext (RFC 7296
//! §3.14, RFC 7383 §2.5), so the walk ends after them.

use crate::error::{Error, Result};
use crate::field::{clamp, read_u16, view, write_u16};
use crate::ike::codec::Reader;
use crate::ike::iana::PayloadType;
use crate::ike::limits::{GENERIC_PAYLOAD_HEADER_LEN, MAX_PAYLOADS};

/// The Critical bit: the sender wants the message rejected if the payload
/// type is not understood (RFC 7296 §2.5, §3.2).
pub const CRITICAL: u8 = 0x80;

view! {
    /// A read (and, over `AsMut` buffers, write) view of one payload: the
    /// generic header and the body it bounds.
    GenericPayloadHeader
}

impl<T: AsRef<[u8]>> GenericPayloadHeader<T> {
    /// Checks that the header fits and that Payload Length is at least
    /// [`GENERIC_PAYLOAD_HEADER_LEN`] ([`Error::Malformed`]) and at most the
    /// buffer ([`Error::Truncated`]).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < GENERIC_PAYLOAD_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let payload_len = usize::from(self.payload_length());
        if payload_len < GENERIC_PAYLOAD_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if payload_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Next Payload: the type of the following payload (for SK and SKF,
    /// of the first inner payload).
    pub fn next_payload(&self) -> PayloadType {
        PayloadType(self.buffer.as_ref()[0])
    }

    /// The Critical bit.
    pub fn critical(&self) -> bool {
        self.buffer.as_ref()[1] & CRITICAL != 0
    }

    /// The seven RESERVED bits (sent as zero, ignored on receipt).
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[1] & !CRITICAL
    }

    /// Payload Length, the generic header included.
    pub fn payload_length(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 2)
    }

    /// The payload body: after the generic header, up to Payload Length.
    pub fn body(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        let end = usize::from(self.payload_length());
        &buf[clamp(GENERIC_PAYLOAD_HEADER_LEN, end, buf.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GenericPayloadHeader<T> {
    /// Sets Next Payload.
    pub fn set_next_payload(&mut self, value: PayloadType) {
        self.buffer.as_mut()[0] = value.0;
    }

    /// Sets the Critical bit and clears RESERVED.
    pub fn set_critical(&mut self, critical: bool) {
        self.buffer.as_mut()[1] = if critical { CRITICAL } else { 0 };
    }

    /// Sets Payload Length.
    pub fn set_payload_length(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), 2, value);
    }
}

/// One payload as found on the wire, its body not yet parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawPayload<'a> {
    /// This payload's type (from the previous payload's Next Payload).
    pub payload_type: PayloadType,
    /// This payload's Next Payload field (for SK and SKF: the first inner
    /// payload's type).
    pub next_payload: PayloadType,
    /// The Critical bit.
    pub critical: bool,
    /// The body after the generic header.
    pub body: &'a [u8],
    /// Offset of this payload's generic header from the start of the chain.
    pub offset: usize,
}

/// Walks a payload chain, yielding each payload or the first error, then
/// stopping.
///
/// Errors: [`Error::Truncated`] for a header or Payload Length running past
/// the end, [`Error::Malformed`] for a Payload Length under 4, octets after
/// the last payload (Next Payload 0, or after SK/SKF), or more than
/// [`MAX_PAYLOADS`] payloads.
#[derive(Debug, Clone)]
pub struct PayloadIter<'a> {
    next: PayloadType,
    rest: &'a [u8],
    offset: usize,
    count: usize,
    done: bool,
}

impl<'a> PayloadIter<'a> {
    /// Walks `chain`, whose first payload is of type `first`
    /// ([`PayloadType::NONE`] for an empty chain).
    pub fn new(first: PayloadType, chain: &'a [u8]) -> Self {
        PayloadIter {
            next: first,
            rest: chain,
            offset: 0,
            count: 0,
            done: false,
        }
    }

    fn step(&mut self) -> Result<Option<RawPayload<'a>>> {
        if self.next == PayloadType::NONE {
            return if self.rest.is_empty() {
                Ok(None)
            } else {
                Err(Error::Malformed)
            };
        }
        if self.count == MAX_PAYLOADS {
            return Err(Error::Malformed);
        }
        let mut reader = Reader::new(self.rest);
        let next_payload = PayloadType(reader.u8()?);
        let critical = reader.u8()? & CRITICAL != 0;
        let length = usize::from(reader.u16()?);
        let body_len = length
            .checked_sub(GENERIC_PAYLOAD_HEADER_LEN)
            .ok_or(Error::Malformed)?;
        let body = reader.take(body_len)?;
        let raw = RawPayload {
            payload_type: self.next,
            next_payload,
            critical,
            body,
            offset: self.offset,
        };
        self.rest = reader.rest();
        self.offset += length;
        self.count += 1;
        self.next = if ends_chain(self.next) {
            PayloadType::NONE
        } else {
            next_payload
        };
        Ok(Some(raw))
    }
}

/// SK and SKF are the last payload of their chain (RFC 7296 §3.14, RFC 7383
/// §2.5).
pub(crate) fn ends_chain(ty: PayloadType) -> bool {
    ty == PayloadType::SK || ty == PayloadType::SKF
}

impl<'a> Iterator for PayloadIter<'a> {
    type Item = Result<RawPayload<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(raw)) => Some(Ok(raw)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl core::iter::FusedIterator for PayloadIter<'_> {}
