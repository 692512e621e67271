//! The cluster thread: the one place the sans-IO `ClusterNode` meets
//! Corosync, the heartbeat socket, the clock and the data plane.
//!
//! Each turn of its loop, in this order:
//! 1. wait (`poll(2)`) for the CPG descriptor, the heartbeat socket or the
//!    waker, at most until the node's next timer (and never longer than
//!    one heartbeat interval without a pollable CPG descriptor, or
//!    [`MAX_WAIT`] so that a stop flag set without a wake is seen);
//! 2. read the clock once; feed the node, in this order, Corosync's
//!    agreed events (configuration changes and messages, in their total
//!    order), the heartbeats received, the data plane's reports, and the
//!    timer;
//! 3. drain the node: messages to multicast, heartbeats to send, events
//!    to log; retry Corosync's backlog;
//! 4. publish `ClusterNode::shared()` into the `ArcSwap` the data plane
//!    reads when it is a new `Arc`; answer status requests.
//!
//! On a node running IKE the thread also serves the IKE bridge
//! (`crate::ike::cluster::bridge`): IKE SA state to replicate on the App
//! channel, Child SAs to register or remove; back, every App message of
//! the IKE channel the log delivered, refusals, state transfers sent, and
//! a wake whenever a new state is published (takeovers follow the view).
//!
//! The thread never blocks anywhere else: the heartbeat socket is
//! non-blocking, Corosync's `CS_ERR_TRY_AGAIN` goes to a backlog, reports
//! arrive on a bounded channel the data plane never waits on.

use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use phalanx_cluster::limits::SPREAD_MIN_PEER_WINDOW;
use phalanx_cluster::transport::{GroupEvent, GroupTransport};
use phalanx_cluster::{
    pins_outbound, ClusterConfig, ClusterEvent, ClusterNode, ClusterStatus, DataPathReport,
    Direction, DispatchScheme, NodeId, SaDescriptor, SharedState, APP_CHANNEL_IKE,
};
use phalanx_control::ClusterReport;
use phalanx_io::poll::{Interest, PollSet, Waker};

use super::corosync::CpgTransport;
use super::heartbeat::HeartbeatSocket;
use super::report::{self, ClusterSnapshot};
use crate::config::ClusterSettings;
use crate::ike::cluster::bridge::{ClusterEnd, FromCluster, ToCluster};

/// Reports the data plane may queue before new ones are dropped (and
/// counted): several checkpoint periods of every SA.
pub const REPORT_QUEUE: usize = 4096;

/// The longest the thread sleeps without looking at its stop flag.
pub const MAX_WAIT: Duration = Duration::from_millis(50);

/// The shortest sleep in `poll`: far below a heartbeat interval, long
/// enough that a timer that stays due cannot spin the thread.
pub const MIN_WAIT: Duration = Duration::from_micros(200);

/// How long [`ClusterHandle::snapshot`] waits for the thread to answer
/// before it returns the last answer it had.
pub const STATUS_TIMEOUT: Duration = Duration::from_secs(1);

/// Status requests waiting at most (control connections are bounded too).
const STATUS_QUEUE: usize = 32;

/// `SCHED_FIFO` priority of the cluster thread: below Corosync's own
/// (99 by default), above every ordinary thread.
pub const REALTIME_PRIORITY: u64 = 50;

/// Where data-plane threads send their reports: never blocks; a full
/// queue drops the report and counts it.
#[derive(Clone, Debug)]
pub struct ReportSender {
    tx: Sender<DataPathReport>,
    dropped: Arc<AtomicU64>,
    waker: Arc<Waker>,
}

impl ReportSender {
    /// Queues `report`; `false` (and counted) when the queue is full or
    /// the cluster thread is gone.
    pub fn send(&self, report: DataPathReport) -> bool {
        match self.tx.try_send(report) {
            Ok(()) => {
                // A failed wake only delays the report to the next turn.
                drop(self.waker.wake());
                true
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }
}

/// The running cluster thread.
#[derive(Debug)]
pub struct ClusterHandle {
    /// The node's latest published state; data-plane threads load it once
    /// per batch (`NodeDataPath::update`).
    pub shared: Arc<ArcSwap<SharedState>>,
    /// The data plane's reports (checkpoints, lease requests) to the
    /// node. Bounded; prefer [`ClusterHandle::report_sender`], which
    /// counts what a full queue drops and wakes the thread.
    pub reports: Sender<DataPathReport>,
    reports_dropped: Arc<AtomicU64>,
    requests: Sender<Sender<ClusterSnapshot>>,
    last: Arc<Mutex<Option<ClusterSnapshot>>>,
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    settings: ClusterSettings,
}

/// Joins the CPG group, binds the heartbeat socket (both in the calling
/// thread's network namespace, so errors come back here), registers
/// `sas`, and starts the cluster thread. It runs until `stop` is set (or
/// [`ClusterHandle::stop`]). Returns once the thread has tried to move
/// itself to `SCHED_FIFO` (logged either way): it needs `CAP_SYS_NICE`,
/// or a caller that runs `SCHED_FIFO` at [`REALTIME_PRIORITY`] already
/// (a new thread inherits its creator's policy).
pub fn spawn(
    settings: &ClusterSettings,
    sas: Vec<SaDescriptor>,
    stop: Arc<AtomicBool>,
) -> io::Result<ClusterHandle> {
    spawn_with_ike(settings, sas, stop, None)
}

/// [`spawn`], serving the IKE thread's bridge too when `ike` is given.
pub fn spawn_with_ike(
    settings: &ClusterSettings,
    sas: Vec<SaDescriptor>,
    stop: Arc<AtomicBool>,
    ike: Option<ClusterEnd>,
) -> io::Result<ClusterHandle> {
    let transport = CpgTransport::join(&settings.group)?;
    if transport.local().0 != settings.node_id.0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "Corosync says this is node {}, [cluster] node_id is {}: they must be the same \
                 (nodelist.node.nodeid in corosync.conf)",
                transport.local().0,
                settings.node_id.0
            ),
        ));
    }
    let heartbeats = HeartbeatSocket::bind(settings)?;
    let now = Instant::now();
    let mut node = ClusterNode::new(node_config(settings), now);
    node.set_quorum_policy(settings.quorum);
    for sa in sas {
        log_pinned(settings.scheme, &sa);
        node.register_sa(now, sa);
    }
    let shared = Arc::new(ArcSwap::new(node.shared()));
    let (reports, report_rx) = crossbeam_channel::bounded(REPORT_QUEUE);
    let (requests, request_rx) = crossbeam_channel::bounded(STATUS_QUEUE);
    let waker = Arc::new(Waker::new()?);
    let last = Arc::new(Mutex::new(None));
    let reports_dropped = Arc::new(AtomicU64::new(0));
    let state = ThreadState {
        node,
        transport,
        heartbeats,
        reports: report_rx,
        requests: request_rx,
        shared: Arc::clone(&shared),
        last: Arc::clone(&last),
        waker: Arc::clone(&waker),
        stop: Arc::clone(&stop),
        heartbeat_interval: settings.heartbeat_interval,
        counters: LoopCounters::default(),
        corosync_error: None,
        ike,
    };
    tracing::info!(
        node = settings.node_id.0,
        group = %settings.group,
        scheme = %settings.scheme,
        heartbeat = %state.heartbeats.local_addr().map_or_else(|e| e.to_string(), |a| a.to_string()),
        "cluster: joined the Corosync group"
    );
    let (scheduled_tx, scheduled) = std::sync::mpsc::sync_channel(1);
    let thread = std::thread::Builder::new()
        .name("phalanx-cluster".into())
        .spawn(move || {
            // Heartbeats late by more than `suspect_after` make the other
            // nodes take over from a live one: run ahead of ordinary work.
            // Without CAP_SYS_NICE this holds only if the caller already
            // runs SCHED_FIFO at this priority (the thread inherited it).
            let result = phalanx_io::sched::set_realtime(REALTIME_PRIORITY as i32);
            drop(scheduled_tx.send(result));
            state.run();
        })?;
    match scheduled.recv_timeout(STATUS_TIMEOUT) {
        Ok(Ok(())) => tracing::info!(
            priority = REALTIME_PRIORITY,
            "cluster: thread runs SCHED_FIFO"
        ),
        Ok(Err(e)) => tracing::warn!(
            error = %e,
            "cluster: cannot run SCHED_FIFO (needs CAP_SYS_NICE); on a loaded machine late \
             heartbeats may make peers suspect this node"
        ),
        Err(_) => tracing::warn!("cluster: the thread did not report its scheduling policy"),
    }
    Ok(ClusterHandle {
        shared,
        reports,
        reports_dropped,
        requests,
        last,
        waker,
        stop,
        thread: Some(thread),
        settings: settings.clone(),
    })
}

/// The sans-IO node's configuration from the file's.
fn node_config(settings: &ClusterSettings) -> ClusterConfig {
    ClusterConfig {
        local: settings.node_id,
        scheme: settings.scheme,
        heartbeat_interval: settings.heartbeat_interval,
        suspect_after: settings.suspect_after,
        lease_len: settings.lease_len,
        checkpoint_every: settings.checkpoint_every,
    }
}

impl ClusterHandle {
    /// A sender for one data-plane thread's reports.
    pub fn report_sender(&self) -> ReportSender {
        ReportSender {
            tx: self.reports.clone(),
            dropped: Arc::clone(&self.reports_dropped),
            waker: Arc::clone(&self.waker),
        }
    }

    /// The node's status (`ClusterNode::status`), fresh from the thread.
    pub fn status(&self) -> Option<ClusterStatus> {
        self.snapshot().map(|s| s.status)
    }

    /// Everything the thread knows, fresh; the last answer when the thread
    /// does not answer within [`STATUS_TIMEOUT`]; `None` when it never did.
    pub fn snapshot(&self) -> Option<ClusterSnapshot> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        if self.requests.try_send(tx).is_ok() {
            drop(self.waker.wake());
            if let Ok(snapshot) = rx.recv_timeout(STATUS_TIMEOUT) {
                return Some(snapshot);
            }
        }
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The answer to `phalanxctl cluster`.
    pub fn report(&self) -> Option<ClusterReport> {
        let snapshot = self.snapshot()?;
        let dropped = self.reports_dropped.load(Ordering::Relaxed);
        Some(report::cluster_report(&self.settings, &snapshot, dropped))
    }

    /// Whether the thread is still running.
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Asks the thread to leave the group and end.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        drop(self.waker.wake());
    }

    /// Stops the thread and waits for it.
    pub fn join(mut self) {
        self.stop();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the cluster thread panicked");
            }
        }
    }
}

impl Drop for ClusterHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the loop itself counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopCounters {
    /// Reports taken from the data plane.
    pub reports: u64,
    /// Configuration changes handed to the node.
    pub membership_changes: u64,
    /// Messages handed to the node.
    pub deliveries: u64,
    /// Multicasts Corosync refused (after the backlog).
    pub multicast_failures: u64,
    /// Times a new shared state was published.
    pub publications: u64,
}

/// Everything the thread owns.
struct ThreadState {
    node: ClusterNode,
    transport: CpgTransport,
    heartbeats: HeartbeatSocket,
    reports: Receiver<DataPathReport>,
    requests: Receiver<Sender<ClusterSnapshot>>,
    shared: Arc<ArcSwap<SharedState>>,
    last: Arc<Mutex<Option<ClusterSnapshot>>>,
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    heartbeat_interval: Duration,
    counters: LoopCounters,
    /// Set once Corosync failed for good; heartbeats stop with it.
    corosync_error: Option<String>,
    /// The IKE thread's bridge, on a node running IKE.
    ike: Option<ClusterEnd>,
}

impl ThreadState {
    fn run(mut self) {
        let mut buf = vec![0_u8; 2048];
        while !self.stop.load(Ordering::SeqCst) {
            let (cpg_ready, heartbeat_ready) = match self.wait() {
                Ok(ready) => ready,
                Err(e) => {
                    tracing::error!(error = %e, "cluster: poll failed; the cluster thread stops");
                    break;
                }
            };
            let now = Instant::now();
            drop(self.waker.reset());
            if cpg_ready {
                self.dispatch_corosync(now);
            }
            if heartbeat_ready {
                while let Some((from, payload)) = self.heartbeats.receive(&mut buf) {
                    self.node.handle_heartbeat(now, from, payload);
                }
            }
            while let Ok(report) = self.reports.try_recv() {
                self.counters.reports += 1;
                self.node.handle_report(now, report);
            }
            self.serve_ike(now);
            if self.node.poll_timeout().is_some_and(|t| t <= now) {
                self.node.handle_timeout(now);
            }
            self.drain(now);
            self.publish();
            self.answer_requests();
        }
        self.store_last();
        tracing::info!("cluster: leaving the Corosync group");
    }

    /// Waits for work; returns (CPG may have work, heartbeats waiting).
    fn wait(&mut self) -> io::Result<(bool, bool)> {
        let now = Instant::now();
        // Never a zero timeout: a timer that stays due would otherwise
        // spin this SCHED_FIFO thread and starve every ordinary thread of
        // the machine; descriptors still end the wait at once.
        let mut timeout = self
            .node
            .poll_timeout()
            .map_or(MAX_WAIT, |t| t.saturating_duration_since(now))
            .clamp(MIN_WAIT, MAX_WAIT);
        let pollable = self.transport.fd().is_some();
        if !pollable || self.corosync_error.is_some() {
            timeout = timeout.min(self.heartbeat_interval);
        }
        let mut set = PollSet::with_capacity(4);
        // The waker only ends the wait; it is reset after every wait.
        set.add(self.waker.as_fd(), Interest::READ);
        if let Some(ike) = &self.ike {
            set.add(ike.fd(), Interest::READ);
        }
        let heartbeat = set.add(self.heartbeats.as_fd(), Interest::READ);
        let cpg = self.transport.fd().map(|fd| set.add(fd, Interest::READ));
        set.wait(Some(timeout))?;
        let cpg_ready = match cpg {
            Some(token) => {
                let r = set.readiness(token);
                r.readable || r.error
            }
            None => true,
        };
        let hb = set.readiness(heartbeat);
        Ok((
            cpg_ready && self.corosync_error.is_none(),
            hb.readable || hb.error,
        ))
    }

    /// Runs libcpg's callbacks and hands their events to the node in the
    /// agreed order.
    fn dispatch_corosync(&mut self, now: Instant) {
        if let Err(e) = self.transport.dispatch() {
            self.corosync_failed(now, e.to_string());
            return;
        }
        while let Some(event) = self.transport.poll() {
            match event {
                GroupEvent::Delivered { from, message } => {
                    self.counters.deliveries += 1;
                    self.node.handle_delivery(now, from, &message);
                }
                GroupEvent::Membership { members } => {
                    self.counters.membership_changes += 1;
                    let ids: Vec<u32> = members.iter().map(|m| m.0).collect();
                    tracing::info!(members = ?ids, "cluster: Corosync agreed membership");
                    self.node.handle_membership(now, &members);
                }
            }
        }
    }

    /// Corosync is gone: this node can no longer take part in the
    /// replicated log. It stops its heartbeats so that the others take
    /// over its share within `suspect_after`, and applies an empty
    /// membership so that it owns nothing itself.
    fn corosync_failed(&mut self, now: Instant, error: String) {
        if self.corosync_error.is_none() {
            tracing::error!(
                error = %error,
                "cluster: lost Corosync; this node stops its heartbeats and owns nothing"
            );
            self.node.handle_membership(now, &[]);
            self.corosync_error = Some(error);
        }
    }

    /// Everything the node wants done, and the log lines of its events.
    fn drain(&mut self, now: Instant) {
        while let Some(message) = self.node.poll_group() {
            if self.corosync_error.is_some() {
                continue;
            }
            if let Err(e) = self.transport.multicast(&message) {
                self.counters.multicast_failures += 1;
                tracing::warn!(error = ?e, "cluster: a replication message was not sent");
            }
        }
        while let Some(payload) = self.node.poll_heartbeat(now) {
            if self.corosync_error.is_none() {
                self.heartbeats.send_to_peers(&payload);
            }
        }
        while let Some(payload) = self.node.poll_datagram() {
            if self.corosync_error.is_none() {
                self.heartbeats.send_to_peers(&payload);
            }
        }
        while let Some(app) = self.node.poll_app() {
            if let Some(ike) = self.ike.as_mut().filter(|_| app.channel == APP_CHANNEL_IKE) {
                ike.send(FromCluster::Delivered {
                    from: app.from,
                    payload: app.payload,
                });
            }
        }
        while let Some(event) = self.node.poll_event() {
            match (&event, &mut self.ike) {
                (ClusterEvent::StateTransferSent { .. }, Some(ike)) => {
                    ike.send(FromCluster::StateTransferSent);
                }
                (ClusterEvent::ViewChanged { view }, Some(ike)) => {
                    ike.send(FromCluster::View(view.clone()));
                }
                _ => {}
            }
            log_event(&event);
        }
        if self.corosync_error.is_none() {
            if let Err(e) = self.transport.flush() {
                self.corosync_failed(now, e.to_string());
            }
        }
    }

    /// What the IKE thread asked for: replication on the IKE App channel
    /// (a refusal goes back with its hold number), Child SAs registered
    /// with the cluster or removed.
    fn serve_ike(&mut self, now: Instant) {
        let Some(ike) = &mut self.ike else {
            return;
        };
        ike.reset();
        ike.flush();
        while let Some(request) = ike.try_recv() {
            match request {
                ToCluster::Replicate { hold, payload } => {
                    if let Err(e) = self.node.replicate(APP_CHANNEL_IKE, payload) {
                        tracing::warn!(error = %e, "cluster: IKE state not replicated");
                        ike.send(FromCluster::Refused { hold });
                    }
                }
                ToCluster::Register(sa) => {
                    log_pinned(self.node.config().scheme, &sa);
                    self.node.register_sa(now, sa);
                }
                ToCluster::Remove { direction, spi } => self.node.remove_sa(now, direction, spi),
            }
        }
    }

    /// Publishes the node's shared state when it is a new one.
    fn publish(&mut self) {
        let state = self.node.shared();
        if !Arc::ptr_eq(&state, &self.shared.load()) {
            self.shared.store(state);
            self.counters.publications += 1;
            if let Some(ike) = &self.ike {
                ike.wake_ike();
            }
        }
    }

    fn snapshot(&self) -> ClusterSnapshot {
        ClusterSnapshot {
            status: self.node.status(),
            cpg: self.transport.stats(),
            corosync_backlog: self.transport.backlog(),
            heartbeat: self.heartbeats.stats(),
            loop_counters: self.counters,
            corosync_error: self.corosync_error.clone(),
            taken_at: Instant::now(),
        }
    }

    fn answer_requests(&mut self) {
        let mut answered = false;
        while let Ok(reply) = self.requests.try_recv() {
            // The asker may have timed out and gone; nothing to do then.
            drop(reply.try_send(self.snapshot()));
            answered = true;
        }
        if answered {
            self.store_last();
        }
    }

    fn store_last(&self) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(self.snapshot());
    }
}

/// Node ids for log fields.
fn ids(nodes: &[NodeId]) -> Vec<u32> {
    nodes.iter().map(|n| n.0).collect()
}

/// One log line per cluster event: view changes, suspicions, takeovers
/// with their handover, Corosync's confirmations and corrections at
/// `info`/`warn`; lease grants (several per generation and SA) at
/// `debug`.
/// Says when `scheme` would spread outbound SA `sa` over the nodes but
/// its peer's replay window is too small (or unknown) for the reordering
/// that causes, so one node sends it (`phalanx_cluster::spreads_outbound`).
fn log_pinned(scheme: DispatchScheme, sa: &SaDescriptor) {
    if sa.direction != Direction::Outbound || !pins_outbound(scheme, sa.peer_window) {
        return;
    }
    let window = match sa.peer_window {
        0 => "unknown".to_owned(),
        w => w.to_string(),
    };
    tracing::info!(
        spi = format_args!("{:#010x}", sa.spi),
        peer_replay_window = %window,
        "cluster: outbound SA sent by one node at a time: the peer's replay window is below {} \
         (set peer_replay_window when the peer's window is larger)",
        SPREAD_MIN_PEER_WINDOW
    );
}

fn log_event(event: &ClusterEvent) {
    match event {
        ClusterEvent::ViewChanged { view } => {
            tracing::info!(view = ?ids(view.members()), epoch = view.epoch(), "cluster: dispatch view changed");
        }
        ClusterEvent::Stalled { gap } => tracing::warn!(
            gap_ms = gap.as_secs_f64() * 1000.0,
            "cluster: this node did not run for a while (overloaded CPU?); \
             no peer suspected for silence this node did not watch"
        ),
        ClusterEvent::Suspected { node, silent_for } => tracing::warn!(
            suspect = node.0,
            silent_ms = silent_for.as_secs_f64() * 1000.0,
            "cluster: heartbeats stopped; taking over the suspect's share"
        ),
        ClusterEvent::TakeoverApplied { suspect, handover } => tracing::warn!(
            suspect = suspect.0,
            handover_ms = handover.as_secs_f64() * 1000.0,
            "cluster: takeover applied by the data path"
        ),
        ClusterEvent::SuspectedInLog { node, by } => tracing::info!(
            suspect = node.0,
            by = by.0,
            "cluster: the log agreed on a suspicion; new lease generation without it"
        ),
        ClusterEvent::Confirmed { node } => tracing::info!(
            suspect = node.0,
            "cluster: Corosync confirmed the failure (the node left the membership)"
        ),
        ClusterEvent::Corrected { node } => tracing::warn!(
            suspect = node.0,
            "cluster: false suspicion corrected; the node is back in the view"
        ),
        ClusterEvent::Founded { members } => {
            tracing::info!(members = ?ids(members), "cluster: founded a new cluster state");
        }
        ClusterEvent::StateReceived => {
            tracing::info!("cluster: state transfer installed; healing counters before Ready");
        }
        ClusterEvent::StateTransferSent { targets } => {
            tracing::info!(joiners = ?ids(targets), "cluster: state transfer sent");
        }
        ClusterEvent::Ready { node } => tracing::info!(node = node.0, "cluster: member ready"),
        ClusterEvent::LeaseGranted(grant) => tracing::debug!(
            spi = format_args!("0x{:08x}", grant.spi),
            start = grant.block.start,
            end = grant.block.end,
            kind = ?grant.block.kind,
            "cluster: lease block granted"
        ),
        ClusterEvent::LeaseExhausted { spi } => tracing::error!(
            spi = format_args!("0x{spi:08x}"),
            "cluster: the SA's sequence space is used up; it must be rekeyed"
        ),
        ClusterEvent::SaAdded(sa) => tracing::info!(
            spi = format_args!("0x{:08x}", sa.spi),
            direction = ?sa.direction,
            "cluster: SA registered cluster-wide"
        ),
        ClusterEvent::SaRemoved { direction, spi } => tracing::info!(
            spi = format_args!("0x{spi:08x}"),
            direction = ?direction,
            "cluster: SA removed cluster-wide"
        ),
        other => tracing::info!(event = ?other, "cluster event"),
    }
}
