//! Trivially correct reference models for property tests.
//!
//! Each model trades speed and memory for being obviously right, so a
//! property test can compare the real, optimised structure against it.

use std::collections::HashSet;

/// What the replay model says about a full 64-bit sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayVerdict {
    /// New and inside (or ahead of) the window: accept.
    Accept,
    /// Seen before (RFC 4303 §3.4.3: a duplicate).
    Duplicate,
    /// At or behind the left edge of the window.
    TooOld,
    /// Sequence number 0, which no sender uses (RFC 4303 §3.3.3: the first
    /// packet is 1).
    Invalid,
}

/// Anti-replay reference (RFC 4303 §3.4.3) on full sequence numbers: a set
/// of every number accepted, the highest one and the window size.
///
/// A number is acceptable when it is not 0, has not been accepted before
/// and is greater than `highest - window` (that is, inside the window
/// whose right edge is `highest`, or beyond it). With replay protection
/// disabled (window 0), every number but 0 is acceptable, duplicates
/// included. Pass the *effective* window size of the implementation under
/// test (phalanx-sa rounds sizes up to a multiple of 64).
#[derive(Clone, Debug, Default)]
pub struct ReplayModel {
    seen: HashSet<u64>,
    highest: u64,
    window: u64,
}

impl ReplayModel {
    /// An empty model with `window` positions (0: replay check disabled).
    pub fn new(window: u64) -> ReplayModel {
        ReplayModel {
            seen: HashSet::new(),
            highest: 0,
            window,
        }
    }

    /// The verdict for `seq`, without recording it.
    pub fn check(&self, seq: u64) -> ReplayVerdict {
        if seq == 0 {
            return ReplayVerdict::Invalid;
        }
        if self.window == 0 || seq > self.highest {
            return ReplayVerdict::Accept;
        }
        if self.highest - seq >= self.window {
            return ReplayVerdict::TooOld;
        }
        if self.seen.contains(&seq) {
            ReplayVerdict::Duplicate
        } else {
            ReplayVerdict::Accept
        }
    }

    /// Checks `seq` and, when it is acceptable, records it.
    pub fn accept(&mut self, seq: u64) -> ReplayVerdict {
        let verdict = self.check(seq);
        if verdict == ReplayVerdict::Accept {
            self.seen.insert(seq);
            self.highest = self.highest.max(seq);
        }
        verdict
    }

    /// The highest number accepted so far (0 before the first).
    pub fn highest(&self) -> u64 {
        self.highest
    }

    /// The window size.
    pub fn window(&self) -> u64 {
        self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReplayVerdict::*;

    #[test]
    fn window_edges() {
        let mut m = ReplayModel::new(64);
        assert_eq!(m.accept(0), Invalid);
        assert_eq!(m.accept(100), Accept);
        assert_eq!(m.accept(100), Duplicate);
        // A 64-wide window ending at 100 covers 37..=100.
        assert_eq!(m.accept(36), TooOld);
        assert_eq!(m.check(37), Accept);
        assert_eq!(m.accept(99), Accept);
        assert_eq!(m.accept(99), Duplicate);
        assert_eq!(m.accept(1 << 40), Accept);
        assert_eq!(m.check(100), TooOld);
        assert_eq!(m.highest(), 1 << 40);
    }

    #[test]
    fn disabled_window_accepts_all_but_zero() {
        let mut m = ReplayModel::new(0);
        assert_eq!(m.accept(5), Accept);
        assert_eq!(m.accept(5), Accept);
        assert_eq!(m.accept(1), Accept);
        assert_eq!(m.accept(0), Invalid);
    }
}
