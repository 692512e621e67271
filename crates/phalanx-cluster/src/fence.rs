//! Fencing a node that stopped sending heartbeats: it drops its own
//! inbound share for the arrival times another node may have taken it
//! over.
//!
//! A node that stalls (its process stopped, its CPU taken away) sends
//! no heartbeat; after `suspect_after` every peer that is running takes
//! its inbound share over (`InboundDispatcher`). When it runs again it
//! finds its ring full of frames that arrived meanwhile, still owned by
//! it in its own view, and would process each one a second time: the
//! cluster as a whole would accept those sequence numbers twice. Nothing
//! it receives after the stall can tell it in time what the others did
//! (their messages queue behind the same stall), so it judges from what
//! it sent:
//!
//! - A peer suspects it at the earliest `suspect_after` after it heard
//!   its last heartbeat, so after `S + suspect_after`, `S` the last
//!   heartbeat sent before the gap. The suspecter takes over frames that
//!   *arrived* after that ([`InboundDispatcher::owner_at`]).
//! - The suspecter hands the share back when it has heard
//!   `REJOIN_HEARTBEATS` heartbeats again, the last of them sent at
//!   `S'`; it hears it before `S' + suspect_after` (the cluster link's
//!   delay is far below that).
//!
//! So a gap longer than `suspect_after` between two heartbeats sent
//! fences the arrivals in `[S + suspect_after, S' + suspect_after)`, and
//! while no heartbeat has been sent for `suspect_after`, every arrival
//! after the last one's `+ suspect_after` is fenced (the data path may
//! run while the cluster thread is stopped). A fenced packet is dropped
//! and counted (`inbound_fenced`) and its number marked in the replay
//! window like another node's. If nobody took it over (no peer was
//! running), it is lost, never accepted twice.
//!
//! Not covered: heartbeats lost on the link while this node sends them
//! (a peer then suspects it without a gap here).
//!
//! The cluster thread writes, the data-plane threads read, without
//! locks: each spell's `from` is stored before its `until`, and both
//! before `open_from` (release); a reader loads `open_from` first
//! (acquire). A reader that sees the old `open_from` fences every
//! arrival after the gap's start anyway; every torn read of a spell
//! fences more, never less, or nothing that `open_from` does not.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::limits::REJOIN_HEARTBEATS;

/// Past gaps remembered: frames older than the fourth last gap are long
/// out of every ring.
const SPELLS: usize = 4;

/// Nanoseconds since the epoch of "never" (no heartbeat sent yet).
const NEVER: u64 = u64::MAX;

/// One fenced interval of arrival times, `[from, until)` in nanoseconds
/// since the fence's epoch.
#[derive(Debug)]
struct Spell {
    from: AtomicU64,
    until: AtomicU64,
}

/// The arrival times at which this node must not process its own inbound
/// share. See the module docs.
#[derive(Debug)]
pub struct Fence {
    epoch: Instant,
    /// Every arrival from here on ([`NEVER`]: none yet).
    open_from: AtomicU64,
    spells: [Spell; SPELLS],
}

impl Fence {
    fn new(epoch: Instant) -> Fence {
        Fence {
            epoch,
            open_from: AtomicU64::new(NEVER),
            spells: std::array::from_fn(|_| Spell {
                from: AtomicU64::new(NEVER),
                until: AtomicU64::new(0),
            }),
        }
    }

    fn nanos(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(NEVER - 1)
    }

    /// Whether a packet that arrived at `arrival` may have been taken
    /// over by another node while this one did not send heartbeats.
    #[inline]
    pub fn fenced(&self, arrival: Instant) -> bool {
        let open_from = self.open_from.load(Ordering::Acquire);
        let at = self.nanos(arrival);
        at >= open_from
            || self.spells.iter().any(|s| {
                at >= s.from.load(Ordering::Relaxed) && at < s.until.load(Ordering::Relaxed)
            })
    }
}

/// The cluster thread's side: records each heartbeat sent.
#[derive(Debug)]
pub(crate) struct FenceWriter {
    fence: Arc<Fence>,
    suspect_after: Duration,
    last_sent: Option<Instant>,
    next: usize,
    /// The spell whose end is not known yet, and the heartbeats sent
    /// since its gap.
    open: Option<(usize, u32)>,
    /// Gaps found (for the status).
    gaps: u64,
}

impl FenceWriter {
    pub(crate) fn new(epoch: Instant, suspect_after: Duration) -> FenceWriter {
        FenceWriter {
            fence: Arc::new(Fence::new(epoch)),
            suspect_after,
            last_sent: None,
            next: 0,
            open: None,
            gaps: 0,
        }
    }

    /// The fence the data path reads.
    pub(crate) fn fence(&self) -> &Arc<Fence> {
        &self.fence
    }

    /// Gaps longer than `suspect_after` between two heartbeats sent.
    pub(crate) fn gaps(&self) -> u64 {
        self.gaps
    }

    /// A heartbeat was sent at `now`.
    pub(crate) fn sent(&mut self, now: Instant) {
        let fence = &*self.fence;
        let gap = self
            .last_sent
            .filter(|&prev| now.saturating_duration_since(prev) > self.suspect_after);
        if let Some(prev) = gap {
            self.gaps += 1;
            match &mut self.open {
                // Silent again before the peers could hand back: the same
                // spell goes on.
                Some((_, heard)) => *heard = 1,
                None => {
                    let spell = &fence.spells[self.next];
                    spell
                        .from
                        .store(fence.nanos(prev + self.suspect_after), Ordering::Relaxed);
                    spell.until.store(NEVER, Ordering::Relaxed);
                    self.open = Some((self.next, 1));
                    self.next = (self.next + 1) % SPELLS;
                }
            }
        } else if let Some((slot, heard)) = &mut self.open {
            *heard += 1;
            if *heard >= REJOIN_HEARTBEATS {
                fence.spells[*slot]
                    .until
                    .store(fence.nanos(now + self.suspect_after), Ordering::Relaxed);
                self.open = None;
            }
        }
        self.last_sent = Some(self.last_sent.map_or(now, |prev| prev.max(now)));
        fence
            .open_from
            .store(fence.nanos(now + self.suspect_after), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn nothing_is_fenced_while_heartbeats_go_out() {
        let t0 = Instant::now();
        let mut w = FenceWriter::new(t0, 30 * MS);
        assert!(!w.fence().fenced(t0 + 100 * MS), "no heartbeat yet");
        for i in 0..20 {
            w.sent(t0 + i * 5 * MS);
        }
        let f = w.fence();
        assert!(!f.fenced(t0), "before the heartbeats");
        assert!(!f.fenced(t0 + 95 * MS + 29 * MS));
        assert!(f.fenced(t0 + 95 * MS + 30 * MS), "no heartbeat for 30 ms");
        assert_eq!(w.gaps(), 0);
    }

    #[test]
    fn a_gap_fences_from_its_start_to_the_third_heartbeat_after() {
        let t0 = Instant::now();
        let mut w = FenceWriter::new(t0, 30 * MS);
        w.sent(t0);
        w.sent(t0 + 5 * MS);
        // Stopped for 100 ms.
        w.sent(t0 + 105 * MS);
        let f = Arc::clone(w.fence());
        assert!(!f.fenced(t0 + 34 * MS), "the peers still heard it");
        assert!(f.fenced(t0 + 35 * MS), "a peer may have suspected it");
        assert!(f.fenced(t0 + 104 * MS), "the backlog of the stall");
        assert!(f.fenced(t0 + 200 * MS), "the end is not known yet");
        w.sent(t0 + 110 * MS);
        w.sent(t0 + 115 * MS);
        w.sent(t0 + 120 * MS);
        assert!(
            f.fenced(t0 + 144 * MS),
            "peers hand back before the third + 30 ms"
        );
        assert!(!f.fenced(t0 + 145 * MS));
        assert_eq!(w.gaps(), 1);
    }

    #[test]
    fn a_second_gap_before_the_hand_back_extends_the_spell() {
        let t0 = Instant::now();
        let mut w = FenceWriter::new(t0, 30 * MS);
        w.sent(t0);
        w.sent(t0 + 100 * MS);
        w.sent(t0 + 105 * MS);
        w.sent(t0 + 200 * MS);
        w.sent(t0 + 205 * MS);
        let f = Arc::clone(w.fence());
        assert!(f.fenced(t0 + 150 * MS), "the first spell never ended");
        w.sent(t0 + 210 * MS);
        w.sent(t0 + 215 * MS);
        assert!(f.fenced(t0 + 239 * MS) && !f.fenced(t0 + 240 * MS));
        assert!(f.fenced(t0 + 30 * MS) && !f.fenced(t0 + 29 * MS));
    }

    #[test]
    fn old_spells_are_reused() {
        let t0 = Instant::now();
        let mut w = FenceWriter::new(t0, 30 * MS);
        let mut t = t0;
        w.sent(t);
        for _ in 0..(SPELLS + 2) {
            t += 100 * MS;
            for k in 0..3 {
                w.sent(t + k * 5 * MS);
            }
        }
        let f = w.fence();
        assert!(f.fenced(t - 20 * MS), "the last gap");
        assert!(!f.fenced(t0 + 30 * MS), "the first gap is forgotten");
        assert_eq!(w.gaps(), SPELLS as u64 + 2);
    }
}
