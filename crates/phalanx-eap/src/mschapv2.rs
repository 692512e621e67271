//! EAP-MSCHAPv2 (draft-kamath-pppext-eap-mschapv2-02; RFC 2759 for the
//! crypto) and the authenticator that runs it after EAP-Identity.
//!
//! ```text
//! Type-Data of EAP Type 26:
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    OpCode     |  MS-CHAPv2-ID |           MS-Length           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Data ...  (MS-Length = EAP Length - 5)
//!
//! Challenge (1):  Value-Size (16) | Challenge (16) | Name
//! Response (2):   Value-Size (49) | Peer-Challenge (16) | Reserved (8)
//!                 | NT-Response (24) | Flags (1) | Name
//! Success (3):    request: "S=<40 hex> M=<message>"; response: OpCode only
//! Failure (4):    request: "E=691 R=0 C=<32 hex> V=3 M=<message>";
//!                 response: OpCode only
//! ```
//!
//! The authenticator's flow (what strongSwan's client expects):
//!
//! ```text
//! EAP-Request/Identity                -->
//!                                     <--  EAP-Response/Identity
//! EAP-Request/MSCHAPv2 Challenge      -->
//!                                     <--  EAP-Response/MSCHAPv2 Response
//! EAP-Request/MSCHAPv2 Success (S=…)  -->      (Failure (E=691) if wrong)
//!                                     <--  EAP-Response/MSCHAPv2 Success
//! EAP-Success                         -->      (EAP-Failure)
//! ```
//!
//! A response whose Identifier is not the last Request's is silently
//! discarded (RFC 3748 §4.1): [`EapStep::Ignore`]. An unknown identity is
//! answered like a wrong password, so neither can be told from the other.

pub mod crypto;

use std::collections::HashMap;
use std::fmt;

use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use crate::packet::{EapCode, EapRepr, EapType};

/// MSCHAPv2 OpCodes.
const OP_CHALLENGE: u8 = 1;
const OP_RESPONSE: u8 = 2;
const OP_SUCCESS: u8 = 3;
const OP_FAILURE: u8 = 4;
/// Value-Size of a Challenge and of a Response.
const CHALLENGE_LEN: u8 = 16;
const RESPONSE_LEN: u8 = 49;
/// OpCode, MS-CHAPv2-ID, MS-Length.
const MS_HEADER_LEN: usize = 4;

/// Where NT password hashes come from.
pub trait CredentialStore {
    /// The NT password hash (RFC 2759 §8.3) of `identity`, if it is a user.
    fn nt_hash(&self, identity: &str) -> Option<Zeroizing<[u8; 16]>>;
}

/// Users and passwords held locally (a configuration's EAP secrets).
#[derive(Default)]
pub struct LocalSecrets {
    users: HashMap<String, Zeroizing<[u8; 16]>>,
}

impl LocalSecrets {
    /// Adds `identity` with `password` (stored as its NT hash only).
    pub fn add(&mut self, identity: &str, password: &str) {
        self.users
            .insert(identity.to_owned(), crypto::nt_password_hash(password));
    }
}

impl fmt::Debug for LocalSecrets {
    /// Never prints a hash.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LocalSecrets({} users)", self.users.len())
    }
}

impl CredentialStore for LocalSecrets {
    fn nt_hash(&self, identity: &str) -> Option<Zeroizing<[u8; 16]>> {
        self.users.get(identity).cloned()
    }
}

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
    /// The peer refused MSCHAPv2 (Nak), naming the types it wants.
    Nak(Vec<u8>),
    /// The peer refused our Success (a bad authenticator response).
    PeerRefused,
}

impl fmt::Display for EapFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EapFailure::UnknownIdentity(id) => write!(f, "unknown identity {id:?}"),
            EapFailure::WrongPassword(id) => write!(f, "wrong password for {id:?}"),
            EapFailure::Malformed => f.write_str("malformed EAP message"),
            EapFailure::Nak(types) => write!(f, "peer refused EAP-MSCHAPv2, wants types {types:?}"),
            EapFailure::PeerRefused => f.write_str("peer refused the authenticator response"),
        }
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
        /// The identity from EAP-Response/Identity.
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
enum Phase {
    Identity,
    Challenge {
        identity: String,
    },
    SuccessSent {
        identity: String,
        msk: Zeroizing<Vec<u8>>,
    },
    FailureSent {
        reason: EapFailure,
    },
    Done,
}

/// The authenticator: EAP-Identity, then EAP-MSCHAPv2.
pub struct EapServer {
    server_name: String,
    /// The Identifier of the last Request.
    identifier: u8,
    challenge: [u8; 16],
    phase: Phase,
}

impl fmt::Debug for EapServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EapServer")
            .field("identifier", &self.identifier)
            .finish_non_exhaustive()
    }
}

/// MSCHAPv2 Type-Data: OpCode, MS-CHAPv2-ID, MS-Length, `data`.
fn ms_data(opcode: u8, id: u8, data: &[u8]) -> Vec<u8> {
    // The EAP Length is 5 + this; MS-Length is the EAP Length - 5.
    let len = u16::try_from(MS_HEADER_LEN + data.len()).unwrap_or(u16::MAX);
    let mut out = vec![opcode, id];
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(data);
    out
}

impl EapServer {
    /// An authenticator naming itself `server_name` in its Challenge;
    /// `random` gives the first Identifier (octet 0) and the 16-octet
    /// authenticator challenge (octets 16..32).
    pub fn new(server_name: &str, random: [u8; 32]) -> EapServer {
        let mut challenge = [0u8; 16];
        challenge.copy_from_slice(&random[16..]);
        EapServer {
            server_name: server_name.to_owned(),
            identifier: random[0],
            challenge,
            phase: Phase::Identity,
        }
    }

    /// Why the exchange is failing, once the MSCHAPv2 Failure Request is
    /// out (a peer may end the exchange there instead of answering it).
    pub fn failure(&self) -> Option<&EapFailure> {
        match &self.phase {
            Phase::FailureSent { reason } => Some(reason),
            _ => None,
        }
    }

    /// The first Request: EAP-Request/Identity (RFC 3748 §5.1).
    pub fn start(&mut self) -> Vec<u8> {
        EapRepr::request(self.identifier, EapType::IDENTITY, Vec::new()).emit()
    }

    /// The next Request for `response`, or the outcome.
    pub fn handle(&mut self, response: &[u8], credentials: &dyn CredentialStore) -> EapStep {
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
        match core::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Identity if eap_type == EapType::IDENTITY => {
                let identity = String::from_utf8_lossy(&data).into_owned();
                self.challenge_request(identity)
            }
            Phase::Challenge { identity } if eap_type == EapType::MSCHAPV2 => {
                self.check_response(identity, &data, credentials)
            }
            Phase::SuccessSent { identity, msk }
                if eap_type == EapType::MSCHAPV2 && data.first() == Some(&OP_SUCCESS) =>
            {
                EapStep::Success {
                    packet: EapRepr::outcome(EapCode::SUCCESS, self.identifier).emit(),
                    msk,
                    identity,
                }
            }
            Phase::SuccessSent { .. } => self.fail(EapFailure::PeerRefused),
            Phase::FailureSent { reason } => EapStep::Failure {
                packet: EapRepr::outcome(EapCode::FAILURE, self.identifier).emit(),
                reason,
            },
            _ => self.fail(EapFailure::Malformed),
        }
    }

    fn next_request(&mut self, data: Vec<u8>) -> EapStep {
        self.identifier = self.identifier.wrapping_add(1);
        EapStep::Send(EapRepr::request(self.identifier, EapType::MSCHAPV2, data).emit())
    }

    /// MSCHAPv2 Challenge: Value-Size, our challenge, our name.
    fn challenge_request(&mut self, identity: String) -> EapStep {
        let mut data = vec![CHALLENGE_LEN];
        data.extend_from_slice(&self.challenge);
        data.extend_from_slice(self.server_name.as_bytes());
        self.phase = Phase::Challenge { identity };
        let id = self.identifier.wrapping_add(1);
        self.next_request(ms_data(OP_CHALLENGE, id, &data))
    }

    /// The peer's Response: its NT-Response against the stored hash.
    fn check_response(
        &mut self,
        identity: String,
        data: &[u8],
        credentials: &dyn CredentialStore,
    ) -> EapStep {
        let response = data
            .get(MS_HEADER_LEN + 1..MS_HEADER_LEN + 1 + usize::from(RESPONSE_LEN))
            .filter(|_| data[0] == OP_RESPONSE && data[MS_HEADER_LEN] == RESPONSE_LEN);
        let (Some(response), Some(&ms_id)) = (response, data.get(1)) else {
            return self.fail(EapFailure::Malformed);
        };
        let name = String::from_utf8_lossy(&data[MS_HEADER_LEN + 1 + usize::from(RESPONSE_LEN)..]);
        let mut peer = [0u8; 16];
        peer.copy_from_slice(&response[..16]);
        let mut received = [0u8; 24];
        received.copy_from_slice(&response[24..48]);
        let user = crypto::user_name(&name);
        let hash = credentials.nt_hash(&identity);
        let expected = hash
            .as_ref()
            .map(|h| crypto::nt_response(&self.challenge, &peer, user, h));
        let matched = expected.is_some_and(|e| bool::from(e.ct_eq(&received)));
        match (hash, matched) {
            (Some(hash), true) => {
                let s =
                    crypto::authenticator_response(&hash, &received, &peer, &self.challenge, user);
                let msk = crypto::msk(&hash, &received);
                let message = format!("{s} M=Welcome to Phalanx");
                self.phase = Phase::SuccessSent { identity, msk };
                self.next_request(ms_data(OP_SUCCESS, ms_id, message.as_bytes()))
            }
            (hash, _) => {
                let reason = if hash.is_some() {
                    EapFailure::WrongPassword(identity)
                } else {
                    EapFailure::UnknownIdentity(identity)
                };
                // R=0: no retry (a Windows client would prompt again).
                let message = format!(
                    "E=691 R=0 C={} V=3 M=Authentication failed",
                    crypto::hex_upper(&self.challenge)
                );
                self.phase = Phase::FailureSent { reason };
                self.next_request(ms_data(OP_FAILURE, ms_id, message.as_bytes()))
            }
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

/// The End-User's side of EAP-Identity and EAP-MSCHAPv2.
pub struct EapPeer {
    identity: String,
    password: Zeroizing<String>,
    peer_challenge: [u8; 16],
    /// What the server must prove, and the MSK, once a Response was sent.
    pending: Option<(String, Zeroizing<Vec<u8>>)>,
    msk: Option<Zeroizing<Vec<u8>>>,
    /// The authenticator proved the password (its S= matched).
    pub server_proved: bool,
}

impl EapPeer {
    /// A peer with these credentials; `peer_challenge` random.
    pub fn new(identity: &str, password: &str, peer_challenge: [u8; 16]) -> EapPeer {
        EapPeer {
            identity: identity.to_owned(),
            password: Zeroizing::new(password.to_owned()),
            peer_challenge,
            pending: None,
            msk: None,
            server_proved: false,
        }
    }

    /// The MSK, after EAP-Success.
    pub fn msk(&self) -> Option<&[u8]> {
        self.msk.as_deref().map(Vec::as_slice)
    }

    /// The response to a Request (`None` for Success, Failure, or what it
    /// cannot answer).
    pub fn handle(&mut self, request: &[u8]) -> Option<Vec<u8>> {
        let repr = EapRepr::parse(request).ok()?;
        if repr.code == EapCode::SUCCESS {
            self.msk = self
                .pending
                .take()
                .filter(|_| self.server_proved)
                .map(|(_, m)| m);
            return None;
        }
        let (eap_type, data) = repr.body.filter(|_| repr.code == EapCode::REQUEST)?;
        let reply = |data| Some(EapRepr::response(repr.identifier, eap_type, data).emit());
        if eap_type == EapType::IDENTITY {
            return reply(self.identity.as_bytes().to_vec());
        }
        if eap_type != EapType::MSCHAPV2 {
            return Some(EapRepr::response(repr.identifier, EapType::NAK, vec![26]).emit());
        }
        match *data.first()? {
            OP_CHALLENGE => reply(self.respond(&data)?),
            OP_SUCCESS => {
                let message = String::from_utf8_lossy(data.get(MS_HEADER_LEN..)?).into_owned();
                self.server_proved = self
                    .pending
                    .as_ref()
                    .is_some_and(|(s, _)| message.starts_with(s.as_str()));
                reply(vec![OP_SUCCESS])
            }
            _ => reply(vec![OP_FAILURE]),
        }
    }

    /// Response to a Challenge.
    fn respond(&mut self, data: &[u8]) -> Option<Vec<u8>> {
        let ms_id = *data.get(1)?;
        let challenge: [u8; 16] = data
            .get(MS_HEADER_LEN + 1..MS_HEADER_LEN + 17)?
            .try_into()
            .ok()?;
        let hash = crypto::nt_password_hash(&self.password);
        let user = crypto::user_name(&self.identity);
        let nt = crypto::nt_response(&challenge, &self.peer_challenge, user, &hash);
        let s = crypto::authenticator_response(&hash, &nt, &self.peer_challenge, &challenge, user);
        self.pending = Some((s, crypto::msk(&hash, &nt)));
        let mut value = vec![RESPONSE_LEN];
        value.extend_from_slice(&self.peer_challenge);
        value.extend_from_slice(&[0; 8]);
        value.extend_from_slice(&nt);
        value.push(0);
        value.extend_from_slice(self.identity.as_bytes());
        Some(ms_data(OP_RESPONSE, ms_id, &value))
    }
}

#[cfg(test)]
mod tests;
