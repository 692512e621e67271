//! Test support for Phalanx (dev only; never a dependency of a data plane).
//!
//! - [`null`]: [`NullProvider`], a deliberately **insecure** crypto
//!   provider so fuzzers get past authentication.
//! - [`vectors`]: the scapy interop vectors (JSON) → SA objects.
//! - [`pcap`]: a minimal pcap writer for captures from tests.
//! - [`models`]: trivially correct reference models (anti-replay).
//! - [`counters`]: counter-delta assertions ([`assert_delta!`]).
//! - [`ike_pair`]: two IKE endpoints on a virtual clock over a simulated
//!   network (latency, loss, MTU, drop rules, NAT).
//! - [`cluster_group`]: an in-memory Corosync-like group (one agreed
//!   order) and N cluster nodes with their data paths on a virtual clock.
//! - [`fuzzing`]: the SA databases of the inbound fuzz targets.
//! - [`netns`]: a network namespace with a veth pair (needs root).
//!
//! Contract: like the cores it tests, nothing here reads the clock or draws
//! OS randomness; time and seeds are parameters. Only [`netns`] touches
//! the system (it runs `ip`).
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod cluster_group;
pub mod counters;
pub mod fuzzing;
pub mod ike_pair;
pub mod models;
pub mod netns;
pub mod null;
pub mod pcap;
pub mod vectors;

pub use counters::{CounterSet, CounterSnapshot};
pub use models::{ReplayModel, ReplayVerdict};
pub use null::{NullProvider, NullVerify};
pub use pcap::{LinkType, PcapWriter};
pub use vectors::{Vector, VectorError, VectorFile};
