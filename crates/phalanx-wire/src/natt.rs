//! UDP encapsulation of ESP for NAT traversal (RFC 3948 §2): what a
//! datagram to or from port 4500 carries.
//!
//! ```text
//! UDP-encapsulated ESP (RFC 3948 §2.1):   IKE with non-ESP marker (§2.2):
//!  0                   1                   2                   3
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |        Source Port            |      Destination Port         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |           Length              |           Checksum            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  ESP header: SPI (non-zero)   |  or  Non-ESP Marker (4 zeros) |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~  rest of the ESP packet       |  or  IKE header and payloads  ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! NAT-keepalive (RFC 3948 §2.3): a single octet 0xFF as the UDP payload.
//! ```

use crate::error::{Error, Result};
use crate::esp;

/// UDP port for UDP-encapsulated ESP and IKE after NAT detection (RFC 3948
/// §2, RFC 7296 §2.23).
pub const NAT_T_PORT: u16 = 4500;
/// UDP port for IKE without encapsulation (RFC 7296 §2).
pub const IKE_PORT: u16 = 500;
/// The non-ESP marker in front of IKE messages on port 4500 (RFC 3948 §2.2):
/// four zero octets, where an ESP packet has its (never zero) SPI.
pub const NON_ESP_MARKER: [u8; 4] = [0; 4];
/// The single octet of a NAT-keepalive packet (RFC 3948 §2.3).
pub const KEEPALIVE: u8 = 0xff;

/// What the payload of a port-4500 UDP datagram is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdpEncapPayload<'a> {
    /// A NAT-keepalive: one octet 0xFF, to be discarded (RFC 3948 §2.3).
    Keepalive,
    /// An IKE message: the octets after the non-ESP marker.
    Ike(&'a [u8]),
    /// An ESP packet, from its SPI on (at least the 8-octet ESP header).
    Esp(&'a [u8]),
}

/// Classifies the payload of a UDP datagram received on port 4500.
///
/// Errors: [`Error::Truncated`] for a payload too short to be any of the
/// three (not the keepalive octet, under 4 octets, or an ESP packet shorter
/// than its header).
pub fn classify(payload: &[u8]) -> Result<UdpEncapPayload<'_>> {
    match payload {
        [KEEPALIVE] => Ok(UdpEncapPayload::Keepalive),
        [0, 0, 0, 0, ike @ ..] => Ok(UdpEncapPayload::Ike(ike)),
        esp_packet if esp_packet.len() >= esp::HEADER_LEN => Ok(UdpEncapPayload::Esp(esp_packet)),
        _ => Err(Error::Truncated),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keepalive() {
        assert_eq!(classify(&[0xff]), Ok(UdpEncapPayload::Keepalive));
        assert_eq!(classify(&[0x00]), Err(Error::Truncated));
        assert_eq!(classify(&[0xff, 0xff]), Err(Error::Truncated));
    }

    #[test]
    fn ike_after_marker() {
        // Non-ESP marker, then the first octets of an IKE header (SPIi).
        let bytes = hex::decode("00000000a1b2c3d4e5f60718").unwrap();
        assert_eq!(classify(&bytes), Ok(UdpEncapPayload::Ike(&bytes[4..])));
        // A bare marker is classified; the IKE parser rejects the empty message.
        assert_eq!(classify(&NON_ESP_MARKER), Ok(UdpEncapPayload::Ike(&[])));
    }

    #[test]
    fn esp_by_nonzero_spi() {
        let bytes = hex::decode("0000010000000001aabbccdd").unwrap();
        assert_eq!(classify(&bytes), Ok(UdpEncapPayload::Esp(&bytes[..])));
        assert_eq!(classify(&bytes[..8]), Ok(UdpEncapPayload::Esp(&bytes[..8])));
        for len in 1..8 {
            assert_eq!(classify(&bytes[..len]), Err(Error::Truncated), "{len}");
        }
    }

    #[test]
    fn empty_and_short() {
        assert_eq!(classify(&[]), Err(Error::Truncated));
        assert_eq!(classify(&[0, 0, 0]), Err(Error::Truncated));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            match classify(&bytes) {
                Ok(UdpEncapPayload::Keepalive) => prop_assert_eq!(&bytes[..], &[0xff]),
                Ok(UdpEncapPayload::Ike(ike)) => prop_assert_eq!(ike.len() + 4, bytes.len()),
                Ok(UdpEncapPayload::Esp(esp)) => {
                    prop_assert!(esp.len() >= 8 && esp[..4] != [0; 4]);
                }
                Err(_) => prop_assert!(bytes.len() < 8),
            }
            crate::fuzzing::natt(&bytes);
        }
    }
}
