//! Fuzzes the IKE responder: the input is a sequence of datagrams and API
//! calls (record format in `phalanx_ike::fuzzing`) fed to one responder
//! `Endpoint` on a virtual clock, every timer fired and every output
//! checked. The provider is the testkit's deliberately insecure
//! `IkeFuzzProvider::PAST_AUTHENTICATION` (NULL ciphers accept any ICV,
//! the PRF outputs zeros), so inputs get past integrity checks and a
//! forged AUTH of zeros completes IKE_AUTH. Property: nothing panics, no
//! SA is removed more often than installed, every datagram sent is an
//! IKE message, no timer stays due. Seeds: `phalanx_ike::fuzzing::seed_inputs`
//! (written out by that crate's test when PHALANX_FUZZ_SEEDS names a
//! directory).
#![no_main]

use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use phalanx_testkit::ike_pair::IkeFuzzProvider;

static PROVIDER: IkeFuzzProvider = IkeFuzzProvider::PAST_AUTHENTICATION;

fuzz_target!(|data: &[u8]| {
    phalanx_ike::fuzzing::responder(data, &PROVIDER, Instant::now());
});
