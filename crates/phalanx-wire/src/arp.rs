//! ARP, the Address Resolution Protocol (RFC 826), for Ethernet and IPv4:
//! what a cluster node needs to answer for the cluster's virtual address
//! and to announce it after a takeover.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    Hardware Type (ar$hrd)     |    Protocol Type (ar$pro)     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | HW Len (ar$hln)| Pr Len(ar$pln)|      Operation (ar$op)       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |        Sender Hardware Address (ar$sha, ar$hln octets)        |
//! ~        Sender Protocol Address (ar$spa, ar$pln octets)        ~
//! |        Target Hardware Address (ar$tha, ar$hln octets)        |
//! ~        Target Protocol Address (ar$tpa, ar$pln octets)        ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The view ([`ArpPacket`]) reads any hardware and protocol type, bounded
//! by the packet's own address lengths (octets after them, such as
//! Ethernet padding, are ignored). The representation ([`ArpRepr`]) is
//! Ethernet/IPv4 only (hardware type 1 with 6-octet addresses, protocol
//! type 0x0800 with 4-octet addresses); anything else is a typed
//! [`ArpError`] the caller can count.

use core::fmt;
use core::net::Ipv4Addr;

use crate::error::{Error, Result};
use crate::ethernet::{
    EtherType, EthernetFrame, EthernetRepr, MacAddress, VlanTag, HEADER_LEN, MIN_FRAME_LEN,
    VLAN_TAG_LEN,
};
use crate::field::{read_u16, view, write_u16};

/// Length of the fixed part: types, lengths and operation.
pub const FIXED_LEN: usize = 8;
/// Length of an Ethernet/IPv4 ARP packet (8 + 2 × (6 + 4)).
pub const ETHERNET_IPV4_LEN: usize = FIXED_LEN + 2 * (6 + 4);

mod field {
    pub(super) const HARDWARE_TYPE: usize = 0;
    pub(super) const PROTOCOL_TYPE: usize = 2;
    pub(super) const HARDWARE_LEN: usize = 4;
    pub(super) const PROTOCOL_LEN: usize = 5;
    pub(super) const OPERATION: usize = 6;
}

open_enum! {
    /// IANA "Address Resolution Protocol (ARP) Parameters", Hardware Types
    /// (ar$hrd).
    ArpHardware(u16) {
        /// Ethernet (10Mb), RFC 826's `ares_hrd$Ethernet`: every Ethernet.
        ETHERNET = 1,
        /// IEEE 802 networks (RFC 1042).
        IEEE802 = 6,
    }
}

open_enum! {
    /// IANA "Address Resolution Protocol (ARP) Parameters", Operation Codes
    /// (ar$op).
    ArpOperation(u16) {
        /// `ares_op$REQUEST` (RFC 826).
        REQUEST = 1,
        /// `ares_op$REPLY` (RFC 826).
        REPLY = 2,
        /// RARP request (RFC 903).
        REVERSE_REQUEST = 3,
        /// RARP reply (RFC 903).
        REVERSE_REPLY = 4,
        /// Inverse ARP request (RFC 2390).
        INARP_REQUEST = 8,
        /// Inverse ARP reply (RFC 2390).
        INARP_REPLY = 9,
    }
}

/// Why an ARP packet is not an Ethernet/IPv4 one [`ArpRepr`] describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ArpError {
    /// Shorter than the fixed part or than the addresses its lengths
    /// announce.
    Truncated,
    /// A hardware type other than Ethernet.
    UnsupportedHardware(ArpHardware),
    /// A protocol type other than IPv4.
    UnsupportedProtocol(EtherType),
    /// Ethernet and IPv4, but address lengths other than 6 and 4.
    AddressLength {
        /// ar$hln as received.
        hardware: u8,
        /// ar$pln as received.
        protocol: u8,
    },
}

impl fmt::Display for ArpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArpError::Truncated => f.write_str("ARP packet shorter than its address lengths"),
            ArpError::UnsupportedHardware(h) => write!(f, "ARP hardware type {h} is not Ethernet"),
            ArpError::UnsupportedProtocol(p) => write!(f, "ARP protocol type {p} is not IPv4"),
            ArpError::AddressLength { hardware, protocol } => {
                write!(f, "ARP address lengths {hardware}/{protocol}, not 6/4")
            }
        }
    }
}

impl core::error::Error for ArpError {}

view! {
    /// A read (and, over `AsMut` buffers, write) view of an ARP packet.
    ArpPacket
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Checks that the fixed part and the four addresses its lengths
    /// announce fit the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < FIXED_LEN || len < self.packet_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// ar$hrd, the Hardware Type.
    pub fn hardware_type(&self) -> ArpHardware {
        ArpHardware(read_u16(self.buffer.as_ref(), field::HARDWARE_TYPE))
    }

    /// ar$pro, the Protocol Type (an EtherType, RFC 826).
    pub fn protocol_type(&self) -> EtherType {
        EtherType(read_u16(self.buffer.as_ref(), field::PROTOCOL_TYPE))
    }

    /// ar$hln, octets of each hardware address.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HARDWARE_LEN]
    }

    /// ar$pln, octets of each protocol address.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL_LEN]
    }

    /// ar$op, the Operation.
    pub fn operation(&self) -> ArpOperation {
        ArpOperation(read_u16(self.buffer.as_ref(), field::OPERATION))
    }

    /// Octets the packet covers: the fixed part and four addresses.
    pub fn packet_len(&self) -> usize {
        FIXED_LEN + 2 * (usize::from(self.hardware_len()) + usize::from(self.protocol_len()))
    }

    /// ar$sha, the Sender Hardware Address.
    pub fn sender_hardware_addr(&self) -> &[u8] {
        self.address(0, self.hardware_len())
    }

    /// ar$spa, the Sender Protocol Address.
    pub fn sender_protocol_addr(&self) -> &[u8] {
        self.address(usize::from(self.hardware_len()), self.protocol_len())
    }

    /// ar$tha, the Target Hardware Address.
    pub fn target_hardware_addr(&self) -> &[u8] {
        let at = usize::from(self.hardware_len()) + usize::from(self.protocol_len());
        self.address(at, self.hardware_len())
    }

    /// ar$tpa, the Target Protocol Address.
    pub fn target_protocol_addr(&self) -> &[u8] {
        let at = 2 * usize::from(self.hardware_len()) + usize::from(self.protocol_len());
        self.address(at, self.protocol_len())
    }

    /// `len` octets at `at` after the fixed part, clamped to the buffer.
    fn address(&self, at: usize, len: u8) -> &[u8] {
        let buf = self.buffer.as_ref();
        let start = (FIXED_LEN + at).min(buf.len());
        let end = (start + usize::from(len)).min(buf.len());
        &buf[start..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Sets ar$hrd.
    pub fn set_hardware_type(&mut self, value: ArpHardware) {
        write_u16(self.buffer.as_mut(), field::HARDWARE_TYPE, value.0);
    }

    /// Sets ar$pro.
    pub fn set_protocol_type(&mut self, value: EtherType) {
        write_u16(self.buffer.as_mut(), field::PROTOCOL_TYPE, value.0);
    }

    /// Sets ar$hln.
    pub fn set_hardware_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::HARDWARE_LEN] = value;
    }

    /// Sets ar$pln.
    pub fn set_protocol_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PROTOCOL_LEN] = value;
    }

    /// Sets ar$op.
    pub fn set_operation(&mut self, value: ArpOperation) {
        write_u16(self.buffer.as_mut(), field::OPERATION, value.0);
    }
}

/// An Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// ar$op.
    pub operation: ArpOperation,
    /// ar$sha.
    pub sender_mac: MacAddress,
    /// ar$spa.
    pub sender_ip: Ipv4Addr,
    /// ar$tha (all zeroes in a request: not known yet).
    pub target_mac: MacAddress,
    /// ar$tpa.
    pub target_ip: Ipv4Addr,
}

impl ArpRepr {
    /// Reads an Ethernet/IPv4 packet; other hardware or protocol types and
    /// other address lengths are typed errors. Any operation is accepted
    /// (it is data: the caller decides what to answer).
    pub fn parse<T: AsRef<[u8]>>(packet: &ArpPacket<T>) -> core::result::Result<Self, ArpError> {
        packet.check_len().map_err(|_| ArpError::Truncated)?;
        if packet.hardware_type() != ArpHardware::ETHERNET {
            return Err(ArpError::UnsupportedHardware(packet.hardware_type()));
        }
        if packet.protocol_type() != EtherType::IPV4 {
            return Err(ArpError::UnsupportedProtocol(packet.protocol_type()));
        }
        let (hardware, protocol) = (packet.hardware_len(), packet.protocol_len());
        let wrong_length = ArpError::AddressLength { hardware, protocol };
        if (hardware, protocol) != (6, 4) {
            return Err(wrong_length);
        }
        // check_len proved all four addresses present at these lengths.
        let (Some(sender_mac), Some(sender_ip), Some(target_mac), Some(target_ip)) = (
            MacAddress::from_slice(packet.sender_hardware_addr()),
            ipv4_from(packet.sender_protocol_addr()),
            MacAddress::from_slice(packet.target_hardware_addr()),
            ipv4_from(packet.target_protocol_addr()),
        ) else {
            return Err(wrong_length);
        };
        Ok(ArpRepr {
            operation: packet.operation(),
            sender_mac,
            sender_ip,
            target_mac,
            target_ip,
        })
    }

    /// Octets [`Self::emit`] writes: [`ETHERNET_IPV4_LEN`].
    pub const fn buffer_len(&self) -> usize {
        ETHERNET_IPV4_LEN
    }

    /// Writes the packet (hardware type Ethernet, protocol type IPv4,
    /// lengths 6 and 4).
    ///
    /// Panics if the buffer is shorter than [`ETHERNET_IPV4_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) {
        packet.set_hardware_type(ArpHardware::ETHERNET);
        packet.set_protocol_type(EtherType::IPV4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.operation);
        let buf = &mut packet.buffer.as_mut()[FIXED_LEN..ETHERNET_IPV4_LEN];
        buf[0..6].copy_from_slice(&self.sender_mac.0);
        buf[6..10].copy_from_slice(&self.sender_ip.octets());
        buf[10..16].copy_from_slice(&self.target_mac.0);
        buf[16..20].copy_from_slice(&self.target_ip.octets());
    }

    /// Octets of the whole frame [`Self::emit_frame`] writes: header,
    /// packet and padding to [`MIN_FRAME_LEN`].
    pub const fn frame_len(&self, vlan: Option<VlanTag>) -> usize {
        let tag = if vlan.is_some() { VLAN_TAG_LEN } else { 0 };
        let len = HEADER_LEN + tag + ETHERNET_IPV4_LEN;
        if len < MIN_FRAME_LEN {
            MIN_FRAME_LEN
        } else {
            len
        }
    }

    /// The Ethernet destination this packet goes to: the requester for a
    /// reply (RFC 826), broadcast for anything else (requests and RFC 5227
    /// announcements).
    pub fn frame_dst(&self) -> MacAddress {
        if self.operation == ArpOperation::REPLY {
            self.target_mac
        } else {
            MacAddress::BROADCAST
        }
    }

    /// Writes a whole Ethernet frame into the front of `buf`: header from
    /// [`Self::sender_mac`] to [`Self::frame_dst`] (with `vlan`, if any),
    /// the packet, and zero padding to [`MIN_FRAME_LEN`]. Returns its
    /// length, or [`Error::Truncated`] if `buf` is shorter than
    /// [`Self::frame_len`].
    pub fn emit_frame(&self, vlan: Option<VlanTag>, buf: &mut [u8]) -> Result<usize> {
        let len = self.frame_len(vlan);
        let frame_buf = buf.get_mut(..len).ok_or(Error::Truncated)?;
        let header = EthernetRepr {
            dst_addr: self.frame_dst(),
            src_addr: self.sender_mac,
            vlan,
            ethertype: EtherType::ARP,
        };
        let mut frame = EthernetFrame::new_unchecked(frame_buf);
        header.emit(&mut frame);
        let payload = frame.payload_mut();
        let (packet, padding) = payload.split_at_mut(ETHERNET_IPV4_LEN);
        self.emit(&mut ArpPacket::new_unchecked(packet));
        padding.fill(0);
        Ok(len)
    }
}

fn ipv4_from(bytes: &[u8]) -> Option<Ipv4Addr> {
    let octets: [u8; 4] = bytes.try_into().ok()?;
    Some(Ipv4Addr::from(octets))
}

/// The reply to `request` from the owner of its target address, as RFC 826
/// builds it: "swap fields putting the hardware and protocol addresses of
/// the requestor in the target fields, put the local hardware and protocol
/// addresses in the sender fields", operation REPLY. Whether to answer
/// (the request's operation and target address) is the caller's decision.
pub fn arp_reply(request: &ArpRepr, our_mac: MacAddress) -> ArpRepr {
    ArpRepr {
        operation: ArpOperation::REPLY,
        sender_mac: our_mac,
        sender_ip: request.target_ip,
        target_mac: request.sender_mac,
        target_ip: request.sender_ip,
    }
}

/// A gratuitous ARP for `our_ip` at `our_mac`: an RFC 5227 §3 ARP
/// Announcement, a broadcast REQUEST whose sender and target protocol
/// addresses are both `our_ip` and whose target hardware address is zero.
/// A request rather than a reply because some stacks update their caches
/// only from requests (RFC 5227 §3). A new owner of a virtual address
/// sends it so that neighbours move to the new MAC at once.
pub fn gratuitous_arp(our_mac: MacAddress, our_ip: Ipv4Addr) -> ArpRepr {
    ArpRepr {
        operation: ArpOperation::REQUEST,
        sender_mac: our_mac,
        sender_ip: our_ip,
        target_mac: MacAddress::UNSPECIFIED,
        target_ip: our_ip,
    }
}

#[cfg(test)]
mod tests;
