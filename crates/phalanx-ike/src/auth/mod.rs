//! Authentication of IKE peers (RFC 7296 §2.15, RFC 7427, RFC 4754,
//! RFC 4945): identities, the octets an AUTH payload covers, shared-key
//! and signature AUTH values, and X.509 path validation.
//!
//! Sans-IO like the rest of the crate: certificates, keys and `now` are
//! arguments; the PRF is a closure over the IKE SA's negotiated PRF. Every
//! error is an [`AuthError`], which goes on the wire as
//! AUTHENTICATION_FAILED.
//!
//! Checking a peer that authenticates with a certificate, in order:
//! 1. [`Identity::from_rest_of_id_payload`] on its ID payload, and the
//!    configured remote identity [`Identity::matches`] it;
//! 2. [`verify_peer_chain`] on its CERT payloads;
//! 3. [`VerifiedPeer::matches_identity`] with the claimed identity;
//! 4. [`verify_auth`] over [`initiator_signed_octets`] /
//!    [`responder_signed_octets`], built from the ID payload as received.

mod der;
mod dn;
mod error;
mod identity;
mod octets;
mod san;
mod signature;
mod x509;

pub use error::{AuthError, AUTHENTICATION_FAILED};
pub use identity::Identity;
pub use octets::{
    initiator_signed_octets, psk_auth, responder_signed_octets, signed_octets,
    signed_octets_with_int_auth, verify_psk_auth, Prf, KEY_PAD,
};
pub use rustls_pki_types::UnixTime;
pub use signature::{
    auth_scheme, choose_scheme, sign_auth, sign_auth_rfc4754, verify_auth,
    AUTH_METHOD_DIGITAL_SIGNATURE, AUTH_METHOD_ECDSA_256, AUTH_METHOD_ECDSA_384,
    AUTH_METHOD_ECDSA_521, AUTH_METHOD_RSA_SIG, AUTH_METHOD_SHARED_KEY_MIC,
    SUPPORTED_HASH_ALGORITHMS,
};
pub use x509::{
    certificate_names, certificate_subject, verify_peer_chain, TrustAnchors, VerifiedPeer,
};

#[cfg(test)]
mod tests;
