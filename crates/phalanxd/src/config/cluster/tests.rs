//! `[cluster]`: the example parses with its defaults, and each error
//! names the file, line, column and field.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::time::Duration;

use phalanx_cluster::DispatchScheme;
use phalanx_cluster::NodeId;
use phalanx_cluster::QuorumPolicy;

use super::super::{Config, ConfigError};
use super::{check_cluster_reload, mac};

/// A cluster node's file: line numbers matter to the tests below.
const BASE: &str = r#"[clear]
tun = "phx0"

[protected]
local = "192.0.2.1"

[cluster]
node_id = 2
scheme = "session-sqf"
heartbeat_interval_ms = 10
suspect_after_ms = 45

[cluster.outside]
interface = "wan0"
address = "192.0.2.1"
mac = "02:00:5e:10:00:01"

[cluster.inside]
interface = "lan0"
address = "10.1.0.1"
mac = "02-00-5E-10-00-02"

[[cluster.node]]
id = 1
address = "10.99.0.11"

[[cluster.node]]
id = 2
address = "10.99.0.12"
"#;

/// `BASE` with the first occurrence of `from` replaced by `to`.
fn edit(from: &str, to: &str) -> String {
    assert!(
        BASE.contains(from),
        "test edits text that is not there: {from}"
    );
    BASE.replacen(from, to, 1)
}

fn error(text: &str) -> ConfigError {
    match Config::parse("node.toml", text) {
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
        e.to_string().starts_with(&format!("node.toml:{line}:")),
        "{e}"
    );
}

#[test]
fn kernel_filter_can_be_turned_off() {
    let text = BASE.replacen("scheme =", "kernel_filter = false\nscheme =", 1);
    let config = Config::parse("node.toml", &text).unwrap();
    assert!(!config.cluster.unwrap().kernel_filter);
}

#[test]
fn kernel_filter_xdp_can_be_turned_off() {
    let text = BASE.replacen("scheme =", "kernel_filter_xdp = false\nscheme =", 1);
    let config = Config::parse("node.toml", &text).unwrap();
    let cluster = config.cluster.unwrap();
    assert!(cluster.kernel_filter && !cluster.kernel_filter_xdp);
}

#[test]
fn base_parses_with_defaults() {
    let config = Config::parse("node.toml", BASE).unwrap();
    let c = config.cluster.unwrap();
    assert_eq!(c.node_id, NodeId(2));
    assert_eq!(c.scheme, DispatchScheme::SessionShortestQueue);
    assert_eq!(c.group, "phalanx");
    assert_eq!(c.heartbeat_port, 7400);
    assert_eq!(c.heartbeat_interval, Duration::from_millis(10));
    assert_eq!(c.suspect_after, Duration::from_millis(45));
    assert_eq!((c.lease_len, c.checkpoint_every), (65_536, 1024));
    assert_eq!(c.quorum, QuorumPolicy::Majority);
    assert!(c.kernel_filter, "on by default");
    assert!(c.kernel_filter_xdp, "XDP on by default");
    assert_eq!(c.outside.interface, "wan0");
    let outside = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)));
    assert_eq!(c.outside.addresses.first(), outside);
    assert_eq!(c.outside.addresses.v6, None);
    assert_eq!(c.outside.mac, [2, 0, 0x5e, 0x10, 0, 1]);
    assert_eq!(c.inside.mac, [2, 0, 0x5e, 0x10, 0, 2]);
    assert_eq!(c.nodes.len(), 2);
    let local = IpAddr::V4(Ipv4Addr::new(10, 99, 0, 12));
    assert_eq!(c.local_address(), Some(local));
    assert_eq!(c.node_at(local), Some(NodeId(2)));
    assert_eq!(c.address_of(NodeId(3)), None);
}

/// IPv6 virtual addresses: a dual-stack LAN side, an IPv6 WAN side.
#[test]
fn ipv6_virtual_addresses_parse() {
    let text = edit("\"10.1.0.1\"", "[\"10.1.0.1\", \"fd01::1\"]");
    let c = Config::parse("node.toml", &text).unwrap().cluster.unwrap();
    assert_eq!(c.inside.addresses.v4, Some(Ipv4Addr::new(10, 1, 0, 1)));
    assert_eq!(c.inside.addresses.v6, Some("fd01::1".parse().unwrap()));
    assert_eq!(c.inside.addresses.to_string(), "10.1.0.1,fd01::1");

    let text = BASE
        .replacen("local = \"192.0.2.1\"", "local = \"2001:db8:f::1\"", 1)
        .replacen("address = \"192.0.2.1\"", "address = \"2001:db8:f::1\"", 1)
        .replacen("\"10.1.0.1\"", "[\"fd01::1\"]", 1);
    let c = Config::parse("node.toml", &text).unwrap().cluster.unwrap();
    let outside: Ipv6Addr = "2001:db8:f::1".parse().unwrap();
    assert_eq!(c.outside.addresses.first(), Some(IpAddr::V6(outside)));
    assert_eq!(
        (c.inside.addresses.v4, c.inside.addresses.v6),
        (None, Some("fd01::1".parse().unwrap()))
    );
}

#[test]
fn every_scheme_name_parses() {
    let names = [
        ("packet-rr", DispatchScheme::PacketRoundRobin),
        ("packet-sqf", DispatchScheme::PacketShortestQueue),
        ("session-rr", DispatchScheme::SessionRoundRobin),
        ("session-sqf", DispatchScheme::SessionShortestQueue),
        ("hash-src", DispatchScheme::HashSegments { with_spi: false }),
        (
            "hash-src-spi",
            DispatchScheme::HashSegments { with_spi: true },
        ),
    ];
    for (name, scheme) in names {
        let text = edit("\"session-sqf\"", &format!("{name:?}"));
        let c = Config::parse("node.toml", &text).unwrap().cluster.unwrap();
        assert_eq!(c.scheme, scheme, "{name}");
    }
    let text = edit("scheme = \"session-sqf\"\n", "");
    let c = Config::parse("node.toml", &text).unwrap().cluster.unwrap();
    assert_eq!(c.scheme, DispatchScheme::PacketRoundRobin, "the default");
}

#[test]
fn quorum_policy_is_chosen_by_name() {
    for (name, policy) in [
        ("majority", QuorumPolicy::Majority),
        ("off", QuorumPolicy::Off),
    ] {
        let text = edit("scheme =", &format!("quorum = {name:?}\nscheme ="));
        let c = Config::parse("node.toml", &text).unwrap().cluster.unwrap();
        assert_eq!(c.quorum, policy, "{name}");
    }
}

#[test]
fn no_cluster_table_is_host_mode() {
    let end = BASE.find("[cluster]").unwrap();
    let config = Config::parse("node.toml", &BASE[..end]).unwrap();
    assert!(config.cluster.is_none());
}

/// Each broken value: (from, to, line, field, message fragment).
#[test]
fn errors_name_line_and_field() {
    let cases: &[(&str, &str, usize, &str, &str)] = &[
        (
            "node_id = 2",
            "node_id = 0",
            8,
            "cluster.node_id",
            "out of range 1..=65535",
        ),
        (
            "node_id = 2",
            "node_id = 65536",
            8,
            "cluster.node_id",
            "16 bits",
        ),
        (
            "node_id = 2",
            "node_id = 3",
            8,
            "cluster.node",
            "not listed",
        ),
        (
            "\"session-sqf\"",
            "\"round-robin\"",
            9,
            "cluster.scheme",
            "packet-rr",
        ),
        (
            "scheme =",
            "group = \"\"\nscheme =",
            9,
            "cluster.group",
            "CPG group",
        ),
        (
            "scheme =",
            "heartbeat_port = 0\nscheme =",
            9,
            "cluster.heartbeat_port",
            "1..=65535",
        ),
        (
            "scheme =",
            "lease_len = 8\nscheme =",
            9,
            "cluster.lease_len",
            "out of range",
        ),
        (
            "scheme =",
            "quorum = \"none\"\nscheme =",
            9,
            "cluster.quorum",
            "\"majority\"",
        ),
        (
            "scheme =",
            "checkpoint_every = 0\nscheme =",
            9,
            "cluster.checkpoint_every",
            "range",
        ),
        (
            "scheme =",
            "kernel_filter = \"yes\"\nscheme =",
            9,
            "cluster.kernel_filter",
            "bool",
        ),
        (
            "= 45",
            "= 20",
            11,
            "cluster.suspect_after_ms",
            "more than twice",
        ),
        (
            "= 10\n",
            "= 0\n",
            10,
            "cluster.heartbeat_interval_ms",
            "out of range",
        ),
        (
            "\"wan0\"",
            "\"wan/0\"",
            14,
            "cluster.outside.interface",
            "interface name",
        ),
        (
            "address = \"192.0.2.1\"\nmac",
            "address = \"192.0.2.9\"\nmac",
            15,
            "cluster.outside.address",
            "protected.local",
        ),
        (
            "\"10.1.0.1\"",
            "\"224.0.0.1\"",
            20,
            "cluster.inside.address",
            "unicast",
        ),
        (
            "\"10.1.0.1\"",
            "[\"10.1.0.1\", \"10.1.0.2\"]",
            20,
            "cluster.inside.address",
            "at most one virtual address per family",
        ),
        (
            "\"10.1.0.1\"",
            "[\"fd01::1\", \"fd01::1\"]",
            20,
            "cluster.inside.address",
            "two IPv6 addresses",
        ),
        (
            "\"10.1.0.1\"",
            "[]",
            20,
            "cluster.inside.address",
            "no address",
        ),
        (
            "\"10.1.0.1\"",
            "[\"10.1.0.1\", \"ff02::1\"]",
            20,
            "cluster.inside.address",
            "unicast",
        ),
        (
            "address = \"192.0.2.1\"\nmac",
            "address = \"2001:db8::1\"\nmac",
            15,
            "cluster.outside.address",
            "protected.local",
        ),
        (
            "address = \"192.0.2.1\"\nmac",
            "address = [\"192.0.2.1\", \"2001:db8::1\"]\nmac",
            15,
            "cluster.outside.address",
            "alone",
        ),
        (
            "\"10.1.0.1\"",
            "[\"fd01::1\", \"192.0.2.1\"]",
            20,
            "cluster.inside.address",
            "must differ",
        ),
        (
            "\"10.1.0.1\"",
            "\"192.0.2.1\"",
            20,
            "cluster.inside.address",
            "must differ",
        ),
        (
            "\"lan0\"",
            "\"wan0\"",
            19,
            "cluster.inside.interface",
            "must differ",
        ),
        (
            "\"02:00:5e:10:00:01\"",
            "\"03:00:5e:10:00:01\"",
            16,
            "cluster.outside.mac",
            "multicast",
        ),
        (
            "\"02-00-5E-10-00-02\"",
            "\"02:00:5e:10:00\"",
            21,
            "cluster.inside.mac",
            "MAC address",
        ),
        (
            "\nid = 2\n",
            "\nid = 1\n",
            28,
            "cluster.node[1].id",
            "listed twice",
        ),
        (
            "\"10.99.0.12\"",
            "\"10.99.0.11\"",
            29,
            "cluster.node[1].address",
            "listed twice",
        ),
        (
            "\"10.99.0.12\"",
            "\"fd00::12\"",
            29,
            "cluster.node[1].address",
            "same family",
        ),
        (
            "\"10.99.0.12\"",
            "\"10.99.0\"",
            29,
            "cluster.node[1].address",
            "not an IP address",
        ),
        (
            "mac = \"02:00:5e:10:00:01\"\n",
            "",
            13,
            "cluster.outside",
            "missing field `mac`",
        ),
        (
            "node_id = 2",
            "node_id = 2\ncolour = 1",
            9,
            "cluster.colour",
            "unknown field",
        ),
    ];
    for (from, to, line, field, fragment) in cases {
        assert_error(&edit(from, to), *line, field, fragment);
    }
}

/// A connection for `BASE` (appended: its lines follow BASE's 41).
const CONNECTION: &str = r#"
[[connection]]
name = "site-b"
remote_addr = "192.0.2.2"
auth = "psk"
psk = "a long shared secret"
start_action = "start"
force_encap = true

[[connection.child]]
name = "net"
local_ts = ["10.1.0.0/24"]
remote_ts = ["10.2.0.0/24"]
"#;

/// IKE runs in cluster mode from the outside virtual address; what it
/// cannot do there is refused at its line.
#[test]
fn cluster_with_ike() {
    let text = format!("{BASE}{CONNECTION}");
    let config = Config::parse("node.toml", &text).unwrap();
    let ike = config.ike.as_ref().unwrap();
    let conn = &ike.endpoint.connections[0];
    assert_eq!(conn.local_addr, IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)));
    assert!(config.cluster.is_some());
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "start_action = \"start\"",
            "start_action = \"trap\"",
            "connection[0].start_action",
            "not available in cluster mode",
        ),
        (
            "remote_ts = [\"10.2.0.0/24\"]",
            "remote_ts = [\"10.2.0.0/24\"]\nmode = \"transport\"",
            "connection[0].child[0].mode",
            "transport mode",
        ),
        (
            "remote_ts = [\"10.2.0.0/24\"]",
            "remote_ts = [\"10.2.0.0/24\"]\nrekey_packets = 1000",
            "connection[0].child[0].rekey_packets",
            "rekey by time",
        ),
        (
            "remote_ts = [\"10.2.0.0/24\"]",
            "remote_ts = [\"10.2.0.0/24\"]\nrekey_bytes = 1000000",
            "connection[0].child[0].rekey_bytes",
            "each node counts",
        ),
        (
            "remote_ts = [\"10.2.0.0/24\"]",
            "remote_ts = [\"10.2.0.0/24\"]\nah_proposals = [\"sha256\"]",
            "connection[0].child[0].ah_proposals",
            "not carried by a cluster node",
        ),
    ];
    for (from, to, field, fragment) in cases {
        let edited = text.replacen(from, to, 1);
        let key = field.rsplit('.').next().unwrap();
        let line = 1 + edited.lines().position(|l| l.starts_with(key)).unwrap();
        assert_error(&edited, line, field, fragment);
    }
    // EAP through RADIUS works on a cluster; accounting (on by default,
    // port 1813) does not: refused at the server, fine with acct_port = 0.
    let radius = text.replacen(
        "start_action = \"start\"",
        "start_action = \"start\"\nremote_auth = \"eap-radius\"",
        1,
    ) + "\n[radius]\n\n[[radius.server]]\naddress = \"10.1.0.10\"\nsecret = \"s\"\n";
    let line = 1 + radius
        .lines()
        .position(|l| l.starts_with("address = \"10.1.0.10\""))
        .unwrap();
    assert_error(
        &radius,
        line,
        "radius.server[0].acct_port",
        "accounting is not available",
    );
    let with_port = radius.replacen("secret = \"s\"\n", "secret = \"s\"\nacct_port = 1813\n", 1);
    let line = 1 + with_port
        .lines()
        .position(|l| l.starts_with("acct_port"))
        .unwrap();
    assert_error(
        &with_port,
        line,
        "radius.server[0].acct_port",
        "accounting is not available",
    );
    let no_accounting = radius.replacen("secret = \"s\"\n", "secret = \"s\"\nacct_port = 0\n", 1);
    Config::parse("cluster.toml", &no_accounting).unwrap_or_else(|e| panic!("{e}"));
    // Pools are replicated: a cluster node hands out its share.
    let pooled = text.replacen(
        "start_action = \"start\"",
        "start_action = \"start\"\npools = [\"rw4\"]",
        1,
    ) + "\n[[pool]]\nname = \"rw4\"\naddrs = \"10.3.0.0/24\"\n";
    let c = Config::parse("cluster.toml", &pooled).unwrap_or_else(|e| panic!("{e}"));
    let cluster = c.cluster.unwrap();
    let share = cluster.pool_partition();
    assert_eq!(share.nodes as usize, cluster.nodes.len());
    let mut ids: Vec<_> = cluster.nodes.iter().map(|(id, _)| *id).collect();
    ids.sort_unstable();
    assert_eq!(ids[share.node as usize], cluster.node_id);
    // Without [cluster], the same connection may trap.
    let host = text[..text.find("[cluster]").unwrap()].to_owned() + CONNECTION;
    assert!(Config::parse("host.toml", &host.replacen("\"start\"", "\"trap\"", 1)).is_ok());
}

#[test]
fn mac_syntax() {
    assert_eq!(mac("02:00:5e:10:00:01"), Ok([2, 0, 0x5e, 0x10, 0, 1]));
    assert_eq!(
        mac("AA-BB-CC-DD-EE-FE"),
        Ok([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xfe])
    );
    for bad in [
        "",
        "02:00:5e:10:00",
        "02:00:5e:10:00:01:02",
        "2:0:5e:10:0:1",
        "zz:00:5e:10:00:01",
    ] {
        assert!(mac(bad).is_err(), "{bad}");
    }
    assert!(mac("00:00:00:00:00:00").is_err());
    assert!(mac("ff:ff:ff:ff:ff:ff").unwrap_err().contains("multicast"));
}

#[test]
fn reload_may_not_touch_the_cluster() {
    let config = Config::parse("node.toml", BASE).unwrap();
    let current = config.cluster.as_ref();
    assert_eq!(check_cluster_reload("node.toml", None, None), Ok(()));
    assert_eq!(check_cluster_reload("node.toml", current, current), Ok(()));
    let mut moved = config.cluster.clone().unwrap();
    moved.heartbeat_port = 7401;
    let e = check_cluster_reload("node.toml", current, Some(&moved)).unwrap_err();
    assert!(e.starts_with("node.toml: [cluster] changed;"), "{e}");
    assert!(e.contains("restart"), "{e}");
    let e = check_cluster_reload("node.toml", current, None).unwrap_err();
    assert!(e.contains("[cluster] removed"), "{e}");
    let e = check_cluster_reload("node.toml", None, current).unwrap_err();
    assert!(e.contains("[cluster] added"), "{e}");
}

/// AH is host mode only: a cluster node refuses an AH SA at its protocol.
#[test]
fn ah_is_refused_on_a_cluster() {
    let text = format!(
        "{BASE}\n[[sa]]\nname = \"ah-out\"\ndirection = \"out\"\nspi = 0x1001\nprotocol = \"ah\"\n\
         encryption = \"null\"\nintegrity = \"sha256\"\n\
         integrity_key = \"000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f\"\n\
         remote = \"192.0.2.2\"\nencap = \"none\"\n"
    );
    let e = error(&text.replace(
        "local = \"192.0.2.1\"\n",
        "local = \"192.0.2.1\"\nraw_esp = true\n",
    ));
    assert_eq!(e.field, "sa[0].protocol", "{e}");
    assert!(
        e.to_string().contains("not carried by a cluster node"),
        "{e}"
    );
}
