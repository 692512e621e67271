//! The Corosync CPG transport and the cluster thread against a real
//! Corosync 3: a one-node cluster in a fresh network namespace, which is
//! also where the test thread joins the group (Corosync's IPC sockets are
//! abstract, so they belong to a network namespace). Needs root and the
//! `corosync` binary; fails, does not skip, without them. Each test runs
//! in about a second and removes its namespace, its Corosync process (by
//! PID) and its files.
//!
//! ```text
//!  netns phxd-<pid>-<tag> (lo: 127.0.0.1, 10.250.0.1/32)
//!    corosync -f (nodeid 7, knet on 10.250.0.1; private /run,
//!                 /var/lib/corosync, /var/log/corosync)
//!    test thread ── libcpg ── CpgTransport (group "phalanx-test")
//!                └─ cluster::spawn: CPG + heartbeats on 10.250.0.1:7400
//! ```
#![allow(clippy::unwrap_used)]

use std::fs::{self, File};
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sched::{setns, CloneFlags};
use phalanx_cluster::transport::{GroupEvent, GroupTransport};
use phalanx_cluster::{
    Direction, DispatchScheme, NodeDataPath, NodeId, OutboundDecision, SaDescriptor,
};
use phalanx_control::ClusterReport;
use phalanx_io::poll::{Interest, PollSet};
use phalanxd::cluster::{self, corosync::CpgTransport, ClusterHandle};
use phalanxd::config::{ClusterSettings, ClusterSide};

const NODE_ID: u32 = 7;
const ADDRESS: &str = "10.250.0.1";

fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root: it creates a network namespace and starts corosync in it"
    );
}

/// Runs a command; panics with its output on failure.
fn run(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A network namespace, deleted on drop.
struct NetNs(String);

impl NetNs {
    fn create(tag: &str) -> NetNs {
        require_root();
        let name = format!("phxd-{}-{tag}", std::process::id());
        run("ip", &["netns", "add", &name]);
        let ns = NetNs(name);
        run("ip", &["-n", &ns.0, "link", "set", "lo", "up"]);
        ns
    }

    /// Runs `f` on a thread inside the namespace.
    fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.0);
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    setns(File::open(&path).unwrap(), CloneFlags::CLONE_NEWNET).unwrap();
                    f()
                })
                .join()
                .unwrap()
        })
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        drop(Command::new("ip").args(["netns", "del", &self.0]).status());
    }
}

/// A one-node Corosync in its own namespaces; killed by PID on drop.
struct Corosync {
    child: Child,
    dir: PathBuf,
    ns: NetNs,
}

impl Corosync {
    fn start(tag: &str) -> Corosync {
        let ns = NetNs::create(tag);
        run(
            "ip",
            &[
                "-n",
                &ns.0,
                "addr",
                "add",
                &format!("{ADDRESS}/32"),
                "dev",
                "lo",
            ],
        );
        let dir = std::env::temp_dir().join(format!("phxd-{}-{tag}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("corosync.conf");
        fs::write(
            &conf,
            format!(
                "totem {{\n version: 2\n cluster_name: phxcpg\n transport: knet\n \
                 crypto_cipher: none\n crypto_hash: none\n token: 1000\n}}\n\
                 nodelist {{\n node {{\n ring0_addr: {ADDRESS}\n nodeid: {NODE_ID}\n name: n{NODE_ID}\n }}\n}}\n\
                 logging {{\n to_stderr: yes\n to_syslog: no\n to_logfile: no\n}}\n"
            ),
        )
        .unwrap();
        // `ip netns exec` runs the shell in a mount namespace of its own,
        // so these mounts are private to this Corosync; `exec` keeps the
        // PID, so killing the child kills Corosync.
        let script = format!(
            "mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /var/lib/corosync && \
             mount -t tmpfs tmpfs /var/log/corosync && exec corosync -f -c {}",
            conf.display()
        );
        let log = File::create(dir.join("corosync.log")).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.0, "sh", "-c", &script])
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start corosync (is it installed?)");
        Corosync { child, dir, ns }
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.join("corosync.log")).unwrap_or_default()
    }
}

impl Drop for Corosync {
    fn drop(&mut self) {
        drop(self.child.kill());
        drop(self.child.wait());
        drop(fs::remove_dir_all(&self.dir));
    }
}

/// Joins, retrying while Corosync starts (bounded).
fn join(corosync: &Corosync, group: &str) -> CpgTransport {
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        match CpgTransport::join(group) {
            Ok(t) => return t,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("{e}\ncorosync log:\n{}", corosync.log()),
        }
    }
}

/// Polls the transport's descriptor, dispatches, and returns the first
/// event `want` accepts (bounded).
fn wait_for(
    transport: &mut CpgTransport,
    mut want: impl FnMut(&GroupEvent) -> bool,
) -> Option<GroupEvent> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        while let Some(event) = transport.poll() {
            if want(&event) {
                return Some(event);
            }
        }
        if let Some(fd) = transport.fd() {
            let fd = fd.try_clone_to_owned().unwrap();
            let mut set = PollSet::with_capacity(1);
            set.add(fd.as_fd(), Interest::READ);
            set.wait(Some(Duration::from_millis(100))).unwrap();
        } else {
            std::thread::sleep(Duration::from_millis(5));
        }
        transport.dispatch().unwrap();
        transport.flush().unwrap();
        while let Some(event) = transport.poll() {
            if want(&event) {
                return Some(event);
            }
        }
    }
    None
}

#[test]
fn one_node_group_delivers_membership_and_messages_in_order() {
    let corosync = Corosync::start("cpg");
    corosync.ns.run(|| {
        let mut transport = join(&corosync, "phalanx-test");
        assert_eq!(transport.local(), NodeId(NODE_ID));
        assert!(transport.fd().is_some(), "the CPG descriptor is pollable");
        let me = vec![NodeId(NODE_ID)];
        let joined = wait_for(
            &mut transport,
            |e| matches!(e, GroupEvent::Membership { members } if *members == me),
        );
        assert!(joined.is_some(), "no membership with this node");
        // Many at once: the agreed order is the sending order, and a
        // congested IPC (CS_ERR_TRY_AGAIN) only delays, never reorders.
        for i in 0..200_u32 {
            transport.multicast(&i.to_be_bytes()).unwrap();
        }
        let mut next = 0_u32;
        while next < 200 {
            let event = wait_for(&mut transport, |e| {
                matches!(e, GroupEvent::Delivered { .. })
            });
            let Some(GroupEvent::Delivered { from, message }) = event else {
                panic!(
                    "message {next} not delivered; stats {:?}",
                    transport.stats()
                );
            };
            assert_eq!(from, NodeId(NODE_ID));
            assert_eq!(message, next.to_be_bytes(), "delivered in order");
            next += 1;
        }
        let stats = transport.stats();
        assert_eq!((stats.sent, stats.delivered), (200, 200), "{stats:?}");
        assert_eq!(transport.backlog(), 0);
    });
}

#[test]
fn no_corosync_is_a_clear_error() {
    let ns = NetNs::create("nocoro");
    let message = ns.run(|| CpgTransport::join("phalanx-test").unwrap_err().to_string());
    assert!(
        message.contains("is corosync running in this network namespace?"),
        "{message}"
    );
}

/// Settings of the one node: heartbeats on the namespace's 10.250.0.1.
fn settings() -> ClusterSettings {
    let side = |last: u8| ClusterSide {
        interface: format!("if{last}"),
        addresses: IpAddr::V4(Ipv4Addr::new(192, 0, 2, last)).into(),
        mac: [2, 0, 0x5e, 0x10, 0, last],
    };
    ClusterSettings {
        node_id: NodeId(NODE_ID),
        scheme: DispatchScheme::PacketRoundRobin,
        group: "phalanx-thread".into(),
        heartbeat_port: 7400,
        heartbeat_interval: Duration::from_millis(5),
        suspect_after: Duration::from_millis(30),
        lease_len: 4096,
        checkpoint_every: 64,
        quorum: phalanx_cluster::QuorumPolicy::default(),
        kernel_filter: false,
        kernel_filter_xdp: false,
        outside: side(1),
        inside: side(2),
        nodes: vec![(NodeId(NODE_ID), ADDRESS.parse().unwrap())],
    }
}

/// Polls `handle`'s report until `done` accepts it (bounded).
fn report_until(handle: &ClusterHandle, done: impl Fn(&ClusterReport) -> bool) -> ClusterReport {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let report = handle.report().expect("the thread answers");
        if done(&report) || Instant::now() > deadline {
            return report;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn cluster_thread_founds_a_one_node_cluster_and_takes_reports() {
    let corosync = Corosync::start("thread");
    let peer: IpAddr = "192.0.2.2".parse().unwrap();
    corosync.ns.run(|| {
        // Wait until Corosync answers, then hand the group to the thread.
        drop(join(&corosync, "phalanx-probe"));
        let mut wrong = settings();
        wrong.node_id = NodeId(8);
        wrong.nodes[0].0 = NodeId(8);
        let stop = Arc::new(AtomicBool::new(false));
        let e = cluster::spawn(&wrong, Vec::new(), Arc::clone(&stop)).unwrap_err();
        assert!(
            e.to_string().contains("Corosync says this is node 7"),
            "{e}"
        );
        let sas = vec![
            SaDescriptor {
                direction: Direction::Outbound,
                spi: 0x1001,
                esn: false,
                peer,
                peer_window: 0,
            },
            SaDescriptor {
                direction: Direction::Inbound,
                spi: 0x2001,
                esn: false,
                peer,
                peer_window: 0,
            },
        ];
        let handle = cluster::spawn(&settings(), sas, Arc::clone(&stop)).unwrap();
        let report = report_until(&handle, |r| r.ready && r.sas.len() == 2);
        assert!(report.ready, "{report:#?}");
        assert_eq!(report.members.len(), 1);
        let me = &report.members[0];
        assert!(
            me.local && me.agreed && me.live && me.ready && !me.suspected,
            "{me:?}"
        );
        assert_eq!(me.address.as_deref(), Some(ADDRESS));
        // The data plane's side: adopt the published state, send 200
        // packets, hand the reports (checkpoints) back.
        let mut datapath = NodeDataPath::new(NodeId(NODE_ID), DispatchScheme::PacketRoundRobin);
        datapath.update(&handle.shared.load());
        let mut last = 0;
        for i in 0..200_u64 {
            match datapath.outbound(0x1001, peer, 1, 100, i) {
                OutboundDecision::Send { seq } => {
                    assert!(seq > last, "sequence numbers only grow");
                    last = seq;
                }
                other => panic!("packet {i}: {other:?}"),
            }
        }
        let sender = handle.report_sender();
        let mut sent = 0;
        while let Some(report) = datapath.poll_report() {
            assert!(sender.send(report));
            sent += 1;
        }
        assert!(sent > 0, "checkpoints to report");
        let report = report_until(&handle, |r| {
            r.sas.iter().any(|sa| sa.spi == 0x1001 && sa.counter >= 192)
        });
        let sa = report.sas.iter().find(|sa| sa.spi == 0x1001).unwrap();
        assert!(sa.counter >= 192, "{sa:?}");
        assert_eq!(sa.class, Some(0));
        let block = sa.block.as_ref().expect("a lease block");
        assert_eq!(block.view, vec![NODE_ID]);
        assert!(
            block.start <= last && last <= block.end,
            "{block:?} holds {last}"
        );
        assert!(sa.checkpoint_age_ms.is_some());
        let count = |name: &str| {
            report
                .counters
                .iter()
                .find(|c| c.name == name)
                .map(|c| c.count)
        };
        assert!(count("lease_grants") > Some(0), "{:?}", report.counters);
        assert!(count("corosync_delivered") > Some(0));
        assert_eq!(count("reports_received"), Some(sent));
        assert_eq!(count("report_queue_full"), Some(0));
        assert!(handle.is_running());
        handle.join();
        assert!(stop.load(Ordering::SeqCst), "join sets the stop flag");
    });
}
