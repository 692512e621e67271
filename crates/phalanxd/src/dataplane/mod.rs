//! The data plane: worker threads that move packets between the TUN
//! device and the protected-side sockets.
//!
//! The batch logic ([`outbound::OutboundPath`], [`inbound::InboundPath`])
//! is device-free: it reads a [`PacketBatch`](phalanx_io::PacketBatch) and
//! writes through the [`outbound::Egress`] / [`inbound::Delivery`] traits,
//! so tests run two gateways against each other in memory. [`worker`]
//! binds it to the devices ([`io`]). No per-packet allocation and no
//! per-packet log line anywhere on the path: buffers, frames and batches
//! are reused, counters are plain integers published every 100 ms.

pub mod cluster;
pub mod counters;
pub mod engine;
pub mod inbound;
pub mod io;
pub mod load;
pub mod outbound;
mod packet;
pub mod worker;

#[cfg(test)]
mod path_mtu_tests;
#[cfg(test)]
mod zero_copy_tests;

pub use counters::{DaemonCounter, DaemonCounters, PolicyHits, StatsSlot, WorkerStats};
pub use engine::CryptoEngine;
pub use inbound::{Delivery, InboundPath, Ingress, Received, ReceivedMut};
pub use outbound::{Egress, OutboundPath};
