//! Encrypted messages (RFC 7296 §3.14), their fragments (RFC 7383) and
//! reassembly.
//!
//! [`Protection`] holds the two [`SkCipher`]s of an IKE SA — outbound
//! SK_ei/SK_ai and inbound SK_er/SK_ar for the original initiator, the other
//! way round for the responder (RFC 7296 §2.14) — and the counter the AEAD
//! IVs are drawn from. [`Protection::seal`] turns a header and the inner
//! payloads into one datagram, or RFC 7383 fragments when a fragment MTU
//! is given and the message would not fit it; [`Protection::open`]
//! verifies and decrypts one SK message; [`Reassembler`] collects SKF
//! fragments, each verified before it is kept (RFC 7383 §2.6.1), into the
//! message.
//!
//! Datagrams here are IKE messages: the UDP payload after the non-ESP
//! marker on port 4500, which the caller adds and strips.
//!
//! IVs: AEAD IVs (RFC 5282 §3.1, RFC 7634 §2) come from a 64-bit counter,
//! never repeated under one key; a cluster that moves the IKE SA to
//! another node carries [`Protection::iv_counter`] along and calls
//! [`Protection::skip_iv_counter`] there. CBC IVs are drawn from the RNG
//! handed in (RFC 7296 §3.14: unpredictable).

mod reassembly;

use core::fmt;

use phalanx_crypto::ike::{IkeSaKeys, SkCipher};
use phalanx_crypto::{CryptoError, CryptoProvider, IkeRng};
use phalanx_wire::ike::iana::{IntegId, NotifyType, PayloadType};
use phalanx_wire::ike::limits::{GENERIC_PAYLOAD_HEADER_LEN, HEADER_LEN, MAX_MESSAGE_LEN};
use phalanx_wire::ike::{
    emit_payloads, parse_payloads, IkeHeader, IkeHeaderRepr, Payload, PayloadIter,
};
use zeroize::Zeroizing;

use crate::proposal::NegotiatedIke;

pub use reassembly::{Reassembler, ReassemblyLimits};

/// Octets of the datagram around the IKE message that the fragment MTU
/// must also hold: an IPv6 header (40, the larger family), UDP (8) and the
/// non-ESP marker of port 4500 (4). RFC 7383 §2.5.1 has the fragment size
/// computed from the MTU less these headers; taking the largest keeps one
/// number right for both families and both ports.
pub const FRAGMENT_OVERHEAD: usize = 40 + 8 + 4;

/// The Fragment Number and Total Fragments fields of SKF (RFC 7383 §2.5).
const SKF_FIELDS_LEN: usize = 4;

/// Octets of IV: AEAD (8) or AES-CBC (16).
const MAX_IV_LEN: usize = 16;

/// Why a message could not be sealed or opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtectError {
    /// The ICV did not verify: drop silently and count (RFC 7296 §2.21.2:
    /// no Notify answers a message that fails integrity).
    Integrity,
    /// The message is not well formed outside the encrypted part (header,
    /// payload chain, SK lengths): dropped, as nothing in it is
    /// authenticated.
    Malformed,
    /// The message verified but its inner payloads do not parse: answer
    /// INVALID_SYNTAX (RFC 7296 §2.21.2).
    InvalidSyntax,
    /// There is no SK or SKF payload.
    NotEncrypted,
    /// An SKF fragment was given to [`Protection::open`]; it belongs in a
    /// [`Reassembler`].
    Fragmented,
    /// Too large: a message over 64 KiB to seal, more fragments than the
    /// limits allow, or a reassembly past its byte limit.
    Oversize,
    /// The fragment MTU leaves no room for any payload octet.
    MtuTooSmall,
    /// The 2^64 AEAD IVs of this key are spent: rekey the IKE SA.
    IvExhausted,
    /// The payloads could not be encoded (a length or count past its
    /// field).
    Encode,
    /// Our own cryptographic operation failed.
    Crypto(CryptoError),
}

impl ProtectError {
    /// The Notify to answer with, if any: only INVALID_SYNTAX for a message
    /// that verified (RFC 7296 §2.21.2); everything else is dropped.
    pub fn notify_type(&self) -> Option<NotifyType> {
        match self {
            ProtectError::InvalidSyntax => Some(NotifyType::INVALID_SYNTAX),
            _ => None,
        }
    }
}

impl fmt::Display for ProtectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtectError::Integrity => f.write_str("integrity check failed"),
            ProtectError::Malformed => f.write_str("malformed encrypted message"),
            ProtectError::InvalidSyntax => f.write_str("encrypted payloads do not parse"),
            ProtectError::NotEncrypted => f.write_str("no encrypted payload"),
            ProtectError::Fragmented => f.write_str("fragment outside reassembly"),
            ProtectError::Oversize => f.write_str("message too large"),
            ProtectError::MtuTooSmall => f.write_str("fragment MTU too small"),
            ProtectError::IvExhausted => f.write_str("AEAD IVs exhausted"),
            ProtectError::Encode => f.write_str("payloads cannot be encoded"),
            ProtectError::Crypto(e) => write!(f, "crypto error: {e}"),
        }
    }
}

impl std::error::Error for ProtectError {}

impl From<CryptoError> for ProtectError {
    fn from(e: CryptoError) -> ProtectError {
        ProtectError::Crypto(e)
    }
}

/// A verified, decrypted message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    /// The header as received (for a reassembled message, the last
    /// fragment's: Next Payload and Length are that fragment's).
    pub header: IkeHeaderRepr,
    /// Payloads before SK, unauthenticated (RFC 7296 §3.14 allows them; no
    /// exchange of RFC 7296 sends any).
    pub unencrypted: Vec<Payload>,
    /// The payloads inside SK, or inside the reassembled SKF fragments.
    pub payloads: Vec<Payload>,
    /// Total Fragments of a reassembled message; 0 when it came whole.
    pub fragments: u16,
    /// The decrypted inner payloads as received, padding removed: what
    /// RFC 9242 §3.3.2 calls IntAuth_*_P of an IKE_INTERMEDIATE message.
    pub plaintext: Zeroizing<Vec<u8>>,
}

/// Where the encrypted payload of a received message is.
struct Located {
    header: IkeHeaderRepr,
    unencrypted: Vec<Payload>,
    /// Next Payload of the SK/SKF header.
    first_inner: PayloadType,
    /// Offset of IV | ciphertext | ICV in the datagram.
    body_start: usize,
    /// Fragment Number and Total Fragments of an SKF payload.
    fragment: Option<(u16, u16)>,
}

/// The protection of one IKE SA's messages, both directions.
#[derive(Debug)]
pub struct Protection {
    outbound: SkCipher,
    inbound: SkCipher,
    aead: bool,
    /// The next AEAD IV (RFC 5282 §3.1: unique per key).
    next_iv: u64,
}

impl Protection {
    /// Keys both directions with the data-plane provider; `initiator` is
    /// whether we are the original initiator of the IKE SA.
    pub fn new(
        keys: &IkeSaKeys,
        negotiated: &NegotiatedIke,
        initiator: bool,
    ) -> Result<Protection, CryptoError> {
        Protection::with_provider(
            phalanx_crypto::default_provider(),
            keys,
            negotiated,
            initiator,
        )
    }

    /// Keys both directions with `provider`.
    pub fn with_provider(
        provider: &dyn CryptoProvider,
        keys: &IkeSaKeys,
        negotiated: &NegotiatedIke,
        initiator: bool,
    ) -> Result<Protection, CryptoError> {
        let integ = negotiated.integ.unwrap_or(IntegId::NONE);
        let (encr, bits) = (negotiated.encr.id, negotiated.encr.key_bits);
        let cipher =
            |sk_e: &[u8], sk_a: &[u8]| SkCipher::new(provider, encr, bits, integ, sk_e, sk_a);
        // RFC 7296 §2.14: SK_ei/SK_ai protect what the initiator sends.
        let from_initiator = cipher(&keys.sk_ei, &keys.sk_ai)?;
        let from_responder = cipher(&keys.sk_er, &keys.sk_ar)?;
        let (outbound, inbound) = if initiator {
            (from_initiator, from_responder)
        } else {
            (from_responder, from_initiator)
        };
        Ok(Protection {
            outbound,
            inbound,
            aead: negotiated.encr.is_aead(),
            next_iv: 0,
        })
    }

    /// The counter the next AEAD IV is taken from.
    pub fn iv_counter(&self) -> u64 {
        self.next_iv
    }

    /// Moves the AEAD IV counter forward to at least `at` (never back), so
    /// that a node taking over the IKE SA never repeats an IV.
    pub fn skip_iv_counter(&mut self, at: u64) {
        self.next_iv = self.next_iv.max(at);
    }

    /// Builds the datagram(s) of one message: `header` (its Next Payload
    /// and Length are set here) and SK{`payloads`}. With `fragment_mtu`,
    /// a message whose datagram would exceed it is sent as RFC 7383 SKF
    /// fragments, each fitting `fragment_mtu` with [`FRAGMENT_OVERHEAD`];
    /// fragments are numbered from 1 and only the first names the first
    /// inner payload (RFC 7383 §2.5).
    pub fn seal(
        &mut self,
        header: &IkeHeaderRepr,
        payloads: &[Payload],
        fragment_mtu: Option<usize>,
        rng: &mut dyn IkeRng,
    ) -> Result<Vec<Vec<u8>>, ProtectError> {
        let (first, plaintext) = emit_payloads(payloads).map_err(|_| ProtectError::Encode)?;
        let plaintext = Zeroizing::new(plaintext);
        let whole =
            HEADER_LEN + GENERIC_PAYLOAD_HEADER_LEN + self.outbound.encrypted_len(plaintext.len());
        match fragment_mtu {
            Some(mtu) if whole + FRAGMENT_OVERHEAD > mtu => {
                self.seal_fragments(header, first, &plaintext, mtu, rng)
            }
            _ => {
                let sk = Sealed {
                    header,
                    first_inner: first,
                    fragment: None,
                };
                Ok(vec![self.seal_one(&sk, &plaintext, rng)?])
            }
        }
    }

    /// Splits `plaintext` into the fewest fragments that fit `mtu`.
    fn seal_fragments(
        &mut self,
        header: &IkeHeaderRepr,
        first: PayloadType,
        plaintext: &[u8],
        mtu: usize,
        rng: &mut dyn IkeRng,
    ) -> Result<Vec<Vec<u8>>, ProtectError> {
        let chunk = self.fragment_capacity(mtu)?;
        let total = u16::try_from(plaintext.len().div_ceil(chunk).max(1))
            .map_err(|_| ProtectError::Oversize)?;
        let mut out = Vec::with_capacity(usize::from(total));
        for (data, number) in plaintext.chunks(chunk).zip(1u16..) {
            let skf = Sealed {
                header,
                // RFC 7383 §2.5: only fragment 1 names the first payload.
                first_inner: if number == 1 {
                    first
                } else {
                    PayloadType::NONE
                },
                fragment: Some((number, total)),
            };
            out.push(self.seal_one(&skf, data, rng)?);
        }
        Ok(out)
    }

    /// The most plaintext octets one fragment of a `mtu`-octet datagram
    /// carries: the largest `n` whose sealed form fits.
    fn fragment_capacity(&self, mtu: usize) -> Result<usize, ProtectError> {
        let fixed = FRAGMENT_OVERHEAD + HEADER_LEN + GENERIC_PAYLOAD_HEADER_LEN + SKF_FIELDS_LEN;
        let room = mtu.checked_sub(fixed).ok_or(ProtectError::MtuTooSmall)?;
        let overhead = self.outbound.iv_len() + self.outbound.icv_len() + 1;
        let mut n = room
            .checked_sub(overhead)
            .ok_or(ProtectError::MtuTooSmall)?;
        // Padding to the cipher block takes at most a block (16) more.
        while n > 0 && self.outbound.encrypted_len(n) > room {
            n -= 1;
        }
        if n == 0 {
            return Err(ProtectError::MtuTooSmall);
        }
        Ok(n)
    }

    /// One SK message or SKF fragment.
    fn seal_one(
        &mut self,
        what: &Sealed<'_>,
        plaintext: &[u8],
        rng: &mut dyn IkeRng,
    ) -> Result<Vec<u8>, ProtectError> {
        let fields = if what.fragment.is_some() {
            SKF_FIELDS_LEN
        } else {
            0
        };
        let payload_len =
            GENERIC_PAYLOAD_HEADER_LEN + fields + self.outbound.encrypted_len(plaintext.len());
        let total = HEADER_LEN + payload_len;
        if total > MAX_MESSAGE_LEN {
            return Err(ProtectError::Oversize);
        }
        let mut message = vec![0u8; HEADER_LEN];
        message.reserve(payload_len);
        let mut header = *what.header;
        header.next_payload = if what.fragment.is_some() {
            PayloadType::SKF
        } else {
            PayloadType::SK
        };
        header.length = u32::try_from(total).map_err(|_| ProtectError::Oversize)?;
        header.emit(&mut IkeHeader::new_unchecked(&mut message[..]));
        let payload_len = u16::try_from(payload_len).map_err(|_| ProtectError::Oversize)?;
        message.extend_from_slice(&[what.first_inner.0, 0]);
        message.extend_from_slice(&payload_len.to_be_bytes());
        if let Some((number, total)) = what.fragment {
            message.extend_from_slice(&number.to_be_bytes());
            message.extend_from_slice(&total.to_be_bytes());
        }
        let mut iv = [0u8; MAX_IV_LEN];
        let iv = self.next_iv(&mut iv, rng)?;
        self.outbound.seal(&mut message, iv, plaintext)?;
        Ok(message)
    }

    /// The next IV: the counter for AEADs, RNG bytes for CBC.
    fn next_iv<'a>(
        &mut self,
        buf: &'a mut [u8; MAX_IV_LEN],
        rng: &mut dyn IkeRng,
    ) -> Result<&'a [u8], ProtectError> {
        let iv = buf
            .get_mut(..self.outbound.iv_len())
            .ok_or(ProtectError::Crypto(CryptoError::BadLength))?;
        if self.aead {
            let counter = self.next_iv;
            self.next_iv = counter.checked_add(1).ok_or(ProtectError::IvExhausted)?;
            let bytes = counter.to_be_bytes();
            let n = iv.len().min(bytes.len());
            iv[..n].copy_from_slice(&bytes[..n]);
        } else {
            rng.fill_bytes(iv);
        }
        Ok(iv)
    }

    /// Verifies and decrypts an SK message: its inner payloads, with any
    /// payloads before SK apart.
    ///
    /// Errors: [`ProtectError::Integrity`] when the ICV does not verify;
    /// [`ProtectError::Malformed`] / [`ProtectError::NotEncrypted`] for the
    /// structure around SK; [`ProtectError::InvalidSyntax`] when what
    /// verified does not parse; [`ProtectError::Fragmented`] for SKF.
    pub fn open(&self, datagram: &[u8]) -> Result<Opened, ProtectError> {
        self.open_located(datagram, locate(datagram)?)
    }

    /// [`Self::open`] once the SK payload is found.
    fn open_located(&self, datagram: &[u8], located: Located) -> Result<Opened, ProtectError> {
        if located.fragment.is_some() {
            return Err(ProtectError::Fragmented);
        }
        let plaintext = self.decrypt(datagram, located.body_start)?;
        let payloads = parse_payloads(located.first_inner, &plaintext)
            .map_err(|_| ProtectError::InvalidSyntax)?;
        Ok(Opened {
            header: located.header,
            unencrypted: located.unencrypted,
            payloads,
            fragments: 0,
            plaintext,
        })
    }

    /// The inbound cipher's verification and decryption.
    fn decrypt(
        &self,
        datagram: &[u8],
        body_start: usize,
    ) -> Result<Zeroizing<Vec<u8>>, ProtectError> {
        self.inbound
            .open(datagram, body_start)
            .map_err(|e| match e {
                CryptoError::AuthenticationFailed => ProtectError::Integrity,
                _ => ProtectError::Malformed,
            })
    }
}

/// What one [`Protection::seal_one`] call writes.
struct Sealed<'a> {
    header: &'a IkeHeaderRepr,
    first_inner: PayloadType,
    fragment: Option<(u16, u16)>,
}

/// Checks the header and finds the SK or SKF payload, which must end the
/// message (RFC 7296 §3.14).
fn locate(datagram: &[u8]) -> Result<Located, ProtectError> {
    let view = IkeHeader::new_checked(datagram).map_err(|_| ProtectError::Malformed)?;
    let header = IkeHeaderRepr::parse(&view).map_err(|_| ProtectError::Malformed)?;
    // RFC 7296 §3.1: Length is the whole message; nothing may follow.
    if usize::try_from(header.length).ok() != Some(datagram.len()) {
        return Err(ProtectError::Malformed);
    }
    let mut unencrypted = Vec::new();
    for raw in PayloadIter::new(header.next_payload, view.payload_chain()) {
        let raw = raw.map_err(|_| ProtectError::Malformed)?;
        let body_start = HEADER_LEN + raw.offset + GENERIC_PAYLOAD_HEADER_LEN;
        match raw.payload_type {
            PayloadType::SK => {
                return Ok(Located {
                    header,
                    unencrypted,
                    first_inner: raw.next_payload,
                    body_start,
                    fragment: None,
                })
            }
            PayloadType::SKF => {
                let fields = raw
                    .body
                    .get(..SKF_FIELDS_LEN)
                    .ok_or(ProtectError::Malformed)?;
                let number = u16::from_be_bytes([fields[0], fields[1]]);
                let total = u16::from_be_bytes([fields[2], fields[3]]);
                // RFC 7383 §2.5: numbers run from 1 to Total Fragments.
                if number == 0 || number > total {
                    return Err(ProtectError::Malformed);
                }
                return Ok(Located {
                    header,
                    unencrypted,
                    first_inner: raw.next_payload,
                    body_start: body_start + SKF_FIELDS_LEN,
                    fragment: Some((number, total)),
                });
            }
            _ => unencrypted.push(Payload::parse(&raw).map_err(|_| ProtectError::Malformed)?),
        }
    }
    Err(ProtectError::NotEncrypted)
}

#[cfg(test)]
#[path = "protect_tests.rs"]
mod tests;
