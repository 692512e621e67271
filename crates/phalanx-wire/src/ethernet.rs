//! Ethernet II frames (IEEE 802.3 §3.2 with the Type reading of the
//! Length/Type field; RFC 894 carries IPv4 in them, RFC 2464 IPv6, RFC 826
//! ARP) and one IEEE 802.1Q VLAN tag.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                Destination Address (6 octets)                 |
//! +                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                               |                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//! |                   Source Address (6 octets)                   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          EtherType            |  payload ...
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! With an 802.1Q tag (IEEE 802.1Q §9.3, §9.6) four octets come first:
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    ... Source Address         |         TPID = 0x8100         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | PCP |D|         VID           |          EtherType            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The tag is reported ([`EthernetFrame::vlan`]) and never stripped: the
//! payload starts after it. Only the outer tag is read; a second (QinQ)
//! tag shows as EtherType [`EtherType::VLAN`] with the payload starting at
//! it. The frame check sequence is not part of the buffer (NICs strip it,
//! `AF_PACKET` never delivers it), and Ethernet has no length field: the
//! payload runs to the end of the buffer, padding included (frames shorter
//! than 60 octets are padded, IEEE 802.3 §3.2.8), so the payload's own
//! header (IPv4 Total Length, ARP's address lengths) tells where it ends.

use core::fmt;
use core::str::FromStr;

use crate::error::{Error, Result};
use crate::field::{read_u16, view, write_u16};

#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;

/// Length of an untagged Ethernet II header: two addresses and the type.
pub const HEADER_LEN: usize = 14;
/// Length of an 802.1Q tag (TPID and TCI).
pub const VLAN_TAG_LEN: usize = 4;
/// Shortest frame on the wire without its 4-octet FCS (IEEE 802.3 §4.4.2:
/// minFrameSize 64 octets); shorter frames are padded to it.
pub const MIN_FRAME_LEN: usize = 60;

mod field {
    use crate::field::Field;

    pub(super) const DESTINATION: Field = 0..6;
    pub(super) const SOURCE: Field = 6..12;
    /// The EtherType of an untagged frame, the TPID of a tagged one.
    pub(super) const OUTER_TYPE: usize = 12;
    pub(super) const TCI: usize = 14;
    pub(super) const INNER_TYPE: usize = 16;
}

open_enum! {
    /// IANA "IEEE 802 Numbers", EtherType (the Type reading of IEEE 802.3's
    /// Length/Type field; values below 0x0600 are lengths, see
    /// [`EtherType::is_length`]).
    EtherType(u16) {
        /// IPv4 (RFC 894).
        IPV4 = 0x0800,
        /// ARP (RFC 826).
        ARP = 0x0806,
        /// IEEE 802.1Q customer VLAN tag (C-TAG TPID).
        VLAN = 0x8100,
        /// IPv6 (RFC 2464).
        IPV6 = 0x86dd,
        /// IEEE 802.1ad service VLAN tag (S-TAG TPID), read as data only.
        QINQ = 0x88a8,
    }
}

impl EtherType {
    /// True for values IEEE 802.3 §3.2.6 reads as a length (an 802.3/LLC
    /// frame, not Ethernet II): 0x0000..=0x05DC, and 0x05DD..0x0600,
    /// which are neither and equally unusable here.
    pub fn is_length(self) -> bool {
        self.0 < 0x0600
    }
}

/// A 48-bit IEEE 802 MAC address (IEEE 802-2014 §8).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddress(pub [u8; 6]);

impl MacAddress {
    /// The broadcast address, all ones.
    pub const BROADCAST: MacAddress = MacAddress([0xff; 6]);
    /// All zeroes: "unknown", as in the target of an ARP request (RFC 826).
    pub const UNSPECIFIED: MacAddress = MacAddress([0; 6]);

    /// The six octets.
    pub const fn octets(self) -> [u8; 6] {
        self.0
    }

    /// The address at the front of `bytes`, if there are six octets.
    pub fn from_slice(bytes: &[u8]) -> Option<MacAddress> {
        let octets: [u8; 6] = bytes.get(..6)?.try_into().ok()?;
        Some(MacAddress(octets))
    }

    /// All ones.
    pub fn is_broadcast(self) -> bool {
        self == Self::BROADCAST
    }

    /// The I/G bit (least significant bit of the first octet, IEEE 802
    /// §8.2) is set: a group address. Broadcast is one.
    pub fn is_multicast(self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// An individual address other than all zeroes.
    pub fn is_unicast(self) -> bool {
        !self.is_multicast() && self != Self::UNSPECIFIED
    }

    /// The U/L bit (second bit of the first octet, IEEE 802 §8.2) is set:
    /// a locally administered address, like a cluster's virtual MAC.
    pub fn is_locally_administered(self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for MacAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl fmt::Debug for MacAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for MacAddress {
    type Err = Error;

    /// Six groups of two hex digits separated by `:` or `-`
    /// (`02:00:5e:00:01:01`); anything else is [`Error::Malformed`].
    fn from_str(s: &str) -> Result<Self> {
        let bytes = s.as_bytes();
        if bytes.len() != 17 {
            return Err(Error::Malformed);
        }
        let mut octets = [0u8; 6];
        for (i, octet) in octets.iter_mut().enumerate() {
            let at = i * 3;
            if i > 0 && !matches!(bytes[at - 1], b':' | b'-') {
                return Err(Error::Malformed);
            }
            *octet = hex_digit(bytes[at])? << 4 | hex_digit(bytes[at + 1])?;
        }
        Ok(MacAddress(octets))
    }
}

fn hex_digit(c: u8) -> Result<u8> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err(Error::Malformed),
    }
}

/// The Tag Control Information of an 802.1Q tag (IEEE 802.1Q §9.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    /// Priority Code Point, 3 bits (IEEE 802.1Q §6.9.3).
    pub pcp: u8,
    /// Drop Eligible Indicator.
    pub dei: bool,
    /// VLAN Identifier, 12 bits (0: priority tag only; 0xFFF reserved).
    pub vid: u16,
}

impl VlanTag {
    /// Splits a 16-bit TCI: PCP (3 bits), DEI (1), VID (12).
    pub const fn from_tci(tci: u16) -> VlanTag {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }

    /// The 16-bit TCI; PCP and VID are cut to their 3 and 12 bits.
    pub const fn tci(self) -> u16 {
        ((self.pcp as u16 & 0x7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0fff)
    }
}

view! {
    /// A read (and, over `AsMut` buffers, write) view of an Ethernet II
    /// frame, FCS excluded.
    EthernetFrame
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Checks that the header, and the 802.1Q tag when the outer type
    /// announces one, fit the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The Destination Address.
    pub fn dst_addr(&self) -> MacAddress {
        mac_at(self.buffer.as_ref(), field::DESTINATION.start)
    }

    /// The Source Address.
    pub fn src_addr(&self) -> MacAddress {
        mac_at(self.buffer.as_ref(), field::SOURCE.start)
    }

    /// The type field after the source address: the EtherType of an
    /// untagged frame, the TPID ([`EtherType::VLAN`]) of a tagged one.
    pub fn outer_ethertype(&self) -> EtherType {
        EtherType(read_u16(self.buffer.as_ref(), field::OUTER_TYPE))
    }

    /// The 802.1Q tag, if the frame carries one.
    pub fn vlan(&self) -> Option<VlanTag> {
        self.is_tagged()
            .then(|| VlanTag::from_tci(read_u16(self.buffer.as_ref(), field::TCI)))
    }

    /// The EtherType of the payload, after the tag if there is one.
    pub fn ethertype(&self) -> EtherType {
        let at = if self.is_tagged() {
            field::INNER_TYPE
        } else {
            field::OUTER_TYPE
        };
        EtherType(read_u16(self.buffer.as_ref(), at))
    }

    /// Octets before the payload: 14, or 18 with an 802.1Q tag.
    pub fn header_len(&self) -> usize {
        if self.is_tagged() {
            HEADER_LEN + VLAN_TAG_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Everything after the header, padding included.
    pub fn payload(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        buf.get(self.header_len()..).unwrap_or(&[])
    }

    fn is_tagged(&self) -> bool {
        self.outer_ethertype() == EtherType::VLAN
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the Destination Address.
    pub fn set_dst_addr(&mut self, value: MacAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&value.0);
    }

    /// Sets the Source Address.
    pub fn set_src_addr(&mut self, value: MacAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&value.0);
    }

    /// Sets the payload's EtherType (after the tag of a tagged frame).
    pub fn set_ethertype(&mut self, value: EtherType) {
        let at = if self.is_tagged() {
            field::INNER_TYPE
        } else {
            field::OUTER_TYPE
        };
        write_u16(self.buffer.as_mut(), at, value.0);
    }

    /// Everything after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let at = self.header_len();
        let buf = self.buffer.as_mut();
        let at = at.min(buf.len());
        &mut buf[at..]
    }
}

fn mac_at(buf: &[u8], at: usize) -> MacAddress {
    MacAddress([
        buf[at],
        buf[at + 1],
        buf[at + 2],
        buf[at + 3],
        buf[at + 4],
        buf[at + 5],
    ])
}

/// A high-level description of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Destination Address.
    pub dst_addr: MacAddress,
    /// Source Address.
    pub src_addr: MacAddress,
    /// The 802.1Q tag, if any.
    pub vlan: Option<VlanTag>,
    /// The payload's EtherType.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Reads a checked frame. A type below 0x0600 is an 802.3 length
    /// (an LLC frame, IEEE 802.3 §3.2.6), which this gateway does not
    /// speak: [`Error::Malformed`].
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<Self> {
        frame.check_len()?;
        let ethertype = frame.ethertype();
        if ethertype.is_length() {
            return Err(Error::Malformed);
        }
        Ok(EthernetRepr {
            dst_addr: frame.dst_addr(),
            src_addr: frame.src_addr(),
            vlan: frame.vlan(),
            ethertype,
        })
    }

    /// Octets [`Self::emit`] writes: 14, or 18 with a tag.
    pub const fn header_len(&self) -> usize {
        if self.vlan.is_some() {
            HEADER_LEN + VLAN_TAG_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Writes the header; the payload follows at [`Self::header_len`].
    ///
    /// Panics if the buffer is shorter than [`Self::header_len`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        let buf = frame.buffer.as_mut();
        buf[field::DESTINATION].copy_from_slice(&self.dst_addr.0);
        buf[field::SOURCE].copy_from_slice(&self.src_addr.0);
        match self.vlan {
            Some(tag) => {
                write_u16(buf, field::OUTER_TYPE, EtherType::VLAN.0);
                write_u16(buf, field::TCI, tag.tci());
                write_u16(buf, field::INNER_TYPE, self.ethertype.0);
            }
            None => write_u16(buf, field::OUTER_TYPE, self.ethertype.0),
        }
    }
}

#[cfg(test)]
mod tests;
