//! The EAP packet (RFC 3748 §4).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Code      |  Identifier   |            Length             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Type      |  Type-Data ...   (Request and Response only)
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Success and Failure are exactly four octets (§4.2). A packet whose
//! Length is not the number of octets given is refused, as is a Request or
//! Response without a Type (§4.1).

use core::fmt;

/// Code (RFC 3748 §4): an open enum, unknown values are data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EapCode(pub u8);

impl EapCode {
    /// Request.
    pub const REQUEST: EapCode = EapCode(1);
    /// Response.
    pub const RESPONSE: EapCode = EapCode(2);
    /// Success.
    pub const SUCCESS: EapCode = EapCode(3);
    /// Failure.
    pub const FAILURE: EapCode = EapCode(4);
}

/// Type (RFC 3748 §5, IANA "Method Types").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EapType(pub u8);

impl EapType {
    /// Identity (§5.1).
    pub const IDENTITY: EapType = EapType(1);
    /// Notification (§5.2).
    pub const NOTIFICATION: EapType = EapType(2);
    /// Legacy Nak (§5.3.1): the peer wants other methods.
    pub const NAK: EapType = EapType(3);
    /// MD5-Challenge (§5.4).
    pub const MD5_CHALLENGE: EapType = EapType(4);
    /// EAP-TLS (RFC 5216).
    pub const TLS: EapType = EapType(13);
    /// EAP-MSCHAPv2 (draft-kamath-pppext-eap-mschapv2).
    pub const MSCHAPV2: EapType = EapType(26);
    /// Expanded Types (§5.7).
    pub const EXPANDED: EapType = EapType(254);
}

/// Why a packet was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketError {
    /// Shorter than its header, or than its Length field says.
    Truncated,
    /// Length disagrees with the octets given (trailing octets included).
    LengthMismatch,
    /// A Request or Response without a Type, or a Success or Failure with
    /// data.
    Malformed,
}

impl fmt::Display for PacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PacketError::Truncated => "EAP packet truncated",
            PacketError::LengthMismatch => "EAP Length does not match the packet",
            PacketError::Malformed => "EAP packet malformed",
        })
    }
}

impl std::error::Error for PacketError {}

/// A checked view of an EAP packet.
#[derive(Clone, Copy, Debug)]
pub struct EapPacket<T: AsRef<[u8]>> {
    buffer: T,
}

/// Octets of Code, Identifier and Length.
const HEADER_LEN: usize = 4;

impl<T: AsRef<[u8]>> EapPacket<T> {
    /// Checks the length rules of the module doc.
    pub fn new_checked(buffer: T) -> Result<Self, PacketError> {
        let bytes = buffer.as_ref();
        if bytes.len() < HEADER_LEN {
            return Err(PacketError::Truncated);
        }
        let length = usize::from(u16::from_be_bytes([bytes[2], bytes[3]]));
        if length > bytes.len() {
            return Err(PacketError::Truncated);
        }
        if length != bytes.len() || length < HEADER_LEN {
            return Err(PacketError::LengthMismatch);
        }
        let code = EapCode(bytes[0]);
        let typed = code == EapCode::REQUEST || code == EapCode::RESPONSE;
        if (typed && length < HEADER_LEN + 1) || (!typed && length != HEADER_LEN) {
            return Err(PacketError::Malformed);
        }
        Ok(EapPacket { buffer })
    }

    /// Code.
    pub fn code(&self) -> EapCode {
        EapCode(self.buffer.as_ref()[0])
    }

    /// Identifier.
    pub fn identifier(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Type, for a Request or Response.
    pub fn eap_type(&self) -> Option<EapType> {
        self.buffer.as_ref().get(HEADER_LEN).copied().map(EapType)
    }

    /// Type-Data (empty for Success and Failure).
    pub fn type_data(&self) -> &[u8] {
        self.buffer.as_ref().get(HEADER_LEN + 1..).unwrap_or(&[])
    }
}

/// An EAP packet to parse into or emit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EapRepr {
    /// Code.
    pub code: EapCode,
    /// Identifier.
    pub identifier: u8,
    /// Type and Type-Data, for a Request or Response.
    pub body: Option<(EapType, Vec<u8>)>,
}

impl EapRepr {
    /// Reads `bytes` (the whole packet).
    pub fn parse(bytes: &[u8]) -> Result<EapRepr, PacketError> {
        let p = EapPacket::new_checked(bytes)?;
        Ok(EapRepr {
            code: p.code(),
            identifier: p.identifier(),
            body: p.eap_type().map(|t| (t, p.type_data().to_vec())),
        })
    }

    /// A Request of `eap_type`.
    pub fn request(identifier: u8, eap_type: EapType, data: Vec<u8>) -> EapRepr {
        EapRepr {
            code: EapCode::REQUEST,
            identifier,
            body: Some((eap_type, data)),
        }
    }

    /// A Response of `eap_type`.
    pub fn response(identifier: u8, eap_type: EapType, data: Vec<u8>) -> EapRepr {
        EapRepr {
            code: EapCode::RESPONSE,
            identifier,
            body: Some((eap_type, data)),
        }
    }

    /// Success or Failure.
    pub fn outcome(code: EapCode, identifier: u8) -> EapRepr {
        EapRepr {
            code,
            identifier,
            body: None,
        }
    }

    /// The packet's octets. Type-Data is cut at 65530 octets, the most a
    /// Length field can count (nothing here builds more).
    pub fn emit(&self) -> Vec<u8> {
        let data = self.body.as_ref().map_or(&[][..], |(_, d)| d.as_slice());
        let data = &data[..data.len().min(usize::from(u16::MAX) - HEADER_LEN - 1)];
        let len = HEADER_LEN + self.body.as_ref().map_or(0, |_| 1 + data.len());
        let mut out = Vec::with_capacity(len);
        out.push(self.code.0);
        out.push(self.identifier);
        // Bounded above by u16::MAX.
        out.extend_from_slice(&(len as u16).to_be_bytes());
        if let Some((t, _)) = &self.body {
            out.push(t.0);
            out.extend_from_slice(data);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn identity_request_and_success_round_trip() {
        let req = EapRepr::request(7, EapType::IDENTITY, Vec::new());
        assert_eq!(req.emit(), [1, 7, 0, 5, 1]);
        assert_eq!(EapRepr::parse(&req.emit()), Ok(req));
        let ok = EapRepr::outcome(EapCode::SUCCESS, 9);
        assert_eq!(ok.emit(), [3, 9, 0, 4]);
        assert_eq!(EapRepr::parse(&ok.emit()), Ok(ok));
    }

    #[test]
    fn length_rules() {
        assert_eq!(EapRepr::parse(&[2, 1, 0]), Err(PacketError::Truncated));
        assert_eq!(
            EapRepr::parse(&[2, 1, 0, 9, 1]),
            Err(PacketError::Truncated)
        );
        assert_eq!(
            EapRepr::parse(&[2, 1, 0, 5, 1, 0]),
            Err(PacketError::LengthMismatch),
            "trailing octet"
        );
        assert_eq!(EapRepr::parse(&[2, 1, 0, 4]), Err(PacketError::Malformed));
        assert_eq!(
            EapRepr::parse(&[3, 1, 0, 5, 1]),
            Err(PacketError::Malformed)
        );
        assert_eq!(
            EapRepr::parse(&[2, 1, 0, 3]),
            Err(PacketError::LengthMismatch)
        );
    }

    proptest! {
        #[test]
        fn no_input_panics_and_what_parses_emits_the_same(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(repr) = EapRepr::parse(&bytes) {
                prop_assert_eq!(repr.emit(), bytes);
            }
        }
    }
}
