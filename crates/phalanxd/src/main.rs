//! `phalanxd --config FILE`: the Phalanx IPsec gateway daemon.
//!
//! Start-up order (each step before the next, see PRIVILEGES.md): read and
//! validate the file (errors name file, line and field; exit 2) → install
//! the SAs and policies → open the TUN queues, UDP sockets, raw socket and
//! the IKE socket (port 500) → register SIGHUP/SIGTERM/SIGINT → drop every
//! privilege (still single threaded) → start the IKE thread, the control
//! socket, metrics and the workers → wait for signals. With `[cluster]`
//! the devices are the cluster worker's (AF_PACKET rings on both sides,
//! one TUN queue, sockets bound to the outside virtual address) and, after
//! the drop, the cluster thread starts (the static SAs registered with
//! it), then the IKE thread when the file configures IKE (its socket on
//! the outside virtual address, `IP_FREEBIND`; its state replicated through
//! the cluster thread), then the one cluster worker instead of the
//! host-mode workers. SIGHUP reloads the file (a broken file changes nothing);
//! SIGTERM/SIGINT stop the workers, remove the control socket, and close
//! the TUN device (which removes it). The daemon never forks: it runs in
//! the foreground and logs to stderr (run it under systemd or a script).

use std::error::Error;
use std::io::IsTerminal;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use phalanx_wire::ethernet::MacAddress;
use phalanxd::cluster::{ClusterHandle, REALTIME_PRIORITY};
use phalanxd::config::{ClusterSettings, ClusterSide, Config, LogFormat};
use phalanxd::control::{self, ControlHandler};
use phalanxd::daemon::Daemon;
use phalanxd::dataplane::cluster::worker::{
    ClusterDevices, ClusterLink, ClusterWorkerHandle, ClusterWorkerSettings,
};
use phalanxd::dataplane::cluster::{self, VirtualSide};
use phalanxd::dataplane::worker::{self, WorkerDevices, WorkerHandle, WorkerSettings};
use phalanxd::dataplane::StatsSlot;
use phalanxd::ike::WorkerLink;
use phalanxd::{devices, ike, metrics, privileges};

/// Command line.
#[derive(Debug, Parser)]
#[command(name = "phalanxd", version, about = "Phalanx IPsec gateway daemon")]
struct Args {
    /// The configuration file (TOML; see CONFIG.md).
    #[arg(long, short = 'c', value_name = "FILE")]
    config: PathBuf,
    /// Only validate the configuration file, then exit (0: valid).
    #[arg(long)]
    check: bool,
    /// Run in the foreground (always the case; accepted for scripts).
    #[arg(long)]
    foreground: bool,
    /// Log line format, overriding `[daemon] log_format`.
    #[arg(long, value_enum)]
    log_format: Option<LogFormatArg>,
}

/// `--log-format`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let config = match Config::load(&args.config) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("phalanxd: {e}");
            return ExitCode::from(2);
        }
    };
    if args.check {
        let connections = config
            .ike
            .as_ref()
            .map_or(0, |i| i.endpoint.connections.len());
        println!(
            "{}: OK ({} SAs, {} policies, {connections} IKE connections)",
            args.config.display(),
            config.sas.len(),
            config.policies.len()
        );
        return ExitCode::SUCCESS;
    }
    init_logging(&config, args.log_format);
    match run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("phalanxd: {e}");
            ExitCode::from(1)
        }
    }
}

/// Structured logs on stderr; `RUST_LOG` overrides the configured filter.
fn init_logging(config: &Config, format: Option<LogFormatArg>) {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| config.daemon.log.clone());
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let json = match format {
        Some(LogFormatArg::Json) => true,
        Some(LogFormatArg::Text) => false,
        None => config.daemon.log_format == LogFormat::Json,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// Messages each way between the IKE and the cluster thread.
const IKE_BRIDGE_QUEUE: usize = 4096;

/// How long stopping waits for the cluster thread to leave its group.
const CLUSTER_STOP_WAIT: Duration = Duration::from_secs(2);

/// The devices, opened before privileges are dropped.
enum Devices {
    /// Host mode: one set per worker.
    Host(Vec<WorkerDevices>),
    /// Cluster mode: the one cluster worker's.
    Cluster(Box<ClusterDevices>),
}

/// The running data plane.
enum DataPlane {
    /// Host mode: the workers.
    Host(Vec<WorkerHandle>),
    /// Cluster mode: the cluster worker and the cluster thread.
    Cluster {
        worker: ClusterWorkerHandle,
        thread: Arc<ClusterHandle>,
    },
}

impl DataPlane {
    /// The workers' counter slots.
    fn stats(&self) -> Vec<Arc<StatsSlot>> {
        match self {
            DataPlane::Host(handles) => handles.iter().map(|h| Arc::clone(&h.stats)).collect(),
            DataPlane::Cluster { worker, .. } => vec![Arc::clone(&worker.stats)],
        }
    }

    /// Stops everything (the stop flag is set) and waits for it.
    fn stop(self) {
        match self {
            DataPlane::Host(handles) => {
                for handle in &handles {
                    handle.wake();
                }
                for handle in handles {
                    handle.join();
                }
            }
            DataPlane::Cluster { worker, thread } => {
                worker.wake();
                worker.join();
                // The daemon holds the handle too (for `phalanxctl
                // cluster`): stop the thread and give it a moment to
                // leave the Corosync group.
                thread.stop();
                let deadline = Instant::now() + CLUSTER_STOP_WAIT;
                while thread.is_running() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
    }
}

/// Opens the data plane's devices: host-mode workers', or with
/// `[cluster]` the cluster worker's.
fn open_devices(config: &Config) -> Result<Devices, Box<dyn Error>> {
    Ok(match &config.cluster {
        Some(cluster) => Devices::Cluster(Box::new(devices::open_cluster(config, cluster)?)),
        None => Devices::Host(devices::open(config, devices::worker_count(config))?),
    })
}

/// Runs the daemon until SIGTERM or SIGINT.
fn run(config: Config) -> Result<(), Box<dyn Error>> {
    let daemon = Arc::new(Daemon::new(config.clone())?);
    let opened = open_devices(&config)?;
    let sides = match &config.cluster {
        Some(cluster) => Some(cluster_sides(cluster)?),
        None => None,
    };
    let mut ike_socket = ike::open_socket(&config)?;
    let mut signals = Signals::new([SIGHUP, SIGTERM, SIGINT])?;
    let account = match config.daemon.user.as_deref() {
        Some(name) => Some(privileges::account(name)?),
        None => None,
    };
    if let Some(account) = &account {
        privileges::prepare_socket_dir(&config.daemon.control_socket, account)?;
    }
    if config.cluster.is_some() {
        // The cluster thread runs SCHED_FIFO so that load never delays its
        // heartbeats. Capabilities are per thread and must go before any
        // other thread exists, so this thread takes the policy now (with
        // CAP_SYS_NICE, PRIVILEGES.md), the cluster thread inherits it
        // right after the drop, and this thread then gives it up.
        if let Err(e) = phalanx_io::sched::set_realtime(REALTIME_PRIORITY as i32) {
            tracing::warn!(error = %e, "the cluster thread will not run SCHED_FIFO (needs CAP_SYS_NICE)");
        }
    }
    let dropped = privileges::drop_all(account.as_ref())?;
    let stop = Arc::new(AtomicBool::new(false));
    let cluster = match &config.cluster {
        Some(settings) => {
            let started = start_cluster_thread(&config, settings, ike_socket.is_some(), &stop);
            // Every thread started from here on runs at normal priority.
            phalanx_io::sched::set_normal()?;
            Some(started?)
        }
        None => None,
    };
    tracing::info!(user = ?dropped.user, capabilities_before = dropped.had, "privileges dropped: no capability kept");
    let mut ike = match (
        ike_socket.take_if(|_| matches!(opened, Devices::Host(_))),
        &config.ike,
        &opened,
    ) {
        (Some(socket), Some(settings), Devices::Host(opened)) => {
            // Send-only duplicate of a worker's NAT-T socket (RFC 7296 §2.23).
            let natt = match opened.first() {
                Some(d) => Some(d.udp.as_fd().try_clone_to_owned()?),
                None => None,
            };
            let store = Arc::clone(daemon.store());
            let thread = ike::spawn(
                settings,
                socket,
                natt,
                config.protected.udp_port,
                store,
                None,
            )?;
            daemon.attach_ike(thread.control.clone());
            Some(thread)
        }
        _ => None,
    };
    let handler: Arc<dyn ControlHandler> = daemon.clone();
    let control =
        control::serve(Arc::clone(&handler), &config.daemon.control_socket).map_err(|e| {
            format!(
                "control socket {}: {e}",
                config.daemon.control_socket.display()
            )
        })?;
    let metrics = match config.daemon.metrics {
        Some(addr) => Some(
            metrics::serve(Arc::clone(&handler), addr)
                .map_err(|e| format!("metrics on {addr}: {e}"))?,
        ),
        None => None,
    };
    let plane = match opened {
        Devices::Host(opened) => {
            let link = ike.as_ref().map(|t| t.link.clone());
            DataPlane::Host(start_workers(&config, &daemon, opened, &stop, link)?)
        }
        Devices::Cluster(devices) => {
            // `sides` is Some exactly when `[cluster]` is (above).
            let sides = sides.ok_or("cluster sides missing")?;
            let started = cluster.ok_or("cluster thread missing")?;
            let (plane, thread) = start_cluster(
                &config,
                &daemon,
                *devices,
                sides,
                started,
                &stop,
                ike_socket.take(),
            )?;
            ike = thread;
            plane
        }
    };
    daemon.attach_workers(plane.stats());
    tracing::info!(
        config = %config.path.display(),
        workers = plane.stats().len(),
        cluster_node = config.cluster.as_ref().map(|c| c.node_id.0),
        tun = %config.clear.tun,
        local = %config.protected.local,
        udp_port = config.protected.udp_port,
        raw_esp = config.protected.raw_esp,
        sas = config.sas.len(),
        policies = config.policies.len(),
        ike_port = config.ike.as_ref().map(|i| i.port),
        connections = config.ike.as_ref().map_or(0, |i| i.endpoint.connections.len()),
        "phalanxd running"
    );
    for signal in signals.forever() {
        match signal {
            SIGHUP => reload(&daemon),
            _ => {
                tracing::info!(signal, "stopping");
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    plane.stop();
    if let Some(ike) = ike {
        ike.stop();
    }
    drop(metrics);
    drop(control);
    tracing::info!("stopped");
    Ok(())
}

/// Starts the host-mode workers, one per device set.
fn start_workers(
    config: &Config,
    daemon: &Daemon,
    opened: Vec<WorkerDevices>,
    stop: &Arc<AtomicBool>,
    link: Option<WorkerLink>,
) -> Result<Vec<WorkerHandle>, Box<dyn Error>> {
    let mut handles = Vec::with_capacity(opened.len());
    for (index, devices) in opened.into_iter().enumerate() {
        let settings = WorkerSettings {
            index,
            local: config.protected.local,
            udp_port: config.protected.udp_port,
            mtu: config.clear.mtu,
            crypto_threads: config.daemon.crypto_threads,
            fragment: config.protected.fragment,
        };
        handles.push(worker::spawn(
            settings,
            devices,
            Arc::clone(daemon.store()),
            Arc::clone(stop),
            link.clone(),
        )?);
    }
    Ok(handles)
}

/// The cluster thread, started, and the IKE thread's end of their bridge
/// (when the file configures IKE).
struct ClusterThread {
    handle: ClusterHandle,
    ike_end: Option<ike::cluster::bridge::IkeEnd>,
}

/// Cluster mode, before the drop: the cluster thread (Corosync,
/// heartbeats; the static SAs registered), with a bridge for the IKE
/// thread when `ike` (the file configures IKE and its socket is open).
fn start_cluster_thread(
    config: &Config,
    settings: &phalanxd::config::ClusterSettings,
    ike: bool,
    stop: &Arc<AtomicBool>,
) -> Result<ClusterThread, Box<dyn Error>> {
    let descriptors = cluster::sa_descriptors(&config.sas);
    let bridges = match (&config.ike, ike) {
        (Some(_), true) => Some(ike::cluster::bridge::channel(IKE_BRIDGE_QUEUE)?),
        _ => None,
    };
    let (ike_end, cluster_end) = match bridges {
        Some((ike_end, cluster_end)) => (Some(ike_end), Some(cluster_end)),
        None => (None, None),
    };
    let handle =
        phalanxd::cluster::spawn_with_ike(settings, descriptors, Arc::clone(stop), cluster_end)
            .map_err(|e| format!("cluster thread: {e}"))?;
    Ok(ClusterThread { handle, ike_end })
}

/// Cluster mode, after the drop: the IKE thread when the file configures
/// IKE (`ike_socket`: the IKE port's, on the virtual address), then the
/// cluster worker reading the cluster's state (`started`) and handing IKE
/// messages on.
fn start_cluster(
    config: &Config,
    daemon: &Daemon,
    devices: ClusterDevices,
    (inside, outside): (VirtualSide, VirtualSide),
    started: ClusterThread,
    stop: &Arc<AtomicBool>,
    ike_socket: Option<std::net::UdpSocket>,
) -> Result<(DataPlane, Option<ike::IkeThread>), Box<dyn Error>> {
    let settings = config.cluster.as_ref().ok_or("no [cluster]")?;
    let ClusterThread { handle, ike_end } = started;
    let thread = Arc::new(handle);
    daemon.attach_cluster(Arc::clone(&thread));
    let ike_thread = match (&config.ike, ike_socket, ike_end) {
        (Some(ike_settings), Some(socket), Some(bridge)) => {
            // Send-only duplicate of the ESP socket on the virtual address
            // (RFC 7296 §2.23: IKE on the NAT-T port).
            let natt = devices.udp.as_fd().try_clone_to_owned()?;
            let parts = ike::ClusterIkeParts {
                local: settings.node_id,
                shared: Arc::clone(&thread.shared),
                bridge,
                pool_partition: settings.pool_partition(),
            };
            let store = Arc::clone(daemon.store());
            let port = config.protected.udp_port;
            let t = ike::spawn(ike_settings, socket, Some(natt), port, store, Some(parts))?;
            daemon.attach_ike(t.control.clone());
            Some(t)
        }
        _ => None,
    };
    let link = ClusterLink {
        shared: Arc::clone(&thread.shared),
        reports: thread.report_sender(),
        ike: ike_thread
            .as_ref()
            .zip(config.ike.as_ref())
            .map(|(t, s)| (t.link.clone(), s.port)),
    };
    let worker_settings = ClusterWorkerSettings {
        local: settings.node_id,
        scheme: settings.scheme,
        inside,
        outside,
        udp_port: config.protected.udp_port,
        mtu: config.clear.mtu,
        crypto_threads: config.daemon.crypto_threads,
        fragment: config.protected.fragment,
    };
    let store = Arc::clone(daemon.store());
    let worker = cluster::worker::spawn(worker_settings, devices, store, link, Arc::clone(stop))?;
    tracing::info!(
        node = settings.node_id.0,
        scheme = %settings.scheme,
        inside = %inside.addresses,
        outside = %outside.addresses,
        "cluster data plane running (one worker)"
    );
    Ok((DataPlane::Cluster { worker, thread }, ike_thread))
}

/// Both sides' virtual addresses with this node's own MACs (read before
/// privileges are dropped).
fn cluster_sides(cluster: &ClusterSettings) -> Result<(VirtualSide, VirtualSide), Box<dyn Error>> {
    let side = |side: &ClusterSide| -> Result<VirtualSide, Box<dyn Error>> {
        Ok(VirtualSide {
            addresses: side.addresses,
            mac: MacAddress(side.mac),
            own_mac: devices::interface_mac(&side.interface)?,
        })
    };
    Ok((side(&cluster.inside)?, side(&cluster.outside)?))
}

/// SIGHUP: re-read the file; a broken file changes nothing.
fn reload(daemon: &Daemon) {
    match daemon.reload_file() {
        Ok(summary) => tracing::info!(
            added = ?summary.added,
            changed = ?summary.changed,
            removed = ?summary.removed,
            unchanged = summary.unchanged,
            "configuration reloaded (SIGHUP)"
        ),
        Err(e) => tracing::error!("reload refused, nothing changed: {e}"),
    }
}
