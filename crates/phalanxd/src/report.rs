//! Runtime state as `phalanx-control` answers: SAs, policies, counters.

use std::time::Instant;

use phalanx_control::{Direction, NamedCounter, PolicyInfo, ReloadSummary, SaInfo};
use phalanx_esp::DropReason;
use phalanx_sa::{PortRange, SaMode};
use phalanx_wire::IpProtocol;

use crate::config::PolicyTarget;
use crate::dataplane::WorkerStats;
use crate::install::{ApplySummary, InstalledPolicy, InstalledSa, SaHandle};

/// One SA with its live counters.
pub fn sa_info(sa: &InstalledSa, now: Instant) -> SaInfo {
    let c = &sa.config;
    let (local, remote, mode) = match c.params.mode {
        SaMode::Tunnel { local, remote } => (local.to_string(), remote.to_string(), "tunnel"),
        SaMode::Transport => ("-".to_owned(), "-".to_owned(), "transport"),
    };
    let (direction, stats, usage, next, highest, drops) = match &sa.handle {
        SaHandle::Inbound(s) => (
            Direction::In,
            s.stats.snapshot(),
            &s.usage,
            None,
            Some(s.replay_snapshot().highest),
            &s.drops,
        ),
        SaHandle::Outbound { sa: s, .. } => (
            Direction::Out,
            s.stats.snapshot(),
            &s.usage,
            s.seq.peek_next(),
            None,
            &s.drops,
        ),
    };
    let counts = drops.snapshot();
    let drop_reasons: Vec<NamedCounter> = DropReason::ALL
        .iter()
        .filter(|r| counts[r.index()] > 0)
        .map(|r| named(r.name(), counts[r.index()]))
        .collect();
    let lifetime = if usage.is_hard_expired() {
        "hard-expired"
    } else if usage.is_soft_expired() {
        "soft-expired"
    } else {
        "ok"
    };
    SaInfo {
        name: c.name.clone(),
        direction,
        spi: c.params.spi,
        protocol: "esp".to_owned(),
        mode: mode.to_owned(),
        encryption: c.encryption.as_str().to_owned(),
        integrity: c.integrity.as_str().to_owned(),
        local,
        remote,
        encap: c.params.encap.map(|e| e.remote_port),
        esn: c.params.esn,
        replay_window: if direction == Direction::In {
            c.params.replay_window
        } else {
            0
        },
        packets: stats.packets,
        bytes: stats.bytes,
        drops: Some(drops.total()),
        drop_reasons,
        next_sequence: next,
        highest_sequence: highest,
        lifetime: lifetime.to_owned(),
        age_seconds: now.saturating_duration_since(sa.installed).as_secs(),
    }
}

/// One policy, with `hits` decisions counted for it (`None`: not counted).
pub fn policy_info(policy: &InstalledPolicy, hits: Option<u64>) -> PolicyInfo {
    let c = &policy.config;
    let (action, sa) = match &c.target {
        PolicyTarget::Protect(name) => ("protect", Some(name.clone())),
        PolicyTarget::Bypass => ("bypass", None),
        PolicyTarget::Discard => ("discard", None),
        PolicyTarget::Child(child) | PolicyTarget::Peer { child, .. } => {
            ("protect", Some(child.to_string()))
        }
    };
    PolicyInfo {
        name: c.name.clone(),
        priority: c.priority,
        source: c.selector.src.to_string(),
        destination: c.selector.dst.to_string(),
        protocol: c
            .selector
            .protocol
            .map_or_else(|| "any".to_owned(), protocol_name),
        source_ports: ports(c.selector.src_ports),
        destination_ports: ports(c.selector.dst_ports),
        action: action.to_owned(),
        sa,
        hits,
    }
}

/// The outbound decisions all workers counted for `policy` since it was
/// installed with its current definition. A worker that has not yet seen
/// the reload that installed it contributes 0 (its slot still counts the
/// policy that held the id before).
pub fn policy_hits(policy: &InstalledPolicy, workers: &[WorkerStats]) -> u64 {
    workers.iter().fold(0, |sum: u64, w| {
        sum.saturating_add(w.policy_hits.hits(policy))
    })
}

/// A protocol as the configuration file writes it.
pub fn protocol_name(protocol: IpProtocol) -> String {
    match protocol {
        IpProtocol::TCP => "tcp".to_owned(),
        IpProtocol::UDP => "udp".to_owned(),
        IpProtocol::ICMP => "icmp".to_owned(),
        IpProtocol::ICMPV6 => "icmpv6".to_owned(),
        IpProtocol::SCTP => "sctp".to_owned(),
        other => other.0.to_string(),
    }
}

/// A port range as the configuration file writes it.
pub fn ports(range: PortRange) -> String {
    if range.is_any() {
        "any".to_owned()
    } else if range.start == range.end {
        range.start.to_string()
    } else {
        format!("{}-{}", range.start, range.end)
    }
}

/// A named counter.
pub fn named(name: &str, count: u64) -> NamedCounter {
    NamedCounter {
        name: name.to_owned(),
        count,
    }
}

/// Packets and bytes ESP forwarded in each direction.
pub fn esp_counters(total: &WorkerStats) -> Vec<NamedCounter> {
    vec![
        named("esp_out_packets", total.outbound.forwarded_packets),
        named("esp_out_bytes", total.outbound.forwarded_bytes),
        named("esp_in_packets", total.inbound.forwarded_packets),
        named("esp_in_bytes", total.inbound.forwarded_bytes),
    ]
}

/// The wire form of a reload's summary.
pub fn reload_summary(summary: ApplySummary) -> ReloadSummary {
    ReloadSummary {
        added: summary.added,
        changed: summary.changed,
        removed: summary.removed,
        unchanged: u32::try_from(summary.unchanged).unwrap_or(u32::MAX),
    }
}
