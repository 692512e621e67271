//! `ReplayWindow` against a trivially correct model: the set of committed
//! numbers plus the highest, with App. A2.2 inference written as "the
//! unique full number congruent to the field in [T - W + 1, T + 2^32 - W]".
//! Checks and commits are interleaved as an asynchronous crypto engine
//! would: several packets pre-checked, then completed in any order.

use phalanx_sa::{ReplayError, ReplayWindow};
use proptest::prelude::*;
use std::collections::HashSet;

const SPACE_32: i128 = 1 << 32;

struct Model {
    window: u64,
    esn: bool,
    highest: u64,
    seen: HashSet<u64>,
}

impl Model {
    fn infer(&self, low: u32) -> Result<u64, ReplayError> {
        if !self.esn {
            return if low == 0 {
                Err(ReplayError::Invalid)
            } else {
                Ok(u64::from(low))
            };
        }
        let lowest = i128::from(self.highest) - i128::from(self.window) + 1;
        let full = lowest + (i128::from(low) - lowest).rem_euclid(SPACE_32);
        match full {
            f if f < 0 => Err(ReplayError::TooOld),
            0 => Err(ReplayError::Invalid),
            f => u64::try_from(f).map_err(|_| ReplayError::Invalid),
        }
    }

    fn verdict(&self, full: u64) -> Result<(), ReplayError> {
        if full > self.highest {
            Ok(())
        } else if self.highest - full >= self.window {
            Err(ReplayError::TooOld)
        } else if self.seen.contains(&full) {
            Err(ReplayError::Duplicate)
        } else {
            Ok(())
        }
    }

    fn check(&self, low: u32) -> Result<u64, ReplayError> {
        let full = self.infer(low)?;
        self.verdict(full).map(|()| full)
    }

    fn commit(&mut self, full: u64) -> Result<(), ReplayError> {
        self.verdict(full)?;
        self.seen.insert(full);
        self.highest = self.highest.max(full);
        Ok(())
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// A packet arrives `delta` away from the highest number; it is
    /// pre-checked and, if it passes, joins the pending set.
    Arrive(i64),
    /// The pending packet at this index completes; authentic or not.
    Complete(usize, bool),
}

fn delta() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => -80i64..80,
        2 => -5000i64..5000,
        1 => -(1i64 << 31)..(1i64 << 31),
        1 => ((1i64 << 32) - 5000)..((1i64 << 32) + 5000),
        1 => (-(1i64 << 32) - 5000)..(-(1i64 << 32) + 5000),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => delta().prop_map(Op::Arrive),
        2 => (any::<usize>(), prop::bool::weighted(0.9)).prop_map(|(i, ok)| Op::Complete(i, ok)),
    ]
}

fn start(esn: bool) -> impl Strategy<Value = u64> {
    if esn {
        prop_oneof![
            Just(0u64),
            (1u64 << 32) - 3000..(1u64 << 32) + 3000,
            any::<u64>().prop_map(|v| v >> 20),
            u64::MAX - 3000..=u64::MAX,
        ]
        .boxed()
    } else {
        prop_oneof![
            Just(0u64),
            1u64..=u64::from(u32::MAX),
            (1u64 << 32) - 3000..(1u64 << 32)
        ]
        .boxed()
    }
}

fn scenario() -> impl Strategy<Value = (u32, bool, u64, Vec<Op>)> {
    (
        prop::sample::select(vec![32u32, 64, 100, 1024, 4096]),
        any::<bool>(),
    )
        .prop_flat_map(|(size, esn)| {
            (
                Just(size),
                Just(esn),
                start(esn),
                prop::collection::vec(op(), 1..300),
            )
        })
}

fn run(size: u32, esn: bool, start: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut window = ReplayWindow::new(size, esn).expect("valid size");
    let mut model = Model {
        window: u64::from(window.size()),
        esn,
        highest: 0,
        seen: HashSet::new(),
    };
    if start != 0 {
        prop_assert_eq!(window.commit(start), model.commit(start));
    }
    let mut pending: Vec<u64> = Vec::new();
    for op in ops {
        match *op {
            Op::Arrive(delta) => {
                let full = i128::from(model.highest) + i128::from(delta);
                let low = full.rem_euclid(SPACE_32) as u32;
                let got = window.check(low);
                prop_assert_eq!(
                    got,
                    model.check(low),
                    "check({:#x}) at {:#x}",
                    low,
                    model.highest
                );
                if let Ok(full) = got {
                    pending.push(full);
                }
            }
            Op::Complete(index, authentic) if !pending.is_empty() => {
                let full = pending.swap_remove(index % pending.len());
                if authentic {
                    prop_assert_eq!(
                        window.commit(full),
                        model.commit(full),
                        "commit({:#x})",
                        full
                    );
                }
            }
            Op::Complete(..) => {}
        }
        prop_assert_eq!(window.highest(), model.highest);
    }
    let restored = ReplayWindow::restore(&window.snapshot()).expect("own snapshot");
    for delta in -70i64..5 {
        let low = (i128::from(model.highest) + i128::from(delta)).rem_euclid(SPACE_32) as u32;
        prop_assert_eq!(restored.check(low), model.check(low));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn window_agrees_with_the_model((size, esn, start, ops) in scenario()) {
        run(size, esn, start, &ops)?;
    }
}

#[test]
fn long_in_order_run_across_2_pow_32() {
    let mut window = ReplayWindow::new(64, true).expect("valid");
    window.commit((1 << 32) - 100_000).expect("start");
    for full in ((1u64 << 32) - 100_000 + 1)..((1 << 32) + 100_000) {
        assert_eq!(window.check(full as u32), Ok(full));
        window.commit(full).expect("in order");
    }
}
