//! Fuzz target: the control-socket protocol (`phalanx-control`), both
//! ways. Any line a client (or a daemon) sends is decoded without a panic;
//! a request that decodes encodes back to a line that decodes to the same
//! request, and an error answer always carries the id it could read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use phalanx_control::{decode_request, decode_response, encode_request};

fuzz_target!(|data: &[u8]| {
    match decode_request(data) {
        Ok(envelope) => {
            let line = encode_request(envelope.id, &envelope.request);
            let again = decode_request(line.as_bytes()).expect("an encoded request decodes");
            assert_eq!(again.id, envelope.id);
            assert_eq!(again.request, envelope.request);
        }
        Err(refusal) => assert!(!refusal.error.message.is_empty()),
    }
    let _ = decode_response(data);
});
