//! The one error type of this crate.
//!
//! Views and representations report *what* is wrong with the bytes, never
//! where the bytes came from: the caller maps an [`Error`] to a drop reason
//! (data plane) or a Notify (control plane).

use core::fmt;

/// Why a buffer could not be read as the header it was offered as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than a fixed field or a length field claims.
    Truncated,
    /// A length or structural field holds a value the RFC does not allow.
    Malformed,
    /// The IP version nibble is not the one this view reads.
    BadVersion,
    /// A checksum did not verify.
    BadChecksum,
    /// The packet is a fragment, which the representation cannot describe.
    Fragment,
    /// An IPv6 extension header chain is longer than [`crate::ipv6::MAX_EXTENSION_HEADERS`].
    TooManyHeaders,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "buffer shorter than the header or its length fields",
            Error::Malformed => "header field holds a value the RFC does not allow",
            Error::BadVersion => "wrong IP version",
            Error::BadChecksum => "checksum does not verify",
            Error::Fragment => "packet is a fragment",
            Error::TooManyHeaders => "too many IPv6 extension headers",
        })
    }
}

impl core::error::Error for Error {}

/// Result of every fallible function in this crate.
pub type Result<T> = core::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_one_line_per_variant() {
        for e in [
            Error::Truncated,
            Error::Malformed,
            Error::BadVersion,
            Error::BadChecksum,
            Error::Fragment,
            Error::TooManyHeaders,
        ] {
            let s = e.to_string();
            assert!(!s.is_empty() && !s.contains('\n'), "{e:?}");
        }
    }
}
