//! The cluster worker thread: one per node for now (a second one would
//! need the rings fanned out by stream so each stream's packets stay in
//! order on one dispatcher; not done yet).
//!
//! It owns both AF_PACKET rings (inside and outside, promiscuous), the
//! TUN device, and the UDP and raw ESP sockets bound to the outside
//! virtual address. The loop: `poll` on the two rings and a waker (at
//! most [`IDLE_TICK`] asleep); then, once per round, adopt the cluster
//! thread's latest [`SharedState`] and the installed SAs, announce the
//! virtual addresses if this node has just become the view's first
//! member, and read each ready ring: every frame goes through the
//! [`FrameClassifier`]; owned cleartext packets collect in a batch for
//! the [`OutboundPath`] (node-partitioned IVs, the assigned numbers),
//! owned ESP packets in batches for the [`InboundPath`], ARP replies in a
//! short list sent after the ring is read. Full batches are processed at
//! once, the rest when the ring is dry. Then the data path's reports
//! (checkpoints, lease requests) go to the cluster thread's bounded
//! queue, never waited on. Counters are published every
//! [`STATS_INTERVAL_MS`].

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwap;
use phalanx_cluster::dispatch::DispatchScheme;
use phalanx_cluster::{NodeId, SharedState};
use phalanx_io::packet::{FrameMeta, PacketSocket};
use phalanx_io::poll::{Interest, PollSet, Waker};
use phalanx_io::tun::TunDevice;
use phalanx_io::udp::UdpSocket;
use phalanx_io::{PacketBatch, PacketMeta};

use super::frames::{
    decrement_ttl, fill_transport_checksum, Decision, FrameClassifier, VirtualSide,
};
use super::kernel_filter::KernelFilter;
use super::neighbour::{announcement_frame, NeighbourFrame};
use super::Side;
use crate::cluster::ReportSender;
use crate::dataplane::counters::{DaemonCounter, DaemonCounters, StatsSlot, WorkerStats};
use crate::dataplane::engine::CryptoEngine;
use crate::dataplane::inbound::{InboundPath, Ingress, ReceivedMut, INBOUND_HEADROOM};
use crate::dataplane::io::{drain_errors, IcmpSockets, SharedRaw, SocketEgress, TunDelivery};

/// The cluster worker's ICMP sockets: none (see `flush_clear`).
use crate::dataplane::load::LoadWindow;
use crate::dataplane::outbound::{Assigned, OutboundPath};
use crate::dataplane::worker::packet_room;
use crate::ike::{ToIke, WorkerLink};
use crate::install::{Runtime, SaStore};
use crate::limits::{
    HEADROOM, ROUTE_MTU_REFRESH, SEND_BATCH, SOCKET_BATCH, STATS_INTERVAL_MS, TUN_BATCH,
    TUN_SEND_BATCH, TUN_SEND_ROOM,
};

/// Longest sleep in `poll`: the state (view changes, gratuitous ARP) and
/// the reports are looked at this often even without traffic.
pub const IDLE_TICK: Duration = Duration::from_millis(5);

/// The largest Ethernet payload a LAN frame carries (IEEE 802.3
/// `ETH_DATA_LEN`): cleartext buffers hold at least this.
const ETH_DATA_LEN: u16 = 1500;

/// How long a worker sleeps between looks at a fence that keeps its
/// outside ring waiting (a few per heartbeat interval).
const FENCE_WAIT_TICK: Duration = Duration::from_micros(500);

/// ARP replies and neighbour advertisements held per ring read; more
/// are dropped (counted).
const MAX_REPLIES: usize = 32;

/// What the worker is told at start.
#[derive(Clone, Copy, Debug)]
pub struct ClusterWorkerSettings {
    /// This node.
    pub local: NodeId,
    /// The cluster's dispatch scheme.
    pub scheme: DispatchScheme,
    /// The clear side's virtual address.
    pub inside: VirtualSide,
    /// The protected side's virtual address (the tunnel endpoint).
    pub outside: VirtualSide,
    /// Our ESP-in-UDP port.
    pub udp_port: u16,
    /// The TUN MTU (with the LAN's 1500, sizes the buffers).
    pub mtu: u16,
    /// Crypto threads (0: inline).
    pub crypto_threads: usize,
    /// What an IPv4 packet without DF too big for the path becomes.
    pub fragment: phalanx_esp::FragmentPolicy,
}

/// The devices the worker owns.
#[derive(Debug)]
pub struct ClusterDevices {
    /// The ring on the inside interface.
    pub inside: PacketSocket,
    /// The ring on the outside interface.
    pub outside: PacketSocket,
    /// The TUN device (one queue): decrypted packets to the kernel.
    pub tun: TunDevice,
    /// The UDP socket bound to the outside virtual address (sends only).
    pub udp: UdpSocket,
    /// The raw ESP socket bound to it, when plain ESP is on (sends only).
    pub raw: Option<SharedRaw>,
    /// The ESP pre-filter on the outside ring.
    pub kernel_filter: KernelFilterState,
    /// Raw ICMP sockets for the path-MTU errors to inner senders: they
    /// leave from this node's own address on the inside (the kernel
    /// routes them), not from the virtual one, which no interface holds.
    pub icmp: IcmpSockets,
}

/// Whether the outside ring has the ESP pre-filter.
#[derive(Debug)]
pub enum KernelFilterState {
    /// Not asked for (`[cluster] kernel_filter = false`).
    Off,
    /// Loaded and attached.
    On(Box<KernelFilter>),
    /// Asked for, but it could not be loaded or attached (logged;
    /// counted as `cluster_kernel_filter_unavailable`).
    Failed,
}

/// What the worker shares with the cluster thread.
#[derive(Clone, Debug)]
pub struct ClusterLink {
    /// The latest published state, loaded once per round.
    pub shared: Arc<ArcSwap<SharedState>>,
    /// Reports to the cluster thread (bounded; full: counted and dropped).
    pub reports: ReportSender,
    /// The IKE thread's queue and its port, when this node runs IKE.
    pub ike: Option<(WorkerLink, u16)>,
}

/// The running worker.
#[derive(Debug)]
pub struct ClusterWorkerHandle {
    thread: Option<JoinHandle<()>>,
    waker: Arc<Waker>,
    /// Its published counters.
    pub stats: Arc<StatsSlot>,
}

impl ClusterWorkerHandle {
    /// Interrupts its `poll` (it then checks the stop flag).
    pub fn wake(&self) {
        // A failed eventfd write leaves the worker to notice the stop flag
        // at its next poll timeout (IDLE_TICK).
        let _ = self.waker.wake();
    }

    /// Waits for the thread to end.
    pub fn join(mut self) {
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the cluster data-plane worker panicked");
            }
        }
    }
}

/// Starts the cluster worker on its own thread.
pub fn spawn(
    settings: ClusterWorkerSettings,
    devices: ClusterDevices,
    store: Arc<SaStore>,
    link: ClusterLink,
    stop: Arc<AtomicBool>,
) -> io::Result<ClusterWorkerHandle> {
    let waker = Arc::new(Waker::new()?);
    let stats = Arc::new(StatsSlot::default());
    let worker = ClusterWorker::new(settings, devices, store, link, Arc::clone(&stats));
    let wake = Arc::clone(&waker);
    let thread = thread::Builder::new()
        .name("phalanx-cluster-worker".to_owned())
        .spawn(move || worker.run(&wake, &stop))?;
    Ok(ClusterWorkerHandle {
        thread: Some(thread),
        waker,
        stats,
    })
}

/// The worker: the two rings apart from everything a frame needs, so a
/// ring can be read while its frames are handled.
struct ClusterWorker {
    inside: PacketSocket,
    outside: PacketSocket,
    plane: Plane,
    /// A wait for an uncertain fence: since when, whether everything is
    /// frozen (this worker stalled too), whether the wait ran out.
    fence_wait: Option<FenceWait>,
    /// When the last round began.
    last_round: Instant,
}

/// A worker's wait for an uncertain fence (see `ClusterWorker::round`).
#[derive(Clone, Copy, Debug)]
struct FenceWait {
    since: Instant,
    /// The worker had stalled too: it reads nothing and adopts nothing.
    frozen: bool,
    ran_out: bool,
}

/// Everything but the rings.
struct Plane {
    classifier: FrameClassifier,
    store: Arc<SaStore>,
    link: ClusterLink,
    slot: Arc<StatsSlot>,
    engine: CryptoEngine,
    outbound: OutboundPath,
    inbound: InboundPath,
    tun: TunDevice,
    tun_tx: PacketBatch,
    udp: UdpSocket,
    udp_tx: PacketBatch,
    raw: Option<SharedRaw>,
    raw_tx: PacketBatch,
    icmp: IcmpSockets,
    /// Owned cleartext packets and their SA and number, in step.
    clear: PacketBatch,
    assigned: Vec<Assigned>,
    /// Owned ESP-in-UDP payloads and plain ESP packets.
    esp_udp: PacketBatch,
    esp_raw: PacketBatch,
    replies: Vec<NeighbourFrame>,
    stats: WorkerStats,
    /// The kernel filter was asked for and is not there.
    kernel_filter_failed: bool,
    /// While a frozen worker works off its outside ring: from the first
    /// frame that arrived at this time on (when the worker ran again), the
    /// state to adopt first (see `ClusterWorker::round`).
    adopt_at: Option<(Instant, Arc<SharedState>)>,
    /// That adoption made this node the one that answers ARP.
    became_first: bool,
    /// When the SAs' path MTUs were last asked of the kernel (`None`:
    /// not yet).
    route_mtu_at: Option<Instant>,
}

impl ClusterWorker {
    fn new(
        settings: ClusterWorkerSettings,
        devices: ClusterDevices,
        store: Arc<SaStore>,
        link: ClusterLink,
        slot: Arc<StatsSlot>,
    ) -> ClusterWorker {
        let room = packet_room(settings.mtu.max(ETH_DATA_LEN));
        let sides = (settings.inside, settings.outside);
        let mut classifier =
            FrameClassifier::new(settings.local, settings.scheme, sides, settings.udp_port);
        let local = classifier.outside_address();
        let clear = PacketBatch::new(TUN_BATCH, room, HEADROOM);
        let esp_udp = PacketBatch::new(SOCKET_BATCH, room, INBOUND_HEADROOM);
        let mut outbound = OutboundPath::new(local, clear.buffer_len(), TUN_BATCH);
        // Node ids are 1..=65535 (validated with the configuration).
        outbound.set_node_partitioned_ivs(u16::try_from(settings.local.0).unwrap_or(u16::MAX));
        outbound.set_fragment_policy(settings.fragment);
        if let Some((_, port)) = &link.ike {
            classifier = classifier.with_ike(*port);
        }
        let kernel_filter_failed = matches!(devices.kernel_filter, KernelFilterState::Failed);
        if let KernelFilterState::On(filter) = devices.kernel_filter {
            classifier = classifier.with_kernel_filter(filter);
        }
        let plane = Plane {
            classifier,
            store,
            link,
            slot,
            engine: CryptoEngine::new(settings.crypto_threads),
            outbound,
            inbound: InboundPath::new(local, settings.udp_port, esp_udp.buffer_len(), SOCKET_BATCH),
            tun: devices.tun,
            tun_tx: PacketBatch::new(TUN_SEND_BATCH, TUN_SEND_ROOM, HEADROOM),
            udp: devices.udp,
            udp_tx: PacketBatch::new(SEND_BATCH, room, HEADROOM),
            raw: devices.raw,
            icmp: devices.icmp,
            raw_tx: PacketBatch::new(SEND_BATCH, room, HEADROOM),
            esp_raw: PacketBatch::new(SOCKET_BATCH, room, INBOUND_HEADROOM),
            clear,
            esp_udp,
            assigned: Vec::with_capacity(TUN_BATCH),
            replies: Vec::with_capacity(MAX_REPLIES),
            stats: WorkerStats::default(),
            kernel_filter_failed,
            adopt_at: None,
            became_first: false,
            route_mtu_at: None,
        };
        ClusterWorker {
            inside: devices.inside,
            outside: devices.outside,
            plane,
            fence_wait: None,
            last_round: Instant::now(),
        }
    }

    fn run(mut self, waker: &Waker, stop: &AtomicBool) {
        let fds = match self.poll_fds(waker) {
            Ok(fds) => fds,
            Err(e) => {
                tracing::error!(error = %e, "cluster worker cannot start");
                return;
            }
        };
        let mut set = PollSet::with_capacity(fds.len());
        for fd in &fds {
            set.add(fd.as_fd(), Interest::READ);
        }
        let interval = Duration::from_millis(STATS_INTERVAL_MS);
        let (start, mut busy, mut published) = (Instant::now(), Duration::ZERO, Instant::now());
        let mut window = LoadWindow::new();
        while !stop.load(Ordering::Relaxed) {
            if let Err(e) = set.wait(Some(IDLE_TICK)) {
                tracing::error!(error = %e, "poll failed; the cluster worker stops");
                break;
            }
            let began = Instant::now();
            if set.readiness(0).readable {
                let _ = waker.reset();
            }
            let ready = |token: usize| {
                let r = set.readiness(token);
                r.readable || r.error
            };
            let (inside, outside) = (ready(1), ready(2));
            if self.round(inside, outside) {
                // The outside ring waits (see `round`): do not spin on it.
                thread::sleep(FENCE_WAIT_TICK);
            }
            busy += began.elapsed();
            let now = Instant::now();
            if now.duration_since(published) >= interval {
                self.publish(now.duration_since(start), busy, &mut window);
                published = now;
            }
        }
        self.publish(start.elapsed(), busy, &mut window);
    }

    /// Publishes the counters, the rings' drops included.
    fn publish(&mut self, wall: Duration, busy: Duration, window: &mut LoadWindow) {
        let mut ring_drops = 0;
        for ring in [&mut self.inside, &mut self.outside] {
            if let Ok(stats) = ring.stats() {
                ring_drops += stats.ring_drops;
            }
        }
        self.plane.publish(wall, busy, window, ring_drops);
    }

    /// Waker, inside ring, outside ring: duplicates, so the poll set can
    /// borrow them while the rings are read.
    fn poll_fds(&self, waker: &Waker) -> io::Result<Vec<OwnedFd>> {
        Ok(vec![
            waker.as_fd().try_clone_to_owned()?,
            self.inside.as_fd().try_clone_to_owned()?,
            self.outside.as_fd().try_clone_to_owned()?,
        ])
    }

    /// One round: adopt the state, announce if needed, read the ready
    /// rings, hand the reports on.
    ///
    /// While the node's fence is uncertain (after a gap in its heartbeats
    /// it waits for its peers' reports of what they took over, or its
    /// cluster thread has sent none for `suspect_after`; see
    /// `phalanx_cluster::fence`) the outside ring is left unread: its
    /// frames wait there rather than be dropped for want of knowledge,
    /// at most `Fence::wait_limit` in a row. If this worker did not run
    /// for a while either (the whole process stalled), it also adopts
    /// nothing and reads neither ring, and when the wait ends decides
    /// what the rings hold first under the state adopted before (the view
    /// it arrived in; the fence itself is read live), then adopts the
    /// new state. Only the inbound ESP that arrived after the worker ran
    /// again is decided under the new state: the others moved on to the
    /// view changes of the stall long before (a view without this node,
    /// when they suspected it), and its cluster thread has read them by
    /// the end of the wait; under the old view this node would process
    /// packets the others process too. The outbound backlog stays under
    /// the old state: its counters enter the new lineage afterwards and
    /// heal from the others' checkpoints. Otherwise it adopts states and
    /// forwards the inside ring as usual meanwhile. Returns whether the
    /// outside ring waits.
    fn round(&mut self, inside: bool, outside: bool) -> bool {
        let rt = self.plane.store.load();
        let state = self.plane.link.shared.load_full();
        let now = Instant::now();
        let idle = now.saturating_duration_since(self.last_round);
        self.last_round = now;
        let mut backlog = None;
        let mut waiting = false;
        match state.fence().filter(|fence| fence.uncertain(now)) {
            Some(fence) => {
                let limit = fence.wait_limit();
                let wait = self.fence_wait.get_or_insert(FenceWait {
                    since: now,
                    frozen: idle >= limit / 4,
                    ran_out: false,
                });
                if !wait.ran_out {
                    if now.saturating_duration_since(wait.since) < limit {
                        if wait.frozen {
                            return true;
                        }
                        waiting = true;
                    } else {
                        wait.ran_out = true;
                        backlog = wait.frozen.then_some(wait.since);
                    }
                }
            }
            None => {
                backlog = self
                    .fence_wait
                    .take()
                    .filter(|wait| wait.frozen && !wait.ran_out)
                    .map(|wait| wait.since);
            }
        }
        let mut became_first = false;
        if let Some(resumed) = backlog {
            self.read(Side::Inside, &rt);
            self.plane.adopt_at = Some((resumed, Arc::clone(&state)));
            self.read(Side::Outside, &rt);
            self.plane.adopt_at = None;
            became_first = std::mem::take(&mut self.plane.became_first);
        }
        let plane = &mut self.plane;
        if plane.classifier.begin_batch(&state, &rt, &mut plane.stats) || became_first {
            self.announce();
        }
        if inside {
            self.read(Side::Inside, &rt);
        }
        if outside && !waiting {
            self.read(Side::Outside, &rt);
        }
        self.plane.send_reports();
        waiting
    }

    /// Announcements of every virtual address (RFC 5227 §3 gratuitous
    /// ARP, RFC 4861 §7.2.6 unsolicited advertisements): this node has
    /// just become the one that answers for them.
    fn announce(&mut self) {
        for side in [Side::Inside, Side::Outside] {
            let vside = *self.plane.classifier.side(side);
            let socket = match side {
                Side::Inside => &self.inside,
                Side::Outside => &self.outside,
            };
            for address in vside.addresses.iter() {
                let frame = announcement_frame(address, &vside);
                let counter = match (socket.send(frame.as_bytes()), address.is_ipv4()) {
                    (Ok(_), true) => DaemonCounter::ClusterGratuitousArps,
                    (Ok(_), false) => DaemonCounter::ClusterUnsolicitedNas,
                    (Err(_), _) => DaemonCounter::SendErrors,
                };
                self.plane.stats.daemon.bump(counter);
            }
        }
        tracing::info!(
            "this node answers ARP and neighbour solicitations for the virtual addresses now; \
             announced them"
        );
    }

    /// Reads what the ring of `side` holds, processes it, and sends the
    /// ARP replies it asked for.
    fn read(&mut self, side: Side, rt: &Runtime) {
        let (socket, plane) = match side {
            Side::Inside => (&mut self.inside, &mut self.plane),
            Side::Outside => (&mut self.outside, &mut self.plane),
        };
        let clock = ArrivalClock::now();
        socket.recv_batch(|frame, meta| plane.frame(side, frame, meta, clock, rt));
        plane.flush_clear();
        plane.flush_esp(Ingress::Udp, rt);
        plane.flush_esp(Ingress::Raw, rt);
        for reply in plane.replies.drain(..) {
            if socket.send(reply.as_bytes()).is_err() {
                plane.stats.daemon.bump(DaemonCounter::SendErrors);
            }
        }
    }
}

/// Turns the rings' receive timestamps (`CLOCK_REALTIME`) into the
/// monotonic `Instant`s the cluster logic runs on, from one reading of
/// both clocks per ring walk. A timestamp later than that reading (a
/// frame that arrived during the walk) is "now"; a step of the real-time
/// clock between a frame's arrival and the walk misplaces that frame's
/// arrival by the step (its dispatch by arrival time, see
/// `phalanx_cluster::fence`, is then judged at the wrong moment).
#[derive(Clone, Copy, Debug)]
struct ArrivalClock {
    monotonic: Instant,
    real: Duration,
}

impl ArrivalClock {
    fn now() -> ArrivalClock {
        ArrivalClock {
            monotonic: Instant::now(),
            real: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default(),
        }
    }

    /// The monotonic time of a frame received at real time `timestamp`.
    fn arrival(&self, timestamp: Duration) -> Instant {
        self.real
            .checked_sub(timestamp)
            .and_then(|ago| self.monotonic.checked_sub(ago))
            .unwrap_or(self.monotonic)
    }
}

impl Plane {
    /// One frame of `side`'s ring.
    fn frame(
        &mut self,
        side: Side,
        frame: &[u8],
        meta: FrameMeta,
        clock: ArrivalClock,
        rt: &Runtime,
    ) {
        let counter = match side {
            Side::Inside => DaemonCounter::ClusterInsideFrames,
            Side::Outside => DaemonCounter::ClusterOutsideFrames,
        };
        self.stats.daemon.bump(counter);
        let refused = if meta.truncated {
            Some(DaemonCounter::ClusterIgnoredMalformed)
        } else if meta.vlan.is_some() {
            Some(DaemonCounter::ClusterIgnoredVlan)
        } else if meta.gso {
            Some(DaemonCounter::ClusterGsoFrames)
        } else {
            None
        };
        if let Some(counter) = refused {
            self.stats.daemon.bump(counter);
            return;
        }
        let arrival = clock.arrival(meta.timestamp);
        if self.adopt_at.as_ref().is_some_and(|(at, _)| arrival >= *at) {
            if let Some((_, state)) = self.adopt_at.take() {
                self.became_first |= self.classifier.begin_batch(&state, rt, &mut self.stats);
            }
        }
        match self
            .classifier
            .classify(side, frame, arrival, rt, &mut self.stats)
        {
            Decision::Reply(reply) if self.replies.len() < MAX_REPLIES => self.replies.push(reply),
            Decision::Reply(_) => self.stats.daemon.bump(DaemonCounter::ClusterOversize),
            Decision::Protect { packet, sa, seq } => {
                self.queue_clear(packet, meta.checksum_pending, Assigned { sa, seq })
            }
            Decision::Open {
                payload,
                meta,
                ingress,
            } => self.queue_esp(payload, meta, ingress, rt),
            Decision::Ike {
                local,
                remote,
                bytes,
            } => self.forward_ike(local, remote, bytes),
            Decision::Drop => {}
        }
    }

    /// An IKE message to the IKE thread: a bounded queue never waited on.
    fn forward_ike(&mut self, local: SocketAddr, remote: SocketAddr, bytes: &[u8]) {
        let Some((link, _)) = &self.link.ike else {
            self.stats.daemon.bump(DaemonCounter::ClusterIkeUnsupported);
            return;
        };
        let message = ToIke::Datagram {
            local,
            remote,
            bytes: bytes.to_vec(),
        };
        let counter = if link.send(message) {
            DaemonCounter::ClusterIkeForwarded
        } else {
            DaemonCounter::ClusterIkeQueueFull
        };
        self.stats.daemon.bump(counter);
    }

    /// An owned cleartext packet into the outbound batch (processed first
    /// if full), its TTL decremented there (the node forwards it) and its
    /// transport checksum filled in if the sender left that to its NIC.
    fn queue_clear(&mut self, packet: &[u8], checksum_pending: bool, assigned: Assigned) {
        if self.clear.free() == 0 {
            self.flush_clear();
        }
        let Some(i) = self.clear.push(packet, PacketMeta::default()) else {
            self.stats.daemon.bump(DaemonCounter::ClusterOversize);
            return;
        };
        let copy = self.clear.packet_mut(i);
        if checksum_pending && !fill_transport_checksum(copy) {
            self.clear.truncate(i);
            self.stats
                .daemon
                .bump(DaemonCounter::ClusterIgnoredMalformed);
            return;
        }
        decrement_ttl(copy);
        self.assigned.push(assigned);
    }

    /// An owned ESP packet into the batch of its socket kind (processed
    /// first if full).
    fn queue_esp(&mut self, payload: &[u8], meta: PacketMeta, ingress: Ingress, rt: &Runtime) {
        if self.batch(ingress).free() == 0 {
            self.flush_esp(ingress, rt);
        }
        if self.batch(ingress).push(payload, meta).is_none() {
            self.stats.daemon.bump(DaemonCounter::ClusterOversize);
        }
    }

    fn batch(&mut self, ingress: Ingress) -> &mut PacketBatch {
        match ingress {
            Ingress::Udp => &mut self.esp_udp,
            // A cluster reads no AH (configuration refuses AH SAs there).
            Ingress::Raw | Ingress::Ah => &mut self.esp_raw,
        }
    }

    /// The owned cleartext packets through the outbound path to the
    /// sockets.
    fn flush_clear(&mut self) {
        if self.clear.is_empty() {
            return;
        }
        let rt = self.store.load();
        let mut egress = SocketEgress {
            udp: &mut self.udp,
            udp_tx: &mut self.udp_tx,
            raw: self.raw.as_ref(),
            raw_tx: &mut self.raw_tx,
            ah: None,
            // The node that owns a packet too big for the path answers
            // its sender (RFC 4301 §8.2.1), from its own inside address.
            icmp: &self.icmp,
            rt: Some(&rt),
            counters: DaemonCounters::default(),
            drops: phalanx_esp::Counters::new(),
        };
        self.outbound.process_assigned(
            &mut self.clear,
            &self.assigned,
            &mut self.engine,
            &mut egress,
            &mut self.stats,
            Instant::now(),
        );
        egress.flush();
        self.stats.daemon.merge(&egress.counters);
        self.stats.outbound.merge(&egress.drops);
        self.clear.clear();
        self.assigned.clear();
    }

    /// The owned ESP packets of one socket kind through the inbound path
    /// to the TUN device.
    fn flush_esp(&mut self, ingress: Ingress, rt: &Runtime) {
        let batch = match ingress {
            Ingress::Udp => &mut self.esp_udp,
            Ingress::Raw | Ingress::Ah => &mut self.esp_raw,
        };
        if batch.is_empty() {
            return;
        }
        let mut delivery = TunDelivery {
            tun: &mut self.tun,
            tx: &mut self.tun_tx,
            counters: DaemonCounters::default(),
        };
        let received = ReceivedMut { batch, ingress };
        self.inbound.process_batch(
            rt,
            received,
            &mut self.engine,
            &mut delivery,
            &mut self.stats,
            Instant::now(),
        );
        delivery.flush();
        self.stats.daemon.merge(&delivery.counters);
        batch.clear();
    }

    /// The data path's reports to the cluster thread; never waits.
    fn send_reports(&mut self) {
        while let Some(report) = self.classifier.poll_report() {
            if !self.link.reports.send(report) {
                self.stats.daemon.bump(DaemonCounter::ClusterReportsDropped);
            }
        }
    }

    /// Copies the counters where the control plane reads them.
    fn publish(
        &mut self,
        wall: Duration,
        busy: Duration,
        window: &mut LoadWindow,
        ring_drops: u64,
    ) {
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.stats.busy_ns = nanos(busy);
        self.stats.wall_ns = nanos(wall);
        self.stats.busy_1s_ppm = window.record(self.stats.wall_ns, self.stats.busy_ns);
        // Every STATS_INTERVAL_MS: what the kernel filter dropped joins
        // the observers (the replay checkpoints carry it).
        self.classifier.absorb_kernel_cells();
        let mut published = self.stats.clone();
        if let Some(filter) = self.classifier.kernel_filter() {
            let daemon = &mut published.daemon;
            let drops = filter.drop_counts();
            daemon.add(DaemonCounter::ClusterInboundNotOwnedKernel, drops.not_owned);
            daemon.add(DaemonCounter::ClusterIgnoredOtherMacKernel, drops.other_mac);
            if filter.xdp_failed() {
                daemon.add(DaemonCounter::ClusterKernelFilterXdpUnavailable, 1);
            }
        }
        if self.kernel_filter_failed {
            published
                .daemon
                .add(DaemonCounter::ClusterKernelFilterUnavailable, 1);
        }
        // The sockets only send; what the kernel reported about their
        // packets (path MTUs, ICMP errors) is read here, every
        // STATS_INTERVAL_MS, so their error queues never fill.
        let rt = self.store.load();
        let now = Instant::now();
        if self
            .route_mtu_at
            .is_none_or(|at| now.duration_since(at) >= ROUTE_MTU_REFRESH)
        {
            self.route_mtu_at = Some(now);
            let learned = crate::install::refresh_route_mtus(&rt, now);
            self.stats
                .daemon
                .add(DaemonCounter::PathMtuLearned, learned);
        }
        drain_errors(&mut self.udp, &rt, now, &mut self.stats.daemon);
        if let Some(raw) = &self.raw {
            drain_errors(&mut *raw.lock(), &rt, now, &mut self.stats.daemon);
        }
        let (tun, udp) = (self.tun.stats(), self.udp.stats());
        // Refused sends are outbound drops with their reason (SocketEgress).
        let dropped = tun.send_dropped + udp.send_failures_unrecorded;
        published.daemon.add(DaemonCounter::IoDropped, dropped);
        published
            .daemon
            .add(DaemonCounter::UdpSendCalls, udp.send_calls);
        published
            .daemon
            .add(DaemonCounter::UdpGsoMessages, udp.gso_messages);
        published
            .daemon
            .add(DaemonCounter::ClusterRingDrops, ring_drops);
        self.slot.publish(&published);
    }
}
