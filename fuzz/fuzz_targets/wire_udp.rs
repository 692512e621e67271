//! Fuzz target: UDP view, IPv4/IPv6 checksums, UdpRepr (RFC 768).
//! The harness lives in `phalanx_wire::fuzzing::udp`, shared with the
//! crate's property tests; any panic is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    phalanx_wire::fuzzing::udp(data);
});
