//! Sizes the IKEv2 codec knows and the bounds it enforces on what a peer
//! sends, each with its source. The bounds keep one message's allocations in
//! proportion to its size and refuse chains no real peer sends.

/// The fixed IKE header (RFC 7296 §3.1).
pub const HEADER_LEN: usize = 28;
/// The generic payload header (RFC 7296 §3.2).
pub const GENERIC_PAYLOAD_HEADER_LEN: usize = 4;
/// Largest message accepted or emitted: what one UDP datagram and one RFC
/// 8229 TCP frame (16-bit length) can carry. RFC 7296 §2 only requires
/// 1280 octets; larger messages are split by RFC 7383 fragmentation.
pub const MAX_MESSAGE_LEN: usize = 65_535;
/// Most payloads in one chain (top level or inside SK). RFC 7296 sets no
/// number; the largest real exchanges (IKE_SA_INIT with its notifies,
/// IKE_AUTH with a certificate chain) use about 20.
pub const MAX_PAYLOADS: usize = 64;
/// Shortest Nonce Data (RFC 7296 §3.9: "between 16 and 256 octets").
pub const MIN_NONCE_LEN: usize = 16;
/// Longest Nonce Data (RFC 7296 §3.9).
pub const MAX_NONCE_LEN: usize = 256;
/// Most proposals in one SA payload. Proposal Num is one octet (RFC 7296
/// §3.3.1); real peers offer a handful.
pub const MAX_PROPOSALS: usize = 64;
/// Most transforms in one proposal. Num Transforms is one octet (RFC 7296
/// §3.3.1); a generous proposal listing every algorithm and every RFC 9370
/// additional key exchange stays far below this.
pub const MAX_TRANSFORMS: usize = 128;
/// Most attributes on one transform. RFC 7296 §3.3.5 defines only Key
/// Length; one or two is what peers send.
pub const MAX_TRANSFORM_ATTRIBUTES: usize = 8;
/// Most traffic selectors in one TS payload (Number of TSs is one octet,
/// RFC 7296 §3.13).
pub const MAX_TRAFFIC_SELECTORS: usize = 64;
/// Most attributes in one Configuration payload (RFC 7296 §3.15 sets no
/// number; a remote-access request asks for about ten).
pub const MAX_CFG_ATTRIBUTES: usize = 64;
/// SPI size of an IKE SA in proposals (RFC 7296 §3.3.1).
pub const IKE_SPI_LEN: usize = 8;
/// SPI size of an ESP or AH SA (RFC 7296 §3.3.1).
pub const CHILD_SPI_LEN: usize = 4;
/// Selector Length of TS_IPV4_ADDR_RANGE (RFC 7296 §3.13.1).
pub const TS_IPV4_LEN: usize = 16;
/// Selector Length of TS_IPV6_ADDR_RANGE (RFC 7296 §3.13.1).
pub const TS_IPV6_LEN: usize = 40;
