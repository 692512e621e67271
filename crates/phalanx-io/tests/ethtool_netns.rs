//! Receive coalescing on a veth in a fresh network namespace (needs root
//! and `ethtool(8)`, which the test uses only to switch GRO on first and
//! to read what the kernel then reports; fails, does not skip, without
//! them).
// A panic is the failure report in a test.
#![allow(clippy::unwrap_used)]

mod common;

use common::NetNs;
use phalanx_io::ethtool::{disable_rx_coalescing, rx_coalescing, RxCoalescing};

fn gro_line(ns: &NetNs, dev: &str) -> String {
    let features = ns.exec(&["ethtool", "-k", dev]);
    features
        .lines()
        .find(|l| l.starts_with("generic-receive-offload:"))
        .unwrap_or_else(|| panic!("ethtool -k {dev}: no GRO line in {features}"))
        .to_string()
}

/// "GRO on, as NICs ship": read as on; turned off, and the kernel (through
/// ethtool(8), not this crate) agrees; a second call writes nothing.
#[test]
fn gro_on_a_veth_is_turned_off() {
    let ns = NetNs::create("eth");
    ns.ip(&["link", "add", "ge0", "type", "veth", "peer", "name", "ge1"]);
    ns.exec(&["ethtool", "-K", "ge0", "gro", "on"]);
    assert_eq!(gro_line(&ns, "ge0"), "generic-receive-offload: on");

    let before = ns.run(|| rx_coalescing("ge0")).unwrap();
    assert_eq!(
        before,
        RxCoalescing {
            gro: true,
            lro: false
        }
    );
    let was = ns.run(|| disable_rx_coalescing("ge0")).unwrap();
    assert_eq!(was, before);
    assert_eq!(gro_line(&ns, "ge0"), "generic-receive-offload: off");
    assert!(!ns.run(|| rx_coalescing("ge0")).unwrap().any());

    let again = ns.run(|| disable_rx_coalescing("ge0")).unwrap();
    assert_eq!(again, RxCoalescing::default(), "already off: nothing to do");
    // The peer end was not touched.
    assert!(ns.run(|| rx_coalescing("ge1")).is_ok());
}
