//! EAP in IKE_AUTH, responder side (RFC 7296 §2.16): the gateway
//! authenticates with its own AUTH first, then relays EAP between the
//! peer and an EAP backend outside this crate (local methods or a RADIUS
//! server), and both final AUTH payloads are keyed with the MSK.
//!
//! ```text
//! Initiator                         Responder
//! -------------------------------------------------------------------
//! HDR, SK {IDi, [CERTREQ,] [IDr,] [CP(CFG_REQUEST),]
//!          SAi2, TSi, TSr}  -->
//!                              <--  HDR, SK {IDr, [CERT,] AUTH, EAP}
//! HDR, SK {EAP}             -->
//!                              <--  HDR, SK {EAP}        (… rounds …)
//!                              <--  HDR, SK {EAP(Success)}
//! HDR, SK {AUTH}            -->
//!                              <--  HDR, SK {AUTH, [CP(CFG_REPLY),]
//!                                       SAr2, TSi, TSr}
//!
//! AUTH = prf(prf(MSK, "Key Pad for IKEv2"), <SignedOctets>)   (§2.16)
//! ```
//!
//! Each EAP message from the peer becomes an [`SaEvent::EapRequest`]; the
//! IKE_AUTH response waits (deferred) until the backend answers through
//! [`Endpoint::handle_eap`](crate::Endpoint::handle_eap). A retransmitted
//! request meanwhile is not processed again. The Child SA and CFG_REQUEST
//! of the first message are answered with the last one. A failure is
//! EAP-Failure and the IKE SA closes; a backend that never answers leaves
//! the IKE SA to its establishment timer.

use core::net::IpAddr;

use phalanx_wire::ike::iana::{AuthMethod, NotifyType};
use phalanx_wire::ike::{AuthPayload, EapPayload, Payload};
use zeroize::Zeroizing;

use crate::auth::{psk_auth, verify_psk_auth, Identity};
use crate::counters::Counter;
use crate::events::{EapAnswer, SaEvent};
use crate::exchange::auth::prf_closure;
use crate::exchange::init::HalfOpen;
use crate::exchange::Found;
use crate::ike_sa::{AfterSend, Ctx, IkeSa, Reply, State};

/// The responder between the first IKE_AUTH and the last.
pub(crate) struct EapExchange {
    /// The first IKE_AUTH request's payloads: its Child SA and CP are
    /// answered at the end.
    first: Vec<Payload>,
    /// InitiatorSignedOctets and ResponderSignedOctets (§2.15), for the
    /// AUTH payloads keyed with the MSK.
    initiator_octets: Vec<u8>,
    responder_octets: Vec<u8>,
    /// Ni and Nr (the Child SA's KEYMAT).
    nonces: (Vec<u8>, Vec<u8>),
    /// IDi as presented.
    peer: Identity,
    /// IDr, CERT and AUTH of ours, sent with the first EAP Request.
    ours: Vec<Payload>,
    /// After EAP-Success: the MSK, the identity the method proved and the
    /// inner address the backend assigned.
    done: Option<(Zeroizing<Vec<u8>>, String, Option<IpAddr>)>,
}

impl IkeSa {
    /// Responder: the first IKE_AUTH had no AUTH (§2.16). Keeps what the
    /// last message needs, asks the backend for the first EAP Request.
    pub(crate) fn start_eap(
        &mut self,
        ctx: &mut Ctx<'_>,
        st: &HalfOpen,
        peer: Identity,
        payloads: &[Payload],
        initiator_octets: Vec<u8>,
        int_auth: &[u8],
    ) -> Reply {
        let signed = self
            .responder_octets(ctx, &st.response, &st.ni, int_auth)
            .and_then(|octets| Ok((self.responder_auth_payloads(ctx, &octets)?, octets)));
        let (ours, responder_octets) = match signed {
            Ok(signed) => signed,
            Err(e) => {
                return self.refuse_auth(ctx, NotifyType::AUTHENTICATION_FAILED, &e.to_string())
            }
        };
        ctx.count(Counter::EapStarted);
        ctx.event(SaEvent::EapRequest {
            connection: self.conn.name.clone(),
            ike_sa: self.our_spi(),
            peer_id: peer.to_string(),
            local: self.local,
            remote: self.remote,
            message: Vec::new(),
        });
        self.transition(
            ctx,
            State::Eap(Box::new(EapExchange {
                first: payloads.to_vec(),
                initiator_octets,
                responder_octets,
                nonces: (st.ni.clone(), st.nr.clone()),
                peer,
                ours,
                done: None,
            })),
        );
        Reply::later()
    }

    /// Responder: an IKE_AUTH request during EAP: an EAP message for the
    /// backend, or after EAP-Success the AUTH keyed with the MSK.
    pub(crate) fn process_eap_request(&mut self, ctx: &mut Ctx<'_>, payloads: &[Payload]) -> Reply {
        let found = Found::scan(payloads);
        let State::Eap(eap) = &self.state else {
            return Reply::default();
        };
        match (&eap.done, found.eap, found.auth) {
            (None, Some(message), _) => {
                ctx.event(SaEvent::EapRequest {
                    connection: self.conn.name.clone(),
                    ike_sa: self.our_spi(),
                    peer_id: eap.peer.to_string(),
                    local: self.local,
                    remote: self.remote,
                    message: message.message.clone(),
                });
                Reply::later()
            }
            (Some(_), _, Some(auth)) => self.finish_eap(ctx, auth),
            _ => self.refuse_auth(
                ctx,
                NotifyType::AUTHENTICATION_FAILED,
                "EAP: an IKE_AUTH without the EAP or AUTH payload expected",
            ),
        }
    }

    /// The last IKE_AUTH: the peer's AUTH keyed with the MSK (§2.16).
    fn finish_eap(&mut self, ctx: &mut Ctx<'_>, auth: &AuthPayload) -> Reply {
        let State::Eap(eap) = self.transition(ctx, State::Closed) else {
            return Reply::default();
        };
        let Some((msk, identity, virtual_ip)) = &eap.done else {
            return Reply::default();
        };
        let Some(crypto) = self.crypto.as_ref() else {
            return Reply::default();
        };
        let prf = prf_closure(ctx.provider, crypto.prf);
        let verified = auth.method == AuthMethod::SHARED_KEY_MIC
            && verify_psk_auth(&prf, msk.as_slice(), &eap.initiator_octets, &auth.data).is_ok();
        if !verified {
            return self.refuse_auth(
                ctx,
                NotifyType::AUTHENTICATION_FAILED,
                "EAP: the AUTH keyed with the MSK did not verify",
            );
        }
        let ours = vec![Payload::Auth(AuthPayload {
            method: AuthMethod::SHARED_KEY_MIC,
            data: psk_auth(&prf, msk.as_slice(), &eap.responder_octets),
        })];
        // The identity EAP proved is the one pools and logs know the
        // End-User by (strongSwan does the same); IDi when it is no
        // identity of ours to parse.
        self.remote_identity =
            Some(Identity::parse_config(identity).unwrap_or_else(|_| eap.peer.clone()));
        self.assigned_vip = *virtual_ip;
        ctx.count(Counter::EapSucceeded);
        let found = Found::scan(&eap.first);
        let (ni, nr) = &eap.nonces;
        self.authenticated(ctx, ours, &found, (ni, nr))
    }

    /// The peer ended the IKE SA during EAP (INFORMATIONAL with
    /// AUTHENTICATION_FAILED, or a Delete): a failed EAP exchange.
    pub(crate) fn eap_abandoned(&mut self, ctx: &mut Ctx<'_>, refused: bool) -> Reply {
        ctx.count(Counter::EapFailed);
        ctx.count(Counter::IkeSasFailed);
        if refused {
            ctx.count(Counter::AuthRejectedByPeer);
        }
        let why = if refused {
            "the peer gave up (AUTHENTICATION_FAILED)"
        } else {
            "the peer deleted the IKE SA"
        };
        ctx.event(SaEvent::IkeSaFailed {
            connection: self.conn.name.clone(),
            reason: format!("EAP: {why}"),
        });
        self.deferred = None;
        Reply {
            payloads: Vec::new(),
            after: vec![AfterSend::Close],
            deferred: false,
        }
    }

    /// The EAP backend answered: the deferred IKE_AUTH response goes out.
    pub(crate) fn eap_answered(&mut self, ctx: &mut Ctx<'_>, answer: EapAnswer) {
        let State::Eap(eap) = &mut self.state else {
            return;
        };
        if self.deferred.is_none() {
            return;
        }
        let mut payloads = core::mem::take(&mut eap.ours);
        let reply = match answer {
            EapAnswer::Continue(message) => {
                payloads.push(Payload::Eap(EapPayload { message }));
                Reply::of(payloads)
            }
            EapAnswer::Success {
                message,
                msk,
                identity,
                virtual_ip,
            } => {
                eap.done = Some((msk, identity, virtual_ip));
                payloads.push(Payload::Eap(EapPayload { message }));
                Reply::of(payloads)
            }
            EapAnswer::Failure { message, reason } => {
                ctx.count(Counter::EapFailed);
                ctx.count(Counter::AuthFailed);
                ctx.count(Counter::IkeSasFailed);
                ctx.event(SaEvent::IkeSaFailed {
                    connection: self.conn.name.clone(),
                    reason: format!("EAP: {reason}"),
                });
                payloads.push(Payload::Eap(EapPayload { message }));
                Reply {
                    payloads,
                    after: vec![AfterSend::Close],
                    deferred: false,
                }
            }
        };
        self.send_deferred(ctx, reply);
    }
}
