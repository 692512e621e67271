//! CREATE_CHILD_SA for Child SAs: new ones (RFC 7296 §1.3.1) and rekeys
//! (§1.3.3), with the collisions of §2.8.1 and §2.25.
//!
//! ```text
//! Initiator                         Responder
//! -------------------------------------------------------------------
//! HDR, SK {[N(REKEY_SA)], [N(USE_TRANSPORT_MODE)], SA, Ni, [KEi],
//!          TSi, TSr}  -->
//!                                   <--  HDR, SK {[N(USE_TRANSPORT_MODE)],
//!                                            SA, Nr, [KEr], TSi, TSr}
//! ```
//!
//! A rekey's old SA is deleted by the rekey initiator after
//! [`REKEY_OVERLAP`] (§2.8); the responder switches its outbound traffic to
//! the new SA when that Delete arrives. When both sides rekeyed the same SA
//! at once, "the SA created with the lowest of the four nonces" is
//! redundant and is deleted by the side that created it (§2.8.1); that side
//! never installs it. A rekey request for an SA being deleted or already
//! replaced, or arriving while the IKE SA is being rekeyed, is answered
//! TEMPORARY_FAILURE (§2.25.1, §2.25.2); one for an unknown SA,
//! CHILD_SA_NOT_FOUND (§2.25).
//!
//! With RFC 9370 additional key exchanges (ADDKE transforms in the SA
//! payload) the answer carries N(ADDITIONAL_KEY_EXCHANGE) and the new SA
//! is keyed and installed only after the last IKE_FOLLOWUP_KE
//! ([`followup`](super::followup)); collisions are then settled as above,
//! with the nonces of the CREATE_CHILD_SA, whichever rekey completes first:
//! when ours is done while the peer's still runs its IKE_FOLLOWUP_KE, the
//! collision is settled when the peer's completes.

use core::net::IpAddr;

use phalanx_sa::IpsecProtocol;
use phalanx_wire::ike::iana::{ExchangeType, KeId, NotifyType, ProtocolId};
use phalanx_wire::ike::{NotifyPayload, Payload};

use crate::counters::Counter;
use crate::error::IkeError;
use crate::events::SaEvent;
use crate::exchange::child::{child_config, ChildOffer, NewChild};
use crate::exchange::followup::Keying;
use crate::exchange::{notify, Found};
use crate::ike_sa::{AfterSend, ChildSa, ChildStatus, Ctx, IkeSa, Pending, Reply, Task};
use crate::limits::{
    MAX_CHILD_SAS, MAX_INIT_RESTARTS, NONCE_LEN, REKEY_DELETE_FALLBACK, REKEY_OVERLAP,
    TEMPORARY_FAILURE_MAX_RETRIES, TEMPORARY_FAILURE_RETRY_JITTER, TEMPORARY_FAILURE_RETRY_MIN,
};
use crate::proposal::protocol_id;
use crate::timers::ChildTimer;

/// The smaller of an exchange's two nonces (RFC 7296 §2.8.1 compares the
/// four nonces of two colliding exchanges; octet strings compare
/// lexicographically).
fn lowest(nonces: &(Vec<u8>, Vec<u8>)) -> &[u8] {
    core::cmp::min(nonces.0.as_slice(), nonces.1.as_slice())
}

impl IkeSa {
    /// Starts CREATE_CHILD_SA for a new Child SA of config `name`.
    pub(crate) fn start_create_child(
        &mut self,
        ctx: &mut Ctx<'_>,
        name: &str,
        trigger: Option<(IpAddr, IpAddr)>,
        retries: u32,
        group: Option<KeId>,
    ) {
        let exists = self
            .children
            .iter()
            .any(|c| c.config == name && c.is_current());
        if exists || self.children.len() >= MAX_CHILD_SAS {
            return;
        }
        let Some(mut offer) = self.make_child_offer(ctx, name, trigger, None, true, group) else {
            return;
        };
        offer.retries = retries;
        let payloads = self.child_offer_payloads(&offer);
        self.send_child_offer(ctx, payloads, offer);
    }

    /// Starts CREATE_CHILD_SA rekeying the Child SA with inbound SPI
    /// `spi_in`, re-offering its suite (§2.8).
    pub(crate) fn start_rekey_child(&mut self, ctx: &mut Ctx<'_>, spi_in: u32, retries: u32) {
        let Some(idx) = self
            .children
            .iter()
            .position(|c| c.spi_in == spi_in && c.status == ChildStatus::Active)
        else {
            return;
        };
        let (name, pfs) = (self.children[idx].config.clone(), self.children[idx].pfs);
        let Some(mut offer) = self.make_child_offer(ctx, &name, None, Some(spi_in), true, pfs)
        else {
            return;
        };
        offer.retries = retries;
        self.children[idx].status = ChildStatus::Rekeying;
        let payloads = self.child_offer_payloads(&offer);
        self.send_child_offer(ctx, payloads, offer);
    }

    fn send_child_offer(&mut self, ctx: &mut Ctx<'_>, payloads: Vec<Payload>, offer: ChildOffer) {
        let pending = Pending::Child(Box::new(offer));
        if let Err(Pending::Child(offer)) =
            self.send_request(ctx, ExchangeType::CREATE_CHILD_SA, payloads, pending)
        {
            self.restore_rekeyed(offer.rekey_of);
            ctx.free_child_spi(offer.spi_in);
        }
    }

    /// An SA whose rekey did not happen is active again.
    fn restore_rekeyed(&mut self, rekey_of: Option<u32>) {
        let Some(spi) = rekey_of else {
            return;
        };
        if let Some(old) = self.children.iter_mut().find(|c| c.spi_in == spi) {
            if old.status == ChildStatus::Rekeying {
                old.status = ChildStatus::Active;
            }
        }
    }

    /// Responder: a CREATE_CHILD_SA request.
    pub(crate) fn process_create_child_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        payloads: &[Payload],
    ) -> Reply {
        let found = Found::scan(payloads);
        let Some(sa) = found.sa else {
            ctx.count(Counter::Unprocessable);
            return Reply::of(vec![notify(NotifyType::INVALID_SYNTAX, Vec::new())]);
        };
        if sa
            .proposals
            .first()
            .is_some_and(|p| p.protocol_id == ProtocolId::IKE)
        {
            return self.respond_ike_rekey(ctx, &found);
        }
        if !self.is_established() || self.rekey_in_flight() || self.answering_ike_rekey() {
            // §2.25.2: not while the IKE SA is being rekeyed or deleted.
            ctx.count(Counter::TemporaryFailures);
            return Reply::of(vec![notify(NotifyType::TEMPORARY_FAILURE, Vec::new())]);
        }
        let Some(ni) = found.nonce else {
            ctx.count(Counter::Unprocessable);
            return Reply::of(vec![notify(NotifyType::INVALID_SYNTAX, Vec::new())]);
        };
        if self.children.len() >= MAX_CHILD_SAS {
            return Reply::of(vec![notify(NotifyType::NO_ADDITIONAL_SAS, Vec::new())]);
        }
        let nr = ctx.random_bytes(NONCE_LEN);
        if let Some(rekey) = found.notify(NotifyType::REKEY_SA) {
            return self.respond_child_rekey(ctx, &found, rekey, &ni.data, &nr);
        }
        match self.respond_child(ctx, &found, (&ni.data, &nr), true, (None, None)) {
            Ok((payloads, Some(spi_in))) => Reply {
                payloads,
                after: vec![AfterSend::InstallOutbound(spi_in)],
                deferred: false,
            },
            // RFC 9370 §2.2.4: completed by the last IKE_FOLLOWUP_KE.
            Ok((payloads, None)) => Reply::of(payloads),
            Err(e) => Reply::of(self.child_refusal(ctx, &e, "")),
        }
    }

    /// Responder: a rekey of one of our Child SAs (§1.3.3).
    fn respond_child_rekey(
        &mut self,
        ctx: &mut Ctx<'_>,
        found: &Found<'_>,
        rekey: &NotifyPayload,
        ni: &[u8],
        nr: &[u8],
    ) -> Reply {
        // The SPI is the one the initiator receives on: our outbound SPI.
        let Some(spi) = rekey.child_spi() else {
            ctx.count(Counter::Unprocessable);
            return Reply::of(vec![notify(NotifyType::INVALID_SYNTAX, Vec::new())]);
        };
        // REKEY_SA's Protocol ID says ESP or AH (§3.10); the answer echoes it.
        let protocol = match rekey.protocol_id {
            ProtocolId::AH => IpsecProtocol::Ah,
            _ => IpsecProtocol::Esp,
        };
        let Some(idx) = self
            .children
            .iter()
            .position(|c| c.spi_out == spi && c.protocol() == protocol)
        else {
            ctx.count(Counter::ChildSasFailed);
            let answer = NotifyPayload::for_child(
                protocol_id(protocol),
                spi,
                NotifyType::CHILD_SA_NOT_FOUND,
            );
            return Reply::of(vec![Payload::Notify(answer)]);
        };
        if matches!(
            self.children[idx].status,
            ChildStatus::Deleting | ChildStatus::Rekeyed
        ) {
            // §2.25.1: being closed (or already replaced).
            ctx.count(Counter::TemporaryFailures);
            return Reply::of(vec![notify(NotifyType::TEMPORARY_FAILURE, Vec::new())]);
        }
        let (old_spi, name) = (self.children[idx].spi_in, self.children[idx].config.clone());
        let only = (Some(name.as_str()), Some(old_spi));
        match self.respond_child(ctx, found, (ni, nr), true, only) {
            Ok((payloads, Some(new_spi))) => {
                self.link_peer_rekey(ctx, old_spi, new_spi);
                // The outbound SA waits for the Delete of the old one.
                Reply::of(payloads)
            }
            // RFC 9370 §2.2.4: linked by the last IKE_FOLLOWUP_KE.
            Ok((payloads, None)) => Reply::of(payloads),
            Err(e) => Reply::of(self.child_refusal(ctx, &e, &name)),
        }
    }

    /// Records that the peer's rekey of `old_spi` created `new_spi`.
    pub(crate) fn link_peer_rekey(&mut self, ctx: &mut Ctx<'_>, old_spi: u32, new_spi: u32) {
        if let Some(new) = self.children.iter_mut().find(|c| c.spi_in == new_spi) {
            new.replaces = Some(old_spi);
        }
        let Some(old) = self.children.iter_mut().find(|c| c.spi_in == old_spi) else {
            return;
        };
        old.peer_rekey = Some(new_spi);
        match old.status {
            ChildStatus::Active => {
                ctx.count(Counter::ChildSasRekeyed);
                old.status = ChildStatus::Rekeyed;
                old.timers.stop(ChildTimer::Rekey);
                old.timers
                    .set(ChildTimer::Retire, ctx.now + REKEY_DELETE_FALLBACK);
            }
            // Our own rekey of it completed first (the peer's waited for
            // its IKE_FOLLOWUP_KE): settled now.
            ChildStatus::Rekeyed => self.settle_late_collision(ctx, old_spi, new_spi),
            // Rekeying (our own rekey in flight): the collision is settled
            // when our answer arrives.
            ChildStatus::Rekeying | ChildStatus::Deleting => {}
        }
    }

    /// §2.8.1 when our rekey of `old_spi` was done before the peer's
    /// (`theirs`, our inbound SPI of the SA it created): the SA made with
    /// the lowest of the four nonces is redundant. Ours lost: traffic moves
    /// to theirs and we delete ours (we made it); theirs lost: it never
    /// takes our traffic, and the peer deletes it.
    fn settle_late_collision(&mut self, ctx: &mut Ctx<'_>, old_spi: u32, theirs: u32) {
        let Some(ours) = self
            .children
            .iter()
            .position(|c| c.rekey_of == Some(old_spi) && c.is_current())
        else {
            return;
        };
        let Some(their_idx) = self.children.iter().position(|c| c.spi_in == theirs) else {
            return;
        };
        ctx.count(Counter::RekeyCollisions);
        let lost = match (
            &self.children[ours].nonces,
            &self.children[their_idx].nonces,
        ) {
            (Some(o), Some(t)) => lowest(o) < lowest(t),
            _ => false,
        };
        self.children[ours].rekey_of = None;
        if lost {
            ctx.count(Counter::RedundantSasDeleted);
            let their = &mut self.children[their_idx];
            their.replaces = None;
            their.install_pending_outbound(ctx);
            let spi = self.children[ours].spi_in;
            self.start_delete_children(ctx, vec![spi]);
        } else {
            self.children[their_idx].lost_collision();
        }
    }

    /// Initiator: the answer to a CREATE_CHILD_SA for a Child SA.
    pub(crate) fn process_child_response(
        &mut self,
        ctx: &mut Ctx<'_>,
        offer: ChildOffer,
        payloads: &[Payload],
    ) {
        let found = Found::scan(payloads);
        self.complete_child_offer(ctx, offer, &found, None);
    }

    /// Initiator: completes an offer made in IKE_AUTH (`nonces` from
    /// IKE_SA_INIT) or CREATE_CHILD_SA.
    pub(crate) fn complete_child_offer(
        &mut self,
        ctx: &mut Ctx<'_>,
        mut offer: ChildOffer,
        found: &Found<'_>,
        nonces: Option<(Vec<u8>, Vec<u8>)>,
    ) {
        match self.accept_child(&mut offer, found, nonces) {
            Ok((draft, shared)) => {
                // RFC 9370 §2.2.4: IKE_FOLLOWUP_KE first if ADDKE was chosen.
                let remaining = draft.additional_exchanges();
                let keying = Keying::Child {
                    offer: Box::new(offer),
                    draft,
                };
                let secrets = shared.into_iter().collect();
                self.continue_key_exchanges(ctx, keying, secrets, remaining, found);
            }
            Err(e) => self.child_offer_failed(ctx, offer, e, found),
        }
    }

    /// Every key exchange of our offer is done: install the Child SA (a
    /// new one, or the rekey of our inbound SPI `rekey_of`).
    pub(crate) fn install_child(
        &mut self,
        ctx: &mut Ctx<'_>,
        new: NewChild,
        rekey_of: Option<u32>,
    ) {
        match rekey_of {
            None => self.add_child(ctx, new, true),
            Some(old) => self.finish_child_rekey(ctx, new, old),
        }
    }

    /// Our rekey completed: install the new SA and retire the old one —
    /// unless the peer rekeyed it too and our SA is the redundant one
    /// (§2.8.1).
    fn finish_child_rekey(&mut self, ctx: &mut Ctx<'_>, new: NewChild, old_spi: u32) {
        let Some(old_idx) = self.children.iter().position(|c| c.spi_in == old_spi) else {
            // The peer deleted the old SA meanwhile (§2.25.1); the new one
            // it just created stands.
            self.add_child(ctx, new, true);
            return;
        };
        if let Some(peer_new) = self.children[old_idx].peer_rekey {
            ctx.count(Counter::RekeyCollisions);
            let theirs = self
                .children
                .iter()
                .find(|c| c.spi_in == peer_new)
                .and_then(|c| c.nonces.clone());
            let ours_lost = theirs.is_some_and(|t| lowest(&new.draft.nonces) < lowest(&t));
            if ours_lost {
                self.drop_redundant(ctx, new);
                let old = &mut self.children[old_idx];
                old.status = ChildStatus::Rekeyed;
                old.timers
                    .set(ChildTimer::Retire, ctx.now + REKEY_DELETE_FALLBACK);
                return;
            }
            // Ours stands: the peer deletes its redundant SA; it never
            // takes our traffic.
            if let Some(redundant) = self.children.iter_mut().find(|c| c.spi_in == peer_new) {
                redundant.lost_collision();
            }
        }
        let new_spi = new.draft.spi_in;
        self.add_child(ctx, new, true);
        if let Some(ours) = self.children.iter_mut().find(|c| c.spi_in == new_spi) {
            ours.rekey_of = Some(old_spi);
        }
        ctx.count(Counter::ChildSasRekeyed);
        if let Some(old) = self.children.iter_mut().find(|c| c.spi_in == old_spi) {
            old.status = ChildStatus::Rekeyed;
            old.timers.stop(ChildTimer::Rekey);
            old.timers.set(ChildTimer::Retire, ctx.now + REKEY_OVERLAP);
        }
    }

    /// §2.8.1: the SA we created lost the collision. It is never installed;
    /// we delete it (we created it).
    fn drop_redundant(&mut self, ctx: &mut Ctx<'_>, new: NewChild) {
        ctx.count(Counter::RedundantSasDeleted);
        let spi_in = new.draft.spi_in;
        let pfs = new.draft.negotiated.pfs_group();
        let mut record = ChildSa::record(new, pfs, ctx.now);
        record.status = ChildStatus::Rekeyed;
        self.children.push(record);
        self.push_task(ctx, Task::DeleteChildren { spis: vec![spi_in] });
    }

    /// An offer the responder refused, or whose answer we cannot use.
    pub(crate) fn child_offer_failed(
        &mut self,
        ctx: &mut Ctx<'_>,
        offer: ChildOffer,
        e: IkeError,
        found: &Found<'_>,
    ) {
        ctx.free_child_spi(offer.spi_in);
        self.restore_rekeyed(offer.rekey_of);
        let retries = offer.retries + 1;
        match (&e, offer.rekey_of) {
            (IkeError::PeerError(NotifyType::TEMPORARY_FAILURE), _)
                if retries <= TEMPORARY_FAILURE_MAX_RETRIES =>
            {
                // §2.25: wait, then retry.
                ctx.count(Counter::TemporaryFailures);
                let task = match offer.rekey_of {
                    Some(spi_in) => Task::RekeyChild { spi_in, retries },
                    None => Task::CreateChild {
                        child: offer.config,
                        trigger: offer.trigger,
                        retries,
                        group: None,
                    },
                };
                let wait = TEMPORARY_FAILURE_RETRY_MIN
                    + ctx.random_duration(TEMPORARY_FAILURE_RETRY_JITTER);
                self.delay_task(ctx, task, wait);
            }
            (IkeError::PeerError(NotifyType::CHILD_SA_NOT_FOUND), Some(old_spi)) => {
                // §2.25: forget the SA silently and create it anew.
                self.forget_child(ctx, old_spi);
                self.push_task(
                    ctx,
                    Task::CreateChild {
                        child: offer.config,
                        trigger: None,
                        retries: 0,
                        group: None,
                    },
                );
            }
            (IkeError::PeerError(NotifyType::INVALID_KE_PAYLOAD), None)
                if retries <= MAX_INIT_RESTARTS =>
            {
                self.retry_with_group(ctx, offer, retries, found, &e)
            }
            _ => self.report_child_failure(ctx, &offer.config, &e),
        }
    }

    /// §1.3.1: INVALID_KE_PAYLOAD names the group the responder wants; we
    /// try again with it if our config offers it.
    fn retry_with_group(
        &mut self,
        ctx: &mut Ctx<'_>,
        offer: ChildOffer,
        retries: u32,
        found: &Found<'_>,
        e: &IkeError,
    ) {
        let wanted = found
            .notify(NotifyType::INVALID_KE_PAYLOAD)
            .and_then(|n| <[u8; 2]>::try_from(n.data.as_slice()).ok())
            .map(|b| KeId(u16::from_be_bytes(b)));
        let ours = child_config(&self.conn, &offer.config).is_some_and(|c| {
            c.proposals
                .iter()
                .any(|p| wanted.is_some_and(|w| p.ke.contains(&w)))
        });
        if !ours {
            self.report_child_failure(ctx, &offer.config, e);
            return;
        }
        let task = Task::CreateChild {
            child: offer.config,
            trigger: offer.trigger,
            retries,
            group: wanted,
        };
        self.push_task(ctx, task);
    }

    pub(crate) fn report_child_failure(&mut self, ctx: &mut Ctx<'_>, config: &str, e: &IkeError) {
        match e {
            IkeError::PeerError(NotifyType::TS_UNACCEPTABLE) => ctx.count(Counter::TsRefused),
            IkeError::PeerError(NotifyType::NO_PROPOSAL_CHOSEN) => {
                ctx.count(Counter::ProposalsRefused)
            }
            _ => {}
        }
        ctx.count(Counter::ChildSasFailed);
        ctx.event(SaEvent::ChildSaFailed {
            connection: self.conn.name.clone(),
            child: config.to_owned(),
            reason: e.to_string(),
        });
    }

    /// Removes a Child SA without an exchange.
    pub(crate) fn forget_child(&mut self, ctx: &mut Ctx<'_>, spi_in: u32) {
        if let Some(idx) = self.children.iter().position(|c| c.spi_in == spi_in) {
            let mut child = self.children.remove(idx);
            ctx.count(Counter::ChildSasDeleted);
            child.remove(ctx, &self.conn.name);
        }
    }
}
