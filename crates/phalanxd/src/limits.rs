//! Constants of the daemon, each with its source or reason.

/// The ESP-in-UDP port (RFC 3948 §1, shared with IKE NAT traversal,
/// RFC 7296 §2.23).
pub const NATT_PORT: u16 = 4500;

/// Default anti-replay window in packets: RFC 4303 §3.4.3 asks for at
/// least 32 and suggests larger for fast links; 1024 absorbs the
/// reordering of several workers and GRO runs.
pub const DEFAULT_REPLAY_WINDOW: u32 = 1024;

/// Smallest non-zero replay window (RFC 4303 §3.4.3), as phalanx-sa
/// enforces it.
pub const MIN_REPLAY_WINDOW: u32 = phalanx_sa::limits::REPLAY_WINDOW_MIN;

/// Largest replay window phalanx-sa keeps.
pub const MAX_REPLAY_WINDOW: u32 = phalanx_sa::limits::REPLAY_WINDOW_MAX;

/// SPIs up to this value are reserved (RFC 4303 §2.1: 0 for local use,
/// 1..=255 by IANA).
pub const MAX_RESERVED_SPI: u32 = 255;

/// Priority of a policy that gives none (lower runs first).
pub const DEFAULT_POLICY_PRIORITY: u32 = 1000;

/// Most data-plane workers.
pub const MAX_WORKERS: u32 = 256;

/// Most crypto threads per worker.
pub const MAX_CRYPTO_THREADS: u32 = 64;

/// Default log filter.
pub const DEFAULT_LOG: &str = "info";

/// Default control socket.
pub const DEFAULT_CONTROL_SOCKET: &str = "/run/phalanx/phalanxd.sock";

/// Longest interface name: `IFNAMSIZ` (16) less the terminating NUL.
pub const MAX_IFNAME_LEN: usize = 15;

/// Default TUN MTU: a 1400-byte inner packet with the largest ESP-in-UDP
/// overhead over IPv4 (20 + 8 + 8 + 16 IV + 17 padding/trailer + 32 ICV =
/// 101 bytes) still fits a 1500-byte Ethernet link.
pub const DEFAULT_MTU: u16 = 1400;

/// Smallest TUN MTU: every IPv4 host accepts 576-byte datagrams
/// (RFC 791 §3.1).
pub const MIN_MTU: u16 = 576;

/// Largest TUN MTU: the inner packet plus the ESP-in-UDP overhead must
/// still fit one 65535-byte IP datagram.
pub const MAX_MTU: u16 = 65_000;

/// Packets per receive batch from a TUN queue: with offload one read can
/// split a 64 KiB super-packet into up to 64 KiB / MSS packets, and the
/// device wants that many free buffers for the next read (128 covers any
/// MSS of 512 bytes or more).
pub const TUN_BATCH: usize = 128;

/// Datagrams per receive batch from a socket (one `recvmmsg`; with GRO
/// each super-datagram splits into many).
pub const SOCKET_BATCH: usize = 128;

/// Packets per send batch on a socket before it is flushed.
pub const SEND_BATCH: usize = 128;

/// Packets per TUN write batch before it is flushed (GRO coalesces them).
pub const TUN_SEND_BATCH: usize = 128;

/// Room behind the headroom of each TUN write buffer: GRO grows a packet
/// in place into a super-packet of up to 64 KiB.
pub const TUN_SEND_ROOM: usize = 65_536;

/// Headroom in front of each packet buffer: the outer headers ESP adds in
/// place, and the virtio-net header on TUN writes.
pub const HEADROOM: usize = 128;

/// Bytes behind an inner packet kept free for the ESP trailer and ICV
/// (phalanx-esp's `OUTBOUND_TAILROOM` plus margin).
pub const TAILROOM: usize = 128;

/// How often a worker copies its counters where the control plane reads
/// them, and the longest it sleeps in `poll` (milliseconds).
pub const STATS_INTERVAL_MS: u64 = 100;

/// Entries of each worker's SPD flow cache.
pub const FLOW_CACHE_ENTRIES: usize = 4096;

/// Frames a worker-pool crypto engine may hold in flight per worker.
pub const MAX_FRAMES_IN_FLIGHT: usize = 8;
