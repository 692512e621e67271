//! Sans-IO EAP (RFC 3748) for an IKEv2 responder that authenticates
//! End-Users itself: bytes in, bytes and an MSK out.
//!
//! - [`packet`]: the EAP packet codec.
//! - [`mschapv2`]: EAP-MSCHAPv2's messages and crypto (RFC 2759, RFC 3079,
//!   draft-kamath-pppext-eap-mschapv2), the authenticator
//!   ([`EapServer`]: EAP-Identity, then EAP-MSCHAPv2) and a peer
//!   ([`EapPeer`], for tests and load generators).
//!
//! The crate reads no clock and draws no randomness: the caller hands in
//! random octets. Not here yet: EAP-TLS, RADIUS pass-through (the RADIUS
//! client belongs in phalanxd, its codec beside this one).
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod mschapv2;
pub mod packet;

pub use mschapv2::{CredentialStore, EapFailure, EapPeer, EapServer, EapStep, LocalSecrets};
pub use packet::{EapCode, EapPacket, EapRepr, EapType, PacketError};
