//! The anti-replay table test (RFC 4303 §3.4.3, Appendix A; App. A2 for
//! ESN). The table is plain data — window size, ESN flag, starting point,
//! then numbered steps of (received 32-bit sequence number field, expected
//! verdict) — so another implementation can run the very same rows.
//!
//! Runner semantics, per step: `check(seq)`; for `Accept(n)` the check must
//! return the full number `n` and the packet is then committed (its ICV
//! verified); for `Unauthentic(n)` the check returns `n` but the packet
//! fails authentication and is not committed (how an App. A2.2 misguess or a
//! forgery plays out); the other verdicts are the check's error and change
//! nothing. Windows are rounded up to a multiple of 64: a window of 32
//! behaves as 64. A non-zero `start` is committed before step 1.

use phalanx_sa::{ReplayError, ReplayWindow};

/// Expected outcome of one step.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// New and authentic: the full sequence number; then committed.
    Accept(u64),
    /// Passes the pre-check as this full number, fails the ICV.
    Unauthentic(u64),
    /// Already received.
    Duplicate,
    /// Left of the window.
    TooOld,
    /// Never valid (0, or past the end of the ESN space).
    Invalid,
}

use Expect::*;

/// One table case.
struct Case {
    name: &'static str,
    window: u32,
    esn: bool,
    /// Highest number already received before step 1 (0: fresh SA).
    start: u64,
    /// (step, received sequence number field, expected verdict).
    steps: &'static [(u32, u32, Expect)],
}

#[rustfmt::skip]
const TABLE: &[Case] = &[
    Case {
        name: "window 32 (64 effective), 32-bit sequence numbers",
        window: 32, esn: false, start: 0,
        steps: &[
            (1, 0, Invalid),        // RFC 4303 §3.3.3: the first packet carries 1, never 0
            (2, 1, Accept(1)),      // first packet
            (3, 2, Accept(2)),      // in order
            (4, 2, Duplicate),      // replay of the newest
            (5, 1, Duplicate),      // replay of an older one
            (6, 5, Accept(5)),      // gap of two
            (7, 3, Accept(3)),      // out of order, inside the window
            (8, 4, Accept(4)),      // fills the gap
            (9, 3, Duplicate),      // replay inside the window
            (10, 100, Accept(100)), // jump: the window is now 37..=100
            (11, 37, Accept(37)),   // left edge (100 - 37 = 63)
            (12, 36, TooOld),       // one past the left edge
            (13, 5, TooOld),        // seen long ago: now too old, not "duplicate"
            (14, 99, Accept(99)),
            (15, 99, Duplicate),
            (16, 0, Invalid),
        ],
    },
    Case {
        name: "window 64, 32-bit sequence numbers",
        window: 64, esn: false, start: 0,
        steps: &[
            (1, 64, Accept(64)),     // the first packet need not be 1
            (2, 1, Accept(1)),       // left edge: 64 - 1 = 63
            (3, 1, Duplicate),
            (4, 65, Accept(65)),     // slides by one
            (5, 1, TooOld),          // 65 - 1 = 64: just out
            (6, 2, Accept(2)),       // the new left edge
            (7, 1000, Accept(1000)), // jump far beyond the window
            (8, 65, TooOld),
            (9, 937, Accept(937)),   // 1000 - 937 = 63
            (10, 936, TooOld),
            (11, 999, Accept(999)),
            (12, 1000, Duplicate),
            (13, 1064, Accept(1064)), // slides by exactly one window
            (14, 1000, TooOld),
            (15, 1001, Accept(1001)),
            (16, 1001, Duplicate),
        ],
    },
    Case {
        name: "window 64, 32-bit: the counter must not wrap",
        window: 64, esn: false, start: 0xffff_fff0,
        steps: &[
            (1, 0xffff_ffff, Accept(0xffff_ffff)), // the last valid number
            (2, 0xffff_ffc0, Accept(0xffff_ffc0)), // left edge
            (3, 0xffff_ffbf, TooOld),
            (4, 0, Invalid),             // no wrap to 0 without ESN
            (5, 1, TooOld),              // nor to 1: that is just very old
            (6, 0xffff_fff0, Duplicate), // the starting point counts as received
        ],
    },
    Case {
        name: "window 1024, 32-bit, reordering",
        window: 1024, esn: false, start: 0,
        steps: &[
            (1, 2000, Accept(2000)),
            (2, 977, Accept(977)),   // 2000 - 977 = 1023: left edge
            (3, 976, TooOld),
            (4, 1500, Accept(1500)),
            (5, 1500, Duplicate),
            (6, 2001, Accept(2001)),
            (7, 977, TooOld),        // fell out as the window slid
            (8, 978, Accept(978)),
            (9, 3024, Accept(3024)), // slides by 1023: window 2001..=3024
            (10, 2001, Duplicate),
            (11, 2000, TooOld),
            (12, 2002, Accept(2002)),
            (13, 100_000, Accept(100_000)), // jump of many windows
            (14, 3024, TooOld),
            (15, 98_977, Accept(98_977)),
            (16, 98_976, TooOld),
        ],
    },
    Case {
        name: "window 1024, ESN: across 2^32 (App. A2.2)",
        window: 1024, esn: true, start: 0,
        steps: &[
            (1, 0, Invalid),                       // full number 0 is never valid
            (2, 0xffff_ff00, TooOld),              // Case B with Th = 0: would be below 0
            (3, 0x8000_0000, Accept(0x8000_0000)), // Case B, Seqh = Th
            (4, 0xffff_ff00, Accept(0xffff_ff00)), // Case A, Seqh = Th
            (5, 0xffff_ffff, Accept(0xffff_ffff)),
            (6, 0, Accept(0x1_0000_0000)),         // Case A, "Th + 1": low bits 0 are fine now
            (7, 5, Accept(0x1_0000_0005)),         // Case B, Seqh = Th
            (8, 0xffff_fff0, Accept(0xffff_fff0)), // Case B, Seqh = Th - 1: late, in window
            (9, 0xffff_ffff, Duplicate),           // Case B, Th - 1: already seen
            (10, 0, Duplicate),                    // 0x1_0000_0000 again
            (11, 0xffff_fc06, Accept(0xffff_fc06)), // Tl - W + 1: the left edge exactly
            (12, 0xffff_fc05, Unauthentic(0x1_ffff_fc05)), // just left of it: read as Th (far ahead)
            (13, 6, Accept(0x1_0000_0006)),        // the misread packet changed nothing
            (14, 0xffff_fc06, Unauthentic(0x1_ffff_fc06)), // the window slid: now read as ahead
        ],
    },
    Case {
        name: "window 4096, ESN: large jumps and the Th + 1 case",
        window: 4096, esn: true, start: 0,
        steps: &[
            (1, 0x10, Accept(0x10)),
            (2, 0x7fff_ffff, Accept(0x7fff_ffff)), // jump of 2^31
            (3, 0xffff_f000, Accept(0xffff_f000)),
            (4, 0x800, Accept(0x1_0000_0800)),     // Case A, Seql < Tl - W + 1: Th + 1
            (5, 0xffff_f801, Accept(0xffff_f801)), // Case B, Th - 1: 4095 behind
            (6, 0xffff_f800, Unauthentic(0x1_ffff_f800)), // 4096 behind: read as next subspace
            (7, 0x800, Duplicate),
            (8, 1, Accept(0x1_0000_0001)),
            (9, 0x8000_0000, Accept(0x1_8000_0000)), // jump of 2^31 - 0x800
            (10, 1, Unauthentic(0x2_0000_0001)),     // Case A: 1 < Tl - W + 1 -> Th + 1
            (11, 0x7fff_f001, Accept(0x1_7fff_f001)), // left edge
            (12, 0x7fff_f000, Unauthentic(0x2_7fff_f000)),
            (13, 0x8000_0000, Duplicate),
        ],
    },
    Case {
        name: "window 64, ESN: the end of the 64-bit space",
        window: 64, esn: true, start: 0xffff_ffff_ffff_ff00,
        steps: &[
            (1, 0xffff_ffff, Accept(u64::MAX)),              // the last valid number
            (2, 0xffff_ffc0, Accept(0xffff_ffff_ffff_ffc0)), // left edge
            (3, 0xffff_ffbf, Invalid),     // Case A, Th + 1 would be past 2^64 - 1
            (4, 0xffff_ff00, Invalid),     // the start, likewise read as Th + 1
            (5, 0xffff_ffff, Duplicate),
            (6, 5, Invalid),               // no wrap: the SA must have been rekeyed
        ],
    },
    Case {
        name: "window 0: anti-replay disabled (RFC 4303 §3.4.3)",
        window: 0, esn: false, start: 0,
        steps: &[
            (1, 1, Accept(1)),
            (2, 1, Accept(1)),   // repeats are not checked
            (3, 9, Accept(9)),
            (4, 2, Accept(2)),   // nor is age
            (5, 0, Invalid),     // 0 is still never sent
        ],
    },
];

fn verdict(result: Result<u64, ReplayError>) -> String {
    match result {
        Ok(n) => format!("Ok({n:#x})"),
        Err(e) => format!("{e:?}"),
    }
}

fn run(case: &Case) {
    let mut window = ReplayWindow::new(case.window, case.esn).expect("table window size");
    if case.start != 0 {
        window.commit(case.start).expect("table start");
    }
    for &(step, seq, expect) in case.steps {
        let at = format!("{} / step {step} (seq {seq:#x})", case.name);
        let before = window.snapshot();
        let got = window.check(seq);
        match expect {
            Accept(full) => {
                assert_eq!(got, Ok(full), "{at}: got {}", verdict(got));
                assert_eq!(window.commit(full), Ok(()), "{at}: commit");
                assert_eq!(
                    window.check(seq).is_ok(),
                    window.is_disabled(),
                    "{at}: recheck"
                );
            }
            Unauthentic(full) => assert_eq!(got, Ok(full), "{at}: got {}", verdict(got)),
            Duplicate => assert_eq!(
                got,
                Err(ReplayError::Duplicate),
                "{at}: got {}",
                verdict(got)
            ),
            TooOld => assert_eq!(got, Err(ReplayError::TooOld), "{at}: got {}", verdict(got)),
            Invalid => assert_eq!(got, Err(ReplayError::Invalid), "{at}: got {}", verdict(got)),
        }
        if !matches!(expect, Accept(_)) {
            assert_eq!(
                window.snapshot(),
                before,
                "{at}: a refused packet changed the window"
            );
        }
    }
}

#[test]
fn replay_window_table() {
    for case in TABLE {
        run(case);
    }
}

#[test]
fn table_covers_the_required_window_sizes() {
    for size in [32, 64, 1024, 4096] {
        assert!(
            TABLE.iter().any(|c| c.window == size),
            "no case for window {size}"
        );
    }
    assert!(TABLE.iter().any(|c| c.esn) && TABLE.iter().any(|c| !c.esn));
}
