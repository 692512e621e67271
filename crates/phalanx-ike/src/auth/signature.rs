//! Signature AUTH payloads: RFC 7427 Digital Signature (auth method 14),
//! RFC 4754 ECDSA (methods 9, 10, 11), and the choice of our own scheme
//! from the peer's SIGNATURE_HASH_ALGORITHMS notify (RFC 7427 §4).
//!
//! ```text
//! Authentication Data of method 14 (RFC 7427 §3):
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | ASN.1 Length  | AlgorithmIdentifier ASN.1 object              |
//! +-+-+-+-+-+-+-+-+                                               +
//! ~                AlgorithmIdentifier ASN.1 object               ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                         Signature Value                       ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Methods 9/10/11 carry a bare fixed-size `r || s` signature (RFC 4754
//! §7) whose curve and hash the method number fixes. Method 1 (RSA with
//! SHA-1, RFC 7296 §3.8) is refused: SHA-1 signatures are not accepted and
//! every current implementation speaks RFC 7427.

use super::x509::VerifiedPeer;
use super::AuthError;
use phalanx_crypto::sign::{ecdsa_fixed_to_der, HashAlgorithm, KeyKind, SignatureScheme};
use phalanx_crypto::SigningKey;
use rustls_pki_types::SignatureVerificationAlgorithm;
use webpki::aws_lc_rs as algs;

/// Auth method 1, RSA Digital Signature with SHA-1 (RFC 7296 §3.8): refused.
pub const AUTH_METHOD_RSA_SIG: u8 = 1;
/// Auth method 2, Shared Key Message Integrity Code (RFC 7296 §3.8).
pub const AUTH_METHOD_SHARED_KEY_MIC: u8 = 2;
/// Auth method 9, ECDSA with SHA-256 on P-256 (RFC 4754 §3).
pub const AUTH_METHOD_ECDSA_256: u8 = 9;
/// Auth method 10, ECDSA with SHA-384 on P-384 (RFC 4754 §3).
pub const AUTH_METHOD_ECDSA_384: u8 = 10;
/// Auth method 11, ECDSA with SHA-512 on P-521 (RFC 4754 §3).
pub const AUTH_METHOD_ECDSA_521: u8 = 11;
/// Auth method 14, Digital Signature (RFC 7427 §3).
pub const AUTH_METHOD_DIGITAL_SIGNATURE: u8 = 14;

/// The Authentication Data of method 14 over `octets`: the length of the
/// scheme's AlgorithmIdentifier, the AlgorithmIdentifier, the signature.
pub fn sign_auth(
    key: &SigningKey,
    scheme: SignatureScheme,
    octets: &[u8],
) -> Result<Vec<u8>, AuthError> {
    let algorithm = scheme.algorithm_identifier();
    let signature = key.sign(scheme, octets)?;
    let mut data = Vec::with_capacity(1 + algorithm.len() + signature.len());
    // Every AlgorithmIdentifier of SignatureScheme is under 256 octets (72 at most).
    data.push(algorithm.len() as u8);
    data.extend_from_slice(algorithm);
    data.extend_from_slice(&signature);
    Ok(data)
}

/// RFC 4754 authentication for peers without RFC 7427: the auth method
/// (9 for P-256, 10 for P-384, 11 for P-521) and the fixed-size `r || s` signature over
/// `octets`. Other key kinds have no such method here.
pub fn sign_auth_rfc4754(key: &SigningKey, octets: &[u8]) -> Result<(u8, Vec<u8>), AuthError> {
    let (method, scheme) = match key.kind() {
        KeyKind::EcdsaP256 => (AUTH_METHOD_ECDSA_256, SignatureScheme::EcdsaP256Sha256),
        KeyKind::EcdsaP384 => (AUTH_METHOD_ECDSA_384, SignatureScheme::EcdsaP384Sha384),
        KeyKind::EcdsaP521 => (AUTH_METHOD_ECDSA_521, SignatureScheme::EcdsaP521Sha512),
        _ => return Err(AuthError::UnsupportedAuthMethod(AUTH_METHOD_RSA_SIG)),
    };
    Ok((method, key.sign_ecdsa_fixed(scheme, octets)?))
}

/// Verifies a peer's AUTH payload (method and data) over `octets` with
/// the public key of its validated certificate.
pub fn verify_auth(
    peer: &VerifiedPeer,
    auth_method: u8,
    auth_data: &[u8],
    octets: &[u8],
) -> Result<(), AuthError> {
    match auth_method {
        AUTH_METHOD_DIGITAL_SIGNATURE => verify_digital_signature(peer, auth_data, octets),
        AUTH_METHOD_ECDSA_256 => {
            verify_rfc4754(peer, algs::ECDSA_P256_SHA256, 32, auth_data, octets)
        }
        AUTH_METHOD_ECDSA_384 => {
            verify_rfc4754(peer, algs::ECDSA_P384_SHA384, 48, auth_data, octets)
        }
        AUTH_METHOD_ECDSA_521 => {
            verify_rfc4754(peer, algs::ECDSA_P521_SHA512, 66, auth_data, octets)
        }
        AUTH_METHOD_RSA_SIG => Err(AuthError::LegacyRsaSha1Refused),
        other => Err(AuthError::UnsupportedAuthMethod(other)),
    }
}

/// RFC 7427 §3: split off the AlgorithmIdentifier, pick the verifiers it
/// names, verify.
fn verify_digital_signature(
    peer: &VerifiedPeer,
    auth_data: &[u8],
    octets: &[u8],
) -> Result<(), AuthError> {
    let (&len, rest) = auth_data
        .split_first()
        .ok_or(AuthError::MalformedAuthData)?;
    let len = usize::from(len);
    // The signature must not be empty either.
    if rest.len() <= len {
        return Err(AuthError::MalformedAuthData);
    }
    let (algorithm, signature) = rest.split_at(len);
    let scheme = SignatureScheme::from_algorithm_identifier(algorithm)
        .ok_or(AuthError::UnsupportedSignatureAlgorithm)?;
    verify_with(peer, &verifiers(scheme), octets, signature)
}

/// RFC 4754 §7: a fixed `r || s` of twice the curve's scalar size, which
/// rustls-webpki wants as a DER ECDSA-Sig-Value.
fn verify_rfc4754(
    peer: &VerifiedPeer,
    algorithm: &'static dyn SignatureVerificationAlgorithm,
    scalar_len: usize,
    auth_data: &[u8],
    octets: &[u8],
) -> Result<(), AuthError> {
    if auth_data.len() != 2 * scalar_len {
        return Err(AuthError::MalformedAuthData);
    }
    let der = ecdsa_fixed_to_der(auth_data).ok_or(AuthError::MalformedAuthData)?;
    verify_with(peer, &[algorithm], octets, &der)
}

/// Verifiers for a scheme. An ECDSA AlgorithmIdentifier names only the
/// hash (RFC 7427 §3 allows any curve), so every supported curve is a
/// candidate and the certificate's key picks one.
fn verifiers(scheme: SignatureScheme) -> Vec<&'static dyn SignatureVerificationAlgorithm> {
    match scheme {
        SignatureScheme::EcdsaP256Sha256 => {
            vec![
                algs::ECDSA_P256_SHA256,
                algs::ECDSA_P384_SHA256,
                algs::ECDSA_P521_SHA256,
            ]
        }
        SignatureScheme::EcdsaP384Sha384 => {
            vec![
                algs::ECDSA_P256_SHA384,
                algs::ECDSA_P384_SHA384,
                algs::ECDSA_P521_SHA384,
            ]
        }
        SignatureScheme::EcdsaP521Sha512 => {
            vec![
                algs::ECDSA_P256_SHA512,
                algs::ECDSA_P384_SHA512,
                algs::ECDSA_P521_SHA512,
            ]
        }
        SignatureScheme::RsaPkcs1Sha256 => vec![algs::RSA_PKCS1_2048_8192_SHA256],
        SignatureScheme::RsaPkcs1Sha384 => vec![algs::RSA_PKCS1_2048_8192_SHA384],
        SignatureScheme::RsaPkcs1Sha512 => vec![algs::RSA_PKCS1_2048_8192_SHA512],
        SignatureScheme::RsaPssSha256 => vec![algs::RSA_PSS_2048_8192_SHA256_LEGACY_KEY],
        SignatureScheme::RsaPssSha384 => vec![algs::RSA_PSS_2048_8192_SHA384_LEGACY_KEY],
        SignatureScheme::RsaPssSha512 => vec![algs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY],
        SignatureScheme::Ed25519 => vec![algs::ED25519],
    }
}

/// Verifies with the first candidate whose key type fits the certificate.
fn verify_with(
    peer: &VerifiedPeer,
    candidates: &[&'static dyn SignatureVerificationAlgorithm],
    octets: &[u8],
    signature: &[u8],
) -> Result<(), AuthError> {
    let cert = peer.end_entity()?;
    for algorithm in candidates {
        match cert.verify_signature(*algorithm, octets, signature) {
            Ok(()) => return Ok(()),
            Err(webpki::Error::UnsupportedSignatureAlgorithmForPublicKeyContext(_)) => continue,
            Err(_) => return Err(AuthError::BadSignature),
        }
    }
    Err(AuthError::KeyMismatch)
}

/// Our scheme for RFC 7427, given the hash algorithms the peer announced
/// in SIGNATURE_HASH_ALGORITHMS (RFC 7427 §4; values of the IANA "IKEv2
/// Hash Algorithms" registry) and the schemes the connection prefers
/// (`preferred`, the first that fits the key and whose hash the peer
/// takes; empty: the defaults). By default ECDSA keys sign with their
/// curve's hash (P-256: SHA2-256, P-384: SHA2-384, P-521: SHA2-512),
/// Ed25519 needs "Identity" (RFC 8420 §2), RSA keys use PKCS#1 v1.5 -
/// which every RFC 7427 implementation verifies - with the first of
/// SHA2-256, -384, -512 the peer accepts; RSASSA-PSS is used when
/// preferred. `None` when the peer accepts none of them, or sent no
/// notify: then only RFC 4754 ([`sign_auth_rfc4754`]) is left, for ECDSA
/// keys.
pub fn choose_scheme(
    key_kind: KeyKind,
    peer_hashes: &[u16],
    preferred: &[SignatureScheme],
) -> Option<SignatureScheme> {
    let offered = |hash: HashAlgorithm| peer_hashes.contains(&hash.0);
    let fitting = preferred
        .iter()
        .copied()
        .filter(|s| s.fits(key_kind))
        .find(|s| offered(s.hash_algorithm()));
    if !preferred.is_empty() {
        return fitting;
    }
    let candidates: &[SignatureScheme] = match key_kind {
        KeyKind::EcdsaP256 => &[SignatureScheme::EcdsaP256Sha256],
        KeyKind::EcdsaP384 => &[SignatureScheme::EcdsaP384Sha384],
        KeyKind::EcdsaP521 => &[SignatureScheme::EcdsaP521Sha512],
        KeyKind::Ed25519 => &[SignatureScheme::Ed25519],
        KeyKind::Rsa { .. } => &[
            SignatureScheme::RsaPkcs1Sha256,
            SignatureScheme::RsaPkcs1Sha384,
            SignatureScheme::RsaPkcs1Sha512,
        ],
    };
    candidates
        .iter()
        .copied()
        .find(|scheme| offered(scheme.hash_algorithm()))
}

/// The scheme an AUTH payload was signed with: RFC 7427's
/// AlgorithmIdentifier, or the ECDSA scheme an RFC 4754 method fixes.
pub fn auth_scheme(auth_method: u8, auth_data: &[u8]) -> Option<SignatureScheme> {
    match auth_method {
        AUTH_METHOD_DIGITAL_SIGNATURE => {
            let (&len, rest) = auth_data.split_first()?;
            SignatureScheme::from_algorithm_identifier(rest.get(..usize::from(len))?)
        }
        AUTH_METHOD_ECDSA_256 => Some(SignatureScheme::EcdsaP256Sha256),
        AUTH_METHOD_ECDSA_384 => Some(SignatureScheme::EcdsaP384Sha384),
        AUTH_METHOD_ECDSA_521 => Some(SignatureScheme::EcdsaP521Sha512),
        _ => None,
    }
}

/// The SIGNATURE_HASH_ALGORITHMS we announce (RFC 7427 §4): the hashes
/// our verifiers accept, SHA2-256, -384, -512 and Identity (RFC 8420).
pub const SUPPORTED_HASH_ALGORITHMS: [u16; 4] = [
    HashAlgorithm::SHA2_256.0,
    HashAlgorithm::SHA2_384.0,
    HashAlgorithm::SHA2_512.0,
    HashAlgorithm::IDENTITY.0,
];
