//! Key loading and signing against the OpenSSL-made keys in `testdata/`;
//! every signature is checked with the public key the `SigningKey` reports.

use super::*;
use aws_lc_rs::signature::{self as lc, UnparsedPublicKey, VerificationAlgorithm};

const P256_SEC1: &[u8] = include_bytes!("testdata/p256-sec1.pem");
const P384_PKCS8: &[u8] = include_bytes!("testdata/p384-pkcs8.pem");
const P521_PKCS8: &[u8] = include_bytes!("testdata/p521-pkcs8.pem");
const RSA2048_PKCS1: &[u8] = include_bytes!("testdata/rsa2048-pkcs1.pem");
const ED25519_PKCS8: &[u8] = include_bytes!("testdata/ed25519-pkcs8.pem");
const RSA1024_PKCS1: &[u8] = include_bytes!("testdata/rsa1024-pkcs1.pem");
const P384_ENCRYPTED: &[u8] = include_bytes!("testdata/p384-encrypted.pem");
const RSA_LEGACY_ENCRYPTED: &[u8] = include_bytes!("testdata/rsa-legacy-encrypted.pem");

const MSG: &[u8] = b"InitiatorSignedOctets stand-in";

/// The aws-lc verifier for an RFC 7427-encoded signature of `scheme`.
fn verifier(scheme: SignatureScheme) -> &'static dyn VerificationAlgorithm {
    match scheme {
        SignatureScheme::EcdsaP256Sha256 => &lc::ECDSA_P256_SHA256_ASN1,
        SignatureScheme::EcdsaP384Sha384 => &lc::ECDSA_P384_SHA384_ASN1,
        SignatureScheme::EcdsaP521Sha512 => &lc::ECDSA_P521_SHA512_ASN1,
        SignatureScheme::RsaPkcs1Sha256 => &lc::RSA_PKCS1_2048_8192_SHA256,
        SignatureScheme::RsaPkcs1Sha384 => &lc::RSA_PKCS1_2048_8192_SHA384,
        SignatureScheme::RsaPkcs1Sha512 => &lc::RSA_PKCS1_2048_8192_SHA512,
        SignatureScheme::RsaPssSha256 => &lc::RSA_PSS_2048_8192_SHA256,
        SignatureScheme::RsaPssSha384 => &lc::RSA_PSS_2048_8192_SHA384,
        SignatureScheme::RsaPssSha512 => &lc::RSA_PSS_2048_8192_SHA512,
        SignatureScheme::Ed25519 => &lc::ED25519,
    }
}

fn check_all_fitting_schemes(key: &SigningKey) -> usize {
    let mut signed = 0;
    for scheme in SignatureScheme::ALL {
        let result = key.sign(scheme, MSG);
        if !scheme.fits(key.kind()) {
            assert_eq!(result, Err(SignError::SchemeMismatch), "{scheme}");
            continue;
        }
        let sig = result.unwrap();
        let public = UnparsedPublicKey::new(verifier(scheme), key.public_key());
        public.verify(MSG, &sig).unwrap();
        assert!(public.verify(b"other octets", &sig).is_err(), "{scheme}");
        signed += 1;
    }
    signed
}

#[test]
fn loads_each_format_and_signs_every_fitting_scheme() {
    let cases: [(&[u8], KeyKind, usize); 5] = [
        (P256_SEC1, KeyKind::EcdsaP256, 1),
        (P384_PKCS8, KeyKind::EcdsaP384, 1),
        (P521_PKCS8, KeyKind::EcdsaP521, 1),
        (RSA2048_PKCS1, KeyKind::Rsa { bits: 2048 }, 6),
        (ED25519_PKCS8, KeyKind::Ed25519, 1),
    ];
    for (pem, kind, schemes) in cases {
        let key = SigningKey::from_pem(pem).unwrap();
        assert_eq!(key.kind(), kind);
        assert_eq!(check_all_fitting_schemes(&key), schemes, "{kind}");
    }
}

#[test]
fn ecdsa_fixed_encoding_rfc4754() {
    let cases = [
        (
            P256_SEC1,
            SignatureScheme::EcdsaP256Sha256,
            64,
            &lc::ECDSA_P256_SHA256_FIXED,
        ),
        (
            P384_PKCS8,
            SignatureScheme::EcdsaP384Sha384,
            96,
            &lc::ECDSA_P384_SHA384_FIXED,
        ),
        (
            P521_PKCS8,
            SignatureScheme::EcdsaP521Sha512,
            132,
            &lc::ECDSA_P521_SHA512_FIXED,
        ),
    ];
    for (pem, scheme, len, fixed_alg) in cases {
        let key = SigningKey::from_pem(pem).unwrap();
        let sig = key.sign_ecdsa_fixed(scheme, MSG).unwrap();
        assert_eq!(sig.len(), len);
        assert_eq!(scheme.ecdsa_scalar_len(), Some(len / 2));
        UnparsedPublicKey::new(fixed_alg, key.public_key())
            .verify(MSG, &sig)
            .unwrap();
        // The DER conversion gives what the ASN.1 verifier accepts.
        let der = ecdsa_fixed_to_der(&sig).unwrap();
        UnparsedPublicKey::new(verifier(scheme), key.public_key())
            .verify(MSG, &der)
            .unwrap();
    }
    let p256 = SigningKey::from_pem(P256_SEC1).unwrap();
    let wrong = p256.sign_ecdsa_fixed(SignatureScheme::EcdsaP384Sha384, MSG);
    assert_eq!(wrong, Err(SignError::SchemeMismatch));
    let rsa = SigningKey::from_pem(RSA2048_PKCS1).unwrap();
    let wrong = rsa.sign_ecdsa_fixed(SignatureScheme::RsaPkcs1Sha256, MSG);
    assert_eq!(wrong, Err(SignError::SchemeMismatch));
}

#[test]
fn der_entry_points() {
    // PKCS#8 RSA (aws-lc generated), SEC1 P-384 (aws-lc serialized).
    use aws_lc_rs::encoding::{AsDer, EcPrivateKeyRfc5915Der, Pkcs8V1Der};
    let rsa = lc::RsaKeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa3072).unwrap();
    let pkcs8: Pkcs8V1Der = rsa.as_der().unwrap();
    let key = SigningKey::from_pkcs8_der(pkcs8.as_ref()).unwrap();
    assert_eq!(key.kind(), KeyKind::Rsa { bits: 3072 });
    assert_eq!(check_all_fitting_schemes(&key), 6);

    let ec = lc::EcdsaKeyPair::generate(&lc::ECDSA_P384_SHA384_ASN1_SIGNING).unwrap();
    let sec1: EcPrivateKeyRfc5915Der = ec.private_key().as_der().unwrap();
    let key = SigningKey::from_sec1_der(sec1.as_ref()).unwrap();
    assert_eq!(key.kind(), KeyKind::EcdsaP384);
    assert_eq!(key.public_key(), lc::KeyPair::public_key(&ec).as_ref());
}

#[test]
fn refusals() {
    assert_eq!(
        SigningKey::from_pem(RSA1024_PKCS1).unwrap_err(),
        SignError::KeyRejected
    );
    assert_eq!(
        SigningKey::from_pem(P384_ENCRYPTED).unwrap_err(),
        SignError::EncryptedKey
    );
    assert_eq!(
        SigningKey::from_pem(RSA_LEGACY_ENCRYPTED).unwrap_err(),
        SignError::EncryptedKey
    );
    let cert_only = b"-----BEGIN CERTIFICATE-----\nZm9v\n-----END CERTIFICATE-----\n";
    assert_eq!(
        SigningKey::from_pem(cert_only).unwrap_err(),
        SignError::NoPrivateKey
    );
    assert_eq!(
        SigningKey::from_pem(b"garbage").unwrap_err(),
        SignError::NoPrivateKey
    );
    assert_eq!(
        SigningKey::from_pkcs8_der(b"\x30\x00").unwrap_err(),
        SignError::KeyRejected
    );
    assert_eq!(
        SigningKey::from_sec1_der(&[]).unwrap_err(),
        SignError::KeyRejected
    );
    assert_eq!(
        SigningKey::from_pkcs1_der(&[0x30]).unwrap_err(),
        SignError::KeyRejected
    );
}

#[test]
fn debug_shows_no_key_material() {
    let key = SigningKey::from_pem(ED25519_PKCS8).unwrap();
    assert_eq!(format!("{key:?}"), "SigningKey { kind: Ed25519, .. }");
}
