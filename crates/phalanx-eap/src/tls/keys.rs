//! The keys EAP-TLS exports, from the TLS keying-material exporter.
//!
//! TLS 1.2 (RFC 5216 §2.3):
//!
//! ```text
//! Key_Material = TLS-PRF-128(master_secret, "client EAP encryption",
//!                            client.random || server.random)
//! MSK  = Key_Material(0, 63)
//! EMSK = Key_Material(64, 127)
//! ```
//!
//! which is the RFC 5705 exporter with that label and no context.
//!
//! TLS 1.3 (RFC 9190 §2.3):
//!
//! ```text
//! Key_Material = TLS-Exporter("EXPORTER_EAP_TLS_Key_Material",
//!                             Type-Code, 128)          Type-Code = 0x0D
//! MSK  = Key_Material(0, 63)
//! EMSK = Key_Material(64, 127)
//! ```
//!
//! Before RFC 9190 ([`Tls13Keying::PreRfc9190`]: FreeRADIUS 3.0,
//! strongSwan 5.9.0 to 5.9.9) TLS 1.3 used the TLS 1.2 label with an empty
//! context: `TLS-Exporter("client EAP encryption", "", 128)`. The 128
//! octets are asked for even there: HKDF-Expand-Label encodes the length,
//! so the first 64 of 128 differ from 64 asked for alone.

use rustls::{ConnectionCommon, ProtocolVersion};
use zeroize::Zeroizing;

use super::Tls13Keying;
use crate::limits::{MSK_LEN, TLS_KEY_MATERIAL_LEN};
use crate::packet::EapType;

/// RFC 5216 §2.3: the TLS 1.2 exporter label (and the pre-RFC 9190 TLS 1.3
/// one).
pub(crate) const LABEL_TLS12: &[u8] = b"client EAP encryption";
/// RFC 9190 §2.3: the TLS 1.3 exporter label.
pub(crate) const LABEL_TLS13: &[u8] = b"EXPORTER_EAP_TLS_Key_Material";

/// The MSK and the EMSK of a finished handshake.
pub(crate) struct KeyMaterial {
    pub(crate) msk: Zeroizing<Vec<u8>>,
    pub(crate) emsk: Zeroizing<Vec<u8>>,
}

/// The exporter's label and context for `version`.
fn label_and_context(
    version: ProtocolVersion,
    keying: Tls13Keying,
) -> Option<(&'static [u8], Option<&'static [u8]>)> {
    const TYPE_CODE: [u8; 1] = [EapType::TLS.0];
    match (version, keying) {
        (ProtocolVersion::TLSv1_2, _) | (ProtocolVersion::TLSv1_3, Tls13Keying::PreRfc9190) => {
            Some((LABEL_TLS12, None))
        }
        (ProtocolVersion::TLSv1_3, Tls13Keying::Rfc9190) => Some((LABEL_TLS13, Some(&TYPE_CODE))),
        _ => None,
    }
}

/// Key_Material of `conn` (its handshake done) split into MSK and EMSK.
pub(crate) fn export<T>(
    conn: &ConnectionCommon<T>,
    keying: Tls13Keying,
) -> Result<KeyMaterial, rustls::Error> {
    let version = conn
        .protocol_version()
        .ok_or(rustls::Error::HandshakeNotComplete)?;
    let (label, context) = label_and_context(version, keying).ok_or_else(|| {
        rustls::Error::General(format!("no EAP-TLS key derivation for {version:?}"))
    })?;
    let material =
        conn.export_keying_material(Zeroizing::new([0u8; TLS_KEY_MATERIAL_LEN]), label, context)?;
    Ok(KeyMaterial {
        msk: Zeroizing::new(material[..MSK_LEN].to_vec()),
        emsk: Zeroizing::new(material[MSK_LEN..].to_vec()),
    })
}
