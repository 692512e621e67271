//! The outbound sequence number counter (RFC 4303 §3.3.3, RFC 4302 §3.3.2).
//!
//! The counter hands out 1, 2, 3, ... and never the same number twice, even
//! to threads racing on one SA; it never cycles: after the last number of
//! the space (2^32 - 1, or 2^64 - 1 with ESN) it is exhausted for good and
//! the SA must be rekeyed. In a cluster each node sends from a
//! [`SequenceLease`], a block of the space granted to it, and jumps forward
//! with [`SequenceCounter::advance_to`] at takeover.

use crate::limits::{SEQ_FIRST, SEQ_MAX_32, SEQ_MAX_64};
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

/// The stored "next" value once no number is left. 0 is never a valid
/// sequence number (RFC 4303 §3.3.3: the first packet carries 1).
const EXHAUSTED: u64 = 0;

/// Why no sequence number was handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SequenceError {
    /// The sequence space of the SA is used up; it must be rekeyed
    /// (RFC 4303 §3.3.3: the counter must not cycle).
    Exhausted,
    /// The lease this counter sends from is used up; the cluster must grant
    /// a new one before this node sends again.
    LeaseExhausted {
        /// Last number of the spent lease.
        end: u64,
    },
    /// A lease that is empty, starts at 0 or reaches past the sequence
    /// space.
    InvalidLease,
}

impl fmt::Display for SequenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SequenceError::Exhausted => f.write_str("sequence number space exhausted"),
            SequenceError::LeaseExhausted { end } => {
                write!(f, "sequence number lease ending at {end} exhausted")
            }
            SequenceError::InvalidLease => f.write_str("invalid sequence number lease"),
        }
    }
}

impl std::error::Error for SequenceError {}

/// A block of sequence numbers `start..=end` a node may send from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SequenceLease {
    /// First number of the block (at least 1).
    pub start: u64,
    /// Last number of the block (inclusive).
    pub end: u64,
}

impl SequenceLease {
    /// How many numbers the lease holds (0 when `start > end`).
    pub fn len(&self) -> u64 {
        if self.start > self.end {
            return 0;
        }
        (self.end - self.start).saturating_add(1)
    }

    /// True when the lease holds no number.
    pub fn is_empty(&self) -> bool {
        self.start > self.end
    }
}

/// Last number of the sequence space with or without ESN.
fn space_last(esn: bool) -> u64 {
    if esn {
        SEQ_MAX_64
    } else {
        SEQ_MAX_32
    }
}

/// Lock-free outbound sequence counter.
///
/// Layout: alone on a cache line, because every packet of the SA writes it
/// and it may be shared between the cores sending on one SA.
#[repr(align(64))]
#[derive(Debug)]
pub struct SequenceCounter {
    /// The number the next call returns, or [`EXHAUSTED`].
    next: AtomicU64,
    /// Last number this counter may return (lease end or end of space).
    last: u64,
    /// Whether the SA uses ESN (64-bit space).
    esn: bool,
}

const _: () = assert!(core::mem::size_of::<SequenceCounter>() == 64);

impl SequenceCounter {
    /// A counter over the whole space: 1 ..= 2^32 - 1, or 2^64 - 1 with ESN.
    pub fn new(esn: bool) -> SequenceCounter {
        SequenceCounter {
            next: AtomicU64::new(SEQ_FIRST),
            last: space_last(esn),
            esn,
        }
    }

    /// A counter that sends only `lease.start ..= lease.end`. Fails if the
    /// lease is empty, starts at 0, or ends past the space of `esn`.
    pub fn from_lease(lease: SequenceLease, esn: bool) -> Result<SequenceCounter, SequenceError> {
        if lease.start < SEQ_FIRST || lease.is_empty() || lease.end > space_last(esn) {
            return Err(SequenceError::InvalidLease);
        }
        Ok(SequenceCounter {
            next: AtomicU64::new(lease.start),
            last: lease.end,
            esn,
        })
    }

    /// The next sequence number; each number is returned at most once,
    /// whatever the number of callers (RFC 4303 §3.3.3).
    #[inline]
    pub fn next(&self) -> Result<u64, SequenceError> {
        let mut current = self.next.load(Ordering::Relaxed);
        loop {
            if current == EXHAUSTED {
                return Err(self.exhausted_error());
            }
            // Handing out the last number leaves the counter exhausted; this
            // also avoids the overflow at 2^64 - 1.
            let following = if current >= self.last {
                EXHAUSTED
            } else {
                current + 1
            };
            match self.next.compare_exchange_weak(
                current,
                following,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(current),
                Err(actual) => current = actual,
            }
        }
    }

    /// The number [`next`](Self::next) would return now, or `None` when
    /// exhausted.
    pub fn peek_next(&self) -> Option<u64> {
        match self.next.load(Ordering::Relaxed) {
            EXHAUSTED => None,
            n => Some(n),
        }
    }

    /// Jump forward so that the next number is at least `min_next`; never
    /// moves back. Jumping past the last number exhausts the counter (a
    /// node taking over must not reuse what another node may have sent).
    pub fn advance_to(&self, min_next: u64) {
        if min_next == 0 {
            // Every counter is already past 0.
            return;
        }
        let target = if min_next > self.last {
            EXHAUSTED
        } else {
            min_next
        };
        // `fetch_update` returns Err when the closure declines: nothing to do.
        let _ = self
            .next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |current| {
                let forward = current != EXHAUSTED && (target == EXHAUSTED || target > current);
                forward.then_some(target)
            });
    }

    /// Whether no number is left.
    pub fn is_exhausted(&self) -> bool {
        self.next.load(Ordering::Relaxed) == EXHAUSTED
    }

    /// The last number this counter may return.
    pub fn last(&self) -> u64 {
        self.last
    }

    /// Whether the counter runs over the 64-bit ESN space.
    pub fn esn(&self) -> bool {
        self.esn
    }

    fn exhausted_error(&self) -> SequenceError {
        if self.last == space_last(self.esn) {
            SequenceError::Exhausted
        } else {
            SequenceError::LeaseExhausted { end: self.last }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn counts_from_one() {
        let c = SequenceCounter::new(false);
        assert_eq!(c.peek_next(), Some(1));
        assert_eq!(c.next(), Ok(1));
        assert_eq!(c.next(), Ok(2));
        assert_eq!(c.next(), Ok(3));
        assert_eq!(c.peek_next(), Some(4));
    }

    #[test]
    fn exhausts_at_2_pow_32_minus_1_without_esn_and_stays_exhausted() {
        let c = SequenceCounter::new(false);
        c.advance_to(0xffff_fffe);
        assert_eq!(c.next(), Ok(0xffff_fffe));
        assert_eq!(c.next(), Ok(0xffff_ffff));
        assert_eq!(c.next(), Err(SequenceError::Exhausted));
        assert_eq!(c.next(), Err(SequenceError::Exhausted));
        assert!(c.is_exhausted());
        assert_eq!(c.peek_next(), None);
        c.advance_to(5);
        assert_eq!(c.next(), Err(SequenceError::Exhausted));
    }

    #[test]
    fn esn_continues_past_2_pow_32_and_ends_at_2_pow_64_minus_1() {
        let c = SequenceCounter::new(true);
        c.advance_to(0xffff_ffff);
        assert_eq!(c.next(), Ok(0xffff_ffff));
        assert_eq!(c.next(), Ok(0x1_0000_0000));
        c.advance_to(u64::MAX);
        assert_eq!(c.next(), Ok(u64::MAX));
        assert_eq!(c.next(), Err(SequenceError::Exhausted));
    }

    #[test]
    fn advance_never_moves_back() {
        let c = SequenceCounter::new(false);
        c.advance_to(100);
        c.advance_to(50);
        c.advance_to(0);
        assert_eq!(c.next(), Ok(100));
        c.advance_to(1 << 40);
        assert_eq!(c.next(), Err(SequenceError::Exhausted));
    }

    #[test]
    fn leases_bound_the_counter() {
        let lease = SequenceLease {
            start: 1001,
            end: 1003,
        };
        assert_eq!(lease.len(), 3);
        let c = SequenceCounter::from_lease(lease, false).expect("valid lease");
        assert_eq!(c.next(), Ok(1001));
        c.advance_to(1003);
        assert_eq!(c.next(), Ok(1003));
        assert_eq!(c.next(), Err(SequenceError::LeaseExhausted { end: 1003 }));
        let bad = |start, end, esn| SequenceCounter::from_lease(SequenceLease { start, end }, esn);
        assert!(matches!(bad(0, 5, false), Err(SequenceError::InvalidLease)));
        assert!(matches!(bad(6, 5, false), Err(SequenceError::InvalidLease)));
        assert!(matches!(
            bad(1, 1 << 32, false),
            Err(SequenceError::InvalidLease)
        ));
        assert!(bad(1, 1 << 32, true).is_ok());
        let full = SequenceCounter::from_lease(
            SequenceLease {
                start: 7,
                end: u32::MAX.into(),
            },
            false,
        )
        .expect("valid lease");
        full.advance_to(u32::MAX.into());
        assert_eq!(full.next(), Ok(u32::MAX.into()));
        assert_eq!(full.next(), Err(SequenceError::Exhausted));
    }

    #[test]
    fn no_number_is_returned_twice_across_threads() {
        const THREADS: usize = 4;
        const LAST: u64 = 200_000;
        let c = Arc::new(
            SequenceCounter::from_lease(
                SequenceLease {
                    start: 1,
                    end: LAST,
                },
                false,
            )
            .expect("valid lease"),
        );
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let c = Arc::clone(&c);
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    while let Ok(n) = c.next() {
                        got.push(n);
                    }
                    got
                })
            })
            .collect();
        let mut all: Vec<u64> = handles
            .into_iter()
            .flat_map(|h| h.join().expect("thread panicked"))
            .collect();
        all.sort_unstable();
        assert_eq!(
            all.len() as u64,
            LAST,
            "every number handed out exactly once"
        );
        assert!(all.iter().copied().eq(1..=LAST));
    }

    #[test]
    fn racing_threads_at_the_end_of_the_space_never_wrap() {
        let c = Arc::new(SequenceCounter::new(true));
        c.advance_to(u64::MAX - 999);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let c = Arc::clone(&c);
                std::thread::spawn(move || {
                    (0..1000).filter_map(|_| c.next().ok()).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<u64> = handles
            .into_iter()
            .flat_map(|h| h.join().expect("thread panicked"))
            .collect();
        all.sort_unstable();
        assert!(all.iter().copied().eq((u64::MAX - 999)..=u64::MAX));
    }
}
