//! AUTH payloads: RFC 7427 and RFC 4754 round trips, tampering, refusals
//! and scheme choice.

use super::pki::{now, Ca, Leaf, KEY_TYPES};
use crate::auth::*;
use phalanx_crypto::sign::{KeyKind, SignatureScheme};

const OCTETS: &[u8] = b"RealMessage1 | NonceRData | MACedIDForI";

fn peer_and_key(alg: &'static rcgen::SignatureAlgorithm) -> (VerifiedPeer, Leaf) {
    let ca = Ca::root(alg, "root");
    let leaf = ca.issue(alg, |_| {});
    (
        verify_peer_chain(&leaf.der, &[], &ca.anchors(), now()).unwrap(),
        leaf,
    )
}

#[test]
fn rfc7427_round_trip_for_every_key_type_and_scheme() {
    for alg in KEY_TYPES {
        let (peer, leaf) = peer_and_key(alg);
        let schemes: Vec<_> = SignatureScheme::ALL
            .into_iter()
            .filter(|s| s.fits(leaf.key.kind()))
            .collect();
        assert!(!schemes.is_empty());
        for scheme in schemes {
            let data = sign_auth(&leaf.key, scheme, OCTETS).unwrap();
            let id_len = usize::from(data[0]);
            assert_eq!(&data[1..1 + id_len], scheme.algorithm_identifier());
            verify_auth(&peer, AUTH_METHOD_DIGITAL_SIGNATURE, &data, OCTETS).unwrap();
            let wrong = verify_auth(&peer, AUTH_METHOD_DIGITAL_SIGNATURE, &data, b"other octets");
            assert_eq!(wrong, Err(AuthError::BadSignature), "{scheme}");
            let mut flipped = data.clone();
            *flipped.last_mut().unwrap() ^= 1;
            let tampered = verify_auth(&peer, AUTH_METHOD_DIGITAL_SIGNATURE, &flipped, OCTETS);
            assert_eq!(tampered, Err(AuthError::BadSignature), "{scheme}");
        }
    }
}

#[test]
fn rfc4754_round_trip_for_ecdsa_keys() {
    let cases = [
        (&rcgen::PKCS_ECDSA_P256_SHA256, AUTH_METHOD_ECDSA_256, 64),
        (&rcgen::PKCS_ECDSA_P384_SHA384, AUTH_METHOD_ECDSA_384, 96),
        (&rcgen::PKCS_ECDSA_P521_SHA512, AUTH_METHOD_ECDSA_521, 132),
    ];
    for (alg, method, len) in cases {
        let (peer, leaf) = peer_and_key(alg);
        let (got_method, data) = sign_auth_rfc4754(&leaf.key, OCTETS).unwrap();
        assert_eq!((got_method, data.len()), (method, len));
        verify_auth(&peer, method, &data, OCTETS).unwrap();
        assert_eq!(
            verify_auth(&peer, method, &data, b"x"),
            Err(AuthError::BadSignature)
        );
        let short = verify_auth(&peer, method, &data[1..], OCTETS);
        assert_eq!(short, Err(AuthError::MalformedAuthData));
    }
    let (_, rsa) = peer_and_key(&rcgen::PKCS_RSA_SHA256);
    assert!(sign_auth_rfc4754(&rsa.key, OCTETS).is_err());
}

#[test]
fn algorithm_and_key_mismatches() {
    let (p256_peer, p256) = peer_and_key(&rcgen::PKCS_ECDSA_P256_SHA256);
    let (rsa_peer, rsa) = peer_and_key(&rcgen::PKCS_RSA_SHA256);
    // An RSA signature against an ECDSA certificate, and the reverse.
    let data = sign_auth(&rsa.key, SignatureScheme::RsaPssSha256, OCTETS).unwrap();
    let result = verify_auth(&p256_peer, AUTH_METHOD_DIGITAL_SIGNATURE, &data, OCTETS);
    assert_eq!(result, Err(AuthError::KeyMismatch));
    let data = sign_auth(&p256.key, SignatureScheme::EcdsaP256Sha256, OCTETS).unwrap();
    let result = verify_auth(&rsa_peer, AUTH_METHOD_DIGITAL_SIGNATURE, &data, OCTETS);
    assert_eq!(result, Err(AuthError::KeyMismatch));
    // RFC 4754 ties the curve to the method: method 10 with a P-256 certificate.
    let (_, fixed) = sign_auth_rfc4754(&p256.key, OCTETS).unwrap();
    let padded = [fixed.as_slice(), &[0u8; 32]].concat();
    let result = verify_auth(&p256_peer, AUTH_METHOD_ECDSA_384, &padded, OCTETS);
    assert_eq!(result, Err(AuthError::KeyMismatch));
    // Our key refuses a scheme that does not fit it.
    let result = sign_auth(&p256.key, SignatureScheme::RsaPkcs1Sha256, OCTETS);
    assert!(matches!(result, Err(AuthError::Signing(_))));
}

#[test]
fn malformed_and_refused_auth_data() {
    let (peer, leaf) = peer_and_key(&rcgen::PKCS_ECDSA_P256_SHA256);
    let good = sign_auth(&leaf.key, SignatureScheme::EcdsaP256Sha256, OCTETS).unwrap();
    let m = AUTH_METHOD_DIGITAL_SIGNATURE;
    assert_eq!(
        verify_auth(&peer, m, &[], OCTETS),
        Err(AuthError::MalformedAuthData)
    );
    assert_eq!(
        verify_auth(&peer, m, &good[..13], OCTETS),
        Err(AuthError::MalformedAuthData)
    );
    let mut too_long = good.clone();
    too_long[0] = 0xff;
    assert_eq!(
        verify_auth(&peer, m, &too_long, OCTETS),
        Err(AuthError::MalformedAuthData)
    );
    // ecdsa-with-SHA1 (RFC 7427 A.3.1) in place of ecdsa-with-SHA256.
    let sha1 = [
        &[9u8][..],
        &[
            0x30, 0x09, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x01,
        ],
    ]
    .concat();
    let sha1_data = [sha1.as_slice(), &good[13..]].concat();
    let result = verify_auth(&peer, m, &sha1_data, OCTETS);
    assert_eq!(result, Err(AuthError::UnsupportedSignatureAlgorithm));
    let result = verify_auth(&peer, AUTH_METHOD_RSA_SIG, &good, OCTETS);
    assert_eq!(result, Err(AuthError::LegacyRsaSha1Refused));
    for method in [AUTH_METHOD_SHARED_KEY_MIC, 3, 13, 200] {
        let result = verify_auth(&peer, method, &good, OCTETS);
        assert_eq!(result, Err(AuthError::UnsupportedAuthMethod(method)));
    }
}

#[test]
fn scheme_choice_follows_peer_hashes() {
    let all = SUPPORTED_HASH_ALGORITHMS;
    let rsa = KeyKind::Rsa { bits: 2048 };
    let cases = [
        (
            KeyKind::EcdsaP256,
            &all[..],
            Some(SignatureScheme::EcdsaP256Sha256),
        ),
        (
            KeyKind::EcdsaP384,
            &all[..],
            Some(SignatureScheme::EcdsaP384Sha384),
        ),
        (
            KeyKind::EcdsaP521,
            &all[..],
            Some(SignatureScheme::EcdsaP521Sha512),
        ),
        (KeyKind::Ed25519, &all[..], Some(SignatureScheme::Ed25519)),
        (rsa, &all[..], Some(SignatureScheme::RsaPkcs1Sha256)),
        (rsa, &[4, 3][..], Some(SignatureScheme::RsaPkcs1Sha384)),
        (rsa, &[1, 4][..], Some(SignatureScheme::RsaPkcs1Sha512)),
        (KeyKind::EcdsaP256, &[3, 4, 5][..], None),
        (KeyKind::Ed25519, &[2, 3, 4][..], None),
        (rsa, &[1][..], None),
        (rsa, &[][..], None),
    ];
    for (kind, hashes, expected) in cases {
        assert_eq!(
            choose_scheme(kind, hashes, &[]),
            expected,
            "{kind} {hashes:?}"
        );
    }
}

#[test]
fn preferred_schemes_come_first_when_key_and_peer_allow() {
    use SignatureScheme as S;
    let all = SUPPORTED_HASH_ALGORITHMS;
    let rsa = KeyKind::Rsa { bits: 2048 };
    let pss = [S::RsaPssSha256, S::RsaPssSha384, S::RsaPssSha512];
    assert_eq!(choose_scheme(rsa, &all, &pss), Some(S::RsaPssSha256));
    // The peer takes SHA2-384 only: PSS with SHA2-384.
    assert_eq!(choose_scheme(rsa, &[3], &pss), Some(S::RsaPssSha384));
    // Preferred but impossible: no fallback to PKCS#1 (the operator
    // asked for PSS).
    assert_eq!(choose_scheme(rsa, &[1], &pss), None);
    assert_eq!(choose_scheme(KeyKind::EcdsaP256, &all, &pss), None);
}

#[test]
fn the_scheme_of_an_auth_payload() {
    let (_, leaf) = peer_and_key(&rcgen::PKCS_RSA_SHA256);
    let data = sign_auth(&leaf.key, SignatureScheme::RsaPssSha384, OCTETS).unwrap();
    assert_eq!(
        auth_scheme(AUTH_METHOD_DIGITAL_SIGNATURE, &data),
        Some(SignatureScheme::RsaPssSha384)
    );
    assert_eq!(
        auth_scheme(AUTH_METHOD_ECDSA_384, &[]),
        Some(SignatureScheme::EcdsaP384Sha384)
    );
    assert_eq!(auth_scheme(AUTH_METHOD_DIGITAL_SIGNATURE, &[200, 1]), None);
    assert_eq!(auth_scheme(AUTH_METHOD_SHARED_KEY_MIC, &data), None);
}

#[test]
fn every_error_is_authentication_failed_on_the_wire() {
    let errors = [
        AuthError::MalformedIdentity,
        AuthError::UnknownIssuer,
        AuthError::BadSignature,
        AuthError::PskMismatch,
        AuthError::CertificateInvalid("x".into()),
    ];
    for e in errors {
        assert_eq!(e.notify_type(), 24, "{e}");
    }
    assert_eq!(AUTHENTICATION_FAILED, 24);
}
