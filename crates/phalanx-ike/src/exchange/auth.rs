//! IKE_AUTH, both roles (RFC 7296 §1.2, §2.15, §3.5–§3.8).
//!
//! ```text
//! Initiator                         Responder
//! -------------------------------------------------------------------
//! HDR, SK {IDi, [CERT,] [CERTREQ,] [IDr,] AUTH, [N(INITIAL_CONTACT),]
//!     [N(USE_TRANSPORT_MODE),] SAi2, TSi, TSr}  -->
//!                                   <--  HDR, SK {IDr, [CERT,] AUTH,
//!                                            [N(USE_TRANSPORT_MODE),]
//!                                            SAr2, TSi, TSr}
//! ```
//!
//! AUTH covers the peer's IKE_SA_INIT message, the other side's nonce and
//! prf(SK_p, ID) (§2.15), and after IKE_INTERMEDIATE exchanges IntAuth
//! (RFC 9242 §3.3.2). A peer that fails authentication gets
//! AUTHENTICATION_FAILED and the IKE SA is gone (§2.21.2). A Child SA that
//! cannot be created does not stop the IKE SA: the responder answers with
//! the Child SA's error notify instead of SAr2/TSi/TSr (§1.2).

use phalanx_crypto::ike::prf;
use phalanx_crypto::{CryptoProvider, PrfAlgorithm};
use phalanx_wire::ike::iana::{AuthMethod, CertEncoding, ExchangeType, IdType, NotifyType};
use phalanx_wire::ike::{AuthPayload, CertPayload, CertReqPayload, IdPayload, Payload};

use crate::auth::{
    auth_scheme, choose_scheme, psk_auth, sign_auth, sign_auth_rfc4754,
    signed_octets_with_int_auth, verify_auth, verify_peer_chain, verify_psk_auth, AuthError,
    Identity, Prf,
};
use crate::config::{Connection, LocalAuth, RemoteAuth};
use crate::counters::Counter;
use crate::error::IkeError;
use crate::events::SaEvent;
use crate::exchange::child::ChildOffer;
use crate::exchange::config_payload::{cfg_request, replied_addresses};
use crate::exchange::select::{final_connection, Presented};
use crate::exchange::{notify, Found};
use crate::ike_sa::{AfterSend, Ctx, IkeSa, Pending, Reply, State, Task};
use crate::limits::NAT_KEEPALIVE_INTERVAL;
use crate::timers::{after, IkeTimer};

/// What IKE_SA_INIT leaves for IKE_AUTH.
pub(crate) struct AuthInputs {
    /// The initiator's IKE_SA_INIT request (RealMessage1).
    pub(crate) init_request: Vec<u8>,
    /// The responder's IKE_SA_INIT response (RealMessage2).
    pub(crate) init_response: Vec<u8>,
    /// Ni.
    pub(crate) ni: Vec<u8>,
    /// Nr.
    pub(crate) nr: Vec<u8>,
    /// IntAuth (RFC 9242 §3.3.2), empty without IKE_INTERMEDIATE.
    pub(crate) int_auth: Vec<u8>,
}

/// Initiator, IKE_AUTH sent.
pub(crate) struct AuthSent {
    /// From IKE_SA_INIT.
    pub(crate) inputs: AuthInputs,
    /// The Child SA offered along, if any.
    pub(crate) child: Option<ChildOffer>,
}

/// The negotiated PRF as the closure `crate::auth` takes: prf(key, parts).
/// HMAC takes keys of any length, so keying cannot fail for a negotiated
/// PRF; if the provider refused anyway, the empty output fails the AUTH
/// comparison (never a false accept).
pub(crate) fn prf_closure(
    provider: &'static dyn CryptoProvider,
    alg: PrfAlgorithm,
) -> impl Fn(&[u8], &[&[u8]]) -> Vec<u8> {
    move |key: &[u8], parts: &[&[u8]]| {
        provider
            .prf(alg, key)
            .map(|k| prf(&*k, parts).to_vec())
            .unwrap_or_default()
    }
}

/// The ID payload for an identity.
fn id_payload(identity: &Identity) -> IdPayload {
    IdPayload {
        id_type: IdType(identity.id_type()),
        data: identity.to_id_body(),
    }
}

/// CERTREQ naming our trust anchors by the SHA-1 hashes of their public
/// keys (RFC 7296 §3.7), when we verify certificates and are configured to
/// ask for them.
pub(crate) fn certificate_request(conn: &Connection) -> Option<Payload> {
    let RemoteAuth::Signature { anchors } = &conn.remote_auth else {
        return None;
    };
    conn.send_certreq.then(|| {
        Payload::CertReq(CertReqPayload {
            encoding: CertEncoding::X509_SIGNATURE,
            authorities: anchors.key_hashes().concat(),
        })
    })
}

/// RestOfIDPayload: ID Type, three RESERVED octets, the data (§2.15).
pub(crate) fn rest_of_id(id: &IdPayload) -> Vec<u8> {
    let mut out = vec![id.id_type.0, 0, 0, 0];
    out.extend_from_slice(&id.data);
    out
}

impl IkeSa {
    /// Sends IKE_AUTH with the first Child SA waiting in the task queue.
    pub(crate) fn start_auth(&mut self, ctx: &mut Ctx<'_>, inputs: AuthInputs) {
        let first = self
            .tasks
            .iter()
            .position(|t| matches!(t, Task::CreateChild { .. }))
            .and_then(|i| self.tasks.remove(i));
        let child = match first {
            Some(Task::CreateChild { child, trigger, .. }) => {
                self.make_child_offer(ctx, &child, trigger, None, false, None)
            }
            _ => None,
        };
        match self.auth_request_payloads(ctx, &inputs, child.as_ref()) {
            Ok(mut payloads) => {
                payloads.extend(self.announce_window(ctx));
                self.transition(ctx, State::AuthSent(Box::new(AuthSent { inputs, child })));
                if self
                    .send_request(ctx, ExchangeType::IKE_AUTH, payloads, Pending::Auth)
                    .is_err()
                {
                    if let State::AuthSent(st) = self.transition(ctx, State::Closed) {
                        self.abandon_offer(ctx, st.child);
                    }
                    self.fail(ctx, "IKE_AUTH could not be sealed");
                }
            }
            Err(e) => {
                if let Some(offer) = child {
                    ctx.free_child_spi(offer.spi_in);
                }
                self.fail(ctx, &format!("IKE_AUTH: {e}"));
            }
        }
    }

    fn auth_request_payloads(
        &self,
        ctx: &mut Ctx<'_>,
        inputs: &AuthInputs,
        child: Option<&ChildOffer>,
    ) -> Result<Vec<Payload>, IkeError> {
        let idi = id_payload(&self.conn.local_id);
        let crypto = self.crypto.as_ref().ok_or(IkeError::Malformed)?;
        let prf = prf_closure(ctx.provider, crypto.prf);
        let octets = signed_octets_with_int_auth(
            &prf,
            &inputs.init_request,
            &inputs.nr,
            &crypto.keys.sk_pi,
            &rest_of_id(&idi),
            &inputs.int_auth,
        );
        let auth = self.our_auth(&prf, &octets)?;
        let mut payloads = vec![Payload::Idi(idi)];
        payloads.extend(self.our_certificates());
        payloads.extend(certificate_request(&self.conn));
        if let Some(remote_id) = &self.conn.remote_id {
            payloads.push(Payload::Idr(id_payload(remote_id)));
        }
        payloads.push(Payload::Auth(auth));
        payloads.extend(cfg_request(&self.conn.vips));
        // RFC 7296 §2.4: this is the only IKE SA between us; the peer may
        // drop older ones (a restart of ours).
        payloads.push(notify(NotifyType::INITIAL_CONTACT, Vec::new()));
        if let Some(offer) = child {
            payloads.extend(self.child_offer_payloads(offer));
        }
        Ok(payloads)
    }

    /// Our CERT payloads: the chain, end entity first, when we sign and
    /// are configured or asked to send it (RFC 7296 §3.6, §3.7).
    fn our_certificates(&self) -> Vec<Payload> {
        match &self.conn.local_auth {
            LocalAuth::Signature { chain, .. } if self.conn.send_cert || self.peer_certreq => chain
                .iter()
                .map(|der| {
                    Payload::Cert(CertPayload {
                        encoding: CertEncoding::X509_SIGNATURE,
                        data: der.clone(),
                    })
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Our AUTH payload over `octets`: shared key MIC, or a signature —
    /// RFC 7427 when the peer announced hashes we can use, RFC 4754 ECDSA
    /// otherwise.
    fn our_auth(&self, prf: Prf<'_>, octets: &[u8]) -> Result<AuthPayload, IkeError> {
        Ok(match &self.conn.local_auth {
            LocalAuth::Psk(secret) => AuthPayload {
                method: AuthMethod::SHARED_KEY_MIC,
                data: psk_auth(prf, secret, octets),
            },
            LocalAuth::Signature { key, .. } => {
                match choose_scheme(key.kind(), &self.peer_hashes, &self.conn.local_signatures) {
                    Some(scheme) => AuthPayload {
                        method: AuthMethod::DIGITAL_SIGNATURE,
                        data: sign_auth(key, scheme, octets)?,
                    },
                    None => {
                        let (method, data) = sign_auth_rfc4754(key, octets)?;
                        AuthPayload {
                            method: AuthMethod(method),
                            data,
                        }
                    }
                }
            }
        })
    }

    /// Checks the peer's identity and AUTH over `octets` (§2.15, RFC 4945).
    fn verify_peer(
        &self,
        ctx: &Ctx<'_>,
        id: &IdPayload,
        auth: &AuthPayload,
        certs: &[&CertPayload],
        octets: &[u8],
    ) -> Result<Identity, AuthError> {
        let presented = Identity::from_id(id.id_type.0, &id.data)?;
        if let Some(wanted) = &self.conn.remote_id {
            if !wanted.matches(&presented) {
                return Err(AuthError::IdentityMismatch);
            }
        }
        let crypto = self.crypto.as_ref().ok_or(AuthError::MalformedAuthData)?;
        let prf = prf_closure(ctx.provider, crypto.prf);
        match &self.conn.remote_auth {
            RemoteAuth::Psk(secret) => {
                if auth.method != AuthMethod::SHARED_KEY_MIC {
                    return Err(AuthError::UnsupportedAuthMethod(auth.method.0));
                }
                verify_psk_auth(&prf, secret, octets, &auth.data)?;
            }
            // EAP's AUTH is keyed with the MSK (`exchange::eap`).
            RemoteAuth::Eap => return Err(AuthError::UnsupportedAuthMethod(auth.method.0)),
            RemoteAuth::Signature { anchors } => {
                let x509: Vec<&[u8]> = certs
                    .iter()
                    .filter(|c| c.encoding == CertEncoding::X509_SIGNATURE)
                    .map(|c| c.data.as_slice())
                    .collect();
                let (end_entity, intermediates) =
                    x509.split_first().ok_or(AuthError::BadCertificate)?;
                let now = ctx.unix_time.ok_or_else(|| {
                    AuthError::CertificateInvalid("wall-clock time not set".to_owned())
                })?;
                let peer = verify_peer_chain(end_entity, intermediates, anchors, now)?;
                if !peer.matches_identity(&presented) {
                    return Err(AuthError::IdentityMismatch);
                }
                verify_auth(&peer, auth.method.0, &auth.data, octets)?;
                let wanted = &self.conn.remote_signatures;
                let used = auth_scheme(auth.method.0, &auth.data);
                if !wanted.is_empty() && !used.is_some_and(|s| wanted.contains(&s)) {
                    return Err(AuthError::SchemeNotAccepted);
                }
            }
        }
        Ok(presented)
    }

    /// Responder: the initiator's IKE_AUTH request.
    pub(crate) fn process_auth_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        payloads: &[Payload],
    ) -> Reply {
        if !self.is_half_open() {
            ctx.count(Counter::UnexpectedExchange);
            return Reply::of(vec![notify(NotifyType::INVALID_SYNTAX, Vec::new())]);
        }
        let State::HalfOpen(st) = self.transition(ctx, State::Closed) else {
            return Reply::default();
        };
        if !st.additional.is_empty() {
            // RFC 9370 §2.2.2: every negotiated exchange precedes IKE_AUTH.
            return self.refuse_auth(
                ctx,
                NotifyType::AUTHENTICATION_FAILED,
                "IKE_AUTH before the additional key exchanges",
            );
        }
        // IKE_AUTH_MID: this request's Message ID (RFC 9242 §3.3.2).
        let int_auth = st.chain.value(self.window.expected_request_id);
        let found = Found::scan(payloads);
        let Some(idi) = found.idi else {
            return self.refuse_auth(ctx, NotifyType::AUTHENTICATION_FAILED, "IDi missing");
        };
        let method = found.auth.map(|a| a.method);
        let presented = match self.choose_connection(ctx, idi, found.idr, method) {
            Ok(presented) => presented,
            Err(why) => return self.refuse_auth(ctx, NotifyType::AUTHENTICATION_FAILED, &why),
        };
        let octets = {
            let Some(crypto) = self.crypto.as_ref() else {
                return Reply::default();
            };
            let prf = prf_closure(ctx.provider, crypto.prf);
            signed_octets_with_int_auth(
                &prf,
                &st.request,
                &st.nr,
                &crypto.keys.sk_pi,
                &rest_of_id(idi),
                &int_auth,
            )
        };
        let Some(auth) = found.auth else {
            // §2.16: no AUTH, EAP (the connection chosen takes it).
            return self.start_eap(ctx, &st, presented, payloads, octets, &int_auth);
        };
        let identity = match self.verify_peer(ctx, idi, auth, &found.certs, &octets) {
            Ok(identity) => identity,
            Err(e) => {
                return self.refuse_auth(ctx, NotifyType::AUTHENTICATION_FAILED, &e.to_string())
            }
        };
        // Signed only for a peer that authenticated.
        let ours = self
            .responder_octets(ctx, &st.response, &st.ni, &int_auth)
            .and_then(|octets| self.responder_auth_payloads(ctx, &octets));
        let ours = match ours {
            Ok(ours) => ours,
            Err(e) => {
                return self.refuse_auth(ctx, NotifyType::AUTHENTICATION_FAILED, &e.to_string())
            }
        };
        self.remote_identity = Some(identity);
        self.authenticated(ctx, ours, &found, (&st.ni, &st.nr))
    }

    /// The peer is authenticated (IKE_AUTH, or its last message after
    /// EAP): the IKE SA is up; the answer is `ours` (IDr, CERT, AUTH), a
    /// CFG_REPLY and the Child SA of the first IKE_AUTH request `found`.
    pub(crate) fn authenticated(
        &mut self,
        ctx: &mut Ctx<'_>,
        ours: Vec<Payload>,
        found: &Found<'_>,
        nonces: (&[u8], &[u8]),
    ) -> Reply {
        // Addresses first: IkeSaUp names them.
        let cp = self.answer_cfg_request(ctx, found.cp);
        self.initial_contact = found.has(NotifyType::INITIAL_CONTACT);
        self.learn_peer_window(found);
        self.establish(ctx);
        let mut reply = Reply::of(ours);
        reply.payloads.extend(self.announce_window(ctx));
        reply.payloads.extend(self.agree_mobike(found));
        match cp {
            Ok(cp) => reply.payloads.extend(cp),
            Err(e) => {
                // §3.15.4: no address, no Child SA; the IKE SA stays.
                reply.payloads.extend(self.child_refusal(ctx, &e, ""));
                return reply;
            }
        }
        if found.sa.is_some() {
            match self.respond_child(ctx, found, nonces, false, (None, None)) {
                Ok((payloads, spi_in)) => {
                    reply.payloads.extend(payloads);
                    // IKE_AUTH has no additional key exchanges: always Some.
                    reply.after.extend(spi_in.map(AfterSend::InstallOutbound));
                }
                Err(e) => reply.payloads.extend(self.child_refusal(ctx, &e, "")),
            }
        }
        reply
    }

    /// Responder: the final connection for the initiator's identities
    /// and authentication ([`select`](crate::exchange::select)); the IKE
    /// SA moves to it; returns IDi as presented. Errors say why none fits.
    fn choose_connection(
        &mut self,
        ctx: &Ctx<'_>,
        idi: &IdPayload,
        idr: Option<&IdPayload>,
        method: Option<AuthMethod>,
    ) -> Result<Identity, String> {
        let parse = |id: &IdPayload| Identity::from_id(id.id_type.0, &id.data);
        let presented_idi = parse(idi).map_err(|e| format!("IDi: {e}"))?;
        let presented_idr = idr
            .map(parse)
            .transpose()
            .map_err(|e| format!("IDr: {e}"))?;
        let suite = &self.crypto.as_ref().ok_or("no keys")?.negotiated;
        let presented = Presented {
            idi: &presented_idi,
            idr: presented_idr.as_ref(),
            method,
        };
        let ends = (self.local.ip(), self.remote.ip());
        let conn = final_connection(ctx.connections, ends, suite, &presented).ok_or_else(|| {
            let how = method.map_or_else(|| "EAP".to_owned(), |m| format!("{m:?}"));
            format!("no connection for {presented_idi} ({how})")
        })?;
        self.conn = conn;
        Ok(presented_idi)
    }

    /// IDr, CERT and AUTH of the responder, AUTH over `octets`
    /// ([`Self::responder_octets`]).
    pub(crate) fn responder_auth_payloads(
        &self,
        ctx: &Ctx<'_>,
        octets: &[u8],
    ) -> Result<Vec<Payload>, IkeError> {
        let crypto = self.crypto.as_ref().ok_or(IkeError::Malformed)?;
        let prf = prf_closure(ctx.provider, crypto.prf);
        let auth = self.our_auth(&prf, octets)?;
        let mut payloads = vec![Payload::Idr(id_payload(&self.conn.local_id))];
        payloads.extend(self.our_certificates());
        payloads.push(Payload::Auth(auth));
        Ok(payloads)
    }

    /// ResponderSignedOctets (§2.15): RealMessage2 | NonceIData |
    /// prf(SK_pr, IDr') [| IntAuth].
    pub(crate) fn responder_octets(
        &self,
        ctx: &Ctx<'_>,
        init_response: &[u8],
        ni: &[u8],
        int_auth: &[u8],
    ) -> Result<Vec<u8>, IkeError> {
        let idr = id_payload(&self.conn.local_id);
        let crypto = self.crypto.as_ref().ok_or(IkeError::Malformed)?;
        let prf = prf_closure(ctx.provider, crypto.prf);
        Ok(signed_octets_with_int_auth(
            &prf,
            init_response,
            ni,
            &crypto.keys.sk_pr,
            &rest_of_id(&idr),
            int_auth,
        ))
    }

    /// Answers a failed IKE_AUTH with `ty` and closes the IKE SA
    /// (RFC 7296 §2.21.2).
    pub(crate) fn refuse_auth(&mut self, ctx: &mut Ctx<'_>, ty: NotifyType, reason: &str) -> Reply {
        ctx.count(Counter::AuthFailed);
        ctx.count(Counter::IkeSasFailed);
        ctx.event(SaEvent::IkeSaFailed {
            connection: self.conn.name.clone(),
            reason: format!("IKE_AUTH: {reason}"),
        });
        Reply {
            payloads: vec![notify(ty, Vec::new())],
            after: vec![AfterSend::Close],
            deferred: false,
        }
    }

    /// Initiator: the responder's IKE_AUTH answer.
    pub(crate) fn process_auth_response(&mut self, ctx: &mut Ctx<'_>, payloads: &[Payload]) {
        let State::AuthSent(st) = self.transition(ctx, State::Closed) else {
            return;
        };
        let found = Found::scan(payloads);
        let (Some(idr), Some(auth)) = (found.idr, found.auth) else {
            if found.error() == Some(NotifyType::AUTHENTICATION_FAILED) {
                ctx.count(Counter::AuthRejectedByPeer);
            }
            self.abandon_offer(ctx, st.child);
            let why = found.error().map_or("IDr or AUTH missing".to_owned(), |e| {
                format!("peer answered {e:?}")
            });
            self.fail(ctx, &format!("IKE_AUTH: {why}"));
            return;
        };
        let octets = {
            let Some(crypto) = self.crypto.as_ref() else {
                return;
            };
            let prf = prf_closure(ctx.provider, crypto.prf);
            let inputs = &st.inputs;
            signed_octets_with_int_auth(
                &prf,
                &inputs.init_response,
                &inputs.ni,
                &crypto.keys.sk_pr,
                &rest_of_id(idr),
                &inputs.int_auth,
            )
        };
        match self.verify_peer(ctx, idr, auth, &found.certs, &octets) {
            Ok(identity) => self.remote_identity = Some(identity),
            Err(e) => {
                // RFC 7296 §2.21.2: an initiator that cannot authenticate
                // the responder says so in an INFORMATIONAL and drops the SA.
                ctx.count(Counter::AuthFailed);
                let note = vec![notify(NotifyType::AUTHENTICATION_FAILED, Vec::new())];
                // Best effort: the IKE SA closes whether or not it is sent.
                let _ = self.send_request(
                    ctx,
                    ExchangeType::INFORMATIONAL,
                    note,
                    Pending::Informational,
                );
                self.abandon_offer(ctx, st.child);
                self.fail(ctx, &format!("IKE_AUTH: {e}"));
                return;
            }
        }
        self.learn_peer_window(&found);
        self.assigned_ips = found.cp.map(replied_addresses).unwrap_or_default();
        self.establish(ctx);
        if let Some(offer) = st.child {
            let nonces = (st.inputs.ni, st.inputs.nr);
            self.complete_child_offer(ctx, offer, &found, Some(nonces));
        }
    }

    /// Authenticated: the IKE SA is up (timers armed, `IkeSaUp` emitted).
    pub(crate) fn establish(&mut self, ctx: &mut Ctx<'_>) {
        self.transition(ctx, State::Established);
        self.established_at = Some(ctx.now);
        self.init_key = None;
        self.timers.stop(IkeTimer::Establish);
        self.arm_lifetime(ctx);
        ctx.count(Counter::IkeSasEstablished);
        ctx.event(SaEvent::IkeSaUp {
            connection: self.conn.name.clone(),
            ike_spi_i: self.spi_i.to_be_bytes(),
            ike_spi_r: self.spi_r.to_be_bytes(),
            local: self.local,
            remote: self.remote,
            peer_id: self.peer_id(),
            virtual_ips: self.all_virtual_ips(),
        });
    }

    /// Arms liveness checks and the IKE SA's rekey and hard expiry
    /// (RFC 7296 §2.8: rekey before the lifetime ends; jitter so both
    /// sides do not rekey at once). A zero duration disables a timer.
    pub(crate) fn arm_lifetime(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(delay) = self.conn.dpd_delay.filter(|d| !d.is_zero()) {
            self.timers.set(IkeTimer::Dpd, after(ctx.now, delay));
        }
        if self.local_behind_nat {
            self.timers.set(
                IkeTimer::NatKeepalive,
                after(ctx.now, NAT_KEEPALIVE_INTERVAL),
            );
        }
        let life = self.conn.ike_lifetime;
        if !life.rekey_time.is_zero() {
            let jitter = ctx.random_duration(life.jitter.min(life.rekey_time));
            self.timers
                .set(IkeTimer::Rekey, after(ctx.now, life.rekey_time - jitter));
        }
        if !life.hard_time.is_zero() {
            self.timers
                .set(IkeTimer::Expire, after(ctx.now, life.hard_time));
        }
    }
}
