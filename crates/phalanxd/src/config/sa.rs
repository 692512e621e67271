//! `[[sa]]` tables: algorithms and keys, SPI, mode and endpoints,
//! encapsulation, replay window, lifetimes and selectors.

use std::collections::HashSet;
use std::net::IpAddr;
use std::ops::Range;
use std::time::Duration;

use phalanx_crypto::{CryptoError, Suite};
use phalanx_sa::{IpsecProtocol, LifetimeLimits, SaMode, SaParams, UdpEncap};
use phalanx_wire::EncrId;
use toml::Spanned;
use zeroize::Zeroizing;

use super::raw::{RawEncap, RawLifetime, RawMode, RawProtocol, RawSa};
use super::{
    validate, values, ConfigError, Direction, Encryption, Integrity, ProtectedSettings, SaConfig,
    SaKeys, Source,
};
use crate::limits;

/// Every SA, checked one by one and then for duplicates.
pub(crate) fn all(
    source: &Source<'_>,
    raw: Vec<Spanned<RawSa>>,
    protected: &ProtectedSettings,
    cluster: bool,
) -> Result<Vec<SaConfig>, ConfigError> {
    let mut names = HashSet::new();
    let mut inbound_spis = HashSet::new();
    let mut outbound_spis = HashSet::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, spanned) in raw.into_iter().enumerate() {
        let line = source.error(spanned.span(), "", "").line;
        let raw = spanned.into_inner();
        let (name_span, spi_span) = (raw.name.span(), raw.spi.span());
        if let Some(p) = raw.protocol.as_ref().filter(|_| cluster) {
            if *p.get_ref() == RawProtocol::Ah {
                let msg = "protocol \"ah\" is not carried by a cluster node yet (host mode only)";
                return Err(source.error(p.span(), format!("sa[{i}].protocol"), msg));
            }
        }
        let sa = one(source, i, raw, protected, line)?;
        if !names.insert(sa.name.clone()) {
            let msg = format!("duplicate SA name {:?}", sa.name);
            return Err(source.error(name_span, format!("sa[{i}].name"), msg));
        }
        let fresh = match (sa.direction, sa.params.mode) {
            (Direction::In, _) => inbound_spis.insert((sa.params.spi, sa.params.protocol)),
            (Direction::Out, SaMode::Tunnel { remote, .. }) => {
                outbound_spis.insert((sa.params.spi, Some(remote)))
            }
            (Direction::Out, SaMode::Transport) => outbound_spis.insert((sa.params.spi, None)),
        };
        if !fresh {
            let msg = format!(
                "duplicate {} SPI {:#x} (another SA already uses it)",
                sa.direction.as_str(),
                sa.params.spi
            );
            return Err(source.error(spi_span, format!("sa[{i}].spi"), msg));
        }
        out.push(sa);
    }
    Ok(out)
}

/// One SA.
fn one(
    source: &Source<'_>,
    i: usize,
    raw: RawSa,
    protected: &ProtectedSettings,
    line: usize,
) -> Result<SaConfig, ConfigError> {
    let field = |name: &str| format!("sa[{i}].{name}");
    if raw.name.get_ref().is_empty() {
        return Err(source.error(raw.name.span(), field("name"), "must not be empty"));
    }
    let spi = spi(source, &raw, &field)?;
    let ah = raw
        .protocol
        .as_ref()
        .is_some_and(|p| *p.get_ref() == RawProtocol::Ah);
    let (encryption, integrity, suite) = if ah {
        ah_suite(source, &raw, &field)?
    } else {
        suite(source, &raw, &field)?
    };
    let keys = keys(source, &raw, &suite, encryption, &field)?;
    let mode = mode(source, &raw, protected, &field)?;
    let encap = encap(source, &raw, protected, &field)?;
    let replay_window =
        validate::replay_window(source, raw.replay_window.as_ref(), &field("replay_window"))?;
    let peer_replay_window = match (&raw.peer_replay_window, raw.direction) {
        (Some(w), Direction::In) => {
            let msg =
                "applies to outbound SAs only (the peer's window for what this gateway sends)";
            return Err(source.error(w.span(), field("peer_replay_window"), msg));
        }
        (w, _) => validate::peer_replay_window(source, w.as_ref(), &field("peer_replay_window"))?,
    };
    let tfc_pad_to =
        match &raw.tfc_pad_to {
            None => None,
            Some(t) => Some(u16::try_from(*t.get_ref()).map_err(|_| {
                source.error(t.span(), field("tfc_pad_to"), "out of range 0..=65535")
            })?),
        };
    let lifetime = lifetime(source, raw.lifetime.as_ref(), &field)?;
    let selectors = raw
        .selectors
        .iter()
        .enumerate()
        .map(|(j, s)| {
            let s = s.get_ref();
            validate::selector(
                source,
                &j.to_string(),
                &field("selectors"),
                (&s.src, &s.dst),
                s.protocol.as_ref(),
                (s.src_ports.as_ref(), s.dst_ports.as_ref()),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SaConfig {
        name: raw.name.into_inner(),
        direction: raw.direction,
        encryption,
        integrity,
        params: SaParams {
            spi,
            protocol: if ah {
                IpsecProtocol::Ah
            } else {
                IpsecProtocol::Esp
            },
            mode,
            encap,
            esn: raw.esn.unwrap_or(false),
            replay_window,
            lifetime,
            selectors,
            tfc_pad_to,
        },
        keys,
        peer_replay_window,
        line,
    })
}

fn spi(
    source: &Source<'_>,
    raw: &RawSa,
    field: &dyn Fn(&str) -> String,
) -> Result<u32, ConfigError> {
    let value = raw.spi.get_ref().0;
    // RFC 4303 §2.1: 0 is reserved for local use, 1..=255 by IANA.
    match u32::try_from(value) {
        Ok(spi) if spi > limits::MAX_RESERVED_SPI => Ok(spi),
        Ok(_) => Err(source.error(
            raw.spi.span(),
            field("spi"),
            format!("SPI {value:#x} is reserved (RFC 4303 §2.1: 0..=255); use 256 or more"),
        )),
        Err(_) => Err(source.error(
            raw.spi.span(),
            field("spi"),
            format!("SPI {value:#x} does not fit in 32 bits"),
        )),
    }
}

/// The suite: encryption plus integrity (defaulting to none for the
/// combined modes, required for the others, RFC 7296 §3.3).
fn suite(
    source: &Source<'_>,
    raw: &RawSa,
    field: &dyn Fn(&str) -> String,
) -> Result<(Encryption, Integrity, Suite), ConfigError> {
    let encryption = *raw.encryption.get_ref();
    let combined = encryption.is_combined();
    let integrity = match &raw.integrity {
        Some(i) => *i.get_ref(),
        None if combined => Integrity::None,
        None => {
            let msg = format!(
                "encryption {:?} needs an integrity algorithm (sha256, sha384 or sha512)",
                encryption.as_str()
            );
            return Err(source.error(raw.encryption.span(), field("integrity"), msg));
        }
    };
    let (encr, bits) = encryption.transform();
    let integ = integrity.transform();
    let suite = Suite::esp(encr, bits, integ);
    if let Err(e) = suite.validate() {
        let span = raw
            .integrity
            .as_ref()
            .map_or(raw.encryption.span(), |i| i.span());
        let msg = match e {
            CryptoError::InvalidSuite if combined => format!(
                "{:?} is a combined mode; integrity must be \"none\" (RFC 7296 §3.3)",
                encryption.as_str()
            ),
            CryptoError::InvalidSuite => format!(
                "{:?} needs an integrity algorithm other than \"none\"",
                encryption.as_str()
            ),
            other => format!("unsupported algorithm combination: {other}"),
        };
        return Err(source.error(span, field("integrity"), msg));
    }
    Ok((encryption, integrity, suite))
}

/// AH's suite (RFC 4302, RFC 8221 §3): integrity only, so `encryption`
/// must be "null" and `integrity` an HMAC; and plain IP (protocol 51):
/// UDP encapsulation is ESP's alone (RFC 3948), so `encap` must be
/// "none".
fn ah_suite(
    source: &Source<'_>,
    raw: &RawSa,
    field: &dyn Fn(&str) -> String,
) -> Result<(Encryption, Integrity, Suite), ConfigError> {
    let encryption = *raw.encryption.get_ref();
    if encryption != Encryption::Null {
        let msg = format!(
            "protocol \"ah\" authenticates only: encryption must be \"null\", not {:?}",
            encryption.as_str()
        );
        return Err(source.error(raw.encryption.span(), field("encryption"), msg));
    }
    let integrity = match &raw.integrity {
        Some(i) if *i.get_ref() != Integrity::None => *i.get_ref(),
        other => {
            let span = other.as_ref().map_or(raw.encryption.span(), Spanned::span);
            let msg = "protocol \"ah\" needs an integrity algorithm (sha256, sha384 or sha512)";
            return Err(source.error(span, field("integrity"), msg));
        }
    };
    if raw
        .encap
        .as_ref()
        .is_none_or(|e| *e.get_ref() != RawEncap::None)
    {
        let span = raw
            .encap
            .as_ref()
            .map_or(raw.encryption.span(), Spanned::span);
        let msg = "protocol \"ah\" is IP protocol 51, never in UDP (RFC 3948 is ESP's): set encap = \"none\"";
        return Err(source.error(span, field("encap"), msg));
    }
    Ok((encryption, integrity, Suite::ah(integrity.transform())))
}

/// Both keys, checked against the suite's lengths.
fn keys(
    source: &Source<'_>,
    raw: &RawSa,
    suite: &Suite,
    encryption: Encryption,
    field: &dyn Fn(&str) -> String,
) -> Result<SaKeys, ConfigError> {
    let table = raw.encryption.span();
    let encr = key(
        source,
        raw.key.as_ref(),
        suite.encr_key_len(),
        ("key", table.clone()),
        field,
        || match suite.encr {
            EncrId::AES_GCM_16 | EncrId::CHACHA20_POLY1305 | EncrId::NULL_AUTH_AES_GMAC => format!(
                "{} needs {} bytes: a {}-byte key and the 4-byte salt (RFC 4106 §8.1)",
                encryption.as_str(),
                suite.encr_key_len(),
                suite.encr_key_len() - 4
            ),
            _ => format!(
                "{} needs {} bytes",
                encryption.as_str(),
                suite.encr_key_len()
            ),
        },
    )?;
    let integ = key(
        source,
        raw.integrity_key.as_ref(),
        suite.integ_key_len(),
        ("integrity_key", table),
        field,
        || {
            format!(
                "the integrity algorithm needs {} bytes",
                suite.integ_key_len()
            )
        },
    )?;
    Ok(SaKeys {
        encryption: encr,
        integrity: integ,
    })
}

/// One hex key of exactly `len` bytes (none when `len` is 0); a missing
/// one is reported at `near`.
fn key(
    source: &Source<'_>,
    text: Option<&Spanned<String>>,
    len: usize,
    (name, near): (&str, Range<usize>),
    field: &dyn Fn(&str) -> String,
    need: impl Fn() -> String,
) -> Result<Zeroizing<Vec<u8>>, ConfigError> {
    match text {
        None if len == 0 => Ok(Zeroizing::new(Vec::new())),
        // Reported at the algorithm that asks for the key.
        None => Err(source.error(near, field(name), format!("missing; {}", need()))),
        Some(t) if len == 0 => Err(source.error(
            t.span(),
            field(name),
            "not used by these algorithms; remove it",
        )),
        Some(t) => {
            let bytes =
                values::hex_key(t.get_ref()).map_err(|m| source.error(t.span(), field(name), m))?;
            if bytes.len() != len {
                let msg = format!("key is {} bytes; {}", bytes.len(), need());
                return Err(source.error(t.span(), field(name), msg));
            }
            Ok(bytes)
        }
    }
}

/// Tunnel endpoints: `local` (default: the protected address; must be
/// it, since that is where we receive) and `remote`, one family.
fn mode(
    source: &Source<'_>,
    raw: &RawSa,
    protected: &ProtectedSettings,
    field: &dyn Fn(&str) -> String,
) -> Result<SaMode, ConfigError> {
    let address = |text: &Spanned<String>, name: &str| {
        text.get_ref().parse::<IpAddr>().map_err(|_| {
            let msg = format!("{:?} is not an IP address", text.get_ref());
            source.error(text.span(), field(name), msg)
        })
    };
    if raw.mode == Some(RawMode::Transport) {
        for (text, name) in [(&raw.local, "local"), (&raw.remote, "remote")] {
            if let Some(t) = text {
                address(t, name)?;
            }
        }
        return Ok(SaMode::Transport);
    }
    let local = match &raw.local {
        None => protected.local,
        Some(t) => {
            let local = address(t, "local")?;
            if local != protected.local {
                let msg = format!(
                    "tunnel local {local} must be the protected address {} (packets are received there)",
                    protected.local
                );
                return Err(source.error(t.span(), field("local"), msg));
            }
            local
        }
    };
    let Some(remote_text) = &raw.remote else {
        let msg = "tunnel mode needs remote = \"<peer gateway address>\"";
        return Err(source.error(raw.name.span(), field("remote"), msg));
    };
    let remote = address(remote_text, "remote")?;
    if remote.is_ipv4() != local.is_ipv4() {
        let msg = format!("remote {remote} and local {local} are of different address families");
        return Err(source.error(remote_text.span(), field("remote"), msg));
    }
    Ok(SaMode::Tunnel { local, remote })
}

/// UDP encapsulation (RFC 3948, the default) or plain ESP, which needs the
/// raw socket.
fn encap(
    source: &Source<'_>,
    raw: &RawSa,
    protected: &ProtectedSettings,
    field: &dyn Fn(&str) -> String,
) -> Result<Option<UdpEncap>, ConfigError> {
    let plain = raw
        .encap
        .as_ref()
        .is_some_and(|e| *e.get_ref() == RawEncap::None);
    if plain {
        if let Some(port) = &raw.remote_port {
            let msg = "remote_port only applies to encap = \"udp\"";
            return Err(source.error(port.span(), field("remote_port"), msg));
        }
        if !protected.raw_esp {
            let msg = "encap = \"none\" (plain ESP) needs raw_esp = true in [protected]";
            let span = raw.encap.as_ref().map_or(0..0, Spanned::span);
            return Err(source.error(span, field("encap"), msg));
        }
        return Ok(None);
    }
    let remote_port = match &raw.remote_port {
        None => limits::NATT_PORT,
        Some(p) => match u16::try_from(*p.get_ref()) {
            Ok(port) if port != 0 => port,
            _ => {
                let msg = format!("port {} out of range 1..=65535", p.get_ref());
                return Err(source.error(p.span(), field("remote_port"), msg));
            }
        },
    };
    Ok(Some(UdpEncap {
        local_port: protected.udp_port,
        remote_port,
    }))
}

/// `[sa.lifetime]`; each soft limit must not exceed its hard limit.
fn lifetime(
    source: &Source<'_>,
    raw: Option<&Spanned<RawLifetime>>,
    field: &dyn Fn(&str) -> String,
) -> Result<LifetimeLimits, ConfigError> {
    let Some(spanned) = raw else {
        return Ok(LifetimeLimits::default());
    };
    let l = spanned.get_ref();
    let pairs = [
        ("bytes", l.soft_bytes, l.hard_bytes),
        ("packets", l.soft_packets, l.hard_packets),
        ("seconds", l.soft_seconds, l.hard_seconds),
    ];
    for (what, soft, hard) in pairs {
        if let (Some(s), Some(h)) = (soft, hard) {
            if s > h {
                let msg = format!("soft_{what} {s} exceeds hard_{what} {h}");
                return Err(source.error(
                    spanned.span(),
                    field(&format!("lifetime.soft_{what}")),
                    msg,
                ));
            }
        }
    }
    Ok(LifetimeLimits {
        soft_bytes: l.soft_bytes,
        hard_bytes: l.hard_bytes,
        soft_packets: l.soft_packets,
        hard_packets: l.hard_packets,
        soft_time: l.soft_seconds.map(Duration::from_secs),
        hard_time: l.hard_seconds.map(Duration::from_secs),
    })
}
