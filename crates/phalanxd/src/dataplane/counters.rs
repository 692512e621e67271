//! Per-worker counters: the ESP drop counters of each direction
//! ([`Counters`]), the daemon's own [`DaemonCounter`]s, outbound policy
//! hits ([`PolicyHits`]), and busy time.
//! A worker owns its [`WorkerStats`] and adds to it without atomics;
//! every [`STATS_INTERVAL_MS`](crate::limits::STATS_INTERVAL_MS) it copies
//! them into its [`StatsSlot`], which the control plane reads.

use phalanx_esp::Counters;
use phalanx_sa::PolicyId;

use crate::install::{InstalledPolicy, Runtime};

/// A counter of the daemon that is not an ESP drop reason. The
/// discriminant indexes [`DaemonCounters`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DaemonCounter {
    /// Packets read from the TUN device.
    TunRxPackets = 0,
    /// Packets written to the TUN device.
    TunTxPackets,
    /// Datagrams received on the ESP-in-UDP socket.
    UdpRxPackets,
    /// Datagrams sent on the ESP-in-UDP socket.
    UdpTxPackets,
    /// ESP packets received on the raw socket.
    RawRxPackets,
    /// ESP packets sent on the raw socket.
    RawTxPackets,
    /// NAT-keepalives received (RFC 3948 §2.3), consumed.
    NattKeepalives,
    /// IKE messages (non-ESP marker, RFC 3948 §2.2) on the ESP port,
    /// handed to the IKE thread (dropped when IKE is off).
    IkeMessages,
    /// TUN packets that are not IP packets a selector can read.
    TunMalformed,
    /// TUN packets no policy matched (RFC 4301 §4.4.1: discard).
    NoPolicy,
    /// TUN packets a DISCARD policy matched.
    PolicyDiscard,
    /// TUN packets a BYPASS policy matched: a TUN gateway has no clear
    /// path to send them on, so they are dropped.
    PolicyBypass,
    /// TUN packets whose PROTECT policy names an SA no longer installed.
    NoOutboundSa,
    /// Packets whose outer header could not be rebuilt or stripped
    /// (address families differ, header unreadable).
    OuterHeader,
    /// Packets dropped because a send batch could not be handed to the
    /// kernel.
    SendErrors,
    /// Receive calls that failed.
    RecvErrors,
    /// Packets dropped by the I/O layer (too large for a buffer,
    /// truncated, refused by the kernel).
    IoDropped,
    /// Outbound SAs that crossed a soft lifetime limit (rekey events).
    SoftExpiredOut,
    /// Inbound SAs that crossed a soft lifetime limit.
    SoftExpiredIn,
    /// TUN reads (each one packet or one GSO super-packet).
    TunReads,
    /// TUN reads that returned a GSO super-packet.
    TunSuperPackets,
    /// `recvmmsg` calls on the UDP socket that returned data.
    UdpRecvCalls,
    /// UDP messages the kernel had coalesced (GRO).
    UdpGroCoalesced,
    /// `sendmmsg` calls on the UDP socket.
    UdpSendCalls,
    /// UDP messages sent with `UDP_SEGMENT` (GSO).
    UdpGsoMessages,
    /// Messages for the IKE thread (IKE datagrams, acquires, lifetime
    /// events) dropped because its queue was full.
    IkeQueueFull,
    /// Acquires sent to IKE by trap policies (`start_action = "trap"`),
    /// at most one per child per second.
    TrapAcquires,
    /// Cluster mode: frames read on the inside (clear) interface.
    ClusterInsideFrames,
    /// Cluster mode: frames read on the outside (protected) interface.
    ClusterOutsideFrames,
    /// Cluster mode: cleartext packets of a PROTECT policy this node was
    /// dispatched and protected.
    ClusterOutboundOwned,
    /// Cluster mode: cleartext packets of a PROTECT policy another node
    /// owns (counted by the sequencer here, then dropped).
    ClusterOutboundNotOwned,
    /// Cluster mode: owned cleartext packets dropped because this node
    /// holds no sequence-number lease for the SA (yet).
    ClusterNoLease,
    /// Cluster mode: cleartext packets whose outbound SA the cluster
    /// does not know (not registered), dropped.
    ClusterOutboundUnknownSa,
    /// Cluster mode: owned packets dropped because the SA's counter was
    /// already past the assigned number (never sent twice).
    ClusterSequenceBehind,
    /// Cluster mode: cleartext packets whose TTL would reach 0 when
    /// forwarded into the tunnel (RFC 1812 §5.3.1), dropped.
    ClusterTtlExpired,
    /// Cluster mode: ESP packets to the virtual address this node owns and
    /// decrypts.
    ClusterInboundOwned,
    /// Cluster mode: ESP packets to the virtual address another node owns
    /// (their sequence number observed here, then dropped).
    ClusterInboundNotOwned,
    /// Cluster mode: ESP packets to the virtual address for an SPI the
    /// cluster does not know, dropped.
    ClusterInboundUnknownSa,
    /// Cluster mode: sequence numbers other nodes observed, entered into an
    /// inbound SA's replay window before this node owned them.
    ClusterTakeoverMarks,
    /// Cluster mode: IKE messages to the virtual address (UDP 500, or 4500
    /// with a zero marker), dropped: the file configures no IKE.
    ClusterIkeUnsupported,
    /// Cluster mode: IKE messages to the virtual address handed to the
    /// IKE thread (every node; the IKE thread decides who answers).
    ClusterIkeForwarded,
    /// Cluster mode: IKE messages the IKE thread's full queue refused.
    ClusterIkeQueueFull,
    /// Cluster mode: ARP requests for a virtual address answered (this
    /// node is the view's first member).
    ClusterArpReplies,
    /// Cluster mode: ARP requests for a virtual address left to the view's
    /// first member.
    ClusterArpNotOwner,
    /// Cluster mode: other ARP packets (replies, requests for other
    /// addresses, not Ethernet/IPv4), ignored.
    ClusterArpIgnored,
    /// Cluster mode: gratuitous ARPs sent for the virtual addresses when
    /// this node became the view's first member.
    ClusterGratuitousArps,
    /// Cluster mode: neighbour solicitations for a virtual IPv6 address
    /// answered (this node is the view's first member).
    ClusterNdReplies,
    /// Cluster mode: neighbour solicitations for a virtual IPv6 address
    /// left to the view's first member.
    ClusterNdNotOwner,
    /// Cluster mode: ICMPv6 to a virtual address or its solicited-node
    /// group that is not a valid solicitation for it (RFC 4861 §7.1.1:
    /// hop limit, checksum, options; advertisements, router messages),
    /// ignored.
    ClusterNdIgnored,
    /// Cluster mode: unsolicited neighbour advertisements sent for the
    /// virtual IPv6 addresses when this node became the view's first
    /// member.
    ClusterUnsolicitedNas,
    /// Cluster mode: frames for another MAC address (not the side's
    /// virtual MAC, not an ARP broadcast), ignored.
    ClusterIgnoredOtherMac,
    /// Cluster mode: frames to the virtual MAC that carry neither IPv4,
    /// IPv6 nor ARP, ignored.
    ClusterIgnoredNotIp,
    /// Cluster mode: truncated frames and IPv4 packets whose header does
    /// not check (length, version, header checksum), ignored.
    ClusterIgnoredMalformed,
    /// Cluster mode: IPv4 fragments (not reassembled), ignored.
    ClusterIgnoredFragment,
    /// Cluster mode: packets to a virtual address that are not ESP or
    /// ESP-in-UDP (ICMP, other ports; inside: anything to the inside
    /// virtual address), ignored.
    ClusterIgnoredToVip,
    /// Cluster mode: outside packets to the virtual MAC for another IP
    /// address, ignored.
    ClusterIgnoredOtherDestination,
    /// Cluster mode: packets too large for a buffer, or ARP replies beyond
    /// a batch's room, dropped.
    ClusterOversize,
    /// Cluster mode: data-path reports (checkpoints, lease requests) the
    /// cluster thread's full queue refused.
    ClusterReportsDropped,
    /// Cluster mode: VLAN-tagged frames (the cluster's sides are untagged),
    /// ignored.
    ClusterIgnoredVlan,
    /// Cluster mode: TCP super-frames a LAN host's kernel left
    /// unsegmented (offload), dropped: not segmented here.
    ClusterGsoFrames,
    /// Cluster mode: frames the kernel dropped because a ring was full
    /// (this node missed them; the checkpoints heal its counters).
    ClusterRingDrops,
    /// Cluster mode: inbound ESP frames another node owns, dropped by the
    /// outside ring's kernel filter before they were copied to the ring
    /// (their numbers recorded for the observer; see
    /// `dataplane::cluster::kernel_filter`).
    ClusterInboundNotOwnedKernel,
    /// Cluster mode: frames to another unicast MAC than a side's virtual
    /// MAC, dropped by the rings' kernel filters (user space would ignore
    /// them as `cluster_ignored_other_mac`).
    ClusterIgnoredOtherMacKernel,
    /// Cluster mode: 1 when the kernel filter was asked for but could not
    /// be loaded or attached (the node runs without it; see the log).
    ClusterKernelFilterUnavailable,
    /// Cluster mode: ESP packets this node owns that arrived while it sent
    /// no heartbeats for longer than `suspect_after` (stopped, or starved
    /// of CPU): another node may have processed them, so they are dropped
    /// and their numbers marked like another node's (see
    /// `phalanx_cluster::fence`).
    ClusterInboundFenced,
    /// Cluster mode: 1 when the kernel filter's XDP program was asked for
    /// (`kernel_filter_xdp`) but could not be loaded or attached (the
    /// socket filter alone decides; see the log).
    ClusterKernelFilterXdpUnavailable,
    /// ICMP Fragmentation Needed / Packet Too Big sent to inner senders whose packets did not fit the path MTU (RFC 4301 §8.2.1).
    IcmpTooBigSent,
    /// Such ICMP errors not sent: the worker's rate limit (RFC 1812 §4.3.2.8).
    IcmpTooBigRateLimited,
    /// Such ICMP errors the ICMP socket refused, or that had no socket.
    IcmpSendFailed,
    /// Inner IPv4 packets without DF fragmented before encryption because their ESP packet would not fit the path MTU (RFC 4459 §3); each fragment then counts as a packet.
    InnerFragmented,
    /// ESP packets larger than the path MTU sent with fragmentation allowed (`fragment = "outer"`, or IPv6 packets of at most 1280 octets over a path that cannot carry 1280 inside).
    OuterFragmented,
    /// Path MTU values an outbound SA learned from the kernel (a refused send, an ICMP error for our packets, or the route at installation).
    PathMtuLearned,
    /// ICMP errors the kernel reported for our ESP packets (the sockets' error queues): unreachable, too big, ...
    IcmpErrorsReceived,
    /// Datagrams the kernel dropped before phalanxd read them, for lack of room in a socket's receive buffer (SO_RXQ_OVFL).
    KernelRxDropped,
}

impl DaemonCounter {
    /// Every counter, in discriminant order.
    pub const ALL: [DaemonCounter; 74] = [
        DaemonCounter::TunRxPackets,
        DaemonCounter::TunTxPackets,
        DaemonCounter::UdpRxPackets,
        DaemonCounter::UdpTxPackets,
        DaemonCounter::RawRxPackets,
        DaemonCounter::RawTxPackets,
        DaemonCounter::NattKeepalives,
        DaemonCounter::IkeMessages,
        DaemonCounter::TunMalformed,
        DaemonCounter::NoPolicy,
        DaemonCounter::PolicyDiscard,
        DaemonCounter::PolicyBypass,
        DaemonCounter::NoOutboundSa,
        DaemonCounter::OuterHeader,
        DaemonCounter::SendErrors,
        DaemonCounter::RecvErrors,
        DaemonCounter::IoDropped,
        DaemonCounter::SoftExpiredOut,
        DaemonCounter::SoftExpiredIn,
        DaemonCounter::TunReads,
        DaemonCounter::TunSuperPackets,
        DaemonCounter::UdpRecvCalls,
        DaemonCounter::UdpGroCoalesced,
        DaemonCounter::UdpSendCalls,
        DaemonCounter::UdpGsoMessages,
        DaemonCounter::IkeQueueFull,
        DaemonCounter::TrapAcquires,
        DaemonCounter::ClusterInsideFrames,
        DaemonCounter::ClusterOutsideFrames,
        DaemonCounter::ClusterOutboundOwned,
        DaemonCounter::ClusterOutboundNotOwned,
        DaemonCounter::ClusterNoLease,
        DaemonCounter::ClusterOutboundUnknownSa,
        DaemonCounter::ClusterSequenceBehind,
        DaemonCounter::ClusterTtlExpired,
        DaemonCounter::ClusterInboundOwned,
        DaemonCounter::ClusterInboundNotOwned,
        DaemonCounter::ClusterInboundUnknownSa,
        DaemonCounter::ClusterTakeoverMarks,
        DaemonCounter::ClusterIkeUnsupported,
        DaemonCounter::ClusterIkeForwarded,
        DaemonCounter::ClusterIkeQueueFull,
        DaemonCounter::ClusterArpReplies,
        DaemonCounter::ClusterArpNotOwner,
        DaemonCounter::ClusterArpIgnored,
        DaemonCounter::ClusterGratuitousArps,
        DaemonCounter::ClusterNdReplies,
        DaemonCounter::ClusterNdNotOwner,
        DaemonCounter::ClusterNdIgnored,
        DaemonCounter::ClusterUnsolicitedNas,
        DaemonCounter::ClusterIgnoredOtherMac,
        DaemonCounter::ClusterIgnoredNotIp,
        DaemonCounter::ClusterIgnoredMalformed,
        DaemonCounter::ClusterIgnoredFragment,
        DaemonCounter::ClusterIgnoredToVip,
        DaemonCounter::ClusterIgnoredOtherDestination,
        DaemonCounter::ClusterOversize,
        DaemonCounter::ClusterReportsDropped,
        DaemonCounter::ClusterIgnoredVlan,
        DaemonCounter::ClusterGsoFrames,
        DaemonCounter::ClusterRingDrops,
        DaemonCounter::ClusterInboundNotOwnedKernel,
        DaemonCounter::ClusterIgnoredOtherMacKernel,
        DaemonCounter::ClusterKernelFilterUnavailable,
        DaemonCounter::ClusterInboundFenced,
        DaemonCounter::ClusterKernelFilterXdpUnavailable,
        DaemonCounter::IcmpTooBigSent,
        DaemonCounter::IcmpTooBigRateLimited,
        DaemonCounter::IcmpSendFailed,
        DaemonCounter::InnerFragmented,
        DaemonCounter::OuterFragmented,
        DaemonCounter::PathMtuLearned,
        DaemonCounter::IcmpErrorsReceived,
        DaemonCounter::KernelRxDropped,
    ];

    /// Number of counters.
    pub const COUNT: usize = DaemonCounter::ALL.len();

    /// A stable snake_case name, for `phalanxctl` and metrics.
    pub const fn name(self) -> &'static str {
        match self {
            DaemonCounter::TunRxPackets => "tun_rx_packets",
            DaemonCounter::TunTxPackets => "tun_tx_packets",
            DaemonCounter::UdpRxPackets => "udp_rx_packets",
            DaemonCounter::UdpTxPackets => "udp_tx_packets",
            DaemonCounter::RawRxPackets => "raw_rx_packets",
            DaemonCounter::RawTxPackets => "raw_tx_packets",
            DaemonCounter::NattKeepalives => "natt_keepalives",
            DaemonCounter::IkeMessages => "ike_messages",
            DaemonCounter::TunMalformed => "tun_malformed",
            DaemonCounter::NoPolicy => "no_policy",
            DaemonCounter::PolicyDiscard => "policy_discard",
            DaemonCounter::PolicyBypass => "policy_bypass",
            DaemonCounter::NoOutboundSa => "no_outbound_sa",
            DaemonCounter::OuterHeader => "outer_header",
            DaemonCounter::SendErrors => "send_errors",
            DaemonCounter::RecvErrors => "recv_errors",
            DaemonCounter::IoDropped => "io_dropped",
            DaemonCounter::SoftExpiredOut => "soft_expired_out",
            DaemonCounter::SoftExpiredIn => "soft_expired_in",
            DaemonCounter::TunReads => "tun_reads",
            DaemonCounter::TunSuperPackets => "tun_super_packets",
            DaemonCounter::UdpRecvCalls => "udp_recv_calls",
            DaemonCounter::UdpGroCoalesced => "udp_gro_coalesced",
            DaemonCounter::UdpSendCalls => "udp_send_calls",
            DaemonCounter::UdpGsoMessages => "udp_gso_messages",
            DaemonCounter::IkeQueueFull => "ike_queue_full",
            DaemonCounter::TrapAcquires => "trap_acquires",
            DaemonCounter::ClusterInsideFrames => "cluster_inside_frames",
            DaemonCounter::ClusterOutsideFrames => "cluster_outside_frames",
            DaemonCounter::ClusterOutboundOwned => "cluster_outbound_owned",
            DaemonCounter::ClusterOutboundNotOwned => "cluster_outbound_not_owned",
            DaemonCounter::ClusterNoLease => "cluster_no_lease",
            DaemonCounter::ClusterOutboundUnknownSa => "cluster_outbound_unknown_sa",
            DaemonCounter::ClusterSequenceBehind => "cluster_sequence_behind",
            DaemonCounter::ClusterTtlExpired => "cluster_ttl_expired",
            DaemonCounter::ClusterInboundOwned => "cluster_inbound_owned",
            DaemonCounter::ClusterInboundNotOwned => "cluster_inbound_not_owned",
            DaemonCounter::ClusterInboundUnknownSa => "cluster_inbound_unknown_sa",
            DaemonCounter::ClusterTakeoverMarks => "cluster_takeover_marks",
            DaemonCounter::ClusterIkeUnsupported => "cluster_ike_unsupported",
            DaemonCounter::ClusterIkeForwarded => "cluster_ike_forwarded",
            DaemonCounter::ClusterIkeQueueFull => "cluster_ike_queue_full",
            DaemonCounter::ClusterArpReplies => "cluster_arp_replies",
            DaemonCounter::ClusterArpNotOwner => "cluster_arp_not_owner",
            DaemonCounter::ClusterArpIgnored => "cluster_arp_ignored",
            DaemonCounter::ClusterGratuitousArps => "cluster_gratuitous_arps",
            DaemonCounter::ClusterNdReplies => "cluster_nd_replies",
            DaemonCounter::ClusterNdNotOwner => "cluster_nd_not_owner",
            DaemonCounter::ClusterNdIgnored => "cluster_nd_ignored",
            DaemonCounter::ClusterUnsolicitedNas => "cluster_unsolicited_nas",
            DaemonCounter::ClusterIgnoredOtherMac => "cluster_ignored_other_mac",
            DaemonCounter::ClusterIgnoredNotIp => "cluster_ignored_not_ip",
            DaemonCounter::ClusterIgnoredMalformed => "cluster_ignored_malformed",
            DaemonCounter::ClusterIgnoredFragment => "cluster_ignored_fragment",
            DaemonCounter::ClusterIgnoredToVip => "cluster_ignored_to_vip",
            DaemonCounter::ClusterIgnoredOtherDestination => "cluster_ignored_other_destination",
            DaemonCounter::ClusterOversize => "cluster_oversize",
            DaemonCounter::ClusterReportsDropped => "cluster_reports_dropped",
            DaemonCounter::ClusterIgnoredVlan => "cluster_ignored_vlan",
            DaemonCounter::ClusterGsoFrames => "cluster_gso_frames",
            DaemonCounter::ClusterRingDrops => "cluster_ring_drops",
            DaemonCounter::ClusterInboundNotOwnedKernel => "cluster_inbound_not_owned_kernel",
            DaemonCounter::ClusterIgnoredOtherMacKernel => "cluster_ignored_other_mac_kernel",
            DaemonCounter::ClusterKernelFilterUnavailable => "cluster_kernel_filter_unavailable",
            DaemonCounter::ClusterKernelFilterXdpUnavailable => {
                "cluster_kernel_filter_xdp_unavailable"
            }
            DaemonCounter::ClusterInboundFenced => "cluster_inbound_fenced",
            DaemonCounter::IcmpTooBigSent => "icmp_too_big_sent",
            DaemonCounter::IcmpTooBigRateLimited => "icmp_too_big_rate_limited",
            DaemonCounter::IcmpSendFailed => "icmp_send_failed",
            DaemonCounter::InnerFragmented => "inner_fragmented",
            DaemonCounter::OuterFragmented => "outer_fragmented",
            DaemonCounter::PathMtuLearned => "path_mtu_learned",
            DaemonCounter::IcmpErrorsReceived => "icmp_errors_received",
            DaemonCounter::KernelRxDropped => "kernel_rx_dropped",
        }
    }
}

/// One value per [`DaemonCounter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DaemonCounters([u64; DaemonCounter::COUNT]);

impl Default for DaemonCounters {
    fn default() -> Self {
        DaemonCounters([0; DaemonCounter::COUNT])
    }
}

impl DaemonCounters {
    /// Adds `n` to `counter`.
    #[inline]
    pub fn add(&mut self, counter: DaemonCounter, n: u64) {
        self.0[counter as usize] += n;
    }

    /// Adds one to `counter`.
    #[inline]
    pub fn bump(&mut self, counter: DaemonCounter) {
        self.add(counter, 1);
    }

    /// The value of `counter`.
    pub fn get(&self, counter: DaemonCounter) -> u64 {
        self.0[counter as usize]
    }

    /// Adds another set.
    pub fn merge(&mut self, other: &DaemonCounters) {
        for (mine, theirs) in self.0.iter_mut().zip(other.0.iter()) {
            *mine += theirs;
        }
    }

    /// Every counter with its value.
    pub fn iter(&self) -> impl Iterator<Item = (DaemonCounter, u64)> + '_ {
        DaemonCounter::ALL.iter().map(move |&c| (c, self.get(c)))
    }
}

/// Everything one worker counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// ESP outbound verdicts.
    pub outbound: Counters,
    /// ESP inbound verdicts.
    pub inbound: Counters,
    /// Daemon counters.
    pub daemon: DaemonCounters,
    /// Nanoseconds spent processing since start.
    pub busy_ns: u64,
    /// Nanoseconds since the worker started.
    pub wall_ns: u64,
    /// Busy share over the last second (a sliding window of the
    /// publications, see [`load`](super::load)), `0.0..=1.0` in millionths
    /// (kept integral so the struct stays `Eq`).
    pub busy_1s_ppm: u32,
    /// Outbound policy decisions, per policy.
    pub policy_hits: PolicyHits,
}

impl WorkerStats {
    /// Packets this worker handled: read from any device.
    pub fn packets(&self) -> u64 {
        self.daemon.get(DaemonCounter::TunRxPackets)
            + self.daemon.get(DaemonCounter::UdpRxPackets)
            + self.daemon.get(DaemonCounter::RawRxPackets)
    }

    /// Busy share since the worker started, `0.0..=1.0`.
    pub fn busy_avg(&self) -> f64 {
        f64::from(super::load::share_ppm(self.busy_ns, self.wall_ns)) / 1e6
    }

    /// Busy share over the last second, `0.0..=1.0`.
    pub fn busy_1s(&self) -> f64 {
        f64::from(self.busy_1s_ppm) / 1e6
    }

    /// Adds another worker's counters (load fields and policy hits
    /// excepted: hits are summed per policy with [`PolicyHits::hits`]).
    pub fn merge(&mut self, other: &WorkerStats) {
        self.outbound.merge(&other.outbound);
        self.inbound.merge(&other.inbound);
        self.daemon.merge(&other.daemon);
    }
}

/// How often each outbound policy decided a packet's fate (RFC 4301
/// §5.1: the SPD lookup, or the flow cache in front of it, which answers
/// for the same policy), counted by one worker without atomics.
///
/// Indexed by policy id - 1 (ids are small and stable across reloads, see
/// [`install`](crate::install)). Each slot remembers the generation of
/// the policy it counts for; when a reload gives the id to another policy
/// (new generation) the slot starts again from 0. The vectors grow only
/// when a reload installs a higher id, never on the packet path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyHits {
    /// The runtime generation the slots were last checked against.
    synced: Option<u64>,
    counts: Vec<u64>,
    generations: Vec<u64>,
}

impl PolicyHits {
    /// Brings the slots in line with `rt`'s policies: called once per
    /// batch, it does work only when `rt` is a new publication.
    pub fn sync(&mut self, rt: &Runtime) {
        if self.synced == Some(rt.generation) {
            return;
        }
        self.synced = Some(rt.generation);
        let slots = rt.policies.iter().filter_map(|p| slot(p.id)).max();
        let len = slots.map_or(0, |s| s + 1);
        if len > self.counts.len() {
            self.counts.resize(len, 0);
            self.generations.resize(len, 0);
        }
        for policy in &rt.policies {
            if let Some(s) = slot(policy.id) {
                if self.generations[s] != policy.generation {
                    (self.counts[s], self.generations[s]) = (0, policy.generation);
                }
            }
        }
    }

    /// Counts one decision of policy `id` (an id the last
    /// [`sync`](Self::sync)ed runtime does not know is not counted).
    #[inline]
    pub fn record(&mut self, id: PolicyId) {
        if let Some(count) = slot(id).and_then(|s| self.counts.get_mut(s)) {
            *count += 1;
        }
    }

    /// This worker's count for `policy`: 0 when its slot still counts for
    /// a policy that held the id before (the worker has not seen the
    /// reload yet).
    pub fn hits(&self, policy: &InstalledPolicy) -> u64 {
        match slot(policy.id) {
            Some(s) if self.generations.get(s) == Some(&policy.generation) => {
                self.counts.get(s).copied().unwrap_or(0)
            }
            _ => 0,
        }
    }
}

/// The counter slot of policy `id` (ids start at 1).
fn slot(id: PolicyId) -> Option<usize> {
    usize::try_from(id.0.checked_sub(1)?).ok()
}

/// Where a worker publishes its [`WorkerStats`].
#[derive(Debug, Default)]
pub struct StatsSlot {
    stats: parking_lot::Mutex<WorkerStats>,
}

impl StatsSlot {
    /// Replaces the published copy.
    pub fn publish(&self, stats: &WorkerStats) {
        self.stats.lock().clone_from(stats);
    }

    /// The last published copy.
    pub fn read(&self) -> WorkerStats {
        self.stats.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_in_order() {
        let mut names: Vec<&str> = DaemonCounter::ALL.iter().map(|c| c.name()).collect();
        for (i, c) in DaemonCounter::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DaemonCounter::COUNT);
    }

    #[test]
    fn add_merge_publish() {
        let mut a = WorkerStats::default();
        a.daemon.bump(DaemonCounter::TunRxPackets);
        a.daemon.add(DaemonCounter::UdpRxPackets, 4);
        let mut b = a.clone();
        b.merge(&a);
        assert_eq!(b.packets(), 10);
        let slot = StatsSlot::default();
        slot.publish(&b);
        assert_eq!(slot.read().daemon.get(DaemonCounter::UdpRxPackets), 8);
    }
}
