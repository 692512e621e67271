//! What goes in and out of an [`Endpoint`](crate::Endpoint) besides time:
//! datagrams, transmits, SA events for the data plane, and the status
//! snapshots `phalanxctl` shows.

use core::net::{IpAddr, SocketAddr};
use std::time::Instant;

use phalanx_crypto::Suite;
use phalanx_sa::{LifetimeLimits, SaMode, Selector, UdpEncap};
use phalanx_wire::ike::TrafficSelector;
use zeroize::Zeroizing;

/// One received IKE datagram.
#[derive(Clone, Copy, Debug)]
pub struct Datagram<'a> {
    /// The address and port it arrived at.
    pub local: SocketAddr,
    /// The address and port it came from.
    pub remote: SocketAddr,
    /// The IKE message: the UDP payload, after the four-octet non-ESP
    /// marker when it arrived on port 4500 (RFC 7296 §2.23, RFC 3948 §2.2).
    pub bytes: &'a [u8],
}

/// One IKE datagram to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The address and port to send from.
    pub local: SocketAddr,
    /// The address and port to send to.
    pub remote: SocketAddr,
    /// The IKE message. When `local` or `remote` uses port 4500 the caller
    /// prepends the four-octet non-ESP marker (RFC 7296 §2.23,
    /// `phalanx_wire::ike::with_non_esp_marker`).
    pub bytes: Vec<u8>,
    /// A NAT-keepalive (RFC 3948 §2.3): `bytes` is the single octet 0xFF,
    /// sent from the NAT-T port as it is, without the non-ESP marker.
    pub nat_keepalive: bool,
}

impl Transmit {
    /// Whether the caller must prepend the non-ESP marker: either port is
    /// 4500 (RFC 7296 §2.23) and this is an IKE message, not a keepalive.
    pub fn needs_non_esp_marker(&self) -> bool {
        !self.nat_keepalive
            && (self.local.port() == crate::limits::NATT_PORT
                || self.remote.port() == crate::limits::NATT_PORT)
    }
}

/// Everything the data plane needs to install one direction of a Child SA.
#[derive(Clone)]
pub struct ChildSaInstall {
    /// The connection's name.
    pub connection: String,
    /// The child's name in the connection.
    pub child: String,
    /// The SPI: ours for inbound, the peer's for outbound.
    pub spi: u32,
    /// The negotiated transforms.
    pub suite: Suite,
    /// Encryption key, AEAD salt included (RFC 4106 §8.1, RFC 7634 §2).
    pub encr_key: Zeroizing<Vec<u8>>,
    /// Integrity key (empty for AEADs).
    pub integ_key: Zeroizing<Vec<u8>>,
    /// Tunnel (with the outer addresses) or transport.
    pub mode: SaMode,
    /// Extended sequence numbers (RFC 4303 §2.2.1).
    pub esn: bool,
    /// Our address (outer source outbound, outer destination inbound).
    pub local: IpAddr,
    /// The peer's address.
    pub remote: IpAddr,
    /// UDP encapsulation ports when a NAT was detected, encapsulation was
    /// forced, or the peer moved to port 4500 (RFC 3948, RFC 7296 §2.23).
    pub encap: Option<UdpEncap>,
    /// The traffic the SA carries, oriented for this direction (outbound:
    /// source = our side; inbound: source = the peer's side).
    pub selectors: Vec<Selector>,
    /// Anti-replay window in packets (inbound).
    pub replay_window: u32,
    /// The peer's window for this side's packets (outbound; 0: unknown),
    /// from the child's configuration.
    pub peer_replay_window: u32,
    /// Soft (rekey) and hard limits, jitter applied.
    pub lifetime: LifetimeLimits,
}

impl core::fmt::Debug for ChildSaInstall {
    /// Everything but the keys.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ChildSaInstall")
            .field("connection", &self.connection)
            .field("child", &self.child)
            .field("spi", &format_args!("{:#010x}", self.spi))
            .field("suite", &self.suite)
            .field("mode", &self.mode)
            .field("esn", &self.esn)
            .field("local", &self.local)
            .field("remote", &self.remote)
            .field("encap", &self.encap)
            .field("selectors", &self.selectors)
            .field("replay_window", &self.replay_window)
            .field("peer_replay_window", &self.peer_replay_window)
            .finish_non_exhaustive()
    }
}

/// What happened to an SA, for the data plane and the cluster (in order).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum SaEvent {
    /// An IKE SA completed IKE_AUTH.
    IkeSaUp {
        /// The connection's name.
        connection: String,
        /// The initiator's SPI.
        ike_spi_i: [u8; 8],
        /// The responder's SPI.
        ike_spi_r: [u8; 8],
        /// Our address and port.
        local: SocketAddr,
        /// The peer's address and port.
        remote: SocketAddr,
        /// The peer's authenticated identity.
        peer_id: String,
        /// Inner addresses leased to the peer, or given to us (§2.19).
        virtual_ips: Vec<IpAddr>,
    },
    /// An established IKE SA is gone (deleted, dead, or replaced on
    /// reconfiguration). Its Child SAs were removed just before.
    IkeSaDown {
        /// The connection's name.
        connection: String,
        /// The initiator's SPI.
        ike_spi_i: [u8; 8],
        /// The responder's SPI.
        ike_spi_r: [u8; 8],
        /// Why, for logs.
        reason: String,
        /// The peer's authenticated identity.
        peer_id: String,
        /// The inner addresses it held (an End-User's virtual IPs).
        virtual_ips: Vec<IpAddr>,
    },
    /// EAP (RFC 7296 §2.16): a message from the peer for the EAP backend
    /// (empty: the exchange starts, send the first EAP Request). Answer
    /// with [`Endpoint::handle_eap`](crate::Endpoint::handle_eap) and the
    /// same `ike_sa`; the peer's IKE_AUTH waits for it.
    EapRequest {
        /// The connection's name.
        connection: String,
        /// Our SPI of the IKE SA, to answer with.
        ike_sa: u64,
        /// The IDi the peer presented (an EAP method asks its own identity).
        peer_id: String,
        /// Our address and port (a RADIUS Called-Station-Id).
        local: SocketAddr,
        /// The peer's address and port (a RADIUS Calling-Station-Id).
        remote: SocketAddr,
        /// The EAP message (RFC 3748), or empty at the start.
        message: Vec<u8>,
    },
    /// An IKE SA could not be established (never reached `IkeSaUp`).
    IkeSaFailed {
        /// The connection's name.
        connection: String,
        /// Why, for logs.
        reason: String,
    },
    /// An IKE SA was rekeyed (RFC 7296 §1.3.2): its Child SAs now belong to
    /// the new SPIs; the old IKE SA is gone without `IkeSaDown`.
    IkeSaRekeyed {
        /// The connection's name.
        connection: String,
        /// The old SA's SPIs (initiator, responder).
        old_spis: ([u8; 8], [u8; 8]),
        /// The new SA's SPIs (initiator, responder).
        new_spis: ([u8; 8], [u8; 8]),
    },
    /// Install an inbound Child SA. Emitted before the message that lets
    /// the peer use it is sent (make-before-break).
    InstallInbound(ChildSaInstall),
    /// Install an outbound Child SA and send on it: emitted when the
    /// exchange that created it completes.
    InstallOutbound(ChildSaInstall),
    /// Remove an inbound Child SA.
    RemoveInbound {
        /// The connection's name.
        connection: String,
        /// The child's name.
        child: String,
        /// Our SPI.
        spi: u32,
    },
    /// Remove an outbound Child SA.
    RemoveOutbound {
        /// The connection's name.
        connection: String,
        /// The child's name.
        child: String,
        /// The peer's SPI.
        spi: u32,
    },
    /// A Child SA could not be created; the IKE SA stays.
    ChildSaFailed {
        /// The connection's name.
        connection: String,
        /// The child's name.
        child: String,
        /// Why, for logs.
        reason: String,
    },
    /// The peer's address or port changed (a NAT mapping changed, RFC 7296
    /// §2.23), or IKE moved to port 4500: the outbound SAs listed must send
    /// to `remote` with `encap`.
    PeerMoved {
        /// The connection's name.
        connection: String,
        /// The initiator's SPI.
        ike_spi_i: [u8; 8],
        /// The responder's SPI.
        ike_spi_r: [u8; 8],
        /// Our address and port now.
        local: SocketAddr,
        /// The peer's address and port now.
        remote: SocketAddr,
        /// UDP encapsulation for the Child SAs now (ports of `local` and
        /// `remote`), or `None` for plain ESP.
        encap: Option<UdpEncap>,
        /// The SPIs of the outbound Child SAs to update.
        outbound_spis: Vec<u32>,
    },
    /// The replicated state of an established IKE SA changed (emitted only
    /// with [`Endpoint::set_ha_replication`](crate::Endpoint::set_ha_replication)
    /// on): every other cluster node imports it, in this order, before the
    /// datagrams of the same call are sent ([`crate::ha`]).
    IkeStateChanged {
        /// The snapshot (it holds keys: wiped on drop, never printed).
        state: Box<crate::ha::IkeSaState>,
    },
    /// An IKE SA whose state was replicated is gone here (deleted, dead,
    /// rekeyed away or handed to a successor): the other nodes forget it.
    IkeStateRemoved {
        /// The connection's name.
        connection: String,
        /// The initiator's SPI.
        ike_spi_i: [u8; 8],
        /// The responder's SPI.
        ike_spi_r: [u8; 8],
    },
}

/// The state of an IKE SA, as `phalanxctl` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IkeSaState {
    /// IKE_SA_INIT sent, waiting for the answer (or, after it, the
    /// IKE_INTERMEDIATE additional key exchanges running).
    InitSent,
    /// IKE_AUTH sent, waiting for the answer.
    AuthSent,
    /// IKE_SA_INIT answered, waiting for IKE_AUTH (half-open).
    HalfOpen,
    /// Authenticated; Child SAs may run.
    Established,
    /// Being rekeyed (a CREATE_CHILD_SA for the IKE SA is in flight).
    Rekeying,
    /// Replaced by a rekey; waiting for its Delete.
    Rekeyed,
    /// Our Delete is in flight.
    Deleting,
}

/// A Child SA, as `phalanxctl` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildSaInfo {
    /// The child's name.
    pub name: String,
    /// Our (inbound) SPI.
    pub spi_in: u32,
    /// The peer's (outbound) SPI.
    pub spi_out: u32,
    /// Our side's traffic selectors.
    pub local_ts: Vec<TrafficSelector>,
    /// The peer's side's traffic selectors.
    pub remote_ts: Vec<TrafficSelector>,
    /// The negotiated ESP transforms.
    pub suite: Suite,
    /// Extended sequence numbers.
    pub esn: bool,
    /// Tunnel or transport.
    pub mode: SaMode,
    /// UDP encapsulation ports, if encapsulated.
    pub encap: Option<UdpEncap>,
    /// When it was installed.
    pub established_at: Instant,
    /// When it will be rekeyed, if scheduled.
    pub rekey_at: Option<Instant>,
    /// When it expires, if scheduled.
    pub expires_at: Option<Instant>,
    /// Replaced by a rekey and waiting for deletion.
    pub rekeyed: bool,
    /// The key exchange methods its rekey runs: the PFS group (KE), then
    /// each RFC 9370 additional key exchange (ADDKE1, ADDKE2, …, NONE
    /// left out). For a Child SA from CREATE_CHILD_SA these made it; one
    /// from IKE_AUTH (no key exchange there) shows its config's.
    pub key_exchanges: Vec<phalanx_wire::ike::iana::KeId>,
}

/// An IKE SA, as `phalanxctl` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IkeSaInfo {
    /// The connection's name.
    pub connection: String,
    /// Where the SA is in its life.
    pub state: IkeSaState,
    /// Whether we are the (original, or rekey) initiator.
    pub initiator: bool,
    /// The initiator's SPI.
    pub spi_i: [u8; 8],
    /// The responder's SPI (zero until known).
    pub spi_r: [u8; 8],
    /// Our address and port.
    pub local: SocketAddr,
    /// The peer's address and port.
    pub remote: SocketAddr,
    /// Our identity.
    pub local_id: String,
    /// The peer's authenticated identity (empty before IKE_AUTH).
    pub remote_id: String,
    /// The negotiated IKE transforms, e.g. "AES_GCM_16/256, PRF_HMAC_SHA2_256,
    /// CURVE25519" (empty before IKE_SA_INIT completes).
    pub algorithms: String,
    /// Whether a NAT was detected or encapsulation forced.
    pub nat: bool,
    /// When IKE_AUTH completed.
    pub established_at: Option<Instant>,
    /// When it will be rekeyed, if scheduled.
    pub rekey_at: Option<Instant>,
    /// How the peer authenticated: `"psk"`, `"pubkey"` or `"eap"`.
    pub peer_auth: &'static str,
    /// Inner addresses: leased to the peer (responder) or given to us
    /// (initiator) in a CFG_REPLY (RFC 7296 §2.19).
    pub virtual_ips: Vec<IpAddr>,
    /// Its Child SAs.
    pub children: Vec<ChildSaInfo>,
}

/// The EAP backend's answer to an [`SaEvent::EapRequest`].
pub enum EapAnswer {
    /// The next EAP Request to send the peer.
    Continue(Vec<u8>),
    /// The peer authenticated: EAP-Success to send, the MSK (RFC 5247) that
    /// keys the final AUTH payloads, the identity the method proved.
    Success {
        /// The EAP-Success message.
        message: Vec<u8>,
        /// The Master Session Key.
        msk: Zeroizing<Vec<u8>>,
        /// The EAP identity.
        identity: String,
        /// An inner address the backend assigned (a RADIUS server's
        /// Framed-IP-Address): a CFG_REQUEST gets it before any pool's.
        virtual_ip: Option<IpAddr>,
    },
    /// The peer failed: EAP-Failure to send, and why (for logs).
    Failure {
        /// The EAP-Failure message.
        message: Vec<u8>,
        /// Why.
        reason: String,
    },
}

impl core::fmt::Debug for EapAnswer {
    /// Never prints the MSK.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            EapAnswer::Continue(m) => write!(f, "Continue({} octets)", m.len()),
            EapAnswer::Success { identity, .. } => write!(f, "Success({identity})"),
            EapAnswer::Failure { reason, .. } => write!(f, "Failure({reason})"),
        }
    }
}
