//! `phalanxd --config FILE`: the Phalanx IPsec gateway daemon.
//!
//! Start-up order (each step before the next, see PRIVILEGES.md): read and
//! validate the file (errors name file, line and field; exit 2) → install
//! the SAs and policies → open the TUN queues, UDP sockets, raw socket and
//! the IKE socket (port 500) → register SIGHUP/SIGTERM/SIGINT → drop every
//! privilege (still single threaded) → start the IKE thread, the control
//! socket, metrics and the workers → wait for signals. SIGHUP reloads the file (a broken file changes nothing);
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

use clap::{Parser, ValueEnum};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use phalanxd::config::{Config, LogFormat};
use phalanxd::control::{self, ControlHandler};
use phalanxd::daemon::Daemon;
use phalanxd::dataplane::worker::{self, WorkerSettings};
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

/// Runs the daemon until SIGTERM or SIGINT.
fn run(config: Config) -> Result<(), Box<dyn Error>> {
    let workers = devices::worker_count(&config);
    let daemon = Arc::new(Daemon::new(config.clone())?);
    let opened = devices::open(&config, workers)?;
    let ike_socket = ike::open_socket(&config)?;
    let mut signals = Signals::new([SIGHUP, SIGTERM, SIGINT])?;
    let account = match config.daemon.user.as_deref() {
        Some(name) => Some(privileges::account(name)?),
        None => None,
    };
    if let Some(account) = &account {
        privileges::prepare_socket_dir(&config.daemon.control_socket, account)?;
    }
    let dropped = privileges::drop_all(account.as_ref())?;
    tracing::info!(user = ?dropped.user, capabilities_before = dropped.had, "privileges dropped: no capability kept");
    let ike = match (ike_socket, &config.ike) {
        (Some(socket), Some(settings)) => {
            // Send-only duplicate of a worker's NAT-T socket (RFC 7296 §2.23).
            let natt = match opened.first() {
                Some(d) => Some(d.udp.as_fd().try_clone_to_owned()?),
                None => None,
            };
            let store = Arc::clone(daemon.store());
            let thread = ike::spawn(settings, socket, natt, config.protected.udp_port, store)?;
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
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::with_capacity(opened.len());
    for (index, devices) in opened.into_iter().enumerate() {
        let settings = WorkerSettings {
            index,
            local: config.protected.local,
            udp_port: config.protected.udp_port,
            mtu: config.clear.mtu,
            crypto_threads: config.daemon.crypto_threads,
        };
        handles.push(worker::spawn(
            settings,
            devices,
            Arc::clone(daemon.store()),
            Arc::clone(&stop),
            ike.as_ref().map(|t| t.link.clone()),
        )?);
    }
    daemon.attach_workers(handles.iter().map(|h| Arc::clone(&h.stats)).collect());
    tracing::info!(
        config = %config.path.display(),
        workers = handles.len(),
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
    for handle in &handles {
        handle.wake();
    }
    for handle in handles {
        handle.join();
    }
    if let Some(ike) = ike {
        ike.stop();
    }
    drop(metrics);
    drop(control);
    tracing::info!("stopped");
    Ok(())
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
