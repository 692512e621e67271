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
