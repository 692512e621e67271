//! The Security Association payload (RFC 7296 §3.3): proposals of
//! transforms with attributes.
//!
//! ```text
//! Proposal Substructure (§3.3.1):
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Last Substruc |   RESERVED    |         Proposal Length       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Proposal Num  |  Protocol ID  |    SPI Size   |Num  Transforms|
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                        SPI (variable)                         ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                        <Transforms>                           ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! Transform Substructure (§3.3.2):
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Last Substruc |   RESERVED    |        Transform Length       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Transform Type |   RESERVED    |          Transform ID         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                      Transform Attributes                     ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! Data Attributes (§3.3.5):
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |A|       Attribute Type        |    AF=0  Attribute Length     |
//! |F|                             |    AF=1  Attribute Value      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                   AF=0  Attribute Value                       |
//! |                   AF=1  Not Transmitted                       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Last Substruc is 0 on the last proposal (transform) and 2 (3) on every
//! other; a chain that disagrees with its own lengths and counts is refused.

use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::ike::codec::{count_u16, count_u8, patch_len16, put_u16, put_u32, put_u64, Reader};
use crate::ike::iana::{
    EncrId, EsnId, IntegId, KeId, PrfId, ProtocolId, TransformAttributeType, TransformType,
};
use crate::ike::limits::{
    CHILD_SPI_LEN, IKE_SPI_LEN, MAX_PROPOSALS, MAX_TRANSFORMS, MAX_TRANSFORM_ATTRIBUTES,
};

/// Last Substruc of the last proposal or transform.
const LAST: u8 = 0;
/// Last Substruc of a proposal followed by another (§3.3.1).
const MORE_PROPOSALS: u8 = 2;
/// Last Substruc of a transform followed by another (§3.3.2).
const MORE_TRANSFORMS: u8 = 3;
/// Shortest proposal or transform substructure: its two fixed words.
const SUBSTRUCTURE_MIN_LEN: usize = 8;
/// Attribute Format bit: TV (value in the header) when set (§3.3.5).
const ATTRIBUTE_FORMAT_TV: u16 = 0x8000;

/// The SPI of a proposal: absent, four octets (ESP, AH) or eight (IKE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Spi {
    /// SPI Size 0: the initial IKE SA negotiation (RFC 7296 §3.3.1).
    None,
    /// SPI Size 4: an ESP or AH SA.
    Child(u32),
    /// SPI Size 8: an IKE SA being rekeyed.
    Ike(u64),
}

impl Spi {
    /// SPI Size in octets.
    pub fn size(&self) -> usize {
        match self {
            Spi::None => 0,
            Spi::Child(_) => CHILD_SPI_LEN,
            Spi::Ike(_) => IKE_SPI_LEN,
        }
    }

    /// Reads an SPI of `size` octets; sizes other than 0, 4 and 8 are
    /// [`Error::Malformed`] (RFC 7296 §3.3.1).
    pub(crate) fn read(reader: &mut Reader<'_>, size: u8) -> Result<Self> {
        match usize::from(size) {
            0 => Ok(Spi::None),
            CHILD_SPI_LEN => Ok(Spi::Child(reader.u32()?)),
            IKE_SPI_LEN => Ok(Spi::Ike(reader.u64()?)),
            _ => Err(Error::Malformed),
        }
    }

    fn emit(&self, out: &mut Vec<u8>) {
        match *self {
            Spi::None => {}
            Spi::Child(spi) => put_u32(out, spi),
            Spi::Ike(spi) => put_u64(out, spi),
        }
    }
}

/// A transform attribute (RFC 7296 §3.3.5).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TransformAttr {
    /// Type/Value format (AF = 1): a two-octet value, e.g. KEY_LENGTH.
    Tv {
        /// Attribute Type (15 bits).
        ty: TransformAttributeType,
        /// Attribute Value.
        value: u16,
    },
    /// Type/Length/Value format (AF = 0): kept as data.
    Tlv {
        /// Attribute Type (15 bits).
        ty: TransformAttributeType,
        /// Attribute Value.
        value: Vec<u8>,
    },
}

impl TransformAttr {
    fn parse(reader: &mut Reader<'_>) -> Result<Self> {
        let af_type = reader.u16()?;
        let ty = TransformAttributeType(af_type & !ATTRIBUTE_FORMAT_TV);
        if af_type & ATTRIBUTE_FORMAT_TV != 0 {
            return Ok(TransformAttr::Tv {
                ty,
                value: reader.u16()?,
            });
        }
        let len = usize::from(reader.u16()?);
        let value = reader.take(len)?.to_vec();
        Ok(TransformAttr::Tlv { ty, value })
    }

    fn buffer_len(&self) -> usize {
        match self {
            TransformAttr::Tv { .. } => 4,
            TransformAttr::Tlv { value, .. } => 4 + value.len(),
        }
    }

    fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        match self {
            TransformAttr::Tv { ty, value } => {
                put_u16(out, ty.0 | ATTRIBUTE_FORMAT_TV);
                put_u16(out, *value);
            }
            TransformAttr::Tlv { ty, value } => {
                put_u16(out, ty.0 & !ATTRIBUTE_FORMAT_TV);
                put_u16(out, count_u16(value.len())?);
                out.extend_from_slice(value);
            }
        }
        Ok(())
    }
}

/// A transform (RFC 7296 §3.3.2): one algorithm of one type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Transform {
    /// Transform Type.
    pub transform_type: TransformType,
    /// Transform ID, in the registry its type names ([`EncrId`], [`PrfId`],
    /// [`IntegId`], [`KeId`], [`EsnId`]).
    pub transform_id: u16,
    /// Transform Attributes, in wire order.
    pub attributes: Vec<TransformAttr>,
}

impl Transform {
    /// A transform without attributes.
    pub fn new(transform_type: TransformType, transform_id: u16) -> Self {
        Transform {
            transform_type,
            transform_id,
            attributes: Vec::new(),
        }
    }

    /// An encryption transform, with a Key Length attribute in bits for
    /// variable-length ciphers such as AES (RFC 7296 §3.3.5).
    pub fn encr(id: EncrId, key_length: Option<u16>) -> Self {
        let mut t = Transform::new(TransformType::ENCR, id.0);
        if let Some(bits) = key_length {
            t.attributes.push(TransformAttr::Tv {
                ty: TransformAttributeType::KEY_LENGTH,
                value: bits,
            });
        }
        t
    }

    /// A pseudorandom function transform.
    pub fn prf(id: PrfId) -> Self {
        Transform::new(TransformType::PRF, id.0)
    }

    /// An integrity transform.
    pub fn integ(id: IntegId) -> Self {
        Transform::new(TransformType::INTEG, id.0)
    }

    /// A key exchange method transform (Transform Type 4, or an ADDKE type).
    pub fn ke(transform_type: TransformType, id: KeId) -> Self {
        Transform::new(transform_type, id.0)
    }

    /// An Extended Sequence Numbers transform.
    pub fn esn(id: EsnId) -> Self {
        Transform::new(TransformType::ESN, id.0)
    }

    /// The Key Length attribute, if there is one.
    pub fn key_length(&self) -> Option<u16> {
        self.attributes.iter().find_map(|a| match a {
            TransformAttr::Tv { ty, value } if *ty == TransformAttributeType::KEY_LENGTH => {
                Some(*value)
            }
            _ => None,
        })
    }

    /// Reads one transform substructure; returns it and its Last Substruc.
    fn parse(reader: &mut Reader<'_>) -> Result<(Self, u8)> {
        let last = reader.u8()?;
        let _reserved = reader.u8()?;
        let len = usize::from(reader.u16()?);
        if len < SUBSTRUCTURE_MIN_LEN {
            return Err(Error::Malformed);
        }
        let mut inner = Reader::new(reader.take(len - 4)?);
        let transform_type = TransformType(inner.u8()?);
        let _reserved = inner.u8()?;
        let transform_id = inner.u16()?;
        let mut attributes = Vec::new();
        while !inner.is_empty() {
            if attributes.len() == MAX_TRANSFORM_ATTRIBUTES {
                return Err(Error::Malformed);
            }
            attributes.push(TransformAttr::parse(&mut inner)?);
        }
        let transform = Transform {
            transform_type,
            transform_id,
            attributes,
        };
        Ok((transform, last))
    }

    fn buffer_len(&self) -> usize {
        8 + self
            .attributes
            .iter()
            .map(TransformAttr::buffer_len)
            .sum::<usize>()
    }

    fn emit(&self, out: &mut Vec<u8>, last: bool) -> Result<()> {
        let start = out.len();
        out.extend_from_slice(&[if last { LAST } else { MORE_TRANSFORMS }, 0, 0, 0]);
        out.extend_from_slice(&[self.transform_type.0, 0]);
        put_u16(out, self.transform_id);
        for attribute in &self.attributes {
            attribute.emit(out)?;
        }
        patch_len16(out, start, start + 2)
    }
}

/// A proposal (RFC 7296 §3.3.1): one protocol's set of transforms.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Proposal {
    /// Proposal Num: 1 for the first, counting up; the responder echoes the
    /// number it accepted.
    pub number: u8,
    /// Protocol ID (IKE, AH or ESP).
    pub protocol_id: ProtocolId,
    /// The sender's inbound SPI for the SA (absent in IKE_SA_INIT).
    pub spi: Spi,
    /// Transforms, in wire order.
    pub transforms: Vec<Transform>,
}

impl Proposal {
    /// The transforms of one type, in wire order.
    pub fn transforms_of(&self, ty: TransformType) -> impl Iterator<Item = &Transform> + '_ {
        self.transforms
            .iter()
            .filter(move |t| t.transform_type == ty)
    }

    /// Reads one proposal substructure; returns it and its Last Substruc.
    fn parse(reader: &mut Reader<'_>) -> Result<(Self, u8)> {
        let last = reader.u8()?;
        let _reserved = reader.u8()?;
        let len = usize::from(reader.u16()?);
        if len < SUBSTRUCTURE_MIN_LEN {
            return Err(Error::Malformed);
        }
        let mut inner = Reader::new(reader.take(len - 4)?);
        let number = inner.u8()?;
        let protocol_id = ProtocolId(inner.u8()?);
        let spi_size = inner.u8()?;
        let num_transforms = usize::from(inner.u8()?);
        let spi = Spi::read(&mut inner, spi_size)?;
        if num_transforms > MAX_TRANSFORMS {
            return Err(Error::Malformed);
        }
        let mut transforms = Vec::with_capacity(num_transforms);
        for i in 0..num_transforms {
            let (transform, marker) = Transform::parse(&mut inner)?;
            let expected = if i + 1 == num_transforms {
                LAST
            } else {
                MORE_TRANSFORMS
            };
            if marker != expected {
                return Err(Error::Malformed);
            }
            transforms.push(transform);
        }
        inner.finish()?;
        let proposal = Proposal {
            number,
            protocol_id,
            spi,
            transforms,
        };
        Ok((proposal, last))
    }

    fn buffer_len(&self) -> usize {
        8 + self.spi.size()
            + self
                .transforms
                .iter()
                .map(Transform::buffer_len)
                .sum::<usize>()
    }

    fn emit(&self, out: &mut Vec<u8>, last: bool) -> Result<()> {
        let start = out.len();
        out.extend_from_slice(&[if last { LAST } else { MORE_PROPOSALS }, 0, 0, 0]);
        out.extend_from_slice(&[self.number, self.protocol_id.0]);
        out.extend_from_slice(&[count_u8(self.spi.size())?, count_u8(self.transforms.len())?]);
        self.spi.emit(out);
        for (i, transform) in self.transforms.iter().enumerate() {
            transform.emit(out, i + 1 == self.transforms.len())?;
        }
        patch_len16(out, start, start + 2)
    }
}

/// The Security Association payload (RFC 7296 §3.3).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SaPayload {
    /// Proposals, in the sender's order of preference.
    pub proposals: Vec<Proposal>,
}

impl SaPayload {
    /// Reads an SA payload body: at least one proposal, Last Substruc
    /// markers agreeing with where the body ends, at most
    /// [`MAX_PROPOSALS`].
    pub fn parse(body: &[u8]) -> Result<Self> {
        let mut reader = Reader::new(body);
        let mut proposals = Vec::new();
        loop {
            if proposals.len() == MAX_PROPOSALS {
                return Err(Error::Malformed);
            }
            let (proposal, marker) = Proposal::parse(&mut reader)?;
            proposals.push(proposal);
            match (marker, reader.is_empty()) {
                (LAST, true) => return Ok(SaPayload { proposals }),
                (MORE_PROPOSALS, false) => continue,
                _ => return Err(Error::Malformed),
            }
        }
    }

    /// Octets [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        self.proposals.iter().map(Proposal::buffer_len).sum()
    }

    /// Appends the body. [`Error::Malformed`] if a count or length does not
    /// fit its field.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        for (i, proposal) in self.proposals.iter().enumerate() {
            proposal.emit(out, i + 1 == self.proposals.len())?;
        }
        Ok(())
    }
}
