//! Errors of key loading and signing.

use core::fmt;

/// Why a private key was not loaded or a signature was not made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignError {
    /// The input is not PEM: no `-----BEGIN ...-----` / `-----END ...-----`
    /// pair, mismatched labels, or a body that is not base64.
    BadPem,
    /// The PEM holds no private key block (only certificates or parameters).
    NoPrivateKey,
    /// The key is encrypted (`ENCRYPTED PRIVATE KEY` or a legacy
    /// `Proc-Type: 4,ENCRYPTED` header); decrypt it before loading.
    EncryptedKey,
    /// The DER is not a key aws-lc accepts: an unsupported algorithm or
    /// curve, an RSA modulus outside 2048-8192 bits, or malformed bytes.
    KeyRejected,
    /// The signature scheme does not fit the key (e.g. ECDSA with an RSA key,
    /// P-384 scheme with a P-256 key).
    SchemeMismatch,
    /// aws-lc reported an internal failure while signing.
    SigningFailed,
}

impl fmt::Display for SignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SignError::BadPem => "malformed PEM",
            SignError::NoPrivateKey => "no private key in the PEM input",
            SignError::EncryptedKey => "encrypted private keys are not supported",
            SignError::KeyRejected => "private key rejected (unsupported type or malformed)",
            SignError::SchemeMismatch => "signature scheme does not fit the key",
            SignError::SigningFailed => "signing failed",
        })
    }
}

impl std::error::Error for SignError {}
