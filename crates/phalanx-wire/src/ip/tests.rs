use core::net::{Ipv4Addr, Ipv6Addr};

use super::*;
use crate::ipv4::Ipv4Repr;
use crate::ipv6::Ipv6Repr;
use proptest::prelude::*;

const A4: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
const B4: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 1);

fn v6(addr: &str) -> Ipv6Addr {
    addr.parse().unwrap()
}

fn ipv4(protocol: IpProtocol, payload: &[u8]) -> Vec<u8> {
    let repr = Ipv4Repr {
        src: A4,
        dst: B4,
        protocol,
        payload_len: payload.len(),
        ttl: 64,
        dscp_ecn: 0,
        ident: 1,
        dont_frag: false,
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
    out[20..].copy_from_slice(payload);
    out
}

fn ipv6(next_header: u8, payload: &[u8]) -> Vec<u8> {
    let repr = Ipv6Repr {
        src: v6("fd00::1"),
        dst: v6("fd00::2"),
        next_header: IpProtocol(next_header),
        payload_len: payload.len(),
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
    out[40..].copy_from_slice(payload);
    out
}

/// UDP 5000 -> 53, length 8.
const UDP: [u8; 8] = [0x13, 0x88, 0x00, 0x35, 0, 8, 0, 0];

fn flow4(protocol: IpProtocol, src_port: u16, dst_port: u16) -> Flow {
    Flow {
        src: A4.into(),
        dst: B4.into(),
        protocol,
        src_port,
        dst_port,
    }
}

fn flow6(protocol: IpProtocol, src_port: u16, dst_port: u16) -> Flow {
    Flow {
        src: v6("fd00::1").into(),
        dst: v6("fd00::2").into(),
        protocol,
        src_port,
        dst_port,
    }
}

#[test]
fn versions() {
    assert_eq!(ip_version(&[0x45]), Ok(IpVersion::V4));
    assert_eq!(ip_version(&[0x60]), Ok(IpVersion::V6));
    assert_eq!(ip_version(&[0x50]), Err(Error::BadVersion));
    assert_eq!(ip_version(&[]), Err(Error::Truncated));
    assert_eq!(flow_of(&[]), Err(Error::Truncated));
    assert_eq!(flow_of(&[0x00; 40]), Err(Error::BadVersion));
}

#[test]
fn ipv4_flows() {
    assert_eq!(
        flow_of(&ipv4(IpProtocol::UDP, &UDP)),
        Ok(flow4(IpProtocol::UDP, 5000, 53))
    );
    // TCP 443 -> 50000, only ports matter.
    let tcp = [0x01, 0xbb, 0xc3, 0x50, 0, 0, 0, 0];
    assert_eq!(
        flow_of(&ipv4(IpProtocol::TCP, &tcp)),
        Ok(flow4(IpProtocol::TCP, 443, 50000))
    );
    // ICMP echo request: type 8, code 0.
    let echo = [8, 0, 0xf7, 0xff, 0, 0, 0, 0];
    assert_eq!(
        flow_of(&ipv4(IpProtocol::ICMP, &echo)),
        Ok(flow4(IpProtocol::ICMP, 8, 0))
    );
    // Destination unreachable, port unreachable: type 3, code 3.
    assert_eq!(
        flow_of(&ipv4(IpProtocol::ICMP, &[3, 3])),
        Ok(flow4(IpProtocol::ICMP, 3, 3))
    );
    // Protocols without ports.
    let esp = ipv4(IpProtocol::ESP, &[0, 0, 1, 0, 0, 0, 0, 1]);
    assert_eq!(flow_of(&esp), Ok(flow4(IpProtocol::ESP, 0, 0)));
    assert_eq!(
        flow_of(&ipv4(IpProtocol(253), &[])),
        Ok(flow4(IpProtocol(253), 0, 0))
    );
}

#[test]
fn ipv4_fragments() {
    let mut first = ipv4(IpProtocol::UDP, &UDP);
    Ipv4Packet::new_unchecked(&mut first[..]).set_more_frags(true);
    assert_eq!(flow_of(&first), Ok(flow4(IpProtocol::UDP, 5000, 53)));

    let mut later = ipv4(IpProtocol::UDP, &UDP);
    Ipv4Packet::new_unchecked(&mut later[..]).set_frag_offset(1);
    assert_eq!(flow_of(&later), Ok(flow4(IpProtocol::UDP, 0, 0)));

    // A first fragment that cuts the ports off.
    let mut tiny = ipv4(IpProtocol::TCP, &[0x01, 0xbb]);
    Ipv4Packet::new_unchecked(&mut tiny[..]).set_more_frags(true);
    assert_eq!(flow_of(&tiny), Err(Error::Truncated));
    assert_eq!(
        flow_of(&ipv4(IpProtocol::UDP, &UDP[..3])),
        Err(Error::Truncated)
    );
    assert_eq!(
        flow_of(&ipv4(IpProtocol::ICMP, &[8])),
        Err(Error::Truncated)
    );
}

#[test]
fn ipv6_flows() {
    assert_eq!(
        flow_of(&ipv6(17, &UDP)),
        Ok(flow6(IpProtocol::UDP, 5000, 53))
    );
    // Hop-by-Hop, Destination Options, then UDP.
    let mut chain = vec![60, 0, 1, 4, 0, 0, 0, 0, 17, 0, 1, 4, 0, 0, 0, 0];
    chain.extend_from_slice(&UDP);
    assert_eq!(
        flow_of(&ipv6(0, &chain)),
        Ok(flow6(IpProtocol::UDP, 5000, 53))
    );
    // ICMPv6 echo request: type 128, code 0.
    let echo = [128, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        flow_of(&ipv6(58, &echo)),
        Ok(flow6(IpProtocol::ICMPV6, 128, 0))
    );
    // Mobility Header, Binding Update (MH type 5): a next layer protocol.
    let mh = [59, 1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        flow_of(&ipv6(135, &mh)),
        Ok(flow6(IpProtocol::MOBILITY, 5, 0))
    );
    // No Next Header after Destination Options.
    let none = [59, 0, 1, 4, 0, 0, 0, 0];
    assert_eq!(
        flow_of(&ipv6(60, &none)),
        Ok(flow6(IpProtocol::NO_NEXT_HEADER, 0, 0))
    );
}

#[test]
fn ipv6_fragments() {
    // First fragment: ports are there.
    let mut first = vec![17, 0, 0, 1, 0, 0, 0, 9];
    first.extend_from_slice(&UDP);
    assert_eq!(
        flow_of(&ipv6(44, &first)),
        Ok(flow6(IpProtocol::UDP, 5000, 53))
    );
    // Later fragment (offset 2): none.
    let mut later = vec![17, 0, 0, 0x10, 0, 0, 0, 9];
    later.extend_from_slice(&[0xaa; 8]);
    assert_eq!(flow_of(&ipv6(44, &later)), Ok(flow6(IpProtocol::UDP, 0, 0)));
    // A first fragment that cuts the ports off.
    let tiny = [17, 0, 0, 1, 0, 0, 0, 9, 0x13];
    assert_eq!(flow_of(&ipv6(44, &tiny)), Err(Error::Truncated));
}

#[test]
fn ipv6_walk_errors_propagate() {
    assert_eq!(flow_of(&ipv6(60, &[17, 1, 0, 0])), Err(Error::Truncated));
    let mut bad = ipv6(17, &UDP);
    bad.truncate(45);
    assert_eq!(flow_of(&bad), Err(Error::Truncated));
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        crate::fuzzing::flow(&bytes);
    }

    #[test]
    fn arbitrary_ip_payloads_never_panic(payload in proptest::collection::vec(any::<u8>(), 0..80),
                                         proto in any::<u8>(), frag in any::<u16>()) {
        let mut four = ipv4(IpProtocol(proto), &payload);
        Ipv4Packet::new_unchecked(&mut four[..]).set_frag_offset(frag);
        crate::fuzzing::flow(&four);
        if let Ok(flow) = flow_of(&ipv6(proto, &payload)) {
            prop_assert_eq!(flow.src, IpAddr::from(v6("fd00::1")));
        }
    }
}
