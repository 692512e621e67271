use super::*;
use proptest::prelude::*;

/// Next Header 4 (tunnel), Payload Len 4 (24 octets: HMAC-SHA1-96 ICV),
/// SPI 0x100, sequence number 7, a 12-octet ICV, then 4 payload octets.
const PACKET: &str = "040400000000010000000007c1c2c3c4c5c6c7c8c9cacbcc45000014";

#[test]
fn header_fields() {
    let bytes = hex::decode(PACKET).unwrap();
    let p = AhPacket::new_checked(&bytes[..]).unwrap();
    assert_eq!(p.next_header(), IpProtocol::IPV4);
    assert_eq!((p.payload_len(), p.header_len(), p.reserved()), (4, 24, 0));
    assert_eq!((p.spi(), p.sequence_number()), (0x100, 7));
    assert_eq!(p.icv(), &bytes[12..24]);
    assert_eq!(p.payload(), &[0x45, 0, 0, 0x14]);
    assert!(p.check_alignment(false).is_ok() && p.check_alignment(true).is_ok());
    let repr = AhRepr::parse(&p).unwrap();
    assert_eq!(
        repr,
        AhRepr {
            next_header: IpProtocol::IPV4,
            spi: 0x100,
            sequence_number: 7,
            icv_len: 12
        }
    );
    let mut out = vec![0xffu8; repr.buffer_len()];
    repr.emit(&mut AhPacket::new_unchecked(&mut out[..]));
    assert_eq!(out[..12], bytes[..12]);
    assert!(
        out[12..].iter().all(|&b| b == 0),
        "ICV zeroed for computation"
    );
}

#[test]
fn every_truncation_is_rejected() {
    let bytes = hex::decode(PACKET).unwrap();
    for len in 0..24 {
        assert_eq!(
            AhPacket::new_checked(&bytes[..len]).unwrap_err(),
            Error::Truncated
        );
    }
}

#[test]
fn length_and_alignment() {
    let mut bytes = hex::decode(PACKET).unwrap();
    for payload_len in [0u8, 1] {
        bytes[1] = payload_len; // 8 or 12 octets
        let result = AhPacket::new_checked(&bytes[..]);
        assert_eq!(result.is_ok(), payload_len == 1);
    }
    bytes[1] = 0;
    assert_eq!(
        AhPacket::new_checked(&bytes[..]).unwrap_err(),
        Error::Malformed
    );
    bytes[1] = 5; // 28 octets: fine over IPv4, not over IPv6
    let p = AhPacket::new_checked(&bytes[..]).unwrap();
    assert!(p.check_alignment(false).is_ok());
    assert_eq!(p.check_alignment(true).unwrap_err(), Error::Malformed);
    assert!(p.payload().is_empty());
}

#[test]
fn spi_zero_refused() {
    let mut bytes = hex::decode(PACKET).unwrap();
    bytes[4..8].fill(0);
    let p = AhPacket::new_checked(&bytes[..]).unwrap();
    assert_eq!(AhRepr::parse(&p).unwrap_err(), Error::Malformed);
}

#[test]
fn icv_padding() {
    // (ICV, IPv6?, padded ICV field): HMAC-SHA1-96, HMAC-SHA-256-128,
    // HMAC-SHA-384-192, HMAC-SHA-512-256.
    let table = [
        (12, false, 12),
        (12, true, 12),
        (16, false, 16),
        (16, true, 20),
        (24, false, 24),
        (24, true, 28),
        (32, false, 32),
        (32, true, 36),
        (0, true, 4),
    ];
    for (icv, v6, padded) in table {
        assert_eq!(padded_icv_len(icv, v6), padded, "{icv} {v6}");
        let repr = AhRepr {
            next_header: IpProtocol::TCP,
            spi: 1,
            sequence_number: 1,
            icv_len: padded,
        };
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut AhPacket::new_unchecked(&mut out[..]));
        let p = AhPacket::new_checked(&out[..]).unwrap();
        assert!(p.check_alignment(v6).is_ok());
        assert_eq!(AhRepr::parse(&p).unwrap(), repr);
    }
}

#[test]
fn odd_and_huge_icv_lengths_stay_encodable() {
    let mut repr = AhRepr {
        next_header: IpProtocol::UDP,
        spi: 9,
        sequence_number: 0,
        icv_len: 13,
    };
    assert_eq!(repr.header_len(), 28);
    repr.icv_len = 100_000;
    assert_eq!(repr.header_len(), MAX_HEADER_LEN);
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut AhPacket::new_unchecked(&mut out[..]));
    let p = AhPacket::new_checked(&out[..]).unwrap();
    assert_eq!((p.payload_len(), p.icv().len()), (255, MAX_ICV_LEN));
}

#[test]
fn setters() {
    let mut bytes = hex::decode(PACKET).unwrap();
    let mut p = AhPacket::new_checked(&mut bytes[..]).unwrap();
    p.set_next_header(IpProtocol::IPV6);
    p.set_reserved(0xffff);
    p.set_spi(2);
    p.set_sequence_number(3);
    p.icv_mut().fill(0);
    p.payload_mut()[0] = 0x60;
    p.set_payload_len(1);
    assert_eq!(p.header_len(), 12);
    assert_eq!(hex::encode(&bytes[..12]), "2901ffff0000000200000003");
    assert_eq!(bytes[24], 0x60);
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        crate::fuzzing::ah(&bytes);
    }

    #[test]
    fn padded_lengths_align(icv in 0usize..300, v6 in any::<bool>()) {
        let padded = padded_icv_len(icv, v6);
        prop_assert!(padded >= icv && padded < icv + 8);
        prop_assert_eq!((FIXED_LEN + padded) % if v6 { 8 } else { 4 }, 0);
    }
}
