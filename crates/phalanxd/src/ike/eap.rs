//! The EAP backend of the IKE thread: phalanx-ike relays each EAP message
//! of an IKE SA ([`SaEvent::EapRequest`](phalanx_ike::SaEvent)); this runs
//! EAP-Identity and EAP-MSCHAPv2 for it against the `[[eap_secret]]`
//! passwords (phalanx-eap) and answers with
//! [`Endpoint::handle_eap`](phalanx_ike::Endpoint::handle_eap). A RADIUS
//! backend will answer the same way, later, from its socket.

use std::collections::HashMap;
use std::sync::Arc;

use phalanx_eap::{EapServer, EapStep, LocalSecrets};
use phalanx_ike::EapAnswer;
use rand_core::{OsRng, RngCore};

/// The name the authenticator gives in its MSCHAPv2 Challenge.
const SERVER_NAME: &str = "phalanx";

/// EAP sessions by IKE SA (our SPI).
#[derive(Debug, Default)]
pub struct EapBackend {
    secrets: Arc<LocalSecrets>,
    sessions: HashMap<u64, EapServer>,
}

impl EapBackend {
    /// A backend checking against `secrets`.
    pub fn new(secrets: Arc<LocalSecrets>) -> EapBackend {
        EapBackend {
            secrets,
            sessions: HashMap::new(),
        }
    }

    /// A reload's passwords; exchanges in progress finish with them.
    pub fn set_secrets(&mut self, secrets: Arc<LocalSecrets>) {
        self.secrets = secrets;
    }

    /// The answer to IKE SA `ike_sa`'s EAP `message` (empty: start), or
    /// `None` when the message is discarded (RFC 3748 §4.1).
    pub fn answer(&mut self, ike_sa: u64, message: &[u8]) -> Option<EapAnswer> {
        if message.is_empty() {
            let mut random = [0u8; 32];
            OsRng.fill_bytes(&mut random);
            let mut server = EapServer::new(SERVER_NAME, random);
            let first = server.start();
            self.sessions.insert(ike_sa, server);
            return Some(EapAnswer::Continue(first));
        }
        let server = self.sessions.get_mut(&ike_sa)?;
        let answer = match server.handle(message, &*self.secrets) {
            EapStep::Send(next) => {
                if let Some(reason) = server.failure() {
                    tracing::warn!(ike_sa = format_args!("{ike_sa:016x}"), %reason, "EAP authentication failed");
                }
                return Some(EapAnswer::Continue(next));
            }
            EapStep::Ignore => return None,
            EapStep::Success {
                packet,
                msk,
                identity,
            } => EapAnswer::Success {
                message: packet,
                msk,
                identity,
            },
            EapStep::Failure { packet, reason } => EapAnswer::Failure {
                message: packet,
                reason: reason.to_string(),
            },
        };
        self.sessions.remove(&ike_sa);
        Some(answer)
    }

    /// Forgets the sessions of IKE SAs that are gone.
    pub fn retain(&mut self, live: impl Fn(u64) -> bool) {
        self.sessions.retain(|spi, _| live(*spi));
    }
}
