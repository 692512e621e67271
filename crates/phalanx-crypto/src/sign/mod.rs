//! Private keys and signatures for IKEv2 authentication (RFC 7296 §2.15,
//! RFC 7427 Digital Signature, RFC 4754 ECDSA, RFC 8420 EdDSA).
//!
//! [`SigningKey`] loads PEM or DER private keys and signs with a
//! [`SignatureScheme`]; each scheme knows its RFC 7427 `AlgorithmIdentifier`.
//! Verification of a peer's signature works on its certificate and lives in
//! `phalanx-ike` (through rustls-webpki, on aws-lc-rs as well);
//! [`ecdsa_fixed_to_der`] helps it verify RFC 4754 signatures.
//!
//! Randomness: this is the one place the crypto crate uses randomness it was
//! not handed. An ECDSA nonce must come from a CSPRNG (or be derived
//! deterministically) - a repeated or biased nonce reveals the private key -
//! and an RSA-PSS salt should be random. aws-lc draws both from its own
//! CSPRNG, seeded from the operating system; aws-lc-rs ignores the
//! `SecureRandom` argument of its signing calls. Signing happens once per
//! IKE SA authentication, never on the packet path. Ed25519 and RSA
//! PKCS#1 v1.5 signatures are deterministic.

mod ecdsa;
mod error;
#[cfg(feature = "aws-lc")]
mod key;
mod pem;
mod scheme;

pub use ecdsa::ecdsa_fixed_to_der;
pub use error::SignError;
#[cfg(feature = "aws-lc")]
pub use key::SigningKey;
pub use pem::{decode_pem, PemBlock};
pub use scheme::{HashAlgorithm, KeyKind, SignatureScheme};
#[cfg(all(test, feature = "aws-lc"))]
mod tests;
