//! A small, fast, non-cryptographic hasher for tables whose keys we chose
//! ourselves (local SPIs, configured policy prefixes).
//!
//! Keys an attacker controls only ever meet the fixed-size
//! [`FlowCache`](crate::spd::FlowCache), where a collision costs a cache
//! miss, never a longer chain; that cache takes a seed.

use core::hash::{BuildHasherDefault, Hasher};

/// Odd 64-bit constants (digits of pi) used as multipliers and seeds.
pub(crate) const K0: u64 = 0x243f_6a88_85a3_08d3;
pub(crate) const K1: u64 = 0x1319_8a2e_0370_7344;
pub(crate) const K2: u64 = 0xa409_3822_299f_31d0;
pub(crate) const K3: u64 = 0x082e_fa98_ec4e_6c89;

/// Multiply two words to 128 bits and fold the halves together: every input
/// bit influences both the high and the low output bits.
#[inline(always)]
pub(crate) fn folded_mul(a: u64, b: u64) -> u64 {
    let full = u128::from(a) * u128::from(b);
    (full as u64) ^ ((full >> 64) as u64)
}

/// Hash two 128-bit words (a pair of addresses) to 64 bits.
#[inline(always)]
pub(crate) fn hash_pair(a: u128, b: u128, seed: u64) -> u64 {
    let x = folded_mul((a as u64) ^ K0 ^ seed, ((a >> 64) as u64) ^ K1);
    let y = folded_mul((b as u64) ^ K2, ((b >> 64) as u64) ^ K3 ^ seed);
    folded_mul(x ^ K1, y ^ K2)
}

/// A [`Hasher`] built on [`folded_mul`]: one multiplication per word.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FoldHasher {
    state: u64,
}

impl Hasher for FoldHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.write_u64(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 56));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.state = folded_mul(self.state ^ i ^ K0, K3);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.state
    }
}

/// `BuildHasher` for `HashMap`s keyed by values we chose.
pub(crate) type BuildFoldHasher = BuildHasherDefault<FoldHasher>;

/// A [`Hasher`] for keys that hash themselves: their `Hash` impl writes
/// one well-mixed `u64` (from [`hash_pair`]), which becomes the hash as is.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PrehashedHasher {
    state: u64,
}

impl Hasher for PrehashedHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Not used by prehashed keys; mix properly all the same.
        let mut fold = FoldHasher { state: self.state };
        fold.write(bytes);
        self.state = fold.finish();
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.state ^= i;
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.state
    }
}

/// `BuildHasher` for keys that hash themselves.
pub(crate) type BuildPrehashedHasher = BuildHasherDefault<PrehashedHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use core::hash::{BuildHasher, Hash};

    fn hash_of<T: Hash>(value: &T) -> u64 {
        BuildFoldHasher::default().hash_one(value)
    }

    #[test]
    fn distinct_small_keys_hash_apart() {
        let mut seen = std::collections::HashSet::new();
        for i in 0u32..10_000 {
            assert!(seen.insert(hash_of(&i)));
        }
    }

    fn hash_bytes(bytes: &[u8]) -> u64 {
        let mut h = FoldHasher::default();
        h.write(bytes);
        h.finish()
    }

    #[test]
    fn byte_writes_depend_on_length_and_content() {
        assert_ne!(hash_bytes(&[0u8; 3]), hash_bytes(&[0u8; 4]));
        assert_ne!(hash_bytes(&[1u8, 2, 3]), hash_bytes(&[1u8, 2, 4]));
        assert_ne!(hash_bytes(&[9u8; 16]), hash_bytes(&[9u8; 17]));
    }

    #[test]
    fn prehashed_keeps_the_written_word() {
        let mut h = PrehashedHasher::default();
        h.write_u64(0xdead_beef);
        assert_eq!(h.finish(), 0xdead_beef);
    }

    #[test]
    fn pair_hash_mixes_both_halves() {
        let base = hash_pair(1, 2, 0);
        assert_ne!(base, hash_pair(2, 1, 0));
        assert_ne!(base, hash_pair(1 | (1 << 64), 2, 0));
        assert_ne!(base, hash_pair(1, 2, 7));
    }
}
