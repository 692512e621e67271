//! A network namespace holding one veth pair, for tests and measurements
//! that need root: `ip netns add <prefix>-<pid>`, the pair `pxa` /
//! `pxb` inside it, both up; the namespace (and the pair with it) is
//! deleted on drop. Nothing outside the namespace is touched.

use std::process::Command;

/// See the module docs.
#[derive(Debug)]
pub struct VethNamespace {
    name: String,
}

/// Runs `ip args…`; panics with its stderr on failure.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("ip {args:?}: {e} (install iproute2)"));
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl VethNamespace {
    /// Creates `<prefix>-<pid>` with the pair `pxa` / `pxb`, both up.
    pub fn create(prefix: &str) -> VethNamespace {
        let name = format!("{prefix}-{}", std::process::id());
        ip(&["netns", "add", &name]);
        let ns = VethNamespace { name };
        ip(&[
            "-n", &ns.name, "link", "add", "pxa", "type", "veth", "peer", "name", "pxb",
        ]);
        for link in ["pxa", "pxb"] {
            ip(&["-n", &ns.name, "link", "set", link, "up"]);
        }
        ns
    }

    /// The namespace's file, for `setns(2)`.
    pub fn path(&self) -> String {
        format!("/run/netns/{}", self.name)
    }
}

impl Drop for VethNamespace {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}
