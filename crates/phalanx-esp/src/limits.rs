//! Constants of ESP and AH processing, each with its source.

/// TTL / hop limit of the outer header we build in tunnel mode. RFC 4301
/// §5.1.2.1 leaves the value to the implementation ("constructed"); 64 is
/// the RFC 1700 default TTL that scapy and Linux use too.
pub const OUTER_TTL: u8 = 64;

/// Minimum alignment of (payload + pad length + next header): the
/// ciphertext must end on a 4-byte boundary (RFC 4303 §2.4).
pub const MIN_PAD_ALIGN: usize = 4;

/// The most padding bytes an ESP trailer can carry (RFC 4303 §2.4: 0-255).
pub const MAX_PAD_LEN: usize = 255;

/// ESP trailer bytes after the padding: Pad Length and Next Header (RFC 4303 §2).
pub const ESP_TRAILER_LEN: usize = 2;

/// Fixed part of the AH header before the ICV (RFC 4302 §2).
pub const AH_FIXED_LEN: usize = 12;

/// AH header alignment in IPv4 (RFC 4302 §2.2: a multiple of 32 bits).
pub const AH_ALIGN_V4: usize = 4;

/// AH header alignment in IPv6 (RFC 4302 §2.2: a multiple of 64 bits).
pub const AH_ALIGN_V6: usize = 8;

/// Largest IPv4 packet and largest IPv6 payload (RFC 791, RFC 8200 §3;
/// jumbograms, RFC 2675, are not supported).
pub const MAX_IP_LEN: usize = 65_535;

/// IPv4 header length without options (RFC 791).
pub const IPV4_HEADER_LEN: usize = 20;

/// IPv6 fixed header length (RFC 8200 §3).
pub const IPV6_HEADER_LEN: usize = 40;

/// UDP header length (RFC 768).
pub const UDP_HEADER_LEN: usize = 8;

/// Headroom a buffer needs in front of an inner packet for the largest
/// outbound encapsulation: tunnel-mode AH over IPv6 with a 32-byte ICV
/// (40 + 12 + 32 + 4 bytes of ICV padding). ESP needs at most 72: IPv6
/// outer header, UDP, ESP header and a 16-byte CBC IV.
pub const OUTBOUND_HEADROOM: usize = IPV6_HEADER_LEN + 48;

/// Tailroom a buffer needs behind an inner packet: the largest ESP trailer
/// (15 bytes of CBC padding, pad length, next header, 32-byte ICV = 49)
/// plus TFC padding if configured; AH keeps a copy of the IP header in
/// front of it there while the engine runs (IPv4 with options: 60 bytes;
/// IPv6 with extension headers: more).
pub const OUTBOUND_TAILROOM: usize = 64;

/// Most IPv6 extension headers walked before giving up (keeps the walk
/// bounded whatever a peer sends).
pub const MAX_EXTENSION_HEADERS: usize = 16;
