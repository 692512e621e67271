//! Fuzz target: IP version dispatch and selector extraction (RFC 4301 §4.4.1.1), plus both IP views.
//! The harness lives in `phalanx_wire::fuzzing::flow`, shared with the
//! crate's property tests; any panic is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    phalanx_wire::fuzzing::flow(data);
});
