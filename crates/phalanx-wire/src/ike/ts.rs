//! The Traffic Selector payloads TSi and TSr (RFC 7296 §3.13).
//!
//! ```text
//! Traffic Selector payload body (§3.13):
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Number of TSs |                 RESERVED                      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                       <Traffic Selectors>                     ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! Traffic Selector (§3.13.1):
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   TS Type     |IP Protocol ID |       Selector Length         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |           Start Port          |           End Port            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                Starting Address (4 or 16 octets)              ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                 Ending Address (4 or 16 octets)               ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! TS types other than the two address ranges (Fibre Channel, RFC 4595;
//! security labels, RFC 9478) are kept as data in
//! [`TsPayload::unknown_selectors`], so the IKE layer can refuse or ignore
//! them with TS_UNACCEPTABLE as it chooses.

use alloc::vec::Vec;
use core::net::{Ipv4Addr, Ipv6Addr};

use crate::error::{Error, Result};
use crate::iana::IpProtocol;
use crate::ike::codec::{count_u8, patch_len16, put_u16, Reader};
use crate::ike::iana::TsType;
use crate::ike::limits::{MAX_TRAFFIC_SELECTORS, TS_IPV4_LEN, TS_IPV6_LEN};

/// The address range of a traffic selector, both ends of one family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TsAddresses {
    /// TS_IPV4_ADDR_RANGE.
    V4 {
        /// Starting Address.
        start: Ipv4Addr,
        /// Ending Address.
        end: Ipv4Addr,
    },
    /// TS_IPV6_ADDR_RANGE.
    V6 {
        /// Starting Address.
        start: Ipv6Addr,
        /// Ending Address.
        end: Ipv6Addr,
    },
}

/// One TS_IPV4_ADDR_RANGE or TS_IPV6_ADDR_RANGE selector (RFC 7296
/// §3.13.1). Ranges are inclusive; protocol 0 means any; ports 0..65535
/// mean any, and start 65535 with end 0 means OPAQUE. For ICMP the port
/// fields carry type and code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TrafficSelector {
    /// IP Protocol ID (0: any).
    pub ip_protocol: IpProtocol,
    /// Start Port.
    pub start_port: u16,
    /// End Port.
    pub end_port: u16,
    /// Starting and Ending Address.
    pub addresses: TsAddresses,
}

impl TrafficSelector {
    /// TS Type of this selector.
    pub fn ts_type(&self) -> TsType {
        match self.addresses {
            TsAddresses::V4 { .. } => TsType::TS_IPV4_ADDR_RANGE,
            TsAddresses::V6 { .. } => TsType::TS_IPV6_ADDR_RANGE,
        }
    }

    /// Selector Length on the wire.
    pub fn buffer_len(&self) -> usize {
        match self.addresses {
            TsAddresses::V4 { .. } => TS_IPV4_LEN,
            TsAddresses::V6 { .. } => TS_IPV6_LEN,
        }
    }

    fn parse(ts_type: TsType, ip_protocol: IpProtocol, body: &[u8]) -> Result<Self> {
        let mut reader = Reader::new(body);
        let start_port = reader.u16()?;
        let end_port = reader.u16()?;
        let addresses = match ts_type {
            TsType::TS_IPV4_ADDR_RANGE => TsAddresses::V4 {
                start: Ipv4Addr::from(reader.array::<4>()?),
                end: Ipv4Addr::from(reader.array::<4>()?),
            },
            _ => TsAddresses::V6 {
                start: Ipv6Addr::from(reader.array::<16>()?),
                end: Ipv6Addr::from(reader.array::<16>()?),
            },
        };
        // Selector Length must be exactly 16 or 40 (§3.13.1).
        reader.finish()?;
        Ok(TrafficSelector {
            ip_protocol,
            start_port,
            end_port,
            addresses,
        })
    }

    fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[self.ts_type().0, self.ip_protocol.0]);
        // 16 or 40: always fits.
        put_u16(out, self.buffer_len() as u16);
        put_u16(out, self.start_port);
        put_u16(out, self.end_port);
        match self.addresses {
            TsAddresses::V4 { start, end } => {
                out.extend_from_slice(&start.octets());
                out.extend_from_slice(&end.octets());
            }
            TsAddresses::V6 { start, end } => {
                out.extend_from_slice(&start.octets());
                out.extend_from_slice(&end.octets());
            }
        }
    }
}

/// A selector of a TS Type this codec does not read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UnknownSelector {
    /// TS Type.
    pub ts_type: TsType,
    /// The octets after Selector Length. The second octet of the selector
    /// header (IP Protocol ID for the address ranges, RESERVED for
    /// TS_SECLABEL) is not kept and is emitted as 0.
    pub data: Vec<u8>,
}

/// A Traffic Selector payload (RFC 7296 §3.13), TSi or TSr.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TsPayload {
    /// The address-range selectors, in wire order.
    pub selectors: Vec<TrafficSelector>,
    /// Selectors of other TS Types, in wire order; emitted after
    /// [`Self::selectors`].
    pub unknown_selectors: Vec<UnknownSelector>,
}

impl TsPayload {
    /// A payload of address-range selectors only.
    pub fn new(selectors: Vec<TrafficSelector>) -> Self {
        TsPayload {
            selectors,
            unknown_selectors: Vec::new(),
        }
    }

    /// Reads a TS payload body. [`Error::Malformed`] for a Selector Length
    /// that is not the type's (16 or 40), under 4, octets after the last
    /// selector, or more than [`MAX_TRAFFIC_SELECTORS`].
    pub fn parse(body: &[u8]) -> Result<Self> {
        let mut reader = Reader::new(body);
        let count = usize::from(reader.u8()?);
        let _reserved = reader.take(3)?;
        if count > MAX_TRAFFIC_SELECTORS {
            return Err(Error::Malformed);
        }
        let mut payload = TsPayload::new(Vec::new());
        for _ in 0..count {
            let ts_type = TsType(reader.u8()?);
            let second = reader.u8()?;
            let len = usize::from(reader.u16()?);
            let rest = len.checked_sub(4).ok_or(Error::Malformed)?;
            let data = reader.take(rest)?;
            match ts_type {
                TsType::TS_IPV4_ADDR_RANGE | TsType::TS_IPV6_ADDR_RANGE => {
                    let ts = TrafficSelector::parse(ts_type, IpProtocol(second), data)
                        .map_err(|_| Error::Malformed)?;
                    payload.selectors.push(ts);
                }
                _ => payload.unknown_selectors.push(UnknownSelector {
                    ts_type,
                    data: data.to_vec(),
                }),
            }
        }
        reader.finish()?;
        Ok(payload)
    }

    /// Octets [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        let known: usize = self.selectors.iter().map(TrafficSelector::buffer_len).sum();
        let unknown: usize = self
            .unknown_selectors
            .iter()
            .map(|u| 4 + u.data.len())
            .sum();
        4 + known + unknown
    }

    /// Appends the body; [`Error::Malformed`] for more than 255 selectors or
    /// an unknown selector over 65535 octets.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        let count = self.selectors.len() + self.unknown_selectors.len();
        out.extend_from_slice(&[count_u8(count)?, 0, 0, 0]);
        for ts in &self.selectors {
            ts.emit(out);
        }
        for unknown in &self.unknown_selectors {
            let start = out.len();
            out.extend_from_slice(&[unknown.ts_type.0, 0, 0, 0]);
            out.extend_from_slice(&unknown.data);
            patch_len16(out, start, start + 2)?;
        }
        Ok(())
    }
}
