//! From the file's [`RawConfig`] to a checked [`Config`]: the sections,
//! the policies, and the cross-references between them and the SAs (the
//! SAs themselves are checked in [`super::sa`]).

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;
use std::path::PathBuf;

use phalanx_sa::{PortRange, Selector};
use serde_path_to_error::Segment;
use toml::Spanned;

use phalanx_esp::FragmentPolicy;

use super::radius::{self, EapSettings};
use super::raw::{RawAction, RawClear, RawConfig, RawDaemon, RawPolicy, RawProtected, Word};
use super::{
    cluster, ike, pool, sa, values, ClearSettings, Config, ConfigError, DaemonSettings,
    PolicyConfig, PolicyTarget, ProtectedSettings, Source,
};
use crate::limits;

/// Parses the TOML into the raw schema, with the field path of the first
/// error.
pub(crate) fn deserialize(source: &Source<'_>) -> Result<RawConfig, ConfigError> {
    let deserializer =
        toml::Deserializer::parse(source.text).map_err(|e| toml_error(source, &e, ""))?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let field = field_path(e.path());
        toml_error(source, e.inner(), &field)
    })
}

/// A TOML error at its span.
fn toml_error(source: &Source<'_>, error: &toml::de::Error, field: &str) -> ConfigError {
    let span = error.span().unwrap_or(0..0);
    source.error(span, field, error.message().trim_end())
}

/// `sa[1].encryption`: the path as written in the file, without the
/// private keys that `Spanned` uses inside the deserializer.
fn field_path(path: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } if key.starts_with("$__") => {}
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Unknown => {}
        }
    }
    out
}

/// The whole file, checked.
pub(crate) fn config(source: &Source<'_>, raw: RawConfig) -> Result<Config, ConfigError> {
    let daemon = daemon(source, raw.daemon)?;
    let clear = clear(source, raw.clear)?;
    let protected = protected(source, raw.protected)?;
    let sas = sa::all(source, raw.sa, &protected, raw.cluster.is_some())?;
    let policies = policies(source, raw.policy, &sas)?;
    if raw.cluster.is_some() {
        cluster::ike_rules::check(source, &raw.connection, raw.radius.as_ref())?;
    }
    let pools = pool::all(source, &raw.pool)?;
    let eap = EapSettings {
        secrets: std::sync::Arc::new(ike::eap_secrets(source, &raw.eap_secret)?),
        radius: radius::settings(source, raw.radius)?,
        methods: Default::default(),
    };
    let ike = ike::settings(
        source,
        raw.ike,
        raw.connection,
        &protected,
        &policies,
        pools,
        eap,
    )?;
    let cluster = cluster::settings(source, raw.cluster, &protected)?;
    Ok(Config {
        path: PathBuf::from(source.name),
        daemon,
        clear,
        protected,
        sas,
        policies,
        ike,
        cluster,
    })
}

fn daemon(source: &Source<'_>, raw: RawDaemon) -> Result<DaemonSettings, ConfigError> {
    let workers = bounded(
        source,
        raw.workers,
        "daemon.workers",
        0..=limits::MAX_WORKERS,
        0,
    )?;
    let crypto_threads = bounded(
        source,
        raw.crypto_threads,
        "daemon.crypto_threads",
        0..=limits::MAX_CRYPTO_THREADS,
        0,
    )?;
    let metrics = match raw.metrics {
        None => None,
        Some(text) => Some(text.get_ref().parse::<SocketAddr>().map_err(|_| {
            let msg = format!(
                "{:?} is not an address:port (e.g. \"127.0.0.1:9180\")",
                text.get_ref()
            );
            source.error(text.span(), "daemon.metrics", msg)
        })?),
    };
    let log = match raw.log {
        None => limits::DEFAULT_LOG.to_owned(),
        Some(text) => {
            tracing_subscriber::EnvFilter::try_new(text.get_ref()).map_err(|e| {
                source.error(
                    text.span(),
                    "daemon.log",
                    format!("invalid log filter: {e}"),
                )
            })?;
            text.into_inner()
        }
    };
    let control_socket = match raw.control_socket {
        None => PathBuf::from(limits::DEFAULT_CONTROL_SOCKET),
        Some(path) if path.get_ref().is_empty() => {
            return Err(source.error(path.span(), "daemon.control_socket", "must not be empty"))
        }
        Some(path) => PathBuf::from(path.into_inner()),
    };
    let user = match raw.user {
        Some(user) if user.get_ref().is_empty() => {
            return Err(source.error(user.span(), "daemon.user", "must not be empty"))
        }
        user => user.map(Spanned::into_inner),
    };
    Ok(DaemonSettings {
        workers,
        crypto_threads,
        control_socket,
        metrics,
        log,
        log_format: raw.log_format.unwrap_or_default(),
        user,
    })
}

fn clear(source: &Source<'_>, raw: Spanned<RawClear>) -> Result<ClearSettings, ConfigError> {
    let raw = raw.into_inner();
    let tun = raw.tun;
    // Linux interface names: at most IFNAMSIZ - 1 bytes, no '/', no space.
    let name_ok = !tun.get_ref().is_empty()
        && tun.get_ref().len() <= limits::MAX_IFNAME_LEN
        && !tun.get_ref().contains(['/', ' ', '\0']);
    if !name_ok {
        let msg = format!(
            "{:?} is not an interface name (1 to {} bytes, no '/' or space)",
            tun.get_ref(),
            limits::MAX_IFNAME_LEN
        );
        return Err(source.error(tun.span(), "clear.tun", msg));
    }
    let mtu = bounded(
        source,
        raw.mtu,
        "clear.mtu",
        u32::from(limits::MIN_MTU)..=u32::from(limits::MAX_MTU),
        u32::from(limits::DEFAULT_MTU),
    )?;
    // In range MIN_MTU..=MAX_MTU, which are u16 values.
    let mtu = u16::try_from(mtu).unwrap_or(limits::DEFAULT_MTU);
    let queues = bounded(
        source,
        raw.queues,
        "clear.queues",
        0..=limits::MAX_WORKERS,
        0,
    )?;
    let ipv4 = match raw.address {
        None => None,
        Some(text) => match values::interface_address(text.get_ref()) {
            Ok((IpAddr::V4(a), len)) => Some((a, len)),
            Ok(_) => {
                return Err(source.error(
                    text.span(),
                    "clear.address",
                    "must be an IPv4 address (use address6 for IPv6)",
                ))
            }
            Err(msg) => return Err(source.error(text.span(), "clear.address", msg)),
        },
    };
    let ipv6 = match raw.address6 {
        None => None,
        Some(text) => match values::interface_address(text.get_ref()) {
            Ok((IpAddr::V6(a), len)) => Some((a, len)),
            Ok(_) => {
                return Err(source.error(text.span(), "clear.address6", "must be an IPv6 address"))
            }
            Err(msg) => return Err(source.error(text.span(), "clear.address6", msg)),
        },
    };
    Ok(ClearSettings {
        tun: tun.into_inner(),
        mtu,
        offload: raw.offload.unwrap_or(true),
        queues,
        ipv4,
        ipv6,
    })
}

fn protected(
    source: &Source<'_>,
    raw: Spanned<RawProtected>,
) -> Result<ProtectedSettings, ConfigError> {
    let raw = raw.into_inner();
    let local: IpAddr = raw.local.get_ref().parse().map_err(|_| {
        let msg = format!("{:?} is not an IP address", raw.local.get_ref());
        source.error(raw.local.span(), "protected.local", msg)
    })?;
    if local.is_unspecified() || local.is_multicast() {
        let msg = "must be a unicast address of this gateway (the tunnel endpoint)";
        return Err(source.error(raw.local.span(), "protected.local", msg));
    }
    let udp_port = match raw.udp_port {
        None => limits::NATT_PORT,
        Some(port) => match u16::try_from(*port.get_ref()) {
            Ok(p) if p != 0 => p,
            _ => {
                let msg = format!("port {} out of range 1..=65535", port.get_ref());
                return Err(source.error(port.span(), "protected.udp_port", msg));
            }
        },
    };
    let fragment = match raw.fragment {
        None => FragmentPolicy::default(),
        Some(word) => match word.get_ref().as_str() {
            "inner" => FragmentPolicy::Inner,
            "outer" => FragmentPolicy::Outer,
            other => {
                let msg = format!("{other:?} is neither \"inner\" nor \"outer\"");
                return Err(source.error(word.span(), "protected.fragment", msg));
            }
        },
    };
    Ok(ProtectedSettings {
        local,
        udp_port,
        raw_esp: raw.raw_esp.unwrap_or(false),
        fragment,
    })
}

/// `replay_window` of an SA or a child: 0 (off) or a window the replay
/// check supports; absent is the default.
pub(crate) fn replay_window(
    source: &Source<'_>,
    value: Option<&Spanned<u32>>,
    field: &str,
) -> Result<u32, ConfigError> {
    let Some(w) = value else {
        return Ok(limits::DEFAULT_REPLAY_WINDOW);
    };
    let v = *w.get_ref();
    if v != 0 && !(limits::MIN_REPLAY_WINDOW..=limits::MAX_REPLAY_WINDOW).contains(&v) {
        let msg = format!(
            "replay window {v} out of range: 0 (off) or {}..={}",
            limits::MIN_REPLAY_WINDOW,
            limits::MAX_REPLAY_WINDOW
        );
        return Err(source.error(w.span(), field, msg));
    }
    Ok(v)
}

/// `peer_replay_window`: the window the peer applies to what this
/// gateway sends (1 or more; absent: unknown, 0). Only a cluster reads
/// it (`phalanx_cluster::spreads_outbound`).
pub(crate) fn peer_replay_window(
    source: &Source<'_>,
    value: Option<&Spanned<u32>>,
    field: &str,
) -> Result<u32, ConfigError> {
    match value {
        None => Ok(0),
        Some(w) if *w.get_ref() == 0 => Err(source.error(
            w.span(),
            field,
            "0 is not a window: leave peer_replay_window out when the peer's window is unknown",
        )),
        Some(w) => Ok(*w.get_ref()),
    }
}

/// An optional integer in `range`; absent is `default`.
fn bounded(
    source: &Source<'_>,
    value: Option<Spanned<u32>>,
    field: &str,
    range: RangeInclusive<u32>,
    default: u32,
) -> Result<usize, ConfigError> {
    match value {
        None => Ok(default as usize),
        Some(v) if range.contains(v.get_ref()) => Ok(*v.get_ref() as usize),
        Some(v) => {
            let (min, max) = (range.start(), range.end());
            let msg = format!("{} out of range {min}..={max}", v.get_ref());
            Err(source.error(v.span(), field, msg))
        }
    }
}

fn policies(
    source: &Source<'_>,
    raw: Vec<Spanned<RawPolicy>>,
    sas: &[super::SaConfig],
) -> Result<Vec<PolicyConfig>, ConfigError> {
    let outbound: HashMap<&str, ()> = sas
        .iter()
        .filter(|sa| sa.direction == super::Direction::Out)
        .map(|sa| (sa.name.as_str(), ()))
        .collect();
    let inbound: HashSet<&str> = sas
        .iter()
        .filter(|sa| sa.direction == super::Direction::In)
        .map(|sa| sa.name.as_str())
        .collect();
    let mut names = HashSet::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, spanned) in raw.into_iter().enumerate() {
        let line = source.error(spanned.span(), "", "").line;
        let policy = spanned.into_inner();
        let field = |name: &str| format!("policy[{i}].{name}");
        if policy.name.get_ref().is_empty() {
            return Err(source.error(policy.name.span(), field("name"), "must not be empty"));
        }
        if !names.insert(policy.name.get_ref().clone()) {
            let msg = format!("duplicate policy name {:?}", policy.name.get_ref());
            return Err(source.error(policy.name.span(), field("name"), msg));
        }
        let selector = selector(
            source,
            &i.to_string(),
            "policy",
            (&policy.src, &policy.dst),
            policy.protocol.as_ref(),
            (policy.src_ports.as_ref(), policy.dst_ports.as_ref()),
        )?;
        let target = match (policy.action, policy.sa) {
            (RawAction::Protect, Some(sa)) if outbound.contains_key(sa.get_ref().as_str()) => {
                PolicyTarget::Protect(sa.into_inner())
            }
            (RawAction::Protect, Some(sa)) if inbound.contains(sa.get_ref().as_str()) => {
                let msg = format!(
                    "SA {:?} is inbound; protect needs an outbound SA",
                    sa.get_ref()
                );
                return Err(source.error(sa.span(), field("sa"), msg));
            }
            (RawAction::Protect, Some(sa)) => {
                let msg = format!("unknown SA {:?}", sa.get_ref());
                return Err(source.error(sa.span(), field("sa"), msg));
            }
            (RawAction::Protect, None) => {
                let msg = "action \"protect\" needs sa = \"<outbound SA name>\"";
                return Err(source.error(policy.name.span(), field("sa"), msg));
            }
            (_, Some(sa)) => {
                let msg = "only action \"protect\" takes an SA";
                return Err(source.error(sa.span(), field("sa"), msg));
            }
            (RawAction::Bypass, None) => PolicyTarget::Bypass,
            (RawAction::Discard, None) => PolicyTarget::Discard,
        };
        out.push(PolicyConfig {
            name: policy.name.into_inner(),
            priority: policy.priority.unwrap_or(limits::DEFAULT_POLICY_PRIORITY),
            selector,
            target,
            line,
        });
    }
    Ok(out)
}

/// A selector from its written parts; `table` and `index` name it in
/// messages (`policy[2].src`, `sa[0].selectors[1].src`).
pub(crate) fn selector(
    source: &Source<'_>,
    index: &str,
    table: &str,
    (src, dst): (&Spanned<String>, &Spanned<String>),
    protocol: Option<&Spanned<Word>>,
    (src_ports, dst_ports): (Option<&Spanned<Word>>, Option<&Spanned<Word>>),
) -> Result<Selector, ConfigError> {
    let field = |name: &str| format!("{table}[{index}].{name}");
    let src_prefix =
        values::prefix(src.get_ref()).map_err(|m| source.error(src.span(), field("src"), m))?;
    let dst_prefix =
        values::prefix(dst.get_ref()).map_err(|m| source.error(dst.span(), field("dst"), m))?;
    if src_prefix.family() != dst_prefix.family() {
        let msg = "src and dst must be of the same address family";
        return Err(source.error(dst.span(), field("dst"), msg));
    }
    let protocol = match protocol {
        None => None,
        Some(p) => values::protocol(p.get_ref())
            .map_err(|m| source.error(p.span(), field("protocol"), m))?,
    };
    let ports = |value: Option<&Spanned<Word>>, name: &str| match value {
        None => Ok(PortRange::ANY),
        Some(w) => values::ports(w.get_ref()).map_err(|m| source.error(w.span(), field(name), m)),
    };
    Ok(Selector {
        src: src_prefix,
        dst: dst_prefix,
        protocol,
        src_ports: ports(src_ports, "src_ports")?,
        dst_ports: ports(dst_ports, "dst_ports")?,
    })
}
