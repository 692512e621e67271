//! The SPD classifier and the flow cache against a linear first-match
//! reference (RFC 4301 §4.4.1: the first policy in order whose selector
//! matches), over random policy sets (IPv4 and IPv6, prefix lengths 0 to
//! the full width, protocols, port ranges) changed by random inserts and
//! removes, and random packets.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use phalanx_sa::{
    FlowCache, FlowKey, IpPrefix, Policy, PolicyAction, PolicyId, PortRange, Selector, Spd,
};
use phalanx_wire::IpProtocol;
use proptest::prelude::*;

/// A few networks so that prefixes overlap and packets hit them.
const V4_BASES: [u32; 4] = [0x0a00_0000, 0x0a01_0000, 0xc0a8_0100, 0xc000_0200];
const V6_BASES: [u128; 3] = [
    0x2001_0db8_0000_0000_0000_0000_0000_0000,
    0x2001_0db8_0001_0000_0000_0000_0000_0000,
    0xfd00_0000_0000_0000_0000_0000_0000_0000,
];
const PROTOCOLS: [IpProtocol; 4] = [
    IpProtocol::TCP,
    IpProtocol::UDP,
    IpProtocol::ICMP,
    IpProtocol(47),
];
const PORTS: [u16; 6] = [0, 22, 53, 443, 1024, 65535];

fn address(v6: bool) -> impl Strategy<Value = IpAddr> {
    if v6 {
        (0..V6_BASES.len(), any::<u32>(), any::<u8>())
            .prop_map(|(b, host, high)| {
                let bits = V6_BASES[b] | u128::from(host) | (u128::from(high) << 64);
                IpAddr::V6(Ipv6Addr::from(bits))
            })
            .boxed()
    } else {
        (0..V4_BASES.len(), any::<u16>(), prop::bool::weighted(0.1))
            .prop_map(|(b, host, wild)| {
                let bits = if wild {
                    u32::from(host) << 16
                } else {
                    V4_BASES[b] | u32::from(host & 0x1ff)
                };
                IpAddr::V4(Ipv4Addr::from(bits))
            })
            .boxed()
    }
}

fn prefix(v6: bool) -> impl Strategy<Value = IpPrefix> {
    let width = if v6 { 128u8 } else { 32 };
    (address(v6), 0..=width).prop_map(|(a, len)| IpPrefix::new(a, len).expect("len within width"))
}

fn ports() -> impl Strategy<Value = PortRange> {
    prop_oneof![
        3 => Just(PortRange::ANY),
        2 => prop::sample::select(PORTS.to_vec()).prop_map(PortRange::single),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| PortRange { start: a.min(b), end: a.max(b) }),
    ]
}

fn selector() -> impl Strategy<Value = Selector> {
    any::<bool>().prop_flat_map(|v6| {
        (
            prefix(v6),
            prefix(v6),
            prop::option::weighted(0.5, prop::sample::select(PROTOCOLS.to_vec())),
            ports(),
            ports(),
        )
            .prop_map(|(src, dst, protocol, src_ports, dst_ports)| Selector {
                src,
                dst,
                protocol,
                src_ports,
                dst_ports,
            })
    })
}

fn action() -> impl Strategy<Value = PolicyAction> {
    prop_oneof![
        (0u32..4).prop_map(PolicyAction::Protect),
        Just(PolicyAction::Bypass),
        Just(PolicyAction::Discard),
    ]
}

fn packet() -> impl Strategy<Value = FlowKey> {
    any::<bool>().prop_flat_map(|v6| {
        let port = prop_oneof![prop::sample::select(PORTS.to_vec()), any::<u16>()];
        (
            address(v6),
            address(v6),
            prop::sample::select(PROTOCOLS.to_vec()),
            port.clone(),
            port,
        )
            .prop_map(|(src, dst, protocol, src_port, dst_port)| FlowKey {
                src,
                dst,
                protocol,
                src_port,
                dst_port,
            })
    })
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u32, Selector, PolicyAction),
    Remove(usize),
    Lookup(Vec<FlowKey>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..6, selector(), action()).prop_map(|(p, s, a)| Op::Insert(p, s, a)),
        1 => any::<usize>().prop_map(Op::Remove),
        2 => prop::collection::vec(packet(), 1..20).prop_map(Op::Lookup),
    ]
}

/// Policies with their insertion order, searched linearly.
#[derive(Default)]
struct Reference {
    policies: Vec<(u32, u64, Policy)>,
    next_order: u64,
}

impl Reference {
    fn insert(&mut self, policy: Policy) {
        self.policies
            .push((policy.priority, self.next_order, policy));
        self.next_order += 1;
    }

    fn lookup(&self, key: &FlowKey) -> Option<PolicyId> {
        self.policies
            .iter()
            .filter(|(_, _, p)| p.selector.matches(key))
            .min_by_key(|(priority, order, _)| (*priority, *order))
            .map(|(_, _, p)| p.id)
    }
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut spd = Spd::new();
    let mut reference = Reference::default();
    let mut small = FlowCache::new(8);
    let mut large = FlowCache::with_seed(256, 0x5eed);
    let mut next_id = 0u32;
    // Flows looked up before: asked again after every change, so stale
    // cache entries would show.
    let mut recent: Vec<FlowKey> = Vec::new();
    for op in ops {
        match op {
            Op::Insert(priority, selector, action) => {
                let policy = Policy {
                    id: PolicyId(next_id),
                    priority: *priority,
                    selector: *selector,
                    action: *action,
                };
                next_id += 1;
                prop_assert!(spd.insert(policy).is_ok());
                reference.insert(policy);
            }
            Op::Remove(index) if !reference.policies.is_empty() => {
                let (_, _, policy) = reference.policies.remove(index % reference.policies.len());
                prop_assert_eq!(spd.remove(policy.id), Some(policy));
            }
            Op::Remove(_) => {}
            Op::Lookup(keys) => {
                recent.extend_from_slice(keys);
                let excess = recent.len().saturating_sub(64);
                recent.drain(..excess);
            }
        }
        for key in &recent {
            let expected = reference.lookup(key);
            prop_assert_eq!(spd.lookup(key).map(|p| p.id), expected, "{:?}", key);
            prop_assert_eq!(small.lookup(&spd, key).map(|p| p.id), expected);
            prop_assert_eq!(large.lookup(&spd, key).map(|p| p.id), expected);
            let decision = large.lookup_action(&spd, key);
            prop_assert_eq!(decision.map(|m| m.id), expected);
            let action = expected.and_then(|id| spd.get(id)).map(|p| p.action);
            prop_assert_eq!(decision.map(|m| m.action), action);
        }
        prop_assert_eq!(spd.len(), reference.policies.len());
    }
    let mut order = reference.policies.clone();
    order.sort_by_key(|(priority, o, _)| (*priority, *o));
    let ids: Vec<PolicyId> = order.iter().map(|(_, _, p)| p.id).collect();
    let spd_ids: Vec<PolicyId> = spd.policies().iter().map(|p| p.id).collect();
    prop_assert_eq!(spd_ids, ids);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn spd_and_flow_cache_agree_with_linear_first_match(ops in prop::collection::vec(op(), 1..120)) {
        run(&ops)?;
    }

    #[test]
    fn derived_packets_hit_policies(
        selectors in prop::collection::vec((0u32..3, selector()), 1..60),
        picks in prop::collection::vec((any::<prop::sample::Index>(), any::<u32>(), any::<u32>()), 1..60),
    ) {
        // Packets built inside random policies' selectors, so most lookups
        // match something and ordering among overlapping policies matters.
        let mut spd = Spd::new();
        let mut reference = Reference::default();
        let mut cache = FlowCache::new(16);
        for (id, (priority, selector)) in selectors.iter().enumerate() {
            let policy = Policy { id: PolicyId(id as u32), priority: *priority, selector: *selector, action: PolicyAction::Bypass };
            prop_assert!(spd.insert(policy).is_ok());
            reference.insert(policy);
        }
        for (index, host_a, host_b) in picks {
            let s = index.get(&selectors).1;
            let key = FlowKey {
                src: inside(s.src, host_a),
                dst: inside(s.dst, host_b),
                protocol: s.protocol.unwrap_or(IpProtocol::UDP),
                src_port: s.src_ports.start,
                dst_port: s.dst_ports.end,
            };
            let expected = reference.lookup(&key);
            prop_assert!(expected.is_some());
            prop_assert_eq!(spd.lookup(&key).map(|p| p.id), expected);
            prop_assert_eq!(cache.lookup(&spd, &key).map(|p| p.id), expected);
        }
    }
}

/// An address inside `prefix`, host bits taken from `host`.
fn inside(prefix: IpPrefix, host: u32) -> IpAddr {
    match prefix.addr() {
        IpAddr::V4(a) => {
            let mask = u32::MAX.checked_shr(u32::from(prefix.len())).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) | (host & mask)))
        }
        IpAddr::V6(a) => {
            let mask = u128::MAX.checked_shr(u32::from(prefix.len())).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) | (u128::from(host) & mask)))
        }
    }
}

#[test]
fn many_policies_with_churn_keep_first_match_order() {
    // A deterministic larger run: 3000 policies over few length pairs,
    // half removed, compared on 20000 packets.
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut spd = Spd::new();
    let mut reference = Reference::default();
    let lengths = [8u8, 16, 24, 32];
    for id in 0..3000u32 {
        let net = |rng: &mut rand_chacha::ChaCha8Rng| {
            let len = lengths[rng.gen_range(0..4)];
            let addr = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | rng.gen_range(0..0x40000u32)));
            IpPrefix::new(addr, len).expect("valid")
        };
        let selector = Selector {
            protocol: rng.gen_bool(0.3).then_some(IpProtocol::TCP),
            ..Selector::between(net(&mut rng), net(&mut rng))
        };
        let policy = Policy {
            id: PolicyId(id),
            priority: rng.gen_range(0..100),
            selector,
            action: PolicyAction::Bypass,
        };
        spd.insert(policy).expect("insert");
        reference.insert(policy);
    }
    for id in (0..3000u32).step_by(2) {
        spd.remove(PolicyId(id)).expect("installed");
    }
    reference.policies.retain(|(_, _, p)| p.id.0 % 2 == 1);
    let mut cache = FlowCache::new(1024);
    for _ in 0..20_000 {
        let key = FlowKey {
            src: IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | rng.gen_range(0..0x40000u32))),
            dst: IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | rng.gen_range(0..0x40000u32))),
            protocol: if rng.gen_bool(0.5) {
                IpProtocol::TCP
            } else {
                IpProtocol::UDP
            },
            src_port: rng.gen(),
            dst_port: rng.gen(),
        };
        let expected = reference.lookup(&key);
        assert_eq!(spd.lookup(&key).map(|p| p.id), expected);
        assert_eq!(cache.lookup(&spd, &key).map(|p| p.id), expected);
    }
}
