//! EAP-TLS (RFC 5216; TLS 1.3 as RFC 9190 has it) on rustls: the
//! authenticator's method ([`TlsAuthenticator`]) and a peer ([`TlsPeer`],
//! for tests).
//!
//! ```text
//! TLS 1.2 (RFC 5216 §2.1.1), after EAP-Identity:
//! EAP-Request/TLS (Start)                          -->
//!                                                  <--  EAP-Response/TLS (ClientHello)
//! EAP-Request/TLS (ServerHello, Certificate,
//!     ServerKeyExchange, CertificateRequest,
//!     ServerHelloDone)                             -->
//!                                                  <--  EAP-Response/TLS (Certificate,
//!                                                       ClientKeyExchange, CertificateVerify,
//!                                                       ChangeCipherSpec, Finished)
//! EAP-Request/TLS (ChangeCipherSpec, Finished)     -->
//!                                                  <--  EAP-Response/TLS (no data)
//! EAP-Success                                      -->
//!
//! TLS 1.3 (RFC 9190 §2.1.1):
//! EAP-Request/TLS (Start)                          -->
//!                                                  <--  EAP-Response/TLS (ClientHello)
//! EAP-Request/TLS (ServerHello, {EncryptedExtensions,
//!     CertificateRequest, Certificate,
//!     CertificateVerify, Finished})                -->
//!                                                  <--  EAP-Response/TLS ({Certificate,
//!                                                       CertificateVerify, Finished})
//! EAP-Request/TLS ({commitment: 0x00})             -->      (RFC 9190 §2.5)
//!                                                  <--  EAP-Response/TLS (no data)
//! EAP-Success                                      -->
//!
//! A message larger than the fragment size (RFC 5216 §2.1.5), either way:
//! EAP-Request/TLS (L, M: first fragment)           -->
//!                                                  <--  EAP-Response/TLS (acknowledgement)
//! EAP-Request/TLS (last fragment)                  -->
//!
//! A failure the TLS stack answers with an alert (RFC 5216 §2.1.3):
//! EAP-Request/TLS (Alert)                          -->
//!                                                  <--  EAP-Response/TLS
//! EAP-Failure                                      -->
//! ```
//!
//! The client must show a certificate (RFC 5216 §2.1.1 makes it the
//! method) that verifies against the configured CAs and names the EAP
//! identity, by strongSwan's rule: the EAP-Response/Identity read as an
//! identity (a DER DN, or text in strongSwan's syntax; the IKE IDi when it
//! is empty) must be a subjectAltName or the subject of the certificate,
//! as [`phalanx_ike::auth::certificate_names`] decides for IKE. The check
//! runs inside the handshake, so a certificate for someone else gets an
//! access_denied alert.
//!
//! The keys: Key_Material = TLS-PRF-128(master_secret, "client EAP
//! encryption", client.random || server.random) with TLS 1.2 (RFC 5216
//! §2.3), TLS-Exporter("EXPORTER_EAP_TLS_Key_Material", 0x0D, 128) with
//! TLS 1.3 (RFC 9190 §2.3); the MSK is its first 64 octets, the EMSK the
//! next 64.
//!
//! Every way it fails is a [`TlsFailureKind`] with a counter name, so that
//! the daemon counts each apart.
//!
//! Sans-IO like the crate: the time certificates are checked at is handed
//! in; rustls and aws-lc-rs draw the handshake's random values themselves
//! (the one exception to the crate's rule: a TLS stack that took its
//! randomness from outside would be a TLS stack of our own).
//!
//! Before RFC 9190 TLS 1.3 was run without the commitment message and
//! with other keys ([`Tls13Keying::PreRfc9190`]); strongSwan 5.9.0 to
//! 5.9.9 (Debian 12 has 5.9.8) does so when its TLS 1.3 is switched on,
//! and 5.9.8 dies of a segmentation fault on the commitment message.

mod framing;
mod keys;
mod peer;
mod server;
mod verifier;

#[cfg(test)]
mod kat_tests;
#[cfg(test)]
mod testpki;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;

use phalanx_ike::auth::Identity;
pub use rustls;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{NoServerSessionStorage, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::time_provider::TimeProvider;
use rustls::{
    CertificateError, KeyLog, RootCertStore, ServerConfig, ServerConnection,
    SupportedProtocolVersion,
};

pub use peer::TlsPeer;
pub use server::TlsAuthenticator;

use crate::limits;

/// How TLS 1.3 ends and which keys it exports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tls13Keying {
    /// RFC 9190: the server's commitment message (one octet 0x00 of
    /// application data) before EAP-Success, Key_Material =
    /// TLS-Exporter("EXPORTER_EAP_TLS_Key_Material", 0x0D, 128).
    #[default]
    Rfc9190,
    /// Before RFC 9190 (FreeRADIUS 3.0, strongSwan 5.9.0 to 5.9.9):
    /// EAP-Success right after the client's Finished, Key_Material =
    /// TLS-Exporter("client EAP encryption", "", 128).
    PreRfc9190,
}

/// The kinds of EAP-TLS failure, each counted apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TlsFailureKind {
    /// Flags, TLS Message Length or fragments against RFC 5216 §3.1.
    BadFraming,
    /// A TLS message from the peer over the reassembly limit.
    TooLarge,
    /// More rounds than a handshake needs.
    TooManyRounds,
    /// A message the exchange does not expect there: data where an
    /// acknowledgement belongs or the reverse, data after the handshake.
    UnexpectedMessage,
    /// The peer sent a TLS alert.
    PeerAlert,
    /// The TLS handshake failed here (rustls' error).
    Handshake,
    /// The peer sent no client certificate.
    NoCertificate,
    /// The client certificate did not verify against the CAs.
    UntrustedCertificate,
    /// The client certificate does not name the End-User's identity.
    IdentityMismatch,
}

impl TlsFailureKind {
    /// Every kind, for counters.
    pub const ALL: [TlsFailureKind; 9] = [
        TlsFailureKind::BadFraming,
        TlsFailureKind::TooLarge,
        TlsFailureKind::TooManyRounds,
        TlsFailureKind::UnexpectedMessage,
        TlsFailureKind::PeerAlert,
        TlsFailureKind::Handshake,
        TlsFailureKind::NoCertificate,
        TlsFailureKind::UntrustedCertificate,
        TlsFailureKind::IdentityMismatch,
    ];

    /// The counter's name (snake case, no prefix).
    pub fn name(self) -> &'static str {
        match self {
            TlsFailureKind::BadFraming => "bad_framing",
            TlsFailureKind::TooLarge => "too_large",
            TlsFailureKind::TooManyRounds => "too_many_rounds",
            TlsFailureKind::UnexpectedMessage => "unexpected_message",
            TlsFailureKind::PeerAlert => "peer_alert",
            TlsFailureKind::Handshake => "handshake_failed",
            TlsFailureKind::NoCertificate => "no_certificate",
            TlsFailureKind::UntrustedCertificate => "untrusted_certificate",
            TlsFailureKind::IdentityMismatch => "identity_mismatch",
        }
    }

    /// One line for logs and help.
    pub fn description(self) -> &'static str {
        match self {
            TlsFailureKind::BadFraming => "EAP-TLS framing broken",
            TlsFailureKind::TooLarge => "TLS message over the reassembly limit",
            TlsFailureKind::TooManyRounds => "more EAP-TLS rounds than a handshake needs",
            TlsFailureKind::UnexpectedMessage => "EAP-TLS message out of place",
            TlsFailureKind::PeerAlert => "the peer sent a TLS alert",
            TlsFailureKind::Handshake => "TLS handshake failed",
            TlsFailureKind::NoCertificate => "no client certificate",
            TlsFailureKind::UntrustedCertificate => "client certificate not trusted",
            TlsFailureKind::IdentityMismatch => "client certificate does not name the identity",
        }
    }
}

/// Why EAP-TLS failed: the kind, and what exactly (rustls' error text,
/// the identity, the octets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFailure {
    /// The kind (the counter).
    pub kind: TlsFailureKind,
    /// Details for the log.
    pub detail: String,
}

impl TlsFailure {
    pub(crate) fn new(kind: TlsFailureKind, detail: impl Into<String>) -> TlsFailure {
        TlsFailure {
            kind,
            detail: detail.into(),
        }
    }

    /// The failure a rustls error means; `identity` is whom the client
    /// certificate had to name.
    pub(crate) fn from_rustls(error: &rustls::Error, identity: &Identity) -> TlsFailure {
        let kind = match error {
            rustls::Error::AlertReceived(_) => TlsFailureKind::PeerAlert,
            rustls::Error::NoCertificatesPresented => TlsFailureKind::NoCertificate,
            rustls::Error::InvalidCertificate(CertificateError::ApplicationVerificationFailure) => {
                let detail = format!("the client certificate does not name {identity}");
                return TlsFailure::new(TlsFailureKind::IdentityMismatch, detail);
            }
            rustls::Error::InvalidCertificate(_) => TlsFailureKind::UntrustedCertificate,
            _ => TlsFailureKind::Handshake,
        };
        TlsFailure::new(kind, error.to_string())
    }
}

impl fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.description(), self.detail)
    }
}

/// A configuration rustls refused: which part, and its reason.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsConfigError {
    /// The client CAs: a certificate rustls cannot take as a trust
    /// anchor, or none at all.
    ClientCas(String),
    /// Our certificate and key: a key rustls cannot sign with, or one
    /// that is not the certificate's.
    Credentials(String),
}

impl fmt::Display for TlsConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsConfigError::ClientCas(e) => write!(f, "the client CA certificates: {e}"),
            TlsConfigError::Credentials(e) => write!(f, "our certificate and key: {e}"),
        }
    }
}

impl std::error::Error for TlsConfigError {}

/// A clock that always says the time it was given: rustls checks
/// certificates at the time the caller handed in.
#[derive(Clone, Copy, Debug)]
pub struct FixedTime(pub UnixTime);

impl TimeProvider for FixedTime {
    fn current_time(&self) -> Option<UnixTime> {
        Some(self.0)
    }
}

/// What an EAP-TLS authenticator needs, shared by its sessions: our
/// certificate and key, the CAs client certificates must lead to, the TLS
/// versions, fragment size and limits.
#[derive(Clone)]
pub struct TlsServerConfig {
    provider: Arc<CryptoProvider>,
    versions: Vec<&'static SupportedProtocolVersion>,
    certificate: Arc<dyn ResolvesServerCert>,
    client_verifier: Arc<dyn ClientCertVerifier>,
    key_log: Option<Arc<dyn KeyLog>>,
    fragment_size: usize,
    max_message_len: usize,
    max_rounds: usize,
    tls13: Tls13Keying,
}

impl fmt::Debug for TlsServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsServerConfig")
            .field("versions", &self.versions)
            .field("fragment_size", &self.fragment_size)
            .field("max_message_len", &self.max_message_len)
            .field("tls13", &self.tls13)
            .finish_non_exhaustive()
    }
}

impl TlsServerConfig {
    /// Our certificate `chain` (end entity first) and `key`, the CAs of
    /// client certificates; aws-lc-rs, TLS 1.2 and 1.3.
    pub fn new(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        client_cas: &[CertificateDer<'static>],
    ) -> Result<TlsServerConfig, TlsConfigError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        TlsServerConfig::with_provider(provider, chain, key, client_cas)
    }

    /// As [`TlsServerConfig::new`], with the cipher suites and groups of
    /// `provider`.
    pub fn with_provider(
        provider: Arc<CryptoProvider>,
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        client_cas: &[CertificateDer<'static>],
    ) -> Result<TlsServerConfig, TlsConfigError> {
        let mut roots = RootCertStore::empty();
        for ca in client_cas {
            roots
                .add(ca.clone())
                .map_err(|e| TlsConfigError::ClientCas(e.to_string()))?;
        }
        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                .build()
                .map_err(|e| TlsConfigError::ClientCas(e.to_string()))?;
        let certified = CertifiedKey::from_der(chain, key, &provider)
            .map_err(|e| TlsConfigError::Credentials(e.to_string()))?;
        Ok(TlsServerConfig {
            provider,
            versions: rustls::ALL_VERSIONS.to_vec(),
            certificate: Arc::new(SingleCertAndKey::from(certified)),
            client_verifier,
            key_log: None,
            fragment_size: limits::TLS_FRAGMENT_SIZE,
            max_message_len: limits::TLS_MAX_MESSAGE_LEN,
            max_rounds: limits::TLS_MAX_ROUNDS,
            tls13: Tls13Keying::default(),
        })
    }

    /// Only these TLS versions (rustls' `version::TLS12`, `TLS13`).
    pub fn with_versions(mut self, versions: &[&'static SupportedProtocolVersion]) -> Self {
        self.versions = versions.to_vec();
        self
    }

    /// TLS octets per EAP-TLS Request (at least
    /// [`limits::TLS_MIN_FRAGMENT_SIZE`]).
    pub fn with_fragment_size(mut self, octets: usize) -> Self {
        self.fragment_size = octets.max(limits::TLS_MIN_FRAGMENT_SIZE);
        self
    }

    /// The largest TLS message the peer may send (all its fragments).
    pub fn with_max_message_len(mut self, octets: usize) -> Self {
        self.max_message_len = octets;
        self
    }

    /// How TLS 1.3 ends and which keys it exports.
    pub fn with_tls13_keying(mut self, keying: Tls13Keying) -> Self {
        self.tls13 = keying;
        self
    }

    /// Logs the TLS secrets (NSS key log format; tests and debugging
    /// only).
    pub fn with_key_log(mut self, key_log: Arc<dyn KeyLog>) -> Self {
        self.key_log = Some(key_log);
        self
    }

    /// The fragment size.
    pub fn fragment_size(&self) -> usize {
        self.fragment_size
    }

    /// How TLS 1.3 ends.
    pub fn tls13_keying(&self) -> Tls13Keying {
        self.tls13
    }

    /// A TLS connection for one End-User whose certificate must name
    /// `identity`, checked at time `now`. No resumption: no session cache,
    /// no tickets (RFC 9190 §5.7 makes resumption optional).
    fn connection(
        &self,
        identity: Identity,
        now: UnixTime,
    ) -> Result<ServerConnection, rustls::Error> {
        let verifier = Arc::new(verifier::IdentityBound {
            inner: Arc::clone(&self.client_verifier),
            identity,
        });
        let mut config = ServerConfig::builder_with_details(
            Arc::clone(&self.provider),
            Arc::new(FixedTime(now)),
        )
        .with_protocol_versions(&self.versions)?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(Arc::clone(&self.certificate));
        config.send_tls13_tickets = 0;
        config.session_storage = Arc::new(NoServerSessionStorage {});
        if let Some(key_log) = &self.key_log {
            config.key_log = Arc::clone(key_log);
        }
        ServerConnection::new(Arc::new(config))
    }
}

/// Hands `message` (TLS records) to `conn` and processes them.
pub(crate) fn feed<T>(
    conn: &mut rustls::ConnectionCommon<T>,
    message: &[u8],
) -> Result<(), rustls::Error> {
    let mut rest = message;
    while !rest.is_empty() {
        // Reading a slice cannot fail but for rustls' own buffer limits.
        let read = conn
            .read_tls(&mut rest)
            .map_err(|e| rustls::Error::General(e.to_string()))?;
        conn.process_new_packets()?;
        if read == 0 {
            break;
        }
    }
    Ok(())
}

/// Everything `conn` has to send.
pub(crate) fn drain<T>(conn: &mut rustls::ConnectionCommon<T>) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail; a write of nothing ends the loop.
    while conn.wants_write() {
        match conn.write_tls(&mut out) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    out
}
