//! Constants of ESP and AH processing, each with its source. Header sizes
//! are `phalanx_wire`'s (`ipv4::HEADER_LEN`, `esp::TRAILER_LEN`, ...).

use phalanx_wire::ipv6::HEADER_LEN as IPV6_HEADER_LEN;

/// TTL / hop limit of the outer header we build in tunnel mode. RFC 4301
/// §5.1.2.1 leaves the value to the implementation ("constructed"); 64 is
/// the RFC 1700 default TTL that scapy and Linux use too.
pub const OUTER_TTL: u8 = 64;

/// Largest IPv4 packet and largest IPv6 payload (RFC 791, RFC 8200 §3;
/// jumbograms, RFC 2675, are not supported).
pub const MAX_IP_LEN: usize = 65_535;

/// Headroom a buffer needs in front of an inner packet for the largest
/// outbound encapsulation: tunnel-mode AH over IPv6 with a 32-byte ICV
/// (40 + 12 + 32 + 4 bytes of ICV padding, RFC 4302 §2.6). ESP needs at
/// most 72: IPv6 outer header, UDP, ESP header and a 16-byte CBC IV.
pub const OUTBOUND_HEADROOM: usize = IPV6_HEADER_LEN + 48;

/// Tailroom a buffer needs behind an inner packet: the largest ESP trailer
/// (15 bytes of CBC padding, pad length, next header, 32-byte ICV = 49)
/// plus TFC padding if configured; AH keeps a copy of the IP header in
/// front of it there while the engine runs (IPv4 with options: 60 bytes;
/// IPv6 with extension headers: more).
pub const OUTBOUND_TAILROOM: usize = 64;

/// Smallest IPv4 MTU (RFC 791: every host takes 68-octet datagrams): the
/// least an ICMP Fragmentation Needed ever announces.
pub const IPV4_MIN_MTU: u32 = 68;

/// Smallest IPv6 MTU (RFC 8200 §5).
pub const IPV6_MIN_MTU: u32 = 1280;

/// ICMP errors per second one worker sends on average (RFC 1812 §4.3.2.8
/// and RFC 4443 §2.4 (f) ask for a limit; Linux's `icmp_msgs_per_sec`
/// default is 1000 per host).
pub const ICMP_RATE_PER_SECOND: u32 = 100;

/// Burst of ICMP errors one worker sends before the rate applies.
pub const ICMP_RATE_BURST: u32 = 50;
