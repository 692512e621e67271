//! Unit tests of the SPD and the flow cache; the randomized comparison with
//! a linear first-match model lives in `tests/spd_model.rs`.

use super::*;
use crate::selector::{IpPrefix, PortRange};
use core::net::IpAddr;
use phalanx_wire::IpProtocol;

fn net(s: &str, len: u8) -> IpPrefix {
    IpPrefix::new(s.parse().expect("test address"), len).expect("test prefix")
}

fn policy(id: u32, priority: u32, src: IpPrefix, dst: IpPrefix, action: PolicyAction) -> Policy {
    Policy {
        id: PolicyId(id),
        priority,
        selector: Selector::between(src, dst),
        action,
    }
}

fn key(src: &str, dst: &str, protocol: IpProtocol, dst_port: u16) -> FlowKey {
    let addr = |s: &str| s.parse::<IpAddr>().expect("test address");
    FlowKey {
        src: addr(src),
        dst: addr(dst),
        protocol,
        src_port: 1024,
        dst_port,
    }
}

fn site_spd() -> Spd {
    let mut spd = Spd::new();
    let web = Selector {
        protocol: Some(IpProtocol::TCP),
        dst_ports: PortRange::single(443),
        ..Selector::between(net("10.1.0.0", 16), net("10.2.0.0", 16))
    };
    spd.insert(Policy {
        id: PolicyId(1),
        priority: 10,
        selector: web,
        action: PolicyAction::Bypass,
    })
    .expect("insert");
    let subnet = policy(
        2,
        20,
        net("10.1.0.0", 16),
        net("10.2.0.0", 16),
        PolicyAction::Protect(7),
    );
    spd.insert(subnet).expect("insert");
    let any = policy(
        3,
        1000,
        IpPrefix::ANY_V4,
        IpPrefix::ANY_V4,
        PolicyAction::Discard,
    );
    spd.insert(any).expect("insert");
    spd
}

#[test]
fn first_match_in_priority_order() {
    let spd = site_spd();
    let action = |k: &FlowKey| spd.lookup(k).map(|p| p.action);
    assert_eq!(
        action(&key("10.1.2.3", "10.2.3.4", IpProtocol::TCP, 443)),
        Some(PolicyAction::Bypass)
    );
    let protect = Some(PolicyAction::Protect(7));
    assert_eq!(
        action(&key("10.1.2.3", "10.2.3.4", IpProtocol::TCP, 80)),
        protect
    );
    assert_eq!(
        action(&key("10.1.2.3", "10.2.3.4", IpProtocol::UDP, 443)),
        protect
    );
    assert_eq!(
        action(&key("10.9.2.3", "10.2.3.4", IpProtocol::UDP, 443)),
        Some(PolicyAction::Discard)
    );
    assert_eq!(
        action(&key("2001:db8::1", "2001:db8::2", IpProtocol::UDP, 1)),
        None
    );
    assert_eq!(spd.len(), 3);
    assert_eq!(spd.classifier_groups(), 2);
}

#[test]
fn equal_priorities_go_by_insertion_order() {
    let mut spd = Spd::new();
    let wide = |id, action| policy(id, 5, IpPrefix::ANY_V4, IpPrefix::ANY_V4, action);
    spd.insert(wide(1, PolicyAction::Bypass)).expect("insert");
    spd.insert(policy(
        2,
        5,
        net("10.0.0.0", 8),
        net("10.0.0.0", 8),
        PolicyAction::Discard,
    ))
    .expect("insert");
    let k = key("10.0.0.1", "10.0.0.2", IpProtocol::ICMP, 0);
    assert_eq!(spd.lookup(&k).map(|p| p.id), Some(PolicyId(1)));
    let removed = spd.remove(PolicyId(1)).expect("installed");
    assert_eq!(spd.lookup(&k).map(|p| p.id), Some(PolicyId(2)));
    spd.insert(removed).expect("re-insert");
    assert_eq!(
        spd.lookup(&k).map(|p| p.id),
        Some(PolicyId(2)),
        "re-inserted goes last"
    );
    let order: Vec<u32> = spd.policies().iter().map(|p| p.id.0).collect();
    assert_eq!(order, [2, 1]);
}

#[test]
fn insert_validates_and_remove_updates_generation() {
    let mut spd = site_spd();
    let g0 = spd.generation();
    let dup = policy(
        1,
        0,
        IpPrefix::ANY_V4,
        IpPrefix::ANY_V4,
        PolicyAction::Bypass,
    );
    assert_eq!(spd.insert(dup), Err(SpdError::DuplicateId(PolicyId(1))));
    let mixed = policy(
        9,
        0,
        IpPrefix::ANY_V4,
        IpPrefix::ANY_V6,
        PolicyAction::Bypass,
    );
    assert_eq!(spd.insert(mixed), Err(SpdError::MixedAddressFamilies));
    assert_eq!(spd.generation(), g0, "refused changes change nothing");
    assert_eq!(
        spd.remove(PolicyId(2)).map(|p| p.action),
        Some(PolicyAction::Protect(7))
    );
    assert!(spd.generation() > g0);
    assert!(spd.remove(PolicyId(2)).is_none());
    assert!(spd.get(PolicyId(2)).is_none());
    assert_eq!(spd.get(PolicyId(3)).map(|p| p.priority), Some(1000));
    let k = key("10.1.2.3", "10.2.3.4", IpProtocol::TCP, 80);
    assert_eq!(spd.lookup(&k).map(|p| p.id), Some(PolicyId(3)));
}

#[test]
fn slots_are_reused_after_removal() {
    let mut spd = Spd::new();
    for id in 0..100 {
        let p = policy(
            id,
            id,
            net("10.0.0.0", 8),
            IpPrefix::host("10.0.0.1".parse().expect("a")),
            PolicyAction::Bypass,
        );
        spd.insert(p).expect("insert");
    }
    for id in 0..100 {
        spd.remove(PolicyId(id)).expect("installed");
    }
    assert!(spd.is_empty());
    assert_eq!(spd.classifier_groups(), 0);
    spd.insert(policy(
        500,
        1,
        IpPrefix::ANY_V4,
        IpPrefix::ANY_V4,
        PolicyAction::Discard,
    ))
    .expect("insert");
    assert_eq!(spd.slots.len(), 100);
}

#[test]
fn flow_cache_hits_and_follows_changes() {
    let mut spd = site_spd();
    let mut cache = FlowCache::new(64);
    let k = key("10.1.2.3", "10.2.3.4", IpProtocol::TCP, 80);
    assert_eq!(cache.lookup(&spd, &k).map(|p| p.id), Some(PolicyId(2)));
    assert_eq!(cache.lookup(&spd, &k).map(|p| p.id), Some(PolicyId(2)));
    assert_eq!(cache.stats(), FlowCacheStats { hits: 1, misses: 1 });
    spd.remove(PolicyId(2));
    assert_eq!(cache.lookup(&spd, &k).map(|p| p.id), Some(PolicyId(3)));
    assert_eq!(cache.stats().misses, 2);
    let v6 = key("2001:db8::1", "2001:db8::2", IpProtocol::UDP, 1);
    assert!(cache.lookup(&spd, &v6).is_none());
    assert!(cache.lookup(&spd, &v6).is_none());
    assert_eq!(cache.stats().hits, 2, "no-match is cached too");
}

#[test]
fn flow_cache_tells_spd_clones_apart() {
    let spd = site_spd();
    let mut other = spd.clone();
    let mut cache = FlowCache::new(16);
    let k = key("10.1.2.3", "10.2.3.4", IpProtocol::TCP, 80);
    assert_eq!(cache.lookup(&spd, &k).map(|p| p.id), Some(PolicyId(2)));
    other.remove(PolicyId(2));
    other.remove(PolicyId(3));
    assert!(cache.lookup(&other, &k).is_none());
    assert_eq!(cache.lookup(&spd, &k).map(|p| p.id), Some(PolicyId(2)));
}

#[test]
fn flow_cache_evicts_least_recently_used_within_a_set() {
    let mut spd = Spd::new();
    spd.insert(policy(
        1,
        1,
        IpPrefix::ANY_V4,
        IpPrefix::ANY_V4,
        PolicyAction::Bypass,
    ))
    .expect("insert");
    let mut cache = FlowCache::new(4);
    assert_eq!(cache.capacity(), 4);
    let flows: Vec<FlowKey> = (0..5u16)
        .map(|i| key("10.0.0.1", "10.0.0.2", IpProtocol::UDP, i))
        .collect();
    for f in &flows[..4] {
        cache.lookup(&spd, f);
    }
    cache.lookup(&spd, &flows[0]);
    cache.lookup(&spd, &flows[4]);
    let before = cache.stats();
    cache.lookup(&spd, &flows[0]);
    assert_eq!(
        cache.stats().hits,
        before.hits + 1,
        "recently used flow 0 was kept"
    );
    cache.lookup(&spd, &flows[1]);
    assert_eq!(
        cache.stats().misses,
        before.misses + 1,
        "flow 1 was the LRU victim"
    );
    cache.clear();
    cache.lookup(&spd, &flows[0]);
    assert_eq!(cache.stats().misses, before.misses + 2);
}

#[test]
fn mixed_family_keys_match_nothing() {
    let spd = site_spd();
    let mut cache = FlowCache::new(8);
    let k = key("10.1.2.3", "2001:db8::1", IpProtocol::TCP, 80);
    assert!(spd.lookup(&k).is_none());
    assert!(cache.lookup(&spd, &k).is_none());
}
