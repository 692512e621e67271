//! Every malformed length, count and structure is an `Err`, never a panic
//! or a silently shortened parse.

use alloc::vec::Vec;

use super::captured::{ike_sa_init, octets};
use crate::error::Error;
use crate::ike::iana::*;
use crate::ike::limits::MAX_PAYLOADS;
use crate::ike::*;

#[test]
fn every_truncation_is_refused() {
    let bytes = ike_sa_init();
    for len in 0..bytes.len() {
        let cut = &bytes[..len];
        // Under 28 octets the header is cut; from 28 on, Length runs past.
        assert_eq!(
            IkeHeader::new_checked(cut).unwrap_err(),
            Error::Truncated,
            "{len}"
        );
        assert!(MessageRepr::parse(cut).is_err(), "{len}");
    }
}

#[test]
fn header_length_field() {
    let mut bytes = ike_sa_init();
    // Length under the header.
    bytes[24..28].copy_from_slice(&27u32.to_be_bytes());
    assert_eq!(
        IkeHeader::new_checked(&bytes[..]).unwrap_err(),
        Error::Malformed
    );
    // Length past the buffer.
    bytes[24..28].copy_from_slice(&209u32.to_be_bytes());
    assert_eq!(
        IkeHeader::new_checked(&bytes[..]).unwrap_err(),
        Error::Truncated
    );
    bytes[24..28].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(
        IkeHeader::new_checked(&bytes[..]).unwrap_err(),
        Error::Truncated
    );
    // Octets after Length: the view bounds the chain, the message refuses them.
    let mut bytes = ike_sa_init();
    bytes.push(0);
    let h = IkeHeader::new_checked(&bytes[..]).unwrap();
    assert_eq!(h.payload_chain().len(), 180);
    assert_eq!(MessageRepr::parse(&bytes), Err(Error::Malformed));
    // Over MAX_MESSAGE_LEN: two 40,000-octet Vendor IDs.
    let mut big = ike_sa_init()[..28].to_vec();
    big[16] = PayloadType::VENDOR_ID.0;
    for next in [PayloadType::VENDOR_ID.0, 0] {
        big.extend_from_slice(&[next, 0, 0x9c, 0x44]);
        big.resize(big.len() + 40_000, 0);
    }
    let len = u32::try_from(big.len()).unwrap();
    big[24..28].copy_from_slice(&len.to_be_bytes());
    assert!(IkeHeader::new_checked(&big[..]).is_ok());
    assert_eq!(MessageRepr::parse(&big), Err(Error::Malformed));
}

#[test]
fn major_version_is_a_separate_check() {
    let mut bytes = ike_sa_init();
    bytes[17] = 0x30; // IKE 3.0
    let h = IkeHeader::new_checked(&bytes[..]).unwrap();
    assert_eq!(h.check_version(), Err(Error::BadVersion));
    assert_eq!(h.initiator_spi(), 0x0011_2233_4455_6677);
    assert_eq!(IkeHeaderRepr::parse(&h), Err(Error::BadVersion));
    assert_eq!(MessageRepr::parse(&bytes), Err(Error::BadVersion));
    // The minor version and the V flag are ignored on receipt.
    bytes[17] = 0x21;
    bytes[19] |= 0x10;
    assert!(MessageRepr::parse(&bytes).is_ok());
}

#[test]
fn payload_length_field() {
    // Under 4, past the end, and short of the end.
    for (len, expected) in [
        (0u16, Error::Malformed),
        (3, Error::Malformed),
        (9, Error::Truncated),
    ] {
        let mut chain = octets(&["00 00 0008 01020304"]);
        chain[2..4].copy_from_slice(&len.to_be_bytes());
        let mut walk = PayloadIter::new(PayloadType::VENDOR_ID, &chain);
        assert_eq!(walk.next(), Some(Err(expected)), "{len}");
        assert_eq!(walk.next(), None, "stops after an error");
        assert_eq!(
            parse_payloads(PayloadType::VENDOR_ID, &chain),
            Err(expected)
        );
        assert_eq!(
            GenericPayloadHeader::new_checked(&chain[..]).unwrap_err(),
            expected
        );
    }
    let short = octets(&["00 00 0006 01020304"]);
    assert_eq!(
        parse_payloads(PayloadType::VENDOR_ID, &short),
        Err(Error::Malformed)
    );
    // A generic header cut short.
    assert_eq!(
        parse_payloads(PayloadType::VENDOR_ID, &[0, 0, 0]),
        Err(Error::Truncated)
    );
    // Next Payload NONE but octets follow; no first payload but octets.
    assert_eq!(
        parse_payloads(PayloadType::NONE, &[0, 0, 0, 4]),
        Err(Error::Malformed)
    );
    assert_eq!(parse_payloads(PayloadType::NONE, &[]), Ok(Vec::new()));
}

#[test]
fn too_many_payloads() {
    // `n` empty Vendor IDs, the last ending the chain.
    let chain = |n: usize| {
        let mut chain = octets(&["2b 00 0004"]).repeat(n);
        let last = chain.len() - 4;
        chain[last] = 0;
        chain
    };
    let too_many = chain(MAX_PAYLOADS + 1);
    assert_eq!(
        parse_payloads(PayloadType::VENDOR_ID, &too_many),
        Err(Error::Malformed)
    );
    let fits = chain(MAX_PAYLOADS);
    assert_eq!(
        parse_payloads(PayloadType::VENDOR_ID, &fits).unwrap().len(),
        MAX_PAYLOADS
    );
    let vid = Payload::VendorId(VendorIdPayload { data: Vec::new() });
    let many: Vec<Payload> = core::iter::repeat_n(vid, MAX_PAYLOADS + 1).collect();
    assert_eq!(emit_payloads(&many), Err(Error::Malformed));
}

/// The SA payload of `ike_sa_init` with one octet changed.
fn sa_with(at: usize, value: u8) -> Result<SaPayload, Error> {
    let bytes = ike_sa_init();
    let mut body = bytes[32..76].to_vec();
    body[at] = value;
    SaPayload::parse(&body)
}

#[test]
fn sa_structure() {
    let bytes = ike_sa_init();
    assert!(SaPayload::parse(&bytes[32..76]).is_ok());
    assert_eq!(
        sa_with(0, 2),
        Err(Error::Malformed),
        "more proposals announced, none follow"
    );
    assert_eq!(
        sa_with(3, 45),
        Err(Error::Truncated),
        "proposal length past the body"
    );
    assert_eq!(
        sa_with(3, 43),
        Err(Error::Truncated),
        "proposal length cuts its last transform"
    );
    assert_eq!(
        sa_with(3, 3),
        Err(Error::Malformed),
        "proposal length under its header"
    );
    assert_eq!(sa_with(6, 3), Err(Error::Malformed), "SPI size 3");
    assert_eq!(
        sa_with(7, 5),
        Err(Error::Malformed),
        "one transform too many announced"
    );
    assert_eq!(
        sa_with(7, 3),
        Err(Error::Malformed),
        "one transform too few"
    );
    assert_eq!(
        sa_with(8, 0),
        Err(Error::Malformed),
        "first transform marked last"
    );
    assert_eq!(
        sa_with(36, 3),
        Err(Error::Malformed),
        "last transform marked more"
    );
    assert_eq!(
        sa_with(11, 7),
        Err(Error::Malformed),
        "transform length under its header"
    );
    assert_eq!(
        sa_with(11, 13),
        Err(Error::Truncated),
        "transform overlaps the next"
    );
    assert_eq!(
        sa_with(16, 0x00),
        Err(Error::Truncated),
        "TV turned TLV of 256 octets"
    );
    assert_eq!(SaPayload::parse(&[]), Err(Error::Truncated), "no proposal");
    let mut padded = bytes[32..76].to_vec();
    padded.push(0);
    padded[3] = 45;
    assert_eq!(
        SaPayload::parse(&padded),
        Err(Error::Malformed),
        "octet after the transforms"
    );
}

#[test]
fn nonce_bounds() {
    for (len, ok) in [
        (0, false),
        (15, false),
        (16, true),
        (256, true),
        (257, false),
    ] {
        let body = alloc::vec![1u8; len];
        assert_eq!(NoncePayload::parse(&body).is_ok(), ok, "{len}");
    }
}

#[test]
fn ts_structure() {
    let v4 = "07 06 0010 0000 ffff 0a000000 0a0000ff";
    assert!(TsPayload::parse(&octets(&["01 000000", v4])).is_ok());
    // Count larger / smaller than the selectors present.
    assert_eq!(
        TsPayload::parse(&octets(&["02 000000", v4])),
        Err(Error::Truncated)
    );
    assert_eq!(
        TsPayload::parse(&octets(&["00 000000", v4])),
        Err(Error::Malformed)
    );
    // Selector Length not 16 for IPv4, or under 4.
    let long = octets(&["01 000000 07 06 0014 0000 ffff 0a000000 0a0000ff 00000000"]);
    assert_eq!(TsPayload::parse(&long), Err(Error::Malformed));
    let short = octets(&["01 000000 07 06 000c 0000 ffff 0a000000"]);
    assert_eq!(TsPayload::parse(&short), Err(Error::Malformed));
    let tiny = octets(&["01 000000 07 06 0003"]);
    assert_eq!(TsPayload::parse(&tiny), Err(Error::Malformed));
    // An IPv6 type with IPv4-sized addresses.
    let mixed = octets(&["01 000000 08 06 0010 0000 ffff 0a000000 0a0000ff"]);
    assert_eq!(TsPayload::parse(&mixed), Err(Error::Malformed));
    // An unknown type is kept as data (TS_SECLABEL, RFC 9478).
    let label = TsPayload::parse(&octets(&["01 000000 0a 00 0007 616263"])).unwrap();
    assert_eq!(label.unknown_selectors[0].ts_type, TsType::TS_SECLABEL);
    assert_eq!(label.unknown_selectors[0].data, b"abc");
    let over = octets(&["41 000000"]);
    assert_eq!(
        TsPayload::parse(&over),
        Err(Error::Malformed),
        "65 selectors"
    );
}

#[test]
fn delete_structure() {
    let parse = |hex: &str| DeletePayload::parse(&octets(&[hex]));
    assert!(parse("03 04 0001 c0000001").is_ok());
    assert_eq!(parse("03 04 0002 c0000001"), Err(Error::Truncated));
    assert_eq!(parse("03 04 0001 c0000001 00"), Err(Error::Malformed));
    assert_eq!(parse("01 08 0001 0011223344556677"), Err(Error::Malformed));
    assert_eq!(parse("01 00 0001"), Err(Error::Malformed));
    assert_eq!(parse("03 04 ffff"), Err(Error::Truncated));
}

#[test]
fn short_fixed_parts() {
    assert_eq!(KePayload::parse(&[0, 31, 0]), Err(Error::Truncated));
    assert_eq!(IdPayload::parse(&[2, 0, 0]), Err(Error::Truncated));
    assert_eq!(AuthPayload::parse(&[2]), Err(Error::Truncated));
    assert_eq!(CertPayload::parse(&[]), Err(Error::Truncated));
    assert_eq!(CertReqPayload::parse(&[]), Err(Error::Truncated));
    assert_eq!(NotifyPayload::parse(&[0, 0, 0x40]), Err(Error::Truncated));
    assert_eq!(
        NotifyPayload::parse(&[3, 4, 0x40, 0x09, 1, 2]),
        Err(Error::Truncated)
    );
    assert_eq!(
        CpPayload::parse(&[1, 0, 0, 0, 0, 1, 0, 4, 1]),
        Err(Error::Truncated)
    );
    assert_eq!(
        SkfPayload::parse(PayloadType::NONE, &[0, 1]),
        Err(Error::Truncated)
    );
}

#[test]
fn fragment_numbers() {
    let parse = |n: u16, total: u16| {
        let mut body = Vec::new();
        body.extend_from_slice(&n.to_be_bytes());
        body.extend_from_slice(&total.to_be_bytes());
        SkfPayload::parse(PayloadType::SA, &body)
    };
    assert!(parse(1, 1).is_ok() && parse(3, 3).is_ok());
    assert_eq!(parse(0, 3), Err(Error::Malformed));
    assert_eq!(parse(4, 3), Err(Error::Malformed));
    assert_eq!(parse(0, 0), Err(Error::Malformed));
}

#[test]
fn unknown_payloads() {
    // Vendor-private type 200 after a Nonce: non-critical, then critical.
    for (flags, critical) in [(0x00u8, false), (0x80, true), (0x7f, false)] {
        let mut chain = octets(&["c8 00 0014", &"11".repeat(16), "00 00 0006 abcd"]);
        chain[21] = flags;
        let payloads = parse_payloads(PayloadType::NONCE, &chain).unwrap();
        assert_eq!(
            payloads[1],
            Payload::Unknown {
                ty: PayloadType(200),
                critical,
                body: alloc::vec![0xab, 0xcd]
            }
        );
        let message = MessageRepr {
            initiator_spi: 1,
            responder_spi: 2,
            exchange_type: ExchangeType::INFORMATIONAL,
            initiator: false,
            response: true,
            message_id: 7,
            payloads,
        };
        let expected = critical.then_some(PayloadType(200));
        assert_eq!(message.unsupported_critical_payload(), expected);
    }
    // The Critical bit on a known type is ignored (RFC 7296 §2.5).
    let chain = octets(&["00 80 0006 abcd"]);
    let payloads = parse_payloads(PayloadType::VENDOR_ID, &chain).unwrap();
    assert!(!payloads[0].is_unsupported_critical());
}

#[test]
fn emit_refuses_what_cannot_be_encoded() {
    let sk = Payload::Sk(SkPayload {
        first_inner: PayloadType::IDi,
        body: alloc::vec![0; 16],
    });
    let nonce = Payload::Nonce(NoncePayload {
        data: alloc::vec![0; 16],
    });
    assert_eq!(
        emit_payloads(&[sk.clone(), nonce.clone()]),
        Err(Error::Malformed),
        "SK not last"
    );
    assert!(emit_payloads(&[nonce, sk]).is_ok());
    let huge = Payload::VendorId(VendorIdPayload {
        data: alloc::vec![0; 65_532],
    });
    assert_eq!(
        emit_payloads(&[huge]),
        Err(Error::Malformed),
        "payload over 65535"
    );
    let none = Payload::Unknown {
        ty: PayloadType::NONE,
        critical: false,
        body: Vec::new(),
    };
    assert_eq!(emit_payloads(&[none]), Err(Error::Malformed));
    let spi = NotifyPayload {
        spi: alloc::vec![0; 256],
        ..NotifyPayload::new(NotifyType::INVALID_SPI, Vec::new())
    };
    assert_eq!(
        emit_payloads(&[Payload::Notify(spi)]),
        Err(Error::Malformed)
    );
    let big_vid = || {
        Payload::VendorId(VendorIdPayload {
            data: alloc::vec![0; 40_000],
        })
    };
    let message = MessageRepr {
        initiator_spi: 1,
        responder_spi: 0,
        exchange_type: ExchangeType::IKE_SA_INIT,
        initiator: true,
        response: false,
        message_id: 0,
        payloads: alloc::vec![big_vid(), big_vid()],
    };
    assert_eq!(
        message.emit_to_vec(),
        Err(Error::Malformed),
        "message over 64 KiB"
    );
}
