use super::*;
use proptest::prelude::*;

// Frames captured with tcpdump on a Linux veth pair (02:00:00:00:00:0a is
// 192.0.2.1, 02:00:00:00:00:0b is 192.0.2.2), not built with this crate.

/// An ICMP echo request's first octets: untagged IPv4.
const IPV4_FRAME: &str = "02000000000b02000000000a08004500005400";
/// The ARP request `who-has 192.0.2.2 tell 192.0.2.1`.
const ARP_REQUEST: &str = "ffffffffffff02000000000a080600010800060400010200000000\
0ac00002010000000000 00c0000202";

fn bytes(hex: &str) -> Vec<u8> {
    hex::decode(hex.replace(' ', "")).unwrap()
}

const A: MacAddress = MacAddress([2, 0, 0, 0, 0, 0x0a]);
const B: MacAddress = MacAddress([2, 0, 0, 0, 0, 0x0b]);

#[test]
fn untagged_ipv4_frame() {
    let data = bytes(IPV4_FRAME);
    let f = EthernetFrame::new_checked(&data[..]).unwrap();
    assert_eq!((f.dst_addr(), f.src_addr()), (B, A));
    assert_eq!(
        (f.ethertype(), f.outer_ethertype()),
        (EtherType::IPV4, EtherType::IPV4)
    );
    assert_eq!((f.vlan(), f.header_len()), (None, 14));
    assert_eq!(&f.payload()[..2], &[0x45, 0x00]);
    let repr = EthernetRepr::parse(&f).unwrap();
    assert_eq!(
        repr,
        EthernetRepr {
            dst_addr: B,
            src_addr: A,
            vlan: None,
            ethertype: EtherType::IPV4
        }
    );
    let mut out = vec![0u8; repr.header_len()];
    repr.emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
    assert_eq!(out, data[..14]);
}

#[test]
fn broadcast_arp_frame() {
    let data = bytes(ARP_REQUEST);
    let f = EthernetFrame::new_checked(&data[..]).unwrap();
    assert!(f.dst_addr().is_broadcast() && f.dst_addr().is_multicast());
    assert!(f.src_addr().is_unicast() && f.src_addr().is_locally_administered());
    assert_eq!(f.ethertype(), EtherType::ARP);
    assert_eq!(f.payload().len(), 28);
}

/// An 802.1Q frame built by hand from IEEE 802.1Q §9.6: TPID 0x8100, TCI
/// PCP 5, DEI 1, VID 42 (0xb02a), inner type IPv6.
#[test]
fn tagged_frame_reports_its_tag_and_keeps_it() {
    let mut data = bytes("02000000000b02000000000a8100b02a86dd6000");
    let f = EthernetFrame::new_checked(&data[..]).unwrap();
    let tag = VlanTag {
        pcp: 5,
        dei: true,
        vid: 42,
    };
    assert_eq!(f.vlan(), Some(tag));
    assert_eq!(tag.tci(), 0xb02a);
    assert_eq!(
        (f.outer_ethertype(), f.ethertype()),
        (EtherType::VLAN, EtherType::IPV6)
    );
    assert_eq!((f.header_len(), f.payload()), (18, &[0x60, 0x00][..]));
    let repr = EthernetRepr::parse(&f).unwrap();
    assert_eq!((repr.vlan, repr.header_len()), (Some(tag), 18));
    let mut out = vec![0u8; 18];
    repr.emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
    assert_eq!(out, data[..18]);

    let mut f = EthernetFrame::new_checked(&mut data[..]).unwrap();
    f.set_ethertype(EtherType::IPV4);
    f.set_dst_addr(MacAddress::BROADCAST);
    f.set_src_addr(B);
    f.payload_mut()[0] = 0x45;
    assert_eq!(
        hex::encode(&data),
        "ffffffffffff02000000000b8100b02a08004500"
    );
}

#[test]
fn short_buffers_are_truncated() {
    let data = bytes("02000000000b02000000000a8100b02a86dd");
    assert_eq!(
        EthernetFrame::new_checked(&data[..13]).unwrap_err(),
        Error::Truncated
    );
    assert_eq!(
        EthernetFrame::new_checked(&data[..17]).unwrap_err(),
        Error::Truncated,
        "tag cut"
    );
    assert!(EthernetFrame::new_checked(&data[..18]).is_ok());
    let ipv4 = bytes(IPV4_FRAME);
    let untagged = EthernetFrame::new_checked(&ipv4[..14]).unwrap();
    assert!(untagged.payload().is_empty());
}

#[test]
fn length_field_frames_are_not_ethernet_ii() {
    // An 802.3 frame: Length 0x002e, then an LLC header.
    let data = bytes("0180c200000002000000000a002e424203");
    let f = EthernetFrame::new_checked(&data[..]).unwrap();
    assert!(f.ethertype().is_length());
    assert_eq!(EthernetRepr::parse(&f).unwrap_err(), Error::Malformed);
    assert!(!EtherType(0x0600).is_length() && EtherType(0x05ff).is_length());
}

#[test]
fn ethertype_names() {
    assert_eq!(format!("{:?}", EtherType::ARP), "ARP");
    assert_eq!(format!("{}", EtherType(0x88b5)), "EtherType(34997)");
    assert_eq!(EtherType::IPV6.name(), Some("IPV6"));
}

#[test]
fn mac_address_text() {
    let mac: MacAddress = "02:00:5E:00:01:ff".parse().unwrap();
    assert_eq!(mac, MacAddress([2, 0, 0x5e, 0, 1, 0xff]));
    assert_eq!(mac.to_string(), "02:00:5e:00:01:ff");
    assert_eq!(format!("{mac:?}"), "02:00:5e:00:01:ff");
    assert_eq!("02-00-5e-00-01-ff".parse::<MacAddress>(), Ok(mac));
    for bad in [
        "",
        "02:00:5e:00:01",
        "02:00:5e:00:01:ff:",
        "02:00:5e:00:01:fg",
        "02.00:5e:00:01:ff",
        "0200:5e:00:01:ff:",
    ] {
        assert_eq!(bad.parse::<MacAddress>(), Err(Error::Malformed), "{bad:?}");
    }
}

#[test]
fn mac_address_kinds() {
    assert!(MacAddress::BROADCAST.is_broadcast() && !MacAddress::BROADCAST.is_unicast());
    let ipv6_multicast = MacAddress([0x33, 0x33, 0xff, 0, 0, 0x0a]); // RFC 2464 §7
    assert!(ipv6_multicast.is_multicast() && !ipv6_multicast.is_broadcast());
    assert!(!MacAddress::UNSPECIFIED.is_unicast());
    let global = MacAddress([0x00, 0x1b, 0x21, 1, 2, 3]);
    assert!(global.is_unicast() && !global.is_locally_administered());
    assert_eq!(MacAddress::from_slice(&[1, 2, 3, 4, 5]), None);
    assert_eq!(
        MacAddress::from_slice(&[1, 2, 3, 4, 5, 6, 7]).map(MacAddress::octets),
        Some([1, 2, 3, 4, 5, 6])
    );
}

#[test]
fn tci_fields() {
    let table = [
        (0x0000, 0, false, 0),
        (0x0fff, 0, false, 0xfff),
        (0x1000, 0, true, 0),
        (0xe001, 7, false, 1),
        (0xffff, 7, true, 0xfff),
    ];
    for (tci, pcp, dei, vid) in table {
        let tag = VlanTag::from_tci(tci);
        assert_eq!(tag, VlanTag { pcp, dei, vid }, "{tci:#06x}");
        assert_eq!(tag.tci(), tci);
    }
    let wide = VlanTag {
        pcp: 9,
        dei: false,
        vid: 0x1234,
    };
    assert_eq!(wide.tci(), 0x2234, "cut to 3 and 12 bits");
}

fn mac() -> impl Strategy<Value = MacAddress> {
    any::<[u8; 6]>().prop_map(MacAddress)
}

fn repr() -> impl Strategy<Value = EthernetRepr> {
    let tag =
        (0u8..8, any::<bool>(), 0u16..4096).prop_map(|(pcp, dei, vid)| VlanTag { pcp, dei, vid });
    // An untagged repr never has the VLAN type: that would describe a tag.
    let ethertype = (0x0600u16..).prop_filter("untagged", |t| *t != EtherType::VLAN.0);
    (mac(), mac(), proptest::option::of(tag), ethertype).prop_map(
        |(dst_addr, src_addr, vlan, t)| EthernetRepr {
            dst_addr,
            src_addr,
            vlan,
            ethertype: EtherType(t),
        },
    )
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        fuzzing::ethernet_arp(&bytes);
    }

    /// Frames typed ARP reach the ARP half of the harness through the
    /// Ethernet payload.
    #[test]
    fn arbitrary_arp_frames_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 14..80)) {
        bytes[12..14].copy_from_slice(&EtherType::ARP.0.to_be_bytes());
        fuzzing::ethernet_arp(&bytes);
    }

    #[test]
    fn parse_of_emit_is_identity(repr in repr(), payload in proptest::collection::vec(any::<u8>(), 0..40)) {
        let mut out = vec![0u8; repr.header_len() + payload.len()];
        let mut frame = EthernetFrame::new_unchecked(&mut out[..]);
        repr.emit(&mut frame);
        frame.payload_mut().copy_from_slice(&payload);
        let frame = EthernetFrame::new_checked(&out[..]).unwrap();
        prop_assert_eq!(EthernetRepr::parse(&frame), Ok(repr));
        prop_assert_eq!(frame.payload(), &payload[..]);
    }

    #[test]
    fn mac_text_round_trips(mac in mac()) {
        prop_assert_eq!(mac.to_string().parse::<MacAddress>(), Ok(mac));
    }
}
