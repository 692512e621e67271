//! EAP-MSCHAPv2 (draft-kamath-pppext-eap-mschapv2-02; RFC 2759 for the
//! crypto) as a method of the authenticator ([`crate::server`]), and a
//! peer.
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
//! An unknown identity is answered like a wrong password, so neither can
//! be told from the other.

pub mod crypto;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use crate::packet::{EapCode, EapRepr, EapType};
use crate::server::{AuthMethod, EapFailure, EapServer, MethodStep};

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

/// Where the method is.
enum Phase {
    /// Nothing sent yet.
    Idle,
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

/// EAP-MSCHAPv2 as an [`AuthMethod`] of the authenticator: Challenge,
/// Response checked against the credential store, Success or Failure
/// Request, then the outcome.
pub struct Mschapv2Method {
    server_name: String,
    challenge: [u8; 16],
    credentials: Arc<dyn CredentialStore + Send + Sync>,
    phase: Phase,
}

impl fmt::Debug for Mschapv2Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mschapv2Method")
            .field("server_name", &self.server_name)
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

impl Mschapv2Method {
    /// The method naming itself `server_name` in its Challenge, with the
    /// 16-octet authenticator `challenge` (random), checking passwords
    /// against `credentials`.
    pub fn new(
        server_name: &str,
        challenge: [u8; 16],
        credentials: Arc<dyn CredentialStore + Send + Sync>,
    ) -> Mschapv2Method {
        Mschapv2Method {
            server_name: server_name.to_owned(),
            challenge,
            credentials,
            phase: Phase::Idle,
        }
    }

    /// The peer's Response: its NT-Response against the stored hash.
    fn check_response(&mut self, identity: String, data: &[u8]) -> MethodStep {
        let response = data
            .get(MS_HEADER_LEN + 1..MS_HEADER_LEN + 1 + usize::from(RESPONSE_LEN))
            .filter(|_| data[0] == OP_RESPONSE && data[MS_HEADER_LEN] == RESPONSE_LEN);
        let (Some(response), Some(&ms_id)) = (response, data.get(1)) else {
            return MethodStep::Failure(EapFailure::Malformed);
        };
        let name = String::from_utf8_lossy(&data[MS_HEADER_LEN + 1 + usize::from(RESPONSE_LEN)..]);
        let mut peer = [0u8; 16];
        peer.copy_from_slice(&response[..16]);
        let mut received = [0u8; 24];
        received.copy_from_slice(&response[24..48]);
        let user = crypto::user_name(&name);
        let hash = self.credentials.nt_hash(&identity);
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
                MethodStep::Request(ms_data(OP_SUCCESS, ms_id, message.as_bytes()))
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
                MethodStep::Request(ms_data(OP_FAILURE, ms_id, message.as_bytes()))
            }
        }
    }
}

impl AuthMethod for Mschapv2Method {
    fn eap_type(&self) -> EapType {
        EapType::MSCHAPV2
    }

    /// MSCHAPv2 Challenge: Value-Size, our challenge, our name; the
    /// MS-CHAPv2-ID is the Request's Identifier.
    fn start(&mut self, identity: &[u8], identifier: u8) -> MethodStep {
        let mut data = vec![CHALLENGE_LEN];
        data.extend_from_slice(&self.challenge);
        data.extend_from_slice(self.server_name.as_bytes());
        let identity = String::from_utf8_lossy(identity).into_owned();
        self.phase = Phase::Challenge { identity };
        MethodStep::Request(ms_data(OP_CHALLENGE, identifier, &data))
    }

    fn handle(&mut self, data: &[u8], _identifier: u8) -> MethodStep {
        match core::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Challenge { identity } => self.check_response(identity, data),
            Phase::SuccessSent { identity, msk } if data.first() == Some(&OP_SUCCESS) => {
                MethodStep::Success {
                    msk,
                    emsk: None,
                    identity,
                }
            }
            Phase::SuccessSent { .. } => MethodStep::Failure(EapFailure::PeerRefused),
            Phase::FailureSent { reason } => MethodStep::Failure(reason),
            Phase::Idle | Phase::Done => MethodStep::Failure(EapFailure::Malformed),
        }
    }

    fn failure(&self) -> Option<&EapFailure> {
        match &self.phase {
            Phase::FailureSent { reason } => Some(reason),
            _ => None,
        }
    }
}

impl EapServer {
    /// An authenticator running EAP-MSCHAPv2 (the one before methods were
    /// pluggable): `random` gives the first Identifier (octet 0) and the
    /// 16-octet authenticator challenge (octets 16..32).
    pub fn mschapv2(
        server_name: &str,
        random: [u8; 32],
        credentials: Arc<dyn CredentialStore + Send + Sync>,
    ) -> EapServer {
        let mut challenge = [0u8; 16];
        challenge.copy_from_slice(&random[16..]);
        EapServer::new(
            random[0],
            Box::new(Mschapv2Method::new(server_name, challenge, credentials)),
        )
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
