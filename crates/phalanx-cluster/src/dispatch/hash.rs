//! The one fixed, seedless hash every node computes identically.
//!
//! Dispatch decisions that depend on a hash (flow identity, hash segments,
//! rendezvous weights) must come out the same on every node and in every
//! process, so nothing here may use `RandomState` or any per-process seed.
//! The hash is FNV-1a 64 (Fowler, Noll, Vo; draft-eastlake-fnv §2, offset
//! basis and prime below) over the fields in a fixed order, followed by the
//! 64-bit finalizer of MurmurHash3 (`fmix64`), so that the low bits taken by
//! `% SEGMENTS` depend on every input bit (plain FNV-1a mixes its last byte
//! poorly into the low bits).
//!
//! It is not a keyed hash: an attacker can choose inputs that collide. The
//! structures indexed by it are bounded (256 segments, 4,096 flows per
//! stream in ordered maps), so collisions cost balance, never memory or
//! worst-case time.

use core::net::IpAddr;

use phalanx_sa::FlowKey;

/// FNV-1a 64 offset basis (draft-eastlake-fnv §2.2).
const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64 prime, 2^40 + 2^8 + 0xb3 (draft-eastlake-fnv §2.1).
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// An FNV-1a 64 accumulator with a finalizing mix.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FixedHasher(u64);

impl FixedHasher {
    /// A fresh accumulator (the FNV offset basis).
    pub(crate) const fn new() -> FixedHasher {
        FixedHasher(FNV_OFFSET_BASIS)
    }

    /// Absorb `bytes` one octet at a time (xor, then multiply).
    pub(crate) fn write(&mut self, bytes: &[u8]) -> &mut FixedHasher {
        for &byte in bytes {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(FNV_PRIME);
        }
        self
    }

    /// Absorb a 16-bit value, big-endian.
    pub(crate) fn write_u16(&mut self, value: u16) -> &mut FixedHasher {
        self.write(&value.to_be_bytes())
    }

    /// Absorb a 32-bit value, big-endian.
    pub(crate) fn write_u32(&mut self, value: u32) -> &mut FixedHasher {
        self.write(&value.to_be_bytes())
    }

    /// Absorb an address: a family octet (4 or 6), then its octets, so an
    /// IPv4 address never hashes like an IPv6 prefix of the same bytes.
    pub(crate) fn write_addr(&mut self, addr: IpAddr) -> &mut FixedHasher {
        match addr {
            IpAddr::V4(v4) => self.write(&[4]).write(&v4.octets()),
            IpAddr::V6(v6) => self.write(&[6]).write(&v6.octets()),
        }
    }

    /// The mixed 64-bit result.
    pub(crate) fn finish(&self) -> u64 {
        fmix64(self.0)
    }
}

/// MurmurHash3's 64-bit finalizer: every output bit depends on every input
/// bit (an avalanche step, not a hash on its own).
pub(crate) const fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x
}

/// The 64-bit identity of an inner flow, the key of the session schemes'
/// flow tables: a fixed, seedless hash over source address, destination
/// address, protocol, source port and destination port, in that order.
/// Every node computes the same value for the same 5-tuple.
pub fn flow_hash(key: &FlowKey) -> u64 {
    FixedHasher::new()
        .write_addr(key.src)
        .write_addr(key.dst)
        .write(&[key.protocol.0])
        .write_u16(key.src_port)
        .write_u16(key.dst_port)
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};
    use phalanx_wire::IpProtocol;

    #[test]
    fn fnv1a_matches_published_vectors() {
        // draft-eastlake-fnv test vectors for FNV-1a 64 (before our mix):
        // "" -> offset basis, "a" -> 0xaf63dc4c8601ec8c,
        // "foobar" -> 0x85944171f73967e8.
        assert_eq!(FixedHasher::new().0, 0xcbf2_9ce4_8422_2325);
        assert_eq!(FixedHasher::new().write(b"a").0, 0xaf63_dc4c_8601_ec8c);
        assert_eq!(FixedHasher::new().write(b"foobar").0, 0x8594_4171_f739_67e8);
    }

    #[test]
    fn fmix64_fixes_zero_and_moves_one() {
        assert_eq!(fmix64(0), 0);
        assert_ne!(fmix64(1), 1);
        assert_ne!(fmix64(1) & 0xff, fmix64(2) & 0xff);
    }

    fn flow(src_port: u16) -> FlowKey {
        FlowKey {
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 1)),
            protocol: IpProtocol::UDP,
            src_port,
            dst_port: 4500,
        }
    }

    #[test]
    fn flow_hash_is_stable_and_field_sensitive() {
        // A fixed value: a change here would make nodes of two builds
        // disagree on every flow, so it must be deliberate.
        let expected = FixedHasher::new()
            .write(&[4, 10, 0, 0, 1, 4, 10, 1, 0, 1, 17])
            .write(&[0x30, 0x39, 0x11, 0x94])
            .finish();
        assert_eq!(flow_hash(&flow(12345)), expected);
        assert_ne!(flow_hash(&flow(12345)), flow_hash(&flow(12346)));
        let mut swapped = flow(12345);
        core::mem::swap(&mut swapped.src, &mut swapped.dst);
        assert_ne!(flow_hash(&swapped), flow_hash(&flow(12345)));
    }

    #[test]
    fn families_do_not_collide_by_construction() {
        let v4 = FixedHasher::new()
            .write_addr(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
            .finish();
        let v6 = FixedHasher::new()
            .write_addr(IpAddr::V6(Ipv6Addr::UNSPECIFIED))
            .finish();
        assert_ne!(v4, v6);
    }
}
