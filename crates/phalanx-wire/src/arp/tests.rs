use super::*;
use crate::ethernet::fuzzing;
use proptest::prelude::*;

// Captured with tcpdump on a Linux veth pair: 192.0.2.1 at
// 02:00:00:00:00:0a asks for 192.0.2.2, which answers from
// 02:00:00:00:00:0b. Not built with this crate.
const REQUEST_FRAME: &str =
    "ffffffffffff02000000000a0806000108000604000102000000000ac00002010000000000 00c0000202";
const REPLY_FRAME: &str =
    "02000000000a02000000000b08060001080006040002 02000000000bc000020202000000000ac0000201";

const A: MacAddress = MacAddress([2, 0, 0, 0, 0, 0x0a]);
const B: MacAddress = MacAddress([2, 0, 0, 0, 0, 0x0b]);

fn bytes(hex: &str) -> Vec<u8> {
    hex::decode(hex.replace(' ', "")).unwrap()
}

fn ip(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(192, 0, 2, last)
}

#[test]
fn captured_request() {
    let frame = bytes(REQUEST_FRAME);
    let p = ArpPacket::new_checked(&frame[14..]).unwrap();
    assert_eq!(
        (p.hardware_type(), p.protocol_type()),
        (ArpHardware::ETHERNET, EtherType::IPV4)
    );
    assert_eq!(
        (p.hardware_len(), p.protocol_len(), p.packet_len()),
        (6, 4, 28)
    );
    assert_eq!(p.operation(), ArpOperation::REQUEST);
    assert_eq!(p.sender_hardware_addr(), &A.0);
    assert_eq!(p.sender_protocol_addr(), &[192, 0, 2, 1]);
    assert_eq!(p.target_hardware_addr(), &[0; 6]);
    assert_eq!(p.target_protocol_addr(), &[192, 0, 2, 2]);
    let repr = ArpRepr::parse(&p).unwrap();
    assert_eq!(
        repr,
        ArpRepr {
            operation: ArpOperation::REQUEST,
            sender_mac: A,
            sender_ip: ip(1),
            target_mac: MacAddress::UNSPECIFIED,
            target_ip: ip(2),
        }
    );
    let mut out = [0u8; 28];
    repr.emit(&mut ArpPacket::new_unchecked(&mut out[..]));
    assert_eq!(out[..], frame[14..]);
}

/// RFC 826's reply rule reproduces the Linux kernel's reply byte for byte.
#[test]
fn reply_to_captured_request_matches_the_kernels() {
    let frame = bytes(REQUEST_FRAME);
    let request = ArpRepr::parse(&ArpPacket::new_checked(&frame[14..]).unwrap()).unwrap();
    let reply = arp_reply(&request, B);
    assert_eq!(reply.frame_dst(), A);
    let mut out = [0xffu8; 64];
    let len = reply.emit_frame(None, &mut out).unwrap();
    assert_eq!(len, 60, "padded to the minimum frame");
    let kernel = bytes(REPLY_FRAME);
    assert_eq!(out[..42], kernel[..]);
    assert_eq!(out[42..60], [0; 18]);
    assert_eq!(out[60..], [0xff; 4], "nothing written past the frame");
}

#[test]
fn gratuitous_arp_is_an_rfc5227_announcement() {
    let vip = Ipv4Addr::new(198, 51, 100, 7);
    let mac = MacAddress([2, 0, 0x5e, 0, 1, 1]);
    let g = gratuitous_arp(mac, vip);
    assert_eq!(g.operation, ArpOperation::REQUEST);
    assert_eq!((g.sender_ip, g.target_ip), (vip, vip));
    assert_eq!((g.sender_mac, g.target_mac), (mac, MacAddress::UNSPECIFIED));
    assert_eq!(g.frame_dst(), MacAddress::BROADCAST);
    let mut out = [0u8; 64];
    let len = g.emit_frame(None, &mut out).unwrap();
    assert_eq!(
        hex::encode(&out[..42]),
        "ffffffffffff02005e00010108060001080006040001 02005e000101c6336407000000000000c6336407"
            .replace(' ', "")
    );
    assert_eq!(len, 60);
}

#[test]
fn tagged_frames_carry_the_tag() {
    let g = gratuitous_arp(A, ip(1));
    let tag = VlanTag {
        pcp: 0,
        dei: false,
        vid: 7,
    };
    assert_eq!(g.frame_len(Some(tag)), 60, "46 octets still padded");
    let mut out = [0u8; 64];
    assert_eq!(g.emit_frame(Some(tag), &mut out), Ok(60));
    let frame = EthernetFrame::new_checked(&out[..60]).unwrap();
    assert_eq!(
        (frame.vlan(), frame.ethertype()),
        (Some(tag), EtherType::ARP)
    );
    let p = ArpPacket::new_checked(frame.payload()).unwrap();
    assert_eq!(ArpRepr::parse(&p), Ok(g));
    assert_eq!(
        g.emit_frame(Some(tag), &mut out[..59]),
        Err(Error::Truncated)
    );
}

#[test]
fn other_hardware_and_protocols_are_typed_errors() {
    let mut data = bytes(REQUEST_FRAME)[14..].to_vec();
    let mut p = ArpPacket::new_checked(&mut data[..]).unwrap();
    p.set_hardware_type(ArpHardware::IEEE802);
    assert_eq!(
        ArpRepr::parse(&p),
        Err(ArpError::UnsupportedHardware(ArpHardware::IEEE802))
    );
    p.set_hardware_type(ArpHardware::ETHERNET);
    p.set_protocol_type(EtherType::IPV6);
    assert_eq!(
        ArpRepr::parse(&p),
        Err(ArpError::UnsupportedProtocol(EtherType::IPV6))
    );
    p.set_protocol_type(EtherType::IPV4);
    p.set_protocol_len(2);
    assert_eq!(
        ArpRepr::parse(&p),
        Err(ArpError::AddressLength {
            hardware: 6,
            protocol: 2
        })
    );
    p.set_protocol_len(4);
    p.set_operation(ArpOperation(0x1234));
    assert_eq!(
        ArpRepr::parse(&p).unwrap().operation,
        ArpOperation(0x1234),
        "any operation is data"
    );
}

#[test]
fn lengths_bound_the_addresses() {
    let data = bytes(REQUEST_FRAME)[14..].to_vec();
    assert_eq!(
        ArpPacket::new_checked(&data[..7]).unwrap_err(),
        Error::Truncated
    );
    assert_eq!(
        ArpPacket::new_checked(&data[..27]).unwrap_err(),
        Error::Truncated
    );
    let p = ArpPacket::new_unchecked(&data[..27]);
    assert_eq!(ArpRepr::parse(&p), Err(ArpError::Truncated));
    assert_eq!(
        p.target_protocol_addr(),
        &[192, 0, 2],
        "clamped, not past the buffer"
    );
    // Ethernet padding after the packet is ignored.
    let mut padded = data.clone();
    padded.extend_from_slice(&[0xee; 18]);
    let p = ArpPacket::new_checked(&padded[..]).unwrap();
    assert_eq!(p.target_protocol_addr(), &[192, 0, 2, 2]);
    assert_eq!(ArpRepr::parse(&p).unwrap().target_ip, ip(2));
    // Wider addresses are read by the view as announced.
    let wide = bytes("0006 0800 08 04 0001 1111111111111111 0a000001 2222222222222222 0a000002");
    let p = ArpPacket::new_checked(&wide[..]).unwrap();
    assert_eq!(
        (p.packet_len(), p.target_hardware_addr()),
        (32, &[0x22; 8][..])
    );
    assert_eq!(p.target_protocol_addr(), &[10, 0, 0, 2]);
}

#[test]
fn errors_display_on_one_line() {
    for e in [
        ArpError::Truncated,
        ArpError::UnsupportedHardware(ArpHardware(6)),
        ArpError::UnsupportedProtocol(EtherType::IPV6),
        ArpError::AddressLength {
            hardware: 8,
            protocol: 4,
        },
    ] {
        let s = e.to_string();
        assert!(!s.is_empty() && !s.contains('\n'), "{e:?}");
    }
}

fn repr() -> impl Strategy<Value = ArpRepr> {
    let mac = any::<[u8; 6]>().prop_map(MacAddress);
    (any::<u16>(), mac.clone(), any::<u32>(), mac, any::<u32>()).prop_map(|(op, sm, si, tm, ti)| {
        ArpRepr {
            operation: ArpOperation(op),
            sender_mac: sm,
            sender_ip: Ipv4Addr::from(si),
            target_mac: tm,
            target_ip: Ipv4Addr::from(ti),
        }
    })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        fuzzing::ethernet_arp(&bytes);
    }

    /// Mostly-valid ARP packets reach the deep paths of the harness.
    #[test]
    fn mutated_packets_never_panic(at in 0usize..28, value in any::<u8>(), cut in 0usize..40) {
        let mut data = bytes(REQUEST_FRAME)[14..].to_vec();
        data[at] = value;
        data.resize(cut.max(8), 0);
        fuzzing::ethernet_arp(&data);
    }

    #[test]
    fn parse_of_emit_is_identity(repr in repr()) {
        let mut out = [0u8; ETHERNET_IPV4_LEN];
        repr.emit(&mut ArpPacket::new_unchecked(&mut out[..]));
        prop_assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&out[..]).unwrap()), Ok(repr));
        let mut frame = [0u8; 64];
        let len = repr.emit_frame(None, &mut frame).unwrap();
        fuzzing::ethernet_arp(&frame[..len]);
    }

    #[test]
    fn reply_answers_the_requester(request in repr(), ours in any::<[u8; 6]>()) {
        let reply = arp_reply(&request, MacAddress(ours));
        prop_assert_eq!(reply.operation, ArpOperation::REPLY);
        prop_assert_eq!((reply.sender_mac, reply.sender_ip), (MacAddress(ours), request.target_ip));
        prop_assert_eq!((reply.target_mac, reply.target_ip), (request.sender_mac, request.sender_ip));
        prop_assert_eq!(reply.frame_dst(), request.sender_mac);
    }
}
