//! Algorithm traits and the provider that instantiates them.
//!
//! A [`CryptoProvider`] turns an IANA transform id and key bytes into a keyed
//! algorithm object. The data plane uses [`AwsLcProvider`](crate::AwsLcProvider);
//! the RustCrypto provider exists so that the whole test suite can run
//! against an implementation written by other people. Keyed objects are
//! `Send + Sync`: one SA's transform is used from several engine workers.

use crate::ike::{IkeRng, KeGroup, KexResponse, KeyExchangeState, PrfAlgorithm, PrfKey};
use crate::CryptoError;
use phalanx_wire::{EncrId, IntegId};

/// Nonce length of every AEAD used in ESP here: 4-byte salt + 8-byte IV
/// (RFC 4106 §4, RFC 4543 §3.1, RFC 7634 §2).
pub const AEAD_NONCE_LEN: usize = 12;

/// A keyed AEAD (AES-GCM, ChaCha20-Poly1305). GMAC (RFC 4543) is AES-GCM
/// with an empty plaintext, so it uses this trait too.
pub trait AeadKey: Send + Sync {
    /// Encrypts `in_out` in place and writes the tag (`tag.len()` bytes,
    /// the full 16 here) to `tag`.
    fn seal_in_place(
        &self,
        nonce: &[u8; AEAD_NONCE_LEN],
        aad: &[u8],
        in_out: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), CryptoError>;

    /// Verifies `tag` over `aad` and `in_out` and decrypts `in_out` in
    /// place. On failure the contents of `in_out` are unspecified.
    fn open_in_place(
        &self,
        nonce: &[u8; AEAD_NONCE_LEN],
        aad: &[u8],
        in_out: &mut [u8],
        tag: &[u8],
    ) -> Result<(), CryptoError>;
}

/// A keyed block cipher in CBC mode without padding (ESP pads itself,
/// RFC 4303 §2.4). Data lengths are multiples of the block size.
pub trait CbcKey: Send + Sync {
    /// Encrypts `data` in place.
    fn encrypt_in_place(&self, iv: &[u8; 16], data: &mut [u8]) -> Result<(), CryptoError>;
    /// Decrypts `data` in place.
    fn decrypt_in_place(&self, iv: &[u8; 16], data: &mut [u8]) -> Result<(), CryptoError>;
}

/// A keyed, truncated HMAC (RFC 2104, RFC 4868).
pub trait IntegrityKey: Send + Sync {
    /// Length of the truncated ICV in bytes.
    fn icv_len(&self) -> usize;
    /// Computes the MAC over the concatenation of `parts` and writes its
    /// first `icv.len()` bytes (normally [`icv_len`](Self::icv_len)) to `icv`.
    fn sign(&self, parts: &[&[u8]], icv: &mut [u8]);
    /// True when `icv` equals the truncated MAC over `parts`, compared in
    /// constant time.
    fn verify(&self, parts: &[&[u8]], icv: &[u8]) -> bool;
}

/// Creates keyed algorithm objects from IANA ids and key bytes.
pub trait CryptoProvider: Send + Sync {
    /// A short name for logs and test output ("aws-lc-rs", "rustcrypto").
    fn name(&self) -> &'static str;

    /// An AEAD key. `key` is the cipher key without the ESP salt. For
    /// [`EncrId::NULL_AUTH_AES_GMAC`] this is the AES-GCM key.
    fn aead(&self, encr: EncrId, key: &[u8]) -> Result<Box<dyn AeadKey>, CryptoError>;

    /// A CBC cipher key ([`EncrId::AES_CBC`], 16 or 32 bytes).
    fn cbc(&self, encr: EncrId, key: &[u8]) -> Result<Box<dyn CbcKey>, CryptoError>;

    /// An integrity key.
    fn integrity(&self, integ: IntegId, key: &[u8]) -> Result<Box<dyn IntegrityKey>, CryptoError>;

    /// An IKEv2 PRF keyed with `key`, which may have any length
    /// (HMAC, RFC 2104 §2; RFC 7296 §2.13).
    ///
    /// The default refuses every PRF, so providers that only serve ESP
    /// (test doubles) need not implement it.
    fn prf(&self, alg: PrfAlgorithm, key: &[u8]) -> Result<Box<dyn PrfKey>, CryptoError> {
        let _ = (alg, key);
        Err(CryptoError::UnsupportedAlgorithm)
    }

    /// A fresh ephemeral key for `group`, its private part drawn from
    /// `rng` (RFC 7296 §1.2, §3.4). For a KEM this is the decapsulation
    /// key, and [`KeyExchangeState::complete`] decapsulates.
    ///
    /// The default refuses every group.
    fn key_exchange(
        &self,
        group: KeGroup,
        rng: &mut dyn IkeRng,
    ) -> Result<Box<dyn KeyExchangeState>, CryptoError> {
        let _ = (group, rng);
        Err(CryptoError::UnsupportedAlgorithm)
    }

    /// The responder side of a KEM ([`KeGroup::is_kem`]): encapsulates to
    /// the initiator's encapsulation key and returns the ciphertext to
    /// send and the shared secret. Diffie-Hellman groups are answered by
    /// [`crate::ike::respond`] through [`key_exchange`](Self::key_exchange).
    ///
    /// The default refuses every group.
    fn kem_encapsulate(
        &self,
        group: KeGroup,
        peer_public: &[u8],
        rng: &mut dyn IkeRng,
    ) -> Result<KexResponse, CryptoError> {
        let _ = (group, peer_public, rng);
        Err(CryptoError::UnsupportedAlgorithm)
    }
}
