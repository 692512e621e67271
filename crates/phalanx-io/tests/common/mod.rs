//! Network namespaces for the tests that need root: each test makes its
//! own (`ip netns add phxio-<pid>-<tag>`), runs code inside it from a
//! dedicated thread (`setns(2)` changes only the calling thread), and
//! deletes it on drop. Interfaces outside these namespaces are never
//! touched.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::fs::File;
use std::process::Command;
use std::thread::JoinHandle;

use nix::sched::{setns, CloneFlags};

/// Fails (does not skip) when not root: these tests create namespaces and
/// TUN devices and open raw sockets.
pub(crate) fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (CAP_NET_ADMIN and CAP_NET_RAW): it creates network namespaces, \
         TUN devices and raw sockets; run `cargo test -p phalanx-io` as root"
    );
}

/// A named network namespace, deleted on drop.
pub(crate) struct NetNs {
    name: String,
}

impl NetNs {
    /// Creates `phxio-<pid>-<tag>` with its loopback up.
    pub(crate) fn create(tag: &str) -> NetNs {
        require_root();
        let name = format!("phxio-{}-{tag}", std::process::id());
        run("ip", &["netns", "add", &name]);
        let ns = NetNs { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// The namespace's name (`phxio-<pid>-<tag>`).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n <ns> args…`; panics with its stderr on failure.
    pub(crate) fn ip(&self, args: &[&str]) -> String {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// Runs a command inside the namespace (`ip netns exec`, which also
    /// mounts the namespace's /sys).
    pub(crate) fn exec(&self, args: &[&str]) -> String {
        let mut full = vec!["netns", "exec", self.name.as_str()];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// A counter of an interface in the namespace (e.g. `rx_packets`).
    pub(crate) fn link_counter(&self, dev: &str, counter: &str) -> u64 {
        let path = format!("/sys/class/net/{dev}/statistics/{counter}");
        let text = self.exec(&["cat", &path]);
        text.trim()
            .parse()
            .unwrap_or_else(|e| panic!("{path}: {text:?}: {e}"))
    }

    /// Runs `f` on a thread that entered the namespace, and waits for it.
    /// Descriptors opened there (TUN devices, sockets) belong to the
    /// namespace and can be used from any thread afterwards.
    pub(crate) fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    self.enter();
                    f()
                })
                .join()
                .unwrap_or_else(|_| panic!("thread in {} panicked", self.name))
        })
    }

    /// Spawns a thread that lives in the namespace.
    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> JoinHandle<T> {
        let path = self.path();
        std::thread::spawn(move || {
            enter(&path);
            f()
        })
    }

    fn path(&self) -> String {
        format!("/run/netns/{}", self.name)
    }

    fn enter(&self) {
        enter(&self.path());
    }
}

fn enter(path: &str) {
    let file = File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    setns(&file, CloneFlags::CLONE_NEWNET).unwrap_or_else(|e| panic!("setns {path}: {e}"));
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // Best effort: a failure here must not hide the test's own panic.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
