//! IKE state as `phalanx-control` answers: IKE SAs with their Child SAs
//! and live traffic counts, algorithm names, traffic selectors, counters.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

use phalanx_control::{ChildSaReport, IkeSaReport, NamedCounter, PoolReport};
use phalanx_crypto::Suite;
use phalanx_ike::counters::COUNTED_EXCHANGES;
use phalanx_ike::pool::PoolUsage;
use phalanx_ike::{ChildSaInfo, IkeCounters, IkeSaInfo, IkeSaState};
use phalanx_sa::SaMode;
use phalanx_wire::ike::{TrafficSelector, TsAddresses};
use phalanx_wire::{EncrId, IntegId, IpProtocol};

use crate::config::{ChildRef, Direction};
use crate::install::ike::ike_sa_name;
use crate::install::{Runtime, SaHandle};

/// A Child SA's transforms by IANA name: ESP as `AES_GCM_16_128`,
/// `AES_CBC_256/HMAC_SHA2_256_128`, `CHACHA20_POLY1305`; AH as
/// `AH/HMAC_SHA2_256_128`.
pub fn child_algorithms(suite: &Suite) -> String {
    if suite.ah {
        return format!("AH/{:?}", suite.integ);
    }
    let encr = match suite.encr {
        EncrId::CHACHA20_POLY1305 | EncrId::NULL => format!("{:?}", suite.encr),
        other => format!("{other:?}_{}", suite.encr_key_bits),
    };
    if suite.integ == IntegId::NONE {
        encr
    } else {
        format!("{encr}/{:?}", suite.integ)
    }
}

/// phalanx-ike's description of an IKE suite (`"AES_GCM_16/128,
/// HMAC_SHA2_256, CURVE25519"`: encryption/bits, integrity if any, PRF,
/// group) in the form of the Child SAs:
/// `AES_GCM_16_128/PRF_HMAC_SHA2_256/CURVE25519`.
/// A description of another shape is passed on as it is.
pub fn ike_algorithms(description: &str) -> String {
    let parts: Vec<&str> = description.split(", ").map(str::trim).collect();
    let (encr, integ, prf, ke) = match parts.as_slice() {
        [encr, prf, ke] => (*encr, None, *prf, *ke),
        [encr, integ, prf, ke] => (*encr, Some(*integ), *prf, *ke),
        _ => return description.to_owned(),
    };
    let encr = match encr.split_once('/') {
        Some((name, bits)) if name != "CHACHA20_POLY1305" => format!("{name}_{bits}"),
        Some((name, _)) => name.to_owned(),
        None => encr.to_owned(),
    };
    let prf = if prf.starts_with("PRF_") {
        prf.to_owned()
    } else {
        format!("PRF_{prf}")
    };
    let mut out = vec![encr];
    out.extend(integ.map(str::to_owned));
    out.push(prf);
    out.push(ke.to_owned());
    out.join("/")
}

/// An IKE SA state as `phalanxctl ike` prints it.
pub fn state_name(state: IkeSaState) -> &'static str {
    match state {
        IkeSaState::InitSent => "INIT_SENT",
        IkeSaState::AuthSent => "AUTH_SENT",
        IkeSaState::HalfOpen => "HALF_OPEN",
        IkeSaState::Established => "ESTABLISHED",
        IkeSaState::Rekeying => "REKEYING",
        IkeSaState::Rekeyed => "REKEYED",
        IkeSaState::Deleting => "DELETING",
        _ => "UNKNOWN",
    }
}

/// Every IKE SA with its children and their traffic (from `rt`); an
/// End-User who authenticated by EAP with the method of its connection in
/// `eap_methods` (`remote_auth`, e.g. `eap-tls`).
pub fn ike_sas(
    sas: &[IkeSaInfo],
    rt: &Runtime,
    now: Instant,
    eap_methods: &HashMap<String, &'static str>,
) -> Vec<IkeSaReport> {
    let traffic = traffic(rt);
    sas.iter()
        .map(|sa| IkeSaReport {
            connection: sa.connection.clone(),
            state: state_name(sa.state).to_owned(),
            initiator: sa.initiator,
            local: sa.local.to_string(),
            remote: sa.remote.to_string(),
            local_id: sa.local_id.clone(),
            remote_id: sa.remote_id.clone(),
            spi_i: hex::encode(sa.spi_i),
            spi_r: hex::encode(sa.spi_r),
            algorithms: ike_algorithms(&sa.algorithms),
            nat: sa.nat,
            established_seconds: sa
                .established_at
                .map(|t| now.saturating_duration_since(t).as_secs()),
            rekey_in_seconds: sa
                .rekey_at
                .map(|t| t.saturating_duration_since(now).as_secs()),
            virtual_ips: sa.virtual_ips.iter().map(ToString::to_string).collect(),
            peer_auth: peer_auth(sa, eap_methods).to_owned(),
            children: sa
                .children
                .iter()
                .map(|c| child_report(&sa.connection, c, &traffic, now))
                .collect(),
        })
        .collect()
}

/// How the peer of `sa` authenticated: `psk`, `pubkey`, or its
/// connection's EAP method (`eap` when the connection is gone).
fn peer_auth<'a>(sa: &'a IkeSaInfo, eap_methods: &HashMap<String, &'static str>) -> &'a str {
    match sa.peer_auth {
        "eap" => eap_methods.get(&sa.connection).copied().unwrap_or("eap"),
        other => other,
    }
}

/// (packets, bytes, installed) of every installed SA, by name.
pub(crate) fn traffic(rt: &Runtime) -> HashMap<&str, (u64, u64)> {
    rt.sas
        .iter()
        .map(|sa| {
            let stats = match &sa.handle {
                SaHandle::Inbound(s) => s.stats.snapshot(),
                SaHandle::Outbound { sa, .. } => sa.stats.snapshot(),
            };
            (sa.config.name.as_str(), (stats.packets, stats.bytes))
        })
        .collect()
}

fn child_report(
    connection: &str,
    c: &ChildSaInfo,
    traffic: &HashMap<&str, (u64, u64)>,
    now: Instant,
) -> ChildSaReport {
    let child = ChildRef {
        connection: connection.to_owned(),
        child: c.name.clone(),
    };
    let inbound = traffic
        .get(ike_sa_name(&child, Direction::In, c.spi_in).as_str())
        .copied();
    let outbound = traffic
        .get(ike_sa_name(&child, Direction::Out, c.spi_out).as_str())
        .copied();
    let state = match (c.rekeyed, outbound) {
        (true, _) => "REKEYED",
        (false, Some(_)) => "INSTALLED",
        (false, None) => "INSTALLING",
    };
    let (packets_in, bytes_in) = inbound.unwrap_or_default();
    let (packets_out, bytes_out) = outbound.unwrap_or_default();
    ChildSaReport {
        name: c.name.clone(),
        state: state.to_owned(),
        spi_in: c.spi_in,
        spi_out: c.spi_out,
        algorithms: child_algorithms(&c.suite),
        esn: c.esn,
        mode: match c.mode {
            SaMode::Tunnel { .. } => "tunnel".to_owned(),
            SaMode::Transport => "transport".to_owned(),
        },
        encap: c.encap.is_some(),
        local_ts: c.local_ts.iter().map(ts_string).collect(),
        remote_ts: c.remote_ts.iter().map(ts_string).collect(),
        installed_seconds: now.saturating_duration_since(c.established_at).as_secs(),
        rekey_in_seconds: c
            .rekey_at
            .map(|t| t.saturating_duration_since(now).as_secs()),
        bytes_in,
        packets_in,
        bytes_out,
        packets_out,
        key_exchanges: c.key_exchanges.iter().map(|k| format!("{k:?}")).collect(),
    }
}

/// A traffic selector in the configuration's syntax: a prefix when the
/// range is one, else `first-last`; `[proto/ports]` when not "any".
pub fn ts_string(ts: &TrafficSelector) -> String {
    let (start, end): (IpAddr, IpAddr) = match ts.addresses {
        TsAddresses::V4 { start, end } => (start.into(), end.into()),
        TsAddresses::V6 { start, end } => (start.into(), end.into()),
    };
    let mut out = match prefix_len(start, end) {
        Some(len) => format!("{start}/{len}"),
        None => format!("{start}-{end}"),
    };
    let any_ports = ts.start_port == 0 && ts.end_port == u16::MAX;
    if ts.ip_protocol != IpProtocol(0) || !any_ports {
        let proto = crate::report::protocol_name(ts.ip_protocol);
        out.push('[');
        out.push_str(&proto);
        if !any_ports {
            if ts.start_port == ts.end_port {
                out.push_str(&format!("/{}", ts.start_port));
            } else {
                out.push_str(&format!("/{}-{}", ts.start_port, ts.end_port));
            }
        }
        out.push(']');
    }
    out
}

/// The prefix length when `start..=end` is exactly one prefix.
fn prefix_len(start: IpAddr, end: IpAddr) -> Option<u8> {
    let (s, e, bits) = match (start, end) {
        (IpAddr::V4(s), IpAddr::V4(e)) => (u128::from(u32::from(s)), u128::from(u32::from(e)), 32),
        (IpAddr::V6(s), IpAddr::V6(e)) => (u128::from(s), u128::from(e), 128),
        _ => return None,
    };
    // A prefix: the bits that differ are all ones at the end, and they are
    // zeros in the first address and ones in the last.
    let host = s ^ e;
    if host & host.wrapping_add(1) != 0 || s & host != 0 || s | host != e {
        return None;
    }
    u8::try_from(bits - (128 - host.leading_zeros())).ok()
}

/// The IKE counters by name: the event counters (snake_case), the
/// messages of each exchange (`ike_auth_requests_sent`, ...), and each
/// Notify sent and received (`notify_sent_cookie`, ...).
pub fn counters(c: &IkeCounters) -> Vec<NamedCounter> {
    let named = |name: String, count: u64| NamedCounter { name, count };
    let mut out: Vec<NamedCounter> = c
        .iter()
        .map(|(counter, count)| named(snake_case(counter.name()), count))
        .collect();
    for ty in COUNTED_EXCHANGES {
        let prefix = ty
            .name()
            .map_or_else(|| ty.0.to_string(), str::to_ascii_lowercase);
        let e = c.exchange(ty);
        out.push(named(format!("{prefix}_requests_sent"), e.requests_sent));
        out.push(named(
            format!("{prefix}_requests_received"),
            e.requests_received,
        ));
        out.push(named(format!("{prefix}_responses_sent"), e.responses_sent));
        out.push(named(
            format!("{prefix}_responses_received"),
            e.responses_received,
        ));
    }
    let notify = |ty: phalanx_wire::ike::iana::NotifyType| {
        ty.name()
            .map_or_else(|| ty.0.to_string(), str::to_ascii_lowercase)
    };
    out.extend(
        c.notifies_sent()
            .map(|(ty, n)| named(format!("notify_sent_{}", notify(ty)), n)),
    );
    out.extend(
        c.notifies_received()
            .map(|(ty, n)| named(format!("notify_received_{}", notify(ty)), n)),
    );
    out
}

/// `DatagramsReceived` → `datagrams_received`.
fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    for (i, ch) in name.chars().enumerate() {
        if ch.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

/// The pools as `phalanxctl pools` shows them.
pub fn pools(usage: &[PoolUsage]) -> Vec<PoolReport> {
    usage
        .iter()
        .map(|u| PoolReport {
            name: u.name.clone(),
            size: u.size,
            online: u.online,
            offline: u.offline,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_names() {
        let gcm = Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE);
        assert_eq!(child_algorithms(&gcm), "AES_GCM_16_128");
        let cbc = Suite::esp(EncrId::AES_CBC, 256, IntegId::HMAC_SHA2_256_128);
        assert_eq!(child_algorithms(&cbc), "AES_CBC_256/HMAC_SHA2_256_128");
        let chacha = Suite::esp(EncrId::CHACHA20_POLY1305, 256, IntegId::NONE);
        assert_eq!(child_algorithms(&chacha), "CHACHA20_POLY1305");
        assert_eq!(
            ike_algorithms("AES_GCM_16/128, HMAC_SHA2_256, CURVE25519"),
            "AES_GCM_16_128/PRF_HMAC_SHA2_256/CURVE25519"
        );
        assert_eq!(
            ike_algorithms("AES_CBC/256, HMAC_SHA2_256_128, HMAC_SHA2_256, MODP_2048"),
            "AES_CBC_256/HMAC_SHA2_256_128/PRF_HMAC_SHA2_256/MODP_2048"
        );
        assert_eq!(
            ike_algorithms("CHACHA20_POLY1305/256, HMAC_SHA2_384, ECP_256"),
            "CHACHA20_POLY1305/PRF_HMAC_SHA2_384/ECP_256"
        );
        assert_eq!(ike_algorithms(""), "");
    }

    #[test]
    fn selectors_print_as_configured() {
        for text in [
            "10.1.0.0/24",
            "fd01::/64",
            "10.0.0.1-10.0.0.9[tcp/80]",
            "0.0.0.0/0",
            "192.0.2.7/32[udp/1000-2000]",
            "10.1.0.0/24[icmp]",
        ] {
            let ts = crate::config::tests_support::traffic_selector(text);
            assert_eq!(ts_string(&ts), text);
        }
    }

    /// `phalanxctl clients` names the EAP method of the End-User's
    /// connection; psk and pubkey as phalanx-ike says.
    #[test]
    fn eap_end_users_show_their_connections_method() {
        let sa = |connection: &str, peer_auth: &'static str| IkeSaInfo {
            connection: connection.to_owned(),
            state: IkeSaState::Established,
            initiator: false,
            spi_i: [1; 8],
            spi_r: [2; 8],
            local: "192.0.2.2:500".parse().unwrap(),
            remote: "192.0.2.1:500".parse().unwrap(),
            local_id: String::new(),
            remote_id: String::new(),
            algorithms: String::new(),
            nat: false,
            established_at: None,
            rekey_at: None,
            peer_auth,
            virtual_ips: Vec::new(),
            children: Vec::new(),
        };
        let methods = HashMap::from([
            ("rw-tls".to_owned(), "eap-tls"),
            ("rw-chap".to_owned(), "eap-mschapv2"),
        ]);
        assert_eq!(peer_auth(&sa("rw-tls", "eap"), &methods), "eap-tls");
        assert_eq!(peer_auth(&sa("rw-chap", "eap"), &methods), "eap-mschapv2");
        assert_eq!(peer_auth(&sa("removed", "eap"), &methods), "eap");
        assert_eq!(peer_auth(&sa("rw-tls", "pubkey"), &methods), "pubkey");
    }

    #[test]
    fn counter_names() {
        assert_eq!(snake_case("DatagramsReceived"), "datagrams_received");
        let mut names: Vec<String> = counters(&IkeCounters::default())
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert!(names.contains(&"ike_sas_established".to_owned()));
        assert!(names.contains(&"ike_auth_requests_sent".to_owned()));
        assert!(names.contains(&"create_child_sa_responses_received".to_owned()));
        let len = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), len, "names are unique");
    }
}
