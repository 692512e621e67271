//! Fuzz target: Ethernet II frames with an 802.1Q tag (IEEE 802.3, IEEE
//! 802.1Q) and ARP (RFC 826): views, representations, frame building and
//! the reply builders. The harness lives in
//! `phalanx_wire::ethernet::fuzzing::ethernet_arp`, shared with the crate's
//! property tests; any panic is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    phalanx_wire::ethernet::fuzzing::ethernet_arp(data);
});
