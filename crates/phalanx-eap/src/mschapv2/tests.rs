use super::*;
use crate::server::EapStep;
use proptest::prelude::*;

fn secrets() -> Arc<LocalSecrets> {
    let mut s = LocalSecrets::default();
    s.add("alice@example.com", "alice's password");
    Arc::new(s)
}

/// Runs a server against a peer; returns the server's final step and the
/// peer.
fn run(identity: &str, password: &str) -> (EapStep, EapPeer) {
    let mut server = EapServer::mschapv2("phalanx", [7; 32], secrets());
    let mut peer = EapPeer::new(identity, password, [9; 16]);
    let mut request = server.start();
    for _ in 0..8 {
        let response = peer
            .handle(&request)
            .expect("the peer answers every Request");
        match server.handle(&response) {
            EapStep::Send(next) => request = next,
            done => {
                let (EapStep::Success { packet, .. } | EapStep::Failure { packet, .. }) = &done
                else {
                    panic!("{done:?}");
                };
                assert_eq!(peer.handle(packet), None);
                return (done, peer);
            }
        }
    }
    panic!("no outcome after 8 rounds");
}

#[test]
fn the_right_password_succeeds_with_the_same_msk_on_both_sides() {
    let (step, peer) = run("alice@example.com", "alice's password");
    let EapStep::Success {
        msk,
        emsk,
        identity,
        packet,
    } = step
    else {
        panic!("{step:?}");
    };
    assert_eq!(identity, "alice@example.com");
    assert_eq!(packet[0], EapCode::SUCCESS.0);
    assert!(peer.server_proved, "the peer checked S=");
    assert_eq!(peer.msk(), Some(msk.as_slice()));
    assert_eq!(msk.len(), crypto::MSK_LEN);
    assert!(emsk.is_none(), "MSCHAPv2 exports no EMSK");
}

#[test]
fn a_wrong_password_and_an_unknown_identity_fail_alike() {
    let (step, peer) = run("alice@example.com", "guess");
    assert!(
        matches!(&step, EapStep::Failure { reason: EapFailure::WrongPassword(id), .. } if id == "alice@example.com"),
        "{step:?}"
    );
    assert_eq!(peer.msk(), None);
    let (step, _) = run("mallory@example.com", "alice's password");
    assert!(
        matches!(
            &step,
            EapStep::Failure {
                reason: EapFailure::UnknownIdentity(_),
                ..
            }
        ),
        "{step:?}"
    );
}

#[test]
fn a_response_to_another_request_is_ignored_and_a_nak_fails() {
    let mut server = EapServer::mschapv2("phalanx", [7; 32], secrets());
    let request = server.start();
    let stale = EapRepr::response(request[1].wrapping_sub(1), EapType::IDENTITY, b"x".to_vec());
    assert!(matches!(server.handle(&stale.emit()), EapStep::Ignore));
    let nak = EapRepr::response(request[1], EapType::NAK, vec![13]);
    assert!(matches!(
        server.handle(&nak.emit()),
        EapStep::Failure { reason: EapFailure::Nak(t), .. } if t == vec![13]
    ));
}

proptest! {
    #[test]
    fn no_response_panics_the_server(bytes in proptest::collection::vec(any::<u8>(), 0..80), id in any::<u8>()) {
        let mut server = EapServer::mschapv2("phalanx", [id; 32], secrets());
        let _ = server.start();
        let identity = EapRepr::response(id, EapType::IDENTITY, b"alice@example.com".to_vec()).emit();
        let _ = server.handle(&identity);
        let _ = server.handle(&bytes);
        // The same after a well-formed header with random Type-Data.
        let mut framed = vec![2, id.wrapping_add(1), 0, 0, 26];
        framed.extend_from_slice(&bytes);
        let len = framed.len() as u16;
        framed[2..4].copy_from_slice(&len.to_be_bytes());
        let _ = server.handle(&framed);
    }
}

#[test]
fn a_domain_prefix_in_the_name_is_left_out_of_the_challenge_hash() {
    // strongSwan and Windows send DOMAIN\user; RFC 2759 §8.2 hashes the
    // user name alone, and the password is looked up by EAP identity.
    let mut secrets = LocalSecrets::default();
    secrets.add("CORP\\alice", "pw");
    let mut server = EapServer::mschapv2("phalanx", [3; 32], Arc::new(secrets));
    let mut peer = EapPeer::new("CORP\\alice", "pw", [5; 16]);
    let mut request = server.start();
    let outcome = loop {
        let response = peer.handle(&request).unwrap();
        match server.handle(&response) {
            EapStep::Send(next) => request = next,
            other => break other,
        }
    };
    assert!(matches!(outcome, EapStep::Success { .. }), "{outcome:?}");
}

#[test]
fn the_peer_refuses_a_success_that_does_not_prove_the_password() {
    let mut server = EapServer::mschapv2("phalanx", [7; 32], secrets());
    let mut peer = EapPeer::new("alice@example.com", "alice's password", [9; 16]);
    let identity = peer.handle(&server.start()).unwrap();
    let EapStep::Send(challenge) = server.handle(&identity) else {
        panic!("no challenge");
    };
    let response = peer.handle(&challenge).unwrap();
    let EapStep::Send(mut success) = server.handle(&response) else {
        panic!("no success request");
    };
    // One hex digit of S= changed on the way.
    let at = success.iter().position(|b| *b == b'S').unwrap() + 2;
    success[at] = if success[at] == b'0' { b'1' } else { b'0' };
    let _ = peer.handle(&success);
    assert!(!peer.server_proved);
    let _ = peer.handle(&EapRepr::outcome(EapCode::SUCCESS, 0).emit());
    assert_eq!(peer.msk(), None, "no MSK without a proven server");
}
