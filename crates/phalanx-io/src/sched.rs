//! Scheduling of the threads that keep a cluster node alive.
//!
//! A cluster node's failure detector suspects a peer after a few tens of
//! milliseconds without a heartbeat. On a loaded machine an ordinary
//! thread can wait longer than that for a CPU, and the survivors would
//! take over from a node that is alive. The thread that sends and receives
//! heartbeats therefore runs under `SCHED_FIFO`, as Corosync's own
//! process does. It only ever sleeps in `poll(2)` and does little work per
//! wake-up, so it cannot starve the machine (and the kernel's real-time
//! throttling, `sched_rt_runtime_us`, bounds it anyway).

use std::io;

use crate::sys;

/// Lowest and highest `SCHED_FIFO` priority on Linux.
const FIFO_PRIORITIES: core::ops::RangeInclusive<i32> = 1..=99;

/// Runs the calling thread under `SCHED_FIFO` at `priority` (1..=99).
/// Needs `CAP_SYS_NICE` (or an `RLIMIT_RTPRIO` that allows it); the error
/// is the kernel's (`EPERM`) otherwise, and `InvalidInput` for a priority
/// outside 1..=99.
pub fn set_realtime(priority: i32) -> io::Result<()> {
    if !FIFO_PRIORITIES.contains(&priority) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("SCHED_FIFO priority {priority} is outside 1..=99"),
        ));
    }
    sys::set_fifo_priority(priority)
}

/// Returns the calling thread to the normal time-sharing policy
/// (`SCHED_OTHER`), which every thread may do (sched(7)); threads it
/// starts afterwards inherit that.
pub fn set_normal() -> io::Result<()> {
    sys::set_normal_policy()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_priorities_outside_the_fifo_range() {
        for bad in [0, 100, -1] {
            let err = set_realtime(bad).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        }
    }

    /// "FIFO, spawn, back to normal": the child keeps the inherited
    /// policy (the daemon's cluster thread), the parent is normal again.
    /// Needs `CAP_SYS_NICE`: without it there is nothing to inherit, and
    /// the test fails ([`crate::test_support`]).
    #[test]
    fn a_child_inherits_the_policy_its_parent_then_leaves() {
        let handle = std::thread::spawn(|| {
            set_realtime(10)?;
            let child = std::thread::spawn(policy);
            set_normal().unwrap();
            Ok((child.join().unwrap(), policy()))
        });
        let needs = "root or CAP_SYS_NICE (SCHED_FIFO)";
        let Some((child, parent)) = crate::test_support::permitted(handle.join().unwrap(), needs)
        else {
            return;
        };
        assert_eq!(child, libc::SCHED_FIFO);
        assert_eq!(parent, libc::SCHED_OTHER);
    }

    fn policy() -> i32 {
        crate::sys::current_policy()
    }

    #[test]
    fn a_thread_can_be_made_realtime_as_root() {
        let handle = std::thread::spawn(|| set_realtime(10));
        let result = handle.join().unwrap();
        if nix::unistd::Uid::effective().is_root() {
            result.unwrap();
        } else {
            assert_eq!(result.unwrap_err().raw_os_error(), Some(libc::EPERM));
        }
    }
}
