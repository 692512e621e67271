//! The responder's choice (RFC 7296 §2.7, §3.3.6): one suite out of the
//! initiator's SA payload. Rules in the parent module's doc.

use phalanx_crypto::{KeGroup, PrfAlgorithm, Suite};
use phalanx_sa::IpsecProtocol;
use phalanx_wire::ike::iana::{IntegId, KeId, ProtocolId};
use phalanx_wire::ike::{Proposal, SaPayload, Spi};

use super::offer::Offer;
use super::{
    ah_suite, esp_suite, ike_cipher_supported, protocol_id, NegotiatedChild, NegotiatedIke,
    ProposalError,
};
use crate::config::{ChildProposal, EncrAlg, IkeProposal};

/// How the key exchange transform is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeRule {
    /// IKE without a KEi group given: the first acceptable group.
    First,
    /// A KE payload carried this group: choose it, or ask for another.
    Kei(KeId),
    /// IKE_AUTH: KE and ADDKE transforms are not negotiated (RFC 7296
    /// §1.2: no KE payload there, and the Child SA takes IKE_SA_INIT's
    /// keys).
    Ignore,
    /// CREATE_CHILD_SA without a KE payload: both sides must allow NONE.
    NoKe,
}

/// What matching one offered proposal against one of ours gave.
enum Outcome<N> {
    Chosen(N),
    /// Acceptable, but not with the KEi group: this group is wanted.
    WrongGroup(KeId),
    Mismatch,
}

/// Selects an IKE suite (RFC 7296 §2.7) and, among its groups, the first
/// acceptable in the initiator's order. When the KEi group is known, use
/// [`select_ike_for_kei`], which prefers it.
pub fn select_ike(
    ours: &[IkeProposal],
    offered: &SaPayload,
) -> Result<NegotiatedIke, ProposalError> {
    select(ours, offered, ProtocolId::IKE, KeRule::First, match_ike)
}

/// Selects an IKE suite whose KE is `kei`, the Diffie-Hellman Group Num of
/// the KEi payload. [`ProposalError::InvalidKe`] when a proposal is
/// acceptable only with another group (RFC 7296 §1.2).
pub fn select_ike_for_kei(
    ours: &[IkeProposal],
    offered: &SaPayload,
    kei: KeId,
) -> Result<NegotiatedIke, ProposalError> {
    select(ours, offered, ProtocolId::IKE, KeRule::Kei(kei), match_ike)
}

/// Selects an ESP or AH suite out of the offered proposals of that
/// protocol. `want_ke` is the KEi group of a CREATE_CHILD_SA request;
/// `None` means IKE_AUTH, where KE transforms are ignored on both sides
/// (RFC 7296 §1.2). For a CREATE_CHILD_SA without KEi use
/// [`select_child_create`], which refuses to drop PFS we require.
pub fn select_child(
    protocol: IpsecProtocol,
    ours: &[ChildProposal],
    offered: &SaPayload,
    want_ke: Option<KeId>,
) -> Result<NegotiatedChild, ProposalError> {
    let rule = want_ke.map_or(KeRule::Ignore, KeRule::Kei);
    select_of(protocol, ours, offered, rule)
}

/// Selects an ESP or AH suite in CREATE_CHILD_SA (RFC 7296 §1.3.1). With
/// a KEi group, as [`select_child`]; without, a proposal matches only if
/// both the initiator's (no KE transform, or NONE among them) and ours (no
/// groups, or NONE among them) allow going without PFS.
pub fn select_child_create(
    protocol: IpsecProtocol,
    ours: &[ChildProposal],
    offered: &SaPayload,
    kei: Option<KeId>,
) -> Result<NegotiatedChild, ProposalError> {
    let rule = kei.map_or(KeRule::NoKe, KeRule::Kei);
    select_of(protocol, ours, offered, rule)
}

fn select_of(
    protocol: IpsecProtocol,
    ours: &[ChildProposal],
    offered: &SaPayload,
    rule: KeRule,
) -> Result<NegotiatedChild, ProposalError> {
    let matcher = match protocol {
        IpsecProtocol::Esp => match_esp,
        IpsecProtocol::Ah => match_ah,
    };
    select(ours, offered, protocol_id(protocol), rule, matcher)
}

/// The selection loop shared by IKE and ESP: the initiator's proposals in
/// order, ours in order within each; the first full match wins; a match
/// that only lacks the KEi group is remembered for INVALID_KE_PAYLOAD.
fn select<P, N>(
    ours: &[P],
    offered: &SaPayload,
    protocol: ProtocolId,
    rule: KeRule,
    matcher: fn(&P, &Offer, &Proposal, KeRule) -> Outcome<N>,
) -> Result<N, ProposalError> {
    let mut wanted = None;
    for p in offered
        .proposals
        .iter()
        .filter(|p| p.protocol_id == protocol)
    {
        if !Offer::spi_fits(p, protocol) {
            return Err(ProposalError::Malformed);
        }
        let Some(offer) = Offer::read(p, protocol) else {
            continue;
        };
        for o in ours {
            match matcher(o, &offer, p, rule) {
                Outcome::Chosen(n) => return Ok(n),
                Outcome::WrongGroup(group) => {
                    wanted.get_or_insert(group);
                }
                Outcome::Mismatch => {}
            }
        }
    }
    Err(wanted.map_or(ProposalError::NoProposalChosen, |wanted| {
        ProposalError::InvalidKe { wanted }
    }))
}

fn match_ike(o: &IkeProposal, offer: &Offer, p: &Proposal, rule: KeRule) -> Outcome<NegotiatedIke> {
    let Some((encr, integ)) = pick_cipher(&o.encr, &o.integ, offer, ike_cipher_supported) else {
        return Outcome::Mismatch;
    };
    let prf = offer
        .prf
        .iter()
        .copied()
        .find(|id| o.prf.contains(id) && PrfAlgorithm::from_id(id.0).is_some());
    let Some(prf) = prf else {
        return Outcome::Mismatch;
    };
    let Some(additional_ke) = pick_additional_ke(&offer.additional_ke, &o.additional_ke) else {
        return Outcome::Mismatch;
    };
    let candidates = ke_candidates(offer.ke.as_deref().unwrap_or(&[]), &o.ke);
    let ke = match pick_group(&candidates, rule) {
        Ok(ke) => ke,
        Err(outcome) => return outcome,
    };
    Outcome::Chosen(NegotiatedIke {
        proposal_num: p.number,
        encr,
        integ,
        prf,
        ke,
        additional_ke,
        peer_spi: match p.spi {
            Spi::Ike(spi) => Some(spi.to_be_bytes()),
            _ => None,
        },
    })
}

fn match_esp(
    o: &ChildProposal,
    offer: &Offer,
    p: &Proposal,
    rule: KeRule,
) -> Outcome<NegotiatedChild> {
    let supported = |e, i| esp_suite(e, i).is_some();
    let suite = pick_cipher(&o.encr, &o.integ, offer, supported)
        .and_then(|(encr, integ)| esp_suite(encr, integ));
    match suite {
        Some(suite) => match_child(suite, o, offer, p, rule),
        None => Outcome::Mismatch,
    }
}

/// AH: the first offered integrity transform we hold (never NONE,
/// RFC 4302 has no AH without integrity).
fn match_ah(
    o: &ChildProposal,
    offer: &Offer,
    p: &Proposal,
    rule: KeRule,
) -> Outcome<NegotiatedChild> {
    let suite = offer
        .integ
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .filter(|i| **i != IntegId::NONE && o.integ.contains(i))
        .find_map(|i| ah_suite(*i));
    match suite {
        Some(suite) => match_child(suite, o, offer, p, rule),
        None => Outcome::Mismatch,
    }
}

/// What ESP and AH share once the suite is chosen: ESN, the SPI and the
/// key exchanges.
fn match_child(
    suite: Suite,
    o: &ChildProposal,
    offer: &Offer,
    p: &Proposal,
    rule: KeRule,
) -> Outcome<NegotiatedChild> {
    let (Some(esn), Spi::Child(peer_spi)) = (pick_esn(offer, &o.esn), p.spi) else {
        return Outcome::Mismatch;
    };
    let (ke, additional_ke) = match esp_key_exchange(o, offer, rule) {
        Ok(chosen) => chosen,
        Err(outcome) => return outcome,
    };
    Outcome::Chosen(NegotiatedChild {
        proposal_num: p.number,
        suite,
        ke,
        esn,
        peer_spi,
        additional_ke,
    })
}

type KeChoice = (Option<KeId>, Vec<KeId>);

/// The KE and ADDKE transforms of an ESP match under `rule`.
fn esp_key_exchange(
    o: &ChildProposal,
    offer: &Offer,
    rule: KeRule,
) -> Result<KeChoice, Outcome<NegotiatedChild>> {
    match rule {
        KeRule::Ignore => Ok((None, Vec::new())),
        KeRule::NoKe => without_ke(o, offer).ok_or(Outcome::Mismatch),
        KeRule::First | KeRule::Kei(_) => {
            // A KE payload with a proposal that has no KE transform, or
            // with our PFS-less proposal, cannot be answered.
            let offered = offer.ke.as_deref().ok_or(Outcome::Mismatch)?;
            let additional = pick_additional_ke(&offer.additional_ke, &o.additional_ke)
                .ok_or(Outcome::Mismatch)?;
            let ke = pick_group(&ke_candidates(offered, &o.ke), rule)?;
            Ok((Some(ke), additional))
        }
    }
}

/// CREATE_CHILD_SA without KEi: NONE must be allowed by both sides for the
/// KE type and every ADDKE type offered; NONE is echoed for each
/// (RFC 7296 §3.3.6: one transform of each type offered).
fn without_ke(o: &ChildProposal, offer: &Offer) -> Option<KeChoice> {
    let allows_none = |ids: &[KeId]| ids.contains(&KeId::NONE);
    let ours_allow = o.ke.is_empty() || allows_none(&o.ke);
    let theirs_allow = offer.ke.as_deref().is_none_or(allows_none);
    if !(ours_allow && theirs_allow) {
        return None;
    }
    if !offer.additional_ke.iter().all(|ids| allows_none(ids)) {
        return None;
    }
    let ke = offer.ke.as_ref().map(|_| KeId::NONE);
    Some((ke, vec![KeId::NONE; offer.additional_ke.len()]))
}

/// The first offered encryption transform we hold, with — unless it is a
/// combined-mode cipher — the first offered integrity transform we hold
/// that `supported` accepts with it. RFC 5282 §8: a combined-mode cipher
/// goes with no INTEG transform, or NONE.
fn pick_cipher(
    ours_encr: &[EncrAlg],
    ours_integ: &[IntegId],
    offer: &Offer,
    supported: impl Fn(EncrAlg, Option<IntegId>) -> bool,
) -> Option<(EncrAlg, Option<IntegId>)> {
    let offered_integ = offer.integ.as_deref().unwrap_or(&[]);
    for encr in offer.encr.iter().filter(|e| ours_encr.contains(e)) {
        if encr.is_aead() {
            let no_integ = offered_integ.iter().all(|i| *i == IntegId::NONE);
            if no_integ && supported(*encr, None) {
                return Some((*encr, None));
            }
            continue;
        }
        let integ = offered_integ.iter().find(|i| {
            **i != IntegId::NONE && ours_integ.contains(i) && supported(*encr, Some(**i))
        });
        if let Some(integ) = integ {
            return Some((*encr, Some(*integ)));
        }
    }
    None
}

/// The first offered ESN setting we accept (ours empty: no ESN).
fn pick_esn(offer: &Offer, ours: &[bool]) -> Option<bool> {
    let ours: &[bool] = if ours.is_empty() { &[false] } else { ours };
    offer
        .esn
        .as_deref()?
        .iter()
        .copied()
        .find(|e| ours.contains(e))
}

/// Offered groups (initiator's order) we hold and can run; NONE excluded.
fn ke_candidates(offered: &[KeId], ours: &[KeId]) -> Vec<KeId> {
    offered
        .iter()
        .copied()
        .filter(|id| *id != KeId::NONE && ours.contains(id) && KeGroup::from_id(id.0).is_some())
        .collect()
}

/// The group `rule` takes out of `candidates`.
fn pick_group<N>(candidates: &[KeId], rule: KeRule) -> Result<KeId, Outcome<N>> {
    let first = *candidates.first().ok_or(Outcome::Mismatch)?;
    match rule {
        KeRule::Kei(kei) if candidates.contains(&kei) => Ok(kei),
        KeRule::Kei(_) => Err(Outcome::WrongGroup(first)),
        _ => Ok(first),
    }
}

/// One method per ADDKE type (RFC 9370 §2.2.1): for each offered type the
/// first offered method we allow (NONE when ours holds it or configures
/// nothing for that type); a type we require but the initiator did not
/// offer fails the match.
fn pick_additional_ke(offered: &[Vec<KeId>], ours: &[Vec<KeId>]) -> Option<Vec<KeId>> {
    let allows = |ours: &[KeId], id: KeId| {
        if id == KeId::NONE {
            ours.is_empty() || ours.contains(&KeId::NONE)
        } else {
            ours.contains(&id) && KeGroup::from_id(id.0).is_some()
        }
    };
    let mut chosen = Vec::with_capacity(offered.len());
    for (i, ids) in offered.iter().enumerate() {
        let ours_i = ours.get(i).map_or(&[][..], Vec::as_slice);
        chosen.push(ids.iter().copied().find(|id| allows(ours_i, *id))?);
    }
    let required_beyond = ours
        .iter()
        .skip(offered.len())
        .any(|ids| !ids.is_empty() && !ids.contains(&KeId::NONE));
    (!required_beyond).then_some(chosen)
}
