//! Property tests: `parse(emit(x)) == x` for generated representations, and
//! no input — arbitrary or a mutated valid message — panics.

use alloc::vec::Vec;

use proptest::collection::vec;
use proptest::prelude::*;

use super::strategies;
use crate::fuzzing;
use crate::ike::iana::PayloadType;
use crate::ike::*;

proptest! {
    #[test]
    fn message_round_trip(message in strategies::message()) {
        let bytes = message.emit_to_vec().unwrap();
        prop_assert_eq!(bytes.len(), message.buffer_len());
        let h = IkeHeader::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(IkeHeaderRepr::parse(&h).unwrap(), message.header());
        prop_assert_eq!(MessageRepr::parse(&bytes).unwrap(), message);
    }

    #[test]
    fn chain_round_trip(payloads in strategies::chain()) {
        let (first, bytes) = emit_payloads(&payloads).unwrap();
        let expected_first = payloads.first().map_or(PayloadType::NONE, Payload::payload_type);
        prop_assert_eq!(first, expected_first);
        let total: usize = payloads.iter().map(Payload::buffer_len).sum();
        prop_assert_eq!(bytes.len(), total);
        prop_assert_eq!(parse_payloads(first, &bytes).unwrap(), payloads);
    }

    #[test]
    fn body_len_matches_emit(payload in strategies::inner_payload()) {
        let mut body = Vec::new();
        payload.emit_body(&mut body).unwrap();
        prop_assert_eq!(body.len(), payload.body_len());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..600)) {
        fuzzing::ike_message(&bytes);
        // The walk stops after its first error, so flatten sees all of it.
        for raw in PayloadIter::new(PayloadType::SA, &bytes).flatten() {
            let _ = Payload::parse(&raw);
        }
    }

    #[test]
    fn arbitrary_header_then_chain_never_panics(
        first in any::<u8>(),
        chain in vec(any::<u8>(), 0..400),
    ) {
        let mut bytes = super::captured::ike_sa_init()[..28].to_vec();
        bytes[16] = first;
        bytes.extend_from_slice(&chain);
        let len = u32::try_from(bytes.len()).unwrap();
        bytes[24..28].copy_from_slice(&len.to_be_bytes());
        fuzzing::ike_message(&bytes);
    }

    #[test]
    fn mutated_messages_never_panic(
        message in strategies::message(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = message.emit_to_vec().unwrap();
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        fuzzing::ike_message(&bytes);
        let keep = cut.index(bytes.len() + 1);
        fuzzing::ike_message(&bytes[..keep]);
    }
}

#[test]
fn captured_bytes_pass_the_harness() {
    let bytes = super::captured::ike_sa_init();
    fuzzing::ike_message(&bytes);
    fuzzing::ike_message(&with_non_esp_marker(&bytes));
}
