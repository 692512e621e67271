//! ESP (RFC 4303): outbound encapsulation, inbound decapsulation and the
//! trailer between them.

pub(crate) mod inbound;
pub(crate) mod outbound;
mod trailer;
