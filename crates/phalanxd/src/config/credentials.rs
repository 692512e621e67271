//! Certificates, private keys and trust anchors of `auth = "pubkey"`
//! connections, read from PEM files named relative to the configuration
//! file. Every error names the field whose file failed.
//!
//! Each file's SHA-256 is kept ([`CredentialFingerprint`]) so that a
//! reload reading the same bytes can keep the objects already in use
//! ([`super::IkeSettings::adopt_unchanged_credentials`]): phalanx-ike
//! compares keys and anchors by identity when it decides whether a
//! connection changed, and an unchanged connection keeps its SAs.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use phalanx_crypto::sign::decode_pem;
use phalanx_crypto::SigningKey;
use phalanx_ike::auth::TrustAnchors;
use toml::Spanned;

use super::{ConfigError, Source};

/// SHA-256 of every file one connection's credentials came from, in field
/// order (certificate, private key, then each CA file).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CredentialFingerprint(pub(crate) Vec<[u8; 32]>);

/// The contents of a file named in the configuration, with its place.
pub(crate) struct LoadedFile {
    /// The bytes read.
    pub(crate) bytes: Vec<u8>,
    /// The field's value span, for messages.
    pub(crate) span: Range<usize>,
    /// The path as resolved.
    pub(crate) path: PathBuf,
}

/// Reads the file a field names, relative to `base` unless absolute.
pub(crate) fn read(
    source: &Source<'_>,
    base: &Path,
    value: &Spanned<String>,
    field: &str,
) -> Result<LoadedFile, ConfigError> {
    let path = base.join(value.get_ref());
    let bytes = std::fs::read(&path).map_err(|e| {
        let msg = format!("cannot read {}: {e}", path.display());
        source.error(value.span(), field, msg)
    })?;
    Ok(LoadedFile {
        bytes,
        span: value.span(),
        path,
    })
}

/// The certificates of a PEM file, DER, in file order (end entity first,
/// RFC 7296 §3.6: the first CERT payload holds the key used for AUTH).
pub(crate) fn certificate_chain(
    source: &Source<'_>,
    file: &LoadedFile,
    field: &str,
) -> Result<Vec<Vec<u8>>, ConfigError> {
    let blocks = decode_pem(&file.bytes).map_err(|e| {
        let msg = format!("{}: {e}", file.path.display());
        source.error(file.span.clone(), field, msg)
    })?;
    let chain: Vec<Vec<u8>> = blocks
        .into_iter()
        .filter(|b| b.label == "CERTIFICATE")
        .map(|b| b.der.to_vec())
        .collect();
    if chain.is_empty() {
        let msg = format!("{}: no CERTIFICATE block", file.path.display());
        return Err(source.error(file.span.clone(), field, msg));
    }
    Ok(chain)
}

/// The private key of a PEM file (PKCS#8, SEC1 or PKCS#1).
pub(crate) fn private_key(
    source: &Source<'_>,
    file: &LoadedFile,
    field: &str,
) -> Result<Arc<SigningKey>, ConfigError> {
    SigningKey::from_pem(&file.bytes)
        .map(Arc::new)
        .map_err(|e| {
            let msg = format!("{}: {e}", file.path.display());
            source.error(file.span.clone(), field, msg)
        })
}

/// Every CA certificate of the files named by `ca`.
pub(crate) fn trust_anchors(
    source: &Source<'_>,
    files: &[LoadedFile],
    field: &str,
) -> Result<Arc<TrustAnchors>, ConfigError> {
    let mut anchors = TrustAnchors::new();
    for (i, file) in files.iter().enumerate() {
        let field = format!("{field}[{i}]");
        let bad = |what: String| {
            let msg = format!("{}: {what}", file.path.display());
            source.error(file.span.clone(), field.clone(), msg)
        };
        let blocks = decode_pem(&file.bytes).map_err(|e| bad(e.to_string()))?;
        let mut found = false;
        for block in blocks.iter().filter(|b| b.label == "CERTIFICATE") {
            anchors
                .add_der(&block.der)
                .map_err(|e| bad(format!("not a usable CA certificate: {e}")))?;
            found = true;
        }
        if !found {
            return Err(bad("no CERTIFICATE block".to_owned()));
        }
    }
    Ok(Arc::new(anchors))
}

/// The SHA-256 of each file, in order.
pub(crate) fn fingerprint<'a>(
    files: impl IntoIterator<Item = &'a LoadedFile>,
) -> CredentialFingerprint {
    CredentialFingerprint(
        files
            .into_iter()
            .map(|f| {
                let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &f.bytes);
                let mut out = [0u8; 32];
                out.copy_from_slice(digest.as_ref());
                out
            })
            .collect(),
    )
}
