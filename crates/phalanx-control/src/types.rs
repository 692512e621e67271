//! The requests and the data each one returns.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::cluster::ClusterReport;
use crate::ike::{ActionResult, IkeSaReport, PoolReport};

/// What a client asks the daemon.
///
/// On the wire an object tagged by `type`: `{"type":"status"}`,
/// `{"type":"initiate","connection":"site-b","wait_seconds":20}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Request {
    /// Daemon identity, uptime and sizes: answered with [`Response::Status`].
    Status,
    /// Every installed SA: answered with [`Response::Sas`].
    Sas,
    /// Every installed policy: answered with [`Response::Policies`].
    Policies,
    /// Every drop reason, daemon counter and worker load:
    /// answered with [`Response::Counters`].
    Counters,
    /// Re-read the configuration file and apply it atomically:
    /// answered with [`Response::Reload`] or an error that changed nothing.
    Reload,
    /// Every IKE SA with its Child SAs: answered with [`Response::Ike`].
    Ike,
    /// Start IKE for a connection: answered with [`Response::Initiate`]
    /// once the request is queued, or, with `wait_seconds`, once the IKE
    /// SA and all its Child SAs are up (an error names the reason when
    /// they are not).
    Initiate {
        /// The connection's name (`[[connection]] name`).
        connection: String,
        /// How long to wait for the SAs; `None`: do not wait.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wait_seconds: Option<u32>,
    },
    /// Delete a connection's IKE SAs and their Child SAs (INFORMATIONAL
    /// Delete): answered with [`Response::Terminate`].
    Terminate {
        /// The connection's name.
        connection: String,
    },
    /// Delete the IKE SAs of one peer, named by its authenticated identity
    /// or by a virtual IP it holds: answered with [`Response::Disconnect`].
    Disconnect {
        /// The identity or virtual IP.
        peer: String,
    },
    /// Virtual-IP pools and their leases: answered with
    /// [`Response::Pools`].
    Pools,
    /// Cluster members, ownership, leases, checkpoints and failovers:
    /// answered with [`Response::Cluster`], or
    /// [`ErrorCode::CLUSTER_DISABLED`](crate::ErrorCode::CLUSTER_DISABLED)
    /// by a daemon without `[cluster]`.
    Cluster,
}

impl Request {
    /// The wire name of the request (`"status"`, `"sas"`, ...).
    pub const fn name(&self) -> &'static str {
        match self {
            Request::Status => "status",
            Request::Sas => "sas",
            Request::Policies => "policies",
            Request::Counters => "counters",
            Request::Reload => "reload",
            Request::Ike => "ike",
            Request::Initiate { .. } => "initiate",
            Request::Terminate { .. } => "terminate",
            Request::Cluster => "cluster",
            Request::Disconnect { .. } => "disconnect",
            Request::Pools => "pools",
        }
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A successful answer; the variant matches the request.
///
/// On the wire `{"type":"sas","data":[...]}`: the tag makes an answer
/// decodable without knowing the request (an empty SA list and an empty
/// policy list would otherwise look alike).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Response {
    /// Answer to [`Request::Status`].
    Status(Status),
    /// Answer to [`Request::Sas`].
    Sas(Vec<SaInfo>),
    /// Answer to [`Request::Policies`].
    Policies(Vec<PolicyInfo>),
    /// Answer to [`Request::Counters`].
    Counters(CounterReport),
    /// Answer to [`Request::Reload`].
    Reload(ReloadSummary),
    /// Answer to [`Request::Ike`].
    Ike(Vec<IkeSaReport>),
    /// Answer to [`Request::Initiate`].
    Initiate(ActionResult),
    /// Answer to [`Request::Terminate`].
    Terminate(ActionResult),
    /// Answer to [`Request::Cluster`].
    Cluster(ClusterReport),
    /// Answer to [`Request::Disconnect`].
    Disconnect(ActionResult),
    /// Answer to [`Request::Pools`].
    Pools(Vec<PoolReport>),
}

impl Response {
    /// Whether this is the kind of answer `request` calls for.
    pub fn answers(&self, request: &Request) -> bool {
        matches!(
            (self, request),
            (Response::Status(_), Request::Status)
                | (Response::Sas(_), Request::Sas)
                | (Response::Policies(_), Request::Policies)
                | (Response::Counters(_), Request::Counters)
                | (Response::Reload(_), Request::Reload)
                | (Response::Ike(_), Request::Ike)
                | (Response::Initiate(_), Request::Initiate { .. })
                | (Response::Terminate(_), Request::Terminate { .. })
                | (Response::Cluster(_), Request::Cluster)
                | (Response::Disconnect(_), Request::Disconnect { .. })
                | (Response::Pools(_), Request::Pools)
        )
    }

    /// The payload alone as JSON (what `phalanxctl --json` prints).
    pub fn data_json(&self) -> serde_json::Value {
        // Serializing these plain structs cannot fail: no maps with
        // non-string keys, no custom serializers.
        let result = match self {
            Response::Status(s) => serde_json::to_value(s),
            Response::Sas(s) => serde_json::to_value(s),
            Response::Policies(p) => serde_json::to_value(p),
            Response::Counters(c) => serde_json::to_value(c),
            Response::Reload(r) => serde_json::to_value(r),
            Response::Ike(i) => serde_json::to_value(i),
            Response::Disconnect(d) => serde_json::to_value(d),
            Response::Pools(p) => serde_json::to_value(p),
            Response::Initiate(a) | Response::Terminate(a) => serde_json::to_value(a),
            Response::Cluster(c) => serde_json::to_value(c),
        };
        result.unwrap_or(serde_json::Value::Null)
    }
}

/// The daemon at a glance.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The daemon's version (`CARGO_PKG_VERSION`).
    pub version: String,
    /// Seconds since the daemon started.
    pub uptime_seconds: u64,
    /// The configuration file in force.
    pub config_path: String,
    /// When that configuration was applied, in seconds since the Unix epoch.
    pub config_loaded_at_unix: u64,
    /// Data-plane worker threads.
    pub workers: u32,
    /// Installed inbound SAs.
    pub sas_inbound: u32,
    /// Installed outbound SAs.
    pub sas_outbound: u32,
    /// Installed policies.
    pub policies: u32,
    /// The cleartext-side TUN device name.
    pub tun: String,
    /// The protected-side local address (and port, for ESP in UDP).
    pub protected_local: String,
}

/// Which way an SA carries traffic (RFC 4301 §4.4.2: inbound and outbound
/// SAs are separate entries).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Decrypts what the peer sends (`"in"`).
    In,
    /// Encrypts what goes to the peer (`"out"`).
    Out,
}

impl Direction {
    /// `"in"` or `"out"`, as on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Direction::In => "in",
            Direction::Out => "out",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One installed SA and its counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaInfo {
    /// The name given in the configuration.
    pub name: String,
    /// Inbound or outbound.
    pub direction: Direction,
    /// The SPI (RFC 4303 §2.1), shown in hex by `phalanxctl`.
    pub spi: u32,
    /// `"esp"` or `"ah"`.
    pub protocol: String,
    /// `"tunnel"` or `"transport"`.
    pub mode: String,
    /// The encryption transform (`"aes-128-gcm"`, `"null"`, ...).
    pub encryption: String,
    /// The integrity transform (`"hmac-sha2-256-128"`; `"none"` for AEAD).
    pub integrity: String,
    /// Local outer address.
    pub local: String,
    /// Remote outer address.
    pub remote: String,
    /// The peer's UDP port when ESP is UDP-encapsulated (RFC 3948).
    #[serde(default)]
    pub encap: Option<u16>,
    /// Extended sequence numbers (RFC 4303 §2.2.1).
    pub esn: bool,
    /// Anti-replay window size in packets (0 for outbound SAs).
    pub replay_window: u32,
    /// Packets processed successfully.
    pub packets: u64,
    /// Bytes processed successfully.
    pub bytes: u64,
    /// Packets dropped on this SA, all reasons together.
    #[serde(default)]
    pub drops: Option<u64>,
    /// The drops of [`drops`](Self::drops) by reason (snake_case drop
    /// reason names, as `phalanxctl counters` shows them); reasons with no
    /// drops are left out.
    #[serde(default)]
    pub drop_reasons: Vec<NamedCounter>,
    /// Outbound: the next sequence number to send.
    #[serde(default)]
    pub next_sequence: Option<u64>,
    /// Inbound: the highest sequence number accepted.
    #[serde(default)]
    pub highest_sequence: Option<u64>,
    /// Lifetime state: `"ok"`, `"soft-expired"` or `"hard-expired"`.
    pub lifetime: String,
    /// Seconds since the SA was installed.
    pub age_seconds: u64,
}

/// One installed policy (RFC 4301 §4.4.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyInfo {
    /// The name given in the configuration.
    pub name: String,
    /// Evaluation order: lower first.
    pub priority: u32,
    /// Source selector, a prefix (`"10.1.0.0/16"`).
    pub source: String,
    /// Destination selector, a prefix.
    pub destination: String,
    /// Next-layer protocol selector (`"any"`, `"tcp"`, `"17"`).
    pub protocol: String,
    /// Source port range (`"any"`, `"80"`, `"1024-65535"`).
    pub source_ports: String,
    /// Destination port range.
    pub destination_ports: String,
    /// `"protect"`, `"bypass"` or `"discard"`.
    pub action: String,
    /// The outbound SA a `protect` policy uses.
    #[serde(default)]
    pub sa: Option<String>,
    /// Outbound packets this policy decided (flow-cache hits included),
    /// since it was installed with this definition: a reload keeps the
    /// count of an unchanged policy and restarts a changed one. `None`
    /// from a daemon that does not count them.
    #[serde(default)]
    pub hits: Option<u64>,
}

/// Every counter the daemon keeps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CounterReport {
    /// One entry per drop reason the daemon knows, zeros included.
    pub drops: Vec<DropCounter>,
    /// Daemon counters that are not drops (packets in/out, reloads, ...).
    pub daemon: Vec<NamedCounter>,
    /// Per-worker load.
    pub workers: Vec<WorkerLoad>,
    /// IKE counters (every exchange, error and Notify sent or received,
    /// by name); empty from a daemon without IKE, absent from older ones.
    #[serde(default)]
    pub ike: Vec<NamedCounter>,
}

/// How many packets were dropped for one reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropCounter {
    /// The reason in snake_case (`"auth_failed"`).
    pub reason: String,
    /// One line saying what the reason means.
    pub description: String,
    /// Packets dropped for it since the daemon started.
    pub count: u64,
}

/// A named monotonically increasing counter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamedCounter {
    /// snake_case name (`"tun_rx_packets"`).
    pub name: String,
    /// Value since the daemon started.
    pub count: u64,
}

impl NamedCounter {
    /// One counter per `(name, count)`, each name behind `prefix`
    /// (`"radius_"` + `"accepts"`).
    pub fn prefixed(prefix: &str, counters: &[(&str, u64)]) -> Vec<NamedCounter> {
        counters
            .iter()
            .map(|(name, count)| NamedCounter {
                name: format!("{prefix}{name}"),
                count: *count,
            })
            .collect()
    }
}

/// How busy one data-plane worker is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerLoad {
    /// Worker index, from 0.
    pub worker: u32,
    /// Fraction of recent wall time spent processing, in `0.0..=1.0`: the
    /// same value as [`busy_1s`](Self::busy_1s) (the first daemons sent
    /// the share of the last 100 ms, which read 0 a moment after traffic
    /// stopped). Kept for clients that know no other field.
    pub busy_ratio: f64,
    /// Packets the worker handled since the daemon started.
    pub packets: u64,
    /// Fraction of the last second's wall time spent processing, in
    /// `0.0..=1.0` (`"busy_1s"`). `None` from a daemon that does not
    /// report it.
    #[serde(default)]
    pub busy_1s: Option<f64>,
    /// Fraction of the wall time since the worker started spent
    /// processing, in `0.0..=1.0` (`"busy_avg"`).
    #[serde(default)]
    pub busy_avg: Option<f64>,
    /// Seconds spent processing since the worker started
    /// (`"busy_seconds"`): a counter, whose rate is the load.
    #[serde(default)]
    pub busy_seconds: Option<f64>,
}

/// What a reload changed, by SA and policy name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadSummary {
    /// Names new in the file.
    pub added: Vec<String>,
    /// Names whose parameters changed (replaced; counters restart).
    pub changed: Vec<String>,
    /// Names no longer in the file.
    pub removed: Vec<String>,
    /// How many entries were kept as they were, counters included.
    pub unchanged: u32,
}
