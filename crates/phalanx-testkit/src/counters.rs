//! Counter-delta assertions (VPP style: a test states exactly which
//! counters an action moved, and by how much; every other counter must stay
//! put).
//!
//! Generic over the counter container: a [`CounterSet`] is a list of named
//! readers `Fn(&C) -> u64`, so this crate needs no ESP or SA types.
//!
//! ```
//! use phalanx_testkit::counters::CounterSet;
//! use phalanx_testkit::assert_delta;
//!
//! struct Stats { ok: u64, bad: u64 }
//! let set = CounterSet::new().with("ok", |s: &Stats| s.ok).with("bad", |s: &Stats| s.bad);
//! let mut stats = Stats { ok: 0, bad: 0 };
//! let before = set.snapshot(&stats);
//! stats.bad += 1;
//! assert_delta!(set, before, &stats, "bad" => 1);
//! ```

use std::fmt::Write as _;

/// A boxed counter reader.
type Reader<C> = Box<dyn Fn(&C) -> u64>;

/// Named counters of a container `C`.
pub struct CounterSet<C> {
    readers: Vec<(String, Reader<C>)>,
}

impl<C> Default for CounterSet<C> {
    fn default() -> Self {
        CounterSet {
            readers: Vec::new(),
        }
    }
}

impl<C> core::fmt::Debug for CounterSet<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list()
            .entries(self.readers.iter().map(|(n, _)| n))
            .finish()
    }
}

/// The values of a [`CounterSet`] at one moment, in the set's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterSnapshot {
    values: Vec<(String, u64)>,
}

impl<C> CounterSet<C> {
    /// An empty set.
    pub fn new() -> Self {
        CounterSet::default()
    }

    /// Adds a counter read by `read`.
    pub fn with(mut self, name: impl Into<String>, read: impl Fn(&C) -> u64 + 'static) -> Self {
        self.readers.push((name.into(), Box::new(read)));
        self
    }

    /// Number of counters.
    pub fn len(&self) -> usize {
        self.readers.len()
    }

    /// True when the set has no counters.
    pub fn is_empty(&self) -> bool {
        self.readers.is_empty()
    }

    /// Reads every counter now.
    pub fn snapshot(&self, counters: &C) -> CounterSnapshot {
        let values = self
            .readers
            .iter()
            .map(|(n, read)| (n.clone(), read(counters)))
            .collect();
        CounterSnapshot { values }
    }

    /// Panics unless every counter moved by exactly the listed amount since
    /// `before` — unlisted counters by 0 — with a table of the differences.
    /// Counters only grow: one that went down fails too.
    #[track_caller]
    pub fn assert_delta(&self, before: &CounterSnapshot, now: &C, expected: &[(&str, u64)]) {
        let after = self.snapshot(now);
        if let Some(report) = mismatch_report(before, &after, expected) {
            panic!("counter deltas differ from the expected ones:\n{report}");
        }
    }
}

impl CounterSnapshot {
    /// The value of the counter `name`.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.values.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }

    /// Counters that differ between `self` and `later`, as signed deltas.
    pub fn delta(&self, later: &CounterSnapshot) -> Vec<(String, i128)> {
        self.values
            .iter()
            .zip(&later.values)
            .map(|((n, a), (_, b))| (n.clone(), i128::from(*b) - i128::from(*a)))
            .filter(|&(_, d)| d != 0)
            .collect()
    }
}

/// `None` when the deltas are as expected, else a readable table.
fn mismatch_report(
    before: &CounterSnapshot,
    after: &CounterSnapshot,
    expected: &[(&str, u64)],
) -> Option<String> {
    let mut report = String::new();
    for (name, _) in expected {
        if before.get(name).is_none() {
            let _ = writeln!(report, "  {name}: no such counter");
        }
    }
    for ((name, a), (_, b)) in before.values.iter().zip(&after.values) {
        let want = expected
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |&(_, d)| i128::from(d));
        let got = i128::from(*b) - i128::from(*a);
        if got != want {
            let _ = writeln!(
                report,
                "  {name}: expected +{want}, got {got:+} ({a} -> {b})"
            );
        }
    }
    (!report.is_empty()).then_some(report)
}

/// `assert_delta!(set, before, &now, "name" => n, ...)`: every listed
/// counter of `set` moved by `n` since the snapshot `before`, every other
/// one by 0. See [`CounterSet::assert_delta`].
#[macro_export]
macro_rules! assert_delta {
    ($set:expr, $before:expr, $now:expr $(, $name:expr => $n:expr)* $(,)?) => {
        $set.assert_delta(&$before, $now, &[$(($name, $n)),*])
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Stats {
        a: u64,
        b: u64,
    }

    fn set() -> CounterSet<Stats> {
        CounterSet::new()
            .with("a", |s: &Stats| s.a)
            .with("b", |s: &Stats| s.b)
    }

    #[test]
    fn exact_deltas_pass() {
        let set = set();
        let mut s = Stats::default();
        let before = set.snapshot(&s);
        s.a += 2;
        assert_delta!(set, before, &s, "a" => 2);
        assert_delta!(set, before, &s, "a" => 2, "b" => 0);
        assert_eq!(before.delta(&set.snapshot(&s)), vec![("a".to_string(), 2)]);
    }

    #[test]
    #[should_panic(expected = "b: expected +0, got +1")]
    fn unlisted_change_fails() {
        let set = set();
        let mut s = Stats::default();
        let before = set.snapshot(&s);
        s.a += 1;
        s.b += 1;
        assert_delta!(set, before, &s, "a" => 1);
    }

    #[test]
    #[should_panic(expected = "a: expected +1, got +0")]
    fn missing_change_fails() {
        let set = set();
        let s = Stats::default();
        let before = set.snapshot(&s);
        assert_delta!(set, before, &s, "a" => 1);
    }

    #[test]
    #[should_panic(expected = "nope: no such counter")]
    fn unknown_name_fails() {
        let set = set();
        let s = Stats::default();
        let before = set.snapshot(&s);
        assert_delta!(set, before, &s, "nope" => 0);
    }

    #[test]
    #[should_panic(expected = "got -1")]
    fn decrease_fails() {
        let set = set();
        let mut s = Stats { a: 1, b: 0 };
        let before = set.snapshot(&s);
        s.a = 0;
        set.assert_delta(&before, &s, &[]);
    }
}
