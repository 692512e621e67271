//! The Notify (RFC 7296 §3.10), Delete (§3.11) and Vendor ID (§3.12)
//! payloads.
//!
//! ```text
//! Notify payload body (§3.10):
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Protocol ID  |   SPI Size    |      Notify Message Type      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                Security Parameter Index (SPI)                 ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                       Notification Data                       ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! Delete payload body (§3.11):
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Protocol ID   |   SPI Size    |          Num of SPIs          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~               Security Parameter Index(es) (SPI)              ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! Vendor ID payload body (§3.12):
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                        Vendor ID (VID)                        ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::ike::codec::{count_u16, count_u8, put_u16, put_u32, Reader};
use crate::ike::iana::{NotifyType, ProtocolId};
use crate::ike::limits::CHILD_SPI_LEN;

/// The Notify payload (RFC 7296 §3.10).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NotifyPayload {
    /// Protocol ID of the SA the SPI names; [`ProtocolId::NONE`] when the
    /// SPI is empty.
    pub protocol_id: ProtocolId,
    /// SPI, 0 to 255 octets (4 for ESP/AH, empty for the IKE SA).
    pub spi: Vec<u8>,
    /// Notify Message Type.
    pub notify_type: NotifyType,
    /// Notification Data.
    pub data: Vec<u8>,
}

impl NotifyPayload {
    /// A notification about the IKE SA or the exchange: no SPI.
    pub fn new(notify_type: NotifyType, data: Vec<u8>) -> Self {
        NotifyPayload {
            protocol_id: ProtocolId::NONE,
            spi: Vec::new(),
            notify_type,
            data,
        }
    }

    /// A notification about an ESP or AH SA (REKEY_SA, CHILD_SA_NOT_FOUND,
    /// INVALID_SELECTORS, §3.10).
    pub fn for_child(protocol_id: ProtocolId, spi: u32, notify_type: NotifyType) -> Self {
        NotifyPayload {
            protocol_id,
            spi: spi.to_be_bytes().to_vec(),
            notify_type,
            data: Vec::new(),
        }
    }

    /// The SPI as an ESP/AH SPI, if it is four octets.
    pub fn child_spi(&self) -> Option<u32> {
        <[u8; CHILD_SPI_LEN]>::try_from(&self.spi[..])
            .ok()
            .map(u32::from_be_bytes)
    }

    /// Reads a Notify payload body.
    pub fn parse(body: &[u8]) -> Result<Self> {
        let mut reader = Reader::new(body);
        let protocol_id = ProtocolId(reader.u8()?);
        let spi_size = usize::from(reader.u8()?);
        let notify_type = NotifyType(reader.u16()?);
        let spi = reader.take(spi_size)?.to_vec();
        Ok(NotifyPayload {
            protocol_id,
            spi,
            notify_type,
            data: reader.rest().to_vec(),
        })
    }

    /// Octets [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        4 + self.spi.len() + self.data.len()
    }

    /// Appends the body; [`Error::Malformed`] for an SPI over 255 octets.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        out.extend_from_slice(&[self.protocol_id.0, count_u8(self.spi.len())?]);
        put_u16(out, self.notify_type.0);
        out.extend_from_slice(&self.spi);
        out.extend_from_slice(&self.data);
        Ok(())
    }
}

/// The Delete payload (RFC 7296 §3.11).
///
/// SPI Size is 0 for the IKE SA (the SPIs are in the header) and 4 for ESP
/// and AH; others are refused. [`Self::emit`] writes 0 for an IKE delete
/// without SPIs and 4 otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeletePayload {
    /// Protocol ID of the SAs deleted.
    pub protocol_id: ProtocolId,
    /// The SPIs (the deleting end's inbound SPIs); empty for the IKE SA.
    pub spis: Vec<u32>,
}

impl DeletePayload {
    /// Reads a Delete payload body. [`Error::Malformed`] for an SPI Size
    /// other than 0 or 4, SPIs with size 0, or octets after the SPIs.
    pub fn parse(body: &[u8]) -> Result<Self> {
        let mut reader = Reader::new(body);
        let protocol_id = ProtocolId(reader.u8()?);
        let spi_size = usize::from(reader.u8()?);
        let count = usize::from(reader.u16()?);
        let spis = match (spi_size, count) {
            (0, 0) => Vec::new(),
            (CHILD_SPI_LEN, _) => {
                let mut spis = Vec::with_capacity(count.min(body.len() / CHILD_SPI_LEN));
                for _ in 0..count {
                    spis.push(reader.u32()?);
                }
                spis
            }
            _ => return Err(Error::Malformed),
        };
        reader.finish()?;
        Ok(DeletePayload { protocol_id, spis })
    }

    fn spi_size(&self) -> u8 {
        if self.protocol_id == ProtocolId::IKE && self.spis.is_empty() {
            0
        } else {
            4
        }
    }

    /// Octets [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        4 + self.spis.len() * CHILD_SPI_LEN
    }

    /// Appends the body; [`Error::Malformed`] for more than 65535 SPIs.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        out.extend_from_slice(&[self.protocol_id.0, self.spi_size()]);
        put_u16(out, count_u16(self.spis.len())?);
        for &spi in &self.spis {
            put_u32(out, spi);
        }
        Ok(())
    }
}

/// The Vendor ID payload (RFC 7296 §3.12): an opaque identifier.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VendorIdPayload {
    /// Vendor ID (VID).
    pub data: Vec<u8>,
}

impl VendorIdPayload {
    /// Reads a Vendor ID payload body.
    pub fn parse(body: &[u8]) -> Result<Self> {
        Ok(VendorIdPayload {
            data: body.to_vec(),
        })
    }

    /// Octets [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        self.data.len()
    }

    /// Appends the body.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        out.extend_from_slice(&self.data);
        Ok(())
    }
}
