//! Test PKI: CAs and end-entity certificates made with rcgen, and the
//! private keys as `SigningKey`s.

use crate::auth::{TrustAnchors, UnixTime};
use phalanx_crypto::SigningKey;
use rcgen::{
    date_time_ymd, BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType,
    IsCa, KeyPair, SanType, SignatureAlgorithm,
};
use std::net::IpAddr;
use std::time::Duration;

/// The time every test validates at: 2026-01-01T00:00:00Z.
pub(super) fn now() -> UnixTime {
    UnixTime::since_unix_epoch(Duration::from_secs(1_767_225_600))
}

/// Every key type, as rcgen names its signature algorithm.
pub(super) const KEY_TYPES: [&SignatureAlgorithm; 5] = [
    &rcgen::PKCS_ECDSA_P256_SHA256,
    &rcgen::PKCS_ECDSA_P384_SHA384,
    &rcgen::PKCS_ECDSA_P521_SHA512,
    &rcgen::PKCS_RSA_SHA256,
    &rcgen::PKCS_ED25519,
];

/// A certificate authority that can issue certificates.
pub(super) struct Ca {
    pub(super) cert: Certificate,
    key: KeyPair,
}

/// An issued certificate with its private key.
pub(super) struct Leaf {
    pub(super) der: Vec<u8>,
    pub(super) key: SigningKey,
}

fn key_pair(alg: &'static SignatureAlgorithm) -> KeyPair {
    KeyPair::generate_for(alg).unwrap()
}

/// Valid 2025-01-01 to 2027-01-01, so [`now`] is inside.
fn validity(params: &mut CertificateParams) {
    params.not_before = date_time_ymd(2025, 1, 1);
    params.not_after = date_time_ymd(2027, 1, 1);
}

fn ca_params(cn: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    // rcgen starts with a CN of its own; the names here are in the order pushed.
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CountryName, "CH");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "Phalanx Test");
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    validity(&mut params);
    params
}

/// The end-entity defaults: DNS, IPv4, IPv6 and email SANs, subject
/// `C=CH, O=Phalanx Test, CN=moon`, no EKU.
pub(super) fn leaf_params() -> CertificateParams {
    let sans = vec![
        "moon.example.com".to_owned(),
        "192.0.2.1".to_owned(),
        "2001:db8::1".to_owned(),
    ];
    let mut params = CertificateParams::new(sans).unwrap();
    let email = SanType::Rfc822Name("carol@example.com".try_into().unwrap());
    params.subject_alt_names.push(email);
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CountryName, "CH");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "Phalanx Test");
    params.distinguished_name.push(DnType::CommonName, "moon");
    validity(&mut params);
    params
}

impl Ca {
    /// A self-signed root with the given key type.
    pub(super) fn root(alg: &'static SignatureAlgorithm, cn: &str) -> Ca {
        let key = key_pair(alg);
        let cert = ca_params(cn).self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// A subordinate CA signed by this one.
    pub(super) fn intermediate(&self, alg: &'static SignatureAlgorithm, cn: &str) -> Ca {
        let key = key_pair(alg);
        let cert = ca_params(cn)
            .signed_by(&key, &self.cert, &self.key)
            .unwrap();
        Ca { cert, key }
    }

    /// This CA as the only trust anchor.
    pub(super) fn anchors(&self) -> TrustAnchors {
        TrustAnchors::from_der(&[self.cert.der().as_ref()]).unwrap()
    }

    /// An end-entity certificate with a fresh key of type `alg`, from
    /// [`leaf_params`] changed by `customize`.
    pub(super) fn issue(
        &self,
        alg: &'static SignatureAlgorithm,
        customize: impl FnOnce(&mut CertificateParams),
    ) -> Leaf {
        let key = key_pair(alg);
        let mut params = leaf_params();
        customize(&mut params);
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        Leaf {
            der: cert.der().to_vec(),
            key: SigningKey::from_pkcs8_der(&key.serialize_der()).unwrap(),
        }
    }
}

/// Parses an IP literal for SAN edits.
pub(super) fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}
