//! IKEv2 (RFC 7296), sans-IO.
//!
//! Contract: nothing here reads the clock, touches a socket, spawns a thread
//! or draws randomness that was not handed in. Time comes in as an argument to
//! every `handle_*` call; datagrams, timers and SA events come out through
//! `poll_transmit`, `poll_timeout` and `poll_event`. Nothing a peer sends can
//! panic this crate: every malformed or unexpected message maps to a counted
//! error and, where RFC 7296 says so, a Notify.
//!
//! The daemon drives one [`Endpoint`] (quinn-style):
//!
//! ```text
//!  handle_datagram(now, Datagram) ─┐                 ┌─> poll_event()    -> SaEvent (install/remove SAs, up/down)
//!  handle_timeout(now)  ───────────┤   Endpoint      ├─> poll_transmit() -> Transmit (add the non-ESP marker on 4500)
//!  initiate / acquire / terminate ─┤  (IKE SAs by    └─> poll_timeout()  -> when to call handle_timeout
//!  handle_child_expiry / reconfigure┘   our SPI)
//! ```
//!
//! Drain events before transmits after every call: an `InstallInbound` is
//! queued before the message that lets the peer use the SA
//! (make-before-break).
//!
//! Modules:
//! - [`endpoint`]: SPI demultiplexing, cookies and the half-open table
//!   (RFC 7296 §2.6), the API; each IKE SA (private `ike_sa`) owns its
//!   state, keys, Message ID window with retransmission and response cache
//!   (§2.1–§2.3), Child SAs and timers (a table indexed by an enum); the
//!   exchanges (private `exchange`, one module
//!   each: IKE_SA_INIT, IKE_INTERMEDIATE, IKE_AUTH, Child SA negotiation,
//!   CREATE_CHILD_SA for Child SAs and for the IKE SA, IKE_FOLLOWUP_KE,
//!   INFORMATIONAL) implement §1.2–§1.4, §2.8–§2.25.
//! - [`events`]: what goes in and out ([`Datagram`], [`Transmit`],
//!   [`SaEvent`], [`ChildSaInstall`]) and the status snapshots.
//! - [`error`], [`counters`], [`limits`]: every error mapped to its Notify,
//!   every event counted by name, every constant with its RFC section.
//! - [`natd`]: NAT detection hashes (§2.23).
//! - [`config`], [`proposal`], [`ts`], [`protect`]: connection
//!   configuration, SA payload negotiation, traffic selector narrowing,
//!   SK protection with RFC 7383 fragmentation.
//! - [`auth`]: identities, AUTH payloads, X.509.
//! - [`ha`]: cluster high availability: the replicated snapshot of an
//!   established IKE SA ([`ha::IkeSaState`]), its codec, and how another
//!   node imports it and takes the IKE SA over without renegotiating.
//! - `fuzzing` (feature `fuzzing`): the responder harness of the
//!   `ike_responder` fuzz target.
//!
//! RFC 9370 additional key exchanges (hybrid post-quantum, e.g. x25519 +
//! ML-KEM-768) run in IKE_INTERMEDIATE (RFC 9242) when the IKE SA is
//! created, and in IKE_FOLLOWUP_KE (RFC 9370 §2.2.4) after every
//! CREATE_CHILD_SA that negotiates them (IKE and Child SA rekeys, new
//! Child SAs with PFS), so a hybrid SA stays hybrid across rekeys.
//! Windows above one (RFC 7296 §2.3) are announced with SET_WINDOW_SIZE
//! and honoured.
//!
//! End-Users (responder): EAP relayed to a backend outside the crate
//! (RFC 7296 §2.16; an address the backend assigns is the virtual IP),
//! virtual IPs from pools in CFG_REPLY (§2.19; on a cluster carried in the
//! replicated state, fresh addresses partitioned by node, [`pool`]), the
//! final connection chosen by identity at IKE_AUTH, MOBIKE address updates
//! (RFC 4555, responder: the data plane moves once the new address passed
//! a return-routability check; the agreement replicated too).
//!
//! Not implemented here: MOBIKE as initiator.
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
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod ha;
mod ike_sa;
pub mod limits;
pub mod natd;
pub mod pool;
pub mod proposal;
pub mod protect;
mod timers;
pub mod ts;

pub use counters::{Counter, IkeCounters};
pub use endpoint::Endpoint;
pub use error::IkeError;
pub use events::{
    ChildSaInfo, ChildSaInstall, Datagram, EapAnswer, IkeSaInfo, IkeSaState, SaEvent, Transmit,
};
