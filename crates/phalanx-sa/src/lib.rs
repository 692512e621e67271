//! Security Association runtime state and the IPsec databases (RFC 4301
//! §4.4): the outbound sequence counter, the inbound anti-replay window,
//! lifetimes, the SAD and the SPD.
//!
//! Contract: sans-IO. Nothing here reads the clock (time comes in as an
//! `Instant` argument), spawns a thread, performs I/O or draws randomness.
//! Data-plane reads never block on a writer: SA state is atomics (the replay
//! window sits behind a short per-SA mutex), the SAD is published through an
//! RCU snapshot, and the SPD is read through `&self` plus a per-worker
//! [`FlowCache`]. Nothing a peer sends can panic this crate.
#![forbid(unsafe_code)]

mod hash;
pub mod lifetime;
pub mod limits;
pub mod path_mtu;
pub mod replay;
pub mod sa;
pub mod sad;
pub mod selector;
pub mod sequence;
pub mod spd;

pub use lifetime::{LifetimeLimits, LifetimeState, UsageCounter};
pub use path_mtu::{PathMtu, SaDrops};
pub use replay::{ReplayError, ReplaySnapshot, ReplayWindow};
pub use sa::{
    InboundSa, IpsecProtocol, OutboundSa, SaError, SaMode, SaParams, SaStats, SaStatsSnapshot,
    UdpEncap,
};
pub use sad::{OutboundSad, Sad, SadError};
pub use selector::{AddressFamily, FlowKey, IpPrefix, PortRange, Selector, SelectorError};
pub use sequence::{SequenceCounter, SequenceError, SequenceLease};
pub use spd::{
    FlowCache, FlowCacheStats, Policy, PolicyAction, PolicyId, PolicyMatch, Spd, SpdError,
};
