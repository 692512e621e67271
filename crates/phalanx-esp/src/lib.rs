//! ESP (RFC 4303) and AH (RFC 4302) processing, sans-IO.
//!
//! Contract: every packet goes through two halves around a crypto engine
//! (FreeBSD Fast IPsec, VPP): `prepare_*` parses, looks up, checks and
//! builds an [`Op`](phalanx_crypto::Op); any
//! [`Engine`](phalanx_crypto::Engine) runs it; `finish_*` reads the op's
//! status and returns a [`Verdict`]. Nothing here reads a clock, draws
//! randomness (IVs come from an [`IvSource`]), spawns a thread, performs
//! I/O or allocates per packet: buffers grow in place into their head- and
//! tailroom. Every drop has a [`DropReason`] and a counter in
//! [`Counters`]. Nothing a peer sends can panic this crate.
//!
//! ```text
//! outbound: prepare_outbound(sa, inner, ctx) -> Op -> engine -> finish_outbound(op) -> outer
//! inbound:  prepare_inbound(sad, outer, now) -> (InboundPending, Op) -> engine
//!           -> finish_inbound(pending, op) -> inner
//! ```
//!
//! One entry point per direction serves ESP and AH (dispatch on the SA's
//! protocol, or on the outer header inbound). Between `prepare_outbound`
//! and `finish_outbound` the op's `user` field belongs to this crate.
//! Soft-lifetime (rekey) events: outbound in
//! [`OutboundContext::soft_expired`], inbound through
//! [`finish_inbound_with_events`] (and always on the SA's usage counter).
//!
//! Buffers: outbound packets need [`OUTBOUND_HEADROOM`] bytes in front and
//! [`OUTBOUND_TAILROOM`] behind (plus TFC padding); AH needs tailroom for
//! a copy of the IP header in both directions (inbound too).
//!
//! Not done here: IP fragment reassembly (fragments are dropped and
//! counted, RFC 4303 §3.4.1), the RFC 3948 §3.1.2 transport-mode checksum
//! fix-up behind a NAT, and the AH treatment of IPv4 source-route options
//! and IPv6 Routing headers as "mutable but predictable" (RFC 4302
//! §3.3.3.1): their bytes are authenticated as they are.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod ah;
mod context;
mod drop;
mod esp;
mod inbound;
mod ip;
pub mod limits;
mod note;
mod outbound;
mod path_mtu;
mod sa_state;
mod selectors;

pub use ah::outbound::ah_ident;
pub use context::{IvSource, OutboundContext};
pub use drop::{Counters, DropReason, Verdict};
pub use inbound::{finish_inbound, finish_inbound_with_events, prepare_inbound, InboundPending};
pub use limits::{OUTBOUND_HEADROOM, OUTBOUND_TAILROOM};
pub use outbound::{finish_outbound, max_inner_len, prepare_dummy, prepare_outbound};
pub use path_mtu::{too_big_action, FragmentPolicy, IcmpRateLimit, TooBigAction};
