//! Child SA negotiation, shared by IKE_AUTH and CREATE_CHILD_SA
//! (RFC 7296 §1.2, §1.3.1, §1.3.3, §2.9, §2.17).
//!
//! ```text
//! KEYMAT = prf+(SK_d, Ni | Nr)               (IKE_AUTH, or no PFS)
//! KEYMAT = prf+(SK_d, g^ir (new) | Ni | Nr)  (CREATE_CHILD_SA with KE)
//! KEYMAT = prf+(SK_d, SK(0) | Ni | Nr | SK(1) | ... SK(n))
//!                     (RFC 9370 §2.2.4: with n additional key exchanges
//!                      in IKE_FOLLOWUP_KE, see [`followup`](super::followup))
//! ```
//!
//! KEYMAT gives the initiator-to-responder keys first, then the
//! responder-to-initiator keys (§2.17). Make-before-break: the responder
//! installs its inbound SA before its answer leaves; the initiator installs
//! inbound then outbound when the answer arrives; the responder's outbound
//! follows its answer for a new SA, and for a rekey waits until the old SA
//! is deleted by the rekey initiator (who by then receives on the new one).

use core::net::IpAddr;
use std::collections::VecDeque;
use std::sync::Arc;

use phalanx_crypto::ike::{child_keymat, respond, start_initiator, ChildKeys, KexState};
use phalanx_crypto::{KeGroup, Suite};
use phalanx_sa::{IpsecProtocol, SaMode, Selector};
use phalanx_wire::ike::iana::{IntegId, KeId, NotifyType, PayloadType};
use phalanx_wire::ike::{
    KePayload, NoncePayload, NotifyPayload, Payload, SaPayload, TrafficSelector, TsPayload,
};

use crate::config::{ChildConfig, ChildProposal, Connection, EncrAlg};
use crate::counters::Counter;
use crate::error::IkeError;
use crate::events::{ChildSaInstall, SaEvent};
use crate::exchange::followup::Answered;
use crate::exchange::{notify, Found};
use crate::ha::ChildSaKeys;
use crate::ike_sa::{ChildSa, ChildStatus, Ctx, IkeSa};
use crate::limits::NONCE_LEN;
use crate::proposal::{
    accept_child_answer, child_sa_payload, protocol_id, select_child, select_child_create,
    NegotiatedChild, ProposalError,
};
use crate::timers::{after, ChildTimer, TimerTable};
use crate::ts::{check_narrowed, narrow_pair, to_selectors, ts_host, TsRole};

/// Our side of a Child SA negotiation in flight.
pub(crate) struct ChildOffer {
    /// The child config's name.
    pub(crate) config: String,
    /// Our inbound SPI in the offer.
    pub(crate) spi_in: u32,
    /// SAi2 as sent.
    pub(crate) offered: SaPayload,
    /// TSi as sent (our side).
    pub(crate) tsi: Vec<TrafficSelector>,
    /// TSr as sent (the peer's side).
    pub(crate) tsr: Vec<TrafficSelector>,
    /// We asked for transport mode.
    pub(crate) transport: bool,
    /// Our PFS key exchange, if any (CREATE_CHILD_SA only).
    pub(crate) kex: Option<KexState>,
    /// Ni (CREATE_CHILD_SA only; IKE_AUTH uses IKE_SA_INIT's).
    pub(crate) ni: Vec<u8>,
    /// Our inbound SPI of the SA this rekeys.
    pub(crate) rekey_of: Option<u32>,
    /// The packet that triggered it.
    pub(crate) trigger: Option<(IpAddr, IpAddr)>,
    /// Retries after TEMPORARY_FAILURE / INVALID_KE_PAYLOAD so far.
    pub(crate) retries: u32,
    /// ESP or AH (the SA payload's Protocol ID, and REKEY_SA's).
    pub(crate) protocol: IpsecProtocol,
}

/// A negotiated Child SA whose keys are not derived yet: with RFC 9370
/// additional key exchanges they come after the last IKE_FOLLOWUP_KE.
pub(crate) struct ChildDraft {
    pub(crate) config: String,
    pub(crate) spi_in: u32,
    pub(crate) negotiated: NegotiatedChild,
    pub(crate) transport: bool,
    pub(crate) local_ts: Vec<TrafficSelector>,
    pub(crate) remote_ts: Vec<TrafficSelector>,
    /// We initiated the exchange that created it (KEYMAT orientation).
    pub(crate) initiator: bool,
    /// Ni and Nr of the CREATE_CHILD_SA (or IKE_SA_INIT for IKE_AUTH).
    pub(crate) nonces: (Vec<u8>, Vec<u8>),
}

impl ChildDraft {
    /// The key exchange methods still to run in IKE_FOLLOWUP_KE, in
    /// ADDKE type order (RFC 9370 §2.2.4).
    pub(crate) fn additional_exchanges(&self) -> VecDeque<KeId> {
        self.negotiated.additional_exchanges().collect()
    }

    fn keyed(self, keys: ChildKeys) -> NewChild {
        NewChild { draft: self, keys }
    }
}

/// A negotiated Child SA with its keys, not yet recorded.
pub(crate) struct NewChild {
    pub(crate) draft: ChildDraft,
    pub(crate) keys: ChildKeys,
}

/// The proposal that re-offers exactly what a Child SA runs (RFC 7296
/// §2.8: a rekeyed SA SHOULD NOT change algorithms or selectors).
fn same_suite(child: &ChildSa) -> ChildProposal {
    let suite = child.suite;
    ChildProposal {
        encr: if suite.ah {
            Vec::new()
        } else {
            vec![EncrAlg::new(suite.encr, suite.encr_key_bits)]
        },
        integ: if suite.integ == IntegId::NONE {
            Vec::new()
        } else {
            vec![suite.integ]
        },
        ke: child.pfs.into_iter().collect(),
        esn: vec![child.esn],
        // RFC 9370 §2.2.4: the additional key exchanges run again in
        // IKE_FOLLOWUP_KE, so a hybrid Child SA stays hybrid.
        additional_ke: child.additional_ke.clone(),
    }
}

/// Our proposals, RFC 9370 additional key exchanges included: in
/// CREATE_CHILD_SA they run in IKE_FOLLOWUP_KE; IKE_AUTH leaves KE and
/// ADDKE transforms out of the offer and the choice (RFC 7296 §1.2).
fn esp_offers(cfg: &ChildConfig) -> Vec<ChildProposal> {
    cfg.proposals.clone()
}

/// The first PFS group our proposals name, if any.
fn first_pfs_group(proposals: &[ChildProposal]) -> Option<KeId> {
    proposals
        .iter()
        .flat_map(|p| p.ke.iter())
        .copied()
        .find(|g| *g != KeId::NONE)
}

/// The ADDKE methods (per type, as configured) of the first proposal with
/// a PFS group: what a Child SA made in IKE_AUTH offers on its first rekey.
pub(crate) fn first_pfs_additional_ke(cfg: &ChildConfig) -> Vec<Vec<KeId>> {
    cfg.proposals
        .iter()
        .find(|p| p.ke.iter().any(|g| *g != KeId::NONE))
        .map(|p| p.additional_ke.clone())
        .unwrap_or_default()
}

/// The child config of a connection by name.
pub(crate) fn child_config<'a>(conn: &'a Connection, name: &str) -> Option<&'a ChildConfig> {
    conn.children.iter().find(|c| c.name == name)
}

/// Data-plane selectors from `src` to `dst` traffic selectors. Both
/// roles check that the selectors convert before a Child SA is accepted,
/// so the fallback to none is never taken.
pub(crate) fn selectors(src: &[TrafficSelector], dst: &[TrafficSelector]) -> Vec<Selector> {
    to_selectors(src, dst).unwrap_or_default()
}

/// A key exchange's shared secret.
pub(crate) type Secret = zeroize::Zeroizing<Vec<u8>>;

/// The initiator's PFS shared secret: the answer must use the group we
/// offered a KE payload for, or none if we offered none.
fn pfs_secret(
    kex: Option<KexState>,
    negotiated: &NegotiatedChild,
    found: &Found<'_>,
) -> Result<Option<Secret>, IkeError> {
    match (kex, negotiated.pfs_group()) {
        (None, None) => Ok(None),
        (Some(kex), Some(group)) if KeId::from(kex.group()) == group => {
            let ke = found.ke.ok_or(IkeError::MissingPayload(PayloadType::KE))?;
            if ke.group != group {
                return Err(IkeError::Malformed);
            }
            Ok(Some(
                kex.complete(&ke.data).map_err(|_| IkeError::Malformed)?,
            ))
        }
        _ => Err(IkeError::NoProposalChosen),
    }
}

/// The responder's side of PFS: answer the KEi payload with the
/// negotiated group (§1.3.1). INVALID_KE_PAYLOAD when the KEi payload
/// is missing or of another group.
fn pfs_answer(
    ctx: &mut Ctx<'_>,
    negotiated: &NegotiatedChild,
    kei: Option<&KePayload>,
) -> Result<(Option<Secret>, Option<KePayload>), IkeError> {
    match (negotiated.pfs_group(), kei) {
        (Some(group), Some(ke)) if ke.group == group => {
            let g = KeGroup::try_from(group)?;
            let answer = respond(ctx.provider, g, &ke.data, &mut *ctx.rng)
                .map_err(|_| IkeError::Malformed)?;
            let ker = KePayload {
                group,
                data: answer.public_value,
            };
            Ok((Some(answer.shared_secret), Some(ker)))
        }
        (None, _) => Ok((None, None)),
        (Some(group), _) => Err(IkeError::InvalidKe(group)),
    }
}

impl IkeSa {
    /// Builds an offer for a Child SA: a new one of config `name`, or a
    /// rekey of our inbound SPI `rekey_of`. `create` is CREATE_CHILD_SA
    /// (nonce, optional PFS KE); otherwise IKE_AUTH.
    pub(crate) fn make_child_offer(
        &mut self,
        ctx: &mut Ctx<'_>,
        name: &str,
        trigger: Option<(IpAddr, IpAddr)>,
        rekey_of: Option<u32>,
        create: bool,
        group: Option<KeId>,
    ) -> Option<ChildOffer> {
        let conn = Arc::clone(&self.conn);
        let cfg = child_config(&conn, name)?;
        let old = rekey_of.and_then(|spi| self.children.iter().find(|c| c.spi_in == spi));
        let (protocol, proposals, mut tsi, mut tsr) = match old {
            Some(old) => (
                old.protocol(),
                vec![same_suite(old)],
                old.local_ts.clone(),
                old.remote_ts.clone(),
            ),
            None => (
                cfg.protocol,
                esp_offers(cfg),
                cfg.local_ts.clone(),
                cfg.remote_ts.clone(),
            ),
        };
        if protocol == IpsecProtocol::Ah && self.udp_encap().is_some() {
            self.report_child_failure(ctx, name, &IkeError::AhThroughNat);
            return None;
        }
        if let Some((src, dst)) = trigger {
            tsi.insert(0, ts_host(src));
            tsr.insert(0, ts_host(dst));
        }
        let group = group
            .or_else(|| first_pfs_group(&proposals))
            .filter(|_| create);
        let kex = match group {
            Some(g) => {
                let g = KeGroup::try_from(g).ok()?;
                Some(start_initiator(ctx.provider, g, &mut *ctx.rng).ok()?)
            }
            None => None,
        };
        let spi_in = ctx.new_child_spi();
        Some(ChildOffer {
            config: name.to_owned(),
            spi_in,
            offered: child_sa_payload(protocol, &proposals, spi_in, create),
            tsi,
            tsr,
            transport: matches!(cfg.mode, SaMode::Transport),
            kex,
            ni: if create {
                ctx.random_bytes(NONCE_LEN)
            } else {
                Vec::new()
            },
            rekey_of,
            trigger,
            retries: 0,
            protocol,
        })
    }

    /// The payloads of an offer: [N(REKEY_SA)], [N(USE_TRANSPORT_MODE)],
    /// SA, [Ni], [KEi], TSi, TSr (§1.3.1, §1.3.3, §3.10.1).
    pub(crate) fn child_offer_payloads(&self, offer: &ChildOffer) -> Vec<Payload> {
        let mut out = Vec::new();
        if let Some(old) = offer.rekey_of {
            // §1.3.3: the SPI of the SA being rekeyed, as we receive on it.
            out.push(Payload::Notify(NotifyPayload::for_child(
                protocol_id(offer.protocol),
                old,
                NotifyType::REKEY_SA,
            )));
        }
        if offer.transport {
            out.push(notify(NotifyType::USE_TRANSPORT_MODE, Vec::new()));
        }
        out.push(Payload::Sa(offer.offered.clone()));
        if !offer.ni.is_empty() {
            out.push(Payload::Nonce(NoncePayload {
                data: offer.ni.clone(),
            }));
        }
        if let Some(kex) = &offer.kex {
            out.push(Payload::Ke(KePayload {
                group: kex.group().into(),
                data: kex.public_value().to_vec(),
            }));
        }
        out.push(Payload::Tsi(TsPayload::new(offer.tsi.clone())));
        out.push(Payload::Tsr(TsPayload::new(offer.tsr.clone())));
        out
    }

    /// Drops an offer that will not complete (its SPI is released).
    pub(crate) fn abandon_offer(&mut self, ctx: &mut Ctx<'_>, offer: Option<ChildOffer>) {
        if let Some(offer) = offer {
            ctx.free_child_spi(offer.spi_in);
        }
    }

    /// Initiator: checks the responder's answer to an offer and completes
    /// the first key exchange; the keys follow once every additional one
    /// is done ([`Self::key_child`]). `nonces` are IKE_SA_INIT's for
    /// IKE_AUTH; `None` takes Ni from the offer and Nr from the answer.
    /// Returns the draft and SK(0), if PFS was negotiated.
    pub(crate) fn accept_child(
        &self,
        offer: &mut ChildOffer,
        found: &Found<'_>,
        nonces: Option<(Vec<u8>, Vec<u8>)>,
    ) -> Result<(ChildDraft, Option<Secret>), IkeError> {
        if let Some(error) = found.error() {
            return Err(IkeError::PeerError(error));
        }
        let sa = found.sa.ok_or(IkeError::MissingPayload(PayloadType::SA))?;
        let tsi = found
            .tsi
            .ok_or(IkeError::MissingPayload(PayloadType::TSi))?;
        let tsr = found
            .tsr
            .ok_or(IkeError::MissingPayload(PayloadType::TSr))?;
        let negotiated =
            accept_child_answer(&offer.offered, sa).map_err(|_| IkeError::NoProposalChosen)?;
        // §2.9: the responder may only narrow what we proposed.
        let within = check_narrowed(&offer.tsi, &tsi.selectors).is_ok()
            && check_narrowed(&offer.tsr, &tsr.selectors).is_ok()
            && to_selectors(&tsi.selectors, &tsr.selectors).is_ok();
        if !within {
            return Err(IkeError::TsUnacceptable);
        }
        let (ni, nr) = match nonces {
            Some(n) => n,
            None => {
                let nr = found
                    .nonce
                    .ok_or(IkeError::MissingPayload(PayloadType::NONCE))?;
                (offer.ni.clone(), nr.data.clone())
            }
        };
        let shared = pfs_secret(offer.kex.take(), &negotiated, found)?;
        let draft = ChildDraft {
            config: offer.config.clone(),
            spi_in: offer.spi_in,
            transport: offer.transport && found.has(NotifyType::USE_TRANSPORT_MODE),
            negotiated,
            local_ts: tsi.selectors.clone(),
            remote_ts: tsr.selectors.clone(),
            initiator: true,
            nonces: (ni, nr),
        };
        Ok((draft, shared))
    }

    /// Derives the keys of a draft from the shared secrets of every key
    /// exchange, SK(0) first (RFC 9370 §2.2.4; none without PFS).
    pub(crate) fn key_child(
        &self,
        ctx: &Ctx<'_>,
        draft: ChildDraft,
        secrets: &[Secret],
    ) -> Result<NewChild, IkeError> {
        let parts: Vec<&[u8]> = secrets.iter().map(|s| s.as_slice()).collect();
        let keys = self.child_keys(
            ctx,
            &draft.negotiated,
            &parts,
            &draft.nonces.0,
            &draft.nonces.1,
        )?;
        Ok(draft.keyed(keys))
    }

    /// KEYMAT = prf+(SK_d, [SK(0) |] Ni | Nr [| SK(1) | ... SK(n)]), split
    /// (§2.17, RFC 9370 §2.2.4; the concatenation is the crypto layer's).
    fn child_keys(
        &self,
        ctx: &Ctx<'_>,
        negotiated: &NegotiatedChild,
        secrets: &[&[u8]],
        ni: &[u8],
        nr: &[u8],
    ) -> Result<ChildKeys, IkeError> {
        let crypto = self.crypto.as_ref().ok_or(IkeError::Malformed)?;
        let (encr, integ) = (negotiated.encr_key_len(), negotiated.integ_key_len());
        let len = ChildKeys::keymat_len(encr, integ);
        let keymat = child_keymat(
            ctx.provider,
            crypto.prf,
            &crypto.keys.sk_d,
            secrets,
            ni,
            nr,
            len,
        )?;
        Ok(ChildKeys::split(&keymat, encr, integ)?)
    }

    /// Responder: picks a child config whose selectors and proposals
    /// accept the request and builds the answer: [N(USE_TRANSPORT_MODE)],
    /// SA, [Nr], [KEr], TSi, TSr. `only` limits the choice to one config
    /// (a rekey keeps its config). Emits `InstallInbound` and returns the
    /// new inbound SPI; the outbound SA is held in the new child for the
    /// caller to release. With RFC 9370 additional key exchanges the
    /// answer also carries N(ADDITIONAL_KEY_EXCHANGE) and nothing is
    /// installed yet (`None`): the last IKE_FOLLOWUP_KE completes it, as
    /// a rekey of our inbound SPI `rekey_of` or a new SA.
    pub(crate) fn respond_child(
        &mut self,
        ctx: &mut Ctx<'_>,
        found: &Found<'_>,
        nonces: (&[u8], &[u8]),
        create: bool,
        (only, rekey_of): (Option<&str>, Option<u32>),
    ) -> Result<(Vec<Payload>, Option<u32>), IkeError> {
        let sa = found.sa.ok_or(IkeError::MissingPayload(PayloadType::SA))?;
        let tsi = found
            .tsi
            .ok_or(IkeError::MissingPayload(PayloadType::TSi))?;
        let tsr = found
            .tsr
            .ok_or(IkeError::MissingPayload(PayloadType::TSr))?;
        let kei = if create { found.ke } else { None };
        let (cfg, negotiated, local_ts, remote_ts, transport) = self.select_child(
            sa,
            &tsi.selectors,
            &tsr.selectors,
            kei.map(|k| k.group),
            create,
            only,
            found,
        )?;
        let (ni, nr) = nonces;
        let (shared, ker) = pfs_answer(ctx, &negotiated, kei)?;
        let spi_in = ctx.new_child_spi();
        let mut payloads = vec![Payload::Sa(negotiated.answer_payload(spi_in))];
        if transport {
            payloads.insert(0, notify(NotifyType::USE_TRANSPORT_MODE, Vec::new()));
        }
        // Nr only in CREATE_CHILD_SA (IKE_AUTH's nonces are IKE_SA_INIT's).
        payloads.extend(create.then(|| Payload::Nonce(NoncePayload { data: nr.to_vec() })));
        payloads.extend(ker.map(Payload::Ke));
        payloads.push(Payload::Tsi(TsPayload::new(remote_ts.clone())));
        payloads.push(Payload::Tsr(TsPayload::new(local_ts.clone())));
        let draft = ChildDraft {
            config: cfg,
            spi_in,
            negotiated,
            transport,
            local_ts,
            remote_ts,
            initiator: false,
            nonces: (ni.to_vec(), nr.to_vec()),
        };
        let remaining = draft.additional_exchanges();
        let secrets: Vec<Secret> = shared.into_iter().collect();
        if !remaining.is_empty() {
            // RFC 9370 §2.2.4: SK {SA, Nr, KEr, TSi, TSr,
            // N(ADDITIONAL_KEY_EXCHANGE)(link1)}.
            let answered = Answered::Child { draft, rekey_of };
            let link = self.await_followup(ctx, answered, secrets, remaining);
            payloads.push(notify(NotifyType::ADDITIONAL_KEY_EXCHANGE, link));
            return Ok((payloads, None));
        }
        let new = self
            .key_child(ctx, draft, &secrets)
            .inspect_err(|_| ctx.free_child_spi(spi_in))?;
        self.add_child(ctx, new, false);
        Ok((payloads, Some(spi_in)))
    }

    /// The first child config that accepts the request's selectors, mode
    /// and proposals. Errors say what failed for the best candidate:
    /// INVALID_KE_PAYLOAD, else NO_PROPOSAL_CHOSEN, else TS_UNACCEPTABLE.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn select_child(
        &self,
        offered: &SaPayload,
        tsi: &[TrafficSelector],
        tsr: &[TrafficSelector],
        kei: Option<KeId>,
        create: bool,
        only: Option<&str>,
        found: &Found<'_>,
    ) -> Result<
        (
            String,
            NegotiatedChild,
            Vec<TrafficSelector>,
            Vec<TrafficSelector>,
            bool,
        ),
        IkeError,
    > {
        let wants_transport = found.has(NotifyType::USE_TRANSPORT_MODE);
        let mut error = IkeError::TsUnacceptable;
        for cfg in &self.conn.children {
            if only.is_some_and(|name| name != cfg.name) {
                continue;
            }
            let transport = matches!(cfg.mode, SaMode::Transport);
            // §1.3.1: without USE_TRANSPORT_MODE the SA is a tunnel; a
            // transport request we configured as tunnel gets a tunnel.
            if transport && !wants_transport {
                continue;
            }
            let Ok((narrow_i, narrow_r)) =
                narrow_pair(&cfg.local_ts, &cfg.remote_ts, tsi, tsr, TsRole::Responder)
            else {
                continue;
            };
            // §2.19: an End-User's traffic comes from its virtual IPs.
            let narrow_i = self.narrow_to_virtual_ips(narrow_i);
            if narrow_i.is_empty() {
                continue;
            }
            let offers = esp_offers(cfg);
            let selected = if create {
                select_child_create(cfg.protocol, &offers, offered, kei)
            } else {
                select_child(cfg.protocol, &offers, offered, None)
            };
            match selected {
                Ok(_) if cfg.protocol == IpsecProtocol::Ah && self.udp_encap().is_some() => {
                    if !matches!(error, IkeError::InvalidKe(_)) {
                        error = IkeError::AhThroughNat;
                    }
                }
                Ok(negotiated) => {
                    return Ok((cfg.name.clone(), negotiated, narrow_r, narrow_i, transport))
                }
                Err(ProposalError::InvalidKe { wanted }) => error = IkeError::InvalidKe(wanted),
                Err(_) if !matches!(error, IkeError::InvalidKe(_)) => {
                    error = IkeError::NoProposalChosen
                }
                Err(_) => {}
            }
        }
        Err(error)
    }

    /// Answers a Child SA that cannot be created with its error notify,
    /// counted and reported (the IKE SA stays, §1.2). `child` names the
    /// config when one was involved (a rekey), empty otherwise.
    pub(crate) fn child_refusal(
        &mut self,
        ctx: &mut Ctx<'_>,
        e: &IkeError,
        child: &str,
    ) -> Vec<Payload> {
        let counter = match e {
            IkeError::TsUnacceptable => Some(Counter::TsRefused),
            IkeError::NoProposalChosen | IkeError::AhThroughNat => Some(Counter::ProposalsRefused),
            IkeError::TemporaryFailure => Some(Counter::TemporaryFailures),
            _ => None,
        };
        if let Some(counter) = counter {
            ctx.count(counter);
        }
        ctx.count(Counter::ChildSasFailed);
        ctx.event(SaEvent::ChildSaFailed {
            connection: self.conn.name.clone(),
            child: child.to_owned(),
            reason: e.to_string(),
        });
        let ty = e.notify_type().unwrap_or(NotifyType::NO_PROPOSAL_CHOSEN);
        vec![notify(ty, e.notify_data())]
    }

    /// Records a new Child SA and emits its installation: inbound now,
    /// outbound now (`outbound_now`) or held back in the record.
    pub(crate) fn add_child(&mut self, ctx: &mut Ctx<'_>, new: NewChild, outbound_now: bool) {
        let conn = Arc::clone(&self.conn);
        let Some(cfg) = child_config(&conn, &new.draft.config) else {
            ctx.free_child_spi(new.draft.spi_in);
            return;
        };
        let jitter = ctx.random_duration(cfg.lifetime.jitter.min(cfg.lifetime.rekey_time));
        let keys = &new.keys;
        let (in_keys, out_keys) = if new.draft.initiator {
            ((&keys.encr_r, &keys.integ_r), (&keys.encr_i, &keys.integ_i))
        } else {
            ((&keys.encr_i, &keys.integ_i), (&keys.encr_r, &keys.integ_r))
        };
        let base = InstallBase {
            cfg,
            suite: new.draft.negotiated.suite,
            esn: new.draft.negotiated.esn,
            transport: new.draft.transport,
            jitter,
        };
        let inbound = self.install(
            &base,
            new.draft.spi_in,
            in_keys,
            &new.draft.remote_ts,
            &new.draft.local_ts,
        );
        let outbound = self.install(
            &base,
            new.draft.negotiated.peer_spi,
            out_keys,
            &new.draft.local_ts,
            &new.draft.remote_ts,
        );
        // Re-offered on rekey; a Child SA from IKE_AUTH (no KE there,
        // RFC 7296 §1.2) takes the PFS group its config offers first, and
        // that proposal's additional key exchanges (RFC 9370 §2.2.4).
        let from_auth = new.draft.negotiated.ke.is_none();
        let pfs = new.draft.negotiated.pfs_group().or_else(|| {
            from_auth
                .then(|| first_pfs_group(&esp_offers(cfg)))
                .flatten()
        });
        let mut child = ChildSa::record(new, pfs, ctx.now);
        if from_auth {
            child.additional_ke = first_pfs_additional_ke(cfg);
        }
        child.lifetime_jitter = jitter;
        child.inbound_installed = true;
        child.pending_outbound = Some(Box::new(outbound));
        let life = cfg.lifetime;
        if !life.rekey_time.is_zero() {
            let at = after(ctx.now, life.rekey_time - jitter);
            child.timers.set(ChildTimer::Rekey, at);
        }
        if !life.hard_time.is_zero() {
            let at = after(ctx.now, life.hard_time);
            child.timers.set(ChildTimer::Expire, at);
        }
        ctx.count(Counter::ChildSasEstablished);
        ctx.event(SaEvent::InstallInbound(inbound));
        if outbound_now {
            child.install_pending_outbound(ctx);
        }
        self.children.push(child);
    }

    /// One direction's installation.
    fn install(
        &self,
        base: &InstallBase<'_>,
        spi: u32,
        keys: (&zeroize::Zeroizing<Vec<u8>>, &zeroize::Zeroizing<Vec<u8>>),
        src: &[TrafficSelector],
        dst: &[TrafficSelector],
    ) -> ChildSaInstall {
        let (local, remote, _) = self.dataplane_path();
        ChildSaInstall {
            connection: self.conn.name.clone(),
            child: base.cfg.name.clone(),
            spi,
            suite: base.suite,
            encr_key: keys.0.clone(),
            integ_key: keys.1.clone(),
            mode: self.child_mode(base.transport),
            esn: base.esn,
            local: local.ip(),
            remote: remote.ip(),
            encap: self.udp_encap(),
            selectors: selectors(src, dst),
            replay_window: base.cfg.replay_window,
            peer_replay_window: base.cfg.peer_replay_window,
            lifetime: base.cfg.lifetime.limits(base.jitter),
        }
    }
}

/// What both directions of one Child SA share.
struct InstallBase<'a> {
    cfg: &'a ChildConfig,
    suite: Suite,
    esn: bool,
    transport: bool,
    jitter: core::time::Duration,
}

impl ChildSa {
    /// The record of a negotiated Child SA: active, nothing installed yet,
    /// no timers.
    pub(crate) fn record(new: NewChild, pfs: Option<KeId>, now: std::time::Instant) -> ChildSa {
        // What ran is what a rekey offers again: one method per ADDKE type.
        let additional_ke = new
            .draft
            .negotiated
            .additional_ke
            .iter()
            .map(|m| vec![*m])
            .collect();
        // KEYMAT: initiator-to-responder keys first (§2.17).
        let k = new.keys;
        let keys = if new.draft.initiator {
            ChildSaKeys {
                encr_in: k.encr_r,
                integ_in: k.integ_r,
                encr_out: k.encr_i,
                integ_out: k.integ_i,
            }
        } else {
            ChildSaKeys {
                encr_in: k.encr_i,
                integ_in: k.integ_i,
                encr_out: k.encr_r,
                integ_out: k.integ_r,
            }
        };
        ChildSa {
            config: new.draft.config,
            spi_in: new.draft.spi_in,
            spi_out: new.draft.negotiated.peer_spi,
            suite: new.draft.negotiated.suite,
            esn: new.draft.negotiated.esn,
            pfs,
            additional_ke,
            transport: new.draft.transport,
            local_ts: new.draft.local_ts,
            remote_ts: new.draft.remote_ts,
            established_at: now,
            timers: TimerTable::default(),
            status: ChildStatus::Active,
            inbound_installed: false,
            outbound_installed: false,
            pending_outbound: None,
            replaces: None,
            nonces: Some(new.draft.nonces),
            peer_rekey: None,
            rekey_of: None,
            keys,
            lifetime_jitter: core::time::Duration::ZERO,
        }
    }
}
