use super::*;
use proptest::prelude::*;

/// SPI 0x12345678, sequence number 1, then 8 octets of IV/ciphertext/ICV.
const PACKET: &str = "1234567800000001a1a2a3a4a5a6a7a8";

#[test]
fn header_fields() {
    let bytes = hex::decode(PACKET).unwrap();
    let p = EspPacket::new_checked(&bytes[..]).unwrap();
    assert_eq!((p.spi(), p.sequence_number()), (0x1234_5678, 1));
    assert_eq!(p.payload(), &bytes[8..]);
    let repr = EspRepr::parse(&p).unwrap();
    assert_eq!(
        repr,
        EspRepr {
            spi: 0x1234_5678,
            sequence_number: 1
        }
    );
    let mut out = [0u8; 8];
    repr.emit(&mut EspPacket::new_unchecked(&mut out[..]));
    assert_eq!(out[..], bytes[..8]);
    assert_eq!((repr.header_len(), repr.buffer_len()), (8, 8));
}

#[test]
fn every_truncation_is_rejected() {
    let bytes = hex::decode(PACKET).unwrap();
    for len in 0..HEADER_LEN {
        assert_eq!(
            EspPacket::new_checked(&bytes[..len]).unwrap_err(),
            Error::Truncated
        );
    }
    // Exactly a header is a valid view with an empty payload.
    assert!(EspPacket::new_checked(&bytes[..8])
        .unwrap()
        .payload()
        .is_empty());
}

#[test]
fn spi_zero_is_not_esp() {
    let bytes = hex::decode("0000000000000001").unwrap();
    let p = EspPacket::new_checked(&bytes[..]).unwrap();
    assert_eq!(EspRepr::parse(&p).unwrap_err(), Error::Malformed);
}

#[test]
fn setters() {
    let mut bytes = hex::decode(PACKET).unwrap();
    let mut p = EspPacket::new_checked(&mut bytes[..]).unwrap();
    p.set_spi(0xdead_beef);
    p.set_sequence_number(u32::MAX);
    p.payload_mut()[0] = 0;
    assert_eq!(hex::encode(&bytes[..9]), "deadbeefffffffff00");
}

#[test]
fn split_decrypted_payload() {
    // An IPv4 packet's first octets, padding 1 2 3, Pad Length 3, Next Header 4.
    let plaintext = [0x45, 0x00, 0x00, 0x14, 1, 2, 3, 3, 4];
    let parts = split_plaintext(&plaintext).unwrap();
    assert_eq!(parts.payload, &[0x45, 0, 0, 0x14]);
    assert_eq!(parts.padding, &[1, 2, 3]);
    assert_eq!(
        parts.trailer,
        EspTrailer {
            pad_len: 3,
            next_header: IpProtocol::IPV4
        }
    );
    assert!(is_default_padding(parts.padding));

    // No payload at all (all padding) is still well formed.
    let parts = split_plaintext(&[1, 2, 2, 59]).unwrap();
    assert!(parts.payload.is_empty());
    assert_eq!(parts.trailer.next_header, IpProtocol::NO_NEXT_HEADER);
}

#[test]
fn bad_trailers() {
    assert_eq!(split_plaintext(&[]).unwrap_err(), Error::Truncated);
    assert_eq!(split_plaintext(&[4]).unwrap_err(), Error::Truncated);
    // Pad Length 3 but only 2 octets before the trailer.
    assert_eq!(
        split_plaintext(&[1, 2, 3, 4]).unwrap_err(),
        Error::Malformed
    );
    assert_eq!(
        EspTrailer::parse(&[0, 0xff, 41]).unwrap_err(),
        Error::Malformed
    );
    let mut tail = [0u8; 1];
    assert_eq!(
        EspTrailer {
            pad_len: 0,
            next_header: IpProtocol::IPV6
        }
        .write(&mut tail),
        Err(Error::Truncated)
    );
}

#[test]
fn trailer_write_read() {
    let mut buf = [0u8; 6];
    fill_default_padding(&mut buf[..4]);
    let trailer = EspTrailer {
        pad_len: 4,
        next_header: IpProtocol::IPV6,
    };
    trailer.write(&mut buf).unwrap();
    assert_eq!(buf, [1, 2, 3, 4, 4, 41]);
    assert_eq!(EspTrailer::parse(&buf).unwrap(), trailer);
}

#[test]
fn default_padding_table() {
    assert!(is_default_padding(&[]));
    assert!(is_default_padding(&[1]));
    assert!(is_default_padding(&[1, 2, 3, 4, 5, 6, 7]));
    assert!(!is_default_padding(&[0]));
    assert!(!is_default_padding(&[1, 3]));
    assert!(!is_default_padding(&[2, 3]));
    let mut max = [0u8; 256];
    fill_default_padding(&mut max);
    assert_eq!((max[0], max[254], max[255]), (1, 255, 1));
    assert!(is_default_padding(&max[..255]));
    assert!(!is_default_padding(&max));
}

#[test]
fn pad_len_table() {
    // (payload length, block size, padding) per RFC 4303 §2.4.
    let table = [
        (0, 16, 14),
        (1, 16, 13),
        (14, 16, 0),
        (15, 16, 15),
        (100, 16, 10),
        (0, 1, 2),
        (2, 1, 0),
        (3, 1, 3),
        (3, 4, 3),
        (6, 8, 0),
        (7, 8, 7),
        (5, 12, 9), // 12 is taken as 16
        (0, 0, 2),
        (1, 1000, 253), // capped at 256
    ];
    for (len, block, pad) in table {
        assert_eq!(pad_len_for(len, block), pad, "{len} {block}");
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        crate::fuzzing::esp(&bytes);
    }

    #[test]
    fn padding_aligns(len in 0usize..5000, shift in 0u32..6) {
        let block = 1usize << shift;
        let pad = usize::from(pad_len_for(len, block));
        prop_assert_eq!((len + pad + TRAILER_LEN) % block.max(4), 0);
        prop_assert!(pad < block.max(4));
    }

    #[test]
    fn build_then_split(payload in proptest::collection::vec(any::<u8>(), 0..100),
                        shift in 0u32..5, nh in any::<u8>()) {
        let pad = pad_len_for(payload.len(), 1 << shift);
        let mut plaintext = payload.clone();
        plaintext.resize(payload.len() + usize::from(pad) + TRAILER_LEN, 0);
        let end = plaintext.len() - TRAILER_LEN;
        fill_default_padding(&mut plaintext[payload.len()..end]);
        let trailer = EspTrailer { pad_len: pad, next_header: IpProtocol(nh) };
        trailer.write(&mut plaintext).unwrap();
        let parts = split_plaintext(&plaintext).unwrap();
        prop_assert_eq!(parts.payload, &payload[..]);
        prop_assert!(is_default_padding(parts.padding));
        prop_assert_eq!(parts.trailer, trailer);
    }
}
