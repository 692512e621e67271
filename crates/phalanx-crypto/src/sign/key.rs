//! Private keys that sign IKE AUTH payloads, on aws-lc-rs.

use super::pem::decode_pem;
use super::{KeyKind, SignError, SignatureScheme};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    self, EcdsaKeyPair, EcdsaSigningAlgorithm, Ed25519KeyPair, KeyPair, RsaEncoding, RsaKeyPair,
};
use core::fmt;

/// A private key for IKE authentication: ECDSA P-256, P-384 or P-521, RSA
/// (2048-8192 bits) or Ed25519.
///
/// Key material lives inside aws-lc (which cleanses it when freed); the
/// decoded PEM/DER this was loaded from is zeroized. `Debug` shows only the
/// key kind.
pub struct SigningKey {
    inner: Inner,
}

enum Inner {
    /// One aws-lc key pair per output encoding: DER for RFC 7427, fixed
    /// `r || s` for RFC 4754.
    Ecdsa {
        kind: KeyKind,
        der: EcdsaKeyPair,
        fixed: EcdsaKeyPair,
    },
    Rsa(RsaKeyPair),
    Ed25519(Ed25519KeyPair),
}

/// The aws-lc signing algorithms (DER, fixed) for a curve.
type EcdsaAlgorithms = (
    &'static EcdsaSigningAlgorithm,
    &'static EcdsaSigningAlgorithm,
);

const P256: EcdsaAlgorithms = (
    &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
    &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
);
const P384: EcdsaAlgorithms = (
    &signature::ECDSA_P384_SHA384_ASN1_SIGNING,
    &signature::ECDSA_P384_SHA384_FIXED_SIGNING,
);
const P521: EcdsaAlgorithms = (
    &signature::ECDSA_P521_SHA512_ASN1_SIGNING,
    &signature::ECDSA_P521_SHA512_FIXED_SIGNING,
);

/// The curves tried when loading an EC key, in order.
const CURVES: [(KeyKind, EcdsaAlgorithms); 3] = [
    (KeyKind::EcdsaP256, P256),
    (KeyKind::EcdsaP384, P384),
    (KeyKind::EcdsaP521, P521),
];

impl SigningKey {
    /// Loads the first private key of a PEM file: `PRIVATE KEY` (PKCS#8,
    /// any supported type), `EC PRIVATE KEY` (SEC1 / RFC 5915) or
    /// `RSA PRIVATE KEY` (PKCS#1 / RFC 8017). Other blocks (certificates,
    /// `EC PARAMETERS`) are skipped; encrypted keys are refused.
    pub fn from_pem(pem: &[u8]) -> Result<Self, SignError> {
        for block in decode_pem(pem)? {
            let load = match block.label.as_str() {
                "PRIVATE KEY" => Self::from_pkcs8_der,
                "EC PRIVATE KEY" => Self::from_sec1_der,
                "RSA PRIVATE KEY" => Self::from_pkcs1_der,
                "ENCRYPTED PRIVATE KEY" => return Err(SignError::EncryptedKey),
                _ => continue,
            };
            if block.encrypted {
                return Err(SignError::EncryptedKey);
            }
            return load(&block.der);
        }
        Err(SignError::NoPrivateKey)
    }

    /// Loads an unencrypted PKCS#8 `PrivateKeyInfo` (RFC 5208 / RFC 5958).
    pub fn from_pkcs8_der(der: &[u8]) -> Result<Self, SignError> {
        if let Ok(key) = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der) {
            return Ok(Self::from(Inner::Ed25519(key)));
        }
        if let Ok(key) = RsaKeyPair::from_pkcs8(der) {
            return Ok(Self::from(Inner::Rsa(key)));
        }
        Self::ecdsa(der, EcdsaKeyPair::from_pkcs8)
    }

    /// Loads a SEC1 `ECPrivateKey` (RFC 5915) on P-256, P-384 or P-521; the
    /// curve comes from the key's parameters.
    pub fn from_sec1_der(der: &[u8]) -> Result<Self, SignError> {
        Self::ecdsa(der, EcdsaKeyPair::from_private_key_der)
    }

    /// Loads a PKCS#1 `RSAPrivateKey` (RFC 8017 Appendix A.1.2).
    pub fn from_pkcs1_der(der: &[u8]) -> Result<Self, SignError> {
        let key = RsaKeyPair::from_der(der).map_err(|_| SignError::KeyRejected)?;
        Ok(Self::from(Inner::Rsa(key)))
    }

    /// Tries each curve of [`CURVES`] with the given aws-lc loader.
    fn ecdsa<E>(
        der: &[u8],
        load: fn(&'static EcdsaSigningAlgorithm, &[u8]) -> Result<EcdsaKeyPair, E>,
    ) -> Result<Self, SignError> {
        for (kind, (der_alg, fixed_alg)) in CURVES {
            if let (Ok(der_key), Ok(fixed)) = (load(der_alg, der), load(fixed_alg, der)) {
                let inner = Inner::Ecdsa {
                    kind,
                    der: der_key,
                    fixed,
                };
                return Ok(Self::from(inner));
            }
        }
        Err(SignError::KeyRejected)
    }

    /// What kind of key this is.
    pub fn kind(&self) -> KeyKind {
        match &self.inner {
            Inner::Ecdsa { kind, .. } => *kind,
            Inner::Rsa(key) => KeyKind::Rsa {
                // At most 8192 bits: fits.
                bits: (key.public_modulus_len() * 8) as u32,
            },
            Inner::Ed25519(_) => KeyKind::Ed25519,
        }
    }

    /// The public key as an X.509 `subjectPublicKey` BIT STRING holds it:
    /// the uncompressed point (ECDSA), the DER `RSAPublicKey` (RSA) or the
    /// 32 raw bytes (Ed25519). Lets a caller check that a certificate
    /// belongs to this key.
    pub fn public_key(&self) -> &[u8] {
        match &self.inner {
            Inner::Ecdsa { der, .. } => der.public_key().as_ref(),
            Inner::Rsa(key) => key.public_key().as_ref(),
            Inner::Ed25519(key) => key.public_key().as_ref(),
        }
    }

    /// Signs `msg` with `scheme` in the encoding RFC 7427 carries: DER
    /// `ECDSA-Sig-Value` for ECDSA, the modulus-sized octet string for RSA,
    /// 64 bytes for Ed25519.
    ///
    /// ECDSA nonces and RSA-PSS salts come from aws-lc's own CSPRNG (see
    /// the module doc); aws-lc-rs ignores the `SecureRandom` it is handed.
    pub fn sign(&self, scheme: SignatureScheme, msg: &[u8]) -> Result<Vec<u8>, SignError> {
        if !scheme.fits(self.kind()) {
            return Err(SignError::SchemeMismatch);
        }
        match &self.inner {
            Inner::Ecdsa { der, .. } => sign_ecdsa(der, msg),
            Inner::Rsa(key) => sign_rsa(key, rsa_encoding(scheme)?, msg),
            Inner::Ed25519(key) => Ok(key.sign(msg).as_ref().to_vec()),
        }
    }

    /// Signs `msg` with an ECDSA `scheme` in the fixed-size `r || s`
    /// encoding of RFC 4754 §7 (auth methods 9, 10 and 11).
    pub fn sign_ecdsa_fixed(
        &self,
        scheme: SignatureScheme,
        msg: &[u8],
    ) -> Result<Vec<u8>, SignError> {
        match &self.inner {
            Inner::Ecdsa { kind, fixed, .. } if scheme.fits(*kind) => sign_ecdsa(fixed, msg),
            _ => Err(SignError::SchemeMismatch),
        }
    }
}

impl From<Inner> for SigningKey {
    fn from(inner: Inner) -> Self {
        SigningKey { inner }
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("kind", &self.kind())
            .finish_non_exhaustive()
    }
}

fn sign_ecdsa(key: &EcdsaKeyPair, msg: &[u8]) -> Result<Vec<u8>, SignError> {
    let sig = key
        .sign(&SystemRandom::new(), msg)
        .map_err(|_| SignError::SigningFailed)?;
    Ok(sig.as_ref().to_vec())
}

fn sign_rsa(
    key: &RsaKeyPair,
    encoding: &'static dyn RsaEncoding,
    msg: &[u8],
) -> Result<Vec<u8>, SignError> {
    let mut sig = vec![0u8; key.public_modulus_len()];
    key.sign(encoding, &SystemRandom::new(), msg, &mut sig)
        .map_err(|_| SignError::SigningFailed)?;
    Ok(sig)
}

/// aws-lc's padding for an RSA scheme. PSS salts are the hash length,
/// matching the `saltLength` of the scheme's `AlgorithmIdentifier`.
fn rsa_encoding(scheme: SignatureScheme) -> Result<&'static dyn RsaEncoding, SignError> {
    Ok(match scheme {
        SignatureScheme::RsaPkcs1Sha256 => &signature::RSA_PKCS1_SHA256,
        SignatureScheme::RsaPkcs1Sha384 => &signature::RSA_PKCS1_SHA384,
        SignatureScheme::RsaPkcs1Sha512 => &signature::RSA_PKCS1_SHA512,
        SignatureScheme::RsaPssSha256 => &signature::RSA_PSS_SHA256,
        SignatureScheme::RsaPssSha384 => &signature::RSA_PSS_SHA384,
        SignatureScheme::RsaPssSha512 => &signature::RSA_PSS_SHA512,
        _ => return Err(SignError::SchemeMismatch),
    })
}
