//! SPD lookups per second on one core, at 100, 10,000 and 100,000
//! policies: "cold" goes through the classifier for every packet (no flow
//! cache), "warm" answers from a per-worker `FlowCache` (16384 entries)
//! whose working set of 4096 flows fits in it: `_action` is the data
//! plane's `lookup_action` (id and action from the cache entry), `_policy`
//! is `lookup`, which also reads the policy from the SPD.
//!
//! Policy generator (seeded, site-to-site style): source and destination
//! prefixes with lengths drawn from {8, 16, 24, 32} (weights 5/25/50/20 %:
//! few whole-/8 rules, mostly subnets and hosts), inside four /8s
//! (10, 100, 172, 192); 60 % of the policies any protocol and port, 25 %
//! TCP to one of 22/80/443/3389/5432, 15 % UDP to one of 53/123/500/4500.
//! Priorities follow specificity as IKE daemons install them (longer
//! prefixes and narrower protocol/port first), and a last 0.0.0.0/0 policy
//! catches the rest, so every lookup matches something. Packets: 80 %
//! inside a randomly chosen policy, 20 % random addresses in the four /8s.
//! Run: cargo bench -p phalanx-sa --bench spd -- --warm-up-time 1 --measurement-time 3

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use phalanx_sa::{
    FlowCache, FlowKey, IpPrefix, Policy, PolicyAction, PolicyId, PortRange, Selector, Spd,
};
use phalanx_wire::IpProtocol;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::net::{IpAddr, Ipv4Addr};

const FIRST_OCTETS: [u32; 4] = [10, 100, 172, 192];
const TCP_PORTS: [u16; 5] = [22, 80, 443, 3389, 5432];
const UDP_PORTS: [u16; 4] = [53, 123, 500, 4500];
/// Lookups per measured iteration.
const BATCH: usize = 1024;
/// Distinct packets for the cold run (far more than any cache would hold).
const COLD_PACKETS: usize = 1 << 16;
/// Flows in the warm working set, and the cache size.
const WARM_FLOWS: usize = 4096;
const CACHE_ENTRIES: usize = 16384;

fn random_addr(rng: &mut ChaCha8Rng) -> u32 {
    (FIRST_OCTETS[rng.gen_range(0..4)] << 24) | rng.gen_range(0..1u32 << 24)
}

fn prefix_len(rng: &mut ChaCha8Rng) -> u8 {
    match rng.gen_range(0..100) {
        0..5 => 8,
        5..30 => 16,
        30..80 => 24,
        _ => 32,
    }
}

fn prefix(rng: &mut ChaCha8Rng) -> IpPrefix {
    let addr = IpAddr::V4(Ipv4Addr::from(random_addr(rng)));
    IpPrefix::new(addr, prefix_len(rng)).expect("length within 32")
}

fn policy(rng: &mut ChaCha8Rng, id: u32) -> Policy {
    let (src, dst) = (prefix(rng), prefix(rng));
    let mut selector = Selector::between(src, dst);
    let narrowing = match rng.gen_range(0..100) {
        0..60 => 2,
        60..85 => {
            selector.protocol = Some(IpProtocol::TCP);
            selector.dst_ports = PortRange::single(TCP_PORTS[rng.gen_range(0..TCP_PORTS.len())]);
            0
        }
        _ => {
            selector.protocol = Some(IpProtocol::UDP);
            selector.dst_ports = PortRange::single(UDP_PORTS[rng.gen_range(0..UDP_PORTS.len())]);
            0
        }
    };
    let unspecific = 64 - u32::from(src.len()) - u32::from(dst.len());
    Policy {
        id: PolicyId(id),
        priority: unspecific * 4 + narrowing,
        selector,
        action: PolicyAction::Protect(id % 64),
    }
}

fn build_spd(n: usize, rng: &mut ChaCha8Rng) -> (Spd, Vec<Policy>) {
    let mut spd = Spd::new();
    let mut policies = Vec::with_capacity(n);
    for id in 0..n as u32 - 1 {
        let p = policy(rng, id);
        spd.insert(p).expect("unique id, one family");
        policies.push(p);
    }
    let catch_all = Policy {
        id: PolicyId(n as u32),
        priority: u32::MAX,
        selector: Selector::ANY_V4,
        action: PolicyAction::Discard,
    };
    spd.insert(catch_all).expect("unique id");
    (spd, policies)
}

fn inside(prefix: IpPrefix, rng: &mut ChaCha8Rng) -> IpAddr {
    let IpAddr::V4(base) = prefix.addr() else {
        unreachable!("IPv4 generator")
    };
    let host = u32::MAX.checked_shr(u32::from(prefix.len())).unwrap_or(0);
    IpAddr::V4(Ipv4Addr::from(u32::from(base) | (rng.gen::<u32>() & host)))
}

fn packet(policies: &[Policy], rng: &mut ChaCha8Rng) -> FlowKey {
    if rng.gen_range(0..100) < 80 {
        let s = policies[rng.gen_range(0..policies.len())].selector;
        FlowKey {
            src: inside(s.src, rng),
            dst: inside(s.dst, rng),
            protocol: s.protocol.unwrap_or(if rng.gen() {
                IpProtocol::TCP
            } else {
                IpProtocol::UDP
            }),
            src_port: rng.gen_range(1024..65535),
            dst_port: if s.dst_ports.is_any() {
                rng.gen()
            } else {
                s.dst_ports.start
            },
        }
    } else {
        FlowKey {
            src: IpAddr::V4(Ipv4Addr::from(random_addr(rng))),
            dst: IpAddr::V4(Ipv4Addr::from(random_addr(rng))),
            protocol: IpProtocol::TCP,
            src_port: rng.gen_range(1024..65535),
            dst_port: TCP_PORTS[rng.gen_range(0..TCP_PORTS.len())],
        }
    }
}

fn action_sum(policy: Option<&Policy>) -> u64 {
    policy.map_or(0, |p| u64::from(p.id.0))
}

fn spd_lookups(c: &mut Criterion) {
    let mut group = c.benchmark_group("spd_lookup");
    group.throughput(Throughput::Elements(BATCH as u64));
    for n in [100usize, 10_000, 100_000] {
        let mut rng = ChaCha8Rng::seed_from_u64(0x5bd1_e995 ^ n as u64);
        let (spd, policies) = build_spd(n, &mut rng);
        println!(
            "{n} policies: {} classifier groups",
            spd.classifier_groups()
        );

        let cold: Vec<FlowKey> = (0..COLD_PACKETS)
            .map(|_| packet(&policies, &mut rng))
            .collect();
        let mut next = 0usize;
        group.bench_function(BenchmarkId::new("cold_classifier", n), |b| {
            b.iter(|| {
                let mut sum = 0u64;
                for key in &cold[next..next + BATCH] {
                    sum += action_sum(spd.lookup(black_box(key)));
                }
                next = (next + BATCH) % COLD_PACKETS;
                sum
            })
        });

        let flows: Vec<FlowKey> = (0..WARM_FLOWS)
            .map(|_| packet(&policies, &mut rng))
            .collect();
        let warm: Vec<FlowKey> = (0..COLD_PACKETS)
            .map(|_| flows[rng.gen_range(0..WARM_FLOWS)])
            .collect();
        let mut cache = FlowCache::with_seed(CACHE_ENTRIES, 0x9e37_79b9);
        for key in &flows {
            cache.lookup(&spd, key);
        }
        group.bench_function(BenchmarkId::new("warm_flow_cache_action", n), |b| {
            b.iter(|| {
                let mut sum = 0u64;
                for key in &warm[next..next + BATCH] {
                    let decision = cache.lookup_action(&spd, black_box(key));
                    sum += decision.map_or(0, |m| u64::from(m.id.0));
                }
                next = (next + BATCH) % COLD_PACKETS;
                sum
            })
        });
        group.bench_function(BenchmarkId::new("warm_flow_cache_policy", n), |b| {
            b.iter(|| {
                let mut sum = 0u64;
                for key in &warm[next..next + BATCH] {
                    sum += action_sum(cache.lookup(&spd, black_box(key)));
                }
                next = (next + BATCH) % COLD_PACKETS;
                sum
            })
        });
        let stats = cache.stats();
        println!(
            "{n} policies: flow cache hit rate {:.4}",
            stats.hits as f64 / (stats.hits + stats.misses).max(1) as f64
        );
    }
    group.finish();
}

criterion_group!(benches, spd_lookups);
criterion_main!(benches);
