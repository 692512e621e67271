//! Fuzz target: ESP view, EspRepr and the decrypted-trailer split (RFC 4303 §2).
//! The harness lives in `phalanx_wire::fuzzing::esp`, shared with the
//! crate's property tests; any panic is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    phalanx_wire::fuzzing::esp(data);
});
