//! Two gateways in memory, exchanging packets through the real batch
//! processing of the daemon (`OutboundPath` → egress → `InboundPath` →
//! delivery) with the SAs installed from real configuration files: every
//! algorithm, IPv4 and IPv6 inner packets, UDP-encapsulated and plain
//! ESP, both crypto engines, and the drops an attacker or a broken peer
//! causes, asserted as counter deltas.
#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use phalanx_esp::DropReason;
use phalanx_io::{PacketBatch, PacketMeta};
use phalanx_wire::{IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, UdpPacket, UdpRepr};
use phalanxd::config::Config;
use phalanxd::dataplane::{
    CryptoEngine, DaemonCounter, Delivery, Egress, InboundPath, Ingress, OutboundPath, Received,
    WorkerStats,
};
use phalanxd::install::SaStore;

const GW_A: &str = "192.0.2.1";
const GW_B: &str = "192.0.2.2";

/// One SA pair's algorithm lines (`encryption`, `integrity`, keys).
struct Suite {
    name: &'static str,
    lines_ab: &'static str,
    lines_ba: &'static str,
}

const K16: &str = "000102030405060708090a0b0c0d0e0f";
const K20: &str = "0102030405060708090a0b0c0d0e0f1011121314";
const K32: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const K36: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20212223";
const K64: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

fn suites() -> Vec<Suite> {
    let aead = |name, alg: &str, key: &str| Suite {
        name,
        lines_ab: Box::leak(format!("encryption = \"{alg}\"\nkey = \"{key}\"\n").into_boxed_str()),
        lines_ba: Box::leak(
            format!(
                "encryption = \"{alg}\"\nkey = \"{}\"\n",
                key.replace("00", "ff")
            )
            .into_boxed_str(),
        ),
    };
    let hmac = |name, alg: &str, key: &str, integ: &str, ikey: &str| {
        let key_line = if key.is_empty() {
            String::new()
        } else {
            format!("key = \"{key}\"\n")
        };
        let lines = format!("encryption = \"{alg}\"\n{key_line}integrity = \"{integ}\"\nintegrity_key = \"{ikey}\"\n");
        Suite {
            name,
            lines_ab: Box::leak(lines.clone().into_boxed_str()),
            lines_ba: Box::leak(lines.replace("0001", "ee01").into_boxed_str()),
        }
    };
    vec![
        aead("aes128gcm16", "aes128gcm16", K20),
        aead("aes256gcm16", "aes256gcm16", K36),
        aead("chacha20poly1305", "chacha20poly1305", K36),
        aead("aes128gmac", "aes128gmac", K20),
        hmac("aes128+sha256", "aes128", K16, "sha256", K32),
        hmac("aes256+sha512", "aes256", K32, "sha512", K64),
        hmac("null+sha256", "null", "", "sha256", K32),
    ]
}

/// The configuration of gateway `me` (A or B) with `suite`, UDP
/// encapsulation or plain ESP.
fn config(me: char, suite: &Suite, encap: &str) -> Config {
    let text = config_text(me, suite, encap);
    Config::parse(&format!("gw{me}.toml"), &text).unwrap_or_else(|e| panic!("{e}"))
}

/// The text of [`config`].
fn config_text(me: char, suite: &Suite, encap: &str) -> String {
    let (local, remote, out_spi, in_spi, my_net, my_net6, peer_net, peer_net6) = match me {
        'A' => (
            GW_A,
            GW_B,
            0x1001,
            0x2001,
            "10.1.0.0/24",
            "fd01::/64",
            "10.2.0.0/24",
            "fd02::/64",
        ),
        _ => (
            GW_B,
            GW_A,
            0x2001,
            0x1001,
            "10.2.0.0/24",
            "fd02::/64",
            "10.1.0.0/24",
            "fd01::/64",
        ),
    };
    let (out_lines, in_lines) = if me == 'A' {
        (suite.lines_ab, suite.lines_ba)
    } else {
        (suite.lines_ba, suite.lines_ab)
    };
    format!(
        r#"[clear]
tun = "phx0"
[protected]
local = "{local}"
raw_esp = true
[[sa]]
name = "out"
direction = "out"
spi = {out_spi}
{out_lines}remote = "{remote}"
encap = "{encap}"
[[sa]]
name = "in"
direction = "in"
spi = {in_spi}
{in_lines}remote = "{remote}"
encap = "{encap}"
selectors = [{{ src = "{peer_net}", dst = "{my_net}" }}, {{ src = "{peer_net6}", dst = "{my_net6}" }}]
[[policy]]
name = "v4"
src = "{my_net}"
dst = "{peer_net}"
action = "protect"
sa = "out"
[[policy]]
name = "v6"
src = "{my_net6}"
dst = "{peer_net6}"
action = "protect"
sa = "out"
[[policy]]
name = "drop-v4"
src = "{my_net}"
dst = "10.9.0.0/16"
action = "discard"
"#
    )
}

/// One gateway: its SAs and the two batch paths of one worker.
struct Gateway {
    store: SaStore,
    local: IpAddr,
    outbound: OutboundPath,
    inbound: InboundPath,
    engine: CryptoEngine,
    stats: WorkerStats,
}

impl Gateway {
    fn new(config: &Config, crypto_threads: usize) -> Gateway {
        let store = SaStore::new();
        store.apply_config(config, Instant::now()).unwrap();
        let local = config.protected.local;
        Gateway {
            store,
            local,
            outbound: OutboundPath::new(local, 4096, 64),
            inbound: InboundPath::new(local, 4500, 4096, 64),
            engine: CryptoEngine::new(crypto_threads),
            stats: WorkerStats::default(),
        }
    }

    /// Protects `packets`; returns what the sockets would send.
    fn send(&mut self, packets: &[Vec<u8>]) -> Wire {
        let mut batch = PacketBatch::new(packets.len().max(1), 2048, 128);
        for p in packets {
            batch.push(p, PacketMeta::default()).unwrap();
        }
        let mut wire = Wire::default();
        let rt = self.store.load();
        self.outbound.process(
            &rt,
            &batch,
            &mut self.engine,
            &mut wire,
            &mut self.stats,
            Instant::now(),
        );
        wire
    }

    /// Receives `datagrams` from `peer`; returns what reaches the TUN side.
    fn receive(&mut self, datagrams: &[(Vec<u8>, PacketMeta)], ingress: Ingress) -> Vec<Vec<u8>> {
        let mut batch = PacketBatch::new(datagrams.len().max(1), 4096, 0);
        for (d, meta) in datagrams {
            // As the socket reports it: the peer is the source, we are the destination.
            let received = PacketMeta {
                remote: SocketAddr::new(
                    meta.local.unwrap(),
                    if ingress == Ingress::Udp { 4500 } else { 0 },
                ),
                local: Some(self.local),
                stride: d.len(),
                tos: meta.tos,
            };
            batch.push(d, received).unwrap();
        }
        let mut tun = Tun::default();
        let rt = self.store.load();
        let received = Received {
            batch: &batch,
            ingress,
        };
        self.inbound.process(
            &rt,
            received,
            &mut self.engine,
            &mut tun,
            &mut self.stats,
            Instant::now(),
        );
        tun.0
    }

    fn drops(&self, reason: DropReason) -> u64 {
        self.stats.inbound.drops(reason) + self.stats.outbound.drops(reason)
    }
}

/// What the sockets were handed.
#[derive(Default)]
struct Wire {
    udp: Vec<(Vec<u8>, PacketMeta)>,
    raw: Vec<(Vec<u8>, PacketMeta)>,
    ah: Vec<(Vec<u8>, PacketMeta)>,
}

impl Egress for Wire {
    fn udp(&mut self, payload: &[u8], meta: PacketMeta) {
        self.udp.push((payload.to_vec(), meta));
    }
    fn raw(&mut self, esp: &[u8], meta: PacketMeta) {
        self.raw.push((esp.to_vec(), meta));
    }
    fn ah(&mut self, packet: &[u8], meta: PacketMeta) {
        self.ah.push((packet.to_vec(), meta));
    }
}

/// What the TUN device was handed.
#[derive(Default)]
struct Tun(Vec<Vec<u8>>);

impl Delivery for Tun {
    fn deliver(&mut self, packet: &[u8]) {
        self.0.push(packet.to_vec());
    }
}

/// An IPv4 or IPv6 UDP packet from `src` to `dst` with `len` payload bytes.
fn udp_packet(src: &str, dst: &str, len: usize, seed: u8) -> Vec<u8> {
    let (src, dst): (IpAddr, IpAddr) = (src.parse().unwrap(), dst.parse().unwrap());
    let payload: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_add(seed)).collect();
    let udp = UdpRepr {
        src_port: 5000,
        dst_port: 6000,
        payload_len: len,
    };
    let ip_len = if src.is_ipv4() { 20 } else { 40 };
    let mut p = vec![0u8; ip_len + 8 + len];
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => Ipv4Repr {
            src: s,
            dst: d,
            protocol: IpProtocol::UDP,
            payload_len: 8 + len,
            ttl: 64,
            dscp_ecn: 0,
            ident: 1,
            dont_frag: true,
        }
        .emit(&mut Ipv4Packet::new_unchecked(&mut p[..20])),
        (IpAddr::V6(s), IpAddr::V6(d)) => Ipv6Repr {
            src: s,
            dst: d,
            next_header: IpProtocol::UDP,
            payload_len: 8 + len,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
        }
        .emit(&mut Ipv6Packet::new_unchecked(&mut p[..40])),
        _ => unreachable!("test addresses are of one family"),
    }
    udp.emit(&mut UdpPacket::new_unchecked(&mut p[ip_len..ip_len + 8]));
    p[ip_len + 8..].copy_from_slice(&payload);
    p
}

fn mixed_traffic(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| match i % 2 {
            0 => udp_packet("10.1.0.2", "10.2.0.2", 64 + i * 37 % 1300, i as u8),
            _ => udp_packet("fd01::2", "fd02::2", 64 + i * 53 % 1300, i as u8),
        })
        .collect()
}

/// Sends `packets` from A to B over `encap` and checks they arrive intact.
fn exchange(suite: &Suite, encap: &str, crypto_threads: usize) {
    let (mut a, mut b) = (
        Gateway::new(&config('A', suite, encap), crypto_threads),
        Gateway::new(&config('B', suite, encap), crypto_threads),
    );
    let packets = mixed_traffic(100);
    let wire = a.send(&packets);
    let (ingress, datagrams) = match encap {
        "udp" => (Ingress::Udp, &wire.udp),
        _ if suite.name.starts_with("ah") => (Ingress::Ah, &wire.ah),
        _ => (Ingress::Raw, &wire.raw),
    };
    assert_eq!(datagrams.len(), packets.len(), "{}: all sent", suite.name);
    for (_, meta) in datagrams {
        let port = if encap == "udp" { 4500 } else { 0 };
        assert_eq!(meta.remote, SocketAddr::new(GW_B.parse().unwrap(), port));
        assert_eq!(meta.local, Some(GW_A.parse().unwrap()));
    }
    let delivered = b.receive(datagrams, ingress);
    assert_eq!(delivered, packets, "{} over {encap}", suite.name);
    assert_eq!(b.stats.inbound.total_drops(), 0, "{}", suite.name);
    // And back, B to A.
    let back: Vec<Vec<u8>> = packets.iter().map(|p| swap_addresses(p)).collect();
    let wire = b.send(&back);
    let datagrams = match ingress {
        Ingress::Udp => &wire.udp,
        Ingress::Ah => &wire.ah,
        Ingress::Raw => &wire.raw,
    };
    assert_eq!(a.receive(datagrams, ingress), back, "{} back", suite.name);
}

/// The same packet, answered: source and destination swapped.
fn swap_addresses(p: &[u8]) -> Vec<u8> {
    let mut p = p.to_vec();
    if p[0] >> 4 == 4 {
        let mut ip = Ipv4Packet::new_unchecked(&mut p[..]);
        let (s, d) = (ip.src_addr(), ip.dst_addr());
        ip.set_src_addr(d);
        ip.set_dst_addr(s);
        ip.fill_checksum();
    } else {
        let mut ip = Ipv6Packet::new_unchecked(&mut p[..]);
        let (s, d) = (ip.src_addr(), ip.dst_addr());
        ip.set_src_addr(d);
        ip.set_dst_addr(s);
    }
    p
}

#[test]
fn every_algorithm_over_udp_both_ways() {
    for suite in suites() {
        exchange(&suite, "udp", 0);
    }
}

#[test]
fn every_algorithm_over_plain_esp_both_ways() {
    for suite in suites() {
        exchange(&suite, "none", 0);
    }
}

/// AH (RFC 4302) with each HMAC: IPv4 tunnel mode, IPv4 and IPv6 inner
/// packets both ways. Over IPv4 the socket is handed the whole packet
/// (its header is in the ICV) and receives it whole.
fn ah_suites() -> Vec<Suite> {
    [("ah+sha256", "sha256", K32), ("ah+sha512", "sha512", K64)]
        .into_iter()
        .map(|(name, integ, key)| {
            let lines = format!(
                "protocol = \"ah\"\nencryption = \"null\"\nintegrity = \"{integ}\"\nintegrity_key = \"{key}\"\n"
            );
            Suite {
                name,
                lines_ab: Box::leak(lines.clone().into_boxed_str()),
                lines_ba: Box::leak(lines.replace("0001", "ee01").into_boxed_str()),
            }
        })
        .collect()
}

#[test]
fn ah_over_ipv4_both_ways() {
    for suite in ah_suites() {
        exchange(&suite, "none", 0);
    }
}

/// AH over an IPv6 WAN: the socket sends from the AH header on and the
/// kernel writes the IPv6 header the ICV covers (addresses, payload
/// length, next header); on receive the header is rebuilt from what the
/// socket reports (RFC 4302 §3.3.3.1.2).
#[test]
fn ah_over_ipv6_both_ways() {
    let suite = &ah_suites()[0];
    let v6 = |me: char| {
        let text = config_text(me, suite, "none")
            .replace(GW_A, "2001:db8:f::1")
            .replace(GW_B, "2001:db8:f::2");
        Config::parse(&format!("gw{me}.toml"), &text).unwrap_or_else(|e| panic!("{e}"))
    };
    let (mut a, mut b) = (Gateway::new(&v6('A'), 0), Gateway::new(&v6('B'), 0));
    let packets = mixed_traffic(20);
    let wire = a.send(&packets);
    assert_eq!(wire.ah.len(), packets.len());
    assert!(
        wire.ah.iter().all(|(p, _)| p[0] != 0x60),
        "from the AH header on, not IPv6"
    );
    assert_eq!(b.receive(&wire.ah, Ingress::Ah), packets);
    let back: Vec<Vec<u8>> = packets.iter().map(|p| swap_addresses(p)).collect();
    let wire = b.send(&back);
    assert_eq!(a.receive(&wire.ah, Ingress::Ah), back);
    // A fresh packet (a number not seen yet), one byte changed.
    let mut forged = b.send(&back[..1]).ah[0].clone();
    *forged.0.last_mut().unwrap() ^= 1;
    let before = a.drops(DropReason::AuthFailed);
    assert!(a.receive(&[forged], Ingress::Ah).is_empty());
    assert_eq!(a.drops(DropReason::AuthFailed) - before, 1);
}

/// RFC 4302 §3.3.3.1.1.1: the ICV covers the outer header's immutable
/// fields only. A router's changes (TTL, TOS, the checksum) leave an AH
/// packet valid; a changed Identification, address or payload byte is an
/// integrity failure, dropped and counted.
#[test]
fn ah_covers_the_immutable_header_fields_only() {
    let suite = &ah_suites()[0];
    let (mut a, mut b) = (
        Gateway::new(&config('A', suite, "none"), 0),
        Gateway::new(&config('B', suite, "none"), 0),
    );
    let packets = vec![udp_packet("10.1.0.2", "10.2.0.2", 300, 1); 5];
    let wire = a.send(&packets);
    assert_eq!(wire.ah.len(), 5);
    let (first, meta) = &wire.ah[0];
    assert_eq!(first[0] >> 4, 4, "a whole IPv4 packet");
    assert_eq!(first[9], 51, "protocol AH");
    assert_ne!(&first[4..6], &[0, 0], "an Identification the kernel keeps");
    let mutate = |k: usize, f: &dyn Fn(&mut Vec<u8>)| {
        let mut p = wire.ah[k].0.clone();
        f(&mut p);
        (p, *meta)
    };
    let routed = mutate(0, &|p| {
        p[8] -= 3; // TTL
        p[1] = 0xb8; // DSCP EF
        let mut ip = Ipv4Packet::new_unchecked(&mut p[..]);
        ip.fill_checksum();
    });
    assert_eq!(
        b.receive(&[routed], Ingress::Ah),
        packets[..1],
        "mutable fields changed"
    );
    let before = b.drops(DropReason::AuthFailed);
    // Forged with a valid IPv4 checksum, as the kernel would pass them.
    let reheader = |p: &mut Vec<u8>| Ipv4Packet::new_unchecked(&mut p[..]).fill_checksum();
    let forged = [
        mutate(1, &|p| {
            p[5] ^= 1; // Identification
            reheader(p);
        }),
        mutate(2, &|p| {
            p[15] ^= 1; // source address
            reheader(p);
        }),
        mutate(3, &|p| *p.last_mut().unwrap() ^= 1), // inner payload
    ];
    assert!(b.receive(&forged, Ingress::Ah).is_empty());
    assert_eq!(b.drops(DropReason::AuthFailed) - before, 3);
    assert_eq!(b.receive(&wire.ah[4..], Ingress::Ah), packets[4..]);
}

#[test]
fn the_worker_pool_engine_gives_the_same_result() {
    let suites = suites();
    exchange(&suites[0], "udp", 2);
    exchange(&suites[4], "none", 2);
}

#[test]
fn attacks_and_accidents_are_dropped_and_counted() {
    let suite = &suites()[0];
    let (mut a, mut b) = (
        Gateway::new(&config('A', suite, "udp"), 0),
        Gateway::new(&config('B', suite, "udp"), 0),
    );
    let wire = a.send(&mixed_traffic(4));
    let good = &wire.udp;
    assert_eq!(b.receive(good, Ingress::Udp).len(), 4);
    // Replayed.
    assert!(b.receive(&good[..1], Ingress::Udp).is_empty());
    assert_eq!(b.drops(DropReason::Replayed), 1);
    // Bad ICV (last byte of the tag flipped) on a fresh packet.
    let mut fresh = a.send(&mixed_traffic(1)).udp;
    let last = fresh[0].0.len() - 1;
    fresh[0].0[last] ^= 1;
    assert!(b.receive(&fresh, Ingress::Udp).is_empty());
    assert_eq!(b.drops(DropReason::AuthFailed), 1);
    // Unknown SPI.
    let mut unknown = a.send(&mixed_traffic(1)).udp;
    unknown[0].0[..4].copy_from_slice(&0x0bad_0001u32.to_be_bytes());
    assert!(b.receive(&unknown, Ingress::Udp).is_empty());
    assert_eq!(b.drops(DropReason::UnknownSpi), 1);
    // Truncated: an ESP header and nothing else.
    let mut short = a.send(&mixed_traffic(1)).udp;
    short[0].0.truncate(12);
    assert!(b.receive(&short, Ingress::Udp).is_empty());
    assert!(b.drops(DropReason::Truncated) + b.drops(DropReason::InvalidLayout) >= 1);
    // A keepalive and an IKE message are consumed, not dropped as errors.
    let meta = good[0].1;
    b.receive(
        &[(vec![0xff], meta), (vec![0, 0, 0, 0, 1, 2, 3], meta)],
        Ingress::Udp,
    );
    assert_eq!(b.stats.daemon.get(DaemonCounter::NattKeepalives), 1);
    assert_eq!(b.stats.daemon.get(DaemonCounter::IkeMessages), 1);
    // UDP-encapsulated SA, plain ESP on the wire: refused.
    assert!(b
        .receive(&a.send(&mixed_traffic(1)).udp, Ingress::Raw)
        .is_empty());
    assert_eq!(b.drops(DropReason::EncapMismatch), 1);
    // The good ones still work after all that.
    assert_eq!(
        b.receive(&a.send(&mixed_traffic(3)).udp, Ingress::Udp)
            .len(),
        3
    );
}

#[test]
fn policies_decide_what_is_protected() {
    let suite = &suites()[0];
    let mut a = Gateway::new(&config('A', suite, "udp"), 0);
    let wire = a.send(&[
        udp_packet("10.1.0.2", "10.9.1.1", 10, 0), // discard policy
        udp_packet("10.1.0.2", "10.7.0.1", 10, 0), // no policy
        vec![0x45, 0, 0],                          // not an IP packet
        udp_packet("10.1.0.2", "10.2.0.9", 10, 0), // protected
    ]);
    assert_eq!(wire.udp.len(), 1);
    let d = &a.stats.daemon;
    assert_eq!(d.get(DaemonCounter::PolicyDiscard), 1);
    assert_eq!(d.get(DaemonCounter::NoPolicy), 1);
    assert_eq!(d.get(DaemonCounter::TunMalformed), 1);
}

/// Decisions per policy name, as the worker counted them for the
/// policies installed now.
fn hits(gw: &Gateway) -> Vec<(String, u64)> {
    let rt = gw.store.load();
    rt.policies
        .iter()
        .map(|p| (p.config.name.clone(), gw.stats.policy_hits.hits(p)))
        .collect()
}

fn named(list: &[(&str, u64)]) -> Vec<(String, u64)> {
    list.iter().map(|(n, c)| (n.to_string(), *c)).collect()
}

/// Every outbound decision counts for its policy, whether the SPD or the
/// flow cache in front of it answered; a reload keeps the counts of
/// unchanged policies and starts changed and new ones (even on a reused
/// id) from 0.
#[test]
fn policy_hits_count_each_decision_and_survive_reloads() {
    let suite = &suites()[0];
    let text = config_text('A', suite, "udp");
    let mut a = Gateway::new(&config('A', suite, "udp"), 0);
    let flow = udp_packet("10.1.0.2", "10.2.0.9", 10, 0);
    let wire = a.send(&[
        flow.clone(),
        flow.clone(), // the flow cache answers from here on
        flow.clone(),
        udp_packet("fd01::2", "fd02::2", 10, 0),
        udp_packet("10.1.0.2", "10.9.1.1", 10, 0), // discard
        udp_packet("10.1.0.2", "10.9.1.1", 10, 0),
        udp_packet("10.1.0.2", "10.7.0.1", 10, 0), // no policy: no hit
        vec![0x45, 0, 0],                          // not an IP packet
    ]);
    assert_eq!(wire.udp.len(), 4);
    assert_eq!(hits(&a), named(&[("v4", 3), ("v6", 1), ("drop-v4", 2)]));
    a.send(std::slice::from_ref(&flow));
    assert_eq!(hits(&a)[0], ("v4".to_owned(), 4), "a second batch adds");

    // Reload: "drop-v4" changes; the others keep their counts.
    let changed = text.replace(r#"dst = "10.9.0.0/16""#, r#"dst = "10.9.0.0/17""#);
    let reload = |gw: &Gateway, text: &str| {
        let config = Config::parse("gwA.toml", text).unwrap();
        gw.store.apply_config(&config, Instant::now()).unwrap()
    };
    assert_eq!(reload(&a, &changed).changed, ["drop-v4"]);
    assert_eq!(
        hits(&a),
        named(&[("v4", 4), ("v6", 1), ("drop-v4", 0)]),
        "before the worker's next batch, the old count is not reported"
    );
    a.send(&[flow.clone(), udp_packet("10.1.0.2", "10.9.1.1", 10, 0)]);
    assert_eq!(hits(&a), named(&[("v4", 5), ("v6", 1), ("drop-v4", 1)]));

    // Reload: "v6" goes, "v6-new" takes its id (the lowest free) and
    // starts from 0, not from v6's count.
    let before = a.store.load().policies[1].id;
    let renamed = changed.replace(r#"name = "v6""#, r#"name = "v6-new""#);
    reload(&a, &renamed);
    assert_eq!(a.store.load().policies[1].id, before, "id reused");
    a.send(&[flow]);
    assert_eq!(hits(&a), named(&[("v4", 6), ("v6-new", 0), ("drop-v4", 1)]));
}

#[test]
fn a_packet_outside_the_inbound_selectors_is_dropped() {
    let suite = &suites()[0];
    let mut a = Gateway::new(&config('A', suite, "udp"), 0);
    let narrow = Config::parse("gwB.toml", &config_text_with_selector("10.1.0.128/25")).unwrap();
    let mut b = Gateway::new(&narrow, 0);
    let inside = udp_packet("10.1.0.200", "10.2.0.2", 10, 0);
    let outside = udp_packet("10.1.0.2", "10.2.0.2", 10, 1);
    let got = b.receive(&a.send(&[inside.clone(), outside]).udp, Ingress::Udp);
    assert_eq!(got, vec![inside]);
    assert_eq!(b.drops(DropReason::SelectorMismatch), 1);
}

/// Gateway B's AES-GCM configuration with its inbound IPv4 selector source
/// narrowed to `src`.
fn config_text_with_selector(src: &str) -> String {
    let suite = &suites()[0];
    format!(
        "[clear]\ntun = \"phx0\"\n[protected]\nlocal = \"192.0.2.2\"\n\
         [[sa]]\nname = \"out\"\ndirection = \"out\"\nspi = 0x2001\n{}remote = \"192.0.2.1\"\n\
         [[sa]]\nname = \"in\"\ndirection = \"in\"\nspi = 0x1001\n{}remote = \"192.0.2.1\"\n\
         selectors = [{{ src = \"{src}\", dst = \"10.2.0.0/24\" }}]\n",
        suite.lines_ba, suite.lines_ab
    )
}

#[test]
fn a_reload_between_batches_loses_and_replays_nothing() {
    let suite = &suites()[0];
    let config_a = config('A', suite, "udp");
    let (mut a, mut b) = (
        Gateway::new(&config_a, 0),
        Gateway::new(&config('B', suite, "udp"), 0),
    );
    let mut delivered = 0;
    for round in 0..10 {
        let packets = mixed_traffic(50);
        delivered += b.receive(&a.send(&packets).udp, Ingress::Udp).len();
        // Reload both sides with an unrelated change every round.
        let summary = a.store.apply_config(&config_a, Instant::now()).unwrap();
        assert_eq!(summary.unchanged, 5, "round {round}");
        b.store
            .apply_config(&config('B', suite, "udp"), Instant::now())
            .unwrap();
    }
    assert_eq!(delivered, 500);
    assert_eq!(b.stats.inbound.total_drops(), 0);
}

/// `p` with its IPv4 TOS / IPv6 Traffic Class set to `tos`.
fn with_tos(p: &[u8], tos: u8) -> Vec<u8> {
    let mut p = p.to_vec();
    if p[0] >> 4 == 4 {
        let mut ip = Ipv4Packet::new_unchecked(&mut p[..]);
        ip.set_dscp_ecn(tos);
        ip.fill_checksum();
    } else {
        Ipv6Packet::new_unchecked(&mut p[..]).set_traffic_class(tos);
    }
    p
}

/// The inner packet's TOS / Traffic Class.
fn tos_of(p: &[u8]) -> u8 {
    if p[0] >> 4 == 4 {
        Ipv4Packet::new_checked(p).unwrap().dscp_ecn()
    } else {
        Ipv6Packet::new_checked(p).unwrap().traffic_class()
    }
}

/// ECN and DSCP across the tunnel, through the daemon's paths and the
/// socket metadata: A copies each inner TOS into `meta.tos` for its socket
/// (RFC 6040 §4.1 normal mode, RFC 4301 §5.1.2.1); a router on the way
/// marks CE, which B's socket reports in `meta.tos`, and B carries it into
/// ECN-capable inner packets (RFC 6040 §4.2) and drops Not-ECT ones
/// rather than lose the congestion signal.
#[test]
fn ecn_and_dscp_cross_the_tunnel_both_encapsulations() {
    const EF: u8 = 0xb8; // DSCP 46, RFC 3246
    let suite = &suites()[0];
    for (encap, ingress) in [("udp", Ingress::Udp), ("none", Ingress::Raw)] {
        let (mut a, mut b) = (
            Gateway::new(&config('A', suite, encap), 0),
            Gateway::new(&config('B', suite, encap), 0),
        );
        // ECT(0), ECT(1), Not-ECT, EF + ECT(0), EF + Not-ECT; v4 and v6.
        let tos = [2, 1, 0, EF | 2, EF];
        let packets: Vec<Vec<u8>> = mixed_traffic(10)
            .iter()
            .enumerate()
            .map(|(i, p)| with_tos(p, tos[i / 2]))
            .collect();
        let wire = a.send(&packets);
        let sent = if encap == "udp" { &wire.udp } else { &wire.raw };
        let outer: Vec<u8> = sent.iter().map(|(_, m)| m.tos).collect();
        let inner: Vec<u8> = packets.iter().map(|p| tos_of(p)).collect();
        assert_eq!(outer, inner, "{encap}: outer TOS = inner TOS");
        // Unmarked on the way: B delivers the packets as they were sent.
        assert_eq!(b.receive(sent, ingress), packets, "{encap}");

        // Marked CE on the way (the socket reports it).
        let wire = a.send(&packets);
        let sent = if encap == "udp" { &wire.udp } else { &wire.raw };
        let marked: Vec<(Vec<u8>, PacketMeta)> = sent
            .iter()
            .map(|(d, m)| {
                (
                    d.clone(),
                    PacketMeta {
                        tos: m.tos | 3,
                        ..*m
                    },
                )
            })
            .collect();
        let got = b.receive(&marked, ingress);
        let ect: Vec<&Vec<u8>> = packets.iter().filter(|p| tos_of(p) & 3 != 0).collect();
        assert_eq!(got.len(), ect.len(), "{encap}: only ECN-capable ones pass");
        for (delivered, original) in got.iter().zip(ect) {
            // The same packet but for CE (and the IPv4 checksum).
            let expected = with_tos(original, tos_of(original) | 3);
            assert_eq!(delivered, &expected, "{encap}: CE carried in");
        }
        assert_eq!(
            b.drops(DropReason::EcnNotEct),
            4,
            "{encap}: Not-ECT inner under a CE outer is dropped (RFC 6040 §4.2)"
        );
    }
}
