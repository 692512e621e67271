//! Fuzz target: the EAP authenticator (phalanx-eap) fed what a hostile
//! End-User may send, with both local methods.
//!
//! The first octet picks the Identifier the servers start with; the
//! second, when even, sends a well-formed EAP-Response/Identity for a
//! known user first (so the fuzzer gets past EAP-Identity). Then:
//!
//! - EAP-MSCHAPv2: all after the first octet is cut into EAP messages at
//!   each 0xFF octet (as before EAP-TLS, so the seeds keep their meaning);
//! - EAP-TLS (rustls, a test certificate made once): all after the
//!   second octet is read as Type-Data of EAP-TLS Responses, each a
//!   two-octet length and that many octets, sent with the Identifier of
//!   the server's last Request (so the fuzzer reaches the RFC 5216
//!   framing, the reassembly and rustls), and as it is.
//!
//! Any panic is a finding.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use phalanx_eap::tls::rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer, UnixTime};
use phalanx_eap::tls::{TlsAuthenticator, TlsServerConfig};
use phalanx_eap::{EapRepr, EapServer, EapStep, EapType, LocalSecrets};

/// The EAP-TLS server's configuration: a CA and a gateway certificate
/// made once per process.
fn tls_config() -> Arc<TlsServerConfig> {
    static CONFIG: OnceLock<Arc<TlsServerConfig>> = OnceLock::new();
    Arc::clone(CONFIG.get_or_init(|| {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).expect("CA");
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["gw.example".to_owned()]).expect("params");
        let cert = params.signed_by(&key, &ca, &ca_key).expect("certificate");
        let config = TlsServerConfig::new(
            vec![cert.der().clone()],
            PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
            &[CertificateDer::from(ca.der().to_vec())],
        )
        .expect("config")
        .with_fragment_size(64);
        Arc::new(config)
    }))
}

/// EAP-MSCHAPv2, messages cut at 0xFF.
fn mschapv2(id: u8, identity_first: bool, rest: &[u8]) {
    let mut secrets = LocalSecrets::default();
    secrets.add("alice@example.com", "alice's password");
    let mut server = EapServer::mschapv2("phalanx", [id; 32], Arc::new(secrets));
    let _ = server.start();
    if identity_first {
        let identity = EapRepr::response(id, EapType::IDENTITY, b"alice@example.com".to_vec());
        let _ = server.handle(&identity.emit());
    }
    for message in rest.split(|b| *b == 0xff) {
        let _ = server.handle(message);
        let _ = EapRepr::parse(message);
    }
}

/// EAP-TLS, length-prefixed Type-Data.
fn tls(id: u8, identity_first: bool, mut rest: &[u8]) {
    let now = UnixTime::since_unix_epoch(Duration::from_secs(1_800_000_000));
    let method = TlsAuthenticator::new(tls_config(), "alice@example.com", now);
    let mut server = EapServer::new(id, Box::new(method));
    let mut identifier = server.start()[1];
    if identity_first {
        let identity = EapRepr::response(id, EapType::IDENTITY, b"alice@example.com".to_vec());
        if let EapStep::Send(next) = server.handle(&identity.emit()) {
            identifier = next[1];
        }
    }
    while let [hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (type_data, next) = tail.split_at(len);
        rest = next;
        let framed = EapRepr::response(identifier, EapType::TLS, type_data.to_vec()).emit();
        for message in [&framed[..], type_data] {
            match server.handle(message) {
                EapStep::Send(request) => identifier = request[1],
                EapStep::Ignore => {}
                EapStep::Success { .. } | EapStep::Failure { .. } => return,
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&id, rest)) = data.split_first() else {
        return;
    };
    // As before EAP-TLS came: the seeds of MSCHAPv2 stay what they were.
    let identity_first = rest.first().is_some_and(|b| b % 2 == 0);
    mschapv2(id, identity_first, rest);
    tls(id, identity_first, rest.get(1..).unwrap_or_default());
});
