//! Authentication errors. Every one of them is reported to the peer the
//! same way, as AUTHENTICATION_FAILED (RFC 7296 §2.21.2): the peer learns
//! that authentication failed, not why. The variants are for our logs and
//! counters.

use core::fmt;
use phalanx_crypto::SignError;

/// Notify Message Type AUTHENTICATION_FAILED (RFC 7296 §3.10.1).
pub const AUTHENTICATION_FAILED: u16 = 24;

/// Why a peer was not authenticated, or we could not authenticate ourselves.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthError {
    /// The ID payload's data is not valid for its ID type (an IPv4 address
    /// that is not 4 octets, an FQDN that is not ASCII, a DN that is not a
    /// DER Name, an empty identity).
    MalformedIdentity,
    /// The ID type is one we do not authenticate (subnets, ranges,
    /// DER_ASN1_GN, unassigned values; RFC 7296 §3.5).
    UnsupportedIdType(u8),
    /// A configured identity string could not be parsed; the text says why.
    InvalidIdentityConfig(String),
    /// A certificate or trust anchor is not parseable X.509 DER (or PEM).
    BadCertificate,
    /// No trust anchors were configured, so no peer can be verified.
    NoTrustAnchors,
    /// The peer's certificate (or one in its chain) has expired at `now`.
    CertificateExpired,
    /// The peer's certificate (or one in its chain) is not yet valid at `now`.
    CertificateNotYetValid,
    /// No path leads from the peer's certificate to a configured trust anchor.
    UnknownIssuer,
    /// The certificate's extended key usage excludes IKE (RFC 4945
    /// §5.1.3.12; see `x509` for the exact rule).
    WrongKeyUsage,
    /// Path validation failed for another reason (rustls-webpki's
    /// description, for logs).
    CertificateInvalid(String),
    /// The identity the peer claimed in its ID payload is not one its
    /// certificate carries (RFC 4945 §3.1).
    IdentityMismatch,
    /// The AUTH payload's method is not one we verify here.
    UnsupportedAuthMethod(u8),
    /// Auth method 1 (RSA PKCS#1 v1.5 with SHA-1, RFC 7296 §3.8) is refused:
    /// SHA-1 signatures are not accepted; the peer should use RFC 7427.
    LegacyRsaSha1Refused,
    /// The authentication data is malformed (RFC 7427 §3: the length octet
    /// does not fit, or nothing follows the AlgorithmIdentifier).
    MalformedAuthData,
    /// The RFC 7427 AlgorithmIdentifier names a signature algorithm we do
    /// not accept (unknown, or SHA-1 based).
    UnsupportedSignatureAlgorithm,
    /// The signature algorithm does not fit the certificate's public key
    /// (e.g. ECDSA with an RSA certificate, or method 9 with a P-384 key).
    KeyMismatch,
    /// The signature did not verify over the signed octets.
    BadSignature,
    /// The shared-key AUTH value did not match (RFC 7296 §2.15).
    PskMismatch,
    /// Our own key could not produce a signature.
    Signing(SignError),
    /// The peer signed with a scheme the connection does not accept
    /// (`remote_signature`).
    SchemeNotAccepted,
}

impl AuthError {
    /// The Notify message type this error sends: always
    /// AUTHENTICATION_FAILED (24), RFC 7296 §2.21.2.
    pub fn notify_type(&self) -> u16 {
        AUTHENTICATION_FAILED
    }
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthError::MalformedIdentity => f.write_str("malformed identification data"),
            AuthError::UnsupportedIdType(t) => write!(f, "unsupported ID type {t}"),
            AuthError::InvalidIdentityConfig(why) => write!(f, "invalid identity: {why}"),
            AuthError::BadCertificate => f.write_str("certificate is not valid X.509 DER/PEM"),
            AuthError::NoTrustAnchors => f.write_str("no trust anchors configured"),
            AuthError::CertificateExpired => f.write_str("certificate expired"),
            AuthError::CertificateNotYetValid => f.write_str("certificate not yet valid"),
            AuthError::UnknownIssuer => f.write_str("certificate issuer not trusted"),
            AuthError::WrongKeyUsage => f.write_str("certificate key usage excludes IKE"),
            AuthError::CertificateInvalid(why) => write!(f, "certificate invalid: {why}"),
            AuthError::IdentityMismatch => f.write_str("identity not carried by certificate"),
            AuthError::UnsupportedAuthMethod(m) => write!(f, "unsupported auth method {m}"),
            AuthError::LegacyRsaSha1Refused => {
                f.write_str("RSA/SHA-1 auth method 1 refused (use RFC 7427 signatures)")
            }
            AuthError::MalformedAuthData => f.write_str("malformed authentication data"),
            AuthError::UnsupportedSignatureAlgorithm => {
                f.write_str("unsupported signature algorithm")
            }
            AuthError::KeyMismatch => f.write_str("signature algorithm does not fit the key"),
            AuthError::BadSignature => f.write_str("signature verification failed"),
            AuthError::PskMismatch => f.write_str("pre-shared key authentication failed"),
            AuthError::Signing(e) => write!(f, "signing failed: {e}"),
            AuthError::SchemeNotAccepted => {
                f.write_str("signature scheme not among those the connection accepts")
            }
        }
    }
}

impl std::error::Error for AuthError {}

impl From<SignError> for AuthError {
    fn from(e: SignError) -> Self {
        AuthError::Signing(e)
    }
}
