//! Per-packet cost of the daemon's batch processing, without devices: two
//! gateways in memory (the real `OutboundPath` / `InboundPath`, SAs from a
//! configuration), 1400-byte IPv4 packets in batches of 64, AES-128-GCM,
//! against the cost of the bare AEAD on the same bytes. Bounded: about
//! two seconds per measurement.
//!
//! `cargo run --release -p phalanxd --example pair_bench`
#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};
use phalanx_io::{PacketBatch, PacketMeta};
use phalanx_wire::{IpProtocol, Ipv4Packet, Ipv4Repr};
use phalanxd::config::Config;
use phalanxd::dataplane::{
    CryptoEngine, Delivery, Egress, InboundPath, Ingress, OutboundPath, Received, WorkerStats,
};
use phalanxd::install::SaStore;

const BATCH: usize = 64;
const LEN: usize = 1400;

fn config(me: &str, local: &str, remote: &str, out: u32, inb: u32, net: (&str, &str)) -> Config {
    let text = format!(
        "[clear]\ntun = \"phx0\"\n[protected]\nlocal = \"{local}\"\n\
         [[sa]]\nname = \"o\"\ndirection = \"out\"\nspi = {out}\nencryption = \"aes128gcm16\"\n\
         key = \"0102030405060708090a0b0c0d0e0f1011121314\"\nremote = \"{remote}\"\n\
         [[sa]]\nname = \"i\"\ndirection = \"in\"\nspi = {inb}\nencryption = \"aes128gcm16\"\n\
         key = \"0102030405060708090a0b0c0d0e0f1011121314\"\nremote = \"{remote}\"\n\
         [[policy]]\nname = \"p\"\nsrc = \"{}\"\ndst = \"{}\"\naction = \"protect\"\nsa = \"o\"\n",
        net.0, net.1
    );
    Config::parse(me, &text).unwrap()
}

/// Collects the sender's datagrams into the receiver's batch, as the
/// socket would hand them over.
struct Wire<'a>(&'a mut PacketBatch);

impl Egress for Wire<'_> {
    fn udp(&mut self, payload: &[u8], meta: PacketMeta) {
        let received = PacketMeta {
            remote: SocketAddr::new(meta.local.unwrap(), 4500),
            local: Some(meta.remote.ip()),
            stride: payload.len(),
            tos: meta.tos,
        };
        self.0.push(payload, received).unwrap();
    }
    fn raw(&mut self, _: &[u8], _: PacketMeta) {
        unreachable!("the benchmark's SAs use UDP encapsulation");
    }
    fn ah(&mut self, _: &[u8], _: PacketMeta) {
        unreachable!("the benchmark's SAs are ESP");
    }
}

struct Sink(usize);

impl Delivery for Sink {
    fn deliver(&mut self, packet: &[u8]) {
        self.0 += black_box(packet).len();
    }
}

fn packet() -> Vec<u8> {
    let mut p = vec![0x5au8; LEN];
    Ipv4Repr {
        src: "10.1.0.2".parse().unwrap(),
        dst: "10.2.0.2".parse().unwrap(),
        protocol: IpProtocol::UDP,
        payload_len: LEN - 20,
        ttl: 64,
        dscp_ecn: 0,
        ident: 0,
        dont_frag: true,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut p[..20]));
    p
}

/// Runs `f` (which handles `BATCH` packets) for about `budget`; ns per packet.
fn per_packet(budget: Duration, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut rounds = 0u64;
    while start.elapsed() < budget {
        f();
        rounds += 1;
    }
    start.elapsed().as_nanos() as f64 / (rounds as f64 * BATCH as f64)
}

fn main() {
    let a_cfg = config(
        "a",
        "192.0.2.1",
        "192.0.2.2",
        0x1001,
        0x2001,
        ("10.1.0.0/24", "10.2.0.0/24"),
    );
    let b_cfg = config(
        "b",
        "192.0.2.2",
        "192.0.2.1",
        0x2001,
        0x1001,
        ("10.2.0.0/24", "10.1.0.0/24"),
    );
    let (a, b) = (SaStore::new(), SaStore::new());
    a.apply_config(&a_cfg, Instant::now()).unwrap();
    b.apply_config(&b_cfg, Instant::now()).unwrap();
    let mut out = OutboundPath::new("192.0.2.1".parse().unwrap(), 4096, BATCH);
    let mut inb = InboundPath::new("192.0.2.2".parse().unwrap(), 4500, 4096, BATCH);
    let (mut engine, mut stats) = (CryptoEngine::new(0), WorkerStats::default());
    let mut tun_rx = PacketBatch::new(BATCH, 2048, 128);
    let p = packet();
    for _ in 0..BATCH {
        tun_rx.push(&p, PacketMeta::default()).unwrap();
    }
    let mut wire = PacketBatch::new(BATCH, 2048, 0);
    let budget = Duration::from_secs(2);

    let outbound = per_packet(budget, || {
        wire.clear();
        let rt = a.load();
        out.process(
            &rt,
            &tun_rx,
            &mut engine,
            &mut Wire(&mut wire),
            &mut stats,
            Instant::now(),
        );
    });
    let mut sink = Sink(0);
    let both = per_packet(budget, || {
        wire.clear();
        let rt = a.load();
        out.process(
            &rt,
            &tun_rx,
            &mut engine,
            &mut Wire(&mut wire),
            &mut stats,
            Instant::now(),
        );
        let rt = b.load();
        let received = Received {
            batch: &wire,
            ingress: Ingress::Udp,
        };
        inb.process(
            &rt,
            received,
            &mut engine,
            &mut sink,
            &mut stats,
            Instant::now(),
        );
    });
    assert_eq!(stats.inbound.total_drops(), 0, "the bench must not drop");

    let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &[7u8; 16]).unwrap());
    let mut buf = vec![0u8; LEN + 2];
    let mut tag = [0u8; 16];
    let seal = per_packet(budget, || {
        for i in 0..BATCH {
            let mut n = [0u8; 12];
            n[4..].copy_from_slice(&(i as u64).to_be_bytes());
            let t = key
                .seal_in_place_separate_tag(
                    Nonce::assume_unique_for_key(n),
                    Aad::from([0u8; 8]),
                    &mut buf,
                )
                .unwrap();
            tag.copy_from_slice(t.as_ref());
        }
    });
    let gbit = |ns: f64| LEN as f64 * 8.0 / ns;
    println!("packet {LEN} B, batch {BATCH}, AES-128-GCM, one thread");
    println!(
        "bare AEAD seal            {seal:7.0} ns/packet  {:5.2} Gbit/s",
        gbit(seal)
    );
    println!(
        "outbound path             {outbound:7.0} ns/packet  {:5.2} Gbit/s",
        gbit(outbound)
    );
    println!(
        "outbound + inbound paths  {both:7.0} ns/packet  {:5.2} Gbit/s",
        gbit(both)
    );
    println!(
        "inbound path (difference) {:7.0} ns/packet",
        both - outbound
    );
    println!(
        "overhead beyond 2x seal   {:7.0} ns/packet ({:.0}%)",
        both - 2.0 * seal,
        100.0 * (both - 2.0 * seal) / both
    );
}
