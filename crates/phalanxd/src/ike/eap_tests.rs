//! The backend's local EAP-TLS: sessions by IKE SA, the method of each
//! connection, every outcome counted once by its reason.

use std::sync::Arc;

use phalanx_eap::tls::rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer, ServerName};
use phalanx_eap::tls::rustls::{ClientConfig, RootCertStore};
use phalanx_eap::tls::{FixedTime, TlsPeer, TlsServerConfig};
use phalanx_eap::{EapPeer, LocalSecrets};

use super::*;

/// A CA, the gateway's certificate and key, alice's, and mallory's from
/// a CA the gateway does not know.
struct Pki {
    ca: CertificateDer<'static>,
    gateway: (CertificateDer<'static>, Vec<u8>),
    alice: (CertificateDer<'static>, Vec<u8>),
    mallory: (CertificateDer<'static>, Vec<u8>),
}

fn issue(
    ca: &rcgen::Certificate,
    ca_key: &rcgen::KeyPair,
    san: rcgen::SanType,
) -> (CertificateDer<'static>, Vec<u8>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.subject_alt_names = vec![san];
    let cert = params.signed_by(&key, ca, ca_key).unwrap();
    (cert.der().clone(), key.serialize_der())
}

fn new_ca() -> (rcgen::Certificate, rcgen::KeyPair) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    (params.self_signed(&key).unwrap(), key)
}

impl Pki {
    fn new() -> Pki {
        let (ca, ca_key) = new_ca();
        let (other, other_key) = new_ca();
        let email = |a: &str| rcgen::SanType::Rfc822Name(a.try_into().unwrap());
        Pki {
            gateway: issue(
                &ca,
                &ca_key,
                rcgen::SanType::DnsName("gw.example".try_into().unwrap()),
            ),
            alice: issue(&ca, &ca_key, email("alice@example.com")),
            mallory: issue(&other, &other_key, email("alice@example.com")),
            ca: ca.der().clone(),
        }
    }

    /// Connection "rw-tls" with EAP-TLS, "rw-chap" with MSCHAPv2.
    fn settings(&self) -> Arc<EapSettings> {
        let (cert, key) = &self.gateway;
        let tls = TlsServerConfig::new(
            vec![cert.clone()],
            PrivatePkcs8KeyDer::from(key.clone()).into(),
            std::slice::from_ref(&self.ca),
        )
        .unwrap();
        let mut secrets = LocalSecrets::default();
        secrets.add("bob@example.com", "bob's password");
        Arc::new(EapSettings {
            secrets: Arc::new(secrets),
            radius: None,
            methods: HashMap::from([
                ("rw-tls".to_owned(), EapMethod::Tls(Arc::new(tls))),
                ("rw-chap".to_owned(), EapMethod::Mschapv2),
            ]),
        })
    }

    fn peer(&self, who: &(CertificateDer<'static>, Vec<u8>), identity: &str) -> TlsPeer {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca.clone()).unwrap();
        let provider = Arc::new(phalanx_eap::tls::rustls::crypto::aws_lc_rs::default_provider());
        let config =
            ClientConfig::builder_with_details(provider, Arc::new(FixedTime(UnixTime::now())))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_client_auth_cert(
                    vec![who.0.clone()],
                    PrivatePkcs8KeyDer::from(who.1.clone()).into(),
                )
                .unwrap();
        let name = ServerName::try_from("gw.example").unwrap();
        TlsPeer::new(identity.as_bytes(), Arc::new(config), name).unwrap()
    }
}

fn request<'a>(connection: &'a str, ike_sa: u64, message: &'a [u8]) -> EapRequest<'a> {
    EapRequest {
        connection,
        ike_sa,
        peer_id: "alice@example.com",
        local: "192.0.2.2:4500".parse().unwrap(),
        remote: "192.0.2.1:4500".parse().unwrap(),
        message,
    }
}

/// Runs the backend for IKE SA `ike_sa` of `connection` against a peer:
/// the last answer, or `None` when the peer gave up (answered nothing).
/// `on_send` sees the backend after each Request.
fn run(
    backend: &mut EapBackend,
    connection: &str,
    ike_sa: u64,
    mut peer: impl FnMut(&[u8]) -> Option<Vec<u8>>,
    mut on_send: impl FnMut(&EapBackend),
) -> Option<EapAnswer> {
    let now = Instant::now();
    let mut answer = backend.request(now, &request(connection, ike_sa, &[]))?;
    for _ in 0..64 {
        let EapAnswer::Continue(message) = &answer else {
            return Some(answer);
        };
        on_send(backend);
        let response = peer(message)?;
        answer = backend.request(now, &request(connection, ike_sa, &response))?;
    }
    panic!("no outcome")
}

fn counter(backend: &EapBackend, name: &str) -> u64 {
    let all = backend.counters();
    all.iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} in {all:?}"))
        .count
}

/// The eap_tls_* counters that are not zero.
fn moved(backend: &EapBackend) -> Vec<(String, u64)> {
    backend
        .counters()
        .into_iter()
        .filter(|c| c.name.starts_with("eap_tls_") && c.count != 0)
        .map(|c| (c.name, c.count))
        .collect()
}

#[test]
fn an_end_user_with_a_good_certificate_gets_the_msk_and_is_counted() {
    let pki = Pki::new();
    let mut backend = EapBackend::new(pki.settings());
    assert_eq!(moved(&backend), [], "all zero, but shown");
    assert_eq!(counter(&backend, "eap_tls_succeeded"), 0);
    let mut alice = pki.peer(&pki.alice, "alice@example.com");
    let answer = run(&mut backend, "rw-tls", 7, |m| alice.handle(m), |_| {});
    let Some(EapAnswer::Success {
        message,
        msk,
        identity,
        virtual_ip,
    }) = answer
    else {
        panic!("{answer:?}")
    };
    assert_eq!(alice.handle(&message), None);
    assert_eq!(alice.msk(), Some(msk.as_slice()));
    assert_eq!(identity, "alice@example.com");
    assert_eq!(virtual_ip, None);
    assert_eq!(moved(&backend), [("eap_tls_succeeded".to_owned(), 1)]);
    assert!(backend.sessions.is_empty(), "the session ends with it");
    assert_eq!(backend.methods().get("rw-tls"), Some(&"eap-tls"));
    assert_eq!(backend.methods().get("rw-chap"), Some(&"eap-mschapv2"));
}

/// The alert goes out and the failure is counted then: strongSwan gives
/// up on an alert instead of answering it.
#[test]
fn an_untrusted_certificate_is_counted_when_the_alert_goes_out() {
    let pki = Pki::new();
    let mut backend = EapBackend::new(pki.settings());
    let mut mallory = pki.peer(&pki.mallory, "alice@example.com");
    let mut counted_before_the_end = false;
    let answer = run(
        &mut backend,
        "rw-tls",
        8,
        |m| mallory.handle(m),
        |b| counted_before_the_end |= counter(b, "eap_tls_untrusted_certificate") == 1,
    );
    assert!(counted_before_the_end);
    let Some(EapAnswer::Failure { reason, .. }) = answer else {
        panic!("{answer:?}")
    };
    assert!(reason.contains("not trusted"), "{reason}");
    assert_eq!(
        moved(&backend),
        [("eap_tls_untrusted_certificate".to_owned(), 1)],
        "once"
    );
}

#[test]
fn each_failure_moves_its_own_counter() {
    let pki = Pki::new();
    let mut backend = EapBackend::new(pki.settings());
    // alice's certificate, bob's name.
    let mut bob = pki.peer(&pki.alice, "bob@example.com");
    let answer = run(&mut backend, "rw-tls", 1, |m| bob.handle(m), |_| {});
    assert!(matches!(answer, Some(EapAnswer::Failure { .. })));
    assert_eq!(
        moved(&backend),
        [("eap_tls_identity_mismatch".to_owned(), 1)]
    );
    // A peer that only speaks MSCHAPv2 answers the TLS Start with a Nak.
    let mut chap = EapPeer::new("alice@example.com", "pw", [0; 16]);
    let answer = run(&mut backend, "rw-tls", 2, |m| chap.handle(m), |_| {});
    assert!(matches!(answer, Some(EapAnswer::Failure { .. })));
    assert_eq!(counter(&backend, "eap_tls_nak"), 1);
    // Not EAP at all.
    let mut first = true;
    let answer = run(
        &mut backend,
        "rw-tls",
        3,
        |_| std::mem::take(&mut first).then(|| vec![2, 0, 0]),
        |_| {},
    );
    assert!(matches!(answer, Some(EapAnswer::Failure { .. })));
    assert_eq!(counter(&backend, "eap_tls_malformed"), 1);
    assert_eq!(moved(&backend).len(), 3);
}

/// MSCHAPv2 connections run MSCHAPv2, and EAP-TLS counters stay put.
#[test]
fn mschapv2_connections_are_not_counted_as_eap_tls() {
    let pki = Pki::new();
    let mut backend = EapBackend::new(pki.settings());
    let mut bob = EapPeer::new("bob@example.com", "bob's password", [3; 16]);
    let answer = run(&mut backend, "rw-chap", 4, |m| bob.handle(m), |_| {});
    assert!(matches!(answer, Some(EapAnswer::Success { .. })));
    assert_eq!(moved(&backend), []);
    // Without EAP-TLS configured its counters are not shown.
    let mut settings = (*pki.settings()).clone();
    settings.methods.remove("rw-tls");
    let backend = EapBackend::new(Arc::new(settings));
    assert!(backend.counters().is_empty());
}

/// An exchange whose IKE SA goes away first (strongSwan 5.9.8 with TLS 1.3
/// against RFC 9190 dies on the commitment message) counts as abandoned;
/// one already counted as failed does not count twice.
#[test]
fn an_exchange_whose_ike_sa_ends_first_is_abandoned() {
    let pki = Pki::new();
    let mut backend = EapBackend::new(pki.settings());
    let now = Instant::now();
    let mut alice = pki.peer(&pki.alice, "alice@example.com");
    let Some(EapAnswer::Continue(identity)) = backend.request(now, &request("rw-tls", 5, &[]))
    else {
        panic!("no EAP-Identity")
    };
    let response = alice.handle(&identity).unwrap();
    assert!(matches!(
        backend.request(now, &request("rw-tls", 5, &response)),
        Some(EapAnswer::Continue(_))
    ));
    // mallory is refused: the alert is out, counted, and then her IKE SA
    // goes too.
    let mut mallory = pki.peer(&pki.mallory, "alice@example.com");
    let alerted = std::cell::Cell::new(false);
    let _ = run(
        &mut backend,
        "rw-tls",
        6,
        |m| (!alerted.get()).then(|| mallory.handle(m)).flatten(),
        |b| alerted.set(b.failure_reported(6)),
    );
    assert!(alerted.get(), "mallory gave up after the alert");
    backend.retain(|spi| spi != 5 && spi != 6);
    assert!(backend.sessions.is_empty());
    assert_eq!(
        moved(&backend),
        [
            ("eap_tls_abandoned".to_owned(), 1),
            ("eap_tls_untrusted_certificate".to_owned(), 1)
        ]
    );
}

impl EapBackend {
    /// Whether IKE SA `ike_sa`'s exchange already counted its failure.
    fn failure_reported(&self, ike_sa: u64) -> bool {
        self.sessions.get(&ike_sa).is_some_and(|s| s.reported)
    }
}
