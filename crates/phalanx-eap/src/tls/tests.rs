//! EAP-TLS exchanges between [`TlsPeer`] and [`EapServer`] with
//! [`TlsAuthenticator`], in memory: each flow of the module doc, every
//! failure kind, and hostile input.

use std::sync::Arc;

use proptest::prelude::*;
use rustls::version::{TLS12, TLS13};
use rustls::{ProtocolVersion, SupportedProtocolVersion};

use super::framing::{LENGTH_INCLUDED, MORE_FRAGMENTS};
use super::testpki::{self, aws_lc, client_config, now, server_name, Pki};
use super::*;
use crate::packet::{EapCode, EapRepr, EapType};
use crate::server::{EapFailure, EapServer, EapStep};
use crate::EapPeer;

const BOTH: [&[&SupportedProtocolVersion]; 2] = [&[&TLS12], &[&TLS13]];

/// Every message of one exchange, in order: (from the server, octets).
#[derive(Default)]
struct Transcript {
    messages: Vec<(bool, Vec<u8>)>,
}

impl Transcript {
    /// Type-Data of the EAP-TLS messages from the server (`true`) or the
    /// peer.
    fn tls(&self, from_server: bool) -> Vec<&[u8]> {
        self.messages
            .iter()
            .filter(|(s, m)| *s == from_server && m.len() > 5 && m[4] == EapType::TLS.0)
            .map(|(_, m)| &m[5..])
            .collect()
    }
}

fn authenticator(config: TlsServerConfig, ike_identity: &str) -> EapServer {
    let method = TlsAuthenticator::new(Arc::new(config), ike_identity, now());
    EapServer::new(0xfe, Box::new(method))
}

/// Runs `server` against `peer`, `tamper` seeing every message on the way
/// (true: from the server); returns the server's outcome.
fn run_with(
    server: &mut EapServer,
    peer: &mut TlsPeer,
    mut tamper: impl FnMut(bool, &mut Vec<u8>),
) -> (EapStep, Transcript) {
    let mut transcript = Transcript::default();
    let mut request = server.start();
    for _ in 0..200 {
        tamper(true, &mut request);
        transcript.messages.push((true, request.clone()));
        let Some(mut response) = peer.handle(&request) else {
            panic!("the peer gave up: {:?}", peer.failure());
        };
        tamper(false, &mut response);
        transcript.messages.push((false, response.clone()));
        match server.handle(&response) {
            EapStep::Send(next) => request = next,
            EapStep::Ignore => panic!("the server ignored a response"),
            outcome => {
                let (EapStep::Success { packet, .. } | EapStep::Failure { packet, .. }) = &outcome
                else {
                    unreachable!()
                };
                transcript.messages.push((true, packet.clone()));
                assert_eq!(peer.handle(packet), None);
                return (outcome, transcript);
            }
        }
    }
    panic!("no outcome after 200 rounds");
}

fn run(server: &mut EapServer, peer: &mut TlsPeer) -> (EapStep, Transcript) {
    run_with(server, peer, |_, _| {})
}

fn tls_failure(step: &EapStep) -> TlsFailureKind {
    match step {
        EapStep::Failure {
            reason: EapFailure::Tls(failure),
            ..
        } => failure.kind,
        other => panic!("not an EAP-TLS failure: {other:?}"),
    }
}

/// ```text
/// EAP-Request/Identity               -->
///                                    <--  EAP-Response/Identity (alice@example.com)
/// EAP-Request/TLS (Start)            -->
///                                    <--  EAP-Response/TLS (ClientHello)
/// EAP-Request/TLS (ServerHello ... ServerHelloDone) -->        TLS 1.2
///                                    <--  EAP-Response/TLS (Certificate ... Finished)
/// EAP-Request/TLS (ChangeCipherSpec, Finished) -->
///                                    <--  EAP-Response/TLS (no data)
/// EAP-Success                        -->
/// ```
#[test]
fn tls12_authenticates_the_end_user_with_the_same_keys_on_both_sides() {
    let pki = Pki::new();
    let mut server = authenticator(pki.server(), "ignored");
    let mut peer = testpki::peer(&pki, &pki.alice, "alice@example.com", &[&TLS12]);
    let (step, transcript) = run(&mut server, &mut peer);
    let EapStep::Success {
        msk,
        emsk,
        identity,
        packet,
    } = step
    else {
        panic!("{step:?}")
    };
    assert_eq!(packet[0], EapCode::SUCCESS.0);
    assert_eq!(identity, "alice@example.com");
    assert_eq!(peer.protocol_version(), Some(ProtocolVersion::TLSv1_2));
    assert_eq!(msk.len(), 64);
    assert_eq!(peer.msk(), Some(msk.as_slice()));
    assert_eq!(peer.emsk(), emsk.as_deref().map(Vec::as_slice));
    assert_ne!(msk.as_slice(), peer.emsk().unwrap());
    // Start, server hello flight, Finished; the peer's last answer empty.
    let from_server = transcript.tls(true);
    assert_eq!(from_server.len(), 3, "{from_server:?}");
    assert_eq!(from_server[0], [framing::START]);
    assert_eq!(transcript.tls(false).last(), Some(&&[0u8][..]));
}

/// ```text
/// EAP-Request/TLS (Start)            -->
///                                    <--  EAP-Response/TLS (ClientHello)
/// EAP-Request/TLS (ServerHello, {... Finished}) -->            TLS 1.3
///                                    <--  EAP-Response/TLS ({Certificate, CertificateVerify, Finished})
/// EAP-Request/TLS ({0x00})           -->      the commitment message
///                                    <--  EAP-Response/TLS (no data)
/// EAP-Success                        -->
/// ```
#[test]
fn tls13_sends_the_commitment_message_before_eap_success() {
    let pki = Pki::new();
    let mut server = authenticator(pki.server(), "ignored");
    let mut peer = testpki::peer(&pki, &pki.alice, "alice@example.com", &[&TLS13]);
    let (step, transcript) = run(&mut server, &mut peer);
    let EapStep::Success { msk, emsk, .. } = step else {
        panic!("{step:?}")
    };
    assert_eq!(peer.protocol_version(), Some(ProtocolVersion::TLSv1_3));
    assert_eq!(peer.msk(), Some(msk.as_slice()));
    assert_eq!(peer.emsk(), emsk.as_deref().map(Vec::as_slice));
    let from_server = transcript.tls(true);
    assert_eq!(from_server.len(), 3, "start, flight, commitment");
    // One application-data record: flags, 5 octets of header, 1 octet of
    // data, content type and a 16-octet tag.
    let commitment = from_server[2];
    assert_eq!(commitment[1], 0x17, "application data record");
    assert_eq!(commitment.len(), 1 + 5 + 1 + 1 + 16);
    assert_eq!(transcript.tls(false).last(), Some(&&[0u8][..]));
}

/// Before RFC 9190 (strongSwan 5.9.8): EAP-Success right after the
/// client's Finished, other keys; both sides must agree on it.
#[test]
fn tls13_before_rfc9190_ends_without_commitment_and_needs_both_sides_to_agree() {
    let pki = Pki::new();
    let config = pki.server().with_tls13_keying(Tls13Keying::PreRfc9190);
    let mut server = authenticator(config, "ignored");
    let mut peer = testpki::peer(&pki, &pki.alice, "alice@example.com", &[&TLS13])
        .with_tls13_keying(Tls13Keying::PreRfc9190);
    let (step, transcript) = run(&mut server, &mut peer);
    let EapStep::Success { msk, .. } = step else {
        panic!("{step:?}")
    };
    assert_eq!(peer.msk(), Some(msk.as_slice()));
    assert_eq!(transcript.tls(true).len(), 2, "start and flight only");

    // An RFC 9190 peer takes EAP-Success without the commitment message
    // as no success: no keys.
    let mut server = authenticator(
        pki.server().with_tls13_keying(Tls13Keying::PreRfc9190),
        "ignored",
    );
    let mut peer = testpki::peer(&pki, &pki.alice, "alice@example.com", &[&TLS13]);
    let (step, _) = run(&mut server, &mut peer);
    assert!(matches!(step, EapStep::Success { .. }));
    assert_eq!(peer.msk(), None);
    // A pre-RFC 9190 peer takes the commitment message for data out of
    // place.
    let mut server = authenticator(pki.server(), "ignored");
    let mut peer = testpki::peer(&pki, &pki.alice, "alice@example.com", &[&TLS13])
        .with_tls13_keying(Tls13Keying::PreRfc9190);
    let _ = run(&mut server, &mut peer);
    assert_eq!(peer.msk(), None);
    assert_eq!(
        peer.failure().map(|f| f.kind),
        Some(TlsFailureKind::UnexpectedMessage)
    );
}

/// RFC 5216 §2.1.5, both ways: every fragment but the last acknowledged,
/// L and the TLS Message Length on the first.
#[test]
fn fragmented_flights_both_ways_are_acknowledged_and_reassembled() {
    let pki = Pki::new();
    for versions in BOTH {
        let config = pki.server().with_fragment_size(64);
        let mut server = authenticator(config, "ignored");
        let mut peer =
            testpki::peer(&pki, &pki.alice, "alice@example.com", versions).with_fragment_size(100);
        let (step, transcript) = run(&mut server, &mut peer);
        let EapStep::Success { msk, .. } = step else {
            panic!("{step:?}")
        };
        assert_eq!(peer.msk(), Some(msk.as_slice()));
        for (from_server, limit) in [(true, 64), (false, 100)] {
            let messages = transcript.tls(from_server);
            let acks = messages.iter().filter(|m| **m == [0]).count();
            let firsts = messages
                .iter()
                .filter(|m| m[0] == LENGTH_INCLUDED | MORE_FRAGMENTS)
                .count();
            assert!(acks >= 3, "{from_server}: {acks} acknowledgements");
            assert!(firsts >= 1, "{from_server}: no first fragment");
            for m in &messages {
                let header = if m[0] & LENGTH_INCLUDED != 0 { 5 } else { 1 };
                assert!(m.len() - header <= limit, "{} octets", m.len());
            }
        }
    }
}

/// The default fragment size keeps every Request of a larger chain within
/// RFC 5216 octets that fit an IKE_AUTH under 1280.
#[test]
fn the_default_fragment_size_bounds_every_request() {
    let pki = Pki::new();
    // A gateway chain of three copies: over 1000 octets in one flight.
    let chain = vec![pki.gateway.cert.clone(), pki.ca.der(), pki.ca.der()];
    let config = TlsServerConfig::new(chain, pki.gateway.key.clone_key(), &[pki.ca.der()]).unwrap();
    assert_eq!(config.fragment_size(), crate::limits::TLS_FRAGMENT_SIZE);
    for versions in BOTH {
        let mut server = authenticator(config.clone(), "ignored");
        let mut peer = testpki::peer(&pki, &pki.alice, "alice@example.com", versions);
        let (step, transcript) = run(&mut server, &mut peer);
        assert!(matches!(step, EapStep::Success { .. }), "{step:?}");
        let requests = transcript.tls(true);
        assert!(requests.iter().any(|m| m[0] & MORE_FRAGMENTS != 0));
        assert!(requests.iter().all(|m| m.len() <= 1005));
    }
}

/// ```text
/// EAP-Request/TLS (... CertificateRequest ...) -->
///                                    <--  EAP-Response/TLS (Certificate of another CA ...)
/// EAP-Request/TLS (Alert: unknown_ca) -->
///                                    <--  EAP-Response/TLS
/// EAP-Failure                        -->
/// ```
#[test]
fn a_client_certificate_of_another_ca_is_refused_with_an_alert() {
    let pki = Pki::new();
    for versions in BOTH {
        let mut server = authenticator(pki.server(), "ignored");
        let mut peer = testpki::peer(&pki, &pki.mallory, "alice@example.com", versions);
        let mut alerted = false;
        let mut request = server.start();
        let outcome = loop {
            let response = peer.handle(&request).expect("the peer answers");
            match server.handle(&response) {
                EapStep::Send(next) => {
                    alerted |= server.failure().is_some();
                    request = next;
                }
                other => break other,
            }
        };
        assert!(alerted, "the alert went out before EAP-Failure");
        assert_eq!(tls_failure(&outcome), TlsFailureKind::UntrustedCertificate);
        let EapStep::Failure {
            reason: EapFailure::Tls(failure),
            ..
        } = &outcome
        else {
            unreachable!()
        };
        assert!(failure.detail.contains("UnknownIssuer"), "{failure}");
        assert_eq!(peer.msk(), None);
        assert!(
            peer.failure()
                .is_some_and(|f| f.detail.contains("UnknownCA")),
            "{:?}",
            peer.failure()
        );
    }
}

/// The certificate must name the EAP identity (strongSwan's rule): a
/// valid certificate of alice does not make her bob.
#[test]
fn a_certificate_that_does_not_name_the_identity_is_refused() {
    let pki = Pki::new();
    for versions in BOTH {
        let mut server = authenticator(pki.server(), "ignored");
        let mut peer = testpki::peer(&pki, &pki.alice, "bob@example.com", versions);
        let (step, _) = run(&mut server, &mut peer);
        assert_eq!(tls_failure(&step), TlsFailureKind::IdentityMismatch);
        assert!(step_reason(&step).contains("bob@example.com"));
        assert!(
            peer.failure()
                .is_some_and(|f| f.detail.contains("AccessDenied")),
            "{:?}",
            peer.failure()
        );
    }
}

fn step_reason(step: &EapStep) -> String {
    match step {
        EapStep::Failure { reason, .. } => reason.to_string(),
        other => panic!("{other:?}"),
    }
}

/// The subject DN names alice too; an empty EAP identity falls back to
/// the IKE IDi; an identity no certificate can hold is a mismatch.
#[test]
fn the_identity_may_be_the_subject_dn_or_the_ike_idi() {
    let pki = Pki::new();
    let outcome = |eap_identity: &str, ike_identity: &str| {
        let mut server = authenticator(pki.server(), ike_identity);
        let mut peer = testpki::peer(&pki, &pki.alice, eap_identity, &[&TLS13]);
        run(&mut server, &mut peer).0
    };
    let step = outcome("C=CH, O=Phalanx, CN=alice", "x");
    let EapStep::Success { identity, .. } = step else {
        panic!("the subject DN: {step:?}")
    };
    assert_eq!(identity, "C=CH, O=Phalanx, CN=alice");
    let EapStep::Success { identity, .. } = outcome("", "alice@example.com") else {
        panic!("the IKE IDi")
    };
    assert_eq!(identity, "alice@example.com");
    let step = outcome("", "bob@example.com");
    assert_eq!(tls_failure(&step), TlsFailureKind::IdentityMismatch);
    // "@#" needs hex digits: no identity at all, refused at the start.
    let mut server = authenticator(pki.server(), "x");
    let _ = server.start();
    let response = EapRepr::response(0xfe, EapType::IDENTITY, b"@#zz".to_vec()).emit();
    assert_eq!(
        tls_failure(&server.handle(&response)),
        TlsFailureKind::IdentityMismatch
    );
}

/// rustls' rule for client certificates: an extended key usage extension
/// must list clientAuth (none at all is fine).
#[test]
fn a_client_certificate_for_other_purposes_is_refused() {
    use rcgen::ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
    let pki = Pki::new();
    let alice = |purposes| {
        let sans = vec![testpki::email("alice@example.com")];
        pki.ca.issue_for("alice", sans, purposes)
    };
    for (purposes, accepted) in [
        (vec![ServerAuth], false),
        (vec![ServerAuth, ClientAuth], true),
    ] {
        let leaf = alice(purposes);
        let mut server = authenticator(pki.server(), "ignored");
        let mut peer = testpki::peer(&pki, &leaf, "alice@example.com", &[&TLS13]);
        let (step, _) = run(&mut server, &mut peer);
        if accepted {
            assert!(matches!(step, EapStep::Success { .. }), "{step:?}");
        } else {
            assert_eq!(tls_failure(&step), TlsFailureKind::UntrustedCertificate);
            assert!(
                step_reason(&step).contains("client authentication"),
                "{step:?}"
            );
        }
    }
}

#[test]
fn a_peer_without_a_certificate_is_refused() {
    let pki = Pki::new();
    for versions in BOTH {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca.der()).unwrap();
        let config =
            rustls::ClientConfig::builder_with_details(aws_lc(), Arc::new(FixedTime(now())))
                .with_protocol_versions(versions)
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        let mut peer = TlsPeer::new(b"alice@example.com", Arc::new(config), server_name()).unwrap();
        let mut server = authenticator(pki.server(), "ignored");
        let (step, _) = run(&mut server, &mut peer);
        assert_eq!(
            tls_failure(&step),
            TlsFailureKind::NoCertificate,
            "{versions:?}"
        );
    }
}

/// The peer does not trust the gateway: its alert ends the exchange.
#[test]
fn a_peer_that_refuses_our_certificate_sends_an_alert() {
    let pki = Pki::new();
    let stranger = testpki::Ca::new("not the gateway's CA");
    for versions in BOTH {
        let config = client_config(&pki.alice, &stranger.der(), aws_lc(), versions, None);
        let mut peer = TlsPeer::new(b"alice@example.com", config, server_name()).unwrap();
        let mut server = authenticator(pki.server(), "ignored");
        let (step, _) = run(&mut server, &mut peer);
        assert_eq!(
            tls_failure(&step),
            TlsFailureKind::PeerAlert,
            "{versions:?}"
        );
        assert!(step_reason(&step).contains("UnknownCA"), "{step:?}");
    }
}

/// ```text
/// EAP-Request/TLS (Start)            -->
///                                    <--  EAP-Response/Nak (MSCHAPv2)
/// EAP-Failure                        -->
/// ```
#[test]
fn a_peer_that_wants_another_method_naks() {
    let pki = Pki::new();
    let mut server = authenticator(pki.server(), "ignored");
    let mut peer = EapPeer::new("alice@example.com", "password", [0; 16]);
    let identity = peer.handle(&server.start()).unwrap();
    let EapStep::Send(start) = server.handle(&identity) else {
        panic!("no start")
    };
    let nak = peer.handle(&start).unwrap();
    assert!(matches!(
        server.handle(&nak),
        EapStep::Failure { reason: EapFailure::Nak(wants), .. } if wants == [26]
    ));
}

/// The server up to its EAP-TLS Start, and the Identifier to answer.
fn started(config: TlsServerConfig) -> (EapServer, u8) {
    let mut server = authenticator(config, "ignored");
    let _ = server.start();
    let identity = EapRepr::response(0xfe, EapType::IDENTITY, b"alice@example.com".to_vec());
    let EapStep::Send(start) = server.handle(&identity.emit()) else {
        panic!("no start")
    };
    assert_eq!(&start[4..], [EapType::TLS.0, framing::START]);
    (server, start[1])
}

fn tls_response(identifier: u8, type_data: &[u8]) -> Vec<u8> {
    EapRepr::response(identifier, EapType::TLS, type_data.to_vec()).emit()
}

/// Each refusal of hostile framing, one kind each.
#[test]
fn broken_framing_is_refused_by_kind() {
    let pki = Pki::new();
    let cases: [(&str, &[u8], TlsFailureKind); 5] = [
        ("no Flags", &[], TlsFailureKind::BadFraming),
        ("L cut short", &[0x80, 0, 0], TlsFailureKind::BadFraming),
        ("S in a Response", &[0x20], TlsFailureKind::BadFraming),
        (
            "announces 1 MiB",
            &[0xc0, 0, 0x10, 0, 0, 0x16],
            TlsFailureKind::TooLarge,
        ),
        (
            "an acknowledgement for a ClientHello",
            &[0],
            TlsFailureKind::UnexpectedMessage,
        ),
    ];
    for (what, type_data, kind) in cases {
        let (mut server, id) = started(pki.server());
        let step = server.handle(&tls_response(id, type_data));
        assert_eq!(tls_failure(&step), kind, "{what}");
    }
    // A garbled ClientHello: rustls refuses it and says so in an alert.
    let (mut server, id) = started(pki.server());
    let garbage = [0, 0x16, 3, 1, 0, 4, 0xff, 0, 0, 0];
    let EapStep::Send(alert) = server.handle(&tls_response(id, &garbage)) else {
        panic!("no alert")
    };
    assert_eq!(alert[6], 0x15, "an alert record");
    assert!(
        matches!(server.failure(), Some(EapFailure::Tls(f)) if f.kind == TlsFailureKind::Handshake),
        "{:?}",
        server.failure()
    );
    assert_eq!(
        tls_failure(&server.handle(&tls_response(id.wrapping_add(1), &[0]))),
        TlsFailureKind::Handshake
    );
}

/// Unlimited small fragments run into the round limit, and a sum of
/// fragments over the reassembly limit into that one.
#[test]
fn rounds_and_reassembly_are_bounded() {
    let pki = Pki::new();
    let (mut server, mut id) = started(pki.server());
    let mut outcome = None;
    for _ in 0..=crate::limits::TLS_MAX_ROUNDS {
        match server.handle(&tls_response(id, &[MORE_FRAGMENTS, 0x16])) {
            EapStep::Send(ack) => {
                assert_eq!(&ack[4..], [EapType::TLS.0, 0], "acknowledged");
                id = ack[1];
            }
            other => {
                outcome = Some(other);
                break;
            }
        }
    }
    assert_eq!(
        tls_failure(&outcome.expect("an outcome")),
        TlsFailureKind::TooManyRounds
    );

    let (mut server, id) = started(pki.server().with_max_message_len(1500));
    let fragment = [&[MORE_FRAGMENTS][..], &[0x16; 1000]].concat();
    let EapStep::Send(ack) = server.handle(&tls_response(id, &fragment)) else {
        panic!("no acknowledgement")
    };
    let step = server.handle(&tls_response(ack[1], &fragment));
    assert_eq!(tls_failure(&step), TlsFailureKind::TooLarge);
}

/// A peer that sends data where it must acknowledge our fragment, and a
/// message cut short on the way.
#[test]
fn out_of_place_and_truncated_messages_are_refused() {
    let pki = Pki::new();
    for versions in BOTH {
        let mut server = authenticator(pki.server().with_fragment_size(64), "ignored");
        let mut peer = testpki::peer(&pki, &pki.alice, "alice@example.com", versions);
        let mut acks = 0;
        let (step, _) = run_with(&mut server, &mut peer, |from_server, m| {
            if !from_server && m.get(5..) == Some(&[0][..]) {
                acks += 1;
                if acks == 2 {
                    // Data instead of the second acknowledgement.
                    *m = tls_response(m[1], &[0, 0x16, 3, 3, 0, 0]);
                }
            }
        });
        assert_eq!(tls_failure(&step), TlsFailureKind::UnexpectedMessage);

        // The ClientHello loses its last octet: EAP Length no longer
        // matches the TLS record inside; rustls waits for the rest, and
        // the server acknowledges, and the peer has nothing more.
        let mut server = authenticator(pki.server(), "ignored");
        let mut peer = testpki::peer(&pki, &pki.alice, "alice@example.com", versions);
        let mut cut = false;
        let (step, _) = run_with(&mut server, &mut peer, |from_server, m| {
            if !from_server && !cut && m.len() > 100 {
                m.pop();
                let len = m.len() as u16;
                m[2..4].copy_from_slice(&len.to_be_bytes());
                cut = true;
            }
        });
        assert!(cut);
        assert_eq!(tls_failure(&step), TlsFailureKind::UnexpectedMessage);
    }
}

#[test]
fn configurations_rustls_refuses_are_errors() {
    let pki = Pki::new();
    let chain = vec![pki.gateway.cert.clone()];
    let garbage_ca = rustls::pki_types::CertificateDer::from(vec![0x30, 0x03, 1, 2, 3]);
    let e = TlsServerConfig::new(chain.clone(), pki.gateway.key.clone_key(), &[garbage_ca])
        .unwrap_err();
    assert!(matches!(e, TlsConfigError::ClientCas(_)), "{e}");
    let e = TlsServerConfig::new(chain.clone(), pki.alice.key.clone_key(), &[pki.ca.der()])
        .unwrap_err();
    assert!(matches!(e, TlsConfigError::Credentials(_)), "{e}");
    assert!(
        e.to_string().starts_with("our certificate and key: "),
        "{e}"
    );
    let e = TlsServerConfig::new(chain, pki.gateway.key.clone_key(), &[]).unwrap_err();
    assert!(
        e.to_string().starts_with("the client CA certificates"),
        "{e}"
    );
}

#[test]
fn every_failure_kind_has_its_own_counter_name() {
    let names: std::collections::HashSet<_> =
        TlsFailureKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names.len(), TlsFailureKind::ALL.len());
    assert!(TlsFailureKind::ALL
        .iter()
        .all(|k| !k.description().is_empty()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random octets and random EAP-TLS fragments at any point of a real
    /// exchange: never a panic.
    #[test]
    fn hostile_responses_never_panic_the_server(
        honest_rounds in 0usize..6,
        tls13 in any::<bool>(),
        hostile in proptest::collection::vec(
            (any::<bool>(), proptest::collection::vec(any::<u8>(), 0..300)), 1..8),
    ) {
        let pki = PKI.with(Arc::clone);
        let versions: &[&SupportedProtocolVersion] = if tls13 { &[&TLS13] } else { &[&TLS12] };
        let mut server = authenticator(pki.server().with_fragment_size(64), "ignored");
        let mut peer = testpki::peer(&pki, &pki.alice, "alice@example.com", versions);
        let mut request = server.start();
        let mut identifier = request[1];
        for _ in 0..honest_rounds {
            let Some(response) = peer.handle(&request) else { break };
            match server.handle(&response) {
                EapStep::Send(next) => { identifier = next[1]; request = next; }
                _ => return Ok(()),
            }
        }
        for (framed, bytes) in hostile {
            let message = if framed { tls_response(identifier, &bytes) } else { bytes };
            match server.handle(&message) {
                EapStep::Send(next) => identifier = next[1],
                EapStep::Ignore => {}
                EapStep::Success { .. } | EapStep::Failure { .. } => return Ok(()),
            }
        }
    }
}

thread_local! {
    /// One PKI for all cases (key generation is the slow part).
    static PKI: Arc<Pki> = Arc::new(Pki::new());
}
