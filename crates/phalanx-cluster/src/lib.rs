//! The Phalanx cluster, sans-IO: N equal nodes behind one virtual address,
//! every node sees every packet and runs the same deterministic dispatch
//! function over the same view, so exactly one node processes each packet
//! without any per-packet message.
//!
//! Contract: nothing here reads the clock, touches a socket or spawns a
//! thread; time comes in as an `Instant`, messages in and out as bytes.
//! The Corosync CPG adapter and the heartbeat socket live in `phalanxd`,
//! an in-memory group transport in `phalanx-testkit`. Nothing a peer or
//! another node sends can panic this crate.
#![forbid(unsafe_code)]

pub mod limits;
pub mod view;

pub use view::{NodeId, View};
