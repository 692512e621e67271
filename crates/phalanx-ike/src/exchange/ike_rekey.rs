//! CREATE_CHILD_SA rekeying the IKE SA (RFC 7296 §1.3.2, §2.18).
//!
//! ```text
//! Initiator                         Responder
//! -------------------------------------------------------------------
//! HDR, SK {SA, Ni, KEi}  -->
//!                                   <--  HDR, SK {SA, Nr, KEr}
//!
//! SKEYSEED = prf(SK_d (old), g^ir (new) | Ni | Nr)
//! ```
//!
//! The new SPIs travel in the proposals (§2.18); the new IKE SA starts its
//! Message IDs at 0 and its I flag belongs to the rekey's initiator. Child
//! SAs move to the new IKE SA; the rekey initiator then deletes the old one.
//! Simultaneous rekeys (§2.8.1): the new IKE SA made with the lowest of the
//! four nonces is redundant and deleted by its initiator; the other one
//! takes the Child SAs, and its initiator deletes the old IKE SA.
//!
//! RFC 9370 additional key exchanges (ADDKE transforms, e.g. ML-KEM-768
//! beside x25519) are offered and selected as in IKE_SA_INIT and run in
//! IKE_FOLLOWUP_KE on the old IKE SA ([`followup`](super::followup)); the
//! new IKE SA exists only after the last one (RFC 9370 §2.2.4):
//!
//! ```text
//! SKEYSEED = prf(SK_d (old), SK(0) | Ni | Nr | SK(1) | ... SK(n))
//! ```
//!
//! A peer that offers no ADDKE transform rekeys classically, unless our
//! proposals require one (then NO_PROPOSAL_CHOSEN, as in IKE_SA_INIT).

use std::collections::VecDeque;

use phalanx_crypto::ike::{respond, start_initiator, IkeSaKeys, KdfInputs, KexState};
use phalanx_crypto::KeGroup;
use phalanx_wire::ike::iana::{ExchangeType, KeId, NotifyType, PayloadType};
use phalanx_wire::ike::{KePayload, NoncePayload, Payload, SaPayload};

use crate::counters::Counter;
use crate::error::IkeError;
use crate::events::SaEvent;
use crate::exchange::child::Secret;
use crate::exchange::followup::{Answered, Keying};
use crate::exchange::init::ike_offers;
use crate::exchange::{notify, Found};
use crate::ike_sa::{Ctx, IkeSa, Pending, Reply, SaCrypto, State, Task};
use crate::limits::{
    NONCE_LEN, REKEY_DELETE_FALLBACK, TEMPORARY_FAILURE_MAX_RETRIES,
    TEMPORARY_FAILURE_RETRY_JITTER, TEMPORARY_FAILURE_RETRY_MIN,
};
use crate::proposal::{
    accept_ike_answer, ike_sa_payload, select_ike_for_kei, NegotiatedIke, ProposalError,
};
use crate::timers::IkeTimer;

/// Our IKE SA rekey in flight.
pub(crate) struct IkeRekeyOffer {
    /// Our SPI of the new IKE SA (its SPIi).
    pub(crate) spi: u64,
    /// The SA payload as sent.
    pub(crate) offered: SaPayload,
    /// Our ephemeral key.
    pub(crate) kex: KexState,
    /// Ni.
    pub(crate) ni: Vec<u8>,
    /// Retries after TEMPORARY_FAILURE so far.
    pub(crate) retries: u32,
}

/// A new IKE SA negotiated by a rekey whose keys are not derived yet:
/// with RFC 9370 additional key exchanges they come after the last
/// IKE_FOLLOWUP_KE (§2.2.4).
pub(crate) struct IkeRekeyDraft {
    /// The new IKE SA's suite.
    pub(crate) negotiated: NegotiatedIke,
    /// Ni of the CREATE_CHILD_SA.
    pub(crate) ni: Vec<u8>,
    /// Nr of the CREATE_CHILD_SA.
    pub(crate) nr: Vec<u8>,
    /// The new SPIi (the rekey initiator's).
    pub(crate) spi_i: u64,
    /// The new SPIr.
    pub(crate) spi_r: u64,
}

impl IkeRekeyDraft {
    /// The key exchange methods still to run in IKE_FOLLOWUP_KE.
    pub(crate) fn additional_exchanges(&self) -> VecDeque<KeId> {
        self.negotiated.additional_exchanges().collect()
    }
}

impl IkeSa {
    /// Starts rekeying this IKE SA with the group it runs now.
    pub(crate) fn start_ike_rekey(&mut self, ctx: &mut Ctx<'_>, retries: u32) {
        if !self.is_established() || self.successor.is_some() {
            return;
        }
        let Some(group) = self.crypto.as_ref().map(|c| c.negotiated.ke) else {
            return;
        };
        let Ok(kex) =
            KeGroup::try_from(group).and_then(|g| start_initiator(ctx.provider, g, &mut *ctx.rng))
        else {
            return;
        };
        let spi = ctx.new_ike_spi();
        let offer = IkeRekeyOffer {
            spi,
            // RFC 9370 §2.2.4: ADDKE transforms included; they run in
            // IKE_FOLLOWUP_KE.
            offered: ike_sa_payload(&ike_offers(&self.conn), Some(spi.to_be_bytes())),
            kex,
            ni: ctx.random_bytes(NONCE_LEN),
            retries,
        };
        let payloads = vec![
            Payload::Sa(offer.offered.clone()),
            Payload::Nonce(NoncePayload {
                data: offer.ni.clone(),
            }),
            Payload::Ke(KePayload {
                group,
                data: offer.kex.public_value().to_vec(),
            }),
        ];
        let pending = Pending::RekeyIke(Box::new(offer));
        if self
            .send_request(ctx, ExchangeType::CREATE_CHILD_SA, payloads, pending)
            .is_err()
        {
            ctx.ike_spis.remove(&spi);
        }
    }

    /// Responder: the peer rekeys this IKE SA.
    pub(crate) fn respond_ike_rekey(&mut self, ctx: &mut Ctx<'_>, found: &Found<'_>) -> Reply {
        let child_rekey_in_flight = self
            .window
            .any_pending(|p| p.child_offer().is_some() || matches!(p, Pending::DeleteChildren(_)));
        // Our answers still waiting for IKE_FOLLOWUP_KE count as in flight.
        let answering = !self.followups.is_empty();
        if !self.is_established() || self.successor.is_some() || child_rekey_in_flight || answering
        {
            // §2.25.2: not while it is being closed or its children change.
            ctx.count(Counter::TemporaryFailures);
            return Reply::of(vec![notify(NotifyType::TEMPORARY_FAILURE, Vec::new())]);
        }
        match self.answer_ike_rekey(ctx, found) {
            Ok(payloads) => Reply::of(payloads),
            Err(e) => {
                if e == IkeError::NoProposalChosen {
                    ctx.count(Counter::ProposalsRefused);
                }
                let ty = e.notify_type().unwrap_or(NotifyType::NO_PROPOSAL_CHOSEN);
                Reply::of(vec![notify(ty, e.notify_data())])
            }
        }
    }

    fn answer_ike_rekey(
        &mut self,
        ctx: &mut Ctx<'_>,
        found: &Found<'_>,
    ) -> Result<Vec<Payload>, IkeError> {
        let sa = found.sa.ok_or(IkeError::MissingPayload(PayloadType::SA))?;
        let ni = found
            .nonce
            .ok_or(IkeError::MissingPayload(PayloadType::NONCE))?;
        let ke = found.ke.ok_or(IkeError::MissingPayload(PayloadType::KE))?;
        // RFC 9370 §2.2.4: ADDKE transforms are selected as in IKE_SA_INIT.
        let negotiated =
            select_ike_for_kei(&ike_offers(&self.conn), sa, ke.group).map_err(|e| match e {
                ProposalError::InvalidKe { wanted } => IkeError::InvalidKe(wanted),
                ProposalError::Malformed => IkeError::Malformed,
                _ => IkeError::NoProposalChosen,
            })?;
        let peer_spi = negotiated
            .peer_spi
            .map(u64::from_be_bytes)
            .ok_or(IkeError::Malformed)?;
        let group = KeGroup::try_from(ke.group)?;
        let kex = respond(ctx.provider, group, &ke.data, &mut *ctx.rng)
            .map_err(|_| IkeError::Malformed)?;
        let nr = ctx.random_bytes(NONCE_LEN);
        let our_spi = ctx.new_ike_spi();
        let mut payloads = vec![
            Payload::Sa(negotiated.answer_payload(Some(our_spi.to_be_bytes()))),
            Payload::Nonce(NoncePayload { data: nr.clone() }),
            Payload::Ke(KePayload {
                group: ke.group,
                data: kex.public_value,
            }),
        ];
        let draft = IkeRekeyDraft {
            negotiated,
            ni: ni.data.clone(),
            nr,
            spi_i: peer_spi,
            spi_r: our_spi,
        };
        let remaining = draft.additional_exchanges();
        let secrets = vec![kex.shared_secret];
        if !remaining.is_empty() {
            // RFC 9370 §2.2.4: SK {SA, Nr, KEr, N(ADDITIONAL_KEY_EXCHANGE)(link1)}.
            let answered = Answered::Ike(Box::new(draft));
            let link = self.await_followup(ctx, answered, secrets, remaining);
            payloads.push(notify(NotifyType::ADDITIONAL_KEY_EXCHANGE, link));
            return Ok(payloads);
        }
        if let Err(e) = self.take_peer_rekey(ctx, draft, &secrets) {
            ctx.ike_spis.remove(&our_spi);
            return Err(e);
        }
        Ok(payloads)
    }

    /// Responder: every key exchange of the peer's rekey is done; the new
    /// IKE SA takes over, or waits for our own rekey's answer when both
    /// sides rekey (§2.8.1).
    pub(crate) fn take_peer_rekey(
        &mut self,
        ctx: &mut Ctx<'_>,
        draft: IkeRekeyDraft,
        secrets: &[Secret],
    ) -> Result<(), IkeError> {
        let successor = self.successor_sa(ctx, &draft, secrets, false)?;
        if self.rekey_in_flight() {
            // §2.8.1: both sides rekey; settled when our answer arrives.
            self.peer_rekey = Some((draft.spi_r, draft.ni, draft.nr));
            ctx.spawned.push(successor);
        } else {
            self.hand_over_to(ctx, successor);
        }
        Ok(())
    }

    /// Initiator: the answer to our IKE SA rekey.
    pub(crate) fn process_ike_rekey_response(
        &mut self,
        ctx: &mut Ctx<'_>,
        offer: IkeRekeyOffer,
        payloads: &[Payload],
    ) {
        let found = Found::scan(payloads);
        let (spi, retries) = (offer.spi, offer.retries);
        match self.accept_ike_rekey(offer, &found) {
            Ok((draft, shared)) => {
                // RFC 9370 §2.2.4: IKE_FOLLOWUP_KE first if ADDKE was chosen.
                let remaining = draft.additional_exchanges();
                let keying = Keying::Ike {
                    draft: Box::new(draft),
                    retries,
                };
                self.continue_key_exchanges(ctx, keying, vec![shared], remaining, &found);
            }
            Err(e) => self.ike_rekey_failed(ctx, spi, retries, &e),
        }
    }

    /// Our rekey with new SPI `spi` failed: retried after
    /// TEMPORARY_FAILURE; otherwise the IKE SA runs on until its hard
    /// lifetime.
    pub(crate) fn ike_rekey_failed(
        &mut self,
        ctx: &mut Ctx<'_>,
        spi: u64,
        retries: u32,
        e: &IkeError,
    ) {
        ctx.ike_spis.remove(&spi);
        self.peer_rekey = None;
        let retry = retries + 1;
        if *e == IkeError::PeerError(NotifyType::TEMPORARY_FAILURE)
            && retry <= TEMPORARY_FAILURE_MAX_RETRIES
        {
            ctx.count(Counter::TemporaryFailures);
            let wait =
                TEMPORARY_FAILURE_RETRY_MIN + ctx.random_duration(TEMPORARY_FAILURE_RETRY_JITTER);
            self.delay_task(ctx, Task::RekeyIke { retries: retry }, wait);
        }
    }

    /// Checks the answer and completes the first key exchange: the draft
    /// of the new IKE SA and SK(0).
    fn accept_ike_rekey(
        &self,
        offer: IkeRekeyOffer,
        found: &Found<'_>,
    ) -> Result<(IkeRekeyDraft, Secret), IkeError> {
        if let Some(error) = found.error() {
            return Err(IkeError::PeerError(error));
        }
        let sa = found.sa.ok_or(IkeError::MissingPayload(PayloadType::SA))?;
        let nr = found
            .nonce
            .ok_or(IkeError::MissingPayload(PayloadType::NONCE))?;
        let ke = found.ke.ok_or(IkeError::MissingPayload(PayloadType::KE))?;
        let negotiated =
            accept_ike_answer(&offer.offered, sa).map_err(|_| IkeError::NoProposalChosen)?;
        let peer_spi = negotiated
            .peer_spi
            .map(u64::from_be_bytes)
            .ok_or(IkeError::Malformed)?;
        let ours: KeId = offer.kex.group().into();
        if negotiated.ke != ours || ke.group != ours {
            return Err(IkeError::NoProposalChosen);
        }
        let shared = offer
            .kex
            .complete(&ke.data)
            .map_err(|_| IkeError::Malformed)?;
        let draft = IkeRekeyDraft {
            negotiated,
            ni: offer.ni,
            nr: nr.data.clone(),
            spi_i: offer.spi,
            spi_r: peer_spi,
        };
        Ok((draft, shared))
    }

    /// Initiator: every key exchange of our rekey is done.
    pub(crate) fn finish_ike_rekey(
        &mut self,
        ctx: &mut Ctx<'_>,
        draft: IkeRekeyDraft,
        secrets: &[Secret],
    ) -> Result<(), IkeError> {
        let mut successor = self.successor_sa(ctx, &draft, secrets, true)?;
        successor.rekey_nonces = Some((draft.ni, draft.nr));
        self.settle_ike_rekey(ctx, successor);
        Ok(())
    }

    /// Our rekey produced `successor`: it takes over — unless the peer's
    /// simultaneous rekey wins the nonce comparison (§2.8.1).
    fn settle_ike_rekey(&mut self, ctx: &mut Ctx<'_>, mut successor: IkeSa) {
        let ours = successor.rekey_nonces.take().unwrap_or_default();
        if let Some((their_spi, ni, nr)) = self.peer_rekey.take() {
            ctx.count(Counter::RekeyCollisions);
            let ours_low = core::cmp::min(ours.0.as_slice(), ours.1.as_slice());
            let theirs_low = core::cmp::min(ni.as_slice(), nr.as_slice());
            if ours_low < theirs_low {
                // Ours is redundant: we created it, we delete it; the peer's
                // takes the children and the peer deletes this old SA.
                ctx.count(Counter::RedundantSasDeleted);
                successor.tasks.push_back(Task::DeleteIke);
                ctx.spawned.push(successor);
                // The peer's SA is already in the endpoint: it takes our
                // children once this call is done.
                ctx.handovers.push((self.our_spi(), their_spi));
                self.retire(ctx, their_spi);
                return;
            }
        }
        self.hand_over_to(ctx, successor);
        // §1.3.2: the rekey initiator deletes the old IKE SA.
        self.tasks.push_front(Task::DeleteIke);
    }

    /// `successor` replaces this IKE SA: it takes our Child SAs and queued
    /// child work now and joins the endpoint after this call.
    fn hand_over_to(&mut self, ctx: &mut Ctx<'_>, mut successor: IkeSa) {
        let to = successor.our_spi();
        successor.adopt(ctx, self);
        ctx.event(SaEvent::IkeSaRekeyed {
            connection: self.conn.name.clone(),
            old_spis: (self.spi_i.to_be_bytes(), self.spi_r.to_be_bytes()),
            new_spis: (successor.spi_i.to_be_bytes(), successor.spi_r.to_be_bytes()),
        });
        ctx.spawned.push(successor);
        self.retire(ctx, to);
    }

    /// Replaced by the IKE SA with our SPI `to`; if the peer never deletes
    /// us, we do (we hold no children by then).
    fn retire(&mut self, ctx: &mut Ctx<'_>, to: u64) {
        self.successor = Some(to);
        self.transition(ctx, State::Rekeyed);
        self.timers = Default::default();
        self.timers
            .set(IkeTimer::Expire, ctx.now + REKEY_DELETE_FALLBACK);
    }

    /// The new IKE SA a rekey makes: same peer, new keys and SPIs, fresh
    /// Message IDs; it goes live when it receives the Child SAs.
    /// SKEYSEED = prf(SK_d (old), SK(0) | Ni | Nr [| SK(1) | ... SK(n)])
    /// with `secrets` = SK(0), SK(1), … (§2.18, RFC 9370 §2.2.4).
    fn successor_sa(
        &self,
        ctx: &mut Ctx<'_>,
        k: &IkeRekeyDraft,
        secrets: &[Secret],
        initiator: bool,
    ) -> Result<IkeSa, IkeError> {
        let old = self.crypto.as_ref().ok_or(IkeError::Malformed)?;
        let new_prf = k.negotiated.prf_algorithm()?;
        let lengths = k.negotiated.key_lengths()?;
        let inputs = KdfInputs {
            ni: &k.ni,
            nr: &k.nr,
            spi_i: k.spi_i.to_be_bytes(),
            spi_r: k.spi_r.to_be_bytes(),
        };
        let parts: Vec<&[u8]> = secrets.iter().map(|s| s.as_slice()).collect();
        let keys = IkeSaKeys::derive_rekey(
            ctx.provider,
            old.prf,
            &old.keys.sk_d,
            new_prf,
            lengths,
            &inputs,
            &parts,
        )?;
        let crypto = SaCrypto::with_keys(ctx, k.negotiated.clone(), keys, initiator)?;
        let mut sa = IkeSa::new(
            self.conn.clone(),
            initiator,
            self.local,
            self.remote,
            State::Rekeyed,
            ctx.now,
        );
        sa.spi_i = k.spi_i;
        sa.spi_r = k.spi_r;
        sa.crypto = Some(crypto);
        sa.encap = self.encap;
        sa.local_behind_nat = self.local_behind_nat;
        sa.fragmentation = self.fragmentation;
        sa.peer_hashes = self.peer_hashes.clone();
        // §2.3 windows are the peers' capabilities; they carry over.
        sa.window.peer_window = self.window.peer_window;
        sa.window.receive_window = self.window.receive_window;
        sa.remote_identity = self.remote_identity.clone();
        sa.established_at = Some(ctx.now);
        // A redundant SA of a collision the peer never deletes goes by itself.
        sa.timers
            .set(IkeTimer::Expire, ctx.now + REKEY_DELETE_FALLBACK);
        Ok(sa)
    }

    /// Adopts the Child SAs and queued work of the IKE SA it replaces, and
    /// goes live (called by the endpoint for each hand-over).
    pub(crate) fn adopt(&mut self, ctx: &mut Ctx<'_>, old: &mut IkeSa) {
        self.children.append(&mut old.children);
        // The peer keeps its inner addresses (RFC 7296 §2.19).
        self.virtual_ips.append(&mut old.virtual_ips);
        let child_work =
            |t: &Task| !matches!(t, Task::RekeyIke { .. } | Task::DeleteIke | Task::Dpd);
        self.tasks
            .extend(old.tasks.iter().filter(|t| child_work(t)).cloned());
        old.tasks.retain(|t| !child_work(t));
        for (at, task) in old.delayed.drain(..) {
            if child_work(&task) {
                self.delayed.push((at, task));
                self.timers.set(
                    IkeTimer::Retry,
                    at.min(self.timers.get(IkeTimer::Retry).unwrap_or(at)),
                );
            }
        }
        self.transition(ctx, State::Established);
        self.timers.stop(IkeTimer::Expire);
        self.arm_lifetime(ctx);
        ctx.count(Counter::IkeSasRekeyed);
        // A MOBIKE move still being checked: the children's data plane
        // stays held back, and this SA checks the path itself.
        if let Some(held) = old.held_path.take() {
            self.held_path = Some(held);
            self.push_task(ctx, Task::CheckPath);
        }
    }
}
