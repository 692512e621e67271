//! Fuzz target: RFC 3948 port-4500 classification, then ESP on what it calls ESP.
//! The harness lives in `phalanx_wire::fuzzing::natt`, shared with the
//! crate's property tests; any panic is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    phalanx_wire::fuzzing::natt(data);
});
