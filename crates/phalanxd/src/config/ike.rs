//! `[ike]` and `[[connection]]`: what the IKE thread runs
//! (`phalanx_ike::config::EndpointConfig`) and the outbound protect
//! policies each Child SA gets in the data plane ([`ChildPolicySet`]).
//!
//! IKE is on when the file has an `[ike]` section or a `[[connection]]`
//! ([`super::Config::ike`] is `None` otherwise, and the daemon opens no
//! IKE socket).

use std::collections::HashSet;
use std::fmt;
use std::ops::RangeInclusive;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use phalanx_eap::LocalSecrets;
use phalanx_ike::config::{
    Connection, EndpointConfig, EndpointLimits, LocalAuth, PoolConfig, RemoteAuth, StartAction,
};
use phalanx_ike::ts::to_selectors;
use phalanx_sa::Selector;
use toml::Spanned;

use super::connection::{self, Context};
use super::credentials::CredentialFingerprint;
use super::radius::EapSettings;
use super::raw_ike::{RawConnection, RawEapSecret, RawIke};
use super::{values, ConfigError, PolicyConfig, ProtectedSettings, Source};
use crate::limits;

/// One Child SA of one connection, as policies and SAs name it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChildRef {
    /// The connection's name.
    pub connection: String,
    /// The child's name in the connection.
    pub child: String,
}

impl fmt::Display for ChildRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.connection, self.child)
    }
}

/// The outbound protect policies of one child: one per data-plane selector
/// of every (local_ts, remote_ts) pair (ike-config-format.md), pointing at
/// the child's current outbound SA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildPolicySet {
    /// Whose policies.
    pub child: ChildRef,
    /// Their priority (lower first; `[[connection.child]] priority`, 1000).
    pub priority: u32,
    /// Whether a packet that finds no SA starts IKE (`start_action = "trap"`).
    pub trap: bool,
    /// The connection hands out virtual IPs: each End-User's Child SA
    /// gets policies of its own, for its narrowed selectors, when its
    /// outbound SA is installed (`install::peer`); `selectors` are then
    /// never installed.
    pub per_peer: bool,
    /// The selectors, source = our side.
    pub selectors: Vec<Selector>,
}

impl ChildPolicySet {
    /// The name of policy `n` of this set (`site-b/net#0`).
    pub fn policy_name(&self, n: usize) -> String {
        format!("{}#{n}", self.child)
    }
}

/// `[ike]` and the connections, validated.
#[derive(Clone, Debug)]
pub struct IkeSettings {
    /// The UDP port IKE listens on (`[ike] port`, 500, RFC 7296 §2).
    pub port: u16,
    /// What phalanx-ike runs.
    pub endpoint: EndpointConfig,
    /// Each child's outbound policies, in file order.
    pub child_policies: Vec<ChildPolicySet>,
    /// Per connection (same order): the SHA-256 of its credential files.
    fingerprints: Vec<CredentialFingerprint>,
    /// How End-Users authenticate by EAP: local passwords, RADIUS.
    pub eap: Arc<EapSettings>,
}

impl IkeSettings {
    /// The connection named `name`.
    pub fn connection(&self, name: &str) -> Option<&Connection> {
        self.endpoint.connections.iter().find(|c| c.name == name)
    }

    /// Takes the key and trust-anchor objects of `old` for every
    /// connection whose credential files are byte for byte those `old`
    /// read: phalanx-ike compares them by identity, and a connection it
    /// sees as unchanged keeps its SAs across a reload.
    pub fn adopt_unchanged_credentials(&mut self, old: &IkeSettings) {
        for (conn, print) in self.endpoint.connections.iter_mut().zip(&self.fingerprints) {
            let previous = old
                .endpoint
                .connections
                .iter()
                .zip(&old.fingerprints)
                .find(|(o, p)| o.name == conn.name && *p == print && !print.0.is_empty());
            let Some((prev, _)) = previous else {
                continue;
            };
            if let (LocalAuth::Signature { key, .. }, LocalAuth::Signature { key: old_key, .. }) =
                (&mut conn.local_auth, &prev.local_auth)
            {
                *key = old_key.clone();
            }
            if let (
                RemoteAuth::Signature { anchors },
                RemoteAuth::Signature {
                    anchors: old_anchors,
                },
            ) = (&mut conn.remote_auth, &prev.remote_auth)
            {
                *anchors = old_anchors.clone();
            }
        }
    }
}

/// What a reload does to the connections, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectionChanges {
    /// New connections.
    pub added: Vec<String>,
    /// Connections whose definition changed (their SAs are replaced).
    pub changed: Vec<String>,
    /// Connections no longer in the file (their SAs are deleted).
    pub removed: Vec<String>,
    /// Connections as they were (their SAs keep running).
    pub unchanged: usize,
}

/// Compares the connections of two configurations, as phalanx-ike does
/// when it decides which SAs a reload keeps.
pub fn connection_changes(
    old: Option<&IkeSettings>,
    new: Option<&IkeSettings>,
) -> ConnectionChanges {
    let none: &[Connection] = &[];
    let old = old.map_or(none, |s| s.endpoint.connections.as_slice());
    let new = new.map_or(none, |s| s.endpoint.connections.as_slice());
    let mut changes = ConnectionChanges::default();
    for conn in new {
        match old.iter().find(|o| o.name == conn.name) {
            Some(o) if same_connection(o, conn) => changes.unchanged += 1,
            Some(_) => changes.changed.push(conn.name.clone()),
            None => changes.added.push(conn.name.clone()),
        }
    }
    for o in old {
        if !new.iter().any(|c| c.name == o.name) {
            changes.removed.push(o.name.clone());
        }
    }
    changes
}

/// Whether two connections are the same for a reload
/// ([`Connection::same_for_reload`], phalanx-ike's own rule).
pub fn same_connection(a: &Connection, b: &Connection) -> bool {
    a.same_for_reload(b)
}

/// The IKE settings of the file, or `None` when it has neither `[ike]`
/// nor `[[connection]]`.
pub(crate) fn settings(
    source: &Source<'_>,
    raw_ike: Option<Spanned<RawIke>>,
    raw_connections: Vec<Spanned<RawConnection>>,
    protected: &ProtectedSettings,
    static_policies: &[PolicyConfig],
    pools: Vec<PoolConfig>,
    mut eap: EapSettings,
) -> Result<Option<IkeSettings>, ConfigError> {
    if raw_ike.is_none() && raw_connections.is_empty() {
        return Ok(None);
    }
    let raw_ike = raw_ike.map(Spanned::into_inner).unwrap_or_default();
    let (port, limits) = section(source, &raw_ike, protected)?;
    let base = Path::new(source.name).parent().unwrap_or(Path::new(""));
    let ctx = Context {
        source,
        base,
        protected,
        ike_port: port,
        pools: &pools,
        radius: eap.radius.is_some(),
    };
    let mut names = HashSet::new();
    let mut connections = Vec::with_capacity(raw_connections.len());
    let mut fingerprints = Vec::with_capacity(raw_connections.len());
    let mut child_policies = Vec::new();
    for (i, spanned) in raw_connections.into_iter().enumerate() {
        let raw = spanned.into_inner();
        let name_span = raw.name.span();
        let parsed = connection::connection(&ctx, i, raw)?;
        let conn = parsed.connection;
        if !names.insert(conn.name.clone()) {
            let msg = format!("duplicate connection name {:?}", conn.name);
            return Err(source.error(name_span, format!("connection[{i}].name"), msg));
        }
        let sets = policies(source, i, &conn, &parsed.priorities, name_span.clone())?;
        for set in &sets {
            check_names(source, (i, name_span.clone()), set, static_policies)?;
        }
        child_policies.extend(sets);
        if let Some(method) = parsed.eap {
            eap.methods.insert(conn.name.clone(), method);
        }
        connections.push(conn);
        fingerprints.push(parsed.fingerprint);
    }
    Ok(Some(IkeSettings {
        port,
        endpoint: EndpointConfig {
            connections,
            limits,
            pools,
        },
        child_policies,
        fingerprints,
        eap: Arc::new(eap),
    }))
}

/// `[ike]`: the port and the endpoint limits.
fn section(
    source: &Source<'_>,
    raw: &RawIke,
    protected: &ProtectedSettings,
) -> Result<(u16, EndpointLimits), ConfigError> {
    let defaults = EndpointLimits::default();
    let port = match &raw.port {
        None => limits::IKE_PORT,
        Some(p) => {
            let port = u16::try_from(*p.get_ref()).ok().filter(|&p| p != 0);
            match port {
                Some(port) if port != protected.udp_port => port,
                Some(port) => {
                    let msg = format!("port {port} is the ESP-in-UDP port of [protected] (IKE on it arrives with the non-ESP marker); use 500");
                    return Err(source.error(p.span(), "ike.port", msg));
                }
                None => {
                    let msg = format!("port {} out of range 1..=65535", p.get_ref());
                    return Err(source.error(p.span(), "ike.port", msg));
                }
            }
        }
    };
    let count =
        |v: &Option<Spanned<u32>>, field: &str, range: RangeInclusive<u32>, default: usize| {
            bounded(source, v.as_ref(), field, range).map(|v| v.map_or(default, |n| n as usize))
        };
    let half_open_max = count(
        &raw.half_open_max,
        "ike.half_open_max",
        1..=limits::MAX_HALF_OPEN,
        defaults.half_open_max,
    )?;
    let cookie_threshold = count(
        &raw.cookie_threshold,
        "ike.cookie_threshold",
        0..=limits::MAX_HALF_OPEN,
        defaults.cookie_threshold,
    )?;
    let retransmit_tries = bounded(
        source,
        raw.retransmit_tries.as_ref(),
        "ike.retransmit_tries",
        0..=limits::MAX_RETRANSMIT_TRIES,
    )?
    .unwrap_or(defaults.retransmit_tries);
    let fragment_mtu = count(
        &raw.fragment_mtu,
        "ike.fragment_mtu",
        limits::MIN_FRAGMENT_MTU..=u32::from(u16::MAX),
        defaults.fragment_mtu,
    )?;
    let retransmit_base = match &raw.retransmit_base {
        None => defaults.retransmit_base,
        Some(text) => {
            let d = values::duration(text.get_ref())
                .map_err(|m| source.error(text.span(), "ike.retransmit_base", m))?;
            if d < Duration::from_millis(10) || d > Duration::from_secs(60) {
                let msg = "retransmit_base must lie between 10ms and 60s";
                return Err(source.error(text.span(), "ike.retransmit_base", msg));
            }
            d
        }
    };
    Ok((
        port,
        EndpointLimits {
            half_open_max,
            cookie_threshold,
            retransmit_base,
            retransmit_tries,
            window_size: defaults.window_size,
            fragment_mtu,
        },
    ))
}

/// An optional integer that must lie in `range`.
fn bounded(
    source: &Source<'_>,
    value: Option<&Spanned<u32>>,
    field: &str,
    range: RangeInclusive<u32>,
) -> Result<Option<u32>, ConfigError> {
    match value {
        None => Ok(None),
        Some(v) if range.contains(v.get_ref()) => Ok(Some(*v.get_ref())),
        Some(v) => {
            let msg = format!(
                "{} out of range {}..={}",
                v.get_ref(),
                range.start(),
                range.end()
            );
            Err(source.error(v.span(), field, msg))
        }
    }
}

/// The policy sets of `conn`'s children.
fn policies(
    source: &Source<'_>,
    i: usize,
    conn: &Connection,
    priorities: &[u32],
    span: std::ops::Range<usize>,
) -> Result<Vec<ChildPolicySet>, ConfigError> {
    conn.children
        .iter()
        .zip(priorities)
        .enumerate()
        .map(|(j, (child, &priority))| {
            let selectors = to_selectors(&child.local_ts, &child.remote_ts).map_err(|e| {
                let msg = format!("these selectors need too many data-plane policies: {e}");
                source.error(
                    span.clone(),
                    format!("connection[{i}].child[{j}].local_ts"),
                    msg,
                )
            })?;
            Ok(ChildPolicySet {
                child: ChildRef {
                    connection: conn.name.clone(),
                    child: child.name.clone(),
                },
                priority,
                trap: conn.start_action == StartAction::Trap,
                per_peer: !conn.pools.is_empty(),
                selectors,
            })
        })
        .collect()
}

/// The generated policy names must not be those of `[[policy]]` tables.
fn check_names(
    source: &Source<'_>,
    (i, span): (usize, std::ops::Range<usize>),
    set: &ChildPolicySet,
    static_policies: &[PolicyConfig],
) -> Result<(), ConfigError> {
    for n in 0..set.selectors.len() {
        let name = set.policy_name(n);
        if let Some(p) = static_policies.iter().find(|p| p.name == name) {
            let msg = format!(
                "the child's policy {name:?} clashes with the [[policy]] of that name (line {}); rename one",
                p.line
            );
            return Err(source.error(span, format!("connection[{i}].name"), msg));
        }
    }
    Ok(())
}

/// `[[eap_secret]]`: identities unique, secrets not empty.
pub(crate) fn eap_secrets(
    source: &Source<'_>,
    raw: &[Spanned<RawEapSecret>],
) -> Result<LocalSecrets, ConfigError> {
    let mut seen = HashSet::new();
    let mut out = LocalSecrets::default();
    for (i, spanned) in raw.iter().enumerate() {
        let entry = spanned.get_ref();
        let id = entry.id.get_ref();
        if id.is_empty() || !seen.insert(id.clone()) {
            let msg = format!("EAP identities must be unique and not empty ({id:?})");
            return Err(source.error(entry.id.span(), format!("eap_secret[{i}].id"), msg));
        }
        if entry.secret.get_ref().is_empty() {
            let msg = "an empty password";
            return Err(source.error(entry.secret.span(), format!("eap_secret[{i}].secret"), msg));
        }
        out.add(id, entry.secret.get_ref());
    }
    Ok(out)
}
