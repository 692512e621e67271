//! Two gateways in memory through the swapping entry points
//! (`process_batch`): the packets must come out as the copying ones
//! deliver them, the receive batches must keep buffers of their length
//! round after round, and packets without the room in front fall back to
//! the copy.

use std::net::SocketAddr;
use std::ops::Range;
use std::time::Instant;

use phalanx_io::{PacketBatch, PacketMeta};
use phalanx_wire::{IpProtocol, Ipv4Packet, Ipv4Repr};

use super::{
    CryptoEngine, Delivery, Egress, InboundPath, Ingress, OutboundPath, Received, ReceivedMut,
    WorkerStats,
};
use crate::config::Config;
use crate::install::SaStore;

pub(super) fn store(
    me: &str,
    local: &str,
    remote: &str,
    spis: (u32, u32),
    net: (&str, &str),
) -> SaStore {
    let (out, inb) = spis;
    let text = format!(
        "[clear]\ntun = \"phx0\"\n[protected]\nlocal = \"{local}\"\n\
         [[sa]]\nname = \"o\"\ndirection = \"out\"\nspi = {out}\nencryption = \"aes128gcm16\"\n\
         key = \"0102030405060708090a0b0c0d0e0f1011121314\"\nremote = \"{remote}\"\n\
         [[sa]]\nname = \"i\"\ndirection = \"in\"\nspi = {inb}\nencryption = \"aes128gcm16\"\n\
         key = \"0102030405060708090a0b0c0d0e0f1011121314\"\nremote = \"{remote}\"\n\
         [[policy]]\nname = \"p\"\nsrc = \"{}\"\ndst = \"{}\"\naction = \"protect\"\nsa = \"o\"\n",
        net.0, net.1
    );
    let store = SaStore::new();
    store
        .apply_config(&Config::parse(me, &text).unwrap(), Instant::now())
        .unwrap();
    store
}

/// Hands the sender's datagrams to the receiver's batch, as its socket would.
/// Counts the datagrams it took by swapping.
struct Wire<'a>(&'a mut PacketBatch, usize);

/// What b's socket reports for a datagram a sent with `meta`.
fn received(meta: PacketMeta, len: usize) -> PacketMeta {
    PacketMeta {
        remote: SocketAddr::new(meta.local.unwrap(), 4500),
        local: Some(meta.remote.ip()),
        stride: len,
        tos: meta.tos,
    }
}

impl Egress for Wire<'_> {
    fn udp(&mut self, payload: &[u8], meta: PacketMeta) {
        self.0.push(payload, received(meta, payload.len())).unwrap();
    }
    fn udp_owned(&mut self, buf: &mut Vec<u8>, bounds: Range<usize>, meta: PacketMeta) {
        let len = bounds.len();
        match self.0.push_buffer(buf, bounds.clone(), received(meta, len)) {
            Some(_) => self.1 += 1,
            None => self.udp(&buf[bounds], meta),
        }
    }
    fn raw(&mut self, _: &[u8], _: PacketMeta) {
        panic!("the test SAs use UDP encapsulation");
    }
    fn ah(&mut self, _: &[u8], _: PacketMeta) {
        panic!("the test SAs are ESP");
    }
}

struct Collect(Vec<Vec<u8>>);

impl Delivery for Collect {
    fn deliver(&mut self, packet: &[u8]) {
        self.0.push(packet.to_vec());
    }
}

fn packet(n: usize) -> Vec<u8> {
    let len = 60 + n * 97;
    let mut p = ipv4_udp(len, n as u16, true);
    for (b, byte) in p.iter_mut().enumerate().skip(20) {
        *byte = (b * 7 + n) as u8;
    }
    p
}

/// An IPv4 packet 10.1.0.2 -> 10.2.0.2 of `len` octets (UDP protocol,
/// body 0x5a) with identification `ident` and DF as given.
pub(super) fn ipv4_udp(len: usize, ident: u16, dont_frag: bool) -> Vec<u8> {
    let mut p = vec![0x5a; len];
    Ipv4Repr {
        src: "10.1.0.2".parse().unwrap(),
        dst: "10.2.0.2".parse().unwrap(),
        protocol: IpProtocol::UDP,
        payload_len: len - 20,
        ttl: 64,
        dscp_ecn: 0,
        ident,
        dont_frag,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut p[..20]));
    p
}

/// Sends `rounds` of eight packets from a to b through either pair of
/// entry points; `wire` is the (room, headroom) of b's receive batch.
/// Returns what b delivered, its counters and how many datagrams the
/// wire took by swapping.
fn exchange(
    swap: bool,
    (room, headroom): (usize, usize),
    rounds: usize,
) -> (Vec<Vec<u8>>, WorkerStats, usize) {
    let a = store(
        "a",
        "192.0.2.1",
        "192.0.2.2",
        (0x1001, 0x2001),
        ("10.1.0.0/24", "10.2.0.0/24"),
    );
    let b = store(
        "b",
        "192.0.2.2",
        "192.0.2.1",
        (0x2001, 0x1001),
        ("10.2.0.0/24", "10.1.0.0/24"),
    );
    let mut tun_rx = PacketBatch::new(8, 2048, 128);
    let mut wire = PacketBatch::new(8, room, headroom);
    let mut swaps = 0;
    // Pools of another size than the batches: the swap must cope.
    let mut out = OutboundPath::new("192.0.2.1".parse().unwrap(), 4096, 4);
    let mut inb = InboundPath::new("192.0.2.2".parse().unwrap(), 4500, 4096, 4);
    let (mut engine, mut stats) = (CryptoEngine::new(0), WorkerStats::default());
    let mut tun = Collect(Vec::new());
    for _ in 0..rounds {
        tun_rx.clear();
        wire.clear();
        for n in 0..8 {
            tun_rx.push(&packet(n), PacketMeta::default()).unwrap();
        }
        let (rt_a, rt_b, now) = (a.load(), b.load(), Instant::now());
        let mut egress = Wire(&mut wire, 0);
        if swap {
            out.process_batch(
                &rt_a,
                &mut tun_rx,
                &mut engine,
                &mut egress,
                &mut stats,
                now,
            );
            swaps += egress.1;
            let received = ReceivedMut {
                batch: &mut wire,
                ingress: Ingress::Udp,
            };
            inb.process_batch(&rt_b, received, &mut engine, &mut tun, &mut stats, now);
        } else {
            out.process(&rt_a, &tun_rx, &mut engine, &mut egress, &mut stats, now);
            swaps += egress.1;
            let received = Received {
                batch: &wire,
                ingress: Ingress::Udp,
            };
            inb.process(&rt_b, received, &mut engine, &mut tun, &mut stats, now);
        }
        assert_eq!(tun_rx.buffer_len(), 2176, "swapped buffers keep the length");
        assert_eq!(wire.buffer_len(), room + headroom);
    }
    (tun.0, stats, swaps)
}

#[test]
fn swapping_delivers_what_copying_delivers() {
    let expected: Vec<Vec<u8>> = (0..3).flat_map(|_| (0..8).map(packet)).collect();
    // The copying entry points use pools of another length, so every
    // datagram is copied onto the wire.
    let (copied, _, swaps) = exchange(false, (2112, 64), 3);
    assert_eq!((copied.as_slice(), swaps), (expected.as_slice(), 0));
    // Wire buffers of the TUN batch's length (2176): ESP packets are
    // swapped all the way through.
    let (swapped, stats, swaps) = exchange(true, (2112, 64), 3);
    assert_eq!((swapped.as_slice(), swaps), (expected.as_slice(), 24));
    assert_eq!(
        stats.inbound.total_drops() + stats.outbound.total_drops(),
        0
    );
}

#[test]
fn no_headroom_falls_back_to_the_copy() {
    let expected: Vec<Vec<u8>> = (0..2).flat_map(|_| (0..8).map(packet)).collect();
    // Wire buffers of another length, packets at offset 0: copied onto
    // the wire, and copied again behind a rebuilt header.
    let (swapped, stats, swaps) = exchange(true, (2048, 0), 2);
    assert_eq!((swapped.as_slice(), swaps), (expected.as_slice(), 0));
    assert_eq!(stats.inbound.total_drops(), 0);
}
