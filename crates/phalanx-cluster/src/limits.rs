//! Cluster constants, each with where it comes from.

/// Highest node id: the node id fills the top 16 bits of the 8-byte
/// explicit IV of the combined modes (RFC 4106 §3.1 asks only that the IV
/// be unique per key; partitioning it by node makes it unique across the
/// cluster even when two nodes send the same sequence number).
pub const MAX_NODE_ID: u32 = 0xffff;

// ---- Replication, leases, failure detection (helper "replication"). ----

/// Default length of a sequence-number lease block, in sequence numbers
/// (cluster contract). Each grant also reserves one takeover block of the
/// same length per member, so a grant consumes `(n + 1) * lease_len`
/// numbers of the SA's space (RFC 4303 §3.3.3: the space never cycles).
pub const DEFAULT_LEASE_LEN: u64 = 65_536;

/// Default checkpoint period of an outbound stream, in packets.
pub const DEFAULT_CHECKPOINT_EVERY: u64 = 1024;

/// A node with traffic on a stream checkpoints it at least this often,
/// whatever `checkpoint_every` says (cluster contract: 20 ms).
pub const CHECKPOINT_INTERVAL: core::time::Duration = core::time::Duration::from_millis(20);

/// After entering a lineage a node checkpoints its counter after the 1st,
/// 2nd, 4th, ... packet up to this one, so that a node that entered later
/// (it adopted the view change later) heals within a few packets rather
/// than at the next periodic checkpoint.
pub const ENTRY_CHECKPOINTS_UNTIL: u64 = 512;

/// Lineage positions at which the stateful schemes' outbound stream state
/// (flow tables, queue models) starts over. Nodes enter a lineage (a view
/// change) a few packets apart and build that state from different
/// packets; their counters agree again within a few packets
/// ([`ENTRY_CHECKPOINTS_UNTIL`]), and from a restart at a position they
/// all count the same packet at, so does their state. Later restarts
/// catch a node whose counter healed only later. Each restart may move
/// flows between nodes, as the view change itself did.
pub const STATE_RESTART_POSITIONS: [u64; 5] = [64, 256, 1024, 4096, 16_384];

/// Default interval between two heartbeats on the cluster link.
pub const DEFAULT_HEARTBEAT_INTERVAL: core::time::Duration = core::time::Duration::from_millis(5);

/// Default silence after which a peer is suspected (six heartbeats).
pub const DEFAULT_SUSPECT_AFTER: core::time::Duration = core::time::Duration::from_millis(30);

/// How many `(counter, fingerprint)` pairs an outbound sequencer keeps to
/// match other nodes' checkpoints against (cluster contract).
pub const FINGERPRINT_RING: usize = 4096;

/// How many inbound sequence numbers an observer remembers behind the
/// highest one (cluster contract: a bitmap of the last 4,096). A replay
/// window larger than this is only partly carried over at takeover.
pub const OBSERVER_WINDOW: u64 = 4096;

/// Highest outbound sequence number a node may send with node-partitioned
/// explicit IVs: the IV keeps only the low 48 bits of the sequence number
/// (RFC 4106 §3.1 asks only that the IV be unique; phalanx-esp refuses
/// numbers from 2^48 on), so ESN SAs lease at most up to here.
pub const MAX_PARTITIONED_SEQ: u64 = (1 << 48) - 1;

/// Highest sequence number of an SA without ESN (RFC 4303 §2.2: 32 bits).
pub const MAX_SEQ_32: u64 = u32::MAX as u64;

/// The smallest peer replay window for which one SA's outbound packets
/// are spread over several nodes (packet- and session-based schemes).
/// Nodes process the same stream at slightly different times, so a
/// spread SA arrives reordered by the nodes' skew in packets: measured
/// here (bench/small-window.py, RESULTS "Small replay windows") at
/// 10,000 packets/s on a loaded 2-core machine, at most 215 (packet-rr)
/// and 373 (packet-sqf) behind, with about 100 of 80,000 packets more
/// than 128 behind. 1,024 (Phalanx's default window) holds that;
/// strongSwan's userspace ESP (128) and Linux XFRM's default (32) do
/// not, so their SAs are sent by one node each.
pub const SPREAD_MIN_PEER_WINDOW: u32 = 1024;

/// Blocks of the regular lineage kept in the lease table (older ones can
/// no longer be needed by a node whose counter agrees with the others').
pub const LEASE_REGULAR_KEPT: usize = 3;

/// Regular blocks of one *run*: the successors of a regular block are
/// granted right after it (no gap in the numbers) until the run holds
/// this many; its takeover blocks lie above the whole run. A peer sees
/// numbers jump past the takeover blocks only between runs, not at every
/// block, so packets of a spread SA that the nodes send a little out of
/// order stay inside the peer's window (issue 17; before, every block
/// boundary put the slower node's last packets `n * lease_len` behind).
pub const LEASE_RUN_BLOCKS: u64 = 64;

/// Blocks kept per takeover lineage.
pub const LEASE_TAKEOVER_KEPT: usize = 3;

/// Heartbeats a suspected node must send (to a node that suspected it)
/// before that node asks the log to take it back (`Rejoin`): one lost
/// burst must not make a node flap in and out.
pub const REJOIN_HEARTBEATS: u32 = 3;

/// A fresh node founds a new cluster only after the agreed membership has
/// been stable this many `suspect_after` periods and every member's
/// heartbeats say it has no state either.
pub const FOUND_AFTER_SUSPECT_PERIODS: u32 = 4;

/// Events a fresh node buffers while it waits for its state transfer; on
/// overflow it starts over and waits for the next transfer.
pub const JOIN_BUFFER_EVENTS: usize = 65_536;

/// A joining node that got its state waits at most this long for the
/// replay checkpoints of the inbound SAs before it declares itself ready
/// (idle SAs, or a member whose data path is stalled).
pub const JOIN_SYNC_TIMEOUT: core::time::Duration = core::time::Duration::from_millis(200);

/// Checkpoint ticks (of [`CHECKPOINT_INTERVAL`]) between two periodic
/// replay checkpoints of an inbound SA with traffic.
pub const REPLAY_CHECKPOINT_TICKS: u64 = 5;

/// Recent checkpoints of other nodes kept per outbound SA in the shared
/// state, for the data path to heal from.
pub const CHECKPOINT_NOTES: usize = 16;

/// Failover records kept for `phalanxctl cluster`.
pub const FAILOVER_HISTORY: usize = 16;

/// Cluster events kept until polled; older ones are dropped (counted).
pub const EVENT_QUEUE: usize = 4096;

/// The largest counter advance a checkpoint may cause. Two nodes in one
/// lineage differ by the packets one missed; anything near this is a bug
/// or a lie, and is ignored.
pub const MAX_HEAL: u64 = 1 << 24;

/// Checkpoint datagrams queued for the heartbeat channel at most; more
/// are left to the log (a stalled sender loses nothing else).
pub const MAX_DATAGRAMS: usize = 256;
