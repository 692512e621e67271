//! Timer tables indexed by an enum (quinn-style): each IKE SA and each
//! Child SA owns a small table of deadlines, `poll_timeout` is the earliest
//! of all of them, and `handle_timeout` fires those that are due.

use std::time::{Duration, Instant};

use crate::limits::MAX_TIMER_DELAY;

/// The deadline `delay` after `now`, the delay clamped to
/// [`MAX_TIMER_DELAY`] (configured durations may be anything).
pub(crate) fn after(now: Instant, delay: Duration) -> Instant {
    now + delay.min(MAX_TIMER_DELAY)
}

/// Most timers one table holds.
const MAX_TIMERS: usize = 9;

/// An enum whose variants name the timers of one table.
pub(crate) trait TimerKind: Copy + 'static {
    /// Every timer, in index order.
    const ALL: &'static [Self];
    /// This timer's slot.
    fn index(self) -> usize;
}

/// Deadlines by timer.
#[derive(Clone, Debug)]
pub(crate) struct TimerTable<K: TimerKind> {
    at: [Option<Instant>; MAX_TIMERS],
    _kind: core::marker::PhantomData<K>,
}

impl<K: TimerKind> Default for TimerTable<K> {
    fn default() -> Self {
        const { assert!(K::ALL.len() <= MAX_TIMERS) };
        TimerTable {
            at: [None; MAX_TIMERS],
            _kind: core::marker::PhantomData,
        }
    }
}

impl<K: TimerKind> TimerTable<K> {
    /// Arms `timer` for `at`, replacing any earlier deadline.
    pub(crate) fn set(&mut self, timer: K, at: Instant) {
        self.at[timer.index()] = Some(at);
    }

    /// Disarms `timer`.
    pub(crate) fn stop(&mut self, timer: K) {
        self.at[timer.index()] = None;
    }

    /// The deadline of `timer`, if armed.
    pub(crate) fn get(&self, timer: K) -> Option<Instant> {
        self.at[timer.index()]
    }

    /// Whether `timer` is armed.
    pub(crate) fn is_set(&self, timer: K) -> bool {
        self.get(timer).is_some()
    }

    /// The earliest armed deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.at.iter().flatten().min().copied()
    }

    /// Disarms and returns the first timer due at `now`, in index order.
    pub(crate) fn take_expired(&mut self, now: Instant) -> Option<K> {
        let timer = K::ALL
            .iter()
            .copied()
            .find(|t| self.at[t.index()].is_some_and(|at| at <= now))?;
        self.stop(timer);
        Some(timer)
    }
}

/// The timers of an IKE SA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IkeTimer {
    /// Resend the outstanding request (RFC 7296 §2.1), or give up.
    Retransmit,
    /// A half-open or establishing IKE SA gives up (RFC 7296 §2.6).
    Establish,
    /// Send a liveness check after a quiet period (RFC 7296 §1.4).
    Dpd,
    /// Rekey the IKE SA (RFC 7296 §2.8).
    Rekey,
    /// The IKE SA's hard lifetime: delete it.
    Expire,
    /// Retry deferred work (after TEMPORARY_FAILURE, RFC 7296 §2.25).
    Retry,
    /// Forget a dead or deleted IKE SA's last state (response cache kept
    /// for retransmitted Delete requests).
    Linger,
    /// Send a NAT-keepalive: we are behind a NAT (RFC 3948 §2.3, §4).
    NatKeepalive,
    /// Give up answered CREATE_CHILD_SA exchanges whose next
    /// IKE_FOLLOWUP_KE did not come (RFC 9370 §2.2.4).
    FollowupKe,
}

impl TimerKind for IkeTimer {
    const ALL: &'static [Self] = &[
        IkeTimer::Retransmit,
        IkeTimer::Establish,
        IkeTimer::Dpd,
        IkeTimer::Rekey,
        IkeTimer::Expire,
        IkeTimer::Retry,
        IkeTimer::Linger,
        IkeTimer::NatKeepalive,
        IkeTimer::FollowupKe,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// The timers of a Child SA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChildTimer {
    /// Rekey (soft lifetime with jitter, RFC 7296 §2.8).
    Rekey,
    /// Delete (hard lifetime).
    Expire,
    /// The rekey overlap is over: delete this old SA (RFC 7296 §2.8).
    Retire,
}

impl TimerKind for ChildTimer {
    const ALL: &'static [Self] = &[ChildTimer::Rekey, ChildTimer::Expire, ChildTimer::Retire];

    fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_delays_are_clamped() {
        let t0 = Instant::now();
        assert_eq!(after(t0, Duration::MAX), t0 + MAX_TIMER_DELAY);
        assert_eq!(
            after(t0, Duration::from_secs(5)),
            t0 + Duration::from_secs(5)
        );
    }

    #[test]
    fn earliest_and_expiry() {
        let t0 = Instant::now();
        let mut table = TimerTable::<IkeTimer>::default();
        assert_eq!(table.next(), None);
        table.set(IkeTimer::Dpd, t0 + Duration::from_secs(10));
        table.set(IkeTimer::Retransmit, t0 + Duration::from_secs(1));
        assert_eq!(table.next(), Some(t0 + Duration::from_secs(1)));
        assert_eq!(table.take_expired(t0), None);
        assert_eq!(
            table.take_expired(t0 + Duration::from_secs(20)),
            Some(IkeTimer::Retransmit)
        );
        assert_eq!(
            table.take_expired(t0 + Duration::from_secs(20)),
            Some(IkeTimer::Dpd)
        );
        assert!(!table.is_set(IkeTimer::Dpd));
        assert_eq!(table.next(), None);
    }
}
