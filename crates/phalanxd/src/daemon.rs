//! The daemon's shared state: the configuration in force, the installed
//! SAs ([`SaStore`]), the workers' counters, and the answers to the
//! control socket and metrics ([`ControlHandler`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use phalanx_control::{
    ActionResult, ClusterReport, CounterReport, DropCounter, ErrorBody, ErrorCode, IkeSaReport,
    NamedCounter, PolicyInfo, PoolReport, ReloadSummary, SaInfo, Status, WorkerLoad,
};

use crate::cluster::ClusterHandle;
use crate::config::{check_cluster_reload, connection_changes, Config};
use crate::control::{cluster_disabled, ike_disabled, ControlHandler};
use crate::dataplane::{StatsSlot, WorkerStats};
use crate::ike::{Failure, IkeControl};
use crate::install::{ApplySummary, InstallError, SaStore};
use crate::report;

/// The daemon's state, shared by the main thread, the control server and
/// the metrics server.
#[derive(Debug)]
pub struct Daemon {
    config_path: PathBuf,
    config: parking_lot::Mutex<Config>,
    store: Arc<SaStore>,
    started: Instant,
    loaded_at_unix: AtomicU64,
    workers: OnceLock<Vec<Arc<StatsSlot>>>,
    ike: OnceLock<IkeControl>,
    cluster: OnceLock<Arc<ClusterHandle>>,
    reloads: AtomicU64,
    reload_failures: AtomicU64,
}

impl Daemon {
    /// Installs `config`'s SAs and policies.
    pub fn new(config: Config) -> Result<Daemon, InstallError> {
        let store = Arc::new(SaStore::new());
        if config.cluster.is_some() {
            store.set_assigned_sequence_numbers();
        }
        store.apply_config(&config, Instant::now())?;
        Ok(Daemon {
            config_path: config.path.clone(),
            config: parking_lot::Mutex::new(config),
            store,
            started: Instant::now(),
            loaded_at_unix: AtomicU64::new(unix_now()),
            workers: OnceLock::new(),
            ike: OnceLock::new(),
            cluster: OnceLock::new(),
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
        })
    }

    /// The installed SAs and policies, as the workers read them.
    pub fn store(&self) -> &Arc<SaStore> {
        &self.store
    }

    /// A copy of the configuration in force.
    pub fn config(&self) -> Config {
        self.config.lock().clone()
    }

    /// Registers the workers' counter slots (once, after they start).
    pub fn attach_workers(&self, slots: Vec<Arc<StatsSlot>>) {
        // A second call would be a wiring bug; the first registration stays.
        let _ = self.workers.set(slots);
    }

    /// Registers the IKE thread's handle (once, after it starts).
    pub fn attach_ike(&self, control: IkeControl) {
        // A second call would be a wiring bug; the first registration stays.
        let _ = self.ike.set(control);
    }

    /// Registers the cluster thread's handle (once, after it starts).
    pub fn attach_cluster(&self, cluster: Arc<ClusterHandle>) {
        // A second call would be a wiring bug; the first registration stays.
        let _ = self.cluster.set(cluster);
    }

    /// The IKE thread's counters (empty without IKE).
    pub fn ike_counters(&self) -> Vec<NamedCounter> {
        let Some(ike) = self.ike.get() else {
            return Vec::new();
        };
        let status = ike.status();
        let mut out = crate::ike::report::counters(&status.counters);
        out.extend(status.daemon);
        out
    }

    /// Re-reads the configuration file and applies it (SIGHUP, `phalanxctl
    /// reload`). Nothing changes on error.
    pub fn reload_file(&self) -> Result<ApplySummary, String> {
        let result = Config::load(&self.config_path)
            .map_err(|e| e.to_string())
            .and_then(|config| self.apply(config));
        let counter = if result.is_ok() {
            &self.reloads
        } else {
            &self.reload_failures
        };
        counter.fetch_add(1, Ordering::Relaxed);
        result
    }

    /// Applies an already validated configuration: its SAs and policies,
    /// and its connections (handed to the IKE thread, which keeps the SAs
    /// of unchanged connections and replaces the others). The devices and
    /// sockets cannot change without a restart, so a file whose `[clear]`
    /// or `[protected]` section or IKE port differs, or that turns IKE on,
    /// is refused as a whole.
    pub fn apply(&self, mut new: Config) -> Result<ApplySummary, String> {
        let mut current = self.config.lock();
        if new.clear != current.clear {
            return Err(format!(
                "{}: [clear] changed; interface settings need a restart (nothing applied)",
                new.path.display()
            ));
        }
        if new.protected != current.protected {
            return Err(format!(
                "{}: [protected] changed; interface settings need a restart (nothing applied)",
                new.path.display()
            ));
        }
        if new.daemon != current.daemon {
            tracing::warn!("[daemon] changed; those settings apply at the next restart");
        }
        // The raw AH socket is opened at start when an SA may use AH.
        if new.uses_ah() && !current.uses_ah() {
            return Err(format!(
                "{}: the first AH SA needs the raw AH socket, opened at start: restart (nothing applied)",
                new.path.display()
            ));
        }
        let path = new.path.display().to_string();
        check_cluster_reload(&path, current.cluster.as_ref(), new.cluster.as_ref())?;
        self.check_ike_reload(&current, &mut new)?;
        let mut summary = self
            .store
            .apply_config(&new, Instant::now())
            .map_err(|e| format!("{}: {e} (nothing applied)", new.path.display()))?;
        let changes = connection_changes(current.ike.as_ref(), new.ike.as_ref());
        let named = |names: Vec<String>| names.into_iter().map(|n| format!("connection {n}"));
        summary.added.extend(named(changes.added));
        summary.changed.extend(named(changes.changed));
        summary.removed.extend(named(changes.removed));
        summary.unchanged += changes.unchanged;
        if let Some(ike) = self.ike.get() {
            let endpoint = new
                .ike
                .as_ref()
                .map(|s| s.endpoint.clone())
                .unwrap_or_default();
            let eap = new
                .ike
                .as_ref()
                .map(|s| Arc::clone(&s.eap))
                .unwrap_or_default();
            if let Err(e) = ike.reconfigure(endpoint, eap) {
                tracing::error!(error = %e.message, "the IKE thread did not take the new connections");
            }
        }
        *current = new;
        self.loaded_at_unix.store(unix_now(), Ordering::Relaxed);
        Ok(summary)
    }

    /// What a reload may not change about IKE (the socket is opened at
    /// start), and the credentials an unchanged connection keeps.
    fn check_ike_reload(&self, current: &Config, new: &mut Config) -> Result<(), String> {
        let path = new.path.display().to_string();
        match (&current.ike, &mut new.ike) {
            (None, Some(_)) if self.ike.get().is_none() => Err(format!(
                "{path}: [ike]/[[connection]] added; IKE starts at the next restart (nothing applied)"
            )),
            (Some(old), Some(fresh)) => {
                if old.port != fresh.port {
                    return Err(format!(
                        "{path}: [ike] port changed; the IKE socket needs a restart (nothing applied)"
                    ));
                }
                fresh.adopt_unchanged_credentials(old);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Every worker's counters, in worker order.
    pub fn worker_stats(&self) -> Vec<WorkerStats> {
        self.workers
            .get()
            .map(|slots| slots.iter().map(|s| s.read()).collect())
            .unwrap_or_default()
    }

    /// Reloads that applied and reloads refused.
    pub fn reload_counts(&self) -> (u64, u64) {
        (
            self.reloads.load(Ordering::Relaxed),
            self.reload_failures.load(Ordering::Relaxed),
        )
    }
}

fn error_body(failure: Failure) -> ErrorBody {
    ErrorBody::new(failure.code, failure.message)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl ControlHandler for Daemon {
    fn status(&self) -> Status {
        let rt = self.store.snapshot();
        let config = self.config.lock();
        let inbound = rt
            .sas
            .iter()
            .filter(|s| s.config.direction == crate::config::Direction::In);
        let inbound = inbound.count();
        let protected = &config.protected;
        let mut local = format!("{} udp/{}", protected.local, protected.udp_port);
        if protected.raw_esp {
            local.push_str(" esp");
        }
        Status {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            uptime_seconds: self.started.elapsed().as_secs(),
            config_path: self.config_path.display().to_string(),
            config_loaded_at_unix: self.loaded_at_unix.load(Ordering::Relaxed),
            workers: u32::try_from(self.workers.get().map_or(0, Vec::len)).unwrap_or(u32::MAX),
            sas_inbound: u32::try_from(inbound).unwrap_or(u32::MAX),
            sas_outbound: u32::try_from(rt.sas.len() - inbound).unwrap_or(u32::MAX),
            policies: u32::try_from(rt.policies.len()).unwrap_or(u32::MAX),
            tun: config.clear.tun.clone(),
            protected_local: local,
        }
    }

    fn sas(&self) -> Vec<SaInfo> {
        let rt = self.store.snapshot();
        let now = Instant::now();
        rt.sas.iter().map(|sa| report::sa_info(sa, now)).collect()
    }

    fn policies(&self) -> Vec<PolicyInfo> {
        let rt = self.store.snapshot();
        let workers = self.workers.get().map(|_| self.worker_stats());
        rt.policies
            .iter()
            .map(|p| {
                let hits = workers.as_deref().map(|w| report::policy_hits(p, w));
                report::policy_info(p, hits)
            })
            .collect()
    }

    fn counters(&self) -> CounterReport {
        let workers = self.worker_stats();
        let mut total = WorkerStats::default();
        for w in &workers {
            total.merge(w);
        }
        let mut merged = total.outbound.clone();
        merged.merge(&total.inbound);
        let drops = merged
            .iter_drops()
            .map(|(reason, count)| DropCounter {
                reason: reason.name().to_owned(),
                description: reason.description().to_owned(),
                count,
            })
            .collect();
        let (reloads, failures) = self.reload_counts();
        let mut daemon = report::esp_counters(&total);
        daemon.extend(total.daemon.iter().map(|(c, count)| NamedCounter {
            name: c.name().to_owned(),
            count,
        }));
        daemon.push(report::named("reloads", reloads));
        daemon.push(report::named("reload_failures", failures));
        // What the kernel dropped before our sockets read it (the
        // namespace's IP/UDP error counters), beside our own drops.
        if let Ok(kernel) = phalanx_io::kernel_stats::KernelDrops::read() {
            daemon.extend(kernel.named().iter().map(|(n, c)| report::named(n, *c)));
        }
        let workers = workers
            .iter()
            .enumerate()
            .map(|(i, w)| WorkerLoad {
                worker: u32::try_from(i).unwrap_or(u32::MAX),
                busy_ratio: w.busy_1s(),
                packets: w.packets(),
                busy_1s: Some(w.busy_1s()),
                busy_avg: Some(w.busy_avg()),
                busy_seconds: Some(Duration::from_nanos(w.busy_ns).as_secs_f64()),
            })
            .collect();
        CounterReport {
            drops,
            daemon,
            workers,
            ike: self.ike_counters(),
        }
    }

    fn ike(&self) -> Result<Vec<IkeSaReport>, ErrorBody> {
        let ike = self.ike.get().ok_or_else(ike_disabled)?;
        let status = ike.status();
        let rt = self.store.snapshot();
        Ok(crate::ike::report::ike_sas(
            &status.sas,
            &rt,
            Instant::now(),
            &status.eap_methods,
        ))
    }

    fn initiate(
        &self,
        connection: &str,
        wait: Option<Duration>,
    ) -> Result<ActionResult, ErrorBody> {
        let ike = self.ike.get().ok_or_else(ike_disabled)?;
        ike.initiate(connection, wait).map_err(error_body)
    }

    fn terminate(&self, connection: &str) -> Result<ActionResult, ErrorBody> {
        let ike = self.ike.get().ok_or_else(ike_disabled)?;
        ike.terminate(connection).map_err(error_body)
    }

    fn disconnect(&self, peer: &str) -> Result<ActionResult, ErrorBody> {
        let ike = self.ike.get().ok_or_else(ike_disabled)?;
        ike.disconnect(peer).map_err(error_body)
    }

    fn pools(&self) -> Result<Vec<PoolReport>, ErrorBody> {
        let ike = self.ike.get().ok_or_else(ike_disabled)?;
        Ok(crate::ike::report::pools(&ike.status().pools))
    }

    fn cluster(&self) -> Result<ClusterReport, ErrorBody> {
        let cluster = self.cluster.get().ok_or_else(cluster_disabled)?;
        let mut report = cluster.report().ok_or_else(|| {
            ErrorBody::new(
                ErrorCode::TIMED_OUT,
                "the cluster thread has not answered a status request yet",
            )
        })?;
        // IKE in cluster mode: its replication, takeovers and demotions.
        let ike = self.ike_counters().into_iter();
        report
            .counters
            .extend(ike.filter(|c| c.name.starts_with("cluster_ike_")));
        Ok(report)
    }

    fn reload(&self) -> Result<ReloadSummary, String> {
        let summary = self.reload_file()?;
        tracing::info!(
            added = summary.added.len(),
            changed = summary.changed.len(),
            removed = summary.removed.len(),
            unchanged = summary.unchanged,
            "configuration reloaded (control socket)"
        );
        Ok(report::reload_summary(summary))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const FILE: &str = r#"[clear]
tun = "phx0"

[protected]
local = "192.0.2.1"

[[sa]]
name = "out1"
direction = "out"
spi = 0x1001
encryption = "aes128gcm16"
key = "0102030405060708090a0b0c0d0e0f1011121314"
remote = "192.0.2.2"

[[sa]]
name = "in1"
direction = "in"
spi = 0x2001
encryption = "aes128gcm16"
key = "a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4"
remote = "192.0.2.2"

[[policy]]
name = "p1"
src = "10.1.0.0/24"
dst = "10.2.0.0/24"
action = "protect"
sa = "out1"
"#;

    /// A file of its own for each test.
    fn temp_config(test: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("phalanxd-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gw.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn daemon(path: &Path) -> Daemon {
        Daemon::new(Config::load(path).unwrap()).unwrap()
    }

    #[test]
    fn a_broken_file_changes_nothing() {
        let path = temp_config("broken", FILE);
        let d = daemon(&path);
        let before = d.store().snapshot();
        std::fs::write(&path, FILE.replace("aes128gcm16", "aes-gcm")).unwrap();
        let err = d.reload_file().unwrap_err();
        assert!(
            err.starts_with(&format!("{}:11:14: field sa[0].encryption", path.display())),
            "{err}"
        );
        assert!(Arc::ptr_eq(&before, &d.store().snapshot()));
        assert_eq!(d.reload_counts(), (0, 1));
        // An interface change is refused as a whole, even with valid SAs.
        std::fs::write(&path, FILE.replace("tun = \"phx0\"", "tun = \"phx1\"")).unwrap();
        let err = d.reload_file().unwrap_err();
        assert!(err.contains("[clear] changed"), "{err}");
        assert!(Arc::ptr_eq(&before, &d.store().snapshot()));
        assert_eq!(d.config().clear.tun, "phx0");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    const IKE: &str = r#"
[ike]
port = 500

[[connection]]
name = "site-b"
remote_addr = "192.0.2.2"
auth = "psk"
psk = "a long shared secret"
force_encap = true

[[connection.child]]
name = "net"
local_ts = ["10.1.0.0/24"]
remote_ts = ["10.2.0.0/24"]
"#;

    /// IKE's socket is opened at start: a reload may not turn IKE on or
    /// move its port; a reload that keeps the connection reports it
    /// unchanged, one that edits it reports it changed.
    #[test]
    fn reloads_and_ike() {
        let path = temp_config("ike-on", FILE);
        let d = daemon(&path);
        std::fs::write(&path, format!("{FILE}{IKE}")).unwrap();
        let err = d.reload_file().unwrap_err();
        assert!(err.contains("IKE starts at the next restart"), "{err}");
        assert!(d.config().ike.is_none());
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();

        let path = temp_config("ike-port", &format!("{FILE}{IKE}"));
        let d = daemon(&path);
        let slots = d.store().snapshot().slots.clone();
        assert_eq!(slots.len(), 1);
        std::fs::write(
            &path,
            format!("{FILE}{}", IKE.replace("port = 500", "port = 501")),
        )
        .unwrap();
        let err = d.reload_file().unwrap_err();
        assert!(err.contains("[ike] port changed"), "{err}");
        std::fs::write(&path, format!("{FILE}{IKE}")).unwrap();
        let summary = d.reload_file().unwrap();
        assert!(
            summary.changed.is_empty() && summary.added.is_empty(),
            "{summary:?}"
        );
        assert_eq!(
            summary.unchanged, 4,
            "3 [[sa]]/[[policy]] and the connection"
        );
        assert_eq!(
            *d.store().snapshot().slots,
            *slots,
            "the child keeps its slot"
        );
        std::fs::write(
            &path,
            format!("{FILE}{}", IKE.replace("10.2.0.0/24", "10.3.0.0/24")),
        )
        .unwrap();
        let summary = d.reload_file().unwrap();
        assert_eq!(summary.changed, ["connection site-b"]);
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    /// The raw AH socket is opened at start: a reload that brings the
    /// first AH SA is refused and changes nothing.
    #[test]
    fn the_first_ah_sa_needs_a_restart() {
        let path = temp_config("ah", FILE);
        let d = daemon(&path);
        let ah = "[[sa]]\nname = \"ah-in\"\ndirection = \"in\"\nspi = 0x3001\nprotocol = \"ah\"\n\
                  encryption = \"null\"\nintegrity = \"sha256\"\n\
                  integrity_key = \"000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f\"\n\
                  remote = \"192.0.2.2\"\nencap = \"none\"\n";
        let text = format!("{FILE}\n{ah}").replace(
            "local = \"192.0.2.1\"\n",
            "local = \"192.0.2.1\"\nraw_esp = true\n",
        );
        std::fs::write(&path, &text).unwrap();
        let err = d.reload_file().unwrap_err();
        assert!(
            err.contains("[protected] changed") || err.contains("AH"),
            "{err}"
        );
        assert_eq!(d.store().snapshot().sas.len(), 2, "nothing applied");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
        // With raw_esp already on, the refusal names the AH socket.
        let path = temp_config(
            "ah2",
            &FILE.replace(
                "local = \"192.0.2.1\"\n",
                "local = \"192.0.2.1\"\nraw_esp = true\n",
            ),
        );
        let d = daemon(&path);
        std::fs::write(&path, &text).unwrap();
        let err = d.reload_file().unwrap_err();
        assert!(err.contains("raw AH socket, opened at start"), "{err}");
        assert_eq!(d.store().snapshot().sas.len(), 2, "nothing applied");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    /// `policies` sums each policy's hits over the workers' published
    /// counters; `counters` reports each worker's load both ways.
    #[test]
    fn hits_and_loads_come_from_the_published_worker_stats() {
        let path = temp_config("hits", FILE);
        let d = daemon(&path);
        assert_eq!(d.policies()[0].hits, None, "no workers: not counted");
        let rt = d.store().snapshot();
        let slots: Vec<Arc<StatsSlot>> = (0..2).map(|_| Arc::default()).collect();
        for (n, slot) in (1..).zip(&slots) {
            let mut stats = WorkerStats::default();
            stats.policy_hits.sync(&rt);
            for _ in 0..n * 3 {
                stats.policy_hits.record(rt.policies[0].id);
            }
            (stats.busy_ns, stats.wall_ns, stats.busy_1s_ppm) =
                (n * 500_000_000, 4_000_000_000, 250_000);
            slot.publish(&stats);
        }
        d.attach_workers(slots);
        assert_eq!(d.policies()[0].hits, Some(3 + 6));
        let loads = d.counters().workers;
        assert_eq!(loads.len(), 2);
        assert_eq!((loads[1].busy_1s, loads[1].busy_ratio), (Some(0.25), 0.25));
        assert_eq!(loads[1].busy_avg, Some(0.25), "1 s busy of 4 s");
        assert_eq!(loads[0].busy_seconds, Some(0.5));
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_good_file_applies_and_the_handler_reports_it() {
        let path = temp_config("good", FILE);
        let d = daemon(&path);
        let extra = FILE
            .replace("name = \"in1\"", "name = \"in2\"")
            .replace("spi = 0x2001", "spi = 0x2002");
        std::fs::write(
            &path,
            format!(
                "{FILE}\n{}",
                &extra[extra.find("[[sa]]\nname = \"in2\"").unwrap()
                    ..extra.find("[[policy]]").unwrap()]
            ),
        )
        .unwrap();
        let summary = d.reload().unwrap();
        assert_eq!(summary.added, ["in2"]);
        assert_eq!(summary.unchanged, 3);
        let status = d.status();
        assert_eq!(
            (status.sas_inbound, status.sas_outbound, status.policies),
            (2, 1, 1)
        );
        assert_eq!(status.tun, "phx0");
        let sas = d.sas();
        let out = sas.iter().find(|s| s.name == "out1").unwrap();
        assert_eq!(
            (out.spi, out.encap, out.next_sequence),
            (0x1001, Some(4500), Some(1))
        );
        assert_eq!(out.encryption, "aes128gcm16");
        let policies = d.policies();
        assert_eq!(policies[0].sa.as_deref(), Some("out1"));
        assert_eq!(policies[0].destination, "10.2.0.0/24");
        let counters = d.counters();
        assert_eq!(counters.drops.len(), phalanx_esp::DropReason::COUNT);
        assert!(counters.daemon.iter().any(|c| c.name == "no_policy"));
        assert!(counters
            .daemon
            .iter()
            .any(|c| c.name == "reloads" && c.count == 1));
    }
}
