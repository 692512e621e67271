//! Parsing and validation: the examples parse, and each kind of error
//! names the file, line, column and field.

use super::*;
use phalanx_sa::{IpsecProtocol, PortRange, SaMode};
use phalanx_wire::IpProtocol;

/// A small valid file; tests break one line of it at a time.
const BASE: &str = r#"[daemon]
workers = 2
control_socket = "/tmp/phx.sock"

[clear]
tun = "phx0"
mtu = 1400

[protected]
local = "192.0.2.1"
raw_esp = true

[[sa]]
name = "out1"
direction = "out"
spi = 0x1001
encryption = "aes128gcm16"
key = "0102030405060708090a0b0c0d0e0f1011121314"
remote = "192.0.2.2"

[[sa]]
name = "in1"
direction = "in"
spi = "0x2001"
encryption = "aes256"
integrity = "sha256"
key = "000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f"
integrity_key = "000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f"
remote = "192.0.2.2"
encap = "none"
selectors = [{ src = "10.2.0.0/24", dst = "10.1.0.0/24", protocol = "udp", dst_ports = "1000-2000" }]

[sa.lifetime]
soft_bytes = 1000
hard_bytes = 2000

[[policy]]
name = "p1"
src = "10.1.0.0/24"
dst = "10.2.0.0/24"
action = "protect"
sa = "out1"
"#;

/// `BASE` with the first occurrence of `from` replaced by `to`.
fn edit(from: &str, to: &str) -> String {
    assert!(
        BASE.contains(from),
        "test edits a line that is not there: {from}"
    );
    BASE.replacen(from, to, 1)
}

/// The error for `text`, which must be invalid.
fn error(text: &str) -> ConfigError {
    match Config::parse("gw.toml", text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

/// Asserts the error's line, field and a fragment of its message.
fn assert_error(text: &str, line: usize, field: &str, fragment: &str) {
    let e = error(text);
    assert_eq!((e.line, e.field.as_str()), (line, field), "{e}");
    assert!(e.message.contains(fragment), "{e}");
    assert!(
        e.to_string().starts_with(&format!("gw.toml:{line}:")),
        "{e}"
    );
}

#[test]
fn base_parses_with_defaults_filled_in() {
    let c = Config::parse("gw.toml", BASE).unwrap();
    assert_eq!(c.daemon.workers, 2);
    assert_eq!(c.daemon.log, "info");
    assert_eq!(c.clear.mtu, 1400);
    assert!(c.clear.offload);
    assert_eq!(c.protected.udp_port, 4500);
    let out = c.sa("out1").unwrap();
    assert_eq!(out.params.spi, 0x1001);
    assert_eq!(out.params.protocol, IpsecProtocol::Esp);
    assert_eq!(out.params.replay_window, 1024);
    assert_eq!(out.params.encap.unwrap().remote_port, 4500);
    assert_eq!(out.keys.encryption.len(), 20);
    assert_eq!(out.line, 13);
    let inb = c.sa("in1").unwrap();
    assert_eq!(inb.params.spi, 0x2001);
    assert!(inb.params.encap.is_none());
    assert_eq!(inb.params.lifetime.hard_bytes, Some(2000));
    let sel = inb.params.selectors[0];
    assert_eq!(sel.protocol, Some(IpProtocol::UDP));
    assert_eq!(sel.dst_ports, PortRange::new(1000, 2000).unwrap());
    assert!(matches!(inb.params.mode, SaMode::Tunnel { .. }));
    assert_eq!(c.policies[0].target, PolicyTarget::Protect("out1".into()));
    assert_eq!(c.policies[0].priority, 1000);
}

#[test]
fn the_examples_parse() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/");
    for name in ["gateway-a.toml", "gateway-b.toml"] {
        let path = std::path::PathBuf::from(dir).join(name);
        let c = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.sas.len(), 2, "{name}");
        assert_eq!(c.policies.len(), 2, "{name}");
    }
}

#[test]
fn syntax_and_type_errors_name_line_and_field() {
    assert_error(
        &edit("mtu = 1400", "mtu = \"big\""),
        7,
        "clear.mtu",
        "invalid type",
    );
    // TOML notices the unclosed array on the next line.
    assert_error(&edit("workers = 2", "workers = [2"), 3, "", "missing comma");
    assert_error(
        &edit("encryption = \"aes128gcm16\"", "encryption = \"aes-gcm\""),
        17,
        "sa[0].encryption",
        "unknown variant `aes-gcm`",
    );
    assert_error(
        &edit("direction = \"in\"", "direction = \"in\"\ncolour = 1"),
        24,
        "sa[1].colour",
        "unknown field `colour`",
    );
    assert_error(
        &edit("tun = \"phx0\"\n", ""),
        5,
        "clear",
        "missing field `tun`",
    );
}

#[test]
fn key_and_algorithm_errors() {
    assert_error(
        &edit(
            "key = \"0102030405060708090a0b0c0d0e0f1011121314\"",
            "key = \"0102\"",
        ),
        18,
        "sa[0].key",
        "needs 20 bytes",
    );
    assert_error(
        &edit(
            "key = \"0102030405060708090a0b0c0d0e0f1011121314\"",
            "key = \"xyz\"",
        ),
        18,
        "sa[0].key",
        "not a hex key",
    );
    assert_error(
        &edit("integrity = \"sha256\"", "integrity = \"none\""),
        26,
        "sa[1].integrity",
        "needs an integrity algorithm",
    );
    assert_error(
        &edit(
            "encryption = \"aes128gcm16\"",
            "encryption = \"aes128gcm16\"\nintegrity = \"sha256\"",
        ),
        18,
        "sa[0].integrity",
        "combined mode",
    );
    let no_integ_key = edit(
        "integrity_key = \"000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f\"\n",
        "",
    );
    assert_error(&no_integ_key, 25, "sa[1].integrity_key", "missing");
    assert_error(
        &edit("spi = 0x1001", "spi = 7"),
        16,
        "sa[0].spi",
        "reserved",
    );
    assert_error(
        &edit("spi = 0x1001", "spi = 0x1_0000_0000"),
        16,
        "sa[0].spi",
        "32 bits",
    );
    assert_error(
        &edit("spi = 0x1001", "spi = \"ten\""),
        16,
        "sa[0].spi",
        "not an SPI",
    );
}

#[test]
fn duplicates_and_references() {
    assert_error(
        &edit("name = \"in1\"", "name = \"out1\""),
        22,
        "sa[1].name",
        "duplicate SA name",
    );
    let dup_spi = edit("spi = \"0x2001\"", "spi = 0x1001").replacen(
        "direction = \"out\"",
        "direction = \"in\"",
        1,
    );
    let e = error(&dup_spi);
    assert_eq!(e.field, "sa[1].spi", "{e}");
    assert!(e.message.contains("duplicate in SPI"), "{e}");
    assert_error(
        &edit("sa = \"out1\"", "sa = \"nope\""),
        42,
        "policy[0].sa",
        "unknown SA",
    );
    assert_error(
        &edit("sa = \"out1\"", "sa = \"in1\""),
        42,
        "policy[0].sa",
        "is inbound",
    );
    assert_error(&edit("sa = \"out1\"\n", ""), 38, "policy[0].sa", "needs sa");
    assert_error(
        &edit("action = \"protect\"", "action = \"discard\""),
        42,
        "policy[0].sa",
        "only action \"protect\"",
    );
    let twice = format!("{BASE}\n[[policy]]\nname = \"p1\"\nsrc = \"10.1.0.0/24\"\ndst = \"10.3.0.0/24\"\naction = \"discard\"\n");
    assert_error(&twice, 45, "policy[1].name", "duplicate policy name");
}

#[test]
fn addresses_prefixes_and_ports() {
    assert_error(
        &edit("dst = \"10.2.0.0/24\"", "dst = \"10.2.0.0/33\""),
        40,
        "policy[0].dst",
        "at most 32",
    );
    assert_error(
        &edit("dst = \"10.2.0.0/24\"", "dst = \"fd02::/64\""),
        40,
        "policy[0].dst",
        "same address family",
    );
    assert_error(
        &edit("dst_ports = \"1000-2000\"", "dst_ports = \"2000-1000\""),
        31,
        "sa[1].selectors[0].dst_ports",
        "empty",
    );
    assert_error(
        &edit("protocol = \"udp\"", "protocol = \"udpp\""),
        31,
        "sa[1].selectors[0].protocol",
        "unknown protocol",
    );
    assert_error(
        &edit("remote = \"192.0.2.2\"", "remote = \"2001:db8::2\""),
        19,
        "sa[0].remote",
        "different address families",
    );
    assert_error(
        &edit("remote = \"192.0.2.2\"", "remote = \"gw-b\""),
        19,
        "sa[0].remote",
        "not an IP address",
    );
    assert_error(
        &edit("remote = \"192.0.2.2\"\n", ""),
        14,
        "sa[0].remote",
        "needs remote",
    );
    assert_error(
        &edit(
            "remote = \"192.0.2.2\"",
            "local = \"192.0.2.9\"\nremote = \"192.0.2.2\"",
        ),
        19,
        "sa[0].local",
        "must be the protected address",
    );
    assert_error(
        &edit("local = \"192.0.2.1\"", "local = \"0.0.0.0\""),
        10,
        "protected.local",
        "unicast",
    );
}

/// AH (RFC 4302): integrity only, plain IP, host mode.
#[test]
fn ah_sas() {
    let ah = |lines: &str| {
        BASE.replace(
            "encryption = \"aes256\"\nintegrity = \"sha256\"\nkey = \"000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f\"\n",
            lines,
        )
    };
    let ok = ah("protocol = \"ah\"\nencryption = \"null\"\nintegrity = \"sha256\"\n");
    let config = Config::parse("gw.toml", &ok).unwrap();
    let sa = &config.sas[1];
    assert_eq!(sa.params.protocol, phalanx_sa::IpsecProtocol::Ah);
    assert!(sa.suite().ah);
    let esp_cipher = ah("protocol = \"ah\"\nencryption = \"aes256\"\nintegrity = \"sha256\"\nkey = \"000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f\"\n");
    assert_error(
        &esp_cipher,
        26,
        "sa[1].encryption",
        "encryption must be \"null\"",
    );
    let no_integ = ah("protocol = \"ah\"\nencryption = \"null\"\n");
    assert_error(
        &no_integ,
        26,
        "sa[1].integrity",
        "needs an integrity algorithm",
    );
    let udp = ok.replace("encap = \"none\"\n", "");
    assert_error(&udp, 26, "sa[1].encap", "never in UDP");
}

#[test]
fn peer_replay_window() {
    let out = edit(
        "remote = \"192.0.2.2\"\n\n[[sa]]\nname = \"in1\"",
        "remote = \"192.0.2.2\"\npeer_replay_window = 128\n\n[[sa]]\nname = \"in1\"",
    );
    let config = Config::parse("gw.toml", &out).unwrap();
    let windows: Vec<u32> = config.sas.iter().map(|sa| sa.peer_replay_window).collect();
    assert_eq!(windows, [128, 0]);
    let zero = edit(
        "remote = \"192.0.2.2\"\n\n[[sa]]\nname = \"in1\"",
        "remote = \"192.0.2.2\"\npeer_replay_window = 0\n\n[[sa]]\nname = \"in1\"",
    );
    assert_error(
        &zero,
        20,
        "sa[0].peer_replay_window",
        "leave peer_replay_window out",
    );
    let inbound = edit(
        "encap = \"none\"",
        "encap = \"none\"\npeer_replay_window = 64",
    );
    assert_error(
        &inbound,
        31,
        "sa[1].peer_replay_window",
        "outbound SAs only",
    );
}

#[test]
fn ranges_windows_and_lifetimes() {
    let window = edit("encap = \"none\"", "encap = \"none\"\nreplay_window = 16");
    assert_error(&window, 31, "sa[1].replay_window", "0 (off) or 32..=65536");
    assert!(Config::parse(
        "gw.toml",
        &edit("encap = \"none\"", "encap = \"none\"\nreplay_window = 0")
    )
    .is_ok());
    assert_error(
        &edit("mtu = 1400", "mtu = 100"),
        7,
        "clear.mtu",
        "out of range 576..=65000",
    );
    assert_error(
        &edit("workers = 2", "workers = 1000"),
        2,
        "daemon.workers",
        "out of range",
    );
    assert_error(
        &edit("hard_bytes = 2000", "hard_bytes = 10"),
        33,
        "sa[1].lifetime.soft_bytes",
        "exceeds",
    );
    assert_error(
        &edit("raw_esp = true", "raw_esp = false"),
        30,
        "sa[1].encap",
        "raw_esp = true",
    );
    assert_error(
        &edit("tun = \"phx0\"", "tun = \"a-name-much-too-long\""),
        6,
        "clear.tun",
        "interface name",
    );
}

#[test]
fn unreadable_file_names_the_file() {
    let e = Config::load(std::path::Path::new("/nonexistent/phx.toml")).unwrap_err();
    assert_eq!(e.line, 0);
    assert!(
        e.to_string()
            .starts_with("/nonexistent/phx.toml: cannot read"),
        "{e}"
    );
}

#[test]
fn same_definition_ignores_the_line_only() {
    let a = Config::parse("a", BASE).unwrap();
    let b = Config::parse("b", &format!("\n\n{BASE}")).unwrap();
    assert!(a.sas[0].same_definition(&b.sas[0]));
    assert!(a.policies[0].same_definition(&b.policies[0]));
    let c = Config::parse(
        "c",
        &edit(
            "0102030405060708090a0b0c0d0e0f1011121314",
            "ff02030405060708090a0b0c0d0e0f1011121314",
        ),
    )
    .unwrap();
    assert!(!a.sas[0].same_definition(&c.sas[0]));
}

/// A file with IKE: `[ike]`, a PSK connection with two children, and a
/// responder-only one; tests break one line of it at a time.
const IKE: &str = r#"[clear]
tun = "phx0"

[protected]
local = "192.0.2.1"
raw_esp = true

[ike]
port = 500
half_open_max = 512
cookie_threshold = 16
retransmit_base = "250ms"
retransmit_tries = 4
fragment_mtu = 1200

[[connection]]
name = "site-b"
remote_addr = "192.0.2.2"
local_id = "@gw-a.example"
remote_id = "gw-b.example"
auth = "psk"
psk = "a long shared secret"
proposals = ["aes128gcm16-prfsha256-x25519", "aes256-sha256-modp2048"]
start_action = "trap"
dpd_delay = "20s"
rekey_time = "2h"
rekey_jitter = "5m"
lifetime = "3h"
fragmentation = false

[[connection.child]]
name = "net"
local_ts = ["10.1.0.0/24", "fd01::/64"]
remote_ts = ["10.2.0.0/24", "fd02::/64"]
esp_proposals = ["aes128gcm16-esn-noesn"]
rekey_time = "30m"
rekey_bytes = 1000000
replay_window = 2048

[[connection.child]]
name = "web"
local_ts = ["10.1.0.10[tcp/80]"]
remote_ts = ["10.2.0.0-10.2.0.9"]
mode = "transport"

[[connection]]
name = "roadwarriors"
auth = "psk"
psk = "0x000102030405060708090a0b0c0d0e0f"
force_encap = true

[[connection.child]]
name = "all"
local_ts = ["0.0.0.0/0"]
remote_ts = ["10.9.0.0/16"]
"#;

fn ike_edit(from: &str, to: &str) -> String {
    assert!(
        IKE.contains(from),
        "test edits a line that is not there: {from}"
    );
    IKE.replacen(from, to, 1)
}

#[test]
fn ike_connections_parse_with_defaults_filled_in() {
    use phalanx_ike::config::{LocalAuth, StartAction};
    use std::time::Duration;
    let c = Config::parse("gw.toml", IKE).unwrap();
    let ike = c.ike.as_ref().unwrap();
    assert_eq!(ike.port, 500);
    let limits = ike.endpoint.limits;
    assert_eq!((limits.half_open_max, limits.cookie_threshold), (512, 16));
    assert_eq!(limits.retransmit_base, Duration::from_millis(250));
    assert_eq!((limits.retransmit_tries, limits.fragment_mtu), (4, 1200));
    let site = ike.connection("site-b").unwrap();
    assert_eq!(site.local_addr.to_string(), "192.0.2.1");
    assert_eq!((site.local_port, site.remote_port), (500, 500));
    assert_eq!(site.local_id.to_string(), "gw-a.example");
    assert_eq!(site.ike_proposals.len(), 2);
    assert_eq!(site.start_action, StartAction::Trap);
    assert_eq!(site.dpd_delay, Some(Duration::from_secs(20)));
    assert_eq!(site.ike_lifetime.rekey_time, Duration::from_secs(7200));
    assert_eq!(site.ike_lifetime.jitter, Duration::from_secs(300));
    assert_eq!(site.ike_lifetime.hard_time, Duration::from_secs(10_800));
    assert!(!site.fragmentation && !site.force_encap);
    assert!(
        matches!(&site.local_auth, LocalAuth::Psk(k) if k.as_slice() == b"a long shared secret")
    );
    let net = &site.children[0];
    assert_eq!((net.local_ts.len(), net.remote_ts.len()), (2, 2));
    assert_eq!(net.proposals[0].esn, vec![true, false]);
    assert_eq!(net.lifetime.rekey_time, Duration::from_secs(1800));
    assert_eq!(net.lifetime.jitter, Duration::from_secs(180), "a tenth");
    assert_eq!(net.lifetime.hard_time, Duration::from_secs(1980), "110 %");
    assert_eq!(net.lifetime.rekey_bytes, Some(1_000_000));
    assert_eq!(net.replay_window, 2048);
    assert!(matches!(net.mode, SaMode::Tunnel { .. }));
    let web = &site.children[1];
    assert_eq!(web.mode, SaMode::Transport);
    assert_eq!(web.local_ts[0].ip_protocol, IpProtocol::TCP);
    let road = ike.connection("roadwarriors").unwrap();
    assert_eq!(road.remote_addr, None);
    assert_eq!(
        road.local_id.to_string(),
        "192.0.2.1",
        "default: local_addr"
    );
    assert_eq!(road.dpd_delay, Some(Duration::from_secs(30)));
    assert!(matches!(&road.local_auth, LocalAuth::Psk(k) if k.len() == 16));
    assert_eq!(
        road.ike_proposals,
        phalanx_ike::config::IkeProposal::default_set()
    );
    // Policies: v4 and v6 pairs for "net", one pair for "web".
    let sets = &ike.child_policies;
    assert_eq!(sets.len(), 3);
    assert_eq!(sets[0].selectors.len(), 2);
    assert!(sets[0].trap && !sets[2].trap);
    assert_eq!(sets[0].policy_name(1), "site-b/net#1");
    assert_eq!(sets[0].priority, 1000);
    // No IKE at all: no settings.
    assert!(Config::parse("gw.toml", BASE).unwrap().ike.is_none());
}

/// Every IKE field's error names the file, line, column and field.
#[test]
fn ike_errors_name_line_and_field() {
    let cases: &[(&str, &str, usize, &str, &str)] = &[
        (
            "port = 500",
            "port = 4500",
            9,
            "ike.port",
            "ESP-in-UDP port",
        ),
        ("port = 500", "port = 0", 9, "ike.port", "out of range"),
        (
            "half_open_max = 512",
            "half_open_max = 0",
            10,
            "ike.half_open_max",
            "out of range",
        ),
        (
            "retransmit_base = \"250ms\"",
            "retransmit_base = \"soon\"",
            12,
            "ike.retransmit_base",
            "not a duration",
        ),
        (
            "retransmit_tries = 4",
            "retransmit_tries = 99",
            13,
            "ike.retransmit_tries",
            "out of range",
        ),
        (
            "fragment_mtu = 1200",
            "fragment_mtu = 100",
            14,
            "ike.fragment_mtu",
            "out of range",
        ),
        ("port = 500", "prot = 500", 9, "ike.prot", "unknown field"),
        (
            "name = \"site-b\"",
            "name = \"site b\"",
            17,
            "connection[0].name",
            "not a name",
        ),
        (
            "remote_addr = \"192.0.2.2\"",
            "remote_addr = \"gw-b\"",
            18,
            "connection[0].remote_addr",
            "not an IP address",
        ),
        (
            "remote_addr = \"192.0.2.2\"",
            "remote_addr = \"fd00::2\"",
            18,
            "connection[0].remote_addr",
            "family",
        ),
        (
            "remote_addr = \"192.0.2.2\"",
            "remote_addr = \"192.0.2.2\"\nlocal_addr = \"192.0.2.9\"",
            19,
            "connection[0].local_addr",
            "protected address",
        ),
        (
            "remote_addr = \"192.0.2.2\"",
            "remote_addr = \"192.0.2.2\"\nremote_port = 70000",
            19,
            "connection[0].remote_port",
            "out of range",
        ),
        (
            "local_id = \"@gw-a.example\"",
            "local_id = \"C=CH, X\"",
            19,
            "connection[0].local_id",
            "not an identity",
        ),
        (
            "auth = \"psk\"",
            "auth = \"eap\"",
            21,
            "connection[0].auth",
            "unknown auth",
        ),
        (
            "psk = \"a long shared secret\"",
            "psk = \"short\"",
            22,
            "connection[0].psk",
            "at least",
        ),
        (
            "psk = \"a long shared secret\"",
            "psk = \"0xzz\"",
            22,
            "connection[0].psk",
            "not a hex key",
        ),
        (
            "psk = \"a long shared secret\"\n",
            "",
            21,
            "connection[0].psk",
            "needs psk",
        ),
        (
            "psk = \"a long shared secret\"",
            "psk = \"a long shared secret\"\ncertificate = \"x.pem\"",
            21,
            "connection[0].certificate",
            "not used: we do not sign",
        ),
        (
            "\"aes256-sha256-modp2048\"]",
            "\"aes999-sha256\"]",
            23,
            "connection[0].proposals[1]",
            "unknown token \"aes999\"",
        ),
        (
            "proposals = [\"aes128gcm16-prfsha256-x25519\", \"aes256-sha256-modp2048\"]",
            "proposals = []",
            23,
            "connection[0].proposals",
            "at least one",
        ),
        (
            "start_action = \"trap\"",
            "start_action = \"later\"",
            24,
            "connection[0].start_action",
            "unknown start_action",
        ),
        (
            "dpd_delay = \"20s\"",
            "dpd_delay = \"20 s\"",
            25,
            "connection[0].dpd_delay",
            "not a duration",
        ),
        (
            "rekey_jitter = \"5m\"",
            "rekey_jitter = \"3h\"",
            27,
            "connection[0].rekey_jitter",
            "shorter than rekey_time",
        ),
        (
            "lifetime = \"3h\"",
            "lifetime = \"1h\"",
            28,
            "connection[0].lifetime",
            "longer than rekey_time",
        ),
        (
            "name = \"net\"",
            "name = \"n/t\"",
            32,
            "connection[0].child[0].name",
            "not a name",
        ),
        (
            "name = \"web\"",
            "name = \"net\"",
            41,
            "connection[0].child[1].name",
            "duplicate child name",
        ),
        (
            "local_ts = [\"10.1.0.0/24\", \"fd01::/64\"]",
            "local_ts = [\"10.1.0.0/24\", \"fd01::/129\"]",
            33,
            "connection[0].child[0].local_ts[1]",
            "at most 128",
        ),
        (
            "remote_ts = [\"10.2.0.0-10.2.0.9\"]",
            "remote_ts = [\"fd02::/64\"]",
            43,
            "connection[0].child[1].remote_ts",
            "address family",
        ),
        (
            "remote_ts = [\"10.2.0.0-10.2.0.9\"]",
            "remote_ts = []",
            43,
            "connection[0].child[1].remote_ts",
            "at least one",
        ),
        (
            "esp_proposals = [\"aes128gcm16-esn-noesn\"]",
            "esp_proposals = [\"aes128gcm16-prfsha256\"]",
            35,
            "connection[0].child[0].esp_proposals[0]",
            "unknown token \"prfsha256\"",
        ),
        (
            "esp_proposals = [\"aes128gcm16-esn-noesn\"]",
            "esp_proposals = [\"aes128gcm16-esn-noesn\"]\nah_proposals = [\"sha256\"]",
            36,
            "connection[0].child[0].ah_proposals",
            "AH and ESP together",
        ),
        (
            "mode = \"transport\"",
            "mode = \"transport\"\nah_proposals = [\"aes128-sha256\"]",
            45,
            "connection[0].child[1].ah_proposals[0]",
            "AH has no encryption",
        ),
        (
            "remote_ts = [\"10.9.0.0/16\"]",
            "remote_ts = [\"10.9.0.0/16\"]\nah_proposals = [\"sha256\"]",
            56,
            "connection[1].child[0].ah_proposals",
            "RFC 3948",
        ),
        (
            "mode = \"transport\"",
            "mode = \"beet\"",
            44,
            "connection[0].child[1].mode",
            "unknown mode",
        ),
        (
            "rekey_time = \"30m\"",
            "rekey_time = \"half an hour\"",
            36,
            "connection[0].child[0].rekey_time",
            "not a duration",
        ),
        (
            "replay_window = 2048",
            "replay_window = 8",
            38,
            "connection[0].child[0].replay_window",
            "0 (off) or 32..=65536",
        ),
        (
            "rekey_bytes = 1000000",
            "rekey_bytes = -1",
            37,
            "connection[0].child[0].rekey_bytes",
            "invalid value",
        ),
        (
            "name = \"roadwarriors\"",
            "name = \"site-b\"",
            47,
            "connection[1].name",
            "duplicate connection name",
        ),
        (
            "name = \"all\"",
            "nome = \"all\"",
            53,
            "connection[1].child[0].nome",
            "unknown field",
        ),
    ];
    for (from, to, line, field, fragment) in cases {
        let text = ike_edit(from, to);
        let e = error(&text);
        assert_eq!(
            (e.line, e.field.as_str()),
            (*line, *field),
            "{from} -> {to}: {e}"
        );
        assert!(e.message.contains(fragment), "{from} -> {to}: {e}");
        assert!(
            e.to_string().starts_with(&format!("gw.toml:{line}:")),
            "{e}"
        );
    }
    // An AH child: integrity-only proposals, and the raw AH socket is
    // needed at start.
    let ah = Config::parse(
        "gw.toml",
        &ike_edit(
            "esp_proposals = [\"aes128gcm16-esn-noesn\"]",
            "ah_proposals = [\"sha384-x25519-esn\", \"default\"]",
        ),
    )
    .unwrap();
    let net = &ah
        .ike
        .as_ref()
        .unwrap()
        .connection("site-b")
        .unwrap()
        .children[0];
    assert_eq!(net.protocol, phalanx_sa::IpsecProtocol::Ah);
    assert_eq!(net.proposals.len(), 2);
    assert!(net.proposals.iter().all(|p| p.encr.is_empty()));
    assert!(ah.uses_ah());
    assert!(!Config::parse("gw.toml", IKE).unwrap().uses_ah());
    // A raw_esp-less file refuses plain ESP only when no NAT-T is forced.
    let no_raw = ike_edit("raw_esp = true", "raw_esp = false");
    assert_eq!(error(&no_raw).field, "connection[0].force_encap");
    // start/trap need someone to initiate to.
    let trap = ike_edit(
        "force_encap = true",
        "force_encap = true\nstart_action = \"start\"",
    );
    assert_error(&trap, 51, "connection[1].start_action", "needs remote_addr");
}

/// Certificates, keys and CAs are read relative to the config file;
/// an unreadable or unusable file is an error at its field.
#[test]
fn pubkey_files_are_read_relative_to_the_file() {
    let dir = std::env::temp_dir().join(format!("phalanxd-pki-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("certs")).unwrap();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "Phalanx test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["gw-a.example".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "gw-a");
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    std::fs::write(dir.join("certs/gw.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("certs/gw.key"), key.serialize_pem()).unwrap();
    std::fs::write(dir.join("certs/ca.pem"), ca.pem()).unwrap();
    let text = IKE.replace(
        "auth = \"psk\"\npsk = \"a long shared secret\"",
        "auth = \"pubkey\"\ncertificate = \"certs/gw.pem\"\nprivate_key = \"certs/gw.key\"\nca = [\"certs/ca.pem\"]",
    );
    let path = dir.join("gw.toml");
    std::fs::write(&path, &text).unwrap();
    let c = Config::load(&path).unwrap();
    let site = c.ike.as_ref().unwrap().connection("site-b").unwrap();
    assert!(
        site.send_cert && site.send_certreq,
        "certificates: sent and asked for"
    );
    assert!(
        matches!(&site.local_auth, phalanx_ike::config::LocalAuth::Signature { chain, .. } if chain.len() == 1)
    );
    // Reloading the same files keeps the key and anchor objects.
    let mut again = Config::load(&path).unwrap();
    let old = c.ike.as_ref().unwrap();
    let fresh = again.ike.as_mut().unwrap();
    assert!(!crate::config::same_connection(
        &old.endpoint.connections[0],
        &fresh.endpoint.connections[0]
    ));
    fresh.adopt_unchanged_credentials(old);
    assert!(crate::config::same_connection(
        &old.endpoint.connections[0],
        &fresh.endpoint.connections[0]
    ));
    // Errors name the field.
    std::fs::write(dir.join("certs/gw.key"), "not a key").unwrap();
    let e = Config::load(&path).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_str()),
        (23, "connection[0].private_key"),
        "{e}"
    );
    std::fs::remove_file(dir.join("certs/ca.pem")).unwrap();
    let e = Config::load(&path).unwrap_err();
    assert_eq!(e.field, "connection[0].ca[0]", "{e}");
    assert!(e.message.contains("cannot read"), "{e}");
    let e = Config::parse("gw.toml", &text.replace("ca = [\"certs/ca.pem\"]\n", "")).unwrap_err();
    assert_eq!(e.field, "connection[0].ca", "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_ike_examples_parse() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/");
    for name in ["gateway-a-ike.toml", "gateway-b-ike.toml"] {
        let path = std::path::PathBuf::from(dir).join(name);
        let c = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let ike = c.ike.unwrap();
        assert_eq!(ike.endpoint.connections.len(), 1, "{name}");
        assert_eq!(ike.child_policies[0].selectors.len(), 2, "{name}");
    }
}

#[test]
fn fragment_is_inner_by_default_or_outer_and_nothing_else() {
    let c = Config::parse("gw.toml", BASE).unwrap();
    assert_eq!(c.protected.fragment, phalanx_esp::FragmentPolicy::Inner);
    let outer = edit("raw_esp = true", "raw_esp = true\nfragment = \"outer\"");
    let c = Config::parse("gw.toml", &outer).unwrap();
    assert_eq!(c.protected.fragment, phalanx_esp::FragmentPolicy::Outer);
    let bad = edit("raw_esp = true", "raw_esp = true\nfragment = \"both\"");
    assert_error(
        &bad,
        12,
        "protected.fragment",
        "neither \"inner\" nor \"outer\"",
    );
}

/// `[[pool]]` tables and a connection's `pools`: parsed, and each mistake
/// named at its line.
#[test]
fn pools_parse_and_refuse_mistakes() {
    let with_pool = |pool: &str, pools: &str| {
        let text = ike_edit(
            "force_encap = true",
            &format!("force_encap = true\npools = {pools}"),
        );
        format!("{text}\n{pool}\n")
    };
    let ok = with_pool(
        "[[pool]]\nname = \"rw4\"\naddrs = \"10.3.0.0/24\"\ndns = [\"10.1.0.53\"]",
        "[\"rw4\"]",
    );
    let c = Config::parse("gw.toml", &ok).unwrap();
    let ike = c.ike.as_ref().unwrap();
    let pool = &ike.endpoint.pools[0];
    assert_eq!(
        (pool.first.to_string(), pool.last.to_string()),
        ("10.3.0.1".into(), "10.3.0.254".into())
    );
    assert_eq!(
        ike.connection("roadwarriors").unwrap().pools,
        vec!["rw4".to_owned()]
    );
    let sets: Vec<bool> = ike.child_policies.iter().map(|s| s.per_peer).collect();
    assert_eq!(sets, vec![false, false, true]);

    let unknown = with_pool(
        "[[pool]]\nname = \"rw4\"\naddrs = \"10.3.0.0/24\"",
        "[\"rw6\"]",
    );
    let e = error(&unknown);
    assert_eq!(e.field, "connection[1].pools[0]", "{e}");
    assert!(e.message.contains("no [[pool]] named \"rw6\""), "{e}");
    let empty = with_pool(
        "[[pool]]\nname = \"rw4\"\naddrs = \"10.3.0.9-10.3.0.1\"",
        "[\"rw4\"]",
    );
    let e = error(&empty);
    assert_eq!(e.field, "pool[0].addrs", "{e}");
    let dup = with_pool(
        "[[pool]]\nname = \"rw4\"\naddrs = \"10.3.0.0/24\"\n[[pool]]\nname = \"rw4\"\naddrs = \"10.4.0.0/24\"",
        "[\"rw4\"]",
    );
    assert_eq!(error(&dup).field, "pool[1].name");
}

/// `remote_auth = "eap-mschapv2"` and `[[eap_secret]]`.
#[test]
fn eap_end_users_parse_and_refuse_mistakes() {
    let with = |remote_auth: &str, secrets: &str| {
        let text = ike_edit(
            "force_encap = true",
            &format!("force_encap = true\nremote_auth = {remote_auth}"),
        );
        format!("{text}\n{secrets}\n")
    };
    let secrets = "[[eap_secret]]\nid = \"alice@example.com\"\nsecret = \"alice's password\"";
    let c = Config::parse("gw.toml", &with("\"eap-mschapv2\"", secrets)).unwrap();
    let ike = c.ike.as_ref().unwrap();
    let rw = ike.connection("roadwarriors").unwrap();
    assert!(matches!(
        rw.remote_auth,
        phalanx_ike::config::RemoteAuth::Eap
    ));
    use phalanx_eap::CredentialStore;
    assert!(ike.eap.secrets.nt_hash("alice@example.com").is_some());
    // A reload of the same file keeps the End-Users' SAs: the summary says
    // unchanged, by phalanx-ike's rule (it said "changed" before).
    let again = Config::parse("gw.toml", &with("\"eap-mschapv2\"", secrets)).unwrap();
    let changes = crate::config::connection_changes(c.ike.as_ref(), again.ike.as_ref());
    assert!(changes.changed.is_empty(), "{changes:?}");
    assert!(ike.eap.secrets.nt_hash("bob@example.com").is_none());
    assert!(!ike.eap.uses_radius("roadwarriors"));

    let e = error(&with("\"eap-md5\"", secrets));
    assert_eq!(e.field, "connection[1].remote_auth", "{e}");
    assert!(e.message.contains("unknown remote_auth"), "{e}");
    let twice = format!("{secrets}\n{secrets}");
    let e = error(&with("\"eap-mschapv2\"", &twice));
    assert_eq!(e.field, "eap_secret[1].id", "{e}");
    let empty = "[[eap_secret]]\nid = \"alice@example.com\"\nsecret = \"\"";
    assert_eq!(
        error(&with("\"eap-mschapv2\"", empty)).field,
        "eap_secret[0].secret"
    );
}

/// `remote_auth = "eap-radius"` and `[radius]`.
#[test]
fn radius_servers_parse_and_refuse_mistakes() {
    let with = |radius: &str| {
        let text = ike_edit(
            "force_encap = true",
            "force_encap = true\nremote_auth = \"eap-radius\"",
        );
        format!("{text}\n{radius}\n")
    };
    let radius = r#"[radius]
nas_identifier = "gw-b"
timeout = "1s"
retransmits = 1
dead_time = "20s"
interim_interval = "5m"
source = "10.2.0.1"

[[radius.server]]
address = "10.2.0.2"
secret = "one"

[[radius.server]]
address = "10.2.0.3"
secret = "two"
auth_port = 11812
acct_port = 0"#;
    let c = Config::parse("gw.toml", &with(radius)).unwrap();
    let ike = c.ike.as_ref().unwrap();
    assert!(ike.eap.uses_radius("roadwarriors"));
    let settings = ike.eap.radius.as_ref().unwrap();
    let client = &settings.client;
    assert_eq!(client.nas_identifier, "gw-b");
    assert_eq!(client.timeout, std::time::Duration::from_secs(1));
    assert_eq!(client.retransmits, 1);
    assert_eq!(client.dead_time, std::time::Duration::from_secs(20));
    assert_eq!(settings.interim, Some(std::time::Duration::from_secs(300)));
    assert_eq!(settings.source, Some("10.2.0.1".parse().unwrap()));
    assert_eq!(client.servers[0].auth, "10.2.0.2:1812".parse().unwrap());
    assert_eq!(
        client.servers[0].acct,
        Some("10.2.0.2:1813".parse().unwrap())
    );
    assert_eq!(client.servers[1].auth, "10.2.0.3:11812".parse().unwrap());
    assert_eq!(client.servers[1].acct, None, "acct_port = 0: no accounting");
    assert_eq!(&client.servers[1].secret[..], b"two");

    // eap-radius without [radius].
    let e = error(&with(""));
    assert_eq!(e.field, "connection[1].remote_auth", "{e}");
    assert!(e.message.contains("[radius]"), "{e}");
    for (from, to, field) in [
        (
            "address = \"10.2.0.2\"",
            "address = \"radius.example\"",
            "radius.server[0].address",
        ),
        (
            "secret = \"one\"",
            "secret = \"\"",
            "radius.server[0].secret",
        ),
        ("timeout = \"1s\"", "timeout = \"0s\"", "radius.timeout"),
        ("retransmits = 1", "retransmits = 50", "radius.retransmits"),
        (
            "source = \"10.2.0.1\"",
            "source = \"fd02::1\"",
            "radius.server[0].address",
        ),
        (
            "auth_port = 11812",
            "auth_port = 0",
            "radius.server[1].auth_port",
        ),
    ] {
        let e = error(&with(&radius.replacen(from, to, 1)));
        assert_eq!(e.field, field, "{from} -> {to}: {e}");
    }
    let no_server = "[radius]\nnas_identifier = \"x\"";
    assert_eq!(error(&with(no_server)).field, "radius.server");
}

/// A temporary directory `phalanxd-NAME-PID` with `certs/ca.pem` (a CA),
/// `certs/gw.pem` and `certs/gw.key` (gw-a.example's certificate of it).
fn gateway_pki(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("phalanxd-{name}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("certs")).unwrap();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["gw-a.example".to_owned()]).unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    std::fs::write(dir.join("certs/gw.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("certs/gw.key"), key.serialize_pem()).unwrap();
    std::fs::write(dir.join("certs/ca.pem"), ca.pem()).unwrap();
    dir
}

/// `auth` (alias `local_auth`) and `remote_auth` apart: we sign and the
/// peer uses a PSK, or the other way round; each needs only its own
/// fields.
#[test]
fn local_and_remote_authentication_configured_apart() {
    use phalanx_ike::config::{LocalAuth, RemoteAuth};
    let dir = gateway_pki("mixed");
    let load = |auth: &str| {
        let text = IKE.replace("auth = \"psk\"\npsk = \"a long shared secret\"", auth);
        let path = dir.join("gw.toml");
        std::fs::write(&path, &text).unwrap();
        Config::load(&path)
    };
    let site = |c: &Config| {
        c.ike
            .as_ref()
            .unwrap()
            .connection("site-b")
            .unwrap()
            .clone()
    };

    // We sign, the peer shows the PSK: no CA needed.
    let c = load(
        "local_auth = \"pubkey\"\ncertificate = \"certs/gw.pem\"\nprivate_key = \"certs/gw.key\"\nremote_auth = \"psk\"\npsk = \"a long shared secret\"",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let s = site(&c);
    assert!(matches!(s.local_auth, LocalAuth::Signature { .. }));
    assert!(matches!(s.remote_auth, RemoteAuth::Psk(ref p) if &p[..] == b"a long shared secret"));
    // We show the PSK, the peer signs: its CA, no certificate of ours.
    let c = load("auth = \"psk\"\npsk = \"a long shared secret\"\nremote_auth = \"pubkey\"\nca = [\"certs/ca.pem\"]")
        .unwrap_or_else(|e| panic!("{e}"));
    let s = site(&c);
    assert!(matches!(s.local_auth, LocalAuth::Psk(_)));
    assert!(matches!(s.remote_auth, RemoteAuth::Signature { .. }));

    // What a side does not use is refused; what it needs is named.
    for (auth, field, fragment) in [
        (
            "auth = \"psk\"\npsk = \"a long shared secret\"\nremote_auth = \"pubkey\"",
            "connection[0].ca",
            "a peer that signs",
        ),
        (
            "auth = \"pubkey\"\ncertificate = \"certs/gw.pem\"\nprivate_key = \"certs/gw.key\"\nremote_auth = \"psk\"",
            "connection[0].psk",
            "needs psk",
        ),
        (
            "auth = \"psk\"\npsk = \"a long shared secret\"\nremote_auth = \"pubkey\"\nca = [\"certs/ca.pem\"]\ncertificate = \"certs/gw.pem\"",
            "connection[0].certificate",
            "we do not sign",
        ),
        (
            "auth = \"pubkey\"\ncertificate = \"certs/gw.pem\"\nprivate_key = \"certs/gw.key\"\nca = [\"certs/ca.pem\"]\npsk = \"a long shared secret\"",
            "connection[0].psk",
            "neither side",
        ),
        (
            "auth = \"psk\"\npsk = \"a long shared secret\"\nremote_auth = \"psk\"\nca = [\"certs/ca.pem\"]",
            "connection[0].ca",
            "the peer does not sign",
        ),
    ] {
        let e = load(auth).unwrap_err();
        assert_eq!(e.field, field, "{auth}: {e}");
        assert!(e.message.contains(fragment), "{auth}: {e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `remote_auth = "eap-tls"`: the EAP-TLS server is the connection's
/// certificate and key, End-Users' certificates of `ca`; each mistake
/// named at its field.
#[test]
fn eap_tls_end_users_parse_and_refuse_mistakes() {
    use crate::config::EapMethod;
    use phalanx_eap::tls::Tls13Keying;
    let dir = gateway_pki("eaptls");
    let other_key = rcgen::KeyPair::generate().unwrap();
    std::fs::write(dir.join("certs/other.key"), other_key.serialize_pem()).unwrap();
    const PUBKEY: &str = "auth = \"pubkey\"\ncertificate = \"certs/gw.pem\"\nprivate_key = \"certs/gw.key\"\nca = [\"certs/ca.pem\"]";
    let load = |fields: &str| {
        let text = IKE.replace(
            "auth = \"psk\"\npsk = \"a long shared secret\"",
            &format!("{fields}\nremote_auth = \"eap-tls\""),
        );
        let path = dir.join("gw.toml");
        std::fs::write(&path, &text).unwrap();
        Config::load(&path)
    };

    let c = load(PUBKEY).unwrap_or_else(|e| panic!("{e}"));
    let ike = c.ike.as_ref().unwrap();
    assert!(matches!(
        ike.connection("site-b").unwrap().remote_auth,
        phalanx_ike::config::RemoteAuth::Eap
    ));
    let Some(EapMethod::Tls(tls)) = ike.eap.method("site-b") else {
        panic!("no EAP-TLS server")
    };
    assert_eq!(tls.tls13_keying(), Tls13Keying::Rfc9190);
    assert_eq!(
        ike.eap.method("site-b").map(EapMethod::name),
        Some("eap-tls")
    );
    assert!(!ike.eap.uses_radius("site-b"));
    assert!(ike.eap.method("roadwarriors").is_none());
    assert_eq!(tls.fragment_size(), phalanx_eap::limits::TLS_FRAGMENT_SIZE);
    let c = load(&format!(
        "{PUBKEY}\neap_tls13 = \"pre-rfc9190\"\neap_tls_fragment_size = 500"
    ))
    .unwrap();
    let Some(EapMethod::Tls(tls)) = c.ike.as_ref().unwrap().eap.method("site-b") else {
        panic!("no EAP-TLS server")
    };
    assert_eq!(tls.tls13_keying(), Tls13Keying::PreRfc9190);
    assert_eq!(tls.fragment_size(), 500);

    for (fields, field, fragment) in [
        (
            "auth = \"psk\"\npsk = \"a long shared secret\"",
            "connection[0].auth",
            "needs auth = \"pubkey\"",
        ),
        (
            "auth = \"pubkey\"\ncertificate = \"certs/gw.pem\"\nprivate_key = \"certs/gw.key\"",
            "connection[0].ca",
            "End-Users' certificates",
        ),
        (
            &format!("{PUBKEY}\neap_tls13 = \"draft\""),
            "connection[0].eap_tls13",
            "unknown eap_tls13",
        ),
        (
            &format!("{PUBKEY}\neap_tls_fragment_size = 10"),
            "connection[0].eap_tls_fragment_size",
            "out of range 64..=16384",
        ),
        (
            "auth = \"pubkey\"\ncertificate = \"certs/gw.pem\"\nprivate_key = \"certs/other.key\"\nca = [\"certs/ca.pem\"]",
            "connection[0].private_key",
            "EAP-TLS: our certificate and key",
        ),
    ] {
        let e = load(fields).unwrap_err();
        assert_eq!(e.field, field, "{fields}: {e}");
        assert!(e.message.contains(fragment), "{fields}: {e}");
    }
    // The eap_tls fields belong to EAP-TLS only.
    let text = IKE.replace(
        "auth = \"psk\"\npsk = \"a long shared secret\"",
        &format!("{PUBKEY}\nremote_auth = \"pubkey\"\neap_tls13 = \"rfc9190\""),
    );
    let path = dir.join("gw.toml");
    std::fs::write(&path, &text).unwrap();
    let e = Config::load(&path).unwrap_err();
    assert_eq!(e.field, "connection[0].eap_tls13", "{e}");
    assert_eq!(e.line, 26, "{e}");
    let text = IKE.replace(
        "auth = \"psk\"\npsk = \"a long shared secret\"",
        &format!("{PUBKEY}\nremote_auth = \"eap-mschapv2\"\neap_tls_fragment_size = 500"),
    );
    std::fs::write(&path, &text).unwrap();
    let e = Config::load(&path).unwrap_err();
    assert_eq!(e.field, "connection[0].eap_tls_fragment_size", "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
