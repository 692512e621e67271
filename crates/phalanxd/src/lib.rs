//! phalanxd, the Phalanx IPsec gateway daemon, as a library: the binary
//! (`src/main.rs`) wires these modules; tests drive them directly.
//!
//! Contract: the daemon carries traffic between a TUN device (cleartext)
//! and the protected network (ESP in UDP, RFC 3948, and plain ESP over a
//! raw socket) with SAs keyed by hand in one TOML file ([`config`]) or
//! negotiated by IKEv2 ([`ike`]: one thread driving the sans-IO
//! `phalanx_ike::Endpoint`). SAs reach the data plane only through
//! [`install`], for both. Workers ([`dataplane`]) are plain threads that
//! never block on the control plane and never allocate or log per packet
//! (IKE messages, acquires and lifetime events go to the IKE thread over
//! a bounded queue they never wait on).
//! After the devices are open the process keeps no privilege
//! ([`privileges`]). The control socket ([`control`]) and Prometheus
//! metrics ([`metrics`]) read the [`daemon::Daemon`] state.
#![forbid(unsafe_code)]
// STYLE.md: `unwrap()` is fine in tests, where a panic is the failure report.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod cluster;
pub mod config;
pub mod control;
pub mod daemon;
pub mod dataplane;
pub mod devices;
pub mod ike;
pub mod install;
pub mod limits;
pub mod metrics;
pub mod privileges;
pub mod report;
