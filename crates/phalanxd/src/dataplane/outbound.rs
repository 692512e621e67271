//! Outbound batch processing, device-free: cleartext IP packets from the
//! TUN side in, ESP packets for the sockets out.
//!
//! Per packet (DESIGN.md "Packet path"): selectors read from the packet
//! (`flow_of`) → SPD through the worker's flow cache (RFC 4301 §5.1; the
//! deciding policy's hit counter is bumped, cache hit or not) →
//! PROTECT: outbound SA → `prepare_outbound` (sequence number, headers,
//! IV) into a crypto frame; BYPASS / DISCARD / no policy: counted and
//! dropped. Frames go to the engine as they fill; each completed op is
//! finished (`finish_outbound`), its outer header read for the
//! destination and TOS and stripped, and the rest handed to [`Egress`]
//! with that TOS in `meta.tos` (RFC 6040 §4.1: phalanx-esp copied the
//! inner ECN field and DSCP out; the socket must not send 0 instead).
//!
//! IVs (RFC 4303 §3.3.2): the combined modes use the sequence number
//! (unique per key, RFC 4106 §3.1, RFC 7634 §2), or in cluster mode the
//! node's partition of it ([`OutboundPath::set_node_partitioned_ivs`]:
//! node id in the top 16 bits, so no two nodes can build the same nonce);
//! AES-CBC gets bytes from aws-lc's CSPRNG (unpredictable, RFC 3602 §2.1).
//! If the CSPRNG ever fails the packet is dropped as `iv_refused`, never
//! sent with a stale IV.
//!
//! Cluster mode ([`OutboundPath::process_assigned`]): the SPD lookup and
//! the choice of sequence number happened before (the dispatcher gave
//! the packet to this node with a number of its lease class); each packet
//! comes with its SA and number ([`Assigned`]), and the SA's counter is
//! moved to that number just before the packet takes it.

use std::cell::Cell;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use phalanx_crypto::{Frame, Op, PacketBuf};
use phalanx_esp::{
    finish_outbound, max_inner_len, prepare_outbound, too_big_action, DropReason, FragmentPolicy,
    IcmpRateLimit, IvSource, OutboundContext, TooBigAction, Verdict, OUTBOUND_HEADROOM,
    OUTBOUND_TAILROOM,
};
use phalanx_io::{PacketBatch, PacketMeta};
use phalanx_sa::{FlowCache, FlowKey, OutboundSa, PolicyAction};
use phalanx_wire::{icmp, EncrId, Ipv4Fragments};

use super::counters::{DaemonCounter, WorkerStats};
use super::engine::CryptoEngine;
use super::packet::{outer_route, BufPool, Input};
use crate::ike::{ToIke, WorkerLink};
use crate::install::Runtime;
use crate::limits::{FLOW_CACHE_ENTRIES, HEADROOM};

/// Where protected packets go.
pub trait Egress {
    /// An ESP packet to send in a UDP datagram (RFC 3948): `payload` is
    /// the UDP payload, `meta.remote` the peer address and port,
    /// `meta.local` our source address when known, `meta.tos` the outer
    /// TOS / Traffic Class to send with.
    fn udp(&mut self, payload: &[u8], meta: PacketMeta);
    /// A plain ESP packet for the raw socket: `esp` starts at the SPI;
    /// `meta.remote` is the peer (port 0), `meta.tos` the outer TOS /
    /// Traffic Class.
    fn raw(&mut self, esp: &[u8], meta: PacketMeta);

    /// An AH packet (RFC 4302) for the raw AH socket: over IPv4 the whole
    /// IP packet (its header is in the ICV: sent as it is), over IPv6 from
    /// the AH header on; `meta` as for [`raw`](Self::raw).
    fn ah(&mut self, packet: &[u8], meta: PacketMeta);

    /// As [`udp`](Self::udp), with the payload at `bounds` of `buf`, an
    /// allocation the egress may keep: one that queues packets in a
    /// [`PacketBatch`] swaps it for a buffer of the same length
    /// ([`PacketBatch::push_buffer`]) instead of copying. `buf` must keep
    /// its length. The default copies through [`udp`](Self::udp).
    fn udp_owned(&mut self, buf: &mut Vec<u8>, bounds: Range<usize>, meta: PacketMeta) {
        if let Some(payload) = buf.get(bounds) {
            self.udp(payload, meta);
        }
    }

    /// As [`raw`](Self::raw), with the ESP packet at `bounds` of `buf`, as
    /// for [`udp_owned`](Self::udp_owned). The default copies through
    /// [`raw`](Self::raw).
    fn raw_owned(&mut self, buf: &mut Vec<u8>, bounds: Range<usize>, meta: PacketMeta) {
        if let Some(esp) = buf.get(bounds) {
            self.raw(esp, meta);
        }
    }

    /// As [`udp`](Self::udp), for a datagram larger than the path MTU that
    /// may be fragmented on its way (the kernel fragments it). Sent after
    /// everything queued before it. The default sends it as any other.
    fn udp_fragmentable(&mut self, payload: &[u8], meta: PacketMeta) {
        self.udp(payload, meta);
    }

    /// As [`udp_fragmentable`](Self::udp_fragmentable), for the raw socket.
    fn raw_fragmentable(&mut self, esp: &[u8], meta: PacketMeta) {
        self.raw(esp, meta);
    }

    /// An ICMP error for the inner sender `to`: `message` is the ICMP
    /// message from its type octet on (checksum filled for ICMPv4; the
    /// kernel fills ICMPv6's), sent the way a router originates one (the
    /// kernel adds the IP header and picks the source). Returns whether it
    /// went out; the default has nowhere to send it.
    fn icmp(&mut self, message: &[u8], to: IpAddr) -> bool {
        let _ = (message, to);
        false
    }
}

/// A packet the cluster dispatcher gave to this node: the SA that
/// protects it and the sequence number it must carry.
#[derive(Clone, Debug)]
pub struct Assigned {
    /// The outbound SA the policy named.
    pub sa: Arc<OutboundSa>,
    /// The ESP sequence number this node was assigned for it.
    pub seq: u64,
}

/// Where a batch's packets get their SA and sequence number.
#[derive(Clone, Copy)]
enum Plan<'a> {
    /// Host mode: the SPD through the flow cache, and the SA's counter.
    Policy(&'a Runtime),
    /// Cluster mode: given per packet, in batch order.
    Assigned(&'a [Assigned]),
}

/// Where a batch's ops go: the frame being filled, the engine, the
/// egress and the counters (borrowed together by the helpers).
struct Out<'a, E: Egress> {
    frame: &'a mut Frame,
    engine: &'a mut CryptoEngine,
    egress: &'a mut E,
    stats: &'a mut WorkerStats,
}

/// An egress whose every packet may be fragmented on the way.
struct Fragmentable<'a, E: Egress>(&'a mut E);

impl<E: Egress> Egress for Fragmentable<'_, E> {
    fn udp(&mut self, payload: &[u8], meta: PacketMeta) {
        self.0.udp_fragmentable(payload, meta);
    }

    fn raw(&mut self, esp: &[u8], meta: PacketMeta) {
        self.0.raw_fragmentable(esp, meta);
    }

    /// The kernel fragments no packet of a raw AH socket (IPv4 sends its
    /// header as it is): one too big is refused and counted.
    fn ah(&mut self, packet: &[u8], meta: PacketMeta) {
        self.0.ah(packet, meta);
    }
}

/// Room for one ICMP error message: the IPv6 one is the largest
/// (RFC 4443 §3.2: the packet stays within 1280 octets).
const ICMP_MESSAGE_MAX: usize = 1280;

/// A worker's outbound state, reused across batches.
#[derive(Debug)]
pub struct OutboundPath {
    cache: FlowCache,
    bufs: BufPool,
    spare: Vec<Frame>,
    local: IpAddr,
    link: Option<WorkerLink>,
    /// Cluster mode: this node's id, the high 16 bits of every IV of the
    /// combined modes (`IvSource::NodePartitioned`).
    iv_node: Option<u16>,
    /// What an IPv4 packet without DF that does not fit the path becomes.
    fragment: FragmentPolicy,
    /// Bounds the ICMP errors this worker sends.
    icmp_limit: IcmpRateLimit,
    /// Where an inner fragment is written before it is copied into a
    /// packet buffer (the largest IPv4 packet).
    fragment_scratch: Vec<u8>,
}

impl OutboundPath {
    /// State for a worker whose protected address is `local`; packet
    /// buffers of `buf_len` bytes (inner MTU plus head- and tailroom).
    pub fn new(local: IpAddr, buf_len: usize, batch: usize) -> OutboundPath {
        OutboundPath {
            cache: FlowCache::new(FLOW_CACHE_ENTRIES),
            bufs: BufPool::new(batch, buf_len),
            spare: vec![Frame::new()],
            local,
            link: None,
            iv_node: None,
            fragment: FragmentPolicy::default(),
            icmp_limit: IcmpRateLimit::default(),
            fragment_scratch: vec![0; usize::from(u16::MAX)],
        }
    }

    /// What an IPv4 packet without DF that does not fit the path MTU
    /// becomes (`[protected] fragment`).
    pub fn set_fragment_policy(&mut self, policy: FragmentPolicy) {
        self.fragment = policy;
    }

    /// Cluster mode: the combined modes' IVs carry `node` in their top 16
    /// bits and the low 48 bits of the sequence number below
    /// (`IvSource::NodePartitioned`), so two nodes never build the same
    /// nonce even if they were to send the same number (RFC 4106 §3.1
    /// asks only for uniqueness per key). Numbers from 2^48 on are then
    /// refused as `iv_refused`. AES-CBC keeps random IVs.
    pub fn set_node_partitioned_ivs(&mut self, node: u16) {
        self.iv_node = Some(node);
    }

    /// Sends acquires (trap policies) and soft lifetime events to the IKE
    /// thread over `link`.
    pub fn set_link(&mut self, link: WorkerLink) {
        self.link = Some(link);
    }

    /// Protects every packet of `input` with the SAs and policies of `rt`
    /// and hands the results to `egress`; counts everything in `stats`.
    /// Returns when every packet is done (the engine is drained). Each
    /// packet is copied into one of the path's buffers; see
    /// [`process_batch`](Self::process_batch) for the path without copies.
    pub fn process<E: Egress>(
        &mut self,
        rt: &Runtime,
        input: &PacketBatch,
        engine: &mut CryptoEngine,
        egress: &mut E,
        stats: &mut WorkerStats,
        now: Instant,
    ) {
        let plan = Plan::Policy(rt);
        self.run(plan, Input::Shared(input), engine, egress, stats, now);
    }

    /// As [`process`](Self::process), but each packet's buffer is swapped
    /// out of `input` into the ESP layer instead of copied (the batch gets
    /// one of the path's buffers of the same length back). Packets with
    /// less than [`OUTBOUND_HEADROOM`] in front or [`OUTBOUND_TAILROOM`]
    /// behind them in their buffer are copied as before. Afterwards the
    /// batch's packet bytes are unspecified: clear it before reuse.
    pub fn process_batch<E: Egress>(
        &mut self,
        rt: &Runtime,
        input: &mut PacketBatch,
        engine: &mut CryptoEngine,
        egress: &mut E,
        stats: &mut WorkerStats,
        now: Instant,
    ) {
        let plan = Plan::Policy(rt);
        self.run(plan, Input::Owned(input), engine, egress, stats, now);
    }

    /// Cluster mode: protects packet `i` of `input` with `assigned[i]`'s
    /// SA as sequence number `assigned[i].seq` (buffers swapped as in
    /// [`process_batch`](Self::process_batch); the SPD was consulted by
    /// the caller, whose policy hits count). The SA's counter is advanced
    /// to the number first; if it is already past it (the number was
    /// sent, which the lease classes forbid), the packet is dropped as
    /// `cluster_sequence_behind`. Packets past the end of `assigned` are
    /// not sent.
    pub fn process_assigned<E: Egress>(
        &mut self,
        input: &mut PacketBatch,
        assigned: &[Assigned],
        engine: &mut CryptoEngine,
        egress: &mut E,
        stats: &mut WorkerStats,
        now: Instant,
    ) {
        let plan = Plan::Assigned(assigned);
        self.run(plan, Input::Owned(input), engine, egress, stats, now);
    }

    /// Host mode: looks up the SA that protects `packet` into `last`
    /// (kept while consecutive packets name the same one); false (counted,
    /// a trap policy's acquire sent) when the packet is not protected.
    fn policy_sa(
        &mut self,
        rt: &Runtime,
        packet: &[u8],
        last: &mut Option<(u32, Arc<OutboundSa>)>,
        stats: &mut WorkerStats,
        now: Instant,
    ) -> bool {
        let Some(id) = self.policy(rt, packet, stats) else {
            return false;
        };
        if last.as_ref().map(|(l, _)| *l) != Some(id) {
            *last = rt.outbound.lookup(id).map(|sa| (id, sa));
        }
        if last.is_none() {
            stats.daemon.bump(DaemonCounter::NoOutboundSa);
            self.trap(rt, id, packet, now, stats);
        }
        last.is_some()
    }

    /// Cluster mode: the SA of an assigned packet, its counter moved to
    /// the assigned number; `None` (counted) when the counter is already
    /// past it.
    fn assigned_sa<'a>(
        assigned: &'a Assigned,
        stats: &mut WorkerStats,
    ) -> Option<&'a Arc<OutboundSa>> {
        let Assigned { sa, seq } = assigned;
        // The counter only moves forward; landing exactly on the number
        // means nothing at or above it was sent yet.
        sa.seq.advance_to(*seq);
        if sa.seq.peek_next() == Some(*seq) {
            return Some(sa);
        }
        stats.daemon.bump(DaemonCounter::ClusterSequenceBehind);
        None
    }

    /// The body of all entry points.
    fn run<E: Egress>(
        &mut self,
        plan: Plan<'_>,
        mut input: Input<'_>,
        engine: &mut CryptoEngine,
        egress: &mut E,
        stats: &mut WorkerStats,
        now: Instant,
    ) {
        let rng_failed = Cell::new(false);
        let mut fill = |iv: &mut [u8]| {
            if aws_lc_rs::rand::fill(iv).is_err() {
                rng_failed.set(true);
            }
        };
        let iv = match self.iv_node {
            Some(node) => IvSource::NodePartitioned(node),
            None => IvSource::Sequence,
        };
        let mut seq_ctx = OutboundContext::new(now, iv);
        let mut rand_ctx = OutboundContext::new(now, IvSource::Random(&mut fill));
        let mut frame = self.spare.pop().unwrap_or_default();
        let mut last: Option<(u32, Arc<OutboundSa>)> = None;
        if let Plan::Policy(rt) = plan {
            stats.policy_hits.sync(rt);
        }
        for i in 0..input.batch().len() {
            let sa = match plan {
                Plan::Policy(rt) => {
                    let found = self.policy_sa(rt, input.batch().packet(i), &mut last, stats, now);
                    match &last {
                        Some((_, sa)) if found => sa,
                        _ => continue,
                    }
                }
                Plan::Assigned(assigned) => {
                    match assigned.get(i).and_then(|a| Self::assigned_sa(a, stats)) {
                        Some(sa) => sa,
                        None => continue,
                    }
                }
            };
            let Some(buf) = self.packet_buf(&mut input, i, stats) else {
                continue;
            };
            let ctx = if sa.transform.suite().encr == EncrId::AES_CBC {
                &mut rand_ctx
            } else {
                &mut seq_ctx
            };
            let op = match prepare_outbound(sa, buf, ctx) {
                Ok(op) if !rng_failed.replace(false) => op,
                Ok(op) => {
                    stats
                        .outbound
                        .record(Verdict::Drop(DropReason::IvRefused), op.buf.len());
                    self.bufs.put(op.buf);
                    continue;
                }
                Err((buf, DropReason::PathMtuExceeded)) => {
                    let sa = Arc::clone(sa);
                    let mut out = Out {
                        frame: &mut frame,
                        engine,
                        egress,
                        stats,
                    };
                    // Cluster mode: the dispatcher assigned this packet
                    // one sequence number; inner fragments would take
                    // numbers of other nodes' leases. One ESP packet,
                    // fragmented outside, keeps to the one number.
                    let policy = match plan {
                        Plan::Policy(_) => self.fragment,
                        Plan::Assigned(_) => FragmentPolicy::Outer,
                    };
                    self.too_big(&sa, buf, policy, ctx, &mut out, now);
                    continue;
                }
                Err((buf, reason)) => {
                    stats.outbound.record(Verdict::Drop(reason), buf.len());
                    self.bufs.put(buf);
                    continue;
                }
            };
            self.push(
                op,
                &mut Out {
                    frame: &mut frame,
                    engine,
                    egress,
                    stats,
                },
            );
        }
        self.finish_frames(frame, engine, egress, stats);
        soft_events(&mut seq_ctx.soft_expired, stats, self.link.as_ref());
        soft_events(&mut rand_ctx.soft_expired, stats, self.link.as_ref());
    }

    /// Submits `frame` to the engine; finished packets go to `egress`.
    fn submit<E: Egress>(
        &mut self,
        frame: Frame,
        engine: &mut CryptoEngine,
        egress: &mut E,
        stats: &mut WorkerStats,
    ) {
        let local = self.local;
        engine.submit(frame, &mut |done| {
            complete(&mut self.bufs, &mut self.spare, done, egress, stats, local)
        });
    }

    /// Submits `frame` (unless empty) and waits for every op in flight,
    /// handing the finished packets to `egress`.
    fn finish_frames<E: Egress>(
        &mut self,
        frame: Frame,
        engine: &mut CryptoEngine,
        egress: &mut E,
        stats: &mut WorkerStats,
    ) {
        if frame.is_empty() {
            self.spare.push(frame);
        } else {
            self.submit(frame, engine, egress, stats);
        }
        let local = self.local;
        engine.drain(&mut |done| {
            complete(&mut self.bufs, &mut self.spare, done, egress, stats, local)
        });
    }

    /// Adds `op` to the frame, submitting the frame first when it is full.
    fn push<E: Egress>(&mut self, op: Op, out: &mut Out<'_, E>) {
        if let Err(op) = out.frame.push(op) {
            let next = self.spare.pop().unwrap_or_default();
            let full = std::mem::replace(out.frame, next);
            self.submit(full, out.engine, out.egress, out.stats);
            // The frame was just emptied; a push cannot fail.
            if let Err(op) = out.frame.push(op) {
                self.bufs.put(op.buf);
            }
        }
    }

    /// `buf` (the inner packet) did not fit `sa`'s path MTU: tell its
    /// sender, fragment it, or send it fragmentable, as
    /// [`too_big_action`] decides (RFC 4301 §8.2.1, RFC 4459). Whatever is
    /// not sent is counted as `path_mtu_exceeded`, on the SA too.
    fn too_big<E: Egress>(
        &mut self,
        sa: &Arc<OutboundSa>,
        buf: PacketBuf,
        policy: FragmentPolicy,
        ctx: &mut OutboundContext<'_>,
        out: &mut Out<'_, E>,
        now: Instant,
    ) {
        let mtu = sa.path_mtu.current(now).unwrap_or(u32::MAX) as usize;
        let max_inner = max_inner_len(sa, mtu);
        let action = too_big_action(buf.as_slice(), max_inner, policy);
        match action {
            TooBigAction::Notify { mtu } => self.notify(buf.as_slice(), mtu, out, now),
            TooBigAction::FragmentInner { mtu } => {
                if self.fragment_inner(sa, buf.as_slice(), mtu, ctx, out) {
                    self.bufs.put(buf);
                    return;
                }
            }
            TooBigAction::FragmentOuter => {
                self.send_fragmentable(sa, buf, ctx, out);
                return;
            }
            TooBigAction::Drop => {}
        }
        DropReason::PathMtuExceeded.record_on(&sa.drops);
        let verdict = Verdict::Drop(DropReason::PathMtuExceeded);
        out.stats.outbound.record(verdict, buf.len());
        self.bufs.put(buf);
    }

    /// ICMP Fragmentation Needed / Packet Too Big to the sender of
    /// `inner`, announcing `mtu`, within the rate limit.
    fn notify<E: Egress>(&mut self, inner: &[u8], mtu: u32, out: &mut Out<'_, E>, now: Instant) {
        if !self.icmp_limit.allow(now) {
            out.stats.daemon.bump(DaemonCounter::IcmpTooBigRateLimited);
            return;
        }
        let mut message = [0u8; ICMP_MESSAGE_MAX];
        let built = match phalanx_wire::flow_of(inner).map(|f| f.src) {
            Ok(to @ IpAddr::V4(_)) => {
                let mtu = u16::try_from(mtu).unwrap_or(u16::MAX);
                icmp::frag_needed_v4(&mut message, mtu, inner).map(|n| (to, n))
            }
            Ok(to @ IpAddr::V6(_)) => {
                // The raw ICMPv6 socket fills the checksum (RFC 3542 §3.1).
                let any = Ipv6Addr::UNSPECIFIED;
                icmp::packet_too_big_v6(&mut message, mtu, inner, any, any).map(|n| (to, n))
            }
            Err(_) => None,
        };
        let sent = built.is_some_and(|(to, n)| out.egress.icmp(&message[..n], to));
        let counter = if sent {
            DaemonCounter::IcmpTooBigSent
        } else {
            DaemonCounter::IcmpSendFailed
        };
        out.stats.daemon.bump(counter);
    }

    /// Splits the IPv4 packet `inner` into fragments of at most `mtu`
    /// octets and protects each (RFC 4459 §3). False when it cannot be
    /// fragmented (the caller drops it).
    fn fragment_inner<E: Egress>(
        &mut self,
        sa: &OutboundSa,
        inner: &[u8],
        mtu: usize,
        ctx: &mut OutboundContext<'_>,
        out: &mut Out<'_, E>,
    ) -> bool {
        let Ok(mut fragments) = Ipv4Fragments::new(inner, mtu) else {
            return false;
        };
        out.stats.daemon.bump(DaemonCounter::InnerFragmented);
        let mut piece = std::mem::take(&mut self.fragment_scratch);
        while let Some(n) = fragments.write_next(&mut piece) {
            let mut buf = self.bufs.take(HEADROOM);
            if !buf.extend_from_slice(&piece[..n]) {
                out.stats
                    .outbound
                    .record(Verdict::Drop(DropReason::NoRoom), n);
                self.bufs.put(buf);
                continue;
            }
            match prepare_outbound(sa, buf, ctx) {
                Ok(op) => self.push(op, out),
                Err((buf, reason)) => {
                    // A fragment that fits cannot be too big; any other
                    // refusal (lifetime, sequence space) is the SA's.
                    if reason == DropReason::PathMtuExceeded {
                        reason.record_on(&sa.drops);
                    }
                    out.stats.outbound.record(Verdict::Drop(reason), buf.len());
                    self.bufs.put(buf);
                }
            }
        }
        self.fragment_scratch = piece;
        true
    }

    /// Protects `buf` whole and sends the ESP packet with fragmentation
    /// allowed, after everything queued before it (the frame in progress
    /// is run first, so the SA's packets leave in sequence order).
    fn send_fragmentable<E: Egress>(
        &mut self,
        sa: &OutboundSa,
        buf: PacketBuf,
        ctx: &mut OutboundContext<'_>,
        out: &mut Out<'_, E>,
    ) {
        // Everything before this packet goes out first, the normal way.
        let next = self.spare.pop().unwrap_or_default();
        let before = std::mem::replace(out.frame, next);
        self.finish_frames(before, out.engine, out.egress, out.stats);
        ctx.check_path_mtu = false;
        let prepared = prepare_outbound(sa, buf, ctx);
        ctx.check_path_mtu = true;
        let op = match prepared {
            Ok(op) => op,
            Err((buf, reason)) => {
                out.stats.outbound.record(Verdict::Drop(reason), buf.len());
                self.bufs.put(buf);
                return;
            }
        };
        let mut single = self.spare.pop().unwrap_or_default();
        if let Err(op) = single.push(op) {
            self.bufs.put(op.buf);
            self.spare.push(single);
            return;
        }
        out.stats.daemon.bump(DaemonCounter::OuterFragmented);
        let mut fragmentable = Fragmentable(&mut *out.egress);
        self.finish_frames(single, out.engine, &mut fragmentable, out.stats);
    }

    /// A packet found the protect policy of outbound id `id` without an
    /// SA: if the id is a trap child's slot, ask IKE for the SA (RFC 4301
    /// §5.1 "acquire"), at most once per child per interval.
    fn trap(&self, rt: &Runtime, id: u32, packet: &[u8], now: Instant, stats: &mut WorkerStats) {
        let (Some(link), Some(trap)) = (&self.link, rt.trap(id)) else {
            return;
        };
        if !trap.should_acquire(now) {
            return;
        }
        let trigger = phalanx_wire::flow_of(packet).ok().map(|f| (f.src, f.dst));
        let message = ToIke::Acquire {
            child: trap.child.clone(),
            trigger,
        };
        let counter = if link.send(message) {
            DaemonCounter::TrapAcquires
        } else {
            DaemonCounter::IkeQueueFull
        };
        stats.daemon.bump(counter);
    }

    /// Packet `i` of `input` in a buffer for the ESP layer: swapped out
    /// of an owned batch when it has the room, else copied; `None`
    /// (counted) when it does not fit a buffer.
    fn packet_buf(
        &mut self,
        input: &mut Input<'_>,
        i: usize,
        stats: &mut WorkerStats,
    ) -> Option<PacketBuf> {
        if let Input::Owned(batch) = input {
            let room = (OUTBOUND_HEADROOM, OUTBOUND_TAILROOM);
            if let Some(buf) = self.bufs.swap_out(batch, i, room) {
                return Some(buf);
            }
        }
        let packet = input.batch().packet(i);
        let mut buf = self.bufs.take(HEADROOM);
        if buf.extend_from_slice(packet) {
            return Some(buf);
        }
        stats
            .outbound
            .record(Verdict::Drop(DropReason::NoRoom), packet.len());
        self.bufs.put(buf);
        None
    }

    /// The SA id of the policy that protects `packet`, or `None` (counted)
    /// when it is not protected.
    fn policy(&mut self, rt: &Runtime, packet: &[u8], stats: &mut WorkerStats) -> Option<u32> {
        let Ok(flow) = phalanx_wire::flow_of(packet) else {
            stats.daemon.bump(DaemonCounter::TunMalformed);
            return None;
        };
        let Some(found) = self.cache.lookup_action(&rt.spd, &FlowKey::from(flow)) else {
            stats.daemon.bump(DaemonCounter::NoPolicy);
            return None;
        };
        stats.policy_hits.record(found.id);
        let counter = match found.action {
            PolicyAction::Protect(id) => return Some(id),
            PolicyAction::Bypass => DaemonCounter::PolicyBypass,
            PolicyAction::Discard => DaemonCounter::PolicyDiscard,
        };
        stats.daemon.bump(counter);
        None
    }
}

/// Finishes every op of a completed frame and hands the packets on.
fn complete<E: Egress>(
    bufs: &mut BufPool,
    spare: &mut Vec<Frame>,
    mut frame: Frame,
    egress: &mut E,
    stats: &mut WorkerStats,
    local: IpAddr,
) {
    for op in frame.drain() {
        let (buf, verdict) = finish_outbound(op);
        stats.outbound.record(verdict, buf.len());
        match verdict {
            Verdict::Forward => match emit(buf, egress, local) {
                Ok(buf) => bufs.put(buf),
                Err(buf) => {
                    stats.daemon.bump(DaemonCounter::OuterHeader);
                    bufs.put(buf);
                }
            },
            Verdict::Drop(_) => bufs.put(buf),
        }
    }
    spare.push(frame);
}

/// Strips the outer header of a finished packet and hands the rest, with
/// its allocation, to the socket that sends it. Returns an allocation of
/// the same size for the pool; `Err` (with the packet) when the header
/// cannot be read.
fn emit<E: Egress>(buf: PacketBuf, egress: &mut E, local: IpAddr) -> Result<PacketBuf, PacketBuf> {
    let Some(route) = outer_route(buf.as_slice()).filter(|r| r.payload_offset <= buf.len()) else {
        return Err(buf);
    };
    let (mut storage, start, end) = buf.into_parts();
    let payload = start + route.payload_offset..end;
    // Our tunnel address is the source; in transport mode the inner
    // source stays, and the kernel picks ours.
    let from = (route.src == local).then_some(route.src);
    let port = route.udp_dst_port.unwrap_or(0);
    let meta = PacketMeta {
        remote: SocketAddr::new(route.dst, port),
        local: from,
        stride: 0,
        tos: route.tos,
    };
    match route.udp_dst_port {
        Some(_) => egress.udp_owned(&mut storage, payload, meta),
        None if route.ah => {
            let packet = if route.dst.is_ipv4() {
                start..end
            } else {
                payload
            };
            if let Some(packet) = storage.get(packet) {
                egress.ah(packet, meta);
            }
        }
        None => egress.raw_owned(&mut storage, payload, meta),
    }
    Ok(PacketBuf::from_parts(storage, 0, 0))
}

/// Counts (and logs: once per SA in its life) the SAs that crossed a soft
/// lifetime limit in this batch, and tells IKE, which rekeys them.
pub(super) fn soft_events(spis: &mut Vec<u32>, stats: &mut WorkerStats, link: Option<&WorkerLink>) {
    for spi in spis.drain(..) {
        stats.daemon.bump(DaemonCounter::SoftExpiredOut);
        tracing::info!(
            spi = format_args!("{spi:#x}"),
            "outbound SA reached a soft lifetime limit"
        );
        let message = ToIke::SoftExpired {
            spi,
            outbound: true,
        };
        if link.is_some_and(|l| !l.send(message)) {
            stats.daemon.bump(DaemonCounter::IkeQueueFull);
        }
    }
}
