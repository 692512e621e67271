//! The IKE endpoint: every IKE SA of one node, demultiplexed by SPI, with
//! the responder's defences (cookies, the half-open table) and the API the
//! daemon drives (quinn-style, sans-IO).
//!
//! Calling order: feed input with [`Endpoint::handle_datagram`],
//! [`Endpoint::handle_timeout`] (when [`Endpoint::poll_timeout`] is due)
//! and the commands ([`Endpoint::initiate`], [`Endpoint::acquire`],
//! [`Endpoint::terminate`], [`Endpoint::handle_child_expiry`],
//! [`Endpoint::reconfigure`]); after each, drain
//! [`Endpoint::poll_event`] (install SAs in the order given) and then
//! [`Endpoint::poll_transmit`]. Events that must precede a datagram are
//! queued before it: draining events first keeps make-before-break.

use core::net::{IpAddr, SocketAddr};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use phalanx_crypto::ike::IkeRng;
use phalanx_crypto::CryptoProvider;
use phalanx_wire::ike::iana::{ExchangeType, NotifyType};
use phalanx_wire::ike::{IkeHeader, IkeHeaderRepr, MessageRepr};
use rustls_pki_types::UnixTime;

use crate::config::{Connection, EndpointConfig, EndpointLimits, StartAction};
use crate::counters::{Counter, IkeCounters};
use crate::error::IkeError;
use crate::events::{Datagram, EapAnswer, IkeSaInfo, SaEvent, Transmit};
use crate::exchange::cookie::CookieJar;
use crate::exchange::init::{invalid_major_version_answer, respond_init, stateless_answer};
use crate::exchange::Found;
use crate::ha::HaTracker;
use crate::ike_sa::{Ctx, IkeSa, State, Task};
use crate::pool::{AddressPools, PoolUsage};

/// Every IKE SA of one node.
pub struct Endpoint {
    // `pub(crate)`: the cluster replication in `crate::ha` reads and
    // rebuilds IKE SAs beside the endpoint's own code.
    pub(crate) connections: Vec<Arc<Connection>>,
    limits: EndpointLimits,
    pub(crate) provider: &'static dyn CryptoProvider,
    rng: Box<dyn IkeRng + Send>,
    pub(crate) sas: HashMap<u64, IkeSa>,
    /// Responder half-open SAs by (peer address, SPIi) (RFC 7296 §2.6).
    half_open: HashMap<(SocketAddr, u64), u64>,
    pub(crate) ike_spis: HashSet<u64>,
    pub(crate) child_spis: HashSet<u32>,
    cookies: CookieJar,
    transmits: VecDeque<Transmit>,
    pub(crate) events: VecDeque<SaEvent>,
    pub(crate) counters: IkeCounters,
    /// A wall-clock reading and the `Instant` it was taken at.
    wall_clock: Option<(Instant, UnixTime)>,
    /// What was replicated to the other cluster nodes, and what they
    /// replicated here (`crate::ha`).
    pub(crate) ha: HaTracker,
    /// Virtual-IP leases (RFC 7296 §2.19).
    pub(crate) pools: AddressPools,
}

/// What one SA call left for the endpoint.
#[derive(Default)]
struct Leftovers {
    spawned: Vec<IkeSa>,
    handovers: Vec<(u64, u64)>,
}

impl Endpoint {
    /// An endpoint with `config`; connections with `start_action = Start`
    /// are initiated at once. `provider` supplies every algorithm, `rng`
    /// every random value (SPIs, nonces, key exchange secrets, jitter,
    /// cookie secrets).
    pub fn new(
        config: EndpointConfig,
        provider: &'static dyn CryptoProvider,
        rng: Box<dyn IkeRng + Send>,
        now: Instant,
    ) -> Endpoint {
        let mut endpoint = Endpoint {
            connections: config.connections.into_iter().map(Arc::new).collect(),
            limits: config.limits,
            provider,
            rng,
            sas: HashMap::new(),
            half_open: HashMap::new(),
            ike_spis: HashSet::new(),
            child_spis: HashSet::new(),
            cookies: CookieJar::default(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            counters: IkeCounters::default(),
            wall_clock: None,
            ha: HaTracker::default(),
            pools: AddressPools::new(&config.pools),
        };
        let starting: Vec<String> = endpoint
            .connections
            .iter()
            .filter(|c| c.start_action == StartAction::Start)
            .map(|c| c.name.clone())
            .collect();
        for name in starting {
            // A connection without a remote address cannot start; the
            // error is the caller's to see through `initiate`.
            let _ = endpoint.initiate(now, &name);
        }
        endpoint
    }

    /// Gives the endpoint the wall-clock time at `now`, for certificate
    /// validity checks (sans-IO: the endpoint never reads a clock). Later
    /// times are extrapolated from `now`. Until it is set, certificates are
    /// refused (RFC 5280 §6.1.3 needs the current time).
    pub fn set_wall_clock(&mut self, now: Instant, unix: UnixTime) {
        self.wall_clock = Some((now, unix));
    }

    fn unix_time(&self, now: Instant) -> Option<UnixTime> {
        let (at, unix) = self.wall_clock?;
        let elapsed = now.saturating_duration_since(at);
        Some(UnixTime::since_unix_epoch(
            Duration::from_secs(unix.as_secs()) + elapsed,
        ))
    }

    /// Runs `f` on the IKE SA with our SPI `spi`, then adopts what it left.
    pub(crate) fn with_sa<R>(
        &mut self,
        now: Instant,
        spi: u64,
        f: impl FnOnce(&mut IkeSa, &mut Ctx<'_>) -> R,
    ) -> Option<R> {
        if !self.sas.contains_key(&spi) {
            return None;
        }
        self.run(now, Some(spi), |sa, ctx| sa.map(|sa| f(sa, ctx)))
    }

    /// Runs `f` with a context but no IKE SA (creating one).
    fn with_ctx<R>(&mut self, now: Instant, f: impl FnOnce(&mut Ctx<'_>) -> R) -> R {
        self.run(now, None, |_, ctx| f(ctx))
    }

    /// Builds the context from the endpoint's parts (the IKE SA `spi`, if
    /// any, borrowed beside them), runs `f`, then adopts what it left.
    fn run<R>(
        &mut self,
        now: Instant,
        spi: Option<u64>,
        f: impl FnOnce(Option<&mut IkeSa>, &mut Ctx<'_>) -> R,
    ) -> R {
        let mut left = Leftovers::default();
        let unix_time = self.unix_time(now);
        let sa = spi.and_then(|spi| self.sas.get_mut(&spi));
        let mut ctx = Ctx {
            now,
            unix_time,
            provider: self.provider,
            rng: &mut *self.rng,
            limits: &self.limits,
            counters: &mut self.counters,
            transmits: &mut self.transmits,
            events: &mut self.events,
            ike_spis: &mut self.ike_spis,
            child_spis: &mut self.child_spis,
            spawned: &mut left.spawned,
            handovers: &mut left.handovers,
            pools: &mut self.pools,
            connections: &self.connections,
        };
        let result = f(sa, &mut ctx);
        self.after_call(now, spi, left);
        if let Some(spi) = spi {
            self.replicate(now, spi);
        }
        result
    }

    /// Adopts new IKE SAs, moves Child SAs of rekeyed ones, applies
    /// INITIAL_CONTACT, keeps the half-open index, forgets finished SAs.
    fn after_call(&mut self, now: Instant, spi: Option<u64>, left: Leftovers) {
        let spawned: Vec<u64> = left.spawned.iter().map(IkeSa::our_spi).collect();
        for sa in left.spawned {
            self.sas.insert(sa.our_spi(), sa);
        }
        for spi in spawned {
            // A redundant SA of a rekey collision starts its Delete now.
            self.with_sa(now, spi, IkeSa::pump);
        }
        for (from, to) in left.handovers {
            self.hand_over(now, from, to);
            // The successor's state first: a standby never sees the
            // Child SAs without an IKE SA.
            self.replicate(now, to);
            self.replicate(now, from);
        }
        if let Some(spi) = spi {
            self.initial_contact(now, spi);
            self.tidy(spi);
        }
    }

    /// Moves the Child SAs of rekeyed IKE SA `from` to its successor `to`.
    fn hand_over(&mut self, now: Instant, from: u64, to: u64) {
        let (Some(mut old), Some(mut new)) = (self.sas.remove(&from), self.sas.remove(&to)) else {
            return;
        };
        let old_spis = (old.spi_i.to_be_bytes(), old.spi_r.to_be_bytes());
        let new_spis = (new.spi_i.to_be_bytes(), new.spi_r.to_be_bytes());
        let connection = old.conn.name.clone();
        self.with_ctx(now, |ctx| {
            new.adopt(ctx, &mut old);
            ctx.event(SaEvent::IkeSaRekeyed {
                connection,
                old_spis,
                new_spis,
            });
            old.pump(ctx);
            new.pump(ctx);
        });
        self.sas.insert(from, old);
        self.sas.insert(to, new);
    }

    /// RFC 7296 §2.4: after INITIAL_CONTACT, other IKE SAs between the
    /// same identities are stale (the peer restarted); they go without a
    /// Delete exchange.
    fn initial_contact(&mut self, now: Instant, spi: u64) {
        let Some(sa) = self.sas.get_mut(&spi) else {
            return;
        };
        if !(sa.initial_contact && sa.is_established()) {
            return;
        }
        sa.initial_contact = false;
        let (name, peer) = (sa.conn.name.clone(), sa.remote_identity.clone());
        let stale: Vec<u64> = self
            .sas
            .iter()
            .filter(|(s, other)| {
                **s != spi
                    && other.conn.name == name
                    && other.remote_identity == peer
                    && other.is_established()
            })
            .map(|(s, _)| *s)
            .collect();
        for other in stale {
            self.with_sa(now, other, |sa, ctx| {
                ctx.count(Counter::IkeSasDeleted);
                sa.down(ctx, "replaced after INITIAL_CONTACT");
            });
        }
    }

    /// Keeps the half-open index right and forgets a finished SA.
    fn tidy(&mut self, spi: u64) {
        let Some(sa) = self.sas.get_mut(&spi) else {
            return;
        };
        if !sa.is_half_open() {
            if let Some(key) = sa.init_key.take() {
                self.half_open.remove(&key);
            }
        }
        if sa.is_closed() {
            // Its leases are free at once, not when it stops lingering.
            sa.release_virtual_ips(&mut self.pools);
        }
        if sa.is_finished() {
            self.sas.remove(&spi);
            self.ike_spis.remove(&spi);
        }
    }

    /// Handles one received IKE datagram.
    pub fn handle_datagram(&mut self, now: Instant, datagram: Datagram<'_>) {
        self.counters.bump(Counter::DatagramsReceived);
        let Ok(header) = IkeHeader::new_checked(datagram.bytes) else {
            self.counters.bump(Counter::Malformed);
            return;
        };
        if header.check_version().is_err() {
            self.counters.bump(Counter::UnsupportedVersion);
            if let Some(answer) = invalid_major_version_answer(datagram.bytes) {
                self.counters
                    .count_notify_sent(NotifyType::INVALID_MAJOR_VERSION);
                self.send_raw(datagram.local, datagram.remote, answer);
            }
            return;
        }
        let Ok(hdr) = IkeHeaderRepr::parse(&header) else {
            self.counters.bump(Counter::Malformed);
            return;
        };
        let init_request = hdr.exchange_type == ExchangeType::IKE_SA_INIT
            && !hdr.response
            && hdr.initiator
            && hdr.responder_spi == 0;
        if init_request {
            self.handle_init_request(now, &datagram, &hdr);
            return;
        }
        let ours = if hdr.initiator {
            hdr.responder_spi
        } else {
            hdr.initiator_spi
        };
        if self
            .with_sa(now, ours, |sa, ctx| sa.handle_message(ctx, &datagram, &hdr))
            .is_none()
        {
            self.counters.bump(Counter::UnknownSpi);
        }
    }

    fn send_raw(&mut self, local: SocketAddr, remote: SocketAddr, bytes: Vec<u8>) {
        self.counters.bump(Counter::DatagramsSent);
        self.transmits.push_back(Transmit {
            local,
            remote,
            bytes,
            nat_keepalive: false,
        });
    }

    /// A stateless one-notify answer to an IKE_SA_INIT request.
    fn answer_init(
        &mut self,
        dgram: &Datagram<'_>,
        msg: &MessageRepr,
        ty: NotifyType,
        data: Vec<u8>,
    ) {
        if let Some(answer) = stateless_answer(msg, ty, data) {
            self.counters.count_notify_sent(ty);
            self.counters
                .exchange_mut(ExchangeType::IKE_SA_INIT)
                .responses_sent += 1;
            self.send_raw(dgram.local, dgram.remote, answer);
        }
    }

    /// An IKE_SA_INIT request: a retransmission, a new half-open SA, a
    /// cookie request, or a refusal (RFC 7296 §1.2, §2.6).
    fn handle_init_request(&mut self, now: Instant, dgram: &Datagram<'_>, hdr: &IkeHeaderRepr) {
        if let Some(&spi) = self.half_open.get(&(dgram.remote, hdr.initiator_spi)) {
            self.with_sa(now, spi, |sa, ctx| sa.resend_init_response(ctx));
            return;
        }
        let msg = match MessageRepr::parse(dgram.bytes) {
            Ok(msg) => msg,
            Err(_) => {
                self.counters.bump(Counter::Malformed);
                return;
            }
        };
        self.counters
            .exchange_mut(ExchangeType::IKE_SA_INIT)
            .requests_received += 1;
        for n in msg.notifies() {
            self.counters.count_notify_received(n.notify_type);
        }
        if let Some(ty) = msg.unsupported_critical_payload() {
            self.counters.bump(Counter::UnsupportedCritical);
            self.answer_init(
                dgram,
                &msg,
                NotifyType::UNSUPPORTED_CRITICAL_PAYLOAD,
                vec![ty.0],
            );
            return;
        }
        if self.half_open.len() >= self.limits.half_open_max {
            self.counters.bump(Counter::HalfOpenLimit);
            return;
        }
        if self.half_open.len() >= self.limits.cookie_threshold && !self.cookie_ok(now, dgram, &msg)
        {
            return;
        }
        let Some(conn) = self.responder_connection(dgram) else {
            self.counters.bump(Counter::NoConnection);
            self.answer_init(dgram, &msg, NotifyType::NO_PROPOSAL_CHOSEN, Vec::new());
            return;
        };
        match self.with_ctx(now, |ctx| respond_init(ctx, conn, dgram, &msg)) {
            Ok(sa) => {
                let spi = sa.our_spi();
                self.half_open.insert((dgram.remote, sa.spi_i), spi);
                self.sas.insert(spi, sa);
            }
            Err(e) => self.refuse_init(dgram, &msg, &e),
        }
    }

    fn refuse_init(&mut self, dgram: &Datagram<'_>, msg: &MessageRepr, e: &IkeError) {
        match e {
            IkeError::NoProposalChosen => self.counters.bump(Counter::ProposalsRefused),
            // Counted as the INVALID_KE_PAYLOAD notify it sends.
            IkeError::InvalidKe(_) => {}
            IkeError::Malformed | IkeError::MissingPayload(_) => {
                self.counters.bump(Counter::Malformed)
            }
            _ => self.counters.bump(Counter::Unprocessable),
        }
        if let Some(ty) = e.notify_type() {
            self.answer_init(dgram, msg, ty, e.notify_data());
        }
    }

    /// RFC 7296 §2.6: under load, only requests that return our cookie
    /// create state; the others are asked for one.
    fn cookie_ok(&mut self, now: Instant, dgram: &Datagram<'_>, msg: &MessageRepr) -> bool {
        let found = Found::scan(&msg.payloads);
        let Some(ni) = found.nonce else {
            self.counters.bump(Counter::Malformed);
            self.answer_init(dgram, msg, NotifyType::INVALID_SYNTAX, Vec::new());
            return false;
        };
        let ip = dgram.remote.ip();
        if let Some(cookie) = found.notify(NotifyType::COOKIE) {
            if self
                .cookies
                .verify(&cookie.data, &ni.data, ip, msg.initiator_spi)
            {
                return true;
            }
            self.counters.bump(Counter::CookiesRejected);
        }
        let cookie = self
            .cookies
            .make(now, &mut *self.rng, &ni.data, ip, msg.initiator_spi);
        self.counters.bump(Counter::CookiesSent);
        self.answer_init(dgram, msg, NotifyType::COOKIE, cookie);
        false
    }

    /// The connection an IKE_SA_INIT request is for: our address must
    /// match, and the peer's address if the connection names one (exact
    /// matches first).
    fn responder_connection(&self, dgram: &Datagram<'_>) -> Option<Arc<Connection>> {
        let local_ok =
            |c: &Connection| c.local_addr == dgram.local.ip() || c.local_addr.is_unspecified();
        let exact = self
            .connections
            .iter()
            .find(|c| local_ok(c) && c.remote_addr == Some(dgram.remote.ip()));
        exact
            .or_else(|| {
                self.connections
                    .iter()
                    .find(|c| local_ok(c) && c.remote_addr.is_none())
            })
            .cloned()
    }

    fn connection(&self, name: &str) -> Result<Arc<Connection>, IkeError> {
        self.connections
            .iter()
            .find(|c| c.name == name)
            .cloned()
            .ok_or_else(|| IkeError::UnknownConnection(name.to_owned()))
    }

    /// Our SPI of the live (connecting or established) IKE SA of a
    /// connection, if any.
    fn live_sa(&self, name: &str) -> Option<u64> {
        let live = |sa: &IkeSa| {
            matches!(
                sa.state,
                State::InitSent(_)
                    | State::Intermediate(_)
                    | State::AuthSent(_)
                    | State::Established
            ) && sa.initiator_or_established()
        };
        self.sas
            .values()
            .filter(|sa| sa.conn.name == name && live(sa))
            .map(IkeSa::our_spi)
            .min()
    }

    /// Brings a connection up (`phalanxctl initiate NAME`): an IKE SA with
    /// all its Child SAs, or the missing Child SAs on the existing IKE SA.
    pub fn initiate(&mut self, now: Instant, connection: &str) -> Result<(), IkeError> {
        let conn = self.connection(connection)?;
        let tasks: Vec<Task> = conn
            .children
            .iter()
            .map(|c| Task::CreateChild {
                child: c.name.clone(),
                trigger: None,
                retries: 0,
                group: None,
            })
            .collect();
        self.start(now, conn, tasks)
    }

    /// Traffic hit a trap policy of `connection`/`child` with no SA: create
    /// it, and the IKE SA first if there is none. `trigger` is the packet's
    /// (source, destination), offered first (RFC 7296 §2.9).
    pub fn acquire(
        &mut self,
        now: Instant,
        connection: &str,
        child: &str,
        trigger: Option<(IpAddr, IpAddr)>,
    ) {
        let Ok(conn) = self.connection(connection) else {
            return;
        };
        if !conn.children.iter().any(|c| c.name == child) {
            return;
        }
        let task = Task::CreateChild {
            child: child.to_owned(),
            trigger,
            retries: 0,
            group: None,
        };
        // Failure (no remote address) leaves nothing to do for a trap.
        let _ = self.start(now, conn, vec![task]);
    }

    fn start(
        &mut self,
        now: Instant,
        conn: Arc<Connection>,
        tasks: Vec<Task>,
    ) -> Result<(), IkeError> {
        if let Some(spi) = self.live_sa(&conn.name) {
            self.with_sa(now, spi, |sa, ctx| {
                for task in tasks {
                    sa.push_task(ctx, task);
                }
            });
            return Ok(());
        }
        let remote_ip = conn
            .remote_addr
            .ok_or_else(|| IkeError::NoRemoteAddress(conn.name.clone()))?;
        let remote = SocketAddr::new(remote_ip, conn.remote_port);
        let sa = self.with_ctx(now, |ctx| IkeSa::initiate(ctx, conn, remote, tasks))?;
        self.sas.insert(sa.our_spi(), sa);
        Ok(())
    }

    /// Takes a connection down: each of its IKE SAs is deleted
    /// (INFORMATIONAL Delete) with its Child SAs; those still being set up
    /// are abandoned.
    pub fn terminate(&mut self, now: Instant, connection: &str) -> Result<(), IkeError> {
        self.connection(connection)?;
        let spis: Vec<u64> = self
            .sas
            .values()
            .filter(|sa| {
                sa.conn.name == connection && !matches!(sa.state, State::Closed | State::Deleting)
            })
            .map(IkeSa::our_spi)
            .collect();
        if spis.is_empty() {
            return Err(IkeError::NotEstablished(connection.to_owned()));
        }
        for spi in spis {
            self.with_sa(now, spi, IkeSa::terminate);
        }
        Ok(())
    }

    /// The EAP backend's answer for IKE SA `ike_sa` (our SPI, from
    /// [`SaEvent::EapRequest`]): the IKE_AUTH response that waited for it
    /// goes out. An answer for an IKE SA that is gone or not in EAP is
    /// ignored.
    pub fn handle_eap(&mut self, now: Instant, ike_sa: u64, answer: EapAnswer) {
        self.with_sa(now, ike_sa, |sa, ctx| sa.eap_answered(ctx, answer));
    }

    /// Deletes the IKE SAs of one End-User (or any peer): those whose
    /// authenticated identity is `who`, or that hold `who` as a virtual IP.
    /// Returns the connections they belonged to (empty: none matched).
    pub fn disconnect(&mut self, now: Instant, who: &str) -> Vec<String> {
        let address: Option<IpAddr> = who.parse().ok();
        let matches = |sa: &IkeSa| {
            let by_id = sa
                .remote_identity
                .as_ref()
                .is_some_and(|id| id.to_string() == who);
            let by_vip = address.is_some_and(|a| sa.virtual_ips.iter().any(|v| v.address == a));
            (by_id || by_vip) && sa.is_established()
        };
        let found: Vec<(u64, String)> = self
            .sas
            .values()
            .filter(|sa| matches(sa))
            .map(|sa| (sa.our_spi(), sa.conn.name.clone()))
            .collect();
        for (spi, _) in &found {
            self.with_sa(now, *spi, IkeSa::terminate);
        }
        found.into_iter().map(|(_, name)| name).collect()
    }

    /// A Child SA reached a soft (rekey) or hard (delete) usage or lifetime
    /// limit in the data plane.
    pub fn handle_child_expiry(&mut self, now: Instant, inbound_spi: u32, hard: bool) {
        let Some(spi) = self
            .sas
            .iter()
            .find(|(_, sa)| sa.children.iter().any(|c| c.spi_in == inbound_spi))
            .map(|(s, _)| *s)
        else {
            return;
        };
        self.with_sa(now, spi, |sa, ctx| {
            let task = if hard {
                ctx.count(Counter::ChildSasExpired);
                Task::DeleteChildren {
                    spis: vec![inbound_spi],
                }
            } else {
                Task::RekeyChild {
                    spi_in: inbound_spi,
                    retries: 0,
                }
            };
            sa.push_task(ctx, task);
        });
    }

    /// Fires every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<u64> = self
            .sas
            .iter()
            .filter(|(_, sa)| sa.next_timeout().is_some_and(|t| t <= now))
            .map(|(s, _)| *s)
            .collect();
        for spi in due {
            self.with_sa(now, spi, IkeSa::handle_timeout);
        }
    }

    /// The next datagram to send. When its local or remote port is 4500,
    /// the caller prepends the four-octet non-ESP marker
    /// ([`Transmit::needs_non_esp_marker`], RFC 7296 §2.23).
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// When [`Endpoint::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.sas.values().filter_map(IkeSa::next_timeout).min()
    }

    /// The next SA event, in the order they happened.
    pub fn poll_event(&mut self) -> Option<SaEvent> {
        self.events.pop_front()
    }

    /// Every IKE SA that is not finished, for `phalanxctl`, ordered by
    /// connection and SPI.
    pub fn ike_sas(&self) -> Vec<IkeSaInfo> {
        let mut out: Vec<IkeSaInfo> = self
            .sas
            .values()
            .filter(|sa| !matches!(sa.state, State::Closed))
            .map(IkeSa::info)
            .collect();
        out.sort_by(|a, b| (&a.connection, a.spi_i).cmp(&(&b.connection, b.spi_i)));
        out
    }

    /// How each virtual-IP pool is used, in configuration order.
    pub fn pool_usage(&self) -> Vec<PoolUsage> {
        self.pools.usage()
    }

    /// A cluster node's share of the pools' fresh addresses: node `node`
    /// of `nodes` hands out the offsets `node` mod `nodes` only, so two
    /// nodes never lease one address ([`crate::pool`]). Leases of other
    /// nodes' IKE SAs come in their replicated state.
    pub fn set_pool_partition(&mut self, partition: crate::pool::Partition) {
        self.pools.set_partition(partition);
    }

    /// Every counter.
    pub fn counters(&self) -> &IkeCounters {
        &self.counters
    }

    /// Applies a new configuration (reload). IKE SAs of unchanged
    /// connections keep running; those of removed or changed connections
    /// are deleted (INFORMATIONAL Delete); new or changed connections with
    /// `start_action = Start` are initiated.
    pub fn reconfigure(&mut self, config: EndpointConfig, now: Instant) {
        self.limits = config.limits;
        self.pools.reconfigure(&config.pools);
        let new: Vec<Arc<Connection>> = config.connections.into_iter().map(Arc::new).collect();
        let spis: Vec<u64> = self.sas.keys().copied().collect();
        for spi in spis {
            let Some(name) = self.sas.get(&spi).map(|sa| sa.conn.name.clone()) else {
                continue;
            };
            let kept = new.iter().find(|c| c.name == name).cloned();
            let unchanged = kept.as_ref().filter(|c| {
                self.sas
                    .get(&spi)
                    .is_some_and(|sa| sa.conn.same_for_reload(c))
            });
            match unchanged {
                Some(conn) => {
                    if let Some(sa) = self.sas.get_mut(&spi) {
                        sa.conn = Arc::clone(conn);
                    }
                }
                None => {
                    self.with_sa(now, spi, IkeSa::terminate);
                }
            }
        }
        let started: Vec<String> = new
            .iter()
            .filter(|c| c.start_action == StartAction::Start)
            .filter(|c| self.live_sa(&c.name).is_none())
            .map(|c| c.name.clone())
            .collect();
        self.connections = new;
        for name in started {
            // As in `new`: a connection that cannot start stays down.
            let _ = self.initiate(now, &name);
        }
    }
}

impl IkeSa {
    /// Live for `initiate`/`acquire`: connecting as initiator, or
    /// established in either role.
    fn initiator_or_established(&self) -> bool {
        self.initiator || self.is_established()
    }

    /// Closes the SA on request: Delete if established, abandon if still
    /// being set up.
    fn terminate(&mut self, ctx: &mut Ctx<'_>) {
        match self.state {
            State::Established | State::Rekeyed => {
                self.tasks.retain(|t| matches!(t, Task::DeleteIke));
                self.tasks.push_front(Task::DeleteIke);
                self.pump(ctx);
            }
            State::InitSent(_)
            | State::Intermediate(_)
            | State::AuthSent(_)
            | State::HalfOpen(_)
            | State::Eap(_) => self.fail(ctx, "terminated"),
            State::Deleting | State::Closed => {}
        }
    }
}
