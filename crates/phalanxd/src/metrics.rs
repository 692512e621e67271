//! Prometheus metrics over a minimal HTTP/1.1 responder.
//!
//! `GET /metrics` answers the Prometheus text exposition format 0.0.4
//! (<https://prometheus.io/docs/instrumenting/exposition_formats/>), written
//! here by hand: every value comes from one [`ControlHandler`] snapshot per
//! scrape, so a registry of live metric objects (the `prometheus-client`
//! model) would only duplicate state the daemon already keeps. The format
//! rules this file follows: one `# HELP` and one `# TYPE` line per family
//! before its samples; label values escape `\`, `"` and newline; HELP text
//! escapes `\` and newline; floats are Go-style (`NaN`, `+Inf`, `-Inf`).
//!
//! The responder is deliberately small: one accepting thread, one thread
//! per connection up to [`MAX_CONNECTIONS`], requests up to
//! [`MAX_REQUEST_BYTES`], a read timeout, one response per connection
//! (`Connection: close`). `GET` and `HEAD` are served; other methods get
//! 405 and other paths 404.

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use phalanx_control::{CounterReport, IkeSaReport, PolicyInfo, PoolReport, SaInfo, Status};

use crate::control::ControlHandler;

/// Scrapes served at once; more are answered 503.
pub const MAX_CONNECTIONS: usize = 8;

/// The longest request head (request line and headers) read.
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;

/// How long a client may take to send its request or read the answer.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The content type of the text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The running metrics endpoint; dropping it stops accepting.
#[derive(Debug)]
pub struct MetricsServer {
    local_addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

/// Starts serving `state`'s metrics on `addr` (port 0 picks a free one).
pub fn serve(state: Arc<dyn ControlHandler>, addr: SocketAddr) -> io::Result<MetricsServer> {
    let listener = TcpListener::bind(addr)?;
    let local_addr = listener.local_addr()?;
    let stopping = Arc::new(AtomicBool::new(false));
    let acceptor = {
        let stopping = Arc::clone(&stopping);
        thread::Builder::new()
            .name("phalanx-metrics".into())
            .spawn(move || accept_loop(&listener, &state, &stopping))?
    };
    tracing::info!(address = %local_addr, "metrics listening on /metrics");
    Ok(MetricsServer {
        local_addr,
        stopping,
        acceptor: Some(acceptor),
    })
}

impl MetricsServer {
    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wake the blocking accept() with a connection of our own.
        let woken = TcpStream::connect_timeout(&wake_addr(self.local_addr), IO_TIMEOUT).is_ok();
        if let (true, Some(acceptor)) = (woken, self.acceptor.take()) {
            drop(acceptor.join());
        }
    }
}

/// Where to connect to reach a listener bound to `addr` (a wildcard
/// address is reached through loopback).
fn wake_addr(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

/// Accepts until the server is dropped.
fn accept_loop(listener: &TcpListener, state: &Arc<dyn ControlHandler>, stopping: &AtomicBool) {
    let active = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        match stream {
            Ok(stream) => admit(stream, state, &active),
            Err(e) => {
                tracing::warn!(error = %e, "metrics accept failed");
                thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Serves one connection on its own thread, or answers 503 at the limit.
fn admit(stream: TcpStream, state: &Arc<dyn ControlHandler>, active: &Arc<AtomicUsize>) {
    drop(stream.set_read_timeout(Some(IO_TIMEOUT)));
    drop(stream.set_write_timeout(Some(IO_TIMEOUT)));
    if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
        active.fetch_sub(1, Ordering::SeqCst);
        drop(respond(&stream, 503, "text/plain", b"busy\n", false));
        return;
    }
    let (state, slot) = (Arc::clone(state), Arc::clone(active));
    let spawned = thread::Builder::new()
        .name("phalanx-metrics-conn".into())
        .spawn(move || {
            let _slot = Slot(slot);
            drop(serve_connection(stream, state.as_ref()));
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start a metrics connection thread");
    }
}

/// Frees a connection slot when its thread ends, panics included.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Answers one request; after a refusal, lingers so the client reads it.
fn serve_connection(stream: TcpStream, state: &dyn ControlHandler) -> io::Result<()> {
    if route(&stream, state)? != 200 {
        linger(&stream);
    }
    Ok(())
}

/// Reads one request head and answers it; returns the status code sent.
fn route(stream: &TcpStream, state: &dyn ControlHandler) -> io::Result<u16> {
    let Some(head) = read_head(stream)? else {
        return respond(stream, 400, "text/plain", b"bad request\n", false);
    };
    let mut words = head.lines().next().unwrap_or("").split(' ');
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return respond(
            stream,
            405,
            "text/plain",
            b"method not allowed\n",
            head_only,
        );
    }
    match target.split('?').next() {
        Some("/metrics") => {
            let body = render(state);
            respond(stream, 200, CONTENT_TYPE, body.as_bytes(), head_only)
        }
        Some("/") => respond(
            stream,
            200,
            "text/plain",
            b"phalanxd: see /metrics\n",
            head_only,
        ),
        _ => respond(stream, 404, "text/plain", b"not found\n", head_only),
    }
}

/// Reads up to the blank line ending the request head; `None` when it is
/// too long, not UTF-8, or the client closed first.
fn read_head(mut stream: &TcpStream) -> io::Result<Option<String>> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0_u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        if head.len() >= MAX_REQUEST_BYTES {
            return Ok(None);
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&chunk[..n]);
    }
    Ok(String::from_utf8(head).ok())
}

/// Writes a complete HTTP/1.1 response; returns `code`.
fn respond(
    mut stream: &TcpStream,
    code: u16,
    content_type: &str,
    body: &[u8],
    head_only: bool,
) -> io::Result<u16> {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if !head_only {
        stream.write_all(body)?;
    }
    stream.flush()?;
    Ok(code)
}

/// After refusing a request, reads (and discards) what the client is still
/// sending, so closing does not reset the connection before the client has
/// read the answer (RFC 9112 §9.6: a server closes in stages).
fn linger(mut stream: &TcpStream) {
    const DRAIN_LIMIT: usize = 64 * 1024;
    drop(stream.shutdown(std::net::Shutdown::Write));
    let mut sink = [0_u8; 4096];
    let mut drained = 0;
    while drained < DRAIN_LIMIT {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}

/// The whole exposition, from one snapshot of each kind.
pub fn render(state: &dyn ControlHandler) -> String {
    let mut out = String::with_capacity(4096);
    render_status(&mut out, &state.status());
    render_sas(&mut out, &state.sas());
    render_policies(&mut out, &state.policies());
    let counters = state.counters();
    render_counters(&mut out, &counters);
    if let Ok(ike) = state.ike() {
        render_ike(&mut out, &ike, &counters);
    }
    if let Ok(pools) = state.pools() {
        render_pools(&mut out, &pools);
    }
    if let Ok(cluster) = state.cluster() {
        crate::cluster::metrics::render(&mut out, &cluster);
    }
    out
}

/// The IKE state names `phalanx_ike_sas` always has a sample for.
const IKE_STATES: [&str; 7] = [
    "INIT_SENT",
    "AUTH_SENT",
    "HALF_OPEN",
    "ESTABLISHED",
    "REKEYING",
    "REKEYED",
    "DELETING",
];

/// IKE SAs by state, installed Child SAs, IKE counters (only with IKE on).
fn render_ike(out: &mut String, sas: &[IkeSaReport], report: &CounterReport) {
    family(out, "phalanx_ike_sas", "gauge", "IKE SAs, by state.");
    for state in IKE_STATES {
        let n = sas.iter().filter(|sa| sa.state == state).count();
        sample(
            out,
            "phalanx_ike_sas",
            &[("state", &state.to_ascii_lowercase())],
            n,
        );
    }
    family(
        out,
        "phalanx_child_sas",
        "gauge",
        "Child SAs installed in both directions (rekeyed ones waiting for deletion not counted).",
    );
    let children = sas
        .iter()
        .flat_map(|sa| &sa.children)
        .filter(|c| c.state == "INSTALLED")
        .count();
    sample(out, "phalanx_child_sas", &[], children);
    let name = "phalanx_ike_counter_total";
    family(
        out,
        name,
        "counter",
        "IKE events, by name: exchanges, errors, Notify payloads sent and received.",
    );
    for counter in &report.ike {
        sample(out, name, &[("name", &counter.name)], counter.count);
    }
}

/// Virtual-IP pools and the End-Users holding their addresses.
fn render_pools(out: &mut String, pools: &[PoolReport]) {
    let name = "phalanx_pool_addresses";
    family(
        out,
        name,
        "gauge",
        "Virtual-IP pool addresses, by pool and state: size, online (held by a connected End-User), offline (kept for one who is away).",
    );
    for p in pools {
        sample(out, name, &[("pool", &p.name), ("state", "size")], p.size);
        sample(
            out,
            name,
            &[("pool", &p.name), ("state", "online")],
            p.online,
        );
        sample(
            out,
            name,
            &[("pool", &p.name), ("state", "offline")],
            p.offline,
        );
    }
    family(
        out,
        "phalanx_clients_connected",
        "gauge",
        "End-Users connected: pool leases held by an IKE SA.",
    );
    let online: u64 = pools.iter().map(|p| p.online).sum();
    sample(out, "phalanx_clients_connected", &[], online);
}

/// Outbound decisions per policy, where the daemon counts them.
fn render_policies(out: &mut String, policies: &[PolicyInfo]) {
    let name = "phalanx_policy_hits_total";
    family(
        out,
        name,
        "counter",
        "Outbound packets each policy decided (protect, bypass or discard), since it was installed with its current definition.",
    );
    for policy in policies {
        if let Some(hits) = policy.hits {
            sample(out, name, &[("policy", &policy.name)], hits);
        }
    }
}

/// Daemon-wide gauges.
fn render_status(out: &mut String, status: &Status) {
    family(
        out,
        "phalanx_up",
        "gauge",
        "1 while the daemon answers scrapes.",
    );
    sample(out, "phalanx_up", &[], 1);
    family(
        out,
        "phalanx_config_loaded_timestamp_seconds",
        "gauge",
        "When the configuration in force was applied (Unix time).",
    );
    sample(
        out,
        "phalanx_config_loaded_timestamp_seconds",
        &[],
        status.config_loaded_at_unix,
    );
    family(
        out,
        "phalanx_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
    );
    sample(out, "phalanx_uptime_seconds", &[], status.uptime_seconds);
    family(
        out,
        "phalanx_workers",
        "gauge",
        "Data-plane worker threads.",
    );
    sample(out, "phalanx_workers", &[], status.workers);
    family(out, "phalanx_sas", "gauge", "Installed SAs by direction.");
    sample(
        out,
        "phalanx_sas",
        &[("direction", "in")],
        status.sas_inbound,
    );
    sample(
        out,
        "phalanx_sas",
        &[("direction", "out")],
        status.sas_outbound,
    );
    family(out, "phalanx_policies", "gauge", "Installed policies.");
    sample(out, "phalanx_policies", &[], status.policies);
}

/// Reads one per-SA value; `None` when the daemon does not count it.
type SaValue = fn(&SaInfo) -> Option<u64>;

/// Per-SA counters, labelled by name, direction and SPI (hex).
fn render_sas(out: &mut String, sas: &[SaInfo]) {
    let families: [(&str, &str, SaValue); 2] = [
        (
            "phalanx_sa_packets_total",
            "Packets processed per SA.",
            |sa| Some(sa.packets),
        ),
        ("phalanx_sa_bytes_total", "Bytes processed per SA.", |sa| {
            Some(sa.bytes)
        }),
    ];
    for (name, help, value) in families {
        family(out, name, "counter", help);
        for sa in sas {
            if let Some(v) = value(sa) {
                let spi = format!("0x{:08x}", sa.spi);
                let labels = [
                    ("sa", sa.name.as_str()),
                    ("direction", sa.direction.as_str()),
                    ("spi", &spi),
                ];
                sample(out, name, &labels, v);
            }
        }
    }
    let name = "phalanx_sa_drops_total";
    family(
        out,
        name,
        "counter",
        "Packets dropped per SA and reason (reasons with drops only).",
    );
    for sa in sas {
        let spi = format!("0x{:08x}", sa.spi);
        for reason in &sa.drop_reasons {
            let labels = [
                ("sa", sa.name.as_str()),
                ("direction", sa.direction.as_str()),
                ("spi", &spi),
                ("reason", reason.name.as_str()),
            ];
            sample(out, name, &labels, reason.count);
        }
    }
}

/// Drops by reason (every reason the daemon reports, zeros included),
/// daemon counters and worker load.
fn render_counters(out: &mut String, report: &CounterReport) {
    family(
        out,
        "phalanx_drops_total",
        "counter",
        "Packets dropped, by reason.",
    );
    for drop in &report.drops {
        sample(
            out,
            "phalanx_drops_total",
            &[("reason", &drop.reason)],
            drop.count,
        );
    }
    family(
        out,
        "phalanx_daemon_counter_total",
        "counter",
        "Daemon event counters, by name.",
    );
    for counter in &report.daemon {
        sample(
            out,
            "phalanx_daemon_counter_total",
            &[("name", &counter.name)],
            counter.count,
        );
    }
    family(
        out,
        "phalanx_worker_busy_ratio",
        "gauge",
        "Fraction of the last second's wall time a worker spent processing.",
    );
    for load in &report.workers {
        let worker = load.worker.to_string();
        sample(
            out,
            "phalanx_worker_busy_ratio",
            &[("worker", &worker)],
            Float(load.busy_ratio),
        );
    }
    let busy = "phalanx_worker_busy_seconds_total";
    family(
        out,
        busy,
        "counter",
        "Seconds a worker spent processing since it started (rate() is its load).",
    );
    for load in &report.workers {
        if let Some(seconds) = load.busy_seconds {
            let worker = load.worker.to_string();
            sample(out, busy, &[("worker", &worker)], Float(seconds));
        }
    }
    family(
        out,
        "phalanx_worker_packets_total",
        "counter",
        "Packets handled, by worker.",
    );
    for load in &report.workers {
        let worker = load.worker.to_string();
        sample(
            out,
            "phalanx_worker_packets_total",
            &[("worker", &worker)],
            load.packets,
        );
    }
}

/// Writes the HELP and TYPE lines of a family.
pub(crate) fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let help = help.replace('\\', r"\\").replace('\n', r"\n");
    // Writing into a String cannot fail.
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Writes one sample line.
pub(crate) fn sample(
    out: &mut String,
    name: &str,
    labels: &[(&str, &str)],
    value: impl std::fmt::Display,
) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (key, value)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(key);
            out.push_str("=\"");
            escape_label_value(out, value);
            out.push('"');
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// Label values escape backslash, double quote and line feed.
fn escape_label_value(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str(r"\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str(r"\n"),
            c => out.push(c),
        }
    }
}

/// A float in the exposition's spelling (Go's `ParseFloat` reads it back).
pub(crate) struct Float(pub(crate) f64);

impl std::fmt::Display for Float {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            v if v.is_nan() => f.write_str("NaN"),
            v if v == f64::INFINITY => f.write_str("+Inf"),
            v if v == f64::NEG_INFINITY => f.write_str("-Inf"),
            v => write!(f, "{v}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use phalanx_control::{
        Direction, DropCounter, NamedCounter, PolicyInfo, ReloadSummary, WorkerLoad,
    };

    use super::*;

    /// A test double for the daemon state with fixed numbers.
    struct FakeDaemon;

    fn sa(name: &str, direction: Direction, spi: u32, packets: u64) -> SaInfo {
        SaInfo {
            name: name.into(),
            direction,
            spi,
            protocol: "esp".into(),
            mode: "tunnel".into(),
            encryption: "aes-128-gcm".into(),
            integrity: "none".into(),
            local: "192.0.2.1".into(),
            remote: "192.0.2.2".into(),
            encap: Some(4500),
            esn: false,
            replay_window: 0,
            packets,
            bytes: packets * 100,
            drops: Some(if direction == Direction::In { 2 } else { 0 }),
            drop_reasons: if direction == Direction::In {
                vec![NamedCounter {
                    name: "replayed".into(),
                    count: 2,
                }]
            } else {
                Vec::new()
            },
            next_sequence: None,
            highest_sequence: None,
            lifetime: "ok".into(),
            age_seconds: 1,
        }
    }

    impl ControlHandler for FakeDaemon {
        fn status(&self) -> Status {
            Status {
                config_loaded_at_unix: 1_700_000_000,
                workers: 2,
                sas_inbound: 1,
                sas_outbound: 1,
                ..Status::default()
            }
        }
        fn sas(&self) -> Vec<SaInfo> {
            vec![
                sa("a\"b\\c\nd", Direction::Out, 0x0000_1001, 7),
                sa("b-a", Direction::In, 0xdead_beef, 9),
            ]
        }
        fn policies(&self) -> Vec<PolicyInfo> {
            let policy = |name: &str, hits| PolicyInfo {
                name: name.into(),
                priority: 10,
                source: "10.1.0.0/24".into(),
                destination: "10.2.0.0/24".into(),
                protocol: "any".into(),
                source_ports: "any".into(),
                destination_ports: "any".into(),
                action: "protect".into(),
                sa: Some("a-to-b".into()),
                hits,
            };
            vec![policy("to-b", Some(42)), policy("uncounted", None)]
        }
        fn counters(&self) -> CounterReport {
            let drop = |reason: &str, count| DropCounter {
                reason: reason.into(),
                description: String::new(),
                count,
            };
            CounterReport {
                drops: vec![drop("auth_failed", 4), drop("replayed", 0)],
                daemon: vec![NamedCounter {
                    name: "tun_rx".into(),
                    count: 12,
                }],
                workers: vec![
                    WorkerLoad {
                        worker: 0,
                        busy_ratio: 0.5,
                        packets: 3,
                        busy_1s: Some(0.5),
                        busy_avg: Some(0.25),
                        busy_seconds: Some(12.5),
                    },
                    WorkerLoad {
                        worker: 1,
                        busy_ratio: f64::NAN,
                        packets: 0,
                        busy_1s: None,
                        busy_avg: None,
                        busy_seconds: None,
                    },
                ],
                ike: vec![NamedCounter {
                    name: "ike_sas_established".into(),
                    count: 3,
                }],
            }
        }
        fn reload(&self) -> Result<ReloadSummary, String> {
            Err("not in this test".into())
        }
        fn pools(&self) -> Result<Vec<PoolReport>, phalanx_control::ErrorBody> {
            Ok(vec![PoolReport {
                name: "rw4".into(),
                size: 254,
                online: 2,
                offline: 1,
            }])
        }
        fn ike(&self) -> Result<Vec<IkeSaReport>, phalanx_control::ErrorBody> {
            let child = |state: &str| phalanx_control::ChildSaReport {
                name: "net".into(),
                state: state.into(),
                spi_in: 1,
                spi_out: 2,
                algorithms: "AES_GCM_16_128".into(),
                esn: false,
                mode: "tunnel".into(),
                encap: false,
                local_ts: vec![],
                remote_ts: vec![],
                installed_seconds: 0,
                rekey_in_seconds: None,
                bytes_in: 0,
                packets_in: 0,
                bytes_out: 0,
                key_exchanges: Vec::new(),
                packets_out: 0,
            };
            let sa = |state: &str, children| IkeSaReport {
                connection: "site".into(),
                state: state.into(),
                initiator: true,
                local: String::new(),
                remote: String::new(),
                local_id: String::new(),
                remote_id: String::new(),
                spi_i: String::new(),
                spi_r: String::new(),
                algorithms: String::new(),
                nat: false,
                established_seconds: None,
                rekey_in_seconds: None,
                virtual_ips: Vec::new(),
                peer_auth: String::new(),
                children,
            };
            Ok(vec![
                sa("ESTABLISHED", vec![child("INSTALLED"), child("REKEYED")]),
                sa("ESTABLISHED", vec![child("INSTALLED")]),
                sa("HALF_OPEN", vec![]),
            ])
        }
    }

    fn start() -> MetricsServer {
        serve(Arc::new(FakeDaemon), SocketAddr::from(([127, 0, 0, 1], 0))).expect("serve")
    }

    /// Sends `request` and returns (status code, headers, body).
    fn exchange(server: &MetricsServer, request: &[u8]) -> (u16, String, String) {
        let mut stream = TcpStream::connect(server.local_addr()).expect("connect");
        stream.write_all(request).expect("write");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read");
        let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
        let code = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("a status code");
        (code, head.to_owned(), body.to_owned())
    }

    /// One parsed sample: name, labels, value.
    type Sample = (String, Vec<(String, String)>, f64);

    /// Parses the text format strictly enough to catch format mistakes:
    /// every sample's family has HELP and TYPE lines before it.
    fn parse(body: &str) -> Vec<Sample> {
        let mut typed = HashSet::new();
        let mut samples = Vec::new();
        for line in body.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
                assert!(["counter", "gauge"].contains(&kind), "{line}");
                assert!(typed.insert(name.to_owned()), "family typed twice: {name}");
                continue;
            }
            if line.starts_with("# HELP ") {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').expect("series value");
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}').expect("}"))),
                None => (series, Vec::new()),
            };
            assert!(typed.contains(name), "sample before its TYPE: {line}");
            let value = match value {
                "NaN" => f64::NAN,
                v => v.parse().expect("a number"),
            };
            samples.push((name.to_owned(), labels, value));
        }
        samples
    }

    fn parse_labels(text: &str) -> Vec<(String, String)> {
        let mut labels = Vec::new();
        let mut chars = text.chars();
        loop {
            let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
            if key.is_empty() {
                return labels;
            }
            assert_eq!(chars.next(), Some('"'));
            let mut value = String::new();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => match chars.next() {
                        Some('n') => value.push('\n'),
                        Some(c @ ('\\' | '"')) => value.push(c),
                        other => panic!("bad escape {other:?}"),
                    },
                    c => value.push(c),
                }
            }
            labels.push((key.trim_start_matches(',').to_owned(), value));
        }
    }

    fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
        let want: HashMap<&str, &str> = labels.iter().copied().collect();
        let found: Vec<f64> = samples
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && l.len() == want.len()
                    && l.iter()
                        .all(|(k, v)| want.get(k.as_str()) == Some(&v.as_str()))
            })
            .map(|s| s.2)
            .collect();
        assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}");
        found[0]
    }

    #[test]
    fn scrape_has_every_family_and_value() {
        let server = start();
        let (code, head, body) = exchange(&server, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(code, 200);
        assert!(head.contains("text/plain; version=0.0.4"));
        assert!(head.contains(&format!("Content-Length: {}", body.len())));
        let s = parse(&body);
        assert_eq!(value(&s, "phalanx_up", &[]), 1.0);
        assert_eq!(
            value(&s, "phalanx_config_loaded_timestamp_seconds", &[]),
            1.7e9
        );
        let out = [
            ("sa", "a\"b\\c\nd"),
            ("direction", "out"),
            ("spi", "0x00001001"),
        ];
        assert_eq!(value(&s, "phalanx_sa_packets_total", &out), 7.0);
        assert_eq!(value(&s, "phalanx_sa_bytes_total", &out), 700.0);
        let inbound = [("sa", "b-a"), ("direction", "in"), ("spi", "0xdeadbeef")];
        assert_eq!(value(&s, "phalanx_sa_packets_total", &inbound), 9.0);
        let replayed = [
            ("sa", "b-a"),
            ("direction", "in"),
            ("spi", "0xdeadbeef"),
            ("reason", "replayed"),
        ];
        assert_eq!(value(&s, "phalanx_sa_drops_total", &replayed), 2.0);
        assert_eq!(
            value(&s, "phalanx_drops_total", &[("reason", "auth_failed")]),
            4.0
        );
        assert_eq!(
            value(&s, "phalanx_drops_total", &[("reason", "replayed")]),
            0.0
        );
        assert_eq!(
            value(&s, "phalanx_daemon_counter_total", &[("name", "tun_rx")]),
            12.0
        );
        assert_eq!(
            value(&s, "phalanx_worker_busy_ratio", &[("worker", "0")]),
            0.5
        );
        assert!(value(&s, "phalanx_worker_busy_ratio", &[("worker", "1")]).is_nan());
        assert_eq!(value(&s, "phalanx_sas", &[("direction", "in")]), 1.0);
        let pool = |state| [("pool", "rw4"), ("state", state)];
        assert_eq!(value(&s, "phalanx_pool_addresses", &pool("size")), 254.0);
        assert_eq!(value(&s, "phalanx_pool_addresses", &pool("online")), 2.0);
        assert_eq!(value(&s, "phalanx_pool_addresses", &pool("offline")), 1.0);
        assert_eq!(value(&s, "phalanx_clients_connected", &[]), 2.0);
        assert_eq!(
            value(&s, "phalanx_policy_hits_total", &[("policy", "to-b")]),
            42.0
        );
        assert_eq!(
            value(&s, "phalanx_worker_busy_seconds_total", &[("worker", "0")]),
            12.5
        );
        assert_eq!(
            value(&s, "phalanx_ike_sas", &[("state", "established")]),
            2.0
        );
        assert_eq!(value(&s, "phalanx_ike_sas", &[("state", "half_open")]), 1.0);
        assert_eq!(value(&s, "phalanx_ike_sas", &[("state", "deleting")]), 0.0);
        assert_eq!(value(&s, "phalanx_child_sas", &[]), 2.0);
        assert_eq!(
            value(
                &s,
                "phalanx_ike_counter_total",
                &[("name", "ike_sas_established")]
            ),
            3.0
        );
        // Values the daemon does not report have no sample, not a zero.
        assert!(!s
            .iter()
            .any(|(n, l, _)| n == "phalanx_policy_hits_total"
                && l.iter().any(|(_, v)| v == "uncounted")));
        assert!(!s
            .iter()
            .any(|(n, l, _)| n == "phalanx_worker_busy_seconds_total"
                && l.iter().any(|(_, v)| v == "1")));
        // The outbound SA dropped nothing: no reason, no sample.
        assert!(!s
            .iter()
            .any(|(n, l, _)| n == "phalanx_sa_drops_total" && l.iter().any(|(_, v)| v == "out")));
    }

    #[test]
    fn other_requests_get_http_errors() {
        let server = start();
        assert_eq!(exchange(&server, b"GET /nope HTTP/1.1\r\n\r\n").0, 404);
        assert_eq!(exchange(&server, b"POST /metrics HTTP/1.1\r\n\r\n").0, 405);
        assert_eq!(exchange(&server, b"GET / HTTP/1.0\n\n").0, 200);
        assert_eq!(
            exchange(&server, b"GET /metrics?x=1 HTTP/1.1\r\n\r\n").0,
            200
        );
        let (code, head, body) = exchange(&server, b"HEAD /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(code, 200);
        assert!(body.is_empty() && !head.contains("Content-Length: 0"));
        let mut huge = b"GET /metrics HTTP/1.1\r\n".to_vec();
        huge.extend(std::iter::repeat_n(b'x', MAX_REQUEST_BYTES * 2));
        assert_eq!(exchange(&server, &huge).0, 400);
        assert_eq!(exchange(&server, b"\xff\xfe\r\n\r\n").0, 400);
    }

    #[test]
    fn a_silent_client_does_not_block_others() {
        let server = start();
        let _silent = TcpStream::connect(server.local_addr()).expect("connect");
        assert_eq!(exchange(&server, b"GET /metrics HTTP/1.1\r\n\r\n").0, 200);
    }

    #[test]
    fn scrapes_beyond_the_limit_get_503() {
        let server = start();
        let silent: Vec<TcpStream> = (0..MAX_CONNECTIONS)
            .map(|_| TcpStream::connect(server.local_addr()).expect("connect"))
            .collect();
        // Accepted in order: this one finds every slot taken. It reads
        // without sending, so the refusal cannot be lost to a reset.
        let mut extra = TcpStream::connect(server.local_addr()).expect("connect");
        let mut answer = String::new();
        extra.read_to_string(&mut answer).expect("read");
        assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
        drop(silent);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        // While slots free up, a refused attempt may end in a reset.
        let scrape = || -> io::Result<String> {
            let mut stream = TcpStream::connect(server.local_addr())?;
            stream.write_all(b"GET /metrics HTTP/1.1\r\n\r\n")?;
            let mut answer = String::new();
            stream.read_to_string(&mut answer)?;
            Ok(answer)
        };
        while !scrape().is_ok_and(|a| a.starts_with("HTTP/1.1 200 ")) {
            assert!(std::time::Instant::now() < deadline, "slots never freed");
            thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn drop_stops_listening() {
        let server = start();
        let addr = server.local_addr();
        drop(server);
        assert!(TcpStream::connect(addr).is_err());
    }

    #[test]
    fn floats_use_the_exposition_spelling() {
        let cases = [
            (0.25, "0.25"),
            (1.0, "1"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
        ];
        for (v, text) in cases {
            assert_eq!(Float(v).to_string(), text);
        }
    }

    #[test]
    fn help_text_is_escaped() {
        let mut out = String::new();
        family(&mut out, "x", "gauge", "a\\b\nc");
        assert_eq!(out, "# HELP x a\\\\b\\nc\n# TYPE x gauge\n");
    }
}
