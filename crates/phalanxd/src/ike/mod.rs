//! IKEv2 in the daemon: one thread owns the sans-IO `phalanx_ike::Endpoint`
//! ([`driver`]) and connects it to the world.
//!
//! ```text
//!   UDP :500 (own socket) ───────────────┐
//!   workers' UDP :4500 ── non-ESP marker ─┤ link: bounded queue + waker
//!   trap policy without SA ── acquire ────┤ (a worker never waits)
//!   SA soft limits ── lifetime event ─────┤
//!   control socket ── initiate/terminate ─┤ commands: bounded, answered
//!   reload ── reconfigure ────────────────┘ within a bounded wait
//!                     │
//!               IKE thread: Endpoint (time = Instant::now())
//!                     │ poll_event  → SaStore (install before send)
//!                     │ poll_transmit → :500, or :4500 with the marker
//!                     └ status → control socket, metrics
//! ```
//!
//! Sockets: the IKE port (500) is bound before privileges are dropped
//! ([`open_socket`]); IKE on the NAT-T port (RFC 7296 §2.23) arrives at the
//! workers' `SO_REUSEPORT` sockets, which forward it ([`link`]), and is
//! sent through a duplicate of a worker's socket descriptor ([`sockets`]).
//! Randomness: one ChaCha20 generator seeded from the OS (`getrandom`) at
//! start, handed to the endpoint; nothing else in the daemon draws IKE
//! randomness.

pub mod apply;
pub mod cluster;
pub mod control;
pub mod driver;
pub mod eap;
pub mod link;
pub mod report;
pub mod sockets;

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::OwnedFd;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Instant, SystemTime};

use phalanx_ike::auth::UnixTime;
use phalanx_ike::config::EndpointConfig;
use phalanx_ike::Endpoint;
use phalanx_io::poll::Waker;
use rand_chacha::ChaCha20Rng;
use rand_core::{OsRng, SeedableRng};

pub use cluster::{ClusterIke, ClusterIkeParts};
pub use control::{Failure, IkeControl, IkeStatus};
pub use link::{ToIke, WorkerLink};

use crate::config::{Config, IkeSettings};
use crate::install::SaStore;
use crate::limits::{IKE_CONTROL_QUEUE, IKE_QUEUE_CAPACITY};
use driver::{Driver, DriverParts};
use sockets::IkeSockets;

/// Binds the IKE socket of `config` (before privileges are dropped), or
/// `None` when IKE is off.
pub fn open_socket(config: &Config) -> io::Result<Option<UdpSocket>> {
    let Some(ike) = &config.ike else {
        return Ok(None);
    };
    let bind = SocketAddr::new(config.protected.local, ike.port);
    let opened = match config.cluster {
        Some(_) => sockets::open_ike_socket_freebind(bind),
        None => sockets::open_ike_socket(bind),
    };
    opened
        .map(Some)
        .map_err(|e| io::Error::new(e.kind(), format!("IKE socket {bind}: {e}")))
}

/// The running IKE thread.
#[derive(Debug)]
pub struct IkeThread {
    thread: Option<JoinHandle<()>>,
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    /// The control plane's handle.
    pub control: IkeControl,
    /// What the workers send on.
    pub link: WorkerLink,
}

impl IkeThread {
    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // If the wake fails the thread notices at its next timeout.
        let _ = self.waker.wake();
        if let Some(thread) = self.thread.take() {
            // A panic was caught and logged inside the thread.
            let _ = thread.join();
        }
    }
}

/// An endpoint for `config` with a fresh RNG seeded from the OS and the
/// wall clock set.
pub fn build_endpoint(config: EndpointConfig, now: Instant) -> io::Result<Endpoint> {
    let rng = ChaCha20Rng::from_rng(OsRng)
        .map_err(|e| io::Error::other(format!("seeding the IKE RNG: {e}")))?;
    let mut endpoint = Endpoint::new(
        config,
        phalanx_crypto::default_provider(),
        Box::new(rng),
        now,
    );
    if let Ok(since) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        endpoint.set_wall_clock(now, UnixTime::since_unix_epoch(since));
    }
    Ok(endpoint)
}

/// Starts the IKE thread for `settings`: `socket` is the IKE port's,
/// `natt` a duplicate of a worker's NAT-T socket (send only) on `natt_port`;
/// `cluster` on a cluster node (the endpoint then replicates its state,
/// and connections with `start_action = "start"` are started by their
/// owner, not at once: [`cluster::ClusterIke`]).
pub fn spawn(
    settings: &IkeSettings,
    socket: UdpSocket,
    natt: Option<OwnedFd>,
    natt_port: u16,
    store: Arc<SaStore>,
    cluster: Option<ClusterIkeParts>,
) -> io::Result<IkeThread> {
    let now = Instant::now();
    let mut config = settings.endpoint.clone();
    let partition = cluster.as_ref().map(|parts| parts.pool_partition);
    let cluster = cluster.map(|parts| {
        let starts = cluster::take_starts(&mut config);
        ClusterIke::new(parts, config.clone(), starts, now)
    });
    let mut endpoint = build_endpoint(config, now)?;
    if let Some(partition) = partition {
        endpoint.set_ha_replication(now, true);
        endpoint.set_pool_partition(partition);
    }
    let waker = Arc::new(Waker::new()?);
    let (link, inbox) = link::channel(IKE_QUEUE_CAPACITY, Arc::clone(&waker));
    let (tx, commands) = mpsc::sync_channel(IKE_CONTROL_QUEUE);
    let status = Arc::new(parking_lot::Mutex::new(IkeStatus::default()));
    let control = IkeControl::new(tx, Arc::clone(&waker), Arc::clone(&status));
    let driver = Driver::new(DriverParts {
        endpoint,
        sockets: IkeSockets::new(socket, natt, natt_port)?,
        inbox,
        commands,
        store,
        waker: Arc::clone(&waker),
        status,
        config: settings.endpoint.clone(),
        cluster,
        eap: Arc::clone(&settings.eap),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let stop = Arc::clone(&stop);
        thread::Builder::new().name("phalanx-ike".into()).spawn(move || {
            // The data plane runs on without IKE; say so at once rather
            // than at exit (nothing a peer sends may panic phalanx-ike, so
            // this is a bug to report).
            if panic::catch_unwind(AssertUnwindSafe(|| driver.run(&stop))).is_err() {
                tracing::error!("the IKE thread panicked: no IKE until phalanxd restarts (installed SAs keep working until they expire)");
            }
        })?
    };
    Ok(IkeThread {
        thread: Some(thread),
        waker,
        stop,
        control,
        link,
    })
}
