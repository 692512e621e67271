//! The payloads that prove who a peer is: Identification (RFC 7296 §3.5),
//! Certificate (§3.6), Certificate Request (§3.7) and Authentication (§3.8,
//! RFC 7427).
//!
//! ```text
//! Identification payload body (§3.5):
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   ID Type     |                 RESERVED                      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                   Identification Data                         ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! Certificate / Certificate Request payload body (§3.6, §3.7):
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Cert Encoding |                                               |
//! +-+-+-+-+-+-+-+-+                                               |
//! ~       Certificate Data / Certification Authority              ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! Authentication payload body (§3.8):
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Auth Method   |                RESERVED                       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                      Authentication Data                      ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! Authentication Data of Auth Method 14 (RFC 7427 §3):
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | ASN.1 Length  | AlgorithmIdentifier ASN.1 object              ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                         Signature Value                       ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::slice::ChunksExact;

use crate::error::{Error, Result};
use crate::ike::codec::{count_u8, Reader};
use crate::ike::iana::{AuthMethod, CertEncoding, IdType};

/// Length of a SHA-1 hash in an X.509 Certification Authority list (§3.7).
pub const CA_KEY_HASH_LEN: usize = 20;

/// The Identification payload (RFC 7296 §3.5), IDi or IDr.
///
/// RESERVED is not kept: it is sent as zero and ignored on receipt. The
/// AUTH computation (§2.15) signs the body as received; [`Self::emit`]
/// reproduces it exactly when the peer followed the RFC.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdPayload {
    /// ID Type.
    pub id_type: IdType,
    /// Identification Data, interpreted by the type.
    pub data: Vec<u8>,
}

impl IdPayload {
    /// An ID_IPV4_ADDR or ID_IPV6_ADDR identity.
    pub fn from_ip(addr: IpAddr) -> Self {
        match addr {
            IpAddr::V4(a) => IdPayload {
                id_type: IdType::IPV4_ADDR,
                data: a.octets().to_vec(),
            },
            IpAddr::V6(a) => IdPayload {
                id_type: IdType::IPV6_ADDR,
                data: a.octets().to_vec(),
            },
        }
    }

    /// The address of an ID_IPV4_ADDR or ID_IPV6_ADDR identity whose data
    /// has the right length.
    pub fn ip_addr(&self) -> Option<IpAddr> {
        match self.id_type {
            IdType::IPV4_ADDR => <[u8; 4]>::try_from(&self.data[..])
                .ok()
                .map(|o| IpAddr::V4(Ipv4Addr::from(o))),
            IdType::IPV6_ADDR => <[u8; 16]>::try_from(&self.data[..])
                .ok()
                .map(|o| IpAddr::V6(Ipv6Addr::from(o))),
            _ => None,
        }
    }

    /// Reads an ID payload body.
    pub fn parse(body: &[u8]) -> Result<Self> {
        let mut reader = Reader::new(body);
        let id_type = IdType(reader.u8()?);
        let _reserved = reader.take(3)?;
        Ok(IdPayload {
            id_type,
            data: reader.rest().to_vec(),
        })
    }

    /// Octets [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        4 + self.data.len()
    }

    /// Appends the body (RestOfInitIDPayload / RestOfRespIDPayload of
    /// RFC 7296 §2.15).
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        out.extend_from_slice(&[self.id_type.0, 0, 0, 0]);
        out.extend_from_slice(&self.data);
        Ok(())
    }
}

/// The Certificate payload (RFC 7296 §3.6).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CertPayload {
    /// Certificate Encoding.
    pub encoding: CertEncoding,
    /// Certificate Data (DER for X509_SIGNATURE).
    pub data: Vec<u8>,
}

impl CertPayload {
    /// Reads a CERT payload body.
    pub fn parse(body: &[u8]) -> Result<Self> {
        let mut reader = Reader::new(body);
        let encoding = CertEncoding(reader.u8()?);
        Ok(CertPayload {
            encoding,
            data: reader.rest().to_vec(),
        })
    }

    /// Octets [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        1 + self.data.len()
    }

    /// Appends the body.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        out.push(self.encoding.0);
        out.extend_from_slice(&self.data);
        Ok(())
    }
}

/// The Certificate Request payload (RFC 7296 §3.7).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CertReqPayload {
    /// Certificate Encoding of the wanted certificates.
    pub encoding: CertEncoding,
    /// Certification Authority: for X509_SIGNATURE, concatenated SHA-1
    /// hashes of trusted CAs' public keys.
    pub authorities: Vec<u8>,
}

impl CertReqPayload {
    /// The 20-octet CA key hashes of an X509_SIGNATURE request;
    /// [`Error::Malformed`] if the list is not a whole number of hashes.
    pub fn ca_key_hashes(&self) -> Result<ChunksExact<'_, u8>> {
        if self.authorities.len() % CA_KEY_HASH_LEN != 0 {
            return Err(Error::Malformed);
        }
        Ok(self.authorities.chunks_exact(CA_KEY_HASH_LEN))
    }

    /// Reads a CERTREQ payload body.
    pub fn parse(body: &[u8]) -> Result<Self> {
        let mut reader = Reader::new(body);
        let encoding = CertEncoding(reader.u8()?);
        Ok(CertReqPayload {
            encoding,
            authorities: reader.rest().to_vec(),
        })
    }

    /// Octets [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        1 + self.authorities.len()
    }

    /// Appends the body.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        out.push(self.encoding.0);
        out.extend_from_slice(&self.authorities);
        Ok(())
    }
}

/// The Authentication payload (RFC 7296 §3.8).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AuthPayload {
    /// Auth Method.
    pub method: AuthMethod,
    /// Authentication Data.
    pub data: Vec<u8>,
}

impl AuthPayload {
    /// An Auth Method 14 payload (RFC 7427 §3) from a DER AlgorithmIdentifier
    /// and a signature; [`Error::Malformed`] if the AlgorithmIdentifier is
    /// longer than its one-octet length field allows.
    pub fn digital_signature(algorithm_identifier: &[u8], signature: &[u8]) -> Result<Self> {
        let mut data = Vec::with_capacity(1 + algorithm_identifier.len() + signature.len());
        data.push(count_u8(algorithm_identifier.len())?);
        data.extend_from_slice(algorithm_identifier);
        data.extend_from_slice(signature);
        Ok(AuthPayload {
            method: AuthMethod::DIGITAL_SIGNATURE,
            data,
        })
    }

    /// Splits Auth Method 14 data (RFC 7427 §3) into the DER
    /// AlgorithmIdentifier and the signature value. [`Error::Malformed`]
    /// for another method, [`Error::Truncated`] if the ASN.1 Length runs
    /// past the data.
    pub fn signature_parts(&self) -> Result<(&[u8], &[u8])> {
        if self.method != AuthMethod::DIGITAL_SIGNATURE {
            return Err(Error::Malformed);
        }
        let mut reader = Reader::new(&self.data);
        let len = usize::from(reader.u8()?);
        let algorithm_identifier = reader.take(len)?;
        Ok((algorithm_identifier, reader.rest()))
    }

    /// Reads an AUTH payload body.
    pub fn parse(body: &[u8]) -> Result<Self> {
        let mut reader = Reader::new(body);
        let method = AuthMethod(reader.u8()?);
        let _reserved = reader.take(3)?;
        Ok(AuthPayload {
            method,
            data: reader.rest().to_vec(),
        })
    }

    /// Octets [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        4 + self.data.len()
    }

    /// Appends the body.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        out.extend_from_slice(&[self.method.0, 0, 0, 0]);
        out.extend_from_slice(&self.data);
        Ok(())
    }
}
