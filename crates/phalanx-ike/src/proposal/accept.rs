//! The initiator's check of the responder's answer (RFC 7296 §3.3.6):
//! exactly one proposal, carrying the number of one we offered, with
//! exactly one transform of each type that proposal offered, each of which
//! it offered. Anything else is [`ProposalError::UnacceptableAnswer`].

use phalanx_crypto::PrfAlgorithm;
use phalanx_wire::ike::iana::{EncrId, EsnId, IntegId, KeId, PrfId, ProtocolId, TransformType};
use phalanx_wire::ike::{Proposal, SaPayload, Spi, Transform};

use super::{
    ah_suite, encr_key_bits, esp_suite, ike_cipher_supported, NegotiatedChild, NegotiatedIke,
    ProposalError,
};
use crate::config::EncrAlg;

const UNACCEPTABLE: ProposalError = ProposalError::UnacceptableAnswer;

/// Checks the responder's IKE SA answer against the SA payload we sent.
pub fn accept_ike_answer(
    ours_offered: &SaPayload,
    answer: &SaPayload,
) -> Result<NegotiatedIke, ProposalError> {
    let (proposal, chosen) = answered(ours_offered, answer, ProtocolId::IKE)?;
    let encr = chosen.encr()?;
    let integ = chosen.integ();
    let prf = PrfId(chosen.id(TransformType::PRF)?);
    let ke = KeId(chosen.id(TransformType::KE)?);
    let supported = ike_cipher_supported(encr, integ) && PrfAlgorithm::from_id(prf.0).is_some();
    if !supported || ke == KeId::NONE {
        return Err(UNACCEPTABLE);
    }
    Ok(NegotiatedIke {
        proposal_num: proposal.number,
        encr,
        integ,
        prf,
        ke,
        additional_ke: chosen.additional_ke(),
        peer_spi: match proposal.spi {
            Spi::Ike(spi) => Some(spi.to_be_bytes()),
            _ => None,
        },
    })
}

/// Checks the responder's ESP or AH answer against the SA payload we
/// sent (whose proposals are all of one protocol).
pub fn accept_child_answer(
    ours_offered: &SaPayload,
    answer: &SaPayload,
) -> Result<NegotiatedChild, ProposalError> {
    let protocol = ours_offered
        .proposals
        .first()
        .map_or(ProtocolId::ESP, |p| p.protocol_id);
    let (proposal, chosen) = answered(ours_offered, answer, protocol)?;
    let suite = if protocol == ProtocolId::AH {
        chosen.integ().and_then(ah_suite)
    } else {
        esp_suite(chosen.encr()?, chosen.integ())
    }
    .ok_or(UNACCEPTABLE)?;
    let esn = match EsnId(chosen.id(TransformType::ESN)?) {
        EsnId::YES => true,
        EsnId::NO => false,
        _ => return Err(UNACCEPTABLE),
    };
    let Spi::Child(peer_spi) = proposal.spi else {
        return Err(UNACCEPTABLE);
    };
    Ok(NegotiatedChild {
        proposal_num: proposal.number,
        suite,
        ke: chosen.id(TransformType::KE).ok().map(KeId),
        esn,
        peer_spi,
        additional_ke: chosen.additional_ke(),
    })
}

/// The one transform of each type the answer chose.
struct Chosen<'a> {
    transforms: Vec<&'a Transform>,
}

impl Chosen<'_> {
    fn get(&self, ty: TransformType) -> Option<&Transform> {
        self.transforms
            .iter()
            .copied()
            .find(|t| t.transform_type == ty)
    }

    fn id(&self, ty: TransformType) -> Result<u16, ProposalError> {
        self.get(ty).map(|t| t.transform_id).ok_or(UNACCEPTABLE)
    }

    fn encr(&self) -> Result<EncrAlg, ProposalError> {
        let t = self.get(TransformType::ENCR).ok_or(UNACCEPTABLE)?;
        let bits = encr_key_bits(t).ok_or(UNACCEPTABLE)?;
        Ok(EncrAlg::new(EncrId(t.transform_id), bits))
    }

    /// The integrity transform; NONE (with a combined-mode cipher) is none.
    fn integ(&self) -> Option<IntegId> {
        self.get(TransformType::INTEG)
            .map(|t| IntegId(t.transform_id))
            .filter(|id| *id != IntegId::NONE)
    }

    /// ADDKE1.. in type order; [`answered`] made sure they are the types
    /// we offered, which are contiguous.
    fn additional_ke(&self) -> Vec<KeId> {
        let mut addke: Vec<(u8, KeId)> = self
            .transforms
            .iter()
            .filter(|t| t.transform_type.is_additional_key_exchange())
            .map(|t| (t.transform_type.0, KeId(t.transform_id)))
            .collect();
        addke.sort_unstable_by_key(|(ty, _)| *ty);
        addke.into_iter().map(|(_, id)| id).collect()
    }
}

/// The structural checks of RFC 7296 §3.3.6; returns the answered
/// proposal and its transforms.
fn answered<'a>(
    ours_offered: &SaPayload,
    answer: &'a SaPayload,
    protocol: ProtocolId,
) -> Result<(&'a Proposal, Chosen<'a>), ProposalError> {
    let [proposal] = answer.proposals.as_slice() else {
        return Err(UNACCEPTABLE);
    };
    let offered = ours_offered
        .proposals
        .iter()
        .find(|p| p.number == proposal.number && p.protocol_id == protocol)
        .filter(|_| proposal.protocol_id == protocol)
        .ok_or(UNACCEPTABLE)?;
    // IKE: no SPI in IKE_SA_INIT, eight octets on a rekey, as we sent;
    // ESP: four octets.
    if proposal.spi.size() != offered.spi.size() {
        return Err(UNACCEPTABLE);
    }
    let mut chosen = Chosen {
        transforms: Vec::new(),
    };
    for t in &proposal.transforms {
        if chosen.get(t.transform_type).is_some() {
            return Err(UNACCEPTABLE);
        }
        if was_offered(offered, t) {
            chosen.transforms.push(t);
        } else if !is_integ_none_with_aead(offered, t) {
            return Err(UNACCEPTABLE);
        }
    }
    let all_answered = offered
        .transforms
        .iter()
        .all(|t| chosen.get(t.transform_type).is_some());
    if !all_answered {
        return Err(UNACCEPTABLE);
    }
    Ok((proposal, chosen))
}

fn was_offered(offered: &Proposal, t: &Transform) -> bool {
    offered.transforms.iter().any(|o| {
        o.transform_type == t.transform_type
            && o.transform_id == t.transform_id
            && o.key_length() == t.key_length()
    })
}

/// INTEG NONE answered to a proposal with no INTEG transform (a
/// combined-mode cipher): tolerated, and read as no integrity transform
/// (RFC 5282 §8 allows either form).
fn is_integ_none_with_aead(offered: &Proposal, t: &Transform) -> bool {
    t.transform_type == TransformType::INTEG
        && IntegId(t.transform_id) == IntegId::NONE
        && offered.transforms_of(TransformType::INTEG).next().is_none()
}
