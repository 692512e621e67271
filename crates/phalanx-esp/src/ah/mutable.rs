//! The IP header fields AH treats as zero for the ICV (RFC 4302 §3.3.3.1):
//! the ones routers may change in transit.
//!
//! The caller first saves the header bytes in front of AH (behind the
//! packet, in the tailroom), zeroes the mutable fields here, runs the
//! engine, and copies the saved bytes back. The walk reads the saved copy
//! (options whose type and length bytes are zeroed would otherwise end it
//! early) and writes the live header.

use phalanx_wire::ipv6::{Ipv6ExtHeader, Ipv6Options};
use phalanx_wire::IpProtocol;

use crate::ip::Family;
use phalanx_wire::ipv4::HEADER_LEN as IPV4_HEADER_LEN;
use phalanx_wire::ipv6::{HEADER_LEN as IPV6_HEADER_LEN, MAX_EXTENSION_HEADERS};

/// IPv4 options that do not change in transit and so stay in the ICV
/// (RFC 4302 Appendix A.1): End of Option List, No Operation, Security,
/// Extended Security, Commercial Security, Router Alert, and Sender
/// Directed Multi-Destination Delivery. Every other option, unknown ones
/// included, is zeroed whole (type and length too, RFC 4302 §3.3.3.1.1.2).
const IMMUTABLE_V4_OPTIONS: [u8; 7] = [0, 1, 130, 133, 134, 148, 149];

/// Zeroes the mutable fields of `header` (the bytes in front of the AH
/// header), reading the structure from `original`, an unchanged copy of
/// the same bytes. False when the options or extension headers are
/// malformed (then `header` is partly zeroed and must be dropped).
pub(crate) fn zero(header: &mut [u8], original: &[u8], family: Family) -> bool {
    if header.len() != original.len() {
        return false;
    }
    match family {
        Family::V4 => zero_v4(header, original),
        Family::V6 => zero_v6(header, original),
    }
}

/// IPv4 (RFC 4302 §3.3.3.1.1.1): TOS, Flags + Fragment Offset, TTL and
/// Header Checksum are mutable; options per Appendix A.1.
fn zero_v4(header: &mut [u8], original: &[u8]) -> bool {
    if header.len() < IPV4_HEADER_LEN {
        return false;
    }
    header[1] = 0;
    header[6..9].fill(0);
    header[10..12].fill(0);
    zero_v4_options(&mut header[IPV4_HEADER_LEN..], &original[IPV4_HEADER_LEN..])
}

fn zero_v4_options(options: &mut [u8], original: &[u8]) -> bool {
    let mut at = 0;
    while let Some(&kind) = original.get(at) {
        match kind {
            // End of Option List: the rest is padding, which is immutable.
            0 => return true,
            // No Operation: a single octet.
            1 => at += 1,
            _ => {
                let len = original.get(at + 1).map_or(0, |&l| usize::from(l));
                if len < 2 || at + len > original.len() {
                    return false;
                }
                if !IMMUTABLE_V4_OPTIONS.contains(&kind) {
                    options[at..at + len].fill(0);
                }
                at += len;
            }
        }
    }
    true
}

/// IPv6 (RFC 4302 §3.3.3.1.2): Traffic Class, Flow Label and Hop Limit
/// are mutable (the version nibble is not); in the Hop-by-Hop and
/// Destination Options headers, the data of every option whose "may
/// change" bit is set (RFC 8200 §4.2). Routing headers are kept as they
/// are (see the crate documentation).
fn zero_v6(header: &mut [u8], original: &[u8]) -> bool {
    if header.len() < IPV6_HEADER_LEN {
        return false;
    }
    header[0] &= 0xf0;
    header[1..4].fill(0);
    header[7] = 0;
    let mut protocol = IpProtocol(original[6]);
    let mut at = IPV6_HEADER_LEN;
    for _ in 0..MAX_EXTENSION_HEADERS {
        if at >= original.len() {
            return at == original.len();
        }
        let Ok(ext) = Ipv6ExtHeader::new_checked(&original[at..]) else {
            return false;
        };
        if matches!(protocol, IpProtocol::HOPOPT | IpProtocol::IPV6_OPTS)
            && !zero_v6_options(&mut header[at + 2..], ext.data())
        {
            return false;
        }
        protocol = ext.next_header();
        at += ext.header_len();
    }
    at == original.len()
}

/// Zeroes, in `area` (the bytes after Next Header and Hdr Ext Len), the
/// data of each option of `original` that may change en route.
fn zero_v6_options(area: &mut [u8], original: &[u8]) -> bool {
    for option in Ipv6Options::new(original) {
        let Ok(option) = option else { return false };
        if option.may_change() {
            if let Some(data) = area.get_mut(option.data) {
                data.fill(0);
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_fixed_fields_and_options() {
        // IHL 8; options: NOP, Record Route (7, length 7, pointer 4, one
        // address), Router Alert (148, length 4), End of Option List.
        let mut hdr = vec![
            0x48, 0xb8, 0, 44, 0x12, 0x34, 0x40, 0x00, 64, 51, 0xab, 0xcd, 10, 0, 0, 1, 10, 0, 0,
            2, // fixed
            1, 7, 7, 4, 1, 2, 3, 4, 148, 4, 0, 0, 0, // options
        ];
        hdr.resize(32, 0);
        let original = hdr.clone();
        assert!(zero(&mut hdr, &original, Family::V4));
        assert_eq!(&hdr[..12], &[0x48, 0, 0, 44, 0x12, 0x34, 0, 0, 0, 51, 0, 0]);
        assert_eq!(&hdr[12..20], &original[12..20], "addresses are immutable");
        assert_eq!(hdr[20], 1, "NOP kept");
        assert_eq!(&hdr[21..28], &[0; 7], "record route zeroed whole");
        assert_eq!(&hdr[28..32], &[148, 4, 0, 0], "router alert kept");
    }

    #[test]
    fn v4_malformed_option() {
        let mut hdr = vec![
            0x46, 0, 0, 24, 0, 0, 0, 0, 64, 51, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
        ];
        hdr.extend_from_slice(&[7, 9, 0, 0]);
        let original = hdr.clone();
        assert!(!zero(&mut hdr, &original, Family::V4));
    }

    #[test]
    fn v6_fixed_fields_and_hop_by_hop() {
        let mut hdr = vec![0u8; 48];
        hdr[..8].copy_from_slice(&[0x6b, 0x81, 0x23, 0x45, 0, 16, 0, 64]);
        // Hop-by-Hop: next AH, length 0; option 0x3e ("may change") with 2
        // data bytes; two Pad1.
        hdr[40..48].copy_from_slice(&[51, 0, 0x3e, 2, 0xaa, 0xbb, 0, 0]);
        let original = hdr.clone();
        assert!(zero(&mut hdr, &original, Family::V6));
        assert_eq!(&hdr[..8], &[0x60, 0, 0, 0, 0, 16, 0, 0]);
        assert_eq!(&hdr[40..48], &[51, 0, 0x3e, 2, 0, 0, 0, 0]);
        let mut fixed = original.clone();
        fixed[42] = 0x05; // Router Alert: may not change, data kept.
        let copy = fixed.clone();
        assert!(zero(&mut fixed, &copy, Family::V6));
        assert_eq!(&fixed[44..46], &[0xaa, 0xbb]);
    }
}
