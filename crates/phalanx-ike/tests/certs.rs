//! Certificate authentication (RFC 7296 §3.6–§3.8, RFC 7427) and IKE
//! fragmentation of the large IKE_AUTH messages it makes (RFC 7383).
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use phalanx_crypto::sign::SignatureScheme;
use phalanx_crypto::SigningKey;
use phalanx_ike::auth::{Identity, TrustAnchors, UnixTime};
use phalanx_ike::config::{Connection, LocalAuth, RemoteAuth};
use phalanx_ike::{Counter, SaEvent};
use phalanx_testkit::ike_pair::{Fate, IkePair, Side};
use phalanx_wire::ike::iana::ExchangeType;
use phalanx_wire::ike::{MessageRepr, Payload};
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair,
    SignatureAlgorithm,
};

/// 2026-01-01T00:00:00Z: inside every certificate's validity.
fn unix_now() -> UnixTime {
    UnixTime::since_unix_epoch(Duration::from_secs(1_767_225_600))
}

struct Pki {
    anchors: Arc<TrustAnchors>,
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

impl Pki {
    fn new(alg: &'static SignatureAlgorithm) -> Pki {
        let ca_key = KeyPair::generate_for(alg).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, "Phalanx Test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.not_before = date_time_ymd(2025, 1, 1);
        params.not_after = date_time_ymd(2027, 1, 1);
        let ca = params.self_signed(&ca_key).unwrap();
        let anchors = Arc::new(TrustAnchors::from_der(&[ca.der().as_ref()]).unwrap());
        Pki {
            anchors,
            ca,
            ca_key,
        }
    }

    /// A certificate for `fqdn` and its key.
    fn issue(&self, alg: &'static SignatureAlgorithm, fqdn: &str) -> (Vec<u8>, SigningKey) {
        let key = KeyPair::generate_for(alg).unwrap();
        let mut params = CertificateParams::new(vec![fqdn.to_owned()]).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, fqdn);
        params.not_before = date_time_ymd(2025, 1, 1);
        params.not_after = date_time_ymd(2027, 1, 1);
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let signing = SigningKey::from_pkcs8_der(&key.serialize_der()).unwrap();
        (cert.der().to_vec(), signing)
    }
}

fn with_certs(
    mut conn: Connection,
    pki: &Pki,
    alg: &'static SignatureAlgorithm,
    fqdn: &str,
) -> Connection {
    let (der, key) = pki.issue(alg, fqdn);
    conn.local_auth = LocalAuth::Signature {
        key: Arc::new(key),
        chain: vec![der, pki.ca.der().to_vec()],
    };
    conn.remote_auth = RemoteAuth::Signature {
        anchors: Arc::clone(&pki.anchors),
    };
    conn.send_cert = true;
    conn.send_certreq = true;
    conn
}

fn cert_pair(
    alg_a: &'static SignatureAlgorithm,
    alg_b: &'static SignatureAlgorithm,
    seed: u64,
) -> IkePair {
    let pki = Pki::new(&rcgen::PKCS_ECDSA_P256_SHA256);
    cert_pair_of(&pki, alg_a, alg_b, seed)
}

fn cert_pair_of(
    pki: &Pki,
    alg_a: &'static SignatureAlgorithm,
    alg_b: &'static SignatureAlgorithm,
    seed: u64,
) -> IkePair {
    let a = with_certs(connection(Side::A, DEFAULT_IKE), pki, alg_a, "a.example");
    let b = with_certs(connection(Side::B, DEFAULT_IKE), pki, alg_b, "b.example");
    clocked_pair(a, b, seed)
}

/// A pair of `a` and `b` whose endpoints know the wall-clock time (for
/// certificate validity).
fn clocked_pair(a: Connection, b: Connection, seed: u64) -> IkePair {
    let mut p = pair_of(a, b, seed);
    let now = p.now;
    for side in [Side::A, Side::B] {
        p.endpoint(side).set_wall_clock(now, unix_now());
    }
    p
}

// Initiator                         Responder
// HDR, SAi1, KEi, Ni, N(SIGNATURE_HASH_ALGORITHMS) -->
//                               <--  HDR, SAr1, KEr, Nr, CERTREQ, N(SIGNATURE_HASH_ALGORITHMS)
// HDR, SK {IDi, CERT, CERT, CERTREQ, IDr, AUTH, SAi2, TSi, TSr} -->
//                               <--  HDR, SK {IDr, CERT, CERT, AUTH, SAr2, TSi, TSr}
#[test]
fn certificates_authenticate_both_sides() {
    let algs: [&'static SignatureAlgorithm; 3] = [
        &rcgen::PKCS_ECDSA_P256_SHA256,
        &rcgen::PKCS_ECDSA_P384_SHA384,
        &rcgen::PKCS_ED25519,
    ];
    for (i, alg) in algs.iter().enumerate() {
        let mut p = cert_pair(alg, &rcgen::PKCS_ECDSA_P256_SHA256, 200 + i as u64);
        established(&mut p);
        let peer = p.events(Side::B).iter().find_map(|e| match e {
            SaEvent::IkeSaUp { peer_id, .. } => Some(peer_id.clone()),
            _ => None,
        });
        assert_eq!(
            peer.as_deref(),
            Some(Identity::Fqdn("a.example".into()).to_string().as_str())
        );
        teardown(&mut p);
        p.check_removed_once().unwrap();
    }
}

// A certificate for another name than the identity claimed is refused.
#[test]
fn certificate_identity_mismatch_fails() {
    let pki = Pki::new(&rcgen::PKCS_ECDSA_P256_SHA256);
    let a = with_certs(
        connection(Side::A, DEFAULT_IKE),
        &pki,
        &rcgen::PKCS_ECDSA_P256_SHA256,
        "mallory.example",
    );
    let b = with_certs(
        connection(Side::B, DEFAULT_IKE),
        &pki,
        &rcgen::PKCS_ECDSA_P256_SHA256,
        "b.example",
    );
    let mut p = pair_of(a, b, 210);
    let now = p.now;
    p.endpoint(Side::B).set_wall_clock(now, unix_now());
    p.endpoint(Side::A).set_wall_clock(now, unix_now());
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(5));
    assert_eq!(kinds(&p, Side::B), ["IkeSaFailed"]);
    assert_eq!(
        p.endpoint_ref(Side::B).counters().get(Counter::AuthFailed),
        1
    );
}

// Without a wall clock, no certificate can be validated.
#[test]
fn certificates_need_the_wall_clock() {
    let pki = Pki::new(&rcgen::PKCS_ECDSA_P256_SHA256);
    let a = with_certs(
        connection(Side::A, DEFAULT_IKE),
        &pki,
        &rcgen::PKCS_ECDSA_P256_SHA256,
        "a.example",
    );
    let b = with_certs(
        connection(Side::B, DEFAULT_IKE),
        &pki,
        &rcgen::PKCS_ECDSA_P256_SHA256,
        "b.example",
    );
    let mut p = pair_of(a, b, 211);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(5));
    assert_eq!(kinds(&p, Side::B), ["IkeSaFailed"]);
}

// IKE_AUTH with an RSA chain is larger than the path MTU; with RFC 7383
// both sides send it in SKF fragments that fit.
// HDR, SKF(1/n) {IDi, CERT, ...} --> ... HDR, SKF(n/n) -->
//                               <--  HDR, SKF(1/m) ... SKF(m/m)
#[test]
fn fragmented_ike_auth_at_a_small_mtu() {
    let mut p = cert_pair(&rcgen::PKCS_RSA_SHA256, &rcgen::PKCS_RSA_SHA256, 220);
    p.net.mtu = 1280;
    established(&mut p);
    let fragments = p
        .wire()
        .iter()
        .filter(|w| w.info.exchange == ExchangeType::IKE_AUTH && w.info.fragment)
        .count();
    assert!(fragments >= 4, "{fragments}");
    assert!(p.wire().iter().all(|w| w.fate != Fate::TooBig));
    let b = p.endpoint_ref(Side::B).counters();
    assert_eq!(b.get(Counter::MessagesReassembled), 1);
    assert!(b.get(Counter::FragmentsSent) >= 2);
}

// Without fragmentation the same IKE_AUTH never fits: the exchange fails.
#[test]
fn unfragmented_ike_auth_is_lost_at_a_small_mtu() {
    let pki = Pki::new(&rcgen::PKCS_ECDSA_P256_SHA256);
    let mut a = with_certs(
        connection(Side::A, DEFAULT_IKE),
        &pki,
        &rcgen::PKCS_RSA_SHA256,
        "a.example",
    );
    a.fragmentation = false;
    let b = with_certs(
        connection(Side::B, DEFAULT_IKE),
        &pki,
        &rcgen::PKCS_RSA_SHA256,
        "b.example",
    );
    let mut p = pair_of(a, b, 221);
    let now = p.now;
    p.endpoint(Side::A).set_wall_clock(now, unix_now());
    p.endpoint(Side::B).set_wall_clock(now, unix_now());
    p.net.mtu = 1280;
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(60));
    assert_eq!(kinds(&p, Side::A), ["IkeSaFailed"]);
    assert!(p.wire().iter().any(|w| w.fate == Fate::TooBig));
}

/// SHA-1 of a DER SubjectPublicKeyInfo.
fn sha1(der: &[u8]) -> Vec<u8> {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, der)
        .as_ref()
        .to_vec()
}

// CERTREQ names the trust anchors by the SHA-1 hash of their
// SubjectPublicKeyInfo (RFC 7296 §3.7).
#[test]
fn certreq_names_the_trust_anchors() {
    let pki = Pki::new(&rcgen::PKCS_ECDSA_P256_SHA256);
    let other = Pki::new(&rcgen::PKCS_ED25519);
    let hashes = pki.anchors.key_hashes();
    assert_eq!(hashes.len(), 1);
    assert_eq!(hashes[0].to_vec(), sha1(&pki.ca_key.public_key_der()));
    let both = TrustAnchors::from_der(&[pki.ca.der().as_ref(), other.ca.der().as_ref()]).unwrap();
    assert_eq!(
        both.key_hashes().concat(),
        [
            sha1(&pki.ca_key.public_key_der()),
            sha1(&other.ca_key.public_key_der())
        ]
        .concat()
    );

    // On the wire: the responder's IKE_SA_INIT answer (unencrypted).
    let mut p = cert_pair_of(
        &pki,
        &rcgen::PKCS_ECDSA_P256_SHA256,
        &rcgen::PKCS_ECDSA_P256_SHA256,
        230,
    );
    established(&mut p);
    let answer = p
        .wire()
        .iter()
        .find(|w| w.info.exchange == ExchangeType::IKE_SA_INIT && w.info.response)
        .unwrap();
    let message = MessageRepr::parse(&answer.transmit.bytes).unwrap();
    let certreq = message
        .payloads
        .iter()
        .find_map(|p| match p {
            Payload::CertReq(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    let named: Vec<&[u8]> = certreq.ca_key_hashes().unwrap().collect();
    assert_eq!(named, [&hashes[0][..]]);
}

/// A and B with RSA certificates; A signs with `a_signs`, B requires
/// `b_requires` (strongSwan's `ike:rsa/pss-sha256`).
fn rsa_pair(a_signs: &[SignatureScheme], b_requires: &[SignatureScheme], seed: u64) -> IkePair {
    let pki = Pki::new(&rcgen::PKCS_ECDSA_P256_SHA256);
    let mut a = with_certs(
        connection(Side::A, DEFAULT_IKE),
        &pki,
        &rcgen::PKCS_RSA_SHA256,
        "a.example",
    );
    let mut b = with_certs(
        connection(Side::B, DEFAULT_IKE),
        &pki,
        &rcgen::PKCS_RSA_SHA256,
        "b.example",
    );
    a.local_signatures = a_signs.to_vec();
    b.remote_signatures = b_requires.to_vec();
    clocked_pair(a, b, seed)
}

// HDR, SK {IDi, CERT, AUTH(RSASSA-PSS, SHA2-256), ...}  -->
//                               <--  HDR, SK {IDr, CERT, AUTH, ...}
#[test]
fn rsa_pss_signatures_when_configured_and_required() {
    use SignatureScheme as S;
    let pss = [S::RsaPssSha256, S::RsaPssSha384, S::RsaPssSha512];
    let mut p = rsa_pair(&pss, &pss, 230);
    established(&mut p);
    // Without PSS on A's side, B (requiring it) refuses A's PKCS#1 v1.5.
    let mut p = rsa_pair(&[], &pss, 231);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(3));
    assert!(!up(&p, 1));
    assert_eq!(
        p.endpoint_ref(Side::B).counters().get(Counter::AuthFailed),
        1
    );
    let refused = p.events(Side::B).into_iter().any(|e| {
        matches!(e, SaEvent::IkeSaFailed { reason, .. } if reason.contains("signature scheme not among"))
    });
    assert!(refused, "{:?}", p.events(Side::B));
    // Requiring PKCS#1 v1.5 with SHA2-384 only: A's default (SHA2-256) is
    // refused too.
    let mut p = rsa_pair(&[], &[S::RsaPkcs1Sha384], 232);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(3));
    assert!(!up(&p, 1));
}
