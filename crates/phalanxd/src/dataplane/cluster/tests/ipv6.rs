//! IPv6 virtual addresses: neighbour solicitations for the inside's IPv6
//! address answered by the view's first node only (RFC 4861), IPv6
//! cleartext spread over the nodes and protected, ESP over IPv6 to an
//! IPv6 outside address opened by its owner; hop limit and transport
//! checksum handling.
//!
//! ```text
//!  LAN fd01::/64 ── inside VIPs 10.1.0.1, fd01::1 / 02:00:5e:10:00:02 ─┐
//!                                                                        ├ n1, n2
//!  WAN peer 2001:db8:f::2 ── outside VIP 2001:db8:f::1 / ..:00:01 ──────┘ (outside6)
//! ```

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::Instant;

use phalanx_wire::checksum;
use phalanx_wire::ethernet::{EtherType, EthernetFrame, MacAddress};
use phalanx_wire::ipv6::Ipv6Packet;
use phalanx_wire::ndp::{multicast_mac, parse_advertisement, solicited_node};
use phalanx_wire::IpProtocol;

use super::super::frames::{decrement_ttl, fill_transport_checksum};
use super::super::neighbour::announcement_frame;
use super::{
    begin_all, classifier, founded, frame, one, run, sides, store, udp, Shape, HOST_MAC,
    INSIDE_VIP6, INSIDE_VMAC, IN_SPI, OUTSIDE_VMAC, OUT_SPI, ROUTER_MAC,
};
use crate::config::Config;
use crate::dataplane::cluster::{FrameClassifier, Side, VirtualSide};
use crate::dataplane::{DaemonCounter, Ingress};
use crate::install::SaStore;
use phalanx_cluster::dispatch::DispatchScheme;
use phalanx_cluster::NodeId;
use phalanx_io::PacketMeta;

const HOST6: Ipv6Addr = Ipv6Addr::new(0xfd01, 0, 0, 0, 0, 0, 0, 7);
const REMOTE_HOST6: Ipv6Addr = Ipv6Addr::new(0xfd02, 0, 0, 0, 0, 0, 0, 9);
const OUTSIDE_VIP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xf, 0, 0, 0, 0, 1);
const PEER6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xf, 0, 0, 0, 0, 2);

/// An IPv6 packet (traffic class 0x02) with `payload` behind the fixed
/// header.
fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: IpProtocol, hop_limit: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0; 40 + payload.len()];
    let mut ip = Ipv6Packet::new_unchecked(&mut p[..]);
    ip.set_version(6);
    ip.set_traffic_class(0x02);
    ip.set_payload_len(u16::try_from(payload.len()).unwrap());
    ip.set_next_header(next);
    ip.set_hop_limit(hop_limit);
    ip.set_src_addr(src);
    ip.set_dst_addr(dst);
    p[40..].copy_from_slice(payload);
    p
}

/// IPv6 cleartext from the LAN host to `dst` through the inside virtual
/// MAC; `n` varies the payload.
fn cleartext6(dst: Ipv6Addr, hop_limit: u8, n: u8) -> Vec<u8> {
    let datagram = udp(HOST6, dst, (5000 + u16::from(n), 53), &[n; 40]);
    let packet = ipv6(HOST6, dst, IpProtocol::UDP, hop_limit, &datagram);
    frame(INSIDE_VMAC, HOST_MAC, EtherType::IPV6, &packet)
}

/// An ICMPv6 message (checksum filled) from `src` to `dst`.
fn icmpv6(src: Ipv6Addr, dst: Ipv6Addr, hop_limit: u8, mut message: Vec<u8>) -> Vec<u8> {
    let len = u32::try_from(message.len()).unwrap();
    let sum = checksum::combine(&[
        checksum::pseudo_header_v6(src, dst, IpProtocol::ICMPV6, len),
        checksum::data(&message),
    ]);
    message[2..4].copy_from_slice(&(!sum).to_be_bytes());
    ipv6(src, dst, IpProtocol::ICMPV6, hop_limit, &message)
}

/// A neighbour solicitation (RFC 4861 §4.3) for `target` from the LAN
/// host, with its source link-layer address option, in a frame to the
/// target's solicited-node group (`unicast`: to the virtual MAC and
/// address, as a reachability probe is).
fn solicitation(target: Ipv6Addr, hop_limit: u8, unicast: bool) -> Vec<u8> {
    let mut message = vec![135, 0, 0, 0, 0, 0, 0, 0];
    message.extend_from_slice(&target.octets());
    message.extend_from_slice(&[1, 1]);
    message.extend_from_slice(&HOST_MAC.0);
    let (dst, mac) = if unicast {
        (target, INSIDE_VMAC)
    } else {
        let group = solicited_node(target);
        (group, multicast_mac(group))
    };
    let packet = icmpv6(HOST6, dst, hop_limit, message);
    frame(mac, HOST_MAC, EtherType::IPV6, &packet)
}

fn reply_bytes(shape: Shape) -> Vec<u8> {
    match shape {
        Shape::Arp(bytes) => bytes,
        other => panic!("not a reply: {other:?}"),
    }
}

/// The first node answers a solicitation for the inside's IPv6 address,
/// to its solicited-node group or to the address itself, with the
/// virtual MAC; the second leaves it; nothing else is answered.
#[test]
fn only_the_first_node_answers_solicitations_for_the_virtual_address() {
    let (store, (_, states)) = (store(), founded(2));
    let rt = store.load();
    let mut nodes = [classifier(1), classifier(2)];
    begin_all(&mut nodes, &states, &rt);
    for unicast in [false, true] {
        let ns = solicitation(INSIDE_VIP6, 255, unicast);
        let (shape, moved) = run(&mut nodes[0], Side::Inside, &ns, &rt);
        assert_eq!(moved, one(DaemonCounter::ClusterNdReplies));
        let bytes = reply_bytes(shape);
        let eth = EthernetFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(eth.ethertype(), EtherType::IPV6);
        assert_eq!(
            (eth.dst_addr(), eth.src_addr()),
            (HOST_MAC, sides(1).0.own_mac)
        );
        let na = parse_advertisement(&bytes[14..]).unwrap();
        assert_eq!(
            (na.src, na.dst, na.target),
            (INSIDE_VIP6, HOST6, INSIDE_VIP6)
        );
        assert_eq!(na.target_link_addr, Some(INSIDE_VMAC));
        assert!(na.solicited && na.override_flag && na.router);
        let second = run(&mut nodes[1], Side::Inside, &ns, &rt);
        assert_eq!(second, (Shape::Drop, one(DaemonCounter::ClusterNdNotOwner)));
    }

    let other_target = Ipv6Addr::new(0xfd01, 0, 0, 0, 0, 0, 0x0100, 1);
    let hop_254 = solicitation(INSIDE_VIP6, 254, false);
    let mut other_group = solicitation(INSIDE_VIP6, 255, false);
    other_group[5] ^= 0x80;
    let echo = {
        let packet = icmpv6(HOST6, INSIDE_VIP6, 64, vec![128, 0, 0, 0, 0, 1, 0, 1]);
        frame(INSIDE_VMAC, HOST_MAC, EtherType::IPV6, &packet)
    };
    let mut bad_sum = solicitation(INSIDE_VIP6, 255, false);
    bad_sum[14 + 40 + 2] ^= 1;
    use DaemonCounter as D;
    let cases = [
        (
            "hop limit 254 (RFC 4861 §7.1.1)",
            Side::Inside,
            hop_254,
            D::ClusterNdIgnored,
        ),
        ("bad checksum", Side::Inside, bad_sum, D::ClusterNdIgnored),
        (
            "another group",
            Side::Inside,
            other_group,
            D::ClusterIgnoredOtherMac,
        ),
        (
            "echo to the VIP",
            Side::Inside,
            echo,
            D::ClusterIgnoredToVip,
        ),
        (
            "the outside has no IPv6 address",
            Side::Outside,
            solicitation(INSIDE_VIP6, 255, false),
            D::ClusterIgnoredOtherMac,
        ),
    ];
    for (what, side, f, counter) in cases {
        for c in nodes.iter_mut() {
            assert_eq!(run(c, side, &f, &rt), (Shape::Drop, one(counter)), "{what}");
        }
    }
    // A solicitation for another address of the LAN, sent to the virtual
    // address's group: the low 24 bits match, the target does not.
    let mut stray = solicitation(other_target, 255, false);
    let group_mac = multicast_mac(solicited_node(INSIDE_VIP6));
    stray[..6].copy_from_slice(&group_mac.0);
    let got = run(&mut nodes[0], Side::Inside, &stray, &rt);
    assert_eq!(got, (Shape::Drop, one(DaemonCounter::ClusterNdIgnored)));
}

/// The unsolicited advertisement a new first node sends (RFC 4861
/// §7.2.6): to all nodes, Override set, Solicited clear.
#[test]
fn the_announcement_of_an_ipv6_address_is_an_unsolicited_advertisement() {
    let (inside, _) = sides(1);
    let frame = announcement_frame(IpAddr::V6(INSIDE_VIP6), &inside);
    let bytes = frame.as_bytes();
    let eth = EthernetFrame::new_checked(bytes).unwrap();
    let all_nodes = MacAddress([0x33, 0x33, 0, 0, 0, 1]);
    assert_eq!(
        (eth.dst_addr(), eth.src_addr()),
        (all_nodes, inside.own_mac)
    );
    let na = parse_advertisement(&bytes[14..]).unwrap();
    assert_eq!(
        (na.src, na.dst, na.target),
        (INSIDE_VIP6, "ff02::1".parse().unwrap(), INSIDE_VIP6)
    );
    assert_eq!(na.target_link_addr, Some(INSIDE_VMAC));
    assert!(na.override_flag && !na.solicited);
}

/// IPv6 cleartext is spread over the nodes like IPv4 (one owner per
/// packet, no number twice); a hop limit of 1 and packets to the
/// virtual address are not forwarded.
#[test]
fn ipv6_cleartext_has_one_owner_per_packet() {
    let (store, (_, states)) = (store(), founded(2));
    let rt = store.load();
    let mut nodes = [classifier(1), classifier(2)];
    begin_all(&mut nodes, &states, &rt);
    let mut seqs = Vec::new();
    for n in 0..6u8 {
        let f = cleartext6(REMOTE_HOST6, 64, n);
        let mut owners = 0;
        for c in nodes.iter_mut() {
            match run(c, Side::Inside, &f, &rt) {
                (Shape::Protect { spi, seq, len }, moved) => {
                    assert_eq!((spi, len), (OUT_SPI, f.len() - 14));
                    assert_eq!(moved, one(DaemonCounter::ClusterOutboundOwned));
                    owners += 1;
                    seqs.push(seq);
                }
                other => assert_eq!(
                    other,
                    (Shape::Drop, one(DaemonCounter::ClusterOutboundNotOwned))
                ),
            }
        }
        assert_eq!(owners, 1, "packet {n}");
    }
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), 6, "{seqs:?}");
    for (f, counter) in [
        (
            cleartext6(REMOTE_HOST6, 1, 0),
            DaemonCounter::ClusterTtlExpired,
        ),
        (
            cleartext6(INSIDE_VIP6, 64, 0),
            DaemonCounter::ClusterIgnoredToVip,
        ),
    ] {
        assert_eq!(
            run(&mut nodes[0], Side::Inside, &f, &rt),
            (Shape::Drop, one(counter))
        );
    }
}

#[test]
fn ipv6_hop_limit_and_pending_checksum() {
    let good = udp(HOST6, REMOTE_HOST6, (1000, 2000), b"payload bytes");
    let mut p = ipv6(HOST6, REMOTE_HOST6, IpProtocol::UDP, 64, &good);
    p[46..48].copy_from_slice(&[0x12, 0x34]);
    assert!(fill_transport_checksum(&mut p));
    assert_eq!(&p[40..], &good[..], "the checksum a sender computes");
    decrement_ttl(&mut p);
    assert_eq!(Ipv6Packet::new_unchecked(&p[..]).hop_limit(), 63);
    assert_eq!(&p[40..], &good[..], "nothing else changed");
    // A UDP header cut short cannot take one.
    let mut short = ipv6(HOST6, REMOTE_HOST6, IpProtocol::UDP, 64, &[0; 4]);
    assert!(!fill_transport_checksum(&mut short));
}

/// A store whose tunnel runs over IPv6 (the outside virtual address is
/// 2001:db8:f::1).
fn store6() -> SaStore {
    let key = "0102030405060708090a0b0c0d0e0f1011121314";
    let text = format!(
        "[clear]\ntun = \"phx0\"\n[protected]\nlocal = \"{OUTSIDE_VIP6}\"\n\
         [[sa]]\nname = \"o\"\ndirection = \"out\"\nspi = {OUT_SPI}\nencryption = \"aes128gcm16\"\n\
         key = \"{key}\"\nremote = \"{PEER6}\"\n\
         [[sa]]\nname = \"i\"\ndirection = \"in\"\nspi = {IN_SPI}\nencryption = \"aes128gcm16\"\n\
         key = \"{key}\"\nremote = \"{PEER6}\"\n\
         [[policy]]\nname = \"p\"\nsrc = \"fd01::/64\"\ndst = \"fd02::/64\"\n\
         action = \"protect\"\nsa = \"o\"\n"
    );
    let store = SaStore::new();
    let config = Config::parse("cluster-test", &text).unwrap();
    store.apply_config(&config, Instant::now()).unwrap();
    store
}

fn classifier6(id: u8) -> FrameClassifier {
    let (inside, outside) = sides(id);
    let outside = VirtualSide {
        addresses: IpAddr::V6(OUTSIDE_VIP6).into(),
        ..outside
    };
    FrameClassifier::new(
        NodeId(u32::from(id)),
        DispatchScheme::PacketRoundRobin,
        (inside, outside),
        4500,
    )
}

/// ESP over IPv6 to the outside's IPv6 address: one node opens each
/// packet, with the IPv6 addresses and traffic class in its metadata;
/// ESP to another IPv6 address is not ours.
#[test]
fn esp_over_ipv6_has_one_owner_per_packet() {
    let (store, (_, states)) = (store6(), founded(2));
    let rt = store.load();
    let mut nodes = [classifier6(1), classifier6(2)];
    begin_all(&mut nodes, &states, &rt);
    let esp_frame6 = |dst: Ipv6Addr, seq: u32| {
        let packet = ipv6(PEER6, dst, IpProtocol::ESP, 60, &super::esp(IN_SPI, seq));
        frame(OUTSIDE_VMAC, ROUTER_MAC, EtherType::IPV6, &packet)
    };
    let meta = PacketMeta {
        remote: SocketAddr::new(IpAddr::V6(PEER6), 0),
        local: Some(IpAddr::V6(OUTSIDE_VIP6)),
        stride: 0,
        tos: 0x02,
    };
    for seq in 1..=6 {
        let f = esp_frame6(OUTSIDE_VIP6, seq);
        let mut owners = 0;
        for c in nodes.iter_mut() {
            match run(c, Side::Outside, &f, &rt).0 {
                Shape::Open {
                    ingress,
                    meta: m,
                    len,
                } => {
                    assert_eq!((ingress, m, len), (Ingress::Raw, meta, 56));
                    owners += 1;
                }
                other => assert_eq!(other, Shape::Drop),
            }
        }
        assert_eq!(owners, 1, "seq {seq}");
    }
    let f = esp_frame6(PEER6, 9);
    assert_eq!(
        run(&mut nodes[0], Side::Outside, &f, &rt),
        (
            Shape::Drop,
            one(DaemonCounter::ClusterIgnoredOtherDestination)
        )
    );
}
