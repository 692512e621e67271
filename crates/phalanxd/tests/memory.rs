//! Memory over a long life, the daemon's part (issue 17's soak: a
//! responder's RSS grew about 390 KiB an hour under rekeys every 10 s and
//! 30 s). phalanx-ike's own test (crates/phalanx-ike/tests/memory.rs)
//! shows the IKE endpoints flat; this drives what the daemon does with
//! their events.
//!
//! Two phalanx-ike endpoints configured by phalanxd configuration files
//! (A initiates; its Child SA rekeyed every ~10 s, its IKE SA every ~30 s,
//! as in bench/soak.sh), one simulated hour in memory; every event of B
//! (the responder) is applied to B's SA store as the daemon applies it
//! (`ike::apply::apply`: SAD, the child's outbound slot, SPD). Live heap
//! bytes after a 10-minute warm-up and at the end must be within 512
//! bytes. One test in this binary: dhat's global allocator counts
//! everything.
#![allow(clippy::unwrap_used)]

use std::net::IpAddr;
use std::time::{Duration, Instant};

use phalanx_testkit::ike_pair::{IkePair, Side};
use phalanxd::config::Config;
use phalanxd::ike::apply::{apply, Notes};
use phalanxd::install::SaStore;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const A_ADDR: &str = "192.0.2.1";
const B_ADDR: &str = "192.0.2.2";

/// Gateway `local` facing `remote`; A starts the tunnel and rekeys it.
fn config(local: &str, remote: &str, initiator: bool) -> Config {
    let (mine, theirs) = if initiator {
        ("10.1.0.0/24", "10.2.0.0/24")
    } else {
        ("10.2.0.0/24", "10.1.0.0/24")
    };
    let rekey = if initiator {
        "rekey_time = \"30s\"\nrekey_jitter = \"2s\"\nlifetime = \"60s\"\n"
    } else {
        "rekey_time = \"0s\"\n"
    };
    let child = if initiator {
        "rekey_time = \"10s\"\nrekey_jitter = \"1s\"\nlifetime = \"20s\"\n"
    } else {
        "rekey_time = \"0s\"\n"
    };
    let text = format!(
        "[clear]\ntun = \"phx0\"\n\n[protected]\nlocal = \"{local}\"\n\n\
         [[connection]]\nname = \"site\"\nremote_addr = \"{remote}\"\nauth = \"psk\"\n\
         psk = \"a long shared secret for the memory test\"\nforce_encap = true\n{rekey}\n\
         [[connection.child]]\nname = \"net\"\nlocal_ts = [\"{mine}\"]\nremote_ts = [\"{theirs}\"]\n{child}"
    );
    Config::parse("gw.toml", &text).unwrap()
}

/// Runs the pair for `secs` seconds, applying B's events to `store`.
fn run(p: &mut IkePair, store: &SaStore, secs: u64) {
    for _ in 0..secs / 10 {
        p.run_for(Duration::from_secs(10));
        let mut notes = Notes::default();
        let events: Vec<_> = p.events(Side::B).into_iter().cloned().collect();
        p.forget_history();
        for event in events {
            apply(store, event, Instant::now(), &mut notes, &|_| {
                A_ADDR.to_owned()
            });
        }
    }
}

#[test]
fn an_hour_of_rekeys_does_not_grow_the_daemons_heap() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let (a, b) = (config(A_ADDR, B_ADDR, true), config(B_ADDR, A_ADDR, false));
    let store = SaStore::new();
    store.apply_config(&b, Instant::now()).unwrap();
    let addr = |text: &str| text.parse::<IpAddr>().unwrap();
    let mut p = IkePair::new(
        (a.ike.unwrap().endpoint, addr(A_ADDR)),
        (b.ike.unwrap().endpoint, addr(B_ADDR)),
        23,
    );
    p.with(Side::A, |e, now| e.initiate(now, "site").unwrap());
    run(&mut p, &store, 600);
    let sas = store.load().sas.len();
    let warm = dhat::HeapStats::get().curr_bytes;
    run(&mut p, &store, 3000);
    let end = dhat::HeapStats::get().curr_bytes;
    let rekeys = p
        .endpoint_ref(Side::A)
        .counters()
        .get(phalanx_ike::Counter::ChildSasRekeyed);
    println!("live heap {warm} -> {end} bytes; {rekeys} Child SA rekeys; SAs installed {sas}");
    assert!(rekeys >= 300, "{rekeys} Child SA rekeys");
    assert!(sas >= 1, "no SA installed");
    assert!(
        end <= warm + 512,
        "live heap grew from {warm} to {end} bytes over {rekeys} Child SA rekeys"
    );
}
