use std::net::SocketAddr;

use super::*;
use crate::radius::client::{ClientConfig, RadiusTransmit, ServerConfig};
use crate::radius::fake_server::{answer, eap_attr, mppe, received_access, received_accounting};
use crate::radius::{AttributeType, RadiusCode};

const SECRET: &[u8] = b"relay secret";

fn relay(interim: Option<Duration>) -> EapRelay {
    let client = RadiusClient::new(
        ClientConfig {
            servers: vec![ServerConfig {
                auth: SocketAddr::from(([10, 2, 0, 2], 1812)),
                acct: Some(SocketAddr::from(([10, 2, 0, 2], 1813))),
                secret: Zeroizing::new(SECRET.to_vec()),
            }],
            timeout: Duration::from_secs(1),
            retransmits: 1,
            dead_time: Duration::from_secs(10),
            nas_identifier: "gw".to_owned(),
        },
        [3; 32],
    );
    EapRelay::new(client, interim, 1_800_000_000)
}

fn ike_info() -> SessionInfo {
    SessionInfo {
        user_name: "ike-identity".to_owned(),
        nas_address: Some(IpAddr::from([192, 0, 2, 2])),
        calling_station: Some("192.0.2.1[4500]".to_owned()),
        called_station: None,
    }
}

fn sent(relay: &mut EapRelay) -> RadiusTransmit {
    relay.client_mut().poll_transmit().expect("a request")
}

/// Runs a conversation to Accept; returns the relay's Success fields.
fn accepted(
    relay: &mut EapRelay,
    now: Instant,
    session: u64,
    accept: Vec<(AttributeType, Vec<u8>)>,
) -> RelayEvent {
    let request = relay.start(session, ike_info(), 7);
    assert_eq!(request, [1, 7, 0, 5, 1], "EAP-Request/Identity");
    assert!(relay.message(now, session, b"\x02\x07\x00\x0a\x01alice"));
    let t = sent(relay);
    let first = received_access(&t.bytes, SECRET);
    assert_eq!(
        first.attribute(AttributeType::USER_NAME),
        Some(&b"alice"[..]),
        "the EAP identity"
    );
    assert_eq!(first.eap_message().unwrap(), b"\x02\x07\x00\x0a\x01alice");
    let mut challenge = eap_attr(&[1, 8, 0, 6, 26, 1]);
    challenge.push((AttributeType::STATE, b"st".to_vec()));
    relay.client_mut().handle_datagram(
        now,
        t.to,
        &answer(&first, RadiusCode::ACCESS_CHALLENGE, challenge, SECRET),
    );
    match relay.poll_event() {
        Some(RelayEvent::Continue { session: s, eap }) => {
            assert_eq!(s, session);
            assert_eq!(eap, [1, 8, 0, 6, 26, 1]);
        }
        other => panic!("{other:?}"),
    }
    assert!(relay.message(now, session, &[2, 8, 0, 6, 26, 2]));
    let t = sent(relay);
    let second = received_access(&t.bytes, SECRET);
    let mut attrs = accept;
    attrs.push(mppe(16, &[0x55; 32], &second, SECRET));
    attrs.push(mppe(17, &[0x66; 32], &second, SECRET));
    relay.client_mut().handle_datagram(
        now,
        t.to,
        &answer(&second, RadiusCode::ACCESS_ACCEPT, attrs, SECRET),
    );
    relay.poll_event().expect("an outcome")
}

#[test]
fn pass_through_to_accept_then_accounting_start_interim_rekey_stop() {
    let mut relay = relay(Some(Duration::from_secs(300)));
    let t0 = Instant::now();
    let accept = vec![
        (AttributeType::FRAMED_IP_ADDRESS, vec![10, 3, 0, 9]),
        (AttributeType::CLASS, b"c1".to_vec()),
        (
            AttributeType::ACCT_INTERIM_INTERVAL,
            30u32.to_be_bytes().to_vec(),
        ),
    ];
    match accepted(&mut relay, t0, 0xaa, accept) {
        RelayEvent::Success {
            session,
            eap,
            msk,
            identity,
            framed_ip,
        } => {
            assert_eq!(session, 0xaa);
            assert_eq!(
                eap,
                [3, 8, 0, 4],
                "EAP-Success with the last Response's Identifier"
            );
            assert_eq!(&msk[..32], &[0x66; 32]);
            assert_eq!(identity, "alice");
            assert_eq!(framed_ip, Some(Ipv4Addr::new(10, 3, 0, 9)));
        }
        other => panic!("{other:?}"),
    }
    assert!(relay.poll_event().is_none());

    // Up: Start, with the server's address and Class.
    let spis = (0x11, 0xaa);
    assert!(relay.up(t0, spis, &[]));
    let t = sent(&mut relay);
    let start = received_accounting(&t.bytes, SECRET);
    assert_eq!(
        start.attribute(AttributeType::ACCT_STATUS_TYPE),
        Some(&[0, 0, 0, 1][..])
    );
    assert_eq!(
        start.attribute(AttributeType::USER_NAME),
        Some(&b"alice"[..])
    );
    assert_eq!(
        start.attribute(AttributeType::FRAMED_IP_ADDRESS),
        Some(&[10, 3, 0, 9][..])
    );
    assert_eq!(start.attribute(AttributeType::CLASS), Some(&b"c1"[..]));
    let session_id = start
        .attribute(AttributeType::ACCT_SESSION_ID)
        .unwrap()
        .to_vec();
    relay.client_mut().handle_datagram(
        t0,
        t.to,
        &answer(&start, RadiusCode::ACCOUNTING_RESPONSE, Vec::new(), SECRET),
    );

    // The server's interval (30 s) wins over the configured 300 s.
    assert_eq!(relay.poll_timeout(), Some(t0 + Duration::from_secs(30)));
    assert!(relay.interim_due(t0 + Duration::from_secs(29)).is_empty());
    let t1 = t0 + Duration::from_secs(30);
    assert_eq!(relay.interim_due(t1), vec![spis]);
    let usage = Usage {
        input_octets: 100,
        output_octets: 200,
        input_packets: 1,
        output_packets: 2,
    };
    relay.interim(t1, spis, usage);
    let interim = received_accounting(&sent(&mut relay).bytes, SECRET);
    assert_eq!(
        interim.attribute(AttributeType::ACCT_STATUS_TYPE),
        Some(&[0, 0, 0, 3][..])
    );
    assert_eq!(
        interim.attribute(AttributeType::ACCT_SESSION_ID),
        Some(&session_id[..])
    );
    assert_eq!(
        interim.attribute(AttributeType::ACCT_SESSION_TIME),
        Some(&[0, 0, 0, 30][..])
    );
    assert!(
        relay.interim_due(t1).is_empty(),
        "the next one is 30 s later"
    );

    // An IKE rekey keeps the session.
    let new_spis = (0x22, 0xbb);
    relay.rekeyed(spis, new_spis);
    assert!(!relay.is_accounted(spis));
    assert!(relay.is_accounted(new_spis));
    let t2 = t0 + Duration::from_secs(45);
    let usage = Usage {
        input_octets: 1000,
        output_octets: 2000,
        input_packets: 10,
        output_packets: 20,
    };
    relay.down(t2, new_spis, usage, TerminateCause::UserRequest);
    let stop = received_accounting(&sent(&mut relay).bytes, SECRET);
    let word = |ty| u32::from_be_bytes(stop.attribute(ty).unwrap().try_into().unwrap());
    assert_eq!(word(AttributeType::ACCT_STATUS_TYPE), 2);
    assert_eq!(
        stop.attribute(AttributeType::ACCT_SESSION_ID),
        Some(&session_id[..])
    );
    assert_eq!(word(AttributeType::ACCT_INPUT_OCTETS), 1000);
    assert_eq!(word(AttributeType::ACCT_OUTPUT_PACKETS), 20);
    assert_eq!(word(AttributeType::ACCT_SESSION_TIME), 45);
    assert_eq!(word(AttributeType::ACCT_TERMINATE_CAUSE), 1);
    assert!(!relay.is_accounted(new_spis));
}

#[test]
fn an_accept_without_mppe_keys_fails_the_end_user() {
    let mut relay = relay(None);
    let now = Instant::now();
    relay.start(5, ike_info(), 1);
    assert!(relay.message(now, 5, b"\x02\x01\x00\x08\x01bob"));
    let t = sent(&mut relay);
    let request = received_access(&t.bytes, SECRET);
    relay.client_mut().handle_datagram(
        now,
        t.to,
        &answer(&request, RadiusCode::ACCESS_ACCEPT, Vec::new(), SECRET),
    );
    match relay.poll_event() {
        Some(RelayEvent::Failure {
            session: 5,
            eap,
            reason,
        }) => {
            assert_eq!(
                eap,
                [4, 1, 0, 4],
                "EAP-Failure built with the last Identifier"
            );
            assert!(reason.contains("no MSK"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        !relay.up(now, (1, 5), &[]),
        "no accounting for a failed End-User"
    );
}

#[test]
fn a_reject_without_eap_message_becomes_eap_failure() {
    let mut relay = relay(None);
    let now = Instant::now();
    relay.start(6, ike_info(), 200);
    assert!(
        relay.message(now, 6, b"\x02\xc8\x00\x05\x01"),
        "an empty identity"
    );
    let t = sent(&mut relay);
    let request = received_access(&t.bytes, SECRET);
    assert_eq!(
        request.attribute(AttributeType::USER_NAME),
        Some(&b"ike-identity"[..]),
        "the IKE identity stands in"
    );
    relay.client_mut().handle_datagram(
        now,
        t.to,
        &answer(
            &request,
            RadiusCode::ACCESS_REJECT,
            vec![(AttributeType::REPLY_MESSAGE, b"go away".to_vec())],
            SECRET,
        ),
    );
    match relay.poll_event() {
        Some(RelayEvent::Failure {
            session: 6,
            eap,
            reason,
        }) => {
            assert_eq!(eap, [4, 200, 0, 4]);
            assert_eq!(reason, "RADIUS Access-Reject: go away");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn messages_out_of_turn_are_discarded() {
    let mut relay = relay(None);
    let now = Instant::now();
    assert!(
        !relay.message(now, 1, b"\x02\x01\x00\x05\x01"),
        "no such session"
    );
    relay.start(1, ike_info(), 4);
    assert!(
        !relay.message(now, 1, b"\x02\x05\x00\x05\x01"),
        "wrong Identifier"
    );
    assert!(!relay.message(now, 1, b"\x01\x04\x00\x05\x01"), "a Request");
    assert!(
        !relay.message(now, 1, b"\x02\x04\x00\x06\x1a\x01"),
        "not the Identity asked for"
    );
    assert!(!relay.message(now, 1, b"\x02\x04\x00"), "malformed");
    assert!(relay.client_mut().poll_transmit().is_none());
    assert!(relay.message(now, 1, b"\x02\x04\x00\x05\x01"));
    assert!(relay.client_mut().poll_transmit().is_some());
    relay.cancel(1);
    assert!(!relay.message(now, 1, b"\x02\x05\x00\x06\x1a\x01"));
}

#[test]
fn accounting_sessions_have_distinct_ids() {
    let mut relay = relay(None);
    let now = Instant::now();
    let mut ids = Vec::new();
    for session in [1u64, 2] {
        assert!(matches!(
            accepted(&mut relay, now, session, Vec::new()),
            RelayEvent::Success { .. }
        ));
        assert!(relay.up(
            now,
            (100 + session, session),
            &[IpAddr::from([10, 3, 0, session as u8])]
        ));
        let start = received_accounting(&sent(&mut relay).bytes, SECRET);
        assert_eq!(
            start.attribute(AttributeType::FRAMED_IP_ADDRESS),
            Some(&[10, 3, 0, session as u8][..]),
            "the pool's address"
        );
        ids.push(
            start
                .attribute(AttributeType::ACCT_SESSION_ID)
                .unwrap()
                .to_vec(),
        );
    }
    assert_ne!(ids[0], ids[1]);
}
