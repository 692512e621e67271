//! The daemon's TOML configuration: schema, parsing and validation.
//!
//! [`Config::load`] reads a file, [`Config::parse`] a string. Every error
//! is a [`ConfigError`] that prints as `FILE:LINE:COL: field PATH: message`
//! — syntax and type errors as the TOML parser reports them (the field
//! path tracked with `serde_path_to_error`), semantic errors (key lengths,
//! duplicate names and SPIs, dangling policy references, prefixes, ports,
//! replay windows, address families) at the offending value. The schema is
//! documented in `crates/phalanxd/CONFIG.md`. IKE connections
//! (`[ike]`, `[[connection]]`, `[[connection.child]]`) become a
//! `phalanx_ike::config::EndpointConfig` ([`IkeSettings`]); files they name
//! (certificates, keys, CAs) are read relative to the configuration file.

mod cluster;
mod connection;
mod credentials;
mod eap_tls;
mod ike;
mod pool;
mod radius;
mod raw;
mod raw_ike;
mod sa;
mod validate;
mod values;

use core::fmt;
use core::ops::Range;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

use phalanx_crypto::Suite;
use phalanx_sa::{IpsecProtocol, SaParams, Selector};
use zeroize::Zeroizing;

pub use cluster::{check_cluster_reload, ClusterSettings, ClusterSide, SideAddresses};
pub use credentials::CredentialFingerprint;
pub use ike::{
    connection_changes, same_connection, ChildPolicySet, ChildRef, ConnectionChanges, IkeSettings,
};
pub use radius::{EapMethod, EapSettings, RadiusSettings};
pub use raw::{Direction, Encryption, Integrity, LogFormat};

/// A configuration error with its place in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file as named on the command line (or `<string>`).
    pub file: String,
    /// 1-based line; 0 when the error has no place (the file is unreadable).
    pub line: usize,
    /// 1-based column (in characters); 0 with `line`.
    pub column: usize,
    /// The field path, e.g. `sa[1].encryption`; empty when not known.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        if !self.field.is_empty() {
            write!(f, ": field {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Turns byte offsets of one file into line and column numbers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Source<'a> {
    /// The file's name for messages.
    pub(crate) name: &'a str,
    /// The file's text.
    pub(crate) text: &'a str,
}

impl Source<'_> {
    /// An error at byte `span.start` about `field`.
    pub(crate) fn error(
        &self,
        span: Range<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        let (line, column) = self.position(span.start);
        ConfigError {
            file: self.name.to_owned(),
            line,
            column,
            field: field.into(),
            message: message.into(),
        }
    }

    /// 1-based line and column (characters) of byte `offset`.
    fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        // Offsets from the parser lie on character boundaries; if one did
        // not, back up to the previous boundary rather than fail.
        let mut end = offset;
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let before = &self.text[..end];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }
}

/// `[daemon]`: process-wide settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonSettings {
    /// Data-plane worker threads; 0 means one per core.
    pub workers: usize,
    /// Crypto threads per worker (a `WorkerPool` engine); 0 runs crypto
    /// inline on the worker.
    pub crypto_threads: usize,
    /// The control socket path.
    pub control_socket: PathBuf,
    /// Where to serve Prometheus metrics, if anywhere.
    pub metrics: Option<SocketAddr>,
    /// The log filter (`tracing_subscriber::EnvFilter` syntax).
    pub log: String,
    /// Text or JSON log lines.
    pub log_format: LogFormat,
    /// Drop to this user after opening devices and sockets.
    pub user: Option<String>,
}

/// `[clear]`: the TUN device on the cleartext side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClearSettings {
    /// Interface name.
    pub tun: String,
    /// Interface MTU.
    pub mtu: u16,
    /// Virtio-net header with TSO/USO offload (GSO/GRO).
    pub offload: bool,
    /// TUN queues; 0 means one per worker.
    pub queues: usize,
    /// An IPv4 address to put on the device.
    pub ipv4: Option<(Ipv4Addr, u8)>,
    /// An IPv6 address to put on the device.
    pub ipv6: Option<(Ipv6Addr, u8)>,
}

/// `[protected]`: the network side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtectedSettings {
    /// Our address on the protected network (the tunnel endpoint).
    pub local: IpAddr,
    /// The ESP-in-UDP port (RFC 3948: 4500).
    pub udp_port: u16,
    /// Open a raw socket for plain ESP (protocol 50).
    pub raw_esp: bool,
    /// What an IPv4 packet without DF that does not fit the path MTU
    /// becomes: inner fragments (RFC 4459 §3) or a fragmented ESP packet.
    pub fragment: phalanx_esp::FragmentPolicy,
}

/// Key material of one SA, wiped when dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct SaKeys {
    /// Encryption key, salt included for the AEADs (RFC 4106 §8.1).
    pub encryption: Zeroizing<Vec<u8>>,
    /// Integrity key (empty for the AEADs).
    pub integrity: Zeroizing<Vec<u8>>,
}

impl fmt::Debug for SaKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaKeys")
            .field("encryption_len", &self.encryption.len())
            .field("integrity_len", &self.integrity.len())
            .finish()
    }
}

/// One SA, validated.
#[derive(Clone, Debug)]
pub struct SaConfig {
    /// Unique name.
    pub name: String,
    /// In or out.
    pub direction: Direction,
    /// Encryption algorithm.
    pub encryption: Encryption,
    /// Integrity algorithm.
    pub integrity: Integrity,
    /// The runtime parameters (SPI, mode, encapsulation, window, ...).
    pub params: SaParams,
    /// The keys.
    pub keys: SaKeys,
    /// Outbound: the replay window the peer applies to this SA, when
    /// configured (0: unknown). A cluster spreads the SA over its nodes
    /// only when it is large enough (`phalanx_cluster::spreads_outbound`).
    pub peer_replay_window: u32,
    /// Line of the `[[sa]]` table, for messages.
    pub line: usize,
}

impl SaConfig {
    /// The algorithms (validated when the file was read).
    pub fn suite(&self) -> Suite {
        match self.params.protocol {
            IpsecProtocol::Ah => Suite::ah(self.integrity.transform()),
            IpsecProtocol::Esp => {
                let (encr, bits) = self.encryption.transform();
                Suite::esp(encr, bits, self.integrity.transform())
            }
        }
    }

    /// Whether `other` defines the same SA (everything but the line).
    pub fn same_definition(&self, other: &SaConfig) -> bool {
        self.name == other.name
            && self.direction == other.direction
            && self.encryption == other.encryption
            && self.integrity == other.integrity
            && self.params == other.params
            && self.keys == other.keys
    }
}

/// What a policy does with matching packets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyTarget {
    /// Protect with the named outbound SA.
    Protect(String),
    /// Pass in the clear (on a TUN gateway: dropped and counted).
    Bypass,
    /// Drop.
    Discard,
    /// Protect with the current outbound SA of an IKE Child SA (the
    /// policies `[[connection.child]]` generates); no SA yet: dropped as
    /// `no_outbound_sa`, and with `start_action = "trap"` IKE is started.
    Child(ChildRef),
    /// Protect with the current outbound SA of one End-User's Child SA of
    /// `child` (a connection with pools): the outbound id of its peer slot
    /// (`install::peer`). Installed with the SA, never read from a file.
    Peer {
        /// The configured child.
        child: ChildRef,
        /// The peer slot's outbound id.
        slot: u32,
    },
}

/// One policy, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyConfig {
    /// Unique name.
    pub name: String,
    /// Order: lower first.
    pub priority: u32,
    /// Which packets.
    pub selector: Selector,
    /// What to do.
    pub target: PolicyTarget,
    /// Line of the `[[policy]]` table.
    pub line: usize,
}

impl PolicyConfig {
    /// Whether `other` defines the same policy (everything but the line).
    pub fn same_definition(&self, other: &PolicyConfig) -> bool {
        self.name == other.name
            && self.priority == other.priority
            && self.selector == other.selector
            && self.target == other.target
    }
}

/// A validated configuration file.
#[derive(Clone, Debug)]
pub struct Config {
    /// The file's path.
    pub path: PathBuf,
    /// `[daemon]`.
    pub daemon: DaemonSettings,
    /// `[clear]`.
    pub clear: ClearSettings,
    /// `[protected]`.
    pub protected: ProtectedSettings,
    /// `[[sa]]`, in file order.
    pub sas: Vec<SaConfig>,
    /// `[[policy]]`, in file order.
    pub policies: Vec<PolicyConfig>,
    /// `[ike]` and `[[connection]]`; `None` when the file has neither (no
    /// IKE socket is opened).
    pub ike: Option<IkeSettings>,
    /// `[cluster]`; `None` runs a single gateway (host mode).
    pub cluster: Option<ClusterSettings>,
}

impl Config {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: name.clone(),
            line: 0,
            column: 0,
            field: String::new(),
            message: format!("cannot read: {e}"),
        })?;
        let mut config = Config::parse(&name, &text)?;
        config.path = path.to_path_buf();
        Ok(config)
    }

    /// Parses and validates `text`; `name` is used in error messages.
    pub fn parse(name: &str, text: &str) -> Result<Config, ConfigError> {
        let source = Source { name, text };
        let raw = validate::deserialize(&source)?;
        validate::config(&source, raw)
    }

    /// The SA named `name`.
    pub fn sa(&self, name: &str) -> Option<&SaConfig> {
        self.sas.iter().find(|sa| sa.name == name)
    }

    /// Whether a static SA uses AH or IKE may negotiate an AH child: the
    /// raw AH socket (IP protocol 51) is opened at start for them.
    pub fn uses_ah(&self) -> bool {
        let static_ah = self
            .sas
            .iter()
            .any(|sa| sa.params.protocol == IpsecProtocol::Ah);
        let ike_ah = self.ike.as_ref().is_some_and(|ike| {
            ike.endpoint
                .connections
                .iter()
                .flat_map(|c| &c.children)
                .any(|child| child.protocol == IpsecProtocol::Ah)
        });
        static_ah || ike_ah
    }
}

#[cfg(test)]
mod tests;

/// Parsers other modules' tests use.
#[cfg(test)]
pub(crate) mod tests_support {
    /// A traffic selector in the file's syntax; panics when invalid.
    pub(crate) fn traffic_selector(text: &str) -> phalanx_wire::ike::TrafficSelector {
        super::values::traffic_selector(text).unwrap()
    }
}
