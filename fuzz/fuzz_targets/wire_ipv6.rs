//! Fuzz target: IPv6 view, extension-header walks, Ipv6Repr (RFC 8200).
//! The harness lives in `phalanx_wire::fuzzing::ipv6`, shared with the
//! crate's property tests; any panic is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    phalanx_wire::fuzzing::ipv6(data);
});
