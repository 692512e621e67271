//! The walk along the IPv6 Next Header chain (RFC 8200 §4.1, RFC 7045).
//!
//! Every step is bounded: the chain is cut at [`MAX_EXTENSION_HEADERS`]
//! headers and each header must lie inside Payload Length.

use super::ext::{Ipv6ExtHeader, Ipv6FragmentHeader, FRAGMENT_HEADER_LEN};
use super::{Ipv6Packet, HEADER_LEN, NEXT_HEADER_OFFSET};
use crate::error::{Error, Result};
use crate::iana::IpProtocol;

/// Most extension headers a walk follows before giving up. RFC 8200 §4.1
/// recommends at most one of each (Destination Options twice): seven in a
/// sane packet; a longer chain is refused rather than walked.
pub const MAX_EXTENSION_HEADERS: usize = 16;

/// Where the walk stopped: the protocol that follows the extension headers
/// and where it starts. All offsets count from the start of the IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UpperLayer {
    /// The protocol the walk stopped at (upper layer, ESP, AH, No Next
    /// Header, or any value that is not a walked extension header).
    pub protocol: IpProtocol,
    /// Offset of that protocol's header.
    pub offset: usize,
    /// Offset of the Next Header octet that names `protocol`: 6 in the fixed
    /// header, or the first octet of the last extension header. Transport
    /// mode ESP/AH overwrites it to splice its header in.
    pub last_next_header_offset: usize,
    /// A Fragment header was passed.
    pub is_fragment: bool,
    /// That Fragment header's offset in 8-octet units (0 when none). When
    /// non-zero, the octets at `offset` continue a header in an earlier
    /// fragment: no upper-layer header is there (RFC 8200 §4.5).
    pub fragment_offset: u16,
}

impl UpperLayer {
    /// True for a fragment other than the first, which carries no
    /// upper-layer header (ports are unknown, RFC 4301 §4.4.1.1).
    pub fn is_later_fragment(&self) -> bool {
        self.is_fragment && self.fragment_offset != 0
    }
}

/// Walks from the fixed header past every extension header that
/// [`IpProtocol::is_ipv6_extension`] names, and stops at the first other
/// protocol (ESP, AH, No Next Header, an upper layer or an unknown value), or
/// right after a Fragment header with a non-zero offset.
///
/// Errors: [`Error::Truncated`] when a header runs past Payload Length,
/// [`Error::Malformed`] for a Hop-by-Hop header anywhere but first
/// (RFC 8200 §4.3) or a second Fragment header, [`Error::TooManyHeaders`].
pub fn upper_layer<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<UpperLayer> {
    walk(packet, |protocol, _| protocol.is_ipv6_extension())
}

/// Where transport-mode ESP or AH goes: after Hop-by-Hop, Routing and
/// Fragment headers, and after a Destination Options header that precedes a
/// Routing header (it is read at every listed hop); a Destination Options
/// header for the final destination, and everything after it, is protected
/// (RFC 4303 §3.1.1, RFC 4302 §3.1.1). `protocol` is what the ESP/AH Next
/// Header must name, `offset` where the ESP/AH header is inserted, and
/// `last_next_header_offset` the octet to overwrite with 50 or 51.
pub fn ipsec_insertion_point<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<UpperLayer> {
    walk(packet, |protocol, header| match protocol {
        IpProtocol::HOPOPT | IpProtocol::IPV6_ROUTE | IpProtocol::IPV6_FRAG => true,
        IpProtocol::IPV6_OPTS => header.first() == Some(&IpProtocol::IPV6_ROUTE.0),
        _ => false,
    })
}

/// The walk behind [`upper_layer`]: `follow(protocol, rest)` says whether the
/// header `protocol`, whose octets start `rest`, is stepped over.
pub(crate) fn walk<T, F>(packet: &Ipv6Packet<T>, follow: F) -> Result<UpperLayer>
where
    T: AsRef<[u8]>,
    F: Fn(IpProtocol, &[u8]) -> bool,
{
    packet.check_len()?;
    let packet_bytes = packet.packet();
    let mut here = UpperLayer {
        protocol: packet.next_header(),
        offset: HEADER_LEN,
        last_next_header_offset: NEXT_HEADER_OFFSET,
        is_fragment: false,
        fragment_offset: 0,
    };
    for _ in 0..MAX_EXTENSION_HEADERS {
        // `offset` never passes the end: each step checks its header fits.
        let rest = packet_bytes.get(here.offset..).unwrap_or_default();
        if !follow(here.protocol, rest) {
            return Ok(here);
        }
        step(&mut here, rest)?;
        if here.is_later_fragment() {
            return Ok(here);
        }
    }
    match follow(
        here.protocol,
        packet_bytes.get(here.offset..).unwrap_or_default(),
    ) {
        true => Err(Error::TooManyHeaders),
        false => Ok(here),
    }
}

/// Steps over the extension header `here.protocol` that starts `rest`.
fn step(here: &mut UpperLayer, rest: &[u8]) -> Result<()> {
    let (next, len) = match here.protocol {
        // RFC 8200 §4.3: Hop-by-Hop only immediately after the fixed header.
        IpProtocol::HOPOPT if here.offset != HEADER_LEN => return Err(Error::Malformed),
        IpProtocol::IPV6_FRAG => {
            // RFC 8200 §4.1: at most one Fragment header.
            if here.is_fragment {
                return Err(Error::Malformed);
            }
            let frag = Ipv6FragmentHeader::new_checked(rest)?;
            here.is_fragment = true;
            here.fragment_offset = frag.frag_offset();
            (frag.next_header(), FRAGMENT_HEADER_LEN)
        }
        _ => {
            let ext = Ipv6ExtHeader::new_checked(rest)?;
            (ext.next_header(), ext.header_len())
        }
    };
    here.last_next_header_offset = here.offset;
    here.offset += len;
    here.protocol = next;
    Ok(())
}
