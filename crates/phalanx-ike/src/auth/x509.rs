//! Certificate path validation for IKE peers (RFC 7296 §3.6, RFC 4945),
//! with rustls-webpki on aws-lc-rs, and how a certificate vouches for an
//! identity.
//!
//! Extended key usage (RFC 4945 §5.1.3.12 asks for id-kp-ipsecIKE or
//! anyExtendedKeyUsage when the extension is present): a certificate with
//! no EKU extension is accepted; one with an EKU extension must list
//! id-kp-ipsecIKE, anyExtendedKeyUsage, serverAuth or clientAuth. The last
//! two go beyond RFC 4945 on purpose: gateway and road-warrior certificates
//! are commonly issued for TLS usages (Windows clients even require
//! serverAuth on the gateway), and strongSwan accepts them. A certificate
//! limited to other purposes (code signing, email protection) is refused.
//! rustls-webpki applies the same rule to every certificate of the path.
//!
//! Time is an argument (`now`), never read here. Revocation is not checked
//! (no CRLs or OCSP are fetched by a sans-IO core).

use super::dn::{attributes_match, parse_dn, parse_rdn_sequence};
use super::identity::Identity;
use super::san::rfc822_names;
use super::AuthError;
use phalanx_crypto::sign::decode_pem;
use rustls_pki_types::{CertificateDer, ServerName, TrustAnchor, UnixTime};
use webpki::{EndEntityCert, ExtendedKeyUsageValidator, KeyPurposeId, KeyPurposeIdIter, KeyUsage};

/// id-kp-ipsecIKE, 1.3.6.1.5.5.7.3.17 (RFC 4945 §5.1.3.12).
const EKU_IPSEC_IKE: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x11];
/// anyExtendedKeyUsage, 2.5.29.37.0 (RFC 5280 §4.2.1.12).
const EKU_ANY: &[u8] = &[0x55, 0x1d, 0x25, 0x00];
/// id-kp-serverAuth, 1.3.6.1.5.5.7.3.1.
const EKU_SERVER_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];
/// id-kp-clientAuth, 1.3.6.1.5.5.7.3.2.
const EKU_CLIENT_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02];
/// Key purposes that make a certificate usable for IKE (module doc).
const IKE_KEY_PURPOSES: [&[u8]; 4] = [EKU_IPSEC_IKE, EKU_ANY, EKU_SERVER_AUTH, EKU_CLIENT_AUTH];

/// The CA certificates a peer's chain must lead to.
#[derive(Clone, Debug, Default)]
pub struct TrustAnchors {
    anchors: Vec<TrustAnchor<'static>>,
}

impl TrustAnchors {
    /// No anchors yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every `CERTIFICATE` block of a PEM bundle (other blocks are skipped).
    pub fn from_pem(pem: &[u8]) -> Result<Self, AuthError> {
        let mut anchors = Self::new();
        for block in decode_pem(pem).map_err(|_| AuthError::BadCertificate)? {
            if block.label == "CERTIFICATE" {
                anchors.add_der(&block.der)?;
            }
        }
        Ok(anchors)
    }

    /// DER certificates.
    pub fn from_der(certs: &[&[u8]]) -> Result<Self, AuthError> {
        let mut anchors = Self::new();
        for cert in certs {
            anchors.add_der(cert)?;
        }
        Ok(anchors)
    }

    /// Adds one DER CA certificate. Only its subject, public key and name
    /// constraints are kept (a trust anchor's own validity is not checked,
    /// as in RFC 5280 §6.1.1 (d)).
    pub fn add_der(&mut self, der: &[u8]) -> Result<(), AuthError> {
        let cert = CertificateDer::from(der);
        let anchor =
            webpki::anchor_from_trusted_cert(&cert).map_err(|_| AuthError::BadCertificate)?;
        self.anchors.push(anchor.to_owned());
        Ok(())
    }

    /// How many anchors there are.
    pub fn len(&self) -> usize {
        self.anchors.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.anchors.is_empty()
    }

    /// The SHA-1 hash of each anchor's SubjectPublicKeyInfo, in the order
    /// added: the Certification Authority data of a CERTREQ payload
    /// (RFC 7296 §3.7: "a concatenated list of SHA-1 hashes of the public
    /// keys of trusted Certification Authorities ... encoded as the SHA-1
    /// hash of the Subject Public Key Info element").
    pub fn key_hashes(&self) -> Vec<[u8; 20]> {
        self.anchors
            .iter()
            .map(|anchor| {
                // webpki keeps the SPKI's contents; the hash is over the
                // whole DER element, SEQUENCE header included.
                let spki = webpki::spki_for_anchor(anchor);
                let digest = aws_lc_rs::digest::digest(
                    &aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY,
                    spki.as_ref(),
                );
                let mut hash = [0u8; 20];
                // SHA-1 output is always 20 octets.
                hash.copy_from_slice(digest.as_ref());
                hash
            })
            .collect()
    }
}

/// A peer certificate whose path to a trust anchor was validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedPeer {
    cert: CertificateDer<'static>,
}

/// Validates the peer's end-entity certificate at time `now` through the
/// `intermediates` it sent (in any order) to one of `anchors`, with the
/// extended key usage rule of the module doc.
pub fn verify_peer_chain(
    end_entity_der: &[u8],
    intermediates: &[&[u8]],
    anchors: &TrustAnchors,
    now: UnixTime,
) -> Result<VerifiedPeer, AuthError> {
    if anchors.is_empty() {
        return Err(AuthError::NoTrustAnchors);
    }
    let cert = CertificateDer::from(end_entity_der);
    let end_entity = EndEntityCert::try_from(&cert).map_err(|_| AuthError::BadCertificate)?;
    let intermediates: Vec<CertificateDer<'_>> = intermediates
        .iter()
        .map(|der| CertificateDer::from(*der))
        .collect();
    end_entity
        .verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors.anchors,
            &intermediates,
            now,
            IkeKeyUsage,
            None,
            None,
        )
        .map_err(path_error)?;
    Ok(VerifiedPeer {
        cert: CertificateDer::from(end_entity_der.to_vec()),
    })
}

fn path_error(e: webpki::Error) -> AuthError {
    match e {
        webpki::Error::CertExpired { .. } => AuthError::CertificateExpired,
        webpki::Error::CertNotValidYet { .. } => AuthError::CertificateNotYetValid,
        // A CA of the right name whose key did not sign the certificate is
        // no path to a trust anchor either.
        webpki::Error::UnknownIssuer | webpki::Error::InvalidSignatureForPublicKey => {
            AuthError::UnknownIssuer
        }
        webpki::Error::RequiredEkuNotFoundContext(_) => AuthError::WrongKeyUsage,
        webpki::Error::BadDer | webpki::Error::BadDerTime => AuthError::BadCertificate,
        other => AuthError::CertificateInvalid(format!("{other:?}")),
    }
}

/// The extended key usage rule of the module doc.
struct IkeKeyUsage;

impl ExtendedKeyUsageValidator for IkeKeyUsage {
    fn validate(&self, iter: KeyPurposeIdIter<'_, '_>) -> Result<(), webpki::Error> {
        let mut present = Vec::new();
        for id in iter {
            let id = id?;
            if IKE_KEY_PURPOSES
                .iter()
                .any(|oid| KeyPurposeId::new(oid) == id)
            {
                return Ok(());
            }
            present.push(id.to_decoded_oid());
        }
        if present.is_empty() {
            return Ok(());
        }
        Err(webpki::Error::RequiredEkuNotFoundContext(
            webpki::RequiredEkuNotFoundContext {
                required: KeyUsage::required_if_present(EKU_IPSEC_IKE),
                present,
            },
        ))
    }
}

impl VerifiedPeer {
    /// The end-entity certificate, DER.
    pub fn certificate_der(&self) -> &[u8] {
        &self.cert
    }

    /// The parsed certificate; it parsed when it was verified.
    pub(crate) fn end_entity(&self) -> Result<EndEntityCert<'_>, AuthError> {
        EndEntityCert::try_from(&self.cert).map_err(|_| AuthError::BadCertificate)
    }

    /// The certificate's subject as a DN identity.
    pub fn subject(&self) -> Result<Identity, AuthError> {
        certificate_subject(&self.cert)
    }

    /// True when the certificate vouches for `claimed`, the identity the
    /// peer sent in its ID payload (RFC 4945 §3.1): an FQDN must be a
    /// dNSName subjectAltName (certificate wildcards as RFC 6125 allows);
    /// an IP address an iPAddress SAN; an email address an rfc822Name SAN
    /// (ASCII case ignored); a DN the certificate's subject (the `dn`
    /// module's rule, without wildcards). KEY_IDs never match a
    /// certificate. Wildcards in `claimed` are never honoured.
    pub fn matches_identity(&self, claimed: &Identity) -> bool {
        certificate_names(&self.cert, claimed)
    }
}

/// True when the DER certificate `cert_der` vouches for `claimed`, by the
/// rule of [`VerifiedPeer::matches_identity`]; `false` for a certificate
/// that does not parse. For certificates whose path another verifier
/// checked (EAP-TLS: rustls), so that both know an End-User by the same
/// rule.
pub fn certificate_names(cert_der: &[u8], claimed: &Identity) -> bool {
    let der = CertificateDer::from(cert_der);
    let Ok(cert) = EndEntityCert::try_from(&der) else {
        return false;
    };
    match claimed {
        Identity::Fqdn(name) if name.contains('*') => false,
        Identity::Fqdn(name) => ServerName::try_from(name.as_str())
            .ok()
            .filter(|server_name| matches!(server_name, ServerName::DnsName(_)))
            .is_some_and(|server_name| cert.verify_is_valid_for_subject_name(&server_name).is_ok()),
        Identity::Ipv4(a) => ip_matches(&cert, (*a).into()),
        Identity::Ipv6(a) => ip_matches(&cert, (*a).into()),
        Identity::Email(address) => rfc822_names(cert_der)
            .iter()
            .any(|name| name.eq_ignore_ascii_case(address.as_bytes())),
        Identity::Dn(der) => match (parse_dn(der), parse_rdn_sequence(cert.subject())) {
            (Some(claimed), Some(subject)) => attributes_match(&claimed, &subject, false),
            _ => false,
        },
        Identity::KeyId(_) => false,
    }
}

fn ip_matches(cert: &EndEntityCert<'_>, ip: std::net::IpAddr) -> bool {
    let server_name = ServerName::IpAddress(ip.into());
    cert.verify_is_valid_for_subject_name(&server_name).is_ok()
}

/// The subject of a DER certificate (ours, to send as ID_DER_ASN1_DN
/// byte for byte as the certificate has it, so that the peer's comparison
/// cannot trip over string types).
pub fn certificate_subject(cert_der: &[u8]) -> Result<Identity, AuthError> {
    let cert = CertificateDer::from(cert_der);
    let parsed = EndEntityCert::try_from(&cert).map_err(|_| AuthError::BadCertificate)?;
    let subject = parsed.subject();
    let mut name = Vec::with_capacity(subject.len() + 4);
    super::der::push_tlv(&mut name, super::der::TAG_SEQUENCE, subject);
    Ok(Identity::Dn(name))
}
