//! The receiver's anti-replay window (RFC 4303 §3.4.3 and Appendix A;
//! RFC 4302 §3.4.3 for AH).
//!
//! Processing is split in two, around the integrity check: [`check`]
//! (before the ICV, side-effect free: infers the full 64-bit number with ESN
//! and rejects duplicates and too-old numbers cheaply) and [`commit`] (after
//! the ICV verified: checks again, because another packet may have been
//! committed while the crypto ran, then marks the number and slides the
//! window). RFC 4303 §3.4.3: "the receive window is updated only if the
//! integrity verification succeeds".
//!
//! The bitmap is a ring of 64-bit words indexed by `seq / 64` modulo its
//! (power-of-two) length, as in RFC 6479: sliding clears only the words it
//! passes over, so it costs O(words shifted), not O(window).
//!
//! [`check`]: ReplayWindow::check
//! [`commit`]: ReplayWindow::commit

use crate::limits::{
    ESN_INFERENCE_WINDOW_DISABLED, REPLAY_WINDOW_MAX, REPLAY_WINDOW_MIN, REPLAY_WORD_BITS,
    SEQ_MAX_32,
};
use core::fmt;

/// Why a sequence number was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReplayError {
    /// The number was already received (RFC 4303 §3.4.3: a duplicate).
    Duplicate,
    /// The number lies to the left of the window (RFC 4303 §3.4.3).
    TooOld,
    /// The number can never be valid: 0, past 2^32 - 1 without ESN, or past
    /// 2^64 - 1 with ESN.
    Invalid,
    /// A window size outside 32..=65536 (and not 0 for "disabled").
    InvalidWindowSize,
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReplayError::Duplicate => "duplicate sequence number",
            ReplayError::TooOld => "sequence number left of the replay window",
            ReplayError::Invalid => "sequence number never valid",
            ReplayError::InvalidWindowSize => "replay window size out of range",
        })
    }
}

impl std::error::Error for ReplayError {}

/// The state of a window in a form independent of its in-memory layout, to
/// carry it to another node (cluster takeover) or store it.
///
/// Bit `i` of `seen` (word `i / 64`, bit `i % 64`) tells whether number
/// `highest - i` was received, for `i` in `0..window`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReplaySnapshot {
    /// Effective window size in packets (0 when anti-replay is disabled).
    pub window: u32,
    /// Whether the SA uses ESN.
    pub esn: bool,
    /// Highest number committed (0 when none was).
    pub highest: u64,
    /// Received-bits, newest first.
    pub seen: Vec<u64>,
}

/// Anti-replay window of one inbound SA.
#[derive(Clone, Debug)]
pub struct ReplayWindow {
    /// Effective size in packets (a multiple of 64); 0 means disabled.
    size: u64,
    /// Whether the 64-bit ESN space is used (RFC 4303 §2.2.1).
    esn: bool,
    /// Highest committed number, 0 before the first packet.
    highest: u64,
    /// Ring of bitmap words; its length is a power of two above
    /// `size / 64`, so the `size` numbers of the window never alias (one
    /// unused word when disabled, so indexing needs no special case).
    ring: Box<[u64]>,
}

impl ReplayWindow {
    /// A window of at least `size` packets (rounded up to a multiple of 64;
    /// RFC 4303 §3.4.3 requires at least 32). `size` 0 disables anti-replay
    /// (RFC 4303 §3.4.3 lets the receiver do so), see [`disabled`].
    ///
    /// [`disabled`]: ReplayWindow::disabled
    pub fn new(size: u32, esn: bool) -> Result<ReplayWindow, ReplayError> {
        if size == 0 {
            return Ok(ReplayWindow {
                size: 0,
                esn,
                highest: 0,
                ring: Box::new([0]),
            });
        }
        if !(REPLAY_WINDOW_MIN..=REPLAY_WINDOW_MAX).contains(&size) {
            return Err(ReplayError::InvalidWindowSize);
        }
        let words = size.div_ceil(REPLAY_WORD_BITS);
        let ring_words = (words as usize + 1).next_power_of_two();
        Ok(ReplayWindow {
            size: u64::from(words * REPLAY_WORD_BITS),
            esn,
            highest: 0,
            ring: vec![0; ring_words].into_boxed_slice(),
        })
    }

    /// A window that accepts every number but 0 (anti-replay disabled,
    /// RFC 4303 §3.4.3), without ESN.
    pub fn disabled() -> ReplayWindow {
        ReplayWindow {
            size: 0,
            esn: false,
            highest: 0,
            ring: Box::new([0]),
        }
    }

    /// Effective window size in packets; 0 when disabled.
    pub fn size(&self) -> u32 {
        // At most REPLAY_WINDOW_MAX, which fits.
        self.size as u32
    }

    /// Whether anti-replay checking is off.
    pub fn is_disabled(&self) -> bool {
        self.size == 0
    }

    /// Whether the SA uses ESN.
    pub fn esn(&self) -> bool {
        self.esn
    }

    /// Highest number committed so far (0 before the first packet).
    pub fn highest(&self) -> u64 {
        self.highest
    }

    /// Pre-check a received sequence number field before the ICV is
    /// verified (RFC 4303 §3.4.3). Returns the full sequence number: with
    /// ESN the high-order 32 bits are inferred (App. A2.2). Changes nothing.
    #[inline]
    pub fn check(&self, seq_low: u32) -> Result<u64, ReplayError> {
        let seq = self.infer(seq_low)?;
        self.verdict(seq)?;
        Ok(seq)
    }

    /// Record `seq` (as returned by [`check`](Self::check)) after its packet
    /// authenticated; checks again first, since another packet with the
    /// same number may have been committed meanwhile.
    pub fn commit(&mut self, seq: u64) -> Result<(), ReplayError> {
        if seq == 0 || (!self.esn && seq > SEQ_MAX_32) {
            return Err(ReplayError::Invalid);
        }
        self.verdict(seq)?;
        if seq > self.highest {
            self.slide_to(seq);
        }
        if !self.is_disabled() {
            self.set_bit(seq);
        }
        Ok(())
    }

    /// The full 64-bit number for the received low-order 32 bits.
    ///
    /// Without ESN it is the field itself. With ESN, RFC 4303 App. A2.2
    /// (T = highest, Tl/Th its low/high halves, W the window):
    /// - Case A, Tl >= W - 1 (window inside one 2^32 subspace):
    ///   Seql >= Tl - W + 1 → Seqh = Th, else Seqh = Th + 1.
    /// - Case B, Tl < W - 1 (window spans two subspaces):
    ///   Seql >= Tl - W + 1 (mod 2^32) → Seqh = Th - 1, else Seqh = Th.
    ///
    /// That is the unique full number in [T - W + 1, T + 2^32 - W].
    fn infer(&self, seq_low: u32) -> Result<u64, ReplayError> {
        if !self.esn {
            return if seq_low == 0 {
                Err(ReplayError::Invalid)
            } else {
                Ok(u64::from(seq_low))
            };
        }
        let window = if self.is_disabled() {
            ESN_INFERENCE_WINDOW_DISABLED
        } else {
            self.size
        };
        let tl = u64::from(self.highest as u32);
        let th = self.highest >> 32;
        let seql = u64::from(seq_low);
        let seqh = if tl + 1 >= window {
            // Case A; `Seql >= Tl - W + 1` without going below zero.
            if seql + window > tl {
                th
            } else if th == u64::from(u32::MAX) {
                // Th + 1 would be past 2^64 - 1: no sender can reach it.
                return Err(ReplayError::Invalid);
            } else {
                th + 1
            }
        } else {
            // Case B: Tl - W + 1 wraps below zero, into the previous
            // subspace.
            let lower_edge = (tl + (1 << 32) + 1 - window) & u64::from(u32::MAX);
            if seql >= lower_edge {
                if th == 0 {
                    // Before the start of the space: older than anything.
                    return Err(ReplayError::TooOld);
                }
                th - 1
            } else {
                th
            }
        };
        let seq = (seqh << 32) | seql;
        if seq == 0 {
            return Err(ReplayError::Invalid);
        }
        Ok(seq)
    }

    /// Duplicate / too-old / new verdict for a full number.
    #[inline]
    fn verdict(&self, seq: u64) -> Result<(), ReplayError> {
        if seq > self.highest || self.is_disabled() {
            return Ok(());
        }
        if self.highest - seq >= self.size {
            return Err(ReplayError::TooOld);
        }
        if self.bit(seq) {
            return Err(ReplayError::Duplicate);
        }
        Ok(())
    }

    /// Make `new_highest` (> highest) the right edge: zero the ring words
    /// that the window slides onto. Invariant kept: in the word holding
    /// `highest`, no bit above it is set (each word is zeroed when the
    /// right edge enters it, and only numbers <= highest are marked).
    fn slide_to(&mut self, new_highest: u64) {
        if !self.is_disabled() {
            let old_word = self.highest / 64;
            let new_word = new_highest / 64;
            let count = (new_word - old_word).min(self.ring.len() as u64);
            for step in 1..=count {
                let index = self.ring_index(old_word + step);
                self.ring[index] = 0;
            }
        }
        self.highest = new_highest;
    }

    #[inline(always)]
    fn ring_index(&self, word: u64) -> usize {
        // The ring length is a power of two.
        (word & (self.ring.len() as u64 - 1)) as usize
    }

    #[inline(always)]
    fn bit(&self, seq: u64) -> bool {
        self.ring[self.ring_index(seq / 64)] & (1 << (seq % 64)) != 0
    }

    #[inline(always)]
    fn set_bit(&mut self, seq: u64) {
        let index = self.ring_index(seq / 64);
        self.ring[index] |= 1 << (seq % 64);
    }

    /// Export the state, independent of the ring layout.
    pub fn snapshot(&self) -> ReplaySnapshot {
        let mut seen = vec![0u64; (self.size / 64) as usize];
        for offset in 0..self.size.min(self.highest) {
            if self.bit(self.highest - offset) {
                seen[(offset / 64) as usize] |= 1 << (offset % 64);
            }
        }
        ReplaySnapshot {
            window: self.size(),
            esn: self.esn,
            highest: self.highest,
            seen,
        }
    }

    /// Rebuild a window from a [`snapshot`](Self::snapshot). Fails on a
    /// window size out of range, a `highest` past the sequence space, or
    /// more `seen` words than the window holds.
    pub fn restore(snapshot: &ReplaySnapshot) -> Result<ReplayWindow, ReplayError> {
        let mut window = ReplayWindow::new(snapshot.window, snapshot.esn)?;
        if !snapshot.esn && snapshot.highest > SEQ_MAX_32 {
            return Err(ReplayError::Invalid);
        }
        if snapshot.seen.len() as u64 > window.size / 64 {
            return Err(ReplayError::InvalidWindowSize);
        }
        window.highest = snapshot.highest;
        for (word_index, word) in snapshot.seen.iter().enumerate() {
            for bit in 0..64u64 {
                let offset = word_index as u64 * 64 + bit;
                if word & (1 << bit) != 0 && offset < window.highest {
                    window.set_bit(window.highest - offset);
                }
            }
        }
        Ok(window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_validated_and_rounded_up() {
        assert_eq!(
            ReplayWindow::new(31, false).err(),
            Some(ReplayError::InvalidWindowSize)
        );
        assert_eq!(
            ReplayWindow::new(65537, false).err(),
            Some(ReplayError::InvalidWindowSize)
        );
        let sizes = [(32, 64), (64, 64), (65, 128), (1000, 1024), (65536, 65536)];
        for (asked, got) in sizes {
            assert_eq!(
                ReplayWindow::new(asked, true).expect("valid size").size(),
                got
            );
        }
        assert!(ReplayWindow::new(0, false).expect("disabled").is_disabled());
    }

    #[test]
    fn check_has_no_side_effect_and_commit_rechecks() {
        let mut w = ReplayWindow::new(64, false).expect("valid");
        assert_eq!(w.check(5), Ok(5));
        assert_eq!(w.check(5), Ok(5));
        assert_eq!(w.highest(), 0);
        assert_eq!(w.commit(5), Ok(()));
        assert_eq!(w.commit(5), Err(ReplayError::Duplicate));
        assert_eq!(w.check(5), Err(ReplayError::Duplicate));
        assert_eq!(w.commit(0), Err(ReplayError::Invalid));
        assert_eq!(w.commit(1 << 32), Err(ReplayError::Invalid));
    }

    #[test]
    fn commit_of_a_number_that_went_stale_meanwhile_is_too_old() {
        let mut w = ReplayWindow::new(64, false).expect("valid");
        assert_eq!(w.check(10), Ok(10));
        w.commit(200).expect("new");
        assert_eq!(w.commit(10), Err(ReplayError::TooOld));
    }

    #[test]
    fn disabled_window_accepts_repeats_but_not_zero() {
        let mut w = ReplayWindow::disabled();
        for _ in 0..3 {
            assert_eq!(w.check(7), Ok(7));
            assert_eq!(w.commit(7), Ok(()));
        }
        assert_eq!(w.check(0), Err(ReplayError::Invalid));
        assert_eq!(w.highest(), 7);
        let mut esn = ReplayWindow::new(0, true).expect("disabled");
        esn.commit(0x1_0000_0005).expect("any number");
        assert_eq!(esn.check(3), Ok(0x1_0000_0003));
        assert_eq!(esn.check(0xffff_fff0), Ok(0xffff_fff0));
    }

    #[test]
    fn sliding_far_clears_the_whole_ring() {
        let mut w = ReplayWindow::new(64, false).expect("valid");
        for seq in 1..=64 {
            w.commit(seq).expect("new");
        }
        w.commit(1_000_000).expect("new");
        for seq in (1_000_000 - 63)..1_000_000 {
            assert_eq!(w.check(seq as u32), Ok(seq), "stale bit for {seq}");
        }
    }

    #[test]
    fn snapshot_round_trips_and_is_layout_independent() {
        let mut w = ReplayWindow::new(128, true).expect("valid");
        for seq in [1u64, 3, 64, 65, 130, 129, 200, 0x1_0000_0001] {
            let _ = w.commit(seq);
        }
        let snap = w.snapshot();
        assert_eq!(snap.highest, 0x1_0000_0001);
        assert_eq!(snap.seen[0] & 1, 1);
        let restored = ReplayWindow::restore(&snap).expect("valid snapshot");
        assert_eq!(restored.snapshot(), snap);
        for low in [1u32, 2, 0xffff_fff0, 0xffff_ffff] {
            assert_eq!(restored.check(low), w.check(low));
        }
        let bad = ReplaySnapshot {
            window: 64,
            esn: false,
            highest: 1 << 32,
            seen: vec![],
        };
        assert_eq!(
            ReplayWindow::restore(&bad).err(),
            Some(ReplayError::Invalid)
        );
        let long = ReplaySnapshot {
            window: 64,
            esn: false,
            highest: 9,
            seen: vec![1, 1],
        };
        assert_eq!(
            ReplayWindow::restore(&long).err(),
            Some(ReplayError::InvalidWindowSize)
        );
    }
}
