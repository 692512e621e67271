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
