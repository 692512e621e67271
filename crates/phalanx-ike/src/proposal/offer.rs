//! One received proposal, its transforms grouped by type (RFC 7296
//! §3.3.6), with what the responder must ignore already dropped.

use phalanx_wire::ike::iana::{
    EncrId, EsnId, IntegId, KeId, PrfId, ProtocolId, TransformAttributeType, TransformType,
};
use phalanx_wire::ike::{Proposal, Spi, Transform, TransformAttr};

use super::encr_key_bits;
use crate::config::EncrAlg;

/// The transforms of one offered proposal by type, each list in the
/// initiator's order. `None`: the type is absent; `Some(empty)`: present,
/// but with nothing we can read.
#[derive(Debug, Default)]
pub(super) struct Offer {
    pub(super) encr: Vec<EncrAlg>,
    pub(super) prf: Vec<PrfId>,
    pub(super) integ: Option<Vec<IntegId>>,
    pub(super) ke: Option<Vec<KeId>>,
    /// ADDKE1..ADDKEn, contiguous.
    pub(super) additional_ke: Vec<Vec<KeId>>,
    pub(super) esn: Option<Vec<bool>>,
}

/// Whether `ty` may appear in a proposal for `protocol` (RFC 7296
/// §3.3.3: AH has no ENCR; RFC 9370 §2.2.1 adds ADDKE to all three).
fn allowed(protocol: ProtocolId, ty: TransformType) -> bool {
    let common =
        ty == TransformType::INTEG || ty == TransformType::KE || ty.is_additional_key_exchange();
    match protocol {
        ProtocolId::IKE => common || ty == TransformType::ENCR || ty == TransformType::PRF,
        ProtocolId::AH => common || ty == TransformType::ESN,
        _ => common || ty == TransformType::ENCR || ty == TransformType::ESN,
    }
}

/// RFC 7296 §3.3.6: a transform with an attribute we do not understand is
/// ignored; Key Length (TV) is the only one defined (§3.3.5).
fn attributes_understood(t: &Transform) -> bool {
    t.attributes.iter().all(
        |a| matches!(a, TransformAttr::Tv { ty, .. } if *ty == TransformAttributeType::KEY_LENGTH),
    )
}

impl Offer {
    /// Reads `p` as a proposal for `protocol`. `None` when the proposal is
    /// unacceptable whatever we configure: a Transform Type unknown or out
    /// of place for the protocol, a mandatory type missing (§3.3.3: ENCR,
    /// PRF and KE for IKE; ENCR and ESN for ESP; INTEG and ESN for AH), or an ADDKE type without
    /// the one before it.
    pub(super) fn read(p: &Proposal, protocol: ProtocolId) -> Option<Offer> {
        let mut offer = Offer::default();
        let mut addke: [Option<Vec<KeId>>; 7] = Default::default();
        let (mut has_encr, mut has_prf, mut has_integ) = (false, false, false);
        for t in &p.transforms {
            let ty = t.transform_type;
            if !allowed(protocol, ty) {
                return None;
            }
            has_encr |= ty == TransformType::ENCR;
            has_prf |= ty == TransformType::PRF;
            has_integ |= ty == TransformType::INTEG;
            let slot = additional_slot(&mut addke, ty);
            if !attributes_understood(t) {
                continue;
            }
            offer.add(t, slot);
        }
        offer.additional_ke = contiguous(addke)?;
        let mandatory = match protocol {
            ProtocolId::IKE => has_encr && has_prf && offer.ke.is_some(),
            ProtocolId::AH => has_integ && offer.esn.is_some(),
            _ => has_encr && offer.esn.is_some(),
        };
        mandatory.then_some(offer)
    }

    /// Files one understood transform under its type; `addke` is the list
    /// of its ADDKE type, if it is one.
    fn add(&mut self, t: &Transform, addke: Option<&mut Vec<KeId>>) {
        let id = t.transform_id;
        if let Some(list) = addke {
            list.push(KeId(id));
            return;
        }
        match t.transform_type {
            TransformType::ENCR => {
                if let Some(bits) = encr_key_bits(t) {
                    self.encr.push(EncrAlg::new(EncrId(id), bits));
                }
            }
            TransformType::PRF => self.prf.push(PrfId(id)),
            TransformType::INTEG => self.integ.get_or_insert_with(Vec::new).push(IntegId(id)),
            TransformType::KE => self.ke.get_or_insert_with(Vec::new).push(KeId(id)),
            TransformType::ESN => {
                let esn = self.esn.get_or_insert_with(Vec::new);
                match EsnId(id) {
                    EsnId::YES => esn.push(true),
                    EsnId::NO => esn.push(false),
                    // An unknown ESN id is ignored (§3.3.6).
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// The SPI check of RFC 7296 §3.3.1: none or eight octets for IKE,
    /// four for ESP.
    pub(super) fn spi_fits(p: &Proposal, protocol: ProtocolId) -> bool {
        match (protocol, p.spi) {
            (ProtocolId::IKE, Spi::None | Spi::Ike(_)) => true,
            (ProtocolId::IKE, Spi::Child(_)) => false,
            (_, spi) => matches!(spi, Spi::Child(_)),
        }
    }
}

/// The ADDKE list of `ty` (created on first use), or `None` for the other
/// types.
fn additional_slot(
    addke: &mut [Option<Vec<KeId>>; 7],
    ty: TransformType,
) -> Option<&mut Vec<KeId>> {
    let index = usize::from(ty.0.checked_sub(TransformType::ADDKE1.0)?);
    addke.get_mut(index).map(|s| s.get_or_insert_with(Vec::new))
}

/// The ADDKE lists up to the last type present; `None` when one is missing
/// in between.
fn contiguous(addke: [Option<Vec<KeId>>; 7]) -> Option<Vec<Vec<KeId>>> {
    let present = addke.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
    addke.into_iter().take(present).collect()
}
