//! Worker load: how much of its wall time a worker spent processing, over
//! the last second and since it started.
//!
//! A worker publishes its counters every
//! [`STATS_INTERVAL_MS`](crate::limits::STATS_INTERVAL_MS); a share taken
//! over one such interval reads 0 as soon as traffic pauses for 100 ms,
//! which is what an operator who looks a moment after a burst sees. So
//! each publication also records (wall time, busy time) in a small ring,
//! and the one-second share is the busy time between now and the newest
//! recorded publication at least [`LOAD_WINDOW`] old. Plain integer
//! arithmetic, no clock: the worker passes the times in.

use std::time::Duration;

/// The span of the sliding load window.
pub const LOAD_WINDOW: Duration = Duration::from_secs(1);

/// Publications the window remembers. They come at least
/// `STATS_INTERVAL_MS` (100 ms) apart, so 16 always reach a second back.
const SAMPLES: usize = 16;

/// One in a million: loads travel as integral parts per million so the
/// stats stay `Eq`.
pub const PPM: u32 = 1_000_000;

/// Cumulative wall and busy time at one publication.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Sample {
    wall_ns: u64,
    busy_ns: u64,
}

/// The last 16 publications of one worker, oldest overwritten.
#[derive(Clone, Debug)]
pub struct LoadWindow {
    samples: [Sample; SAMPLES],
    /// Samples recorded so far, at most `SAMPLES`.
    len: usize,
    /// Where the next sample goes.
    next: usize,
}

impl Default for LoadWindow {
    fn default() -> Self {
        LoadWindow::new()
    }
}

impl LoadWindow {
    /// A window whose first sample is the worker's start (0 busy at 0).
    pub fn new() -> LoadWindow {
        LoadWindow {
            samples: [Sample::default(); SAMPLES],
            len: 1,
            next: 1,
        }
    }

    /// Records a publication at `wall_ns` after the start with `busy_ns`
    /// spent processing since the start, and returns the busy share since
    /// the newest earlier sample at least [`LOAD_WINDOW`] old (or the
    /// oldest one, while the worker is younger than the window), in
    /// parts per million.
    pub fn record(&mut self, wall_ns: u64, busy_ns: u64) -> u32 {
        let base = self.base(wall_ns);
        self.samples[self.next] = Sample { wall_ns, busy_ns };
        self.next = (self.next + 1) % SAMPLES;
        self.len = (self.len + 1).min(SAMPLES);
        share_ppm(
            busy_ns.saturating_sub(base.busy_ns),
            wall_ns.saturating_sub(base.wall_ns),
        )
    }

    /// The sample the window starts at for a publication at `wall_ns`.
    fn base(&self, wall_ns: u64) -> Sample {
        let window = u64::try_from(LOAD_WINDOW.as_nanos()).unwrap_or(u64::MAX);
        let cutoff = wall_ns.saturating_sub(window);
        let recorded = self.recorded();
        let old_enough = recorded.clone().filter(|s| s.wall_ns <= cutoff);
        let oldest = recorded.min_by_key(|s| s.wall_ns).unwrap_or_default();
        old_enough.max_by_key(|s| s.wall_ns).unwrap_or(oldest)
    }

    /// The samples recorded, in no particular order.
    fn recorded(&self) -> impl Iterator<Item = Sample> + Clone + '_ {
        self.samples[..self.len].iter().copied()
    }
}

/// `busy / wall` in parts per million, clamped to `0..=PPM`; 0 when no
/// wall time passed.
pub fn share_ppm(busy_ns: u64, wall_ns: u64) -> u32 {
    if wall_ns == 0 {
        return 0;
    }
    let ppm = u128::from(busy_ns) * u128::from(PPM) / u128::from(wall_ns);
    u32::try_from(ppm.min(u128::from(PPM))).unwrap_or(PPM)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn share_is_clamped_and_safe() {
        assert_eq!(share_ppm(0, 0), 0);
        assert_eq!(share_ppm(5, 0), 0, "no wall time: nothing to divide");
        assert_eq!(share_ppm(25 * MS, 100 * MS), 250_000);
        assert_eq!(share_ppm(200 * MS, 100 * MS), PPM, "clamped");
        assert_eq!(share_ppm(u64::MAX, u64::MAX), PPM, "no overflow");
    }

    #[test]
    fn young_worker_counts_since_start() {
        let mut w = LoadWindow::new();
        assert_eq!(w.record(100 * MS, 50 * MS), 500_000);
        assert_eq!(w.record(200 * MS, 50 * MS), 250_000);
    }

    /// Busy 80 % for a second, then idle: the 1 s share falls off over
    /// the next second (it does not drop to 0 at the first idle
    /// publication), and once the busy second is wholly out of the
    /// window it reads 0.
    #[test]
    fn the_window_slides_over_one_second() {
        let mut w = LoadWindow::new();
        let mut busy = 0;
        let mut last = 0;
        for k in 1..=10 {
            busy += 80 * MS;
            last = w.record(k * 100 * MS, busy);
        }
        assert_eq!(last, 800_000, "a full busy second");
        let idle: Vec<u32> = (11..=21).map(|k| w.record(k * 100 * MS, busy)).collect();
        // At 1.1 s the window reaches back to 0.1 s: 9 busy intervals of 10.
        assert_eq!(idle[0], 720_000);
        assert_eq!(idle[4], 400_000, "halfway out at 1.5 s");
        assert_eq!(idle[9], 0, "at 2.0 s the window starts at 1.0 s");
        assert!(idle.windows(2).all(|p| p[0] >= p[1]), "{idle:?}");
    }

    /// Publications come at least 100 ms apart but may be late: the base
    /// is the newest sample at least one second old, so the window spans
    /// between 1 s and 1 s plus one interval.
    #[test]
    fn late_publications_widen_the_window_slightly() {
        let mut w = LoadWindow::new();
        let times = [130, 260, 390, 520, 650, 780, 910, 1040, 1170];
        for (i, &t) in times.iter().enumerate() {
            w.record(t * MS, (i as u64 + 1) * 13 * MS);
        }
        // At 1300 ms the cutoff is 300 ms: base is the sample at 260 ms
        // (26 ms busy); 10 × 13 = 130 ms busy by now.
        assert_eq!(
            w.record(1300 * MS, 130 * MS),
            share_ppm(104 * MS, 1040 * MS)
        );
    }

    #[test]
    fn the_ring_wraps_without_losing_the_second() {
        let mut w = LoadWindow::new();
        // 100 publications: the ring has long wrapped; busy 30 % in the
        // last second only.
        let mut busy = 0;
        for k in 1..=100u64 {
            if k > 90 {
                busy += 30 * MS;
            }
            let share = w.record(k * 100 * MS, busy);
            if k == 100 {
                assert_eq!(share, 300_000);
            }
        }
    }
}
