//! Virtual IPs on a cluster: the replicated IKE SA state carries the
//! addresses leased to the End-User, every standby marks them leased in
//! its own pools, a successor keeps them, and each node hands out fresh
//! addresses of its own share only ([`phalanx_ike::pool::Partition`]).
//!
//! ```text
//! End-User (A)                gateway node (B, replicating)     standby S
//! IKE_AUTH {CP(CFG_REQUEST)} -->
//!                        <-- {CP(CFG_REPLY: 10.3.0.1)}
//!                             IkeStateChanged {virtual_ips: 10.3.0.1} --> import: leased
//! ```

use std::time::Duration;

use phalanx_ike::config::{EndpointConfig, EndpointLimits, PoolConfig};
use phalanx_ike::pool::Partition;
use phalanx_ike::ts::ts_any_port;
use phalanx_ike::{Counter, Endpoint, IkeSaState as SaState};
use phalanx_sa::IpPrefix;
use phalanx_testkit::ike_pair::{IkePair, Side};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::common::*;
use crate::support::*;

/// The gateway's configuration: any peer, pool rw4 = 10.3.0.0–10.3.0.3.
fn gateway_config() -> EndpointConfig {
    let mut b = connection(Side::B, DEFAULT_IKE);
    b.children[0].remote_ts = vec![ts_any_port(IpPrefix::new(ip("0.0.0.0"), 0).unwrap())];
    b.pools = vec!["rw4".to_owned()];
    EndpointConfig {
        connections: vec![b],
        limits: EndpointLimits::default(),
        pools: vec![PoolConfig {
            name: "rw4".to_owned(),
            first: ip("10.3.0.0"),
            last: ip("10.3.0.3"),
            dns: Vec::new(),
        }],
    }
}

/// An End-User (A) asking for an IPv4 address from the gateway (B), node
/// 0 of 2, which replicates.
fn road_warrior(seed: u64) -> IkePair {
    let mut a = connection(Side::A, DEFAULT_IKE);
    a.vips = vec![ip("0.0.0.0")];
    a.children[0].local_ts = vec![ts_any_port(IpPrefix::new(ip("0.0.0.0"), 0).unwrap())];
    let mut p = IkePair::new(
        (config(a), ip(ADDR_A)),
        (gateway_config(), ip(ADDR_B)),
        seed,
    );
    p.with(Side::B, |e, now| {
        e.set_ha_replication(now, true);
        e.set_pool_partition(Partition { node: 0, nodes: 2 });
    });
    p
}

/// Node 1 of 2 standing by for the gateway.
fn standby_node(p: &IkePair, seed: u64) -> Standby {
    let rng = Box::new(ChaCha20Rng::seed_from_u64(seed));
    let mut e = Endpoint::new(
        gateway_config(),
        phalanx_crypto::default_provider(),
        rng,
        p.now,
    );
    e.set_ha_replication(p.now, true);
    e.set_pool_partition(Partition { node: 1, nodes: 2 });
    Standby::with(e, Side::B)
}

fn online_offline(e: &Endpoint) -> (u64, u64) {
    let usage = e.pool_usage();
    (usage[0].online, usage[0].offline)
}

fn vips_of(e: &Endpoint) -> Vec<std::net::IpAddr> {
    e.ike_sas()
        .into_iter()
        .find(|s| s.state == SaState::Established)
        .map(|s| s.virtual_ips)
        .unwrap_or_default()
}

#[test]
fn a_standby_holds_the_lease_and_a_successor_keeps_it() {
    let mut p = road_warrior(0x9001);
    established(&mut p);
    assert_eq!(
        vips_of(p.endpoint_ref(Side::A)),
        [ip("10.3.0.0")],
        "node 0's share"
    );
    let mut s = standby_node(&p, 0x9002);
    s.follow(&p);
    assert_eq!(
        online_offline(&s.endpoint),
        (1, 0),
        "leased on the standby too"
    );
    assert_eq!(
        last_state(&p, Side::B).virtual_ips[0].address,
        ip("10.3.0.0")
    );

    // The gateway node dies; S runs the IKE SA: same address, still
    // leased once, and the End-User's rekeys are narrowed to it.
    let (spi_i, spi_r) = last_state(&p, Side::B).spis();
    s.promote(&mut p, spi_i, spi_r);
    assert_eq!(vips_of(p.endpoint_ref(Side::B)), [ip("10.3.0.0")]);
    assert_eq!(online_offline(p.endpoint_ref(Side::B)), (1, 0));
    let old = last_state(&p, Side::B).children[0].spi_in;
    p.with(Side::B, |e, now| e.handle_child_expiry(now, old, false));
    p.run_for(Duration::from_secs(5));
    let narrowed = p.endpoint_ref(Side::B).ike_sas()[0].children[0]
        .remote_ts
        .clone();
    let host = phalanx_wire::ike::TsAddresses::V4 {
        start: "10.3.0.0".parse().unwrap(),
        end: "10.3.0.0".parse().unwrap(),
    };
    assert_eq!(
        narrowed.iter().map(|t| t.addresses).collect::<Vec<_>>(),
        [host],
        "the rekeyed Child SA is narrowed to the address"
    );
    assert_eq!(vips_of(p.endpoint_ref(Side::A)), [ip("10.3.0.0")]);
    assert!(up(&p, 1), "{:#?}", p.endpoint_ref(Side::B).ike_sas());
    assert_eq!(
        p.endpoint_ref(Side::B)
            .counters()
            .get(Counter::VirtualIpConflicts),
        0
    );

    // The End-User leaves: offline, kept for it.
    teardown(&mut p);
    assert_eq!(online_offline(p.endpoint_ref(Side::B)), (0, 1));
}

#[test]
fn a_standby_gives_the_lease_back_when_the_ike_sa_is_gone() {
    let mut p = road_warrior(0x9003);
    established(&mut p);
    let mut s = standby_node(&p, 0x9004);
    s.follow(&p);
    assert_eq!(online_offline(&s.endpoint), (1, 0));
    teardown(&mut p);
    s.follow(&p);
    assert_eq!(
        online_offline(&s.endpoint),
        (0, 1),
        "offline, kept for the identity"
    );
    // The same End-User through the standby's node later: its address.
    assert_eq!(online_offline(p.endpoint_ref(Side::B)), (0, 1));
}
