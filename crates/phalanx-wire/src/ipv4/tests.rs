use super::*;
use proptest::prelude::*;

/// The classic example header (checksum 0xb861), UDP, 192.168.0.1 ->
/// 192.168.0.199, total length 0x73, followed by its 95-octet payload.
fn example() -> Vec<u8> {
    let mut bytes =
        hex::decode("450000730000400040 11b861c0a80001c0a800c7".replace(' ', "")).unwrap();
    bytes.extend((0..95u8).map(|i| i.wrapping_mul(7)));
    bytes
}

#[test]
fn known_header() {
    let bytes = example();
    let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
    assert_eq!(p.version(), 4);
    assert_eq!(p.ihl(), 5);
    assert_eq!(p.header_len(), 20);
    assert_eq!(p.dscp_ecn(), 0);
    assert_eq!(p.total_len(), 0x73);
    assert_eq!(p.ident(), 0);
    assert_eq!(p.flags(), 0b010);
    assert!(p.dont_frag());
    assert!(!p.more_frags());
    assert_eq!(p.frag_offset(), 0);
    assert!(!p.is_fragment());
    assert_eq!(p.ttl(), 64);
    assert_eq!(p.protocol(), IpProtocol::UDP);
    assert_eq!(p.checksum(), 0xb861);
    assert!(p.verify_checksum());
    assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
    assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 0, 199));
    assert!(p.options().is_empty());
    assert_eq!(p.payload(), &bytes[20..]);

    let repr = Ipv4Repr::parse(&p).unwrap();
    assert_eq!(
        repr,
        Ipv4Repr {
            src: Ipv4Addr::new(192, 168, 0, 1),
            dst: Ipv4Addr::new(192, 168, 0, 199),
            protocol: IpProtocol::UDP,
            payload_len: 95,
            ttl: 64,
            dscp_ecn: 0,
            ident: 0,
            dont_frag: true,
        }
    );
    // Emitting the representation reproduces the header byte for byte.
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
    assert_eq!(out[..20], bytes[..20]);
}

#[test]
fn every_truncation_is_rejected() {
    let bytes = example();
    for len in 0..bytes.len() {
        assert_eq!(
            Ipv4Packet::new_checked(&bytes[..len]).unwrap_err(),
            Error::Truncated,
            "{len}"
        );
    }
}

#[test]
fn payload_ends_at_total_length() {
    let mut bytes = example();
    bytes.extend_from_slice(&[0xee; 6]); // Ethernet padding
    let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
    assert_eq!(p.payload().len(), 95);
    assert_eq!(p.payload(), &example()[20..]);
}

#[test]
fn options_are_skipped() {
    // IHL 6 with a Router Alert option (RFC 2113: 94 04 0000), then 4 octets.
    let mut bytes =
        hex::decode("4600001c12340000011100000a0000010a00000294040000deadbeef").unwrap();
    let mut p = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
    p.fill_checksum();
    assert!(p.verify_checksum());
    assert_eq!(p.header_len(), 24);
    assert_eq!(p.options(), &[0x94, 0x04, 0x00, 0x00]);
    assert_eq!(p.payload(), &[0xde, 0xad, 0xbe, 0xef]);
    let repr = Ipv4Repr::parse(&p).unwrap();
    assert_eq!(repr.payload_len, 4);
    assert_eq!(repr.ident, 0x1234);
    assert!(!repr.dont_frag);
}

#[test]
fn malformed_lengths() {
    let mut bytes = example();
    bytes[0] = 0x44; // IHL 4 < 5
    assert_eq!(
        Ipv4Packet::new_checked(&bytes[..]).unwrap_err(),
        Error::Malformed
    );
    let mut bytes = example();
    bytes[2..4].copy_from_slice(&19u16.to_be_bytes()); // total < header
    assert_eq!(
        Ipv4Packet::new_checked(&bytes[..]).unwrap_err(),
        Error::Malformed
    );
    let mut bytes = example();
    bytes[0] = 0x4f; // IHL 15: 60 octets, fine against a 115-octet total
    assert!(Ipv4Packet::new_checked(&bytes[..]).is_ok());
    bytes[2..4].copy_from_slice(&40u16.to_be_bytes()); // total < 60
    assert_eq!(
        Ipv4Packet::new_checked(&bytes[..]).unwrap_err(),
        Error::Malformed
    );
}

#[test]
fn parse_rejects_version_checksum_fragment() {
    let mut bytes = example();
    bytes[0] = 0x65;
    let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
    assert_eq!(Ipv4Repr::parse(&p).unwrap_err(), Error::BadVersion);

    let mut bytes = example();
    bytes[8] = 63; // TTL changed without the checksum
    let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
    assert!(!p.verify_checksum());
    assert_eq!(Ipv4Repr::parse(&p).unwrap_err(), Error::BadChecksum);

    for (mf, off) in [(true, 0), (false, 1), (true, 100)] {
        let mut bytes = example();
        let mut p = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
        p.set_more_frags(mf);
        p.set_frag_offset(off);
        p.fill_checksum();
        assert!(p.is_fragment());
        assert_eq!(Ipv4Repr::parse(&p).unwrap_err(), Error::Fragment);
    }
}

#[test]
fn setters_touch_only_their_bits() {
    let mut bytes = example();
    let mut p = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
    p.set_frag_offset(0x1fff);
    p.set_more_frags(true);
    assert!(p.dont_frag());
    p.set_dont_frag(false);
    assert_eq!((p.flags(), p.frag_offset()), (0b001, 0x1fff));
    p.set_frag_offset(0xffff);
    assert_eq!(p.frag_offset(), 0x1fff);
    p.set_version(6);
    assert_eq!((p.version(), p.ihl()), (6, 5));
    p.set_header_len(24);
    assert_eq!((p.version(), p.header_len()), (6, 24));
    p.set_ttl(1);
    p.set_protocol(IpProtocol::ESP);
    p.set_dscp_ecn(0xb8);
    p.set_ident(0xbeef);
    p.set_src_addr(Ipv4Addr::new(10, 0, 0, 1));
    p.set_dst_addr(Ipv4Addr::new(10, 0, 0, 2));
    assert_eq!(p.ttl(), 1);
    assert_eq!(p.protocol(), IpProtocol::ESP);
    assert_eq!(p.dscp_ecn(), 0xb8);
    assert_eq!(p.ident(), 0xbeef);
    assert_eq!(p.src_addr(), Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(p.dst_addr(), Ipv4Addr::new(10, 0, 0, 2));
    p.options_mut().copy_from_slice(&[1, 1, 1, 0]);
    p.payload_mut()[0] = 0x55;
    p.fill_checksum();
    assert!(p.verify_checksum());
    assert_eq!(p.options(), &[1, 1, 1, 0]);
    assert_eq!(p.payload()[0], 0x55);
}

#[test]
fn unchecked_view_clamps_variable_parts() {
    // A header claiming more than the buffer: payload and options are cut.
    let bytes = hex::decode("4f00ffff0000000040110000c0a80001c0a800c7").unwrap();
    let p = Ipv4Packet::new_unchecked(&bytes[..]);
    assert!(p.check_len().is_err());
    assert!(p.options().is_empty());
    assert!(p.payload().is_empty());
    assert!(Ipv4Repr::parse(&p).is_err());
}

#[test]
fn oversized_payload_saturates() {
    let repr = Ipv4Repr {
        src: Ipv4Addr::LOCALHOST,
        dst: Ipv4Addr::LOCALHOST,
        protocol: IpProtocol::TCP,
        payload_len: 70_000,
        ttl: 1,
        dscp_ecn: 0,
        ident: 0,
        dont_frag: false,
    };
    let mut out = [0u8; 20];
    repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
    assert_eq!(Ipv4Packet::new_unchecked(&out[..]).total_len(), u16::MAX);
}

fn arb_repr() -> impl Strategy<Value = Ipv4Repr> {
    (
        any::<[u8; 4]>(),
        any::<[u8; 4]>(),
        any::<u8>(),
        0usize..2000,
        any::<u8>(),
    )
        .prop_flat_map(|(s, d, proto, len, ttl)| {
            (any::<u8>(), any::<u16>(), any::<bool>()).prop_map(move |(tos, ident, df)| Ipv4Repr {
                src: Ipv4Addr::from(s),
                dst: Ipv4Addr::from(d),
                protocol: IpProtocol(proto),
                payload_len: len,
                ttl,
                dscp_ecn: tos,
                ident,
                dont_frag: df,
            })
        })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        crate::fuzzing::ipv4(&bytes);
    }

    #[test]
    fn mostly_valid_headers_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 20..128),
                                        ihl in 5u8..16, total in 0u16..140) {
        bytes[0] = 0x40 | ihl;
        bytes[2..4].copy_from_slice(&total.to_be_bytes());
        crate::fuzzing::ipv4(&bytes);
    }

    #[test]
    fn repr_round_trip(repr in arb_repr()) {
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
        let p = Ipv4Packet::new_checked(&out[..]).unwrap();
        prop_assert!(p.verify_checksum());
        prop_assert_eq!(Ipv4Repr::parse(&p).unwrap(), repr);
    }
}
