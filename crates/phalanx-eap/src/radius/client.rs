//! The gateway's RADIUS client, sans-IO: EAP pass-through (RFC 3579) and
//! accounting (RFC 2866) against several servers, with retransmission,
//! failover and servers held dead for a while after they stop answering
//! (RFC 5080 §2.2.1 "dead" detection, simplified).
//!
//! The caller owns the socket and the clock: it hands in datagrams
//! ([`RadiusClient::handle_datagram`]) and the time
//! ([`RadiusClient::handle_timeout`]), and sends what
//! [`RadiusClient::poll_transmit`] gives; outcomes come from
//! [`RadiusClient::poll_event`].
//!
//! ```text
//! End-User (IKE)          gateway (this client)             RADIUS server
//! EAP-Response/Identity -> Access-Request {User-Name, EAP-Message,
//!                                          Message-Authenticator}   ->
//!                       <- Access-Challenge {EAP-Message, State}    <-
//! EAP-Response          -> Access-Request {EAP-Message, State, …}   ->
//!                          … rounds …
//!                       <- Access-Accept {EAP-Message(Success),
//!                             MS-MPPE-Send/Recv-Key, [Framed-IP-Address]}
//! ```
//!
//! A request unanswered after `timeout` is sent again, byte for byte
//! (same Identifier and Request Authenticator, RFC 2865 §2.5), up to
//! `retransmits` times; then the server is held dead for `dead_time` and
//! the request goes to the next server with a new Identifier. Only a
//! conversation's first message may change servers: once a server sent a
//! State, no other server knows it, so the conversation fails instead.
//! Accounting-Requests change servers at any time (RFC 2866 §2).
//!
//! Request Authenticators must be unpredictable and never repeat under one
//! secret (RFC 2865 §3): they are HMAC-SHA-256 of a counter under a key
//! the caller draws at random.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use zeroize::Zeroizing;

use super::{accounting_authenticator, AttributeType, RadiusCode, RadiusPacket};

/// NAS-Port-Type Virtual (RFC 2865 §5.41).
const NAS_PORT_TYPE_VIRTUAL: u32 = 5;
/// Service-Type Framed (RFC 2865 §5.6).
const SERVICE_TYPE_FRAMED: u32 = 2;
/// Identifiers per server address (one octet).
const IDENTIFIERS: usize = 256;

/// One RADIUS server.
#[derive(Clone)]
pub struct ServerConfig {
    /// Where Access-Requests go (port 1812).
    pub auth: SocketAddr,
    /// Where Accounting-Requests go (port 1813); `None`: no accounting to
    /// this server.
    pub acct: Option<SocketAddr>,
    /// The shared secret.
    pub secret: Zeroizing<Vec<u8>>,
}

impl core::fmt::Debug for ServerConfig {
    /// Never prints the secret.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("auth", &self.auth)
            .field("acct", &self.acct)
            .finish_non_exhaustive()
    }
}

/// The client's settings.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Servers in order of preference.
    pub servers: Vec<ServerConfig>,
    /// How long to wait for an answer before sending again.
    pub timeout: Duration,
    /// How many times a request is sent again before its server is
    /// given up.
    pub retransmits: u32,
    /// How long a server that stopped answering is skipped.
    pub dead_time: Duration,
    /// NAS-Identifier.
    pub nas_identifier: String,
}

/// The NAS-side facts of one End-User's session, sent in its requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionInfo {
    /// User-Name: the identity the End-User gave.
    pub user_name: String,
    /// NAS-IP-Address / NAS-IPv6-Address: the gateway's address.
    pub nas_address: Option<IpAddr>,
    /// Calling-Station-Id: the End-User's outer address and port
    /// (RFC 3580 §3.20 has MAC addresses; IPsec gateways send this).
    pub calling_station: Option<String>,
    /// Called-Station-Id: the gateway's outer address.
    pub called_station: Option<String>,
}

/// What a conversation or accounting request came to.
#[derive(Debug)]
pub enum RadiusEvent {
    /// Access-Challenge: the next EAP Request for the End-User.
    Challenge {
        /// The session.
        session: u64,
        /// The EAP message.
        eap: Vec<u8>,
    },
    /// Access-Accept.
    Accept(Box<Accepted>),
    /// Access-Reject, or no server answered, or an answer unusable.
    Reject {
        /// The session.
        session: u64,
        /// The EAP-Failure the server sent, if any.
        eap: Option<Vec<u8>>,
        /// Why, for logs.
        reason: String,
    },
    /// An Accounting-Request no server answered: the record is lost.
    AccountingLost {
        /// Its Acct-Session-Id.
        session_id: String,
    },
}

/// An Access-Accept's content.
pub struct Accepted {
    /// The session.
    pub session: u64,
    /// The EAP-Success (RFC 3579 §2.6.3 requires it; `None` if missing).
    pub eap: Option<Vec<u8>>,
    /// The MSK from MS-MPPE-Recv-Key | MS-MPPE-Send-Key.
    pub msk: Option<Zeroizing<Vec<u8>>>,
    /// Framed-IP-Address: the End-User's virtual IPv4 address.
    pub framed_ip: Option<Ipv4Addr>,
    /// Class values, to echo in accounting (RFC 2865 §5.25).
    pub class: Vec<Vec<u8>>,
    /// Session-Timeout, seconds.
    pub session_timeout: Option<u32>,
    /// Acct-Interim-Interval, seconds.
    pub interim_interval: Option<u32>,
}

impl core::fmt::Debug for Accepted {
    /// Never prints the MSK.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Accepted")
            .field("session", &self.session)
            .field("msk", &self.msk.as_ref().map(|m| m.len()))
            .field("framed_ip", &self.framed_ip)
            .field("session_timeout", &self.session_timeout)
            .field("interim_interval", &self.interim_interval)
            .finish_non_exhaustive()
    }
}

/// Acct-Status-Type (RFC 2866 §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcctStatus {
    /// The session began.
    Start,
    /// The session ended.
    Stop,
    /// Still running (RFC 2869 §2.1).
    InterimUpdate,
}

/// Acct-Terminate-Cause (RFC 2866 §5.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TerminateCause {
    /// The End-User ended it (IKE Delete from the peer).
    UserRequest = 1,
    /// The peer stopped answering (dead peer detection).
    LostCarrier = 2,
    /// Session-Timeout reached.
    SessionTimeout = 5,
    /// An operator ended it (`phalanxctl disconnect`).
    AdminReset = 6,
    /// The gateway ended it for another reason (shutdown, reload).
    NasRequest = 10,
}

/// One Accounting-Request's content.
#[derive(Clone, Debug, Default)]
pub struct AccountingRecord {
    /// Start, Interim-Update or Stop.
    pub status: Option<AcctStatus>,
    /// Acct-Session-Id: unique per session, the same in all its records.
    pub session_id: String,
    /// The session's NAS facts.
    pub info: SessionInfo,
    /// Framed-IP-Address.
    pub framed_ip: Option<Ipv4Addr>,
    /// Class values from the Access-Accept.
    pub class: Vec<Vec<u8>>,
    /// Octets and packets from / to the End-User.
    pub input_octets: u64,
    /// Octets to the End-User.
    pub output_octets: u64,
    /// Packets from the End-User.
    pub input_packets: u64,
    /// Packets to the End-User.
    pub output_packets: u64,
    /// Seconds since the session began.
    pub session_time: u32,
    /// Why it ended (Stop only).
    pub terminate_cause: Option<TerminateCause>,
}

/// Counts of the client; every discarded answer has its reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RadiusCounters {
    /// Access-Requests sent, first transmissions.
    pub access_requests: u64,
    /// Requests (access or accounting) sent again after a timeout.
    pub retransmits: u64,
    /// Access-Challenge received.
    pub challenges: u64,
    /// Access-Accept received.
    pub accepts: u64,
    /// Access-Reject received.
    pub rejects: u64,
    /// Times a server stopped answering and was held dead.
    pub server_timeouts: u64,
    /// Requests moved to another server.
    pub failovers: u64,
    /// Conversations that ended because no server (or not the one holding
    /// their State) answered.
    pub no_server: u64,
    /// Answers dropped: no request of ours with that source and
    /// Identifier (late, duplicate or stray).
    pub answers_unmatched: u64,
    /// Answers dropped: malformed, or their authenticators do not verify.
    pub answers_invalid: u64,
    /// Answers dropped: a code that does not answer the request.
    pub answers_wrong_code: u64,
    /// Accept without a usable MSK, or a Challenge without EAP-Message.
    pub answers_unusable: u64,
    /// Accounting-Requests sent, first transmissions.
    pub accounting_requests: u64,
    /// Accounting-Responses received.
    pub accounting_responses: u64,
    /// Accounting-Requests no server answered.
    pub accounting_lost: u64,
    /// Requests waiting for a free Identifier.
    pub waiting: u64,
}

/// A datagram for a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RadiusTransmit {
    /// The server's address.
    pub to: SocketAddr,
    /// The packet.
    pub bytes: Vec<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Access,
    Accounting,
}

/// A request in flight or waiting for an Identifier.
struct Request {
    kind: Kind,
    /// The session (access) it belongs to.
    session: u64,
    /// Its attributes, before Identifier and authenticators.
    attributes: Vec<(AttributeType, Vec<u8>)>,
    /// The server it goes to now.
    server: usize,
    /// Servers tried, in order.
    tried: Vec<usize>,
    /// Only this server may answer (a conversation with a State).
    pinned: bool,
    /// On the wire: (address, Identifier, Request Authenticator, octets).
    wire: Option<(SocketAddr, u8, [u8; 16], Vec<u8>)>,
    /// Transmissions to the current server.
    sent: u32,
    deadline: Instant,
    /// Acct-Session-Id, for the loss report.
    acct_session: String,
}

/// A conversation's memory between rounds.
struct Conversation {
    info: SessionInfo,
    /// The server that sent a State, and the State.
    state: Option<(usize, Vec<u8>)>,
}

struct Server {
    config: ServerConfig,
    dead_until: Option<Instant>,
}

/// The RADIUS client (module doc).
pub struct RadiusClient {
    servers: Vec<Server>,
    timeout: Duration,
    retransmits: u32,
    dead_time: Duration,
    nas_identifier: String,
    /// Authenticator key and counter (module doc).
    auth_key: Zeroizing<[u8; 32]>,
    auth_counter: u64,
    requests: HashMap<u64, Request>,
    next_request: u64,
    /// (server address, Identifier) → request.
    in_use: HashMap<(SocketAddr, u8), u64>,
    /// Where the next Identifier search starts, per address.
    next_identifier: HashMap<SocketAddr, u8>,
    /// Requests waiting for an Identifier, in order.
    waiting: VecDeque<u64>,
    /// Deadlines; stale entries are skipped (lazy deletion).
    timers: BinaryHeap<Reverse<(Instant, u64)>>,
    conversations: HashMap<u64, Conversation>,
    /// The request in flight per conversation.
    by_session: HashMap<u64, u64>,
    outbox: VecDeque<RadiusTransmit>,
    events: VecDeque<RadiusEvent>,
    counters: RadiusCounters,
}

impl RadiusClient {
    /// A client for `config`; `key`: 32 random octets (module doc).
    pub fn new(config: ClientConfig, key: [u8; 32]) -> RadiusClient {
        RadiusClient {
            servers: config
                .servers
                .into_iter()
                .map(|config| Server {
                    config,
                    dead_until: None,
                })
                .collect(),
            timeout: config.timeout,
            retransmits: config.retransmits,
            dead_time: config.dead_time,
            nas_identifier: config.nas_identifier,
            auth_key: Zeroizing::new(key),
            auth_counter: 0,
            requests: HashMap::new(),
            next_request: 0,
            in_use: HashMap::new(),
            next_identifier: HashMap::new(),
            waiting: VecDeque::new(),
            timers: BinaryHeap::new(),
            conversations: HashMap::new(),
            by_session: HashMap::new(),
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            counters: RadiusCounters::default(),
        }
    }

    /// A reload's servers and timers; conversations and records in flight
    /// finish with the servers they have.
    pub fn reconfigure(&mut self, config: ClientConfig) {
        let same_servers = self.servers.len() == config.servers.len()
            && self
                .servers
                .iter()
                .zip(&config.servers)
                .all(|(a, b)| a.config.auth == b.auth && a.config.acct == b.acct);
        if !same_servers {
            // Requests name servers by index: those in flight keep theirs
            // only when the list is unchanged; others are given up as if
            // unanswered (conversations end, records count as lost).
            let ids: Vec<u64> = self.requests.keys().copied().collect();
            for id in ids {
                self.give_up(id);
            }
            self.conversations.clear();
        }
        self.servers = config
            .servers
            .into_iter()
            .map(|config| Server {
                config,
                dead_until: None,
            })
            .collect();
        self.timeout = config.timeout;
        self.retransmits = config.retransmits;
        self.dead_time = config.dead_time;
        self.nas_identifier = config.nas_identifier;
    }

    /// Whether any server takes accounting.
    pub fn has_accounting(&self) -> bool {
        self.servers.iter().any(|s| s.config.acct.is_some())
    }

    /// The counters.
    pub fn counters(&self) -> &RadiusCounters {
        &self.counters
    }

    /// Sends End-User `session`'s EAP message `eap` (from its EAP peer) to
    /// a server. The first call of a session starts a conversation with
    /// `info`; later calls carry the server's State.
    pub fn access(&mut self, now: Instant, session: u64, info: &SessionInfo, eap: &[u8]) {
        let conversation = self
            .conversations
            .entry(session)
            .or_insert_with(|| Conversation {
                info: info.clone(),
                state: None,
            });
        let info = conversation.info.clone();
        let pinned = conversation.state.clone();
        // A new message supersedes one still in flight (the End-User
        // cannot send the next before it has our answer: only a stale one
        // can be in flight).
        if let Some(old) = self.by_session.remove(&session) {
            self.forget(old);
        }
        let mut attributes = self.nas_attributes(&info);
        attributes.push((
            AttributeType::SERVICE_TYPE,
            SERVICE_TYPE_FRAMED.to_be_bytes().to_vec(),
        ));
        let mut packet = RadiusPacket {
            code: RadiusCode::ACCESS_REQUEST,
            identifier: 0,
            authenticator: [0; 16],
            attributes,
        };
        packet.push_eap_message(eap);
        let (server, is_pinned) = match &pinned {
            Some((server, state)) => {
                packet
                    .attributes
                    .push((AttributeType::STATE, state.clone()));
                (Some(*server), true)
            }
            None => (self.pick_server(now, Kind::Access, &[]), false),
        };
        let Some(server) = server else {
            self.counters.no_server += 1;
            self.end_conversation(
                session,
                None,
                "no RADIUS server is configured or alive".to_owned(),
            );
            return;
        };
        self.counters.access_requests += 1;
        let id = self.new_request(Request {
            kind: Kind::Access,
            session,
            attributes: packet.attributes,
            server,
            tried: vec![server],
            pinned: is_pinned,
            wire: None,
            sent: 0,
            deadline: now,
            acct_session: String::new(),
        });
        self.by_session.insert(session, id);
        self.launch(now, id);
    }

    /// Forgets End-User `session` (its IKE SA is gone): an answer still
    /// due is dropped as unmatched.
    pub fn cancel(&mut self, session: u64) {
        self.conversations.remove(&session);
        if let Some(id) = self.by_session.remove(&session) {
            self.forget(id);
        }
    }

    /// Sends an Accounting-Request for `record` to the first live server
    /// that takes accounting; `false` when none does.
    pub fn account(&mut self, now: Instant, record: &AccountingRecord) -> bool {
        let Some(server) = self.pick_server(now, Kind::Accounting, &[]) else {
            if self.has_accounting() {
                self.counters.accounting_lost += 1;
                self.events.push_back(RadiusEvent::AccountingLost {
                    session_id: record.session_id.clone(),
                });
            }
            return false;
        };
        let attributes = self.accounting_attributes(record);
        self.counters.accounting_requests += 1;
        let id = self.new_request(Request {
            kind: Kind::Accounting,
            session: 0,
            attributes,
            server,
            tried: vec![server],
            pinned: false,
            wire: None,
            sent: 0,
            deadline: now,
            acct_session: record.session_id.clone(),
        });
        self.launch(now, id);
        true
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<RadiusTransmit> {
        self.outbox.pop_front()
    }

    /// The next outcome.
    pub fn poll_event(&mut self) -> Option<RadiusEvent> {
        self.events.pop_front()
    }

    /// When [`RadiusClient::handle_timeout`] is due.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        while let Some(Reverse((at, id))) = self.timers.peek().copied() {
            match self.requests.get(&id) {
                Some(r) if r.wire.is_some() && r.deadline == at => return Some(at),
                _ => {
                    self.timers.pop();
                }
            }
        }
        None
    }

    /// Retransmits, failovers and give-ups due by `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(Reverse((at, id))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            let Some(request) = self.requests.get_mut(&id) else {
                continue;
            };
            if request.deadline != at || request.wire.is_none() {
                continue;
            }
            if request.sent <= self.retransmits {
                request.sent += 1;
                request.deadline = now + self.timeout;
                let deadline = request.deadline;
                if let Some((to, _, _, bytes)) = &request.wire {
                    self.outbox.push_back(RadiusTransmit {
                        to: *to,
                        bytes: bytes.clone(),
                    });
                }
                self.counters.retransmits += 1;
                self.timers.push(Reverse((deadline, id)));
                continue;
            }
            // The server did not answer: held dead, the request moves on.
            self.counters.server_timeouts += 1;
            let server = request.server;
            self.servers[server].dead_until = Some(now + self.dead_time);
            self.release(id);
            let Some(request) = self.requests.get(&id) else {
                continue;
            };
            let next = if request.pinned {
                None
            } else {
                let tried = request.tried.clone();
                self.pick_server(now, request.kind, &tried)
            };
            match next {
                Some(next) => {
                    self.counters.failovers += 1;
                    if let Some(r) = self.requests.get_mut(&id) {
                        r.server = next;
                        r.tried.push(next);
                        r.sent = 0;
                    }
                    self.launch(now, id);
                }
                None => self.give_up(id),
            }
        }
        self.fill_waiting(now);
    }

    /// A datagram from `from`: the answer to one of our requests, or
    /// dropped and counted.
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, bytes: &[u8]) {
        let Some(&identifier) = bytes.get(1) else {
            self.counters.answers_invalid += 1;
            return;
        };
        let Some(&id) = self.in_use.get(&(from, identifier)) else {
            self.counters.answers_unmatched += 1;
            return;
        };
        let Some(request) = self.requests.get(&id) else {
            self.counters.answers_unmatched += 1;
            return;
        };
        let Some((_, _, authenticator, _)) = &request.wire else {
            self.counters.answers_unmatched += 1;
            return;
        };
        let secret = &self.servers[request.server].config.secret;
        let answer = match RadiusPacket::parse_answer(bytes, authenticator, secret) {
            Ok(answer) => answer,
            Err(_) => {
                // Silently discarded (RFC 2865 §3), counted; the request
                // keeps waiting for a genuine answer.
                self.counters.answers_invalid += 1;
                return;
            }
        };
        let expected = match request.kind {
            Kind::Access => matches!(
                answer.code,
                RadiusCode::ACCESS_ACCEPT
                    | RadiusCode::ACCESS_REJECT
                    | RadiusCode::ACCESS_CHALLENGE
            ),
            Kind::Accounting => answer.code == RadiusCode::ACCOUNTING_RESPONSE,
        };
        if !expected {
            self.counters.answers_wrong_code += 1;
            return;
        }
        let (kind, session, server, authenticator) = (
            request.kind,
            request.session,
            request.server,
            *authenticator,
        );
        self.servers[server].dead_until = None;
        self.release(id);
        self.requests.remove(&id);
        self.fill_waiting(now);
        if kind == Kind::Accounting {
            self.counters.accounting_responses += 1;
            return;
        }
        self.by_session.remove(&session);
        let secret = self.servers[server].config.secret.clone();
        self.access_answer(session, server, &answer, &authenticator, &secret);
    }

    fn access_answer(
        &mut self,
        session: u64,
        server: usize,
        answer: &RadiusPacket,
        authenticator: &[u8; 16],
        secret: &[u8],
    ) {
        let eap = answer.eap_message();
        match answer.code {
            RadiusCode::ACCESS_CHALLENGE => {
                self.counters.challenges += 1;
                let Some(eap) = eap else {
                    self.counters.answers_unusable += 1;
                    self.end_conversation(
                        session,
                        None,
                        "RADIUS Access-Challenge without EAP-Message".to_owned(),
                    );
                    return;
                };
                if let Some(conversation) = self.conversations.get_mut(&session) {
                    conversation.state = answer
                        .attribute(AttributeType::STATE)
                        .map(|s| (server, s.to_vec()))
                        .or(conversation.state.take());
                }
                self.events
                    .push_back(RadiusEvent::Challenge { session, eap });
            }
            RadiusCode::ACCESS_ACCEPT => {
                self.counters.accepts += 1;
                self.conversations.remove(&session);
                // A key that does not decrypt is as unusable as none.
                let msk = answer.msk(authenticator, secret).ok().flatten();
                if msk.is_none() {
                    self.counters.answers_unusable += 1;
                }
                let u32_of = |ty| {
                    answer
                        .attribute(ty)
                        .and_then(|v| <[u8; 4]>::try_from(v).ok())
                        .map(u32::from_be_bytes)
                };
                let framed_ip = answer
                    .attribute(AttributeType::FRAMED_IP_ADDRESS)
                    .and_then(|v| <[u8; 4]>::try_from(v).ok())
                    .map(Ipv4Addr::from)
                    // 255.255.255.254: "the NAS picks" (RFC 2865 §5.8);
                    // 255.255.255.255: "the user picks".
                    .filter(|ip| ip.octets()[..3] != [255, 255, 255]);
                self.events
                    .push_back(RadiusEvent::Accept(Box::new(Accepted {
                        session,
                        eap,
                        msk,
                        framed_ip,
                        class: answer
                            .attributes
                            .iter()
                            .filter(|(t, _)| *t == AttributeType::CLASS)
                            .map(|(_, v)| v.clone())
                            .collect(),
                        session_timeout: u32_of(AttributeType::SESSION_TIMEOUT),
                        interim_interval: u32_of(AttributeType::ACCT_INTERIM_INTERVAL),
                    })));
            }
            _ => {
                self.counters.rejects += 1;
                let message = answer
                    .attribute(AttributeType::REPLY_MESSAGE)
                    .map(|m| format!(": {}", String::from_utf8_lossy(m)))
                    .unwrap_or_default();
                self.end_conversation(session, eap, format!("RADIUS Access-Reject{message}"));
            }
        }
    }

    fn end_conversation(&mut self, session: u64, eap: Option<Vec<u8>>, reason: String) {
        self.conversations.remove(&session);
        self.events.push_back(RadiusEvent::Reject {
            session,
            eap,
            reason,
        });
    }

    /// The first server after none of `tried` that is alive and serves
    /// `kind`; when all are dead, the one whose dead time ends first (a
    /// dead server beats none, RFC 5080 §2.2.1).
    fn pick_server(&self, now: Instant, kind: Kind, tried: &[usize]) -> Option<usize> {
        let serves = |i: &usize| {
            !tried.contains(i) && (kind == Kind::Access || self.servers[*i].config.acct.is_some())
        };
        let candidates = (0..self.servers.len()).filter(serves);
        candidates
            .clone()
            .find(|&i| self.servers[i].dead_until.is_none_or(|until| until <= now))
            .or_else(|| candidates.min_by_key(|&i| self.servers[i].dead_until))
    }

    fn new_request(&mut self, request: Request) -> u64 {
        let id = self.next_request;
        self.next_request += 1;
        self.requests.insert(id, request);
        id
    }

    /// Gives request `id` an Identifier and sends it, or queues it.
    fn launch(&mut self, now: Instant, id: u64) {
        let Some(request) = self.requests.get(&id) else {
            return;
        };
        let kind = request.kind;
        let server = &self.servers[request.server].config;
        let to = match kind {
            Kind::Access => server.auth,
            Kind::Accounting => match server.acct {
                Some(acct) => acct,
                None => return self.give_up(id),
            },
        };
        let secret = server.secret.clone();
        let attributes = request.attributes.clone();
        let Some(identifier) = self.free_identifier(to) else {
            self.waiting.push_back(id);
            self.counters.waiting = self.waiting.len() as u64;
            return;
        };
        let mut packet = RadiusPacket {
            code: match kind {
                Kind::Access => RadiusCode::ACCESS_REQUEST,
                Kind::Accounting => RadiusCode::ACCOUNTING_REQUEST,
            },
            identifier,
            authenticator: [0; 16],
            attributes,
        };
        let bytes = match kind {
            Kind::Access => {
                packet.authenticator = self.request_authenticator();
                packet.emit_signed(&secret)
            }
            Kind::Accounting => {
                let zeroed = packet.emit();
                packet.authenticator = accounting_authenticator(&zeroed, &secret);
                packet.emit()
            }
        };
        self.in_use.insert((to, identifier), id);
        self.outbox.push_back(RadiusTransmit {
            to,
            bytes: bytes.clone(),
        });
        let deadline = now + self.timeout;
        if let Some(request) = self.requests.get_mut(&id) {
            request.wire = Some((to, identifier, packet.authenticator, bytes));
            request.sent = 1;
            request.deadline = deadline;
        }
        self.timers.push(Reverse((deadline, id)));
    }

    /// Requests that waited for an Identifier, while there are free ones.
    fn fill_waiting(&mut self, now: Instant) {
        for _ in 0..self.waiting.len() {
            let Some(id) = self.waiting.pop_front() else {
                break;
            };
            // One still without an Identifier goes back to the end: the
            // order of the others is kept.
            self.launch(now, id);
        }
        self.counters.waiting = self.waiting.len() as u64;
    }

    fn free_identifier(&mut self, to: SocketAddr) -> Option<u8> {
        let start = self.next_identifier.get(&to).copied().unwrap_or(0);
        let found = (0..IDENTIFIERS)
            .map(|i| start.wrapping_add(i as u8))
            .find(|ident| !self.in_use.contains_key(&(to, *ident)))?;
        self.next_identifier.insert(to, found.wrapping_add(1));
        Some(found)
    }

    fn request_authenticator(&mut self) -> [u8; 16] {
        self.auth_counter += 1;
        // HMAC takes keys of any length: new_from_slice cannot fail.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.auth_key[..])
            .unwrap_or_else(|_| unreachable!());
        mac.update(&self.auth_counter.to_be_bytes());
        let full = mac.finalize().into_bytes();
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        out
    }

    /// Frees request `id`'s Identifier (it stays a request).
    fn release(&mut self, id: u64) {
        if let Some(request) = self.requests.get_mut(&id) {
            if let Some((to, identifier, _, _)) = request.wire.take() {
                self.in_use.remove(&(to, identifier));
            }
        }
    }

    /// Drops request `id` without an outcome.
    fn forget(&mut self, id: u64) {
        self.release(id);
        self.requests.remove(&id);
        self.waiting.retain(|w| *w != id);
    }

    /// No server answered request `id`.
    fn give_up(&mut self, id: u64) {
        self.release(id);
        let Some(request) = self.requests.remove(&id) else {
            return;
        };
        self.waiting.retain(|w| *w != id);
        match request.kind {
            Kind::Access => {
                self.by_session.remove(&request.session);
                self.counters.no_server += 1;
                let reason = if request.pinned {
                    "the RADIUS server holding the conversation stopped answering"
                } else {
                    "no RADIUS server answered"
                };
                self.end_conversation(request.session, None, reason.to_owned());
            }
            Kind::Accounting => {
                self.counters.accounting_lost += 1;
                self.events.push_back(RadiusEvent::AccountingLost {
                    session_id: request.acct_session,
                });
            }
        }
    }

    fn nas_attributes(&self, info: &SessionInfo) -> Vec<(AttributeType, Vec<u8>)> {
        let mut out = vec![(AttributeType::USER_NAME, info.user_name.as_bytes().to_vec())];
        match info.nas_address {
            Some(IpAddr::V4(ip)) => out.push((AttributeType::NAS_IP_ADDRESS, ip.octets().to_vec())),
            Some(IpAddr::V6(ip)) => {
                out.push((AttributeType::NAS_IPV6_ADDRESS, ip.octets().to_vec()))
            }
            None => {}
        }
        if !self.nas_identifier.is_empty() {
            out.push((
                AttributeType::NAS_IDENTIFIER,
                self.nas_identifier.as_bytes().to_vec(),
            ));
        }
        out.push((
            AttributeType::NAS_PORT_TYPE,
            NAS_PORT_TYPE_VIRTUAL.to_be_bytes().to_vec(),
        ));
        if let Some(called) = &info.called_station {
            out.push((AttributeType::CALLED_STATION_ID, called.as_bytes().to_vec()));
        }
        if let Some(calling) = &info.calling_station {
            out.push((
                AttributeType::CALLING_STATION_ID,
                calling.as_bytes().to_vec(),
            ));
        }
        out
    }

    fn accounting_attributes(&self, record: &AccountingRecord) -> Vec<(AttributeType, Vec<u8>)> {
        let word = |v: u32| v.to_be_bytes().to_vec();
        let status = match record.status.unwrap_or(AcctStatus::InterimUpdate) {
            AcctStatus::Start => 1,
            AcctStatus::Stop => 2,
            AcctStatus::InterimUpdate => 3,
        };
        let mut out = vec![(AttributeType::ACCT_STATUS_TYPE, word(status))];
        out.push((
            AttributeType::ACCT_SESSION_ID,
            record.session_id.as_bytes().to_vec(),
        ));
        out.extend(self.nas_attributes(&record.info));
        if let Some(ip) = record.framed_ip {
            out.push((AttributeType::FRAMED_IP_ADDRESS, ip.octets().to_vec()));
        }
        for class in &record.class {
            out.push((AttributeType::CLASS, class.clone()));
        }
        if record.status != Some(AcctStatus::Start) {
            // Low 32 bits, and the rest in Gigawords (RFC 2869 §5.1).
            let low = |v: u64| word(v as u32);
            let high = |v: u64| word(u32::try_from(v >> 32).unwrap_or(u32::MAX));
            let packets = |v: u64| word(u32::try_from(v).unwrap_or(u32::MAX));
            out.push((AttributeType::ACCT_INPUT_OCTETS, low(record.input_octets)));
            out.push((AttributeType::ACCT_OUTPUT_OCTETS, low(record.output_octets)));
            out.push((
                AttributeType::ACCT_INPUT_GIGAWORDS,
                high(record.input_octets),
            ));
            out.push((
                AttributeType::ACCT_OUTPUT_GIGAWORDS,
                high(record.output_octets),
            ));
            out.push((
                AttributeType::ACCT_INPUT_PACKETS,
                packets(record.input_packets),
            ));
            out.push((
                AttributeType::ACCT_OUTPUT_PACKETS,
                packets(record.output_packets),
            ));
            out.push((AttributeType::ACCT_SESSION_TIME, word(record.session_time)));
        }
        if let (Some(AcctStatus::Stop), Some(cause)) = (record.status, record.terminate_cause) {
            out.push((AttributeType::ACCT_TERMINATE_CAUSE, word(cause as u32)));
        }
        out
    }
}

#[cfg(test)]
mod tests;
