//! Nothing a peer sends may panic: arbitrary ID payloads, AUTH data and
//! certificates go through the parsers and verifiers.

use super::pki::{now, Ca};
use crate::auth::*;
use proptest::prelude::*;
use std::sync::OnceLock;

/// One verified peer and anchor set, built once for all cases.
fn fixture() -> &'static (VerifiedPeer, TrustAnchors) {
    static FIXTURE: OnceLock<(VerifiedPeer, TrustAnchors)> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let ca = Ca::root(&rcgen::PKCS_ECDSA_P256_SHA256, "root");
        let leaf = ca.issue(&rcgen::PKCS_ECDSA_P256_SHA256, |_| {});
        let anchors = ca.anchors();
        (
            verify_peer_chain(&leaf.der, &[], &anchors, now()).unwrap(),
            anchors,
        )
    })
}

proptest! {
    #[test]
    fn id_payloads_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(id) = Identity::from_rest_of_id_payload(&bytes) {
            let _ = id.to_string();
            prop_assert_eq!(id.rest_of_id_payload()[4..].to_vec(), bytes[4..].to_vec());
            let (peer, _) = fixture();
            let _ = peer.matches_identity(&id);
        }
    }

    #[test]
    fn dn_payloads_never_panic(body in proptest::collection::vec(any::<u8>(), 0..48)) {
        // A SEQUENCE header in front gives the DN parser something to chew on.
        let mut dn = vec![0x30, body.len() as u8];
        dn.extend_from_slice(&body);
        if let Ok(id) = Identity::from_id(Identity::ID_DER_ASN1_DN, &dn) {
            let _ = id.to_string();
            // Matching is reflexive for every name that parses.
            prop_assert!(id.matches(&id));
        }
    }

    #[test]
    fn auth_data_never_panics(method in any::<u8>(), data in proptest::collection::vec(any::<u8>(), 0..160)) {
        let (peer, _) = fixture();
        prop_assert!(verify_auth(peer, method, &data, b"octets").is_err());
    }

    #[test]
    fn certificates_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let (_, anchors) = fixture();
        prop_assert!(verify_peer_chain(&data, &[&data], anchors, now()).is_err());
        let _ = certificate_subject(&data);
    }
}
