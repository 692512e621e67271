//! The runtime state of one SA, one struct per direction (RFC 4301 §4.4.2):
//! an [`OutboundSa`] (sequence counter, lifetime, stats) and an
//! [`InboundSa`] (replay window, lifetime, stats).
//!
//! The two directions are separate objects so the cores that send and the
//! cores that receive never write the same cache line; within each, the
//! per-packet fields sit on cache lines of their own, ahead of the cold
//! parameters (`#[repr(C)]` keeps that order; the assertions below document
//! it).

use crate::lifetime::{LifetimeLimits, UsageCounter};
use crate::path_mtu::{PathMtu, SaDrops};
use crate::replay::{ReplayError, ReplaySnapshot, ReplayWindow};
use crate::selector::{FlowKey, Selector};
use crate::sequence::{SequenceCounter, SequenceError};
use core::fmt;
use core::mem::{offset_of, size_of};
use core::net::IpAddr;
use core::sync::atomic::{AtomicU64, Ordering};
use phalanx_crypto::SaTransform;
use phalanx_wire::IpProtocol;
use std::sync::Arc;
use std::time::Instant;

/// The IPsec protocol of an SA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpsecProtocol {
    /// Encapsulating Security Payload (RFC 4303).
    Esp,
    /// Authentication Header (RFC 4302).
    Ah,
}

impl IpsecProtocol {
    /// The IP protocol number that carries it (50 or 51).
    pub fn ip_protocol(self) -> IpProtocol {
        match self {
            IpsecProtocol::Esp => IpProtocol::ESP,
            IpsecProtocol::Ah => IpProtocol::AH,
        }
    }
}

/// Tunnel or transport mode (RFC 4301 §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SaMode {
    /// Tunnel mode: the whole packet goes inside an outer IP header between
    /// the two gateways.
    Tunnel {
        /// Our end of the tunnel (outer source outbound, outer destination
        /// inbound).
        local: IpAddr,
        /// The peer's end of the tunnel.
        remote: IpAddr,
    },
    /// Transport mode: the IP header of the packet is kept.
    Transport,
}

/// UDP encapsulation of ESP (RFC 3948), for NAT traversal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UdpEncap {
    /// Our UDP port (normally 4500).
    pub local_port: u16,
    /// The peer's UDP port (as seen through the NAT).
    pub remote_port: u16,
}

/// What IKE negotiated for one SA, in one direction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaParams {
    /// Security Parameter Index (RFC 4303 §2.1): outbound the peer's,
    /// inbound ours.
    pub spi: u32,
    /// ESP or AH.
    pub protocol: IpsecProtocol,
    /// Tunnel or transport.
    pub mode: SaMode,
    /// UDP encapsulation, when a NAT was detected.
    pub encap: Option<UdpEncap>,
    /// Extended (64-bit) sequence numbers (RFC 4303 §2.2.1).
    pub esn: bool,
    /// Anti-replay window in packets (inbound; 0 disables anti-replay,
    /// RFC 4303 §3.4.3).
    pub replay_window: u32,
    /// Lifetime limits (RFC 4301 §4.4.2.1).
    pub lifetime: LifetimeLimits,
    /// Traffic selectors of the SA, oriented as packets travel in this
    /// direction (inbound: source = peer side). Empty means any.
    pub selectors: Vec<Selector>,
    /// TFC padding: pad tunnel-mode inner packets to this length
    /// (RFC 4303 §2.7), outbound only.
    pub tfc_pad_to: Option<u16>,
}

/// A snapshot of an SA's packet and byte counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SaStatsSnapshot {
    /// Packets processed successfully.
    pub packets: u64,
    /// Bytes processed successfully.
    pub bytes: u64,
}

/// Per-SA packet and byte counters for the operator, on their own cache
/// line.
#[repr(align(64))]
#[derive(Debug, Default)]
pub struct SaStats {
    packets: AtomicU64,
    bytes: AtomicU64,
}

const _: () = assert!(size_of::<SaStats>() == 64);

impl SaStats {
    /// Count one packet of `bytes`.
    #[inline]
    pub fn record(&self, bytes: u64) {
        self.record_batch(1, bytes);
    }

    /// Count `packets` packets totalling `bytes` (one update per batch).
    #[inline]
    pub fn record_batch(&self, packets: u64, bytes: u64) {
        self.packets.fetch_add(packets, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Read the counters.
    pub fn snapshot(&self) -> SaStatsSnapshot {
        SaStatsSnapshot {
            packets: self.packets.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }
}

/// Why an SA could not be created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SaError {
    /// The replay window size is out of range.
    ReplayWindow(ReplayError),
}

impl fmt::Display for SaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SaError::ReplayWindow(e) => write!(f, "invalid replay window: {e}"),
        }
    }
}

impl std::error::Error for SaError {}

/// The sending side of an SA.
#[repr(C)]
#[derive(Debug)]
pub struct OutboundSa {
    /// Sequence numbers (hot: every packet, possibly several cores).
    pub seq: SequenceCounter,
    /// Lifetime usage (hot part on its own line).
    pub usage: UsageCounter,
    /// Operator counters.
    pub stats: SaStats,
    /// Packets dropped on this SA, per reason (operator counters).
    pub drops: SaDrops,
    /// The outside path MTU learned for this SA's peer (RFC 4301 §8.2).
    pub path_mtu: PathMtu,
    /// Negotiated parameters (read-only).
    pub params: SaParams,
    /// The keyed algorithms.
    pub transform: Arc<SaTransform>,
}

const _: () = {
    assert!(offset_of!(OutboundSa, seq) == 0);
    assert!(offset_of!(OutboundSa, usage) == 64);
    assert!(offset_of!(OutboundSa, stats) % 64 == 0);
};

impl OutboundSa {
    /// A new outbound SA created at `now`; its first sequence number is 1.
    pub fn new(params: SaParams, transform: Arc<SaTransform>, now: Instant) -> OutboundSa {
        OutboundSa {
            seq: SequenceCounter::new(params.esn),
            usage: UsageCounter::new(params.lifetime, now),
            stats: SaStats::default(),
            drops: SaDrops::default(),
            path_mtu: PathMtu::new(now),
            params,
            transform,
        }
    }

    /// The next sequence number to send (RFC 4303 §3.3.3).
    #[inline]
    pub fn next_sequence(&self) -> Result<u64, SequenceError> {
        self.seq.next()
    }

    /// The SPI.
    pub fn spi(&self) -> u32 {
        self.params.spi
    }
}

/// The receiving side of an SA.
#[repr(C)]
#[derive(Debug)]
pub struct InboundSa {
    /// Operator counters.
    pub stats: SaStats,
    /// Anti-replay window: locked briefly for the commit, and for the
    /// pre-check of a number at or below the highest one committed.
    ///
    /// [`replay_commit`](Self::replay_commit) keeps a lock-free copy of
    /// the window's highest number for [`replay_check`](Self::replay_check);
    /// code that changes the window through this lock directly (a restore
    /// at takeover) leaves that copy behind until the next commit or
    /// locked check. That is safe: the copy only decides which numbers
    /// skip the lock in the pre-check, and every number is checked again
    /// under the lock when it is committed.
    pub replay: parking_lot::Mutex<ReplayWindow>,
    /// The window's highest committed number as of the last commit (or
    /// locked check): numbers above it pass the pre-check without the
    /// lock. Shares the window's cache line, which every commit writes.
    replay_highest: AtomicU64,
    /// Lifetime usage (hot part on its own line).
    pub usage: UsageCounter,
    /// Packets dropped on this SA, per reason (operator counters).
    pub drops: SaDrops,
    /// Negotiated parameters (read-only).
    pub params: SaParams,
    /// The keyed algorithms.
    pub transform: Arc<SaTransform>,
}

const _: () = {
    assert!(offset_of!(InboundSa, stats) == 0);
    assert!(offset_of!(InboundSa, replay) == 64);
    assert!(size_of::<parking_lot::Mutex<ReplayWindow>>() <= 56);
    assert!(offset_of!(InboundSa, replay_highest) < 128);
    assert!(offset_of!(InboundSa, usage) == 128);
};

impl InboundSa {
    /// A new inbound SA created at `now`. Fails if
    /// `params.replay_window` is neither 0 (disabled) nor in 32..=65536.
    pub fn new(
        params: SaParams,
        transform: Arc<SaTransform>,
        now: Instant,
    ) -> Result<InboundSa, SaError> {
        let window =
            ReplayWindow::new(params.replay_window, params.esn).map_err(SaError::ReplayWindow)?;
        Ok(InboundSa {
            stats: SaStats::default(),
            replay_highest: AtomicU64::new(window.highest()),
            replay: parking_lot::Mutex::new(window),
            usage: UsageCounter::new(params.lifetime, now),
            drops: SaDrops::default(),
            params,
            transform,
        })
    }

    /// The SPI.
    pub fn spi(&self) -> u32 {
        self.params.spi
    }

    /// Anti-replay pre-check before the ICV (RFC 4303 §3.4.3); returns the
    /// full sequence number (ESN high bits inferred, App. A2.2).
    ///
    /// Without ESN the lock is skipped where the answer does not depend on
    /// the bitmap: 0 never passes; with anti-replay disabled every other
    /// number does; and a number above the highest committed one is new
    /// (the in-order case, most packets). The answer is then the one the
    /// window gave at the last commit; a commit racing with this check is
    /// no different from one that follows it, since
    /// [`replay_commit`](Self::replay_commit) checks again under the lock.
    #[inline]
    pub fn replay_check(&self, seq_low: u32) -> Result<u64, ReplayError> {
        if !self.params.esn {
            if seq_low == 0 {
                // RFC 4303 §3.3.3: 0 is never sent.
                return Err(ReplayError::Invalid);
            }
            let seq = u64::from(seq_low);
            let disabled = self.params.replay_window == 0;
            if disabled || seq > self.replay_highest.load(Ordering::Acquire) {
                return Ok(seq);
            }
        }
        let window = self.replay.lock();
        self.replay_highest
            .store(window.highest(), Ordering::Release);
        window.check(seq_low)
    }

    /// Mark `seq` received after its packet authenticated (RFC 4303
    /// §3.4.3); fails if a packet with that number was committed first.
    #[inline]
    pub fn replay_commit(&self, seq: u64) -> Result<(), ReplayError> {
        let mut window = self.replay.lock();
        let result = window.commit(seq);
        self.replay_highest
            .store(window.highest(), Ordering::Release);
        result
    }

    /// The replay window's state, to hand to another node.
    pub fn replay_snapshot(&self) -> ReplaySnapshot {
        self.replay.lock().snapshot()
    }

    /// Whether a decapsulated packet may arrive on this SA (RFC 4301 §5.2:
    /// the inner packet must match the SA's selectors). No selectors means
    /// any packet.
    pub fn selectors_match(&self, key: &FlowKey) -> bool {
        self.params.selectors.is_empty() || self.params.selectors.iter().any(|s| s.matches(key))
    }

    /// Whether a packet addressed to `dst` belongs to this SA: in tunnel
    /// mode it must be our tunnel endpoint; in transport mode any address
    /// of ours is (RFC 4301 §4.1, SAD lookup by SPI).
    pub fn accepts_destination(&self, dst: IpAddr) -> bool {
        match self.params.mode {
            SaMode::Tunnel { local, .. } => local == dst,
            SaMode::Transport => true,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::selector::IpPrefix;
    use phalanx_crypto::Suite;
    use phalanx_wire::{EncrId, IntegId};

    pub(crate) fn transform() -> Arc<SaTransform> {
        let suite = Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE);
        let key = [7u8; 20];
        Arc::new(
            SaTransform::new(phalanx_crypto::default_provider(), suite, &key, &[])
                .expect("valid AES-GCM key"),
        )
    }

    pub(crate) fn params(spi: u32, mode: SaMode) -> SaParams {
        SaParams {
            spi,
            protocol: IpsecProtocol::Esp,
            mode,
            encap: None,
            esn: true,
            replay_window: 64,
            lifetime: LifetimeLimits::default(),
            selectors: Vec::new(),
            tfc_pad_to: None,
        }
    }

    pub(crate) fn tunnel(local: &str, remote: &str) -> SaMode {
        SaMode::Tunnel {
            local: local.parse().expect("test address"),
            remote: remote.parse().expect("test address"),
        }
    }

    #[test]
    fn outbound_counts_from_one() {
        let sa = OutboundSa::new(params(1, SaMode::Transport), transform(), Instant::now());
        assert_eq!(sa.next_sequence(), Ok(1));
        assert_eq!(sa.next_sequence(), Ok(2));
        sa.stats.record(100);
        sa.stats.record_batch(2, 50);
        assert_eq!(
            sa.stats.snapshot(),
            SaStatsSnapshot {
                packets: 3,
                bytes: 150
            }
        );
        assert_eq!(sa.spi(), 1);
    }

    #[test]
    fn inbound_validates_the_window_and_checks_then_commits() {
        let mut p = params(2, SaMode::Transport);
        p.replay_window = 8;
        let err = InboundSa::new(p.clone(), transform(), Instant::now()).err();
        assert_eq!(
            err,
            Some(SaError::ReplayWindow(ReplayError::InvalidWindowSize))
        );
        p.replay_window = 128;
        let sa = InboundSa::new(p, transform(), Instant::now()).expect("valid");
        assert_eq!(sa.replay_check(1), Ok(1));
        assert_eq!(sa.replay_commit(1), Ok(()));
        assert_eq!(sa.replay_check(1), Err(ReplayError::Duplicate));
        assert_eq!(sa.replay_snapshot().highest, 1);
    }

    /// The lock-free pre-check answers what the window itself answers, in
    /// every state a run of commits leaves it in (windows 0 and 64, no ESN).
    #[test]
    fn lock_free_pre_check_agrees_with_the_window() {
        for window in [0, 64] {
            let mut p = params(4, SaMode::Transport);
            p.esn = false;
            p.replay_window = window;
            let sa = InboundSa::new(p, transform(), Instant::now()).expect("valid");
            let mut x = 12345u32;
            for _ in 0..4000 {
                // A small LCG: numbers around the right edge, some far back.
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let highest = sa.replay_snapshot().highest as u32;
                let seq = if (x >> 8) % 4 == 0 {
                    highest.saturating_sub((x >> 10) % 96)
                } else {
                    highest + (x >> 16) % 8
                };
                let expected = sa.replay.lock().check(seq);
                assert_eq!(sa.replay_check(seq), expected, "window {window} seq {seq}");
                if x % 3 != 0 {
                    if let Ok(full) = expected {
                        assert_eq!(sa.replay_commit(full), Ok(()));
                    }
                }
            }
            assert!(
                sa.replay_snapshot().highest > 1000,
                "the run moved the window"
            );
        }
    }

    /// Numbers above the highest committed one (and any number but 0 with
    /// anti-replay off) are pre-checked without taking the window's lock.
    #[test]
    fn in_order_pre_check_does_not_wait_for_the_lock() {
        for window in [0, 64] {
            let mut p = params(5, SaMode::Transport);
            p.esn = false;
            p.replay_window = window;
            let sa = Arc::new(InboundSa::new(p, transform(), Instant::now()).expect("valid"));
            sa.replay_commit(10).expect("new");
            let held = sa.replay.lock();
            let (tx, rx) = std::sync::mpsc::channel();
            let checker = Arc::clone(&sa);
            std::thread::spawn(move || {
                let _ = tx.send((checker.replay_check(11), checker.replay_check(0)));
            });
            let got = rx.recv_timeout(core::time::Duration::from_secs(10));
            assert_eq!(
                got,
                Ok((Ok(11), Err(ReplayError::Invalid))),
                "window {window}"
            );
            drop(held);
            // At or below the right edge the bitmap decides, under the lock.
            let expected = if window == 0 {
                Ok(10)
            } else {
                Err(ReplayError::Duplicate)
            };
            assert_eq!(sa.replay_check(10), expected);
        }
    }

    /// A window replaced through the lock (a restore) is honoured: the
    /// pre-check may let a stale number through, the commit refuses it.
    #[test]
    fn window_replaced_behind_the_hint_is_still_enforced() {
        let mut p = params(6, SaMode::Transport);
        p.esn = false;
        p.replay_window = 64;
        let sa = InboundSa::new(p, transform(), Instant::now()).expect("valid");
        sa.replay_commit(5).expect("new");
        let mut restored = ReplayWindow::new(64, false).expect("valid");
        restored.commit(100).expect("new");
        *sa.replay.lock() = restored;
        assert_eq!(sa.replay_check(100), Ok(100), "hint still at 5");
        assert_eq!(sa.replay_commit(100), Err(ReplayError::Duplicate));
        assert_eq!(sa.replay_check(100), Err(ReplayError::Duplicate));
        assert_eq!(sa.replay_check(20), Err(ReplayError::TooOld));
    }

    #[test]
    fn selectors_and_destination() {
        let mut p = params(3, tunnel("192.0.2.1", "198.51.100.1"));
        let key = FlowKey {
            src: "10.0.0.1".parse().expect("addr"),
            dst: "10.1.0.1".parse().expect("addr"),
            protocol: IpProtocol::UDP,
            src_port: 1,
            dst_port: 2,
        };
        let any = InboundSa::new(p.clone(), transform(), Instant::now()).expect("valid");
        assert!(any.selectors_match(&key));
        assert!(any.accepts_destination("192.0.2.1".parse().expect("addr")));
        assert!(!any.accepts_destination("192.0.2.2".parse().expect("addr")));
        let net = |s: &str, l| IpPrefix::new(s.parse().expect("addr"), l).expect("prefix");
        p.selectors = vec![Selector::between(net("10.0.0.0", 24), net("10.2.0.0", 16))];
        let narrow = InboundSa::new(p, transform(), Instant::now()).expect("valid");
        assert!(!narrow.selectors_match(&key));
        let inside = FlowKey {
            dst: "10.2.3.4".parse().expect("addr"),
            ..key
        };
        assert!(narrow.selectors_match(&inside));
    }
}
