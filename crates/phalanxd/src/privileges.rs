//! Dropping privileges once the devices and sockets are open (OpenBSD
//! iked style: every retained privilege is written down, and here none
//! is retained). See `crates/phalanxd/PRIVILEGES.md`.
//!
//! What needed privilege, all of it at open time: creating the TUN device
//! and its queues (`CAP_NET_ADMIN`), the raw ESP socket (`CAP_NET_RAW`),
//! socket buffers beyond `net.core.[rw]mem_max` (`CAP_NET_ADMIN`, through
//! `SO_RCVBUFFORCE`), and the control socket under `/run` (root's
//! directory). What runs afterwards — reading and writing open
//! descriptors, `sendmmsg` from a local address, reloading SAs and
//! policies, accepting control connections — needs none. So the daemon
//! keeps **no** capability: it clears the bounding set, optionally becomes
//! the configured user (`setgroups`, `setgid`, `setuid`), clears the
//! effective, permitted, inheritable and ambient sets, sets
//! `PR_SET_NO_NEW_PRIVS`, and checks that nothing is left.
//!
//! Capabilities are per thread on Linux: this must run before any other
//! thread exists (workers, crypto pool, control and metrics servers are
//! all started after it), so every thread inherits the empty sets.

use std::fmt;
use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use caps::CapSet;
use nix::unistd::{Gid, Uid, User};

/// Why the privileges could not be dropped; the daemon refuses to run on.
#[derive(Debug)]
pub struct PrivilegeError(String);

impl fmt::Display for PrivilegeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dropping privileges: {}", self.0)
    }
}

impl std::error::Error for PrivilegeError {}

/// The account to become.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// User name, for messages.
    pub name: String,
    /// User id.
    pub uid: Uid,
    /// Primary group id.
    pub gid: Gid,
}

/// Looks `name` up in the user database.
pub fn account(name: &str) -> Result<Account, PrivilegeError> {
    match User::from_name(name) {
        Ok(Some(user)) => Ok(Account {
            name: name.to_owned(),
            uid: user.uid,
            gid: user.gid,
        }),
        Ok(None) => Err(PrivilegeError(format!("no user {name:?}"))),
        Err(e) => Err(PrivilegeError(format!("looking up user {name:?}: {e}"))),
    }
}

/// Creates the control socket's directory for `account` if it does not
/// exist (mode 0700, owned by the account), so the socket can be created
/// there after the drop. An existing directory is left as it is.
pub fn prepare_socket_dir(socket: &Path, account: &Account) -> Result<(), PrivilegeError> {
    let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    if dir.exists() {
        return Ok(());
    }
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| PrivilegeError(format!("creating {}: {e}", dir.display())))?;
    nix::unistd::chown(dir, Some(account.uid), Some(account.gid))
        .map_err(|e| PrivilegeError(format!("chown {}: {e}", dir.display())))
}

/// What [`drop_all`] did, for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// The user now running the daemon, if it changed.
    pub user: Option<String>,
    /// Capabilities that were effective before.
    pub had: usize,
}

/// Drops every capability, and becomes `account` if given. Call from the
/// only thread of the process.
pub fn drop_all(account: Option<&Account>) -> Result<Dropped, PrivilegeError> {
    let had = caps::read(None, CapSet::Effective).map_or(0, |set| set.len());
    // Needs CAP_SETPCAP, so before the others go. Without it (already
    // unprivileged) there is nothing in the bounding set we could use.
    if caps::has_cap(None, CapSet::Effective, caps::Capability::CAP_SETPCAP).unwrap_or(false) {
        caps::clear(None, CapSet::Bounding).map_err(|e| PrivilegeError(e.to_string()))?;
    }
    if let Some(account) = account {
        become_user(account)?;
    }
    for set in [
        CapSet::Ambient,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        caps::clear(None, set).map_err(|e| PrivilegeError(format!("clearing {set:?}: {e}")))?;
    }
    nix::sys::prctl::set_no_new_privs()
        .map_err(|e| PrivilegeError(format!("no_new_privs: {e}")))?;
    let left = caps::read(None, CapSet::Permitted).map_err(|e| PrivilegeError(e.to_string()))?;
    if !left.is_empty() {
        return Err(PrivilegeError(format!(
            "capabilities still permitted: {left:?}"
        )));
    }
    Ok(Dropped {
        user: account.map(|a| a.name.clone()),
        had,
    })
}

/// `setgroups`, `setgid`, `setuid`, in that order (the group calls need
/// the privilege the last one gives up), then checks the switch took.
fn become_user(account: &Account) -> Result<(), PrivilegeError> {
    let fail =
        |what: &str, e: nix::Error| PrivilegeError(format!("{what} for {}: {e}", account.name));
    nix::unistd::setgroups(&[account.gid]).map_err(|e| fail("setgroups", e))?;
    nix::unistd::setgid(account.gid).map_err(|e| fail("setgid", e))?;
    nix::unistd::setuid(account.uid).map_err(|e| fail("setuid", e))?;
    let regained = account.uid != Uid::from_raw(0) && nix::unistd::setuid(Uid::from_raw(0)).is_ok();
    if nix::unistd::geteuid() != account.uid || regained {
        return Err(PrivilegeError(format!(
            "still able to act as root after becoming {}",
            account.name
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_user_is_an_error() {
        let err = account("phalanx-no-such-user-xyz").unwrap_err();
        assert!(err.to_string().contains("no user"), "{err}");
    }

    #[test]
    fn root_account_resolves() {
        let root = account("root").unwrap();
        assert_eq!(root.uid, Uid::from_raw(0));
    }
}
