//! Cluster mode's control side: the shell around the sans-IO
//! `phalanx_cluster::ClusterNode`.
//!
//! - [`corosync`]: Corosync closed process groups as the node's
//!   `GroupTransport` (agreed membership, totally ordered messages);
//! - [`heartbeat`]: the UDP heartbeats of the fast failure detector on the
//!   cluster link;
//! - [`thread`]: the cluster thread that drives the node with both
//!   ([`spawn`] starts it; [`ClusterHandle`] is what the daemon keeps);
//! - [`report`]: its status as the `phalanxctl cluster` answer (and
//!   `metrics`: as Prometheus families).
//!
//! Contract: nothing here touches packets. The data plane reads the
//! node's published state and sends its reports back over a bounded
//! queue it never waits on.

pub mod corosync;
pub mod heartbeat;
pub(crate) mod metrics;
pub mod report;
pub mod thread;

pub use report::{cluster_report, ClusterSnapshot};
pub use thread::{spawn, spawn_with_ike, ClusterHandle, ReportSender, REALTIME_PRIORITY};

#[cfg(test)]
mod control_tests;
