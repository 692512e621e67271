//! SA payloads and their negotiation (RFC 7296 §2.7, §3.3, §3.3.6;
//! RFC 9370 §2.2.1 for the additional key exchange types).
//!
//! - Offering: [`ike_sa_payload`] and [`child_sa_payload`] turn our
//!   [`IkeProposal`]s / [`ChildProposal`]s into an SA payload.
//! - Responding: [`select_ike`] / [`select_ike_for_kei`],
//!   [`select_child`] / [`select_child_create`] pick one suite from the
//!   initiator's SA payload; [`NegotiatedIke::answer_payload`] and
//!   [`NegotiatedChild::answer_payload`] build the one-proposal answer.
//! - Initiating: [`accept_ike_answer`] / [`accept_child_answer`] check the
//!   responder's answer against what we offered.
//!
//! Selection rules (RFC 7296 §2.7, §3.3.6): the initiator's proposals are
//! taken in its order, and within a proposal the first transform of each
//! type (in its order) that one of our proposals also holds; the chosen
//! combination always comes from a single proposal of ours. A proposal with
//! a Transform Type we do not know, a type that does not belong to its
//! protocol, or without a mandatory type is unacceptable; a transform with
//! an unknown ID or attribute is ignored. Only algorithms this
//! implementation can run are ever selected.
//!
//! Which key exchange: RFC 7296 §1.2 has the responder answer
//! INVALID_KE_PAYLOAD when the proposal it selects does not hold the KEi
//! group. Any acceptable proposal may be selected (§2.7), so a proposal
//! that accepts the KEi group is preferred over an earlier one that does
//! not; only when none does is the answer INVALID_KE_PAYLOAD, naming the
//! first acceptable group of the first acceptable proposal.

mod accept;
mod offer;
mod select;

use core::fmt;

use phalanx_crypto::ike::{sk_key_lengths, KeyLengths};
use phalanx_crypto::{CryptoError, PrfAlgorithm, Suite};
use phalanx_sa::IpsecProtocol;
use phalanx_wire::ike::iana::{
    EncrId, EsnId, IntegId, KeId, NotifyType, PrfId, ProtocolId, TransformType,
};
use phalanx_wire::ike::limits::MAX_PROPOSALS;
use phalanx_wire::ike::{Proposal, SaPayload, Spi, Transform};

use crate::config::{ChildProposal, EncrAlg, IkeProposal};

pub use accept::{accept_child_answer, accept_ike_answer};
pub use select::{select_child, select_child_create, select_ike, select_ike_for_kei};

/// Why a negotiation failed; each maps to the Notify that reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProposalError {
    /// No proposal of the peer is acceptable (RFC 7296 §2.7).
    NoProposalChosen,
    /// A proposal is acceptable but not with the KEi payload's group: the
    /// answer is INVALID_KE_PAYLOAD carrying `wanted` (RFC 7296 §1.2,
    /// §3.10.1).
    InvalidKe {
        /// The group we want the initiator to use.
        wanted: KeId,
    },
    /// The SA payload breaks RFC 7296 §3.3 (an SPI of the wrong size for
    /// its protocol).
    Malformed,
    /// The responder's answer is not one proposal of one transform per
    /// type, each of which we offered (RFC 7296 §3.3.6).
    UnacceptableAnswer,
}

impl ProposalError {
    /// The Notify Message Type that reports this error (RFC 7296 §3.10.1).
    pub fn notify_type(&self) -> NotifyType {
        match self {
            ProposalError::NoProposalChosen | ProposalError::UnacceptableAnswer => {
                NotifyType::NO_PROPOSAL_CHOSEN
            }
            ProposalError::InvalidKe { .. } => NotifyType::INVALID_KE_PAYLOAD,
            ProposalError::Malformed => NotifyType::INVALID_SYNTAX,
        }
    }

    /// The Notification Data: the two-octet group for INVALID_KE_PAYLOAD
    /// (RFC 7296 §3.10.1), empty otherwise.
    pub fn notify_data(&self) -> Vec<u8> {
        match self {
            ProposalError::InvalidKe { wanted } => wanted.0.to_be_bytes().to_vec(),
            _ => Vec::new(),
        }
    }
}

impl fmt::Display for ProposalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProposalError::NoProposalChosen => f.write_str("no acceptable proposal"),
            ProposalError::InvalidKe { wanted } => write!(f, "key exchange {wanted} wanted"),
            ProposalError::Malformed => f.write_str("malformed SA payload"),
            ProposalError::UnacceptableAnswer => f.write_str("answer is not one of our offers"),
        }
    }
}

impl std::error::Error for ProposalError {}

/// The suite of an IKE SA, as negotiated.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NegotiatedIke {
    /// The Proposal Num the suite came from (echoed in the answer).
    pub proposal_num: u8,
    /// Encryption.
    pub encr: EncrAlg,
    /// Integrity; `None` with a combined-mode cipher.
    pub integ: Option<IntegId>,
    /// PRF.
    pub prf: PrfId,
    /// Key exchange of IKE_SA_INIT (or of the CREATE_CHILD_SA rekeying the
    /// IKE SA).
    pub ke: KeId,
    /// RFC 9370: the method of ADDKE1, ADDKE2, … in type order, one entry
    /// per type offered; [`KeId::NONE`] where that exchange is skipped.
    pub additional_ke: Vec<KeId>,
    /// The peer's 8-octet SPI from the proposal (an IKE SA rekey,
    /// RFC 7296 §2.18); `None` in IKE_SA_INIT.
    pub peer_spi: Option<[u8; 8]>,
}

impl NegotiatedIke {
    /// The lengths of the seven keys (RFC 7296 §2.14).
    ///
    /// Errors: [`CryptoError::UnsupportedAlgorithm`] / `InvalidSuite` for a
    /// suite this implementation does not run — never for one that
    /// [`select_ike`] or [`accept_ike_answer`] returned. (The issue's
    /// contract returned `KeyLengths` bare; the fields are public, so the
    /// check has to be somewhere.)
    pub fn key_lengths(&self) -> Result<KeyLengths, CryptoError> {
        let prf = self.prf_algorithm()?;
        let integ = self.integ.unwrap_or(IntegId::NONE);
        let (encr, integ) = sk_key_lengths(self.encr.id, self.encr.key_bits, integ)?;
        Ok(KeyLengths::new(prf, integ, encr))
    }

    /// The PRF as the crypto layer names it.
    pub fn prf_algorithm(&self) -> Result<PrfAlgorithm, CryptoError> {
        PrfAlgorithm::try_from(self.prf)
    }

    /// The additional key exchanges to run, in order (RFC 9370 §2.2.2):
    /// those not NONE.
    pub fn additional_exchanges(&self) -> impl Iterator<Item = KeId> + '_ {
        self.additional_ke
            .iter()
            .copied()
            .filter(|id| *id != KeId::NONE)
    }

    /// The responder's one-proposal SA payload: the chosen transforms under
    /// the initiator's Proposal Num (RFC 7296 §3.3.6), with `our_spi` on an
    /// IKE SA rekey (§2.18) and no SPI in IKE_SA_INIT.
    pub fn answer_payload(&self, our_spi: Option<[u8; 8]>) -> SaPayload {
        let mut transforms = vec![encr_transform(self.encr), Transform::prf(self.prf)];
        transforms.extend(self.integ.map(Transform::integ));
        transforms.push(Transform::ke(TransformType::KE, self.ke));
        transforms.extend(additional_ke_transforms(&self.additional_ke));
        single_proposal(
            self.proposal_num,
            ProtocolId::IKE,
            ike_spi(our_spi),
            transforms,
        )
    }
}

/// The suite of a Child SA, as negotiated.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NegotiatedChild {
    /// The Proposal Num the suite came from.
    pub proposal_num: u8,
    /// Encryption and integrity, as the data plane keys them.
    pub suite: Suite,
    /// The KE transform chosen: `Some(group)` for PFS, `Some(KeId::NONE)`
    /// when the initiator offered NONE and no PFS was chosen, `None` when
    /// no KE transform was negotiated (IKE_AUTH, RFC 7296 §1.2). See
    /// [`Self::pfs_group`].
    pub ke: Option<KeId>,
    /// Extended Sequence Numbers.
    pub esn: bool,
    /// The peer's SPI: the SPI of the SA that carries traffic to the peer.
    pub peer_spi: u32,
    /// RFC 9370 §2.2.4: additional key exchanges, as in
    /// [`NegotiatedIke::additional_ke`]. (An addition to the contract.)
    pub additional_ke: Vec<KeId>,
}

impl NegotiatedChild {
    /// Bytes of encryption key material per direction, salt included
    /// (RFC 7296 §2.17, RFC 4106 §8.1).
    pub fn encr_key_len(&self) -> usize {
        self.suite.encr_key_len()
    }

    /// Bytes of integrity key material per direction (0 for AEADs).
    pub fn integ_key_len(&self) -> usize {
        self.suite.integ_key_len()
    }

    /// The PFS group, if a key exchange takes place.
    pub fn pfs_group(&self) -> Option<KeId> {
        self.ke.filter(|id| *id != KeId::NONE)
    }

    /// The additional key exchanges to run, in order (RFC 9370 §2.2.4).
    pub fn additional_exchanges(&self) -> impl Iterator<Item = KeId> + '_ {
        self.additional_ke
            .iter()
            .copied()
            .filter(|id| *id != KeId::NONE)
    }

    /// ESP or AH.
    pub fn protocol(&self) -> IpsecProtocol {
        suite_protocol(&self.suite)
    }

    /// The responder's one-proposal SA payload with `our_spi`, the SPI the
    /// peer sends to (RFC 7296 §3.3.1).
    pub fn answer_payload(&self, our_spi: u32) -> SaPayload {
        let mut transforms = Vec::new();
        if !self.suite.ah {
            let encr = EncrAlg::new(self.suite.encr, self.suite.encr_key_bits);
            transforms.push(encr_transform(encr));
        }
        if self.suite.integ != IntegId::NONE {
            transforms.push(Transform::integ(self.suite.integ));
        }
        transforms.extend(self.ke.map(|id| Transform::ke(TransformType::KE, id)));
        transforms.extend(additional_ke_transforms(&self.additional_ke));
        transforms.push(esn_transform(self.esn));
        single_proposal(
            self.proposal_num,
            protocol_id(self.protocol()),
            Spi::Child(our_spi),
            transforms,
        )
    }
}

/// Our IKE proposals as an SA payload, numbered from 1 (RFC 7296 §3.3.1),
/// at most [`MAX_PROPOSALS`]. `spi` is our new SPI on an IKE SA rekey
/// (§2.18); `None` in IKE_SA_INIT, where the SPI is in the header.
pub fn ike_sa_payload(ours: &[IkeProposal], spi: Option<[u8; 8]>) -> SaPayload {
    numbered(ours, |number, p| Proposal {
        number,
        protocol_id: ProtocolId::IKE,
        spi: ike_spi(spi),
        transforms: ike_transforms(p),
    })
}

/// Our ESP or AH proposals as an SA payload with our inbound `spi`. KE
/// (and ADDKE) transforms only `with_ke`: PFS in CREATE_CHILD_SA, never in
/// IKE_AUTH (RFC 7296 §1.2). The ESN transform is always there (§3.3.3:
/// mandatory for ESP and AH).
pub fn child_sa_payload(
    protocol: IpsecProtocol,
    ours: &[ChildProposal],
    spi: u32,
    with_ke: bool,
) -> SaPayload {
    numbered(ours, |number, p| Proposal {
        number,
        protocol_id: protocol_id(protocol),
        spi: Spi::Child(spi),
        transforms: esp_transforms(p, with_ke),
    })
}

fn numbered<T>(ours: &[T], make: impl Fn(u8, &T) -> Proposal) -> SaPayload {
    let proposals = ours
        .iter()
        .take(MAX_PROPOSALS)
        .zip(1u8..)
        .map(|(p, number)| make(number, p))
        .collect();
    SaPayload { proposals }
}

fn ike_transforms(p: &IkeProposal) -> Vec<Transform> {
    let mut t: Vec<Transform> = p.encr.iter().map(|e| encr_transform(*e)).collect();
    t.extend(p.prf.iter().map(|id| Transform::prf(*id)));
    // RFC 7296 §3.3: no integrity transform with combined-mode ciphers.
    if !p.encr.iter().all(EncrAlg::is_aead) {
        t.extend(p.integ.iter().map(|id| Transform::integ(*id)));
    }
    t.extend(p.ke.iter().map(|id| Transform::ke(TransformType::KE, *id)));
    t.extend(offered_additional_ke(&p.additional_ke));
    t
}

/// The Protocol ID of a Child SA's SA payload (RFC 7296 §3.3.1).
pub fn protocol_id(protocol: IpsecProtocol) -> ProtocolId {
    match protocol {
        IpsecProtocol::Esp => ProtocolId::ESP,
        IpsecProtocol::Ah => ProtocolId::AH,
    }
}

/// ESP or AH: the protocol a Child SA suite runs.
pub fn suite_protocol(suite: &Suite) -> IpsecProtocol {
    if suite.ah {
        IpsecProtocol::Ah
    } else {
        IpsecProtocol::Esp
    }
}

/// ESP's or AH's transforms (AH: no ENCR, §3.3.3).
fn esp_transforms(p: &ChildProposal, with_ke: bool) -> Vec<Transform> {
    let mut t: Vec<Transform> = p.encr.iter().map(|e| encr_transform(*e)).collect();
    let combined_mode = !p.encr.is_empty() && p.encr.iter().all(EncrAlg::is_aead);
    if !combined_mode {
        t.extend(p.integ.iter().map(|id| Transform::integ(*id)));
    }
    if with_ke && !p.ke.is_empty() {
        t.extend(p.ke.iter().map(|id| Transform::ke(TransformType::KE, *id)));
        t.extend(offered_additional_ke(&p.additional_ke));
    }
    if p.esn.is_empty() {
        t.push(esn_transform(false));
    }
    t.extend(p.esn.iter().map(|on| esn_transform(*on)));
    t
}

/// ADDKE1.. transforms of every method of each type (RFC 9370 §2.2.1).
fn offered_additional_ke(types: &[Vec<KeId>]) -> Vec<Transform> {
    types
        .iter()
        .zip(additional_ke_types())
        .flat_map(|(ids, ty)| ids.iter().map(move |id| Transform::ke(ty, *id)))
        .collect()
}

/// One ADDKE transform per negotiated type.
fn additional_ke_transforms(chosen: &[KeId]) -> Vec<Transform> {
    chosen
        .iter()
        .zip(additional_ke_types())
        .map(|(id, ty)| Transform::ke(ty, *id))
        .collect()
}

/// ADDKE1 (6) through ADDKE7 (12), RFC 9370 §2.2.1.
fn additional_ke_types() -> impl Iterator<Item = TransformType> {
    (TransformType::ADDKE1.0..=TransformType::ADDKE7.0).map(TransformType)
}

/// An ENCR transform, with Key Length where the cipher takes one
/// (RFC 7296 §3.3.5).
fn encr_transform(e: EncrAlg) -> Transform {
    let key_length = e.has_key_length_attribute().then_some(e.key_bits);
    Transform::encr(e.id, key_length)
}

fn esn_transform(on: bool) -> Transform {
    Transform::esn(if on { EsnId::YES } else { EsnId::NO })
}

fn ike_spi(spi: Option<[u8; 8]>) -> Spi {
    spi.map_or(Spi::None, |s| Spi::Ike(u64::from_be_bytes(s)))
}

fn single_proposal(
    number: u8,
    protocol_id: ProtocolId,
    spi: Spi,
    transforms: Vec<Transform>,
) -> SaPayload {
    SaPayload {
        proposals: vec![Proposal {
            number,
            protocol_id,
            spi,
            transforms,
        }],
    }
}

/// Whether the crypto layer runs this IKE encryption/integrity pair.
fn ike_cipher_supported(encr: EncrAlg, integ: Option<IntegId>) -> bool {
    sk_key_lengths(encr.id, encr.key_bits, integ.unwrap_or(IntegId::NONE)).is_ok()
}

/// The ESP suite of an encryption/integrity pair, if the data plane runs
/// it.
fn esp_suite(encr: EncrAlg, integ: Option<IntegId>) -> Option<Suite> {
    let suite = Suite::esp(encr.id, encr.key_bits, integ.unwrap_or(IntegId::NONE));
    suite.validate().ok().map(|()| suite)
}

/// The AH suite of an integrity transform, if this implementation runs it.
fn ah_suite(integ: IntegId) -> Option<Suite> {
    let suite = Suite::ah(integ);
    suite.validate().ok().map(|()| suite)
}

/// ChaCha20-Poly1305's key size when no Key Length attribute is sent
/// (RFC 7634 §2).
const CHACHA_KEY_BITS: u16 = 256;

/// The key size of an ENCR transform: its Key Length attribute, or 256 for
/// ChaCha20-Poly1305 without one.
fn encr_key_bits(t: &Transform) -> Option<u16> {
    match (EncrId(t.transform_id), t.key_length()) {
        (EncrId::CHACHA20_POLY1305, None) => Some(CHACHA_KEY_BITS),
        (_, bits) => bits,
    }
}

#[cfg(test)]
#[path = "proposal_tests.rs"]
mod tests;
