//! The EAP backend of the IKE thread: phalanx-ike relays each EAP message
//! of an IKE SA ([`SaEvent::EapRequest`](phalanx_ike::SaEvent)); this
//! answers it, by connection:
//!
//! - `remote_auth = "eap-mschapv2"`: EAP-Identity and EAP-MSCHAPv2 here,
//!   against the `[[eap_secret]]` passwords (phalanx-eap), answered at once;
//! - `remote_auth = "eap-tls"`: EAP-Identity and EAP-TLS here
//!   (phalanx-eap on rustls), answered at once; each outcome counted by
//!   reason (`eap_tls_*`);
//! - `remote_auth = "eap-radius"`: EAP-Identity here, then every message
//!   through [`EapRelay`] to the `[radius]` servers over this module's UDP
//!   sockets, answered when the server answers; and the accounting session
//!   of every End-User RADIUS accepted (Start, Interim-Update, Stop with
//!   the octets and packets of its Child SAs).
//!
//! Answers go back through
//! [`Endpoint::handle_eap`](phalanx_ike::Endpoint::handle_eap).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use phalanx_control::NamedCounter;
use phalanx_eap::radius::client::{RadiusClient, SessionInfo, TerminateCause};
use phalanx_eap::radius::relay::{EapRelay, RelayEvent, SpiPair, Usage};
use phalanx_eap::tls::rustls::pki_types::UnixTime;
use phalanx_eap::tls::{TlsAuthenticator, TlsFailureKind};
use phalanx_eap::{EapFailure, EapServer, EapStep};
use phalanx_ike::{EapAnswer, IkeSaInfo};
use rand_core::{OsRng, RngCore};

use crate::config::{ChildRef, Direction, EapMethod, EapSettings, RadiusSettings};
use crate::install::ike::ike_sa_name;
use crate::install::Runtime;

/// The name the authenticator gives in its MSCHAPv2 Challenge.
const SERVER_NAME: &str = "phalanx";

/// The largest RADIUS packet (RFC 2865 §3).
const MAX_RADIUS: usize = phalanx_eap::radius::MAX_PACKET_LEN;

/// Datagrams read from a RADIUS socket per round at most.
const RADIUS_BURST: usize = 64;

/// One EAP message for the backend, as phalanx-ike reported it.
pub struct EapRequest<'a> {
    /// The connection.
    pub connection: &'a str,
    /// Our SPI of the IKE SA.
    pub ike_sa: u64,
    /// The IDi the End-User presented.
    pub peer_id: &'a str,
    /// Our address and port.
    pub local: SocketAddr,
    /// The End-User's address and port.
    pub remote: SocketAddr,
    /// The EAP message, empty at the start.
    pub message: &'a [u8],
}

/// The RADIUS side: the relay and its sockets (one per address family of
/// the servers).
struct Radius {
    relay: EapRelay,
    v4: Option<UdpSocket>,
    v6: Option<UdpSocket>,
    /// Octets and packets each accounted IKE SA's Child SAs counted, by SA
    /// name: the last reading of every SA it ever had (rekeyed ones
    /// included), so totals never go back.
    usage: HashMap<SpiPair, HashMap<String, (bool, u64, u64)>>,
    send_errors: u64,
    recv_errors: u64,
}

/// One End-User's exchange with a local method.
struct Session {
    server: EapServer,
    /// EAP-TLS: its outcome is counted by reason.
    tls: bool,
    /// The failure was logged and counted (when the method's last Request
    /// went out; a peer may give up instead of answering it).
    reported: bool,
}

/// How EAP-TLS exchanges ended: `eap_tls_*`.
#[derive(Default)]
struct TlsCounters {
    succeeded: u64,
    /// By [`TlsFailureKind::ALL`] index.
    failed: [u64; TlsFailureKind::ALL.len()],
    /// The peer wanted another method (Nak).
    nak: u64,
    /// An EAP message that does not parse, or of another Type.
    malformed: u64,
    /// The IKE SA ended before the exchange did (the client gave up
    /// without a word, timed out, or died).
    abandoned: u64,
}

impl TlsCounters {
    fn count(&mut self, reason: &EapFailure) {
        match reason {
            EapFailure::Tls(failure) => {
                if let Some(i) = TlsFailureKind::ALL.iter().position(|k| *k == failure.kind) {
                    self.failed[i] += 1;
                }
            }
            EapFailure::Nak(_) => self.nak += 1,
            _ => self.malformed += 1,
        }
    }

    fn named(&self) -> Vec<NamedCounter> {
        let mut counters = vec![
            ("succeeded", self.succeeded),
            ("nak", self.nak),
            ("malformed", self.malformed),
            ("abandoned", self.abandoned),
        ];
        counters.extend(
            TlsFailureKind::ALL
                .iter()
                .zip(self.failed)
                .map(|(kind, n)| (kind.name(), n)),
        );
        NamedCounter::prefixed("eap_tls_", &counters)
    }
}

/// EAP sessions by IKE SA (our SPI), and RADIUS.
#[derive(Default)]
pub struct EapBackend {
    settings: Arc<EapSettings>,
    sessions: HashMap<u64, Session>,
    tls_counters: TlsCounters,
    radius: Option<Radius>,
    /// Whether the set of descriptors to poll changed.
    fds_changed: bool,
}

impl EapBackend {
    /// A backend for `settings`; RADIUS sockets open now.
    pub fn new(settings: Arc<EapSettings>) -> EapBackend {
        let mut backend = EapBackend::default();
        backend.reconfigure(settings);
        backend
    }

    /// A reload's passwords and servers; exchanges in progress finish with
    /// what they have where the servers stay the same.
    pub fn reconfigure(&mut self, settings: Arc<EapSettings>) {
        match (&settings.radius, &mut self.radius) {
            (None, old) => {
                if let Some(old) = old.take() {
                    tracing::warn!(
                        accounting_sessions = old.usage.len(),
                        "[radius] removed: accounting sessions in progress end without Stop"
                    );
                    self.fds_changed = true;
                }
            }
            (Some(new), Some(radius)) => {
                radius.relay.client_mut().reconfigure(new.client.clone());
                radius.relay.set_interim(new.interim);
                if let Err(e) = radius.open_sockets(new) {
                    tracing::error!(error = %e, "RADIUS socket");
                }
                self.fds_changed = true;
            }
            (Some(new), None) => {
                let mut key = [0u8; 32];
                OsRng.fill_bytes(&mut key);
                let epoch = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let client = RadiusClient::new(new.client.clone(), key);
                let mut radius = Radius {
                    relay: EapRelay::new(client, new.interim, epoch),
                    v4: None,
                    v6: None,
                    usage: HashMap::new(),
                    send_errors: 0,
                    recv_errors: 0,
                };
                if let Err(e) = radius.open_sockets(new) {
                    tracing::error!(error = %e, "RADIUS socket: End-Users of eap-radius connections cannot authenticate");
                }
                self.radius = Some(radius);
                self.fds_changed = true;
            }
        }
        self.settings = settings;
    }

    /// Whether the RADIUS sockets changed since the last call.
    pub fn fds_changed(&mut self) -> bool {
        std::mem::take(&mut self.fds_changed)
    }

    /// The RADIUS sockets to poll.
    pub fn fds(&self) -> Vec<BorrowedFd<'_>> {
        self.radius
            .iter()
            .flat_map(|r| [r.v4.as_ref(), r.v6.as_ref()])
            .flatten()
            .map(UdpSocket::as_fd)
            .collect()
    }

    /// The answer to `request` when it is known at once (local methods and
    /// RADIUS's EAP-Identity), or `None`: discarded (RFC 3748 §4.1) or
    /// coming later from RADIUS ([`EapBackend::poll_answer`]).
    pub fn request(&mut self, now: Instant, request: &EapRequest<'_>) -> Option<EapAnswer> {
        if self.settings.uses_radius(request.connection) {
            return self.relay_request(now, request);
        }
        let ike_sa = request.ike_sa;
        if request.message.is_empty() {
            let mut session = self.session(request);
            let first = session.server.start();
            self.sessions.insert(ike_sa, session);
            return Some(EapAnswer::Continue(first));
        }
        let session = self.sessions.get_mut(&ike_sa)?;
        let step = session.server.handle(request.message);
        let answer = match step {
            EapStep::Send(next) => {
                if let Some(reason) = session.server.failure().filter(|_| !session.reported) {
                    tracing::warn!(ike_sa = format_args!("{ike_sa:016x}"), %reason, "EAP authentication failed");
                    if session.tls {
                        self.tls_counters.count(reason);
                    }
                    session.reported = true;
                }
                return Some(EapAnswer::Continue(next));
            }
            EapStep::Ignore => return None,
            EapStep::Success {
                packet,
                msk,
                identity,
                ..
            } => {
                if session.tls {
                    self.tls_counters.succeeded += 1;
                }
                EapAnswer::Success {
                    message: packet,
                    msk,
                    identity,
                    virtual_ip: None,
                }
            }
            EapStep::Failure { packet, reason } => {
                if session.tls && !session.reported {
                    self.tls_counters.count(&reason);
                }
                EapAnswer::Failure {
                    message: packet,
                    reason: reason.to_string(),
                }
            }
        };
        self.sessions.remove(&ike_sa);
        Some(answer)
    }

    /// A new exchange with the method of the request's connection.
    fn session(&self, request: &EapRequest<'_>) -> Session {
        let mut random = [0u8; 32];
        OsRng.fill_bytes(&mut random);
        match self.settings.method(request.connection) {
            Some(EapMethod::Tls(config)) => {
                // Certificates are checked at the time the exchange starts.
                let method =
                    TlsAuthenticator::new(Arc::clone(config), request.peer_id, UnixTime::now());
                Session {
                    server: EapServer::new(random[0], Box::new(method)),
                    tls: true,
                    reported: false,
                }
            }
            _ => {
                let credentials = Arc::clone(&self.settings.secrets);
                Session {
                    server: EapServer::mschapv2(SERVER_NAME, random, credentials),
                    tls: false,
                    reported: false,
                }
            }
        }
    }

    fn relay_request(&mut self, now: Instant, request: &EapRequest<'_>) -> Option<EapAnswer> {
        let Some(radius) = self.radius.as_mut() else {
            return Some(EapAnswer::Failure {
                message: phalanx_eap::EapRepr::outcome(phalanx_eap::EapCode::FAILURE, 0).emit(),
                reason: "no [radius] servers configured".to_owned(),
            });
        };
        if request.message.is_empty() {
            let info = SessionInfo {
                user_name: request.peer_id.to_owned(),
                nas_address: Some(request.local.ip()),
                calling_station: Some(request.remote.to_string()),
                called_station: Some(request.local.to_string()),
            };
            let mut identifier = [0u8; 1];
            OsRng.fill_bytes(&mut identifier);
            let first = radius.relay.start(request.ike_sa, info, identifier[0]);
            return Some(EapAnswer::Continue(first));
        }
        radius.relay.message(now, request.ike_sa, request.message);
        None
    }

    /// The next answer RADIUS gave: (IKE SA, answer).
    pub fn poll_answer(&mut self) -> Option<(u64, EapAnswer)> {
        let radius = self.radius.as_mut()?;
        loop {
            let event = radius.relay.poll_event()?;
            return Some(match event {
                RelayEvent::Continue { session, eap } => (session, EapAnswer::Continue(eap)),
                RelayEvent::Success {
                    session,
                    eap,
                    msk,
                    identity,
                    framed_ip,
                } => {
                    tracing::info!(ike_sa = format_args!("{session:016x}"), %identity, framed_ip = ?framed_ip, "RADIUS accepted the End-User");
                    (
                        session,
                        EapAnswer::Success {
                            message: eap,
                            msk,
                            identity,
                            virtual_ip: framed_ip.map(IpAddr::V4),
                        },
                    )
                }
                RelayEvent::Failure {
                    session,
                    eap,
                    reason,
                } => (
                    session,
                    EapAnswer::Failure {
                        message: eap,
                        reason,
                    },
                ),
                RelayEvent::AccountingLost { session_id } => {
                    tracing::warn!(%session_id, "RADIUS accounting record lost: no server answered");
                    continue;
                }
            });
        }
    }

    /// Datagrams of the RADIUS sockets.
    pub fn receive(&mut self, now: Instant, buf: &mut [u8]) {
        let Some(radius) = self.radius.as_mut() else {
            return;
        };
        let len = buf.len().min(MAX_RADIUS);
        let buf = &mut buf[..len];
        for socket in [radius.v4.as_ref(), radius.v6.as_ref()]
            .into_iter()
            .flatten()
        {
            for _ in 0..RADIUS_BURST {
                match socket.recv_from(buf) {
                    Ok((len, from)) => {
                        radius
                            .relay
                            .client_mut()
                            .handle_datagram(now, from, &buf[..len])
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        radius.recv_errors += 1;
                        break;
                    }
                }
            }
        }
    }

    /// Sends what the RADIUS client queued.
    pub fn transmit(&mut self) {
        let Some(radius) = self.radius.as_mut() else {
            return;
        };
        while let Some(t) = radius.relay.client_mut().poll_transmit() {
            let socket = if t.to.is_ipv4() {
                radius.v4.as_ref()
            } else {
                radius.v6.as_ref()
            };
            // A lost request is sent again on its timer.
            if socket.is_none_or(|s| s.send_to(&t.bytes, t.to).is_err()) {
                radius.send_errors += 1;
            }
        }
    }

    /// When the RADIUS client's timers or an interim update are due.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.radius.as_mut()?.relay.poll_timeout()
    }

    /// RADIUS timers due by `now`; interim updates due, with the usage in
    /// `rt`.
    pub fn handle_timeout(&mut self, now: Instant, rt: &Runtime, sas: &[IkeSaInfo]) {
        let Some(radius) = self.radius.as_mut() else {
            return;
        };
        radius.relay.handle_timeout(now);
        let due = radius.relay.interim_due(now);
        if !due.is_empty() {
            radius.sample(rt, sas);
            for spis in due {
                let usage = radius.total(spis);
                radius.relay.interim(now, spis, usage);
            }
        }
    }

    /// IKE SA `spis` is up: an End-User RADIUS accepted starts accounting.
    pub fn ike_up(&mut self, now: Instant, spis: SpiPair, virtual_ips: &[IpAddr]) {
        if let Some(radius) = self.radius.as_mut() {
            if radius.relay.up(now, spis, virtual_ips) {
                radius.usage.insert(spis, HashMap::new());
            }
        }
    }

    /// IKE SA `old` is now `new`.
    pub fn ike_rekeyed(&mut self, old: SpiPair, new: SpiPair) {
        if let Some(radius) = self.radius.as_mut() {
            radius.relay.rekeyed(old, new);
            if let Some(usage) = radius.usage.remove(&old) {
                radius.usage.insert(new, usage);
            }
        }
    }

    /// Child SAs are about to be removed: the last reading of accounted
    /// ones is taken now.
    pub fn before_removal(&mut self, rt: &Runtime, sas: &[IkeSaInfo]) {
        if let Some(radius) = self.radius.as_mut() {
            if !radius.usage.is_empty() {
                radius.sample(rt, sas);
            }
        }
    }

    /// IKE SA `spis` is down (`reason` from phalanx-ike): accounting Stop.
    pub fn ike_down(&mut self, now: Instant, spis: SpiPair, reason: &str) {
        let Some(radius) = self.radius.as_mut() else {
            return;
        };
        if !radius.relay.is_accounted(spis) {
            return;
        }
        let usage = radius.total(spis);
        radius.usage.remove(&spis);
        radius.relay.down(now, spis, usage, terminate_cause(reason));
    }

    /// Forgets the conversations of IKE SAs that are gone.
    /// An EAP-TLS exchange whose failure was not reported yet counts as
    /// abandoned.
    pub fn retain(&mut self, live: impl Fn(u64) -> bool) {
        let counters = &mut self.tls_counters;
        self.sessions.retain(|spi, session| {
            let keep = live(*spi);
            if !keep && session.tls && !session.reported {
                counters.abandoned += 1;
            }
            keep
        });
        if let Some(radius) = self.radius.as_mut() {
            radius.relay.retain(live);
        }
    }

    /// The EAP method name of each connection with EAP End-Users
    /// (`phalanxctl clients`).
    pub fn methods(&self) -> HashMap<String, &'static str> {
        self.settings
            .methods
            .iter()
            .map(|(name, method)| (name.clone(), method.name()))
            .collect()
    }

    /// The EAP-TLS and RADIUS counters, for `phalanxctl counters` and
    /// Prometheus: each set once its method is configured (or counted).
    pub fn counters(&self) -> Vec<NamedCounter> {
        let mut out = Vec::new();
        let tls_configured = self
            .settings
            .methods
            .values()
            .any(|m| matches!(m, EapMethod::Tls(_)));
        let tls = self.tls_counters.named();
        if tls_configured || tls.iter().any(|c| c.count != 0) {
            out.extend(tls);
        }
        out.extend(self.radius_counters());
        out
    }

    fn radius_counters(&self) -> Vec<NamedCounter> {
        let Some(radius) = &self.radius else {
            return Vec::new();
        };
        let c = radius.relay.client().counters();
        NamedCounter::prefixed(
            "radius_",
            &[
                ("access_requests", c.access_requests),
                ("retransmits", c.retransmits),
                ("challenges", c.challenges),
                ("accepts", c.accepts),
                ("rejects", c.rejects),
                ("server_timeouts", c.server_timeouts),
                ("failovers", c.failovers),
                ("no_server", c.no_server),
                ("answers_unmatched", c.answers_unmatched),
                ("answers_invalid", c.answers_invalid),
                ("answers_wrong_code", c.answers_wrong_code),
                ("answers_unusable", c.answers_unusable),
                ("accounting_requests", c.accounting_requests),
                ("accounting_responses", c.accounting_responses),
                ("accounting_lost", c.accounting_lost),
                ("waiting", c.waiting),
                ("send_errors", radius.send_errors),
                ("recv_errors", radius.recv_errors),
            ],
        )
    }
}

impl Radius {
    /// A socket per address family of the servers, bound to `source` or
    /// to an ephemeral port of the unspecified address.
    fn open_sockets(&mut self, settings: &RadiusSettings) -> io::Result<()> {
        let wants = |v4: bool| {
            settings
                .client
                .servers
                .iter()
                .any(|s| s.auth.is_ipv4() == v4)
        };
        let bind = |v4: bool| -> io::Result<UdpSocket> {
            let ip = match (settings.source, v4) {
                (Some(ip), _) => ip,
                (None, true) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                (None, false) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            };
            let socket = UdpSocket::bind(SocketAddr::new(ip, 0))?;
            socket.set_nonblocking(true)?;
            Ok(socket)
        };
        // A new source address needs new sockets; otherwise they stay.
        let bound_to =
            |s: &Option<UdpSocket>| s.as_ref().and_then(|s| s.local_addr().ok()).map(|a| a.ip());
        let stale = |s: &Option<UdpSocket>, v4: bool| match (settings.source, bound_to(s)) {
            (Some(want), Some(have)) => want != have,
            (None, Some(have)) => !have.is_unspecified() || have.is_ipv4() != v4,
            (_, None) => true,
        };
        if !wants(true) {
            self.v4 = None;
        } else if stale(&self.v4, true) {
            self.v4 = Some(bind(true)?);
        }
        if !wants(false) {
            self.v6 = None;
        } else if stale(&self.v6, false) {
            self.v6 = Some(bind(false)?);
        }
        Ok(())
    }

    /// Reads the counters of every accounted IKE SA's Child SAs.
    fn sample(&mut self, rt: &Runtime, sas: &[IkeSaInfo]) {
        let by_name = super::report::traffic(rt);
        for sa in sas {
            let spis = (u64::from_be_bytes(sa.spi_i), u64::from_be_bytes(sa.spi_r));
            let Some(seen) = self.usage.get_mut(&spis) else {
                continue;
            };
            for child in &sa.children {
                let child_ref = ChildRef {
                    connection: sa.connection.clone(),
                    child: child.name.clone(),
                };
                for (direction, spi, inbound) in [
                    (Direction::In, child.spi_in, true),
                    (Direction::Out, child.spi_out, false),
                ] {
                    let name = ike_sa_name(&child_ref, direction, spi);
                    if let Some(&(packets, bytes)) = by_name.get(name.as_str()) {
                        seen.insert(name, (inbound, packets, bytes));
                    }
                }
            }
        }
    }

    /// The totals of IKE SA `spis` (input: from the End-User, i.e. what
    /// its inbound SAs decrypted).
    fn total(&self, spis: SpiPair) -> Usage {
        let mut usage = Usage::default();
        for &(inbound, packets, bytes) in
            self.usage.get(&spis).into_iter().flat_map(HashMap::values)
        {
            if inbound {
                usage.input_octets += bytes;
                usage.input_packets += packets;
            } else {
                usage.output_octets += bytes;
                usage.output_packets += packets;
            }
        }
        usage
    }
}

/// Acct-Terminate-Cause for phalanx-ike's reason of an IKE SA going down.
fn terminate_cause(reason: &str) -> TerminateCause {
    if reason.contains("by peer") {
        TerminateCause::UserRequest
    } else if reason.contains("not answering") {
        TerminateCause::LostCarrier
    } else if reason == "deleted" {
        TerminateCause::AdminReset
    } else {
        TerminateCause::NasRequest
    }
}

#[cfg(test)]
#[path = "eap_tests.rs"]
mod tests;
