//! What a cluster node does with one frame, device-free: answer an ARP
//! request or a neighbour solicitation, protect a cleartext packet (IPv4
//! or IPv6) it owns, open an ESP packet (over IPv4 or IPv6) it owns, or
//! count and drop it. The worker ([`super::worker`]) feeds it
//! the frames of both rings in order and carries out the [`Decision`]s;
//! tests feed it crafted frames.
//!
//! Every node runs this over the same frames in the same order (one
//! shared L2 segment), so every node's dispatcher sees the same packets
//! of every stream: a packet is dropped before it reaches the dispatcher
//! only for reasons every node shares (its bytes, the SPD, the SAs), never
//! for a local one (a full buffer is counted after the dispatcher).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use phalanx_cluster::dispatch::{flow_hash, DispatchScheme};
use phalanx_cluster::{
    DataPathReport, InboundDecision, NodeDataPath, NodeId, OutboundDecision, SharedState,
};
use phalanx_io::PacketMeta;
use phalanx_sa::{FlowCache, FlowKey, IpsecProtocol, OutboundSa, PolicyAction, SaMode};
use phalanx_wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use phalanx_wire::ethernet::{EtherType, EthernetFrame, MacAddress};
use phalanx_wire::ipv6::{upper_layer, Ipv6Packet};
use phalanx_wire::natt::{classify, UdpEncapPayload};
use phalanx_wire::ndp::{multicast_mac, parse_solicitation, solicited_node, NdpError};
use phalanx_wire::{checksum, EspPacket, IpProtocol, Ipv4Packet, UdpPacket};

use super::kernel_filter::KernelFilter;
use super::neighbour::{arp_reply_frame, nd_reply_frame, NeighbourFrame};
use super::Side;
use crate::config::SideAddresses;
use crate::dataplane::{DaemonCounter, Ingress, WorkerStats};
use crate::install::Runtime;
use crate::limits::{FLOW_CACHE_ENTRIES, IKE_PORT};

/// Octets of an IP packet the divergence fingerprint covers (cluster
/// contract: "a fixed 64-bit hash of the first 64 bytes").
const FINGERPRINT_LEN: usize = 64;

/// UDP header (RFC 768).
const UDP_HEADER_LEN: usize = 8;

/// Where the checksum sits in a TCP header (RFC 9293 §3.1).
const TCP_CHECKSUM_AT: usize = 16;

/// Where the checksum sits in a UDP header (RFC 768).
const UDP_CHECKSUM_AT: usize = 6;

/// One side's virtual addresses as this node uses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VirtualSide {
    /// The virtual addresses (configured on no interface); the outside
    /// has exactly one.
    pub addresses: SideAddresses,
    /// The virtual MAC address, shared by every node.
    pub mac: MacAddress,
    /// This node's own MAC on that side's interface: the Ethernet source
    /// of what it sends there, so the switch never learns the virtual MAC
    /// on one port (frames to it must keep flooding to every node).
    pub own_mac: MacAddress,
}

/// What to do with a frame.
#[derive(Debug)]
pub enum Decision<'f> {
    /// Send this ARP reply or neighbour advertisement on the side the
    /// request came from.
    Reply(NeighbourFrame),
    /// Protect `packet` (an IPv4 or IPv6 packet, Ethernet padding
    /// removed) with `sa` as sequence number `seq`, after decrementing its
    /// TTL or hop limit.
    Protect {
        /// The cleartext packet.
        packet: &'f [u8],
        /// The outbound SA its policy names.
        sa: Arc<OutboundSa>,
        /// The number this node was assigned for it.
        seq: u64,
    },
    /// Decrypt `payload`: the ESP packet (`Ingress::Raw`) or the UDP
    /// payload (`Ingress::Udp`), with the outer addresses in `meta`.
    Open {
        /// What the socket would have delivered.
        payload: &'f [u8],
        /// Outer source (address, port), destination, TOS.
        meta: PacketMeta,
        /// Which socket it would have come from.
        ingress: Ingress,
    },
    /// Hand this IKE message to the IKE thread (every node does; the
    /// IKE thread decides who answers).
    Ike {
        /// Where it arrived: the outside virtual address and port.
        local: SocketAddr,
        /// Where it came from.
        remote: SocketAddr,
        /// The IKE message (after the non-ESP marker on the NAT-T port).
        bytes: &'f [u8],
    },
    /// Nothing to do (counted).
    Drop,
}

/// A cluster node's per-frame state: its dispatcher and sequencers
/// ([`NodeDataPath`]), the SPD flow cache, and whether it answers ARP
/// and neighbour solicitations.
#[derive(Debug)]
pub struct FrameClassifier {
    local: NodeId,
    inside: VirtualSide,
    outside: VirtualSide,
    /// The outside virtual address: the tunnel endpoint.
    outside_address: IpAddr,
    udp_port: u16,
    datapath: NodeDataPath,
    cache: FlowCache,
    arp_owner: bool,
    /// Scratch for the drained marks.
    marks: Vec<u64>,
    /// The IKE port, when this node runs IKE.
    ike_port: Option<u16>,
    /// The outside ring's ESP pre-filter, kept in step with `datapath`.
    kernel_filter: Option<Box<KernelFilter>>,
    /// The state version the filter was last synced with.
    filter_synced: Option<u64>,
}

impl FrameClassifier {
    /// State for node `local` dispatching with `scheme`, ESP in UDP on
    /// `udp_port`.
    pub fn new(
        local: NodeId,
        scheme: DispatchScheme,
        (inside, outside): (VirtualSide, VirtualSide),
        udp_port: u16,
    ) -> FrameClassifier {
        // The configuration gives the outside exactly one address.
        let outside_address = outside
            .addresses
            .first()
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
        FrameClassifier {
            local,
            inside,
            outside,
            outside_address,
            udp_port,
            datapath: NodeDataPath::new(local, scheme),
            cache: FlowCache::new(FLOW_CACHE_ENTRIES),
            arp_owner: false,
            marks: Vec::new(),
            ike_port: None,
            kernel_filter: None,
            filter_synced: None,
        }
    }

    /// The outside ring has `filter` attached: it is kept in line with
    /// the data path's view and inbound SAs, and its recorded numbers are
    /// absorbed before takeover marks are drained.
    pub fn with_kernel_filter(mut self, filter: Box<KernelFilter>) -> FrameClassifier {
        self.kernel_filter = Some(filter);
        self
    }

    /// The kernel filter, if the outside ring has one.
    pub fn kernel_filter(&self) -> Option<&KernelFilter> {
        self.kernel_filter.as_deref()
    }

    /// Frames the kernel filter dropped (`None`: no filter).
    pub fn kernel_drops(&self) -> Option<u64> {
        self.kernel_filter.as_ref().map(|f| f.drops())
    }

    /// Every registered SA's kernel cells join its observer (periodically,
    /// so the replay checkpoints this node sends carry what the kernel
    /// dropped). Returns how many numbers were new.
    pub fn absorb_kernel_cells(&mut self) -> usize {
        match &mut self.kernel_filter {
            Some(filter) => filter.absorb_all(&mut self.datapath),
            None => 0,
        }
    }

    /// IKE runs on this node on `port` (500): IKE messages to the
    /// outside virtual address become [`Decision::Ike`].
    pub fn with_ike(mut self, port: u16) -> FrameClassifier {
        self.ike_port = Some(port);
        self
    }

    /// Once per batch, before its frames: adopts the cluster thread's
    /// latest state and `rt`'s policies. True when this node has just
    /// become the view's first member, which then announces the virtual
    /// addresses ([`super::neighbour::announcement_frame`]).
    pub fn begin_batch(
        &mut self,
        state: &SharedState,
        rt: &Runtime,
        stats: &mut WorkerStats,
    ) -> bool {
        self.datapath.update(state);
        if let Some(filter) = &mut self.kernel_filter {
            if self.filter_synced != Some(state.version()) {
                self.filter_synced = Some(state.version());
                filter.sync(
                    self.datapath.inbound_view(),
                    self.datapath.silent(),
                    state.inbound_sas(),
                );
            }
        }
        stats.policy_hits.sync(rt);
        let first = state.view().first() == Some(self.local);
        let became = first && !self.arp_owner;
        self.arp_owner = first;
        became
    }

    /// The outside virtual address: the tunnel endpoint, where owned
    /// packets are sent from.
    pub fn outside_address(&self) -> IpAddr {
        self.outside_address
    }

    /// Whether this node answers ARP and neighbour solicitations for the
    /// virtual addresses.
    pub fn is_arp_owner(&self) -> bool {
        self.arp_owner
    }

    /// The virtual address of `side`.
    pub fn side(&self, side: Side) -> &VirtualSide {
        match side {
            Side::Inside => &self.inside,
            Side::Outside => &self.outside,
        }
    }

    /// The dispatcher's and sequencers' state.
    pub fn datapath(&self) -> &NodeDataPath {
        &self.datapath
    }

    /// The next report for the cluster thread (checkpoints, lease
    /// requests), after a batch.
    pub fn poll_report(&mut self) -> Option<DataPathReport> {
        self.datapath.poll_report()
    }

    /// Decides what to do with `frame`, received on `side` at `arrival`
    /// (the ring's timestamp: inbound ESP is dispatched by arrival time);
    /// counts everything that is not carried out in `stats`.
    pub fn classify<'f>(
        &mut self,
        side: Side,
        frame: &'f [u8],
        arrival: Instant,
        rt: &Runtime,
        stats: &mut WorkerStats,
    ) -> Decision<'f> {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return drop(stats, DaemonCounter::ClusterIgnoredMalformed);
        };
        let (dst, mac) = (eth.dst_addr(), self.side(side).mac);
        if eth.vlan().is_some() {
            let counter = if dst == mac {
                DaemonCounter::ClusterIgnoredNotIp
            } else {
                DaemonCounter::ClusterIgnoredOtherMac
            };
            return drop(stats, counter);
        }
        let payload = frame.get(eth.header_len()..).unwrap_or(&[]);
        let ethertype = eth.ethertype();
        if ethertype == EtherType::ARP && (dst == mac || dst.is_broadcast()) {
            return self.arp(side, payload, stats);
        }
        // Not to the virtual MAC: only address resolution's group may be
        // ours.
        let to_group =
            dst != mac && ethertype == EtherType::IPV6 && self.is_solicited_group(side, dst);
        if dst != mac && !to_group {
            return drop(stats, DaemonCounter::ClusterIgnoredOtherMac);
        }
        let head = match ethertype {
            EtherType::IPV4 => ipv4_packet(payload).map(|p| (p, ipv4_head(p))),
            EtherType::IPV6 => ipv6_packet(payload).and_then(|p| Some((p, ipv6_head(p)?))),
            _ => return drop(stats, DaemonCounter::ClusterIgnoredNotIp),
        };
        let Some((packet, head)) = head else {
            return drop(stats, DaemonCounter::ClusterIgnoredMalformed);
        };
        if head.protocol == IpProtocol::ICMPV6 && self.is_nd_destination(side, head.dst) {
            match self.neighbour_solicitation(side, eth.src_addr(), packet, stats) {
                Some(decision) => return decision,
                // Another ICMPv6 message to the virtual address.
                None if to_group => return drop(stats, DaemonCounter::ClusterNdIgnored),
                None => {}
            }
        } else if to_group {
            return drop(stats, DaemonCounter::ClusterNdIgnored);
        }
        match side {
            Side::Inside => self.cleartext(packet, &head, rt, stats),
            Side::Outside => self.protected(packet, &head, arrival, rt, stats),
        }
    }

    /// Whether `dst` is the Ethernet group of the solicited-node address
    /// of `side`'s IPv6 virtual address (RFC 4861 §7.2.2: where address
    /// resolution sends its solicitations).
    fn is_solicited_group(&self, side: Side, dst: MacAddress) -> bool {
        let v6 = self.side(side).addresses.v6;
        v6.is_some_and(|a| dst == multicast_mac(solicited_node(a)))
    }

    /// Whether an ICMPv6 packet to `dst` may be a solicitation for
    /// `side`'s IPv6 virtual address: to it (unicast, RFC 4861 §7.3.1
    /// reachability confirmation) or to its solicited-node address.
    fn is_nd_destination(&self, side: Side, dst: IpAddr) -> bool {
        let (IpAddr::V6(dst), Some(v6)) = (dst, self.side(side).addresses.v6) else {
            return false;
        };
        dst == v6 || dst == solicited_node(v6)
    }

    /// An ICMPv6 packet to `side`'s IPv6 virtual address or its
    /// solicited-node group, in a frame from `requester`: a valid
    /// neighbour solicitation for the virtual address (RFC 4861 §7.1.1)
    /// is answered by the view's first node (§7.2.4); an invalid one, or
    /// one for another target, is counted and ignored. `None`: not a
    /// solicitation at all (the caller goes on with it).
    fn neighbour_solicitation(
        &mut self,
        side: Side,
        requester: MacAddress,
        packet: &[u8],
        stats: &mut WorkerStats,
    ) -> Option<Decision<'static>> {
        let vside = *self.side(side);
        let solicitation = match parse_solicitation(packet) {
            Ok(solicitation) => solicitation,
            Err(NdpError::NotSolicitation) => return None,
            Err(_) => return Some(drop(stats, DaemonCounter::ClusterNdIgnored)),
        };
        if Some(solicitation.target) != vside.addresses.v6 {
            return Some(drop(stats, DaemonCounter::ClusterNdIgnored));
        }
        if !self.arp_owner {
            return Some(drop(stats, DaemonCounter::ClusterNdNotOwner));
        }
        stats.daemon.bump(DaemonCounter::ClusterNdReplies);
        Some(Decision::Reply(nd_reply_frame(
            &solicitation,
            requester,
            &vside,
        )))
    }

    /// An ARP packet for the virtual MAC or broadcast (RFC 826): a
    /// request for the side's virtual address is answered by the view's
    /// first node; everything else is ignored.
    fn arp(&mut self, side: Side, payload: &[u8], stats: &mut WorkerStats) -> Decision<'static> {
        let vside = *self.side(side);
        let request = ArpPacket::new_checked(payload)
            .ok()
            .and_then(|p| ArpRepr::parse(&p).ok());
        let Some(request) = request else {
            return drop(stats, DaemonCounter::ClusterArpIgnored);
        };
        // RFC 5227 §2.1.1 / §2.3: probes and announcements of the virtual
        // address (a node announcing it) are not requests to answer.
        let asks_for_vip = request.operation == ArpOperation::REQUEST
            && Some(request.target_ip) == vside.addresses.v4
            && Some(request.sender_ip) != vside.addresses.v4
            && !request.sender_ip.is_unspecified();
        if !asks_for_vip {
            return drop(stats, DaemonCounter::ClusterArpIgnored);
        }
        if !self.arp_owner {
            return drop(stats, DaemonCounter::ClusterArpNotOwner);
        }
        stats.daemon.bump(DaemonCounter::ClusterArpReplies);
        Decision::Reply(arp_reply_frame(&request, &vside))
    }

    /// An IP packet from the LAN to the inside virtual MAC: the SPD,
    /// then the dispatcher for PROTECT packets.
    fn cleartext<'f>(
        &mut self,
        packet: &'f [u8],
        head: &IpHead,
        rt: &Runtime,
        stats: &mut WorkerStats,
    ) -> Decision<'f> {
        let dst = head.dst;
        if self.inside.addresses.contains(dst) || dst == self.outside_address {
            return drop(stats, DaemonCounter::ClusterIgnoredToVip);
        }
        // RFC 1812 §5.3.1, RFC 8200 §3: a router does not forward a packet
        // whose TTL or hop limit would reach 0 (no ICMP Time Exceeded is
        // sent from here).
        if head.hop_limit <= 1 {
            return drop(stats, DaemonCounter::ClusterTtlExpired);
        }
        let Ok(flow) = phalanx_wire::flow_of(packet) else {
            return drop(stats, DaemonCounter::ClusterIgnoredMalformed);
        };
        let key = FlowKey::from(flow);
        let Some(found) = self.cache.lookup_action(&rt.spd, &key) else {
            return drop(stats, DaemonCounter::NoPolicy);
        };
        stats.policy_hits.record(found.id);
        let id = match found.action {
            PolicyAction::Protect(id) => id,
            PolicyAction::Bypass => return drop(stats, DaemonCounter::PolicyBypass),
            PolicyAction::Discard => return drop(stats, DaemonCounter::PolicyDiscard),
        };
        let Some(sa) = rt.outbound.lookup(id) else {
            return drop(stats, DaemonCounter::NoOutboundSa);
        };
        let peer = match sa.params.mode {
            SaMode::Tunnel { remote, .. } => remote,
            SaMode::Transport => dst,
        };
        let len = u32::try_from(packet.len()).unwrap_or(u32::MAX);
        let (flow, print) = (flow_hash(&key), fingerprint(packet));
        match self.datapath.outbound(sa.spi(), peer, flow, len, print) {
            OutboundDecision::Send { seq } => {
                stats.daemon.bump(DaemonCounter::ClusterOutboundOwned);
                Decision::Protect { packet, sa, seq }
            }
            OutboundDecision::NotOwned => drop(stats, DaemonCounter::ClusterOutboundNotOwned),
            OutboundDecision::NoLease => drop(stats, DaemonCounter::ClusterNoLease),
            OutboundDecision::UnknownSa => drop(stats, DaemonCounter::ClusterOutboundUnknownSa),
        }
    }

    /// An IP packet from the WAN to the outside virtual MAC: ESP or ESP
    /// in UDP to the outside virtual address goes to the dispatcher.
    fn protected<'f>(
        &mut self,
        packet: &'f [u8],
        head: &IpHead,
        arrival: Instant,
        rt: &Runtime,
        stats: &mut WorkerStats,
    ) -> Decision<'f> {
        if head.dst != self.outside_address {
            return drop(stats, DaemonCounter::ClusterIgnoredOtherDestination);
        }
        if head.fragment {
            return drop(stats, DaemonCounter::ClusterIgnoredFragment);
        }
        let src = head.src;
        let body = packet.get(head.body_at..).unwrap_or(&[]);
        let (esp, payload, ingress, port) = match head.protocol {
            IpProtocol::ESP => (body, body, Ingress::Raw, 0),
            IpProtocol::UDP => match self.udp_esp(body, src, stats) {
                Ok((esp, payload, port)) => (esp, payload, Ingress::Udp, port),
                Err(decision) => return decision,
            },
            _ => return drop(stats, DaemonCounter::ClusterIgnoredToVip),
        };
        let Ok(view) = EspPacket::new_checked(esp) else {
            return drop(stats, DaemonCounter::ClusterIgnoredMalformed);
        };
        let (spi, seq) = (view.spi(), view.sequence_number());
        let len = u32::try_from(esp.len()).unwrap_or(u32::MAX);
        match self.datapath.inbound(spi, src, seq, len, arrival) {
            InboundDecision::Process => {
                self.take_over_marks(spi, rt, stats);
                stats.daemon.bump(DaemonCounter::ClusterInboundOwned);
                let meta = PacketMeta {
                    remote: SocketAddr::new(src, port),
                    local: Some(self.outside_address),
                    stride: 0,
                    tos: head.tos,
                };
                Decision::Open {
                    payload,
                    meta,
                    ingress,
                }
            }
            InboundDecision::NotOwned => drop(stats, DaemonCounter::ClusterInboundNotOwned),
            InboundDecision::Fenced => drop(stats, DaemonCounter::ClusterInboundFenced),
            InboundDecision::UnknownSa => drop(stats, DaemonCounter::ClusterInboundUnknownSa),
        }
    }

    /// The ESP packet of a UDP datagram to the virtual address (RFC 3948
    /// §2.2: a non-zero marker), with the UDP payload and source port; the
    /// decision for anything else.
    fn udp_esp<'f>(
        &self,
        datagram: &'f [u8],
        src: IpAddr,
        stats: &mut WorkerStats,
    ) -> Result<(&'f [u8], &'f [u8], u16), Decision<'f>> {
        let Ok(udp) = UdpPacket::new_checked(datagram) else {
            return Err(drop(stats, DaemonCounter::ClusterIgnoredMalformed));
        };
        let payload = datagram
            .get(UDP_HEADER_LEN..usize::from(udp.len()))
            .unwrap_or(&[]);
        let port = udp.dst_port();
        let ike = |bytes| Decision::Ike {
            local: SocketAddr::new(self.outside_address, port),
            remote: SocketAddr::new(src, udp.src_port()),
            bytes,
        };
        if Some(port) == self.ike_port {
            return Err(ike(payload));
        }
        if port == IKE_PORT {
            return Err(drop(stats, DaemonCounter::ClusterIkeUnsupported));
        }
        if port != self.udp_port {
            return Err(drop(stats, DaemonCounter::ClusterIgnoredToVip));
        }
        match classify(payload) {
            Ok(UdpEncapPayload::Esp(esp)) => Ok((esp, payload, udp.src_port())),
            Ok(UdpEncapPayload::Keepalive) => Err(drop(stats, DaemonCounter::NattKeepalives)),
            Ok(UdpEncapPayload::Ike(message)) if self.ike_port.is_some() => Err(ike(message)),
            Ok(UdpEncapPayload::Ike(_)) => Err(drop(stats, DaemonCounter::ClusterIkeUnsupported)),
            Err(_) => Err(drop(stats, DaemonCounter::ClusterIgnoredMalformed)),
        }
    }

    /// Before each packet of inbound SA `spi` this node owns: the numbers
    /// other nodes owned and this node observed, when some are due (after
    /// a view change; with the shortest-queue schemes after every packet),
    /// enter the SA's replay window (`replay_commit`; numbers it already
    /// holds are ignored), so a packet captured before a takeover and
    /// replayed after it is refused: the window "continues from what every
    /// node observed". Cheap when nothing is due.
    ///
    /// Known cost: the observed numbers are not authenticated (only the
    /// owner verifies a packet), so forged packets other nodes observed
    /// before a takeover can make the new owner refuse the genuine packets
    /// with those numbers — a denial of service limited to the packets in
    /// flight at the takeover.
    fn take_over_marks(&mut self, spi: u32, rt: &Runtime, stats: &mut WorkerStats) {
        self.marks.clear();
        // What the kernel filter dropped for this SA joins the observer
        // first, so the marks include it.
        if let Some(filter) = &mut self.kernel_filter {
            if self.datapath.marks_due(spi) {
                filter.absorb(&mut self.datapath, spi);
            }
        }
        self.datapath.drain_takeover_marks(spi, &mut self.marks);
        if self.marks.is_empty() {
            return;
        }
        let Some(sa) = rt.inbound.get(spi, IpsecProtocol::Esp) else {
            return;
        };
        let committed = self
            .marks
            .iter()
            .filter(|&&seq| sa.replay_commit(seq).is_ok());
        stats.daemon.add(
            DaemonCounter::ClusterTakeoverMarks,
            committed.count() as u64,
        );
    }
}

/// Counts `counter` and decides to drop.
fn drop<'f>(stats: &mut WorkerStats, counter: DaemonCounter) -> Decision<'f> {
    stats.daemon.bump(counter);
    Decision::Drop
}

/// What the classifier reads from an IP header of either family.
#[derive(Clone, Copy, Debug)]
struct IpHead {
    src: IpAddr,
    dst: IpAddr,
    /// IPv4 TTL or IPv6 hop limit.
    hop_limit: u8,
    /// A fragment (IPv4 offset or MF; IPv6 a Fragment header).
    fragment: bool,
    /// The protocol after the header (IPv6: after the extension headers).
    protocol: IpProtocol,
    /// Where that protocol's header starts.
    body_at: usize,
    /// The DSCP and ECN octet (IPv6 traffic class).
    tos: u8,
}

/// The IPv4 packet at the start of an Ethernet payload, without the
/// Ethernet padding behind it (IEEE 802.3 pads frames to 60 octets);
/// `None` when its header does not check (version, lengths, RFC 791
/// header checksum).
fn ipv4_packet(payload: &[u8]) -> Option<&[u8]> {
    let ip = Ipv4Packet::new_checked(payload).ok()?;
    if ip.version() != 4 || !ip.verify_checksum() {
        return None;
    }
    payload.get(..usize::from(ip.total_len()))
}

/// The header of a checked IPv4 packet.
fn ipv4_head(packet: &[u8]) -> IpHead {
    let ip = Ipv4Packet::new_unchecked(packet);
    IpHead {
        src: IpAddr::V4(ip.src_addr()),
        dst: IpAddr::V4(ip.dst_addr()),
        hop_limit: ip.ttl(),
        fragment: ip.is_fragment(),
        protocol: ip.protocol(),
        body_at: ip.header_len(),
        tos: ip.dscp_ecn(),
    }
}

/// The IPv6 packet at the start of an Ethernet payload, without the
/// Ethernet padding behind it; `None` when its version is not 6 or its
/// payload length runs past the frame (a jumbogram's zero length is not
/// used on Ethernet, RFC 2675 §3: it is a bare header here and fails the
/// next checks).
fn ipv6_packet(payload: &[u8]) -> Option<&[u8]> {
    let ip = Ipv6Packet::new_checked(payload).ok()?;
    if ip.version() != 6 {
        return None;
    }
    let len = ip.packet().len();
    payload.get(..len)
}

/// The header of an IPv6 packet after its extension headers (RFC 8200
/// §4); `None` when the chain does not parse.
fn ipv6_head(packet: &[u8]) -> Option<IpHead> {
    let ip = Ipv6Packet::new_unchecked(packet);
    let upper = upper_layer(&ip).ok()?;
    Some(IpHead {
        src: IpAddr::V6(ip.src_addr()),
        dst: IpAddr::V6(ip.dst_addr()),
        hop_limit: ip.hop_limit(),
        fragment: upper.is_fragment,
        protocol: upper.protocol,
        body_at: upper.offset,
        tos: ip.traffic_class(),
    })
}

/// The divergence fingerprint of a packet: FNV-1a 64 (draft-eastlake-fnv
/// §2) over its first 64 octets. Fixed and seedless:
/// every node computes the same value for the same packet, which is what
/// lets a node that missed a packet find where its counter stands
/// (cluster contract, "Divergence").
pub fn fingerprint(packet: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let head = packet.get(..FINGERPRINT_LEN).unwrap_or(packet);
    head.iter().fold(OFFSET_BASIS, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
}

/// Decrements the TTL of the IPv4 packet in `packet` and patches its
/// header checksum incrementally (RFC 1624 §3; the TTL is the high octet
/// of the header's fifth 16-bit word, the protocol the low one), or the
/// hop limit of the IPv6 packet (RFC 8200 §3, no header checksum). The
/// caller checked the header and that the TTL is above 1.
pub fn decrement_ttl(packet: &mut [u8]) {
    if packet.first().map(|b| b >> 4) == Some(6) {
        let mut ip = Ipv6Packet::new_unchecked(&mut *packet);
        let lower = ip.hop_limit().saturating_sub(1);
        ip.set_hop_limit(lower);
        return;
    }
    let mut ip = Ipv4Packet::new_unchecked(&mut *packet);
    let (ttl, protocol) = (ip.ttl(), ip.protocol().0);
    let Some(lower) = ttl.checked_sub(1) else {
        return;
    };
    let old = u16::from_be_bytes([ttl, protocol]);
    let new = u16::from_be_bytes([lower, protocol]);
    let patched = checksum::update(ip.checksum(), old, new);
    ip.set_ttl(lower);
    ip.set_checksum(patched);
}

/// Fills in the TCP or UDP checksum of the IP packet in `packet` from
/// scratch (RFC 9293 §3.1, RFC 768, RFC 8200 §8.1: pseudo-header and
/// segment): the LAN host's kernel left it to its NIC
/// (`checksum_pending`), and the far side of the tunnel must get it
/// right. Other protocols and fragments are left alone. False when the
/// transport header does not fit.
pub fn fill_transport_checksum(packet: &mut [u8]) -> bool {
    let head = if packet.first().map(|b| b >> 4) == Some(6) {
        match ipv6_head(packet) {
            Some(head) => head,
            None => return false,
        }
    } else {
        ipv4_head(packet)
    };
    let at = match head.protocol {
        IpProtocol::TCP => TCP_CHECKSUM_AT,
        IpProtocol::UDP => UDP_CHECKSUM_AT,
        _ => return true,
    };
    if head.fragment {
        return true;
    }
    let Some(segment) = packet.get_mut(head.body_at..) else {
        return false;
    };
    let Ok(length) = u16::try_from(segment.len()) else {
        return false;
    };
    let Some(field) = segment.get_mut(at..at + 2) else {
        return false;
    };
    field.fill(0);
    let pseudo = match (head.src, head.dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            checksum::pseudo_header_v4(src, dst, head.protocol, length)
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            checksum::pseudo_header_v6(src, dst, head.protocol, u32::from(length))
        }
        _ => return false,
    };
    let sum = checksum::combine(&[pseudo, checksum::data(segment)]);
    // RFC 768: a computed zero is sent as all ones (zero means "none").
    let value = match !sum {
        0 if head.protocol == IpProtocol::UDP => 0xffff,
        v => v,
    };
    segment[at..at + 2].copy_from_slice(&value.to_be_bytes());
    true
}
