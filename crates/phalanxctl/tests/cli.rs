//! Runs the `phalanxctl` binary against a fake daemon on a temporary
//! socket (a test double: these tests check the CLI, not the daemon).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;

use phalanx_control::{
    decode_request, encode_error, encode_response, ActionResult, ChildSaReport, ClusterMember,
    ClusterReport, ClusterSaReport, CounterReport, Direction, DropCounter, ErrorBody, ErrorCode,
    FailoverReport, IkeSaReport, LeaseBlockReport, NamedCounter, PolicyInfo, ReloadSummary,
    Request, Response, SaInfo, Status, WorkerLoad,
};

fn socket_path() -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("phx-ctl-cli-{}-{n}.sock", std::process::id()))
}

fn sa() -> SaInfo {
    SaInfo {
        name: "to-b".into(),
        direction: Direction::Out,
        spi: 0xc0ffee,
        protocol: "esp".into(),
        mode: "tunnel".into(),
        encryption: "aes-128-gcm".into(),
        integrity: "none".into(),
        local: "198.51.100.1".into(),
        remote: "198.51.100.2".into(),
        encap: None,
        esn: true,
        replay_window: 0,
        packets: 42,
        bytes: 4200,
        drops: None,
        drop_reasons: Vec::new(),
        next_sequence: Some(43),
        highest_sequence: None,
        lifetime: "ok".into(),
        age_seconds: 7,
    }
}

fn ike_sa() -> IkeSaReport {
    IkeSaReport {
        connection: "site-b".into(),
        state: "ESTABLISHED".into(),
        initiator: true,
        local: "192.0.2.1:4500".into(),
        remote: "192.0.2.2:4500".into(),
        local_id: "gw-a.example".into(),
        remote_id: "gw-b.example".into(),
        spi_i: "0123456789abcdef".into(),
        spi_r: "fedcba9876543210".into(),
        algorithms: "AES_GCM_16_128/PRF_HMAC_SHA2_256/CURVE25519".into(),
        nat: true,
        established_seconds: Some(65),
        rekey_in_seconds: Some(3600),
        virtual_ips: Vec::new(),
        peer_auth: String::new(),
        children: vec![ChildSaReport {
            name: "net".into(),
            state: "INSTALLED".into(),
            spi_in: 0xc1a2_b3c4,
            spi_out: 0xd1a2_b3c4,
            algorithms: "AES_GCM_16_128".into(),
            esn: true,
            mode: "tunnel".into(),
            encap: true,
            local_ts: vec!["10.1.0.0/24".into(), "fd01::/64".into()],
            remote_ts: vec!["10.2.0.0/24".into()],
            installed_seconds: 65,
            rekey_in_seconds: Some(3000),
            bytes_in: 840,
            packets_in: 10,
            bytes_out: 1680,
            key_exchanges: Vec::new(),
            packets_out: 20,
        }],
    }
}

fn cluster() -> ClusterReport {
    ClusterReport {
        node_id: 3,
        scheme: "hash-src".into(),
        group: "phalanx".into(),
        ready: true,
        generation: 2,
        corosync_error: None,
        quorum: None,
        members: vec![ClusterMember {
            node_id: 3,
            local: true,
            agreed: true,
            live: true,
            suspected: false,
            heard_again: false,
            ready: true,
            address: Some("10.99.0.13".into()),
            last_heartbeat_ms: None,
        }],
        segment_owners: vec![3; 256],
        sas: vec![ClusterSaReport {
            spi: 0xc0ffee,
            direction: Direction::Out,
            peer: Some("198.51.100.2".into()),
            counter: 77,
            exhausted: false,
            peer_window: Some(1024),
            spread: Some(true),
            block: Some(LeaseBlockReport {
                start: 1,
                end: 65_536,
                view: vec![3],
            }),
            class: Some(0),
            takeover_blocks: vec![],
            checkpoint_age_ms: None,
        }],
        counters: vec![NamedCounter {
            name: "lease_grants".into(),
            count: 1,
        }],
        failovers: vec![FailoverReport {
            suspect: 1,
            detected_after_ms: 30.5,
            handover_ms: Some(30.7),
            outcome: "confirmed".into(),
            age_seconds: 61,
        }],
        virtual_sides: vec![],
        resolver: None,
    }
}

fn answer(request: Request, reload_ok: bool) -> Result<Response, ErrorBody> {
    Ok(match request {
        Request::Cluster => Response::Cluster(cluster()),
        Request::Ike => Response::Ike(vec![ike_sa()]),
        Request::Initiate {
            connection,
            wait_seconds,
        } if connection == "site-b" => Response::Initiate(ActionResult {
            connection,
            outcome: if wait_seconds.is_some() {
                "established"
            } else {
                "queued"
            }
            .into(),
            message: format!("waited {wait_seconds:?}"),
        }),
        Request::Initiate { connection, .. } | Request::Terminate { connection }
            if connection != "site-b" =>
        {
            return Err(ErrorBody::new(
                ErrorCode::UNKNOWN_CONNECTION,
                format!("no connection {connection:?}"),
            ))
        }
        Request::Terminate { connection } => Response::Terminate(ActionResult {
            connection,
            outcome: "terminating".into(),
            message: "INFORMATIONAL Delete sent".into(),
        }),
        Request::Status => Response::Status(Status {
            version: "9.9.9".into(),
            uptime_seconds: 3725,
            tun: "phx0".into(),
            ..Status::default()
        }),
        Request::Sas => Response::Sas(vec![sa()]),
        Request::Policies => Response::Policies(vec![PolicyInfo {
            name: "a-to-b".into(),
            priority: 5,
            source: "10.1.0.0/24".into(),
            destination: "10.2.0.0/24".into(),
            protocol: "any".into(),
            source_ports: "any".into(),
            destination_ports: "any".into(),
            action: "protect".into(),
            sa: Some("to-b".into()),
            hits: Some(31_337),
        }]),
        Request::Counters => Response::Counters(CounterReport {
            drops: ["auth_failed", "replayed", "unknown_spi"]
                .iter()
                .map(|r| DropCounter {
                    reason: (*r).into(),
                    description: format!("why {r}"),
                    count: u64::from(*r == "replayed") * 5,
                })
                .collect(),
            daemon: vec![NamedCounter {
                name: "udp_rx".into(),
                count: 77,
            }],
            workers: vec![WorkerLoad {
                worker: 1,
                busy_ratio: 0.5,
                packets: 100,
                busy_1s: Some(0.5),
                busy_avg: Some(0.25),
                busy_seconds: Some(9.0),
            }],
            ike: vec![],
        }),
        Request::Reload if reload_ok => Response::Reload(ReloadSummary {
            added: vec!["new-sa".into()],
            ..ReloadSummary::default()
        }),
        _ => {
            return Err(ErrorBody::new(
                ErrorCode::RELOAD_FAILED,
                "phalanx.toml:4:9: sa.to-b.spi: expected an integer",
            ))
        }
    })
}

/// Serves connections forever on a fresh socket; returns its path.
fn fake_daemon(reload_ok: bool) -> PathBuf {
    let path = socket_path();
    let listener = UnixListener::bind(&path).expect("bind");
    thread::spawn(move || {
        for stream in listener.incoming() {
            let stream = stream.expect("accept");
            let mut writer = stream.try_clone().expect("clone");
            for line in BufReader::new(stream).lines() {
                let line = line.expect("line");
                let reply = match decode_request(line.as_bytes()) {
                    Ok(r) => encode_response(r.id, &answer(r.request, reload_ok)),
                    Err(e) => encode_error(e.id, &e.error),
                };
                writer.write_all(reply.as_bytes()).expect("write");
            }
        }
    });
    path
}

fn phalanxctl(socket: &PathBuf, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_phalanxctl"))
        .arg("--socket")
        .arg(socket)
        .args(args)
        .env_remove("PHALANX_SOCKET")
        .output()
        .expect("run phalanxctl")
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

#[test]
fn human_output_for_each_command() {
    let socket = fake_daemon(true);
    let status = stdout(&phalanxctl(&socket, &["status"]));
    assert!(status.contains("phalanxd 9.9.9"));
    assert!(status.contains("1h 2m 5s"));
    let sas = stdout(&phalanxctl(&socket, &["sas"]));
    let row = sas.lines().nth(1).expect("one SA row");
    for part in [
        "to-b",
        "out",
        "0x00c0ffee",
        "esp/tunnel",
        "aes-128-gcm",
        "198.51.100.1→198.51.100.2",
        "42",
        "4200",
        "43",
    ] {
        assert!(
            row.split_whitespace().any(|f| f == part),
            "{part} missing in {row}"
        );
    }
    let policies = stdout(&phalanxctl(&socket, &["policies"]));
    assert!(policies.contains("10.1.0.0/24") && policies.contains("protect"));
    assert!(policies.contains("HITS") && policies.contains("31337"));
    let counters = stdout(&phalanxctl(&socket, &["counters"]));
    for reason in ["auth_failed", "replayed", "unknown_spi"] {
        assert!(counters.contains(reason), "{reason} missing");
    }
    assert!(counters.contains("why unknown_spi"));
    assert!(counters.contains("udp_rx") && counters.contains("50.0%"));
    assert!(counters.contains("BUSY 1s") && counters.contains("BUSY avg"));
    assert!(counters.contains("25.0%"), "{counters}");
    let reload = stdout(&phalanxctl(&socket, &["reload"]));
    assert!(reload.contains("added      1 (new-sa)"));
    drop(std::fs::remove_file(socket));
}

#[test]
fn json_output_is_the_payload() {
    let socket = fake_daemon(true);
    let out = stdout(&phalanxctl(&socket, &["--json", "sas"]));
    let value: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let sas: Vec<SaInfo> = serde_json::from_value(value).expect("SA list");
    assert_eq!(sas, vec![sa()]);
    // --json is global: accepted after the subcommand too.
    let out = stdout(&phalanxctl(&socket, &["counters", "--json"]));
    let report: CounterReport = serde_json::from_str(&out).expect("counter report");
    assert_eq!(report.drops.len(), 3);
    drop(std::fs::remove_file(socket));
}

#[test]
fn refused_reload_exits_1_with_the_reason() {
    let socket = fake_daemon(false);
    let out = phalanxctl(&socket, &["reload"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("phalanx.toml:4:9: sa.to-b.spi"), "{err}");
    assert!(out.stdout.is_empty());
    drop(std::fs::remove_file(socket));
}

#[test]
fn unreachable_daemon_exits_3() {
    let out = phalanxctl(&socket_path(), &["status"]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot connect to the control socket"),
        "{err}"
    );
}

#[test]
fn socket_from_the_environment() {
    let socket = fake_daemon(true);
    let out = Command::new(env!("CARGO_BIN_EXE_phalanxctl"))
        .arg("status")
        .env("PHALANX_SOCKET", &socket)
        .output()
        .expect("run phalanxctl");
    assert!(stdout(&out).contains("9.9.9"));
    drop(std::fs::remove_file(socket));
}

#[test]
fn ike_commands() {
    let socket = fake_daemon(true);
    let ike = stdout(&phalanxctl(&socket, &["ike"]));
    for part in [
        "site-b: ESTABLISHED (initiator)",
        "0123456789abcdef_i",
        "AES_GCM_16_128/PRF_HMAC_SHA2_256/CURVE25519",
        "0xc1a2b3c4",
        "0xd1a2b3c4",
        "AES_GCM_16_128/ESN",
        "10.1.0.0/24,fd01::/64",
        "10/840",
        "1m 5s ago",
    ] {
        assert!(ike.contains(part), "{part} missing in\n{ike}");
    }
    let json = stdout(&phalanxctl(&socket, &["ike", "--json"]));
    let sas: Vec<IkeSaReport> = serde_json::from_str(&json).expect("IKE SA list");
    assert_eq!(sas, vec![ike_sa()]);
    let up = stdout(&phalanxctl(&socket, &["initiate", "site-b", "--wait", "7"]));
    assert!(up.contains("site-b: established (waited Some(7))"), "{up}");
    let queued = stdout(&phalanxctl(&socket, &["--json", "initiate", "site-b"]));
    let result: ActionResult = serde_json::from_str(&queued).expect("JSON");
    assert_eq!(result.outcome, "queued");
    let down = stdout(&phalanxctl(&socket, &["terminate", "site-b"]));
    assert!(down.contains("terminating"), "{down}");
    let out = phalanxctl(&socket, &["terminate", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no connection \"nope\""));
    let out = phalanxctl(&socket, &["initiate"]);
    assert_eq!(out.status.code(), Some(2), "the name is required");
    drop(std::fs::remove_file(socket));
}

#[test]
fn usage_errors_exit_2() {
    let out = phalanxctl(&socket_path(), &["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn cluster_command() {
    let socket = fake_daemon(true);
    let out = stdout(&phalanxctl(&socket, &["cluster"]));
    for part in [
        "node 3 of group \"phalanx\", scheme hash-src, generation 2: ready",
        "3 (this)",
        "10.99.0.13",
        "256  0-255",
        "0x00c0ffee",
        "1-65536 [3]",
        "lease_grants",
        "30.7 ms",
        "confirmed",
    ] {
        assert!(out.contains(part), "{part} missing in\n{out}");
    }
    let json = stdout(&phalanxctl(&socket, &["cluster", "--json"]));
    let report: ClusterReport = serde_json::from_str(&json).expect("cluster report");
    assert_eq!(report, cluster());
    drop(std::fs::remove_file(socket));
}
