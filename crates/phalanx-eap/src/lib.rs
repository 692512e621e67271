//! Sans-IO EAP (RFC 3748) for an IKEv2 responder that authenticates
//! End-Users itself: bytes in, bytes and an MSK out.
//!
//! - [`packet`]: the EAP packet codec.
//! - [`server`]: the authenticator ([`EapServer`]): EAP-Identity, then
//!   the method the connection chose, an [`AuthMethod`].
//! - [`mschapv2`]: EAP-MSCHAPv2's messages and crypto (RFC 2759, RFC 3079,
//!   draft-kamath-pppext-eap-mschapv2), the method
//!   ([`Mschapv2Method`]) and a peer ([`EapPeer`], for tests and load
//!   generators).
//! - [`tls`]: EAP-TLS (RFC 5216, RFC 9190) on rustls: the method
//!   ([`tls::TlsAuthenticator`]: fragments, the client certificate checked
//!   against CAs and the EAP identity, MSK and EMSK from the TLS exporter)
//!   and a peer ([`tls::TlsPeer`]).
//!
//! - [`radius`]: the RADIUS codec for EAP pass-through (RFC 2865, RFC 3579,
//!   RFC 2548): Access-Requests with EAP-Message and Message-Authenticator,
//!   answers checked, the MSK from the MS-MPPE keys;
//!   [`radius::client`]: the RADIUS client (retransmission, failover,
//!   accounting, RFC 2866); [`radius::relay`]: EAP pass-through with
//!   accounting sessions.
//!
//! The crate reads no clock, draws no randomness and owns no socket: the
//! caller hands in the time, random octets and datagrams. One exception:
//! the TLS handshake's random values come from rustls (aws-lc-rs).
//! Limits and defaults: [`limits`].
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod limits;
pub mod mschapv2;
pub mod packet;
pub mod radius;
pub mod server;
pub mod tls;

pub use mschapv2::{CredentialStore, EapPeer, LocalSecrets, Mschapv2Method};
pub use packet::{EapCode, EapPacket, EapRepr, EapType, PacketError};
pub use server::{AuthMethod, EapFailure, EapServer, EapStep, MethodStep};
