//! The End-User's side of EAP-Identity and EAP-TLS, on rustls'
//! `ClientConnection`: for tests (and load generators), as
//! [`crate::EapPeer`] is for MSCHAPv2.

use std::fmt;
use std::io::Read;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, ProtocolVersion, SupportedCipherSuite};

use super::framing::{self, Fragment, Outgoing, Reassembly};
use super::keys::{self, KeyMaterial};
use super::{drain, feed, Tls13Keying, TlsFailure, TlsFailureKind};
use crate::limits;
use crate::packet::{EapCode, EapRepr, EapType};

/// The peer: answers every Request, keeps the keys after EAP-Success.
pub struct TlsPeer {
    identity: Vec<u8>,
    conn: ClientConnection,
    inbound: Reassembly,
    outbound: Option<Outgoing>,
    fragment_size: usize,
    tls13: Tls13Keying,
    /// RFC 9190 §2.5: the server's commitment message arrived.
    committed: bool,
    keys: Option<KeyMaterial>,
    failure: Option<TlsFailure>,
}

impl fmt::Debug for TlsPeer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsPeer")
            .field("identity", &String::from_utf8_lossy(&self.identity))
            .field("failure", &self.failure)
            .finish_non_exhaustive()
    }
}

impl TlsPeer {
    /// A peer that answers EAP-Identity with `identity` and runs TLS with
    /// `config` (its certificate and key, the CAs it trusts) against a
    /// server that must be `server_name`.
    pub fn new(
        identity: &[u8],
        config: Arc<ClientConfig>,
        server_name: ServerName<'static>,
    ) -> Result<TlsPeer, rustls::Error> {
        Ok(TlsPeer {
            identity: identity.to_vec(),
            conn: ClientConnection::new(config, server_name)?,
            inbound: Reassembly::new(limits::TLS_MAX_MESSAGE_LEN),
            outbound: None,
            fragment_size: limits::TLS_FRAGMENT_SIZE,
            tls13: Tls13Keying::default(),
            committed: false,
            keys: None,
            failure: None,
        })
    }

    /// TLS octets per EAP-TLS Response.
    pub fn with_fragment_size(mut self, octets: usize) -> Self {
        self.fragment_size = octets.max(1);
        self
    }

    /// How TLS 1.3 ends and which keys it exports.
    pub fn with_tls13_keying(mut self, keying: Tls13Keying) -> Self {
        self.tls13 = keying;
        self
    }

    /// The MSK, after an EAP-Success that ended a complete handshake.
    pub fn msk(&self) -> Option<&[u8]> {
        self.keys.as_ref().map(|k| k.msk.as_slice())
    }

    /// The EMSK, likewise.
    pub fn emsk(&self) -> Option<&[u8]> {
        self.keys.as_ref().map(|k| k.emsk.as_slice())
    }

    /// The TLS version negotiated.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.conn.protocol_version()
    }

    /// The cipher suite negotiated.
    pub fn cipher_suite(&self) -> Option<SupportedCipherSuite> {
        self.conn.negotiated_cipher_suite()
    }

    /// Why the peer gave up, if it did.
    pub fn failure(&self) -> Option<&TlsFailure> {
        self.failure.as_ref()
    }

    /// The Response to a Request (`None` for Success, Failure, or a
    /// Request it cannot answer).
    pub fn handle(&mut self, request: &[u8]) -> Option<Vec<u8>> {
        let repr = EapRepr::parse(request).ok()?;
        match repr.code {
            EapCode::SUCCESS => {
                self.keys = self.keys_now();
                return None;
            }
            EapCode::REQUEST => {}
            _ => return None,
        }
        let (eap_type, data) = repr.body?;
        let respond =
            |t: EapType, d: Vec<u8>| Some(EapRepr::response(repr.identifier, t, d).emit());
        if eap_type == EapType::IDENTITY {
            return respond(EapType::IDENTITY, self.identity.clone());
        }
        if eap_type != EapType::TLS {
            return respond(EapType::NAK, vec![EapType::TLS.0]);
        }
        let data = self.tls_round(&data)?;
        respond(EapType::TLS, data)
    }

    /// The keys, when the exchange reached the point where EAP-Success
    /// may come (RFC 9190 §2.5: after the commitment message in TLS 1.3).
    fn keys_now(&self) -> Option<KeyMaterial> {
        let tls13 = self.conn.protocol_version() == Some(ProtocolVersion::TLSv1_3);
        let ready = !self.conn.is_handshaking()
            && self.failure.is_none()
            && (!tls13 || self.committed || self.tls13 == Tls13Keying::PreRfc9190);
        if ready {
            keys::export(&self.conn, self.tls13).ok()
        } else {
            None
        }
    }

    /// The Type-Data answering an EAP-TLS Request's.
    fn tls_round(&mut self, data: &[u8]) -> Option<Vec<u8>> {
        let fragment = match Fragment::parse(data) {
            Ok(fragment) => fragment,
            Err(failure) => return self.give_up(failure),
        };
        if fragment.start() {
            let hello = drain(&mut self.conn);
            return Some(self.send(hello));
        }
        if let Some(out) = self.outbound.as_mut().filter(|o| !o.finished()) {
            if fragment.is_ack() {
                return Some(out.next_fragment());
            }
            let detail = "TLS data where the acknowledgement of our fragment belongs";
            return self.give_up(TlsFailure::new(TlsFailureKind::UnexpectedMessage, detail));
        }
        if fragment.is_ack() && !self.inbound.in_progress() {
            // The server's flight goes on in its next message.
            return Some(framing::ack());
        }
        let message = match self.inbound.push(&fragment) {
            Err(failure) => return self.give_up(failure),
            Ok(None) => return Some(framing::ack()),
            Ok(Some(message)) => message,
        };
        if let Err(e) = feed(&mut self.conn, &message) {
            self.failure = Some(TlsFailure::new(TlsFailureKind::Handshake, e.to_string()));
            // Our alert, or an acknowledgement, as strongSwan does.
            let alert = drain(&mut self.conn);
            return Some(self.send(alert));
        }
        self.read_commitment();
        let out = drain(&mut self.conn);
        Some(self.send(out))
    }

    /// Application data after the handshake: the commitment message
    /// (RFC 9190 §2.5) and nothing else.
    fn read_commitment(&mut self) {
        let mut data = Vec::new();
        // Until rustls has no more plaintext (WouldBlock) or the peer
        // closed.
        let mut buf = [0u8; 64];
        while let Ok(n @ 1..) = self.conn.reader().read(&mut buf) {
            data.extend_from_slice(&buf[..n]);
        }
        match data.as_slice() {
            [] => {}
            [0] if !self.committed && self.tls13 == Tls13Keying::Rfc9190 => self.committed = true,
            other => {
                let detail = format!("{} octets of application data", other.len());
                self.failure = Some(TlsFailure::new(TlsFailureKind::UnexpectedMessage, detail));
            }
        }
    }

    /// `out` in fragments (the first now), or an acknowledgement when
    /// there is nothing to send.
    fn send(&mut self, out: Vec<u8>) -> Vec<u8> {
        if out.is_empty() {
            return framing::ack();
        }
        let mut outgoing = Outgoing::new(out, self.fragment_size);
        let first = outgoing.next_fragment();
        self.outbound = Some(outgoing);
        first
    }

    fn give_up(&mut self, failure: TlsFailure) -> Option<Vec<u8>> {
        self.failure = Some(failure);
        None
    }
}
