//! IKEv2 messages (RFC 7296 §3): the header view, the payload chain walk and
//! an allocating representation of every payload.
//!
//! Contract: like the rest of this crate, nothing here panics on any input
//! or performs I/O; unlike it, this module allocates (`alloc::vec::Vec`):
//! it is control plane, one message per exchange, not the packet path.
//!
//! - [`IkeHeader`] is a checked view of the 28-octet header and the payload
//!   chain its Length bounds; [`IkeHeader::check_version`] is separate so a
//!   wrong major version can be answered (RFC 7296 §2.5).
//! - [`PayloadIter`] walks a chain by its Next Payload links, yielding
//!   [`RawPayload`]s, and refuses lengths running past the end and octets
//!   after the last payload. SK and SKF end a chain.
//! - [`Payload`] is one parsed payload; [`MessageRepr`] a whole message;
//!   [`parse_payloads`] / [`emit_payloads`] read and write the plaintext
//!   chain that SK encrypts. The IV / ciphertext / ICV split inside SK is the
//!   crypto layer's.
//! - Unknown payload types are kept as [`Payload::Unknown`]; an unknown
//!   *critical* one is reported by [`MessageRepr::unsupported_critical_payload`].
//! - [`limits`] bounds what a peer can make us allocate.
//!
//! Every `parse` is inverse to its `emit`: `parse(emit(x)) == x` for every
//! representation whose fields fit their wire fields (property-tested).

pub mod config;
pub mod encrypted;
pub mod header;
pub mod iana;
pub mod identity;
pub mod keying;
pub mod limits;
pub mod message;
pub mod notify;
pub mod payload;
pub mod sa;
pub mod ts;

mod codec;

#[cfg(test)]
mod tests;

pub use config::{CfgAttribute, CpPayload, EapPayload};
pub use encrypted::{SkPayload, SkfPayload};
pub use header::{IkeHeader, IkeHeaderRepr};
pub use identity::{AuthPayload, CertPayload, CertReqPayload, IdPayload};
pub use keying::{KePayload, NoncePayload};
pub use message::{emit_payloads, parse_payloads, MessageRepr, Payload};
pub use notify::{DeletePayload, NotifyPayload, VendorIdPayload};
pub use payload::{GenericPayloadHeader, PayloadIter, RawPayload};
pub use sa::{Proposal, SaPayload, Spi, Transform, TransformAttr};
pub use ts::{TrafficSelector, TsAddresses, TsPayload, UnknownSelector};

use alloc::vec::Vec;

use crate::natt::NON_ESP_MARKER;

/// The IKE message in a port-4500 UDP payload: the octets after the non-ESP
/// marker (RFC 7296 §2.23, RFC 3948 §2.2), or `None` if the payload does not
/// start with four zero octets (it is ESP, or a keepalive).
pub fn strip_non_esp_marker(udp_payload: &[u8]) -> Option<&[u8]> {
    udp_payload.strip_prefix(&NON_ESP_MARKER[..])
}

/// A port-4500 UDP payload carrying `message`: the non-ESP marker, then the
/// message (RFC 7296 §2.23).
pub fn with_non_esp_marker(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(NON_ESP_MARKER.len() + message.len());
    out.extend_from_slice(&NON_ESP_MARKER);
    out.extend_from_slice(message);
    out
}
