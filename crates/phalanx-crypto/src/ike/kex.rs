//! IKEv2 key exchanges: the KE payload's Key Exchange Data and the shared
//! secret g^ir (RFC 7296 §1.2, §2.14, §3.4; RFC 9370 for additional ones).
//!
//! | group | id | KE data sent by each side | shared secret |
//! |---|---|---|---|
//! | MODP-2048 (RFC 3526 §3) | 14 | g^x, big-endian, 256 bytes | 256 bytes |
//! | ECP-256 (RFC 5903) | 19 | x \|\| y, 64 bytes (§7: no 0x04 prefix) | x of the common point, 32 bytes |
//! | ECP-384 (RFC 5903) | 20 | x \|\| y, 96 bytes | x, 48 bytes |
//! | Curve25519 (RFC 8031) | 31 | 32 bytes (§2) | 32 bytes |
//! | ML-KEM-768 (draft-ietf-ipsecme-ikev2-mlkem) | 36 | initiator: encapsulation key, 1184 bytes; responder: ciphertext, 1088 bytes | 32 bytes |
//!
//! One call per role: the initiator calls [`start_initiator`], sends
//! [`KexState::public_value`] and, with the peer's answer, calls
//! [`KexState::complete`]; the responder calls [`respond`] with the
//! initiator's value and gets both its own value and the shared secret —
//! for Diffie-Hellman and for the KEM alike.
//!
//! Peer values are checked (RFC 7296 §5, RFC 6989): the length against the
//! table above, ECP points on the curve (aws-lc decodes and checks them),
//! MODP values in 1 < y < p-1, an all-zero X25519 result refused (RFC 8031
//! §2), ML-KEM encapsulation keys by the FIPS 203 §7.2 modulus check.
//! Every refusal is [`CryptoError::BadLength`]: the value has the wrong
//! length or is not a valid value for the group, and the IKE layer answers
//! both the same way.
//!
//! Randomness: private keys are drawn from the caller's [`IkeRng`]. The
//! one exception is ML-KEM in aws-lc-rs, whose `kem` API generates the
//! decapsulation key and the encapsulation randomness only from AWS-LC's
//! own RNG; ML-KEM exchanges therefore are not reproducible from a seed.

use super::modp::ModpKey;
use super::IkeRng;
use crate::{CryptoError, CryptoProvider};
use phalanx_wire::ike::iana::KeId;
use zeroize::Zeroizing;

/// A key exchange method, Transform Type 4 (RFC 7296 §3.3.2, RFC 9370
/// §2.2.1), among those implemented here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeGroup {
    /// 2048-bit MODP group, id 14 (RFC 3526 §3).
    Modp2048,
    /// 256-bit random ECP group, id 19 (RFC 5903).
    Ecp256,
    /// 384-bit random ECP group, id 20 (RFC 5903).
    Ecp384,
    /// Curve25519, id 31 (RFC 8031).
    Curve25519,
    /// ML-KEM-768, id 36 (draft-ietf-ipsecme-ikev2-mlkem, FIPS 203).
    MlKem768,
}

/// Which side of one key exchange sent a value: the initiator of the
/// exchange that carries the KE payload, or its responder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeRole {
    /// The side that sent the request (KEi).
    Initiator,
    /// The side that sent the response (KEr).
    Responder,
}

impl KeGroup {
    /// The group for an IANA Transform Type 4 id, or `None` for one not
    /// implemented here.
    pub const fn from_id(id: u16) -> Option<KeGroup> {
        match id {
            14 => Some(KeGroup::Modp2048),
            19 => Some(KeGroup::Ecp256),
            20 => Some(KeGroup::Ecp384),
            31 => Some(KeGroup::Curve25519),
            36 => Some(KeGroup::MlKem768),
            _ => None,
        }
    }

    /// The IANA Transform Type 4 id (the KE payload's Diffie-Hellman
    /// Group Num, RFC 7296 §3.4).
    pub const fn id(self) -> u16 {
        match self {
            KeGroup::Modp2048 => 14,
            KeGroup::Ecp256 => 19,
            KeGroup::Ecp384 => 20,
            KeGroup::Curve25519 => 31,
            KeGroup::MlKem768 => 36,
        }
    }

    /// True for a key encapsulation mechanism, whose two sides send
    /// different things (an encapsulation key, then a ciphertext).
    pub const fn is_kem(self) -> bool {
        matches!(self, KeGroup::MlKem768)
    }

    /// The exact length of the Key Exchange Data `sender` puts in its KE
    /// payload; any other length is refused (RFC 7296 §3.4, RFC 5903 §7,
    /// RFC 8031 §2).
    pub const fn public_value_len(self, sender: KeRole) -> usize {
        match (self, sender) {
            (KeGroup::Modp2048, _) => super::modp::MODP_2048_LEN,
            (KeGroup::Ecp256, _) => 64,
            (KeGroup::Ecp384, _) => 96,
            (KeGroup::Curve25519, _) => 32,
            // FIPS 203 §8 Table 3: ML-KEM-768 ek 1184 bytes, c 1088 bytes.
            (KeGroup::MlKem768, KeRole::Initiator) => 1184,
            (KeGroup::MlKem768, KeRole::Responder) => 1088,
        }
    }

    /// Bytes of the shared secret.
    pub const fn shared_secret_len(self) -> usize {
        match self {
            KeGroup::Modp2048 => super::modp::MODP_2048_LEN,
            KeGroup::Ecp256 | KeGroup::Curve25519 | KeGroup::MlKem768 => 32,
            KeGroup::Ecp384 => 48,
        }
    }
}

impl TryFrom<KeId> for KeGroup {
    type Error = CryptoError;

    /// The group for a transform id (or KE payload Group Num) of the IKE
    /// codec; [`CryptoError::UnsupportedAlgorithm`] for one not
    /// implemented here (the IKE layer answers INVALID_KE_PAYLOAD or
    /// declines the proposal).
    fn try_from(id: KeId) -> Result<KeGroup, CryptoError> {
        KeGroup::from_id(id.0).ok_or(CryptoError::UnsupportedAlgorithm)
    }
}

impl From<KeGroup> for KeId {
    fn from(group: KeGroup) -> KeId {
        KeId(group.id())
    }
}

/// The Key Exchange Data length for an IANA group id and sender, or `None`
/// for a group not implemented here: the table the IKE layer checks KE
/// payload sizes against.
pub const fn public_value_len(group_id: u16, sender: KeRole) -> Option<usize> {
    match KeGroup::from_id(group_id) {
        Some(group) => Some(group.public_value_len(sender)),
        None => None,
    }
}

/// One side's ephemeral key, made by a provider: the private part stays
/// inside and is wiped when the state is dropped or completed.
pub trait KeyExchangeState: Send + Sync {
    /// The group.
    fn group(&self) -> KeGroup;

    /// The Key Exchange Data to send (IKE wire format, see the module table).
    fn public_value(&self) -> &[u8];

    /// The shared secret from the peer's Key Exchange Data (for a KEM, the
    /// decapsulated ciphertext). Consumes the private key.
    fn complete(self: Box<Self>, peer_public: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError>;
}

/// The initiator's side of one key exchange, waiting for the peer's value.
pub struct KexState {
    inner: Box<dyn KeyExchangeState>,
}

impl KexState {
    /// The group.
    pub fn group(&self) -> KeGroup {
        self.inner.group()
    }

    /// The Key Exchange Data to send in KEi.
    pub fn public_value(&self) -> &[u8] {
        self.inner.public_value()
    }

    /// The shared secret from the responder's Key Exchange Data (KEr).
    ///
    /// Errors: [`CryptoError::BadLength`] for a value of the wrong length
    /// or not valid for the group.
    pub fn complete(self, peer_public: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        let expected = self.group().public_value_len(KeRole::Responder);
        if peer_public.len() != expected {
            return Err(CryptoError::BadLength);
        }
        self.inner.complete(peer_public)
    }
}

impl core::fmt::Debug for KexState {
    /// Names the group; never prints the private key.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KexState")
            .field("group", &self.group())
            .finish_non_exhaustive()
    }
}

/// The responder's result: its Key Exchange Data for KEr and the shared
/// secret.
pub struct KexResponse {
    /// The Key Exchange Data to send in KEr.
    pub public_value: Vec<u8>,
    /// The shared secret.
    pub shared_secret: Zeroizing<Vec<u8>>,
}

impl core::fmt::Debug for KexResponse {
    /// Never prints the shared secret.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KexResponse")
            .field("public_value_len", &self.public_value.len())
            .finish_non_exhaustive()
    }
}

/// Starts a key exchange as its initiator: a fresh private key drawn from
/// `rng` (ML-KEM: see the module doc).
///
/// Errors: [`CryptoError::UnsupportedAlgorithm`] when `provider` lacks the group.
pub fn start_initiator(
    provider: &dyn CryptoProvider,
    group: KeGroup,
    rng: &mut dyn IkeRng,
) -> Result<KexState, CryptoError> {
    let inner = provider.key_exchange(group, rng)?;
    Ok(KexState { inner })
}

/// Answers a key exchange as its responder, given the initiator's Key
/// Exchange Data: for Diffie-Hellman a fresh key of our own and the agreed
/// secret, for a KEM an encapsulation to the initiator's key.
///
/// Errors: [`CryptoError::BadLength`] for a peer value of the wrong length
/// or not valid for the group; [`CryptoError::UnsupportedAlgorithm`] when
/// `provider` lacks the group.
pub fn respond(
    provider: &dyn CryptoProvider,
    group: KeGroup,
    peer_public: &[u8],
    rng: &mut dyn IkeRng,
) -> Result<KexResponse, CryptoError> {
    if peer_public.len() != group.public_value_len(KeRole::Initiator) {
        return Err(CryptoError::BadLength);
    }
    if group.is_kem() {
        return provider.kem_encapsulate(group, peer_public, rng);
    }
    let state = provider.key_exchange(group, rng)?;
    let public_value = state.public_value().to_vec();
    let shared_secret = state.complete(peer_public)?;
    Ok(KexResponse {
        public_value,
        shared_secret,
    })
}

/// The MODP-2048 key every provider hands out: the group is implemented
/// once, on `crypto-bigint`, for all of them.
pub(crate) fn modp_2048(rng: &mut dyn IkeRng) -> Box<dyn KeyExchangeState> {
    Box::new(ModpKey::generate(rng))
}

#[cfg(test)]
#[path = "kex_tests.rs"]
mod tests;
