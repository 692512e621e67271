//! IKEv2 (RFC 7296), sans-IO.
//!
//! Contract: nothing here reads the clock, touches a socket, spawns a thread
//! or draws randomness that was not handed in. Time comes in as an argument to
//! every `handle_*` call; datagrams, timers and SA events come out through
//! `poll_transmit`, `poll_timeout` and `poll_event`. Nothing a peer sends can
//! panic this crate: every malformed or unexpected message maps to a counted
//! error and, where RFC 7296 says so, a Notify.
#![forbid(unsafe_code)]
// STYLE.md: `unwrap()` is fine in tests.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod auth;
pub mod config;
pub mod counters;
pub mod endpoint;
pub mod error;
pub mod events;
mod exchange;
mod ike_sa;
pub mod limits;
pub mod natd;
pub mod proposal;
pub mod protect;
pub mod ts;
mod timers;

pub use counters::{Counter, IkeCounters};
pub use endpoint::Endpoint;
pub use error::IkeError;
pub use events::{
    ChildSaInfo, ChildSaInstall, Datagram, IkeSaInfo, IkeSaState, SaEvent, Transmit,
};
