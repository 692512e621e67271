//! Installation and reload: unchanged SAs keep their runtime objects (and
//! so their counters and sequence numbers), changed ones are replaced, a
//! refused change publishes nothing.

use super::*;
use crate::config::Config;

const FILE: &str = r#"[clear]
tun = "phx0"

[protected]
local = "192.0.2.1"

[[sa]]
name = "out1"
direction = "out"
spi = 0x1001
encryption = "aes128gcm16"
key = "0102030405060708090a0b0c0d0e0f1011121314"
remote = "192.0.2.2"

[[sa]]
name = "out2"
direction = "out"
spi = 0x1002
encryption = "chacha20poly1305"
key = "000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f00010203"
remote = "192.0.2.2"

[[sa]]
name = "in1"
direction = "in"
spi = 0x2001
encryption = "aes128gcm16"
key = "a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4"
remote = "192.0.2.2"

[[policy]]
name = "p1"
src = "10.1.0.0/24"
dst = "10.2.0.0/24"
action = "protect"
sa = "out1"

[[policy]]
name = "p2"
src = "10.1.0.0/24"
dst = "10.3.0.0/24"
action = "protect"
sa = "out2"
"#;

fn config(text: &str) -> Config {
    Config::parse("test.toml", text).unwrap()
}

fn outbound(rt: &Runtime, name: &str) -> (u32, Arc<OutboundSa>) {
    match &rt.sa(name).unwrap().handle {
        SaHandle::Outbound { id, sa } => (*id, Arc::clone(sa)),
        SaHandle::Inbound(_) => panic!("{name} is inbound"),
    }
}

fn inbound(rt: &Runtime, name: &str) -> Arc<InboundSa> {
    match &rt.sa(name).unwrap().handle {
        SaHandle::Inbound(sa) => Arc::clone(sa),
        SaHandle::Outbound { .. } => panic!("{name} is outbound"),
    }
}

#[test]
fn first_apply_adds_everything_and_fills_the_tables() {
    let store = SaStore::new();
    let summary = store.apply_config(&config(FILE), Instant::now()).unwrap();
    assert_eq!(summary.added, ["out1", "out2", "in1", "p1", "p2"]);
    assert_eq!(summary.unchanged, 0);
    let rt = store.snapshot();
    assert_eq!(rt.generation, 1);
    assert_eq!(rt.inbound.len(), 1);
    assert_eq!(rt.outbound.len(), 2);
    assert_eq!(rt.spd.len(), 2);
    let (id, sa) = outbound(&rt, "out1");
    assert!(Arc::ptr_eq(&rt.outbound.lookup(id).unwrap(), &sa));
    assert!(rt
        .inbound
        .get(0x2001, phalanx_sa::IpsecProtocol::Esp)
        .is_some());
}

#[test]
fn reapplying_keeps_every_runtime_object_and_its_state() {
    let store = SaStore::new();
    store.apply_config(&config(FILE), Instant::now()).unwrap();
    let before = store.snapshot();
    let (id1, out1) = outbound(&before, "out1");
    let in1 = inbound(&before, "in1");
    assert_eq!(out1.next_sequence(), Ok(1));
    assert_eq!(out1.next_sequence(), Ok(2));
    out1.stats.record(100);
    in1.replay_commit(in1.replay_check(5).unwrap()).unwrap();

    // The same definitions, moved around in the file: nothing changes.
    let moved = format!("# a comment\n\n{FILE}");
    let summary = store.apply_config(&config(&moved), Instant::now()).unwrap();
    assert_eq!(
        summary,
        ApplySummary {
            unchanged: 5,
            ..ApplySummary::default()
        }
    );
    let after = store.snapshot();
    assert_eq!(after.generation, 2);
    let (id1_after, out1_after) = outbound(&after, "out1");
    assert_eq!(id1_after, id1);
    assert!(Arc::ptr_eq(&out1, &out1_after));
    assert!(Arc::ptr_eq(&in1, &inbound(&after, "in1")));
    assert_eq!(out1_after.next_sequence(), Ok(3));
    assert_eq!(out1_after.stats.snapshot().packets, 1);
    assert_eq!(
        after
            .inbound
            .get(0x2001, in1.params.protocol)
            .unwrap()
            .replay_snapshot()
            .highest,
        5
    );
    // The new SPD still protects with the same SA.
    assert!(Arc::ptr_eq(&after.outbound.lookup(id1).unwrap(), &out1));
}

#[test]
fn a_changed_sa_is_replaced_and_a_removed_one_disappears() {
    let store = SaStore::new();
    store.apply_config(&config(FILE), Instant::now()).unwrap();
    let before = store.snapshot();
    let (_, out1) = outbound(&before, "out1");
    let (_, out2) = outbound(&before, "out2");
    let in1 = inbound(&before, "in1");
    // out2 gets a new key; p2 and in1 go away; out1 and p1 stay.
    let edited = FILE
        .replace("000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f00010203", "ff0102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f00010203")
        .replace(
            "[[sa]]\nname = \"in1\"\ndirection = \"in\"\nspi = 0x2001\nencryption = \"aes128gcm16\"\nkey = \"a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4\"\nremote = \"192.0.2.2\"\n",
            "",
        );
    let edited = edited[..edited.find("[[policy]]\nname = \"p2\"").unwrap()].to_owned();
    let summary = store
        .apply_config(&config(&edited), Instant::now())
        .unwrap();
    assert_eq!(summary.changed, ["out2"]);
    assert_eq!(summary.removed, ["in1", "p2"]);
    assert!(summary.added.is_empty());
    assert_eq!(summary.unchanged, 2);
    let after = store.snapshot();
    assert!(Arc::ptr_eq(&out1, &outbound(&after, "out1").1));
    assert!(!Arc::ptr_eq(&out2, &outbound(&after, "out2").1));
    assert!(after.inbound.is_empty());
    assert_eq!(after.spd.len(), 1);
    // The old snapshot is untouched: workers still using it see the old SAs.
    assert!(Arc::ptr_eq(
        &before.inbound.get(0x2001, in1.params.protocol).unwrap(),
        &in1
    ));
}

#[test]
fn install_and_remove_one_sa() {
    let store = SaStore::new();
    store.apply_config(&config(FILE), Instant::now()).unwrap();
    let extra = config(
        &FILE
            .replace("name = \"in1\"", "name = \"in2\"")
            .replace("spi = 0x2001", "spi = 0x2002"),
    );
    let in2 = extra.sa("in2").unwrap().clone();
    store.install_sa(in2.clone(), Instant::now()).unwrap();
    let rt = store.snapshot();
    assert_eq!(rt.inbound.len(), 2);
    assert!(rt.sa("in2").is_some());
    assert!(matches!(
        store.install_sa(in2, Instant::now()),
        Err(InstallError::Duplicate(_))
    ));
    store.remove_sa("in2").unwrap();
    assert_eq!(store.snapshot().inbound.len(), 1);
    assert!(matches!(
        store.remove_sa("in2"),
        Err(InstallError::NotFound(_))
    ));
    // Removing an outbound SA leaves its policy pointing at nothing.
    let (id, _) = outbound(&store.snapshot(), "out1");
    store.remove_sa("out1").unwrap();
    assert!(store.snapshot().outbound.lookup(id).is_none());
}

#[test]
fn an_inbound_spi_taken_by_another_name_is_refused_by_install() {
    let store = SaStore::new();
    store.apply_config(&config(FILE), Instant::now()).unwrap();
    let clash = config(&FILE.replace("name = \"in1\"", "name = \"in9\""));
    let generation = store.snapshot().generation;
    let result = store.install_sa(clash.sa("in9").unwrap().clone(), Instant::now());
    assert!(matches!(result, Err(InstallError::Duplicate(_))));
    assert_eq!(store.snapshot().generation, generation);
}
