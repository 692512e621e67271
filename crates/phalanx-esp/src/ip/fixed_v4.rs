//! The IPv4 header without options (RFC 791 §3.1), the one every tunnel
//! packet has, handled as a 20-byte array on the packet path.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Version|  IHL  |Type of Service|          Total Length         |
//! |         Identification        |Flags|      Fragment Offset    |
//! |  Time to Live |    Protocol   |         Header Checksum       |
//! |                       Source Address                          |
//! |                    Destination Address                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! `phalanx_wire`'s views and `checksum::data` serve any header length;
//! over a fixed-size array the field offsets are checked once at compile
//! time and the RFC 1071 sum is five 32-bit additions. Each function here
//! gives the same bytes or answers as the general code (the tests compare
//! them), only cheaper per packet.

use core::net::Ipv4Addr;

use phalanx_wire::ipv4::HEADER_LEN;
use phalanx_wire::{IpProtocol, Ipv4Packet};

/// RFC 791: flag bit 1, "Don't Fragment", in the octet at offset 6.
const DF_OCTET_BIT: u8 = 0x40;

/// The first 20 bytes of `packet`, if it has them.
#[inline]
pub(crate) fn header(packet: &[u8]) -> Option<&[u8; HEADER_LEN]> {
    packet.first_chunk::<HEADER_LEN>()
}

/// The folded, uncomplemented one's-complement sum of a 20-byte header
/// (RFC 1071 §2: 16-bit words may be summed as wider words and folded).
#[inline]
pub(crate) fn sum(header: &[u8; HEADER_LEN]) -> u16 {
    let words = header.chunks_exact(4).map(|w| {
        let word: [u8; 4] = w.try_into().unwrap_or_default();
        u64::from(u32::from_be_bytes(word))
    });
    let mut acc: u64 = words.sum();
    // Five 32-bit words sum below 2^35; three folds bring it to 16 bits.
    for _ in 0..3 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Whether the header checksum of the IPv4 packet `packet`, whose header
/// is `header_len` bytes (checked against its length by the caller's
/// `Ipv4Packet::new_checked`), verifies (RFC 791 §3.1).
#[inline]
pub(crate) fn checksum_ok(packet: &[u8], header_len: usize) -> bool {
    match header(packet) {
        Some(fixed) if header_len == HEADER_LEN => sum(fixed) == 0xffff,
        _ => Ipv4Packet::new_unchecked(packet).verify_checksum(),
    }
}

/// The fields of a tunnel-mode outer header that change per SA or packet.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fields {
    pub(crate) src: Ipv4Addr,
    pub(crate) dst: Ipv4Addr,
    pub(crate) protocol: IpProtocol,
    pub(crate) tos: u8,
    pub(crate) dont_frag: bool,
    pub(crate) ident: u16,
    pub(crate) ttl: u8,
    pub(crate) total_len: u16,
}

/// Writes the header: version 4, IHL 5, the fields, no fragment offset,
/// checksum computed. The bytes of `Ipv4Repr::emit`.
#[inline]
pub(crate) fn emit(out: &mut [u8; HEADER_LEN], f: &Fields) {
    let mut h = [0u8; HEADER_LEN];
    h[0] = 0x45;
    h[1] = f.tos;
    h[2..4].copy_from_slice(&f.total_len.to_be_bytes());
    h[4..6].copy_from_slice(&f.ident.to_be_bytes());
    h[6] = if f.dont_frag { DF_OCTET_BIT } else { 0 };
    h[8] = f.ttl;
    h[9] = f.protocol.0;
    h[12..16].copy_from_slice(&f.src.octets());
    h[16..20].copy_from_slice(&f.dst.octets());
    let check = !sum(&h);
    h[10..12].copy_from_slice(&check.to_be_bytes());
    *out = h;
}

#[cfg(test)]
mod tests {
    use super::*;
    use phalanx_wire::checksum::data as general_sum;
    use phalanx_wire::Ipv4Repr;

    fn lcg(x: &mut u64) -> u64 {
        *x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *x >> 16
    }

    #[test]
    fn sum_is_rfc_1071() {
        let mut x = 7;
        for _ in 0..2000 {
            let mut h = [0u8; HEADER_LEN];
            h.iter_mut().for_each(|b| *b = lcg(&mut x) as u8);
            if lcg(&mut x) % 4 == 0 {
                h.iter_mut().skip(4).for_each(|b| *b = 0xff);
            }
            assert_eq!(sum(&h), general_sum(&h), "{h:02x?}");
        }
    }

    #[test]
    fn emit_is_ipv4_repr_emit() {
        let mut x = 9;
        for _ in 0..500 {
            let f = Fields {
                src: Ipv4Addr::from(lcg(&mut x) as u32),
                dst: Ipv4Addr::from(lcg(&mut x) as u32),
                protocol: IpProtocol(lcg(&mut x) as u8),
                tos: lcg(&mut x) as u8,
                dont_frag: lcg(&mut x) % 2 == 0,
                ident: lcg(&mut x) as u16,
                ttl: lcg(&mut x) as u8,
                total_len: (lcg(&mut x) as u16).max(20),
            };
            let repr = Ipv4Repr {
                src: f.src,
                dst: f.dst,
                protocol: f.protocol,
                payload_len: usize::from(f.total_len) - HEADER_LEN,
                ttl: f.ttl,
                dscp_ecn: f.tos,
                ident: f.ident,
                dont_frag: f.dont_frag,
            };
            let mut expected = [0xeeu8; HEADER_LEN];
            repr.emit(&mut Ipv4Packet::new_unchecked(&mut expected[..]));
            let mut got = [0x11u8; HEADER_LEN];
            emit(&mut got, &f);
            assert_eq!(got, expected);
            assert!(checksum_ok(&got, HEADER_LEN));
            got[(lcg(&mut x) % 20) as usize] ^= 1 << (lcg(&mut x) % 8);
            assert!(!checksum_ok(&got, HEADER_LEN));
        }
    }

    #[test]
    fn options_take_the_general_path() {
        let mut p = [0u8; 24];
        p[0] = 0x46;
        p[3] = 24;
        p[20] = 0x94;
        let check = !general_sum(&p);
        p[10..12].copy_from_slice(&check.to_be_bytes());
        assert!(checksum_ok(&p, 24));
        assert!(!checksum_ok(&p, 20), "the 20-byte sum misses the options");
        assert!(header(&p[..19]).is_none());
    }
}
