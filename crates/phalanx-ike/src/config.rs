//! What a connection is: the data the daemon maps its TOML into and the
//! state machine reads. Data only — nothing here opens a file or a socket.
//!
//! - [`EndpointConfig`]: every [`Connection`] plus the endpoint-wide
//!   [`EndpointLimits`].
//! - [`Connection`]: addresses, identities, authentication, the IKE
//!   proposals and the Child SAs ([`ChildConfig`]) it carries.
//! - [`IkeProposal`] / [`ChildProposal`]: what we offer and accept, built by
//!   hand, from strongSwan-style strings ([`IkeProposal::parse`],
//!   [`ChildProposal::parse`], grammar in [`parse`](mod@parse)) or from the
//!   defaults ([`IkeProposal::default_set`], [`ChildProposal::default_set`]).

pub mod parse;

use core::fmt;
use core::net::IpAddr;
use core::time::Duration;
use std::sync::Arc;

use phalanx_crypto::sign::SignatureScheme;
use phalanx_crypto::SigningKey;
use phalanx_sa::{IpsecProtocol, LifetimeLimits, SaMode};
use phalanx_wire::ike::iana::{EncrId, IntegId, KeId, PrfId};
use phalanx_wire::ike::TrafficSelector;
use zeroize::Zeroizing;

use crate::auth::{Identity, TrustAnchors};

pub use parse::ProposalParseError;

/// Everything one IKE endpoint serves.
#[derive(Clone, Debug, Default)]
pub struct EndpointConfig {
    /// The connections, in the order they are matched against a peer.
    pub connections: Vec<Connection>,
    /// Endpoint-wide limits.
    pub limits: EndpointLimits,
    /// Virtual-IP pools connections hand addresses out of
    /// ([`Connection::pools`]).
    pub pools: Vec<PoolConfig>,
}

/// A range of inner addresses for End-Users, and what else their CFG_REPLY
/// carries (RFC 7296 §3.15.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Unique name, as connections name it.
    pub name: String,
    /// The first address handed out.
    pub first: IpAddr,
    /// The last address handed out (same family, not below `first`).
    pub last: IpAddr,
    /// DNS servers sent as INTERNAL_IP4_DNS / INTERNAL_IP6_DNS.
    pub dns: Vec<IpAddr>,
}

/// Endpoint-wide limits and timers an operator may tune.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointLimits {
    /// Most half-open IKE SAs (IKE_SA_INIT answered, IKE_AUTH not yet
    /// seen) kept at once; more IKE_SA_INIT requests are dropped. RFC 7296
    /// §2.6 asks responders to bound this state.
    pub half_open_max: usize,
    /// Half-open count at which the responder starts demanding cookies
    /// (RFC 7296 §2.6).
    pub cookie_threshold: usize,
    /// First retransmission timeout; each later one doubles (RFC 7296 §2.4:
    /// retransmissions "SHOULD" back off exponentially).
    pub retransmit_base: Duration,
    /// Retransmissions of a request before the peer is declared dead
    /// (RFC 7296 §2.4).
    pub retransmit_tries: u32,
    /// Requests we accept outstanding at once; advertised with
    /// SET_WINDOW_SIZE when above 1 (RFC 7296 §2.3).
    pub window_size: u32,
    /// Largest datagram, IP and UDP headers included, that an encrypted
    /// message is sent in before it is split into RFC 7383 fragments.
    pub fragment_mtu: usize,
}

impl Default for EndpointLimits {
    /// 1024 half-open SAs, cookies from 30 (strongSwan's
    /// `cookie_threshold`), retransmissions at 0.5 s doubling five times,
    /// a window of 1 (RFC 7296 §2.3: "The default value ... is 1"), and
    /// fragments of 1280 octets, the IPv6 minimum MTU (RFC 7383 §2.5.1).
    fn default() -> EndpointLimits {
        EndpointLimits {
            half_open_max: 1024,
            cookie_threshold: 30,
            retransmit_base: Duration::from_millis(500),
            retransmit_tries: 5,
            window_size: 1,
            fragment_mtu: 1280,
        }
    }
}

/// One configured peer relationship: how to reach and authenticate the
/// peer, what to offer for the IKE SA, and which Child SAs to build.
#[derive(Clone, Debug)]
pub struct Connection {
    /// Unique name (logs, control socket).
    pub name: String,
    /// Our address.
    pub local_addr: IpAddr,
    /// The peer's address; `None`: we only respond, to any peer.
    pub remote_addr: Option<IpAddr>,
    /// Our IKE port (500, RFC 7296 §2).
    pub local_port: u16,
    /// The peer's IKE port (500).
    pub remote_port: u16,
    /// The identity we send in IDi / IDr.
    pub local_id: Identity,
    /// The identity the peer must prove; `None` accepts any identity the
    /// peer can authenticate.
    pub remote_id: Option<Identity>,
    /// How we authenticate.
    pub local_auth: LocalAuth,
    /// How the peer must authenticate.
    pub remote_auth: RemoteAuth,
    /// IKE SA proposals, most preferred first.
    pub ike_proposals: Vec<IkeProposal>,
    /// The Child SAs of this connection.
    pub children: Vec<ChildConfig>,
    /// What to do when the configuration is loaded.
    pub start_action: StartAction,
    /// Liveness check interval (RFC 7296 §2.4); `None`: only when needed.
    pub dpd_delay: Option<Duration>,
    /// IKE SA rekey and expiry.
    pub ike_lifetime: SaLifetimeConfig,
    /// Offer and accept IKE fragmentation (RFC 7383).
    pub fragmentation: bool,
    /// Pretend a NAT is present to force UDP encapsulation of ESP
    /// (RFC 7296 §2.23, RFC 3948).
    pub force_encap: bool,
    /// Send CERTREQ payloads naming our trust anchors (RFC 7296 §3.7).
    pub send_certreq: bool,
    /// Send our certificate chain in CERT payloads (RFC 7296 §3.6).
    pub send_cert: bool,
    /// Agree to MOBIKE when a peer offers it (RFC 4555 §3.3).
    pub mobike: bool,
    /// Virtual-IP pools, by name, answering a CFG_REQUEST (RFC 7296
    /// §2.19): the first pool of each requested family with an address
    /// to give. Empty: CFG_REQUESTs get no addresses.
    pub pools: Vec<String>,
    /// Inner addresses to ask the peer for in IKE_AUTH (CFG_REQUEST,
    /// §2.19); an unspecified address asks for any of its family, as
    /// strongSwan's `vips = 0.0.0.0,::`. Empty: none.
    pub vips: Vec<IpAddr>,
    /// The RFC 7427 schemes we sign with, preferred first (the first that
    /// fits our key and whose hash the peer announced); empty: ECDSA and
    /// Ed25519 by their key, RSA with PKCS#1 v1.5. strongSwan's
    /// `rsa_pss = yes` is `[RsaPssSha256, RsaPssSha384, RsaPssSha512]`.
    pub local_signatures: Vec<SignatureScheme>,
    /// The schemes the peer's signature must use (strongSwan's
    /// `remote.auth = ike:rsa/pss-sha256`); empty: any we verify.
    pub remote_signatures: Vec<SignatureScheme>,
}

/// How we authenticate ourselves (RFC 7296 §2.15).
#[derive(Clone)]
pub enum LocalAuth {
    /// Shared Key Message Integrity Code with this secret.
    Psk(Zeroizing<Vec<u8>>),
    /// A digital signature with `key`; `chain` is sent in CERT payloads.
    Signature {
        /// The private key.
        key: Arc<SigningKey>,
        /// DER certificates, end entity first.
        chain: Vec<Vec<u8>>,
    },
}

impl fmt::Debug for LocalAuth {
    /// Never prints the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LocalAuth::Psk(_) => f.write_str("Psk(<redacted>)"),
            LocalAuth::Signature { key, chain } => f
                .debug_struct("Signature")
                .field("key", key)
                .field("chain_len", &chain.len())
                .finish(),
        }
    }
}

/// How the peer must authenticate (RFC 7296 §2.15).
#[derive(Clone)]
pub enum RemoteAuth {
    /// Shared Key Message Integrity Code with this secret.
    Psk(Zeroizing<Vec<u8>>),
    /// A digital signature by a certificate chaining to one of `anchors`.
    Signature {
        /// The CA certificates accepted.
        anchors: Arc<TrustAnchors>,
    },
    /// EAP (RFC 7296 §2.16): the peer sends no AUTH in its first IKE_AUTH,
    /// the endpoint relays EAP messages to the caller's EAP backend
    /// ([`SaEvent::EapRequest`](crate::SaEvent::EapRequest),
    /// [`Endpoint::handle_eap`](crate::Endpoint::handle_eap)), and the
    /// final AUTH payloads are keyed with the MSK. We authenticate with
    /// our `local_auth` first (a certificate, as clients require).
    Eap,
}

impl fmt::Debug for RemoteAuth {
    /// Never prints the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteAuth::Psk(_) => f.write_str("Psk(<redacted>)"),
            RemoteAuth::Eap => f.write_str("Eap"),
            RemoteAuth::Signature { anchors } => f
                .debug_struct("Signature")
                .field("anchors", &anchors.len())
                .finish(),
        }
    }
}

/// When a connection's SAs are brought up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StartAction {
    /// Never by ourselves: wait for the peer or an operator.
    #[default]
    None,
    /// Initiate as soon as the configuration is loaded.
    Start,
    /// Install trap policies; initiate when traffic matches one.
    Trap,
}

/// One Child SA of a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildConfig {
    /// Unique name within the connection.
    pub name: String,
    /// Our side's traffic selectors (TSi when we initiate).
    pub local_ts: Vec<TrafficSelector>,
    /// The peer's side's traffic selectors.
    pub remote_ts: Vec<TrafficSelector>,
    /// ESP or AH, as the SA payload's Protocol ID says (RFC 7296 §3.3.1).
    /// AH never goes through a NAT (RFC 3948 encapsulates ESP only), so an
    /// AH child is refused when one is detected or encapsulation forced.
    pub protocol: IpsecProtocol,
    /// Proposals of [`Self::protocol`], most preferred first; AH proposals
    /// have integrity transforms and no encryption.
    pub proposals: Vec<ChildProposal>,
    /// Tunnel or transport (RFC 7296 §1.3.1: transport is asked for with
    /// USE_TRANSPORT_MODE).
    pub mode: SaMode,
    /// Rekey and expiry.
    pub lifetime: SaLifetimeConfig,
    /// Anti-replay window in packets (RFC 4303 §3.4.3); 0 disables it.
    pub replay_window: u32,
    /// The window the peer applies to what this side sends, when known
    /// (0: unknown). IKEv2 does not carry it; a cluster sends a Child SA
    /// from several nodes only when it is large enough
    /// (`phalanx_cluster::spreads_outbound`).
    pub peer_replay_window: u32,
}

/// When an SA is rekeyed and when it dies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SaLifetimeConfig {
    /// Age at which a rekey starts.
    pub rekey_time: Duration,
    /// A random duration in `0..jitter` is subtracted from `rekey_time`, so
    /// that the two peers (and many SAs) do not rekey in lock step
    /// (RFC 7296 §2.8 on rekey collisions).
    pub jitter: Duration,
    /// Age at which the SA is deleted whatever happened to the rekey.
    pub hard_time: Duration,
    /// Bytes after which a Child SA is rekeyed.
    pub rekey_bytes: Option<u64>,
    /// Packets after which a Child SA is rekeyed.
    pub rekey_packets: Option<u64>,
}

impl SaLifetimeConfig {
    /// IKE SA: rekey after 4 h less up to 24 min, deleted at 4 h 24 min
    /// (strongSwan's defaults: rekey_time 4 h, over_time 10 %).
    pub const fn ike_default() -> SaLifetimeConfig {
        SaLifetimeConfig {
            rekey_time: Duration::from_secs(4 * 3600),
            jitter: Duration::from_secs(24 * 60),
            hard_time: Duration::from_secs(4 * 3600 + 24 * 60),
            rekey_bytes: None,
            rekey_packets: None,
        }
    }

    /// Child SA: rekey after 1 h less up to 6 min, deleted at 1 h 6 min
    /// (strongSwan's defaults).
    pub const fn child_default() -> SaLifetimeConfig {
        SaLifetimeConfig {
            rekey_time: Duration::from_secs(3600),
            jitter: Duration::from_secs(6 * 60),
            hard_time: Duration::from_secs(3600 + 6 * 60),
            rekey_bytes: None,
            rekey_packets: None,
        }
    }

    /// The data-plane limits of one SA, given the random draw `jitter`
    /// (clamped to [`Self::jitter`]) the caller made for it. Byte and
    /// packet counts are soft only: the hard stop is the sequence-number
    /// and AEAD usage limits the data plane enforces itself.
    pub fn limits(&self, jitter: Duration) -> LifetimeLimits {
        LifetimeLimits {
            soft_bytes: self.rekey_bytes,
            hard_bytes: None,
            soft_packets: self.rekey_packets,
            hard_packets: None,
            soft_time: Some(self.rekey_time.saturating_sub(jitter.min(self.jitter))),
            hard_time: Some(self.hard_time),
        }
    }
}

/// An encryption transform with its key size (RFC 7296 §3.3.5: the Key
/// Length attribute of variable-length ciphers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EncrAlg {
    /// Transform ID.
    pub id: EncrId,
    /// Key size in bits; 256 for ChaCha20-Poly1305, which sends no Key
    /// Length attribute (RFC 7634 §2).
    pub key_bits: u16,
}

impl EncrAlg {
    /// AES-CBC with a 128-bit key (RFC 3602).
    pub const AES128_CBC: EncrAlg = EncrAlg::new(EncrId::AES_CBC, 128);
    /// AES-CBC with a 256-bit key (RFC 3602).
    pub const AES256_CBC: EncrAlg = EncrAlg::new(EncrId::AES_CBC, 256);
    /// AES-GCM with a 16-octet ICV and a 128-bit key (RFC 4106, RFC 5282).
    pub const AES128_GCM16: EncrAlg = EncrAlg::new(EncrId::AES_GCM_16, 128);
    /// AES-GCM with a 16-octet ICV and a 256-bit key (RFC 4106, RFC 5282).
    pub const AES256_GCM16: EncrAlg = EncrAlg::new(EncrId::AES_GCM_16, 256);
    /// ChaCha20-Poly1305 (RFC 7634).
    pub const CHACHA20_POLY1305: EncrAlg = EncrAlg::new(EncrId::CHACHA20_POLY1305, 256);

    /// The transform `id` with a `key_bits` key.
    pub const fn new(id: EncrId, key_bits: u16) -> EncrAlg {
        EncrAlg { id, key_bits }
    }

    /// True for the combined-mode ciphers, which take no integrity
    /// transform (RFC 7296 §3.3, RFC 5282 §8).
    pub fn is_aead(&self) -> bool {
        matches!(
            self.id,
            EncrId::AES_GCM_8
                | EncrId::AES_GCM_12
                | EncrId::AES_GCM_16
                | EncrId::AES_CCM_16
                | EncrId::CHACHA20_POLY1305
        )
    }

    /// Whether the transform carries a Key Length attribute on the wire:
    /// AES in every mode (RFC 3602 §5, RFC 5282 §7); ChaCha20-Poly1305
    /// must not (RFC 7634 §2).
    pub fn has_key_length_attribute(&self) -> bool {
        self.id != EncrId::CHACHA20_POLY1305
    }
}

/// One IKE SA proposal: every combination of one transform of each type
/// is acceptable (RFC 7296 §3.3).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IkeProposal {
    /// Encryption transforms, preferred first.
    pub encr: Vec<EncrAlg>,
    /// Integrity transforms; empty with combined-mode ciphers.
    pub integ: Vec<IntegId>,
    /// Pseudorandom functions.
    pub prf: Vec<PrfId>,
    /// Key exchange methods of IKE_SA_INIT (Transform Type 4).
    pub ke: Vec<KeId>,
    /// Additional key exchanges (RFC 9370): `additional_ke[0]` are the
    /// ADDKE1 methods, and so on; [`KeId::NONE`] among them makes that
    /// exchange optional.
    pub additional_ke: Vec<Vec<KeId>>,
}

/// One Child SA proposal, ESP or AH (RFC 7296 §3.3.3: AH takes
/// integrity, ESN and optionally KE; ESP adds encryption).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ChildProposal {
    /// Encryption transforms, preferred first; always empty for AH.
    pub encr: Vec<EncrAlg>,
    /// Integrity transforms; empty with combined-mode ciphers.
    pub integ: Vec<IntegId>,
    /// Key exchange methods for PFS in CREATE_CHILD_SA; empty: no PFS.
    /// Never sent in IKE_AUTH (RFC 7296 §1.2).
    pub ke: Vec<KeId>,
    /// Extended Sequence Numbers: `true` for ESN, `false` for 32-bit
    /// sequence numbers, preferred first (RFC 7296 §3.3.2, Transform
    /// Type 5).
    pub esn: Vec<bool>,
    /// Additional key exchanges of a CREATE_CHILD_SA (RFC 9370 §2.2.4),
    /// as in [`IkeProposal::additional_ke`]. (An addition to the issue's
    /// contract.)
    pub additional_ke: Vec<Vec<KeId>>,
}

/// The key exchanges every default proposal offers, preferred first.
const DEFAULT_KE: [KeId; 4] = [
    KeId::CURVE25519,
    KeId::ECP_256,
    KeId::ECP_384,
    KeId::MODP_2048,
];

impl IkeProposal {
    /// The default IKE proposals: AES-GCM-16-256 or ChaCha20-Poly1305 with
    /// PRF HMAC-SHA2-256/384/512, then AES-CBC-256 with HMAC-SHA2-256;
    /// each with x25519, ecp256, ecp384 or modp2048.
    pub fn default_set() -> Vec<IkeProposal> {
        vec![
            IkeProposal {
                encr: vec![EncrAlg::AES256_GCM16, EncrAlg::CHACHA20_POLY1305],
                integ: Vec::new(),
                prf: vec![
                    PrfId::HMAC_SHA2_256,
                    PrfId::HMAC_SHA2_384,
                    PrfId::HMAC_SHA2_512,
                ],
                ke: DEFAULT_KE.to_vec(),
                additional_ke: Vec::new(),
            },
            IkeProposal {
                encr: vec![EncrAlg::AES256_CBC],
                integ: vec![IntegId::HMAC_SHA2_256_128],
                prf: vec![PrfId::HMAC_SHA2_256],
                ke: DEFAULT_KE.to_vec(),
                additional_ke: Vec::new(),
            },
        ]
    }

    /// Parses one strongSwan-style proposal such as
    /// `aes128gcm16-prfsha256-x25519` or `aes256-sha256-modp2048`
    /// (grammar in [`parse`](mod@parse)). The error names the bad token.
    pub fn parse(text: &str) -> Result<IkeProposal, ProposalParseError> {
        parse::ike(text)
    }

    /// Parses a comma-separated list of proposals; the word `default`
    /// stands for [`Self::default_set`].
    pub fn parse_list(text: &str) -> Result<Vec<IkeProposal>, ProposalParseError> {
        parse::list(text, IkeProposal::parse, IkeProposal::default_set)
    }
}

impl ChildProposal {
    /// The default ESP proposals: AES-GCM-16-256 or ChaCha20-Poly1305, then
    /// AES-CBC-256 with HMAC-SHA2-256; PFS with x25519, ecp256, ecp384 or
    /// modp2048 when a CREATE_CHILD_SA carries a KE payload; ESN preferred,
    /// 32-bit sequence numbers accepted.
    pub fn default_set() -> Vec<ChildProposal> {
        let esp = |encr: Vec<EncrAlg>, integ: Vec<IntegId>| ChildProposal {
            encr,
            integ,
            ke: DEFAULT_KE.to_vec(),
            esn: vec![true, false],
            additional_ke: Vec::new(),
        };
        vec![
            esp(
                vec![EncrAlg::AES256_GCM16, EncrAlg::CHACHA20_POLY1305],
                Vec::new(),
            ),
            esp(vec![EncrAlg::AES256_CBC], vec![IntegId::HMAC_SHA2_256_128]),
        ]
    }

    /// Parses one strongSwan-style proposal such as `aes128gcm16-esn-noesn`
    /// or `aes256gcm16-x25519-ke1_mlkem768` (grammar in
    /// [`parse`](mod@parse)). The error names the bad token.
    pub fn parse(text: &str) -> Result<ChildProposal, ProposalParseError> {
        parse::esp(text)
    }

    /// Parses a comma-separated list of proposals; the word `default`
    /// stands for [`Self::default_set`].
    pub fn parse_list(text: &str) -> Result<Vec<ChildProposal>, ProposalParseError> {
        parse::list(text, ChildProposal::parse, ChildProposal::default_set)
    }

    /// The default AH proposal: HMAC-SHA2-256, -384 or -512 (RFC 4868),
    /// PFS groups and ESN as in [`Self::default_set`] (strongSwan's AH
    /// default is the same family of HMACs).
    pub fn ah_default_set() -> Vec<ChildProposal> {
        vec![ChildProposal {
            encr: Vec::new(),
            integ: vec![
                IntegId::HMAC_SHA2_256_128,
                IntegId::HMAC_SHA2_384_192,
                IntegId::HMAC_SHA2_512_256,
            ],
            ke: DEFAULT_KE.to_vec(),
            esn: vec![true, false],
            additional_ke: Vec::new(),
        }]
    }

    /// Parses one AH proposal such as `sha256-x25519-esn` (strongSwan's
    /// `ah_proposals`): integrity, key exchange and ESN names only.
    pub fn parse_ah(text: &str) -> Result<ChildProposal, ProposalParseError> {
        parse::ah(text)
    }

    /// Parses a comma-separated list of AH proposals; `default` stands for
    /// [`Self::ah_default_set`].
    pub fn parse_ah_list(text: &str) -> Result<Vec<ChildProposal>, ProposalParseError> {
        parse::list(text, ChildProposal::parse_ah, ChildProposal::ah_default_set)
    }
}

/// Signature schemes by strongSwan's names, as in `ike:rsa/pss-sha256`:
/// `rsa/pss-sha256` (-sha384, -sha512), `rsa-sha256` (…, PKCS#1 v1.5),
/// `ecdsa-sha256` (-sha384, -sha512; the curves' hashes), `ed25519`; a
/// name without a hash (`rsa/pss`, `rsa`, `ecdsa`) stands for all three.
pub fn parse_signature_schemes(name: &str) -> Result<Vec<SignatureScheme>, String> {
    use SignatureScheme as S;
    Ok(match name {
        "rsa/pss" => vec![S::RsaPssSha256, S::RsaPssSha384, S::RsaPssSha512],
        "rsa/pss-sha256" => vec![S::RsaPssSha256],
        "rsa/pss-sha384" => vec![S::RsaPssSha384],
        "rsa/pss-sha512" => vec![S::RsaPssSha512],
        "rsa" => vec![S::RsaPkcs1Sha256, S::RsaPkcs1Sha384, S::RsaPkcs1Sha512],
        "rsa-sha256" => vec![S::RsaPkcs1Sha256],
        "rsa-sha384" => vec![S::RsaPkcs1Sha384],
        "rsa-sha512" => vec![S::RsaPkcs1Sha512],
        "ecdsa" => vec![S::EcdsaP256Sha256, S::EcdsaP384Sha384, S::EcdsaP521Sha512],
        "ecdsa-sha256" => vec![S::EcdsaP256Sha256],
        "ecdsa-sha384" => vec![S::EcdsaP384Sha384],
        "ecdsa-sha512" => vec![S::EcdsaP521Sha512],
        "ed25519" => vec![S::Ed25519],
        other => {
            return Err(format!(
                "unknown signature scheme {other:?} (rsa/pss[-sha256|-sha384|-sha512], \
                 rsa[-sha…], ecdsa[-sha…], ed25519)"
            ))
        }
    })
}

impl Connection {
    /// Whether a reload that replaces this connection with `b` leaves it
    /// as it was, so that its IKE SAs keep running
    /// ([`Endpoint::reconfigure`](crate::Endpoint::reconfigure)). Secrets
    /// compare by value, keys and anchors by identity (a caller that
    /// re-reads the same files keeps the objects); EAP connections by the
    /// fact (the method lives with the caller's EAP backend).
    pub fn same_for_reload(&self, b: &Connection) -> bool {
        let a = self;
        let local_auth = match (&a.local_auth, &b.local_auth) {
            (LocalAuth::Psk(x), LocalAuth::Psk(y)) => x.as_slice() == y.as_slice(),
            (
                LocalAuth::Signature { key: k1, chain: c1 },
                LocalAuth::Signature { key: k2, chain: c2 },
            ) => Arc::ptr_eq(k1, k2) && c1 == c2,
            _ => false,
        };
        let remote_auth = match (&a.remote_auth, &b.remote_auth) {
            (RemoteAuth::Psk(x), RemoteAuth::Psk(y)) => x.as_slice() == y.as_slice(),
            (RemoteAuth::Eap, RemoteAuth::Eap) => true,
            (RemoteAuth::Signature { anchors: x }, RemoteAuth::Signature { anchors: y }) => {
                Arc::ptr_eq(x, y)
            }
            _ => false,
        };
        local_auth
            && remote_auth
            && a.name == b.name
            && a.local_addr == b.local_addr
            && a.remote_addr == b.remote_addr
            && a.local_port == b.local_port
            && a.remote_port == b.remote_port
            && a.local_id == b.local_id
            && a.remote_id == b.remote_id
            && a.ike_proposals == b.ike_proposals
            && a.children == b.children
            && a.start_action == b.start_action
            && a.dpd_delay == b.dpd_delay
            && a.ike_lifetime == b.ike_lifetime
            && a.fragmentation == b.fragmentation
            && a.force_encap == b.force_encap
            && a.send_certreq == b.send_certreq
            && a.send_cert == b.send_cert
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
