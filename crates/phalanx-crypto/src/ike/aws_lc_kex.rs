//! Key exchanges on aws-lc-rs: ECP-256/384 (RFC 5903), Curve25519
//! (RFC 8031) and ML-KEM-768 (FIPS 203). MODP-2048 is the shared
//! `crypto-bigint` code.
//!
//! Key hygiene: private keys live in AWS-LC's `EVP_PKEY`s, which are
//! cleansed when freed; the seed bytes drawn from the caller's RNG are
//! held in `Zeroizing` buffers; shared secrets are copied straight into
//! `Zeroizing` vectors (aws-lc-rs wipes its own copy on drop).

use super::kex::{modp_2048, KeGroup, KeRole, KexResponse, KeyExchangeState};
use super::IkeRng;
use crate::CryptoError;
use aws_lc_rs::agreement::{self, PrivateKey, UnparsedPublicKey};
use aws_lc_rs::kem::{Ciphertext, DecapsulationKey, EncapsulationKey, ML_KEM_768};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// SEC 1 §2.3.3: the uncompressed point prefix RFC 5903 §7 leaves out.
const UNCOMPRESSED_POINT: u8 = 0x04;

/// How many private scalars to draw before giving up: a P-256 draw falls
/// outside [1, n-1] with probability below 2^-32, so more than one retry
/// means the RNG is broken.
const SCALAR_DRAWS: usize = 4;

/// [`CryptoProvider::key_exchange`](crate::CryptoProvider::key_exchange)
/// for aws-lc-rs.
pub(crate) fn key_exchange(
    group: KeGroup,
    rng: &mut dyn IkeRng,
) -> Result<Box<dyn KeyExchangeState>, CryptoError> {
    match group {
        KeGroup::Modp2048 => Ok(modp_2048(rng)),
        KeGroup::Ecp256 => Ok(Box::new(Ecdh::generate(group, &agreement::ECDH_P256, rng)?)),
        KeGroup::Ecp384 => Ok(Box::new(Ecdh::generate(group, &agreement::ECDH_P384, rng)?)),
        KeGroup::Curve25519 => Ok(Box::new(Ecdh::generate(group, &agreement::X25519, rng)?)),
        KeGroup::MlKem768 => Ok(Box::new(MlKem::generate()?)),
    }
}

/// [`CryptoProvider::kem_encapsulate`](crate::CryptoProvider::kem_encapsulate)
/// for aws-lc-rs. `_rng` is unused: see the [`kex`](super::kex) module doc.
pub(crate) fn kem_encapsulate(
    group: KeGroup,
    peer_public: &[u8],
    _rng: &mut dyn IkeRng,
) -> Result<KexResponse, CryptoError> {
    if group != KeGroup::MlKem768 {
        return Err(CryptoError::UnsupportedAlgorithm);
    }
    if peer_public.len() != group.public_value_len(KeRole::Initiator) {
        return Err(CryptoError::BadLength);
    }
    // FIPS 203 §7.2 "Input checking": AWS-LC runs the type and modulus
    // checks on the encapsulation key and refuses a malformed one.
    let key =
        EncapsulationKey::new(&ML_KEM_768, peer_public).map_err(|_| CryptoError::BadLength)?;
    let (ciphertext, secret) = key.encapsulate().map_err(|_| CryptoError::BadLength)?;
    Ok(KexResponse {
        public_value: ciphertext.as_ref().to_vec(),
        shared_secret: Zeroizing::new(secret.as_ref().to_vec()),
    })
}

/// An ECDH or X25519 key.
struct Ecdh {
    group: KeGroup,
    algorithm: &'static agreement::Algorithm,
    private: PrivateKey,
    /// The Key Exchange Data: x || y for ECP, the u-coordinate for X25519.
    public: Vec<u8>,
}

impl Ecdh {
    fn generate(
        group: KeGroup,
        algorithm: &'static agreement::Algorithm,
        rng: &mut dyn IkeRng,
    ) -> Result<Ecdh, CryptoError> {
        // The private scalar is as long as a coordinate (SEC 1 §2.3.6, RFC 7748 §5).
        let scalar_len = match group {
            KeGroup::Ecp384 => 48,
            _ => 32,
        };
        let private = draw_private_key(algorithm, scalar_len, rng)?;
        let public = private
            .compute_public_key()
            .map_err(|_| CryptoError::UnsupportedAlgorithm)?;
        let public = match group {
            // RFC 5903 §7: "the Key Exchange Data … is the concatenation
            // of the x and y values", without SEC 1's 0x04 prefix.
            KeGroup::Ecp256 | KeGroup::Ecp384 => public.as_ref().get(1..).unwrap_or_default(),
            _ => public.as_ref(),
        }
        .to_vec();
        Ok(Ecdh {
            group,
            algorithm,
            private,
            public,
        })
    }

    fn agree(&self, peer_public: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        if peer_public.len() != self.group.public_value_len(KeRole::Responder) {
            return Err(CryptoError::BadLength);
        }
        // ECP: rebuild the SEC 1 uncompressed point, so no other encoding
        // (compressed, SPKI) can get through; aws-lc checks that the point
        // is on the curve (RFC 6989 §2.3).
        let encoded = match self.group {
            KeGroup::Ecp256 | KeGroup::Ecp384 => [&[UNCOMPRESSED_POINT][..], peer_public].concat(),
            _ => peer_public.to_vec(),
        };
        let peer = UnparsedPublicKey::new(self.algorithm, &encoded);
        let secret = agreement::agree(&self.private, peer, CryptoError::BadLength, |secret| {
            Ok(Zeroizing::new(secret.to_vec()))
        })?;
        // RFC 8031 §2: "check whether the computed shared secret is the
        // all-zeros value and abort if so" (a low-order peer point).
        if self.group == KeGroup::Curve25519 && bool::from(secret.ct_eq(&[0u8; 32][..])) {
            return Err(CryptoError::BadLength);
        }
        Ok(secret)
    }
}

impl KeyExchangeState for Ecdh {
    fn group(&self) -> KeGroup {
        self.group
    }

    fn public_value(&self) -> &[u8] {
        &self.public
    }

    fn complete(self: Box<Self>, peer_public: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        self.agree(peer_public)
    }
}

/// A private key from RNG bytes: a big-endian scalar for ECP (retried
/// when outside [1, n-1]), the 32-byte scalar for X25519 (RFC 7748 §5
/// clamps it).
fn draw_private_key(
    algorithm: &'static agreement::Algorithm,
    len: usize,
    rng: &mut dyn IkeRng,
) -> Result<PrivateKey, CryptoError> {
    let mut bytes = Zeroizing::new(vec![0u8; len]);
    for _ in 0..SCALAR_DRAWS {
        rng.fill_bytes(&mut bytes);
        if let Ok(key) = PrivateKey::from_private_key(algorithm, &bytes) {
            return Ok(key);
        }
    }
    Err(CryptoError::BadKeyLength)
}

/// The initiator's ML-KEM-768 decapsulation key.
struct MlKem {
    key: DecapsulationKey,
    public: Vec<u8>,
}

impl MlKem {
    fn generate() -> Result<MlKem, CryptoError> {
        // aws-lc-rs draws the key from AWS-LC's RNG: see the module doc.
        let key = DecapsulationKey::generate(&ML_KEM_768)
            .map_err(|_| CryptoError::UnsupportedAlgorithm)?;
        let public = key
            .encapsulation_key()
            .and_then(|ek| ek.key_bytes().map(|b| b.as_ref().to_vec()))
            .map_err(|_| CryptoError::UnsupportedAlgorithm)?;
        Ok(MlKem { key, public })
    }
}

impl KeyExchangeState for MlKem {
    fn group(&self) -> KeGroup {
        KeGroup::MlKem768
    }

    fn public_value(&self) -> &[u8] {
        &self.public
    }

    fn complete(self: Box<Self>, peer_public: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        if peer_public.len() != KeGroup::MlKem768.public_value_len(KeRole::Responder) {
            return Err(CryptoError::BadLength);
        }
        // FIPS 203 §6.3: a well-sized but forged ciphertext decapsulates
        // to a pseudorandom secret (implicit rejection); the AUTH payloads
        // then fail, as RFC 9370 intends.
        let secret = self
            .key
            .decapsulate(Ciphertext::from(peer_public))
            .map_err(|_| CryptoError::BadLength)?;
        Ok(Zeroizing::new(secret.as_ref().to_vec()))
    }
}
