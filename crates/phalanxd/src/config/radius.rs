//! `[radius]`: the RADIUS servers that authenticate End-Users of
//! connections with `remote_auth = "eap-radius"` (EAP pass-through, RFC
//! 3579) and take their accounting (RFC 2866); and [`EapSettings`], how
//! each connection's End-Users authenticate by EAP.
//!
//! ```toml
//! [radius]
//! nas_identifier = "gw1"       # default "phalanx"
//! timeout = "2s"               # before a request is sent again
//! retransmits = 2              # then the next server
//! dead_time = "30s"            # a server that stopped answering is skipped
//! interim_interval = "10m"     # accounting updates (the server's
//!                              # Acct-Interim-Interval wins); off if absent
//! source = "10.2.0.1"          # the address requests come from
//!
//! [[radius.server]]
//! address = "10.2.0.5"
//! secret = "shared secret"
//! auth_port = 1812             # default
//! acct_port = 1813             # default; 0: no accounting to this server
//! ```

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use phalanx_eap::radius::client::{ClientConfig, ServerConfig};
use phalanx_eap::tls::TlsServerConfig;
use phalanx_eap::LocalSecrets;
use serde::Deserialize;
use toml::Spanned;
use zeroize::Zeroizing;

use super::{values, ConfigError, Source};

/// `[radius]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRadius {
    pub(crate) nas_identifier: Option<Spanned<String>>,
    pub(crate) timeout: Option<Spanned<String>>,
    pub(crate) retransmits: Option<Spanned<u32>>,
    pub(crate) dead_time: Option<Spanned<String>>,
    pub(crate) interim_interval: Option<Spanned<String>>,
    pub(crate) source: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) server: Vec<Spanned<RawRadiusServer>>,
}

/// `[[radius.server]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRadiusServer {
    pub(crate) address: Spanned<String>,
    pub(crate) secret: Spanned<String>,
    pub(crate) auth_port: Option<Spanned<u16>>,
    pub(crate) acct_port: Option<Spanned<u16>>,
}

/// `[radius]`, checked.
#[derive(Clone, Debug)]
pub struct RadiusSettings {
    /// The client's servers and timers.
    pub client: ClientConfig,
    /// The default interim-update interval; `None`: only when a server
    /// asks for one.
    pub interim: Option<Duration>,
    /// The address requests come from; `None`: the routing table's choice.
    pub source: Option<IpAddr>,
}

/// How one connection's End-Users authenticate by EAP (`remote_auth`).
#[derive(Clone, Debug)]
pub enum EapMethod {
    /// `"eap-mschapv2"`: here, against `[[eap_secret]]`.
    Mschapv2,
    /// `"eap-radius"`: relayed to `[radius]`.
    Radius,
    /// `"eap-tls"`: here, with the connection's certificate and `ca`.
    Tls(Arc<TlsServerConfig>),
}

impl EapMethod {
    /// Its `remote_auth` value, which `phalanxctl` shows.
    pub fn name(&self) -> &'static str {
        match self {
            EapMethod::Mschapv2 => "eap-mschapv2",
            EapMethod::Radius => "eap-radius",
            EapMethod::Tls(_) => "eap-tls",
        }
    }
}

/// How End-Users are authenticated by EAP: `[[eap_secret]]` for
/// `remote_auth = "eap-mschapv2"`, `[radius]` for `"eap-radius"`, each
/// connection's certificates for `"eap-tls"`.
#[derive(Clone, Debug, Default)]
pub struct EapSettings {
    /// The End-Users' EAP passwords, kept as NT hashes only.
    pub secrets: Arc<LocalSecrets>,
    /// The RADIUS servers.
    pub radius: Option<RadiusSettings>,
    /// The EAP method of each connection with EAP End-Users, by name.
    pub methods: HashMap<String, EapMethod>,
}

impl EapSettings {
    /// Whether connection `name`'s End-Users go to RADIUS.
    pub fn uses_radius(&self, name: &str) -> bool {
        matches!(self.methods.get(name), Some(EapMethod::Radius))
    }

    /// Connection `name`'s EAP method.
    pub fn method(&self, name: &str) -> Option<&EapMethod> {
        self.methods.get(name)
    }
}

/// Requests per server before the next: 1 + 2 retransmits by default.
const DEFAULT_RETRANSMITS: u32 = 2;
const MAX_RETRANSMITS: u32 = 10;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);
const DEFAULT_DEAD_TIME: Duration = Duration::from_secs(30);

/// `[radius]` into settings.
pub(crate) fn settings(
    source: &Source<'_>,
    raw: Option<Spanned<RawRadius>>,
) -> Result<Option<RadiusSettings>, ConfigError> {
    let Some(spanned) = raw else {
        return Ok(None);
    };
    let span = spanned.span();
    let raw = spanned.into_inner();
    let dur = |text: &Option<Spanned<String>>, field: &str, default: Option<Duration>| match text {
        None => Ok(default),
        Some(text) => values::duration(text.get_ref())
            .and_then(|d| {
                if d.is_zero() {
                    Err("must be longer than 0s".to_owned())
                } else {
                    Ok(Some(d))
                }
            })
            .map_err(|m| source.error(text.span(), format!("radius.{field}"), m)),
    };
    let timeout = dur(&raw.timeout, "timeout", Some(DEFAULT_TIMEOUT))?.unwrap_or(DEFAULT_TIMEOUT);
    let dead_time =
        dur(&raw.dead_time, "dead_time", Some(DEFAULT_DEAD_TIME))?.unwrap_or(DEFAULT_DEAD_TIME);
    let interim = dur(&raw.interim_interval, "interim_interval", None)?;
    let retransmits = match &raw.retransmits {
        None => DEFAULT_RETRANSMITS,
        Some(n) if *n.get_ref() <= MAX_RETRANSMITS => *n.get_ref(),
        Some(n) => {
            let msg = format!("at most {MAX_RETRANSMITS}");
            return Err(source.error(n.span(), "radius.retransmits", msg));
        }
    };
    let source_addr = match &raw.source {
        None => None,
        Some(text) => Some(text.get_ref().parse::<IpAddr>().map_err(|_| {
            let msg = format!("{:?} is not an IP address", text.get_ref());
            source.error(text.span(), "radius.source", msg)
        })?),
    };
    if raw.server.is_empty() {
        let msg = "at least one [[radius.server]] is needed";
        return Err(source.error(span, "radius.server", msg));
    }
    let mut servers = Vec::with_capacity(raw.server.len());
    for (i, spanned) in raw.server.iter().enumerate() {
        let server = spanned.get_ref();
        let field = |f: &str| format!("radius.server[{i}].{f}");
        let ip: IpAddr = server.address.get_ref().parse().map_err(|_| {
            let msg = format!("{:?} is not an IP address", server.address.get_ref());
            source.error(server.address.span(), field("address"), msg)
        })?;
        if let Some(from) = source_addr {
            if from.is_ipv4() != ip.is_ipv4() {
                let msg = format!("radius.source {from} is of the other address family");
                return Err(source.error(server.address.span(), field("address"), msg));
            }
        }
        if server.secret.get_ref().is_empty() {
            return Err(source.error(server.secret.span(), field("secret"), "an empty secret"));
        }
        let port =
            |p: &Option<Spanned<u16>>, default: u16| p.as_ref().map_or(default, |p| *p.get_ref());
        let auth_port = port(&server.auth_port, 1812);
        if auth_port == 0 {
            let span = server
                .auth_port
                .as_ref()
                .map_or(span.clone(), Spanned::span);
            return Err(source.error(span, field("auth_port"), "port 0"));
        }
        let acct_port = port(&server.acct_port, 1813);
        servers.push(ServerConfig {
            auth: SocketAddr::new(ip, auth_port),
            acct: (acct_port != 0).then(|| SocketAddr::new(ip, acct_port)),
            secret: Zeroizing::new(server.secret.get_ref().as_bytes().to_vec()),
        });
    }
    let nas_identifier = raw
        .nas_identifier
        .as_ref()
        .map_or_else(|| "phalanx".to_owned(), |n| n.get_ref().clone());
    Ok(Some(RadiusSettings {
        client: ClientConfig {
            servers,
            timeout,
            retransmits,
            dead_time,
            nas_identifier,
        },
        interim,
        source: source_addr,
    }))
}
