use super::*;

fn pool(name: &str, first: &str, last: &str) -> PoolConfig {
    PoolConfig {
        name: name.to_owned(),
        first: first.parse().unwrap(),
        last: last.parse().unwrap(),
        dns: Vec::new(),
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn addresses_in_order_and_the_same_again_for_the_same_identity() {
    let mut p = AddressPools::new(&[pool("rw", "10.3.0.1", "10.3.0.3")]);
    assert_eq!(p.acquire("rw", "alice"), Ok(ip("10.3.0.1")));
    assert_eq!(p.acquire("rw", "bob"), Ok(ip("10.3.0.2")));
    p.release("rw", "alice", ip("10.3.0.1"));
    // A fresh address is taken before an offline lease is reclaimed.
    assert_eq!(p.acquire("rw", "carol"), Ok(ip("10.3.0.3")));
    // Alice reconnects: her address is still hers.
    assert_eq!(p.acquire("rw", "alice"), Ok(ip("10.3.0.1")));
    assert_eq!(p.acquire("rw", "dave"), Err(PoolError::Exhausted));
    assert_eq!(p.acquire("nope", "dave"), Err(PoolError::Unknown));
}

#[test]
fn the_lease_offline_longest_is_reclaimed_first() {
    let mut p = AddressPools::new(&[pool("rw", "10.3.0.1", "10.3.0.2")]);
    let a = p.acquire("rw", "alice").unwrap();
    let b = p.acquire("rw", "bob").unwrap();
    p.release("rw", "bob", b);
    p.release("rw", "alice", a);
    assert_eq!(p.acquire("rw", "carol"), Ok(b), "bob went offline first");
    // Bob lost his; he gets alice's, the only offline one left.
    assert_eq!(p.acquire("rw", "bob"), Ok(a));
    assert_eq!(p.acquire("rw", "alice"), Err(PoolError::Exhausted));
}

#[test]
fn two_holders_keep_a_lease_online_until_both_release() {
    // A rekeyed IKE SA and its successor, or two devices of one identity.
    let mut p = AddressPools::new(&[pool("rw", "10.3.0.1", "10.3.0.1")]);
    let a = p.acquire("rw", "alice").unwrap();
    assert_eq!(p.acquire("rw", "alice"), Ok(a));
    p.release("rw", "alice", a);
    assert_eq!(p.acquire("rw", "bob"), Err(PoolError::Exhausted));
    p.release("rw", "alice", a);
    assert_eq!(p.acquire("rw", "bob"), Ok(a));
    // A release that names another address, or one never held, changes
    // nothing.
    p.release("rw", "bob", ip("10.3.0.9"));
    p.release("rw", "mallory", a);
    assert_eq!(p.usage()[0].online, 1);
}

#[test]
fn ipv6_pools_and_usage() {
    let mut p = AddressPools::new(&[pool("v6", "fd00:3::1", "fd00:3::ffff:ffff:ffff:ffff")]);
    assert_eq!(p.acquire("v6", "alice"), Ok(ip("fd00:3::1")));
    assert_eq!(p.acquire("v6", "bob"), Ok(ip("fd00:3::2")));
    p.release("v6", "bob", ip("fd00:3::2"));
    let usage = &p.usage()[0];
    assert_eq!((usage.online, usage.offline), (1, 1));
    assert_eq!(usage.size, u64::MAX, "2^64 - 1 addresses, saturated");
}

#[test]
fn a_reconfigured_pool_keeps_the_leases_in_its_range() {
    let mut p = AddressPools::new(&[pool("rw", "10.3.0.1", "10.3.0.4")]);
    let a = p.acquire("rw", "alice").unwrap();
    let b = p.acquire("rw", "bob").unwrap();
    let c = p.acquire("rw", "carol").unwrap();
    p.release("rw", "carol", c);
    // The range now starts at .2: alice's .1 is out, bob's .2 and carol's
    // offline .3 stay theirs.
    p.reconfigure(&[pool("rw", "10.3.0.2", "10.3.0.5")]);
    assert_eq!(p.acquire("rw", "bob"), Ok(b));
    let fresh = p.acquire("rw", "dave").unwrap();
    assert_ne!(fresh, b);
    assert_ne!(fresh, c, "carol's offline lease is not fresh");
    assert_ne!(fresh, a);
    assert_eq!(p.acquire("rw", "carol"), Ok(c));
    // An unchanged pool keeps everything.
    let before = p.usage();
    p.reconfigure(&[pool("rw", "10.3.0.2", "10.3.0.5")]);
    assert_eq!(p.usage(), before);
    // A removed pool is gone.
    p.reconfigure(&[]);
    assert_eq!(p.acquire("rw", "bob"), Err(PoolError::Unknown));
}

fn lease(identity: &str, address: &str) -> crate::ha::VirtualIpLease {
    crate::ha::VirtualIpLease {
        pool: "rw".to_owned(),
        identity: identity.to_owned(),
        address: ip(address),
    }
}

/// Node 1 of 3 hands out offsets 1, 4, 7 only; the others' addresses
/// stay free for them even when its share is used up.
#[test]
fn a_cluster_node_hands_out_only_its_share() {
    let mut p = AddressPools::new(&[pool("rw", "10.3.0.0", "10.3.0.9")]);
    p.set_partition(Partition { node: 1, nodes: 3 });
    let got: Vec<IpAddr> = ["a", "b", "c"]
        .iter()
        .map(|id| p.acquire("rw", id).unwrap())
        .collect();
    assert_eq!(got, [ip("10.3.0.1"), ip("10.3.0.4"), ip("10.3.0.7")]);
    assert_eq!(p.acquire("rw", "d"), Err(PoolError::Exhausted));
    // Only an offline lease of its own share is reclaimed.
    p.release("rw", "b", ip("10.3.0.4"));
    assert_eq!(p.adopt(&[lease("x", "10.3.0.2")]), 0);
    p.release("rw", "x", ip("10.3.0.2"));
    assert_eq!(p.acquire("rw", "d"), Ok(ip("10.3.0.4")), "b's, not x's");
}

/// Leases of other nodes' IKE SAs are marked and given back like local
/// ones; an identity gets its own offline lease back on any node.
#[test]
fn replicated_leases_are_held_skipped_and_kept_for_their_identity() {
    let mut p = AddressPools::new(&[pool("rw", "10.3.0.0", "10.3.0.3")]);
    p.set_partition(Partition { node: 0, nodes: 2 });
    assert_eq!(p.adopt(&[lease("x", "10.3.0.0")]), 0);
    assert_eq!(p.acquire("rw", "y"), Ok(ip("10.3.0.2")), "offset 0 is x's");
    // A second IKE SA of x (an IKE SA rekey's successor) holds it too.
    p.adopt(&[lease("x", "10.3.0.0")]);
    p.release("rw", "x", ip("10.3.0.0"));
    assert_eq!(p.usage()[0].online, 2, "still held once");
    p.release("rw", "x", ip("10.3.0.0"));
    assert_eq!((p.usage()[0].online, p.usage()[0].offline), (1, 1));
    // Offset 1 is node 1's share, but the lease is z's own.
    p.adopt(&[lease("z", "10.3.0.1")]);
    p.release("rw", "z", ip("10.3.0.1"));
    assert_eq!(p.acquire("rw", "z"), Ok(ip("10.3.0.1")));
}

/// A replicated lease of an address this node gave another identity wins
/// and is reported: the local holder's lease is gone.
#[test]
fn a_conflicting_replicated_lease_wins_and_is_counted() {
    let mut p = AddressPools::new(&[pool("rw", "10.3.0.0", "10.3.0.3")]);
    assert_eq!(p.acquire("rw", "y"), Ok(ip("10.3.0.0")));
    assert_eq!(p.adopt(&[lease("x", "10.3.0.0")]), 1);
    assert_eq!(p.acquire("rw", "y"), Ok(ip("10.3.0.1")));
    // Releasing y's old address changes nothing.
    p.release("rw", "y", ip("10.3.0.0"));
    assert_eq!(p.usage()[0].online, 2);
}
