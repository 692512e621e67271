//! Cluster constants, each with where it comes from.

/// Highest node id: the node id fills the top 16 bits of the 8-byte
/// explicit IV of the combined modes (RFC 4106 §3.1 asks only that the IV
/// be unique per key; partitioning it by node makes it unique across the
/// cluster even when two nodes send the same sequence number).
pub const MAX_NODE_ID: u32 = 0xffff;
