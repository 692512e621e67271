//! The Encrypted and Authenticated payload SK (RFC 7296 §3.14) and its
//! fragment SKF (RFC 7383 §2.5).
//!
//! ```text
//! SK payload (§3.14):
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Next Payload  |C|  RESERVED   |         Payload Length        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                     Initialization Vector                     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                    Encrypted IKE Payloads                     ~
//! +               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |               |             Padding (0-255 octets)            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                               |  Pad Length   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                    Integrity Checksum Data                    ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! SKF payload (RFC 7383 §2.5):
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Next Payload  |C|  RESERVED   |         Payload Length        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |        Fragment Number        |        Total Fragments        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                     Initialization Vector                     |
//! ~               Encrypted content, Padding, Pad Length          ~
//! ~                    Integrity Checksum Data                    ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! IV, ciphertext, padding and ICV lengths depend on the negotiated
//! algorithms, so the codec hands over the body whole and the crypto layer
//! splits it. Both payloads are last in their message and their Next Payload
//! names the first payload inside the ciphertext (for SKF only in fragment
//! 1; later fragments send 0). The integrity check covers the message from
//! the IKE header to the end of the body, which is the end of the message:
//! the ICV is the last octets of the datagram.

use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::ike::codec::{put_u16, Reader};
use crate::ike::iana::PayloadType;

/// The Encrypted and Authenticated payload (RFC 7296 §3.14).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SkPayload {
    /// Next Payload of the SK header: the type of the first inner payload
    /// ([`PayloadType::NONE`] for an empty one, e.g. a liveness check).
    pub first_inner: PayloadType,
    /// IV, ciphertext (inner payloads, padding, Pad Length) and ICV.
    pub body: Vec<u8>,
}

impl SkPayload {
    /// Reads an SK payload body; `first_inner` is the generic header's Next
    /// Payload.
    pub fn parse(first_inner: PayloadType, body: &[u8]) -> Result<Self> {
        Ok(SkPayload {
            first_inner,
            body: body.to_vec(),
        })
    }

    /// Octets [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        self.body.len()
    }

    /// Appends the body.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        out.extend_from_slice(&self.body);
        Ok(())
    }
}

/// The Encrypted and Authenticated Fragment payload (RFC 7383 §2.5).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SkfPayload {
    /// Next Payload of the SKF header: the first inner payload's type in
    /// fragment 1, [`PayloadType::NONE`] in the others.
    pub first_inner: PayloadType,
    /// Fragment Number, from 1.
    pub fragment_number: u16,
    /// Total Fragments.
    pub total_fragments: u16,
    /// IV, encrypted content and ICV.
    pub body: Vec<u8>,
}

impl SkfPayload {
    /// Reads an SKF payload body. RFC 7383 §2.5: Fragment Number starts at
    /// 1 and is at most Total Fragments; otherwise [`Error::Malformed`].
    pub fn parse(first_inner: PayloadType, body: &[u8]) -> Result<Self> {
        let mut reader = Reader::new(body);
        let fragment_number = reader.u16()?;
        let total_fragments = reader.u16()?;
        if fragment_number == 0 || fragment_number > total_fragments {
            return Err(Error::Malformed);
        }
        Ok(SkfPayload {
            first_inner,
            fragment_number,
            total_fragments,
            body: reader.rest().to_vec(),
        })
    }

    /// Octets [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        4 + self.body.len()
    }

    /// Appends the body.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        put_u16(out, self.fragment_number);
        put_u16(out, self.total_fragments);
        out.extend_from_slice(&self.body);
        Ok(())
    }
}
