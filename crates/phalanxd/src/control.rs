//! The control server: `phalanx-control` requests over a Unix stream socket.
//!
//! One thread accepts; each connection gets its own thread, up to
//! [`MAX_CONNECTIONS`] at once (the next one is told [`ErrorCode::BUSY`] and
//! closed). A connection carries any number of requests, one JSON line each,
//! answered in order. Lines longer than
//! [`MAX_REQUEST_LINE_BYTES`] are
//! answered with [`ErrorCode::LINE_TOO_LONG`] and the connection closes;
//! malformed lines are answered with an error and the connection stays.
//! IKE requests (`ike`, `initiate`, `terminate`) go to the IKE thread with a
//! bounded wait (see `crate::ike::control`): a stuck IKE thread makes them
//! fail with `timed_out`, never hangs the connection past it.
//!
//! Access control is the file mode: the socket is `0600`, so only its owner
//! (the user that started the daemon, normally root) and root can connect.
//! A missing parent directory is created `0700`. A stale socket left by a
//! crashed daemon is replaced; a live one (another daemon answering) or a
//! non-socket file at the path is refused. Dropping the [`ControlServer`]
//! closes every connection and removes the socket file if it is still ours.

use std::collections::HashMap;
use std::fs::{self, DirBuilder};
use std::io::{self, BufReader, Write};
use std::net::Shutdown;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use phalanx_control::{
    decode_request, encode_error, encode_response, read_line_bounded, ActionResult, ClusterReport,
    CounterReport, ErrorBody, ErrorCode, IkeSaReport, LineRead, PolicyInfo, PoolReport,
    ReloadSummary, Request, Response, SaInfo, Status, MAX_REQUEST_LINE_BYTES,
};

use crate::limits::MAX_INITIATE_WAIT_SECONDS;

/// Connections served at once; more are answered `busy` and closed.
pub const MAX_CONNECTIONS: usize = 16;

/// A connection that sends nothing for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// A client that does not read its answer for this long is dropped.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the daemon answers with; implemented by the daemon state.
///
/// Called from control-connection threads, concurrently; each call should
/// take a snapshot and return quickly (`reload` may take as long as parsing
/// and validating the file takes). A panic in a method is caught and
/// answered as [`ErrorCode::INTERNAL`].
pub trait ControlHandler: Send + Sync {
    /// The daemon at a glance.
    fn status(&self) -> Status;
    /// Every installed SA with its counters.
    fn sas(&self) -> Vec<SaInfo>;
    /// Every installed policy.
    fn policies(&self) -> Vec<PolicyInfo>;
    /// Every drop reason (zeros included), daemon counter and worker load.
    fn counters(&self) -> CounterReport;
    /// Re-reads the configuration and applies it atomically; on error
    /// nothing changed and the message names file, line and field.
    fn reload(&self) -> Result<ReloadSummary, String>;
    /// Every IKE SA with its Child SAs. The default: IKE is off.
    fn ike(&self) -> Result<Vec<IkeSaReport>, ErrorBody> {
        Err(ike_disabled())
    }
    /// Starts IKE for `connection`; with `wait`, answers when it is up or
    /// has failed. Must not block longer than `wait` plus a few seconds,
    /// whatever IKE does. The default: IKE is off.
    fn initiate(
        &self,
        connection: &str,
        wait: Option<Duration>,
    ) -> Result<ActionResult, ErrorBody> {
        let _ = (connection, wait);
        Err(ike_disabled())
    }
    /// Deletes `connection`'s IKE SAs and Child SAs. The default: IKE is
    /// off.
    fn terminate(&self, connection: &str) -> Result<ActionResult, ErrorBody> {
        let _ = connection;
        Err(ike_disabled())
    }
    /// Deletes the IKE SAs of one peer (identity or virtual IP). The
    /// default: IKE is off.
    fn disconnect(&self, peer: &str) -> Result<ActionResult, ErrorBody> {
        let _ = peer;
        Err(ike_disabled())
    }
    /// The virtual-IP pools. The default: IKE is off.
    fn pools(&self) -> Result<Vec<PoolReport>, ErrorBody> {
        Err(ike_disabled())
    }
    /// The cluster as this node sees it (`phalanxctl cluster`). The
    /// default: no `[cluster]`.
    fn cluster(&self) -> Result<ClusterReport, ErrorBody> {
        Err(cluster_disabled())
    }
}

/// The error of the cluster request to a daemon without `[cluster]`.
pub fn cluster_disabled() -> ErrorBody {
    ErrorBody::new(
        ErrorCode::CLUSTER_DISABLED,
        "this daemon is not a cluster node: the configuration has no [cluster]",
    )
}

/// The error of IKE requests to a daemon without IKE.
pub fn ike_disabled() -> ErrorBody {
    ErrorBody::new(
        ErrorCode::IKE_DISABLED,
        "IKE is not enabled: the configuration has no [ike] or [[connection]]",
    )
}

/// The running control server; dropping it stops it and removes the socket.
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    /// Device and inode of the socket we bound, to remove only our own file.
    identity: (u64, u64),
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

/// State the acceptor and the connection threads share.
#[derive(Debug, Default)]
struct Shared {
    stopping: AtomicBool,
    next_connection: AtomicU64,
    /// Open connections by number, kept to shut them down on stop.
    open: Mutex<HashMap<u64, UnixStream>>,
}

impl Shared {
    fn open_connections(&self) -> std::sync::MutexGuard<'_, HashMap<u64, UnixStream>> {
        // The map stays consistent even if a holder panicked: every
        // operation on it is a single insert, remove or drain.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Starts serving `state` on a Unix socket at `path`.
pub fn serve(state: Arc<dyn ControlHandler>, path: &Path) -> io::Result<ControlServer> {
    let listener = bind(path)?;
    let meta = fs::metadata(path)?;
    let shared = Arc::new(Shared::default());
    let acceptor = {
        let shared = Arc::clone(&shared);
        thread::Builder::new()
            .name("phalanx-control".into())
            .spawn(move || accept_loop(&listener, &state, &shared))?
    };
    tracing::info!(socket = %path.display(), "control socket listening");
    Ok(ControlServer {
        path: path.to_owned(),
        identity: (meta.dev(), meta.ino()),
        shared,
        acceptor: Some(acceptor),
    })
}

impl ControlServer {
    /// Where the socket is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the blocking accept(); if the path is gone or replaced the
        // acceptor cannot be woken, so it is left to end with the process.
        let woken = UnixStream::connect(&self.path).is_ok();
        for (_, stream) in self.shared.open_connections().drain() {
            drop(stream.shutdown(Shutdown::Both));
        }
        if let (true, Some(acceptor)) = (woken, self.acceptor.take()) {
            drop(acceptor.join());
        }
        remove_if_ours(&self.path, self.identity);
    }
}

/// Removes the socket file if it is still the one we bound. Errors are
/// ignored: after a privilege drop the directory may no longer be writable.
fn remove_if_ours(path: &Path, identity: (u64, u64)) {
    if let Ok(meta) = fs::symlink_metadata(path) {
        if (meta.dev(), meta.ino()) == identity {
            drop(fs::remove_file(path));
        }
    }
}

/// Binds the socket with mode 0600, replacing a stale one.
fn bind(path: &Path) -> io::Result<UnixListener> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.exists() {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)?;
        }
    }
    remove_stale(path)?;
    let listener = UnixListener::bind(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Removes a socket nobody listens on; refuses a live one or a non-socket.
fn remove_stale(path: &Path) -> io::Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a socket", path.display()),
        ));
    }
    if UnixStream::connect(path).is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("{} is in use: another phalanxd is running", path.display()),
        ));
    }
    fs::remove_file(path)
}

/// Accepts until the server is dropped.
fn accept_loop(listener: &UnixListener, state: &Arc<dyn ControlHandler>, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        match stream {
            Ok(stream) => admit(stream, state, shared),
            Err(e) => {
                tracing::warn!(error = %e, "control socket accept failed");
                // Out of descriptors and similar: do not spin.
                thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Starts a connection thread, or answers `busy` when at the limit.
fn admit(stream: UnixStream, state: &Arc<dyn ControlHandler>, shared: &Arc<Shared>) {
    drop(stream.set_write_timeout(Some(WRITE_TIMEOUT)));
    let id = shared.next_connection.fetch_add(1, Ordering::Relaxed);
    let registered = {
        let mut open = shared.open_connections();
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        if open.len() >= MAX_CONNECTIONS {
            false
        } else {
            stream
                .try_clone()
                .map(|clone| open.insert(id, clone))
                .is_ok()
        }
    };
    if !registered {
        let busy = ErrorBody::new(ErrorCode::BUSY, "too many control connections");
        drop((&stream).write_all(encode_error(0, &busy).as_bytes()));
        return;
    }
    let (state, shared) = (Arc::clone(state), Arc::clone(shared));
    let spawned = thread::Builder::new()
        .name("phalanx-control-conn".into())
        .spawn({
            let shared = Arc::clone(&shared);
            move || {
                let _registration = Registration {
                    shared: &shared,
                    id,
                };
                drop(serve_connection(stream, state.as_ref()));
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start a control connection thread");
        shared.open_connections().remove(&id);
    }
}

/// Unregisters a connection when its thread ends, panics included.
struct Registration<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.shared.open_connections().remove(&self.id);
    }
}

/// Answers requests on one connection until it closes, idles out, or
/// sends an oversize line.
fn serve_connection(stream: UnixStream, state: &dyn ControlHandler) -> io::Result<()> {
    stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        match read_line_bounded(&mut reader, MAX_REQUEST_LINE_BYTES, &mut line)? {
            LineRead::Eof => return Ok(()),
            LineRead::TooLong => {
                let error = ErrorBody::new(
                    ErrorCode::LINE_TOO_LONG,
                    format!("request line longer than {MAX_REQUEST_LINE_BYTES} bytes"),
                );
                return writer.write_all(encode_error(0, &error).as_bytes());
            }
            LineRead::Line => writer.write_all(answer(&line, state).as_bytes())?,
        }
    }
}

/// The answer line to one request line.
fn answer(line: &[u8], state: &dyn ControlHandler) -> String {
    match decode_request(line) {
        Ok(envelope) => {
            let outcome = dispatch(envelope.request, state);
            encode_response(envelope.id, &outcome)
        }
        Err(refused) => encode_error(refused.id, &refused.error),
    }
}

/// Runs one request against the handler; a handler panic becomes an error.
fn dispatch(request: Request, state: &dyn ControlHandler) -> Result<Response, ErrorBody> {
    let run = AssertUnwindSafe(|| match &request {
        Request::Status => Ok(Response::Status(state.status())),
        Request::Sas => Ok(Response::Sas(state.sas())),
        Request::Policies => Ok(Response::Policies(state.policies())),
        Request::Counters => Ok(Response::Counters(finite_loads(state.counters()))),
        Request::Reload => reload(state),
        Request::Ike => state.ike().map(Response::Ike),
        Request::Initiate {
            connection,
            wait_seconds,
        } => {
            let wait = wait_seconds
                .map(|s| Duration::from_secs(u64::from(s.min(MAX_INITIATE_WAIT_SECONDS))));
            state.initiate(connection, wait).map(Response::Initiate)
        }
        Request::Terminate { connection } => state.terminate(connection).map(Response::Terminate),
        Request::Cluster => state.cluster().map(Response::Cluster),
        Request::Disconnect { peer } => state.disconnect(peer).map(Response::Disconnect),
        Request::Pools => state.pools().map(Response::Pools),
        other => Err(ErrorBody::new(
            ErrorCode::UNKNOWN_REQUEST,
            format!("request {other} is not served by this daemon"),
        )),
    });
    panic::catch_unwind(run).unwrap_or_else(|_| {
        tracing::error!(request = %request, "control request handler panicked");
        Err(ErrorBody::new(
            ErrorCode::INTERNAL,
            format!("the daemon failed to answer {request}"),
        ))
    })
}

/// Runs a reload and logs its outcome (the one place reloads from the
/// socket are logged; SIGHUP reloads are logged by the daemon).
fn reload(state: &dyn ControlHandler) -> Result<Response, ErrorBody> {
    match state.reload() {
        Ok(summary) => {
            tracing::info!(
                added = summary.added.len(),
                changed = summary.changed.len(),
                removed = summary.removed.len(),
                unchanged = summary.unchanged,
                "reload requested over the control socket applied"
            );
            Ok(Response::Reload(summary))
        }
        Err(message) => {
            tracing::warn!(error = %message, "reload requested over the control socket refused");
            Err(ErrorBody::new(ErrorCode::RELOAD_FAILED, message))
        }
    }
}

/// JSON has no NaN or infinity: a load that is not finite is sent as 0.
fn finite_loads(mut report: CounterReport) -> CounterReport {
    let finite = |v: f64| if v.is_finite() { v } else { 0.0 };
    for load in &mut report.workers {
        load.busy_ratio = finite(load.busy_ratio);
        for v in [
            &mut load.busy_1s,
            &mut load.busy_avg,
            &mut load.busy_seconds,
        ] {
            *v = v.map(finite);
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, Read};
    use std::sync::atomic::AtomicU32;

    use phalanx_control::{
        decode_response, encode_request, Client, ControlError, Direction, DropCounter,
        NamedCounter, WorkerLoad,
    };

    use super::*;

    /// A test double for the daemon state: fixed answers, counts reloads,
    /// and fails a reload when told to.
    struct FakeDaemon {
        reloads: AtomicU32,
        reload_fails: AtomicBool,
    }

    impl FakeDaemon {
        fn new() -> Arc<FakeDaemon> {
            Arc::new(FakeDaemon {
                reloads: AtomicU32::new(0),
                reload_fails: AtomicBool::new(false),
            })
        }
    }

    fn sample_sa() -> SaInfo {
        SaInfo {
            name: "a-b".into(),
            direction: Direction::In,
            spi: 0x1000,
            protocol: "esp".into(),
            mode: "tunnel".into(),
            encryption: "aes-128-gcm".into(),
            integrity: "none".into(),
            local: "192.0.2.1".into(),
            remote: "192.0.2.2".into(),
            encap: None,
            esn: false,
            replay_window: 64,
            packets: 5,
            bytes: 500,
            drops: Some(1),
            drop_reasons: Vec::new(),
            next_sequence: None,
            highest_sequence: Some(5),
            lifetime: "ok".into(),
            age_seconds: 9,
        }
    }

    impl ControlHandler for FakeDaemon {
        fn status(&self) -> Status {
            Status {
                version: "test".into(),
                workers: 2,
                ..Status::default()
            }
        }
        fn sas(&self) -> Vec<SaInfo> {
            vec![sample_sa()]
        }
        fn policies(&self) -> Vec<PolicyInfo> {
            panic!("policies handler fails on purpose")
        }
        fn counters(&self) -> CounterReport {
            CounterReport {
                drops: vec![DropCounter {
                    reason: "replayed".into(),
                    description: "replay".into(),
                    count: 3,
                }],
                daemon: vec![NamedCounter {
                    name: "tun_rx".into(),
                    count: 8,
                }],
                workers: vec![WorkerLoad {
                    worker: 0,
                    busy_ratio: f64::NAN,
                    packets: 1,
                    busy_1s: Some(f64::INFINITY),
                    busy_avg: Some(0.5),
                    busy_seconds: None,
                }],
                ike: vec![],
            }
        }
        fn reload(&self) -> Result<ReloadSummary, String> {
            if self.reload_fails.load(Ordering::SeqCst) {
                return Err("phalanx.toml:2:1: sa.spi: missing".into());
            }
            let n = self.reloads.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(ReloadSummary {
                unchanged: n,
                ..ReloadSummary::default()
            })
        }
    }

    fn socket_path() -> PathBuf {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        std::env::temp_dir().join(format!("phx-ctl-{}-{n}.sock", std::process::id()))
    }

    fn start() -> (Arc<FakeDaemon>, ControlServer) {
        let daemon = FakeDaemon::new();
        let server = serve(daemon.clone(), &socket_path()).expect("serve");
        (daemon, server)
    }

    /// Sends raw bytes and reads one answer line.
    fn raw_exchange(path: &Path, bytes: &[u8]) -> String {
        let mut stream = UnixStream::connect(path).expect("connect");
        // A busy server answers and closes before reading: the write may
        // fail while the answer is waiting.
        drop(stream.write_all(bytes));
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).expect("read");
        line
    }

    #[test]
    fn every_request_round_trips() {
        let (daemon, server) = start();
        let mut client = Client::connect(server.path()).expect("connect");
        let Response::Status(status) = client.call(Request::Status).expect("status") else {
            panic!("wrong answer kind")
        };
        assert_eq!((status.version.as_str(), status.workers), ("test", 2));
        assert_eq!(
            client.call(Request::Sas).expect("sas"),
            Response::Sas(vec![sample_sa()])
        );
        let Response::Counters(counters) = client.call(Request::Counters).expect("counters") else {
            panic!("wrong answer kind")
        };
        assert_eq!(counters.drops[0].count, 3);
        let load = &counters.workers[0];
        assert_eq!(load.busy_ratio, 0.0, "NaN is sent as 0");
        assert_eq!(load.busy_1s, Some(0.0), "so is infinity");
        assert_eq!((load.busy_avg, load.busy_seconds), (Some(0.5), None));
        for expected in 1..=2 {
            let Response::Reload(r) = client.call(Request::Reload).expect("reload") else {
                panic!("wrong answer kind")
            };
            assert_eq!(r.unchanged, expected);
        }
        assert_eq!(daemon.reloads.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn handler_errors_and_panics_are_answered() {
        let (daemon, server) = start();
        let mut client = Client::connect(server.path()).expect("connect");
        let e = client.call(Request::Policies).expect_err("handler panics");
        assert!(
            matches!(e, ControlError::Remote(ref b) if b.code == ErrorCode::INTERNAL),
            "{e}"
        );
        daemon.reload_fails.store(true, Ordering::SeqCst);
        let e = client.call(Request::Reload).expect_err("reload fails");
        assert!(
            matches!(e, ControlError::Remote(ref b)
                if b.code == ErrorCode::RELOAD_FAILED && b.message.contains("sa.spi")),
            "{e}"
        );
        // The connection and the server survive both.
        assert!(client.call(Request::Status).is_ok());
    }

    /// A daemon without IKE answers the IKE requests with `ike_disabled`.
    #[test]
    fn ike_requests_without_ike_are_refused() {
        let (_daemon, server) = start();
        let mut client = Client::connect(server.path()).expect("connect");
        let requests = [
            Request::Ike,
            Request::Initiate {
                connection: "site".into(),
                wait_seconds: Some(1),
            },
            Request::Terminate {
                connection: "site".into(),
            },
        ];
        for request in requests {
            let e = client.call(request).expect_err("IKE is off");
            assert!(
                matches!(e, ControlError::Remote(ref b) if b.code == ErrorCode::IKE_DISABLED),
                "{e}"
            );
        }
    }

    #[test]
    fn malformed_lines_are_answered_and_the_connection_stays() {
        let (_daemon, server) = start();
        let stream = UnixStream::connect(server.path()).expect("connect");
        let mut writer = stream.try_clone().expect("clone");
        let mut reader = BufReader::new(stream);
        let cases: [(&[u8], u64, ErrorCode); 5] = [
            (b"garbage\n", 0, ErrorCode::MALFORMED),
            (b"\n", 0, ErrorCode::MALFORMED),
            (b"\xff\xfe\n", 0, ErrorCode::MALFORMED),
            (
                b"{\"version\":9,\"id\":4,\"request\":{\"type\":\"sas\"}}\n",
                4,
                ErrorCode::UNSUPPORTED_VERSION,
            ),
            (
                b"{\"version\":1,\"id\":5,\"request\":{\"type\":\"fly\"}}\n",
                5,
                ErrorCode::UNKNOWN_REQUEST,
            ),
        ];
        for (bytes, id, code) in cases {
            writer.write_all(bytes).expect("write");
            let mut line = String::new();
            reader.read_line(&mut line).expect("read");
            let answer = decode_response(line.as_bytes()).expect("an answer line");
            assert_eq!(answer.id, id);
            assert_eq!(answer.outcome.expect_err("error").code, code);
        }
        writer
            .write_all(encode_request(6, &Request::Sas).as_bytes())
            .expect("write");
        let mut line = String::new();
        reader.read_line(&mut line).expect("read");
        assert!(decode_response(line.as_bytes())
            .expect("answer")
            .outcome
            .is_ok());
    }

    #[test]
    fn oversize_lines_are_refused_and_closed() {
        let (_daemon, server) = start();
        let mut stream = UnixStream::connect(server.path()).expect("connect");
        // Writing may fail once the server closes; the answer is what counts.
        drop(stream.write_all(&vec![b'x'; MAX_REQUEST_LINE_BYTES + 10]));
        let mut answer = String::new();
        drop(stream.read_to_string(&mut answer));
        let first = answer.lines().next().expect("an answer line");
        let e = decode_response(first.as_bytes()).expect("decodes");
        assert_eq!(e.outcome.expect_err("error").code, ErrorCode::LINE_TOO_LONG);
        // The server still serves others.
        let mut client = Client::connect(server.path()).expect("connect");
        assert!(client.call(Request::Status).is_ok());
    }

    #[test]
    fn socket_is_private_and_removed_on_drop() {
        let base = socket_path().with_extension("dir");
        let path = base.join("run").join("phalanxd.sock");
        let server = serve(FakeDaemon::new(), &path).expect("serve");
        let meta = fs::metadata(&path).expect("socket exists");
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let parent = fs::metadata(base.join("run")).expect("parent created");
        assert_eq!(parent.permissions().mode() & 0o777, 0o700);
        let open = UnixStream::connect(&path).expect("connect");
        open.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        drop(server);
        assert!(!path.exists());
        // The open connection was shut down (end of stream at once), not
        // left to its idle timeout.
        let mut rest = Vec::new();
        assert_eq!((&open).read_to_end(&mut rest).expect("end of stream"), 0);
        fs::remove_dir_all(&base).expect("cleanup");
    }

    #[test]
    fn stale_socket_is_replaced_live_one_refused() {
        let path = socket_path();
        let first = serve(FakeDaemon::new(), &path).expect("serve");
        let e = serve(FakeDaemon::new(), &path).expect_err("a live server holds the path");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        drop(first);
        // A stale socket: bound, listener gone, file left behind.
        drop(UnixListener::bind(&path).expect("bind"));
        assert!(path.exists());
        let second = serve(FakeDaemon::new(), &path).expect("stale socket replaced");
        drop(second);
        fs::write(&path, b"not a socket").expect("write");
        let e = serve(FakeDaemon::new(), &path).expect_err("a regular file is kept");
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        fs::remove_file(&path).expect("cleanup");
    }

    #[test]
    fn connections_beyond_the_limit_are_told_busy() {
        let (_daemon, server) = start();
        let held: Vec<Client> = (0..MAX_CONNECTIONS)
            .map(|_| {
                let mut c = Client::connect(server.path()).expect("connect");
                // A round trip proves the connection is registered.
                c.call(Request::Status).expect("served");
                c
            })
            .collect();
        let line = raw_exchange(
            server.path(),
            &encode_request(1, &Request::Status).into_bytes(),
        );
        let answer = decode_response(line.as_bytes()).expect("decodes");
        assert_eq!(answer.outcome.expect_err("busy").code, ErrorCode::BUSY);
        let mut extra = Client::connect(server.path()).expect("connect");
        let e = extra.call(Request::Status).expect_err("busy");
        assert!(
            matches!(e, ControlError::Remote(ref b) if b.code == ErrorCode::BUSY),
            "{e}"
        );
        drop(held);
        // Slots free up once clients leave (their threads end on EOF).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let line = raw_exchange(
                server.path(),
                &encode_request(2, &Request::Status).into_bytes(),
            );
            if decode_response(line.as_bytes())
                .expect("decodes")
                .outcome
                .is_ok()
            {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "slots never freed");
            thread::sleep(Duration::from_millis(10));
        }
    }
}
