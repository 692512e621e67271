//! IKE_SA_INIT, both roles (RFC 7296 §1.2).
//!
//! ```text
//! Initiator                         Responder
//! -------------------------------------------------------------------
//! HDR, SAi1, KEi, Ni,
//!   N(NAT_DETECTION_SOURCE_IP), N(NAT_DETECTION_DESTINATION_IP),
//!   [N(IKEV2_FRAGMENTATION_SUPPORTED)], [N(SIGNATURE_HASH_ALGORITHMS)]  -->
//!                                   <--  HDR, SAr1, KEr, Nr, [CERTREQ],
//!                                          N(NAT_DETECTION_*), [N(...)]
//! ```
//!
//! The responder may instead answer N(COOKIE) (§2.6; the initiator retries
//! with the cookie first), N(INVALID_KE_PAYLOAD) with the group it wants
//! (§1.2; the initiator retries with that group), or an error
//! (NO_PROPOSAL_CHOSEN, INVALID_SYNTAX, …). These answers are not
//! protected; the responder keeps no state for them.
//!
//! Both sides then derive SKEYSEED and SK_* (§2.14), and if a NAT is
//! detected (§2.23) or encapsulation is forced, the initiator moves IKE to
//! port 4500 for IKE_AUTH and every Child SA is UDP-encapsulated.
//!
//! Proposals may carry RFC 9370 additional key exchanges (ADDKE1..7).
//! The initiator then announces N(INTERMEDIATE_EXCHANGE_SUPPORTED)
//! (RFC 9242 §3.2); a responder selects additional key exchanges only
//! from an initiator that announced it (otherwise only NONE, RFC 9370
//! §2.2.1), and announces it back when it selected one. The exchanges
//! themselves run in IKE_INTERMEDIATE before IKE_AUTH
//! ([`intermediate`](super::intermediate)).

use core::net::SocketAddr;
use std::collections::VecDeque;
use std::sync::Arc;

use phalanx_crypto::ike::{respond, start_initiator, IkeSaKeys, KdfInputs, KexState};
use phalanx_crypto::KeGroup;
use phalanx_wire::ike::iana::{ExchangeType, KeId, NotifyType, PayloadType};
use phalanx_wire::ike::{IkeHeader, KePayload, MessageRepr, NoncePayload, Payload, SaPayload};

use crate::auth::SUPPORTED_HASH_ALGORITHMS;
use crate::config::{Connection, IkeProposal, LocalAuth, RemoteAuth};
use crate::counters::Counter;
use crate::error::IkeError;
use crate::events::Datagram;
use crate::exchange::auth::{certificate_request, AuthInputs};
use crate::exchange::intermediate::IntAuthChain;
use crate::exchange::{notify, Found};
use crate::ike_sa::{Ctx, IkeSa, Pending, SaCrypto, State, Task};
use crate::limits::{HALF_OPEN_TIMEOUT, MAX_COOKIE_LEN, MAX_INIT_RESTARTS, NATT_PORT, NONCE_LEN};
use crate::natd::{nat_detection_hash, NatStatus, NAT_HASH_LEN};
use crate::proposal::{accept_ike_answer, ike_sa_payload, select_ike_for_kei, NegotiatedIke};
use crate::protect::{Protection, Reassembler};
use crate::timers::IkeTimer;

/// Initiator, waiting for the IKE_SA_INIT answer.
pub(crate) struct InitSent {
    /// Our ephemeral key.
    pub(crate) kex: KexState,
    /// Ni.
    pub(crate) ni: Vec<u8>,
    /// SAi1 as sent.
    pub(crate) offered: SaPayload,
    /// The responder's cookie, once asked for (§2.6).
    pub(crate) cookie: Option<Vec<u8>>,
    /// COOKIE / INVALID_KE_PAYLOAD restarts so far.
    pub(crate) restarts: u32,
    /// The request as last sent: RealMessage1 of the AUTH octets (§2.15).
    pub(crate) request: Vec<u8>,
}

/// Responder, IKE_SA_INIT answered, waiting for IKE_AUTH.
pub(crate) struct HalfOpen {
    /// The request as received (RealMessage1).
    pub(crate) request: Vec<u8>,
    /// Our answer as sent (RealMessage2).
    pub(crate) response: Vec<u8>,
    /// Ni.
    pub(crate) ni: Vec<u8>,
    /// Nr.
    pub(crate) nr: Vec<u8>,
    /// RFC 9370 additional key exchanges still to run in IKE_INTERMEDIATE,
    /// in ADDKE type order.
    pub(crate) additional: VecDeque<KeId>,
    /// The IKE_INTERMEDIATE exchanges so far (RFC 9242 §3.3.2).
    pub(crate) chain: IntAuthChain,
}

/// Our IKE proposals as offered and accepted in IKE_SA_INIT, RFC 9370
/// additional key exchanges included.
pub(crate) fn ike_offers(conn: &Connection) -> Vec<IkeProposal> {
    conn.ike_proposals.clone()
}

/// Our IKE proposals without additional key exchanges: what we accept
/// when IKE_INTERMEDIATE cannot carry them (an initiator that did not
/// announce it, RFC 9370 §2.2.1). An offer that requires an additional
/// key exchange is then refused (NO_PROPOSAL_CHOSEN); one that allows
/// NONE gets NONE. (IKE SA rekeys carry them in IKE_FOLLOWUP_KE, RFC 9370
/// §2.2.4, and use [`ike_offers`].)
pub(crate) fn ike_offers_without_additional_ke(conn: &Connection) -> Vec<IkeProposal> {
    conn.ike_proposals
        .iter()
        .map(|p| IkeProposal {
            additional_ke: Vec::new(),
            ..p.clone()
        })
        .collect()
}

/// Whether any of our proposals carries ADDKE transforms (RFC 9370
/// §2.2.1: then IKE_INTERMEDIATE must be negotiated too).
fn offers_additional_ke(conn: &Connection) -> bool {
    conn.ike_proposals
        .iter()
        .any(|p| !p.additional_ke.is_empty())
}

/// Whether signatures authenticate either side (RFC 7427 §4: then we
/// announce the hashes we verify).
fn uses_signatures(conn: &Connection) -> bool {
    matches!(conn.local_auth, LocalAuth::Signature { .. })
        || matches!(conn.remote_auth, RemoteAuth::Signature { .. })
}

/// N(IKEV2_FRAGMENTATION_SUPPORTED) (RFC 7383 §2.3) and
/// N(SIGNATURE_HASH_ALGORITHMS) (RFC 7427 §4) as configured.
fn capability_notifies(conn: &Connection, peer_fragments: bool) -> Vec<Payload> {
    let mut out = Vec::new();
    if conn.fragmentation && peer_fragments {
        out.push(notify(
            NotifyType::IKEV2_FRAGMENTATION_SUPPORTED,
            Vec::new(),
        ));
    }
    if uses_signatures(conn) {
        let data = SUPPORTED_HASH_ALGORITHMS
            .iter()
            .flat_map(|h| h.to_be_bytes())
            .collect();
        out.push(notify(NotifyType::SIGNATURE_HASH_ALGORITHMS, data));
    }
    out
}

/// The two NAT detection notifies (RFC 7296 §2.23). With `forge` the
/// source hash is random, so the peer sees a NAT and both sides
/// encapsulate (strongSwan's `encap = yes` does the same).
pub(crate) fn nat_notifies(
    ctx: &mut Ctx<'_>,
    spi_i: u64,
    spi_r: u64,
    local: SocketAddr,
    remote: SocketAddr,
    forge: bool,
) -> [Payload; 2] {
    let source = if forge {
        ctx.random_bytes(NAT_HASH_LEN)
    } else {
        nat_detection_hash(spi_i, spi_r, local).to_vec()
    };
    let destination = nat_detection_hash(spi_i, spi_r, remote).to_vec();
    [
        notify(NotifyType::NAT_DETECTION_SOURCE_IP, source),
        notify(NotifyType::NAT_DETECTION_DESTINATION_IP, destination),
    ]
}

/// What the peer's NAT detection notifies say about the path of a
/// message from `remote` to `local` (IKE_SA_INIT, or a MOBIKE update).
pub(crate) fn nat_status(
    found: &Found<'_>,
    spi_i: u64,
    spi_r: u64,
    (local, remote): (SocketAddr, SocketAddr),
) -> NatStatus {
    let sources = found.all_data(NotifyType::NAT_DETECTION_SOURCE_IP);
    let destination = found
        .notify(NotifyType::NAT_DETECTION_DESTINATION_IP)
        .map(|n| n.data.as_slice());
    NatStatus::detect(spi_i, spi_r, &sources, destination, remote, local).unwrap_or_default()
}

/// The peer's SIGNATURE_HASH_ALGORITHMS, as two-octet values (RFC 7427 §4).
fn peer_hashes(found: &Found<'_>) -> Vec<u16> {
    found
        .notify(NotifyType::SIGNATURE_HASH_ALGORITHMS)
        .map(|n| {
            n.data
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect()
        })
        .unwrap_or_default()
}

fn start_kex(ctx: &mut Ctx<'_>, group: KeId) -> Result<KexState, IkeError> {
    let group = KeGroup::try_from(group)?;
    Ok(start_initiator(ctx.provider, group, &mut *ctx.rng)?)
}

impl SaCrypto {
    /// Keys of a new IKE SA from IKE_SA_INIT (RFC 7296 §2.14).
    pub(crate) fn from_init(
        ctx: &mut Ctx<'_>,
        negotiated: NegotiatedIke,
        shared_secret: &[u8],
        inputs: &KdfInputs<'_>,
        initiator: bool,
    ) -> Result<SaCrypto, IkeError> {
        let prf = negotiated.prf_algorithm()?;
        let lengths = negotiated.key_lengths()?;
        let keys = IkeSaKeys::derive(ctx.provider, prf, lengths, inputs, shared_secret)?;
        SaCrypto::with_keys(ctx, negotiated, keys, initiator)
    }

    /// Wraps derived keys with their protection.
    pub(crate) fn with_keys(
        ctx: &mut Ctx<'_>,
        negotiated: NegotiatedIke,
        keys: IkeSaKeys,
        initiator: bool,
    ) -> Result<SaCrypto, IkeError> {
        let prf = negotiated.prf_algorithm()?;
        let protection = Protection::with_provider(ctx.provider, &keys, &negotiated, initiator)?;
        Ok(SaCrypto {
            negotiated,
            prf,
            keys,
            protection,
            reassembler: Reassembler::default(),
        })
    }
}

impl IkeSa {
    /// Starts an IKE SA as initiator: sends IKE_SA_INIT. `tasks` are the
    /// Child SAs to create; the first goes into IKE_AUTH.
    pub(crate) fn initiate(
        ctx: &mut Ctx<'_>,
        conn: Arc<Connection>,
        remote: SocketAddr,
        tasks: Vec<Task>,
    ) -> Result<IkeSa, IkeError> {
        let offers = ike_offers(&conn);
        let group = offers
            .iter()
            .flat_map(|p| p.ke.iter())
            .copied()
            .find(|g| KeGroup::try_from(*g).is_ok())
            .ok_or(IkeError::NoProposalChosen)?;
        let kex = start_kex(ctx, group)?;
        let init = InitSent {
            kex,
            ni: ctx.random_bytes(NONCE_LEN),
            offered: ike_sa_payload(&offers, None),
            cookie: None,
            restarts: 0,
            request: Vec::new(),
        };
        let local = SocketAddr::new(conn.local_addr, conn.local_port);
        let state = State::InitSent(Box::new(init));
        let mut sa = IkeSa::new(conn, true, local, remote, state, ctx.now);
        sa.spi_i = ctx.new_ike_spi();
        sa.tasks = tasks.into();
        sa.window.next_request_id = 1;
        sa.timers
            .set(IkeTimer::Establish, ctx.now + HALF_OPEN_TIMEOUT);
        sa.send_init(ctx)?;
        Ok(sa)
    }

    /// Sends (or re-sends after COOKIE / INVALID_KE_PAYLOAD) our request.
    fn send_init(&mut self, ctx: &mut Ctx<'_>) -> Result<(), IkeError> {
        let nat = nat_notifies(
            ctx,
            self.spi_i,
            0,
            self.local,
            self.remote,
            self.conn.force_encap,
        );
        let capabilities = capability_notifies(&self.conn, true);
        let State::InitSent(st) = &mut self.state else {
            return Err(IkeError::Malformed);
        };
        // RFC 7296 §2.6: the cookie goes first, everything else unchanged.
        let mut payloads: Vec<Payload> = st
            .cookie
            .iter()
            .map(|c| notify(NotifyType::COOKIE, c.clone()))
            .collect();
        payloads.push(Payload::Sa(st.offered.clone()));
        payloads.push(Payload::Ke(KePayload {
            group: st.kex.group().into(),
            data: st.kex.public_value().to_vec(),
        }));
        payloads.push(Payload::Nonce(NoncePayload {
            data: st.ni.clone(),
        }));
        payloads.extend(nat);
        payloads.extend(capabilities);
        if offers_additional_ke(&self.conn) {
            // RFC 9370 §2.2.1: additional key exchanges need IKE_INTERMEDIATE.
            payloads.push(notify(
                NotifyType::INTERMEDIATE_EXCHANGE_SUPPORTED,
                Vec::new(),
            ));
        }
        let message = MessageRepr {
            initiator_spi: self.spi_i,
            responder_spi: 0,
            exchange_type: ExchangeType::IKE_SA_INIT,
            initiator: true,
            response: false,
            message_id: 0,
            payloads,
        };
        let bytes = message.emit_to_vec()?;
        st.request = bytes.clone();
        ctx.count_exchange(ExchangeType::IKE_SA_INIT, false, true);
        ctx.count_sent_notifies(&message.payloads);
        self.start_outstanding(
            ctx,
            0,
            ExchangeType::IKE_SA_INIT,
            vec![bytes],
            Pending::Init,
        );
        Ok(())
    }

    /// The responder's IKE_SA_INIT answer.
    pub(crate) fn handle_init_response(
        &mut self,
        ctx: &mut Ctx<'_>,
        dgram: &Datagram<'_>,
        _hdr: &phalanx_wire::ike::IkeHeaderRepr,
    ) {
        let Ok(msg) = MessageRepr::parse(dgram.bytes) else {
            ctx.count(Counter::Malformed);
            return;
        };
        ctx.count_exchange(ExchangeType::IKE_SA_INIT, true, false);
        ctx.count_received_notifies(&msg.payloads);
        let found = Found::scan(&msg.payloads);
        let result = if let Some(cookie) = found.notify(NotifyType::COOKIE) {
            self.restart_with_cookie(ctx, cookie.data.clone())
        } else if let Some(n) = found.notify(NotifyType::INVALID_KE_PAYLOAD) {
            self.restart_with_group(ctx, &n.data)
        } else if let Some(error) = found.error() {
            if error == NotifyType::NO_PROPOSAL_CHOSEN {
                ctx.count(Counter::ProposalsRefused);
            }
            Err(IkeError::PeerError(error))
        } else {
            self.complete_init(ctx, dgram, &msg, &found)
        };
        if let Err(e) = result {
            self.fail(ctx, &format!("IKE_SA_INIT: {e}"));
        }
    }

    /// RFC 7296 §2.6: retry with the cookie as the first payload.
    fn restart_with_cookie(&mut self, ctx: &mut Ctx<'_>, cookie: Vec<u8>) -> Result<(), IkeError> {
        let State::InitSent(st) = &mut self.state else {
            return Err(IkeError::Malformed);
        };
        st.restarts += 1;
        if st.restarts > MAX_INIT_RESTARTS || cookie.is_empty() || cookie.len() > MAX_COOKIE_LEN {
            return Err(IkeError::PeerError(NotifyType::COOKIE));
        }
        st.cookie = Some(cookie);
        ctx.count(Counter::CookieRestarts);
        self.restart_init(ctx)
    }

    /// RFC 7296 §1.2: retry with the group the responder asked for, if we
    /// offered it.
    fn restart_with_group(&mut self, ctx: &mut Ctx<'_>, data: &[u8]) -> Result<(), IkeError> {
        let wanted = <[u8; 2]>::try_from(data)
            .map(|b| KeId(u16::from_be_bytes(b)))
            .map_err(|_| IkeError::Malformed)?;
        let offered = ike_offers(&self.conn)
            .iter()
            .any(|p| p.ke.contains(&wanted));
        let kex = start_kex(ctx, wanted);
        let State::InitSent(st) = &mut self.state else {
            return Err(IkeError::Malformed);
        };
        st.restarts += 1;
        let current: KeId = st.kex.group().into();
        if !offered || wanted == current || st.restarts > MAX_INIT_RESTARTS {
            return Err(IkeError::PeerError(NotifyType::INVALID_KE_PAYLOAD));
        }
        st.kex = kex?;
        ctx.count(Counter::InvalidKeRestarts);
        self.restart_init(ctx)
    }

    fn restart_init(&mut self, ctx: &mut Ctx<'_>) -> Result<(), IkeError> {
        self.window.outstanding.clear();
        self.timers.stop(IkeTimer::Retransmit);
        self.send_init(ctx)
    }

    /// Derives the keys from the answer, detects NATs, sends IKE_AUTH.
    fn complete_init(
        &mut self,
        ctx: &mut Ctx<'_>,
        dgram: &Datagram<'_>,
        msg: &MessageRepr,
        found: &Found<'_>,
    ) -> Result<(), IkeError> {
        let sa = found.sa.ok_or(IkeError::MissingPayload(PayloadType::SA))?;
        let ke = found.ke.ok_or(IkeError::MissingPayload(PayloadType::KE))?;
        let nr = found
            .nonce
            .ok_or(IkeError::MissingPayload(PayloadType::NONCE))?;
        if msg.responder_spi == 0 {
            return Err(IkeError::Malformed);
        }
        let State::InitSent(st) = self.transition(ctx, State::Closed) else {
            return Err(IkeError::Malformed);
        };
        let negotiated =
            accept_ike_answer(&st.offered, sa).map_err(|_| IkeError::NoProposalChosen)?;
        let ours: KeId = st.kex.group().into();
        let additional: VecDeque<KeId> = negotiated.additional_exchanges().collect();
        // RFC 9370 §2.2.1: a responder that selects an additional key
        // exchange announces IKE_INTERMEDIATE, which runs it.
        let intermediate = found.has(NotifyType::INTERMEDIATE_EXCHANGE_SUPPORTED);
        if negotiated.ke != ke.group
            || ke.group != ours
            || (!additional.is_empty() && !intermediate)
        {
            return Err(IkeError::NoProposalChosen);
        }
        let shared = st.kex.complete(&ke.data).map_err(|_| IkeError::Malformed)?;
        self.spi_r = msg.responder_spi;
        let inputs = KdfInputs {
            ni: &st.ni,
            nr: &nr.data,
            spi_i: self.spi_i.to_be_bytes(),
            spi_r: self.spi_r.to_be_bytes(),
        };
        self.crypto = Some(SaCrypto::from_init(
            ctx, negotiated, &shared, &inputs, true,
        )?);
        self.learn_peer(
            ctx,
            found,
            nat_status(found, self.spi_i, self.spi_r, (dgram.local, dgram.remote)),
        );
        self.window.outstanding.clear();
        self.timers.stop(IkeTimer::Retransmit);
        if self.encap {
            // RFC 7296 §2.23: after a NAT is detected the initiator moves
            // to port 4500 for IKE_AUTH and everything after it.
            self.local.set_port(NATT_PORT);
            self.remote.set_port(NATT_PORT);
        }
        let inputs = AuthInputs {
            init_request: st.request,
            init_response: dgram.bytes.to_vec(),
            ni: st.ni,
            nr: nr.data.clone(),
            int_auth: Vec::new(),
        };
        self.next_intermediate(ctx, inputs, IntAuthChain::default(), additional);
        Ok(())
    }

    /// What IKE_SA_INIT told us about the peer: NAT, fragmentation,
    /// signature hashes, certificate requests.
    fn learn_peer(&mut self, ctx: &mut Ctx<'_>, found: &Found<'_>, nat: NatStatus) {
        if nat.any() || self.conn.force_encap {
            ctx.count(Counter::NatDetected);
            self.encap = true;
        }
        self.local_behind_nat = nat.local_behind_nat;
        self.fragmentation =
            self.conn.fragmentation && found.has(NotifyType::IKEV2_FRAGMENTATION_SUPPORTED);
        self.peer_hashes = peer_hashes(found);
        self.peer_certreq = found.certreq;
    }
}

/// Answers an IKE_SA_INIT request: a new half-open IKE SA (RFC 7296 §1.2).
/// The caller has checked cookies and the half-open limit.
pub(crate) fn respond_init(
    ctx: &mut Ctx<'_>,
    conn: Arc<Connection>,
    dgram: &Datagram<'_>,
    msg: &MessageRepr,
) -> Result<IkeSa, IkeError> {
    let found = Found::scan(&msg.payloads);
    let ni = found
        .nonce
        .ok_or(IkeError::MissingPayload(PayloadType::NONCE))?;
    let mut sa = IkeSa::new(
        conn,
        false,
        dgram.local,
        dgram.remote,
        State::Closed,
        ctx.now,
    );
    sa.spi_i = msg.initiator_spi;
    let answer = sa.answer_init(ctx, &found, &ni.data)?;
    sa.learn_peer(
        ctx,
        &found,
        nat_status(&found, sa.spi_i, 0, (dgram.local, dgram.remote)),
    );
    let payloads = sa.init_answer_payloads(ctx, answer.payloads, !answer.additional.is_empty());
    let response = MessageRepr {
        initiator_spi: sa.spi_i,
        responder_spi: sa.spi_r,
        exchange_type: ExchangeType::IKE_SA_INIT,
        initiator: false,
        response: true,
        message_id: 0,
        payloads,
    };
    let bytes = match response.emit_to_vec() {
        Ok(bytes) => bytes,
        Err(e) => {
            ctx.ike_spis.remove(&sa.spi_r);
            return Err(e.into());
        }
    };
    ctx.count_exchange(ExchangeType::IKE_SA_INIT, true, true);
    ctx.count_sent_notifies(&response.payloads);
    ctx.transmit(dgram.local, dgram.remote, bytes.clone());
    sa.window.answered(0, vec![bytes.clone()]);
    sa.state = State::HalfOpen(Box::new(HalfOpen {
        request: dgram.bytes.to_vec(),
        response: bytes,
        ni: ni.data.clone(),
        nr: answer.nr,
        additional: answer.additional,
        chain: IntAuthChain::default(),
    }));
    sa.init_key = Some((dgram.remote, sa.spi_i));
    sa.timers
        .set(IkeTimer::Establish, ctx.now + HALF_OPEN_TIMEOUT);
    Ok(sa)
}

/// The negotiated part of a responder's IKE_SA_INIT answer.
struct InitAnswer {
    /// SAr1, KEr, Nr.
    payloads: [Payload; 3],
    /// Nr.
    nr: Vec<u8>,
    /// The additional key exchanges selected (RFC 9370 §2.2.1).
    additional: VecDeque<KeId>,
}

impl IkeSa {
    /// Responder: selects the suite, answers the key exchange, picks Nr
    /// and SPIr and derives the keys (§1.2, §2.14).
    fn answer_init(
        &mut self,
        ctx: &mut Ctx<'_>,
        found: &Found<'_>,
        ni: &[u8],
    ) -> Result<InitAnswer, IkeError> {
        let sa_payload = found.sa.ok_or(IkeError::MissingPayload(PayloadType::SA))?;
        let ke = found.ke.ok_or(IkeError::MissingPayload(PayloadType::KE))?;
        // RFC 9370 §2.2.1: additional key exchanges only with an initiator
        // that can run IKE_INTERMEDIATE.
        let ours = if found.has(NotifyType::INTERMEDIATE_EXCHANGE_SUPPORTED) {
            ike_offers(&self.conn)
        } else {
            ike_offers_without_additional_ke(&self.conn)
        };
        let negotiated = select_ike_for_kei(&ours, sa_payload, ke.group).map_err(|e| match e {
            crate::proposal::ProposalError::InvalidKe { wanted } => IkeError::InvalidKe(wanted),
            crate::proposal::ProposalError::Malformed => IkeError::Malformed,
            _ => IkeError::NoProposalChosen,
        })?;
        let group = KeGroup::try_from(ke.group).map_err(|_| IkeError::InvalidKe(negotiated.ke))?;
        // A public value of the wrong size is a malformed KE payload (§3.4).
        let kex = respond(ctx.provider, group, &ke.data, &mut *ctx.rng)
            .map_err(|_| IkeError::Malformed)?;
        let nr = ctx.random_bytes(NONCE_LEN);
        self.spi_r = ctx.new_ike_spi();
        let inputs = KdfInputs {
            ni,
            nr: &nr,
            spi_i: self.spi_i.to_be_bytes(),
            spi_r: self.spi_r.to_be_bytes(),
        };
        let sa_answer = negotiated.answer_payload(None);
        let additional = negotiated.additional_exchanges().collect();
        match SaCrypto::from_init(ctx, negotiated, &kex.shared_secret, &inputs, false) {
            Ok(crypto) => self.crypto = Some(crypto),
            Err(e) => {
                ctx.ike_spis.remove(&self.spi_r);
                return Err(e);
            }
        }
        let payloads = [
            Payload::Sa(sa_answer),
            Payload::Ke(KePayload {
                group: ke.group,
                data: kex.public_value,
            }),
            Payload::Nonce(NoncePayload { data: nr.clone() }),
        ];
        Ok(InitAnswer {
            payloads,
            nr,
            additional,
        })
    }

    /// SAr1, KEr, Nr and the notifies (NAT detection, capabilities,
    /// IKE_INTERMEDIATE when `intermediate`) and CERTREQ of the
    /// responder's answer.
    fn init_answer_payloads(
        &self,
        ctx: &mut Ctx<'_>,
        negotiated: [Payload; 3],
        intermediate: bool,
    ) -> Vec<Payload> {
        let mut payloads = Vec::from(negotiated);
        let forge = self.conn.force_encap;
        payloads.extend(nat_notifies(
            ctx,
            self.spi_i,
            self.spi_r,
            self.local,
            self.remote,
            forge,
        ));
        payloads.extend(capability_notifies(&self.conn, self.fragmentation));
        if intermediate {
            payloads.push(notify(
                NotifyType::INTERMEDIATE_EXCHANGE_SUPPORTED,
                Vec::new(),
            ));
        }
        payloads.extend(certificate_request(&self.conn));
        payloads
    }
}

/// An unprotected one-notify answer to an IKE_SA_INIT request: an error
/// (RFC 7296 §2.21.1) or a COOKIE (§2.6). The responder keeps no state.
pub(crate) fn stateless_answer(
    request: &MessageRepr,
    ty: NotifyType,
    data: Vec<u8>,
) -> Option<Vec<u8>> {
    MessageRepr {
        initiator_spi: request.initiator_spi,
        responder_spi: 0,
        exchange_type: request.exchange_type,
        initiator: false,
        response: true,
        message_id: request.message_id,
        payloads: vec![notify(ty, data)],
    }
    .emit_to_vec()
    .ok()
}

/// RFC 7296 §2.5: a request of another major version is answered
/// INVALID_MAJOR_VERSION with the version we speak (2.0), from the header
/// alone.
pub(crate) fn invalid_major_version_answer(bytes: &[u8]) -> Option<Vec<u8>> {
    let header = IkeHeader::new_checked(bytes).ok()?;
    if header.response() {
        return None;
    }
    MessageRepr {
        initiator_spi: header.initiator_spi(),
        responder_spi: header.responder_spi(),
        exchange_type: header.exchange_type(),
        initiator: !header.initiator(),
        response: true,
        message_id: header.message_id(),
        payloads: vec![notify(NotifyType::INVALID_MAJOR_VERSION, vec![0x20])],
    }
    .emit_to_vec()
    .ok()
}
