//! The client certificate: trusted (rustls' WebPKI verifier on the
//! configured CAs) and naming the End-User.
//!
//! Which identity it must name is strongSwan's eap-tls rule: the EAP
//! identity (EAP-Response/Identity), read like strongSwan's
//! `identification_create_from_data` (a DER DN when the octets are one,
//! otherwise the text in its identity syntax), or the IKE IDi when the
//! EAP identity is empty. A certificate names it as it would name an IKE
//! identity ([`phalanx_ike::auth::certificate_names`]: dNSName, rfc822Name
//! or iPAddress subjectAltName, or the subject DN). The check runs inside
//! the handshake, after the path is verified, so that a certificate for
//! someone else is refused with a TLS alert (access_denied) like any
//! other unacceptable certificate.

use std::fmt;
use std::sync::Arc;

use phalanx_ike::auth::{certificate_names, Identity};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};

/// The identity the client certificate must name, from the EAP identity
/// octets or, when they are empty, the IKE IDi (text). `Err` with the
/// identity as text when it is none a certificate can name.
pub(crate) fn end_user_identity(
    eap_identity: &[u8],
    ike_identity: &str,
) -> Result<Identity, String> {
    if eap_identity.is_empty() {
        return Identity::parse_config(ike_identity).map_err(|_| ike_identity.to_owned());
    }
    // A DN sent as its DER encoding (a SEQUENCE), as strongSwan does for a
    // DN eap_id.
    if eap_identity[0] == 0x30 {
        if let Ok(dn) = Identity::from_id(Identity::ID_DER_ASN1_DN, eap_identity) {
            return Ok(dn);
        }
    }
    let text = String::from_utf8_lossy(eap_identity);
    Identity::parse_config(&text).map_err(|_| text.into_owned())
}

/// A client certificate verifier that also requires the end-entity
/// certificate to name `identity`; a certificate that does not is refused
/// with [`CertificateError::ApplicationVerificationFailure`], which nothing
/// else here raises (and rustls sends as access_denied).
pub(crate) struct IdentityBound {
    pub(crate) inner: Arc<dyn ClientCertVerifier>,
    pub(crate) identity: Identity,
}

impl fmt::Debug for IdentityBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdentityBound")
            .field("identity", &self.identity.to_string())
            .finish_non_exhaustive()
    }
}

impl ClientCertVerifier for IdentityBound {
    fn offer_client_auth(&self) -> bool {
        true
    }

    /// RFC 5216 §2.1.1: the server must request a certificate; without
    /// one there is no EAP-TLS authentication.
    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        if !certificate_names(end_entity, &self.identity) {
            return Err(rustls::Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ));
        }
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eap_identity_is_read_like_strongswan_reads_it() {
        let id = |s: &str| Identity::parse_config(s).unwrap();
        assert_eq!(
            end_user_identity(b"alice@example.com", "ignored"),
            Ok(id("alice@example.com"))
        );
        assert_eq!(
            end_user_identity(b"gw-a.example", "ignored"),
            Ok(id("gw-a.example"))
        );
        assert_eq!(
            end_user_identity(b"C=CH, O=Phalanx, CN=alice", "ignored"),
            Ok(id("C=CH, O=Phalanx, CN=alice"))
        );
        // A DN as DER, and the IKE IDi when the EAP identity is empty.
        let Identity::Dn(der) = id("C=CH, O=Phalanx, CN=alice") else {
            panic!("not a DN");
        };
        assert_eq!(
            end_user_identity(&der, "ignored"),
            Ok(id("C=CH, O=Phalanx, CN=alice"))
        );
        assert_eq!(
            end_user_identity(b"", "bob@example.com"),
            Ok(id("bob@example.com"))
        );
        // Octets that start like a SEQUENCE ('0') but are no DN are text.
        assert_eq!(
            end_user_identity(b"0day@example.com", "ignored"),
            Ok(id("0day@example.com"))
        );
        // Text no identity can be: refused, with the text.
        assert_eq!(
            end_user_identity(b"@#zz", "ignored"),
            Err("@#zz".to_owned())
        );
    }
}
