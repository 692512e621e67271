//! The client against a server made of the codec: every request is checked
//! as a RADIUS server checks it (Message-Authenticator, Accounting Request
//! Authenticator), and answers are signed as a server signs them.

use super::*;
use crate::radius::fake_server::{answer, eap_attr, mppe, received_access, received_accounting};

const SECRET1: &[u8] = b"first secret";
const SECRET2: &[u8] = b"second secret";
const TIMEOUT: Duration = Duration::from_secs(2);
const DEAD: Duration = Duration::from_secs(30);

fn server(port: u16, secret: &[u8]) -> ServerConfig {
    ServerConfig {
        auth: SocketAddr::from(([10, 2, 0, 2], port)),
        acct: Some(SocketAddr::from(([10, 2, 0, 2], port + 1))),
        secret: Zeroizing::new(secret.to_vec()),
    }
}

fn client() -> RadiusClient {
    RadiusClient::new(
        ClientConfig {
            servers: vec![server(1812, SECRET1), server(2812, SECRET2)],
            timeout: TIMEOUT,
            retransmits: 2,
            dead_time: DEAD,
            nas_identifier: "phalanx-test".to_owned(),
        },
        [7; 32],
    )
}

fn info(user: &str) -> SessionInfo {
    SessionInfo {
        user_name: user.to_owned(),
        nas_address: Some(IpAddr::from([192, 0, 2, 2])),
        calling_station: Some("192.0.2.1[4500]".to_owned()),
        called_station: Some("192.0.2.2[4500]".to_owned()),
    }
}

fn one_transmit(c: &mut RadiusClient) -> RadiusTransmit {
    let t = c.poll_transmit().expect("a datagram");
    assert!(c.poll_transmit().is_none(), "one datagram only");
    t
}

#[test]
fn eap_conversation_challenge_state_then_accept_with_msk_and_framed_ip() {
    let mut c = client();
    let now = Instant::now();
    let identity_response = [
        2u8, 1, 0, 22, 1, b'a', b'l', b'i', b'c', b'e', b'@', b'e', b'x', b'a', b'm', b'p', b'l',
        b'e', b'.', b'c', b'o', b'm',
    ];
    c.access(now, 42, &info("alice@example.com"), &identity_response);
    let t = one_transmit(&mut c);
    assert_eq!(t.to, server(1812, SECRET1).auth);
    let request = received_access(&t.bytes, SECRET1);
    assert_eq!(
        request.attribute(AttributeType::USER_NAME),
        Some(&b"alice@example.com"[..])
    );
    assert_eq!(request.eap_message().unwrap(), identity_response);
    assert_eq!(
        request.attribute(AttributeType::NAS_IDENTIFIER),
        Some(&b"phalanx-test"[..])
    );
    assert_eq!(
        request.attribute(AttributeType::CALLING_STATION_ID),
        Some(&b"192.0.2.1[4500]"[..])
    );
    assert!(request.attribute(AttributeType::STATE).is_none());

    // Access-Challenge with a State and an EAP Request longer than one
    // attribute.
    let challenge_eap: Vec<u8> = (0..400u16).map(|i| i as u8).collect();
    let mut attrs = eap_attr(&challenge_eap);
    attrs.push((AttributeType::STATE, b"state-1".to_vec()));
    c.handle_datagram(
        now,
        t.to,
        &answer(&request, RadiusCode::ACCESS_CHALLENGE, attrs, SECRET1),
    );
    match c.poll_event() {
        Some(RadiusEvent::Challenge { session: 42, eap }) => assert_eq!(eap, challenge_eap),
        other => panic!("{other:?}"),
    }

    c.access(
        now,
        42,
        &info("ignored on later rounds"),
        b"\x02\x02\x00\x05\x1a",
    );
    let t = one_transmit(&mut c);
    let second = received_access(&t.bytes, SECRET1);
    assert_eq!(
        second.attribute(AttributeType::STATE),
        Some(&b"state-1"[..])
    );
    assert_eq!(
        second.attribute(AttributeType::USER_NAME),
        Some(&b"alice@example.com"[..])
    );
    assert_ne!(
        second.authenticator, request.authenticator,
        "a fresh Request Authenticator"
    );

    let (send, recv) = ([0x11u8; 32], [0x22u8; 32]);
    let attrs = vec![
        (AttributeType::EAP_MESSAGE, vec![3, 2, 0, 4]),
        mppe(16, &send, &second, SECRET1),
        mppe(17, &recv, &second, SECRET1),
        (AttributeType::FRAMED_IP_ADDRESS, vec![10, 3, 0, 77]),
        (AttributeType::CLASS, b"class-a".to_vec()),
        (
            AttributeType::ACCT_INTERIM_INTERVAL,
            60u32.to_be_bytes().to_vec(),
        ),
    ];
    c.handle_datagram(
        now,
        t.to,
        &answer(&second, RadiusCode::ACCESS_ACCEPT, attrs, SECRET1),
    );
    let Some(RadiusEvent::Accept(accepted)) = c.poll_event() else {
        panic!("no Accept");
    };
    assert_eq!(accepted.session, 42);
    assert_eq!(accepted.eap.as_deref(), Some(&[3u8, 2, 0, 4][..]));
    let msk = accepted.msk.as_ref().expect("MSK");
    assert_eq!(&msk[..32], &recv, "MSK = Recv-Key | Send-Key");
    assert_eq!(&msk[32..], &send);
    assert_eq!(accepted.framed_ip, Some(Ipv4Addr::new(10, 3, 0, 77)));
    assert_eq!(accepted.class, vec![b"class-a".to_vec()]);
    assert_eq!(accepted.interim_interval, Some(60));
    assert_eq!(c.counters().challenges, 1);
    assert_eq!(c.counters().accepts, 1);
    assert_eq!(c.poll_timeout(), None, "nothing left in flight");
}

#[test]
fn unanswered_request_is_resent_byte_for_byte_then_fails_over_with_a_new_identifier() {
    let mut c = client();
    let t0 = Instant::now();
    c.access(t0, 1, &info("bob"), b"\x02\x01\x00\x08\x01bob");
    let first = one_transmit(&mut c);
    assert_eq!(c.poll_timeout(), Some(t0 + TIMEOUT));
    c.handle_timeout(t0 + TIMEOUT);
    assert_eq!(
        one_transmit(&mut c),
        first,
        "RFC 2865 §2.5: the same packet again"
    );
    c.handle_timeout(t0 + TIMEOUT * 2);
    assert_eq!(one_transmit(&mut c), first);
    c.handle_timeout(t0 + TIMEOUT * 3);
    let moved = one_transmit(&mut c);
    assert_eq!(moved.to, server(2812, SECRET2).auth, "the second server");
    let request = received_access(&moved.bytes, SECRET2);
    assert_eq!(c.counters().retransmits, 2);
    assert_eq!(c.counters().server_timeouts, 1);
    assert_eq!(c.counters().failovers, 1);

    // A late answer of the first server is no longer ours.
    let first_request = RadiusPacket::parse(&first.bytes).unwrap();
    c.handle_datagram(
        t0 + TIMEOUT * 3,
        first.to,
        &answer(
            &first_request,
            RadiusCode::ACCESS_REJECT,
            Vec::new(),
            SECRET1,
        ),
    );
    assert_eq!(c.counters().answers_unmatched, 1);
    assert!(c.poll_event().is_none());

    c.handle_datagram(
        t0 + TIMEOUT * 3,
        moved.to,
        &answer(
            &request,
            RadiusCode::ACCESS_REJECT,
            vec![(AttributeType::EAP_MESSAGE, vec![4, 1, 0, 4])],
            SECRET2,
        ),
    );
    match c.poll_event() {
        Some(RadiusEvent::Reject {
            session: 1,
            eap: Some(eap),
            ..
        }) => assert_eq!(eap, [4, 1, 0, 4]),
        other => panic!("{other:?}"),
    }

    // The first server is held dead: a new conversation goes to the
    // second at once, until the dead time is over.
    let t1 = t0 + TIMEOUT * 3 + Duration::from_secs(1);
    c.access(t1, 2, &info("carol"), b"\x02\x01\x00\x05\x01");
    assert_eq!(one_transmit(&mut c).to, server(2812, SECRET2).auth);
    c.access(
        t0 + TIMEOUT * 3 + DEAD,
        3,
        &info("dave"),
        b"\x02\x01\x00\x05\x01",
    );
    assert_eq!(one_transmit(&mut c).to, server(1812, SECRET1).auth);
}

#[test]
fn no_server_answering_ends_the_conversation() {
    let mut c = client();
    let t0 = Instant::now();
    c.access(t0, 9, &info("erin"), b"\x02\x01\x00\x05\x01");
    let mut now = t0;
    let mut sent = 0;
    while let Some(at) = c.poll_timeout() {
        sent += std::iter::from_fn(|| c.poll_transmit()).count();
        now = at;
        c.handle_timeout(now);
    }
    sent += std::iter::from_fn(|| c.poll_transmit()).count();
    assert_eq!(sent, 6, "three transmissions to each server");
    match c.poll_event() {
        Some(RadiusEvent::Reject {
            session: 9,
            eap: None,
            reason,
        }) => {
            assert!(reason.contains("no RADIUS server answered"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c.counters().no_server, 1);
    assert_eq!(now, t0 + TIMEOUT * 6);
}

#[test]
fn a_conversation_with_a_state_does_not_move_to_another_server() {
    let mut c = client();
    let t0 = Instant::now();
    c.access(t0, 5, &info("frank"), b"\x02\x01\x00\x05\x01");
    let t = one_transmit(&mut c);
    let request = received_access(&t.bytes, SECRET1);
    let mut attrs = eap_attr(&[1, 2, 0, 6, 26, 1]);
    attrs.push((AttributeType::STATE, b"s".to_vec()));
    c.handle_datagram(
        t0,
        t.to,
        &answer(&request, RadiusCode::ACCESS_CHALLENGE, attrs, SECRET1),
    );
    assert!(matches!(
        c.poll_event(),
        Some(RadiusEvent::Challenge { .. })
    ));
    c.access(t0, 5, &info("frank"), b"\x02\x02\x00\x05\x1a");
    assert_eq!(one_transmit(&mut c).to, t.to);
    for i in 1..=3 {
        c.handle_timeout(t0 + TIMEOUT * i);
    }
    let resent = std::iter::from_fn(|| c.poll_transmit()).collect::<Vec<_>>();
    assert!(
        resent.iter().all(|r| r.to == t.to),
        "only the server holding the State"
    );
    match c.poll_event() {
        Some(RadiusEvent::Reject {
            session: 5, reason, ..
        }) => {
            assert!(reason.contains("holding the conversation"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c.counters().failovers, 0);
}

#[test]
fn forged_unmatched_and_wrong_code_answers_are_dropped_and_counted() {
    let mut c = client();
    let now = Instant::now();
    c.access(now, 1, &info("gina"), b"\x02\x01\x00\x05\x01");
    let t = one_transmit(&mut c);
    let request = received_access(&t.bytes, SECRET1);
    // Signed with the wrong secret.
    c.handle_datagram(
        now,
        t.to,
        &answer(&request, RadiusCode::ACCESS_ACCEPT, Vec::new(), b"wrong"),
    );
    // From an address that is not the server.
    let elsewhere = SocketAddr::from(([10, 2, 0, 9], 1812));
    c.handle_datagram(
        now,
        elsewhere,
        &answer(&request, RadiusCode::ACCESS_ACCEPT, Vec::new(), SECRET1),
    );
    // An Accounting-Response to an Access-Request.
    c.handle_datagram(
        now,
        t.to,
        &answer(
            &request,
            RadiusCode::ACCOUNTING_RESPONSE,
            Vec::new(),
            SECRET1,
        ),
    );
    // Too short to be anything.
    c.handle_datagram(now, t.to, &[2]);
    c.handle_datagram(now, t.to, &[]);
    let n = c.counters();
    assert_eq!(
        (n.answers_invalid, n.answers_unmatched, n.answers_wrong_code),
        (3, 1, 1)
    );
    assert!(c.poll_event().is_none(), "the request still waits");
    // The genuine answer still counts; without MS-MPPE keys there is no MSK.
    c.handle_datagram(
        now,
        t.to,
        &answer(
            &request,
            RadiusCode::ACCESS_ACCEPT,
            vec![(AttributeType::EAP_MESSAGE, vec![3, 1, 0, 4])],
            SECRET1,
        ),
    );
    let Some(RadiusEvent::Accept(accepted)) = c.poll_event() else {
        panic!("no Accept");
    };
    assert!(accepted.msk.is_none());
    assert_eq!(c.counters().answers_unusable, 1);
}

#[test]
fn a_cancelled_session_drops_its_answer() {
    let mut c = client();
    let now = Instant::now();
    c.access(now, 3, &info("hank"), b"\x02\x01\x00\x05\x01");
    let t = one_transmit(&mut c);
    let request = received_access(&t.bytes, SECRET1);
    c.cancel(3);
    assert_eq!(c.poll_timeout(), None);
    c.handle_datagram(
        now,
        t.to,
        &answer(&request, RadiusCode::ACCESS_REJECT, Vec::new(), SECRET1),
    );
    assert_eq!(c.counters().answers_unmatched, 1);
    assert!(c.poll_event().is_none());
}

#[test]
fn accounting_start_and_stop_with_gigawords_and_terminate_cause() {
    let mut c = client();
    let now = Instant::now();
    let mut record = AccountingRecord {
        status: Some(AcctStatus::Start),
        session_id: "0011223344556677".to_owned(),
        info: info("alice@example.com"),
        framed_ip: Some(Ipv4Addr::new(10, 3, 0, 2)),
        class: vec![b"class-a".to_vec()],
        ..AccountingRecord::default()
    };
    assert!(c.account(now, &record));
    let t = one_transmit(&mut c);
    assert_eq!(t.to, server(1812, SECRET1).acct.unwrap());
    let start = received_accounting(&t.bytes, SECRET1);
    assert_eq!(
        start.attribute(AttributeType::ACCT_STATUS_TYPE),
        Some(&[0, 0, 0, 1][..])
    );
    assert_eq!(
        start.attribute(AttributeType::ACCT_SESSION_ID),
        Some(&b"0011223344556677"[..])
    );
    assert_eq!(
        start.attribute(AttributeType::FRAMED_IP_ADDRESS),
        Some(&[10, 3, 0, 2][..])
    );
    assert_eq!(start.attribute(AttributeType::CLASS), Some(&b"class-a"[..]));
    assert!(start.attribute(AttributeType::ACCT_INPUT_OCTETS).is_none());
    c.handle_datagram(
        now,
        t.to,
        &answer(&start, RadiusCode::ACCOUNTING_RESPONSE, Vec::new(), SECRET1),
    );
    assert_eq!(c.counters().accounting_responses, 1);

    record.status = Some(AcctStatus::Stop);
    record.input_octets = (5 << 32) + 1000;
    record.output_octets = 2000;
    record.input_packets = 30;
    record.output_packets = 40;
    record.session_time = 75;
    record.terminate_cause = Some(TerminateCause::UserRequest);
    assert!(c.account(now, &record));
    let t = one_transmit(&mut c);
    let stop = received_accounting(&t.bytes, SECRET1);
    let word = |ty| u32::from_be_bytes(stop.attribute(ty).unwrap().try_into().unwrap());
    assert_eq!(word(AttributeType::ACCT_STATUS_TYPE), 2);
    assert_eq!(word(AttributeType::ACCT_INPUT_OCTETS), 1000);
    assert_eq!(word(AttributeType::ACCT_INPUT_GIGAWORDS), 5);
    assert_eq!(word(AttributeType::ACCT_OUTPUT_OCTETS), 2000);
    assert_eq!(word(AttributeType::ACCT_OUTPUT_GIGAWORDS), 0);
    assert_eq!(word(AttributeType::ACCT_INPUT_PACKETS), 30);
    assert_eq!(word(AttributeType::ACCT_OUTPUT_PACKETS), 40);
    assert_eq!(word(AttributeType::ACCT_SESSION_TIME), 75);
    assert_eq!(word(AttributeType::ACCT_TERMINATE_CAUSE), 1);
}

#[test]
fn accounting_moves_between_servers_and_is_reported_lost_when_none_answers() {
    let mut c = client();
    let t0 = Instant::now();
    let record = AccountingRecord {
        status: Some(AcctStatus::Stop),
        session_id: "s1".to_owned(),
        info: info("ivy"),
        ..AccountingRecord::default()
    };
    assert!(c.account(t0, &record));
    let mut to = Vec::new();
    while let Some(at) = c.poll_timeout() {
        to.extend(std::iter::from_fn(|| c.poll_transmit()).map(|t| t.to));
        c.handle_timeout(at);
    }
    to.extend(std::iter::from_fn(|| c.poll_transmit()).map(|t| t.to));
    let (acct1, acct2) = (
        server(1812, SECRET1).acct.unwrap(),
        server(2812, SECRET2).acct.unwrap(),
    );
    assert_eq!(to, vec![acct1, acct1, acct1, acct2, acct2, acct2]);
    match c.poll_event() {
        Some(RadiusEvent::AccountingLost { session_id }) => assert_eq!(session_id, "s1"),
        other => panic!("{other:?}"),
    }
    assert_eq!(c.counters().accounting_lost, 1);
}

#[test]
fn more_requests_than_identifiers_wait_for_one_to_free() {
    let mut c = client();
    let now = Instant::now();
    for session in 0..300 {
        c.access(now, session, &info("load"), b"\x02\x01\x00\x05\x01");
    }
    let sent: Vec<_> = std::iter::from_fn(|| c.poll_transmit()).collect();
    assert_eq!(sent.len(), 256, "one Identifier each");
    let ids: std::collections::HashSet<u8> = sent.iter().map(|t| t.bytes[1]).collect();
    assert_eq!(ids.len(), 256);
    assert_eq!(c.counters().waiting, 44);
    let request = received_access(&sent[0].bytes, SECRET1);
    c.handle_datagram(
        now,
        sent[0].to,
        &answer(&request, RadiusCode::ACCESS_REJECT, Vec::new(), SECRET1),
    );
    let next = one_transmit(&mut c);
    assert_eq!(next.bytes[1], sent[0].bytes[1], "the freed Identifier");
    assert_eq!(c.counters().waiting, 43);
}

#[test]
fn accounting_is_off_without_an_accounting_server() {
    let mut config = client();
    config.reconfigure(ClientConfig {
        servers: vec![ServerConfig {
            acct: None,
            ..server(1812, SECRET1)
        }],
        timeout: TIMEOUT,
        retransmits: 1,
        dead_time: DEAD,
        nas_identifier: String::new(),
    });
    assert!(!config.has_accounting());
    assert!(!config.account(Instant::now(), &AccountingRecord::default()));
    assert!(config.poll_transmit().is_none());
    assert!(
        config.poll_event().is_none(),
        "nothing to lose when accounting is off"
    );
}
