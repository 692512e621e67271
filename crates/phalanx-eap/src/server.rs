//! The authenticator (RFC 3748 §2): EAP-Identity, then the method the
//! connection chose, behind one [`AuthMethod`] trait.
//!
//! ```text
//! EAP-Request/Identity                -->
//!                                     <--  EAP-Response/Identity
//! EAP-Request/<method> (start)        -->
//!                                     <--  EAP-Response/<method>
//!        ... as many rounds as the method needs ...
//! EAP-Success                         -->      (EAP-Failure)
//! ```
//!
//! [`EapServer`] owns what every method shares: the Identifier (a new one
//! for each Request; a Response with another one is silently discarded,
//! RFC 3748 §4.1: [`EapStep::Ignore`]), EAP-Identity, a Nak (the peer
//! refuses the method, §5.3.1) and the Success and Failure packets. The
//! method sees only its Type-Data.

use std::fmt;

use zeroize::Zeroizing;

use crate::packet::{EapCode, EapRepr, EapType};
use crate::tls::TlsFailure;

/// Why an EAP exchange failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EapFailure {
    /// The identity is no user of the credential store.
    UnknownIdentity(String),
    /// The NT-Response did not match the password.
    WrongPassword(String),
    /// A message that does not parse, or of the wrong kind.
    Malformed,
    /// The peer refused the method we offered (Nak), naming the types it
    /// wants.
    Nak(Vec<u8>),
    /// The peer refused our Success (a bad authenticator response).
    PeerRefused,
    /// EAP-TLS failed (RFC 5216), with its reason.
    Tls(TlsFailure),
}

impl fmt::Display for EapFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EapFailure::UnknownIdentity(id) => write!(f, "unknown identity {id:?}"),
            EapFailure::WrongPassword(id) => write!(f, "wrong password for {id:?}"),
            EapFailure::Malformed => f.write_str("malformed EAP message"),
            EapFailure::Nak(types) => {
                write!(
                    f,
                    "peer refused the EAP method offered, wants types {types:?}"
                )
            }
            EapFailure::PeerRefused => f.write_str("peer refused the authenticator response"),
            EapFailure::Tls(failure) => write!(f, "EAP-TLS: {failure}"),
        }
    }
}

/// What a method does with a Response of its Type.
#[derive(Debug)]
pub enum MethodStep {
    /// Send a Request of the method with this Type-Data.
    Request(Vec<u8>),
    /// The peer authenticated.
    Success {
        /// The MSK (RFC 5247, 64 octets).
        msk: Zeroizing<Vec<u8>>,
        /// The EMSK, for methods that export one.
        emsk: Option<Zeroizing<Vec<u8>>>,
        /// The identity the method proved, in the notation of
        /// `phalanx_ike::auth::Identity` where it is one.
        identity: String,
    },
    /// The method failed: EAP-Failure now.
    Failure(EapFailure),
}

/// An EAP method run by the authenticator after EAP-Identity. Sans-IO like
/// the rest of the crate: Type-Data in, Type-Data out.
pub trait AuthMethod: Send {
    /// The method's Type.
    fn eap_type(&self) -> EapType;

    /// The first Request of the method for the peer that named itself
    /// `identity` (EAP-Response/Identity's Type-Data). `identifier` is the
    /// Request's Identifier (MSCHAPv2 repeats it inside).
    fn start(&mut self, identity: &[u8], identifier: u8) -> MethodStep;

    /// The peer's Response of this method (its Type-Data); `identifier` is
    /// the next Request's, should there be one.
    fn handle(&mut self, data: &[u8], identifier: u8) -> MethodStep;

    /// Why the exchange is failing while the method still tells the peer
    /// (an MSCHAPv2 Failure Request, a TLS alert): known before the last
    /// round, in which a peer may give up instead of answering.
    fn failure(&self) -> Option<&EapFailure> {
        None
    }
}

/// What the authenticator does with a response.
#[derive(Debug)]
pub enum EapStep {
    /// Send this Request.
    Send(Vec<u8>),
    /// Authenticated: send EAP-Success; the MSK keys IKEv2's AUTH.
    Success {
        /// The EAP-Success packet.
        packet: Vec<u8>,
        /// The MSK (64 octets).
        msk: Zeroizing<Vec<u8>>,
        /// The EMSK, where the method exports one (EAP-TLS).
        emsk: Option<Zeroizing<Vec<u8>>>,
        /// The identity the method proved (EAP-Response/Identity's).
        identity: String,
    },
    /// Failed: send EAP-Failure.
    Failure {
        /// The EAP-Failure packet.
        packet: Vec<u8>,
        /// Why.
        reason: EapFailure,
    },
    /// Not for the last Request (RFC 3748 §4.1): discarded.
    Ignore,
}

/// Where the authenticator is.
#[derive(Debug, PartialEq, Eq)]
enum Phase {
    Identity,
    Method,
    Done,
}

/// The authenticator: EAP-Identity, then its [`AuthMethod`].
pub struct EapServer {
    /// The Identifier of the last Request.
    identifier: u8,
    method: Box<dyn AuthMethod>,
    phase: Phase,
}

impl fmt::Debug for EapServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EapServer")
            .field("identifier", &self.identifier)
            .field("method", &self.method.eap_type())
            .field("phase", &self.phase)
            .finish()
    }
}

impl EapServer {
    /// An authenticator that runs `method` after EAP-Identity; its first
    /// Request has Identifier `identifier` (random, RFC 3748 §4.1).
    pub fn new(identifier: u8, method: Box<dyn AuthMethod>) -> EapServer {
        EapServer {
            identifier,
            method,
            phase: Phase::Identity,
        }
    }

    /// The method's Type.
    pub fn eap_type(&self) -> EapType {
        self.method.eap_type()
    }

    /// Why the exchange is failing, once the method's last Request (an
    /// MSCHAPv2 Failure, a TLS alert) is out: a peer may end the exchange
    /// there instead of answering it.
    pub fn failure(&self) -> Option<&EapFailure> {
        self.method.failure()
    }

    /// The first Request: EAP-Request/Identity (RFC 3748 §5.1).
    pub fn start(&mut self) -> Vec<u8> {
        EapRepr::request(self.identifier, EapType::IDENTITY, Vec::new()).emit()
    }

    /// The next Request for `response`, or the outcome.
    pub fn handle(&mut self, response: &[u8]) -> EapStep {
        if self.phase == Phase::Done {
            return EapStep::Ignore;
        }
        let Ok(repr) = EapRepr::parse(response) else {
            return self.fail(EapFailure::Malformed);
        };
        if repr.code != EapCode::RESPONSE || repr.identifier != self.identifier {
            return EapStep::Ignore;
        }
        let Some((eap_type, data)) = repr.body else {
            return self.fail(EapFailure::Malformed);
        };
        if eap_type == EapType::NAK {
            return self.fail(EapFailure::Nak(data));
        }
        let next = self.identifier.wrapping_add(1);
        let step = match self.phase {
            Phase::Identity if eap_type == EapType::IDENTITY => {
                self.phase = Phase::Method;
                self.method.start(&data, next)
            }
            Phase::Method if eap_type == self.method.eap_type() => self.method.handle(&data, next),
            _ => MethodStep::Failure(EapFailure::Malformed),
        };
        match step {
            MethodStep::Request(data) => {
                self.identifier = next;
                EapStep::Send(EapRepr::request(next, self.method.eap_type(), data).emit())
            }
            MethodStep::Success {
                msk,
                emsk,
                identity,
            } => {
                self.phase = Phase::Done;
                EapStep::Success {
                    packet: EapRepr::outcome(EapCode::SUCCESS, self.identifier).emit(),
                    msk,
                    emsk,
                    identity,
                }
            }
            MethodStep::Failure(reason) => self.fail(reason),
        }
    }

    /// EAP-Failure for the last response.
    fn fail(&mut self, reason: EapFailure) -> EapStep {
        self.phase = Phase::Done;
        EapStep::Failure {
            packet: EapRepr::outcome(EapCode::FAILURE, self.identifier).emit(),
            reason,
        }
    }
}
