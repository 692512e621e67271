//! A RADIUS server made of the codec, for tests: it checks requests as a
//! server does and signs its answers as a server does.

use super::*;

/// What a server checks of an Access-Request: it parses, and its
/// Message-Authenticator verifies under `secret` (RFC 3579 §3.2).
pub(crate) fn received_access(bytes: &[u8], secret: &[u8]) -> RadiusPacket {
    let request = RadiusPacket::parse(bytes).unwrap();
    assert_eq!(request.code, RadiusCode::ACCESS_REQUEST);
    let mac = request
        .attribute(AttributeType::MESSAGE_AUTHENTICATOR)
        .expect("Message-Authenticator")
        .to_vec();
    let mut zeroed = request.clone();
    zeroed.set_message_authenticator(&[0; 16]);
    assert_eq!(
        hmac_md5(secret, &zeroed.emit()).to_vec(),
        mac,
        "Message-Authenticator"
    );
    request
}

/// What a server checks of an Accounting-Request (RFC 2866 §3).
pub(crate) fn received_accounting(bytes: &[u8], secret: &[u8]) -> RadiusPacket {
    let request = RadiusPacket::parse(bytes).unwrap();
    assert_eq!(request.code, RadiusCode::ACCOUNTING_REQUEST);
    let mut zeroed = request.clone();
    zeroed.authenticator = [0; 16];
    assert_eq!(
        accounting_authenticator(&zeroed.emit(), secret),
        request.authenticator,
        "Accounting Request Authenticator"
    );
    request
}

/// A server's answer to `request`, signed with `secret`.
pub(crate) fn answer(
    request: &RadiusPacket,
    code: RadiusCode,
    mut attributes: Vec<(AttributeType, Vec<u8>)>,
    secret: &[u8],
) -> Vec<u8> {
    if code != RadiusCode::ACCOUNTING_RESPONSE {
        attributes.push((AttributeType::MESSAGE_AUTHENTICATOR, vec![0; 16]));
    }
    RadiusPacket {
        code,
        identifier: request.identifier,
        authenticator: [0; 16],
        attributes,
    }
    .emit_answer(&request.authenticator, secret)
}

pub(crate) fn eap_attr(eap: &[u8]) -> Vec<(AttributeType, Vec<u8>)> {
    let mut p = RadiusPacket {
        code: RadiusCode::ACCESS_CHALLENGE,
        identifier: 0,
        authenticator: [0; 16],
        attributes: Vec::new(),
    };
    p.push_eap_message(eap);
    p.attributes
}

pub(crate) fn mppe(
    vendor_type: u8,
    key: &[u8],
    request: &RadiusPacket,
    secret: &[u8],
) -> (AttributeType, Vec<u8>) {
    let value = encrypt_mppe_key(key, [0x80, vendor_type], secret, &request.authenticator);
    let mut vsa = 311u32.to_be_bytes().to_vec();
    vsa.push(vendor_type);
    vsa.push((value.len() + 2) as u8);
    vsa.extend(value);
    (AttributeType::VENDOR_SPECIFIC, vsa)
}
