//! Fuzz target: AH view and AhRepr (RFC 4302 §2).
//! The harness lives in `phalanx_wire::fuzzing::ah`, shared with the
//! crate's property tests; any panic is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    phalanx_wire::fuzzing::ah(data);
});
