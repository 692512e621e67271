//! The 2048-bit MODP group, IKE group 14 (RFC 3526 §3), on `crypto-bigint`:
//! constant-time Montgomery exponentiation, shared by every provider.
//!
//! Public values and the shared secret are big-endian and left-padded to
//! the 256 bytes of the modulus (RFC 7296 §3.4: "the Key Exchange Data
//! MUST be padded with zeros"; §2.14: g^ir "padded with zeros if necessary
//! to make it the length of the modulus").

use super::kex::{KeGroup, KeyExchangeState};
use super::IkeRng;
use crate::CryptoError;
use crypto_bigint::modular::runtime_mod::{DynResidue, DynResidueParams};
use crypto_bigint::{Encoding, U2048, U512};
use zeroize::{Zeroize, Zeroizing};

/// Bytes of the modulus, of a public value and of the shared secret.
pub(crate) const MODP_2048_LEN: usize = 256;

/// RFC 3526 §3: "This prime is: 2^2048 - 2^1984 - 1 + 2^64 * { [2^1918 pi]
/// + 124476 }". Its hexadecimal value, as printed there.
const PRIME_HEX: &str = concat!(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD1",
    "29024E088A67CC74020BBEA63B139B22514A08798E3404DD",
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245",
    "E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED",
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3D",
    "C2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F",
    "83655D23DCA3AD961C62F356208552BB9ED529077096966D",
    "670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B",
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9",
    "DE2BCBF6955817183995497CEA956AE515D2261898FA0510",
    "15728E5A8AACAA68FFFFFFFFFFFFFFFF",
);

/// The prime p.
const PRIME: U2048 = U2048::from_be_hex(PRIME_HEX);

/// RFC 3526 §3: "The generator is: 2."
const GENERATOR: U2048 = U2048::from_u8(2);

/// Bits of the private exponent. RFC 3526 §8 puts the strength of this
/// group at 110 to 160 bits and asks for an exponent of at least twice
/// that; 512 bits is beyond the upper estimate.
const EXPONENT_BITS: usize = 512;

/// One side's MODP-2048 key: the private exponent and g^x mod p.
pub(crate) struct ModpKey {
    exponent: U512,
    public: Vec<u8>,
}

impl ModpKey {
    /// A fresh key with a 512-bit exponent drawn from `rng`.
    pub(crate) fn generate(rng: &mut dyn IkeRng) -> ModpKey {
        let mut bytes = Zeroizing::new([0u8; EXPONENT_BITS / 8]);
        rng.fill_bytes(bytes.as_mut());
        ModpKey::from_exponent(U512::from_be_slice(bytes.as_ref()))
    }

    /// The key with the given exponent (tests use fixed exponents).
    pub(crate) fn from_exponent(exponent: U512) -> ModpKey {
        let public = power(&GENERATOR, &exponent);
        ModpKey {
            exponent,
            public: public.to_vec(),
        }
    }

    /// g^(xy) mod p for the peer's public value y, after RFC 6989 §2.1's
    /// check for safe-prime groups: "1 < y < p-1".
    fn agree(&self, peer_public: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        if peer_public.len() != MODP_2048_LEN {
            return Err(CryptoError::BadLength);
        }
        let y = U2048::from_be_slice(peer_public);
        let p_minus_1 = PRIME.wrapping_sub(&U2048::ONE);
        if y <= U2048::ONE || y >= p_minus_1 {
            return Err(CryptoError::BadLength);
        }
        let mut secret = power(&y, &self.exponent);
        let out = Zeroizing::new(secret.to_vec());
        secret.zeroize();
        Ok(out)
    }
}

impl Drop for ModpKey {
    fn drop(&mut self) {
        self.exponent.zeroize();
    }
}

impl KeyExchangeState for ModpKey {
    fn group(&self) -> KeGroup {
        KeGroup::Modp2048
    }

    fn public_value(&self) -> &[u8] {
        &self.public
    }

    fn complete(self: Box<Self>, peer_public: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        self.agree(peer_public)
    }
}

/// base^exponent mod p, big-endian and padded to the modulus length.
/// Constant time in the exponent's value: a fixed 512-bit ladder of
/// Montgomery multiplications.
fn power(base: &U2048, exponent: &U512) -> [u8; MODP_2048_LEN] {
    let params = DynResidueParams::new(&PRIME);
    let mut residue = DynResidue::new(base, params).pow_bounded_exp(exponent, EXPONENT_BITS);
    let mut value = residue.retrieve();
    let bytes = value.to_be_bytes();
    residue.zeroize();
    value.zeroize();
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hexadecimal constant is the prime of the RFC 3526 §3 formula:
    /// its top and bottom 64 bits are all ones and it is 2048 bits long.
    #[test]
    fn prime_shape() {
        assert_eq!(PRIME.bits(), 2048);
        let bytes = PRIME.to_be_bytes();
        assert_eq!(&bytes[..8], &[0xff; 8]);
        assert_eq!(&bytes[248..], &[0xff; 8]);
    }

    /// g^x mod p for x = 0x0123…ef repeated (64 bytes), computed with
    /// Python's `pow(2, x, p)`:
    ///
    /// ```text
    /// p = int(PRIME_HEX, 16); x = int("0123456789abcdef" * 8, 16)
    /// print(format(pow(2, x, p), "0512x"))
    /// ```
    #[test]
    fn public_value_python_vector() {
        let x = U512::from_be_hex(&"0123456789abcdef".repeat(8));
        let key = ModpKey::from_exponent(x);
        assert_eq!(hex::encode(&key.public), PUBLIC_0123);
    }

    /// Python: `pow(2, 5, p)` padded to 256 bytes: small results keep their
    /// leading zeros.
    #[test]
    fn public_value_is_padded() {
        let key = ModpKey::from_exponent(U512::from_u8(5));
        assert_eq!(key.public.len(), MODP_2048_LEN);
        assert_eq!(key.public[255], 32);
        assert!(key.public[..255].iter().all(|&b| b == 0));
    }

    #[test]
    fn peer_range_is_checked() {
        let key = ModpKey::from_exponent(U512::from_u8(7));
        let p = PRIME.to_be_bytes();
        let p_minus_1 = PRIME.wrapping_sub(&U2048::ONE).to_be_bytes();
        let p_minus_2 = PRIME.wrapping_sub(&U2048::from_u8(2)).to_be_bytes();
        let mut one = [0u8; MODP_2048_LEN];
        one[255] = 1;
        let mut two = [0u8; MODP_2048_LEN];
        two[255] = 2;
        for bad in [
            &[0u8; MODP_2048_LEN][..],
            &one,
            &p_minus_1,
            &p,
            &[0xff; 256],
        ] {
            assert_eq!(key.agree(bad), Err(CryptoError::BadLength));
        }
        assert_eq!(key.agree(&two[..255]), Err(CryptoError::BadLength));
        assert!(key.agree(&two).is_ok());
        assert!(key.agree(&p_minus_2).is_ok());
    }

    const PUBLIC_0123: &str = concat!(
        "c2ccff1ef402aceec396d8990e8b8770b663c6ff0279aca4985bf75137565f64",
        "a2bc0d74ee04e5bf409baf7fc11dc2f2a9ba88f7929a69e45727c63f29b8e0fb",
        "ce0a88e2f78a15c72432f10fba5094650773f8ff0acbfc11b183086f57728fc9",
        "f01b49a4083f40425507a5ff586202018b3ed036dfd6e53bdcabd2ce690ea17e",
        "8b39f4e2b9d4ae1f248fd0aaf037a7de7a13da35489aa37474a3139c5ce82529",
        "15b13683c5dfd5b0ff8de899a66a9d12e3cfbc1862007f0c4719d8be367d43fd",
        "c34c84e0928ac74be0ce6518d1d8723d086b9177021b77b2ce7fd64019bd1239",
        "2c0d6a68646fcdf557376ffdf5b2b7514e15b537b7a8a7edb5bc3d4d276f441d",
    );
}
