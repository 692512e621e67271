//! AH (RFC 4302): integrity over the whole IP packet, mutable fields
//! excepted.

pub(crate) mod inbound;
mod mutable;
pub(crate) mod outbound;
