//! One `[[connection]]` table and its `[[connection.child]]` tables, into
//! `phalanx_ike::config::Connection`: addresses, identities,
//! authentication (secrets and PEM files, see [`super::credentials`]),
//! proposals, lifetimes and the children's selectors and proposals. Each
//! error names its field, e.g. `connection[0].child[1].esp_proposals[0]`.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::Duration;

use phalanx_crypto::sign::SignatureScheme;
use phalanx_ike::auth::Identity;
use phalanx_ike::config::{
    parse_signature_schemes, ChildConfig, ChildProposal, Connection, IkeProposal, LocalAuth,
    PoolConfig, ProposalParseError, RemoteAuth, SaLifetimeConfig, StartAction,
};
use phalanx_sa::{IpsecProtocol, SaMode};
use phalanx_wire::ike::TrafficSelector;
use toml::Spanned;
use zeroize::Zeroizing;

use super::credentials::{self, CredentialFingerprint, LoadedFile};
use super::radius::EapMethod;
use super::raw_ike::{RawChild, RawConnection};
use super::{eap_tls, validate, values, ConfigError, ProtectedSettings, Source};
use crate::limits;

/// A connection with what the daemon keeps beside it.
pub(crate) struct Parsed {
    pub(crate) connection: Connection,
    pub(crate) fingerprint: CredentialFingerprint,
    /// Each child's policy priority, in child order.
    pub(crate) priorities: Vec<u32>,
    /// How its End-Users authenticate by EAP, if they do.
    pub(crate) eap: Option<EapMethod>,
}

/// Where a connection is read: the file, its directory, `[protected]`
/// and the `[ike]` port.
pub(crate) struct Context<'a> {
    pub(crate) source: &'a Source<'a>,
    pub(crate) base: &'a Path,
    pub(crate) protected: &'a ProtectedSettings,
    pub(crate) ike_port: u16,
    /// The `[[pool]]` tables, for `pools` to name.
    pub(crate) pools: &'a [PoolConfig],
    /// Whether the file has `[radius]`.
    pub(crate) radius: bool,
}

/// `connection[i]`.
pub(crate) fn connection(
    ctx: &Context<'_>,
    i: usize,
    raw: RawConnection,
) -> Result<Parsed, ConfigError> {
    let field = |name: &str| format!("connection[{i}].{name}");
    let source = ctx.source;
    name(source, &raw.name, &field("name"))?;
    let (local_addr, remote_addr) = addresses(ctx, &raw, &field)?;
    let remote_port = port(source, raw.remote_port.as_ref(), &field("remote_port"))?;
    let (local_auth, remote_auth, fingerprint, chain_subject, eap) = auth(ctx, &raw, &field)?;
    let local_id = match &raw.local_id {
        Some(text) => identity(source, text, &field("local_id"))?,
        None => chain_subject.unwrap_or_else(|| Identity::from(local_addr)),
    };
    let remote_id = match &raw.remote_id {
        Some(text) => Some(identity(source, text, &field("remote_id"))?),
        None => None,
    };
    let ike_proposals = proposals(
        source,
        raw.proposals.as_ref(),
        &field("proposals"),
        IkeProposal::parse_list,
        IkeProposal::default_set,
    )?;
    let start_action = start_action(source, raw.start_action.as_ref(), remote_addr, &field)?;
    let dpd_delay = match &raw.dpd_delay {
        None => Some(limits::DEFAULT_DPD_DELAY),
        Some(text) => Some(duration(source, text, &field("dpd_delay"))?).filter(|d| !d.is_zero()),
    };
    let ike_lifetime = lifetime(
        source,
        (&raw.rekey_time, &raw.rekey_jitter, &raw.lifetime),
        limits::DEFAULT_IKE_REKEY,
        &field,
    )?;
    let force_encap = raw.force_encap.unwrap_or(false);
    if !force_encap && !ctx.protected.raw_esp {
        let msg = "without a NAT ESP is sent plain, which needs raw_esp = true in [protected]; set force_encap = true or raw_esp = true";
        return Err(source.error(raw.name.span(), field("force_encap"), msg));
    }
    let pools = pool_names(ctx, raw.pools.as_ref(), &field)?;
    let pubkey = matches!(local_auth, LocalAuth::Signature { .. });
    let local_signatures = signatures(
        source,
        raw.local_signature.as_ref(),
        pubkey,
        &field("local_signature"),
    )?;
    let remote_signatures = signatures(
        source,
        raw.remote_signature.as_ref(),
        pubkey,
        &field("remote_signature"),
    )?;
    if let (LocalAuth::Signature { key, .. }, Some(raw)) = (&local_auth, &raw.local_signature) {
        if !local_signatures.is_empty() && !local_signatures.iter().any(|s| s.fits(key.kind())) {
            let msg = format!("no scheme here signs with our {} key", key.kind());
            return Err(source.error(raw.span(), field("local_signature"), msg));
        }
    }
    let tunnel = SaMode::Tunnel {
        local: local_addr,
        remote: remote_addr.unwrap_or(unspecified(local_addr)),
    };
    let mut children = Vec::with_capacity(raw.child.len());
    let mut priorities = Vec::with_capacity(raw.child.len());
    let mut names = HashSet::new();
    for (j, spanned) in raw.child.into_iter().enumerate() {
        let name_span = spanned.get_ref().name.span();
        let raw_child = spanned.into_inner();
        if let (Some(ah), true) = (&raw_child.ah_proposals, force_encap) {
            let msg = "AH cannot be UDP-encapsulated (RFC 3948 carries ESP only): drop \
                       force_encap or use esp_proposals";
            return Err(source.error(
                ah.span(),
                format!("connection[{i}].child[{j}].ah_proposals"),
                msg,
            ));
        }
        let (child, priority) = child(source, i, j, raw_child, tunnel)?;
        if !names.insert(child.name.clone()) {
            let msg = format!("duplicate child name {:?} in this connection", child.name);
            return Err(source.error(name_span, format!("connection[{i}].child[{j}].name"), msg));
        }
        children.push(child);
        priorities.push(priority);
    }
    if children.is_empty() {
        let msg = "a connection needs at least one [[connection.child]]";
        return Err(source.error(raw.name.span(), field("child"), msg));
    }
    let connection = Connection {
        name: raw.name.into_inner(),
        local_addr,
        remote_addr,
        local_port: ctx.ike_port,
        remote_port,
        local_id,
        remote_id,
        local_auth,
        remote_auth,
        ike_proposals,
        children,
        start_action,
        dpd_delay,
        ike_lifetime,
        fragmentation: raw.fragmentation.unwrap_or(true),
        force_encap,
        send_certreq: raw.send_certreq.unwrap_or(pubkey),
        send_cert: raw.send_cert.unwrap_or(pubkey),
        mobike: raw.mobike.unwrap_or(true),
        pools,
        vips: Vec::new(),
        local_signatures,
        remote_signatures,
    };
    Ok(Parsed {
        connection,
        fingerprint,
        priorities,
        eap,
    })
}

/// The unspecified address of `addr`'s family.
fn unspecified(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

/// Connection and child names appear in SA and policy names and on the
/// command line: letters, digits, `-`, `_` and `.`.
fn name(source: &Source<'_>, value: &Spanned<String>, field: &str) -> Result<(), ConfigError> {
    let text = value.get_ref();
    let ok = !text.is_empty()
        && text.len() <= limits::MAX_IKE_NAME_LEN
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        return Ok(());
    }
    let msg = format!(
        "{text:?} is not a name: 1 to {} letters, digits, '-', '_' or '.'",
        limits::MAX_IKE_NAME_LEN
    );
    Err(source.error(value.span(), field, msg))
}

/// `local_addr` (default and only value: the protected address, where
/// the IKE and ESP sockets are bound) and `remote_addr`, one family.
fn addresses(
    ctx: &Context<'_>,
    raw: &RawConnection,
    field: &dyn Fn(&str) -> String,
) -> Result<(IpAddr, Option<IpAddr>), ConfigError> {
    let source = ctx.source;
    let parse = |text: &Spanned<String>, name: &str| {
        text.get_ref().parse::<IpAddr>().map_err(|_| {
            let msg = format!("{:?} is not an IP address", text.get_ref());
            source.error(text.span(), field(name), msg)
        })
    };
    let local = match &raw.local_addr {
        None => ctx.protected.local,
        Some(text) => {
            let local = parse(text, "local_addr")?;
            if local != ctx.protected.local {
                let msg = format!(
                    "local_addr {local} must be the protected address {} (the IKE and ESP sockets are bound there)",
                    ctx.protected.local
                );
                return Err(source.error(text.span(), field("local_addr"), msg));
            }
            local
        }
    };
    let remote = match &raw.remote_addr {
        None => None,
        Some(text) => {
            let remote = parse(text, "remote_addr")?;
            if remote.is_ipv4() != local.is_ipv4()
                || remote.is_unspecified()
                || remote.is_multicast()
            {
                let msg = format!(
                    "remote_addr {remote} must be a unicast address of the family of {local}"
                );
                return Err(source.error(text.span(), field("remote_addr"), msg));
            }
            Some(remote)
        }
    };
    Ok((local, remote))
}

/// A UDP port, 1..=65535, default 500 (RFC 7296 §2).
fn port(
    source: &Source<'_>,
    value: Option<&Spanned<u32>>,
    field: &str,
) -> Result<u16, ConfigError> {
    match value {
        None => Ok(limits::IKE_PORT),
        Some(p) => match u16::try_from(*p.get_ref()) {
            Ok(port) if port != 0 => Ok(port),
            _ => {
                let msg = format!("port {} out of range 1..=65535", p.get_ref());
                Err(source.error(p.span(), field, msg))
            }
        },
    }
}

fn identity(
    source: &Source<'_>,
    text: &Spanned<String>,
    field: &str,
) -> Result<Identity, ConfigError> {
    Identity::parse_config(text.get_ref()).map_err(|e| {
        let msg = format!("{:?} is not an identity: {e}", text.get_ref());
        source.error(text.span(), field, msg)
    })
}

fn duration(
    source: &Source<'_>,
    text: &Spanned<String>,
    field: &str,
) -> Result<Duration, ConfigError> {
    values::duration(text.get_ref()).map_err(|m| source.error(text.span(), field, m))
}

/// What the auth fields give: our credentials, what the peer must show,
/// the files' fingerprint, our certificate's subject (the default local
/// identity with certificates), and the EAP method of the peer.
type Auth = (
    LocalAuth,
    RemoteAuth,
    CredentialFingerprint,
    Option<Identity>,
    Option<EapMethod>,
);

/// How one side authenticates.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Psk,
    Pubkey,
    /// EAP (RFC 7296 §2.16), the peer only.
    Eap(EapKind),
}

/// Which EAP the peer runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum EapKind {
    /// EAP-MSCHAPv2 here, `[[eap_secret]]`.
    Mschapv2,
    /// Relayed to `[radius]`.
    Radius,
    /// EAP-TLS here, with our certificate, the End-Users' from `ca`.
    Tls,
}

/// `auth` (ours; also spelt `local_auth`) and `remote_auth` (the peer's;
/// as ours when absent), with the fields they need: `psk` when either
/// side uses a PSK, `certificate` and `private_key` when we sign, `ca` when
/// the peer signs (or beside our certificate). Fields neither uses are
/// refused.
fn auth(
    ctx: &Context<'_>,
    raw: &RawConnection,
    field: &dyn Fn(&str) -> String,
) -> Result<Auth, ConfigError> {
    let source = ctx.source;
    let local = match raw.auth.get_ref().as_str() {
        "psk" => Method::Psk,
        "pubkey" => Method::Pubkey,
        other => {
            let msg = format!("unknown auth {other:?}; expected \"psk\" or \"pubkey\"");
            return Err(source.error(raw.auth.span(), field("auth"), msg));
        }
    };
    let remote = match raw.remote_auth.as_ref() {
        None => local,
        Some(how) => match how.get_ref().as_str() {
            "psk" => Method::Psk,
            "pubkey" => Method::Pubkey,
            "eap-mschapv2" => Method::Eap(EapKind::Mschapv2),
            "eap-tls" => Method::Eap(EapKind::Tls),
            "eap-radius" if ctx.radius => Method::Eap(EapKind::Radius),
            "eap-radius" => {
                let msg = "remote_auth = \"eap-radius\" needs a [radius] section with its servers";
                return Err(source.error(how.span(), field("remote_auth"), msg));
            }
            other => {
                let msg = format!(
                    "unknown remote_auth {other:?}; expected \"psk\", \"pubkey\", \"eap-mschapv2\" (local [[eap_secret]]), \"eap-tls\" (End-User certificates of `ca`) or \"eap-radius\" (EAP pass-through to [radius]), or leave it out: the peer then authenticates as `auth` says"
                );
                return Err(source.error(how.span(), field("remote_auth"), msg));
            }
        },
    };
    let uses_psk = local == Method::Psk || remote == Method::Psk;
    let eap_tls = remote == Method::Eap(EapKind::Tls);
    if eap_tls && local != Method::Pubkey {
        let msg = "remote_auth = \"eap-tls\" needs auth = \"pubkey\": the EAP-TLS server shows this connection's certificate";
        return Err(source.error(raw.auth.span(), field("auth"), msg));
    }
    if !eap_tls {
        eap_tls::refuse_unused(source, raw, field)?;
    }
    let stray = |present: bool, name: &str, why: &str| -> Result<(), ConfigError> {
        if present {
            let msg = format!("not used: {why}; remove it");
            return Err(source.error(raw.auth.span(), field(name), msg));
        }
        Ok(())
    };
    stray(
        raw.psk.is_some() && !uses_psk,
        "psk",
        "neither side authenticates with a PSK",
    )?;
    stray(
        raw.certificate.is_some() && local != Method::Pubkey,
        "certificate",
        "we do not sign (auth is not \"pubkey\")",
    )?;
    stray(
        raw.private_key.is_some() && local != Method::Pubkey,
        "private_key",
        "we do not sign (auth is not \"pubkey\")",
    )?;
    stray(
        raw.ca.is_some() && local != Method::Pubkey && remote != Method::Pubkey,
        "ca",
        "the peer does not sign (remote_auth is not \"pubkey\" or \"eap-tls\")",
    )?;
    let secret = if uses_psk {
        let Some(text) = &raw.psk else {
            let msg = "a PSK side (auth or remote_auth = \"psk\") needs psk = \"<shared secret>\"";
            return Err(source.error(raw.auth.span(), field("psk"), msg));
        };
        Some(psk(text.get_ref()).map_err(|m| source.error(text.span(), field("psk"), m))?)
    } else {
        None
    };
    let missing = |name: &str, what: &str, why: &str| {
        let msg = format!("{why} needs {name} = {what}");
        source.error(raw.auth.span(), field(name), msg)
    };
    // A missing field is named before any file is read, and every file is
    // read before any is parsed: a file that cannot be read is named first.
    if raw.ca.is_none() && remote == Method::Pubkey {
        return Err(missing(
            "ca",
            "[\"<PEM file>\", ...]",
            "a peer that signs (remote_auth = \"pubkey\")",
        ));
    }
    if raw.ca.is_none() && eap_tls {
        return Err(missing(
            "ca",
            "[\"<PEM file>\", ...] (the CAs of the End-Users' certificates)",
            "remote_auth = \"eap-tls\"",
        ));
    }
    let mut signing = None;
    if local == Method::Pubkey {
        let why = "auth = \"pubkey\"";
        let cert = raw
            .certificate
            .as_ref()
            .ok_or_else(|| missing("certificate", "\"<PEM file>\"", why))?;
        let key = raw
            .private_key
            .as_ref()
            .ok_or_else(|| missing("private_key", "\"<PEM file>\"", why))?;
        signing = Some((
            credentials::read(source, ctx.base, cert, &field("certificate"))?,
            credentials::read(source, ctx.base, key, &field("private_key"))?,
        ));
    }
    // The CAs: required when the peer signs (checked above), read and
    // checked whenever given.
    let ca_files = match raw.ca.as_ref() {
        None => None,
        Some(ca) => {
            if ca.get_ref().is_empty() {
                return Err(source.error(ca.span(), field("ca"), "needs at least one CA file"));
            }
            let files = ca
                .get_ref()
                .iter()
                .enumerate()
                .map(|(n, f)| {
                    credentials::read(source, ctx.base, f, &format!("{}[{n}]", field("ca")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Some(files)
        }
    };
    let (local_auth, subject) = match (&signing, &secret) {
        (Some((cert_file, key_file)), _) => {
            let chain = credentials::certificate_chain(source, cert_file, &field("certificate"))?;
            let subject = phalanx_ike::auth::certificate_subject(&chain[0]).map_err(|e| {
                let msg = format!("{}: {e}", cert_file.path.display());
                source.error(cert_file.span.clone(), field("certificate"), msg)
            })?;
            let signing_key = credentials::private_key(source, key_file, &field("private_key"))?;
            (
                LocalAuth::Signature {
                    key: signing_key,
                    chain,
                },
                Some(subject),
            )
        }
        (None, Some(secret)) => (LocalAuth::Psk(secret.clone()), None),
        // Checked above: we sign or have the PSK.
        (None, None) => return Err(missing("psk", "\"<shared secret>\"", "auth")),
    };
    let anchors = match &ca_files {
        Some(files) => Some(credentials::trust_anchors(source, files, &field("ca"))?),
        None => None,
    };
    let files: Vec<_> = signing
        .iter()
        .flat_map(|(c, k)| [c, k])
        .chain(ca_files.iter().flatten())
        .collect();
    let remote_auth = match (remote, secret, anchors) {
        (Method::Psk, Some(secret), _) => RemoteAuth::Psk(secret),
        (Method::Pubkey, _, Some(anchors)) => RemoteAuth::Signature { anchors },
        (Method::Eap(_), _, _) => RemoteAuth::Eap,
        // Checked above: a PSK side has its secret, a signing peer its CAs.
        _ => return Err(missing("psk", "\"<shared secret>\"", "remote_auth")),
    };
    let key = signing.as_ref().map(|(_, key)| key);
    let eap = eap_method(
        source,
        raw,
        remote,
        &local_auth,
        key,
        ca_files.as_deref(),
        field,
    )?;
    let fingerprint = credentials::fingerprint(files);
    Ok((local_auth, remote_auth, fingerprint, subject, eap))
}

/// The End-Users' EAP method (`remote_auth = "eap-..."`), with the
/// connection's credentials for EAP-TLS.
fn eap_method(
    source: &Source<'_>,
    raw: &RawConnection,
    remote: Method,
    local_auth: &LocalAuth,
    key: Option<&LoadedFile>,
    cas: Option<&[LoadedFile]>,
    field: &dyn Fn(&str) -> String,
) -> Result<Option<EapMethod>, ConfigError> {
    let kind = match remote {
        Method::Eap(kind) => kind,
        Method::Psk | Method::Pubkey => return Ok(None),
    };
    Ok(Some(match kind {
        EapKind::Mschapv2 => EapMethod::Mschapv2,
        EapKind::Radius => EapMethod::Radius,
        EapKind::Tls => {
            // Checked in `auth`: we sign (certificate and key read) and
            // have CAs.
            let (LocalAuth::Signature { chain, .. }, Some(key), Some(cas)) = (local_auth, key, cas)
            else {
                let msg = "remote_auth = \"eap-tls\" needs certificate, private_key and ca";
                return Err(source.error(raw.auth.span(), field("remote_auth"), msg));
            };
            let credentials = eap_tls::Credentials { chain, key, cas };
            EapMethod::Tls(eap_tls::server(source, raw, &credentials, field)?)
        }
    }))
}

/// A PSK: UTF-8 text, or `0x` and hex digits.
fn psk(text: &str) -> Result<Zeroizing<Vec<u8>>, String> {
    let bytes = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(_) => values::hex_key(text)?,
        None => Zeroizing::new(text.as_bytes().to_vec()),
    };
    if bytes.len() < limits::MIN_PSK_LEN {
        return Err(format!(
            "the shared secret is {} bytes; use at least {} (RFC 7296 §2.15: it must be hard to guess)",
            bytes.len(),
            limits::MIN_PSK_LEN
        ));
    }
    Ok(bytes)
}

/// A list of proposal strings (each may be `default` or several joined by
/// commas); absent means the defaults.
fn proposals<T>(
    source: &Source<'_>,
    list: Option<&Spanned<Vec<Spanned<String>>>>,
    field: &str,
    parse: fn(&str) -> Result<Vec<T>, ProposalParseError>,
    defaults: fn() -> Vec<T>,
) -> Result<Vec<T>, ConfigError> {
    let Some(list) = list else {
        return Ok(defaults());
    };
    if list.get_ref().is_empty() {
        return Err(source.error(
            list.span(),
            field,
            "needs at least one proposal (or leave it out for the defaults)",
        ));
    }
    let mut out = Vec::new();
    for (n, item) in list.get_ref().iter().enumerate() {
        let parsed = parse(item.get_ref()).map_err(|e| {
            source.error(item.span(), format!("{field}[{n}]"), proposal_message(&e))
        })?;
        out.extend(parsed);
    }
    Ok(out)
}

/// `unknown token "aes999" (unknown algorithm) in proposal "..."`.
fn proposal_message(e: &ProposalParseError) -> String {
    if e.token.is_empty() {
        format!("proposal {:?}: {}", e.proposal, e.reason)
    } else {
        format!(
            "unknown token {:?} ({}) in proposal {:?}",
            e.token, e.reason, e.proposal
        )
    }
}

fn start_action(
    source: &Source<'_>,
    value: Option<&Spanned<String>>,
    remote: Option<IpAddr>,
    field: &dyn Fn(&str) -> String,
) -> Result<StartAction, ConfigError> {
    let Some(value) = value else {
        return Ok(StartAction::None);
    };
    let action = match value.get_ref().as_str() {
        "none" => StartAction::None,
        "start" => StartAction::Start,
        "trap" => StartAction::Trap,
        other => {
            let msg =
                format!("unknown start_action {other:?}; expected \"none\", \"start\" or \"trap\"");
            return Err(source.error(value.span(), field("start_action"), msg));
        }
    };
    if action != StartAction::None && remote.is_none() {
        let msg = format!(
            "start_action = {:?} needs remote_addr (whom to initiate to)",
            value.get_ref()
        );
        return Err(source.error(value.span(), field("start_action"), msg));
    }
    Ok(action)
}

/// The `rekey_time`, `rekey_jitter` and `lifetime` fields of a table.
type LifetimeFields<'a> = (
    &'a Option<Spanned<String>>,
    &'a Option<Spanned<String>>,
    &'a Option<Spanned<String>>,
);

/// `rekey_time`, `rekey_jitter` and `lifetime`: jitter defaults to a tenth
/// of the rekey time, the hard lifetime to 110 % of it; the jitter must
/// stay below the rekey time and the lifetime above it.
fn lifetime(
    source: &Source<'_>,
    (rekey, jitter, hard): LifetimeFields<'_>,
    default_rekey: Duration,
    field: &dyn Fn(&str) -> String,
) -> Result<SaLifetimeConfig, ConfigError> {
    let read = |v: &Option<Spanned<String>>, name: &str| {
        v.as_ref()
            .map(|t| duration(source, t, &field(name)))
            .transpose()
    };
    let rekey_time = read(rekey, "rekey_time")?.unwrap_or(default_rekey);
    let jitter_time = read(jitter, "rekey_jitter")?.unwrap_or(rekey_time / 10);
    let hard_time = read(hard, "lifetime")?.unwrap_or(rekey_time + rekey_time / 10);
    if let (Some(span), false) = (
        jitter.as_ref().map(Spanned::span),
        rekey_time.is_zero() || jitter_time < rekey_time,
    ) {
        let msg = "rekey_jitter must be shorter than rekey_time";
        return Err(source.error(span, field("rekey_jitter"), msg));
    }
    if let (Some(span), false) = (
        hard.as_ref().map(Spanned::span),
        rekey_time.is_zero() || hard_time > rekey_time,
    ) {
        let msg = "lifetime (the hard limit) must be longer than rekey_time";
        return Err(source.error(span, field("lifetime"), msg));
    }
    Ok(SaLifetimeConfig {
        rekey_time,
        jitter: jitter_time,
        hard_time,
        rekey_bytes: None,
        rekey_packets: None,
    })
}

/// `local_signature` / `remote_signature`: strongSwan's scheme names
/// ([`parse_signature_schemes`]); certificates only.
fn signatures(
    source: &Source<'_>,
    raw: Option<&Spanned<Vec<Spanned<String>>>>,
    pubkey: bool,
    field: &str,
) -> Result<Vec<SignatureScheme>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    if !pubkey {
        let msg = "signature schemes need auth = \"pubkey\"";
        return Err(source.error(raw.span(), field, msg));
    }
    let mut out = Vec::new();
    for (n, name) in raw.get_ref().iter().enumerate() {
        let schemes = parse_signature_schemes(name.get_ref())
            .map_err(|m| source.error(name.span(), format!("{field}[{n}]"), m))?;
        out.extend(
            schemes
                .into_iter()
                .filter(|s| !out.contains(s))
                .collect::<Vec<_>>(),
        );
    }
    Ok(out)
}

/// `pools`: names of `[[pool]]` tables.
fn pool_names(
    ctx: &Context<'_>,
    raw: Option<&Spanned<Vec<Spanned<String>>>>,
    field: &dyn Fn(&str) -> String,
) -> Result<Vec<String>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(raw.get_ref().len());
    for (n, name) in raw.get_ref().iter().enumerate() {
        if !ctx.pools.iter().any(|p| p.name == *name.get_ref()) {
            let msg = format!("no [[pool]] named {:?}", name.get_ref());
            return Err(ctx
                .source
                .error(name.span(), field(&format!("pools[{n}]")), msg));
        }
        out.push(name.get_ref().clone());
    }
    Ok(out)
}

/// `connection[i].child[j]` and its policy priority.
fn child(
    source: &Source<'_>,
    i: usize,
    j: usize,
    raw: RawChild,
    tunnel: SaMode,
) -> Result<(ChildConfig, u32), ConfigError> {
    let prefix = format!("connection[{i}].child[{j}]");
    let field = |name: &str| format!("{prefix}.{name}");
    name(source, &raw.name, &field("name"))?;
    let local_ts = selectors(source, &raw.local_ts, &field("local_ts"))?;
    let remote_ts = selectors(source, &raw.remote_ts, &field("remote_ts"))?;
    let same_family = local_ts
        .iter()
        .any(|l| remote_ts.iter().any(|r| l.ts_type() == r.ts_type()));
    if !same_family {
        let msg = "no selector of the address family of local_ts: no packet could match";
        return Err(source.error(raw.remote_ts.span(), field("remote_ts"), msg));
    }
    let (protocol, child_proposals) = match (&raw.ah_proposals, &raw.esp_proposals) {
        (Some(ah), Some(_)) => {
            let msg = "AH and ESP together (a bundle) are not supported: give ah_proposals or \
                       esp_proposals, not both";
            return Err(source.error(ah.span(), field("ah_proposals"), msg));
        }
        (Some(ah), None) => (
            IpsecProtocol::Ah,
            proposals(
                source,
                Some(ah),
                &field("ah_proposals"),
                ChildProposal::parse_ah_list,
                ChildProposal::ah_default_set,
            )?,
        ),
        (None, esp) => (
            IpsecProtocol::Esp,
            proposals(
                source,
                esp.as_ref(),
                &field("esp_proposals"),
                ChildProposal::parse_list,
                ChildProposal::default_set,
            )?,
        ),
    };
    let mode = match raw.mode.as_ref().map(|m| (m.get_ref().as_str(), m.span())) {
        None | Some(("tunnel", _)) => tunnel,
        Some(("transport", _)) => SaMode::Transport,
        Some((other, span)) => {
            let msg = format!("unknown mode {other:?}; expected \"tunnel\" or \"transport\"");
            return Err(source.error(span, field("mode"), msg));
        }
    };
    let mut lifetime = lifetime(
        source,
        (&raw.rekey_time, &raw.rekey_jitter, &raw.lifetime),
        limits::DEFAULT_CHILD_REKEY,
        &field,
    )?;
    lifetime.rekey_bytes = raw
        .rekey_bytes
        .as_ref()
        .map(|b| *b.get_ref())
        .filter(|&b| b != 0);
    lifetime.rekey_packets = raw
        .rekey_packets
        .as_ref()
        .map(|p| *p.get_ref())
        .filter(|&p| p != 0);
    let replay_window =
        validate::replay_window(source, raw.replay_window.as_ref(), &field("replay_window"))?;
    let peer_replay_window = validate::peer_replay_window(
        source,
        raw.peer_replay_window.as_ref(),
        &field("peer_replay_window"),
    )?;
    let priority = raw
        .priority
        .as_ref()
        .map_or(limits::DEFAULT_POLICY_PRIORITY, |p| *p.get_ref());
    let child = ChildConfig {
        name: raw.name.into_inner(),
        local_ts,
        remote_ts,
        protocol,
        proposals: child_proposals,
        mode,
        lifetime,
        replay_window,
        peer_replay_window,
    };
    Ok((child, priority))
}

/// A non-empty list of traffic selectors.
fn selectors(
    source: &Source<'_>,
    list: &Spanned<Vec<Spanned<String>>>,
    field: &str,
) -> Result<Vec<TrafficSelector>, ConfigError> {
    if list.get_ref().is_empty() {
        return Err(source.error(list.span(), field, "needs at least one traffic selector"));
    }
    list.get_ref()
        .iter()
        .enumerate()
        .map(|(n, item)| {
            values::traffic_selector(item.get_ref())
                .map_err(|m| source.error(item.span(), format!("{field}[{n}]"), m))
        })
        .collect()
}
