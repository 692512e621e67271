//! Fuzz target: IPv4 view + Ipv4Repr (RFC 791).
//! The harness lives in `phalanx_wire::fuzzing::ipv4`, shared with the
//! crate's property tests; any panic is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    phalanx_wire::fuzzing::ipv4(data);
});
