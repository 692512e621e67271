//! The event → install mapping, driven by hand-written SaEvent streams
//! (what phalanx-ike's Endpoint emits for an establishment, a rekey, a
//! delete and a NAT mapping change), checked against what the workers see:
//! the inbound SAD, the child's slot in the outbound SAD, the SPD.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use phalanx_crypto::Suite;
use phalanx_ike::{ChildSaInstall, SaEvent};
use phalanx_sa::{
    FlowKey, IpsecProtocol, LifetimeLimits, PolicyAction, SaMode, Selector, UdpEncap,
};
use phalanx_wire::{EncrId, IntegId, IpProtocol};
use zeroize::Zeroizing;

use super::*;
use crate::config::Config;
use crate::install::{Runtime, SaStore};

const FILE: &str = r#"[clear]
tun = "phx0"

[protected]
local = "192.0.2.1"
raw_esp = true

[[connection]]
name = "site"
remote_addr = "192.0.2.2"
auth = "psk"
psk = "a long shared secret"
start_action = "trap"

[[connection.child]]
name = "net"
local_ts = ["10.1.0.0/24"]
remote_ts = ["10.2.0.0/24"]
"#;

const LOCAL: &str = "192.0.2.1";
const REMOTE: &str = "192.0.2.2";

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn store() -> SaStore {
    let store = SaStore::new();
    store
        .apply_config(&Config::parse("gw.toml", FILE).unwrap(), Instant::now())
        .unwrap();
    store
}

fn install(spi: u32, suite: Suite) -> ChildSaInstall {
    let prefix = |text: &str| phalanx_sa::IpPrefix::new(ip(text), 24).unwrap();
    let sel = |src: &str, dst: &str| Selector {
        src: prefix(src),
        dst: prefix(dst),
        protocol: None,
        src_ports: phalanx_sa::PortRange::ANY,
        dst_ports: phalanx_sa::PortRange::ANY,
    };
    ChildSaInstall {
        connection: "site".into(),
        child: "net".into(),
        spi,
        suite,
        encr_key: Zeroizing::new(vec![7; suite.encr_key_len()]),
        integ_key: Zeroizing::new(vec![9; suite.integ_key_len()]),
        mode: SaMode::Tunnel {
            local: ip(LOCAL),
            remote: ip(REMOTE),
        },
        esn: false,
        local: ip(LOCAL),
        remote: ip(REMOTE),
        encap: Some(UdpEncap {
            local_port: 4500,
            remote_port: 4500,
        }),
        selectors: vec![sel("10.1.0.0", "10.2.0.0")],
        replay_window: 1024,
        peer_replay_window: 0,
        lifetime: LifetimeLimits {
            soft_time: Some(std::time::Duration::from_secs(3000)),
            hard_time: Some(std::time::Duration::from_secs(3960)),
            ..LifetimeLimits::default()
        },
    }
}

fn gcm() -> Suite {
    Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE)
}

fn remove_in(spi: u32) -> SaEvent {
    SaEvent::RemoveInbound {
        connection: "site".into(),
        child: "net".into(),
        spi,
    }
}

fn remove_out(spi: u32) -> SaEvent {
    SaEvent::RemoveOutbound {
        connection: "site".into(),
        child: "net".into(),
        spi,
    }
}

fn run(store: &SaStore, events: Vec<SaEvent>) -> Notes {
    let mut notes = Notes::default();
    for event in events {
        apply(store, event, Instant::now(), &mut notes, &|_| {
            REMOTE.to_owned()
        });
    }
    notes
}

/// The slot id the child's policy protects 10.1.0.5 → 10.2.0.5 with.
fn policy_id(rt: &Runtime) -> u32 {
    let key = FlowKey {
        src: ip("10.1.0.5"),
        dst: ip("10.2.0.5"),
        protocol: IpProtocol::ICMP,
        src_port: 8,
        dst_port: 0,
    };
    match rt.spd.lookup(&key).map(|p| p.action) {
        Some(PolicyAction::Protect(id)) => id,
        other => panic!("no protect policy: {other:?}"),
    }
}

/// The SPI of the SA the child's policy protects with now.
fn current_spi(store: &SaStore) -> Option<u32> {
    let rt = store.snapshot();
    rt.outbound.lookup(policy_id(&rt)).map(|sa| sa.spi())
}

fn inbound(store: &SaStore, spi: u32) -> bool {
    store
        .snapshot()
        .inbound
        .get(spi, IpsecProtocol::Esp)
        .is_some()
}

//   Initiator                                   Responder
//   IKE_AUTH { .. SAi2 TSi TSr } -->              (InstallInbound before sending)
//                                <--  IKE_AUTH { .. SAr2 TSi TSr }
//   InstallOutbound: the trap policy now protects with the new SA.
#[test]
fn establishment_fills_the_slot_and_the_sad() {
    let store = store();
    let rt = store.snapshot();
    let slot = policy_id(&rt);
    assert!(
        rt.outbound.lookup(slot).is_none(),
        "no SA yet: no_outbound_sa"
    );
    assert_eq!(
        rt.trap(slot).map(|t| t.child.to_string()),
        Some("site/net".into())
    );
    let notes = run(
        &store,
        vec![SaEvent::InstallInbound(install(0xc000_0001, gcm()))],
    );
    assert!(notes.failures.is_empty());
    // Make-before-break: usable as soon as the install returns.
    assert!(inbound(&store, 0xc000_0001));
    assert_eq!(current_spi(&store), None);
    run(
        &store,
        vec![SaEvent::InstallOutbound(install(0xd000_0001, gcm()))],
    );
    assert_eq!(current_spi(&store), Some(0xd000_0001));
    let rt = store.snapshot();
    let out = rt.sa("site/net/out/d0000001").unwrap();
    assert_eq!(
        out.config.params.lifetime.soft_time, None,
        "IKE rekeys on its own timer"
    );
    assert_eq!(
        out.config.params.lifetime.hard_time,
        Some(std::time::Duration::from_secs(3960) + crate::limits::IKE_HARD_LIFETIME_GRACE),
        "the data plane's hard limit is a backstop behind IKE's deletion"
    );
    assert_eq!(
        rt.slots.values().next().unwrap().current.as_deref(),
        Some("site/net/out/d0000001")
    );
}

//   CREATE_CHILD_SA { N(REKEY_SA), SA, Ni, TSi, TSr } -->   InstallInbound(new)
//                                      <-- { SA, Nr, TSi, TSr }
//   InstallOutbound(new): the slot switches; the old outbound SA stays
//   installed until RemoveOutbound(old); INFORMATIONAL { D(old) } removes it.
#[test]
fn a_rekey_switches_the_slot_and_keeps_the_old_sa_until_removed() {
    let store = store();
    run(
        &store,
        vec![
            SaEvent::InstallInbound(install(0xc000_0001, gcm())),
            SaEvent::InstallOutbound(install(0xd000_0001, gcm())),
            SaEvent::InstallInbound(install(0xc000_0002, gcm())),
        ],
    );
    assert!(inbound(&store, 0xc000_0001) && inbound(&store, 0xc000_0002));
    assert_eq!(current_spi(&store), Some(0xd000_0001));
    run(
        &store,
        vec![SaEvent::InstallOutbound(install(0xd000_0002, gcm()))],
    );
    assert_eq!(current_spi(&store), Some(0xd000_0002));
    assert!(store.snapshot().sa("site/net/out/d0000001").is_some());
    run(
        &store,
        vec![remove_out(0xd000_0001), remove_in(0xc000_0001)],
    );
    assert_eq!(
        current_spi(&store),
        Some(0xd000_0002),
        "removing the old SA leaves the new one"
    );
    assert!(!inbound(&store, 0xc000_0001));
    assert!(inbound(&store, 0xc000_0002));
    let rt = store.snapshot();
    assert!(rt.sa("site/net/out/d0000001").is_none());
    assert_eq!(
        rt.outbound.len(),
        2,
        "the new SA under its own id and under the slot"
    );
}

//   INFORMATIONAL { D(ESP) } -->  RemoveOutbound(current), RemoveInbound
//   The slot is empty again: packets are dropped as no_outbound_sa (and,
//   for a trap, acquire an SA).
#[test]
fn a_delete_empties_the_slot() {
    let store = store();
    run(
        &store,
        vec![
            SaEvent::InstallInbound(install(0xc000_0001, gcm())),
            SaEvent::InstallOutbound(install(0xd000_0001, gcm())),
            remove_out(0xd000_0001),
            remove_in(0xc000_0001),
            // Removing again (an SA the data plane never had) is harmless.
            remove_in(0xc000_0001),
        ],
    );
    assert_eq!(current_spi(&store), None);
    let rt = store.snapshot();
    assert!(rt.sas.is_empty());
    assert!(rt.outbound.is_empty() && rt.inbound.is_empty());
}

/// A reload with the same file keeps the IKE SAs, the slot id and the
/// slot's SA (the data plane is not touched).
#[test]
fn a_reload_keeps_ike_sas_and_slots() {
    let store = store();
    run(
        &store,
        vec![
            SaEvent::InstallInbound(install(0xc000_0001, gcm())),
            SaEvent::InstallOutbound(install(0xd000_0001, gcm())),
        ],
    );
    let before = store.snapshot();
    let summary = store
        .apply_config(&Config::parse("gw.toml", FILE).unwrap(), Instant::now())
        .unwrap();
    assert!(
        summary.removed.is_empty() && summary.added.is_empty(),
        "{summary:?}"
    );
    let after = store.snapshot();
    assert_eq!(policy_id(&before), policy_id(&after));
    assert_eq!(current_spi(&store), Some(0xd000_0001));
    assert!(inbound(&store, 0xc000_0001));
    let same = |rt: &Runtime| Arc::as_ptr(rt.sa("site/net/out/d0000001").unwrap());
    assert_eq!(same(&before), same(&after), "the SA object itself is kept");
    assert!(Arc::ptr_eq(
        before.trap(policy_id(&before)).unwrap(),
        after.trap(policy_id(&after)).unwrap()
    ));
}

/// RFC 7296 §2.23: the peer's NAT mapping changed; the outbound SA is
/// rebuilt for the new port and its sequence numbers continue past the
/// old ones (a number is never sent twice with one key): with a gap in
/// host mode (workers may still take numbers from the old SA), none in
/// cluster mode (every number comes from a lease; a gap would put the
/// node's counter past its leases).
#[test]
fn a_moved_peer_gets_a_rebuilt_outbound_sa() {
    for cluster in [false, true] {
        let store = store();
        if cluster {
            store.set_assigned_sequence_numbers();
        }
        run(
            &store,
            vec![
                SaEvent::InstallInbound(install(0xc000_0001, gcm())),
                SaEvent::InstallOutbound(install(0xd000_0001, gcm())),
            ],
        );
        let old = store
            .snapshot()
            .outbound
            .lookup(policy_id(&store.snapshot()))
            .unwrap();
        for _ in 0..5 {
            old.next_sequence().unwrap();
        }
        run(
            &store,
            vec![SaEvent::PeerMoved {
                connection: "site".into(),
                ike_spi_i: [1; 8],
                ike_spi_r: [2; 8],
                local: SocketAddr::new(ip(LOCAL), 4500),
                remote: SocketAddr::new(ip(REMOTE), 31_000),
                encap: Some(UdpEncap {
                    local_port: 4500,
                    remote_port: 31_000,
                }),
                outbound_spis: vec![0xd000_0001],
            }],
        );
        let rt = store.snapshot();
        let moved = rt.outbound.lookup(policy_id(&rt)).unwrap();
        assert!(!Arc::ptr_eq(&old, &moved));
        assert_eq!(moved.params.encap.unwrap().remote_port, 31_000);
        let next = moved.seq.peek_next().unwrap();
        if cluster {
            assert_eq!(next, 6, "cluster mode: no gap");
        } else {
            assert!(next > 6 + (1 << 15), "host mode: a gap, {next}");
        }
        assert_eq!(
            rt.outbound.len(),
            2,
            "only the moved SA, under its id and the slot"
        );
    }
}

/// An SA the data plane cannot run is a failure for `initiate --wait`,
/// and so are IKE and Child SA failures; the log-only events change
/// nothing.
#[test]
fn failures_are_noted() {
    let store = store();
    let notes = run(
        &store,
        vec![
            SaEvent::InstallInbound(install(
                0xc000_0001,
                Suite::esp(EncrId::AES_GCM_8, 128, IntegId::NONE),
            )),
            SaEvent::ChildSaFailed {
                connection: "site".into(),
                child: "net".into(),
                reason: "TS_UNACCEPTABLE".into(),
            },
            SaEvent::IkeSaFailed {
                connection: "site".into(),
                reason: "AUTHENTICATION_FAILED".into(),
            },
        ],
    );
    assert_eq!(notes.install_errors, 1);
    assert_eq!(notes.failures.len(), 3);
    assert!(notes.failures.iter().all(|(c, _)| c == "site"));
    assert!(notes.failures[1].1.contains("TS_UNACCEPTABLE"));
    assert!(store.snapshot().sas.is_empty());
}

/// A road-warrior connection: the child's selectors are per End-User.
const ROAD_WARRIORS: &str = r#"[clear]
tun = "phx0"

[protected]
local = "192.0.2.1"
raw_esp = true

[[pool]]
name = "rw4"
addrs = "10.3.0.0/24"

[[connection]]
name = "site"
auth = "psk"
psk = "a long shared secret"
pools = ["rw4"]

[[connection.child]]
name = "net"
local_ts = ["10.1.0.0/24"]
remote_ts = ["0.0.0.0/0"]
"#;

/// One End-User's outbound SA: 10.1.0.0/24 → its virtual IP.
fn user_install(spi: u32, vip: &str) -> ChildSaInstall {
    let mut i = install(spi, gcm());
    i.selectors = vec![Selector {
        src: phalanx_sa::IpPrefix::new(ip("10.1.0.0"), 24).unwrap(),
        dst: phalanx_sa::IpPrefix::host(ip(vip)),
        protocol: None,
        src_ports: phalanx_sa::PortRange::ANY,
        dst_ports: phalanx_sa::PortRange::ANY,
    }];
    i
}

/// The SPI protecting 10.1.0.5 → `dst`, if a policy protects it.
fn protected_by(rt: &Runtime, dst: &str) -> Option<u32> {
    let key = FlowKey {
        src: ip("10.1.0.5"),
        dst: ip(dst),
        protocol: IpProtocol::ICMP,
        src_port: 8,
        dst_port: 0,
    };
    match rt.spd.lookup(&key).map(|p| p.action) {
        Some(PolicyAction::Protect(id)) => rt.outbound.lookup(id).map(|sa| sa.params.spi),
        _ => None,
    }
}

#[test]
fn each_end_user_gets_policies_of_its_own_and_keeps_them_across_a_rekey() {
    let store = SaStore::new();
    let config = Config::parse("gw.toml", ROAD_WARRIORS).unwrap();
    store.apply_config(&config, Instant::now()).unwrap();
    // No static policy for 0.0.0.0/0: traffic to nobody is not captured.
    assert_eq!(store.snapshot().spd.len(), 0);
    run(
        &store,
        vec![
            SaEvent::InstallOutbound(user_install(0xa1, "10.3.0.1")),
            SaEvent::InstallOutbound(user_install(0xb1, "10.3.0.2")),
        ],
    );
    let rt = store.snapshot();
    assert_eq!(rt.peers.len(), 2);
    assert_eq!(protected_by(&rt, "10.3.0.1"), Some(0xa1));
    assert_eq!(protected_by(&rt, "10.3.0.2"), Some(0xb1));
    assert_eq!(protected_by(&rt, "10.3.0.3"), None);
    // A rekey of the first End-User: its slot switches, nothing else.
    run(
        &store,
        vec![SaEvent::InstallOutbound(user_install(0xa2, "10.3.0.1"))],
    );
    let rt = store.snapshot();
    assert_eq!(protected_by(&rt, "10.3.0.1"), Some(0xa2));
    assert_eq!(rt.peers.len(), 2);
    assert_eq!(rt.spd.len(), 2);
    run(&store, vec![remove_out(0xa1)]);
    assert_eq!(protected_by(&store.snapshot(), "10.3.0.1"), Some(0xa2));
    // A reload keeps the End-Users.
    store.apply_config(&config, Instant::now()).unwrap();
    let rt = store.snapshot();
    assert_eq!(protected_by(&rt, "10.3.0.1"), Some(0xa2));
    assert_eq!(protected_by(&rt, "10.3.0.2"), Some(0xb1));
    // The second End-User leaves: its policy goes with its last SA.
    run(&store, vec![remove_out(0xb1)]);
    let rt = store.snapshot();
    assert_eq!(protected_by(&rt, "10.3.0.2"), None);
    assert_eq!((rt.peers.len(), rt.spd.len()), (1, 1));
}
