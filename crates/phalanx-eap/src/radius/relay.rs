//! EAP pass-through (RFC 3579 §2.1): the gateway asks the End-User's
//! identity itself (EAP-Request/Identity), then relays every EAP message
//! between the End-User and a RADIUS server through the [`RadiusClient`]
//! until the server accepts or rejects. The method (MSCHAPv2, TLS, …) is
//! the server's business; the gateway sees only the MSK.
//!
//! It also keeps the accounting session (RFC 2866) of each End-User the
//! server accepted: Start when the IKE SA is up, Interim-Update every
//! interval (the server's Acct-Interim-Interval, else the configured one),
//! Stop with the totals when it goes down. Accounting sessions are keyed
//! by the IKE SA's SPI pair and follow IKE SA rekeys.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use zeroize::Zeroizing;

use super::client::{
    AccountingRecord, AcctStatus, RadiusClient, RadiusEvent, SessionInfo, TerminateCause,
};
use crate::packet::{EapCode, EapRepr, EapType};

/// An IKE SA's SPIs (initiator, responder).
pub type SpiPair = (u64, u64);

/// What the relay has for the End-User's IKE SA.
pub enum RelayEvent {
    /// The next EAP Request.
    Continue {
        /// The IKE SA (our SPI).
        session: u64,
        /// The EAP message.
        eap: Vec<u8>,
    },
    /// The server accepted.
    Success {
        /// The IKE SA (our SPI).
        session: u64,
        /// EAP-Success.
        eap: Vec<u8>,
        /// The MSK.
        msk: Zeroizing<Vec<u8>>,
        /// The identity the End-User gave in EAP-Identity.
        identity: String,
        /// Framed-IP-Address from the server.
        framed_ip: Option<Ipv4Addr>,
    },
    /// The server rejected, or no server answered.
    Failure {
        /// The IKE SA (our SPI).
        session: u64,
        /// EAP-Failure.
        eap: Vec<u8>,
        /// Why, for logs.
        reason: String,
    },
    /// An accounting record no server took.
    AccountingLost {
        /// Its Acct-Session-Id.
        session_id: String,
    },
}

impl core::fmt::Debug for RelayEvent {
    /// Never prints the MSK.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RelayEvent::Continue { session, eap } => {
                write!(f, "Continue({session:016x}, {} octets)", eap.len())
            }
            RelayEvent::Success {
                session, identity, ..
            } => write!(f, "Success({session:016x}, {identity})"),
            RelayEvent::Failure {
                session, reason, ..
            } => write!(f, "Failure({session:016x}, {reason})"),
            RelayEvent::AccountingLost { session_id } => write!(f, "AccountingLost({session_id})"),
        }
    }
}

/// Octets and packets of an End-User's tunnel, as RADIUS counts them
/// (input: from the End-User).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Octets from the End-User.
    pub input_octets: u64,
    /// Octets to the End-User.
    pub output_octets: u64,
    /// Packets from the End-User.
    pub input_packets: u64,
    /// Packets to the End-User.
    pub output_packets: u64,
}

/// An End-User between EAP-Identity and the server's verdict.
struct Conversation {
    info: SessionInfo,
    /// The Identifier of the last EAP message from the End-User (an
    /// outcome we build carries it, RFC 3748 §4.2).
    last_identifier: u8,
    /// Still waiting for EAP-Response/Identity with this Identifier.
    awaiting_identity: Option<u8>,
}

/// What accounting needs of an accepted End-User.
struct Accepted {
    info: SessionInfo,
    framed_ip: Option<Ipv4Addr>,
    class: Vec<Vec<u8>>,
    interim: Option<Duration>,
}

/// An accounting session: from IKE SA up to down.
struct Accounted {
    record: AccountingRecord,
    started: Instant,
    interim: Option<Duration>,
    next_interim: Option<Instant>,
}

/// The relay (module doc).
pub struct EapRelay {
    client: RadiusClient,
    conversations: HashMap<u64, Conversation>,
    /// Accepted, IKE SA not up yet; by our SPI.
    accepted: HashMap<u64, Accepted>,
    accounted: HashMap<SpiPair, Accounted>,
    /// The configured interim interval (a server's value wins).
    interim: Option<Duration>,
    events: VecDeque<RelayEvent>,
    /// Acct-Session-Id numbering: the NAS's start time and a counter make
    /// them unique across restarts (RFC 2866 §5.5).
    epoch: u64,
    next_session: u64,
}

impl EapRelay {
    /// A relay over `client`; `interim`: the default interim interval;
    /// `epoch`: something that differs per start (the wall-clock second).
    pub fn new(client: RadiusClient, interim: Option<Duration>, epoch: u64) -> EapRelay {
        EapRelay {
            client,
            conversations: HashMap::new(),
            accepted: HashMap::new(),
            accounted: HashMap::new(),
            interim,
            events: VecDeque::new(),
            epoch,
            next_session: 0,
        }
    }

    /// The client (counters, socket work).
    pub fn client(&self) -> &RadiusClient {
        &self.client
    }

    /// The client, to hand it datagrams and take its transmits.
    pub fn client_mut(&mut self) -> &mut RadiusClient {
        &mut self.client
    }

    /// A reload's default interim interval.
    pub fn set_interim(&mut self, interim: Option<Duration>) {
        self.interim = interim;
    }

    /// End-User `session` starts EAP: the EAP-Request/Identity to send.
    /// `info.user_name` is the IKE identity, used when the EAP identity is
    /// empty.
    pub fn start(&mut self, session: u64, info: SessionInfo, identifier: u8) -> Vec<u8> {
        self.client.cancel(session);
        self.conversations.insert(
            session,
            Conversation {
                info,
                last_identifier: identifier,
                awaiting_identity: Some(identifier),
            },
        );
        EapRepr::request(identifier, EapType::IDENTITY, Vec::new()).emit()
    }

    /// The End-User's next EAP message; the answer comes as a
    /// [`RelayEvent`]. `false`: discarded (unknown session, not an EAP
    /// Response; RFC 3748 §4.1).
    pub fn message(&mut self, now: Instant, session: u64, eap: &[u8]) -> bool {
        let Some(conversation) = self.conversations.get_mut(&session) else {
            return false;
        };
        let Ok(repr) = EapRepr::parse(eap) else {
            return false;
        };
        if repr.code != EapCode::RESPONSE {
            return false;
        }
        if let Some(expected) = conversation.awaiting_identity {
            match &repr.body {
                Some((EapType::IDENTITY, identity)) if repr.identifier == expected => {
                    let identity = String::from_utf8_lossy(identity);
                    if !identity.is_empty() {
                        conversation.info.user_name = identity.into_owned();
                    }
                    conversation.awaiting_identity = None;
                }
                _ => return false,
            }
        }
        conversation.last_identifier = repr.identifier;
        let info = conversation.info.clone();
        self.client.access(now, session, &info, eap);
        true
    }

    /// Forgets `session` (its IKE SA is gone before the verdict).
    pub fn cancel(&mut self, session: u64) {
        self.conversations.remove(&session);
        self.accepted.remove(&session);
        self.client.cancel(session);
    }

    /// Forgets the conversations (and accepted End-Users not yet up) of
    /// sessions that are not `live`.
    pub fn retain(&mut self, live: impl Fn(u64) -> bool) {
        let gone: Vec<u64> = self
            .conversations
            .keys()
            .chain(self.accepted.keys())
            .copied()
            .filter(|s| !live(*s))
            .collect();
        for session in gone {
            self.cancel(session);
        }
    }

    /// The IKE SA of an accepted End-User is up (`spis`; our SPI is one of
    /// them): accounting Start. Returns whether the SA is accounted.
    pub fn up(&mut self, now: Instant, spis: SpiPair, virtual_ips: &[IpAddr]) -> bool {
        let Some(accepted) = self
            .accepted
            .remove(&spis.0)
            .or_else(|| self.accepted.remove(&spis.1))
        else {
            return false;
        };
        self.next_session += 1;
        let framed_ip = accepted.framed_ip.or_else(|| {
            virtual_ips.iter().find_map(|ip| match ip {
                IpAddr::V4(v4) => Some(*v4),
                IpAddr::V6(_) => None,
            })
        });
        let record = AccountingRecord {
            status: Some(AcctStatus::Start),
            session_id: format!("{:08x}{:08x}", self.epoch as u32, self.next_session),
            info: accepted.info,
            framed_ip,
            class: accepted.class,
            ..AccountingRecord::default()
        };
        let interim = accepted.interim.or(self.interim);
        if self.client.has_accounting() {
            self.client.account(now, &record);
        }
        self.accounted.insert(
            spis,
            Accounted {
                record,
                started: now,
                interim,
                next_interim: interim.map(|i| now + i),
            },
        );
        true
    }

    /// The IKE SA was rekeyed: its accounting session goes on.
    pub fn rekeyed(&mut self, old: SpiPair, new: SpiPair) {
        if let Some(session) = self.accounted.remove(&old) {
            self.accounted.insert(new, session);
        }
    }

    /// Whether IKE SA `spis` is accounted.
    pub fn is_accounted(&self, spis: SpiPair) -> bool {
        self.accounted.contains_key(&spis)
    }

    /// The IKE SAs whose Interim-Update is due.
    pub fn interim_due(&self, now: Instant) -> Vec<SpiPair> {
        self.accounted
            .iter()
            .filter(|(_, a)| a.next_interim.is_some_and(|t| t <= now))
            .map(|(spis, _)| *spis)
            .collect()
    }

    /// Interim-Update for IKE SA `spis` with its `usage` so far.
    pub fn interim(&mut self, now: Instant, spis: SpiPair, usage: Usage) {
        let Some(session) = self.accounted.get_mut(&spis) else {
            return;
        };
        session.next_interim = session.interim.map(|i| now + i);
        let record = Self::record(session, now, AcctStatus::InterimUpdate, usage, None);
        if self.client.has_accounting() {
            self.client.account(now, &record);
        }
    }

    /// IKE SA `spis` is down: accounting Stop with its totals.
    pub fn down(&mut self, now: Instant, spis: SpiPair, usage: Usage, cause: TerminateCause) {
        let Some(session) = self.accounted.remove(&spis) else {
            return;
        };
        let record = Self::record(&session, now, AcctStatus::Stop, usage, Some(cause));
        if self.client.has_accounting() {
            self.client.account(now, &record);
        }
    }

    fn record(
        session: &Accounted,
        now: Instant,
        status: AcctStatus,
        usage: Usage,
        cause: Option<TerminateCause>,
    ) -> AccountingRecord {
        AccountingRecord {
            status: Some(status),
            input_octets: usage.input_octets,
            output_octets: usage.output_octets,
            input_packets: usage.input_packets,
            output_packets: usage.output_packets,
            session_time: u32::try_from(now.saturating_duration_since(session.started).as_secs())
                .unwrap_or(u32::MAX),
            terminate_cause: cause,
            ..session.record.clone()
        }
    }

    /// When the relay needs [`EapRelay::handle_timeout`].
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        let interim = self.accounted.values().filter_map(|a| a.next_interim).min();
        [self.client.poll_timeout(), interim]
            .into_iter()
            .flatten()
            .min()
    }

    /// The client's timers (interim updates are the caller's: it has the
    /// usage, see [`EapRelay::interim_due`]).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.client.handle_timeout(now);
    }

    /// The next outcome for an End-User.
    pub fn poll_event(&mut self) -> Option<RelayEvent> {
        while let Some(event) = self.client.poll_event() {
            self.translate(event);
        }
        self.events.pop_front()
    }

    fn translate(&mut self, event: RadiusEvent) {
        match event {
            RadiusEvent::Challenge { session, eap } => {
                if self.conversations.contains_key(&session) {
                    self.events.push_back(RelayEvent::Continue { session, eap });
                }
            }
            RadiusEvent::Accept(accepted) => {
                let Some(conversation) = self.conversations.remove(&accepted.session) else {
                    return;
                };
                let session = accepted.session;
                let Some(msk) = accepted.msk else {
                    // RFC 7296 §2.16: the AUTH payloads need the MSK; a
                    // method without one cannot authenticate IKE.
                    self.events.push_back(RelayEvent::Failure {
                        session,
                        eap: EapRepr::outcome(EapCode::FAILURE, conversation.last_identifier)
                            .emit(),
                        reason: "RADIUS Access-Accept without MS-MPPE keys (no MSK)".to_owned(),
                    });
                    return;
                };
                let eap = accepted.eap.unwrap_or_else(|| {
                    EapRepr::outcome(EapCode::SUCCESS, conversation.last_identifier).emit()
                });
                self.accepted.insert(
                    session,
                    Accepted {
                        info: conversation.info.clone(),
                        framed_ip: accepted.framed_ip,
                        class: accepted.class,
                        interim: accepted
                            .interim_interval
                            .filter(|s| *s > 0)
                            .map(|s| Duration::from_secs(u64::from(s))),
                    },
                );
                self.events.push_back(RelayEvent::Success {
                    session,
                    eap,
                    msk,
                    identity: conversation.info.user_name,
                    framed_ip: accepted.framed_ip,
                });
            }
            RadiusEvent::Reject {
                session,
                eap,
                reason,
            } => {
                let Some(conversation) = self.conversations.remove(&session) else {
                    return;
                };
                let eap = eap.unwrap_or_else(|| {
                    EapRepr::outcome(EapCode::FAILURE, conversation.last_identifier).emit()
                });
                self.events.push_back(RelayEvent::Failure {
                    session,
                    eap,
                    reason,
                });
            }
            RadiusEvent::AccountingLost { session_id } => {
                self.events
                    .push_back(RelayEvent::AccountingLost { session_id });
            }
        }
    }
}

#[cfg(test)]
mod tests;
