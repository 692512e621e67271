//! ESP/AH interop vectors (crates/phalanx-esp/tests/vectors/scapy.json,
//! written by tests/interop/gen_scapy_vectors.py): JSON → SA objects.
//!
//! A [`Vector`] describes one SA and one packet: algorithms and keys,
//! SPI, full 64-bit sequence number, ESN, IV, mode, tunnel addresses, UDP
//! encapsulation, and the inner and outer packets scapy produced. This
//! module turns it into what phalanx-esp consumes — [`SaTransform`],
//! [`SaParams`], [`OutboundSa`], [`InboundSa`], a [`Sad`] — for both
//! directions; the callers (the esp `scapy_vectors` test and the
//! `esp_vectors` example) run `prepare_* → engine → finish_*` themselves,
//! since this crate cannot depend on phalanx-esp.
//!
//! Direction: the vector's packet travels from `tunnel_src` (and UDP
//! `sport`) to `tunnel_dst` (`dport`). The outbound SA is the sender's
//! (local = src), the inbound SA the receiver's (local = dst).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use phalanx_crypto::{CryptoError, CryptoProvider, Engine, Frame, InlineEngine, Op, PacketBuf};
use phalanx_crypto::{SaTransform, Suite};
use phalanx_sa::{InboundSa, IpsecProtocol, OutboundSa, SaMode, SaParams, Sad, UdpEncap};
use phalanx_wire::{EncrId, IntegId};
use serde::{Deserialize, Serialize};

/// Headroom of the buffers built here: outer IPv6 (40) + UDP (8) + ESP
/// header (8) + CBC IV (16), rounded up generously.
pub const HEADROOM: usize = 128;
/// Tailroom: ESP padding (<= 255) + pad length + next header + ICV (<= 32).
pub const TAILROOM: usize = 320;
/// Replay window of the inbound SAs built here (RFC 4303 §3.4.3 default 64
/// is enough: each SA receives one packet).
pub const REPLAY_WINDOW: u32 = 64;

/// A whole vector file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct VectorFile {
    /// Where the vectors come from (generator, scapy version, date).
    pub header: serde_json::Value,
    /// The vectors.
    pub vectors: Vec<Vector>,
}

/// ESP or AH.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum VectorProtocol {
    /// RFC 4303.
    Esp,
    /// RFC 4302.
    Ah,
}

/// Tunnel or transport mode (RFC 4301 §4.1).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum VectorMode {
    /// A new outer IP header between `tunnel_src` and `tunnel_dst`.
    Tunnel,
    /// The original IP header is kept.
    Transport,
}

/// UDP encapsulation ports (RFC 3948) as seen on the wire.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct UdpPorts {
    /// Source port (the sender's local port).
    pub sport: u16,
    /// Destination port (the receiver's local port).
    pub dport: u16,
}

/// One interop vector; byte strings are lowercase hex, as in the JSON.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Vector {
    /// Unique name naming the combination.
    pub name: String,
    /// ESP or AH.
    pub protocol: VectorProtocol,
    /// Tunnel or transport.
    pub mode: VectorMode,
    /// IKEv2 encryption transform id (NULL = 11 for AH).
    pub encr: u16,
    /// Cipher key bits (0 for NULL).
    pub encr_key_bits: u16,
    /// IKEv2 integrity transform id (0 for the AEADs).
    pub integ: u16,
    /// Encryption key material, salt included where the RFC puts it.
    pub encr_key: String,
    /// Integrity key.
    pub integ_key: String,
    /// SPI.
    pub spi: u32,
    /// Full 64-bit sequence number.
    pub seq: u64,
    /// Extended sequence numbers.
    pub esn: bool,
    /// Explicit IV (empty for NULL and AH).
    pub iv: String,
    /// Outer source address (tunnel mode).
    pub tunnel_src: Option<IpAddr>,
    /// Outer destination address (tunnel mode).
    pub tunnel_dst: Option<IpAddr>,
    /// UDP encapsulation, if any.
    pub udp_encap: Option<UdpPorts>,
    /// The plaintext IP packet.
    pub inner: String,
    /// The whole protected outer IP packet.
    pub outer: String,
    /// Set instead of a usable `outer` when a tool could not process the vector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why a vector could not be turned into SA objects.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum VectorError {
    /// The file is not valid vector JSON.
    Json(String),
    /// A hex field does not decode.
    Hex(&'static str),
    /// Tunnel mode without both tunnel addresses.
    MissingTunnelAddress,
    /// The crypto layer refused the suite or keys.
    Crypto(CryptoError),
    /// The SA layer refused the parameters.
    Sa(String),
}

impl core::fmt::Display for VectorError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            VectorError::Json(e) => write!(f, "bad vector JSON: {e}"),
            VectorError::Hex(field) => write!(f, "field {field} is not hex"),
            VectorError::MissingTunnelAddress => {
                f.write_str("tunnel mode without tunnel addresses")
            }
            VectorError::Crypto(e) => write!(f, "crypto: {e}"),
            VectorError::Sa(e) => write!(f, "SA: {e}"),
        }
    }
}

impl std::error::Error for VectorError {}

impl From<CryptoError> for VectorError {
    fn from(e: CryptoError) -> Self {
        VectorError::Crypto(e)
    }
}

/// Parses a vector file.
pub fn load(json: &str) -> Result<VectorFile, VectorError> {
    serde_json::from_str(json).map_err(|e| VectorError::Json(e.to_string()))
}

/// Serialises a vector file (pretty, for files written by tools).
pub fn to_json(file: &VectorFile) -> String {
    // Serialising plain data with string keys cannot fail.
    serde_json::to_string_pretty(file).unwrap_or_default()
}

fn unhex(field: &'static str, text: &str) -> Result<Vec<u8>, VectorError> {
    hex::decode(text).map_err(|_| VectorError::Hex(field))
}

/// Which end of the SA to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The sender of the vector's packet.
    Outbound,
    /// Its receiver.
    Inbound,
}

impl Vector {
    /// The algorithms.
    pub fn suite(&self) -> Suite {
        match self.protocol {
            VectorProtocol::Esp => {
                Suite::esp(EncrId(self.encr), self.encr_key_bits, IntegId(self.integ))
            }
            VectorProtocol::Ah => Suite::ah(IntegId(self.integ)),
        }
    }

    /// The encryption key material.
    pub fn encr_key_bytes(&self) -> Result<Vec<u8>, VectorError> {
        unhex("encr_key", &self.encr_key)
    }

    /// The integrity key.
    pub fn integ_key_bytes(&self) -> Result<Vec<u8>, VectorError> {
        unhex("integ_key", &self.integ_key)
    }

    /// The explicit IV.
    pub fn iv_bytes(&self) -> Result<Vec<u8>, VectorError> {
        unhex("iv", &self.iv)
    }

    /// The plaintext packet.
    pub fn inner_bytes(&self) -> Result<Vec<u8>, VectorError> {
        unhex("inner", &self.inner)
    }

    /// The protected packet.
    pub fn outer_bytes(&self) -> Result<Vec<u8>, VectorError> {
        unhex("outer", &self.outer)
    }

    /// The plaintext packet in a buffer with [`HEADROOM`] and [`TAILROOM`].
    pub fn inner_buf(&self) -> Result<PacketBuf, VectorError> {
        Ok(PacketBuf::from_slice(
            &self.inner_bytes()?,
            HEADROOM,
            TAILROOM,
        ))
    }

    /// The protected packet in a buffer with [`HEADROOM`] and [`TAILROOM`].
    pub fn outer_buf(&self) -> Result<PacketBuf, VectorError> {
        Ok(PacketBuf::from_slice(
            &self.outer_bytes()?,
            HEADROOM,
            TAILROOM,
        ))
    }

    /// The same vector with another sequence number.
    pub fn with_seq(&self, seq: u64) -> Vector {
        Vector {
            seq,
            ..self.clone()
        }
    }

    /// A sequence number other than [`seq`](Self::seq) in the same space:
    /// `seq + 1`, or `seq - 1` at the end of the space (2^32 - 1 without
    /// ESN, 2^64 - 1 with it; RFC 4303 §2.2). Used to encrypt "the same
    /// packet with a different number".
    pub fn other_seq(&self) -> u64 {
        let last = if self.esn {
            u64::MAX
        } else {
            u64::from(u32::MAX)
        };
        if self.seq < last {
            self.seq + 1
        } else {
            self.seq - 1
        }
    }

    /// The keyed transform, from `provider`.
    pub fn transform(
        &self,
        provider: &dyn CryptoProvider,
    ) -> Result<Arc<SaTransform>, VectorError> {
        let t = SaTransform::new(
            provider,
            self.suite(),
            &self.encr_key_bytes()?,
            &self.integ_key_bytes()?,
        )?;
        Ok(Arc::new(t))
    }

    /// The SA parameters of one end: no lifetime limits, no selectors
    /// (any inner packet), no TFC padding, a [`REPLAY_WINDOW`] window.
    pub fn params(&self, direction: Direction) -> Result<SaParams, VectorError> {
        let outbound = direction == Direction::Outbound;
        let mode = match self.mode {
            VectorMode::Transport => SaMode::Transport,
            VectorMode::Tunnel => {
                let (Some(src), Some(dst)) = (self.tunnel_src, self.tunnel_dst) else {
                    return Err(VectorError::MissingTunnelAddress);
                };
                let (local, remote) = if outbound { (src, dst) } else { (dst, src) };
                SaMode::Tunnel { local, remote }
            }
        };
        let encap = self.udp_encap.map(|u| {
            let (local_port, remote_port) = if outbound {
                (u.sport, u.dport)
            } else {
                (u.dport, u.sport)
            };
            UdpEncap {
                local_port,
                remote_port,
            }
        });
        Ok(SaParams {
            spi: self.spi,
            protocol: match self.protocol {
                VectorProtocol::Esp => IpsecProtocol::Esp,
                VectorProtocol::Ah => IpsecProtocol::Ah,
            },
            mode,
            encap,
            esn: self.esn,
            replay_window: REPLAY_WINDOW,
            lifetime: Default::default(),
            selectors: Vec::new(),
            tfc_pad_to: None,
        })
    }

    /// The sender's SA; its next sequence number is [`seq`](Self::seq).
    pub fn outbound_sa(
        &self,
        provider: &dyn CryptoProvider,
        now: Instant,
    ) -> Result<OutboundSa, VectorError> {
        let sa = OutboundSa::new(
            self.params(Direction::Outbound)?,
            self.transform(provider)?,
            now,
        );
        sa.seq.advance_to(self.seq);
        Ok(sa)
    }

    /// The receiver's SA. Its replay window has seen `seq - 1`, so the
    /// ESN high half of [`seq`](Self::seq) is inferred correctly
    /// (RFC 4303 App. A2.2) and `seq` itself is new.
    pub fn inbound_sa(
        &self,
        provider: &dyn CryptoProvider,
        now: Instant,
    ) -> Result<Arc<InboundSa>, VectorError> {
        let params = self.params(Direction::Inbound)?;
        let sa = InboundSa::new(params, self.transform(provider)?, now)
            .map_err(|e| VectorError::Sa(format!("{e:?}")))?;
        if self.seq > 1 {
            sa.replay_commit(self.seq - 1)
                .map_err(|e| VectorError::Sa(format!("{e:?}")))?;
        }
        Ok(Arc::new(sa))
    }

    /// A SAD holding only [`inbound_sa`](Self::inbound_sa).
    pub fn sad(&self, provider: &dyn CryptoProvider, now: Instant) -> Result<Sad, VectorError> {
        let sad = Sad::new();
        sad.insert(self.inbound_sa(provider, now)?)
            .map_err(|e| VectorError::Sa(format!("{e:?}")))?;
        Ok(sad)
    }
}

/// Runs one op through an [`InlineEngine`] frame and returns it completed.
pub fn run_inline(op: Op) -> Op {
    let mut frame = Frame::new();
    if let Err(mut op) = frame.push(op) {
        // A fresh frame has room; should that change, still run the op.
        op.execute();
        return op;
    }
    let mut engine = InlineEngine::new();
    let mut done = match engine.submit(frame) {
        Ok(()) => engine.poll_completed(),
        Err(frame) => Some(frame),
    };
    // Invariant: InlineEngine completes a frame inside `submit` and returns
    // it from the next `poll_completed`, with every op it was given.
    done.as_mut()
        .and_then(|f| f.drain().next())
        .expect("InlineEngine returns the op it accepted")
}

/// `None` when `got == expected`, else where they first differ.
pub fn describe_mismatch(expected: &[u8], got: &[u8]) -> Option<String> {
    if expected == got {
        return None;
    }
    let first = expected.iter().zip(got).position(|(a, b)| a != b);
    Some(match first {
        Some(i) => format!(
            "lengths {} (expected) / {} (got); first difference at byte {i}: expected {:#04x}, got {:#04x}",
            expected.len(),
            got.len(),
            expected[i],
            got[i]
        ),
        None => format!(
            "lengths {} (expected) / {} (got); one is a prefix of the other",
            expected.len(),
            got.len()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::null::NullProvider;

    const ONE: &str = r#"{"header": {"scapy_version": "2.5.0"}, "vectors": [
      {"name": "esp-x", "protocol": "esp", "mode": "tunnel", "encr": 20, "encr_key_bits": 128,
       "integ": 0, "encr_key": "000102030405060708090a0b0c0d0e0f10111213", "integ_key": "",
       "spi": 4660, "seq": 4294967296, "esn": true, "iv": "0000000100000000",
       "tunnel_src": "192.0.2.1", "tunnel_dst": "198.51.100.2",
       "udp_encap": {"sport": 62000, "dport": 4500}, "inner": "45", "outer": "45aa"}]}"#;

    fn vector() -> Vector {
        load(ONE).unwrap().vectors.remove(0)
    }

    #[test]
    fn parses_and_round_trips() {
        let file = load(ONE).unwrap();
        let v = &file.vectors[0];
        assert_eq!(v.protocol, VectorProtocol::Esp);
        assert_eq!(v.mode, VectorMode::Tunnel);
        assert_eq!(
            v.suite(),
            Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE)
        );
        assert_eq!(v.encr_key_bytes().unwrap().len(), 20);
        assert_eq!(v.outer_bytes().unwrap(), [0x45, 0xaa]);
        assert_eq!(load(&to_json(&file)).unwrap(), file);
        assert!(
            !to_json(&file).contains("error"),
            "no error field unless set"
        );
        assert!(matches!(load("{}"), Err(VectorError::Json(_))));
    }

    #[test]
    fn directions_mirror_addresses_and_ports() {
        let v = vector();
        let out = v.params(Direction::Outbound).unwrap();
        let inb = v.params(Direction::Inbound).unwrap();
        let (src, dst) = (v.tunnel_src.unwrap(), v.tunnel_dst.unwrap());
        assert_eq!(
            out.mode,
            SaMode::Tunnel {
                local: src,
                remote: dst
            }
        );
        assert_eq!(
            inb.mode,
            SaMode::Tunnel {
                local: dst,
                remote: src
            }
        );
        assert_eq!(
            out.encap,
            Some(UdpEncap {
                local_port: 62000,
                remote_port: 4500
            })
        );
        assert_eq!(
            inb.encap,
            Some(UdpEncap {
                local_port: 4500,
                remote_port: 62000
            })
        );
        assert!(out.esn && inb.esn && out.selectors.is_empty());
        let no_addr = Vector {
            tunnel_dst: None,
            ..v
        };
        assert_eq!(
            no_addr.params(Direction::Inbound).err(),
            Some(VectorError::MissingTunnelAddress)
        );
    }

    #[test]
    fn sas_start_at_the_vector_sequence_number() {
        let v = vector();
        let now = Instant::now();
        let out = v.outbound_sa(&NullProvider::ZERO_TAG, now).unwrap();
        assert_eq!(out.next_sequence(), Ok(1 << 32));
        let inb = v.inbound_sa(&NullProvider::ZERO_TAG, now).unwrap();
        // The window saw 2^32 - 1, so low half 0 is inferred as 2^32.
        assert_eq!(inb.replay_check(0), Ok(1 << 32));
        let sad = v.sad(&NullProvider::ZERO_TAG, now).unwrap();
        assert_eq!(sad.len(), 1);
    }

    #[test]
    fn other_seq_stays_in_the_space() {
        let v = vector();
        assert_eq!(v.other_seq(), (1 << 32) + 1);
        assert_eq!(v.with_seq(u64::MAX).other_seq(), u64::MAX - 1);
        let no_esn = Vector { esn: false, ..v };
        assert_eq!(
            no_esn.with_seq(u64::from(u32::MAX)).other_seq(),
            u64::from(u32::MAX) - 1
        );
        assert_eq!(no_esn.with_seq(1).other_seq(), 2);
    }

    #[test]
    fn mismatch_descriptions() {
        assert_eq!(describe_mismatch(b"abc", b"abc"), None);
        assert!(describe_mismatch(b"abc", b"abd")
            .unwrap()
            .contains("byte 2"));
        assert!(describe_mismatch(b"abc", b"ab").unwrap().contains("prefix"));
    }

    #[test]
    fn bad_hex_is_named() {
        let v = Vector {
            inner: "zz".into(),
            ..vector()
        };
        assert_eq!(v.inner_bytes(), Err(VectorError::Hex("inner")));
    }
}
