//! The TOML schema exactly as written in the file: serde structs whose
//! fields keep their byte spans ([`Spanned`]) so that semantic errors found
//! later can name the line and column. Nothing here is validated beyond
//! what the types force; [`super::validate`] turns these into the checked
//! [`Config`](super::Config).

use core::fmt;

use phalanx_wire::{EncrId, IntegId};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use toml::Spanned;

use super::cluster::RawCluster;
use super::pool::RawPool;
use super::radius::RawRadius;
use super::raw_ike::RawEapSecret;
use super::raw_ike::{RawConnection, RawIke};

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    pub(crate) daemon: RawDaemon,
    pub(crate) clear: Spanned<RawClear>,
    pub(crate) protected: Spanned<RawProtected>,
    #[serde(default)]
    pub(crate) sa: Vec<Spanned<RawSa>>,
    #[serde(default)]
    pub(crate) policy: Vec<Spanned<RawPolicy>>,
    pub(crate) ike: Option<Spanned<RawIke>>,
    #[serde(default)]
    pub(crate) connection: Vec<Spanned<RawConnection>>,
    #[serde(default)]
    pub(crate) pool: Vec<Spanned<RawPool>>,
    #[serde(default)]
    pub(crate) eap_secret: Vec<Spanned<RawEapSecret>>,
    pub(crate) radius: Option<Spanned<RawRadius>>,
    pub(crate) cluster: Option<Spanned<RawCluster>>,
}

/// `[daemon]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDaemon {
    pub(crate) workers: Option<Spanned<u32>>,
    pub(crate) crypto_threads: Option<Spanned<u32>>,
    pub(crate) control_socket: Option<Spanned<String>>,
    pub(crate) metrics: Option<Spanned<String>>,
    pub(crate) log: Option<Spanned<String>>,
    pub(crate) log_format: Option<LogFormat>,
    pub(crate) user: Option<Spanned<String>>,
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// `[clear]`: the TUN side.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClear {
    pub(crate) tun: Spanned<String>,
    pub(crate) mtu: Option<Spanned<u32>>,
    pub(crate) offload: Option<bool>,
    pub(crate) queues: Option<Spanned<u32>>,
    pub(crate) address: Option<Spanned<String>>,
    pub(crate) address6: Option<Spanned<String>>,
}

/// `[protected]`: the network side.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProtected {
    pub(crate) local: Spanned<String>,
    pub(crate) udp_port: Option<Spanned<u32>>,
    pub(crate) raw_esp: Option<bool>,
    pub(crate) fragment: Option<Spanned<String>>,
}

/// `in` or `out`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Received from the peer (SPI chosen by us).
    In,
    /// Sent to the peer (SPI chosen by the peer).
    Out,
}

impl Direction {
    /// `"in"` or `"out"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::In => "in",
            Direction::Out => "out",
        }
    }
}

/// `esp` or `ah`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawProtocol {
    Esp,
    Ah,
}

/// The encryption algorithm names of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Encryption {
    /// AES-GCM with a 16-octet ICV, 128-bit key (RFC 4106).
    Aes128gcm16,
    /// AES-GCM with a 16-octet ICV, 256-bit key (RFC 4106).
    Aes256gcm16,
    /// ChaCha20-Poly1305 (RFC 7634).
    Chacha20poly1305,
    /// AES-GMAC, integrity only, 128-bit key (RFC 4543).
    Aes128gmac,
    /// AES-GMAC, integrity only, 256-bit key (RFC 4543).
    Aes256gmac,
    /// AES-CBC, 128-bit key (RFC 3602).
    Aes128,
    /// AES-CBC, 256-bit key (RFC 3602).
    Aes256,
    /// NULL encryption (RFC 2410).
    Null,
}

impl Encryption {
    /// The name used in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Encryption::Aes128gcm16 => "aes128gcm16",
            Encryption::Aes256gcm16 => "aes256gcm16",
            Encryption::Chacha20poly1305 => "chacha20poly1305",
            Encryption::Aes128gmac => "aes128gmac",
            Encryption::Aes256gmac => "aes256gmac",
            Encryption::Aes128 => "aes128",
            Encryption::Aes256 => "aes256",
            Encryption::Null => "null",
        }
    }

    /// The IKEv2 transform id and key size in bits.
    pub fn transform(self) -> (EncrId, u16) {
        match self {
            Encryption::Aes128gcm16 => (EncrId::AES_GCM_16, 128),
            Encryption::Aes256gcm16 => (EncrId::AES_GCM_16, 256),
            Encryption::Chacha20poly1305 => (EncrId::CHACHA20_POLY1305, 256),
            Encryption::Aes128gmac => (EncrId::NULL_AUTH_AES_GMAC, 128),
            Encryption::Aes256gmac => (EncrId::NULL_AUTH_AES_GMAC, 256),
            Encryption::Aes128 => (EncrId::AES_CBC, 128),
            Encryption::Aes256 => (EncrId::AES_CBC, 256),
            Encryption::Null => (EncrId::NULL, 0),
        }
    }

    /// Whether this is a combined mode (AEAD or GMAC), which takes no
    /// integrity transform (RFC 7296 §3.3).
    pub fn is_combined(self) -> bool {
        matches!(
            self,
            Encryption::Aes128gcm16
                | Encryption::Aes256gcm16
                | Encryption::Chacha20poly1305
                | Encryption::Aes128gmac
                | Encryption::Aes256gmac
        )
    }
}

/// The integrity algorithm names of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Integrity {
    /// HMAC-SHA-256-128 (RFC 4868).
    Sha256,
    /// HMAC-SHA-384-192 (RFC 4868).
    Sha384,
    /// HMAC-SHA-512-256 (RFC 4868).
    Sha512,
    /// No integrity transform (combined-mode ciphers).
    None,
}

impl Integrity {
    /// The name used in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Integrity::Sha256 => "sha256",
            Integrity::Sha384 => "sha384",
            Integrity::Sha512 => "sha512",
            Integrity::None => "none",
        }
    }

    /// The IKEv2 transform id.
    pub fn transform(self) -> IntegId {
        match self {
            Integrity::Sha256 => IntegId::HMAC_SHA2_256_128,
            Integrity::Sha384 => IntegId::HMAC_SHA2_384_192,
            Integrity::Sha512 => IntegId::HMAC_SHA2_512_256,
            Integrity::None => IntegId::NONE,
        }
    }
}

/// `tunnel` or `transport`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawMode {
    Tunnel,
    Transport,
}

/// `udp` or `none`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawEncap {
    Udp,
    None,
}

/// One `[[sa]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSa {
    pub(crate) name: Spanned<String>,
    pub(crate) direction: Direction,
    pub(crate) spi: Spanned<Spi>,
    pub(crate) protocol: Option<Spanned<RawProtocol>>,
    pub(crate) encryption: Spanned<Encryption>,
    pub(crate) integrity: Option<Spanned<Integrity>>,
    pub(crate) key: Option<Spanned<String>>,
    pub(crate) integrity_key: Option<Spanned<String>>,
    pub(crate) mode: Option<RawMode>,
    pub(crate) local: Option<Spanned<String>>,
    pub(crate) remote: Option<Spanned<String>>,
    pub(crate) encap: Option<Spanned<RawEncap>>,
    pub(crate) remote_port: Option<Spanned<u32>>,
    pub(crate) esn: Option<bool>,
    pub(crate) replay_window: Option<Spanned<u32>>,
    pub(crate) peer_replay_window: Option<Spanned<u32>>,
    pub(crate) tfc_pad_to: Option<Spanned<u32>>,
    #[serde(default)]
    pub(crate) lifetime: Option<Spanned<RawLifetime>>,
    #[serde(default)]
    pub(crate) selectors: Vec<Spanned<RawSelector>>,
}

/// `[sa.lifetime]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLifetime {
    pub(crate) soft_bytes: Option<u64>,
    pub(crate) hard_bytes: Option<u64>,
    pub(crate) soft_packets: Option<u64>,
    pub(crate) hard_packets: Option<u64>,
    pub(crate) soft_seconds: Option<u64>,
    pub(crate) hard_seconds: Option<u64>,
}

/// One selector: `{ src, dst, protocol, src_ports, dst_ports }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSelector {
    pub(crate) src: Spanned<String>,
    pub(crate) dst: Spanned<String>,
    pub(crate) protocol: Option<Spanned<Word>>,
    pub(crate) src_ports: Option<Spanned<Word>>,
    pub(crate) dst_ports: Option<Spanned<Word>>,
}

/// `protect`, `bypass` or `discard` (RFC 4301 §4.4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawAction {
    Protect,
    Bypass,
    Discard,
}

/// One `[[policy]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPolicy {
    pub(crate) name: Spanned<String>,
    pub(crate) priority: Option<u32>,
    pub(crate) src: Spanned<String>,
    pub(crate) dst: Spanned<String>,
    pub(crate) protocol: Option<Spanned<Word>>,
    pub(crate) src_ports: Option<Spanned<Word>>,
    pub(crate) dst_ports: Option<Spanned<Word>>,
    pub(crate) action: RawAction,
    pub(crate) sa: Option<Spanned<String>>,
}

/// An SPI written as an integer or as a string (`"0x1001"` or `"4097"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Spi(pub(crate) u64);

impl<'de> Deserialize<'de> for Spi {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SpiVisitor)
    }
}

struct SpiVisitor;

impl Visitor<'_> for SpiVisitor {
    type Value = Spi;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an SPI: an integer or a string such as \"0x1001\"")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Spi, E> {
        u64::try_from(v)
            .map(Spi)
            .map_err(|_| E::custom("an SPI cannot be negative"))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Spi, E> {
        Ok(Spi(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Spi, E> {
        let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16),
            None => v.replace('_', "").parse(),
        };
        parsed
            .map(Spi)
            .map_err(|_| E::custom(format!("{v:?} is not an SPI (write 4097 or \"0x1001\")")))
    }
}

/// A value that may be written as a word or a number: protocols
/// (`"tcp"`, `6`) and port ranges (`"any"`, `80`, `"1000-2000"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    Text(String),
    Number(i64),
}

impl<'de> Deserialize<'de> for Word {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(WordVisitor)
    }
}

struct WordVisitor;

impl Visitor<'_> for WordVisitor {
    type Value = Word;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or an integer")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Word, E> {
        Ok(Word::Number(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Word, E> {
        i64::try_from(v)
            .map(Word::Number)
            .map_err(|_| E::custom("number out of range"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Word, E> {
        Ok(Word::Text(v.to_owned()))
    }
}
