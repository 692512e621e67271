//! The cross-check provider, on RustCrypto crates. Tests run the whole
//! suite against it and compare its bytes with aws-lc-rs's; it is never
//! the data plane (it clones key schedules per packet).
//!
//! Key hygiene: AES key schedules (crate `aes`, feature `zeroize`), the
//! GHASH key (crate `ghash`, feature `zeroize`) and the ChaCha20-Poly1305
//! key are wiped on drop by their crates. `hmac` 0.12 / `sha2` 0.10 offer no
//! zeroize support, so [`RustCryptoHmac`] overwrites its keyed state with a
//! state keyed by zeros when dropped (best effort: `black_box` keeps the
//! store from being optimised away).

use crate::ike::{IkeRng, KeGroup, KeyExchangeState, PrfAlgorithm, PrfKey};
use crate::provider::{AeadKey, CbcKey, CryptoProvider, IntegrityKey, AEAD_NONCE_LEN};
use crate::CryptoError;
use aes::{Aes128, Aes256};
use aes_gcm::aead::consts::{U12, U16};
use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Aes256Gcm};
use cbc::cipher::block_padding::NoPadding;
use cbc::cipher::{
    BlockCipher, BlockDecrypt, BlockDecryptMut, BlockEncrypt, BlockEncryptMut, InnerIvInit,
};
use chacha20poly1305::ChaCha20Poly1305;
use hmac::{Hmac, Mac};
use phalanx_wire::{EncrId, IntegId};
use sha2::{Sha256, Sha384, Sha512};
use subtle::ConstantTimeEq;

/// Length of every AEAD tag used here.
const TAG_LEN: usize = 16;

/// The [`CryptoProvider`] backed by RustCrypto: `aes-gcm`,
/// `chacha20poly1305`, `aes` + `cbc`, `hmac` + `sha2`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RustCryptoProvider;

impl CryptoProvider for RustCryptoProvider {
    fn name(&self) -> &'static str {
        "rustcrypto"
    }

    fn aead(&self, encr: EncrId, key: &[u8]) -> Result<Box<dyn AeadKey>, CryptoError> {
        match (encr, key.len()) {
            (EncrId::AES_GCM_16 | EncrId::NULL_AUTH_AES_GMAC, 16) => aead::<Aes128Gcm>(key),
            (EncrId::AES_GCM_16 | EncrId::NULL_AUTH_AES_GMAC, 32) => aead::<Aes256Gcm>(key),
            (EncrId::CHACHA20_POLY1305, 32) => aead::<ChaCha20Poly1305>(key),
            (EncrId::AES_GCM_16 | EncrId::NULL_AUTH_AES_GMAC | EncrId::CHACHA20_POLY1305, _) => {
                Err(CryptoError::BadKeyLength)
            }
            _ => Err(CryptoError::UnsupportedAlgorithm),
        }
    }

    fn cbc(&self, encr: EncrId, key: &[u8]) -> Result<Box<dyn CbcKey>, CryptoError> {
        if encr != EncrId::AES_CBC {
            return Err(CryptoError::UnsupportedAlgorithm);
        }
        match key.len() {
            16 => cbc::<Aes128>(key),
            32 => cbc::<Aes256>(key),
            _ => Err(CryptoError::BadKeyLength),
        }
    }

    fn integrity(&self, integ: IntegId, key: &[u8]) -> Result<Box<dyn IntegrityKey>, CryptoError> {
        // RFC 4868 §2.3: the ICV is the leftmost half of the HMAC output.
        // Any key length is valid HMAC (RFC 2104 §2); RFC 4868 §2.1.1's
        // fixed lengths are enforced by `SaTransform::new`.
        match integ {
            IntegId::HMAC_SHA2_256_128 => hmac::<Hmac<Sha256>>(key, 16),
            IntegId::HMAC_SHA2_384_192 => hmac::<Hmac<Sha384>>(key, 24),
            IntegId::HMAC_SHA2_512_256 => hmac::<Hmac<Sha512>>(key, 32),
            _ => Err(CryptoError::UnsupportedAlgorithm),
        }
    }

    fn prf(&self, alg: PrfAlgorithm, key: &[u8]) -> Result<Box<dyn PrfKey>, CryptoError> {
        // Untruncated HMAC (RFC 4868 §2.1.2); no SHA-1 in this provider.
        match alg {
            PrfAlgorithm::HmacSha2_256 => prf::<Hmac<Sha256>>(alg, key),
            PrfAlgorithm::HmacSha2_384 => prf::<Hmac<Sha384>>(alg, key),
            PrfAlgorithm::HmacSha2_512 => prf::<Hmac<Sha512>>(alg, key),
            PrfAlgorithm::HmacSha1 => Err(CryptoError::UnsupportedAlgorithm),
        }
    }

    /// Only MODP-2048, the `crypto-bigint` code every provider shares:
    /// this provider carries no elliptic curves and no ML-KEM.
    fn key_exchange(
        &self,
        group: KeGroup,
        rng: &mut dyn IkeRng,
    ) -> Result<Box<dyn KeyExchangeState>, CryptoError> {
        match group {
            KeGroup::Modp2048 => Ok(crate::ike::kex::modp_2048(rng)),
            _ => Err(CryptoError::UnsupportedAlgorithm),
        }
    }
}

fn prf<M>(alg: PrfAlgorithm, key: &[u8]) -> Result<Box<dyn PrfKey>, CryptoError>
where
    M: Mac + KeyInit + Clone + Send + Sync + 'static,
{
    let mac = <M as KeyInit>::new_from_slice(key).map_err(|_| CryptoError::BadKeyLength)?;
    let hmac = RustCryptoHmac {
        mac,
        icv_len: alg.output_len(),
    };
    Ok(Box::new(RustCryptoPrf { hmac, alg }))
}

/// An HMAC PRF for IKEv2: the integrity key's keyed state, never truncated
/// (and wiped on drop the same way).
struct RustCryptoPrf<M: Mac + KeyInit> {
    hmac: RustCryptoHmac<M>,
    alg: PrfAlgorithm,
}

impl<M: Mac + KeyInit + Clone + Send + Sync> PrfKey for RustCryptoPrf<M> {
    fn algorithm(&self) -> PrfAlgorithm {
        self.alg
    }

    fn compute(&self, parts: &[&[u8]], out: &mut [u8]) {
        IntegrityKey::sign(&self.hmac, parts, out);
    }
}

fn aead<A>(key: &[u8]) -> Result<Box<dyn AeadKey>, CryptoError>
where
    A: AeadInPlace<NonceSize = U12, TagSize = U16> + KeyInit + Send + Sync + 'static,
{
    let cipher = A::new_from_slice(key).map_err(|_| CryptoError::BadKeyLength)?;
    Ok(Box::new(RustCryptoAead(cipher)))
}

/// AES-GCM or ChaCha20-Poly1305 with a detached 16-byte tag.
struct RustCryptoAead<A>(A);

impl<A> AeadKey for RustCryptoAead<A>
where
    A: AeadInPlace<NonceSize = U12, TagSize = U16> + Send + Sync,
{
    fn seal_in_place(
        &self,
        nonce: &[u8; AEAD_NONCE_LEN],
        aad: &[u8],
        in_out: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), CryptoError> {
        if tag.len() != TAG_LEN {
            return Err(CryptoError::BadLength);
        }
        let computed = self
            .0
            .encrypt_in_place_detached(nonce.into(), aad, in_out)
            .map_err(|_| CryptoError::BadLength)?;
        tag.copy_from_slice(&computed);
        Ok(())
    }

    fn open_in_place(
        &self,
        nonce: &[u8; AEAD_NONCE_LEN],
        aad: &[u8],
        in_out: &mut [u8],
        tag: &[u8],
    ) -> Result<(), CryptoError> {
        let tag: &[u8; TAG_LEN] = tag
            .try_into()
            .map_err(|_| CryptoError::AuthenticationFailed)?;
        self.0
            .decrypt_in_place_detached(nonce.into(), aad, in_out, tag.into())
            .map_err(|_| CryptoError::AuthenticationFailed)
    }
}

fn cbc<C>(key: &[u8]) -> Result<Box<dyn CbcKey>, CryptoError>
where
    C: BlockCipher + BlockEncrypt + BlockDecrypt + KeyInit + Clone + Send + Sync + 'static,
{
    let cipher = C::new_from_slice(key).map_err(|_| CryptoError::BadKeyLength)?;
    Ok(Box::new(RustCryptoCbc(cipher)))
}

/// AES-CBC without padding: `cbc`'s modes over a clone of the expanded
/// key (the clone is wiped on drop too).
struct RustCryptoCbc<C>(C);

impl<C> CbcKey for RustCryptoCbc<C>
where
    C: BlockCipher + BlockEncrypt + BlockDecrypt + Clone + Send + Sync,
{
    fn encrypt_in_place(&self, iv: &[u8; 16], data: &mut [u8]) -> Result<(), CryptoError> {
        let mode = cbc::Encryptor::<C>::inner_iv_slice_init(self.0.clone(), iv)
            .map_err(|_| CryptoError::BadLength)?;
        let len = data.len();
        mode.encrypt_padded_mut::<NoPadding>(data, len)
            .map(|_| ())
            .map_err(|_| CryptoError::BadLength)
    }

    fn decrypt_in_place(&self, iv: &[u8; 16], data: &mut [u8]) -> Result<(), CryptoError> {
        let mode = cbc::Decryptor::<C>::inner_iv_slice_init(self.0.clone(), iv)
            .map_err(|_| CryptoError::BadLength)?;
        mode.decrypt_padded_mut::<NoPadding>(data)
            .map(|_| ())
            .map_err(|_| CryptoError::BadLength)
    }
}

fn hmac<M>(key: &[u8], icv_len: usize) -> Result<Box<dyn IntegrityKey>, CryptoError>
where
    M: Mac + KeyInit + Clone + Send + Sync + 'static,
{
    let mac = <M as KeyInit>::new_from_slice(key).map_err(|_| CryptoError::BadKeyLength)?;
    Ok(Box::new(RustCryptoHmac { mac, icv_len }))
}

/// A truncated HMAC-SHA-2 (RFC 4868); the keyed state is cloned per packet.
struct RustCryptoHmac<M: Mac + KeyInit> {
    mac: M,
    icv_len: usize,
}

impl<M: Mac + KeyInit + Clone> RustCryptoHmac<M> {
    fn compute(&self, parts: &[&[u8]]) -> hmac::digest::Output<M> {
        let mut mac = self.mac.clone();
        for part in parts {
            mac.update(part);
        }
        mac.finalize().into_bytes()
    }
}

impl<M: Mac + KeyInit + Clone + Send + Sync> IntegrityKey for RustCryptoHmac<M> {
    fn icv_len(&self) -> usize {
        self.icv_len
    }

    fn sign(&self, parts: &[&[u8]], icv: &mut [u8]) {
        let tag = self.compute(parts);
        let n = icv.len().min(tag.len());
        icv[..n].copy_from_slice(&tag[..n]);
    }

    fn verify(&self, parts: &[&[u8]], icv: &[u8]) -> bool {
        if icv.len() != self.icv_len {
            return false;
        }
        let tag = self.compute(parts);
        tag.get(..self.icv_len)
            .is_some_and(|t| bool::from(t.ct_eq(icv)))
    }
}

impl<M: Mac + KeyInit> Drop for RustCryptoHmac<M> {
    fn drop(&mut self) {
        // hmac 0.12 cannot zeroize itself: overwrite the keyed pad states
        // with those of the all-zero key, and keep the store observable.
        self.mac = <M as KeyInit>::new(&Default::default());
        core::hint::black_box(&self.mac);
    }
}
