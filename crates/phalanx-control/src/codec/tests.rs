use std::io::Cursor;

use super::*;
use crate::ike::{ActionResult, ChildSaReport, IkeSaReport};
use crate::types::{
    CounterReport, Direction, DropCounter, NamedCounter, PolicyInfo, ReloadSummary, SaInfo, Status,
    WorkerLoad,
};

fn sample_sa() -> SaInfo {
    SaInfo {
        name: "a-to-b".into(),
        direction: Direction::Out,
        spi: 0xdead_beef,
        protocol: "esp".into(),
        mode: "tunnel".into(),
        encryption: "aes-128-gcm".into(),
        integrity: "none".into(),
        local: "192.0.2.1".into(),
        remote: "192.0.2.2".into(),
        encap: Some(4500),
        esn: true,
        replay_window: 0,
        packets: 10,
        bytes: 12_000,
        drops: None,
        drop_reasons: Vec::new(),
        next_sequence: Some(11),
        highest_sequence: None,
        lifetime: "ok".into(),
        age_seconds: 3,
    }
}

fn sample_responses() -> Vec<Response> {
    vec![
        Response::Status(Status {
            version: "0.1.0".into(),
            uptime_seconds: 5,
            config_path: "/etc/phalanx.toml".into(),
            config_loaded_at_unix: 1_700_000_000,
            workers: 2,
            sas_inbound: 1,
            sas_outbound: 1,
            policies: 2,
            tun: "phx0".into(),
            protected_local: "192.0.2.1:4500".into(),
        }),
        Response::Sas(vec![sample_sa()]),
        Response::Sas(vec![]),
        Response::Policies(vec![PolicyInfo {
            name: "p".into(),
            priority: 10,
            source: "10.1.0.0/16".into(),
            destination: "10.2.0.0/16".into(),
            protocol: "any".into(),
            source_ports: "any".into(),
            destination_ports: "any".into(),
            action: "protect".into(),
            sa: Some("a-to-b".into()),
            hits: Some(4),
        }]),
        Response::Policies(vec![]),
        Response::Counters(CounterReport {
            drops: vec![DropCounter {
                reason: "auth_failed".into(),
                description: "ICV or AEAD tag did not verify".into(),
                count: 0,
            }],
            daemon: vec![NamedCounter {
                name: "reloads".into(),
                count: 1,
            }],
            workers: vec![WorkerLoad {
                worker: 0,
                busy_ratio: 0.25,
                packets: 99,
                busy_1s: Some(0.25),
                busy_avg: Some(0.125),
                busy_seconds: Some(1.5),
            }],
            ike: vec![NamedCounter {
                name: "ike_sas_established".into(),
                count: 2,
            }],
        }),
        Response::Ike(vec![sample_ike_sa()]),
        Response::Ike(vec![]),
        Response::Initiate(ActionResult {
            connection: "site-b".into(),
            outcome: "established".into(),
            message: "IKE SA and 1 Child SA up".into(),
        }),
        Response::Terminate(ActionResult {
            connection: "site-b".into(),
            outcome: "terminating".into(),
            message: "INFORMATIONAL Delete sent".into(),
        }),
        Response::Reload(ReloadSummary {
            added: vec!["x".into()],
            changed: vec![],
            removed: vec!["y".into()],
            unchanged: 3,
        }),
    ]
}

fn sample_ike_sa() -> IkeSaReport {
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
        established_seconds: Some(12),
        rekey_in_seconds: None,
        virtual_ips: Vec::new(),
        peer_auth: String::new(),
        children: vec![ChildSaReport {
            name: "net".into(),
            state: "INSTALLED".into(),
            spi_in: 0xc000_0001,
            spi_out: 0xc100_0002,
            algorithms: "AES_GCM_16_128".into(),
            esn: false,
            mode: "tunnel".into(),
            encap: true,
            local_ts: vec!["10.1.0.0/24".into()],
            remote_ts: vec!["10.2.0.0/24".into()],
            installed_seconds: 12,
            rekey_in_seconds: Some(3000),
            bytes_in: 840,
            packets_in: 10,
            bytes_out: 840,
            key_exchanges: Vec::new(),
            packets_out: 10,
        }],
    }
}

fn all_requests() -> Vec<Request> {
    vec![
        Request::Status,
        Request::Sas,
        Request::Policies,
        Request::Counters,
        Request::Reload,
        Request::Ike,
        Request::Initiate {
            connection: "site-b".into(),
            wait_seconds: Some(20),
        },
        Request::Initiate {
            connection: "site-b".into(),
            wait_seconds: None,
        },
        Request::Terminate {
            connection: "site-b".into(),
        },
        Request::Cluster,
    ]
}

#[test]
fn request_round_trips() {
    for (id, request) in (1..).zip(all_requests()) {
        let line = encode_request(id, &request);
        assert!(line.ends_with('\n'));
        assert_eq!(line.matches('\n').count(), 1);
        let decoded = decode_request(line.as_bytes()).expect("decodes");
        assert_eq!(decoded.id, id);
        assert_eq!(decoded.request, request);
    }
}

#[test]
fn request_wire_shape() {
    let line = encode_request(7, &Request::Sas);
    assert_eq!(
        line,
        "{\"version\":1,\"id\":7,\"request\":{\"type\":\"sas\"}}\n"
    );
    let line = encode_request(
        8,
        &Request::Initiate {
            connection: "site-b".into(),
            wait_seconds: Some(5),
        },
    );
    assert_eq!(
        line,
        "{\"version\":1,\"id\":8,\"request\":{\"type\":\"initiate\",\"connection\":\"site-b\",\"wait_seconds\":5}}\n"
    );
}

#[test]
fn response_round_trips() {
    for (id, response) in (1..).zip(sample_responses()) {
        let line = encode_response(id, &Ok(response.clone()));
        assert_eq!(line.matches('\n').count(), 1);
        let decoded = decode_response(line.as_bytes()).expect("decodes");
        assert_eq!(decoded.id, id);
        assert_eq!(decoded.outcome, Ok(response));
    }
}

#[test]
fn every_response_answers_only_its_request() {
    let kinds = [
        (Response::Status(Status::default()), Request::Status),
        (Response::Sas(vec![]), Request::Sas),
        (Response::Policies(vec![]), Request::Policies),
        (
            Response::Counters(CounterReport::default()),
            Request::Counters,
        ),
        (Response::Reload(ReloadSummary::default()), Request::Reload),
        (Response::Ike(vec![]), Request::Ike),
        (
            Response::Cluster(crate::ClusterReport::default()),
            Request::Cluster,
        ),
        (
            Response::Terminate(ActionResult {
                connection: "c".into(),
                outcome: "terminating".into(),
                message: String::new(),
            }),
            Request::Terminate {
                connection: "c".into(),
            },
        ),
    ];
    for (response, own) in &kinds {
        for request in all_requests() {
            let same = std::mem::discriminant(&request) == std::mem::discriminant(own);
            assert_eq!(response.answers(&request), same, "{request}");
        }
    }
}

#[test]
fn error_round_trips() {
    let body = ErrorBody::new(
        ErrorCode::RELOAD_FAILED,
        "phalanx.toml:3:7: sa.spi: invalid",
    );
    let line = encode_error(9, &body);
    assert!(line.contains("\"error\":{\"code\":6"));
    assert!(!line.contains("result"));
    let decoded = decode_response(line.as_bytes()).expect("decodes");
    assert_eq!(decoded.id, 9);
    assert_eq!(decoded.outcome, Err(body));
}

#[test]
fn sa_wire_fields() {
    let value: Value =
        serde_json::from_str(&encode_response(1, &Ok(Response::Sas(vec![sample_sa()]))))
            .expect("json");
    let sa = &value["result"]["data"][0];
    assert_eq!(value["result"]["type"], "sas");
    assert_eq!(sa["direction"], "out");
    assert_eq!(sa["spi"], 0xdead_beef_u32);
    assert_eq!(sa["encap"], 4500);
    assert_eq!(sa["highest_sequence"], Value::Null);
}

#[test]
fn optional_sa_fields_may_be_absent_and_unknown_fields_ignored() {
    let mut value = serde_json::to_value(sample_sa()).expect("json");
    let object = value.as_object_mut().expect("object");
    for key in ["encap", "drops", "next_sequence", "highest_sequence"] {
        object.remove(key);
    }
    object.insert("added_in_a_later_version".into(), Value::Bool(true));
    let sa: SaInfo = serde_json::from_value(value).expect("decodes");
    assert_eq!(sa.encap, None);
    assert_eq!(sa.next_sequence, None);
}

/// A daemon of the first release sends worker loads and policies without
/// the fields added since: they decode as `None`, not as an error.
#[test]
fn load_and_hit_fields_of_newer_daemons_are_optional() {
    let line = br#"{"version":1,"id":1,"result":{"type":"counters","data":{"drops":[],"daemon":[],"workers":[{"worker":0,"busy_ratio":0.5,"packets":3}]}}}"#;
    let response = decode_response(line).expect("decodes").outcome.expect("ok");
    let Response::Counters(report) = response else {
        panic!("a counters answer: {response:?}");
    };
    let load = &report.workers[0];
    assert_eq!(
        (load.busy_1s, load.busy_avg, load.busy_seconds),
        (None, None, None)
    );
    let policy = serde_json::json!({
        "name": "p", "priority": 1, "source": "any", "destination": "any", "protocol": "any",
        "source_ports": "any", "destination_ports": "any", "action": "discard"
    });
    let policy: PolicyInfo = serde_json::from_value(policy).expect("decodes");
    assert_eq!(policy.hits, None);
    // And the new names are what goes on the wire.
    let sent = serde_json::to_value(WorkerLoad {
        busy_1s: Some(0.5),
        busy_avg: Some(0.25),
        busy_seconds: Some(2.0),
        ..load.clone()
    })
    .expect("json");
    assert_eq!(sent["busy_1s"], 0.5);
    assert_eq!(sent["busy_avg"], 0.25);
    assert_eq!(sent["busy_seconds"], 2.0);
}

fn refused(line: &str) -> RequestError {
    decode_request(line.as_bytes()).expect_err("must be refused")
}

#[test]
fn malformed_requests_are_errors() {
    let cases: &[(&str, u64, ErrorCode)] = &[
        ("", 0, ErrorCode::MALFORMED),
        ("not json", 0, ErrorCode::MALFORMED),
        ("[1,2,3]", 0, ErrorCode::MALFORMED),
        ("\"sas\"", 0, ErrorCode::MALFORMED),
        ("{}", 0, ErrorCode::MALFORMED),
        (
            r#"{"version":1,"request":{"type":"sas"}}"#,
            0,
            ErrorCode::MALFORMED,
        ),
        (
            r#"{"version":1,"id":-1,"request":{"type":"sas"}}"#,
            0,
            ErrorCode::MALFORMED,
        ),
        (
            r#"{"version":1,"id":"3","request":{"type":"sas"}}"#,
            0,
            ErrorCode::MALFORMED,
        ),
        (
            r#"{"id":3,"request":{"type":"sas"}}"#,
            3,
            ErrorCode::MALFORMED,
        ),
        (
            r#"{"version":"1","id":3,"request":{"type":"sas"}}"#,
            3,
            ErrorCode::MALFORMED,
        ),
        (r#"{"version":1,"id":3}"#, 3, ErrorCode::MALFORMED),
        (
            r#"{"version":1,"id":3,"request":"sas"}"#,
            3,
            ErrorCode::MALFORMED,
        ),
        (
            r#"{"version":1,"id":3,"request":{}}"#,
            3,
            ErrorCode::MALFORMED,
        ),
        (
            r#"{"version":1,"id":3,"request":{"type":7}}"#,
            3,
            ErrorCode::MALFORMED,
        ),
        (
            r#"{"version":1,"id":3,"request":{"type":"initiate"}}"#,
            3,
            ErrorCode::UNKNOWN_REQUEST,
        ),
        (
            r#"{"version":2,"id":3,"request":{"type":"sas"}}"#,
            3,
            ErrorCode::UNSUPPORTED_VERSION,
        ),
        (
            r#"{"version":0,"id":4,"request":{"type":"sas"}}"#,
            4,
            ErrorCode::UNSUPPORTED_VERSION,
        ),
        (
            r#"{"version":1,"id":3,"request":{"type":"sas"}"#,
            0,
            ErrorCode::MALFORMED,
        ),
    ];
    for (n, (line, id, code)) in cases.iter().enumerate() {
        let e = refused(line);
        assert_eq!((e.id, e.error.code), (*id, *code), "case {n}: {line}");
        assert!(!e.error.message.is_empty());
    }
}

#[test]
fn request_tolerates_line_endings_and_extra_fields() {
    let line = "{\"version\":1,\"id\":5,\"extra\":1,\"request\":{\"type\":\"counters\"}}\r\n";
    let r = decode_request(line.as_bytes()).expect("decodes");
    assert_eq!((r.id, r.request), (5, Request::Counters));
}

#[test]
fn invalid_utf8_and_binary_do_not_panic() {
    for line in [
        &b"\xff\xfe\x00"[..],
        b"{\"version\":1,\"id\":1,\"request\":\xff}",
        b"\x00",
    ] {
        assert_eq!(
            decode_request(line).expect_err("refused").error.code,
            ErrorCode::MALFORMED
        );
        assert!(matches!(
            decode_response(line),
            Err(ControlError::Malformed(_))
        ));
    }
}

#[test]
fn malformed_responses_are_errors() {
    let cases = [
        "",
        "null",
        "{}",
        r#"{"version":1}"#,
        r#"{"version":1,"id":1}"#,
        r#"{"version":1,"id":1,"result":{"type":"sas","data":[]},"error":{"code":1,"message":"x"}}"#,
        r#"{"version":1,"id":1,"result":{"type":"nope","data":[]}}"#,
        r#"{"version":1,"id":1,"result":{"type":"sas","data":{}}}"#,
        r#"{"version":1,"id":1,"result":{"type":"counters","data":{"drops":[],"daemon":[],"workers":[{"worker":0,"busy_ratio":null,"packets":0}]}}}"#,
        r#"{"version":1,"id":1,"error":{"code":"x","message":"m"}}"#,
    ];
    for (n, line) in cases.iter().enumerate() {
        let e = decode_response(line.as_bytes()).expect_err("refused");
        assert!(matches!(e, ControlError::Malformed(_)), "case {n}: {e}");
    }
}

#[test]
fn response_version_mismatch_is_reported_before_shape() {
    let e = decode_response(br#"{"version":2,"id":1,"whatever":true}"#).expect_err("refused");
    assert!(
        matches!(
            e,
            ControlError::VersionMismatch {
                expected: 1,
                found: 2
            }
        ),
        "{e}"
    );
}

#[test]
fn unknown_error_codes_are_data() {
    let r = decode_response(br#"{"version":1,"id":1,"error":{"code":999,"message":"m"}}"#)
        .expect("decodes");
    let e = r.outcome.expect_err("error");
    assert_eq!(e.code, ErrorCode(999));
    assert_eq!(e.code.name(), "unknown");
}

fn read_all(input: &[u8], limit: usize, capacity: usize) -> Vec<(LineRead, Vec<u8>)> {
    let mut reader = io::BufReader::with_capacity(capacity, Cursor::new(input.to_vec()));
    let mut buf = Vec::new();
    let mut out = Vec::new();
    loop {
        let r = read_line_bounded(&mut reader, limit, &mut buf).expect("no io error");
        out.push((r, buf.clone()));
        if r != LineRead::Line {
            return out;
        }
    }
}

#[test]
fn bounded_reader_splits_lines_across_small_buffers() {
    let lines = read_all(b"ab\ncdef\n\nxyz", 10, 2);
    let expect: Vec<(LineRead, Vec<u8>)> = vec![
        (LineRead::Line, b"ab".to_vec()),
        (LineRead::Line, b"cdef".to_vec()),
        (LineRead::Line, b"".to_vec()),
        (LineRead::Line, b"xyz".to_vec()),
        (LineRead::Eof, b"".to_vec()),
    ];
    assert_eq!(lines, expect);
}

#[test]
fn bounded_reader_refuses_long_lines() {
    // Exactly at the limit is fine; one byte more is refused.
    let lines = read_all(b"abcd\nabcde\n", 4, 3);
    assert_eq!(lines[0], (LineRead::Line, b"abcd".to_vec()));
    assert_eq!(lines[1].0, LineRead::TooLong);
    assert_eq!(lines.len(), 2);
}

#[test]
fn data_json_is_the_payload() {
    let value = Response::Sas(vec![sample_sa()]).data_json();
    assert_eq!(value[0]["name"], "a-to-b");
    let value = Response::Reload(ReloadSummary::default()).data_json();
    assert_eq!(value["unchanged"], 0);
}
