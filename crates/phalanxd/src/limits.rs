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

/// How often one worker asks the kernel for every outbound SA's path MTU
/// (`IP_MTU` of the route): well within the 600 s a learned value lives
/// (`phalanx_sa::limits::PMTU_EXPIRES`), and soon enough to pick up what
/// the kernel learned from ICMP Fragmentation Needed for our packets.
pub const ROUTE_MTU_REFRESH: std::time::Duration = std::time::Duration::from_secs(10);

/// Entries of each worker's SPD flow cache.
pub const FLOW_CACHE_ENTRIES: usize = 4096;

/// Frames a worker-pool crypto engine may hold in flight per worker.
pub const MAX_FRAMES_IN_FLIGHT: usize = 8;

/// The IKE port (RFC 7296 §2: "IKE messages use UDP ports 500 and/or 4500").
pub const IKE_PORT: u16 = 500;

/// Liveness check after this much silence from the peer, unless
/// `dpd_delay` says otherwise (RFC 7296 §2.4 leaves the interval to the
/// implementation; strongSwan's examples use 30 s).
pub const DEFAULT_DPD_DELAY: std::time::Duration = std::time::Duration::from_secs(30);

/// IKE SA rekey time unless `rekey_time` says otherwise (strongSwan's
/// default, 4 h).
pub const DEFAULT_IKE_REKEY: std::time::Duration = std::time::Duration::from_secs(4 * 3600);

/// Child SA rekey time unless `rekey_time` says otherwise (strongSwan's
/// default, 1 h).
pub const DEFAULT_CHILD_REKEY: std::time::Duration = std::time::Duration::from_secs(3600);

/// Longest connection or child name (they appear in SA and policy names).
pub const MAX_IKE_NAME_LEN: usize = 64;

/// Shortest pre-shared key accepted, in bytes: a floor against empty or
/// trivial secrets (RFC 7296 §2.15 wants one "as strong as a key"; use a
/// long random one).
pub const MIN_PSK_LEN: usize = 8;

/// Largest `[ike] half_open_max` and `cookie_threshold`.
pub const MAX_HALF_OPEN: u32 = 1_000_000;

/// Largest `[ike] retransmit_tries`.
pub const MAX_RETRANSMIT_TRIES: u32 = 20;

/// Smallest `[ike] fragment_mtu`: every IPv4 host accepts 576-byte
/// datagrams (RFC 791 §3.1; RFC 7383 §2.5.1).
pub const MIN_FRAGMENT_MTU: u32 = 576;

/// Messages the workers may queue for the IKE thread (IKE datagrams
/// received on the NAT-T port, acquires, lifetime events); beyond it they
/// are dropped and counted (`ike_queue_full`), never waited for.
pub const IKE_QUEUE_CAPACITY: usize = 1024;

/// Control requests queued for the IKE thread at most.
pub const IKE_CONTROL_QUEUE: usize = 64;

/// Acquires per trap child at most this often (milliseconds), over all
/// workers: packets keep arriving while IKE runs.
pub const ACQUIRE_INTERVAL_MS: u64 = 1000;

/// How long a control request waits for the IKE thread's answer before
/// it is told IKE is not answering.
pub const IKE_CONTROL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Longest `phalanxctl initiate --wait`.
pub const MAX_INITIATE_WAIT_SECONDS: u32 = 600;

/// How often the IKE thread publishes its status for the control socket
/// and checks the data plane's SAs for hard expiry, at the latest.
pub const IKE_HOUSEKEEPING: std::time::Duration = std::time::Duration::from_millis(500);

/// Sequence numbers skipped when an outbound SA is rebuilt for a new peer
/// address (RFC 7296 §2.23 NAT mapping change): workers that loaded the old
/// SA before the switch may still take numbers from it for one batch.
pub const PEER_MOVE_SEQUENCE_GAP: u64 = 1 << 16;

/// Largest IKE datagram read (RFC 7296 §2: implementations MUST accept
/// 1280 octets and SHOULD accept up to 3000; fragments are smaller).
pub const MAX_IKE_DATAGRAM: usize = 65_535;

/// How long past its hard lifetime the data plane still accepts a Child SA
/// negotiated by IKE. IKE deletes the SA at its hard lifetime itself (the
/// endpoint's timer, RFC 7296 §2.8), and the peer keeps sending on it
/// until that Delete arrives (a rekey responder switches only then); the
/// data plane's own limit is the backstop should IKE not, a few round
/// trips later, so no packet in flight is refused at the boundary.
pub const IKE_HARD_LIFETIME_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
