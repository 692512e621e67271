//! Fuzzes inbound ESP processing: the input is an outer IP packet (possibly
//! UDP-encapsulated on port 4500) fed to `prepare_inbound` → InlineEngine
//! → `finish_inbound` against a SAD of ESP SAs (tunnel and transport,
//! IPv4 and IPv6, UDP encapsulation, ESN, selectors) keyed by the
//! testkit's deliberately insecure NullProvider, so the input gets past
//! authentication. Property: nothing panics, and a forwarded packet is a
//! non-empty IP packet.
#![no_main]

use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use phalanx_crypto::PacketBuf;
use phalanx_esp::{finish_inbound, prepare_inbound, Verdict};
use phalanx_testkit::fuzzing::{esp_sas, inbound_sad};
use phalanx_testkit::vectors::run_inline;

fuzz_target!(|data: &[u8]| {
    // A fresh SAD per input keeps runs reproducible (replay windows move).
    let now = Instant::now();
    let sad = inbound_sad(&esp_sas(), now);
    let packet = PacketBuf::from_slice(data, 64, 64);
    let Ok((pending, op)) = prepare_inbound(&sad, packet, now) else {
        return;
    };
    let (buf, verdict) = finish_inbound(pending, run_inline(op));
    if matches!(verdict, Verdict::Forward) {
        assert!(matches!(buf.as_slice().first(), Some(b) if b >> 4 == 4 || b >> 4 == 6));
    }
});
