//! The Internet checksum (RFC 1071) and the pseudo-headers UDP and TCP sum
//! over (RFC 768, RFC 9293 §3.1, RFC 8200 §8.1).
//!
//! Sums are kept as folded, *uncomplemented* one's-complement `u16` values so
//! that partial sums over separate pieces ([`data`] of each piece, then
//! [`combine`]) give the same result as one pass, as long as every piece but
//! the last has an even length (RFC 1071 §2 (B), byte-order independence and
//! associativity). The value that goes on the wire is `!sum`.
//!
//! ```
//! use phalanx_wire::checksum;
//! // RFC 1071 §3, numerical example.
//! let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
//! assert_eq!(checksum::data(&bytes), 0xddf2);
//! assert_eq!(checksum::checksum(&bytes), 0x220d);
//! ```

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::iana::IpProtocol;

/// One's-complement addition of two 16-bit values (end-around carry).
#[inline]
pub fn add(a: u16, b: u16) -> u16 {
    let (sum, carry) = a.overflowing_add(b);
    sum + u16::from(carry)
}

/// One's-complement sum of several partial sums.
pub fn combine(sums: &[u16]) -> u16 {
    sums.iter().fold(0, |acc, &s| add(acc, s))
}

/// Folded one's-complement sum of `data` read as big-endian 16-bit words; an
/// odd final byte is padded with a zero byte (RFC 1071 §4.1).
pub fn data(data: &[u8]) -> u16 {
    // Summing 64-bit words with end-around carry is a one's-complement sum
    // modulo 2^64 - 1, which folds to the same 16-bit sum because 2^16 - 1
    // divides 2^64 - 1 (RFC 1071 §2 (C), parallel summation).
    let mut chunks = data.chunks_exact(8);
    let mut acc: u64 = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let (sum, carry) = acc.overflowing_add(u64::from_be_bytes(word));
        acc = sum + u64::from(carry);
    }
    let mut tail = fold64(acc);
    let mut pairs = chunks.remainder().chunks_exact(2);
    for pair in &mut pairs {
        tail = add(tail, u16::from_be_bytes([pair[0], pair[1]]));
    }
    if let [last] = pairs.remainder() {
        tail = add(tail, u16::from_be_bytes([*last, 0]));
    }
    tail
}

/// Folds a 64-bit one's-complement accumulator to 16 bits.
#[inline]
fn fold64(acc: u64) -> u16 {
    let (hi, lo) = ((acc >> 32) as u32, acc as u32);
    let (s32, c32) = hi.overflowing_add(lo);
    let s32 = s32 + u32::from(c32);
    add((s32 >> 16) as u16, s32 as u16)
}

/// The checksum field value for `data`: the complement of its sum.
pub fn checksum(data_bytes: &[u8]) -> u16 {
    !data(data_bytes)
}

/// Sum of the IPv4 pseudo-header (RFC 768; RFC 9293 §3.1):
/// source, destination, zero, protocol, upper-layer length.
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: IpProtocol, length: u16) -> u16 {
    let mut words = [0u8; 12];
    words[0..4].copy_from_slice(&src.octets());
    words[4..8].copy_from_slice(&dst.octets());
    words[9] = protocol.0;
    words[10..12].copy_from_slice(&length.to_be_bytes());
    data(&words)
}

/// Sum of the IPv6 pseudo-header (RFC 8200 §8.1): source, destination,
/// 32-bit upper-layer packet length, three zero bytes, next header.
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: IpProtocol, length: u32) -> u16 {
    let mut words = [0u8; 40];
    words[0..16].copy_from_slice(&src.octets());
    words[16..32].copy_from_slice(&dst.octets());
    words[32..36].copy_from_slice(&length.to_be_bytes());
    words[39] = next_header.0;
    data(&words)
}

/// Incremental update of a checksum field when one 16-bit word of the
/// covered data changes from `old` to `new` (RFC 1624 §3, eqn. 3:
/// `HC' = ~(~HC + ~m + m')`), e.g. after decrementing the IPv4 TTL.
pub fn update(checksum_field: u16, old: u16, new: u16) -> u16 {
    !add(add(!checksum_field, !old), new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The RFC 1071 §4.1 reference loop, one 16-bit word at a time.
    fn slow_sum(bytes: &[u8]) -> u16 {
        let mut sum: u32 = 0;
        for pair in bytes.chunks(2) {
            let hi = u32::from(pair[0]) << 8;
            let lo = pair.get(1).map_or(0, |&b| u32::from(b));
            sum += hi | lo;
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    #[test]
    fn rfc1071_example() {
        let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(data(&bytes), 0xddf2);
        assert_eq!(checksum(&bytes), 0x220d);
    }

    #[test]
    fn empty_and_odd() {
        assert_eq!(data(&[]), 0);
        assert_eq!(data(&[0xab]), 0xab00);
        assert_eq!(data(&[0xff, 0xff]), 0xffff);
        assert_eq!(data(&[0xff; 9]), add(0xffff, 0xff00));
    }

    #[test]
    fn pseudo_header_v4_by_hand() {
        // 192.168.0.1 -> 192.168.0.199, UDP, length 8:
        // c0a8 + 0001 + c0a8 + 00c7 + 0011 + 0008 = 0x18231 -> 0x8232.
        let sum = pseudo_header_v4(
            Ipv4Addr::new(192, 168, 0, 1),
            Ipv4Addr::new(192, 168, 0, 199),
            IpProtocol::UDP,
            8,
        );
        assert_eq!(sum, 0x8232);
    }

    #[test]
    fn pseudo_header_v6_by_hand() {
        // ::1 -> ::2, next header 17, length 0x10000 (a 32-bit length):
        // 0001 + 0002 + 0001 + 0000 + 0011 = 0x0015.
        let sum = pseudo_header_v6(
            Ipv6Addr::LOCALHOST,
            "::2".parse().unwrap(),
            IpProtocol::UDP,
            0x1_0000,
        );
        assert_eq!(sum, 0x0015);
    }

    #[test]
    fn incremental_ttl_decrement() {
        // The header from the ipv4 tests: TTL 0x40, protocol 0x11.
        let mut hdr = hex::decode("450000730000400040110000c0a80001c0a800c7").unwrap();
        let c = checksum(&hdr);
        assert_eq!(c, 0xb861);
        hdr[8] = 0x3f;
        assert_eq!(update(c, 0x4011, 0x3f11), checksum(&hdr));
    }

    proptest! {
        #[test]
        fn matches_reference(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            prop_assert_eq!(data(&bytes), slow_sum(&bytes));
        }

        #[test]
        fn combine_of_even_pieces(bytes in proptest::collection::vec(any::<u8>(), 0..300),
                                  cut in 0usize..150) {
            let cut = (cut * 2).min(bytes.len() & !1);
            let (a, b) = bytes.split_at(cut);
            prop_assert_eq!(combine(&[data(a), data(b)]), data(&bytes));
        }

        #[test]
        fn update_matches_recompute(mut bytes in proptest::collection::vec(any::<u8>(), 2..64),
                                    word in 0usize..32, new in any::<u16>()) {
            let at = (word * 2) % (bytes.len() & !1);
            let before = checksum(&bytes);
            let old = u16::from_be_bytes([bytes[at], bytes[at + 1]]);
            bytes[at..at + 2].copy_from_slice(&new.to_be_bytes());
            // One's complement has two zeros (0x0000 and 0xffff): compare
            // the values modulo 0xffff.
            let updated = u32::from(update(before, old, new)) % 0xffff;
            prop_assert_eq!(updated, u32::from(checksum(&bytes)) % 0xffff);
        }
    }
}
