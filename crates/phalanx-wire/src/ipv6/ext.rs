//! IPv6 extension headers: the generic format (RFC 8200 §4, RFC 6564 §4),
//! the Fragment header (RFC 8200 §4.5) and the TLV options of the
//! Hop-by-Hop and Destination Options headers (RFC 8200 §4.2).

use core::ops::Range;

use crate::error::{Error, Result};
use crate::field::{clamp, read_u16, read_u32, view, write_u16, write_u32};
use crate::iana::IpProtocol;

// Generic extension header (RFC 8200 §4.3, §4.4, §4.6; RFC 6564 §4):
//
//  0                   1                   2                   3
//  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |  Next Header  |  Hdr Ext Len  |                               |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
// |                                                               |
// .                  Header Specific Data (variable)              .
// |                                                               |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Hdr Ext Len counts 8-octet units after the first 8 octets.

view! {
    /// A view of an extension header in the generic format: Hop-by-Hop,
    /// Routing, Destination Options and the RFC 7045 ones that follow
    /// RFC 6564 (Mobility, HIP, Shim6). Not for the Fragment header, whose
    /// second octet is reserved, nor AH, which counts 4-octet units.
    Ipv6ExtHeader
}

impl<T: AsRef<[u8]>> Ipv6ExtHeader<T> {
    /// Checks that the first two octets and the whole `header_len` fit.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < 2 || self.header_len() > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The Next Header field.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[0])
    }

    /// The Hdr Ext Len field: 8-octet units, not counting the first 8.
    pub fn hdr_ext_len(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Length of this header in octets: `(Hdr Ext Len + 1) * 8`.
    pub fn header_len(&self) -> usize {
        (usize::from(self.hdr_ext_len()) + 1) * 8
    }

    /// The header-specific data after the first two octets (for Hop-by-Hop
    /// and Destination Options: the options, see [`Ipv6Options`]).
    pub fn data(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[clamp(2, self.header_len(), buf.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6ExtHeader<T> {
    /// Sets the Next Header field.
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[0] = value.0;
    }

    /// Sets the Hdr Ext Len field.
    pub fn set_hdr_ext_len(&mut self, value: u8) {
        self.buffer.as_mut()[1] = value;
    }

    /// The header-specific data, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        let buf = self.buffer.as_mut();
        let range = clamp(2, end, buf.len());
        &mut buf[range]
    }
}

// Fragment header (RFC 8200 §4.5):
//
//  0                   1                   2                   3
//  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |  Next Header  |   Reserved    |      Fragment Offset    |Res|M|
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |                         Identification                        |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+

/// Length of the Fragment header.
pub const FRAGMENT_HEADER_LEN: usize = 8;

view! {
    /// A view of the IPv6 Fragment header.
    Ipv6FragmentHeader
}

impl<T: AsRef<[u8]>> Ipv6FragmentHeader<T> {
    /// Checks that the 8 octets fit.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < FRAGMENT_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The Next Header field: the first header of the fragmentable part.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[0])
    }

    /// The Fragment Offset, in units of 8 octets.
    pub fn frag_offset(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 2) >> 3
    }

    /// The M flag: more fragments follow.
    pub fn more_frags(&self) -> bool {
        read_u16(self.buffer.as_ref(), 2) & 1 != 0
    }

    /// The Identification field.
    pub fn ident(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 4)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6FragmentHeader<T> {
    /// Writes a whole Fragment header (reserved fields zero).
    pub fn fill(&mut self, next_header: IpProtocol, frag_offset: u16, more: bool, ident: u32) {
        let buf = self.buffer.as_mut();
        buf[0] = next_header.0;
        buf[1] = 0;
        write_u16(buf, 2, (frag_offset << 3) | u16::from(more));
        write_u32(buf, 4, ident);
    }
}

/// RFC 8200 §4.2: the Pad1 option is a single zero octet with no length.
const OPTION_PAD1: u8 = 0;

/// One TLV option of a Hop-by-Hop or Destination Options header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Option {
    /// The Option Type octet.
    pub option_type: u8,
    /// Where the Option Data lies in the slice given to [`Ipv6Options::new`].
    pub data: Range<usize>,
}

impl Ipv6Option {
    /// RFC 8200 §4.2: the two high bits say what a node that does not know
    /// the option must do (0 skip, 1 discard, 2 and 3 discard + ICMP).
    pub fn action(&self) -> u8 {
        self.option_type >> 6
    }

    /// RFC 8200 §4.2: the third-highest bit set means the Option Data may
    /// change en route; AH treats such data as zero (RFC 4302 §3.3.3.1.2.2).
    pub fn may_change(&self) -> bool {
        self.option_type & 0x20 != 0
    }
}

/// Iterator over the TLV options in the data of a Hop-by-Hop or Destination
/// Options header (pass [`Ipv6ExtHeader::data`]). Pad1 is yielded like any
/// option, with empty data. An option that overruns the area yields
/// `Err(Error::Truncated)` once and ends the iteration.
#[derive(Debug, Clone)]
pub struct Ipv6Options<'a> {
    area: &'a [u8],
    at: usize,
}

impl<'a> Ipv6Options<'a> {
    /// Iterates over `area`, the octets after Next Header and Hdr Ext Len.
    pub fn new(area: &'a [u8]) -> Self {
        Ipv6Options { area, at: 0 }
    }
}

impl Iterator for Ipv6Options<'_> {
    type Item = Result<Ipv6Option>;

    fn next(&mut self) -> Option<Self::Item> {
        let option_type = *self.area.get(self.at)?;
        if option_type == OPTION_PAD1 {
            self.at += 1;
            return Some(Ok(Ipv6Option {
                option_type,
                data: self.at..self.at,
            }));
        }
        let Some(&len) = self.area.get(self.at + 1) else {
            self.at = self.area.len();
            return Some(Err(Error::Truncated));
        };
        let start = self.at + 2;
        let end = start + usize::from(len);
        if end > self.area.len() {
            self.at = self.area.len();
            return Some(Err(Error::Truncated));
        }
        self.at = end;
        Some(Ok(Ipv6Option {
            option_type,
            data: start..end,
        }))
    }
}
