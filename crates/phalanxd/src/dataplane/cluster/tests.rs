//! The frame classifier in memory, no devices: crafted frames in,
//! decisions and counter deltas out, with a 1-node and a 2-node cluster
//! state; and the owned packets through the outbound path with the
//! assigned numbers and node-partitioned IVs.
//!
//! ```text
//!  LAN 10.1.0.0/24 ── inside VIP 10.1.0.1 / 02:00:5e:10:00:02 ─┐
//!                                                               ├ n1, n2 (every frame to both)
//!  WAN peer 192.0.2.2   ── outside VIP 192.0.2.1 / ..:00:01 ──┘
//!  SA out 0x1001 (10.1.0.0/24 -> 10.2.0.0/24), SA in 0x2001
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use phalanx_cluster::dispatch::DispatchScheme;
use phalanx_cluster::{Direction, NodeId, SharedState};
use phalanx_io::{PacketBatch, PacketMeta};
use phalanx_testkit::cluster_group::{ClusterHarness, HarnessConfig};
use phalanx_wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use phalanx_wire::ethernet::{EtherType, EthernetFrame, EthernetRepr, MacAddress};
use phalanx_wire::{EspPacket, IpProtocol, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr};

use super::frames::{decrement_ttl, fill_transport_checksum, fingerprint};
use super::{Decision, FrameClassifier, Side, VirtualSide};
use crate::config::{Config, SideAddresses};
use crate::dataplane::outbound::Assigned;
use crate::dataplane::{CryptoEngine, DaemonCounter, Egress, Ingress, OutboundPath, WorkerStats};
use crate::install::SaStore;

mod ipv6;
mod replay;

const INSIDE_VIP: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
/// The inside's IPv6 virtual address (a dual-stack LAN).
pub(super) const INSIDE_VIP6: Ipv6Addr = Ipv6Addr::new(0xfd01, 0, 0, 0, 0, 0, 0, 1);
const OUTSIDE_VIP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// The harness's peer gateway (`phalanx_testkit::cluster_group::PEER`).
const PEER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const HOST: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 7);
const REMOTE_HOST: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 9);
const INSIDE_VMAC: MacAddress = MacAddress([2, 0, 0x5e, 0x10, 0, 2]);
const OUTSIDE_VMAC: MacAddress = MacAddress([2, 0, 0x5e, 0x10, 0, 1]);
const HOST_MAC: MacAddress = MacAddress([2, 0xaa, 0, 0, 0, 7]);
const ROUTER_MAC: MacAddress = MacAddress([2, 0xbb, 0, 0, 0, 1]);
const OUT_SPI: u32 = 0x1001;
const IN_SPI: u32 = 0x2001;

fn store() -> SaStore {
    let text = format!(
        "[clear]\ntun = \"phx0\"\n[protected]\nlocal = \"{OUTSIDE_VIP}\"\n\
         [[sa]]\nname = \"o\"\ndirection = \"out\"\nspi = {OUT_SPI}\nencryption = \"aes128gcm16\"\n\
         key = \"0102030405060708090a0b0c0d0e0f1011121314\"\nremote = \"{PEER}\"\n\
         [[sa]]\nname = \"i\"\ndirection = \"in\"\nspi = {IN_SPI}\nencryption = \"aes128gcm16\"\n\
         key = \"0102030405060708090a0b0c0d0e0f1011121314\"\nremote = \"{PEER}\"\n\
         [[policy]]\nname = \"p\"\nsrc = \"10.1.0.0/24\"\ndst = \"10.2.0.0/24\"\n\
         action = \"protect\"\nsa = \"o\"\n\
         [[policy]]\nname = \"p6\"\nsrc = \"fd01::/64\"\ndst = \"fd02::/64\"\n\
         action = \"protect\"\nsa = \"o\"\n\
         [[policy]]\nname = \"b\"\nsrc = \"10.1.0.0/24\"\ndst = \"10.3.0.0/24\"\naction = \"bypass\"\n"
    );
    let store = SaStore::new();
    let config = Config::parse("cluster-test", &text).unwrap();
    store.apply_config(&config, Instant::now()).unwrap();
    store
}

/// Node `id`'s sides: the same virtual addresses, its own MACs.
fn sides(id: u8) -> (VirtualSide, VirtualSide) {
    let own = |side: u8| MacAddress([2, 0xcc, 0, 0, side, id]);
    let inside = VirtualSide {
        addresses: SideAddresses {
            v4: Some(INSIDE_VIP),
            v6: Some(INSIDE_VIP6),
        },
        mac: INSIDE_VMAC,
        own_mac: own(2),
    };
    let outside = VirtualSide {
        addresses: IpAddr::V4(OUTSIDE_VIP).into(),
        mac: OUTSIDE_VMAC,
        own_mac: own(1),
    };
    (inside, outside)
}

fn classifier(id: u8) -> FrameClassifier {
    FrameClassifier::new(
        NodeId(u32::from(id)),
        DispatchScheme::PacketRoundRobin,
        sides(id),
        4500,
    )
}

/// An Ethernet frame from `src` to `dst` carrying `payload` as `ethertype`.
fn frame(dst: MacAddress, src: MacAddress, ethertype: EtherType, payload: &[u8]) -> Vec<u8> {
    let header = EthernetRepr {
        dst_addr: dst,
        src_addr: src,
        vlan: None,
        ethertype,
    };
    let mut bytes = vec![0; header.header_len() + payload.len()];
    header.emit(&mut EthernetFrame::new_unchecked(&mut bytes[..]));
    bytes[header.header_len()..].copy_from_slice(payload);
    bytes
}

/// An IPv4 packet with `payload` behind the header.
fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, protocol: IpProtocol, ttl: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0; 20 + payload.len()];
    Ipv4Repr {
        src,
        dst,
        protocol,
        payload_len: payload.len(),
        ttl,
        dscp_ecn: 0x02,
        ident: 7,
        dont_frag: false,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut p[..20]));
    p[20..].copy_from_slice(payload);
    p
}

/// A UDP datagram (checksum filled, over IPv4 or IPv6) from
/// `src`:`ports.0` to `dst`:`ports.1`.
fn udp<A: Into<IpAddr>>(src: A, dst: A, ports: (u16, u16), data: &[u8]) -> Vec<u8> {
    let mut d = vec![0; 8 + data.len()];
    UdpRepr {
        src_port: ports.0,
        dst_port: ports.1,
        payload_len: data.len(),
    }
    .emit(&mut UdpPacket::new_unchecked(&mut d[..]));
    d[8..].copy_from_slice(data);
    let mut packet = UdpPacket::new_unchecked(&mut d[..]);
    match (src.into(), dst.into()) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => packet.fill_checksum_v4(src, dst),
        (IpAddr::V6(src), IpAddr::V6(dst)) => packet.fill_checksum_v6(src, dst),
        _ => panic!("a datagram between two families"),
    }
    d
}

/// Every node of `nodes` adopts its state (`states`, in the same order).
fn begin_all(
    nodes: &mut [FrameClassifier],
    states: &[Arc<SharedState>],
    rt: &crate::install::Runtime,
) {
    let mut stats = WorkerStats::default();
    for (c, state) in nodes.iter_mut().zip(states) {
        c.begin_batch(state, rt, &mut stats);
    }
}

/// Cleartext from a LAN host to `dst` through the inside virtual MAC;
/// `n` varies the payload.
fn cleartext(dst: Ipv4Addr, ttl: u8, n: u8) -> Vec<u8> {
    let data = [n; 40];
    let datagram = udp(HOST, dst, (5000 + u16::from(n), 53), &data);
    let packet = ipv4(HOST, dst, IpProtocol::UDP, ttl, &datagram);
    frame(INSIDE_VMAC, HOST_MAC, EtherType::IPV4, &packet)
}

/// An ESP header and some ciphertext-shaped bytes.
fn esp(spi: u32, seq: u32) -> Vec<u8> {
    let mut e = vec![0x5a; 8 + 48];
    e[..4].copy_from_slice(&spi.to_be_bytes());
    e[4..8].copy_from_slice(&seq.to_be_bytes());
    e
}

/// Plain ESP from the peer to the outside virtual address.
fn esp_frame(spi: u32, seq: u32) -> Vec<u8> {
    let packet = ipv4(PEER, OUTSIDE_VIP, IpProtocol::ESP, 60, &esp(spi, seq));
    frame(OUTSIDE_VMAC, ROUTER_MAC, EtherType::IPV4, &packet)
}

/// ESP in UDP (RFC 3948) from the peer's port 4501.
fn natt_frame(payload: &[u8], dst_port: u16) -> Vec<u8> {
    let datagram = udp(PEER, OUTSIDE_VIP, (4501, dst_port), payload);
    let packet = ipv4(PEER, OUTSIDE_VIP, IpProtocol::UDP, 60, &datagram);
    frame(OUTSIDE_VMAC, ROUTER_MAC, EtherType::IPV4, &packet)
}

/// A broadcast ARP request from the LAN host for `target`.
fn arp_request(target: Ipv4Addr) -> Vec<u8> {
    let repr = ArpRepr {
        operation: ArpOperation::REQUEST,
        sender_mac: HOST_MAC,
        sender_ip: HOST,
        target_mac: MacAddress::UNSPECIFIED,
        target_ip: target,
    };
    let mut bytes = vec![0; repr.frame_len(None)];
    repr.emit_frame(None, &mut bytes).unwrap();
    bytes
}

/// Classifies `frame` and returns the decision's shape and the counters
/// it moved.
fn run(
    c: &mut FrameClassifier,
    side: Side,
    frame: &[u8],
    rt: &crate::install::Runtime,
) -> (Shape, Vec<(DaemonCounter, u64)>) {
    let mut stats = WorkerStats::default();
    let shape = Shape::of(c.classify(side, frame, Instant::now(), rt, &mut stats));
    let moved = stats.daemon.iter().filter(|(_, n)| *n > 0).collect();
    (shape, moved)
}

/// A decision without its borrowed bytes, for assertions.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Shape {
    Arp(Vec<u8>),
    Protect {
        spi: u32,
        seq: u64,
        len: usize,
    },
    Open {
        ingress: Ingress,
        meta: PacketMeta,
        len: usize,
    },
    Ike,
    Drop,
}

impl Shape {
    fn of(decision: Decision<'_>) -> Shape {
        match decision {
            Decision::Reply(f) => Shape::Arp(f.as_bytes().to_vec()),
            Decision::Protect { packet, sa, seq } => Shape::Protect {
                spi: sa.spi(),
                seq,
                len: packet.len(),
            },
            Decision::Open {
                payload,
                meta,
                ingress,
            } => Shape::Open {
                ingress,
                meta,
                len: payload.len(),
            },
            Decision::Ike { .. } => Shape::Ike,
            Decision::Drop => Shape::Drop,
        }
    }
}

fn one(counter: DaemonCounter) -> Vec<(DaemonCounter, u64)> {
    vec![(counter, 1)]
}

#[test]
fn fingerprint_is_fnv1a_over_the_first_64_octets() {
    // draft-eastlake-fnv: FNV-1a 64 of "" and of "a".
    assert_eq!(fingerprint(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fingerprint(b"a"), 0xaf63_dc4c_8601_ec8c);
    let long: Vec<u8> = (0..200).map(|i| i as u8).collect();
    assert_eq!(fingerprint(&long), fingerprint(&long[..64]));
    assert_ne!(fingerprint(&long[..64]), fingerprint(&long[..63]));
}

#[test]
fn ttl_decrement_keeps_the_header_checksum_valid() {
    for ttl in [2, 64, 128, 255] {
        let mut p = ipv4(HOST, REMOTE_HOST, IpProtocol::UDP, ttl, &[1, 2, 3]);
        decrement_ttl(&mut p);
        let ip = Ipv4Packet::new_unchecked(&p[..]);
        assert_eq!(ip.ttl(), ttl - 1);
        assert!(ip.verify_checksum(), "ttl {ttl}");
    }
}

#[test]
fn a_pending_transport_checksum_is_filled_from_scratch() {
    let good = udp(HOST, REMOTE_HOST, (1000, 2000), b"payload bytes");
    let mut p = ipv4(HOST, REMOTE_HOST, IpProtocol::UDP, 64, &good);
    // What an offloading sender leaves: the pseudo-header sum only.
    p[26..28].copy_from_slice(&[0x12, 0x34]);
    assert!(fill_transport_checksum(&mut p));
    assert_eq!(&p[20..], &good[..]);
    // TCP: the field at offset 16 of the segment.
    let mut segment = vec![0u8; 20];
    segment[12] = 5 << 4;
    segment.extend_from_slice(b"data");
    let mut t = ipv4(HOST, REMOTE_HOST, IpProtocol::TCP, 64, &segment);
    assert!(fill_transport_checksum(&mut t));
    let sum = phalanx_wire::checksum::combine(&[
        phalanx_wire::checksum::pseudo_header_v4(HOST, REMOTE_HOST, IpProtocol::TCP, 24),
        phalanx_wire::checksum::data(&t[20..]),
    ]);
    assert_eq!(sum, 0xffff, "the segment now sums to all ones");
    // A TCP header cut short cannot take one.
    let mut short = ipv4(HOST, REMOTE_HOST, IpProtocol::TCP, 64, &[0; 10]);
    assert!(!fill_transport_checksum(&mut short));
}

#[test]
fn arp_frames_name_the_virtual_mac_and_come_from_the_node() {
    let (inside, _) = sides(1);
    let request =
        ArpRepr::parse(&ArpPacket::new_checked(&arp_request(INSIDE_VIP)[14..42]).unwrap()).unwrap();
    let reply = super::neighbour::arp_reply_frame(&request, &inside);
    let eth = EthernetFrame::new_checked(reply.as_bytes()).unwrap();
    assert_eq!(reply.as_bytes().len(), 60, "padded to the Ethernet minimum");
    assert_eq!((eth.dst_addr(), eth.src_addr()), (HOST_MAC, inside.own_mac));
    let arp = ArpRepr::parse(&ArpPacket::new_checked(&reply.as_bytes()[14..42]).unwrap()).unwrap();
    assert_eq!(arp.operation, ArpOperation::REPLY);
    assert_eq!((arp.sender_mac, arp.sender_ip), (INSIDE_VMAC, INSIDE_VIP));
    assert_eq!((arp.target_mac, arp.target_ip), (HOST_MAC, HOST));
    let announce = super::neighbour::announcement_frame(IpAddr::V4(INSIDE_VIP), &inside);
    let eth = EthernetFrame::new_checked(announce.as_bytes()).unwrap();
    assert_eq!(
        (eth.dst_addr(), eth.src_addr()),
        (MacAddress::BROADCAST, inside.own_mac)
    );
    let arp =
        ArpRepr::parse(&ArpPacket::new_checked(&announce.as_bytes()[14..42]).unwrap()).unwrap();
    assert_eq!(
        (arp.sender_ip, arp.target_ip, arp.sender_mac),
        (INSIDE_VIP, INSIDE_VIP, INSIDE_VMAC)
    );
}

/// Collects what the outbound path sends.
#[derive(Default)]
struct Sent(Vec<(Vec<u8>, PacketMeta)>);

impl Egress for Sent {
    fn udp(&mut self, payload: &[u8], meta: PacketMeta) {
        self.0.push((payload.to_vec(), meta));
    }
    fn raw(&mut self, esp: &[u8], meta: PacketMeta) {
        self.0.push((esp.to_vec(), meta));
    }
    fn ah(&mut self, packet: &[u8], meta: PacketMeta) {
        self.0.push((packet.to_vec(), meta));
    }
    fn udp_owned(&mut self, buf: &mut Vec<u8>, bounds: Range<usize>, meta: PacketMeta) {
        self.udp(&buf[bounds], meta);
    }
}

/// `process_assigned`: each packet carries its assigned number, the IV
/// is the node id over the number's low 48 bits, and a number the
/// counter is already past is refused, never sent again.
#[test]
fn assigned_packets_carry_their_number_and_a_node_partitioned_iv() {
    let store = store();
    let rt = store.load();
    let sa = rt
        .outbound
        .lookup(1)
        .or_else(|| {
            rt.sas.iter().find_map(|s| match &s.handle {
                crate::install::SaHandle::Outbound { sa, .. } => Some(Arc::clone(sa)),
                crate::install::SaHandle::Inbound(_) => None,
            })
        })
        .unwrap();
    let mut path = OutboundPath::new(IpAddr::V4(OUTSIDE_VIP), 2176, 8);
    path.set_node_partitioned_ivs(3);
    let mut batch = PacketBatch::new(8, 2048, 128);
    let mut assigned = Vec::new();
    for (n, seq) in [(0u8, 2u64), (1, 5), (2, 4)] {
        let f = cleartext(REMOTE_HOST, 64, n);
        batch.push(&f[14..], PacketMeta::default()).unwrap();
        assigned.push(Assigned {
            sa: Arc::clone(&sa),
            seq,
        });
    }
    let (mut engine, mut stats, mut sent) = (
        CryptoEngine::new(0),
        WorkerStats::default(),
        Sent::default(),
    );
    path.process_assigned(
        &mut batch,
        &assigned,
        &mut engine,
        &mut sent,
        &mut stats,
        Instant::now(),
    );
    let seqs: Vec<(u32, [u8; 8])> = sent
        .0
        .iter()
        .map(|(p, _)| {
            // UDP-encapsulated (the SA's default): marker-free ESP.
            let esp = EspPacket::new_checked(&p[..]).unwrap();
            let iv: [u8; 8] = p[8..16].try_into().unwrap();
            (esp.sequence_number(), iv)
        })
        .collect();
    let iv = |seq: u64| ((3u64 << 48) | seq).to_be_bytes();
    assert_eq!(seqs, [(2, iv(2)), (5, iv(5))], "4 is behind 5: refused");
    assert_eq!(stats.daemon.get(DaemonCounter::ClusterSequenceBehind), 1);
    assert!(sent
        .0
        .iter()
        .all(|(_, m)| m.local == Some(IpAddr::V4(OUTSIDE_VIP))));
    assert_eq!(sent.0[0].1.remote, SocketAddr::new(IpAddr::V4(PEER), 4500));
}

/// The states nodes 1..=`nodes` publish once they founded a cluster (an
/// in-memory group on a virtual clock) with the test's two SAs; and the
/// harness, to go on with.
fn founded(nodes: u32) -> (ClusterHarness, Vec<Arc<SharedState>>) {
    let mut h = ClusterHarness::new(HarnessConfig {
        nodes,
        ..HarnessConfig::default()
    });
    h.add_sa(Direction::Outbound, OUT_SPI, false);
    h.add_sa(Direction::Inbound, IN_SPI, false);
    assert!(
        h.run_until_ready(Duration::from_secs(2)),
        "the cluster forms"
    );
    let states = (1..=nodes)
        .map(|i| h.node(NodeId(i)).unwrap().shared())
        .collect();
    (h, states)
}

/// Node 1 alone: it answers ARP (announcing once), protects every
/// cleartext packet with the next number and opens every ESP packet.
#[test]
fn one_node_answers_arp_and_owns_every_packet() {
    let (store, (_, states)) = (store(), founded(1));
    let rt = store.load();
    let mut c = classifier(1);
    let mut stats = WorkerStats::default();
    assert!(c.begin_batch(&states[0], &rt, &mut stats), "announce once");
    assert!(!c.begin_batch(&states[0], &rt, &mut stats));
    assert!(c.is_arp_owner());

    let request = arp_request(INSIDE_VIP);
    let repr = ArpRepr::parse(&ArpPacket::new_checked(&request[14..42]).unwrap()).unwrap();
    let expected = super::neighbour::arp_reply_frame(&repr, &sides(1).0);
    let got = run(&mut c, Side::Inside, &request, &rt);
    assert_eq!(
        got,
        (
            Shape::Arp(expected.as_bytes().to_vec()),
            one(DaemonCounter::ClusterArpReplies)
        )
    );
    for (side, target) in [
        (Side::Inside, Ipv4Addr::new(10, 1, 0, 99)),
        (Side::Inside, OUTSIDE_VIP),
    ] {
        let got = run(&mut c, side, &arp_request(target), &rt);
        assert_eq!(
            got,
            (Shape::Drop, one(DaemonCounter::ClusterArpIgnored)),
            "{target}"
        );
    }

    for n in 0..3u8 {
        let f = cleartext(REMOTE_HOST, 64, n);
        let got = run(&mut c, Side::Inside, &f, &rt);
        let protect = Shape::Protect {
            spi: OUT_SPI,
            seq: u64::from(n) + 1,
            len: f.len() - 14,
        };
        assert_eq!(got, (protect, one(DaemonCounter::ClusterOutboundOwned)));
    }

    let meta = |port| PacketMeta {
        remote: SocketAddr::new(IpAddr::V4(PEER), port),
        local: Some(IpAddr::V4(OUTSIDE_VIP)),
        stride: 0,
        tos: 0x02,
    };
    let (shape, moved) = run(&mut c, Side::Outside, &esp_frame(IN_SPI, 7), &rt);
    let open = Shape::Open {
        ingress: Ingress::Raw,
        meta: meta(0),
        len: 56,
    };
    assert_eq!(shape, open);
    // The first owned packet of the SA also marks the numbers the data
    // path treats as seen (those before it knew the SA).
    assert_eq!(moved[0], (DaemonCounter::ClusterInboundOwned, 1));
    assert!(
        moved[1..]
            .iter()
            .all(|(c, _)| *c == DaemonCounter::ClusterTakeoverMarks),
        "{moved:?}"
    );
    let got = run(
        &mut c,
        Side::Outside,
        &natt_frame(&esp(IN_SPI, 8), 4500),
        &rt,
    );
    let open = Shape::Open {
        ingress: Ingress::Udp,
        meta: meta(4501),
        len: 56,
    };
    assert_eq!(got, (open, one(DaemonCounter::ClusterInboundOwned)));
    let got = run(&mut c, Side::Outside, &esp_frame(0x9999, 1), &rt);
    assert_eq!(
        got,
        (Shape::Drop, one(DaemonCounter::ClusterInboundUnknownSa))
    );
}

/// Nodes 1 and 2 see the same frames: every packet of each direction is
/// processed by exactly one of them, no outbound number is used twice,
/// and only the view's first member answers ARP.
#[test]
fn two_nodes_split_every_stream_and_only_the_first_answers_arp() {
    let (store, (_, states)) = (store(), founded(2));
    let rt = store.load();
    let mut nodes = [classifier(1), classifier(2)];
    let mut stats = WorkerStats::default();
    let became: Vec<bool> = nodes
        .iter_mut()
        .zip(&states)
        .map(|(c, state)| c.begin_batch(state, &rt, &mut stats))
        .collect();
    assert_eq!(became, [true, false]);
    let request = arp_request(OUTSIDE_VIP);
    let (first, _) = run(&mut nodes[0], Side::Outside, &request, &rt);
    assert!(matches!(first, Shape::Arp(_)));
    let second = run(&mut nodes[1], Side::Outside, &request, &rt);
    assert_eq!(
        second,
        (Shape::Drop, one(DaemonCounter::ClusterArpNotOwner))
    );

    let mut seqs = Vec::new();
    let mut owned = [0, 0];
    for n in 0..8u8 {
        let f = cleartext(REMOTE_HOST, 64, n);
        let mut owners = 0;
        for (i, c) in nodes.iter_mut().enumerate() {
            match run(c, Side::Inside, &f, &rt) {
                (Shape::Protect { seq, .. }, moved) => {
                    assert_eq!(moved, one(DaemonCounter::ClusterOutboundOwned));
                    (owners, owned[i]) = (owners + 1, owned[i] + 1);
                    seqs.push(seq);
                }
                other => assert_eq!(
                    other,
                    (Shape::Drop, one(DaemonCounter::ClusterOutboundNotOwned))
                ),
            }
        }
        assert_eq!(owners, 1, "cleartext packet {n}: one owner");
    }
    // Each number is that node's lease class's next one at or above the
    // packet's counter: unique, and within the view's size of it.
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), 8, "no number twice: {seqs:?}");
    assert!(seqs.iter().all(|&s| (1..=8 + 2).contains(&s)), "{seqs:?}");
    assert_eq!(owned, [4, 4], "round robin");

    let mut opened = [0, 0];
    for seq in 1..=8 {
        let f = esp_frame(IN_SPI, seq);
        let mut owners = 0;
        for (i, c) in nodes.iter_mut().enumerate() {
            match run(c, Side::Outside, &f, &rt) {
                (Shape::Open { .. }, moved) => {
                    // The first owned packet after the view formed also
                    // marks what this node observed before it.
                    let owned = (DaemonCounter::ClusterInboundOwned, 1);
                    assert!(moved.contains(&owned), "{moved:?}");
                    (owners, opened[i]) = (owners + 1, opened[i] + 1);
                }
                other => assert_eq!(
                    other,
                    (Shape::Drop, one(DaemonCounter::ClusterInboundNotOwned))
                ),
            }
        }
        assert_eq!(owners, 1, "ESP seq {seq}: one owner");
    }
    assert_eq!(opened, [4, 4]);
}

/// Every frame that is not processed is dropped with exactly one
/// counter naming why.
#[test]
fn frames_that_are_not_processed_are_counted_with_their_reason() {
    let (store, (_, states)) = (store(), founded(1));
    let rt = store.load();
    let mut c = classifier(1);
    c.begin_batch(&states[0], &rt, &mut WorkerStats::default());
    let mut to_other_mac = cleartext(REMOTE_HOST, 64, 1);
    to_other_mac[..6].copy_from_slice(&ROUTER_MAC.0);
    let mut bad_checksum = cleartext(REMOTE_HOST, 64, 1);
    bad_checksum[14 + 10] ^= 0xff;
    let ipv6 = frame(INSIDE_VMAC, HOST_MAC, EtherType::IPV6, &[0x60; 60]);
    let not_ip = frame(INSIDE_VMAC, HOST_MAC, EtherType(0x88b5), &[0x60; 60]);
    let mut fragment = esp_frame(IN_SPI, 1);
    fragment[14 + 6] = 0x20; // MF
    Ipv4Packet::new_unchecked(&mut fragment[14..34]).fill_checksum();
    let other_dst = {
        let p = ipv4(
            PEER,
            Ipv4Addr::new(192, 0, 2, 77),
            IpProtocol::ESP,
            60,
            &esp(IN_SPI, 1),
        );
        frame(OUTSIDE_VMAC, ROUTER_MAC, EtherType::IPV4, &p)
    };
    let icmp = {
        let p = ipv4(
            PEER,
            OUTSIDE_VIP,
            IpProtocol::ICMP,
            60,
            &[8, 0, 0, 0, 0, 0, 0, 0],
        );
        frame(OUTSIDE_VMAC, ROUTER_MAC, EtherType::IPV4, &p)
    };
    let arp_reply = {
        let repr = ArpRepr {
            operation: ArpOperation::REPLY,
            sender_mac: ROUTER_MAC,
            sender_ip: PEER,
            target_mac: OUTSIDE_VMAC,
            target_ip: OUTSIDE_VIP,
        };
        let mut bytes = vec![0; 60];
        repr.emit_frame(None, &mut bytes).unwrap();
        bytes
    };
    use DaemonCounter as D;
    let table: Vec<(&str, Side, Vec<u8>, DaemonCounter)> = vec![
        (
            "1 other MAC",
            Side::Inside,
            to_other_mac,
            D::ClusterIgnoredOtherMac,
        ),
        (
            "2 to the inside VIP",
            Side::Inside,
            cleartext(INSIDE_VIP, 64, 1),
            D::ClusterIgnoredToVip,
        ),
        (
            "3 TTL 1",
            Side::Inside,
            cleartext(REMOTE_HOST, 1, 1),
            D::ClusterTtlExpired,
        ),
        (
            "4 no policy",
            Side::Inside,
            cleartext(Ipv4Addr::new(10, 9, 0, 1), 64, 1),
            D::NoPolicy,
        ),
        (
            "5 bypass",
            Side::Inside,
            cleartext(Ipv4Addr::new(10, 3, 0, 5), 64, 1),
            D::PolicyBypass,
        ),
        (
            "6 header checksum",
            Side::Inside,
            bad_checksum,
            D::ClusterIgnoredMalformed,
        ),
        (
            "7 IPv6 runt",
            Side::Inside,
            ipv6,
            D::ClusterIgnoredMalformed,
        ),
        ("7b not IP", Side::Inside, not_ip, D::ClusterIgnoredNotIp),
        (
            "8 runt",
            Side::Inside,
            vec![0xff; 10],
            D::ClusterIgnoredMalformed,
        ),
        (
            "9 other destination",
            Side::Outside,
            other_dst,
            D::ClusterIgnoredOtherDestination,
        ),
        (
            "10 IKE on 500",
            Side::Outside,
            natt_frame(&[0; 28], 500),
            D::ClusterIkeUnsupported,
        ),
        (
            "11 IKE on 4500",
            Side::Outside,
            natt_frame(&[0; 32], 4500),
            D::ClusterIkeUnsupported,
        ),
        (
            "12 keepalive",
            Side::Outside,
            natt_frame(&[0xff], 4500),
            D::NattKeepalives,
        ),
        (
            "13 other port",
            Side::Outside,
            natt_frame(&esp(IN_SPI, 1), 4600),
            D::ClusterIgnoredToVip,
        ),
        (
            "14 ICMP to the VIP",
            Side::Outside,
            icmp,
            D::ClusterIgnoredToVip,
        ),
        (
            "15 fragment",
            Side::Outside,
            fragment,
            D::ClusterIgnoredFragment,
        ),
        (
            "16 ARP reply",
            Side::Outside,
            arp_reply,
            D::ClusterArpIgnored,
        ),
    ];
    for (name, side, bytes, counter) in table {
        assert_eq!(
            run(&mut c, side, &bytes, &rt),
            (Shape::Drop, one(counter)),
            "{name}"
        );
    }
}

/// Node 2 observes the numbers node 1 owns; when node 1 dies and node 2
/// takes its share, those numbers enter node 2's replay window before
/// its first owned packet, so a replay of node 1's packets is refused.
#[test]
fn a_takeover_marks_what_the_survivor_observed_in_the_replay_window() {
    let (store, (mut h, states)) = (store(), founded(2));
    let rt = store.load();
    let mut c = classifier(2);
    c.begin_batch(&states[1], &rt, &mut WorkerStats::default());
    let mut owned = Vec::new();
    for seq in 1..=6 {
        if let (Shape::Open { .. }, _) = run(&mut c, Side::Outside, &esp_frame(IN_SPI, seq), &rt) {
            owned.push(seq);
        }
    }
    assert_eq!(owned.len(), 3);
    let theirs = (1..=6).find(|s| !owned.contains(s)).unwrap();
    h.kill(NodeId(1));
    h.run_for(Duration::from_millis(60));
    let after = h.node(NodeId(2)).unwrap().shared();
    assert_eq!(after.view().members(), &[NodeId(2)], "n2 took over");
    let mut stats = WorkerStats::default();
    assert!(c.begin_batch(&after, &rt, &mut stats), "n2 answers ARP now");
    let sa = rt
        .inbound
        .get(IN_SPI, phalanx_sa::IpsecProtocol::Esp)
        .unwrap();
    assert!(
        sa.replay_check(theirs).is_ok(),
        "not marked before the takeover"
    );
    let (shape, _) = run(&mut c, Side::Outside, &esp_frame(IN_SPI, 7), &rt);
    assert!(matches!(shape, Shape::Open { .. }), "n2 owns everything");
    assert!(
        sa.replay_check(theirs).is_err(),
        "n1's number {theirs} counts as seen"
    );
    assert!(sa.replay_check(7).is_ok(), "the packet itself is still new");
}

/// The same takeover with the kernel filter on node 2: node 1's packets
/// never reach node 2's classifier (the program drops them, as the kernel
/// would before the ring), yet after the takeover their numbers are in
/// node 2's replay window: the filter's cells were absorbed before the
/// marks were drained. Needs `bpf(2)` (root or `CAP_BPF`); fails without
/// it (`kernel_filter::tests::permitted`).
#[test]
fn a_takeover_marks_what_the_kernel_filter_dropped() {
    use super::kernel_filter::{tests::permitted, FilterAddresses, KernelFilter};
    let addresses = FilterAddresses {
        outside_mac: OUTSIDE_VMAC,
        outside_v4: Some(OUTSIDE_VIP),
        outside_v6: None,
        inside_mac: INSIDE_VMAC,
    };
    let loaded = KernelFilter::load(NodeId(2), DispatchScheme::PacketRoundRobin, addresses, 4500);
    let Some(filter) = permitted(loaded) else {
        return;
    };
    let (store, (mut h, states)) = (store(), founded(2));
    let rt = store.load();
    let mut c = classifier(2).with_kernel_filter(Box::new(filter));
    c.begin_batch(&states[1], &rt, &mut WorkerStats::default());
    // The program's verdict on a frame, behind the 14 octets a test run
    // strips (phalanx_io::bpf::Program::test_run).
    let passes = |c: &FrameClassifier, frame: &[u8]| {
        let mut data = vec![0u8; 14];
        data.extend_from_slice(frame);
        let filter = c.kernel_filter().unwrap();
        filter.program().test_run(&data, 1).unwrap().retval != 0
    };
    let (mut owned, mut dropped) = (Vec::new(), Vec::new());
    for seq in 1..=6 {
        let frame = esp_frame(IN_SPI, seq);
        if !passes(&c, &frame) {
            dropped.push(seq);
            continue;
        }
        let (shape, moved) = run(&mut c, Side::Outside, &frame, &rt);
        assert!(matches!(shape, Shape::Open { .. }), "{seq}: {moved:?}");
        owned.push(seq);
    }
    assert_eq!((owned.len(), dropped.len()), (3, 3));
    assert_eq!(c.kernel_drops(), Some(3));
    h.kill(NodeId(1));
    h.run_for(Duration::from_millis(60));
    let after = h.node(NodeId(2)).unwrap().shared();
    assert_eq!(after.view().members(), &[NodeId(2)], "n2 took over");
    c.begin_batch(&after, &rt, &mut WorkerStats::default());
    let sa = rt
        .inbound
        .get(IN_SPI, phalanx_sa::IpsecProtocol::Esp)
        .unwrap();
    let frame = esp_frame(IN_SPI, 7);
    assert!(passes(&c, &frame), "the filter follows the view: n2 owns 7");
    let (shape, moved) = run(&mut c, Side::Outside, &frame, &rt);
    assert!(matches!(shape, Shape::Open { .. }), "{moved:?}");
    for &theirs in &dropped {
        assert!(
            sa.replay_check(theirs).is_err(),
            "n1's number {theirs}, dropped in the kernel, counts as seen"
        );
    }
    assert!(sa.replay_check(7).is_ok(), "the packet itself is still new");
}

/// With IKE on, IKE to the virtual address (port 500, or 4500 behind the
/// non-ESP marker) goes to the IKE thread on every node, with the
/// addresses it arrived at and came from; ESP is unaffected.
#[test]
fn ike_messages_go_to_the_ike_thread() {
    let rt = store().load();
    let mut c = classifier(1).with_ike(500);
    let mut stats = WorkerStats::default();
    let message = [7_u8; 28];
    let mut marked = vec![0; 4];
    marked.extend_from_slice(&message);
    for (port, payload) in [(500, &message[..]), (4500, &marked[..])] {
        let frame = natt_frame(payload, port);
        match c.classify(Side::Outside, &frame, Instant::now(), &rt, &mut stats) {
            Decision::Ike {
                local,
                remote,
                bytes,
            } => {
                assert_eq!(local, SocketAddr::new(IpAddr::V4(OUTSIDE_VIP), port));
                assert_eq!(remote, SocketAddr::new(IpAddr::V4(PEER), 4501));
                assert_eq!(bytes, message, "port {port}: marker stripped");
            }
            other => panic!("port {port}: {other:?}"),
        }
    }
    assert_eq!(stats.daemon.get(DaemonCounter::ClusterIkeUnsupported), 0);
    let keepalive = natt_frame(&[0xff], 4500);
    assert!(matches!(
        c.classify(Side::Outside, &keepalive, Instant::now(), &rt, &mut stats),
        Decision::Drop
    ));
}
