//! What a privileged test does when this process lacks the privilege:
//! it fails. A test that prints "skipped" and passes reports a success
//! nobody earned, and CI (which runs as root) would never notice the day
//! the privilege went missing.
//!
//! The one way out is explicit: with `PHALANX_ALLOW_PRIVILEGED_SKIP=1` in
//! the environment the test prints a loud `SKIPPED (…)` line and returns,
//! for a developer who knows the run proves nothing about those paths.
//!
//! Not part of the crate's contract: exported (hidden) only so that the
//! tests of this crate and of `phalanxd` share one decision.

use std::fmt::Display;
use std::io::{self, Write};

/// The environment variable that turns the failure into a loud skip.
pub const ALLOW_SKIP_VARIABLE: &str = "PHALANX_ALLOW_PRIVILEGED_SKIP";

/// The calling test could not run because it lacks `needs` (e.g. "root or
/// `CAP_BPF` for bpf(2)"); `error` is what the kernel said. Panics with
/// what to do, unless [`ALLOW_SKIP_VARIABLE`] is `1`: then it prints the
/// skip and returns, and the caller returns at once.
pub fn cannot_run(needs: &str, error: &dyn Display) {
    let thread = std::thread::current();
    // libtest runs each test on a thread named after it.
    let test = thread.name().unwrap_or("this test");
    match verdict(skip_allowed(), test, needs, error) {
        // Straight to the descriptor: libtest captures `eprintln!` of a
        // passing test, and a skip must be seen.
        Ok(skipped) => {
            let _ = writeln!(io::stderr(), "\n{skipped}");
        }
        Err(failure) => panic!("{failure}"),
    }
}

/// The skip line (`Ok`) or the failure message (`Err`).
fn verdict(allowed: bool, test: &str, needs: &str, error: &dyn Display) -> Result<String, String> {
    if allowed {
        return Ok(format!(
            "SKIPPED ({ALLOW_SKIP_VARIABLE}=1): {test} needs {needs} ({error})"
        ));
    }
    Err(format!(
        "{test} needs {needs} and could not run here ({error}): run as root, as CI does \
         (or set {ALLOW_SKIP_VARIABLE}=1 to skip it, loudly, on a machine where it cannot run)"
    ))
}

/// `Some(value)` on success; on `EPERM`, [`cannot_run`] (so `None` only
/// when skipping is allowed); any other error fails the test.
pub fn permitted<T>(result: io::Result<T>, needs: &str) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            cannot_run(needs, &e);
            None
        }
        Err(e) => panic!("{needs}: {e}"),
    }
}

fn skip_allowed() -> bool {
    std::env::var_os(ALLOW_SKIP_VARIABLE).is_some_and(|value| value == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_passes_through_and_other_errors_fail() {
        assert_eq!(permitted(Ok(7), "nothing"), Some(7));
        let other = std::panic::catch_unwind(|| {
            permitted::<()>(Err(io::Error::from_raw_os_error(libc::EINVAL)), "nothing")
        });
        assert!(other.is_err(), "EINVAL is a failure, never a skip");
    }

    #[test]
    fn lacking_a_privilege_fails_unless_skipping_is_allowed() {
        let eperm = io::Error::from_raw_os_error(libc::EPERM);
        let failure = verdict(false, "t", "root or CAP_BPF", &eperm).unwrap_err();
        assert!(failure.contains("t needs root or CAP_BPF"), "{failure}");
        assert!(failure.contains("run as root, as CI does"), "{failure}");
        let skipped = verdict(true, "t", "root or CAP_BPF", &eperm).unwrap();
        assert!(
            skipped
                .starts_with("SKIPPED (PHALANX_ALLOW_PRIVILEGED_SKIP=1): t needs root or CAP_BPF"),
            "{skipped}"
        );
    }
}
