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
//! eap_tls_fragment_size = 1000  # TLS octets per EAP-TLS Request
//! ```
//!
//! Errors name the field whose file rustls refused: `private_key` or
//! `certificate` for our side, `ca` for the End-Users'.

use std::sync::Arc;

use phalanx_crypto::sign::decode_pem;
use phalanx_eap::limits;
use phalanx_eap::tls::rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs1KeyDer, PrivatePkcs8KeyDer, PrivateSec1KeyDer,
};
use phalanx_eap::tls::{Tls13Keying, TlsConfigError, TlsServerConfig};

use super::credentials::LoadedFile;
use super::raw_ike::RawConnection;
use super::{ConfigError, Source};

/// `eap_tls_fragment_size`: phalanx-eap's smallest, up to a TLS record's
/// plaintext (RFC 8446 §5.1; IKE fragmentation carries the rest).
const FRAGMENT_SIZES: std::ops::RangeInclusive<usize> = limits::TLS_MIN_FRAGMENT_SIZE..=16384;

/// What the EAP-TLS server is made of: our chain (DER, end entity first),
/// our key file, the CA files.
pub(crate) struct Credentials<'a> {
    pub(crate) chain: &'a [Vec<u8>],
    pub(crate) key: &'a LoadedFile,
    pub(crate) cas: &'a [LoadedFile],
}

/// `eap_tls_*` fields of a connection whose End-Users do not use EAP-TLS:
/// refused at their line.
pub(crate) fn refuse_unused(
    source: &Source<'_>,
    raw: &RawConnection,
    field: &dyn Fn(&str) -> String,
) -> Result<(), ConfigError> {
    let msg = "not used: remote_auth is not \"eap-tls\"; remove it";
    if let Some(tls13) = &raw.eap_tls13 {
        return Err(source.error(tls13.span(), field("eap_tls13"), msg));
    }
    if let Some(size) = &raw.eap_tls_fragment_size {
        return Err(source.error(size.span(), field("eap_tls_fragment_size"), msg));
    }
    Ok(())
}

/// The EAP-TLS server of connection `raw`.
pub(crate) fn server(
    source: &Source<'_>,
    raw: &RawConnection,
    credentials: &Credentials<'_>,
    field: &dyn Fn(&str) -> String,
) -> Result<Arc<TlsServerConfig>, ConfigError> {
    let keying = match raw
        .eap_tls13
        .as_ref()
        .map(|t| (t.get_ref().as_str(), t.span()))
    {
        None | Some(("rfc9190", _)) => Tls13Keying::Rfc9190,
        Some(("pre-rfc9190", _)) => Tls13Keying::PreRfc9190,
        Some((other, span)) => {
            let msg = format!(
                "unknown eap_tls13 {other:?}; expected \"rfc9190\" or \"pre-rfc9190\" (strongSwan 5.9.0 to 5.9.9 clients with TLS 1.3)"
            );
            return Err(source.error(span, field("eap_tls13"), msg));
        }
    };
    let fragment_size = match &raw.eap_tls_fragment_size {
        None => limits::TLS_FRAGMENT_SIZE,
        Some(size) => {
            let value = *size.get_ref();
            match usize::try_from(value) {
                Ok(octets) if FRAGMENT_SIZES.contains(&octets) => octets,
                _ => {
                    let msg = format!(
                        "{value} out of range {}..={}",
                        FRAGMENT_SIZES.start(),
                        FRAGMENT_SIZES.end()
                    );
                    return Err(source.error(size.span(), field("eap_tls_fragment_size"), msg));
                }
            }
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
    Ok(Arc::new(
        config
            .with_tls13_keying(keying)
            .with_fragment_size(fragment_size),
    ))
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
