//! One IKE SA: its state, keys, message window, Child SAs and timers
//! (RFC 7296 §1, §2.1–§2.4).
//!
//! An IKE SA is driven by its [`Endpoint`](crate::Endpoint) with a
//! [`Ctx`]: `handle_message` for a datagram demultiplexed to it,
//! `handle_timeout` when one of its timers is due, and `push_task` for
//! work the API asks for. The exchanges themselves live in
//! [`crate::exchange`], one module each; this module holds the machinery
//! they share: sending requests and responses, the response cache, and
//! following the peer's address; `lifecycle` holds the task queue, the
//! timers (retransmission, liveness, lifetimes) and closing.
//!
//! States own their data and are consumed on transition
//! ([`IkeSa::transition`] logs `old -> new` by counting it).

pub(crate) mod child;
pub(crate) mod ctx;
mod lifecycle;
pub(crate) mod task;
pub(crate) mod window;

use core::net::{IpAddr, SocketAddr};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use phalanx_crypto::ike::IkeSaKeys;
use phalanx_crypto::PrfAlgorithm;
use phalanx_sa::{SaMode, UdpEncap};
use phalanx_wire::ike::iana::{ExchangeType, PayloadType};
use phalanx_wire::ike::{IkeHeader, IkeHeaderRepr, Payload};

use crate::auth::Identity;
use crate::config::{Connection, RemoteAuth};
use crate::counters::Counter;
use crate::events::{Datagram, IkeSaInfo, IkeSaState, SaEvent};
use crate::exchange::auth::AuthSent;
use crate::exchange::config_payload::VirtualIp;
use crate::exchange::eap::EapExchange;
use crate::exchange::followup::AwaitedFollowup;
use crate::exchange::init::{HalfOpen, InitSent};
use crate::exchange::intermediate::{received_blob, Intermediate};
use crate::limits::NATT_PORT;
use crate::proposal::NegotiatedIke;
use crate::protect::{Opened, ProtectError, Protection, Reassembler};
use crate::timers::{IkeTimer, TimerTable};

pub(crate) use child::{ChildSa, ChildStatus};
pub(crate) use ctx::Ctx;
pub(crate) use task::{Pending, Task};
use window::{retransmit_timeout, Outstanding, RequestId, Window};

/// Where an IKE SA is in its life; each variant owns what that step needs.
pub(crate) enum State {
    /// Initiator: IKE_SA_INIT sent.
    InitSent(Box<InitSent>),
    /// Initiator: an IKE_INTERMEDIATE additional key exchange sent
    /// (RFC 9370 §2.2.2).
    Intermediate(Box<Intermediate>),
    /// Initiator: IKE_AUTH sent.
    AuthSent(Box<AuthSent>),
    /// Responder: IKE_SA_INIT answered, IKE_AUTH awaited.
    HalfOpen(Box<HalfOpen>),
    /// Responder: EAP in IKE_AUTH (RFC 7296 §2.16).
    Eap(Box<EapExchange>),
    /// Authenticated.
    Established,
    /// Replaced by a rekey (its children moved on); deleted soon.
    Rekeyed,
    /// Our Delete of it is in flight; its children are already removed.
    Deleting,
    /// Finished. Kept only while the Linger timer runs, to answer a
    /// retransmitted last request from the cache.
    Closed,
}

/// The keys and protection of an IKE SA, from IKE_SA_INIT (or its rekey) on.
pub(crate) struct SaCrypto {
    /// The suite.
    pub(crate) negotiated: NegotiatedIke,
    /// Its PRF.
    pub(crate) prf: PrfAlgorithm,
    /// SK_d, SK_a*, SK_e*, SK_p*.
    pub(crate) keys: IkeSaKeys,
    /// SK payload sealing and opening.
    pub(crate) protection: Protection,
    /// RFC 7383 fragments received so far.
    pub(crate) reassembler: Reassembler,
}

/// What to do once a response has been sent.
pub(crate) enum AfterSend {
    /// Install a held-back outbound SA (new Child SA, responder).
    InstallOutbound(u32),
    /// The IKE SA is finished; linger to answer retransmissions.
    Close,
    /// Protect everything from now on with these keys (responder, after
    /// an IKE_INTERMEDIATE additional key exchange, RFC 9370 §2.2.2).
    SwitchKeys(Box<IkeSaKeys>),
}

/// A response to send, and what follows it.
#[derive(Default)]
pub(crate) struct Reply {
    /// The payloads inside SK.
    pub(crate) payloads: Vec<Payload>,
    /// Actions after sending.
    pub(crate) after: Vec<AfterSend>,
    /// No response yet: it waits for an answer from outside (the EAP
    /// backend); [`IkeSa::send_deferred`] sends it.
    pub(crate) deferred: bool,
}

impl Reply {
    /// A reply of these payloads and nothing after.
    pub(crate) fn of(payloads: Vec<Payload>) -> Reply {
        Reply {
            payloads,
            after: Vec::new(),
            deferred: false,
        }
    }

    /// The response comes later ([`Reply::deferred`]).
    pub(crate) fn later() -> Reply {
        Reply {
            deferred: true,
            ..Reply::default()
        }
    }
}

/// One IKE SA.
pub(crate) struct IkeSa {
    /// The connection it belongs to.
    pub(crate) conn: Arc<Connection>,
    /// We initiated this IKE SA (the I flag; after a rekey, the rekey's
    /// initiator, RFC 7296 §2.18).
    pub(crate) initiator: bool,
    /// The initiator's SPI.
    pub(crate) spi_i: u64,
    /// The responder's SPI (0 until known).
    pub(crate) spi_r: u64,
    /// Our address and port.
    pub(crate) local: SocketAddr,
    /// The peer's address and port.
    pub(crate) remote: SocketAddr,
    /// Where it is in its life.
    pub(crate) state: State,
    /// Keys, once IKE_SA_INIT completed.
    pub(crate) crypto: Option<SaCrypto>,
    /// Message IDs, outstanding requests, response cache (RFC 7296 §2.3).
    pub(crate) window: Window,
    /// Its Child SAs.
    pub(crate) children: Vec<ChildSa>,
    /// Its timers.
    pub(crate) timers: TimerTable<IkeTimer>,
    /// Work waiting for the window.
    pub(crate) tasks: VecDeque<Task>,
    /// Work waiting for a time (retries after TEMPORARY_FAILURE).
    pub(crate) delayed: Vec<(Instant, Task)>,
    /// ESP is UDP-encapsulated: a NAT was detected, encapsulation is
    /// forced, or the peer moved to port 4500 (RFC 7296 §2.23).
    pub(crate) encap: bool,
    /// Our side is behind a NAT (RFC 7296 §2.23): we keep the mapping open
    /// with NAT-keepalives (RFC 3948 §2.3).
    pub(crate) local_behind_nat: bool,
    /// Both sides announced RFC 7383 fragmentation.
    pub(crate) fragmentation: bool,
    /// The peer's SIGNATURE_HASH_ALGORITHMS (RFC 7427 §4).
    pub(crate) peer_hashes: Vec<u16>,
    /// The peer sent CERTREQ.
    pub(crate) peer_certreq: bool,
    /// The peer's authenticated identity.
    pub(crate) remote_identity: Option<Identity>,
    /// Inner addresses leased to the peer (responder, RFC 7296 §2.19).
    pub(crate) virtual_ips: Vec<VirtualIp>,
    /// Responder: the inner address the EAP backend assigned (RADIUS
    /// Framed-IP-Address), answered to a CFG_REQUEST before any pool's.
    pub(crate) assigned_vip: Option<IpAddr>,
    /// Inner addresses the peer gave us (initiator, §2.19).
    pub(crate) assigned_ips: Vec<IpAddr>,
    /// The peer sent INITIAL_CONTACT in IKE_AUTH.
    pub(crate) initial_contact: bool,
    /// When IKE_AUTH completed (or the rekey that created it).
    pub(crate) established_at: Option<Instant>,
    /// When we last heard from the peer (a verified message).
    pub(crate) last_heard: Instant,
    /// Responder: the half-open index key (peer address, SPIi).
    pub(crate) init_key: Option<(SocketAddr, u64)>,
    /// On an IKE SA the peer rekeyed while our own rekey of it was in
    /// flight: our SPI of the SA its rekey created, and that exchange's
    /// nonces (RFC 7296 §2.8.1).
    pub(crate) peer_rekey: Option<(u64, Vec<u8>, Vec<u8>)>,
    /// Where the SA moved to after a rekey (our SPI of the new SA).
    pub(crate) successor: Option<u64>,
    /// For a new IKE SA from our rekey: Ni and Nr of that exchange
    /// (§2.8.1), until the collision check has used them.
    pub(crate) rekey_nonces: Option<(Vec<u8>, Vec<u8>)>,
    /// The request (Message ID, exchange) whose response waits for an
    /// answer from outside (EAP).
    pub(crate) deferred: Option<(u32, ExchangeType)>,
    /// MOBIKE agreed (RFC 4555 §3.3).
    pub(crate) mobike: bool,
    /// The path (our address, the peer's, UDP encapsulation) the data
    /// plane keeps while a MOBIKE move awaits its return-routability check
    /// ([`crate::exchange::mobike`]); `None`: the data plane is on the
    /// SA's own path.
    pub(crate) held_path: Option<(SocketAddr, SocketAddr, bool)>,
    /// Our address and the peer's of the request being handled.
    pub(crate) request_path: (SocketAddr, SocketAddr),
    /// Responder: answered CREATE_CHILD_SA exchanges waiting for their
    /// IKE_FOLLOWUP_KE requests (RFC 9370 §2.2.4).
    pub(crate) followups: Vec<AwaitedFollowup>,
}

impl IkeSa {
    /// A new IKE SA with nothing negotiated yet.
    pub(crate) fn new(
        conn: Arc<Connection>,
        initiator: bool,
        local: SocketAddr,
        remote: SocketAddr,
        state: State,
        now: Instant,
    ) -> IkeSa {
        IkeSa {
            encap: conn.force_encap,
            local_behind_nat: false,
            conn,
            initiator,
            spi_i: 0,
            spi_r: 0,
            local,
            remote,
            state,
            crypto: None,
            window: Window::default(),
            children: Vec::new(),
            timers: TimerTable::default(),
            tasks: VecDeque::new(),
            delayed: Vec::new(),
            fragmentation: false,
            peer_hashes: Vec::new(),
            peer_certreq: false,
            remote_identity: None,
            virtual_ips: Vec::new(),
            assigned_vip: None,
            assigned_ips: Vec::new(),
            initial_contact: false,
            established_at: None,
            last_heard: now,
            init_key: None,
            peer_rekey: None,
            successor: None,
            rekey_nonces: None,
            deferred: None,
            mobike: false,
            held_path: None,
            request_path: (local, remote),
            followups: Vec::new(),
        }
    }

    /// Our SPI: the endpoint's key for this SA.
    pub(crate) fn our_spi(&self) -> u64 {
        if self.initiator {
            self.spi_i
        } else {
            self.spi_r
        }
    }

    /// Whether the SA is authenticated and usable.
    pub(crate) fn is_established(&self) -> bool {
        matches!(self.state, State::Established)
    }

    /// Whether it is a responder's half-open SA (RFC 7296 §2.6).
    pub(crate) fn is_half_open(&self) -> bool {
        matches!(self.state, State::HalfOpen(_))
    }

    /// The peer's authenticated identity as text (empty before IKE_AUTH).
    pub(crate) fn peer_id(&self) -> String {
        self.remote_identity
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default()
    }

    /// Inner addresses: leased to the peer, or given to us (§2.19).
    pub(crate) fn all_virtual_ips(&self) -> Vec<IpAddr> {
        self.virtual_ips
            .iter()
            .map(|v| v.address)
            .chain(self.assigned_ips.iter().copied())
            .collect()
    }

    /// Closed, perhaps still lingering to answer retransmits.
    pub(crate) fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// Closed and done lingering: the endpoint may forget it.
    pub(crate) fn is_finished(&self) -> bool {
        matches!(self.state, State::Closed) && !self.timers.is_set(IkeTimer::Linger)
    }

    /// Moves to `next`, counting the transition (STYLE.md: one
    /// `transition()` for every state change; the crate takes no logger, so
    /// the count is the record). Returns the old state so its data can be
    /// consumed.
    pub(crate) fn transition(&mut self, ctx: &mut Ctx<'_>, next: State) -> State {
        ctx.count(Counter::StateTransitions);
        core::mem::replace(&mut self.state, next)
    }

    /// The path of the Child SAs (our address, the peer's, UDP
    /// encapsulation): the SA's own, or the one held while a MOBIKE move
    /// is being checked.
    pub(crate) fn dataplane_path(&self) -> (SocketAddr, SocketAddr, bool) {
        self.held_path
            .unwrap_or((self.local, self.remote, self.encap))
    }

    /// UDP encapsulation for Child SAs, if ESP is encapsulated.
    pub(crate) fn udp_encap(&self) -> Option<UdpEncap> {
        let (local, remote, encap) = self.dataplane_path();
        let floated = local.port() == NATT_PORT || remote.port() == NATT_PORT;
        (encap || floated).then_some(UdpEncap {
            local_port: local.port(),
            remote_port: remote.port(),
        })
    }

    /// The IKE header of a message we send.
    pub(crate) fn header(&self, exchange: ExchangeType, response: bool, id: u32) -> IkeHeaderRepr {
        IkeHeaderRepr {
            initiator_spi: self.spi_i,
            responder_spi: self.spi_r,
            next_payload: PayloadType::SK,
            exchange_type: exchange,
            initiator: self.initiator,
            response,
            message_id: id,
            length: 0,
        }
    }

    /// Seals an encrypted message into its datagram(s), fragmented when
    /// both sides support RFC 7383 and it does not fit.
    fn seal(
        &mut self,
        ctx: &mut Ctx<'_>,
        header: &IkeHeaderRepr,
        payloads: &[Payload],
    ) -> Option<Vec<Vec<u8>>> {
        let mtu = self.fragmentation.then_some(ctx.limits.fragment_mtu);
        let crypto = self.crypto.as_mut()?;
        match crypto.protection.seal(header, payloads, mtu, &mut *ctx.rng) {
            Ok(datagrams) => {
                if datagrams.len() > 1 {
                    ctx.counters
                        .add(Counter::FragmentsSent, datagrams.len() as u64);
                }
                Some(datagrams)
            }
            Err(_) => {
                ctx.count(Counter::Unprocessable);
                None
            }
        }
    }

    /// Sends an encrypted request and waits for its response
    /// (RFC 7296 §2.1). The window must be free. If the message cannot be
    /// sealed, `pending` comes back so its caller can release what it holds.
    pub(crate) fn send_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        exchange: ExchangeType,
        payloads: Vec<Payload>,
        pending: Pending,
    ) -> Result<(), Pending> {
        let id = self.window.next_request_id;
        let header = self.header(exchange, false, id);
        let Some(datagrams) = self.seal(ctx, &header, &payloads) else {
            return Err(pending);
        };
        self.window.take_request_id();
        ctx.count_exchange(exchange, false, true);
        ctx.count_sent_notifies(&payloads);
        self.start_outstanding(ctx, id, exchange, datagrams, pending);
        Ok(())
    }

    /// Sends datagrams of a request and arms its retransmission.
    pub(crate) fn start_outstanding(
        &mut self,
        ctx: &mut Ctx<'_>,
        id: u32,
        exchange: ExchangeType,
        datagrams: Vec<Vec<u8>>,
        pending: Pending,
    ) {
        for datagram in &datagrams {
            ctx.transmit(self.local, self.remote, datagram.clone());
        }
        let retransmit_at = retransmit_timeout(ctx.now, ctx.limits.retransmit_base, 0);
        self.window.outstanding.push(Outstanding {
            id,
            exchange,
            datagrams,
            tries: 0,
            retransmit_at,
            pending,
        });
        self.arm_retransmit();
    }

    /// Arms the retransmission timer for the earliest outstanding request.
    pub(crate) fn arm_retransmit(&mut self) {
        match self.window.next_retransmit() {
            Some(at) => self.timers.set(IkeTimer::Retransmit, at),
            None => self.timers.stop(IkeTimer::Retransmit),
        }
    }

    /// Sends an encrypted response and caches it for retransmitted
    /// requests (RFC 7296 §2.1).
    pub(crate) fn send_response(
        &mut self,
        ctx: &mut Ctx<'_>,
        exchange: ExchangeType,
        id: u32,
        payloads: &[Payload],
    ) {
        let header = self.header(exchange, true, id);
        let datagrams = self.seal(ctx, &header, payloads).unwrap_or_default();
        ctx.count_exchange(exchange, true, true);
        ctx.count_sent_notifies(payloads);
        // To where the request came from (RFC 7296 §2.11), which is where
        // the SA is unless a MOBIKE peer wrote from elsewhere.
        let (local, remote) = self.request_path;
        for datagram in &datagrams {
            ctx.transmit(local, remote, datagram.clone());
        }
        self.window.answered(id, datagrams);
    }

    /// Handles one datagram the endpoint demultiplexed to this SA.
    pub(crate) fn handle_message(
        &mut self,
        ctx: &mut Ctx<'_>,
        dgram: &Datagram<'_>,
        hdr: &IkeHeaderRepr,
    ) {
        if hdr.initiator == self.initiator {
            // RFC 7296 §3.1: the I flag names the original initiator; a
            // message claiming our role is not from our peer.
            ctx.count(Counter::UnknownSpi);
            return;
        }
        if hdr.exchange_type == ExchangeType::IKE_SA_INIT {
            self.handle_init_message(ctx, dgram, hdr);
            return;
        }
        if self.crypto.is_none() {
            ctx.count(Counter::UnexpectedExchange);
            return;
        }
        if hdr.response {
            self.handle_response(ctx, dgram, hdr);
        } else {
            self.handle_request(ctx, dgram, hdr);
        }
        self.pump(ctx);
    }

    /// IKE_SA_INIT on an existing SA: the initiator's answer, or a
    /// retransmitted request whose answer we resend.
    fn handle_init_message(
        &mut self,
        ctx: &mut Ctx<'_>,
        dgram: &Datagram<'_>,
        hdr: &IkeHeaderRepr,
    ) {
        match (&self.state, hdr.response) {
            (State::InitSent(_), true) if hdr.message_id == 0 => {
                self.handle_init_response(ctx, dgram, hdr);
                self.pump(ctx);
            }
            (State::HalfOpen(_), false) => self.resend_init_response(ctx),
            _ => ctx.count(Counter::UnexpectedResponse),
        }
    }

    /// Resends our IKE_SA_INIT answer to a retransmitted request. After
    /// IKE_INTERMEDIATE exchanges the cached last response is another
    /// message, so the answer kept in the half-open state is sent.
    pub(crate) fn resend_init_response(&mut self, ctx: &mut Ctx<'_>) {
        let State::HalfOpen(st) = &self.state else {
            return;
        };
        ctx.count(Counter::RetransmitsAnswered);
        ctx.transmit(self.local, self.remote, st.response.clone());
    }

    /// Resends our response to the request with Message ID `id`
    /// (RFC 7296 §2.1: never reprocess).
    pub(crate) fn resend_response(&mut self, ctx: &mut Ctx<'_>, id: u32) {
        let Some(datagrams) = self.window.cached_response(id) else {
            return;
        };
        let datagrams = datagrams.to_vec();
        ctx.count(Counter::RetransmitsAnswered);
        for datagram in datagrams {
            ctx.transmit(self.local, self.remote, datagram);
        }
    }

    /// Verifies and decrypts an SK message, or adds an SKF fragment
    /// (RFC 7383 §2.6). `Ok(None)`: more fragments needed. Errors are
    /// counted; the caller answers [`ProtectError::InvalidSyntax`] (a
    /// request that verified but does not parse, RFC 7296 §2.21.2) and
    /// drops the rest.
    fn open(&mut self, ctx: &mut Ctx<'_>, bytes: &[u8]) -> Result<Option<Opened>, ProtectError> {
        let crypto = self.crypto.as_mut().ok_or(ProtectError::NotEncrypted)?;
        let fragment = IkeHeader::new_checked(bytes)
            .map(|h| h.next_payload() == PayloadType::SKF)
            .unwrap_or(false);
        let opened = if fragment {
            let added = crypto.reassembler.add(&crypto.protection, bytes);
            if added.is_ok() {
                ctx.count(Counter::FragmentsReceived);
            }
            match added {
                Ok(Some(opened)) => {
                    ctx.count(Counter::MessagesReassembled);
                    Ok(opened)
                }
                Ok(None) => return Ok(None),
                Err(e) => Err(e),
            }
        } else {
            crypto.protection.open(bytes)
        };
        match opened {
            Ok(opened) => Ok(Some(opened)),
            Err(e) => {
                let counter = match e {
                    ProtectError::Integrity => Counter::IntegrityFailed,
                    _ => Counter::Malformed,
                };
                ctx.count(counter);
                Err(e)
            }
        }
    }

    /// A request from the peer (RFC 7296 §2.1–§2.3).
    fn handle_request(&mut self, ctx: &mut Ctx<'_>, dgram: &Datagram<'_>, hdr: &IkeHeaderRepr) {
        if self.deferred.is_some_and(|(id, _)| id == hdr.message_id) {
            // A retransmission of the request whose answer is awaited from
            // outside: it is answered when that answer comes.
            ctx.count(Counter::RetransmitsAnswered);
            return;
        }
        match self.window.classify_request(hdr.message_id) {
            RequestId::New => {}
            RequestId::Retransmit => {
                if first_fragment_or_whole(dgram.bytes) {
                    self.resend_response(ctx, hdr.message_id);
                }
                return;
            }
            // Reordered within our window: processed when it comes again
            // after the one before it.
            RequestId::Ahead => return,
            RequestId::OutOfWindow => {
                ctx.count(Counter::InvalidMessageId);
                return;
            }
        }
        self.request_path = (dgram.local, dgram.remote);
        let reply = match self.open(ctx, dgram.bytes) {
            Ok(Some(opened)) => {
                self.heard(ctx, dgram);
                ctx.count_exchange(hdr.exchange_type, false, false);
                ctx.count_received_notifies(&opened.payloads);
                self.dispatch_request(ctx, hdr, &opened, dgram.bytes)
            }
            Ok(None) => return,
            Err(ProtectError::InvalidSyntax) => {
                // §2.21.2: it verified, so it is answered.
                self.heard(ctx, dgram);
                Reply::of(vec![crate::exchange::notify(
                    phalanx_wire::ike::iana::NotifyType::INVALID_SYNTAX,
                    Vec::new(),
                )])
            }
            Err(_) => return,
        };
        if reply.deferred {
            self.deferred = Some((hdr.message_id, hdr.exchange_type));
            return;
        }
        self.send_response(ctx, hdr.exchange_type, hdr.message_id, &reply.payloads);
        for action in reply.after {
            self.after_send(ctx, action);
        }
    }

    /// Sends the response that waited ([`Reply::deferred`]); nothing if no
    /// request waits.
    pub(crate) fn send_deferred(&mut self, ctx: &mut Ctx<'_>, reply: Reply) {
        let Some((id, exchange)) = self.deferred.take() else {
            return;
        };
        self.send_response(ctx, exchange, id, &reply.payloads);
        for action in reply.after {
            self.after_send(ctx, action);
        }
    }

    /// Routes a verified request (`datagram`, opened) to its exchange.
    fn dispatch_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        hdr: &IkeHeaderRepr,
        opened: &Opened,
        datagram: &[u8],
    ) -> Reply {
        let payloads = &opened.payloads;
        if let Some(ty) = unsupported_critical(payloads) {
            // RFC 7296 §2.5: refuse the whole message.
            ctx.count(Counter::UnsupportedCritical);
            let err = crate::error::IkeError::UnsupportedCriticalPayload(ty);
            return Reply::of(vec![crate::exchange::notify(
                phalanx_wire::ike::iana::NotifyType::UNSUPPORTED_CRITICAL_PAYLOAD,
                err.notify_data(),
            )]);
        }
        match hdr.exchange_type {
            ExchangeType::IKE_AUTH if matches!(self.state, State::Eap(_)) => {
                self.process_eap_request(ctx, payloads)
            }
            ExchangeType::IKE_AUTH => self.process_auth_request(ctx, payloads),
            ExchangeType::CREATE_CHILD_SA => self.process_create_child_request(ctx, payloads),
            ExchangeType::IKE_FOLLOWUP_KE => self.process_followup_request(ctx, payloads),
            ExchangeType::INFORMATIONAL => self.process_informational_request(ctx, payloads),
            ExchangeType::IKE_INTERMEDIATE => {
                let blob = received_blob(datagram, opened);
                self.process_intermediate_request(ctx, hdr.message_id, payloads, blob.as_deref())
            }
            _ => {
                // An exchange we do not implement:
                // answer empty so the peer's window moves on.
                ctx.count(Counter::UnexpectedExchange);
                Reply::default()
            }
        }
    }

    fn after_send(&mut self, ctx: &mut Ctx<'_>, action: AfterSend) {
        match action {
            AfterSend::InstallOutbound(spi_in) => {
                if let Some(child) = self.children.iter_mut().find(|c| c.spi_in == spi_in) {
                    child.install_pending_outbound(ctx);
                }
            }
            AfterSend::Close => self.close_and_linger(ctx),
            AfterSend::SwitchKeys(keys) => {
                if let Err(e) = self.switch_keys(ctx, *keys) {
                    self.fail(ctx, &format!("IKE_INTERMEDIATE: {e}"));
                }
            }
        }
    }

    /// The response to our outstanding request (RFC 7296 §2.1).
    fn handle_response(&mut self, ctx: &mut Ctx<'_>, dgram: &Datagram<'_>, hdr: &IkeHeaderRepr) {
        if self
            .window
            .find(hdr.message_id, hdr.exchange_type)
            .is_none()
        {
            ctx.count(Counter::UnexpectedResponse);
            return;
        }
        let Ok(Some(opened)) = self.open(ctx, dgram.bytes) else {
            return;
        };
        let payloads = &opened.payloads;
        let Some(outstanding) = self
            .window
            .take_outstanding(hdr.message_id, hdr.exchange_type)
        else {
            return;
        };
        self.arm_retransmit();
        self.heard(ctx, dgram);
        ctx.count_exchange(hdr.exchange_type, true, false);
        ctx.count_received_notifies(payloads);
        match outstanding.pending {
            Pending::Init => {}
            Pending::Intermediate => {
                let blob = received_blob(dgram.bytes, &opened);
                self.process_intermediate_response(ctx, payloads, blob)
            }
            Pending::Auth => self.process_auth_response(ctx, payloads),
            Pending::Child(offer) => self.process_child_response(ctx, *offer, payloads),
            Pending::RekeyIke(offer) => self.process_ike_rekey_response(ctx, *offer, payloads),
            Pending::Followup(f) => self.process_followup_response(ctx, *f, payloads),
            Pending::DeleteChildren(spis) => {
                self.process_delete_children_response(ctx, &spis, payloads)
            }
            Pending::DeleteIke => self.close_after_delete(ctx),
            Pending::Informational => {}
            Pending::CheckPath { cookie, path } => {
                self.process_path_check_response(ctx, &cookie, path, payloads)
            }
            Pending::Lost(purpose) => self.process_lost_response(ctx, *purpose, payloads),
        }
    }

    /// A verified message arrived: the peer is alive (RFC 7296 §1.4) and
    /// may have moved (§2.23: follow the address of authenticated messages
    /// when a NAT is involved or the peer floated to port 4500).
    fn heard(&mut self, ctx: &mut Ctx<'_>, dgram: &Datagram<'_>) {
        self.last_heard = ctx.now;
        if let Some(delay) = self.conn.dpd_delay {
            if self.is_established() {
                self.timers
                    .set(IkeTimer::Dpd, crate::timers::after(ctx.now, delay));
            }
        }
        if dgram.remote == self.remote && dgram.local == self.local {
            return;
        }
        if self.mobike {
            // RFC 4555: with MOBIKE agreed the peer moves the SA itself,
            // with UPDATE_SA_ADDRESSES ([`crate::exchange::mobike`]).
            return;
        }
        let floated = dgram.local.port() == NATT_PORT || dgram.remote.port() == NATT_PORT;
        if !(self.encap || floated) {
            return;
        }
        self.local = dgram.local;
        self.remote = dgram.remote;
        self.encap = true;
        if self.is_established() {
            self.announce_move(ctx);
        }
    }

    /// Tells the data plane where the peer is now.
    pub(crate) fn announce_move(&mut self, ctx: &mut Ctx<'_>) {
        ctx.count(Counter::PeerMoved);
        let outbound_spis = self
            .children
            .iter()
            .filter(|c| c.outbound_installed || c.pending_outbound.is_some())
            .map(|c| c.spi_out)
            .collect();
        // Called once nothing is held back: the SA's own path.
        let encap = self.udp_encap();
        let tunnel = self.child_mode(false);
        for child in &mut self.children {
            if let Some(install) = child.pending_outbound.as_mut() {
                install.encap = encap;
                install.local = self.local.ip();
                install.remote = self.remote.ip();
                if let SaMode::Tunnel { .. } = install.mode {
                    install.mode = tunnel;
                }
            }
        }
        ctx.event(SaEvent::PeerMoved {
            connection: self.conn.name.clone(),
            ike_spi_i: self.spi_i.to_be_bytes(),
            ike_spi_r: self.spi_r.to_be_bytes(),
            local: self.local,
            remote: self.remote,
            encap,
            outbound_spis,
        });
    }

    /// The status snapshot for `phalanxctl`.
    pub(crate) fn info(&self) -> IkeSaInfo {
        let state = match &self.state {
            // IKE_INTERMEDIATE comes between IKE_SA_INIT and IKE_AUTH.
            State::InitSent(_) | State::Intermediate(_) => IkeSaState::InitSent,
            State::AuthSent(_) => IkeSaState::AuthSent,
            State::HalfOpen(_) | State::Eap(_) => IkeSaState::HalfOpen,
            State::Established if self.rekey_in_flight() => IkeSaState::Rekeying,
            State::Established => IkeSaState::Established,
            State::Rekeyed => IkeSaState::Rekeyed,
            State::Deleting | State::Closed => IkeSaState::Deleting,
        };
        let encap = self.udp_encap();
        IkeSaInfo {
            connection: self.conn.name.clone(),
            state,
            initiator: self.initiator,
            spi_i: self.spi_i.to_be_bytes(),
            spi_r: self.spi_r.to_be_bytes(),
            local: self.local,
            remote: self.remote,
            local_id: self.conn.local_id.to_string(),
            remote_id: self.peer_id(),
            algorithms: self.crypto.as_ref().map(describe_suite).unwrap_or_default(),
            nat: self.encap,
            established_at: self.established_at,
            rekey_at: self.timers.get(IkeTimer::Rekey),
            peer_auth: match self.conn.remote_auth {
                RemoteAuth::Psk(_) => "psk",
                RemoteAuth::Signature { .. } => "pubkey",
                RemoteAuth::Eap => "eap",
            },
            virtual_ips: self.all_virtual_ips(),
            children: self
                .children
                .iter()
                .map(|c| c.info(self.child_mode(c.transport), encap))
                .collect(),
        }
    }

    /// Whether our rekey of this IKE SA is in flight.
    pub(crate) fn rekey_in_flight(&self) -> bool {
        self.window.any_pending(Pending::rekeys_ike)
    }

    /// The SA mode for a child: transport, or tunnel between the IKE
    /// addresses (the outer addresses of ESP are those of IKE, RFC 7296
    /// §2.11).
    pub(crate) fn child_mode(&self, transport: bool) -> SaMode {
        if transport {
            SaMode::Transport
        } else {
            let (local, remote, _) = self.dataplane_path();
            SaMode::Tunnel {
                local: local.ip(),
                remote: remote.ip(),
            }
        }
    }
}

/// The IKE suite in words for `phalanxctl`.
fn describe_suite(crypto: &SaCrypto) -> String {
    let n = &crypto.negotiated;
    let integ = n.integ.map(|i| format!(", {i:?}")).unwrap_or_default();
    let additional: String = n
        .additional_exchanges()
        .map(|ke| format!(" + {ke:?}"))
        .collect();
    format!(
        "{:?}/{}{integ}, {:?}, {:?}{additional}",
        n.encr.id, n.encr.key_bits, n.prf, n.ke
    )
}

/// The type of the first unknown critical payload (RFC 7296 §2.5).
fn unsupported_critical(payloads: &[Payload]) -> Option<PayloadType> {
    payloads
        .iter()
        .find(|p| p.is_unsupported_critical())
        .map(Payload::payload_type)
}

/// Whether a datagram is a whole message or the first fragment of one:
/// a retransmitted fragmented request is answered once, on fragment 1
/// (RFC 7383 §2.6.1).
fn first_fragment_or_whole(bytes: &[u8]) -> bool {
    let Ok(header) = IkeHeader::new_checked(bytes) else {
        return false;
    };
    if header.next_payload() != PayloadType::SKF {
        return true;
    }
    // SKF body: Fragment Number (2 octets) after the generic header.
    let chain = header.payload_chain();
    chain.get(4..6) == Some(&[0, 1][..])
}
