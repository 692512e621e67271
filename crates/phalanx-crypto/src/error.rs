//! Errors of the crypto layer. Control plane only: the data plane reports
//! per-operation [`OpStatus`](crate::engine::OpStatus) instead.

use core::fmt;

/// Why a key, transform or provider call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CryptoError {
    /// The provider does not implement this transform.
    UnsupportedAlgorithm,
    /// The key material has the wrong length for the transform.
    BadKeyLength,
    /// An input length is not valid for the algorithm (e.g. CBC data not a
    /// multiple of the block size).
    BadLength,
    /// Authentication failed: the ICV or tag did not verify.
    AuthenticationFailed,
    /// The combination of transforms is not allowed (e.g. AES-GCM with a
    /// separate integrity transform, RFC 4106 §5 / RFC 7296 §3.3).
    InvalidSuite,
}

impl fmt::Display for CryptoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CryptoError::UnsupportedAlgorithm => "unsupported algorithm",
            CryptoError::BadKeyLength => "key has the wrong length for the algorithm",
            CryptoError::BadLength => "input length not valid for the algorithm",
            CryptoError::AuthenticationFailed => "authentication failed",
            CryptoError::InvalidSuite => "invalid combination of transforms",
        })
    }
}

impl std::error::Error for CryptoError {}
