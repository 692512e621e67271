//! Signed octets and shared-key AUTH (RFC 7296 §2.15) against values
//! computed independently with Python's `hmac` / `hashlib`:
//!
//! ```python
//! import hmac, hashlib
//! prf = lambda k, d: hmac.new(k, d, hashlib.sha256).digest()
//! psk = b"phalanx test psk"
//! msg1, nonce_r, sk_pi = bytes(range(0x40)), bytes([0xa5]) * 32, bytes(range(0x20, 0x40))
//! idi = bytes([2, 0, 0, 0]) + b"moon.example.com"
//! octets = msg1 + nonce_r + prf(sk_pi, idi)
//! print(prf(sk_pi, idi).hex(), prf(prf(psk, b"Key Pad for IKEv2"), octets).hex())
//! msg2, nonce_i, sk_pr = bytes(range(0x40, 0x90)), bytes([0x5a]) * 24, bytes(range(0x60, 0x80))
//! idr = bytes([3, 0, 0, 0]) + b"sun@example.com"
//! octets_r = msg2 + nonce_i + prf(sk_pr, idr)
//! print(prf(prf(psk, b"Key Pad for IKEv2"), octets_r).hex())
//! ```

use crate::auth::*;
use hmac::{Hmac, Mac};
use sha2::Sha256;

const MACED_ID_I: &str = "afaad6ab60113f6eaef6d7770157b651d1e5f05208cf6e5e18fc7a4d50bf2d57";
const AUTH_I: &str = "51ee2339fc3ef4ab794aa12a9beda4c643a76f0b841cf9e731f8c0476b5c6cbd";
const AUTH_R: &str = "fa0c9ec08313e9ae2a54f255e750318cdc5767cd8d9ccc6536805b6f5eded6ff";
const PSK: &[u8] = b"phalanx test psk";

/// PRF_HMAC_SHA2_256 (RFC 4868) from RustCrypto, independent of aws-lc.
fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

fn range(from: u8, to: u8) -> Vec<u8> {
    (from..to).collect()
}

fn initiator_octets() -> Vec<u8> {
    let idi = Identity::Fqdn("moon.example.com".into()).rest_of_id_payload();
    initiator_signed_octets(
        &hmac_sha256,
        &range(0, 0x40),
        &[0xa5; 32],
        &range(0x20, 0x40),
        &idi,
    )
}

fn responder_octets() -> Vec<u8> {
    let idr = Identity::Email("sun@example.com".into()).rest_of_id_payload();
    responder_signed_octets(
        &hmac_sha256,
        &range(0x40, 0x90),
        &[0x5a; 24],
        &range(0x60, 0x80),
        &idr,
    )
}

#[test]
fn signed_octets_layout() {
    let octets = initiator_octets();
    assert_eq!(octets.len(), 0x40 + 32 + 32);
    assert_eq!(&octets[..0x40], range(0, 0x40).as_slice());
    assert_eq!(&octets[0x40..0x60], &[0xa5; 32]);
    assert_eq!(hex::encode(&octets[0x60..]), MACED_ID_I);
}

#[test]
fn psk_auth_known_answers() {
    assert_eq!(
        hex::encode(psk_auth(&hmac_sha256, PSK, &initiator_octets())),
        AUTH_I
    );
    assert_eq!(
        hex::encode(psk_auth(&hmac_sha256, PSK, &responder_octets())),
        AUTH_R
    );
    assert_eq!(KEY_PAD.len(), 17);
}

#[test]
fn psk_verification() {
    let octets = initiator_octets();
    let auth = hex::decode(AUTH_I).unwrap();
    assert_eq!(verify_psk_auth(&hmac_sha256, PSK, &octets, &auth), Ok(()));
    let wrong_secret = verify_psk_auth(&hmac_sha256, b"other psk", &octets, &auth);
    assert_eq!(wrong_secret, Err(AuthError::PskMismatch));
    let wrong_octets = verify_psk_auth(&hmac_sha256, PSK, &responder_octets(), &auth);
    assert_eq!(wrong_octets, Err(AuthError::PskMismatch));
    let truncated = verify_psk_auth(&hmac_sha256, PSK, &octets, &auth[..31]);
    assert_eq!(truncated, Err(AuthError::PskMismatch));
    assert_eq!(
        verify_psk_auth(&hmac_sha256, PSK, &octets, &[]),
        Err(AuthError::PskMismatch)
    );
}
