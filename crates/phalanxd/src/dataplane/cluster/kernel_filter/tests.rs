//! The filter's decisions against the `Dispatcher`'s (through
//! `BPF_PROG_TEST_RUN`), and a veth pair in a namespace of its own with
//! the filter on the receiving ring. They need `bpf(2)` (root or
//! `CAP_BPF`) and fail without it, saying so ([`permitted`]).
//!
//! The decision tests run twice: with the socket filter alone, and
//! (`xdp_*`) as the kernel runs the two hooks, the XDP program first and
//! the socket filter on what it passes ([`passes`]). Every verdict and
//! every counter must be the same both ways, and with XDP the socket
//! filter must never drop a frame to the virtual MAC: XDP drops all the
//! not-owned ESP.

use std::cell::Cell;
use std::fs::File;
use std::time::{Duration, Instant};

use nix::sched::{setns, CloneFlags};
use phalanx_cluster::dispatch::Dispatcher;
use phalanx_io::packet::PacketSocketConfig;
use phalanx_testkit::netns::VethNamespace;

use super::*;

const MAC: MacAddress = MacAddress([0x02, 0x50, 0x48, 0x58, 0x00, 0x01]);
const INSIDE_MAC: MacAddress = MacAddress([0x02, 0x50, 0x48, 0x58, 0x00, 0x02]);
const VIP: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 10);
const PEER: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 7);
const VIP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x10);
const PEER6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 7);
const NATT: u16 = 4500;
const SPI: u32 = 0x0102_0304;

/// How the ESP packet travels.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Carrier {
    Esp,
    Udp,
}

/// An Ethernet frame to the virtual MAC of `total` octets carrying IPv4
/// from `src` to `dst` with ESP (SPI, `seq`) directly or in UDP.
fn frame(
    carrier: Carrier,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    spi: u32,
    seq: u32,
    total: usize,
) -> Vec<u8> {
    let mut f = ethernet([0x08, 0x00], total);
    let ip_len = u16::try_from(total - 14).unwrap();
    let proto = if carrier == Carrier::Esp { 50 } else { 17 };
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let sum = phalanx_wire::checksum::data(&ip);
    ip[10..12].copy_from_slice(&(!sum).to_be_bytes());
    f.extend_from_slice(&ip);
    esp(f, carrier, (ip_len - 20, [0, 0]), (spi, seq), total)
}

/// An Ethernet header to the virtual MAC with `ethertype`, in a buffer
/// for a frame of `total` octets.
fn ethernet(ethertype: [u8; 2], total: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(total);
    f.extend_from_slice(&MAC.octets());
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x99]);
    f.extend_from_slice(&ethertype);
    f
}

/// Appends the UDP header (length, checksum) when `carrier` says so, the
/// ESP header (SPI, `seq`) and filler up to `total` octets.
fn esp(
    mut f: Vec<u8>,
    carrier: Carrier,
    (udp_len, udp_checksum): (u16, [u8; 2]),
    (spi, seq): (u32, u32),
    total: usize,
) -> Vec<u8> {
    if carrier == Carrier::Udp {
        f.extend_from_slice(&40000u16.to_be_bytes());
        f.extend_from_slice(&NATT.to_be_bytes());
        f.extend_from_slice(&udp_len.to_be_bytes());
        f.extend_from_slice(&udp_checksum);
    }
    f.extend_from_slice(&spi.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(total, 0xa5);
    f
}

/// An Ethernet frame to the virtual MAC of `total` octets carrying IPv6
/// (a 40-octet header, no extension header) from `src` to `dst` with
/// ESP (SPI, `seq`) directly or in UDP.
fn frame6(
    carrier: Carrier,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    spi: u32,
    seq: u32,
    total: usize,
) -> Vec<u8> {
    let mut f = ethernet([0x86, 0xdd], total);
    let payload_len = u16::try_from(total - 14 - 40).unwrap();
    let next_header = if carrier == Carrier::Esp { 50 } else { 17 };
    let mut ip = [0u8; 40];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&payload_len.to_be_bytes());
    ip[6] = next_header;
    ip[7] = 64;
    ip[8..24].copy_from_slice(&src.octets());
    ip[24..40].copy_from_slice(&dst.octets());
    f.extend_from_slice(&ip);
    // The UDP checksum is not checked by the program (nor by user
    // space's dispatch).
    esp(f, carrier, (payload_len, [0xc0, 0xde]), (spi, seq), total)
}

thread_local! {
    /// The decision tests run with the XDP program in front (see the
    /// module docs).
    static WITH_XDP: Cell<bool> = const { Cell::new(false) };
}

/// Runs decision test `test` with the XDP program in front of the
/// socket filter.
fn with_xdp(test: fn()) {
    WITH_XDP.with(|x| x.set(true));
    test();
    WITH_XDP.with(|x| x.set(false));
}

/// Whether `frame` reaches the ring (true) through the filter: the
/// socket filter's verdict, run as the socket would (behind 14 octets
/// the test run strips; their EtherType, the frame's, sets the skb's
/// protocol). Under [`with_xdp`] the XDP program decides the frame first
/// (as the driver hands it over, from its Ethernet header), and only
/// what it passes reaches the socket filter.
fn passes(filter: &KernelFilter, frame: &[u8]) -> bool {
    let xdp = WITH_XDP.with(Cell::get) && frame.len() >= 14;
    if xdp {
        let program = filter.xdp_program().expect("loaded by load_for");
        let run = program.test_run(frame, 1).unwrap();
        match run.retval {
            phalanx_io::bpf::xdp_action::DROP => {
                assert_eq!(
                    frame[..6],
                    MAC.octets(),
                    "XDP dropped a frame to another MAC"
                );
                return false;
            }
            phalanx_io::bpf::xdp_action::PASS => {}
            other => panic!("XDP returned {other}"),
        }
    }
    let mut data = vec![0u8; 14];
    data[12..14].copy_from_slice(frame.get(12..14).unwrap_or(&[0x08, 0x00][..]));
    data.extend_from_slice(frame);
    let run = filter.program().test_run(&data, 1).unwrap();
    assert!(run.retval == 0 || run.retval == u32::MAX, "{run:?}");
    if xdp && run.retval == 0 {
        assert_ne!(
            frame[..6],
            MAC.octets(),
            "the socket filter dropped a frame to the virtual MAC that XDP passed"
        );
    }
    run.retval != 0
}

fn load(local: u32, scheme: DispatchScheme) -> Option<KernelFilter> {
    load_for(local, scheme, Some(VIP), None)
}

/// [`load`] for the outside virtual addresses `v4` and `v6`.
fn load_for(
    local: u32,
    scheme: DispatchScheme,
    v4: Option<Ipv4Addr>,
    v6: Option<Ipv6Addr>,
) -> Option<KernelFilter> {
    let addresses = FilterAddresses {
        outside_mac: MAC,
        outside_v4: v4,
        outside_v6: v6,
        inside_mac: INSIDE_MAC,
    };
    let mut filter = permitted(KernelFilter::load(NodeId(local), scheme, addresses, NATT))?;
    if WITH_XDP.with(Cell::get) {
        if let Err(e) = filter.load_xdp() {
            panic!("{e}");
        }
    }
    Some(filter)
}

/// The loaded filter; when `bpf(2)` is refused (`EPERM`) the test fails,
/// saying it needs root or `CAP_BPF`, unless
/// `PHALANX_ALLOW_PRIVILEGED_SKIP=1` (then `None`, after a loud skip
/// line: [`phalanx_io::test_support`]). Any other error fails.
pub(in crate::dataplane::cluster) fn permitted(
    loaded: Result<KernelFilter, FilterError>,
) -> Option<KernelFilter> {
    match loaded {
        Ok(filter) => Some(filter),
        Err(FilterError::Map(e)) => {
            phalanx_io::test_support::permitted(Err(e), "root or CAP_BPF (bpf(2))")
        }
        Err(e) => panic!("{e}"),
    }
}

fn inbound(spi: u32, esn: bool, peer: impl Into<IpAddr>) -> SaDescriptor {
    SaDescriptor {
        direction: Direction::Inbound,
        spi,
        esn,
        peer: peer.into(),
        peer_window: 0,
    }
}

/// The dispatcher's key of an inbound packet of `spi` from `peer`.
fn inbound_key(spi: u32, index: u64, peer: IpAddr) -> PacketKey {
    PacketKey {
        direction: Direction::Inbound,
        spi,
        index,
        len: 1400,
        flow: 0,
        peer,
    }
}

fn view_of(ids: impl IntoIterator<Item = u32>) -> View {
    View::new(1, ids.into_iter().map(NodeId))
}

/// Packet round robin: for n = 1..=8 and every position of this node,
/// the program passes exactly the numbers the Dispatcher gives it, and
/// its cells hold the others; an IPv4-only and a dual-stack filter alike.
#[test]
fn round_robin_matches_the_dispatcher() {
    for v6 in [None, Some(VIP6)] {
        let Some(mut filter) = load_for(100, DispatchScheme::PacketRoundRobin, Some(VIP), v6)
        else {
            return;
        };
        let sa = inbound(SPI, false, PEER);
        for n in 1..=8u32 {
            for position in 0..n {
                round_robin_at(&mut filter, sa, n, position);
            }
        }
    }
}

/// [`round_robin_matches_the_dispatcher`] with node 100 at `position`
/// of `n`.
fn round_robin_at(filter: &mut KernelFilter, sa: SaDescriptor, n: u32, position: u32) {
    // Node 100 at `position`: lower ids before it, higher after.
    let ids = (0..n).map(|i| match i.cmp(&position) {
        std::cmp::Ordering::Less => 10 + i,
        std::cmp::Ordering::Equal => 100,
        std::cmp::Ordering::Greater => 200 + i,
    });
    let view = view_of(ids);
    assert_eq!(view.index_of(NodeId(100)), Some(position as usize));
    filter.sync(&view, &[], std::iter::empty());
    filter.sync(&view, &[], [sa].iter());
    let mut dispatcher = Dispatcher::new(DispatchScheme::PacketRoundRobin, view);
    for seq in (0..200u32).chain([u32::MAX - 3, u32::MAX, 1 << 31]) {
        let key = inbound_key(SPI, u64::from(seq), IpAddr::V4(PEER));
        let owned = dispatcher.owner(&key) == Some(NodeId(100));
        let carrier = if seq % 2 == 0 {
            Carrier::Esp
        } else {
            Carrier::Udp
        };
        let f = frame(carrier, PEER, VIP, SPI, seq, 200);
        assert_eq!(
            passes(filter, &f),
            owned,
            "n {n} position {position} seq {seq}"
        );
    }
    let cells = filter.cells(SPI).unwrap();
    let expect = |seq: u32| if seq % n != position { seq } else { 0 };
    assert_eq!(cells[5], expect(5), "n {n} position {position}");
    assert_eq!(cells[199], expect(199));
}

/// Hash schemes: the whole SA is owned as the Dispatcher says for its
/// peer; packets from another source and ESN round robin SAs pass.
#[test]
fn hash_schemes_match_the_dispatcher() {
    for with_spi in [false, true] {
        let scheme = DispatchScheme::HashSegments { with_spi };
        let Some(mut filter) = load(2, scheme) else {
            return;
        };
        let sas: Vec<SaDescriptor> = (0..64u32)
            .map(|i| inbound(0x100 + i, i % 5 == 0, Ipv4Addr::new(203, 0, 113, i as u8)))
            .collect();
        for ids in [vec![1, 2], vec![1, 2, 3], vec![2, 4, 5, 6, 7], vec![2]] {
            let view = view_of(ids);
            filter.sync(&view, &[], sas.iter());
            let mut dispatcher = Dispatcher::new(scheme, view);
            for sa in &sas {
                let IpAddr::V4(peer) = sa.peer else {
                    unreachable!()
                };
                let key = inbound_key(sa.spi, 9, sa.peer);
                let owned = dispatcher.owner(&key) == Some(NodeId(2));
                let f = frame(Carrier::Esp, peer, VIP, sa.spi, 9, 120);
                assert_eq!(passes(&filter, &f), owned, "{scheme} spi {:#x}", sa.spi);
                let other = frame(
                    Carrier::Esp,
                    Ipv4Addr::new(192, 0, 2, 1),
                    VIP,
                    sa.spi,
                    9,
                    120,
                );
                assert!(passes(&filter, &other), "another source is user space's");
            }
        }
        assert_eq!(filter.registered(), 64);
    }
    let Some(mut filter) = load(2, DispatchScheme::PacketRoundRobin) else {
        return;
    };
    filter.sync(&view_of([1, 2]), &[], [inbound(SPI, true, PEER)].iter());
    assert_eq!(filter.registered(), 0, "ESN SAs are not registered");
    let Some(mut filter) = load(2, DispatchScheme::SessionRoundRobin) else {
        return;
    };
    filter.sync(&view_of([1, 2]), &[], [inbound(SPI, false, PEER)].iter());
    assert_eq!(filter.registered(), 0, "session schemes pass everything");
}

/// Silent suspects: their share is taken over as `InboundDispatcher`
/// says, in the kernel too. Packet round robin over views of 1 to 6
/// members with every set of silent suspects that leaves this node
/// (node 100) live; then the hash schemes, whose whole-SA ownership
/// user space computes with the same dispatcher.
#[test]
fn silent_suspects_share_is_taken_over_in_the_kernel() {
    let Some(mut filter) = load(100, DispatchScheme::PacketRoundRobin) else {
        return;
    };
    let sa = inbound(SPI, false, PEER);
    for n in 1..=6u32 {
        let ids: Vec<u32> = (0..n)
            .map(|i| if i == n / 2 { 100 } else { 10 + i })
            .collect();
        let view = view_of(ids.iter().copied());
        for set in 0..(1u32 << n) {
            let silent: Vec<NodeId> = (ids.iter().enumerate())
                .filter(|&(i, _)| set & (1 << i) != 0)
                .map(|(_, &id)| NodeId(id))
                .collect();
            if silent.contains(&NodeId(100)) {
                continue;
            }
            let seqs = (0..40u32).chain([u32::MAX - 1, u32::MAX]);
            round_robin_takeover_at(&mut filter, sa, (&view, &silent), seqs);
        }
    }
    let view = view_of([1, 2, 3]);
    let scheme = DispatchScheme::HashSegments { with_spi: true };
    let Some(mut filter) = load(2, scheme) else {
        return;
    };
    let sas: Vec<SaDescriptor> = (0..64u32)
        .map(|i| inbound(0x100 + i, false, Ipv4Addr::new(203, 0, 113, i as u8)))
        .collect();
    for silent in [vec![NodeId(3)], vec![NodeId(1), NodeId(3)], vec![]] {
        filter.sync(&view, &silent, sas.iter());
        let mut dispatcher = InboundDispatcher::new(scheme, view.clone(), &silent);
        let mut moved = 0;
        for sa in &sas {
            let IpAddr::V4(peer) = sa.peer else {
                unreachable!()
            };
            let key = inbound_key(sa.spi, 9, sa.peer);
            let owned = dispatcher.owner(&key) == Some(NodeId(2));
            let base = Dispatcher::new(scheme, view.clone()).owner(&key) == Some(NodeId(2));
            moved += usize::from(owned != base);
            let f = frame(Carrier::Esp, peer, VIP, sa.spi, 9, 120);
            assert_eq!(
                passes(&filter, &f),
                owned,
                "silent {silent:?} spi {:#x}",
                sa.spi
            );
        }
        assert_eq!(
            moved > 0,
            !silent.is_empty(),
            "silent {silent:?}: {moved} SAs moved"
        );
    }
}

/// Node 100's filter for packet round robin over `view` taking over
/// `silent` decides each of `seqs` as `InboundDispatcher` does.
fn round_robin_takeover_at(
    filter: &mut KernelFilter,
    sa: SaDescriptor,
    (view, silent): (&View, &[NodeId]),
    seqs: impl Iterator<Item = u32>,
) {
    filter.sync(view, silent, [sa].iter());
    let mut dispatcher =
        InboundDispatcher::new(DispatchScheme::PacketRoundRobin, view.clone(), silent);
    for seq in seqs {
        let key = inbound_key(SPI, u64::from(seq), IpAddr::V4(PEER));
        let owned = dispatcher.owner(&key) == Some(NodeId(100));
        let f = frame(Carrier::Esp, PEER, VIP, SPI, seq, 120);
        assert_eq!(
            passes(filter, &f),
            owned,
            "{} members, silent {silent:?}, seq {seq}",
            view.len()
        );
    }
}

/// Two SAs whose SPIs share an `index` bucket: the first is filtered,
/// the second's packets all reach user space; when the first goes, the
/// second gets the bucket in the same sync.
#[test]
fn a_shared_bucket_leaves_the_second_sa_to_user_space() {
    let Some(mut filter) = load(1, DispatchScheme::PacketRoundRobin) else {
        return;
    };
    let first = SPI;
    let second = (first + 1..)
        .find(|&spi| program::bucket(spi) == program::bucket(first))
        .unwrap();
    let view = view_of([2]);
    let both = [inbound(first, false, PEER), inbound(second, false, PEER)];
    filter.sync(&view, &[], both.iter());
    assert_eq!(filter.registered(), 1);
    assert!(!passes(
        &filter,
        &frame(Carrier::Esp, PEER, VIP, first, 7, 100)
    ));
    assert!(passes(
        &filter,
        &frame(Carrier::Esp, PEER, VIP, second, 7, 100)
    ));
    filter.sync(&view, &[], both[1..].iter());
    assert_eq!(filter.registered(), 1);
    assert!(passes(
        &filter,
        &frame(Carrier::Esp, PEER, VIP, first, 8, 100)
    ));
    assert!(!passes(
        &filter,
        &frame(Carrier::Esp, PEER, VIP, second, 8, 100)
    ));
    assert_eq!(filter.cells(second).unwrap()[8], 8);
}

/// Everything not positively a not-owned ESP packet of a registered SA
/// reaches user space; nothing read past the frame drops it. A
/// dual-stack filter decides IPv4 as an IPv4-only one does, short
/// frames included (it copies 50 octets of a frame shorter than 70).
#[test]
fn everything_else_passes() {
    for v6 in [None, Some(VIP6)] {
        let Some(mut filter) = load_for(1, DispatchScheme::PacketRoundRobin, Some(VIP), v6) else {
            return;
        };
        ipv4_passes(&mut filter);
    }
}

/// [`everything_else_passes`] for one filter.
fn ipv4_passes(filter: &mut KernelFilter) {
    // A view without this node: every registered packet is not owned.
    filter.sync(&view_of([2]), &[], [inbound(SPI, false, PEER)].iter());
    let dropped = frame(Carrier::Esp, PEER, VIP, SPI, 7, 100);
    assert!(!passes(filter, &dropped));
    let small = frame(Carrier::Esp, PEER, VIP, SPI, 9, 60);
    assert!(!passes(filter, &small), "a 60-octet ESP frame is decided");
    let drops = filter.drops();
    assert_eq!(drops, 2);
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    cases.push((
        "unknown SPI",
        frame(Carrier::Esp, PEER, VIP, SPI + 1, 7, 100),
    ));
    cases.push((
        "other destination",
        frame(Carrier::Esp, PEER, PEER, SPI, 7, 100),
    ));
    let mut ike = frame(Carrier::Udp, PEER, VIP, 0, 0, 100);
    ike[14 + 20 + 8..14 + 20 + 12].fill(0);
    cases.push(("non-ESP marker (IKE)", ike));
    let mut port = frame(Carrier::Udp, PEER, VIP, SPI, 7, 100);
    port[14 + 22..14 + 24].copy_from_slice(&500u16.to_be_bytes());
    cases.push(("UDP to another port", port));
    let mut fragment = dropped.clone();
    fragment[14 + 6] = 0x20; // MF
    cases.push(("fragment", fragment));
    let mut broadcast = dropped.clone();
    broadcast[..6].fill(0xff);
    cases.push(("broadcast", broadcast));
    let mut multicast = dropped.clone();
    multicast[..6].copy_from_slice(&[0x01, 0x00, 0x5e, 0, 0, 1]);
    cases.push(("multicast", multicast));
    let mut arp = dropped.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    cases.push(("not IPv4", arp));
    let mut long = dropped.clone();
    long[14 + 2..14 + 4].copy_from_slice(&200u16.to_be_bytes());
    cases.push(("IP length past the frame", long));
    let short_udp = frame(Carrier::Udp, PEER, VIP, SPI, 7, 14 + 20 + 8 + 6);
    cases.push(("ESP in UDP cut short", short_udp));
    cases.push(("runt", dropped[..30].to_vec()));
    let mut options = dropped.clone();
    options[14] = 0x46;
    cases.push(("IPv4 options", options));
    let mut tcp = dropped.clone();
    tcp[14 + 9] = 6;
    cases.push(("TCP", tcp));
    for (what, f) in cases {
        assert!(passes(filter, &f), "{what}");
    }
    assert_eq!(filter.drops(), drops, "none of them counted");
    assert_eq!(filter.other_mac_drops(), 0);
    let mut other = dropped.clone();
    other[5] ^= 1;
    assert!(!passes(filter, &other), "another unicast MAC is dropped");
    assert_eq!((filter.drops(), filter.other_mac_drops()), (drops, 1));
    assert_eq!(filter.cells(SPI).unwrap()[7], 7);
    filter.sync(&view_of([2]), &[], std::iter::empty());
    assert!(passes(filter, &dropped), "unregistered");
}

/// IPv6, node 2 of a 3-node packet round robin view, for an IPv6-only
/// and a dual-stack filter: ESP and ESP-in-UDP frames pass exactly when
/// the Dispatcher gives their number to node 2; the others are recorded
/// in the SA's cells (the latest number of each cell) and counted.
#[test]
fn ipv6_round_robin_matches_the_dispatcher() {
    for v4 in [None, Some(VIP)] {
        let Some(mut filter) = load_for(2, DispatchScheme::PacketRoundRobin, v4, Some(VIP6)) else {
            return;
        };
        let view = view_of([1, 2, 3]);
        filter.sync(&view, &[], [inbound(SPI, false, PEER6)].iter());
        assert_eq!(filter.registered(), 1);
        let mut dispatcher = Dispatcher::new(DispatchScheme::PacketRoundRobin, view);
        let mut cells = vec![0u32; CELLS];
        let mut not_owned = 0;
        for seq in (0..300u32).chain([u32::MAX - 3, u32::MAX, 1 << 31]) {
            let key = inbound_key(SPI, u64::from(seq), IpAddr::V6(PEER6));
            let owned = dispatcher.owner(&key) == Some(NodeId(2));
            let carrier = if seq % 2 == 0 {
                Carrier::Esp
            } else {
                Carrier::Udp
            };
            let f = frame6(carrier, PEER6, VIP6, SPI, seq, 200);
            assert_eq!(passes(&filter, &f), owned, "v4 {v4:?} seq {seq}");
            if !owned {
                cells[seq as usize % CELLS] = seq;
                not_owned += 1;
            }
        }
        assert_eq!(filter.drops(), not_owned, "v4 {v4:?}");
        assert_eq!(filter.cells(SPI).unwrap(), cells, "v4 {v4:?}");
    }
}

/// Hash schemes on a dual-stack filter with SAs of both versions: the
/// whole SA is owned as the Dispatcher says for its peer (an IPv6 peer
/// in the slot's 16 octets); a packet from another source passes, and so
/// does a packet of the other version whose source has the slot's octets
/// (the version, not the address, tells them apart).
#[test]
fn ipv6_hash_schemes_match_the_dispatcher() {
    for with_spi in [false, true] {
        let scheme = DispatchScheme::HashSegments { with_spi };
        let Some(mut filter) = load_for(2, scheme, Some(VIP), Some(VIP6)) else {
            return;
        };
        // Even: an IPv6 peer; odd: an IPv4 one.
        let sas: Vec<SaDescriptor> = (0..64u16)
            .map(|i| {
                let peer = if i % 2 == 0 {
                    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xffff, i + 1, 0, 0, 0, 7))
                } else {
                    IpAddr::V4(Ipv4Addr::new(203, 0, 113, i as u8))
                };
                inbound(0x100 + u32::from(i), false, peer)
            })
            .collect();
        for sa in &sas {
            let mode = match sa.peer {
                IpAddr::V4(_) => SlotMode::WHOLE_SA_V4,
                IpAddr::V6(_) => SlotMode::WHOLE_SA_V6,
            };
            assert_eq!(filter.mode_of(sa), mode);
        }
        for ids in [vec![1, 2], vec![1, 2, 3], vec![2, 4, 5, 6, 7], vec![2]] {
            let view = view_of(ids);
            filter.sync(&view, &[], sas.iter());
            let mut dispatcher = Dispatcher::new(scheme, view);
            for sa in &sas {
                let owned = dispatcher.owner(&inbound_key(sa.spi, 9, sa.peer)) == Some(NodeId(2));
                let [own, other_source, other_version] = frames_of(sa);
                let what = format!("{scheme} spi {:#x} peer {}", sa.spi, sa.peer);
                assert_eq!(passes(&filter, &own), owned, "{what}");
                assert!(passes(&filter, &other_source), "{what}: another source");
                assert!(passes(&filter, &other_version), "{what}: other version");
            }
        }
        assert_eq!(filter.registered(), 64);
    }
}

/// [`ipv6_hash_schemes_match_the_dispatcher`]: ESP of `sa` with number 9
/// from its peer, from another source of the peer's version, and from a
/// source of the other version whose leading octets are the peer's (an
/// IPv4 peer's followed by zeros: what its slot holds).
fn frames_of(sa: &SaDescriptor) -> [Vec<u8>; 3] {
    let (spi, esp) = (sa.spi, Carrier::Esp);
    match sa.peer {
        IpAddr::V6(peer) => {
            let [a, b, c, d, ..] = peer.octets();
            [
                frame6(esp, peer, VIP6, spi, 9, 120),
                frame6(esp, PEER6, VIP6, spi, 9, 120),
                frame(esp, Ipv4Addr::new(a, b, c, d), VIP, spi, 9, 120),
            ]
        }
        IpAddr::V4(peer) => {
            let mut octets = [0u8; 16];
            octets[..4].copy_from_slice(&peer.octets());
            [
                frame(esp, peer, VIP, spi, 9, 120),
                frame(esp, Ipv4Addr::new(192, 0, 2, 1), VIP, spi, 9, 120),
                frame6(esp, Ipv6Addr::from(octets), VIP6, spi, 9, 120),
            ]
        }
    }
}

/// 8 octets of IPv6 extension header `kind` (RFC 8200 §4) inserted
/// between the header and ESP of `f`, the Payload Length grown to match:
/// a hop-by-hop or destination options header (a PadN option), or a
/// first fragment's header.
fn with_extension(f: &[u8], kind: u8) -> Vec<u8> {
    let mut out = f[..14 + 40].to_vec();
    let payload_len = u16::from_be_bytes([f[14 + 4], f[14 + 5]]) + 8;
    out[14 + 4..14 + 6].copy_from_slice(&payload_len.to_be_bytes());
    out[14 + 6] = kind;
    let next = f[14 + 6];
    match kind {
        44 => out.extend_from_slice(&[next, 0, 0, 1, 0, 0, 0x12, 0x34]),
        _ => out.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]),
    }
    out.extend_from_slice(&f[14 + 40..]);
    out
}

/// IPv6 frames that are not positively a not-owned ESP packet of a
/// registered SA reach user space, for an IPv6-only and a dual-stack
/// filter; an IPv4-only filter passes all IPv6.
#[test]
fn ipv6_everything_else_passes() {
    for v4 in [None, Some(VIP)] {
        let Some(mut filter) = load_for(1, DispatchScheme::PacketRoundRobin, v4, Some(VIP6)) else {
            return;
        };
        ipv6_passes(&mut filter);
    }
    let Some(mut filter) = load(1, DispatchScheme::PacketRoundRobin) else {
        return;
    };
    filter.sync(&view_of([2]), &[], [inbound(SPI, false, PEER6)].iter());
    let esp6 = frame6(Carrier::Esp, PEER6, VIP6, SPI, 7, 100);
    assert!(passes(&filter, &esp6), "IPv4-only: IPv6 passes");
    let esp4 = frame(Carrier::Esp, PEER, VIP, SPI, 7, 100);
    assert!(!passes(&filter, &esp4), "round robin needs no peer");
    assert_eq!(filter.drops(), 1);
}

/// [`ipv6_everything_else_passes`] for one filter.
fn ipv6_passes(filter: &mut KernelFilter) {
    // A view without this node: every registered packet is not owned.
    filter.sync(&view_of([2]), &[], [inbound(SPI, false, PEER6)].iter());
    let dropped = frame6(Carrier::Esp, PEER6, VIP6, SPI, 7, 100);
    assert!(!passes(filter, &dropped));
    let udp = frame6(Carrier::Udp, PEER6, VIP6, SPI, 8, 100);
    assert!(!passes(filter, &udp));
    let smallest = frame6(Carrier::Udp, PEER6, VIP6, SPI, 9, 70);
    assert!(!passes(filter, &smallest), "70 octets: decided");
    assert_eq!(filter.drops(), 3);
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let unknown = frame6(Carrier::Esp, PEER6, VIP6, SPI + 1, 7, 100);
    cases.push(("unknown SPI", unknown));
    let other = frame6(Carrier::Esp, PEER6, PEER6, SPI, 7, 100);
    cases.push(("other destination", other));
    for word in 0..4 {
        let mut near = dropped.clone();
        near[14 + 24 + 4 * word + 3] ^= 1;
        cases.push(("destination differs in one word", near));
    }
    cases.push(("hop-by-hop options", with_extension(&dropped, 0)));
    cases.push(("fragment header", with_extension(&dropped, 44)));
    cases.push(("destination options", with_extension(&udp, 60)));
    let mut long = dropped.clone();
    long[14 + 4..14 + 6].copy_from_slice(&200u16.to_be_bytes());
    cases.push(("payload length past the frame", long));
    let mut short_esp = dropped.clone();
    short_esp[14 + 4..14 + 6].copy_from_slice(&4u16.to_be_bytes());
    cases.push(("payload length short of the ESP header", short_esp));
    let mut short_udp = udp.clone();
    short_udp[14 + 4..14 + 6].copy_from_slice(&12u16.to_be_bytes());
    cases.push(("payload length short of ESP in UDP", short_udp));
    let mut ike = frame6(Carrier::Udp, PEER6, VIP6, 0, 0, 100);
    ike[14 + 40 + 8..14 + 40 + 12].fill(0);
    cases.push(("non-ESP marker (IKE)", ike));
    let mut port = udp.clone();
    port[14 + 42..14 + 44].copy_from_slice(&500u16.to_be_bytes());
    cases.push(("UDP to another port", port));
    let mut version = dropped.clone();
    version[14] = 0x45;
    cases.push(("not version 6", version));
    let mut tcp = dropped.clone();
    tcp[14 + 6] = 6;
    cases.push(("TCP", tcp));
    let cut = frame6(Carrier::Esp, PEER6, VIP6, SPI, 7, 69);
    cases.push(("69 octets: shorter than the copy", cut));
    cases.push(("runt", dropped[..40].to_vec()));
    let mut multicast = dropped.clone();
    multicast[..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 1]);
    cases.push(("multicast", multicast));
    for (what, f) in cases {
        assert!(passes(filter, &f), "{what}");
    }
    assert_eq!(filter.drops(), 3, "none of them counted");
    assert_eq!(filter.other_mac_drops(), 0);
    let cells = filter.cells(SPI).unwrap();
    assert_eq!(cells[7..10], [7, 8, 9]);
    let mut other_mac = dropped.clone();
    other_mac[5] ^= 1;
    assert!(
        !passes(filter, &other_mac),
        "another unicast MAC is dropped"
    );
    assert_eq!((filter.drops(), filter.other_mac_drops()), (3, 1));
}

/// Without an outside address the outside program is the other-MAC
/// filter: ESP of either version passes, another unicast MAC is dropped.
#[test]
fn without_outside_addresses_only_other_macs_are_dropped() {
    let Some(mut filter) = load_for(1, DispatchScheme::PacketRoundRobin, None, None) else {
        return;
    };
    filter.sync(&view_of([2]), &[], [inbound(SPI, false, PEER)].iter());
    assert!(passes(
        &filter,
        &frame(Carrier::Esp, PEER, VIP, SPI, 7, 100)
    ));
    let esp6 = frame6(Carrier::Esp, PEER6, VIP6, SPI, 7, 100);
    assert!(passes(&filter, &esp6));
    let mut other_mac = esp6;
    other_mac[5] ^= 1;
    assert!(!passes(&filter, &other_mac));
    assert_eq!((filter.drops(), filter.other_mac_drops()), (0, 1));
}

/// The inside ring's program: frames to another unicast MAC are dropped
/// and counted; to the inside virtual MAC, broadcast, multicast, VLAN or
/// runts pass.
#[test]
fn inside_ring_drops_only_other_unicast_macs() {
    let Some(filter) = load(1, DispatchScheme::PacketRoundRobin) else {
        return;
    };
    let verdict = |frame: &[u8]| {
        let mut data = vec![0u8; 14];
        data.extend_from_slice(frame);
        filter.inside_program().test_run(&data, 1).unwrap().retval != 0
    };
    let mut to_vmac = frame(Carrier::Esp, PEER, VIP, SPI, 1, 100);
    to_vmac[..6].copy_from_slice(&INSIDE_MAC.octets());
    assert!(verdict(&to_vmac));
    let mut broadcast = to_vmac.clone();
    broadcast[..6].fill(0xff);
    assert!(verdict(&broadcast));
    assert!(
        verdict(&to_vmac[..13]),
        "a runt passes (user space counts it)"
    );
    let mut other = to_vmac.clone();
    other[..6].copy_from_slice(&[0x02, 0xaa, 0, 0, 0, 9]);
    assert!(!verdict(&other));
    assert!(
        !verdict(&frame(Carrier::Esp, PEER, VIP, SPI, 1, 100)),
        "the outside VMAC"
    );
    assert_eq!((filter.drops(), filter.other_mac_drops()), (0, 2));
}

/// A veth pair in a namespace of its own: ESP frames with numbers 1..=N
/// sent on one end; the ring on the other end, filtered for node 2 of 3
/// (packet round robin), receives exactly the numbers it owns, and the
/// cells hold the others.
#[test]
fn veth_ring_receives_only_owned_frames() {
    veth_ring(false);
}

/// [`veth_ring_receives_only_owned_frames`] with the XDP program on the
/// receiving veth instead of the socket filter: it drops the not-owned
/// frames (counted in the same counter, numbers in the same cells), in
/// the driver (a veth runs XDP natively).
#[test]
fn veth_xdp_drops_not_owned_frames() {
    veth_ring(true);
}

fn veth_ring(xdp: bool) {
    let Some(mut filter) = load(2, DispatchScheme::PacketRoundRobin) else {
        return;
    };
    let ns = VethNamespace::create(if xdp { "phxxdp" } else { "phxbpf" });
    let path = ns.path();
    let (tx, mut rx, mode) = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                setns(File::open(&path).unwrap(), CloneFlags::CLONE_NEWNET).unwrap();
                let tx = PacketSocket::open(&PacketSocketConfig::new("pxa")).unwrap();
                let mut config = PacketSocketConfig::new("pxb");
                config.promiscuous = true;
                let rx = PacketSocket::open(&config).unwrap();
                // The interface index is the namespace's.
                let mode = xdp.then(|| filter.attach_xdp(rx.ifindex()).unwrap());
                (tx, rx, mode)
            })
            .join()
            .unwrap()
    });
    if xdp {
        assert_eq!(mode, Some(XdpMode::Native), "a veth runs XDP in its driver");
        assert_eq!(filter.xdp_mode(), mode);
    }
    filter.sync(&view_of([1, 2, 3]), &[], [inbound(SPI, false, PEER)].iter());
    if !xdp {
        filter.attach(&rx).unwrap();
    }
    // With XDP the ring has no socket filter: what it receives is what
    // XDP passed.
    // Frames that reached the ring before the attach (IPv6 neighbour
    // discovery of the new links): let their block retire, give it back.
    std::thread::sleep(Duration::from_millis(20));
    rx.recv_batch(|_, _| {});
    const N: u32 = 300;
    for seq in 1..=N {
        let carrier = if seq % 3 == 0 {
            Carrier::Udp
        } else {
            Carrier::Esp
        };
        tx.send(&frame(carrier, PEER, VIP, SPI, seq, 1400)).unwrap();
    }
    let mut got = Vec::new();
    // The ESP sequence numbers of the IPv4 frames (IPv6 neighbour
    // discovery of the new links passes the filter too).
    let mut collect = |f: &[u8], _| {
        let esp = if f.get(23) == Some(&17) {
            14 + 20 + 8
        } else {
            14 + 20
        };
        if f.len() >= esp + 8 && f[12..14] == [0x08, 0x00] {
            got.push(u32::from_be_bytes([
                f[esp + 4],
                f[esp + 5],
                f[esp + 6],
                f[esp + 7],
            ]));
        }
    };
    let deadline = Instant::now() + Duration::from_secs(3);
    let owned: Vec<u32> = (1..=N).filter(|s| s % 3 == 1).collect();
    let mut count = 0;
    while count < owned.len() && Instant::now() < deadline {
        count += rx.recv_batch(&mut collect);
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(20));
    rx.recv_batch(&mut collect);
    assert_eq!(
        got, owned,
        "only the owned numbers reach the ring, in order"
    );
    assert_eq!(filter.drops(), u64::from(N) - owned.len() as u64);
    let cells = filter.cells(SPI).unwrap();
    for seq in 1..=N {
        let want = if seq % 3 == 1 { 0 } else { seq };
        assert_eq!(cells[seq as usize], want, "cell {seq}");
    }
}

#[test]
fn xdp_round_robin_matches_the_dispatcher() {
    with_xdp(round_robin_matches_the_dispatcher);
}

#[test]
fn xdp_hash_schemes_match_the_dispatcher() {
    with_xdp(hash_schemes_match_the_dispatcher);
}

#[test]
fn xdp_silent_suspects_share_is_taken_over_in_the_kernel() {
    with_xdp(silent_suspects_share_is_taken_over_in_the_kernel);
}

/// Views the word cannot hold pass every frame to user space: more than
/// 32 members with a silent one, more than 254.
#[test]
fn views_too_large_for_the_word_pass_everything() {
    let Some(mut filter) = load(100, DispatchScheme::PacketRoundRobin) else {
        return;
    };
    let sa = inbound(SPI, false, PEER);
    let big = |n: u32| view_of((0..n).map(|i| if i == 0 { 100 } else { 1000 + i }));
    for (view, silent) in [(big(33), vec![NodeId(1005)]), (big(255), vec![])] {
        filter.sync(&view, &silent, [sa].iter());
        for seq in 1..=40u32 {
            let f = frame(Carrier::Esp, PEER, VIP, SPI, seq, 120);
            assert!(passes(&filter, &f), "{} members, seq {seq}", view.len());
        }
    }
    // 32 members with a silent one, and 254 without, are decided.
    for (view, silent) in [(big(32), vec![NodeId(1005)]), (big(254), vec![])] {
        round_robin_takeover_at(&mut filter, sa, (&view, &silent), 0..600u32);
    }
}

#[test]
fn xdp_a_shared_bucket_leaves_the_second_sa_to_user_space() {
    with_xdp(a_shared_bucket_leaves_the_second_sa_to_user_space);
}

#[test]
fn xdp_everything_else_passes() {
    with_xdp(everything_else_passes);
}

#[test]
fn xdp_ipv6_round_robin_matches_the_dispatcher() {
    with_xdp(ipv6_round_robin_matches_the_dispatcher);
}

#[test]
fn xdp_ipv6_hash_schemes_match_the_dispatcher() {
    with_xdp(ipv6_hash_schemes_match_the_dispatcher);
}

#[test]
fn xdp_ipv6_everything_else_passes() {
    with_xdp(ipv6_everything_else_passes);
}

#[test]
fn xdp_without_outside_addresses_only_other_macs_are_dropped() {
    with_xdp(without_outside_addresses_only_other_macs_are_dropped);
}
