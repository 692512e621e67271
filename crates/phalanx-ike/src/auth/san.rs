//! A minimal walk over an X.509 certificate (RFC 5280 §4.1) to its
//! subjectAltName extension (§4.2.1.6), for the rfc822Name entries that
//! rustls-webpki does not expose.
//!
//! ```text
//! Certificate  ::=  SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue }
//! TBSCertificate  ::=  SEQUENCE {
//!      version         [0]  EXPLICIT Version DEFAULT v1,
//!      serialNumber, signature, issuer, validity, subject, subjectPublicKeyInfo,
//!      issuerUniqueID  [1]  IMPLICIT UniqueIdentifier OPTIONAL,
//!      subjectUniqueID [2]  IMPLICIT UniqueIdentifier OPTIONAL,
//!      extensions      [3]  EXPLICIT Extensions OPTIONAL }
//! Extension  ::=  SEQUENCE { extnID OBJECT IDENTIFIER, critical BOOLEAN DEFAULT FALSE,
//!                            extnValue OCTET STRING }
//! GeneralName ::= CHOICE { ..., rfc822Name [1] IA5String, ... }
//! ```

use super::der::{DerReader, TAG_BOOLEAN, TAG_OCTET_STRING, TAG_OID, TAG_SEQUENCE};

/// id-ce-subjectAltName, 2.5.29.17.
const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
/// Context tag [3], constructed: the extensions of a v3 TBSCertificate.
const TAG_EXTENSIONS: u8 = 0xa3;
/// Context tag [1], primitive: an rfc822Name GeneralName (IMPLICIT IA5String).
const TAG_RFC822_NAME: u8 = 0x81;

/// The rfc822Name entries of the certificate's subjectAltName, in order.
/// Empty when there is no such extension or the DER is malformed.
pub(crate) fn rfc822_names(cert_der: &[u8]) -> Vec<&[u8]> {
    subject_alt_names(cert_der)
        .map(|names| {
            let mut reader = DerReader::new(names);
            core::iter::from_fn(|| reader.read())
                .filter(|(tag, _)| *tag == TAG_RFC822_NAME)
                .map(|(_, value)| value)
                .collect()
        })
        .unwrap_or_default()
}

/// The content of the `GeneralNames` SEQUENCE of the subjectAltName.
fn subject_alt_names(cert_der: &[u8]) -> Option<&[u8]> {
    let mut extensions = DerReader::new(extensions(cert_der)?);
    while !extensions.is_empty() {
        let mut extension = DerReader::new(extensions.expect(TAG_SEQUENCE)?);
        let oid = extension.expect(TAG_OID)?;
        extension.optional(TAG_BOOLEAN);
        let value = extension.expect(TAG_OCTET_STRING)?;
        if oid == SUBJECT_ALT_NAME {
            return DerReader::new(value).expect(TAG_SEQUENCE);
        }
    }
    None
}

/// The content of the `Extensions` SEQUENCE of a certificate.
fn extensions(cert_der: &[u8]) -> Option<&[u8]> {
    let certificate = DerReader::new(cert_der).expect(TAG_SEQUENCE)?;
    let mut tbs = DerReader::new(DerReader::new(certificate).expect(TAG_SEQUENCE)?);
    // Everything before [3] (version, serial, ..., the unique IDs) is skipped.
    loop {
        let (tag, value) = tbs.read()?;
        if tag == TAG_EXTENSIONS {
            return DerReader::new(value).expect(TAG_SEQUENCE);
        }
    }
}
