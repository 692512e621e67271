//! One data-plane worker thread: it owns one TUN queue and one UDP socket
//! (`SO_REUSEPORT`), reads the shared raw ESP socket if it is worker 0,
//! and runs both directions on its own [`OutboundPath`] / [`InboundPath`]
//! and crypto engine.
//!
//! SA ownership: the kernel steers each flow to one TUN queue (by flow
//! hash) and each peer 4-tuple to one `SO_REUSEPORT` socket, so an inbound
//! SA's packets — one peer, one port pair — all reach the same worker,
//! and each flow's outbound packets leave from one worker. Flows of one
//! outbound SA may leave from several workers; the SA's sequence counter
//! is atomic, so numbers stay unique and the peer's replay window (1024 by
//! default) absorbs the interleaving. Correctness never depends on
//! ownership, only throughput does.
//!
//! The loop: `poll` on the TUN queue, the UDP socket, the raw socket
//! (worker 0) and a waker; then read one batch from each ready source in
//! turn until none has more (at most `MAX_ROUNDS` turns, then poll
//! again); counters are published every
//! [`STATS_INTERVAL_MS`] (the poll timeout too). The runtime snapshot is
//! loaded once per batch.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use phalanx_io::poll::{Interest, PollSet, Waker};
use phalanx_io::tun::TunDevice;
use phalanx_io::udp::UdpSocket;
use phalanx_io::PacketBatch;

use super::counters::{DaemonCounter, DaemonCounters, StatsSlot, WorkerStats};
use super::engine::CryptoEngine;
use super::inbound::{InboundPath, Ingress, ReceivedMut, INBOUND_HEADROOM};
use super::io::{drain_errors, IcmpSockets, SharedRaw, SocketEgress, TunDelivery};
use super::load::LoadWindow;
use super::outbound::OutboundPath;
use crate::ike::WorkerLink;
use crate::install::SaStore;
use crate::limits::{
    HEADROOM, ROUTE_MTU_REFRESH, SEND_BATCH, SOCKET_BATCH, STATS_INTERVAL_MS, TAILROOM, TUN_BATCH,
    TUN_SEND_BATCH, TUN_SEND_ROOM,
};

/// What a worker is told at start.
#[derive(Clone, Copy, Debug)]
pub struct WorkerSettings {
    /// Worker number, from 0.
    pub index: usize,
    /// Our protected address.
    pub local: IpAddr,
    /// Our ESP-in-UDP port.
    pub udp_port: u16,
    /// The TUN MTU (sizes the buffers).
    pub mtu: u16,
    /// Crypto threads (0: inline).
    pub crypto_threads: usize,
    /// What an IPv4 packet without DF too big for the path becomes.
    pub fragment: phalanx_esp::FragmentPolicy,
}

/// The devices a worker owns.
#[derive(Debug)]
pub struct WorkerDevices {
    /// Its TUN queue.
    pub tun: TunDevice,
    /// Its UDP socket.
    pub udp: UdpSocket,
    /// The raw ESP socket, shared.
    pub raw: Option<SharedRaw>,
    /// Whether this worker receives on the raw sockets (ESP and AH).
    pub reads_raw: bool,
    /// The raw AH socket, shared, when an SA uses AH (RFC 4302).
    pub ah: Option<SharedRaw>,
    /// The ICMP sockets the path-MTU errors go out on, shared.
    pub icmp: Arc<IcmpSockets>,
}

/// A running worker.
#[derive(Debug)]
pub struct WorkerHandle {
    thread: Option<JoinHandle<()>>,
    waker: Arc<Waker>,
    /// Its published counters.
    pub stats: Arc<StatsSlot>,
}

impl WorkerHandle {
    /// Interrupts its `poll` (it then checks the stop flag).
    pub fn wake(&self) {
        // A failed eventfd write leaves the worker to notice the stop flag
        // at its next poll timeout (STATS_INTERVAL_MS).
        let _ = self.waker.wake();
    }

    /// Waits for the thread to end.
    pub fn join(mut self) {
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("a data-plane worker panicked");
            }
        }
    }
}

/// Room for one packet of the protected side: the inner MTU plus the most
/// ESP-in-UDP overhead, with margin.
pub fn packet_room(mtu: u16) -> usize {
    (usize::from(mtu) + TAILROOM + HEADROOM).max(2048)
}

/// Starts worker `settings.index` on its own thread; `link` reaches the
/// IKE thread, when IKE is on.
pub fn spawn(
    settings: WorkerSettings,
    devices: WorkerDevices,
    store: Arc<SaStore>,
    stop: Arc<AtomicBool>,
    link: Option<WorkerLink>,
) -> io::Result<WorkerHandle> {
    let waker = Arc::new(Waker::new()?);
    let stats = Arc::new(StatsSlot::default());
    let mut worker = Worker::new(
        settings,
        devices,
        store,
        Arc::clone(&waker),
        Arc::clone(&stats),
    );
    worker.outbound.set_fragment_policy(settings.fragment);
    if let Some(link) = link {
        worker.outbound.set_link(link.clone());
        worker.inbound.set_link(link);
    }
    let thread = thread::Builder::new()
        .name(format!("phalanx-worker-{}", settings.index))
        .spawn(move || worker.run(&stop))?;
    Ok(WorkerHandle {
        thread: Some(thread),
        waker,
        stats,
    })
}

/// A worker's state.
struct Worker {
    settings: WorkerSettings,
    devices: WorkerDevices,
    store: Arc<SaStore>,
    waker: Arc<Waker>,
    slot: Arc<StatsSlot>,
    engine: CryptoEngine,
    outbound: OutboundPath,
    inbound: InboundPath,
    tun_rx: PacketBatch,
    tun_tx: PacketBatch,
    sock_rx: PacketBatch,
    udp_tx: PacketBatch,
    raw_tx: PacketBatch,
    stats: WorkerStats,
    warned: bool,
}

/// Most sources a worker polls: TUN, UDP, raw ESP, raw AH.
const MAX_SOURCES: usize = 4;

/// Turns over the ready sources between two polls (a turn is one batch
/// from each): about a millisecond of work at full load.
const MAX_ROUNDS: usize = 16;

/// Busy-time bookkeeping.
#[derive(Clone, Debug)]
struct Load {
    start: Instant,
    busy: Duration,
    published: Instant,
    window: LoadWindow,
    /// When the path MTUs were last asked of the kernel.
    route_mtu_at: Instant,
}

impl Load {
    fn new(start: Instant) -> Load {
        Load {
            start,
            busy: Duration::ZERO,
            published: start,
            // Due at the first publication.
            route_mtu_at: start.checked_sub(ROUTE_MTU_REFRESH).unwrap_or(start),
            window: LoadWindow::new(),
        }
    }
}

/// Which source a round reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Tun,
    Udp,
    Raw,
    Ah,
}

impl Worker {
    fn new(
        settings: WorkerSettings,
        devices: WorkerDevices,
        store: Arc<SaStore>,
        waker: Arc<Waker>,
        slot: Arc<StatsSlot>,
    ) -> Worker {
        let room = packet_room(settings.mtu);
        // The paths swap buffers with the receive batches instead of
        // copying packets, so their pools hold buffers of the batches'
        // length. `room` already covers the ESP tailroom (`packet_room`).
        let tun_rx = PacketBatch::new(TUN_BATCH, room, HEADROOM);
        let sock_rx = PacketBatch::new(SOCKET_BATCH, room, INBOUND_HEADROOM);
        let (local, port) = (settings.local, settings.udp_port);
        Worker {
            engine: CryptoEngine::new(settings.crypto_threads),
            outbound: OutboundPath::new(local, tun_rx.buffer_len(), TUN_BATCH),
            inbound: InboundPath::new(local, port, sock_rx.buffer_len(), SOCKET_BATCH),
            tun_rx,
            tun_tx: PacketBatch::new(TUN_SEND_BATCH, TUN_SEND_ROOM, HEADROOM),
            sock_rx,
            // Of the TUN batch's length: finished ESP packets are swapped
            // into the send batches, not copied.
            udp_tx: PacketBatch::new(SEND_BATCH, room, HEADROOM),
            raw_tx: PacketBatch::new(SEND_BATCH, room, HEADROOM),
            stats: WorkerStats::default(),
            warned: false,
            settings,
            devices,
            store,
            waker,
            slot,
        }
    }

    fn run(mut self, stop: &AtomicBool) {
        let fds = match self.poll_fds() {
            Ok(fds) => fds,
            Err(e) => {
                tracing::error!(worker = self.settings.index, error = %e, "worker cannot start");
                return;
            }
        };
        let mut set = PollSet::with_capacity(fds.len());
        for fd in &fds {
            set.add(fd.as_fd(), Interest::READ);
        }
        let sources = self.sources();
        let interval = Duration::from_millis(STATS_INTERVAL_MS);
        let mut load = Load::new(Instant::now());
        while !stop.load(Ordering::Relaxed) {
            if let Err(e) = set.wait(Some(interval)) {
                tracing::error!(worker = self.settings.index, error = %e, "poll failed; worker stops");
                break;
            }
            let began = Instant::now();
            // Token 0 is the waker: drain it so the next poll sleeps.
            if set.readiness(0).readable {
                let _ = self.waker.reset();
            }
            let mut ready = [false; MAX_SOURCES];
            for (token, flag) in ready.iter_mut().enumerate().take(sources.len()) {
                let r = set.readiness(token + 1);
                if r.error {
                    // phalanx-io asks for the sockets' error queues
                    // (IP_RECVERR); an unread entry keeps POLLERR set.
                    self.drain_errors(sources[token]);
                }
                *flag = r.readable;
            }
            self.drain_ready(&sources, &mut ready);
            load.busy += began.elapsed();
            let now = Instant::now();
            if now.duration_since(load.published) >= interval {
                self.publish(now, &mut load);
            }
        }
        self.publish(Instant::now(), &mut load);
    }

    /// Reads one batch from each ready source in turn until all are dry,
    /// or for at most [`MAX_ROUNDS`] turns: under sustained load the loop
    /// must still come back to publish counters and see the stop flag
    /// (the next `poll` returns at once while data is queued).
    fn drain_ready(&mut self, sources: &[Source], ready: &mut [bool; MAX_SOURCES]) {
        for _ in 0..MAX_ROUNDS {
            if !ready.iter().any(|&r| r) {
                break;
            }
            for (source, flag) in sources.iter().zip(ready.iter_mut()) {
                if *flag {
                    *flag = self.round(*source);
                }
            }
        }
    }

    /// Descriptors to poll, waker first, then [`Self::sources`] in order.
    /// Duplicates, so the set can borrow them while the devices are used.
    fn poll_fds(&self) -> io::Result<Vec<OwnedFd>> {
        let mut fds = vec![self.waker.as_fd().try_clone_to_owned()?];
        fds.push(self.devices.tun.as_fd().try_clone_to_owned()?);
        fds.push(self.devices.udp.as_fd().try_clone_to_owned()?);
        if let (Some(raw), true) = (&self.devices.raw, self.devices.reads_raw) {
            fds.push(raw.lock().as_fd().try_clone_to_owned()?);
        }
        if let (Some(ah), true) = (&self.devices.ah, self.devices.reads_raw) {
            fds.push(ah.lock().as_fd().try_clone_to_owned()?);
        }
        Ok(fds)
    }

    fn sources(&self) -> Vec<Source> {
        let mut sources = vec![Source::Tun, Source::Udp];
        if self.devices.raw.is_some() && self.devices.reads_raw {
            sources.push(Source::Raw);
        }
        if self.devices.ah.is_some() && self.devices.reads_raw {
            sources.push(Source::Ah);
        }
        sources
    }

    /// One batch from `source`, processed and flushed; false when the
    /// source had nothing (or failed).
    fn round(&mut self, source: Source) -> bool {
        let received = match source {
            Source::Tun => self.devices.tun.recv_batch(&mut self.tun_rx),
            Source::Udp => self.devices.udp.recv_batch(&mut self.sock_rx),
            Source::Raw => match &self.devices.raw {
                Some(raw) => raw.lock().recv_batch(&mut self.sock_rx),
                None => Ok(0),
            },
            Source::Ah => match &self.devices.ah {
                Some(ah) => ah.lock().recv_batch(&mut self.sock_rx),
                None => Ok(0),
            },
        };
        match received {
            Ok(0) => false,
            Ok(n) => {
                let counter = match source {
                    Source::Tun => DaemonCounter::TunRxPackets,
                    Source::Udp => DaemonCounter::UdpRxPackets,
                    Source::Raw | Source::Ah => DaemonCounter::RawRxPackets,
                };
                self.stats.daemon.add(counter, n as u64);
                match source {
                    Source::Tun => self.protect_batch(),
                    Source::Udp => self.open_batch(Ingress::Udp),
                    Source::Raw => self.open_batch(Ingress::Raw),
                    Source::Ah => self.open_batch(Ingress::Ah),
                }
                true
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => true,
            Err(e) => {
                self.stats.daemon.bump(DaemonCounter::RecvErrors);
                if !self.warned {
                    self.warned = true;
                    tracing::warn!(worker = self.settings.index, ?source, error = %e, "receive failed (further errors only counted)");
                }
                false
            }
        }
    }

    /// The TUN batch through the outbound path to the sockets.
    /// Reads the error queue of `source`'s socket and learns from it
    /// (path MTUs, ICMP errors about our packets).
    fn drain_errors(&mut self, source: Source) {
        let rt = self.store.load();
        let (now, counters) = (Instant::now(), &mut self.stats.daemon);
        match source {
            Source::Udp => drain_errors(&mut self.devices.udp, &rt, now, counters),
            Source::Raw => {
                if let Some(raw) = &self.devices.raw {
                    drain_errors(&mut *raw.lock(), &rt, now, counters);
                }
            }
            Source::Ah => {
                if let Some(ah) = &self.devices.ah {
                    drain_errors(&mut *ah.lock(), &rt, now, counters);
                }
            }
            Source::Tun => {}
        }
    }

    fn protect_batch(&mut self) {
        let rt = self.store.load();
        let mut egress = SocketEgress {
            udp: &mut self.devices.udp,
            udp_tx: &mut self.udp_tx,
            raw: self.devices.raw.as_ref(),
            raw_tx: &mut self.raw_tx,
            ah: self.devices.ah.as_ref(),
            icmp: &self.devices.icmp,
            rt: Some(&rt),
            counters: DaemonCounters::default(),
            drops: phalanx_esp::Counters::new(),
        };
        let now = Instant::now();
        self.outbound.process_batch(
            &rt,
            &mut self.tun_rx,
            &mut self.engine,
            &mut egress,
            &mut self.stats,
            now,
        );
        egress.flush();
        self.stats.daemon.merge(&egress.counters);
        self.stats.outbound.merge(&egress.drops);
        self.tun_rx.clear();
    }

    /// A socket batch through the inbound path to the TUN queue.
    fn open_batch(&mut self, ingress: Ingress) {
        let rt = self.store.load();
        let mut delivery = TunDelivery {
            tun: &mut self.devices.tun,
            tx: &mut self.tun_tx,
            counters: DaemonCounters::default(),
        };
        let now = Instant::now();
        let received = ReceivedMut {
            batch: &mut self.sock_rx,
            ingress,
        };
        self.inbound.process_batch(
            &rt,
            received,
            &mut self.engine,
            &mut delivery,
            &mut self.stats,
            now,
        );
        delivery.flush();
        self.stats.daemon.merge(&delivery.counters);
        self.sock_rx.clear();
    }

    /// Copies the counters where the control plane reads them.
    fn publish(&mut self, now: Instant, load: &mut Load) {
        if self.settings.index == 0 && now.duration_since(load.route_mtu_at) >= ROUTE_MTU_REFRESH {
            // One worker asks the kernel for the outbound SAs' path MTUs
            // now and then (crate::install::refresh_route_mtus).
            load.route_mtu_at = now;
            let learned = crate::install::refresh_route_mtus(&self.store.load(), now);
            self.stats
                .daemon
                .add(DaemonCounter::PathMtuLearned, learned);
        }
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.stats.busy_ns = nanos(load.busy);
        self.stats.wall_ns = nanos(now.duration_since(load.start));
        self.stats.busy_1s_ppm = load.window.record(self.stats.wall_ns, self.stats.busy_ns);
        load.published = now;
        let mut published = self.stats.clone();
        self.add_io_stats(&mut published.daemon);
        self.slot.publish(&published);
    }

    /// The I/O layer's own counters of this worker's devices (read
    /// rather than copied on every batch): drops and batching.
    fn add_io_stats(&self, daemon: &mut DaemonCounters) {
        let tun = self.devices.tun.stats();
        let udp = self.devices.udp.stats();
        // Refused sends are counted per packet as outbound drops with
        // their reason (SocketEgress); only those the socket could not
        // record stay here.
        let mut dropped =
            tun.read_dropped + tun.send_dropped + udp.recv_dropped + udp.send_failures_unrecorded;
        let mut kernel = udp.kernel_rx_dropped;
        for raw in [&self.devices.raw, &self.devices.ah] {
            if let (Some(raw), true) = (raw, self.devices.reads_raw) {
                let raw = raw.lock().stats();
                dropped += raw.recv_dropped + raw.send_failures_unrecorded;
                kernel += raw.kernel_rx_dropped;
            }
        }
        daemon.add(DaemonCounter::IoDropped, dropped);
        daemon.add(DaemonCounter::KernelRxDropped, kernel);
        daemon.add(DaemonCounter::TunReads, tun.reads);
        daemon.add(DaemonCounter::TunSuperPackets, tun.super_packets);
        daemon.add(DaemonCounter::UdpRecvCalls, udp.recv_calls);
        daemon.add(DaemonCounter::UdpGroCoalesced, udp.coalesced_received);
        daemon.add(DaemonCounter::UdpSendCalls, udp.send_calls);
        daemon.add(DaemonCounter::UdpGsoMessages, udp.gso_messages);
    }
}
