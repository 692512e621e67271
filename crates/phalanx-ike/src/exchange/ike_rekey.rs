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
//! RFC 9370 additional key exchanges (IKE_FOLLOWUP_KE, §2.2.4) are not
//! run on rekeys: our offers leave them out and an offer that requires
//! one is refused with NO_PROPOSAL_CHOSEN. The new IKE SA's SKEYSEED
//! still comes from the old SK_d, which carries every earlier
//! exchange's secret forward.

use phalanx_crypto::ike::{respond, start_initiator, IkeSaKeys, KdfInputs, KexState};
use phalanx_crypto::KeGroup;
use phalanx_wire::ike::iana::{ExchangeType, KeId, NotifyType, PayloadType};
use phalanx_wire::ike::{KePayload, NoncePayload, Payload, SaPayload};

use crate::counters::Counter;
use crate::error::IkeError;
use crate::events::SaEvent;
use crate::exchange::init::ike_offers_without_additional_ke;
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

/// The keys of a new IKE SA from the old one's SK_d (§2.18).
struct RekeyKeys<'a> {
    negotiated: NegotiatedIke,
    shared: &'a [u8],
    ni: &'a [u8],
    nr: &'a [u8],
    spi_i: u64,
    spi_r: u64,
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
            offered: ike_sa_payload(
                &ike_offers_without_additional_ke(&self.conn),
                Some(spi.to_be_bytes()),
            ),
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
            .any_pending(|p| matches!(p, Pending::Child(_) | Pending::DeleteChildren(_)));
        if !self.is_established() || self.successor.is_some() || child_rekey_in_flight {
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
        let negotiated =
            select_ike_for_kei(&ike_offers_without_additional_ke(&self.conn), sa, ke.group)
                .map_err(|e| match e {
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
        let answer = negotiated.answer_payload(Some(our_spi.to_be_bytes()));
        let keys = RekeyKeys {
            negotiated,
            shared: &kex.shared_secret,
            ni: &ni.data,
            nr: &nr,
            spi_i: peer_spi,
            spi_r: our_spi,
        };
        let successor = match self.successor_sa(ctx, keys, false) {
            Ok(sa) => sa,
            Err(e) => {
                ctx.ike_spis.remove(&our_spi);
                return Err(e);
            }
        };
        if self.rekey_in_flight() {
            // §2.8.1: both sides rekey; settled when our answer arrives.
            self.peer_rekey = Some((our_spi, ni.data.clone(), nr.clone()));
            ctx.spawned.push(successor);
        } else {
            self.hand_over_to(ctx, successor);
        }
        Ok(vec![
            Payload::Sa(answer),
            Payload::Nonce(NoncePayload { data: nr }),
            Payload::Ke(KePayload {
                group: ke.group,
                data: kex.public_value,
            }),
        ])
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
        match self.accept_ike_rekey(ctx, offer, &found) {
            Ok(successor) => self.settle_ike_rekey(ctx, successor),
            Err(e) => {
                ctx.ike_spis.remove(&spi);
                self.peer_rekey = None;
                let retry = retries + 1;
                if e == IkeError::PeerError(NotifyType::TEMPORARY_FAILURE)
                    && retry <= TEMPORARY_FAILURE_MAX_RETRIES
                {
                    ctx.count(Counter::TemporaryFailures);
                    let wait = TEMPORARY_FAILURE_RETRY_MIN
                        + ctx.random_duration(TEMPORARY_FAILURE_RETRY_JITTER);
                    self.delay_task(ctx, Task::RekeyIke { retries: retry }, wait);
                }
                // Otherwise the IKE SA runs on until its hard lifetime.
            }
        }
    }

    fn accept_ike_rekey(
        &mut self,
        ctx: &mut Ctx<'_>,
        offer: IkeRekeyOffer,
        found: &Found<'_>,
    ) -> Result<IkeSa, IkeError> {
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
        let keys = RekeyKeys {
            negotiated,
            shared: &shared,
            ni: &offer.ni,
            nr: &nr.data,
            spi_i: offer.spi,
            spi_r: peer_spi,
        };
        let mut successor = self.successor_sa(ctx, keys, true)?;
        successor.rekey_nonces = Some((offer.ni, nr.data.clone()));
        Ok(successor)
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
    fn successor_sa(
        &self,
        ctx: &mut Ctx<'_>,
        k: RekeyKeys<'_>,
        initiator: bool,
    ) -> Result<IkeSa, IkeError> {
        let old = self.crypto.as_ref().ok_or(IkeError::Malformed)?;
        let new_prf = k.negotiated.prf_algorithm()?;
        let lengths = k.negotiated.key_lengths()?;
        let inputs = KdfInputs {
            ni: k.ni,
            nr: k.nr,
            spi_i: k.spi_i.to_be_bytes(),
            spi_r: k.spi_r.to_be_bytes(),
        };
        let keys = IkeSaKeys::derive_rekey(
            ctx.provider,
            old.prf,
            &old.keys.sk_d,
            new_prf,
            lengths,
            &inputs,
            &[k.shared],
        )?;
        let crypto = SaCrypto::with_keys(ctx, k.negotiated, keys, initiator)?;
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
    }
}
