use super::*;
use proptest::prelude::*;

const SRC: &str = "2001:db8::1";
const DST: &str = "2001:db8::2";

/// A fixed header (traffic class 0xb8, flow label 0x12345, hop limit 64,
/// 2001:db8::1 -> 2001:db8::2) followed by `payload`.
fn packet(next_header: u8, payload: &[u8]) -> Vec<u8> {
    let mut bytes = hex::decode("6b812345").unwrap();
    bytes.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    bytes.extend_from_slice(&[next_header, 64]);
    bytes.extend_from_slice(&SRC.parse::<Ipv6Addr>().unwrap().octets());
    bytes.extend_from_slice(&DST.parse::<Ipv6Addr>().unwrap().octets());
    bytes.extend_from_slice(payload);
    bytes
}

/// A UDP header 1234 -> 53, length 12, checksum left zero, 4 data octets.
const UDP: [u8; 12] = [0x04, 0xd2, 0x00, 0x35, 0x00, 0x0c, 0, 0, 1, 2, 3, 4];

/// An 8-octet generic extension header naming `next`, padded with PadN.
fn ext(next: u8) -> [u8; 8] {
    [next, 0, 1, 4, 0, 0, 0, 0]
}

/// A Fragment header naming `next`.
fn frag(next: u8, offset: u16, more: bool) -> [u8; 8] {
    let mut h = [0u8; 8];
    Ipv6FragmentHeader::new_unchecked(&mut h[..]).fill(IpProtocol(next), offset, more, 0xdead_beef);
    h
}

fn chain(headers: &[&[u8]], tail: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    for h in headers {
        payload.extend_from_slice(h);
    }
    payload.extend_from_slice(tail);
    payload
}

#[test]
fn fixed_header_fields() {
    let bytes = packet(17, &UDP);
    let p = Ipv6Packet::new_checked(&bytes[..]).unwrap();
    assert_eq!(p.version(), 6);
    assert_eq!(p.traffic_class(), 0xb8);
    assert_eq!(p.flow_label(), 0x12345);
    assert_eq!(p.payload_len(), 12);
    assert_eq!(p.next_header(), IpProtocol::UDP);
    assert_eq!(p.hop_limit(), 64);
    assert_eq!(p.src_addr(), SRC.parse::<Ipv6Addr>().unwrap());
    assert_eq!(p.dst_addr(), DST.parse::<Ipv6Addr>().unwrap());
    assert_eq!(p.header(), &bytes[..40]);
    assert_eq!(p.payload(), &UDP);
    let repr = Ipv6Repr::parse(&p).unwrap();
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
    assert_eq!(out[..40], bytes[..40]);
    let ul = upper_layer(&p).unwrap();
    assert_eq!(ul.protocol, IpProtocol::UDP);
    assert_eq!((ul.offset, ul.last_next_header_offset), (40, 6));
    assert!(!ul.is_fragment);
}

#[test]
fn every_truncation_is_rejected() {
    let bytes = packet(17, &UDP);
    for len in 0..bytes.len() {
        assert_eq!(
            Ipv6Packet::new_checked(&bytes[..len]).unwrap_err(),
            Error::Truncated
        );
    }
}

#[test]
fn payload_ends_at_payload_length() {
    let mut bytes = packet(17, &UDP);
    bytes.extend_from_slice(&[0xee; 5]);
    let p = Ipv6Packet::new_checked(&bytes[..]).unwrap();
    assert_eq!(p.payload(), &UDP);
    assert_eq!(p.packet().len(), 52);
}

#[test]
fn parse_rejects_wrong_version() {
    let mut bytes = packet(17, &UDP);
    bytes[0] = 0x4b;
    let p = Ipv6Packet::new_checked(&bytes[..]).unwrap();
    assert_eq!(Ipv6Repr::parse(&p).unwrap_err(), Error::BadVersion);
}

#[test]
fn walk_full_chain() {
    // HBH -> Routing -> Fragment (first) -> Destination Options -> UDP.
    let payload = chain(&[&ext(43), &ext(44), &frag(60, 0, true), &ext(17)], &UDP);
    let bytes = packet(0, &payload);
    let p = Ipv6Packet::new_checked(&bytes[..]).unwrap();
    let ul = upper_layer(&p).unwrap();
    assert_eq!(ul.protocol, IpProtocol::UDP);
    assert_eq!((ul.offset, ul.last_next_header_offset), (72, 64));
    assert!(ul.is_fragment && !ul.is_later_fragment());
    assert_eq!(bytes[ul.offset..ul.offset + 4], UDP[..4]);

    // ESP goes after the Fragment header, before the final Destination Options.
    let ins = ipsec_insertion_point(&p).unwrap();
    assert_eq!(ins.protocol, IpProtocol::IPV6_OPTS);
    assert_eq!((ins.offset, ins.last_next_header_offset), (64, 56));
}

#[test]
fn insertion_point_keeps_options_before_routing() {
    // Destination Options (for the routing hops) -> Routing -> Destination
    // Options (final) -> TCP: ESP goes after the Routing header.
    let payload = chain(&[&ext(43), &ext(60), &ext(6)], &[0u8; 20]);
    let bytes = packet(60, &payload);
    let p = Ipv6Packet::new_checked(&bytes[..]).unwrap();
    let ins = ipsec_insertion_point(&p).unwrap();
    assert_eq!(ins.protocol, IpProtocol::IPV6_OPTS);
    assert_eq!((ins.offset, ins.last_next_header_offset), (56, 48));
    let ul = upper_layer(&p).unwrap();
    assert_eq!(
        (ul.protocol, ul.offset, ul.last_next_header_offset),
        (IpProtocol::TCP, 64, 56)
    );
    // Without extension headers ESP goes right after the fixed header.
    let bytes = packet(17, &UDP);
    let ins = ipsec_insertion_point(&Ipv6Packet::new_checked(&bytes[..]).unwrap()).unwrap();
    assert_eq!(
        (ins.protocol, ins.offset, ins.last_next_header_offset),
        (IpProtocol::UDP, 40, 6)
    );
}

#[test]
fn walk_stops_at_later_fragment() {
    let payload = chain(&[&frag(17, 100, false)], &[9; 16]);
    let bytes = packet(44, &payload);
    let ul = upper_layer(&Ipv6Packet::new_checked(&bytes[..]).unwrap()).unwrap();
    assert_eq!(
        (ul.protocol, ul.offset, ul.last_next_header_offset),
        (IpProtocol::UDP, 48, 40)
    );
    assert!(ul.is_later_fragment());
    assert_eq!(ul.fragment_offset, 100);
    // Even if the fragment data happens to look like an extension header.
    let payload = chain(&[&frag(60, 3, true)], &[0xff; 16]);
    let bytes = packet(44, &payload);
    let ul = upper_layer(&Ipv6Packet::new_checked(&bytes[..]).unwrap()).unwrap();
    assert_eq!((ul.protocol, ul.offset), (IpProtocol::IPV6_OPTS, 48));
}

#[test]
fn walk_stops_at_esp_ah_and_no_next_header() {
    for (first, proto) in [
        (50u8, IpProtocol::ESP),
        (51, IpProtocol::AH),
        (59, IpProtocol::NO_NEXT_HEADER),
    ] {
        let payload = chain(&[&ext(first)], &[0; 24]);
        let bytes = packet(60, &payload);
        let ul = upper_layer(&Ipv6Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(
            (ul.protocol, ul.offset, ul.last_next_header_offset),
            (proto, 48, 40)
        );
    }
}

#[test]
fn walk_errors() {
    // Hop-by-Hop after a Routing header (RFC 8200 §4.3).
    let bytes = packet(43, &chain(&[&ext(0), &ext(17)], &UDP));
    assert_eq!(
        upper_layer(&Ipv6Packet::new_checked(&bytes[..]).unwrap()),
        Err(Error::Malformed)
    );
    // Two Fragment headers.
    let bytes = packet(44, &chain(&[&frag(44, 0, true), &frag(17, 0, true)], &UDP));
    assert_eq!(
        upper_layer(&Ipv6Packet::new_checked(&bytes[..]).unwrap()),
        Err(Error::Malformed)
    );
    // An extension header longer than Payload Length.
    let mut long = ext(17);
    long[1] = 3;
    let bytes = packet(60, &chain(&[&long], &UDP));
    assert_eq!(
        upper_layer(&Ipv6Packet::new_checked(&bytes[..]).unwrap()),
        Err(Error::Truncated)
    );
    // A chain that ends inside an extension header.
    let bytes = packet(60, &ext(60)[..5]);
    assert_eq!(
        upper_layer(&Ipv6Packet::new_checked(&bytes[..]).unwrap()),
        Err(Error::Truncated)
    );
    let bytes = packet(44, &[]);
    assert_eq!(
        upper_layer(&Ipv6Packet::new_checked(&bytes[..]).unwrap()),
        Err(Error::Truncated)
    );
}

#[test]
fn walk_is_bounded() {
    let opts = ext(60);
    let last = ext(17);
    for count in [MAX_EXTENSION_HEADERS, MAX_EXTENSION_HEADERS + 1] {
        let mut headers: Vec<&[u8]> = vec![&opts; count - 1];
        headers.push(&last);
        let bytes = packet(60, &chain(&headers, &UDP));
        let result = upper_layer(&Ipv6Packet::new_checked(&bytes[..]).unwrap());
        if count == MAX_EXTENSION_HEADERS {
            assert_eq!(result.unwrap().offset, 40 + 8 * count);
        } else {
            assert_eq!(result, Err(Error::TooManyHeaders));
        }
    }
}

#[test]
fn generic_extension_header_view() {
    let mut h = [60u8, 1, 1, 4, 0, 0, 0, 0, 0xc2, 4, 0, 0, 0, 0, 1, 0];
    let e = Ipv6ExtHeader::new_checked(&h[..]).unwrap();
    assert_eq!(
        (e.next_header(), e.hdr_ext_len(), e.header_len()),
        (IpProtocol::IPV6_OPTS, 1, 16)
    );
    assert_eq!(e.data().len(), 14);
    assert_eq!(
        Ipv6ExtHeader::new_checked(&h[..15]).unwrap_err(),
        Error::Truncated
    );
    assert_eq!(
        Ipv6ExtHeader::new_checked(&h[..1]).unwrap_err(),
        Error::Truncated
    );
    let mut e = Ipv6ExtHeader::new_checked(&mut h[..]).unwrap();
    e.set_next_header(IpProtocol::TCP);
    e.set_hdr_ext_len(0);
    e.data_mut()[0] = 7;
    assert_eq!(h[..3], [6, 0, 7]);
}

#[test]
fn fragment_header_view() {
    let h = frag(17, 0x1fff, true);
    let f = Ipv6FragmentHeader::new_checked(&h[..]).unwrap();
    assert_eq!(f.next_header(), IpProtocol::UDP);
    assert_eq!(
        (f.frag_offset(), f.more_frags(), f.ident()),
        (0x1fff, true, 0xdead_beef)
    );
    assert_eq!(h[..4], [17, 0, 0xff, 0xf9]);
    assert!(Ipv6FragmentHeader::new_checked(&h[..7]).is_err());
}

#[test]
fn options_iterator() {
    // Pad1, Router Alert (RFC 2711: 05 02 0000), an option whose data may
    // change en route (type 0x3e), PadN with 0 data octets.
    let area = [0u8, 0x05, 2, 0, 0, 0x3e, 2, 0xaa, 0xbb, 1, 0];
    let opts: Vec<_> = Ipv6Options::new(&area).collect::<Result<_>>().unwrap();
    assert_eq!(opts.len(), 4);
    assert_eq!((opts[0].option_type, opts[0].data.clone()), (0, 1..1));
    assert_eq!((opts[1].option_type, opts[1].data.clone()), (5, 3..5));
    assert!(!opts[1].may_change() && opts[1].action() == 0);
    assert_eq!(&area[opts[2].data.clone()], &[0xaa, 0xbb]);
    assert!(opts[2].may_change());
    assert_eq!(opts[3].data, 11..11);
    // Overruns end the iteration with one error.
    for bad in [&[0x05u8][..], &[0x05, 3, 0, 0][..]] {
        let items: Vec<_> = Ipv6Options::new(bad).collect();
        assert_eq!(items, vec![Err(Error::Truncated)]);
    }
}

#[test]
fn setters() {
    let mut bytes = packet(17, &UDP);
    let mut p = Ipv6Packet::new_checked(&mut bytes[..]).unwrap();
    p.set_traffic_class(0x01);
    p.set_flow_label(0xfffff);
    assert_eq!(
        (p.version(), p.traffic_class(), p.flow_label()),
        (6, 0x01, 0xfffff)
    );
    p.set_flow_label(0x1_00001);
    assert_eq!((p.traffic_class(), p.flow_label()), (0x01, 1));
    p.set_version(4);
    assert_eq!((p.version(), p.traffic_class()), (4, 1));
    p.set_payload_len(4);
    p.set_next_header(IpProtocol::ESP);
    p.set_hop_limit(1);
    p.set_src_addr(Ipv6Addr::LOCALHOST);
    p.set_dst_addr(Ipv6Addr::UNSPECIFIED);
    p.payload_mut().fill(0x77);
    assert_eq!(
        (p.payload_len(), p.next_header(), p.hop_limit()),
        (4, IpProtocol::ESP, 1)
    );
    assert_eq!(
        (p.src_addr(), p.dst_addr()),
        (Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED)
    );
    assert_eq!(bytes[40..46], [0x77, 0x77, 0x77, 0x77, 0x00, 0x0c]);
}

fn arb_chain() -> impl Strategy<Value = Vec<u8>> {
    // Extension headers with random types and lengths, then random bytes.
    let header = (
        prop_oneof![
            Just(0u8),
            Just(43),
            Just(44),
            Just(60),
            Just(135),
            any::<u8>()
        ],
        0u8..3,
        proptest::collection::vec(any::<u8>(), 0..30),
    );
    (proptest::collection::vec(header, 0..20), any::<u8>()).prop_map(|(headers, first)| {
        let mut payload = Vec::new();
        for (next, len, data) in headers {
            payload.push(next);
            payload.push(len);
            payload.extend(data.iter().take(usize::from(len) * 8 + 6));
        }
        packet(first, &payload)
    })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        crate::fuzzing::ipv6(&bytes);
    }

    #[test]
    fn arbitrary_chains_never_panic(bytes in arb_chain()) {
        crate::fuzzing::ipv6(&bytes);
    }

    #[test]
    fn repr_round_trip(src in any::<[u8; 16]>(), dst in any::<[u8; 16]>(), nh in any::<u8>(),
                       len in 0usize..600, hop in any::<u8>(), tc in any::<u8>(),
                       flow in 0u32..0x10_0000) {
        let repr = Ipv6Repr {
            src: Ipv6Addr::from(src), dst: Ipv6Addr::from(dst), next_header: IpProtocol(nh),
            payload_len: len, hop_limit: hop, traffic_class: tc, flow_label: flow,
        };
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
        prop_assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&out[..]).unwrap()).unwrap(), repr);
    }
}
