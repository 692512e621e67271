//! The IKE thread: the one owner of the sans-IO [`Endpoint`]. It feeds it
//! time (`Instant::now()`), datagrams (its own socket on the IKE port and
//! those the workers forward from the NAT-T port), acquires, lifetime
//! events and control commands, and performs what comes out, in the order
//! the endpoint documents: every SA event first (installed in the data
//! plane before anything is sent), then every datagram.
//!
//! One round: read the IKE socket → drain the worker queue → drain the
//! control queue → fire due timers → apply events, send datagrams →
//! housekeeping when due (wall clock for certificates, hard-expiry scan of
//! the data plane's SAs) → publish the status → answer `initiate --wait`.
//! Between rounds it sleeps in `poll` until the endpoint's next timeout,
//! a datagram, or a waker.
//!
//! On a cluster node ([`ClusterIke`]) each round starts with the cluster
//! thread's deliveries and view, new-SA requests are admitted by their
//! segment's owner only, and the events and datagrams of every flush wait
//! for their replication (see [`super::cluster`]).

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use phalanx_control::{ActionResult, ErrorCode, NamedCounter};
use phalanx_ike::auth::UnixTime;
use phalanx_ike::config::EndpointConfig;
use phalanx_ike::{Datagram, EapAnswer, Endpoint, IkeError, IkeSaInfo, IkeSaState, SaEvent};
use phalanx_io::poll::{Interest, PollSet, Waker};

use super::apply::{apply, Notes};
use super::cluster::{ClusterIke, Io};
use super::control::{Command, Failure, IkeStatus, Reply};
use super::eap::{EapBackend, EapRequest};
use super::link::{IkeInbox, ToIke};
use super::sockets::IkeSockets;
use crate::config::ChildRef;
use crate::install::{SaHandle, SaOrigin, SaStore};
use crate::limits::{IKE_HOUSEKEEPING, MAX_IKE_DATAGRAM};

/// Datagrams read from the IKE socket per round at most.
const SOCKET_BURST: usize = 64;

/// Queued worker messages handled per round at most.
const INBOX_BURST: usize = 1024;

/// Flushes per round on a cluster node while the EAP backend answers.
const EAP_ROUNDS: usize = 4;

/// What the IKE thread is built from.
pub struct DriverParts {
    /// The endpoint, configured.
    pub endpoint: Endpoint,
    /// Its sockets.
    pub sockets: IkeSockets,
    /// Messages from the workers.
    pub inbox: IkeInbox,
    /// Commands from the control plane.
    pub commands: Receiver<Command>,
    /// Where SAs are installed.
    pub store: Arc<SaStore>,
    /// Wakes the thread (workers and control share it).
    pub waker: Arc<Waker>,
    /// Where the status is published.
    pub status: Arc<parking_lot::Mutex<IkeStatus>>,
    /// The connections configured at start.
    pub config: EndpointConfig,
    /// The cluster part, on a cluster node.
    pub cluster: Option<ClusterIke>,
    /// The End-Users' EAP passwords.
    pub eap: Arc<crate::config::EapSettings>,
}

/// A connection as the thread needs it: its peer and children.
#[derive(Debug)]
struct ConnInfo {
    remote: Option<SocketAddr>,
    children: Vec<String>,
}

/// An `initiate --wait` in progress.
#[derive(Debug)]
struct Waiter {
    connection: String,
    deadline: Instant,
    reply: SyncSender<Reply>,
}

/// The IKE thread's own counters.
#[derive(Debug, Default)]
struct Stats {
    datagrams_ike_port: u64,
    datagrams_natt: u64,
    recv_errors: u64,
    acquires: u64,
    soft_expiries: u64,
    hard_expiries: u64,
    install_errors: u64,
    commands: u64,
}

/// The IKE thread's state.
pub struct Driver {
    endpoint: Endpoint,
    sockets: IkeSockets,
    inbox: IkeInbox,
    commands: Receiver<Command>,
    store: Arc<SaStore>,
    waker: Arc<Waker>,
    status: Arc<parking_lot::Mutex<IkeStatus>>,
    conns: HashMap<String, ConnInfo>,
    sas: Vec<IkeSaInfo>,
    waiters: Vec<Waiter>,
    hard_reported: HashSet<String>,
    next_housekeeping: Instant,
    notes: Notes,
    stats: Stats,
    buf: Vec<u8>,
    cluster: Option<ClusterIke>,
    eap: EapBackend,
}

impl Driver {
    /// A driver over `parts`.
    pub fn new(parts: DriverParts) -> Driver {
        let mut driver = Driver {
            endpoint: parts.endpoint,
            sockets: parts.sockets,
            inbox: parts.inbox,
            commands: parts.commands,
            store: parts.store,
            waker: parts.waker,
            status: parts.status,
            conns: HashMap::new(),
            sas: Vec::new(),
            waiters: Vec::new(),
            hard_reported: HashSet::new(),
            next_housekeeping: Instant::now(),
            notes: Notes::default(),
            stats: Stats::default(),
            buf: vec![0; MAX_IKE_DATAGRAM],
            cluster: parts.cluster,
            eap: EapBackend::new(parts.eap),
        };
        driver.learn(&parts.config);
        driver
    }

    /// Runs rounds until `stop` is set (and the waker rung).
    pub fn run(mut self, stop: &AtomicBool) {
        // Connections with start_action = "start" queued their messages.
        self.round();
        // The poll set is rebuilt when a reload opens or closes RADIUS
        // sockets.
        while !stop.load(Ordering::Relaxed) {
            let fds = match self.poll_fds() {
                Ok(fds) => fds,
                Err(e) => {
                    tracing::error!(error = %e, "IKE thread cannot poll its sockets; IKE stops");
                    break;
                }
            };
            let mut set = PollSet::with_capacity(fds.len());
            for fd in &fds {
                set.add(fd.as_fd(), Interest::READ);
            }
            if !self.poll_rounds(stop, &mut set) {
                break;
            }
        }
        for waiter in self.waiters.drain(..) {
            let _ = waiter.reply.try_send(Err(Failure::new(
                ErrorCode::INTERNAL,
                "phalanxd is stopping",
            )));
        }
    }

    /// Rounds until `stop` (`true`) or the RADIUS sockets changed
    /// (`true`), or poll failed (`false`).
    fn poll_rounds(&mut self, stop: &AtomicBool, set: &mut PollSet<'_>) -> bool {
        self.eap.fds_changed();
        while !stop.load(Ordering::Relaxed) {
            if self.eap.fds_changed() {
                return true;
            }
            let timeout = self.next_wakeup().saturating_duration_since(Instant::now());
            if let Err(e) = set.wait(Some(timeout)) {
                tracing::error!(error = %e, "IKE thread: poll failed; IKE stops");
                return false;
            }
            self.round();
        }
        true
    }

    /// The waker, the IKE socket, the cluster bridge and the RADIUS
    /// sockets, duplicated so the poll set can hold them while the driver
    /// is used.
    fn poll_fds(&self) -> io::Result<Vec<OwnedFd>> {
        let mut fds = vec![
            self.waker.as_fd().try_clone_to_owned()?,
            self.sockets.ike_fd().try_clone_to_owned()?,
        ];
        if let Some(cluster) = &self.cluster {
            fds.push(cluster.bridge().fd().try_clone_to_owned()?);
        }
        for fd in self.eap.fds() {
            fds.push(fd.try_clone_to_owned()?);
        }
        Ok(fds)
    }

    /// When to wake at the latest: the endpoint's timer, housekeeping, or
    /// a waiter's deadline.
    fn next_wakeup(&mut self) -> Instant {
        let waiters = self.waiters.iter().map(|w| w.deadline);
        self.endpoint
            .poll_timeout()
            .into_iter()
            .chain(self.eap.poll_timeout())
            .chain(waiters)
            .fold(self.next_housekeeping, Instant::min)
    }

    /// One round (module doc).
    fn round(&mut self) {
        // A failed reset only makes the next poll return at once.
        let _ = self.waker.reset();
        let now = Instant::now();
        self.with_cluster(now, ClusterIke::turn);
        self.receive(now);
        self.eap.receive(now, &mut self.buf);
        self.drain_inbox(now);
        self.drain_commands(now);
        if self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
            self.endpoint.handle_timeout(now);
        }
        if self.eap.poll_timeout().is_some_and(|t| t <= now) {
            let rt = self.store.snapshot();
            self.eap.handle_timeout(now, &rt, &self.sas);
        }
        self.flush(now);
        if now >= self.next_housekeeping {
            self.housekeeping(now);
        }
        if self.notes.changed || !self.waiters.is_empty() {
            self.publish();
        }
        self.answer_waiters(now);
        self.stats.install_errors += self.notes.install_errors;
        self.notes = Notes::default();
    }

    /// Datagrams of the IKE socket.
    fn receive(&mut self, now: Instant) {
        let local = self.sockets.ike_local();
        for _ in 0..SOCKET_BURST {
            match self.sockets.recv(&mut self.buf) {
                Ok(Some((len, remote))) => {
                    self.stats.datagrams_ike_port += 1;
                    let admitted = match self.cluster.as_mut() {
                        Some(cluster) => cluster.admit(remote, &self.buf[..len]),
                        None => true,
                    };
                    if !admitted {
                        continue;
                    }
                    let bytes = &self.buf[..len];
                    self.endpoint.handle_datagram(
                        now,
                        Datagram {
                            local,
                            remote,
                            bytes,
                        },
                    );
                }
                Ok(None) => break,
                Err(_) => {
                    self.stats.recv_errors += 1;
                    break;
                }
            }
        }
    }

    /// What the workers queued.
    fn drain_inbox(&mut self, now: Instant) {
        for _ in 0..INBOX_BURST {
            let Ok(message) = self.inbox.rx.try_recv() else {
                return;
            };
            match message {
                ToIke::Datagram {
                    local,
                    remote,
                    bytes,
                } => {
                    self.stats.datagrams_natt += 1;
                    if !self.admit(remote, &bytes) {
                        continue;
                    }
                    self.endpoint.handle_datagram(
                        now,
                        Datagram {
                            local,
                            remote,
                            bytes: &bytes,
                        },
                    );
                }
                ToIke::Acquire { child, trigger } => {
                    self.stats.acquires += 1;
                    tracing::info!(connection = %child.connection, child = %child.child, trigger = ?trigger, "trap: traffic without an SA, starting IKE");
                    self.endpoint
                        .acquire(now, &child.connection, &child.child, trigger);
                }
                ToIke::SoftExpired { spi, outbound } => {
                    self.stats.soft_expiries += 1;
                    if let Some(spi_in) = self.inbound_spi(spi, outbound) {
                        self.endpoint.handle_child_expiry(now, spi_in, false);
                    }
                }
            }
        }
    }

    /// Our inbound SPI of the Child SA an SPI of one direction belongs to.
    fn inbound_spi(&self, spi: u32, outbound: bool) -> Option<u32> {
        if !outbound {
            return Some(spi);
        }
        self.sas
            .iter()
            .flat_map(|sa| &sa.children)
            .find(|c| c.spi_out == spi)
            .map(|c| c.spi_in)
    }

    /// What the control plane queued.
    fn drain_commands(&mut self, now: Instant) {
        loop {
            match self.commands.try_recv() {
                Ok(command) => {
                    self.stats.commands += 1;
                    self.command(now, command);
                }
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return,
            }
        }
    }

    fn command(&mut self, now: Instant, command: Command) {
        match command {
            Command::Initiate {
                connection,
                wait,
                reply,
            } => {
                if let Err(refused) = self.may_initiate(&connection) {
                    let _ = reply.try_send(Err(Failure::new(ErrorCode::IKE_FAILED, refused)));
                    return;
                }
                let result = self.endpoint.initiate(now, &connection);
                tracing::info!(%connection, ok = result.is_ok(), "initiate requested");
                match (result, wait) {
                    (Err(e), _) => {
                        let _ = reply.try_send(Err(refusal(&e)));
                    }
                    (Ok(()), None) => {
                        let _ = reply.try_send(Ok(action(
                            &connection,
                            "queued",
                            "IKE started; `phalanxctl ike` shows its progress",
                        )));
                    }
                    (Ok(()), Some(wait)) => self.waiters.push(Waiter {
                        connection,
                        deadline: now + wait,
                        reply,
                    }),
                }
            }
            Command::Terminate { connection, reply } => {
                let result = self.endpoint.terminate(now, &connection);
                tracing::info!(%connection, ok = result.is_ok(), "terminate requested");
                let answer = result
                    .map(|()| {
                        action(
                            &connection,
                            "terminating",
                            "INFORMATIONAL Delete sent; the SAs are removed",
                        )
                    })
                    .map_err(|e| refusal(&e));
                let _ = reply.try_send(answer);
            }
            Command::Disconnect { peer, reply } => {
                let connections = self.endpoint.disconnect(now, &peer);
                tracing::info!(%peer, ike_sas = connections.len(), "disconnect requested");
                let answer = if connections.is_empty() {
                    Err(Failure::new(
                        ErrorCode::IKE_FAILED,
                        format!(
                            "no established IKE SA of a peer with identity or virtual IP {peer:?}"
                        ),
                    ))
                } else {
                    Ok(action(
                        &connections.join(","),
                        "terminating",
                        &format!(
                            "INFORMATIONAL Delete sent to {peer} ({} IKE SAs)",
                            connections.len()
                        ),
                    ))
                };
                let _ = reply.try_send(answer);
            }
            Command::Reconfigure(mut config, eap) => {
                self.eap.reconfigure(eap);
                self.learn(&config);
                if let Some(cluster) = &mut self.cluster {
                    cluster.reconfigure(&mut config);
                }
                self.endpoint.reconfigure(*config, now);
                self.notes.changed = true;
                tracing::info!(connections = self.conns.len(), "IKE configuration applied");
            }
        }
    }

    /// Remembers each connection's peer and children.
    fn learn(&mut self, config: &EndpointConfig) {
        self.conns = config
            .connections
            .iter()
            .map(|c| {
                let info = ConnInfo {
                    remote: c.remote_addr.map(|ip| SocketAddr::new(ip, c.remote_port)),
                    children: c.children.iter().map(|ch| ch.name.clone()).collect(),
                };
                (c.name.clone(), info)
            })
            .collect();
    }

    /// SA events into the data plane, then datagrams out (make-before-break:
    /// an inbound SA is installed before the message announcing it leaves).
    fn flush(&mut self, now: Instant) {
        // RADIUS's answers first: they release deferred IKE_AUTH responses
        // (on a cluster, of the IKE SAs this node runs).
        while let Some((ike_sa, answer)) = self.eap.poll_answer() {
            self.endpoint.handle_eap(now, ike_sa, answer);
        }
        if self.cluster.is_some() {
            // EAP answers make new events: flush until none is left (an
            // exchange needs one round per message; a few are plenty).
            for _ in 0..EAP_ROUNDS {
                self.with_cluster(now, |cluster, now, io| cluster.flush(now, io, true));
                let requests = self
                    .cluster
                    .as_mut()
                    .map(ClusterIke::take_eap_requests)
                    .unwrap_or_default();
                let mut answered = false;
                for event in &requests {
                    if let Some((ike_sa, answer)) = self.answer_eap(now, event) {
                        self.endpoint.handle_eap(now, ike_sa, answer);
                        answered = true;
                    }
                }
                if !answered {
                    break;
                }
            }
            self.eap.transmit();
            return;
        }
        let peers: HashMap<String, String> = self.peers();
        let peer = |name: &str| peers.get(name).cloned().unwrap_or_else(|| "any".to_owned());
        let mut sampled = false;
        while let Some(event) = self.endpoint.poll_event() {
            match &event {
                SaEvent::EapRequest { .. } => {
                    if let Some((ike_sa, answer)) = self.answer_eap(now, &event) {
                        self.endpoint.handle_eap(now, ike_sa, answer);
                    }
                    continue;
                }
                SaEvent::RemoveInbound { .. } | SaEvent::RemoveOutbound { .. } if !sampled => {
                    // Accounting reads the counters of Child SAs before
                    // they go (the IKE SAs listed are the last published).
                    sampled = true;
                    let rt = self.store.snapshot();
                    self.eap.before_removal(&rt, &self.sas);
                }
                SaEvent::IkeSaUp {
                    ike_spi_i,
                    ike_spi_r,
                    virtual_ips,
                    ..
                } => self
                    .eap
                    .ike_up(now, spi_pair(ike_spi_i, ike_spi_r), virtual_ips),
                SaEvent::IkeSaRekeyed {
                    old_spis, new_spis, ..
                } => self.eap.ike_rekeyed(
                    spi_pair(&old_spis.0, &old_spis.1),
                    spi_pair(&new_spis.0, &new_spis.1),
                ),
                SaEvent::IkeSaDown {
                    ike_spi_i,
                    ike_spi_r,
                    reason,
                    ..
                } => self
                    .eap
                    .ike_down(now, spi_pair(ike_spi_i, ike_spi_r), reason),
                _ => {}
            }
            apply(&self.store, event, now, &mut self.notes, &peer);
        }
        while let Some(transmit) = self.endpoint.poll_transmit() {
            self.sockets.send(&transmit);
        }
        self.eap.transmit();
    }

    /// The EAP backend's immediate answer to an `EapRequest` event: (IKE
    /// SA, answer), or `None` (discarded, or RADIUS answers later).
    fn answer_eap(&mut self, now: Instant, event: &SaEvent) -> Option<(u64, EapAnswer)> {
        let SaEvent::EapRequest {
            connection,
            ike_sa,
            peer_id,
            local,
            remote,
            message,
        } = event
        else {
            return None;
        };
        let request = EapRequest {
            connection,
            ike_sa: *ike_sa,
            peer_id,
            local: *local,
            remote: *remote,
            message,
        };
        self.eap
            .request(now, &request)
            .map(|answer| (*ike_sa, answer))
    }

    /// Runs `step` of the cluster part with the thread's endpoint, sockets
    /// and store (nothing on a single gateway).
    fn with_cluster(
        &mut self,
        now: Instant,
        step: impl FnOnce(&mut ClusterIke, Instant, &mut Io<'_>),
    ) {
        if self.cluster.is_none() {
            return;
        }
        let peers = self.peers();
        let peer = |name: &str| peers.get(name).cloned().unwrap_or_else(|| "any".to_owned());
        let Some(cluster) = self.cluster.as_mut() else {
            return;
        };
        let mut io = Io {
            endpoint: &mut self.endpoint,
            sockets: &mut self.sockets,
            store: &self.store,
            notes: &mut self.notes,
            peer: &peer,
        };
        step(cluster, now, &mut io);
    }

    /// Whether a received datagram goes to the endpoint: always on a
    /// single gateway; on a cluster node, see [`ClusterIke::admit`].
    fn admit(&mut self, remote: SocketAddr, bytes: &[u8]) -> bool {
        self.cluster
            .as_mut()
            .is_none_or(|cluster| cluster.admit(remote, bytes))
    }

    /// On a cluster node, only the owner of the peer's segment initiates.
    fn may_initiate(&self, connection: &str) -> Result<(), String> {
        let Some(cluster) = &self.cluster else {
            return Ok(());
        };
        let peer = self
            .conns
            .get(connection)
            .and_then(|c| c.remote)
            .map(|r| r.ip());
        match self.conns.get(connection) {
            None => Ok(()),
            Some(_) => cluster.may_initiate(peer),
        }
    }

    /// Each connection's peer: where its IKE SA runs, else the configured
    /// address.
    fn peers(&self) -> HashMap<String, String> {
        let mut out: HashMap<String, String> = self
            .conns
            .iter()
            .filter_map(|(name, c)| c.remote.map(|r| (name.clone(), r.to_string())))
            .collect();
        for sa in &self.sas {
            out.insert(sa.connection.clone(), sa.remote.to_string());
        }
        out
    }

    /// The periodic work: the wall clock for certificate checks, the
    /// data plane's hard-expired SAs.
    fn housekeeping(&mut self, now: Instant) {
        self.next_housekeeping = now + IKE_HOUSEKEEPING;
        if let Ok(since) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
            self.endpoint
                .set_wall_clock(now, UnixTime::since_unix_epoch(since));
        }
        self.hard_expiry(now);
        self.notes.changed = true;
    }

    /// SAs the data plane refuses to use any more (a hard byte, packet or
    /// time limit, RFC 4301 §4.4.2.1) are reported to IKE once.
    fn hard_expiry(&mut self, now: Instant) {
        let rt = self.store.snapshot();
        let mut expired = Vec::new();
        for sa in rt
            .sas
            .iter()
            .filter(|sa| matches!(sa.origin, SaOrigin::Ike(_)))
        {
            let (hard, spi, outbound) = match &sa.handle {
                SaHandle::Inbound(s) => (s.usage.is_hard_expired(), s.spi(), false),
                SaHandle::Outbound { sa: s, .. } => (s.usage.is_hard_expired(), s.spi(), true),
            };
            if hard && self.hard_reported.insert(sa.config.name.clone()) {
                expired.push((spi, outbound));
            }
        }
        let live: HashSet<&str> = rt.sas.iter().map(|sa| sa.config.name.as_str()).collect();
        self.hard_reported
            .retain(|name| live.contains(name.as_str()));
        for (spi, outbound) in expired {
            self.stats.hard_expiries += 1;
            if let Some(spi_in) = self.inbound_spi(spi, outbound) {
                self.endpoint.handle_child_expiry(now, spi_in, true);
            }
        }
        self.flush(now);
    }

    /// Publishes the IKE SAs and counters for the control socket.
    fn publish(&mut self) {
        self.sas = self.endpoint.ike_sas();
        // EAP sessions of IKE SAs that are gone (our SPI is one of the two).
        let spis: HashSet<u64> = self
            .sas
            .iter()
            .flat_map(|sa| [u64::from_be_bytes(sa.spi_i), u64::from_be_bytes(sa.spi_r)])
            .collect();
        self.eap.retain(|spi| spis.contains(&spi));
        let daemon = self.daemon_counters();
        let mut status = self.status.lock();
        status.sas = self.sas.clone();
        status.counters = self.endpoint.counters().clone();
        status.daemon = daemon;
        status.pools = self.endpoint.pool_usage();
        status.eap_methods = self.eap.methods();
    }

    fn daemon_counters(&self) -> Vec<NamedCounter> {
        let s = &self.stats;
        let named = |name: &str, count: u64| NamedCounter {
            name: name.to_owned(),
            count,
        };
        let mut out = vec![
            named("ike_port_datagrams", s.datagrams_ike_port),
            named("ike_natt_datagrams", s.datagrams_natt),
            named("ike_recv_errors", s.recv_errors),
            named("ike_send_errors", self.sockets.send_errors),
            named("ike_no_socket", self.sockets.no_socket),
            named("ike_queue_full", self.inbox.dropped.load(Ordering::Relaxed)),
            named("ike_acquires", s.acquires),
            named("ike_soft_expiries", s.soft_expiries),
            named("ike_hard_expiries", s.hard_expiries),
            named(
                "ike_install_errors",
                s.install_errors + self.notes.install_errors,
            ),
            named("ike_control_commands", s.commands),
        ];
        if let Some(cluster) = &self.cluster {
            out.extend(cluster.named());
        }
        out.extend(self.eap.counters());
        out
    }

    /// Answers the `initiate --wait` whose connection is up, failed, or
    /// out of time.
    fn answer_waiters(&mut self, now: Instant) {
        if self.waiters.is_empty() {
            return;
        }
        let waiters = std::mem::take(&mut self.waiters);
        for waiter in waiters {
            let failure = self
                .notes
                .failures
                .iter()
                .find(|(c, _)| *c == waiter.connection);
            let answer = if let Some((_, reason)) = failure {
                Some(Err(Failure::new(ErrorCode::IKE_FAILED, reason.clone())))
            } else if self.is_up(&waiter.connection) {
                Some(Ok(action(
                    &waiter.connection,
                    "established",
                    "the IKE SA and its Child SAs are up",
                )))
            } else if now >= waiter.deadline {
                Some(Err(Failure::new(
                    ErrorCode::TIMED_OUT,
                    format!("{}: not up yet (see `phalanxctl ike`)", waiter.connection),
                )))
            } else {
                None
            };
            match answer {
                Some(answer) => {
                    let _ = waiter.reply.try_send(answer);
                }
                None => self.waiters.push(waiter),
            }
        }
    }

    /// Whether `connection` has an established IKE SA and every one of its
    /// children has its outbound SA in the data plane.
    fn is_up(&self, connection: &str) -> bool {
        let Some(conn) = self.conns.get(connection) else {
            return false;
        };
        let established = self.sas.iter().any(|sa| {
            sa.connection == connection
                && matches!(sa.state, IkeSaState::Established | IkeSaState::Rekeying)
        });
        let rt = self.store.snapshot();
        established
            && conn.children.iter().all(|child| {
                let key = ChildRef {
                    connection: connection.to_owned(),
                    child: child.clone(),
                };
                rt.slots
                    .get(&key)
                    .is_some_and(|slot| slot.current.is_some())
            })
    }
}

fn action(connection: &str, outcome: &str, message: &str) -> ActionResult {
    ActionResult {
        connection: connection.to_owned(),
        outcome: outcome.to_owned(),
        message: message.to_owned(),
    }
}

/// A refused command's error for `phalanxctl`.
fn refusal(e: &IkeError) -> Failure {
    let code = match e {
        IkeError::UnknownConnection(_) => ErrorCode::UNKNOWN_CONNECTION,
        _ => ErrorCode::IKE_FAILED,
    };
    Failure::new(code, e.to_string())
}

/// An IKE SA's SPIs as numbers (initiator, responder).
fn spi_pair(spi_i: &[u8; 8], spi_r: &[u8; 8]) -> (u64, u64) {
    (u64::from_be_bytes(*spi_i), u64::from_be_bytes(*spi_r))
}
