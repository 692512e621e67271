//! Human-readable output for each answer.

use phalanx_control::{
    ActionResult, CounterReport, Direction, IkeSaReport, PolicyInfo, PoolReport, ReloadSummary,
    Response, SaInfo, Status,
};
use serde::Serialize;

use crate::table::{Align, Table};

/// The whole human output for `response`.
pub(crate) fn human(response: &Response) -> String {
    match response {
        Response::Status(s) => status(s),
        Response::Sas(sas) => sa_table(sas),
        Response::Policies(p) => policy_table(p),
        Response::Counters(c) => counters(c),
        Response::Reload(r) => reload(r),
        Response::Ike(sas) => ike(sas),
        Response::Initiate(a) | Response::Terminate(a) | Response::Disconnect(a) => action(a),
        Response::Pools(p) => pool_table(p),
        Response::Cluster(c) => crate::cluster::render(c),
        // A newer daemon's answer kind this build cannot lay out.
        other => format!("{:#}\n", other.data_json()),
    }
}

fn status(s: &Status) -> String {
    let fields = [
        ("daemon", format!("phalanxd {}", s.version)),
        ("uptime", duration(s.uptime_seconds)),
        ("config", s.config_path.clone()),
        ("loaded", utc_time(s.config_loaded_at_unix)),
        ("workers", s.workers.to_string()),
        (
            "sas",
            format!("{} inbound, {} outbound", s.sas_inbound, s.sas_outbound),
        ),
        ("policies", s.policies.to_string()),
        ("tun", s.tun.clone()),
        ("protected", s.protected_local.clone()),
    ];
    fields
        .iter()
        .map(|(k, v)| format!("{k:<10} {v}\n"))
        .collect()
}

fn sa_table(sas: &[SaInfo]) -> String {
    if sas.is_empty() {
        return "no SAs installed\n".to_owned();
    }
    let mut t = Table::new(&[
        ("NAME", Align::Left),
        ("DIR", Align::Left),
        ("SPI", Align::Left),
        ("PROTO/MODE", Align::Left),
        ("ALGORITHMS", Align::Left),
        ("LOCAL→REMOTE", Align::Left),
        ("ENCAP", Align::Left),
        ("PACKETS", Align::Right),
        ("BYTES", Align::Right),
        ("DROPS", Align::Right),
        ("SEQ", Align::Right),
        ("LIFETIME", Align::Left),
    ]);
    for sa in sas {
        t.row(vec![
            sa.name.clone(),
            sa.direction.to_string(),
            format!("0x{:08x}", sa.spi),
            format!("{}/{}", sa.protocol, sa.mode),
            algorithms(sa),
            format!("{}→{}", sa.local, sa.remote),
            sa.encap
                .map_or_else(|| "-".to_owned(), |p| format!("udp:{p}")),
            sa.packets.to_string(),
            sa.bytes.to_string(),
            drops(sa),
            sequence(sa),
            sa.lifetime.clone(),
        ]);
    }
    t.render(0)
}

/// `enc` for AEAD, `enc/integ` otherwise (`integ` alone for AH).
fn algorithms(sa: &SaInfo) -> String {
    let none = |s: &str| s.is_empty() || s == "none";
    match (none(&sa.encryption), none(&sa.integrity)) {
        (false, true) => sa.encryption.clone(),
        (true, false) => sa.integrity.clone(),
        (true, true) => "none".to_owned(),
        (false, false) => format!("{}/{}", sa.encryption, sa.integrity),
    }
}

/// The SA's drops, with the largest reason: `3 (replayed)`.
fn drops(sa: &SaInfo) -> String {
    let Some(total) = sa.drops else {
        return "-".to_owned();
    };
    match sa.drop_reasons.iter().max_by_key(|r| r.count) {
        Some(top) if total > 0 => format!("{total} ({})", top.name),
        _ => total.to_string(),
    }
}

/// The sequence number that matters for the direction.
fn sequence(sa: &SaInfo) -> String {
    let seq = match sa.direction {
        Direction::Out => sa.next_sequence,
        Direction::In => sa.highest_sequence,
    };
    seq.map_or_else(|| "-".to_owned(), |s| s.to_string())
}

fn policy_table(policies: &[PolicyInfo]) -> String {
    if policies.is_empty() {
        return "no policies installed\n".to_owned();
    }
    let mut t = Table::new(&[
        ("PRIO", Align::Right),
        ("NAME", Align::Left),
        ("SOURCE", Align::Left),
        ("DESTINATION", Align::Left),
        ("PROTO", Align::Left),
        ("SPORTS", Align::Left),
        ("DPORTS", Align::Left),
        ("ACTION", Align::Left),
        ("SA", Align::Left),
        ("HITS", Align::Right),
    ]);
    for p in policies {
        t.row(vec![
            p.priority.to_string(),
            p.name.clone(),
            p.source.clone(),
            p.destination.clone(),
            p.protocol.clone(),
            p.source_ports.clone(),
            p.destination_ports.clone(),
            p.action.clone(),
            p.sa.clone().unwrap_or_else(|| "-".to_owned()),
            p.hits.map_or_else(|| "-".to_owned(), |h| h.to_string()),
        ]);
    }
    t.render(0)
}

fn counters(c: &CounterReport) -> String {
    let mut drops = Table::new(&[
        ("REASON", Align::Left),
        ("COUNT", Align::Right),
        ("DESCRIPTION", Align::Left),
    ]);
    for d in &c.drops {
        drops.row(vec![
            d.reason.clone(),
            d.count.to_string(),
            d.description.clone(),
        ]);
    }
    let total: u64 = c.drops.iter().fold(0, |sum, d| sum.saturating_add(d.count));
    let mut daemon = Table::new(&[("NAME", Align::Left), ("COUNT", Align::Right)]);
    for n in &c.daemon {
        daemon.row(vec![n.name.clone(), n.count.to_string()]);
    }
    // Busy share of the last second and since the worker started; "-"
    // from a daemon that reports neither.
    let mut workers = Table::new(&[
        ("WORKER", Align::Right),
        ("BUSY 1s", Align::Right),
        ("BUSY avg", Align::Right),
        ("PACKETS", Align::Right),
    ]);
    for w in &c.workers {
        workers.row(vec![
            w.worker.to_string(),
            percent(w.busy_1s),
            percent(w.busy_avg),
            w.packets.to_string(),
        ]);
    }
    let mut out = format!(
        "drops ({total} in total):\n{}\ndaemon counters:\n{}\nworkers:\n{}",
        drops.render(2),
        daemon.render(2),
        workers.render(2)
    );
    if !c.ike.is_empty() {
        let mut ike = Table::new(&[("NAME", Align::Left), ("COUNT", Align::Right)]);
        for n in &c.ike {
            ike.row(vec![n.name.clone(), n.count.to_string()]);
        }
        out.push_str(&format!("IKE counters:\n{}", ike.render(2)));
    }
    out
}

/// One block per IKE SA, its Child SAs in a table below it.
fn ike(sas: &[IkeSaReport]) -> String {
    if sas.is_empty() {
        return "no IKE SAs\n".to_owned();
    }
    let mut out = String::new();
    for sa in sas {
        let role = if sa.initiator {
            "initiator"
        } else {
            "responder"
        };
        out.push_str(&format!(
            "{}: {} ({role}), {} <-> {}{}\n",
            sa.connection,
            sa.state,
            sa.local,
            sa.remote,
            if sa.nat { ", UDP-encapsulated" } else { "" }
        ));
        out.push_str(&format!(
            "  ids    {} <-> {}\n",
            sa.local_id,
            or_dash(&sa.remote_id)
        ));
        out.push_str(&format!("  spis   {}_i {}_r\n", sa.spi_i, sa.spi_r));
        out.push_str(&format!("  algs   {}\n", or_dash(&sa.algorithms)));
        if !sa.virtual_ips.is_empty() {
            out.push_str(&format!("  vips   {}\n", sa.virtual_ips.join(", ")));
        }
        out.push_str(&format!(
            "  up     {}, rekey in {}\n",
            sa.established_seconds
                .map_or_else(|| "-".to_owned(), |s| format!("{} ago", duration(s))),
            sa.rekey_in_seconds.map_or_else(|| "-".to_owned(), duration)
        ));
        if !sa.children.is_empty() {
            out.push_str(&children(sa));
        }
    }
    out
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() {
        "-"
    } else {
        s
    }
}

fn children(sa: &IkeSaReport) -> String {
    let mut t = Table::new(&[
        ("CHILD", Align::Left),
        ("STATE", Align::Left),
        ("SPI IN", Align::Left),
        ("SPI OUT", Align::Left),
        ("ALGORITHMS", Align::Left),
        ("LOCAL TS", Align::Left),
        ("REMOTE TS", Align::Left),
        ("REKEY IN", Align::Right),
        ("IN pkts/bytes", Align::Right),
        ("OUT pkts/bytes", Align::Right),
    ]);
    for c in &sa.children {
        let mut algs = c.algorithms.clone();
        if c.esn {
            algs.push_str("/ESN");
        }
        t.row(vec![
            c.name.clone(),
            c.state.clone(),
            format!("0x{:08x}", c.spi_in),
            format!("0x{:08x}", c.spi_out),
            algs,
            c.local_ts.join(","),
            c.remote_ts.join(","),
            c.rekey_in_seconds.map_or_else(|| "-".to_owned(), duration),
            format!("{}/{}", c.packets_in, c.bytes_in),
            format!("{}/{}", c.packets_out, c.bytes_out),
        ]);
    }
    t.render(2)
}

/// One End-User, as `phalanxctl clients` shows it (from the IKE SAs).
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct Client {
    /// The authenticated identity.
    pub(crate) identity: String,
    /// Its virtual IPs.
    pub(crate) virtual_ips: Vec<String>,
    /// Its outer address and port.
    pub(crate) remote: String,
    /// The connection it came in on.
    pub(crate) connection: String,
    /// How it authenticated (`eap-mschapv2`, `psk`, `pubkey`).
    pub(crate) auth: String,
    /// Seconds since it authenticated.
    pub(crate) connected_seconds: Option<u64>,
    /// Bytes received from it and sent to it, over its Child SAs.
    pub(crate) bytes_in: u64,
    /// Bytes sent to it.
    pub(crate) bytes_out: u64,
}

/// The End-Users among `sas`: responder IKE SAs holding virtual IPs.
pub(crate) fn clients(sas: &[IkeSaReport]) -> Vec<Client> {
    sas.iter()
        .filter(|sa| !sa.initiator && !sa.virtual_ips.is_empty())
        .map(|sa| Client {
            identity: sa.remote_id.clone(),
            virtual_ips: sa.virtual_ips.clone(),
            remote: sa.remote.clone(),
            connection: sa.connection.clone(),
            auth: sa.peer_auth.clone(),
            connected_seconds: sa.established_seconds,
            bytes_in: sa.children.iter().map(|c| c.bytes_in).sum(),
            bytes_out: sa.children.iter().map(|c| c.bytes_out).sum(),
        })
        .collect()
}

pub(crate) fn client_table(clients: &[Client]) -> String {
    if clients.is_empty() {
        return "no clients connected\n".to_owned();
    }
    let mut t = Table::new(&[
        ("IDENTITY", Align::Left),
        ("VIRTUAL IP", Align::Left),
        ("OUTER", Align::Left),
        ("CONNECTION", Align::Left),
        ("AUTH", Align::Left),
        ("UP", Align::Right),
        ("BYTES IN", Align::Right),
        ("BYTES OUT", Align::Right),
    ]);
    for c in clients {
        t.row(vec![
            c.identity.clone(),
            c.virtual_ips.join(","),
            c.remote.clone(),
            c.connection.clone(),
            c.auth.clone(),
            c.connected_seconds.map_or_else(|| "-".to_owned(), duration),
            c.bytes_in.to_string(),
            c.bytes_out.to_string(),
        ]);
    }
    t.render(0)
}

fn pool_table(pools: &[PoolReport]) -> String {
    if pools.is_empty() {
        return "no pools configured\n".to_owned();
    }
    let mut t = Table::new(&[
        ("POOL", Align::Left),
        ("SIZE", Align::Right),
        ("ONLINE", Align::Right),
        ("OFFLINE", Align::Right),
    ]);
    for p in pools {
        t.row(vec![
            p.name.clone(),
            p.size.to_string(),
            p.online.to_string(),
            p.offline.to_string(),
        ]);
    }
    t.render(0)
}

fn action(a: &ActionResult) -> String {
    format!("{}: {} ({})\n", a.connection, a.outcome, a.message)
}

/// A share as a percentage with one decimal, `-` when unknown.
fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "-".to_owned(), |s| format!("{:.1}%", s * 100.0))
}

fn reload(r: &ReloadSummary) -> String {
    let list = |names: &[String]| {
        if names.is_empty() {
            "0".to_owned()
        } else {
            format!("{} ({})", names.len(), names.join(", "))
        }
    };
    format!(
        "reload applied\n  added      {}\n  changed    {}\n  removed    {}\n  unchanged  {}\n",
        list(&r.added),
        list(&r.changed),
        list(&r.removed),
        r.unchanged
    )
}

/// `1d 2h 3m 4s`, leading zero units left out.
fn duration(seconds: u64) -> String {
    let parts = [
        (seconds / 86_400, "d"),
        (seconds / 3_600 % 24, "h"),
        (seconds / 60 % 60, "m"),
    ];
    let mut out = String::new();
    for (value, unit) in parts {
        if value > 0 || !out.is_empty() {
            out.push_str(&format!("{value}{unit} "));
        }
    }
    out.push_str(&format!("{}s", seconds % 60));
    out
}

/// Unix seconds as `YYYY-MM-DD hh:mm:ss UTC` (proleptic Gregorian
/// calendar, days-from-civil inverted as in Howard Hinnant's published
/// `civil_from_days` algorithm).
fn utc_time(unix: u64) -> String {
    let days = unix / 86_400;
    let rem = unix % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// (year, month, day) of the day `days` after 1970-01-01.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Shift the epoch to 0000-03-01 so leap days fall at the end of a year.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use phalanx_control::{DropCounter, NamedCounter, WorkerLoad};

    use super::*;

    fn sa(direction: Direction) -> SaInfo {
        SaInfo {
            name: "gw-a".into(),
            direction,
            spi: 0x1001,
            protocol: "esp".into(),
            mode: "tunnel".into(),
            encryption: "aes-128-cbc".into(),
            integrity: "hmac-sha2-256-128".into(),
            local: "192.0.2.1".into(),
            remote: "192.0.2.2".into(),
            encap: Some(4500),
            esn: false,
            replay_window: 64,
            packets: 12,
            bytes: 3400,
            drops: None,
            drop_reasons: Vec::new(),
            next_sequence: Some(13),
            highest_sequence: Some(11),
            lifetime: "ok".into(),
            age_seconds: 5,
        }
    }

    #[test]
    fn dates_match_known_instants() {
        assert_eq!(utc_time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_time(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_time(1_700_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(utc_time(4_107_542_399), "2100-02-28 23:59:59 UTC");
    }

    #[test]
    fn durations_skip_leading_zero_units() {
        assert_eq!(duration(0), "0s");
        assert_eq!(duration(61), "1m 1s");
        assert_eq!(duration(3600), "1h 0m 0s");
        assert_eq!(duration(90_061), "1d 1h 1m 1s");
    }

    #[test]
    fn sa_rows_show_direction_specific_sequence() {
        let out = human(&Response::Sas(vec![sa(Direction::Out), sa(Direction::In)]));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("NAME"));
        for (line, seq) in lines[1..].iter().zip(["13", "11"]) {
            assert!(line.contains("0x00001001"), "{line}");
            assert!(line.contains("esp/tunnel"));
            assert!(line.contains("aes-128-cbc/hmac-sha2-256-128"));
            assert!(line.contains("192.0.2.1→192.0.2.2"));
            assert!(line.contains("udp:4500"));
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(fields[fields.len() - 2], seq);
        }
    }

    #[test]
    fn aead_and_ah_algorithms() {
        let mut s = sa(Direction::Out);
        s.integrity = "none".into();
        assert_eq!(algorithms(&s), "aes-128-cbc");
        s.encryption = "none".into();
        s.integrity = "hmac-sha2-256-128".into();
        assert_eq!(algorithms(&s), "hmac-sha2-256-128");
    }

    #[test]
    fn counters_list_zero_reasons_too() {
        let report = CounterReport {
            drops: vec![
                DropCounter {
                    reason: "auth_failed".into(),
                    description: "bad ICV".into(),
                    count: 2,
                },
                DropCounter {
                    reason: "replayed".into(),
                    description: "replay".into(),
                    count: 0,
                },
            ],
            daemon: vec![NamedCounter {
                name: "tun_rx".into(),
                count: 7,
            }],
            workers: vec![
                WorkerLoad {
                    worker: 0,
                    busy_ratio: 0.125,
                    packets: 9,
                    busy_1s: Some(0.125),
                    busy_avg: Some(0.05),
                    busy_seconds: Some(3.0),
                },
                // A daemon that reports only the old ratio.
                WorkerLoad {
                    worker: 1,
                    busy_ratio: 0.5,
                    packets: 4,
                    busy_1s: None,
                    busy_avg: None,
                    busy_seconds: None,
                },
            ],
            ike: vec![NamedCounter {
                name: "notify_sent_cookie".into(),
                count: 3,
            }],
        };
        let out = human(&Response::Counters(report));
        assert!(out.starts_with("drops (2 in total):"));
        assert!(out.contains("IKE counters:"));
        assert!(out
            .lines()
            .any(|l| l.split_whitespace().eq(["notify_sent_cookie", "3"])));
        assert!(out
            .lines()
            .any(|l| l.split_whitespace().eq(["replayed", "0", "replay"])));
        assert!(out
            .lines()
            .any(|l| l.split_whitespace().eq(["tun_rx", "7"])));
        assert!(out.lines().any(|l| l
            .split_whitespace()
            .eq(["WORKER", "BUSY", "1s", "BUSY", "avg", "PACKETS"])));
        assert!(out
            .lines()
            .any(|l| l.split_whitespace().eq(["0", "12.5%", "5.0%", "9"])));
        assert!(out
            .lines()
            .any(|l| l.split_whitespace().eq(["1", "-", "-", "4"])));
    }

    #[test]
    fn reload_summary_names_what_changed() {
        let r = ReloadSummary {
            added: vec!["x".into(), "y".into()],
            changed: vec![],
            removed: vec!["z".into()],
            unchanged: 4,
        };
        let out = human(&Response::Reload(r));
        assert!(out.contains("added      2 (x, y)"));
        assert!(out.contains("changed    0\n"));
        assert!(out.contains("removed    1 (z)"));
        assert!(out.contains("unchanged  4"));
    }

    #[test]
    fn policy_hits_fill_their_column() {
        let policy = |name: &str, hits| PolicyInfo {
            name: name.into(),
            priority: 10,
            source: "10.1.0.0/24".into(),
            destination: "10.2.0.0/24".into(),
            protocol: "any".into(),
            source_ports: "any".into(),
            destination_ports: "any".into(),
            action: "discard".into(),
            sa: None,
            hits,
        };
        let out = human(&Response::Policies(vec![
            policy("counted", Some(1234)),
            policy("uncounted", None),
        ]));
        let last = |line: &str| line.split_whitespace().last().map(str::to_owned);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(last(lines[0]).as_deref(), Some("HITS"));
        assert_eq!(last(lines[1]).as_deref(), Some("1234"));
        assert_eq!(last(lines[2]).as_deref(), Some("-"));
    }

    #[test]
    fn empty_lists_say_so() {
        assert_eq!(human(&Response::Sas(vec![])), "no SAs installed\n");
        assert_eq!(
            human(&Response::Policies(vec![])),
            "no policies installed\n"
        );
    }
}
