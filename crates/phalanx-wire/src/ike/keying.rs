//! The Key Exchange (RFC 7296 §3.4) and Nonce (§3.9) payloads.
//!
//! ```text
//! Key Exchange payload body (§3.4):
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   Key Exchange Method Num     |           RESERVED            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                       Key Exchange Data                       ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! Nonce payload body (§3.9):
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                            Nonce Data                         ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::ike::codec::{put_u16, Reader};
use crate::ike::iana::KeId;
use crate::ike::limits::{MAX_NONCE_LEN, MIN_NONCE_LEN};

/// The Key Exchange payload (RFC 7296 §3.4, RFC 9370 for ML-KEM and
/// IKE_FOLLOWUP_KE).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KePayload {
    /// Key Exchange Method Num (the Diffie-Hellman Group Num of RFC 7296).
    pub group: KeId,
    /// Key Exchange Data: a public value, KEM public key or ciphertext. Its
    /// length is checked against the group by the crypto layer.
    pub data: Vec<u8>,
}

impl KePayload {
    /// Reads a KE payload body (RESERVED ignored).
    pub fn parse(body: &[u8]) -> Result<Self> {
        let mut reader = Reader::new(body);
        let group = KeId(reader.u16()?);
        let _reserved = reader.u16()?;
        Ok(KePayload {
            group,
            data: reader.rest().to_vec(),
        })
    }

    /// Octets [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        4 + self.data.len()
    }

    /// Appends the body.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        put_u16(out, self.group.0);
        put_u16(out, 0);
        out.extend_from_slice(&self.data);
        Ok(())
    }
}

/// The Nonce payload (RFC 7296 §3.9): Ni or Nr.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NoncePayload {
    /// Nonce Data, 16 to 256 octets.
    pub data: Vec<u8>,
}

impl NoncePayload {
    /// Reads a Nonce payload body. RFC 7296 §3.9: "The size of the Nonce
    /// Data MUST be between 16 and 256 octets, inclusive"; otherwise
    /// [`Error::Malformed`].
    pub fn parse(body: &[u8]) -> Result<Self> {
        if !(MIN_NONCE_LEN..=MAX_NONCE_LEN).contains(&body.len()) {
            return Err(Error::Malformed);
        }
        Ok(NoncePayload {
            data: body.to_vec(),
        })
    }

    /// Octets [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        self.data.len()
    }

    /// Appends the body. The length is not checked here (tests build
    /// out-of-range nonces); [`Self::parse`] refuses them.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        out.extend_from_slice(&self.data);
        Ok(())
    }
}
