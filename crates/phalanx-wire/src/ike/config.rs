//! The Configuration payload (RFC 7296 §3.15) and the EAP payload (§3.16).
//!
//! ```text
//! Configuration payload body (§3.15):
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   CFG Type    |                    RESERVED                   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                   Configuration Attributes                    ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! Configuration Attribute (§3.15.1):
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |R|         Attribute Type      |            Length             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                             Value                             ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! EAP payload body (§3.16): one EAP message (RFC 3748), opaque here.
//! ```

use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::ike::codec::{count_u16, put_u16, Reader};
use crate::ike::iana::{CfgAttributeType, CfgType};
use crate::ike::limits::MAX_CFG_ATTRIBUTES;

/// The R bit of an attribute type (reserved, ignored on receipt).
const ATTRIBUTE_RESERVED_BIT: u16 = 0x8000;

/// One configuration attribute (RFC 7296 §3.15.1); the value is data
/// (addresses, netmasks, subnets) for the IKE layer to read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CfgAttribute {
    /// Attribute Type (15 bits).
    pub attribute_type: CfgAttributeType,
    /// Value; empty in a request for any value.
    pub value: Vec<u8>,
}

/// The Configuration payload (RFC 7296 §3.15).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CpPayload {
    /// CFG Type.
    pub cfg_type: CfgType,
    /// Configuration Attributes, in wire order.
    pub attributes: Vec<CfgAttribute>,
}

impl CpPayload {
    /// Reads a CP payload body; [`Error::Malformed`] past
    /// [`MAX_CFG_ATTRIBUTES`].
    pub fn parse(body: &[u8]) -> Result<Self> {
        let mut reader = Reader::new(body);
        let cfg_type = CfgType(reader.u8()?);
        let _reserved = reader.take(3)?;
        let mut attributes = Vec::new();
        while !reader.is_empty() {
            if attributes.len() == MAX_CFG_ATTRIBUTES {
                return Err(Error::Malformed);
            }
            let attribute_type = CfgAttributeType(reader.u16()? & !ATTRIBUTE_RESERVED_BIT);
            let len = usize::from(reader.u16()?);
            let value = reader.take(len)?.to_vec();
            attributes.push(CfgAttribute {
                attribute_type,
                value,
            });
        }
        Ok(CpPayload {
            cfg_type,
            attributes,
        })
    }

    /// Octets [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        4 + self
            .attributes
            .iter()
            .map(|a| 4 + a.value.len())
            .sum::<usize>()
    }

    /// Appends the body; [`Error::Malformed`] for a value over 65535 octets.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        out.extend_from_slice(&[self.cfg_type.0, 0, 0, 0]);
        for attribute in &self.attributes {
            put_u16(out, attribute.attribute_type.0 & !ATTRIBUTE_RESERVED_BIT);
            put_u16(out, count_u16(attribute.value.len())?);
            out.extend_from_slice(&attribute.value);
        }
        Ok(())
    }
}

/// The EAP payload (RFC 7296 §3.16): one EAP message, opaque here.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EapPayload {
    /// The EAP message.
    pub message: Vec<u8>,
}

impl EapPayload {
    /// Reads an EAP payload body.
    pub fn parse(body: &[u8]) -> Result<Self> {
        Ok(EapPayload {
            message: body.to_vec(),
        })
    }

    /// Octets [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        self.message.len()
    }

    /// Appends the body.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        out.extend_from_slice(&self.message);
        Ok(())
    }
}
