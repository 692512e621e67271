//! Fuzz target: the EAP authenticator (phalanx-eap) fed what a hostile
//! End-User may send. The first octet picks the Identifier the server
//! starts with; the rest is cut into EAP messages at each 0xFF octet, the
//! first a well-formed EAP-Response/Identity for a known user (so the
//! fuzzer reaches MSCHAPv2) when the input's second octet is even. Any
//! panic is a finding.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use phalanx_eap::{EapRepr, EapServer, EapType, LocalSecrets};

fuzz_target!(|data: &[u8]| {
    let Some((&id, rest)) = data.split_first() else {
        return;
    };
    let mut secrets = LocalSecrets::default();
    secrets.add("alice@example.com", "alice's password");
    let mut server = EapServer::mschapv2("phalanx", [id; 32], Arc::new(secrets));
    let _ = server.start();
    if rest.first().is_some_and(|b| b % 2 == 0) {
        let identity = EapRepr::response(id, EapType::IDENTITY, b"alice@example.com".to_vec());
        let _ = server.handle(&identity.emit());
    }
    for message in rest.split(|b| *b == 0xff) {
        let _ = server.handle(message);
        let _ = EapRepr::parse(message);
    }
});
