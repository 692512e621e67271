//! IKE_FOLLOWUP_KE: RFC 9370 additional key exchanges after a
//! CREATE_CHILD_SA (a new Child SA with PFS, a Child SA rekey, an IKE SA
//! rekey), both roles (RFC 9370 §2.2.4).
//!
//! ```text
//! Initiator                         Responder
//! -------------------------------------------------------------------
//! HDR(CREATE_CHILD_SA), SK {[N(REKEY_SA)], SA (with ADDKE*), Ni, KEi,
//!                           [TSi, TSr]}  -->
//!                      <--  HDR(CREATE_CHILD_SA), SK {SA, Nr, KEr,
//!                               [TSi, TSr], N(ADDITIONAL_KEY_EXCHANGE)(link1)}
//! HDR(IKE_FOLLOWUP_KE), SK {KEi(1),
//!     N(ADDITIONAL_KEY_EXCHANGE)(link1)}  -->
//!                      <--  HDR(IKE_FOLLOWUP_KE), SK {KEr(1),
//!                               N(ADDITIONAL_KEY_EXCHANGE)(link2)}
//! ...  one exchange per negotiated ADDKE type, in type order; the last
//!      answer carries no link  ...
//! ```
//!
//! Once every exchange is done (RFC 9370 §2.2.4, SK(0) from the
//! CREATE_CHILD_SA, SK(1)..SK(n) from the IKE_FOLLOWUP_KE exchanges, SK_d
//! of the IKE SA they ran on):
//!
//! ```text
//! KEYMAT   = prf+(SK_d, SK(0) | Ni | Nr | SK(1) | ... SK(n))   (Child SA)
//! SKEYSEED = prf(SK_d, SK(0) | Ni | Nr | SK(1) | ... SK(n))    (IKE SA rekey)
//! ```
//!
//! Nothing is installed, and no new IKE SA exists, before the last
//! exchange. The link is opaque to the initiator; this responder draws a
//! fresh random one for every round and keeps the state for at most
//! [`FOLLOWUP_KE_TIMEOUT`] between rounds; a request whose link it does
//! not know is answered STATE_NOT_FOUND, and the initiator then gives the
//! SA up (counted, reported like any failed Child SA or IKE SA rekey).
//! IKE_FOLLOWUP_KE requests are ordinary requests of the window (RFC 7296
//! §2.3): retransmitted, answered from the response cache. Collisions are
//! settled when the last exchange is done, with the CREATE_CHILD_SA's
//! nonces (RFC 7296 §2.8.1). Like any exchange in flight, the state is
//! not replicated to other cluster nodes ([`crate::ha`]): after a
//! takeover the peer's link is unknown (STATE_NOT_FOUND) and our own
//! request is undone and retried.

use std::collections::VecDeque;
use std::time::Instant;

use phalanx_crypto::ike::{respond, start_initiator, KexState};
use phalanx_crypto::KeGroup;
use phalanx_wire::ike::iana::{ExchangeType, KeId, NotifyType, PayloadType};
use phalanx_wire::ike::{KePayload, Payload};

use crate::counters::Counter;
use crate::error::IkeError;
use crate::exchange::child::{ChildDraft, ChildOffer, Secret};
use crate::exchange::ike_rekey::IkeRekeyDraft;
use crate::exchange::{notify, Found};
use crate::ike_sa::{AfterSend, Ctx, IkeSa, Pending, Reply};
use crate::limits::{FOLLOWUP_KE_TIMEOUT, FOLLOWUP_LINK_LEN};
use crate::timers::IkeTimer;

/// Initiator: what a series of key exchanges keys once it is complete.
pub(crate) enum Keying {
    /// A new or rekeyed Child SA (the offer says which).
    Child {
        /// Our offer (config, SPI, the SA it rekeys, retries).
        offer: Box<ChildOffer>,
        /// What the responder's answer negotiated.
        draft: ChildDraft,
    },
    /// A new IKE SA replacing this one.
    Ike {
        /// What the responder's answer negotiated.
        draft: Box<IkeRekeyDraft>,
        /// Retries after TEMPORARY_FAILURE so far.
        retries: u32,
    },
}

/// Initiator: an IKE_FOLLOWUP_KE request in flight
/// ([`Pending::Followup`]).
pub(crate) struct Followup {
    /// What it keys.
    pub(crate) keying: Keying,
    /// SK(0), SK(1), … so far.
    secrets: Vec<Secret>,
    /// The methods of the exchanges after this one.
    remaining: VecDeque<KeId>,
    /// Our key of this exchange.
    kex: KexState,
}

impl Followup {
    /// The Child SA offer it completes, if it keys one.
    pub(crate) fn child_offer(&self) -> Option<&ChildOffer> {
        match &self.keying {
            Keying::Child { offer, .. } => Some(offer),
            Keying::Ike { .. } => None,
        }
    }

    /// Our SPI of the new IKE SA, if it rekeys the IKE SA.
    pub(crate) fn new_ike_spi(&self) -> Option<u64> {
        match &self.keying {
            Keying::Ike { draft, .. } => Some(draft.spi_i),
            Keying::Child { .. } => None,
        }
    }
}

/// Responder: what an answered CREATE_CHILD_SA creates once its last
/// IKE_FOLLOWUP_KE is done.
pub(crate) enum Answered {
    /// A Child SA: new, or the rekey of our inbound SPI `rekey_of`.
    Child {
        /// What we selected.
        draft: ChildDraft,
        /// Our inbound SPI of the SA it replaces.
        rekey_of: Option<u32>,
    },
    /// A new IKE SA replacing this one.
    Ike(Box<IkeRekeyDraft>),
}

/// Responder: a CREATE_CHILD_SA answered whose additional key exchanges
/// are not all done.
pub(crate) struct AwaitedFollowup {
    /// The link the next IKE_FOLLOWUP_KE request must carry.
    link: Vec<u8>,
    /// When it is given up (RFC 9370 §2.2.4).
    expires: Instant,
    /// What it creates.
    answered: Answered,
    /// SK(0), SK(1), … so far.
    secrets: Vec<Secret>,
    /// The methods of the exchanges still to come.
    remaining: VecDeque<KeId>,
}

impl AwaitedFollowup {
    /// Whether it rekeys the IKE SA.
    pub(crate) fn rekeys_ike(&self) -> bool {
        matches!(self.answered, Answered::Ike(_))
    }
}

impl IkeSa {
    /// Initiator: after the CREATE_CHILD_SA answer (`found`) or an
    /// IKE_FOLLOWUP_KE answer, starts the next additional key exchange,
    /// or completes `keying` when none is left.
    pub(crate) fn continue_key_exchanges(
        &mut self,
        ctx: &mut Ctx<'_>,
        keying: Keying,
        secrets: Vec<Secret>,
        mut remaining: VecDeque<KeId>,
        found: &Found<'_>,
    ) {
        let Some(method) = remaining.pop_front() else {
            self.finish_key_exchanges(ctx, keying, &secrets);
            return;
        };
        // RFC 9370 §2.2.4: every answer but the last carries the link.
        let Some(link) = found.notify(NotifyType::ADDITIONAL_KEY_EXCHANGE) else {
            ctx.count(Counter::FollowupKeFailed);
            let e = IkeError::MissingPayload(PayloadType::NOTIFY);
            self.key_exchanges_failed(ctx, keying, e, found);
            return;
        };
        let kex = match KeGroup::try_from(method)
            .and_then(|g| start_initiator(ctx.provider, g, &mut *ctx.rng))
        {
            Ok(kex) => kex,
            Err(e) => {
                ctx.count(Counter::FollowupKeFailed);
                self.key_exchanges_failed(ctx, keying, e.into(), found);
                return;
            }
        };
        // HDR(IKE_FOLLOWUP_KE), SK {KEi(n), N(ADDITIONAL_KEY_EXCHANGE)(link)}.
        let payloads = vec![
            Payload::Ke(KePayload {
                group: method,
                data: kex.public_value().to_vec(),
            }),
            notify(NotifyType::ADDITIONAL_KEY_EXCHANGE, link.data.clone()),
        ];
        let followup = Followup {
            keying,
            secrets,
            remaining,
            kex,
        };
        let pending = Pending::Followup(Box::new(followup));
        if let Err(Pending::Followup(f)) =
            self.send_request(ctx, ExchangeType::IKE_FOLLOWUP_KE, payloads, pending)
        {
            ctx.count(Counter::FollowupKeFailed);
            self.key_exchanges_failed(ctx, f.keying, IkeError::Malformed, found);
        }
    }

    /// Initiator: the answer to our IKE_FOLLOWUP_KE request.
    pub(crate) fn process_followup_response(
        &mut self,
        ctx: &mut Ctx<'_>,
        followup: Followup,
        payloads: &[Payload],
    ) {
        let found = Found::scan(payloads);
        let Followup {
            keying,
            mut secrets,
            remaining,
            kex,
        } = followup;
        match round_secret(kex, &found) {
            Ok(secret) => {
                ctx.count(Counter::FollowupKeExchanges);
                secrets.push(secret);
                self.continue_key_exchanges(ctx, keying, secrets, remaining, &found);
            }
            Err(e) => {
                // STATE_NOT_FOUND among them: the responder forgot us.
                ctx.count(Counter::FollowupKeFailed);
                self.key_exchanges_failed(ctx, keying, e, &found);
            }
        }
    }

    /// Initiator: every key exchange is done; derive and install.
    fn finish_key_exchanges(&mut self, ctx: &mut Ctx<'_>, keying: Keying, secrets: &[Secret]) {
        match keying {
            Keying::Child { offer, draft } => match self.key_child(ctx, draft, secrets) {
                Ok(new) => self.install_child(ctx, new, offer.rekey_of),
                Err(e) => self.child_offer_failed(ctx, *offer, e, &Found::default()),
            },
            Keying::Ike { draft, retries } => {
                let spi = draft.spi_i;
                if let Err(e) = self.finish_ike_rekey(ctx, *draft, secrets) {
                    self.ike_rekey_failed(ctx, spi, retries, &e);
                }
            }
        }
    }

    /// Initiator: the exchange failed; nothing was installed.
    fn key_exchanges_failed(
        &mut self,
        ctx: &mut Ctx<'_>,
        keying: Keying,
        e: IkeError,
        found: &Found<'_>,
    ) {
        match keying {
            Keying::Child { offer, .. } => self.child_offer_failed(ctx, *offer, e, found),
            Keying::Ike { draft, retries } => self.ike_rekey_failed(ctx, draft.spi_i, retries, &e),
        }
    }

    /// Responder: keeps what an answered CREATE_CHILD_SA needs until its
    /// IKE_FOLLOWUP_KE exchanges are done; returns the link for the
    /// N(ADDITIONAL_KEY_EXCHANGE) of the answer.
    pub(crate) fn await_followup(
        &mut self,
        ctx: &mut Ctx<'_>,
        answered: Answered,
        secrets: Vec<Secret>,
        remaining: VecDeque<KeId>,
    ) -> Vec<u8> {
        let link = ctx.random_bytes(FOLLOWUP_LINK_LEN);
        self.followups.push(AwaitedFollowup {
            link: link.clone(),
            expires: ctx.now + FOLLOWUP_KE_TIMEOUT,
            answered,
            secrets,
            remaining,
        });
        self.arm_followup_timer();
        link
    }

    /// Whether the peer's IKE SA rekey waits for IKE_FOLLOWUP_KE here.
    pub(crate) fn answering_ike_rekey(&self) -> bool {
        self.followups.iter().any(AwaitedFollowup::rekeys_ike)
    }

    /// Responder: an IKE_FOLLOWUP_KE request.
    pub(crate) fn process_followup_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        payloads: &[Payload],
    ) -> Reply {
        let found = Found::scan(payloads);
        let Some(link) = found.notify(NotifyType::ADDITIONAL_KEY_EXCHANGE) else {
            ctx.count(Counter::Unprocessable);
            return Reply::of(vec![notify(NotifyType::INVALID_SYNTAX, Vec::new())]);
        };
        let Some(idx) = self.followups.iter().position(|f| f.link == link.data) else {
            // RFC 9370 §2.2.4: timed out, never ours, or another node's.
            ctx.count(Counter::FollowupStateNotFound);
            return Reply::of(vec![notify(NotifyType::STATE_NOT_FOUND, Vec::new())]);
        };
        let mut awaited = self.followups.swap_remove(idx);
        self.arm_followup_timer();
        let ker = match answer_round(ctx, &mut awaited, &found) {
            Ok(ker) => ker,
            Err(e) => {
                ctx.count(Counter::Unprocessable);
                self.abandon_followup(ctx, awaited);
                let ty = e.notify_type().unwrap_or(NotifyType::INVALID_SYNTAX);
                return Reply::of(vec![notify(ty, e.notify_data())]);
            }
        };
        ctx.count(Counter::FollowupKeExchanges);
        if awaited.remaining.is_empty() {
            return self.complete_followup(ctx, awaited, ker);
        }
        // SK {KEr(n), N(ADDITIONAL_KEY_EXCHANGE)(link n+1)}.
        awaited.link = ctx.random_bytes(FOLLOWUP_LINK_LEN);
        awaited.expires = ctx.now + FOLLOWUP_KE_TIMEOUT;
        let link = notify(NotifyType::ADDITIONAL_KEY_EXCHANGE, awaited.link.clone());
        self.followups.push(awaited);
        self.arm_followup_timer();
        Reply::of(vec![Payload::Ke(ker), link])
    }

    /// Responder: the last exchange is done: the Child SA is installed
    /// (inbound now, outbound as for a CREATE_CHILD_SA without additional
    /// key exchanges), or the new IKE SA takes over.
    fn complete_followup(
        &mut self,
        ctx: &mut Ctx<'_>,
        awaited: AwaitedFollowup,
        ker: KePayload,
    ) -> Reply {
        let payloads = vec![Payload::Ke(ker)];
        let AwaitedFollowup {
            answered, secrets, ..
        } = awaited;
        match answered {
            Answered::Child { draft, rekey_of } => {
                let (spi_in, name) = (draft.spi_in, draft.config.clone());
                let new = match self.key_child(ctx, draft, &secrets) {
                    Ok(new) => new,
                    Err(e) => {
                        ctx.free_child_spi(spi_in);
                        return Reply::of(self.child_refusal(ctx, &e, &name));
                    }
                };
                self.add_child(ctx, new, false);
                match rekey_of {
                    None => Reply {
                        payloads,
                        after: vec![AfterSend::InstallOutbound(spi_in)],
                        deferred: false,
                    },
                    Some(old_spi) => {
                        // The outbound SA waits for the Delete of the old one.
                        self.link_peer_rekey(ctx, old_spi, spi_in);
                        Reply::of(payloads)
                    }
                }
            }
            Answered::Ike(draft) => {
                let spi = draft.spi_r;
                if let Err(e) = self.take_peer_rekey(ctx, *draft, &secrets) {
                    ctx.ike_spis.remove(&spi);
                    ctx.count(Counter::Unprocessable);
                    let ty = e.notify_type().unwrap_or(NotifyType::INVALID_SYNTAX);
                    return Reply::of(vec![notify(ty, e.notify_data())]);
                }
                Reply::of(payloads)
            }
        }
    }

    /// Responder: forgets an unfinished exchange and releases its SPI.
    fn abandon_followup(&mut self, ctx: &mut Ctx<'_>, awaited: AwaitedFollowup) {
        match awaited.answered {
            Answered::Child { draft, .. } => ctx.free_child_spi(draft.spi_in),
            Answered::Ike(draft) => {
                ctx.ike_spis.remove(&draft.spi_r);
            }
        }
    }

    /// Responder: drops the exchanges whose next request did not come in
    /// time (RFC 9370 §2.2.4: the initiator may have lost its state).
    pub(crate) fn expire_followups(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        let (expired, kept): (Vec<_>, Vec<_>) =
            self.followups.drain(..).partition(|f| f.expires <= now);
        self.followups = kept;
        for awaited in expired {
            ctx.count(Counter::FollowupKeTimeouts);
            self.abandon_followup(ctx, awaited);
        }
        self.arm_followup_timer();
    }

    /// Responder: drops every unfinished exchange (the IKE SA closes).
    pub(crate) fn abandon_followups(&mut self, ctx: &mut Ctx<'_>) {
        for awaited in core::mem::take(&mut self.followups) {
            self.abandon_followup(ctx, awaited);
        }
        self.timers.stop(IkeTimer::FollowupKe);
    }

    fn arm_followup_timer(&mut self) {
        match self.followups.iter().map(|f| f.expires).min() {
            Some(at) => self.timers.set(IkeTimer::FollowupKe, at),
            None => self.timers.stop(IkeTimer::FollowupKe),
        }
    }
}

/// Initiator: SK(n) from the responder's answer to our KEi(n).
fn round_secret(kex: KexState, found: &Found<'_>) -> Result<Secret, IkeError> {
    if let Some(error) = found.error() {
        return Err(IkeError::PeerError(error));
    }
    let ker = found.ke.ok_or(IkeError::MissingPayload(PayloadType::KE))?;
    // RFC 9370 §2.2.4: KEr(n) carries the method of this round.
    if ker.group != KeId::from(kex.group()) {
        return Err(IkeError::Malformed);
    }
    kex.complete(&ker.data).map_err(|_| IkeError::Malformed)
}

/// Responder: one round: KEi(n) of the method negotiated for it, answered
/// with KEr(n); SK(n) joins the secrets.
fn answer_round(
    ctx: &mut Ctx<'_>,
    awaited: &mut AwaitedFollowup,
    found: &Found<'_>,
) -> Result<KePayload, IkeError> {
    let method = awaited.remaining.pop_front().ok_or(IkeError::Malformed)?;
    let kei = found.ke.ok_or(IkeError::MissingPayload(PayloadType::KE))?;
    // The KE payload carries the method negotiated for this exchange.
    if kei.group != method {
        return Err(IkeError::Malformed);
    }
    let group = KeGroup::try_from(method)?;
    let answer =
        respond(ctx.provider, group, &kei.data, &mut *ctx.rng).map_err(|_| IkeError::Malformed)?;
    awaited.secrets.push(answer.shared_secret);
    Ok(KePayload {
        group: method,
        data: answer.public_value,
    })
}
