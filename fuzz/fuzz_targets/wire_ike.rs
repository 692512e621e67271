//! Fuzz target: the IKEv2 message codec (RFC 7296 §3) — header view, payload
//! walk, every payload parser, the MessageRepr emit → parse round trip, and
//! the same octets as a decrypted SK plaintext chain. The harness lives in
//! `phalanx_wire::fuzzing::ike_message`, shared with the crate's property
//! tests; any panic is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    phalanx_wire::fuzzing::ike_message(data);
});
