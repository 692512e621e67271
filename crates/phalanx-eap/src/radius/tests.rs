use super::*;
use proptest::prelude::*;

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s.replace(' ', "")).unwrap()
}

const SECRET: &[u8] = b"xyzzy5461";
// RFC 2865 §7.1: nemo / arctangent, NAS 192.168.1.16 port 3.
const REQUEST: &str = "01000038 0f403f9473978057bd83d5cb98f4227a 01066e656d6f \
     02120dbe708d93d413ce3196e43f782a0aee 0406c0a80110 050600000003";
// RFC 2865 §7.1: the Access-Accept (Service-Type Login, Login-Service
// Telnet, Login-IP-Host 192.168.1.3).
const ACCEPT: &str = "02000026 86fe220e7624ba2a1005f6bf9b55e0b2 060600000001 \
     0f0600000000 0e06c0a80103";

fn request_authenticator() -> [u8; 16] {
    unhex("0f403f9473978057bd83d5cb98f4227a")
        .try_into()
        .unwrap()
}

#[test]
fn rfc2865_section_7_1_request_is_rebuilt_byte_for_byte() {
    let ra = request_authenticator();
    let request = RadiusPacket {
        code: RadiusCode::ACCESS_REQUEST,
        identifier: 0,
        authenticator: ra,
        attributes: vec![
            (AttributeType::USER_NAME, b"nemo".to_vec()),
            (
                AttributeType::USER_PASSWORD,
                hide_password(b"arctangent", SECRET, &ra),
            ),
            (AttributeType::NAS_IP_ADDRESS, vec![192, 168, 1, 16]),
            (AttributeType::NAS_PORT, vec![0, 0, 0, 3]),
        ],
    };
    assert_eq!(request.emit(), unhex(REQUEST));
    assert_eq!(RadiusPacket::parse(&unhex(REQUEST)), Ok(request));
}

#[test]
fn rfc2865_section_7_1_accept_verifies_and_a_wrong_secret_does_not() {
    let ra = request_authenticator();
    let accept = RadiusPacket::parse_answer(&unhex(ACCEPT), &ra, SECRET).unwrap();
    assert_eq!(accept.code, RadiusCode::ACCESS_ACCEPT);
    assert_eq!(
        accept.attribute(AttributeType(14)),
        Some(&[192, 168, 1, 3][..])
    );
    assert_eq!(
        RadiusPacket::parse_answer(&unhex(ACCEPT), &ra, b"xyzzy5462"),
        Err(RadiusError::BadAuthenticator)
    );
    let mut tampered = unhex(ACCEPT);
    *tampered.last_mut().unwrap() ^= 1;
    assert_eq!(
        RadiusPacket::parse_answer(&tampered, &ra, SECRET),
        Err(RadiusError::BadAuthenticator)
    );
}

/// What a server answers: the Response Authenticator and, when given,
/// the Message-Authenticator over the Request Authenticator.
fn server_answer(mut answer: RadiusPacket, ra: &[u8; 16], with_ma: bool) -> Vec<u8> {
    if with_ma {
        answer
            .attributes
            .push((AttributeType::MESSAGE_AUTHENTICATOR, vec![0; 16]));
        answer.authenticator = *ra;
        let mac = hmac_md5(SECRET, &answer.emit());
        answer.set_message_authenticator(&mac);
    }
    answer.authenticator = [0; 16];
    let unsigned = answer.emit();
    answer.authenticator = response_authenticator(&unsigned, ra, SECRET);
    answer.emit()
}

#[test]
fn eap_message_in_a_challenge_needs_its_message_authenticator() {
    let ra = [0x42; 16];
    let eap = vec![1u8; 300];
    let mut challenge = RadiusPacket {
        code: RadiusCode::ACCESS_CHALLENGE,
        identifier: 9,
        authenticator: [0; 16],
        attributes: vec![(AttributeType::STATE, b"s1".to_vec())],
    };
    challenge.push_eap_message(&eap);
    let signed = server_answer(challenge.clone(), &ra, true);
    let got = RadiusPacket::parse_answer(&signed, &ra, SECRET).unwrap();
    assert_eq!(
        got.eap_message(),
        Some(eap.clone()),
        "300 octets in 253 + 47"
    );
    assert_eq!(
        got.attributes
            .iter()
            .filter(|(t, _)| *t == AttributeType::EAP_MESSAGE)
            .count(),
        2
    );
    let unsigned = server_answer(challenge, &ra, false);
    assert_eq!(
        RadiusPacket::parse_answer(&unsigned, &ra, SECRET),
        Err(RadiusError::BadMessageAuthenticator)
    );
}

#[test]
fn a_request_signed_with_its_message_authenticator_verifies() {
    let mut request = RadiusPacket {
        code: RadiusCode::ACCESS_REQUEST,
        identifier: 3,
        authenticator: [7; 16],
        attributes: vec![(AttributeType::USER_NAME, b"alice".to_vec())],
    };
    request.push_eap_message(&[2, 1, 0, 10, 1, b'a', b'l', b'i', b'c', b'e']);
    let bytes = request.emit_signed(SECRET);
    let mut check = RadiusPacket::parse(&bytes).unwrap();
    let received: [u8; 16] = check
        .attribute(AttributeType::MESSAGE_AUTHENTICATOR)
        .unwrap()
        .try_into()
        .unwrap();
    check.set_message_authenticator(&[0; 16]);
    assert_eq!(hmac_md5(SECRET, &check.emit()), received);
}

#[test]
fn mppe_keys_round_trip_and_make_the_msk() {
    let ra = [0x11; 16];
    let recv: Vec<u8> = (0..32).collect();
    let send: Vec<u8> = (100..132).collect();
    let vsa = |ty: u8, key: &[u8], salt: [u8; 2]| {
        let data = encrypt_mppe_key(key, salt, SECRET, &ra);
        let mut v = VENDOR_MICROSOFT.to_be_bytes().to_vec();
        v.push(ty);
        v.push((data.len() + 2) as u8);
        v.extend(data);
        (AttributeType::VENDOR_SPECIFIC, v)
    };
    let accept = RadiusPacket {
        code: RadiusCode::ACCESS_ACCEPT,
        identifier: 1,
        authenticator: [0; 16],
        attributes: vec![
            vsa(MS_MPPE_SEND_KEY, &send, [0x80, 0x01]),
            vsa(MS_MPPE_RECV_KEY, &recv, [0x80, 0x02]),
        ],
    };
    let msk = accept.msk(&ra, SECRET).unwrap().unwrap();
    assert_eq!(&msk[..32], &recv[..]);
    assert_eq!(&msk[32..], &send[..]);
    // Another secret decrypts to nonsense: a length past the data.
    assert!(
        accept.msk(&ra, b"other").is_err()
            || accept.msk(&ra, b"other").unwrap().unwrap()[..32] != recv[..]
    );
    // A salt without its high bit is refused (RFC 2548 §2.4.2).
    let bad = encrypt_mppe_key(&recv, [0x00, 0x01], SECRET, &ra);
    assert_eq!(
        decrypt_mppe_key(&bad, SECRET, &ra),
        Err(RadiusError::BadKey)
    );
}

#[test]
fn malformed_packets_are_refused() {
    let ok = unhex(ACCEPT);
    assert_eq!(RadiusPacket::parse(&ok[..19]), Err(RadiusError::Malformed));
    let mut long = ok.clone();
    long.push(0);
    assert_eq!(RadiusPacket::parse(&long), Err(RadiusError::Malformed));
    let mut short_attr = ok.clone();
    short_attr[21] = 1;
    assert_eq!(
        RadiusPacket::parse(&short_attr),
        Err(RadiusError::Malformed)
    );
}

proptest! {
    #[test]
    fn no_input_panics_and_what_parses_emits_the_same(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        if let Ok(p) = RadiusPacket::parse(&bytes) {
            prop_assert_eq!(p.emit(), bytes.clone());
            let _ = p.msk(&[0; 16], SECRET);
            let _ = p.eap_message();
        }
        let _ = RadiusPacket::parse_answer(&bytes, &[0; 16], SECRET);
        let _ = decrypt_mppe_key(&bytes, SECRET, &[0; 16]);
    }
}
