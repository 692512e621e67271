//! Whole payloads and whole messages: the [`Payload`] sum type, payload
//! chains ([`parse_payloads`], [`emit_payloads`]) and [`MessageRepr`].
//!
//! ```text
//! IKE message (RFC 7296 §3.1, §3.2):
//! +-------------+------------------+------------------+-----+-----------------+
//! | IKE header  | payload 1        | payload 2        | ... | SK (if present, |
//! | Next Payload| generic header   | generic header   |     | always last)    |
//! | = type 1    | Next = type 2    | Next = type 3    |     | Next = inner 1  |
//! +-------------+------------------+------------------+-----+-----------------+
//! ```
//!
//! Parsing is strict about structure (lengths, counts, trailing octets) and
//! lenient about values: unknown payload types, unknown IANA values and
//! RESERVED bits are data. Only the Critical bit of an unknown payload
//! matters (RFC 7296 §2.5): such a message must be refused with
//! UNSUPPORTED_CRITICAL_PAYLOAD, which [`MessageRepr::unsupported_critical_payload`]
//! reports.

use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::ike::codec::patch_len16;
use crate::ike::config::{CpPayload, EapPayload};
use crate::ike::encrypted::{SkPayload, SkfPayload};
use crate::ike::header::{IkeHeader, IkeHeaderRepr};
use crate::ike::iana::{ExchangeType, NotifyType, PayloadType};
use crate::ike::identity::{AuthPayload, CertPayload, CertReqPayload, IdPayload};
use crate::ike::keying::{KePayload, NoncePayload};
use crate::ike::limits::{GENERIC_PAYLOAD_HEADER_LEN, HEADER_LEN, MAX_MESSAGE_LEN, MAX_PAYLOADS};
use crate::ike::notify::{DeletePayload, NotifyPayload, VendorIdPayload};
use crate::ike::payload::{PayloadIter, RawPayload, CRITICAL};
use crate::ike::sa::SaPayload;
use crate::ike::ts::TsPayload;

/// One IKEv2 payload, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Payload {
    /// Security Association (§3.3).
    Sa(SaPayload),
    /// Key Exchange (§3.4).
    Ke(KePayload),
    /// Identification - Initiator (§3.5).
    Idi(IdPayload),
    /// Identification - Responder (§3.5).
    Idr(IdPayload),
    /// Certificate (§3.6).
    Cert(CertPayload),
    /// Certificate Request (§3.7).
    CertReq(CertReqPayload),
    /// Authentication (§3.8).
    Auth(AuthPayload),
    /// Nonce (§3.9).
    Nonce(NoncePayload),
    /// Notify (§3.10).
    Notify(NotifyPayload),
    /// Delete (§3.11).
    Delete(DeletePayload),
    /// Vendor ID (§3.12).
    VendorId(VendorIdPayload),
    /// Traffic Selector - Initiator (§3.13).
    Tsi(TsPayload),
    /// Traffic Selector - Responder (§3.13).
    Tsr(TsPayload),
    /// Encrypted and Authenticated (§3.14); last in its chain.
    Sk(SkPayload),
    /// Encrypted and Authenticated Fragment (RFC 7383 §2.5); last in its chain.
    Skf(SkfPayload),
    /// Configuration (§3.15).
    Cp(CpPayload),
    /// Extensible Authentication (§3.16).
    Eap(EapPayload),
    /// A payload type this codec does not read, kept as data. With
    /// `critical` set the whole message must be refused (RFC 7296 §2.5).
    /// `ty` must not be a type listed above (it would parse back as that
    /// type) nor [`PayloadType::NONE`].
    Unknown {
        /// Payload type.
        ty: PayloadType,
        /// The Critical bit.
        critical: bool,
        /// The body after the generic header.
        body: Vec<u8>,
    },
}

impl Payload {
    /// Reads one payload's body according to its type. Known types ignore
    /// the Critical bit (RFC 7296 §2.5: it only matters for types the
    /// recipient does not understand).
    pub fn parse(raw: &RawPayload<'_>) -> Result<Self> {
        let body = raw.body;
        Ok(match raw.payload_type {
            PayloadType::SA => Payload::Sa(SaPayload::parse(body)?),
            PayloadType::KE => Payload::Ke(KePayload::parse(body)?),
            PayloadType::IDi => Payload::Idi(IdPayload::parse(body)?),
            PayloadType::IDr => Payload::Idr(IdPayload::parse(body)?),
            PayloadType::CERT => Payload::Cert(CertPayload::parse(body)?),
            PayloadType::CERTREQ => Payload::CertReq(CertReqPayload::parse(body)?),
            PayloadType::AUTH => Payload::Auth(AuthPayload::parse(body)?),
            PayloadType::NONCE => Payload::Nonce(NoncePayload::parse(body)?),
            PayloadType::NOTIFY => Payload::Notify(NotifyPayload::parse(body)?),
            PayloadType::DELETE => Payload::Delete(DeletePayload::parse(body)?),
            PayloadType::VENDOR_ID => Payload::VendorId(VendorIdPayload::parse(body)?),
            PayloadType::TSi => Payload::Tsi(TsPayload::parse(body)?),
            PayloadType::TSr => Payload::Tsr(TsPayload::parse(body)?),
            PayloadType::SK => Payload::Sk(SkPayload::parse(raw.next_payload, body)?),
            PayloadType::SKF => Payload::Skf(SkfPayload::parse(raw.next_payload, body)?),
            PayloadType::CP => Payload::Cp(CpPayload::parse(body)?),
            PayloadType::EAP => Payload::Eap(EapPayload::parse(body)?),
            ty => Payload::Unknown {
                ty,
                critical: raw.critical,
                body: body.to_vec(),
            },
        })
    }

    /// This payload's type.
    pub fn payload_type(&self) -> PayloadType {
        match self {
            Payload::Sa(_) => PayloadType::SA,
            Payload::Ke(_) => PayloadType::KE,
            Payload::Idi(_) => PayloadType::IDi,
            Payload::Idr(_) => PayloadType::IDr,
            Payload::Cert(_) => PayloadType::CERT,
            Payload::CertReq(_) => PayloadType::CERTREQ,
            Payload::Auth(_) => PayloadType::AUTH,
            Payload::Nonce(_) => PayloadType::NONCE,
            Payload::Notify(_) => PayloadType::NOTIFY,
            Payload::Delete(_) => PayloadType::DELETE,
            Payload::VendorId(_) => PayloadType::VENDOR_ID,
            Payload::Tsi(_) => PayloadType::TSi,
            Payload::Tsr(_) => PayloadType::TSr,
            Payload::Sk(_) => PayloadType::SK,
            Payload::Skf(_) => PayloadType::SKF,
            Payload::Cp(_) => PayloadType::CP,
            Payload::Eap(_) => PayloadType::EAP,
            Payload::Unknown { ty, .. } => *ty,
        }
    }

    /// True for an unknown payload with the Critical bit set: the message
    /// must be refused with UNSUPPORTED_CRITICAL_PAYLOAD (RFC 7296 §2.5).
    pub fn is_unsupported_critical(&self) -> bool {
        matches!(self, Payload::Unknown { critical: true, .. })
    }

    /// For SK and SKF, the Next Payload their header carries: the first
    /// inner payload's type. `None` for every other payload.
    fn inner_first(&self) -> Option<PayloadType> {
        match self {
            Payload::Sk(sk) => Some(sk.first_inner),
            Payload::Skf(skf) => Some(skf.first_inner),
            _ => None,
        }
    }

    /// Octets of the body (after the generic header).
    pub fn body_len(&self) -> usize {
        match self {
            Payload::Sa(p) => p.buffer_len(),
            Payload::Ke(p) => p.buffer_len(),
            Payload::Idi(p) | Payload::Idr(p) => p.buffer_len(),
            Payload::Cert(p) => p.buffer_len(),
            Payload::CertReq(p) => p.buffer_len(),
            Payload::Auth(p) => p.buffer_len(),
            Payload::Nonce(p) => p.buffer_len(),
            Payload::Notify(p) => p.buffer_len(),
            Payload::Delete(p) => p.buffer_len(),
            Payload::VendorId(p) => p.buffer_len(),
            Payload::Tsi(p) | Payload::Tsr(p) => p.buffer_len(),
            Payload::Sk(p) => p.buffer_len(),
            Payload::Skf(p) => p.buffer_len(),
            Payload::Cp(p) => p.buffer_len(),
            Payload::Eap(p) => p.buffer_len(),
            Payload::Unknown { body, .. } => body.len(),
        }
    }

    /// Octets of the whole payload, generic header included.
    pub fn buffer_len(&self) -> usize {
        GENERIC_PAYLOAD_HEADER_LEN + self.body_len()
    }

    /// Appends the body (after the generic header).
    pub fn emit_body(&self, out: &mut Vec<u8>) -> Result<()> {
        match self {
            Payload::Sa(p) => p.emit(out),
            Payload::Ke(p) => p.emit(out),
            Payload::Idi(p) | Payload::Idr(p) => p.emit(out),
            Payload::Cert(p) => p.emit(out),
            Payload::CertReq(p) => p.emit(out),
            Payload::Auth(p) => p.emit(out),
            Payload::Nonce(p) => p.emit(out),
            Payload::Notify(p) => p.emit(out),
            Payload::Delete(p) => p.emit(out),
            Payload::VendorId(p) => p.emit(out),
            Payload::Tsi(p) | Payload::Tsr(p) => p.emit(out),
            Payload::Sk(p) => p.emit(out),
            Payload::Skf(p) => p.emit(out),
            Payload::Cp(p) => p.emit(out),
            Payload::Eap(p) => p.emit(out),
            Payload::Unknown { body, .. } => {
                out.extend_from_slice(body);
                Ok(())
            }
        }
    }
}

/// Reads a payload chain whose first payload is of type `first`: the
/// plaintext inside SK after decryption (first = the SK header's Next
/// Payload), or a message's chain after the IKE header.
///
/// Errors: those of [`PayloadIter`] and of each payload's parser.
pub fn parse_payloads(first: PayloadType, chain: &[u8]) -> Result<Vec<Payload>> {
    PayloadIter::new(first, chain)
        .map(|raw| raw.and_then(|raw| Payload::parse(&raw)))
        .collect()
}

/// Writes a payload chain and returns it with the type of its first
/// payload ([`PayloadType::NONE`] for none): the plaintext to encrypt into
/// SK, whose Next Payload is that type.
///
/// Errors ([`Error::Malformed`]): a length or count that does not fit its
/// field, SK or SKF anywhere but last, an unknown payload typed NONE, or
/// more than [`MAX_PAYLOADS`] payloads.
pub fn emit_payloads(payloads: &[Payload]) -> Result<(PayloadType, Vec<u8>)> {
    let mut out = Vec::with_capacity(payloads.iter().map(Payload::buffer_len).sum());
    emit_chain(payloads, &mut out)?;
    Ok((first_type(payloads), out))
}

fn first_type(payloads: &[Payload]) -> PayloadType {
    payloads
        .first()
        .map_or(PayloadType::NONE, Payload::payload_type)
}

fn emit_chain(payloads: &[Payload], out: &mut Vec<u8>) -> Result<()> {
    if payloads.len() > MAX_PAYLOADS {
        return Err(Error::Malformed);
    }
    for (i, payload) in payloads.iter().enumerate() {
        let is_last = i + 1 == payloads.len();
        let next = match payload.inner_first() {
            Some(_) if !is_last => return Err(Error::Malformed),
            Some(inner) => inner,
            None => payloads
                .get(i + 1)
                .map_or(PayloadType::NONE, Payload::payload_type),
        };
        if payload.payload_type() == PayloadType::NONE {
            return Err(Error::Malformed);
        }
        let start = out.len();
        let flags = if payload.is_unsupported_critical() {
            CRITICAL
        } else {
            0
        };
        out.extend_from_slice(&[next.0, flags, 0, 0]);
        payload.emit_body(out)?;
        patch_len16(out, start, start + 2)?;
    }
    Ok(())
}

/// A whole IKE message: the header fields RFC 7296 §3.1 gives meaning to,
/// and the payloads. Next Payload and Length are derived when emitting.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MessageRepr {
    /// IKE SA Initiator's SPI.
    pub initiator_spi: u64,
    /// IKE SA Responder's SPI.
    pub responder_spi: u64,
    /// Exchange Type.
    pub exchange_type: ExchangeType,
    /// Flag I: the sender is the original initiator of the IKE SA.
    pub initiator: bool,
    /// Flag R: the message is a response.
    pub response: bool,
    /// Message ID.
    pub message_id: u32,
    /// Payloads in wire order; SK or SKF, if present, last.
    pub payloads: Vec<Payload>,
}

impl MessageRepr {
    /// Reads a whole message (one UDP payload, after any non-ESP marker).
    ///
    /// Errors: [`Error::Truncated`] / [`Error::Malformed`] from the header
    /// checks; [`Error::BadVersion`] for a major version other than 2
    /// (answer INVALID_MAJOR_VERSION, RFC 7296 §2.5, from the
    /// [`IkeHeader`] view); [`Error::Malformed`] for octets after Length or
    /// a message over [`MAX_MESSAGE_LEN`]; then those of [`parse_payloads`].
    /// A message that parses may still hold an unknown critical payload:
    /// check [`Self::unsupported_critical_payload`].
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let header = IkeHeader::new_checked(bytes)?;
        header.check_version()?;
        // RFC 7296 §3.1: Length is that of the total message; over UDP
        // nothing may follow it.
        if header.payload_chain().len() + HEADER_LEN != bytes.len() || bytes.len() > MAX_MESSAGE_LEN
        {
            return Err(Error::Malformed);
        }
        Ok(MessageRepr {
            initiator_spi: header.initiator_spi(),
            responder_spi: header.responder_spi(),
            exchange_type: header.exchange_type(),
            initiator: header.initiator(),
            response: header.response(),
            message_id: header.message_id(),
            payloads: parse_payloads(header.next_payload(), header.payload_chain())?,
        })
    }

    /// Octets [`Self::emit_to_vec`] writes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payloads.iter().map(Payload::buffer_len).sum::<usize>()
    }

    /// The header this message emits with.
    pub fn header(&self) -> IkeHeaderRepr {
        IkeHeaderRepr {
            initiator_spi: self.initiator_spi,
            responder_spi: self.responder_spi,
            next_payload: first_type(&self.payloads),
            exchange_type: self.exchange_type,
            initiator: self.initiator,
            response: self.response,
            message_id: self.message_id,
            length: u32::try_from(self.buffer_len()).unwrap_or(u32::MAX),
        }
    }

    /// Writes the message. An SK/SKF body is written as given, so the
    /// crypto layer emits with a zeroed ICV and then fills the message's
    /// last octets.
    ///
    /// Errors ([`Error::Malformed`]): those of [`emit_payloads`], or a
    /// message over [`MAX_MESSAGE_LEN`].
    pub fn emit_to_vec(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; HEADER_LEN];
        out.reserve(self.buffer_len() - HEADER_LEN);
        emit_chain(&self.payloads, &mut out)?;
        if out.len() > MAX_MESSAGE_LEN {
            return Err(Error::Malformed);
        }
        let mut header = self.header();
        header.length = u32::try_from(out.len()).map_err(|_| Error::Malformed)?;
        header.emit(&mut IkeHeader::new_unchecked(&mut out[..]));
        Ok(out)
    }

    /// The type of the first unknown payload with the Critical bit set: the
    /// message must be refused and UNSUPPORTED_CRITICAL_PAYLOAD returned
    /// with this type as its one-octet data (RFC 7296 §2.5, §3.10.1).
    pub fn unsupported_critical_payload(&self) -> Option<PayloadType> {
        self.payloads
            .iter()
            .find(|p| p.is_unsupported_critical())
            .map(Payload::payload_type)
    }

    /// The Notify payloads, in wire order.
    pub fn notifies(&self) -> impl Iterator<Item = &NotifyPayload> + '_ {
        self.payloads.iter().filter_map(|p| match p {
            Payload::Notify(n) => Some(n),
            _ => None,
        })
    }

    /// The first Notify payload of type `ty`.
    pub fn notify(&self, ty: NotifyType) -> Option<&NotifyPayload> {
        self.notifies().find(|n| n.notify_type == ty)
    }
}
