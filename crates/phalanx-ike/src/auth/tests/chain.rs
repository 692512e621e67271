//! Path validation and identity matching.

use super::pki::{ip, now, Ca, KEY_TYPES};
use crate::auth::{
    certificate_names, certificate_subject, verify_peer_chain, AuthError, Identity, TrustAnchors,
    UnixTime,
};
use rcgen::{date_time_ymd, ExtendedKeyUsagePurpose, SanType};
use std::time::Duration;

#[test]
fn chain_to_own_ca_verifies_for_every_key_type() {
    for alg in KEY_TYPES {
        let ca = Ca::root(alg, "root");
        let leaf = ca.issue(alg, |_| {});
        let peer = verify_peer_chain(&leaf.der, &[], &ca.anchors(), now()).unwrap();
        assert_eq!(peer.certificate_der(), leaf.der.as_slice());
    }
}

#[test]
fn other_ca_is_unknown_issuer() {
    let ca = Ca::root(&rcgen::PKCS_ECDSA_P256_SHA256, "root");
    let leaf = ca.issue(&rcgen::PKCS_ECDSA_P256_SHA256, |_| {});
    // A different CA, under another name and under the same name (then the
    // issuer name matches but the signature does not).
    for cn in ["other", "root"] {
        let other = Ca::root(&rcgen::PKCS_ECDSA_P256_SHA256, cn);
        let result = verify_peer_chain(&leaf.der, &[], &other.anchors(), now());
        assert_eq!(result.unwrap_err(), AuthError::UnknownIssuer, "{cn}");
    }
}

#[test]
fn validity_period_is_checked_against_now() {
    let alg = &rcgen::PKCS_ECDSA_P256_SHA256;
    let ca = Ca::root(alg, "root");
    let expired = ca.issue(alg, |p| p.not_after = date_time_ymd(2025, 12, 31));
    let result = verify_peer_chain(&expired.der, &[], &ca.anchors(), now());
    assert_eq!(result.unwrap_err(), AuthError::CertificateExpired);
    let future = ca.issue(alg, |p| p.not_before = date_time_ymd(2026, 1, 2));
    let result = verify_peer_chain(&future.der, &[], &ca.anchors(), now());
    assert_eq!(result.unwrap_err(), AuthError::CertificateNotYetValid);
    // The same expired certificate was fine a year earlier: `now` is the only clock.
    let earlier = UnixTime::since_unix_epoch(Duration::from_secs(1_735_689_600 + 86_400));
    assert!(verify_peer_chain(&expired.der, &[], &ca.anchors(), earlier).is_ok());
}

#[test]
fn intermediates_are_used_for_path_building() {
    let root = Ca::root(&rcgen::PKCS_ECDSA_P384_SHA384, "root");
    let sub = root.intermediate(&rcgen::PKCS_ECDSA_P256_SHA256, "sub");
    let leaf = sub.issue(&rcgen::PKCS_ED25519, |_| {});
    let intermediates = [sub.cert.der().as_ref()];
    assert!(verify_peer_chain(&leaf.der, &intermediates, &root.anchors(), now()).is_ok());
    let result = verify_peer_chain(&leaf.der, &[], &root.anchors(), now());
    assert_eq!(result.unwrap_err(), AuthError::UnknownIssuer);
}

#[test]
fn extended_key_usage_rule() {
    let alg = &rcgen::PKCS_ECDSA_P256_SHA256;
    let ca = Ca::root(alg, "root");
    let ipsec_ike = ExtendedKeyUsagePurpose::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 17]);
    let accepted = [
        vec![],
        vec![ipsec_ike],
        vec![ExtendedKeyUsagePurpose::ServerAuth],
        vec![ExtendedKeyUsagePurpose::ClientAuth],
        vec![ExtendedKeyUsagePurpose::Any],
        vec![
            ExtendedKeyUsagePurpose::CodeSigning,
            ExtendedKeyUsagePurpose::ServerAuth,
        ],
    ];
    for ekus in accepted {
        let leaf = ca.issue(alg, |p| p.extended_key_usages = ekus.clone());
        assert!(
            verify_peer_chain(&leaf.der, &[], &ca.anchors(), now()).is_ok(),
            "{ekus:?}"
        );
    }
    let refused = [
        vec![ExtendedKeyUsagePurpose::CodeSigning],
        vec![
            ExtendedKeyUsagePurpose::EmailProtection,
            ExtendedKeyUsagePurpose::TimeStamping,
        ],
    ];
    for ekus in refused {
        let leaf = ca.issue(alg, |p| p.extended_key_usages = ekus.clone());
        let result = verify_peer_chain(&leaf.der, &[], &ca.anchors(), now());
        assert_eq!(result.unwrap_err(), AuthError::WrongKeyUsage, "{ekus:?}");
    }
}

#[test]
fn anchors_from_pem_and_refusals() {
    let alg = &rcgen::PKCS_ECDSA_P256_SHA256;
    let ca = Ca::root(alg, "root");
    let leaf = ca.issue(alg, |_| {});
    let bundle = format!(
        "comment\n{}{}",
        Ca::root(alg, "other").cert.pem(),
        ca.cert.pem()
    );
    let anchors = TrustAnchors::from_pem(bundle.as_bytes()).unwrap();
    assert_eq!(anchors.len(), 2);
    assert!(verify_peer_chain(&leaf.der, &[], &anchors, now()).is_ok());

    let empty = TrustAnchors::new();
    let result = verify_peer_chain(&leaf.der, &[], &empty, now());
    assert_eq!(result.unwrap_err(), AuthError::NoTrustAnchors);
    assert_eq!(
        TrustAnchors::from_der(&[b"not a cert"]).unwrap_err(),
        AuthError::BadCertificate
    );
    let bad_pem = b"-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n";
    assert_eq!(
        TrustAnchors::from_pem(bad_pem).unwrap_err(),
        AuthError::BadCertificate
    );
    let garbage = verify_peer_chain(b"\x30\x03\x02\x01\x00", &[], &anchors, now());
    assert_eq!(garbage.unwrap_err(), AuthError::BadCertificate);
    // A CA certificate is not an end entity.
    let ca_der = ca.cert.der().to_vec();
    let result = verify_peer_chain(&ca_der, &[], &ca.anchors(), now());
    assert!(
        matches!(result, Err(AuthError::CertificateInvalid(_))),
        "{result:?}"
    );
}

#[test]
fn certificate_vouches_for_its_identities_only() {
    let alg = &rcgen::PKCS_ECDSA_P256_SHA256;
    let ca = Ca::root(alg, "root");
    let leaf = ca.issue(alg, |_| {});
    let peer = verify_peer_chain(&leaf.der, &[], &ca.anchors(), now()).unwrap();
    let id = |s: &str| Identity::parse_config(s).unwrap();
    for good in [
        "moon.example.com",
        "MOON.example.com",
        "192.0.2.1",
        "2001:db8::1",
        "carol@example.com",
        "Carol@Example.com",
        "C=CH, O=Phalanx Test, CN=moon",
        "c=ch, o=phalanx test, cn=MOON",
    ] {
        assert!(peer.matches_identity(&id(good)), "{good}");
        assert!(certificate_names(&leaf.der, &id(good)), "{good}");
    }
    for bad in [
        "sun.example.com",
        "*.example.com",
        "@192.0.2.1",
        "192.0.2.2",
        "2001:db8::2",
        "dave@example.com",
        "C=CH, O=Phalanx Test, CN=sun",
        "C=CH, O=Phalanx Test, CN=*",
        "O=Phalanx Test, CN=moon",
        "@#6d6f6f6e",
    ] {
        assert!(!peer.matches_identity(&id(bad)), "{bad}");
        assert!(!certificate_names(&leaf.der, &id(bad)), "{bad}");
    }
    assert!(
        !certificate_names(&leaf.der[..leaf.der.len() - 1], &id("moon.example.com")),
        "a certificate that does not parse names nothing"
    );
    let subject = peer.subject().unwrap();
    assert_eq!(subject, certificate_subject(&leaf.der).unwrap());
    assert_eq!(subject.to_string(), "C=CH, O=Phalanx Test, CN=moon");
    assert!(peer.matches_identity(&subject));
}

#[test]
fn wildcard_certificates_and_san_edits() {
    let alg = &rcgen::PKCS_ED25519;
    let ca = Ca::root(alg, "root");
    let leaf = ca.issue(alg, |p| {
        p.subject_alt_names = vec![
            SanType::DnsName("*.vpn.example.com".try_into().unwrap()),
            SanType::IpAddress(ip("198.51.100.7")),
        ];
    });
    let peer = verify_peer_chain(&leaf.der, &[], &ca.anchors(), now()).unwrap();
    let id = |s: &str| Identity::parse_config(s).unwrap();
    assert!(peer.matches_identity(&id("gw1.vpn.example.com")));
    assert!(!peer.matches_identity(&id("vpn.example.com")));
    assert!(!peer.matches_identity(&id("moon.example.com")));
    assert!(peer.matches_identity(&id("198.51.100.7")));
    assert!(!peer.matches_identity(&id("carol@example.com")));
}
