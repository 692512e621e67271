//! The EAP-TLS method of the authenticator: rustls' `ServerConnection` over
//! in-memory buffers, the framing of [`super::framing`], the flows of the
//! module doc of [`crate::tls`].

use std::fmt;
use std::io::Write;
use std::sync::Arc;

use phalanx_ike::auth::Identity;
use rustls::pki_types::UnixTime;
use rustls::{ProtocolVersion, ServerConnection};

use super::framing::{self, Fragment, Outgoing, Reassembly};
use super::verifier::end_user_identity;
use super::{drain, feed, keys, Tls13Keying, TlsFailure, TlsFailureKind, TlsServerConfig};
use crate::packet::EapType;
use crate::server::{AuthMethod, EapFailure, MethodStep};

/// One End-User's TLS connection and the EAP-TLS messages in flight.
struct Session {
    conn: ServerConnection,
    /// Whom the client certificate must name.
    identity: Identity,
    inbound: Reassembly,
    /// Our TLS data still to go out in fragments.
    outbound: Option<Outgoing>,
}

/// Where the exchange is.
enum State {
    /// Before EAP-Identity.
    Idle,
    /// The handshake runs.
    Handshake(Box<Session>),
    /// Our last flight (TLS 1.2 Finished, TLS 1.3 commitment message) is
    /// going out; the peer's empty Response to its last fragment ends it.
    Final(Box<Session>),
    /// A TLS alert went to the peer (RFC 5216 §2.1.3): EAP-Failure answers
    /// whatever comes back.
    Alerted(EapFailure),
    Done,
}

/// EAP-TLS as an [`AuthMethod`]: one per End-User.
pub struct TlsAuthenticator {
    config: Arc<TlsServerConfig>,
    /// The IKE IDi, the identity when EAP-Response/Identity is empty.
    ike_identity: String,
    now: UnixTime,
    rounds: usize,
    state: State,
}

impl fmt::Debug for TlsAuthenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsAuthenticator")
            .field("ike_identity", &self.ike_identity)
            .field("rounds", &self.rounds)
            .finish_non_exhaustive()
    }
}

impl TlsAuthenticator {
    /// The method for an End-User who presented `ike_identity` as IDi;
    /// certificates are checked at `now`.
    pub fn new(config: Arc<TlsServerConfig>, ike_identity: &str, now: UnixTime) -> Self {
        TlsAuthenticator {
            config,
            ike_identity: ike_identity.to_owned(),
            now,
            rounds: 0,
            state: State::Idle,
        }
    }

    /// The TLS version of the handshake, once negotiated.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        match &self.state {
            State::Handshake(s) | State::Final(s) => s.conn.protocol_version(),
            _ => None,
        }
    }

    /// A round of the handshake: the peer's TLS data, or its
    /// acknowledgement of our fragment.
    fn handshake_round(&mut self, mut s: Box<Session>, data: &[u8]) -> MethodStep {
        let fragment = match self.fragment(&mut s, data) {
            Ok(Some(fragment)) => fragment,
            Ok(None) => return self.next_fragment(s, State::Handshake),
            Err(failure) => return fail(failure),
        };
        if fragment.is_ack() && !s.inbound.in_progress() {
            let detail = "an acknowledgement where the peer's TLS data belongs";
            return fail(TlsFailure::new(TlsFailureKind::UnexpectedMessage, detail));
        }
        match s.inbound.push(&fragment) {
            Err(failure) => fail(failure),
            Ok(None) => {
                self.state = State::Handshake(s);
                MethodStep::Request(framing::ack())
            }
            Ok(Some(message)) => self.process(s, &message),
        }
    }

    /// A round after our last flight: the peer's empty Response ends the
    /// method (RFC 5216 §2.1.1, RFC 9190 §2.1.1); TLS data there can only
    /// be an alert (the peer refused our Finished) or out of place.
    fn final_round(&mut self, mut s: Box<Session>, data: &[u8]) -> MethodStep {
        let fragment = match self.fragment(&mut s, data) {
            Ok(Some(fragment)) => fragment,
            Ok(None) => return self.next_fragment(s, State::Final),
            Err(failure) => return fail(failure),
        };
        if fragment.is_ack() && !s.inbound.in_progress() {
            return self.success(&s);
        }
        match s.inbound.push(&fragment) {
            Err(failure) => fail(failure),
            Ok(None) => {
                self.state = State::Final(s);
                MethodStep::Request(framing::ack())
            }
            Ok(Some(message)) => match feed(&mut s.conn, &message) {
                Err(e) => self.tls_error(s, &e),
                Ok(()) => {
                    let detail = "TLS data from the peer after the handshake";
                    fail(TlsFailure::new(TlsFailureKind::UnexpectedMessage, detail))
                }
            },
        }
    }

    /// The Response's fragment, or `None` when it acknowledges a fragment
    /// of ours and the next one is due.
    fn fragment<'a>(
        &self,
        s: &mut Session,
        data: &'a [u8],
    ) -> Result<Option<Fragment<'a>>, TlsFailure> {
        let fragment = Fragment::parse(data)?;
        if fragment.start() {
            let detail = "S (start) set in a Response";
            return Err(TlsFailure::new(TlsFailureKind::BadFraming, detail));
        }
        match &s.outbound {
            Some(out) if !out.finished() => {
                if fragment.is_ack() {
                    return Ok(None);
                }
                let detail = "TLS data where the acknowledgement of our fragment belongs";
                Err(TlsFailure::new(TlsFailureKind::UnexpectedMessage, detail))
            }
            _ => {
                s.outbound = None;
                Ok(Some(fragment))
            }
        }
    }

    /// The next fragment of our TLS data; the state stays.
    fn next_fragment(
        &mut self,
        mut s: Box<Session>,
        state: fn(Box<Session>) -> State,
    ) -> MethodStep {
        let Some(out) = s.outbound.as_mut() else {
            return fail(TlsFailure::new(
                TlsFailureKind::UnexpectedMessage,
                "an acknowledgement with nothing of ours in flight",
            ));
        };
        let fragment = out.next_fragment();
        self.state = state(s);
        MethodStep::Request(fragment)
    }

    /// The peer's whole TLS message, into rustls; what rustls answers.
    fn process(&mut self, mut s: Box<Session>, message: &[u8]) -> MethodStep {
        if let Err(e) = feed(&mut s.conn, message) {
            return self.tls_error(s, &e);
        }
        let out = drain(&mut s.conn);
        if !s.conn.is_handshaking() {
            return self.handshake_done(s, out);
        }
        if out.is_empty() {
            // The peer's flight goes on in its next message.
            self.state = State::Handshake(s);
            return MethodStep::Request(framing::ack());
        }
        self.send(s, out, State::Handshake)
    }

    /// The client's Finished is in: our last flight, or EAP-Success.
    fn handshake_done(&mut self, mut s: Box<Session>, mut out: Vec<u8>) -> MethodStep {
        let tls13 = s.conn.protocol_version() == Some(ProtocolVersion::TLSv1_3);
        if tls13 && self.config.tls13 == Tls13Keying::Rfc9190 {
            // RFC 9190 §2.5: the commitment message, one octet 0x00 of
            // application data: no further post-handshake messages.
            if let Err(e) = s.conn.writer().write_all(&[0]) {
                return fail(TlsFailure::new(TlsFailureKind::Handshake, e.to_string()));
            }
            out.extend(drain(&mut s.conn));
        }
        if out.is_empty() {
            // Before RFC 9190 TLS 1.3 ends with the client's Finished.
            return self.success(&s);
        }
        self.send(s, out, State::Final)
    }

    /// `out` in fragments, the first now.
    fn send(
        &mut self,
        mut s: Box<Session>,
        out: Vec<u8>,
        state: fn(Box<Session>) -> State,
    ) -> MethodStep {
        let mut outgoing = Outgoing::new(out, self.config.fragment_size);
        let first = outgoing.next_fragment();
        s.outbound = Some(outgoing);
        self.state = state(s);
        MethodStep::Request(first)
    }

    /// rustls refused: its alert to the peer first when it has one.
    fn tls_error(&mut self, mut s: Box<Session>, error: &rustls::Error) -> MethodStep {
        let failure = EapFailure::Tls(TlsFailure::from_rustls(error, &s.identity));
        let alert = drain(&mut s.conn);
        if alert.is_empty() {
            return MethodStep::Failure(failure);
        }
        self.state = State::Alerted(failure);
        // An alert record is a few dozen octets: one message.
        MethodStep::Request(Outgoing::new(alert, usize::MAX).next_fragment())
    }

    /// The peer authenticated: the keys.
    fn success(&mut self, s: &Session) -> MethodStep {
        // The verifier makes the certificate mandatory; checked again
        // because the MSK must never come from an unauthenticated peer.
        if s.conn.peer_certificates().is_none_or(<[_]>::is_empty) {
            return fail(TlsFailure::new(
                TlsFailureKind::NoCertificate,
                "the handshake ended without a client certificate",
            ));
        }
        match keys::export(&s.conn, self.config.tls13) {
            Ok(keys) => MethodStep::Success {
                msk: keys.msk,
                emsk: Some(keys.emsk),
                identity: s.identity.to_string(),
            },
            Err(e) => fail(TlsFailure::new(TlsFailureKind::Handshake, e.to_string())),
        }
    }
}

fn fail(failure: TlsFailure) -> MethodStep {
    MethodStep::Failure(EapFailure::Tls(failure))
}

impl AuthMethod for TlsAuthenticator {
    fn eap_type(&self) -> EapType {
        EapType::TLS
    }

    /// EAP-TLS Start (RFC 5216 §2.1.1: S set, no data), with the TLS
    /// connection ready for the ClientHello.
    fn start(&mut self, identity: &[u8], _identifier: u8) -> MethodStep {
        let identity = match end_user_identity(identity, &self.ike_identity) {
            Ok(identity) => identity,
            Err(text) => {
                let detail = format!("{text:?} is no identity a certificate can name");
                return fail(TlsFailure::new(TlsFailureKind::IdentityMismatch, detail));
            }
        };
        let conn = match self.config.connection(identity.clone(), self.now) {
            Ok(conn) => conn,
            Err(e) => return fail(TlsFailure::new(TlsFailureKind::Handshake, e.to_string())),
        };
        self.state = State::Handshake(Box::new(Session {
            conn,
            identity,
            inbound: Reassembly::new(self.config.max_message_len),
            outbound: None,
        }));
        MethodStep::Request(framing::start())
    }

    fn handle(&mut self, data: &[u8], _identifier: u8) -> MethodStep {
        self.rounds += 1;
        if self.rounds > self.config.max_rounds {
            self.state = State::Done;
            let detail = format!("{} Responses", self.rounds);
            return fail(TlsFailure::new(TlsFailureKind::TooManyRounds, detail));
        }
        match core::mem::replace(&mut self.state, State::Done) {
            State::Handshake(s) => self.handshake_round(s, data),
            State::Final(s) => self.final_round(s, data),
            State::Alerted(reason) => MethodStep::Failure(reason),
            State::Idle | State::Done => MethodStep::Failure(EapFailure::Malformed),
        }
    }

    fn failure(&self) -> Option<&EapFailure> {
        match &self.state {
            State::Alerted(reason) => Some(reason),
            _ => None,
        }
    }
}
