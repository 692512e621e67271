//! The data-plane provider, on aws-lc-rs.
//!
//! Key hygiene: aws-lc keeps AEAD contexts and HMAC keys in memory it
//! allocated; `HMAC_CTX_cleanup` cleanses HMAC contexts and `OPENSSL_free`
//! cleanses every allocation before releasing it. The AES key schedules of
//! the CBC keys live in aws-lc-rs's `SymmetricCipherKey`, which zeroizes
//! them in its `Drop`. No raw key bytes are kept on the Rust side here.

use crate::ike::{IkeRng, KeGroup, KexResponse, KeyExchangeState, PrfAlgorithm, PrfKey};
use crate::provider::{AeadKey, CbcKey, CryptoProvider, IntegrityKey, AEAD_NONCE_LEN};
use crate::CryptoError;
use aws_lc_rs::cipher::{
    DecryptingKey, DecryptionContext, EncryptingKey, EncryptionContext, UnboundCipherKey, AES_128,
    AES_256,
};
use aws_lc_rs::iv::FixedLength;
use aws_lc_rs::{aead, constant_time, hmac};
use phalanx_wire::{EncrId, IntegId};

/// The [`CryptoProvider`] backed by aws-lc-rs (AWS-LC): AES-GCM,
/// ChaCha20-Poly1305, AES-CBC and HMAC-SHA-2.
#[derive(Clone, Copy, Debug, Default)]
pub struct AwsLcProvider;

impl CryptoProvider for AwsLcProvider {
    fn name(&self) -> &'static str {
        "aws-lc-rs"
    }

    fn aead(&self, encr: EncrId, key: &[u8]) -> Result<Box<dyn AeadKey>, CryptoError> {
        let algorithm = match (encr, key.len()) {
            (EncrId::AES_GCM_16 | EncrId::NULL_AUTH_AES_GMAC, 16) => &aead::AES_128_GCM,
            (EncrId::AES_GCM_16 | EncrId::NULL_AUTH_AES_GMAC, 32) => &aead::AES_256_GCM,
            (EncrId::CHACHA20_POLY1305, 32) => &aead::CHACHA20_POLY1305,
            (EncrId::AES_GCM_16 | EncrId::NULL_AUTH_AES_GMAC | EncrId::CHACHA20_POLY1305, _) => {
                return Err(CryptoError::BadKeyLength)
            }
            _ => return Err(CryptoError::UnsupportedAlgorithm),
        };
        let unbound =
            aead::UnboundKey::new(algorithm, key).map_err(|_| CryptoError::BadKeyLength)?;
        Ok(Box::new(AwsLcAead(aead::LessSafeKey::new(unbound))))
    }

    fn cbc(&self, encr: EncrId, key: &[u8]) -> Result<Box<dyn CbcKey>, CryptoError> {
        if encr != EncrId::AES_CBC {
            return Err(CryptoError::UnsupportedAlgorithm);
        }
        let algorithm = match key.len() {
            16 => &AES_128,
            32 => &AES_256,
            _ => return Err(CryptoError::BadKeyLength),
        };
        let unbound =
            || UnboundCipherKey::new(algorithm, key).map_err(|_| CryptoError::BadKeyLength);
        let encrypt = EncryptingKey::cbc(unbound()?).map_err(|_| CryptoError::BadKeyLength)?;
        let decrypt = DecryptingKey::cbc(unbound()?).map_err(|_| CryptoError::BadKeyLength)?;
        Ok(Box::new(AwsLcCbc { encrypt, decrypt }))
    }

    fn integrity(&self, integ: IntegId, key: &[u8]) -> Result<Box<dyn IntegrityKey>, CryptoError> {
        // RFC 4868 §2.3: the ICV is the leftmost half of the HMAC output.
        let (algorithm, icv_len) = match integ {
            IntegId::HMAC_SHA2_256_128 => (hmac::HMAC_SHA256, 16),
            IntegId::HMAC_SHA2_384_192 => (hmac::HMAC_SHA384, 24),
            IntegId::HMAC_SHA2_512_256 => (hmac::HMAC_SHA512, 32),
            _ => return Err(CryptoError::UnsupportedAlgorithm),
        };
        // Any key length is valid HMAC (RFC 2104 §2); RFC 4868 §2.1.1's
        // fixed lengths are enforced by `SaTransform::new`.
        Ok(Box::new(AwsLcHmac {
            key: hmac::Key::new(algorithm, key),
            icv_len,
        }))
    }

    fn prf(&self, alg: PrfAlgorithm, key: &[u8]) -> Result<Box<dyn PrfKey>, CryptoError> {
        let algorithm = match alg {
            // RFC 7296 §3.3.2 PRF_HMAC_SHA1: kept for interop only.
            PrfAlgorithm::HmacSha1 => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            PrfAlgorithm::HmacSha2_256 => hmac::HMAC_SHA256,
            PrfAlgorithm::HmacSha2_384 => hmac::HMAC_SHA384,
            PrfAlgorithm::HmacSha2_512 => hmac::HMAC_SHA512,
        };
        // Any key length (RFC 2104 §2), untruncated output (RFC 4868 §2.1.2).
        Ok(Box::new(AwsLcPrf {
            hmac: AwsLcHmac {
                key: hmac::Key::new(algorithm, key),
                icv_len: alg.output_len(),
            },
            alg,
        }))
    }

    fn key_exchange(
        &self,
        group: KeGroup,
        rng: &mut dyn IkeRng,
    ) -> Result<Box<dyn KeyExchangeState>, CryptoError> {
        crate::ike::aws_lc_kex::key_exchange(group, rng)
    }

    fn kem_encapsulate(
        &self,
        group: KeGroup,
        peer_public: &[u8],
        rng: &mut dyn IkeRng,
    ) -> Result<KexResponse, CryptoError> {
        crate::ike::aws_lc_kex::kem_encapsulate(group, peer_public, rng)
    }
}

/// An HMAC PRF for IKEv2: the same keyed HMAC as the integrity keys,
/// never truncated.
struct AwsLcPrf {
    hmac: AwsLcHmac,
    alg: PrfAlgorithm,
}

impl PrfKey for AwsLcPrf {
    fn algorithm(&self) -> PrfAlgorithm {
        self.alg
    }

    fn compute(&self, parts: &[&[u8]], out: &mut [u8]) {
        IntegrityKey::sign(&self.hmac, parts, out);
    }
}

/// AES-GCM or ChaCha20-Poly1305 with caller-supplied nonces: ESP builds
/// each nonce from the salt and the packet's explicit IV (RFC 4106 §4).
struct AwsLcAead(aead::LessSafeKey);

impl AeadKey for AwsLcAead {
    fn seal_in_place(
        &self,
        nonce: &[u8; AEAD_NONCE_LEN],
        aad: &[u8],
        in_out: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), CryptoError> {
        // The scatter form writes the tag straight into `tag` (no `Tag`
        // value to copy out) and refuses a `tag` that is not the
        // algorithm's tag length, before anything is encrypted.
        let nonce = aead::Nonce::assume_unique_for_key(*nonce);
        self.0
            .seal_in_place_scatter(nonce, aead::Aad::from(aad), in_out, &[], tag)
            .map_err(|_| CryptoError::BadLength)
    }

    fn open_in_place(
        &self,
        nonce: &[u8; AEAD_NONCE_LEN],
        aad: &[u8],
        in_out: &mut [u8],
        tag: &[u8],
    ) -> Result<(), CryptoError> {
        let nonce = aead::Nonce::assume_unique_for_key(*nonce);
        self.0
            .open_in_place_separate_tag(nonce, aead::Aad::from(aad), tag, in_out)
            .map(|_| ())
            .map_err(|_| CryptoError::AuthenticationFailed)
    }
}

/// AES-CBC without padding. aws-lc-rs 1.x offers unpadded CBC directly
/// (`EncryptingKey::cbc` / `DecryptingKey::cbc` with a caller-supplied IV
/// through `less_safe_encrypt` and a `DecryptionContext`), which runs
/// AWS-LC's `AES_cbc_encrypt` on the whole run in place: no extra padding
/// block to strip, no ECB-and-XOR emulation, no copy. Both keys hold
/// their expanded schedules, so nothing is re-keyed per packet.
struct AwsLcCbc {
    encrypt: EncryptingKey,
    decrypt: DecryptingKey,
}

impl CbcKey for AwsLcCbc {
    fn encrypt_in_place(&self, iv: &[u8; 16], data: &mut [u8]) -> Result<(), CryptoError> {
        // ESP IVs come from the caller's source (RFC 3602 §2.1 requires
        // them unpredictable); "less safe" only means aws-lc-rs did not
        // draw it itself.
        let context = EncryptionContext::Iv128(FixedLength::from(*iv));
        self.encrypt
            .less_safe_encrypt(data, context)
            .map(|_| ())
            .map_err(|_| CryptoError::BadLength)
    }

    fn decrypt_in_place(&self, iv: &[u8; 16], data: &mut [u8]) -> Result<(), CryptoError> {
        let context = DecryptionContext::Iv128(FixedLength::from(*iv));
        self.decrypt
            .decrypt(data, context)
            .map(|_| ())
            .map_err(|_| CryptoError::BadLength)
    }
}

/// A truncated HMAC-SHA-2 (RFC 4868). `hmac::Key` keeps the inner and
/// outer pad states precomputed, so each packet costs only the hashing.
struct AwsLcHmac {
    key: hmac::Key,
    icv_len: usize,
}

impl AwsLcHmac {
    fn compute(&self, parts: &[&[u8]]) -> hmac::Tag {
        let mut context = hmac::Context::with_key(&self.key);
        for part in parts {
            context.update(part);
        }
        context.sign()
    }
}

impl IntegrityKey for AwsLcHmac {
    fn icv_len(&self) -> usize {
        self.icv_len
    }

    fn sign(&self, parts: &[&[u8]], icv: &mut [u8]) {
        let tag = self.compute(parts);
        let tag = tag.as_ref();
        let n = icv.len().min(tag.len());
        icv[..n].copy_from_slice(&tag[..n]);
    }

    fn verify(&self, parts: &[&[u8]], icv: &[u8]) -> bool {
        if icv.len() != self.icv_len {
            return false;
        }
        let tag = self.compute(parts);
        // The length check above and icv_len <= digest length keep this in
        // bounds; the comparison itself is constant time.
        tag.as_ref()
            .get(..self.icv_len)
            .is_some_and(|t| constant_time::verify_slices_are_equal(t, icv).is_ok())
    }
}
