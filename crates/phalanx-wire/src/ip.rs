//! Version-agnostic helpers for the IPsec data path: which IP version a
//! buffer holds, and the selector fields of a packet (RFC 4301 §4.4.1.1).

use core::net::IpAddr;

use crate::error::{Error, Result};
use crate::iana::IpProtocol;
use crate::ipv4::Ipv4Packet;
use crate::ipv6::{self, Ipv6Packet};

/// An IP version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpVersion {
    /// IPv4 (RFC 791).
    V4,
    /// IPv6 (RFC 8200).
    V6,
}

/// Reads the version nibble of the first octet. Errors: [`Error::Truncated`]
/// for an empty buffer, [`Error::BadVersion`] for anything but 4 or 6.
pub fn ip_version(packet: &[u8]) -> Result<IpVersion> {
    match packet.first().map(|b| b >> 4) {
        None => Err(Error::Truncated),
        Some(4) => Ok(IpVersion::V4),
        Some(6) => Ok(IpVersion::V6),
        Some(_) => Err(Error::BadVersion),
    }
}

/// The selector fields of one packet (RFC 4301 §4.4.1.1): addresses, next
/// layer protocol and the two "port" selectors.
///
/// Ports are the TCP/UDP/SCTP/DCCP/UDP-Lite ports; for ICMP and ICMPv6 the
/// message type is in `src_port` and the code in `dst_port`; for the IPv6
/// Mobility Header the MH type is in `src_port`. They are 0 for other
/// protocols and for non-first fragments, which carry no ports (RFC 4301
/// §4.4.1.1 "OPAQUE", §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flow {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Next layer protocol: for IPv6, after the extension headers.
    pub protocol: IpProtocol,
    /// Source port, or ICMP type, or MH type.
    pub src_port: u16,
    /// Destination port, or ICMP code.
    pub dst_port: u16,
}

/// Extracts the [`Flow`] of an IPv4 or IPv6 packet. The IPv4 header
/// checksum is not verified here. IPv6 extension headers are walked as in
/// [`ipv6::upper_layer`], except that the Mobility Header is the next layer
/// protocol for selectors (RFC 4301 §4.4.1.1).
///
/// Errors: those of the views and the extension walk, and
/// [`Error::Truncated`] when a packet that is not a later fragment is too
/// short for its ports (including a first fragment that cuts them off).
pub fn flow_of(packet: &[u8]) -> Result<Flow> {
    match ip_version(packet)? {
        IpVersion::V4 => flow_of_v4(packet),
        IpVersion::V6 => flow_of_v6(packet),
    }
}

fn flow_of_v4(bytes: &[u8]) -> Result<Flow> {
    let packet = Ipv4Packet::new_checked(bytes)?;
    let protocol = packet.protocol();
    let (src_port, dst_port) = match packet.frag_offset() {
        0 => ports(protocol, packet.payload())?,
        _ => (0, 0),
    };
    Ok(Flow {
        src: packet.src_addr().into(),
        dst: packet.dst_addr().into(),
        protocol,
        src_port,
        dst_port,
    })
}

fn flow_of_v6(bytes: &[u8]) -> Result<Flow> {
    let packet = Ipv6Packet::new_checked(bytes)?;
    let upper = ipv6::walk(&packet, |protocol, _| {
        protocol.is_ipv6_extension() && protocol != IpProtocol::MOBILITY
    })?;
    let (src_port, dst_port) = match upper.is_later_fragment() {
        false => ports(
            upper.protocol,
            packet.packet().get(upper.offset..).unwrap_or_default(),
        )?,
        true => (0, 0),
    };
    Ok(Flow {
        src: packet.src_addr().into(),
        dst: packet.dst_addr().into(),
        protocol: upper.protocol,
        src_port,
        dst_port,
    })
}

/// The two port selectors from the start of the next layer header.
fn ports(protocol: IpProtocol, header: &[u8]) -> Result<(u16, u16)> {
    let octet = |at: usize| header.get(at).copied().ok_or(Error::Truncated);
    let word = |at: usize| Ok(u16::from_be_bytes([octet(at)?, octet(at + 1)?]));
    match protocol {
        IpProtocol::TCP
        | IpProtocol::UDP
        | IpProtocol::SCTP
        | IpProtocol::DCCP
        | IpProtocol::UDPLITE => Ok((word(0)?, word(2)?)),
        IpProtocol::ICMP | IpProtocol::ICMPV6 => Ok((octet(0)?.into(), octet(1)?.into())),
        // RFC 6275 §6.1.1: Payload Proto, Header Len, MH Type.
        IpProtocol::MOBILITY => Ok((octet(2)?.into(), 0)),
        _ => Ok((0, 0)),
    }
}

#[cfg(test)]
mod tests;
