//! Cluster scenarios written the way they are said: a script of clauses
//! separated by `;`, run on the testkit's multi-node harness.
//!
//! ```text
//! n1,n2,n3 packet-rr        founders and scheme (first clause)
//! 500 packets               outbound packets on SA `OUT` (16 flows)
//! 300 inbound               inbound packets on SA `IN`, numbers 1, 2, ...
//! replay inbound            every inbound packet sent so far, again
//! kill n2                   kill -9 (Corosync removes it later)
//! n1 deaf to n3 for 80 ms   n1 drops n3's heartbeats (false suspicion)
//! n2 stalls for 100 ms      n2 runs nothing (SIGSTOP); what arrives
//!                           queues, and it works that off first when it
//!                           runs again
//! join n4                   a fresh node joins (a restart if n4 existed),
//!                           time passes until it is ready (at most 1 s)
//! join n4 at once           the same, without waiting
//! n2 misses 3 packets       n2 does not see the next 3 packets
//! n2 hears heartbeats 9000 us late
//! n2 reads the log 2000 us late
//! idle 50 ms                time passes without packets
//! settle                    idle until the cluster is steady (at most 2 s)
//! split n3 | n1,n2          cut the cluster link between the sides (each
//!                           still sees every packet); Corosync reforms a
//!                           ring per side after its delay
//! reconnect                 restore the link; Corosync merges the rings
//! ```

// Each test crate uses part of it.
#![allow(dead_code)]

use std::time::Duration;

use phalanx_cluster::{Direction, DispatchScheme, NodeId, QuorumPolicy};
use phalanx_testkit::cluster_group::{mix, ClusterHarness, HarnessConfig, Outcome};

/// The outbound SA of every scenario.
pub(crate) const OUT: u32 = 0x1000;
/// The inbound SA of every scenario.
pub(crate) const IN: u32 = 0x2000;

/// What a script did, clause by clause.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// Every outbound packet's outcome, with the clause it belongs to.
    pub(crate) packets: Vec<(usize, Outcome)>,
    /// Inbound numbers sent so far.
    pub(crate) inbound_sent: u64,
    /// Replayed inbound packets some owner accepted.
    pub(crate) replays_accepted: u64,
    /// Replayed inbound packets nobody processed (no owner).
    pub(crate) replays_unowned: u64,
    /// New inbound packets accepted by exactly one owner.
    pub(crate) inbound_once: u64,
    /// Every new inbound packet's accepting nodes, with its clause.
    pub(crate) inbound: Vec<(usize, Vec<NodeId>)>,
    /// The sides of the current partition and the packet count when it
    /// began.
    pub(crate) split: Option<(Vec<Vec<NodeId>>, usize)>,
    /// Packets sent by two sides of a partition, once both sides'
    /// detectors had time to fire (`SIDE_GRACE` packets after the split,
    /// or after the end of a stall during it).
    pub(crate) side_overlaps: u64,
    /// Late acceptances (`Record::late_inbound`) already in `inbound`.
    late_merged: usize,
}

/// Packets after a split before the sides must no longer overlap: the
/// detectors fire after 30 ms of silence (600 packets at 50 us), plus the
/// heartbeat interval and latency.
pub(crate) const SIDE_GRACE: usize = 800;

impl Run {
    /// The outcomes of clause `clause`.
    pub(crate) fn clause(&self, clause: usize) -> Vec<&Outcome> {
        self.packets
            .iter()
            .filter(|(c, _)| *c == clause)
            .map(|(_, o)| o)
            .collect()
    }
}

fn node(word: &str) -> NodeId {
    NodeId(word.trim_start_matches('n').parse().unwrap())
}

fn number(word: &str) -> u64 {
    word.parse().unwrap()
}

/// The harness configuration of a script's first clause.
pub(crate) fn config(first: &str) -> HarnessConfig {
    let mut words = first.split_whitespace();
    let nodes = words.next().unwrap().split(',').count() as u32;
    let scheme: DispatchScheme = words.next().unwrap().parse().unwrap();
    HarnessConfig {
        nodes,
        scheme,
        // The daemon's default (the harness's is Off).
        quorum: QuorumPolicy::Majority,
        ..HarnessConfig::default()
    }
}

/// Run `script` on a fresh harness with `config`'s overrides applied.
pub(crate) fn run_with(
    script: &str,
    tweak: impl FnOnce(&mut HarnessConfig),
) -> (ClusterHarness, Run) {
    let mut clauses = script.split(';').map(str::trim);
    let mut config = config(clauses.next().unwrap());
    tweak(&mut config);
    let mut h = ClusterHarness::new(config);
    h.add_sa(Direction::Outbound, OUT, true);
    h.add_sa(Direction::Inbound, IN, true);
    assert!(
        h.run_until_ready(Duration::from_secs(1)),
        "{script}: no cluster formed"
    );
    let mut run = Run::default();
    for (index, clause) in clauses.enumerate() {
        step(&mut h, &mut run, index + 1, clause);
    }
    merge_late(&h, &mut run);
    (h, run)
}

/// What stalled nodes accepted when they ran again joins the packets'
/// acceptances.
fn merge_late(h: &ClusterHarness, run: &mut Run) {
    let late = &h.record.late_inbound[run.late_merged..];
    for &(spi, seq, node) in late {
        let packet = usize::try_from(seq).ok().and_then(|s| s.checked_sub(1));
        if let Some((_, accepted)) = packet.and_then(|p| run.inbound.get_mut(p)) {
            if spi == IN {
                accepted.push(node);
            }
        }
    }
    run.late_merged = h.record.late_inbound.len();
}

/// Run more clauses of a script (numbered from `first`) on a harness.
pub(crate) fn run_more(h: &mut ClusterHarness, run: &mut Run, first: usize, clauses: &str) {
    for (index, clause) in clauses.split(';').map(str::trim).enumerate() {
        step(h, run, first + index, clause);
    }
    merge_late(h, run);
}

/// Who accepts inbound packets of `scheme` on a steady three-node
/// cluster: all three (packet schemes), or the one that owns the SA.
pub(crate) fn inbound_owners(scheme: DispatchScheme) -> std::collections::BTreeSet<NodeId> {
    let (_, probe) = run(&format!("n1,n2,n3 {scheme}; 30 inbound"));
    probe.inbound.iter().flat_map(|(_, a)| a.clone()).collect()
}

/// Run `script` with the default configuration.
pub(crate) fn run(script: &str) -> (ClusterHarness, Run) {
    run_with(script, |_| {})
}

fn step(h: &mut ClusterHarness, run: &mut Run, index: usize, clause: &str) {
    let words: Vec<&str> = clause.split_whitespace().collect();
    match words.as_slice() {
        [n, "packets"] => {
            for _ in 0..number(n) {
                let packet = run.packets.len() as u64;
                let outcome = h.outbound(OUT, mix(packet % 16), 100 + (packet % 7) as u32 * 200);
                if let Some((sides, at)) = &run.split {
                    let sending = sides
                        .iter()
                        .filter(|side| outcome.senders.iter().any(|(n, _)| side.contains(n)))
                        .count();
                    if run.packets.len() >= at + SIDE_GRACE && sending > 1 {
                        run.side_overlaps += 1;
                    }
                }
                run.packets.push((index, outcome));
            }
        }
        ["replay", "inbound"] => {
            for seq in 1..=run.inbound_sent {
                let outcome = h.inbound(IN, seq);
                run.replays_accepted += outcome.accepted.len() as u64;
                if outcome.accepted.is_empty() && outcome.refused.is_empty() {
                    run.replays_unowned += 1;
                }
            }
        }
        [n, "inbound"] => {
            for _ in 0..number(n) {
                run.inbound_sent += 1;
                let outcome = h.inbound(IN, run.inbound_sent);
                if outcome.accepted.len() == 1 {
                    run.inbound_once += 1;
                }
                run.inbound.push((index, outcome.accepted));
            }
        }
        ["kill", n] => h.kill(node(n)),
        [n, "stalls", "for", ms, "ms"] => {
            h.stall(node(n), Duration::from_millis(number(ms)));
            // A node that stalled gives its peers a fresh `suspect_after`
            // when it runs again (the detector's stall guard): its side
            // may go on sending until then plus the grace. Counted in
            // outbound packets, 20 per ms (the other clauses pass time
            // too, so this errs on the short side).
            if let Some((_, at)) = &mut run.split {
                let end = run.packets.len() + number(ms) as usize * 20;
                *at = (*at).max(end);
            }
        }
        [a, "deaf", "to", b, "for", ms, "ms"] => {
            h.deafen(node(a), node(b), Duration::from_millis(number(ms)));
        }
        ["join", n] => {
            h.join(node(n));
            for _ in 0..1000 {
                if h.node(node(n)).unwrap().is_ready() {
                    break;
                }
                h.run_for(Duration::from_millis(1));
            }
        }
        ["join", n, "at", "once"] => h.join(node(n)),
        [n, "misses", k, "packets"] => h.miss(node(n), number(k)),
        [n, "hears", "heartbeats", us, "us", "late"] => {
            h.set_heartbeat_delay(node(n), Duration::from_micros(number(us)));
        }
        [n, "reads", "the", "log", us, "us", "late"] => {
            h.set_log_delay(node(n), Duration::from_micros(number(us)));
        }
        ["idle", ms, "ms"] => h.run_for(Duration::from_millis(number(ms))),
        ["settle"] => settle(h),
        ["split", ..] => {
            let sides: Vec<Vec<NodeId>> = words[1..]
                .join(" ")
                .split('|')
                .map(|side| side.split(',').map(|n| node(n.trim())).collect())
                .collect();
            h.partition(&sides);
            run.split = Some((sides, run.packets.len()));
        }
        ["reconnect"] => {
            h.reconnect();
            run.split = None;
        }
        _ => panic!("unknown clause {clause:?}"),
    }
}

/// Idle until the cluster is steady; outbound counters only converge with
/// traffic, so a few packets flow between checks.
pub(crate) fn settle(h: &mut ClusterHarness) {
    for _ in 0..200 {
        if h.steady() {
            return;
        }
        h.run_for(Duration::from_millis(10));
        for i in 0..40 {
            h.outbound(OUT, mix(i), 200);
        }
    }
}

/// Nothing unsafe happened.
pub(crate) fn assert_safe(h: &ClusterHarness, script: &str) {
    assert!(
        h.record.violations.is_empty(),
        "{script}: {} violations, first: {:?}",
        h.record.violations.len(),
        h.record.violations.first()
    );
}

/// In clause `clause` every new inbound packet was accepted by exactly
/// one node.
pub(crate) fn assert_inbound_once(run: &Run, clause: usize, script: &str) {
    let accepted: Vec<&Vec<NodeId>> = run
        .inbound
        .iter()
        .filter(|(c, _)| *c == clause)
        .map(|(_, a)| a)
        .collect();
    assert!(
        !accepted.is_empty(),
        "{script}: clause {clause} has no inbound"
    );
    let wrong: Vec<(usize, &Vec<NodeId>)> = accepted
        .iter()
        .enumerate()
        .filter(|(_, a)| a.len() != 1)
        .map(|(i, a)| (i, *a))
        .collect();
    assert!(
        wrong.is_empty(),
        "{script}: clause {clause}: {} of {} not accepted exactly once, first {:?}",
        wrong.len(),
        accepted.len(),
        wrong.first()
    );
}

/// In clause `clause`, after its first `skip` packets, every packet had
/// exactly one sender and none was dropped for want of a lease.
pub(crate) fn assert_exactly_one(run: &Run, clause: usize, skip: usize, script: &str) {
    let outcomes = run.clause(clause);
    assert!(outcomes.len() > skip, "{script}: clause {clause} too short");
    for outcome in &outcomes[skip..] {
        assert_eq!(
            outcome.senders.len(),
            1,
            "{script}: packet {} had senders {:?} (no lease: {:?})",
            outcome.packet,
            outcome.senders,
            outcome.no_lease
        );
        assert!(
            outcome.no_lease.is_empty(),
            "{script}: no lease at {}",
            outcome.packet
        );
    }
}
