//! The octets an IKE_AUTH AUTH payload covers, and shared-key AUTH values
//! (RFC 7296 §2.15).
//!
//! ```text
//! InitiatorSignedOctets = RealMessage1 | NonceRData | MACedIDForI
//! GenIKEHDR = [ four octets 0 if using port 4500 ] | RealIKEHDR
//! RealIKEHDR =  SPIi | SPIr |  . . . | Length
//! RealMessage1 = RealIKEHDR | RestOfMessage1
//! NonceRPayload = PayloadHeader | NonceRData
//! InitiatorIDPayload = PayloadHeader | RestOfInitIDPayload
//! RestOfInitIDPayload = IDType | RESERVED | InitIDData
//! MACedIDForI = prf(SK_pi, RestOfInitIDPayload)
//!
//! ResponderSignedOctets = RealMessage2 | NonceIData | MACedIDForR
//! MACedIDForR = prf(SK_pr, RestOfRespIDPayload)
//!
//! AUTH = prf( prf(Shared Secret, "Key Pad for IKEv2"), <InitiatorSignedOctets>)
//! AUTH = prf( prf(Shared Secret, "Key Pad for IKEv2"), <ResponderSignedOctets>)
//! ```
//!
//! `RealMessage1` is the IKE_SA_INIT request exactly as sent (without the
//! four-octet non-ESP marker of port 4500), `RealMessage2` the response.
//!
//! The PRF is the one negotiated for the IKE SA. It comes in as a closure
//! `prf(key, parts)` computing the PRF keyed with `key` over the
//! concatenation of `parts`, so this module needs no particular PRF type:
//! with `phalanx_crypto::ike` the IKE SA passes a closure over its
//! negotiated PRF transform.

use super::AuthError;
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// A keyed PRF as negotiated for the IKE SA: `prf(key, parts)` is the PRF
/// with key `key` over the concatenation of `parts` (RFC 7296 §2.13).
pub type Prf<'a> = &'a dyn Fn(&[u8], &[&[u8]]) -> Vec<u8>;

/// The fixed pad of the shared-secret AUTH computation (RFC 7296 §2.15),
/// 17 ASCII octets, no terminator.
pub const KEY_PAD: &[u8] = b"Key Pad for IKEv2";

/// The signed octets for one side (RFC 7296 §2.15): `own_sa_init` is the
/// IKE_SA_INIT message this side sent (RealMessage1 for the initiator,
/// RealMessage2 for the responder), `peer_nonce` the peer's nonce data,
/// `sk_p` this side's SK_pi / SK_pr and `rest_of_id_payload` this side's
/// ID payload after its generic header.
pub fn signed_octets(
    prf: Prf<'_>,
    own_sa_init: &[u8],
    peer_nonce: &[u8],
    sk_p: &[u8],
    rest_of_id_payload: &[u8],
) -> Vec<u8> {
    let maced_id = prf(sk_p, &[rest_of_id_payload]);
    let mut octets = Vec::with_capacity(own_sa_init.len() + peer_nonce.len() + maced_id.len());
    octets.extend_from_slice(own_sa_init);
    octets.extend_from_slice(peer_nonce);
    octets.extend_from_slice(&maced_id);
    octets
}

/// The signed octets of one side after IKE_INTERMEDIATE exchanges
/// (RFC 9242 §3.3.2):
///
/// ```text
/// InitiatorSignedOctets = RealMessage1 | NonceRData | MACedIDForI | IntAuth
/// ResponderSignedOctets = RealMessage2 | NonceIData | MACedIDForR | IntAuth
/// IntAuth = IntAuth_iN | IntAuth_rN | IKE_AUTH_MID
/// ```
///
/// `int_auth` is IntAuth, the same for both sides; the other arguments are
/// those of [`signed_octets`], `sk_p` being the SK_pi / SK_pr in force
/// after the last IKE_INTERMEDIATE exchange. An empty `int_auth` (no
/// IKE_INTERMEDIATE exchange took place) gives exactly [`signed_octets`].
pub fn signed_octets_with_int_auth(
    prf: Prf<'_>,
    own_sa_init: &[u8],
    peer_nonce: &[u8],
    sk_p: &[u8],
    rest_of_id_payload: &[u8],
    int_auth: &[u8],
) -> Vec<u8> {
    let mut octets = signed_octets(prf, own_sa_init, peer_nonce, sk_p, rest_of_id_payload);
    octets.extend_from_slice(int_auth);
    octets
}

/// InitiatorSignedOctets = RealMessage1 | NonceRData | prf(SK_pi, RestOfInitIDPayload).
pub fn initiator_signed_octets(
    prf: Prf<'_>,
    real_message1: &[u8],
    nonce_r: &[u8],
    sk_pi: &[u8],
    rest_of_init_id_payload: &[u8],
) -> Vec<u8> {
    signed_octets(prf, real_message1, nonce_r, sk_pi, rest_of_init_id_payload)
}

/// ResponderSignedOctets = RealMessage2 | NonceIData | prf(SK_pr, RestOfRespIDPayload).
pub fn responder_signed_octets(
    prf: Prf<'_>,
    real_message2: &[u8],
    nonce_i: &[u8],
    sk_pr: &[u8],
    rest_of_resp_id_payload: &[u8],
) -> Vec<u8> {
    signed_octets(prf, real_message2, nonce_i, sk_pr, rest_of_resp_id_payload)
}

/// The AUTH data for auth method 2, Shared Key Message Integrity Code:
/// `prf(prf(shared_secret, "Key Pad for IKEv2"), signed_octets)`. With EAP
/// the MSK takes the place of the shared secret (RFC 7296 §2.16).
pub fn psk_auth(prf: Prf<'_>, shared_secret: &[u8], signed_octets: &[u8]) -> Vec<u8> {
    // The padded key is as secret as the shared secret itself.
    let padded_key = Zeroizing::new(prf(shared_secret, &[KEY_PAD]));
    prf(&padded_key, &[signed_octets])
}

/// Checks a peer's shared-key AUTH data, comparing in constant time.
pub fn verify_psk_auth(
    prf: Prf<'_>,
    shared_secret: &[u8],
    signed_octets: &[u8],
    received: &[u8],
) -> Result<(), AuthError> {
    let expected = psk_auth(prf, shared_secret, signed_octets);
    // `ct_eq` on slices of different lengths is false without early exit on content.
    if bool::from(expected.as_slice().ct_eq(received)) {
        Ok(())
    } else {
        Err(AuthError::PskMismatch)
    }
}
