use super::*;
use phalanx_sa::{FlowKey, PortRange, Selector};
use proptest::prelude::*;
use std::net::IpAddr;

const ANY: IpProtocol = IpProtocol(0);

/// `a.b.c.d-e.f.g.h` or `a.b.c.d/len` or `a.b.c.d`, any protocol and port.
fn ts(text: &str) -> TrafficSelector {
    ts_with(text, ANY, 0, u16::MAX)
}

fn ts_with(text: &str, protocol: IpProtocol, start_port: u16, end_port: u16) -> TrafficSelector {
    let (start, end) = if let Some((s, e)) = text.split_once('-') {
        (s.parse::<IpAddr>().unwrap(), e.parse::<IpAddr>().unwrap())
    } else if let Some((a, len)) = text.split_once('/') {
        let prefix = IpPrefix::new(a.parse().unwrap(), len.parse().unwrap()).unwrap();
        let t = ts_from_prefix(prefix, protocol, start_port, end_port);
        return t;
    } else {
        let a: IpAddr = text.parse().unwrap();
        (a, a)
    };
    let addresses = match (start, end) {
        (IpAddr::V4(start), IpAddr::V4(end)) => TsAddresses::V4 { start, end },
        (IpAddr::V6(start), IpAddr::V6(end)) => TsAddresses::V6 { start, end },
        _ => panic!("mixed families"),
    };
    TrafficSelector {
        ip_protocol: protocol,
        start_port,
        end_port,
        addresses,
    }
}

/// Numbered narrowing cases in the style of RFC 7296 §2.9: (configured,
/// proposed, expected).
#[test]
fn narrowing_table() {
    let tcp = IpProtocol::TCP;
    let udp = IpProtocol::UDP;
    type Case = (
        u32,
        Vec<TrafficSelector>,
        Vec<TrafficSelector>,
        Vec<TrafficSelector>,
    );
    let cases: Vec<Case> = vec![
        // 1: the whole proposal is allowed: returned unchanged.
        (
            1,
            vec![ts("10.2.16.0/24")],
            vec![ts("10.2.16.0/24")],
            vec![ts("10.2.16.0/24")],
        ),
        // 2: a wider proposal is narrowed to the policy.
        (
            2,
            vec![ts("10.2.16.0/24")],
            vec![ts("10.2.0.0/16")],
            vec![ts("10.2.16.0/24")],
        ),
        // 3: a narrower proposal is kept.
        (
            3,
            vec![ts("10.2.16.0/24")],
            vec![ts("10.2.16.64-10.2.16.127")],
            vec![ts("10.2.16.64-10.2.16.127")],
        ),
        // 4: nothing in common.
        (
            4,
            vec![ts("10.2.16.0/24")],
            vec![ts("10.2.17.0/24")],
            vec![],
        ),
        // 5: the triggering packet first, then the subnet: the answer is
        //    the subnet, which contains the packet.
        (
            5,
            vec![ts("10.2.16.0/24")],
            vec![ts_with("10.2.16.43", tcp, 4321, 4321), ts("10.2.16.0/24")],
            vec![ts("10.2.16.0/24")],
        ),
        // 6: the policy allows half the subnet; the result still holds
        //    the triggering packet.
        (
            6,
            vec![ts("10.2.16.0/25")],
            vec![ts("10.2.16.43"), ts("10.2.16.0/24")],
            vec![ts("10.2.16.0/25")],
        ),
        // 7: the RFC's example addresses: 192.0.1.43 then 192.0.1.0/24
        //    against a policy of 192.0.1.0/26 for TCP only.
        (
            7,
            vec![ts_with("192.0.1.0/26", tcp, 0, u16::MAX)],
            vec![ts_with("192.0.1.43", tcp, 4711, 4711), ts("192.0.1.0/24")],
            vec![ts_with("192.0.1.0/26", tcp, 0, u16::MAX)],
        ),
        // 8: protocol "any" narrows to the policy's protocol.
        (
            8,
            vec![ts_with("10.0.0.0/8", tcp, 0, u16::MAX)],
            vec![ts("10.1.0.0/16")],
            vec![ts_with("10.1.0.0/16", tcp, 0, u16::MAX)],
        ),
        // 9: different protocols do not meet.
        (
            9,
            vec![ts_with("10.0.0.0/8", udp, 0, u16::MAX)],
            vec![ts_with("10.0.0.0/8", tcp, 0, u16::MAX)],
            vec![],
        ),
        // 10: port ranges intersect.
        (
            10,
            vec![ts_with("10.0.0.0/8", tcp, 80, 443)],
            vec![ts_with("10.0.0.0/8", tcp, 0, 1024)],
            vec![ts_with("10.0.0.0/8", tcp, 80, 443)],
        ),
        // 11: OPAQUE lies inside any port, not inside a specific range.
        (
            11,
            vec![ts("10.0.0.0/8"), ts_with("11.0.0.0/8", ANY, 80, 80)],
            vec![ts_with("10.0.0.0/7", ANY, u16::MAX, 0)],
            vec![ts_with("10.0.0.0/8", ANY, u16::MAX, 0)],
        ),
        // 12: families never meet.
        (12, vec![ts("::/0")], vec![ts("10.0.0.0/8")], vec![]),
        // 13: several policy selectors each take their part, in the order
        //     of the proposal.
        (
            13,
            vec![ts("10.2.16.0/24"), ts("10.2.18.0/24")],
            vec![ts("10.2.18.7"), ts("10.2.16.0-10.2.17.255")],
            vec![ts("10.2.18.7"), ts("10.2.16.0/24")],
        ),
    ];
    for (n, ours, proposed, expected) in cases {
        assert_eq!(narrow(&ours, &proposed), expected, "case {n}");
    }
}

#[test]
fn responder_narrows_each_side_against_its_own_policy() {
    let local = [ts("10.2.16.0/24")];
    let remote = [ts("192.0.1.0/24")];
    let tsi = [ts("192.0.1.43"), ts("192.0.0.0/16")];
    let tsr = [ts("10.2.16.5"), ts("10.0.0.0/8")];
    let (i, r) = narrow_pair(&local, &remote, &tsi, &tsr, TsRole::Responder).unwrap();
    assert_eq!(i, vec![ts("192.0.1.0/24")]);
    assert_eq!(r, vec![ts("10.2.16.0/24")]);
    // As the initiator of the exchange, TSi is our side.
    let (i, r) = narrow_pair(&local, &remote, &tsr, &tsi, TsRole::Initiator).unwrap();
    assert_eq!(i, vec![ts("10.2.16.0/24")]);
    assert_eq!(r, vec![ts("192.0.1.0/24")]);
    // Nothing on one side: TS_UNACCEPTABLE.
    let err = narrow_pair(
        &local,
        &remote,
        &[ts("172.16.0.0/12")],
        &tsr,
        TsRole::Responder,
    );
    assert_eq!(err, Err(TsError::Unacceptable));
    assert_eq!(
        TsError::Unacceptable.notify_type(),
        NotifyType::TS_UNACCEPTABLE
    );
}

#[test]
fn sides_that_cannot_carry_a_packet_are_unacceptable() {
    let local = [ts_with("10.0.0.0/8", IpProtocol::TCP, 0, u16::MAX)];
    let remote = [ts("192.0.1.0/24")];
    let tsi = [ts_with("192.0.1.0/24", IpProtocol::UDP, 0, u16::MAX)];
    let tsr = [ts("10.0.0.0/8")];
    let err = narrow_pair(&local, &remote, &tsi, &tsr, TsRole::Responder);
    assert_eq!(err, Err(TsError::Unacceptable));
}

#[test]
fn too_complex_narrowing_falls_back_to_the_triggering_packet() {
    let local = [ts("10.0.0.0/8")];
    let remote = [ts("11.0.0.0/8")];
    // Ranges that need 46 prefixes each: 46 * 46 data-plane selectors.
    let tsi = [ts("11.0.0.9"), ts("11.0.0.1-11.255.255.254")];
    let tsr = [ts("10.0.0.7"), ts("10.0.0.1-10.255.255.254")];
    assert_eq!(
        to_selectors(&tsi[1..], &tsr[1..]),
        Err(TsError::TooManySelectors)
    );
    let (i, r) = narrow_pair(&local, &remote, &tsi, &tsr, TsRole::Responder).unwrap();
    assert_eq!((i, r), (vec![ts("11.0.0.9")], vec![ts("10.0.0.7")]));
}

#[test]
fn initiator_accepts_only_subsets() {
    let proposed = [
        ts("10.0.0.0/8"),
        ts_with("192.0.2.0/24", IpProtocol::UDP, 500, 500),
    ];
    assert_eq!(check_narrowed(&proposed, &[ts("10.1.0.0/16")]), Ok(()));
    assert_eq!(
        check_narrowed(
            &proposed,
            &[ts_with("192.0.2.1", IpProtocol::UDP, 500, 500)]
        ),
        Ok(())
    );
    assert_eq!(
        check_narrowed(&proposed, &[ts("192.0.2.1")]),
        Err(TsError::NotSubset)
    );
    assert_eq!(check_narrowed(&proposed, &[]), Err(TsError::Unacceptable));
}

#[test]
fn ranges_become_exact_minimal_prefix_sets() {
    let v4 = |s: &str| s.parse::<IpAddr>().unwrap();
    let p = |s: &str, len| IpPrefix::new(v4(s), len).unwrap();
    assert_eq!(
        prefixes_of_range(v4("10.0.0.0"), v4("10.0.0.255")),
        vec![p("10.0.0.0", 24)]
    );
    assert_eq!(
        prefixes_of_range(v4("10.0.0.1"), v4("10.0.0.6")),
        vec![
            p("10.0.0.1", 32),
            p("10.0.0.2", 31),
            p("10.0.0.4", 31),
            p("10.0.0.6", 32)
        ]
    );
    assert_eq!(
        prefixes_of_range(v4("0.0.0.0"), v4("255.255.255.255")),
        vec![IpPrefix::ANY_V4]
    );
    assert_eq!(
        prefixes_of_range(v4("::"), v4("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")),
        vec![IpPrefix::ANY_V6]
    );
    let worst = prefixes_of_range(v4("::1"), v4("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"));
    assert_eq!(worst.len(), 254);
    let worst4 = prefixes_of_range(v4("0.0.0.1"), v4("255.255.255.254"));
    assert_eq!(worst4.len(), 62);
    assert!(prefixes_of_range(v4("10.0.0.2"), v4("10.0.0.1")).is_empty());
    assert!(prefixes_of_range(v4("10.0.0.2"), v4("::1")).is_empty());
}

#[test]
fn selectors_from_prefixes_round_trip() {
    let local = ts_with("10.1.0.0/16", IpProtocol::TCP, 1024, 65535);
    let remote = ts_with("192.0.2.0/24", IpProtocol::TCP, 443, 443);
    let sels = to_selectors(&[local], &[remote]).unwrap();
    assert_eq!(sels.len(), 1);
    let s = sels[0];
    assert_eq!(
        s.src,
        IpPrefix::new("10.1.0.0".parse().unwrap(), 16).unwrap()
    );
    assert_eq!(s.protocol, Some(IpProtocol::TCP));
    assert_eq!(
        (s.src_ports, s.dst_ports),
        (PortRange::new(1024, 65535).unwrap(), PortRange::single(443))
    );
    assert_eq!(from_selector(&s), (local, remote));
    let any = to_selectors(&[ts("0.0.0.0/0")], &[ts("0.0.0.0/0")]).unwrap();
    assert_eq!(any, vec![Selector::ANY_V4]);
    assert_eq!(
        from_selector(&Selector::ANY_V6),
        (ts_any(true), ts_any(true))
    );
}

#[test]
fn icmp_type_and_code_follow_rfc_4301() {
    // Echo request (type 8, code 0) from the local side.
    let local = ts_with("10.0.0.0/8", IpProtocol::ICMP, 0x0800, 0x0800);
    let sels = to_selectors(&[local], &[ts("11.0.0.0/8")]).unwrap();
    assert_eq!(sels[0].protocol, Some(IpProtocol::ICMP));
    assert_eq!(
        (sels[0].src_ports, sels[0].dst_ports),
        (PortRange::single(8), PortRange::single(0))
    );
    assert_eq!(from_selector(&sels[0]).0, local);
    // Types 3 to 4, any code: widened to every code of those types.
    let range = ts_with("10.0.0.0/8", IpProtocol::ICMP, 0x0301, 0x0400);
    let sels = to_selectors(&[range], &[ts("11.0.0.0/8")]).unwrap();
    assert_eq!(
        (sels[0].src_ports, sels[0].dst_ports),
        (PortRange::new(3, 4).unwrap(), PortRange::ANY)
    );
    // The type/code field is the sender's: the destination's is not read.
    let other = ts_with("11.0.0.0/8", IpProtocol::ICMP, 0x0000, 0x0000);
    let sels = to_selectors(&[local], &[other]).unwrap();
    assert_eq!(sels[0].src_ports, PortRange::single(8));
    let back = to_selectors(&[other], &[local]).unwrap();
    assert_eq!(
        (back[0].src_ports, back[0].dst_ports),
        (PortRange::single(0), PortRange::single(0))
    );
    // Protocols without ports: any.
    let gre = ts_with("10.0.0.0/8", IpProtocol(47), 1, 1);
    let sels = to_selectors(&[gre], &[ts("11.0.0.0/8")]).unwrap();
    assert!(sels[0].src_ports.is_any() && sels[0].dst_ports.is_any());
    // OPAQUE is widened to any.
    let opaque = ts_with("10.0.0.0/8", IpProtocol::UDP, u16::MAX, 0);
    let sels = to_selectors(&[opaque], &[ts("11.0.0.0/8")]).unwrap();
    assert!(sels[0].src_ports.is_any());
}

// ---- properties ----

fn small_ts() -> impl Strategy<Value = TrafficSelector> {
    let protocol = prop_oneof![Just(0u8), Just(6), Just(17), Just(1)];
    let ports = prop_oneof![
        Just((0u16, u16::MAX)),
        Just((u16::MAX, 0)),
        (0u16..8, 0u16..8).prop_map(|(a, b)| (a.min(b), a.max(b))),
    ];
    (0u8..16, 0u8..16, protocol, ports).prop_map(|(a, b, protocol, (start_port, end_port))| {
        let (lo, hi) = (a.min(b), a.max(b));
        TrafficSelector {
            ip_protocol: IpProtocol(protocol),
            start_port,
            end_port,
            addresses: TsAddresses::V4 {
                start: Ipv4Addr::new(10, 0, 0, lo),
                end: Ipv4Addr::new(10, 0, 0, hi),
            },
        }
    })
}

/// Whether a packet (address, protocol, port) lies inside a selector; the
/// port `None` stands for "ports unavailable" (OPAQUE).
fn holds(ts: &TrafficSelector, addr: u8, protocol: u8, port: Option<u16>) -> bool {
    let r = AddrRange::of(ts);
    let a = u128::from(u32::from(Ipv4Addr::new(10, 0, 0, addr)));
    let port_ok = match port {
        None => is_opaque(ts) || any_ports(ts),
        Some(p) => ts.start_port <= p && p <= ts.end_port,
    };
    r.start <= a && a <= r.end && (ts.ip_protocol.0 == 0 || ts.ip_protocol.0 == protocol) && port_ok
}

proptest! {
    #[test]
    fn narrowing_yields_subsets_of_both_inputs(
        ours in proptest::collection::vec(small_ts(), 0..5),
        proposed in proptest::collection::vec(small_ts(), 0..5),
    ) {
        for n in narrow(&ours, &proposed) {
            prop_assert!(ours.iter().any(|o| is_subset(&n, o)));
            prop_assert!(proposed.iter().any(|p| is_subset(&n, p)));
        }
    }

    #[test]
    fn narrowing_loses_no_allowed_packet(
        ours in proptest::collection::vec(small_ts(), 0..5),
        proposed in proptest::collection::vec(small_ts(), 0..5),
        addr in 0u8..16,
        protocol in prop_oneof![Just(6u8), Just(17), Just(1)],
        port in proptest::option::of(0u16..10),
    ) {
        let allowed = ours.iter().any(|o| holds(o, addr, protocol, port))
            && proposed.iter().any(|p| holds(p, addr, protocol, port))
            && ours.iter().any(|o| proposed.iter().any(|p| {
                intersect(o, p).is_some_and(|x| holds(&x, addr, protocol, port))
            }));
        let kept = narrow(&ours, &proposed).iter().any(|n| holds(n, addr, protocol, port));
        prop_assert_eq!(allowed, kept);
    }

    #[test]
    fn prefix_cover_is_exact(a in any::<u32>(), b in any::<u32>(), probe in any::<u32>()) {
        let (lo, hi) = (a.min(b), a.max(b));
        let cover = prefixes_of_range(IpAddr::V4(lo.into()), IpAddr::V4(hi.into()));
        prop_assert!(cover.len() <= 62);
        for x in [lo, hi, probe, lo.wrapping_sub(1), hi.wrapping_add(1)] {
            let inside = lo <= x && x <= hi;
            let hits = cover.iter().filter(|p| p.contains(IpAddr::V4(x.into()))).count();
            prop_assert_eq!(hits, usize::from(inside), "{:?} in {}-{}", x, lo, hi);
        }
    }

    #[test]
    fn data_plane_selectors_cover_every_negotiated_packet(
        src in proptest::collection::vec(small_ts(), 1..3),
        dst in proptest::collection::vec(small_ts(), 1..3),
        s_addr in 0u8..16,
        d_addr in 0u8..16,
        protocol in prop_oneof![Just(6u8), Just(17)],
        s_port in 0u16..10,
        d_port in 0u16..10,
    ) {
        let sels = to_selectors(&src, &dst).unwrap();
        let negotiated = src.iter().any(|s| dst.iter().any(|d| {
            holds(s, s_addr, protocol, Some(s_port))
                && holds(d, d_addr, protocol, Some(d_port))
                && intersect_protocol(s.ip_protocol, d.ip_protocol).is_some()
        }));
        let key = FlowKey {
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, s_addr)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, d_addr)),
            protocol: IpProtocol(protocol),
            src_port: s_port,
            dst_port: d_port,
        };
        if negotiated {
            prop_assert!(sels.iter().any(|s| s.matches(&key)));
        }
    }
}
