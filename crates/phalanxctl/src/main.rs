//! `phalanxctl`: the operator's CLI for `phalanxd`.
//!
//! Speaks the `phalanx-control` protocol over the daemon's Unix socket and
//! prints each answer as aligned tables, or with `--json` as the answer's
//! JSON payload (one document on stdout, for scripts). Commands: `status`,
//! `sas`, `policies`, `counters`, `reload`, and for IKE `ike`,
//! `initiate NAME [--wait SECONDS]`, `terminate NAME`, for End-Users
//! `clients`, `disconnect PEER`, `pools`, and for a cluster node `cluster`.
//!
//! Exit status: 0 on success, 1 when the daemon answered with an error
//! (for example a refused reload: nothing changed), 2 for a usage error,
//! 3 when the daemon could not be reached or answered something unreadable.
#![forbid(unsafe_code)]

mod cluster;
mod render;
mod table;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use phalanx_control::{Client, ControlError, Request, Response, DEFAULT_SOCKET_PATH};

/// Exit status when the daemon refused the request.
const EXIT_REFUSED: u8 = 1;
/// Exit status when the daemon could not be reached or understood.
const EXIT_UNREACHABLE: u8 = 3;

/// Query and control a running phalanxd.
#[derive(Debug, Parser)]
#[command(name = "phalanxctl", version, about, after_help = EXIT_HELP)]
struct Cli {
    /// The daemon's control socket.
    #[arg(long, short = 's', env = "PHALANX_SOCKET", default_value = DEFAULT_SOCKET_PATH)]
    socket: PathBuf,
    /// Print the answer as JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    /// Seconds to wait for the daemon.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    #[command(subcommand)]
    command: Command,
}

const EXIT_HELP: &str = "Exit status: 0 success, 1 the daemon refused (nothing changed), \
2 usage error, 3 daemon unreachable or unreadable answer.";

#[derive(Clone, Debug, Subcommand)]
enum Command {
    /// Daemon version, uptime, configuration and sizes.
    Status,
    /// Installed SAs with their counters.
    Sas,
    /// Installed policies.
    Policies,
    /// Every drop reason (zeros too), daemon counters, worker load and the
    /// IKE counters.
    Counters,
    /// Re-read the configuration file; a broken file changes nothing.
    Reload,
    /// IKE SAs with their Child SAs (SPIs, algorithms, selectors, traffic).
    Ike,
    /// Start IKE for a connection.
    Initiate {
        /// The connection's name (`[[connection]] name`).
        name: String,
        /// Wait up to SECONDS until its IKE SA and Child SAs are up; fail
        /// with the reason otherwise.
        #[arg(long, value_name = "SECONDS")]
        wait: Option<u32>,
    },
    /// Delete a connection's IKE SA and Child SAs (INFORMATIONAL Delete).
    Terminate {
        /// The connection's name.
        name: String,
    },
    /// End-Users: IKE SAs holding a virtual IP (identity, address, outer
    /// address and port, traffic, uptime).
    Clients,
    /// Delete one End-User's (or peer's) IKE SAs, by identity or virtual IP.
    Disconnect {
        /// The identity (`alice@example.com`) or virtual IP (`10.3.0.7`).
        peer: String,
    },
    /// Virtual-IP pools: size, leases online and offline.
    Pools,
    /// Cluster members (agreed, live, suspected, ready), segment owners,
    /// per-SA leases and takeover blocks, checkpoint lag, counters and the
    /// last failovers with their handover times.
    Cluster,
}

impl Command {
    fn request(&self) -> Request {
        match self {
            Command::Status => Request::Status,
            Command::Sas => Request::Sas,
            Command::Policies => Request::Policies,
            Command::Counters => Request::Counters,
            Command::Reload => Request::Reload,
            Command::Ike => Request::Ike,
            Command::Initiate { name, wait } => Request::Initiate {
                connection: name.clone(),
                wait_seconds: *wait,
            },
            Command::Terminate { name } => Request::Terminate {
                connection: name.clone(),
            },
            Command::Cluster => Request::Cluster,
            Command::Clients => Request::Ike,
            Command::Disconnect { peer } => Request::Disconnect { peer: peer.clone() },
            Command::Pools => Request::Pools,
        }
    }

    /// How long the daemon may take: `--wait` plus the `--timeout` margin.
    fn timeout(&self, base: u64) -> u64 {
        match self {
            Command::Initiate { wait: Some(w), .. } => base.max(1) + u64::from(*w),
            _ => base.max(1),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match call(&cli) {
        Ok(Response::Ike(sas)) if matches!(cli.command, Command::Clients) => {
            let clients = render::clients(&sas);
            let text = if cli.json {
                format!("{:#}\n", serde_json::to_value(&clients).unwrap_or_default())
            } else {
                render::client_table(&clients)
            };
            drop(std::io::stdout().lock().write_all(text.as_bytes()));
            ExitCode::SUCCESS
        }
        Ok(response) => print(&response, cli.json),
        Err(e) => {
            eprintln!("phalanxctl: {e}");
            ExitCode::from(exit_status(&e))
        }
    }
}

/// Connects, asks, and returns the answer.
fn call(cli: &Cli) -> Result<Response, ControlError> {
    let mut client = Client::connect(&cli.socket)?;
    client.set_timeout(Some(Duration::from_secs(cli.command.timeout(cli.timeout))))?;
    client.call(cli.command.request())
}

/// Writes the answer to stdout; a closed stdout (`| head`) is not an error
/// worth reporting.
fn print(response: &Response, json: bool) -> ExitCode {
    let text = if json {
        format!("{:#}\n", response.data_json())
    } else {
        render::human(response)
    };
    drop(std::io::stdout().lock().write_all(text.as_bytes()));
    ExitCode::SUCCESS
}

/// The exit status for a failed call.
fn exit_status(e: &ControlError) -> u8 {
    match e {
        ControlError::Remote(_) => EXIT_REFUSED,
        _ => EXIT_UNREACHABLE,
    }
}
