//! Virtual IPs for End-Users (RFC 7296 §2.19, §3.15): the responder leases
//! an inner address out of the connection's pools, answers CFG_REQUEST
//! with CFG_REPLY, and narrows the Child SA's TSi to that address.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::IpAddr;
use std::time::Duration;

use common::*;
use phalanx_ike::config::{EndpointConfig, EndpointLimits, PoolConfig, SaLifetimeConfig};
use phalanx_ike::ts::ts_any_port;
use phalanx_ike::{Counter, IkeSaInfo, IkeSaState, SaEvent};
use phalanx_sa::IpPrefix;
use phalanx_testkit::ike_pair::{IkePair, Side};
use phalanx_wire::ike::{TrafficSelector, TsAddresses};

/// A selector of any port for `a.b.c.d/len`.
fn prefix(s: &str) -> TrafficSelector {
    let (addr, len) = s.split_once('/').unwrap();
    ts_any_port(IpPrefix::new(ip(addr), len.parse().unwrap()).unwrap())
}

fn pool(name: &str, first: &str, last: &str, dns: &[&str]) -> PoolConfig {
    PoolConfig {
        name: name.to_owned(),
        first: ip(first),
        last: ip(last),
        dns: dns.iter().map(|d| ip(d)).collect(),
    }
}

/// A road warrior (A) asking for `vips` with any TSi, and the gateway (B)
/// with `pools`: its child takes any peer address, narrowed by the pool.
fn road_warrior(vips: &[&str], pools: Vec<PoolConfig>, seed: u64) -> IkePair {
    let mut a = connection(Side::A, DEFAULT_IKE);
    a.vips = vips.iter().map(|v| ip(v)).collect();
    a.children[0].local_ts = vec![prefix("0.0.0.0/0")];
    let mut b = connection(Side::B, DEFAULT_IKE);
    b.children[0].remote_ts = vec![prefix("0.0.0.0/0")];
    b.pools = pools.iter().map(|p| p.name.clone()).collect();
    let b_config = EndpointConfig {
        connections: vec![b],
        limits: EndpointLimits::default(),
        pools,
    };
    IkePair::new((config(a), ip(ADDR_A)), (b_config, ip(ADDR_B)), seed)
}

fn established_sa(p: &IkePair, side: Side) -> IkeSaInfo {
    p.endpoint_ref(side)
        .ike_sas()
        .into_iter()
        .find(|s| s.state == IkeSaState::Established)
        .unwrap()
}

/// The peer's side of B's inbound Child SA: what the End-User may send
/// from.
fn b_remote_ts(p: &IkePair) -> Vec<TsAddresses> {
    established_sa(p, Side::B).children[0]
        .remote_ts
        .iter()
        .map(|t| t.addresses)
        .collect()
}

fn host(addr: &str) -> TsAddresses {
    match ip(addr) {
        IpAddr::V4(a) => TsAddresses::V4 { start: a, end: a },
        IpAddr::V6(a) => TsAddresses::V6 { start: a, end: a },
    }
}

// HDR, SK {IDi, AUTH, CP(CFG_REQUEST: INTERNAL_IP4_ADDRESS()), SAi2,
//          TSi(0.0.0.0/0), TSr}  -->
//       <--  HDR, SK {IDr, AUTH, CP(CFG_REPLY: INTERNAL_IP4_ADDRESS(10.3.0.1),
//                INTERNAL_IP4_DNS(10.1.0.53)), SAr2, TSi(10.3.0.1), TSr}
#[test]
fn the_gateway_leases_an_address_and_narrows_tsi_to_it() {
    let pools = vec![pool("rw4", "10.3.0.1", "10.3.0.9", &["10.1.0.53"])];
    let mut p = road_warrior(&["0.0.0.0"], pools, 80);
    established(&mut p);
    assert_eq!(
        established_sa(&p, Side::A).virtual_ips,
        vec![ip("10.3.0.1")]
    );
    assert_eq!(
        established_sa(&p, Side::B).virtual_ips,
        vec![ip("10.3.0.1")]
    );
    assert_eq!(b_remote_ts(&p), vec![host("10.3.0.1")]);
    // The data plane's selectors follow: B's inbound SA accepts only the
    // virtual IP as source.
    let inbound = p
        .events(Side::B)
        .into_iter()
        .find_map(|e| match e {
            SaEvent::InstallInbound(i) => Some(i.clone()),
            _ => None,
        })
        .unwrap();
    assert!(inbound
        .selectors
        .iter()
        .all(|s| s.src.contains(ip("10.3.0.1")) && !s.src.contains(ip("10.3.0.2"))));
    let usage = p.endpoint_ref(Side::B).pool_usage();
    assert_eq!((usage[0].online, usage[0].offline), (1, 0));
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::VirtualIpsAssigned),
        1
    );
    // Gone with its IKE SA: the lease goes offline, kept for the identity.
    teardown(&mut p);
    let usage = p.endpoint_ref(Side::B).pool_usage();
    assert_eq!((usage[0].online, usage[0].offline), (0, 1));
    // The same End-User again: the same address.
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    assert!(p.run_until(|p| up(p, 1), Duration::from_secs(5)));
    assert_eq!(
        established_sa(&p, Side::A).virtual_ips,
        vec![ip("10.3.0.1")]
    );
}

#[test]
fn both_families_from_their_own_pools() {
    let pools = vec![
        pool("rw4", "10.3.0.7", "10.3.0.9", &[]),
        pool("rw6", "fd00:3::100", "fd00:3::1ff", &["fd00:1::53"]),
    ];
    let mut a = connection(Side::A, DEFAULT_IKE);
    a.vips = vec![ip("0.0.0.0"), ip("::")];
    a.children[0].local_ts = vec![prefix("0.0.0.0/0"), prefix("::/0")];
    let mut b = connection(Side::B, DEFAULT_IKE);
    b.children[0].local_ts = vec![prefix("10.2.0.0/16"), prefix("fd00:2::/48")];
    b.children[0].remote_ts = vec![prefix("0.0.0.0/0"), prefix("::/0")];
    a.children[0].remote_ts = b.children[0].local_ts.clone();
    b.pools = vec!["rw4".to_owned(), "rw6".to_owned()];
    let b_config = EndpointConfig {
        connections: vec![b],
        limits: EndpointLimits::default(),
        pools,
    };
    let mut p = IkePair::new((config(a), ip(ADDR_A)), (b_config, ip(ADDR_B)), 81);
    established(&mut p);
    let want = vec![ip("10.3.0.7"), ip("fd00:3::100")];
    assert_eq!(established_sa(&p, Side::A).virtual_ips, want);
    assert_eq!(b_remote_ts(&p), vec![host("10.3.0.7"), host("fd00:3::100")]);
}

// HDR, SK {IDi, AUTH, CP(CFG_REQUEST), SAi2, TSi, TSr}  -->
//                 <--  HDR, SK {IDr, AUTH, N(INTERNAL_ADDRESS_FAILURE)}
#[test]
fn an_empty_pool_is_internal_address_failure_and_no_child() {
    // A pool whose last address is below its first holds none (phalanxd
    // refuses that in a file; a full pool behaves the same).
    let pools = vec![pool("rw4", "10.3.0.1", "10.3.0.0", &[])];
    let mut p = road_warrior(&["0.0.0.0"], pools, 83);
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(2));
    assert_eq!(p.installed(Side::A), (vec![], vec![]));
    assert_eq!(p.installed(Side::B), (vec![], vec![]));
    let b = p.endpoint_ref(Side::B).counters();
    assert_eq!(b.get(Counter::VirtualIpsRefused), 1);
    assert_eq!(b.get(Counter::ChildSasFailed), 1);
    // The IKE SA is up (§1.2), without an address.
    assert!(established_sa(&p, Side::A).virtual_ips.is_empty());
    let failed = p.events(Side::A).into_iter().any(|e| {
        matches!(e, SaEvent::ChildSaFailed { reason, .. } if reason.contains("INTERNAL_ADDRESS_FAILURE"))
    });
    assert!(failed, "{:?}", p.events(Side::A));
}

#[test]
fn without_a_request_nothing_is_leased_and_tsi_is_not_narrowed() {
    let pools = vec![pool("rw4", "10.3.0.1", "10.3.0.9", &[])];
    let mut p = road_warrior(&[], pools, 84);
    established(&mut p);
    assert!(established_sa(&p, Side::B).virtual_ips.is_empty());
    assert_eq!(
        p.endpoint_ref(Side::B).pool_usage()[0].online,
        0,
        "no CFG_REQUEST, no lease"
    );
    assert_eq!(b_remote_ts(&p), vec![prefix("0.0.0.0/0").addresses]);
}

#[test]
fn an_ike_rekey_keeps_the_lease() {
    let pools = vec![pool("rw4", "10.3.0.1", "10.3.0.9", &[])];
    let mut a = connection(Side::A, DEFAULT_IKE);
    a.vips = vec![ip("0.0.0.0")];
    a.children[0].local_ts = vec![prefix("0.0.0.0/0")];
    a.ike_lifetime = SaLifetimeConfig {
        rekey_time: Duration::from_secs(100),
        jitter: Duration::ZERO,
        hard_time: Duration::from_secs(200),
        rekey_bytes: None,
        rekey_packets: None,
    };
    let mut b = connection(Side::B, DEFAULT_IKE);
    b.children[0].remote_ts = vec![prefix("0.0.0.0/0")];
    b.pools = vec!["rw4".to_owned()];
    let b_config = EndpointConfig {
        connections: vec![b],
        limits: EndpointLimits::default(),
        pools,
    };
    let mut p = IkePair::new((config(a), ip(ADDR_A)), (b_config, ip(ADDR_B)), 85);
    established(&mut p);
    let before = established_sa(&p, Side::B).spi_i;
    p.run_for(Duration::from_secs(110));
    let after = established_sa(&p, Side::B);
    assert_ne!(after.spi_i, before, "rekeyed");
    assert_eq!(after.virtual_ips, vec![ip("10.3.0.1")]);
    let usage = p.endpoint_ref(Side::B).pool_usage();
    assert_eq!((usage[0].online, usage[0].offline), (1, 0), "still online");
}
