//! The outside path MTU of an outbound SA (RFC 4301 §8.2, RFC 1191,
//! RFC 8201) and the per-SA drop counters the operator reads.
//!
//! [`PathMtu`] holds what the sender learned of the path to the SA's peer:
//! the largest outer IP packet the path carries, and when that was
//! learned. A value ages out after [`PMTU_EXPIRES`] (RFC 1191 §6.3, the
//! kernel's `net.ipv4.route.mtu_expires`): then the SA sends as if it knew
//! nothing, and the next packet that does not fit teaches it again. Values
//! below the family's floor ([`PMTU_MIN_V4`], [`PMTU_MIN_V6`]) are raised
//! to it, so a forged ICMP message cannot shrink an SA's packets to
//! nothing (RFC 5927 §7.1).
//!
//! Sans-IO: time is a parameter; the value lives in one atomic word so the
//! workers that send on one SA read it without a lock.

use core::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::limits::{PMTU_EXPIRES, PMTU_MIN_V4, PMTU_MIN_V6, SA_DROP_SLOTS};

/// Largest MTU a value can hold: an IP packet's length field is 16 bits.
const MTU_MAX: u32 = u16::MAX as u32;

/// The learned outside path MTU of one SA.
///
/// One word: the MTU in the low 16 bits, the time it was learned in the
/// high 48 (milliseconds after the SA's creation, plus one; 0 = never).
#[derive(Debug)]
pub struct PathMtu {
    epoch: Instant,
    word: AtomicU64,
}

impl PathMtu {
    /// Nothing learned yet; times count from `now`.
    pub fn new(now: Instant) -> PathMtu {
        PathMtu {
            epoch: now,
            word: AtomicU64::new(0),
        }
    }

    /// Records that the path carries outer packets of at most `mtu` bytes
    /// (learned at `now`), raised to the floor of the family (`v6`).
    /// Replaces what was known: the caller hands over what the kernel
    /// reported, which is the path's current state. Returns the value
    /// kept.
    pub fn learn(&self, mtu: u32, v6: bool, now: Instant) -> u32 {
        let floor = if v6 { PMTU_MIN_V6 } else { PMTU_MIN_V4 };
        let mtu = mtu.clamp(floor, MTU_MAX);
        let at = self.millis(now).saturating_add(1).min((1 << 48) - 1);
        self.word
            .store((at << 16) | u64::from(mtu), Ordering::Relaxed);
        mtu
    }

    /// The MTU learned within the last [`PMTU_EXPIRES`] before `now`, if
    /// any.
    #[inline]
    pub fn current(&self, now: Instant) -> Option<u32> {
        let word = self.word.load(Ordering::Relaxed);
        let at = word >> 16;
        if at == 0 {
            return None;
        }
        let age = self.millis(now).saturating_sub(at - 1);
        (u128::from(age) < PMTU_EXPIRES.as_millis()).then_some((word & 0xffff) as u32)
    }

    /// Forgets what was learned.
    pub fn forget(&self) {
        self.word.store(0, Ordering::Relaxed);
    }

    fn millis(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.epoch);
        u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
    }
}

/// Packets dropped on one SA, per reason. The reasons are the caller's
/// (phalanx-esp's `DropReason` discriminants): slot `i` counts reason `i`.
#[derive(Debug)]
pub struct SaDrops {
    slots: [AtomicU64; SA_DROP_SLOTS],
}

impl Default for SaDrops {
    fn default() -> Self {
        SaDrops {
            slots: core::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl SaDrops {
    /// Counts one drop for reason `slot` (ignored past [`SA_DROP_SLOTS`]:
    /// a compile-time check in the caller keeps its reasons within).
    #[inline]
    pub fn record(&self, slot: usize) {
        if let Some(counter) = self.slots.get(slot) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every slot's count.
    pub fn snapshot(&self) -> [u64; SA_DROP_SLOTS] {
        core::array::from_fn(|i| self.slots[i].load(Ordering::Relaxed))
    }

    /// All drops of the SA.
    pub fn total(&self) -> u64 {
        self.slots.iter().fold(0, |sum: u64, c| {
            sum.saturating_add(c.load(Ordering::Relaxed))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn nothing_is_known_at_first() {
        let t0 = Instant::now();
        assert_eq!(PathMtu::new(t0).current(t0), None);
    }

    #[test]
    fn a_learned_value_holds_until_it_expires() {
        let t0 = Instant::now();
        let pmtu = PathMtu::new(t0);
        let learned = t0 + Duration::from_secs(5);
        assert_eq!(pmtu.learn(1280, false, learned), 1280);
        assert_eq!(pmtu.current(learned), Some(1280));
        let almost = learned + PMTU_EXPIRES - Duration::from_millis(1);
        assert_eq!(pmtu.current(almost), Some(1280));
        assert_eq!(pmtu.current(learned + PMTU_EXPIRES), None);
    }

    #[test]
    fn learning_again_replaces_and_restarts_the_age() {
        let t0 = Instant::now();
        let pmtu = PathMtu::new(t0);
        pmtu.learn(1400, false, t0);
        let later = t0 + Duration::from_secs(500);
        pmtu.learn(1280, false, later);
        assert_eq!(pmtu.current(t0 + PMTU_EXPIRES), Some(1280));
        pmtu.learn(1500, false, later);
        assert_eq!(pmtu.current(later), Some(1500));
    }

    #[test]
    fn values_below_the_floor_are_raised() {
        let t0 = Instant::now();
        let pmtu = PathMtu::new(t0);
        assert_eq!(pmtu.learn(68, false, t0), PMTU_MIN_V4);
        assert_eq!(pmtu.learn(576, true, t0), PMTU_MIN_V6);
        assert_eq!(pmtu.learn(1 << 20, false, t0), 65535);
        assert_eq!(pmtu.current(t0), Some(65535));
    }

    #[test]
    fn forget_clears() {
        let t0 = Instant::now();
        let pmtu = PathMtu::new(t0);
        pmtu.learn(1280, false, t0);
        pmtu.forget();
        assert_eq!(pmtu.current(t0), None);
    }

    #[test]
    fn a_clock_before_the_epoch_reads_as_the_epoch() {
        let t0 = Instant::now() + Duration::from_secs(1);
        let pmtu = PathMtu::new(t0);
        let before = t0 - Duration::from_millis(500);
        pmtu.learn(1300, false, before);
        assert_eq!(pmtu.current(before), Some(1300));
    }

    #[test]
    fn drops_count_per_slot() {
        let drops = SaDrops::default();
        drops.record(3);
        drops.record(3);
        drops.record(SA_DROP_SLOTS - 1);
        drops.record(SA_DROP_SLOTS);
        let s = drops.snapshot();
        assert_eq!((s[3], s[SA_DROP_SLOTS - 1], s[0]), (2, 1, 0));
        assert_eq!(drops.total(), 3);
    }
}
