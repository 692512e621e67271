//! `remote_auth = "eap-tls"`: the connection's EAP-TLS server
//! (phalanx-eap's [`TlsServerConfig`]) from the fields it has anyway.
//!
//! ```toml
//! [[connection]]
//! auth = "pubkey"
//! certificate = "gw.pem"        # also the TLS server's certificate
//! private_key = "gw.key"
//! ca = ["users-ca.pem"]         # the CAs of the End-Users' certificates
//! remote_auth = "eap-tls"
//! eap_tls13 = "rfc9190"         # or "pre-rfc9190" (strongSwan 5.9.0 to
//!                               # 5.9.9 clients with TLS 1.3 switched on)
//! ```
//!
//! Errors name the field whose file rustls refused: `private_key` or
//! `certificate` for our side, `ca` for the End-Users'.

use std::sync::Arc;

use phalanx_crypto::sign::decode_pem;
use phalanx_eap::tls::rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs1KeyDer, PrivatePkcs8KeyDer, PrivateSec1KeyDer,
};
use phalanx_eap::tls::{Tls13Keying, TlsConfigError, TlsServerConfig};
use toml::Spanned;

use super::credentials::LoadedFile;
use super::{ConfigError, Source};

/// What the EAP-TLS server is made of: our chain (DER, end entity first),
/// our key file, the CA files.
pub(crate) struct Credentials<'a> {
    pub(crate) chain: &'a [Vec<u8>],
    pub(crate) key: &'a LoadedFile,
    pub(crate) cas: &'a [LoadedFile],
}

/// The EAP-TLS server of connection `field("...")`.
pub(crate) fn server(
    source: &Source<'_>,
    credentials: &Credentials<'_>,
    tls13: Option<&Spanned<String>>,
    field: &dyn Fn(&str) -> String,
) -> Result<Arc<TlsServerConfig>, ConfigError> {
    let keying = match tls13.map(|t| (t.get_ref().as_str(), t.span())) {
        None | Some(("rfc9190", _)) => Tls13Keying::Rfc9190,
        Some(("pre-rfc9190", _)) => Tls13Keying::PreRfc9190,
        Some((other, span)) => {
            let msg = format!(
                "unknown eap_tls13 {other:?}; expected \"rfc9190\" or \"pre-rfc9190\" (strongSwan 5.9.0 to 5.9.9 clients with TLS 1.3)"
            );
            return Err(source.error(span, field("eap_tls13"), msg));
        }
    };
    let key_file = credentials.key;
    let key = private_key(key_file).ok_or_else(|| {
        let msg = format!(
            "{}: no PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY block for EAP-TLS",
            key_file.path.display()
        );
        source.error(key_file.span.clone(), field("private_key"), msg)
    })?;
    let chain = credentials
        .chain
        .iter()
        .map(|der| CertificateDer::from(der.clone()))
        .collect();
    let mut cas = Vec::new();
    for file in credentials.cas {
        // The CA files parsed as trust anchors before: PEM with
        // CERTIFICATE blocks.
        let blocks = decode_pem(&file.bytes).unwrap_or_default();
        cas.extend(
            blocks
                .iter()
                .filter(|b| b.label == "CERTIFICATE")
                .map(|b| CertificateDer::from(b.der.to_vec())),
        );
    }
    let config = TlsServerConfig::new(chain, key, &cas).map_err(|e| {
        let (name, span) = match &e {
            TlsConfigError::ClientCas(_) => ("ca", credentials.cas.first().map(|f| f.span.clone())),
            _ => ("private_key", Some(key_file.span.clone())),
        };
        let msg = format!("EAP-TLS: {e}");
        source.error(
            span.unwrap_or_else(|| key_file.span.clone()),
            field(name),
            msg,
        )
    })?;
    Ok(Arc::new(config.with_tls13_keying(keying)))
}

/// The key of a PEM key file in rustls' terms (PKCS#8, SEC1 or PKCS#1).
fn private_key(file: &LoadedFile) -> Option<PrivateKeyDer<'static>> {
    let blocks = decode_pem(&file.bytes).ok()?;
    blocks.iter().find_map(|b| {
        let der = b.der.to_vec();
        match b.label.as_str() {
            "PRIVATE KEY" => Some(PrivatePkcs8KeyDer::from(der).into()),
            "EC PRIVATE KEY" => Some(PrivateSec1KeyDer::from(der).into()),
            "RSA PRIVATE KEY" => Some(PrivatePkcs1KeyDer::from(der).into()),
            _ => None,
        }
    })
}
