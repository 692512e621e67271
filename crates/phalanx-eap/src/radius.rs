//! The RADIUS codec for EAP pass-through (RFC 2865, RFC 3579, RFC 2548),
//! sans-IO: the gateway's RADIUS client builds Access-Requests carrying
//! the End-User's EAP messages, checks the server's answers and takes the
//! MSK from the MS-MPPE keys. Sockets, retransmission and server failover
//! belong to phalanxd.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Code      |  Identifier   |            Length             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                         Authenticator (16)                    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Attributes: Type (1) | Length (1, ≥ 2) | Value ...
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! - Response Authenticator (RFC 2865 §3): MD5(Code | Identifier | Length
//!   | Request Authenticator | Attributes | Secret).
//! - Message-Authenticator (RFC 3579 §3.2): HMAC-MD5(Secret, packet with
//!   the attribute's value zeroed); in an answer, over the packet with the
//!   Request Authenticator in place of its own. Required with EAP-Message.
//! - EAP-Message (RFC 3579 §3.1): the EAP packet cut into values of at
//!   most 253 octets, joined in order on receipt.
//! - MS-MPPE-Send-Key / -Recv-Key (RFC 2548 §2.4.2, §2.4.3): Salt (2) and
//!   the key encrypted with MD5(Secret | Request Authenticator | Salt)
//!   chained over 16-octet blocks; the MSK is Recv | Send, zero-padded to
//!   64 octets (strongSwan's `decrypt_msk` in `radius_socket.c`).

use core::fmt;

use hmac::{Hmac, Mac};
use md5::{Digest, Md5};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// Code (RFC 2865 §3, RFC 2866 §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RadiusCode(pub u8);

impl RadiusCode {
    /// Access-Request.
    pub const ACCESS_REQUEST: RadiusCode = RadiusCode(1);
    /// Access-Accept.
    pub const ACCESS_ACCEPT: RadiusCode = RadiusCode(2);
    /// Access-Reject.
    pub const ACCESS_REJECT: RadiusCode = RadiusCode(3);
    /// Accounting-Request (RFC 2866).
    pub const ACCOUNTING_REQUEST: RadiusCode = RadiusCode(4);
    /// Accounting-Response (RFC 2866).
    pub const ACCOUNTING_RESPONSE: RadiusCode = RadiusCode(5);
    /// Access-Challenge.
    pub const ACCESS_CHALLENGE: RadiusCode = RadiusCode(11);
}

/// Attribute Type (RFC 2865 §5 and the RFCs named).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttributeType(pub u8);

impl AttributeType {
    /// User-Name.
    pub const USER_NAME: AttributeType = AttributeType(1);
    /// User-Password.
    pub const USER_PASSWORD: AttributeType = AttributeType(2);
    /// NAS-IP-Address.
    pub const NAS_IP_ADDRESS: AttributeType = AttributeType(4);
    /// NAS-Port.
    pub const NAS_PORT: AttributeType = AttributeType(5);
    /// Service-Type.
    pub const SERVICE_TYPE: AttributeType = AttributeType(6);
    /// Framed-IP-Address: the End-User's virtual IP from the server.
    pub const FRAMED_IP_ADDRESS: AttributeType = AttributeType(8);
    /// State: echoed in the next Access-Request.
    pub const STATE: AttributeType = AttributeType(24);
    /// Class: echoed in accounting (RFC 2865 §5.25).
    pub const CLASS: AttributeType = AttributeType(25);
    /// Vendor-Specific.
    pub const VENDOR_SPECIFIC: AttributeType = AttributeType(26);
    /// Called-Station-Id.
    pub const CALLED_STATION_ID: AttributeType = AttributeType(30);
    /// Calling-Station-Id.
    pub const CALLING_STATION_ID: AttributeType = AttributeType(31);
    /// NAS-Identifier.
    pub const NAS_IDENTIFIER: AttributeType = AttributeType(32);
    /// NAS-Port-Type.
    pub const NAS_PORT_TYPE: AttributeType = AttributeType(61);
    /// EAP-Message (RFC 3579 §3.1).
    pub const EAP_MESSAGE: AttributeType = AttributeType(79);
    /// Message-Authenticator (RFC 3579 §3.2).
    pub const MESSAGE_AUTHENTICATOR: AttributeType = AttributeType(80);
    /// Reply-Message: text for the user (logged).
    pub const REPLY_MESSAGE: AttributeType = AttributeType(18);
    /// Session-Timeout (seconds).
    pub const SESSION_TIMEOUT: AttributeType = AttributeType(27);
    /// Acct-Status-Type (RFC 2866 §5.1).
    pub const ACCT_STATUS_TYPE: AttributeType = AttributeType(40);
    /// Acct-Input-Octets (RFC 2866 §5.3): from the End-User.
    pub const ACCT_INPUT_OCTETS: AttributeType = AttributeType(42);
    /// Acct-Output-Octets (RFC 2866 §5.4): to the End-User.
    pub const ACCT_OUTPUT_OCTETS: AttributeType = AttributeType(43);
    /// Acct-Session-Id (RFC 2866 §5.5).
    pub const ACCT_SESSION_ID: AttributeType = AttributeType(44);
    /// Acct-Session-Time (RFC 2866 §5.7), seconds.
    pub const ACCT_SESSION_TIME: AttributeType = AttributeType(46);
    /// Acct-Input-Packets (RFC 2866 §5.8).
    pub const ACCT_INPUT_PACKETS: AttributeType = AttributeType(47);
    /// Acct-Output-Packets (RFC 2866 §5.9).
    pub const ACCT_OUTPUT_PACKETS: AttributeType = AttributeType(48);
    /// Acct-Terminate-Cause (RFC 2866 §5.10).
    pub const ACCT_TERMINATE_CAUSE: AttributeType = AttributeType(49);
    /// Acct-Input-Gigawords (RFC 2869 §5.1): the octet count's high word.
    pub const ACCT_INPUT_GIGAWORDS: AttributeType = AttributeType(52);
    /// Acct-Output-Gigawords (RFC 2869 §5.2).
    pub const ACCT_OUTPUT_GIGAWORDS: AttributeType = AttributeType(53);
    /// Acct-Interim-Interval (RFC 2869 §5.16), seconds.
    pub const ACCT_INTERIM_INTERVAL: AttributeType = AttributeType(85);
    /// NAS-IPv6-Address (RFC 3162 §2.1).
    pub const NAS_IPV6_ADDRESS: AttributeType = AttributeType(95);
}

/// Microsoft's private enterprise number (RFC 2548 §2).
const VENDOR_MICROSOFT: u32 = 311;
/// MS-MPPE-Send-Key and MS-MPPE-Recv-Key (RFC 2548 §2.4.2, §2.4.3).
const MS_MPPE_SEND_KEY: u8 = 16;
const MS_MPPE_RECV_KEY: u8 = 17;

/// Octets of Code, Identifier, Length and Authenticator.
const HEADER_LEN: usize = 20;
/// The largest packet (RFC 2865 §3).
pub const MAX_PACKET_LEN: usize = 4096;
/// The longest attribute value.
const MAX_VALUE_LEN: usize = 253;

/// Why a RADIUS packet was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RadiusError {
    /// Length outside 20..=4096, not the octets given, or an attribute
    /// running past the end or shorter than 2.
    Malformed,
    /// The Response Authenticator does not verify (wrong secret, or not an
    /// answer to our request).
    BadAuthenticator,
    /// Message-Authenticator missing where required, or wrong.
    BadMessageAuthenticator,
    /// An MS-MPPE key that does not decrypt to a sane length.
    BadKey,
}

impl fmt::Display for RadiusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RadiusError::Malformed => "malformed RADIUS packet",
            RadiusError::BadAuthenticator => "RADIUS Response Authenticator does not verify",
            RadiusError::BadMessageAuthenticator => "RADIUS Message-Authenticator missing or wrong",
            RadiusError::BadKey => "MS-MPPE key does not decrypt",
        })
    }
}

impl std::error::Error for RadiusError {}

/// A RADIUS packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RadiusPacket {
    /// Code.
    pub code: RadiusCode,
    /// Identifier (matches answers to requests).
    pub identifier: u8,
    /// Request or Response Authenticator.
    pub authenticator: [u8; 16],
    /// Attributes in order.
    pub attributes: Vec<(AttributeType, Vec<u8>)>,
}

impl RadiusPacket {
    /// Reads a packet (RFC 2865 §3, §5).
    pub fn parse(bytes: &[u8]) -> Result<RadiusPacket, RadiusError> {
        if bytes.len() < HEADER_LEN || bytes.len() > MAX_PACKET_LEN {
            return Err(RadiusError::Malformed);
        }
        let length = usize::from(u16::from_be_bytes([bytes[2], bytes[3]]));
        if length != bytes.len() {
            return Err(RadiusError::Malformed);
        }
        let mut authenticator = [0u8; 16];
        authenticator.copy_from_slice(&bytes[4..HEADER_LEN]);
        let mut attributes = Vec::new();
        let mut rest = &bytes[HEADER_LEN..];
        while let [ty, len, ..] = *rest {
            let len = usize::from(len);
            if len < 2 || len > rest.len() {
                return Err(RadiusError::Malformed);
            }
            attributes.push((AttributeType(ty), rest[2..len].to_vec()));
            rest = &rest[len..];
        }
        if !rest.is_empty() {
            return Err(RadiusError::Malformed);
        }
        Ok(RadiusPacket {
            code: RadiusCode(bytes[0]),
            identifier: bytes[1],
            authenticator,
            attributes,
        })
    }

    /// The packet's octets; values longer than 253 octets are cut (the
    /// builders here never make one).
    pub fn emit(&self) -> Vec<u8> {
        let mut out = vec![self.code.0, self.identifier, 0, 0];
        out.extend_from_slice(&self.authenticator);
        for (ty, value) in &self.attributes {
            let value = &value[..value.len().min(MAX_VALUE_LEN)];
            out.push(ty.0);
            // At most 255.
            out.push((value.len() + 2) as u8);
            out.extend_from_slice(value);
        }
        let len = u16::try_from(out.len()).unwrap_or(u16::MAX);
        out[2..4].copy_from_slice(&len.to_be_bytes());
        out
    }

    /// The first value of `ty`.
    pub fn attribute(&self, ty: AttributeType) -> Option<&[u8]> {
        self.attributes
            .iter()
            .find(|(t, _)| *t == ty)
            .map(|(_, v)| v.as_slice())
    }

    /// Adds EAP-Message attributes for `eap` (RFC 3579 §3.1).
    pub fn push_eap_message(&mut self, eap: &[u8]) {
        for chunk in eap.chunks(MAX_VALUE_LEN) {
            self.attributes
                .push((AttributeType::EAP_MESSAGE, chunk.to_vec()));
        }
    }

    /// The EAP packet of the EAP-Message attributes, joined; `None`
    /// without one.
    pub fn eap_message(&self) -> Option<Vec<u8>> {
        let parts: Vec<&[u8]> = self
            .attributes
            .iter()
            .filter(|(t, _)| *t == AttributeType::EAP_MESSAGE)
            .map(|(_, v)| v.as_slice())
            .collect();
        (!parts.is_empty()).then(|| parts.concat())
    }

    /// An Access-Request's octets with its Message-Authenticator filled in
    /// (RFC 3579 §3.2): the attribute is added (zeroed) if absent.
    pub fn emit_signed(&mut self, secret: &[u8]) -> Vec<u8> {
        if self
            .attribute(AttributeType::MESSAGE_AUTHENTICATOR)
            .is_none()
        {
            self.attributes
                .push((AttributeType::MESSAGE_AUTHENTICATOR, vec![0; 16]));
        }
        self.set_message_authenticator(&[0; 16]);
        let mac = hmac_md5(secret, &self.emit());
        self.set_message_authenticator(&mac);
        self.emit()
    }

    /// A server's answer to the request with `request_authenticator`, as
    /// its octets: the Message-Authenticator filled in when the packet has
    /// one (RFC 3579 §3.2, computed with the Request Authenticator in
    /// place), then the Response Authenticator (RFC 2865 §3). For servers
    /// in tests, load generators and fuzzing.
    pub fn emit_answer(&mut self, request_authenticator: &[u8; 16], secret: &[u8]) -> Vec<u8> {
        self.authenticator = *request_authenticator;
        if self
            .attribute(AttributeType::MESSAGE_AUTHENTICATOR)
            .is_some()
        {
            self.set_message_authenticator(&[0; 16]);
            let mac = hmac_md5(secret, &self.emit());
            self.set_message_authenticator(&mac);
        }
        let bytes = self.emit();
        self.authenticator = response_authenticator(&bytes, request_authenticator, secret);
        self.emit()
    }

    fn set_message_authenticator(&mut self, value: &[u8; 16]) {
        for (t, v) in &mut self.attributes {
            if *t == AttributeType::MESSAGE_AUTHENTICATOR {
                *v = value.to_vec();
            }
        }
    }

    /// The answer `bytes` to our request with `request_authenticator`,
    /// checked: its Response Authenticator (RFC 2865 §3) and its
    /// Message-Authenticator (RFC 3579 §3.2; required when it carries
    /// EAP-Message).
    pub fn parse_answer(
        bytes: &[u8],
        request_authenticator: &[u8; 16],
        secret: &[u8],
    ) -> Result<RadiusPacket, RadiusError> {
        let answer = RadiusPacket::parse(bytes)?;
        let expected = response_authenticator(bytes, request_authenticator, secret);
        if !bool::from(expected.ct_eq(&answer.authenticator)) {
            return Err(RadiusError::BadAuthenticator);
        }
        match answer.attribute(AttributeType::MESSAGE_AUTHENTICATOR) {
            Some(received) => {
                let mut check = answer.clone();
                check.authenticator = *request_authenticator;
                check.set_message_authenticator(&[0; 16]);
                let mac = hmac_md5(secret, &check.emit());
                if received.len() != 16 || !bool::from(mac.ct_eq(received)) {
                    return Err(RadiusError::BadMessageAuthenticator);
                }
            }
            None if answer.eap_message().is_some() => {
                return Err(RadiusError::BadMessageAuthenticator)
            }
            None => {}
        }
        Ok(answer)
    }

    /// The MSK of an Access-Accept: MS-MPPE-Recv-Key | MS-MPPE-Send-Key,
    /// zero-padded to 64 octets (module doc); `None` without both keys.
    pub fn msk(
        &self,
        request_authenticator: &[u8; 16],
        secret: &[u8],
    ) -> Result<Option<Zeroizing<Vec<u8>>>, RadiusError> {
        let mut send = None;
        let mut recv = None;
        for (t, value) in &self.attributes {
            let Some((vendor_type, data)) = microsoft_attribute(*t, value) else {
                continue;
            };
            let slot = match vendor_type {
                MS_MPPE_SEND_KEY => &mut send,
                MS_MPPE_RECV_KEY => &mut recv,
                _ => continue,
            };
            *slot = Some(decrypt_mppe_key(data, secret, request_authenticator)?);
        }
        let (Some(send), Some(recv)) = (send, recv) else {
            return Ok(None);
        };
        let mut msk = Zeroizing::new(Vec::with_capacity(64));
        msk.extend_from_slice(&recv);
        msk.extend_from_slice(&send);
        if msk.len() < 64 {
            msk.resize(64, 0);
        }
        Ok(Some(msk))
    }
}

/// An Accounting-Request's Request Authenticator (RFC 2866 §3):
/// MD5(Code | Identifier | Length | 16 zero octets | Attributes | Secret),
/// over `bytes`, the packet as emitted with a zero authenticator.
pub fn accounting_authenticator(bytes: &[u8], secret: &[u8]) -> [u8; 16] {
    response_authenticator(bytes, &[0; 16], secret)
}

/// A Microsoft Vendor-Specific attribute's (vendor type, value).
fn microsoft_attribute(ty: AttributeType, value: &[u8]) -> Option<(u8, &[u8])> {
    if ty != AttributeType::VENDOR_SPECIFIC {
        return None;
    }
    let (vendor, rest) = value.split_first_chunk::<4>()?;
    let [vendor_type, len, data @ ..] = rest else {
        return None;
    };
    (u32::from_be_bytes(*vendor) == VENDOR_MICROSOFT && usize::from(*len) == data.len() + 2)
        .then_some((*vendor_type, data))
}

/// The Response Authenticator `bytes` must carry (RFC 2865 §3).
fn response_authenticator(
    bytes: &[u8],
    request_authenticator: &[u8; 16],
    secret: &[u8],
) -> [u8; 16] {
    Md5::new()
        .chain_update(&bytes[..4])
        .chain_update(request_authenticator)
        .chain_update(&bytes[HEADER_LEN..])
        .chain_update(secret)
        .finalize()
        .into()
}

fn hmac_md5(key: &[u8], data: &[u8]) -> [u8; 16] {
    // HMAC takes keys of any length: new_from_slice cannot fail.
    let mut mac = <Hmac<Md5> as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// User-Password (RFC 2865 §5.2): the password padded to 16 octets and
/// XORed with MD5(Secret | Request Authenticator), chained.
pub fn hide_password(password: &[u8], secret: &[u8], request_authenticator: &[u8; 16]) -> Vec<u8> {
    let mut padded = password.to_vec();
    padded.resize(padded.len().div_ceil(16).max(1) * 16, 0);
    chain_cipher(Way::Hide, &padded, secret, request_authenticator, &[])
}

/// Which way [`chain_cipher`] runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Hide,
    Reveal,
}

/// The RFC 2865 §5.2 / RFC 2548 §2.4.2 cipher: block i XORed with
/// MD5(Secret | the previous ciphertext block, or for the first the
/// Request Authenticator and `salt`). Hiding and revealing differ only in
/// which side of the XOR is the ciphertext that chains.
fn chain_cipher(
    way: Way,
    data: &[u8],
    secret: &[u8],
    request_authenticator: &[u8; 16],
    salt: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut previous: Vec<u8> = [&request_authenticator[..], salt].concat();
    for block in data.chunks(16) {
        let b: [u8; 16] = Md5::new()
            .chain_update(secret)
            .chain_update(&previous)
            .finalize()
            .into();
        let xored: Vec<u8> = block.iter().zip(b).map(|(d, k)| d ^ k).collect();
        previous = match way {
            Way::Hide => xored.clone(),
            Way::Reveal => block.to_vec(),
        };
        out.extend_from_slice(&xored);
    }
    out
}

/// MS-MPPE-*-Key's value (RFC 2548 §2.4.2): Salt (2, high bit set) and the
/// encrypted Key-Length | Key | padding.
pub fn encrypt_mppe_key(
    key: &[u8],
    salt: [u8; 2],
    secret: &[u8],
    request_authenticator: &[u8; 16],
) -> Vec<u8> {
    let mut plain = Zeroizing::new(vec![u8::try_from(key.len()).unwrap_or(u8::MAX)]);
    plain.extend_from_slice(key);
    let padded = plain.len().div_ceil(16) * 16;
    plain.resize(padded, 0);
    let mut out = salt.to_vec();
    out.extend(chain_cipher(
        Way::Hide,
        &plain,
        secret,
        request_authenticator,
        &salt,
    ));
    out
}

/// The key of an MS-MPPE-*-Key value.
pub fn decrypt_mppe_key(
    value: &[u8],
    secret: &[u8],
    request_authenticator: &[u8; 16],
) -> Result<Zeroizing<Vec<u8>>, RadiusError> {
    let (salt, cipher) = value.split_first_chunk::<2>().ok_or(RadiusError::BadKey)?;
    if cipher.is_empty() || cipher.len() % 16 != 0 || salt[0] & 0x80 == 0 {
        return Err(RadiusError::BadKey);
    }
    let plain = Zeroizing::new(chain_cipher(
        Way::Reveal,
        cipher,
        secret,
        request_authenticator,
        salt,
    ));
    let len = usize::from(plain[0]);
    let key = plain.get(1..1 + len).ok_or(RadiusError::BadKey)?;
    Ok(Zeroizing::new(key.to_vec()))
}

pub mod client;
#[cfg(test)]
mod fake_server;
pub mod relay;

#[cfg(test)]
mod tests;
