//! Every numeric limit of this crate, with the section of the RFC it comes
//! from.

/// Smallest anti-replay window a receiver must support (RFC 4303 §3.4.3:
/// "a minimum window size of 32 packets MUST be supported").
pub const REPLAY_WINDOW_MIN: u32 = 32;

/// Default anti-replay window (RFC 4303 §3.4.3: "a window size of 64
/// SHOULD be the default"). High-rate SAs whose packets are processed in
/// parallel want a larger one (1024 or more), chosen per SA.
pub const REPLAY_WINDOW_DEFAULT: u32 = 64;

/// Largest anti-replay window accepted. RFC 4303 §3.4.3 leaves the upper
/// bound to the receiver; App. A2 needs the window to be much smaller than
/// 2^32 for ESN inference to work. 65536 bits (8 KiB) is our choice.
pub const REPLAY_WINDOW_MAX: u32 = 65536;

/// Windows are kept as whole 64-bit bitmap words; configured sizes are
/// rounded up to a multiple of this.
pub const REPLAY_WORD_BITS: u32 = 64;

/// Last sequence number a sender may use on an SA without ESN: the counter
/// must not cycle (RFC 4303 §3.3.3), so after 2^32 - 1 the SA is rekeyed.
pub const SEQ_MAX_32: u64 = u32::MAX as u64;

/// Last sequence number a sender may use on an SA with ESN (RFC 4303
/// §3.3.3 and §2.2.1: a 64-bit counter that must not cycle).
pub const SEQ_MAX_64: u64 = u64::MAX;

/// First sequence number sent on a new SA (RFC 4303 §3.3.3: the counter is
/// initialised to 0 and incremented before each packet, so the first packet
/// carries 1). Sequence number 0 is therefore never valid on the wire.
pub const SEQ_FIRST: u64 = 1;

/// The window used to infer the high-order ESN bits when anti-replay is
/// disabled: RFC 4303 App. A2.2 needs a reference window; without one we
/// take the half space, i.e. the full number nearest the highest seen.
pub const ESN_INFERENCE_WINDOW_DISABLED: u64 = 1 << 31;

/// Ways per set of the [`FlowCache`](crate::spd::FlowCache).
pub const FLOW_CACHE_WAYS: usize = 4;

/// Smallest and largest flow cache sizes, in entries (64 bytes each).
pub const FLOW_CACHE_MIN_ENTRIES: usize = FLOW_CACHE_WAYS;
/// See [`FLOW_CACHE_MIN_ENTRIES`]: 2^24 entries is 1 GiB, far past any
/// sensible per-worker cache.
pub const FLOW_CACHE_MAX_ENTRIES: usize = 1 << 24;

/// Age after which a learned path MTU is forgotten (RFC 1191 §6.3: "no
/// less than 10 minutes"; Linux `net.ipv4.route.mtu_expires`, 600 s).
pub const PMTU_EXPIRES: std::time::Duration = std::time::Duration::from_secs(600);

/// Smallest IPv4 path MTU believed. RFC 791 allows 68, but a forged ICMP
/// message naming so small an MTU would multiply the packets sent
/// (RFC 5927 §7.1); Linux refuses to go below `net.ipv4.route.min_pmtu`,
/// 552 by default, and so does this.
pub const PMTU_MIN_V4: u32 = 552;

/// Smallest IPv6 path MTU (RFC 8200 §5: every link carries 1280 octets;
/// RFC 8201 §4: a smaller Packet Too Big MTU is not believed).
pub const PMTU_MIN_V6: u32 = 1280;

/// Per-SA drop counter slots ([`SaDrops`](crate::SaDrops)): room for every
/// drop reason of the data plane.
pub const SA_DROP_SLOTS: usize = 32;
