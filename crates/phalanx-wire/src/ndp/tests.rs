use super::*;
use proptest::prelude::*;

// Frames captured with tcpdump on a Linux (kernel 6.x) veth pair, not built
// with this crate: 2001:db8::a at 02:00:00:00:00:0a pings 2001:db8::b at
// 02:00:00:00:00:0b. tcpdump -vv reports "icmp6 sum ok" on each.

/// `who has 2001:db8::b`, to ff02::1:ff00:b with a source link-layer
/// address option.
const LINUX_NS: &str = "3333ff00000b 02000000000a 86dd \
6000000000203aff 20010db800000000000000000000000a ff0200000000000000000001ff00000b \
87001c0300000000 20010db800000000000000000000000b 0101 02000000000a";
/// The kernel's answer to [`LINUX_NS`]: S and O set, target link-layer
/// address option.
const LINUX_NA: &str = "02000000000a 02000000000b 86dd \
6000000000203aff 20010db800000000000000000000000b 20010db800000000000000000000000a \
88008a4d60000000 20010db800000000000000000000000b 0201 02000000000b";
/// DAD for 2001:db8::c (`ip addr add` with DAD on): from ::, no source
/// link-layer address, a Nonce option (type 14, RFC 7527) this parser
/// does not know.
const LINUX_DAD_NS: &str = "3333ff00000c 02000000000a 86dd \
6000000000203aff 00000000000000000000000000000000 ff0200000000000000000001ff00000c \
8700a01300000000 20010db800000000000000000000000c 0e01 c78faea0288a";

const A: MacAddress = MacAddress([2, 0, 0, 0, 0, 0x0a]);
const B: MacAddress = MacAddress([2, 0, 0, 0, 0, 0x0b]);
const C: MacAddress = MacAddress([2, 0, 0, 0, 0, 0x0c]);

fn bytes(hex: &str) -> Vec<u8> {
    hex::decode(hex.replace(' ', "")).unwrap()
}

fn addr(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// The IPv6 packet of a captured frame.
fn packet(frame: &str) -> Vec<u8> {
    bytes(frame)[HEADER_LEN..].to_vec()
}

/// Sets Payload Length to what follows the fixed header.
fn fit_payload_len(p: &mut [u8]) {
    let len = u16::try_from(p.len() - 40).unwrap();
    p[4..6].copy_from_slice(&len.to_be_bytes());
}

/// Recomputes the ICMPv6 checksum of a packet whose ICMPv6 message starts
/// right after the fixed header, with the RFC 4443 §2.3 rule written out
/// here rather than taken from the code under test.
fn refresh_checksum(p: &mut [u8]) {
    let plen = usize::from(u16::from_be_bytes([p[4], p[5]])).min(p.len() - 40);
    p[42..44].fill(0);
    let mut sum: u32 = 0;
    let mut add = |bytes: &[u8]| {
        for pair in bytes.chunks(2) {
            sum += u32::from(pair[0]) << 8 | u32::from(*pair.get(1).unwrap_or(&0));
        }
    };
    add(&p[8..40]);
    add(&u32::try_from(plen).unwrap().to_be_bytes());
    add(&[0, 0, 0, 58]);
    add(&p[40..40 + plen]);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let field = !u16::try_from(sum).unwrap();
    p[42..44].copy_from_slice(&field.to_be_bytes());
}

fn set_src(p: &mut [u8], a: &str) {
    p[8..24].copy_from_slice(&addr(a).octets());
}

fn set_dst(p: &mut [u8], a: &str) {
    p[24..40].copy_from_slice(&addr(a).octets());
}

fn set_target(p: &mut [u8], a: &str) {
    p[48..64].copy_from_slice(&addr(a).octets());
}

#[test]
fn linux_solicitation_parses() {
    let ns = parse_solicitation(&packet(LINUX_NS)).unwrap();
    assert_eq!(
        ns,
        NeighborSolicitation {
            src: addr("2001:db8::a"),
            dst: addr("ff02::1:ff00:b"),
            target: addr("2001:db8::b"),
            source_link_addr: Some(A),
        }
    );
    assert_eq!(ns.dst, solicited_node(ns.target));
    assert_eq!(bytes(LINUX_NS)[..6], multicast_mac(ns.dst).0);
}

#[test]
fn linux_dad_solicitation_parses_past_an_unknown_option() {
    let ns = parse_solicitation(&packet(LINUX_DAD_NS)).unwrap();
    assert_eq!(
        ns,
        NeighborSolicitation {
            src: Ipv6Addr::UNSPECIFIED,
            dst: addr("ff02::1:ff00:c"),
            target: addr("2001:db8::c"),
            source_link_addr: None,
        }
    );
}

/// RFC 4861 §7.2.4 as built here reproduces the Linux kernel's answer byte
/// for byte (its checksum included). The link-layer option wins over the
/// frame's source.
#[test]
fn reply_to_linux_solicitation_matches_the_kernels() {
    let ns = parse_solicitation(&packet(LINUX_NS)).unwrap();
    let reply = Advertisement::reply(&ns, C, B, B, false);
    assert_eq!(
        reply.eth_dst, A,
        "source link-layer address, not the frame's"
    );
    let frame = reply.emit_frame();
    assert_eq!(hex::encode(frame), hex::encode(bytes(LINUX_NA)));
}

#[test]
fn linux_advertisement_parses() {
    let na = parse_advertisement(&packet(LINUX_NA)).unwrap();
    assert_eq!(
        na,
        ParsedAdvertisement {
            src: addr("2001:db8::b"),
            dst: addr("2001:db8::a"),
            target: addr("2001:db8::b"),
            target_link_addr: Some(B),
            router: false,
            solicited: true,
            override_flag: true,
        }
    );
}

#[test]
fn padding_after_the_packet_is_ignored() {
    let mut p = packet(LINUX_NS);
    p.extend_from_slice(&[0xee; 18]);
    assert_eq!(
        parse_solicitation(&p),
        parse_solicitation(&packet(LINUX_NS))
    );
    assert!(parse_solicitation(&p).is_ok());
    let mut p = packet(LINUX_NA);
    p.extend_from_slice(&[0; 4]);
    assert!(parse_advertisement(&p).is_ok());
}

/// Breaks one field of a captured packet (before its checksum is made
/// right again).
type Mutation = fn(&mut Vec<u8>);

fn cut_below_24(p: &mut Vec<u8>) {
    p.truncate(40 + 23);
    fit_payload_len(p);
}
fn link_addr_of_16_octets(p: &mut Vec<u8>) {
    p[65] = 2;
    p.extend_from_slice(&[0; 8]);
    fit_payload_len(p);
}
fn dad_to_unicast(p: &mut Vec<u8>) {
    set_src(p, "::");
    set_dst(p, "2001:db8::b");
    p.truncate(40 + 24);
    fit_payload_len(p);
}
/// A Hop-by-Hop Options header (RFC 8200 §4.3: next header 58, length 0,
/// PadN of 4) in front of the message.
fn extension_header_in_front(p: &mut Vec<u8>) {
    p[6] = 0;
    let hop_by_hop = [58, 0, 1, 4, 0, 0, 0, 0];
    p.splice(40..40, hop_by_hop);
    fit_payload_len(p);
}

/// One row per RFC 4861 §7.1.1 rule (and the IPv6 ones before it): the
/// Linux solicitation with one field broken and its checksum made right
/// again, so that only the rule under test can reject it.
const SOLICITATION_RULES: &[(u8, &str, Mutation, NdpError)] = &[
    (1, "hop limit 254", |p| p[7] = 254, NdpError::HopLimit),
    (2, "code 1", |p| p[41] = 1, NdpError::Code),
    (3, "23 octets", cut_below_24, NdpError::Malformed),
    (
        4,
        "payload length past the end",
        |p| p[5] += 1,
        NdpError::Malformed,
    ),
    (5, "version 4", |p| p[0] = 0x40, NdpError::Malformed),
    (
        6,
        "multicast source",
        |p| set_src(p, "ff02::2"),
        NdpError::Malformed,
    ),
    (
        7,
        "multicast target",
        |p| set_target(p, "ff02::1:ff00:b"),
        NdpError::MulticastTarget,
    ),
    (8, "zero-length option", |p| p[65] = 0, NdpError::BadOption),
    (
        9,
        "truncated option",
        |p| {
            p.truncate(40 + 30);
            fit_payload_len(p);
        },
        NdpError::BadOption,
    ),
    (
        10,
        "option without its length",
        |p| {
            p.push(0x0e);
            fit_payload_len(p);
        },
        NdpError::BadOption,
    ),
    (
        11,
        "16-octet source link-layer address",
        link_addr_of_16_octets,
        NdpError::BadOption,
    ),
    (
        12,
        "DAD with a source link-layer address",
        |p| set_src(p, "::"),
        NdpError::Unspecified,
    ),
    (
        13,
        "DAD to a unicast address",
        dad_to_unicast,
        NdpError::Unspecified,
    ),
    (
        14,
        "DAD to all nodes",
        |p| {
            dad_to_unicast(p);
            set_dst(p, "ff02::1");
        },
        NdpError::Unspecified,
    ),
    (
        15,
        "hop-by-hop header in front",
        extension_header_in_front,
        NdpError::NotIcmpv6,
    ),
    (16, "UDP", |p| p[6] = 17, NdpError::NotIcmpv6),
    (
        17,
        "NA instead of NS",
        |p| p[40] = NEIGHBOR_ADVERTISEMENT,
        NdpError::NotSolicitation,
    ),
    (
        18,
        "no ICMPv6 octets",
        |p| {
            p.truncate(40);
            fit_payload_len(p);
        },
        NdpError::Malformed,
    ),
];

#[test]
fn each_solicitation_rule_has_its_own_error() {
    assert!(parse_solicitation(&packet(LINUX_NS)).is_ok());
    for &(row, name, mutate, expected) in SOLICITATION_RULES {
        let mut p = packet(LINUX_NS);
        mutate(&mut p);
        if p.len() >= 44 && p[6] == 58 {
            refresh_checksum(&mut p);
        }
        assert_eq!(parse_solicitation(&p), Err(expected), "row {row}: {name}");
    }
}

#[test]
fn bad_checksum_and_short_buffers() {
    let mut p = packet(LINUX_NS);
    p[43] ^= 1;
    assert_eq!(parse_solicitation(&p), Err(NdpError::Checksum));
    let p = packet(LINUX_NS);
    for len in 0..p.len() {
        assert_eq!(
            parse_solicitation(&p[..len]),
            Err(NdpError::Malformed),
            "cut at {len}"
        );
    }
}

/// The checks that make DAD legal still accept a lawful DAD solicitation,
/// and a unicast solicitation (RFC 4861 §7.2.2 reachability probe) without
/// a link-layer option.
#[test]
fn lawful_variants_pass() {
    let mut p = packet(LINUX_NS);
    dad_to_unicast(&mut p);
    set_dst(&mut p, "ff02::1:ff00:b");
    refresh_checksum(&mut p);
    let ns = parse_solicitation(&p).unwrap();
    assert_eq!((ns.src, ns.source_link_addr), (Ipv6Addr::UNSPECIFIED, None));

    let mut p = packet(LINUX_NS);
    set_dst(&mut p, "2001:db8::b");
    p.truncate(64);
    fit_payload_len(&mut p);
    refresh_checksum(&mut p);
    let ns = parse_solicitation(&p).unwrap();
    assert_eq!((ns.dst, ns.source_link_addr), (addr("2001:db8::b"), None));
}

/// The first source link-layer address option counts; a target one, an
/// unknown one and a second source one are skipped.
#[test]
fn other_options_are_skipped() {
    let mut p = packet(LINUX_NS);
    p.splice(64..64, bytes("0201 0c0c0c0c0c0c 0e01 000000000000"));
    p.extend_from_slice(&bytes("0101 0b0b0b0b0b0b"));
    fit_payload_len(&mut p);
    refresh_checksum(&mut p);
    assert_eq!(parse_solicitation(&p).unwrap().source_link_addr, Some(A));
}

/// RFC 4861 §7.1.2, on the Linux advertisement.
const ADVERTISEMENT_RULES: &[(u8, &str, Mutation, NdpError)] = &[
    (1, "hop limit 64", |p| p[7] = 64, NdpError::HopLimit),
    (2, "code 1", |p| p[41] = 1, NdpError::Code),
    (3, "23 octets", cut_below_24, NdpError::Malformed),
    (
        4,
        "multicast target",
        |p| set_target(p, "ff02::1"),
        NdpError::MulticastTarget,
    ),
    (
        5,
        "S=1 to a multicast address",
        |p| set_dst(p, "ff02::1"),
        NdpError::Malformed,
    ),
    (6, "zero-length option", |p| p[65] = 0, NdpError::BadOption),
    (
        7,
        "16-octet target link-layer address",
        link_addr_of_16_octets,
        NdpError::BadOption,
    ),
    (
        8,
        "NS instead of NA",
        |p| p[40] = NEIGHBOR_SOLICITATION,
        NdpError::NotSolicitation,
    ),
    (
        9,
        "hop-by-hop header in front",
        extension_header_in_front,
        NdpError::NotIcmpv6,
    ),
];

#[test]
fn each_advertisement_rule_has_its_own_error() {
    for &(row, name, mutate, expected) in ADVERTISEMENT_RULES {
        let mut p = packet(LINUX_NA);
        mutate(&mut p);
        if p.len() >= 44 && p[6] == 58 {
            refresh_checksum(&mut p);
        }
        assert_eq!(parse_advertisement(&p), Err(expected), "row {row}: {name}");
    }
    let mut p = packet(LINUX_NA);
    p[42] ^= 0x80;
    assert_eq!(parse_advertisement(&p), Err(NdpError::Checksum));
}

#[test]
fn advertisement_without_option_and_flags() {
    let mut p = packet(LINUX_NA);
    p[44] = 0;
    set_dst(&mut p, "ff02::1");
    p.truncate(64);
    fit_payload_len(&mut p);
    refresh_checksum(&mut p);
    let na = parse_advertisement(&p).unwrap();
    assert_eq!(na.target_link_addr, None);
    assert_eq!(
        (na.router, na.solicited, na.override_flag),
        (false, false, false)
    );
    assert_eq!(na.dst, ALL_NODES);
}

#[test]
fn reply_without_link_layer_option_goes_to_the_frames_source() {
    let ns = NeighborSolicitation {
        src: addr("fe80::1"),
        dst: addr("2001:db8::b"),
        target: addr("2001:db8::b"),
        source_link_addr: None,
    };
    let reply = Advertisement::reply(&ns, C, B, A, true);
    assert_eq!(
        reply,
        Advertisement {
            eth_src: A,
            eth_dst: C,
            src: addr("2001:db8::b"),
            dst: addr("fe80::1"),
            target: addr("2001:db8::b"),
            target_link_addr: B,
            router: true,
            solicited: true,
            override_flag: true,
        }
    );
    let frame = reply.emit_frame();
    assert_eq!(frame[HEADER_LEN + 40 + 4], 0xe0, "R, S and O");
}

/// RFC 4861 §7.2.4: "If the source of the solicitation is the unspecified
/// address, the node MUST set the Solicited flag to zero and multicast the
/// advertisement to the all-nodes address."
#[test]
fn reply_to_dad_goes_to_all_nodes() {
    let ns = parse_solicitation(&packet(LINUX_DAD_NS)).unwrap();
    let reply = Advertisement::reply(&ns, A, B, B, false);
    assert_eq!(
        (reply.dst, reply.eth_dst),
        (ALL_NODES, MacAddress([0x33, 0x33, 0, 0, 0, 1]))
    );
    assert_eq!((reply.solicited, reply.override_flag), (false, true));
    assert_eq!((reply.src, reply.target), (ns.target, ns.target));
    let frame = reply.emit_frame();
    let na = parse_advertisement(&frame[HEADER_LEN..]).unwrap();
    assert_eq!(
        (na.dst, na.solicited, na.target_link_addr),
        (ALL_NODES, false, Some(B))
    );
}

/// The unsolicited advertisement after a takeover, checked by hand field
/// (checksum summed in Python), and by tcpdump 4.99.3 ("icmp6 sum ok", "Flags [router,
/// override]", "destination link-address option (2), length 8 (1):
/// 02:00:5e:00:01:01") from the same hex fed through text2pcap.
const UNSOLICITED_FRAME: &str = "333300000001 02005e000102 86dd \
6000000000203aff 20010db8000000000000000000000064 ff020000000000000000000000000001 \
8800 1964 a0000000 20010db8000000000000000000000064 0201 02005e000101";

#[test]
fn unsolicited_advertisement_bytes() {
    let vip = addr("2001:db8::64");
    let na = Advertisement::unsolicited(
        vip,
        MacAddress([2, 0, 0x5e, 0, 1, 1]),
        MacAddress([2, 0, 0x5e, 0, 1, 2]),
        true,
    );
    assert_eq!((na.src, na.dst, na.target), (vip, ALL_NODES, vip));
    assert_eq!(
        (na.router, na.solicited, na.override_flag),
        (true, false, true)
    );
    let frame = na.emit_frame();
    assert_eq!(hex::encode(frame), hex::encode(bytes(UNSOLICITED_FRAME)));
    let parsed = parse_advertisement(&frame[HEADER_LEN..]).unwrap();
    assert_eq!(
        parsed,
        ParsedAdvertisement {
            src: vip,
            dst: ALL_NODES,
            target: vip,
            target_link_addr: Some(MacAddress([2, 0, 0x5e, 0, 1, 1])),
            router: true,
            solicited: false,
            override_flag: true,
        }
    );
    let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
    assert_eq!(eth.ethertype(), EtherType::IPV6);
}

#[test]
fn solicited_node_and_multicast_mac_vectors() {
    // RFC 4291 §2.7.1 and RFC 2464 §7, with the address of RFC 2464 §5's
    // example interface identifier.
    let a = addr("fe80::2aa:ff:fe28:9c5a");
    assert_eq!(solicited_node(a), addr("ff02::1:ff28:9c5a"));
    assert_eq!(
        multicast_mac(solicited_node(a)),
        MacAddress([0x33, 0x33, 0xff, 0x28, 0x9c, 0x5a])
    );
    assert_eq!(solicited_node(addr("2001:db8::b")), addr("ff02::1:ff00:b"));
    assert_eq!(
        solicited_node(addr("2001:db8:1:2:3:4:5:6789")),
        addr("ff02::1:ff05:6789")
    );
    assert_eq!(
        multicast_mac(ALL_NODES),
        MacAddress([0x33, 0x33, 0, 0, 0, 1])
    );
    assert_eq!(
        multicast_mac(addr("ff05::1:3")),
        MacAddress([0x33, 0x33, 0, 1, 0, 3])
    );
    assert!(is_solicited_node(addr("ff02::1:ffff:ffff")));
    assert!(!is_solicited_node(addr("ff02::1:fe00:1")));
    assert!(!is_solicited_node(addr("ff02::2:ff00:1")));
    assert!(!is_solicited_node(ALL_NODES));
}

#[test]
fn errors_display_on_one_line() {
    for e in [
        NdpError::NotIcmpv6,
        NdpError::NotSolicitation,
        NdpError::Malformed,
        NdpError::HopLimit,
        NdpError::Code,
        NdpError::Checksum,
        NdpError::MulticastTarget,
        NdpError::BadOption,
        NdpError::Unspecified,
    ] {
        let s = e.to_string();
        assert!(!s.is_empty() && !s.contains('\n'), "{e:?}");
    }
}

fn unicast_addr() -> impl Strategy<Value = Ipv6Addr> {
    any::<u128>()
        .prop_map(Ipv6Addr::from)
        .prop_filter("not multicast", |a| !a.is_multicast())
}

fn solicitation() -> impl Strategy<Value = NeighborSolicitation> {
    let mac = any::<Option<[u8; 6]>>().prop_map(|m| m.map(MacAddress));
    (unicast_addr(), unicast_addr(), mac, any::<bool>()).prop_map(|(src, target, sll, dad)| {
        if dad {
            NeighborSolicitation {
                src: Ipv6Addr::UNSPECIFIED,
                dst: solicited_node(target),
                target,
                source_link_addr: None,
            }
        } else {
            NeighborSolicitation {
                src,
                dst: solicited_node(target),
                target,
                source_link_addr: sll,
            }
        }
    })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = parse_solicitation(&bytes);
        crate::fuzzing::ndp(&bytes);
    }

    /// Mostly-valid solicitations (checksum made right again) reach the
    /// option walk and the reply path of the harness.
    #[test]
    fn mutated_solicitations_never_panic(
        at in 40usize..72, value in any::<u8>(), cut in 40usize..96, tail in any::<[u8; 24]>()
    ) {
        let mut p = packet(LINUX_NS);
        p.extend_from_slice(&tail);
        p[at] = value;
        p.truncate(cut);
        fit_payload_len(&mut p);
        if p.len() >= 44 {
            refresh_checksum(&mut p);
        }
        crate::fuzzing::ndp(&p);
        crate::fuzzing::ipv6(&p);
    }

    /// Every reply is a valid advertisement that reads back as built, and
    /// follows RFC 4861 §7.2.4.
    #[test]
    fn replies_parse_back(
        ns in solicitation(), requester in any::<[u8; 6]>(), link in any::<[u8; 6]>(),
        eth_src in any::<[u8; 6]>(), router in any::<bool>()
    ) {
        let (requester, link, eth_src) = (MacAddress(requester), MacAddress(link), MacAddress(eth_src));
        let reply = Advertisement::reply(&ns, requester, link, eth_src, router);
        let dad = ns.src.is_unspecified();
        let eth_dst = match (dad, ns.source_link_addr) {
            (true, _) => multicast_mac(ALL_NODES),
            (false, Some(mac)) => mac,
            (false, None) => requester,
        };
        prop_assert_eq!(reply.eth_dst, eth_dst);
        let frame = reply.emit_frame();
        let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
        prop_assert_eq!((eth.dst_addr(), eth.src_addr()), (eth_dst, eth_src));
        let na = parse_advertisement(eth.payload()).unwrap();
        prop_assert_eq!(na, ParsedAdvertisement {
            src: ns.target,
            dst: if dad { ALL_NODES } else { ns.src },
            target: ns.target,
            target_link_addr: Some(link),
            router,
            solicited: !dad,
            override_flag: true,
        });
    }
}
