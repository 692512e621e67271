//! SA lifetimes (RFC 4301 §4.4.2.1): soft limits ask for a rekey, hard
//! limits end the SA. Limits count bytes (those the cryptographic algorithm
//! is applied to, RFC 4301 §4.4.2.1), packets, and time since the SA was
//! created.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::time::Duration;
use std::time::Instant;

/// The lifetime limits of one SA; `None` is "no limit".
///
/// A byte or packet limit `n` means "n may be processed": the packet that
/// reaches a soft limit triggers the rekey event, the packet that would go
/// past a hard limit is refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LifetimeLimits {
    /// Bytes after which a rekey is requested.
    pub soft_bytes: Option<u64>,
    /// Bytes past which the SA refuses packets.
    pub hard_bytes: Option<u64>,
    /// Packets after which a rekey is requested.
    pub soft_packets: Option<u64>,
    /// Packets past which the SA refuses packets.
    pub hard_packets: Option<u64>,
    /// Age after which a rekey is requested.
    pub soft_time: Option<Duration>,
    /// Age at which the SA expires.
    pub hard_time: Option<Duration>,
}

/// What a lifetime check concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LifetimeState {
    /// Within every limit.
    Ok,
    /// A soft limit was just reached: the rekey event. Reported once per
    /// SA, by the first call that sees any soft limit reached; the packet
    /// is still processed.
    SoftExpired,
    /// A hard limit is reached: refuse the packet; the SA is dead and stays
    /// so.
    HardExpired,
}

/// The per-packet counters, alone on a cache line.
#[repr(align(64))]
#[derive(Debug, Default)]
struct UsageHot {
    bytes: AtomicU64,
    packets: AtomicU64,
    soft_fired: AtomicBool,
    hard_fired: AtomicBool,
}

const _: () = assert!(core::mem::size_of::<UsageHot>() == 64);

/// Usage of one SA against its [`LifetimeLimits`]; shared by the cores that
/// process the SA (atomics only).
#[derive(Debug)]
pub struct UsageCounter {
    hot: UsageHot,
    limits: LifetimeLimits,
    created: Instant,
}

impl UsageCounter {
    /// Counters at zero for an SA created at `created`.
    pub fn new(limits: LifetimeLimits, created: Instant) -> UsageCounter {
        UsageCounter {
            hot: UsageHot::default(),
            limits,
            created,
        }
    }

    /// Account one packet of `bytes` before it is sent or accepted.
    /// `HardExpired` means: do not process it (RFC 4301 §4.4.2.1).
    #[inline]
    pub fn record(&self, bytes: u64) -> LifetimeState {
        if self.hot.hard_fired.load(Ordering::Relaxed) {
            return LifetimeState::HardExpired;
        }
        let total_bytes = self
            .hot
            .bytes
            .fetch_add(bytes, Ordering::Relaxed)
            .saturating_add(bytes);
        let total_packets = self
            .hot
            .packets
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        let l = &self.limits;
        if above(total_bytes, l.hard_bytes) || above(total_packets, l.hard_packets) {
            return self.expire();
        }
        if reached(total_bytes, l.soft_bytes) || reached(total_packets, l.soft_packets) {
            return self.fire_soft();
        }
        LifetimeState::Ok
    }

    /// Check the time limits at `now` (the caller's clock; the soft and
    /// hard timers of RFC 4301 §4.4.2.1).
    pub fn check_time(&self, now: Instant) -> LifetimeState {
        if self.hot.hard_fired.load(Ordering::Relaxed) {
            return LifetimeState::HardExpired;
        }
        let age = now.saturating_duration_since(self.created);
        if self.limits.hard_time.is_some_and(|hard| age >= hard) {
            return self.expire();
        }
        if self.limits.soft_time.is_some_and(|soft| age >= soft) {
            return self.fire_soft();
        }
        LifetimeState::Ok
    }

    /// Whether a hard limit was reached.
    pub fn is_hard_expired(&self) -> bool {
        self.hot.hard_fired.load(Ordering::Relaxed)
    }

    /// Whether the soft-limit event has been reported.
    pub fn is_soft_expired(&self) -> bool {
        self.hot.soft_fired.load(Ordering::Relaxed)
    }

    /// Bytes recorded (including a refused packet that hit the hard limit).
    pub fn bytes(&self) -> u64 {
        self.hot.bytes.load(Ordering::Relaxed)
    }

    /// Packets recorded (including a refused packet that hit the hard
    /// limit).
    pub fn packets(&self) -> u64 {
        self.hot.packets.load(Ordering::Relaxed)
    }

    /// When the SA was created.
    pub fn created(&self) -> Instant {
        self.created
    }

    /// The limits.
    pub fn limits(&self) -> &LifetimeLimits {
        &self.limits
    }

    fn fire_soft(&self) -> LifetimeState {
        if self.hot.soft_fired.swap(true, Ordering::Relaxed) {
            LifetimeState::Ok
        } else {
            LifetimeState::SoftExpired
        }
    }

    fn expire(&self) -> LifetimeState {
        self.hot.hard_fired.store(true, Ordering::Relaxed);
        // A hard expiry supersedes the rekey event: the SA is gone.
        self.hot.soft_fired.store(true, Ordering::Relaxed);
        LifetimeState::HardExpired
    }
}

fn above(value: u64, limit: Option<u64>) -> bool {
    limit.is_some_and(|limit| value > limit)
}

fn reached(value: u64, limit: Option<u64>) -> bool {
    limit.is_some_and(|limit| value >= limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_packet_limit_fires_exactly_once_and_hard_refuses() {
        let limits = LifetimeLimits {
            soft_packets: Some(3),
            hard_packets: Some(5),
            ..Default::default()
        };
        let usage = UsageCounter::new(limits, Instant::now());
        let states: Vec<_> = (0..7).map(|_| usage.record(100)).collect();
        use LifetimeState::*;
        assert_eq!(
            states,
            [Ok, Ok, SoftExpired, Ok, Ok, HardExpired, HardExpired]
        );
        assert!(usage.is_hard_expired() && usage.is_soft_expired());
        assert_eq!(
            usage.packets(),
            6,
            "the refused packet is counted, later ones are not"
        );
    }

    #[test]
    fn byte_limits_count_bytes() {
        let limits = LifetimeLimits {
            soft_bytes: Some(1000),
            hard_bytes: Some(1500),
            ..Default::default()
        };
        let usage = UsageCounter::new(limits, Instant::now());
        assert_eq!(usage.record(999), LifetimeState::Ok);
        assert_eq!(usage.record(1), LifetimeState::SoftExpired);
        assert_eq!(usage.record(500), LifetimeState::Ok);
        assert_eq!(usage.record(1), LifetimeState::HardExpired);
        assert_eq!(usage.bytes(), 1501);
    }

    #[test]
    fn time_limits_use_the_given_clock() {
        let t0 = Instant::now();
        let limits = LifetimeLimits {
            soft_time: Some(Duration::from_secs(10)),
            hard_time: Some(Duration::from_secs(20)),
            ..Default::default()
        };
        let usage = UsageCounter::new(limits, t0);
        assert_eq!(
            usage.check_time(t0 + Duration::from_secs(9)),
            LifetimeState::Ok
        );
        assert_eq!(
            usage.check_time(t0 + Duration::from_secs(10)),
            LifetimeState::SoftExpired
        );
        assert_eq!(
            usage.check_time(t0 + Duration::from_secs(15)),
            LifetimeState::Ok
        );
        assert_eq!(usage.record(1), LifetimeState::Ok);
        assert_eq!(
            usage.check_time(t0 + Duration::from_secs(20)),
            LifetimeState::HardExpired
        );
        assert_eq!(
            usage.record(1),
            LifetimeState::HardExpired,
            "hard expiry is sticky"
        );
        assert_eq!(usage.check_time(t0), LifetimeState::HardExpired);
    }

    #[test]
    fn soft_fires_once_across_kinds_of_limit() {
        let t0 = Instant::now();
        let limits = LifetimeLimits {
            soft_packets: Some(1),
            soft_time: Some(Duration::from_secs(1)),
            ..Default::default()
        };
        let usage = UsageCounter::new(limits, t0);
        assert_eq!(usage.record(1), LifetimeState::SoftExpired);
        assert_eq!(
            usage.check_time(t0 + Duration::from_secs(2)),
            LifetimeState::Ok
        );
    }

    #[test]
    fn soft_fires_once_under_concurrency() {
        let limits = LifetimeLimits {
            soft_packets: Some(1000),
            ..Default::default()
        };
        let usage = std::sync::Arc::new(UsageCounter::new(limits, Instant::now()));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let usage = std::sync::Arc::clone(&usage);
                std::thread::spawn(move || {
                    (0..10_000)
                        .filter(|_| usage.record(64) == LifetimeState::SoftExpired)
                        .count()
                })
            })
            .collect();
        let fired: usize = handles
            .into_iter()
            .map(|h| h.join().expect("thread panicked"))
            .sum();
        assert_eq!(fired, 1);
    }

    #[test]
    fn no_limits_never_expire() {
        let usage = UsageCounter::new(LifetimeLimits::default(), Instant::now());
        assert_eq!(usage.record(1 << 40), LifetimeState::Ok);
        assert_eq!(usage.record(1 << 40), LifetimeState::Ok);
        assert_eq!(usage.check_time(Instant::now()), LifetimeState::Ok);
    }
}
