//! The IKEv2 pseudorandom function and prf+ (RFC 7296 §2.13).
//!
//! Only HMAC PRFs are implemented (RFC 2104 with SHA-1 for interop and
//! SHA-2, RFC 4868 §2.1.2). HMAC accepts keys of any length, which is what
//! the key schedule relies on when it keys the PRF with `Ni | Nr`
//! (RFC 7296 §2.14); PRFs with fixed-size keys (AES-XCBC-PRF-128,
//! AES-CMAC-PRF-128) are not offered.

use crate::{CryptoError, CryptoProvider};
use phalanx_wire::ike::iana::PrfId;
use zeroize::Zeroizing;

/// An IKEv2 PRF, Transform Type 2 (RFC 7296 §3.3.2, RFC 4868 §2.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PrfAlgorithm {
    /// PRF_HMAC_SHA1, id 2 (RFC 2104): interop with old peers only.
    HmacSha1,
    /// PRF_HMAC_SHA2_256, id 5 (RFC 4868).
    HmacSha2_256,
    /// PRF_HMAC_SHA2_384, id 6 (RFC 4868).
    HmacSha2_384,
    /// PRF_HMAC_SHA2_512, id 7 (RFC 4868).
    HmacSha2_512,
}

impl PrfAlgorithm {
    /// The PRF for an IANA Transform Type 2 id, or `None` for one not
    /// implemented here (the IKE layer then declines the proposal).
    pub const fn from_id(id: u16) -> Option<PrfAlgorithm> {
        match id {
            2 => Some(PrfAlgorithm::HmacSha1),
            5 => Some(PrfAlgorithm::HmacSha2_256),
            6 => Some(PrfAlgorithm::HmacSha2_384),
            7 => Some(PrfAlgorithm::HmacSha2_512),
            _ => None,
        }
    }

    /// The IANA Transform Type 2 id.
    pub const fn id(self) -> u16 {
        match self {
            PrfAlgorithm::HmacSha1 => 2,
            PrfAlgorithm::HmacSha2_256 => 5,
            PrfAlgorithm::HmacSha2_384 => 6,
            PrfAlgorithm::HmacSha2_512 => 7,
        }
    }

    /// Bytes of output of one PRF call: the hash length.
    pub const fn output_len(self) -> usize {
        match self {
            PrfAlgorithm::HmacSha1 => 20,
            PrfAlgorithm::HmacSha2_256 => 32,
            PrfAlgorithm::HmacSha2_384 => 48,
            PrfAlgorithm::HmacSha2_512 => 64,
        }
    }

    /// The preferred key length, which is the length of SK_d, SK_pi and
    /// SK_pr. RFC 7296 §2.14: "For PRFs based on the HMAC construction,
    /// the preferred key size is equal to the length of the output of the
    /// underlying hash function."
    pub const fn key_len(self) -> usize {
        self.output_len()
    }

    /// The most bytes prf+ can produce with this PRF: 255 blocks
    /// (RFC 7296 §2.13).
    pub const fn max_prf_plus_len(self) -> usize {
        PRF_PLUS_MAX_BLOCKS * self.output_len()
    }
}

impl TryFrom<PrfId> for PrfAlgorithm {
    type Error = CryptoError;

    /// The PRF for a transform id of the IKE codec;
    /// [`CryptoError::UnsupportedAlgorithm`] for one not implemented here.
    fn try_from(id: PrfId) -> Result<PrfAlgorithm, CryptoError> {
        PrfAlgorithm::from_id(id.0).ok_or(CryptoError::UnsupportedAlgorithm)
    }
}

impl From<PrfAlgorithm> for PrfId {
    fn from(alg: PrfAlgorithm) -> PrfId {
        PrfId(alg.id())
    }
}

/// RFC 7296 §2.13: "The prf+ function is not defined beyond 255 times
/// the size of the prf function output."
const PRF_PLUS_MAX_BLOCKS: usize = 255;

/// A keyed IKEv2 PRF.
///
/// Made by [`CryptoProvider::prf`]; key material is wiped on drop by the
/// provider's object.
pub trait PrfKey: Send + Sync {
    /// The algorithm.
    fn algorithm(&self) -> PrfAlgorithm;

    /// Bytes of output of one call ([`PrfAlgorithm::output_len`]).
    fn output_len(&self) -> usize {
        self.algorithm().output_len()
    }

    /// Computes prf(K, parts\[0\] | parts\[1\] | …) and writes its first
    /// `min(out.len(), output_len())` bytes to `out`.
    fn compute(&self, parts: &[&[u8]], out: &mut [u8]);
}

/// prf(K, S) for `S = parts[0] | parts[1] | …`, the whole output.
pub fn prf(key: &dyn PrfKey, parts: &[&[u8]]) -> Zeroizing<Vec<u8>> {
    let mut out = Zeroizing::new(vec![0u8; key.output_len()]);
    key.compute(parts, &mut out);
    out
}

/// prf+(K, S), `len` bytes (RFC 7296 §2.13).
///
/// Errors: [`CryptoError::BadLength`] when `len` exceeds 255 PRF outputs.
pub fn prf_plus(
    key: &dyn PrfKey,
    seed: &[u8],
    len: usize,
) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
    prf_plus_parts(key, &[seed], len)
}

/// prf+(K, S) for a seed given in parts, `S = seed[0] | seed[1] | …`, so
/// callers need not concatenate secrets into a temporary buffer.
///
/// Errors: [`CryptoError::BadLength`] when `len` exceeds 255 PRF outputs.
pub fn prf_plus_parts(
    key: &dyn PrfKey,
    seed: &[&[u8]],
    len: usize,
) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
    let block_len = key.output_len();
    if block_len == 0 || len > PRF_PLUS_MAX_BLOCKS * block_len {
        return Err(CryptoError::BadLength);
    }
    // RFC 7296 §2.13:
    //   prf+ (K,S) = T1 | T2 | T3 | T4 | ...
    //   where:
    //   T1 = prf (K, S | 0x01)
    //   T2 = prf (K, T1 | S | 0x02)
    //   T3 = prf (K, T2 | S | 0x03)
    //   T4 = prf (K, T3 | S | 0x04)
    //   ...
    let blocks = len.div_ceil(block_len);
    let mut out = Zeroizing::new(Vec::with_capacity(blocks * block_len));
    let mut previous = Zeroizing::new(vec![0u8; block_len]);
    let mut block = Zeroizing::new(vec![0u8; block_len]);
    // The length check above bounds `blocks` to 255, so `as u8` is exact.
    for n in 1..=blocks {
        let counter = [n as u8];
        let mut parts: Vec<&[u8]> = Vec::with_capacity(seed.len() + 2);
        if n > 1 {
            parts.push(&previous);
        }
        parts.extend_from_slice(seed);
        parts.push(&counter);
        key.compute(&parts, &mut block);
        out.extend_from_slice(&block);
        previous.copy_from_slice(&block);
    }
    out.truncate(len);
    Ok(out)
}

/// Keys `alg` with `key` through `provider` and computes prf(K, parts):
/// the one-shot form used by the key schedule.
pub(crate) fn prf_once(
    provider: &dyn CryptoProvider,
    alg: PrfAlgorithm,
    key: &[u8],
    parts: &[&[u8]],
) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
    Ok(prf(provider.prf(alg, key)?.as_ref(), parts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers;

    fn unhex(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    #[test]
    fn ids_round_trip() {
        for id in 0..16 {
            if let Some(alg) = PrfAlgorithm::from_id(id) {
                assert_eq!(alg.id(), id);
            }
        }
        assert_eq!(PrfAlgorithm::from_id(4), None); // PRF_AES128_XCBC
        assert_eq!(
            PrfAlgorithm::try_from(PrfId::HMAC_SHA2_512),
            Ok(PrfAlgorithm::HmacSha2_512)
        );
        assert_eq!(
            PrfAlgorithm::try_from(PrfId::AES128_XCBC),
            Err(CryptoError::UnsupportedAlgorithm)
        );
        assert_eq!(PrfId::from(PrfAlgorithm::HmacSha1), PrfId::HMAC_SHA1);
        assert_eq!(PrfAlgorithm::HmacSha2_384.key_len(), 48);
    }

    /// RFC 4231 §4.2 (test case 1) and §4.7 (test case 6: a 131-byte key,
    /// longer than the block: RFC 2104 hashes it first).
    #[test]
    fn hmac_rfc4231() {
        let cases = [
            (
                "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b".to_string(),
                b"Hi There".to_vec(),
                PrfAlgorithm::HmacSha2_256,
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            ),
            (
                "aa".repeat(131),
                b"Test Using Larger Than Block-Size Key - Hash Key First".to_vec(),
                PrfAlgorithm::HmacSha2_384,
                "4ece084485813e9088d2c63a041bc5b44f9ef1012a2b588f3cd11f05033ac4c6\
                 0c2ef6ab4030fe8296248df163f44952",
            ),
            (
                "aa".repeat(131),
                b"Test Using Larger Than Block-Size Key - Hash Key First".to_vec(),
                PrfAlgorithm::HmacSha2_512,
                "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f352\
                 6b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598",
            ),
        ];
        for provider in providers() {
            for (key, data, alg, expected) in &cases {
                let key = provider.prf(*alg, &unhex(key)).unwrap();
                assert_eq!(key.output_len(), alg.output_len());
                // Split input: the parts are concatenated.
                let (a, b) = data.split_at(3);
                assert_eq!(hex::encode(&*prf(key.as_ref(), &[a, b])), *expected);
            }
        }
    }

    /// prf+ against the RFC 7296 §2.13 definition written out by hand
    /// (T1 = prf(K, S | 0x01), T2 = prf(K, T1 | S | 0x02), …).
    #[test]
    fn prf_plus_matches_definition() {
        for provider in providers() {
            let key = provider.prf(PrfAlgorithm::HmacSha2_256, b"key").unwrap();
            let seed = b"seed bytes";
            let t1 = prf(key.as_ref(), &[seed, &[1]]);
            let t2 = prf(key.as_ref(), &[&t1, seed, &[2]]);
            let t3 = prf(key.as_ref(), &[&t2, seed, &[3]]);
            let expected = [&t1[..], &t2[..], &t3[..10]].concat();
            let out = prf_plus(key.as_ref(), seed, 74).unwrap();
            assert_eq!(&out[..], &expected[..]);
            let parts = prf_plus_parts(key.as_ref(), &[b"seed", b" bytes"], 74).unwrap();
            assert_eq!(parts, out);
        }
    }

    #[test]
    fn prf_plus_limit_is_255_blocks() {
        for provider in providers() {
            let key = provider.prf(PrfAlgorithm::HmacSha2_256, b"k").unwrap();
            let max = PrfAlgorithm::HmacSha2_256.max_prf_plus_len();
            assert_eq!(max, 255 * 32);
            let out = prf_plus(key.as_ref(), b"s", max).unwrap();
            assert_eq!(out.len(), max);
            // The last block was T255: the counter never wrapped to 0.
            let t254 = &out[254 * 32 - 32..254 * 32];
            let t255 = prf(key.as_ref(), &[t254, b"s", &[255]]);
            assert_eq!(&out[254 * 32..], &t255[..]);
            assert_eq!(
                prf_plus(key.as_ref(), b"s", max + 1),
                Err(CryptoError::BadLength)
            );
            assert!(prf_plus(key.as_ref(), b"s", 0).unwrap().is_empty());
        }
    }

    /// HMAC-SHA1 (RFC 2202 test case 2), aws-lc-rs only: the RustCrypto
    /// provider carries no SHA-1.
    #[cfg(feature = "aws-lc")]
    #[test]
    fn hmac_sha1_rfc2202() {
        let key = crate::AwsLcProvider
            .prf(PrfAlgorithm::HmacSha1, b"Jefe")
            .unwrap();
        let out = prf(key.as_ref(), &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex::encode(&*out),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"
        );
    }
}
