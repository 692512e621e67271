//! Waiting on several descriptors at once with `poll(2)`, and a [`Waker`]
//! (an `eventfd`) that another thread uses to interrupt the wait, for
//! shutdown and reload.
//!
//! A worker thread's loop:
//!
//! ```no_run
//! # use phalanx_io::poll::{Interest, PollSet, Waker};
//! # use std::os::fd::AsFd;
//! # fn worker(tun: &impl AsFd, udp: &impl AsFd, waker: &Waker) -> std::io::Result<()> {
//! let mut set = PollSet::with_capacity(3);
//! let t = set.add(tun.as_fd(), Interest::READ);
//! let u = set.add(udp.as_fd(), Interest::READ);
//! let w = set.add(waker.as_fd(), Interest::READ);
//! loop {
//!     set.wait(Some(std::time::Duration::from_millis(100)))?;
//!     if set.readiness(w).readable {
//!         waker.reset()?;
//!         break; // or reload
//!     }
//!     if set.readiness(t).readable { /* tun.recv_batch(..) */ }
//!     if set.readiness(u).readable { /* udp.recv_batch(..) */ }
//! }
//! # Ok(()) }
//! ```

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};

/// A duplicate of descriptor `raw` that this process may poll and own,
/// for a descriptor a C library keeps (and hands out only as a number,
/// e.g. Corosync's `cpg_fd_get`): the same open file, so the same
/// readiness. The duplicate is close-on-exec; an `raw` that is not open
/// gives `EBADF`.
pub fn duplicate_raw_fd(raw: std::os::fd::RawFd) -> io::Result<std::os::fd::OwnedFd> {
    crate::sys::duplicate_raw_fd(raw)
}

/// Which readiness to wait for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interest {
    /// Data to read (`POLLIN`).
    pub read: bool,
    /// Room to write (`POLLOUT`).
    pub write: bool,
}

impl Interest {
    /// Readable.
    pub const READ: Interest = Interest {
        read: true,
        write: false,
    };
    /// Writable.
    pub const WRITE: Interest = Interest {
        read: false,
        write: true,
    };
    /// Readable or writable.
    pub const BOTH: Interest = Interest {
        read: true,
        write: true,
    };

    fn flags(self) -> PollFlags {
        let mut flags = PollFlags::empty();
        flags.set(PollFlags::POLLIN, self.read);
        flags.set(PollFlags::POLLOUT, self.write);
        flags
    }
}

/// What `poll` reported for one descriptor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    /// `POLLIN`.
    pub readable: bool,
    /// `POLLOUT`.
    pub writable: bool,
    /// `POLLERR`, `POLLHUP` or `POLLNVAL`: the next call on it reports why.
    pub error: bool,
}

/// A fixed set of descriptors to wait on. Tokens are the indexes
/// [`add`](Self::add) returns.
#[derive(Debug, Default)]
pub struct PollSet<'fd> {
    fds: Vec<PollFd<'fd>>,
}

impl<'fd> PollSet<'fd> {
    /// An empty set with room for `n` descriptors.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            fds: Vec::with_capacity(n),
        }
    }

    /// Adds a descriptor; returns its token.
    pub fn add(&mut self, fd: BorrowedFd<'fd>, interest: Interest) -> usize {
        self.fds.push(PollFd::new(fd, interest.flags()));
        self.fds.len() - 1
    }

    /// Changes what to wait for on `token` (e.g. add `write` while a send
    /// is pending). Unknown tokens are ignored.
    pub fn set_interest(&mut self, token: usize, interest: Interest) {
        if let Some(fd) = self.fds.get_mut(token) {
            fd.set_events(interest.flags());
        }
    }

    /// Waits until a descriptor is ready or `timeout` passes (`None`:
    /// forever; rounded up to whole milliseconds, so a short timeout never
    /// becomes a busy loop). Returns the number of ready descriptors; 0 on
    /// timeout or when a signal interrupted the wait.
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        let timeout = timeout.map_or(PollTimeout::NONE, millis_rounded_up);
        match nix::poll::poll(&mut self.fds, timeout) {
            Ok(n) => Ok(usize::try_from(n).unwrap_or(0)),
            Err(Errno::EINTR) => Ok(0),
            Err(errno) => Err(errno.into()),
        }
    }

    /// What the last [`wait`](Self::wait) reported for `token`.
    pub fn readiness(&self, token: usize) -> Readiness {
        let revents = self
            .fds
            .get(token)
            .and_then(PollFd::revents)
            .unwrap_or(PollFlags::empty());
        Readiness {
            readable: revents.contains(PollFlags::POLLIN),
            writable: revents.contains(PollFlags::POLLOUT),
            error: revents
                .intersects(PollFlags::POLLERR | PollFlags::POLLHUP | PollFlags::POLLNVAL),
        }
    }
}

fn millis_rounded_up(timeout: Duration) -> PollTimeout {
    let millis = timeout.as_nanos().div_ceil(1_000_000);
    PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX)
}

/// Wakes a thread blocked in [`PollSet::wait`] from another thread: an
/// `eventfd(2)` in nonblocking mode. Share it with `Arc`.
#[derive(Debug)]
pub struct Waker {
    event: EventFd,
}

impl Waker {
    /// A new, unsignalled waker.
    pub fn new() -> io::Result<Self> {
        let event = EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)?;
        Ok(Self { event })
    }

    /// Makes the waker readable until [`reset`](Self::reset).
    pub fn wake(&self) -> io::Result<()> {
        match self.event.write(1) {
            // The counter is saturated: it is readable already.
            Ok(_) | Err(Errno::EAGAIN) => Ok(()),
            Err(errno) => Err(errno.into()),
        }
    }

    /// Clears the signal; returns how many wakes it absorbed.
    pub fn reset(&self) -> io::Result<u64> {
        match self.event.read() {
            Ok(n) => Ok(n),
            Err(Errno::EAGAIN) => Ok(0),
            Err(errno) => Err(errno.into()),
        }
    }
}

impl AsFd for Waker {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.event.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn times_out_without_events() {
        let waker = Waker::new().unwrap();
        let mut set = PollSet::with_capacity(1);
        let w = set.add(waker.as_fd(), Interest::READ);
        let start = Instant::now();
        assert_eq!(set.wait(Some(Duration::from_micros(1500))).unwrap(), 0);
        assert!(
            start.elapsed() >= Duration::from_millis(1),
            "rounded up, not zero"
        );
        assert_eq!(set.readiness(w), Readiness::default());
    }

    #[test]
    fn wake_from_another_thread() {
        let waker = Arc::new(Waker::new().unwrap());
        let remote = Arc::clone(&waker);
        let thread = std::thread::spawn(move || remote.wake().unwrap());
        let mut set = PollSet::with_capacity(1);
        let w = set.add(waker.as_fd(), Interest::READ);
        assert_eq!(set.wait(Some(Duration::from_secs(5))).unwrap(), 1);
        assert!(set.readiness(w).readable);
        thread.join().unwrap();
        assert_eq!(waker.reset().unwrap(), 1);
        assert_eq!(waker.reset().unwrap(), 0, "cleared");
        assert_eq!(set.wait(Some(Duration::ZERO)).unwrap(), 0);
    }

    #[test]
    fn interest_can_change() {
        let waker = Waker::new().unwrap();
        let mut set = PollSet::with_capacity(1);
        let w = set.add(waker.as_fd(), Interest::READ);
        set.set_interest(w, Interest::WRITE);
        assert_eq!(set.wait(Some(Duration::ZERO)).unwrap(), 1);
        assert!(set.readiness(w).writable && !set.readiness(w).readable);
        assert_eq!(set.readiness(7), Readiness::default(), "unknown token");
    }

    #[test]
    fn a_duplicated_raw_fd_shares_readiness_and_bad_numbers_are_refused() {
        use std::os::fd::AsRawFd;
        let waker = Waker::new().unwrap();
        let dup = duplicate_raw_fd(waker.as_fd().as_raw_fd()).unwrap();
        assert_ne!(dup.as_raw_fd(), waker.as_fd().as_raw_fd());
        waker.wake().unwrap();
        let mut set = PollSet::with_capacity(1);
        let token = set.add(dup.as_fd(), Interest::READ);
        set.wait(Some(Duration::from_millis(100))).unwrap();
        assert!(set.readiness(token).readable);
        let err = duplicate_raw_fd(-1).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
    }
}
