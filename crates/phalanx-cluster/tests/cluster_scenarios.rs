//! Cluster scenarios as tables of scripts (see `common` for the notation):
//! failover, false suspicion, joins and restarts, missed packets, skewed
//! detection and log delivery, replayed inbound packets. Every scenario
//! also checks the safety record: no `(SPI, seq)` or `(SPI, IV)` twice,
//! every number inside a granted block and of its sender's class, grants
//! equal on every node and disjoint, nobody owning traffic before ready.

// STYLE.md: `unwrap()` is fine in tests, where a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{
    assert_exactly_one, assert_inbound_once, assert_safe, inbound_owners, run, run_more, run_with,
    settle, OUT,
};
use phalanx_cluster::{ClusterEvent, DispatchScheme, FailoverOutcome, NodeId, QuorumPolicy};

/// "n1,n2,n3 packet-rr; 3000 packets": each packet is sent once, with the
/// number of its position, across lease blocks.
#[test]
fn s01_steady_round_robin() {
    let script = "n1,n2,n3 packet-rr; 3000 packets";
    let (h, run) = run(script);
    assert_safe(&h, script);
    assert_exactly_one(&run, 1, 0, script);
    let seqs: Vec<u64> = run.packets.iter().map(|(_, o)| o.senders[0].1).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "ascending");
    let consecutive = seqs.windows(2).filter(|w| w[1] == w[0] + 1).count();
    assert!(
        consecutive > 2990,
        "dense numbering ({consecutive} consecutive)"
    );
    assert!(h.steady());
}

/// "n1,n2,n3 <scheme>; 3000 packets" for every scheme: one sender each.
#[test]
fn s02_steady_every_scheme() {
    for scheme in DispatchScheme::ALL {
        let script = format!("n1,n2,n3 {scheme}; 3000 packets");
        let (h, run) = run(&script);
        assert_safe(&h, &script);
        assert_exactly_one(&run, 1, 0, &script);
    }
}

/// "n1,n2,n3 packet-rr; 500 packets; kill n2; 3000 packets": the
/// survivors take over within 100 ms, the log agrees, Corosync confirms,
/// and the stream goes on with one sender per packet.
#[test]
fn s03_kill_failover() {
    let script = "n1,n2,n3 packet-rr; 500 packets; kill n2; 8000 packets";
    let (h, run) = run(script);
    assert_safe(&h, script);
    let failover = h.node(NodeId(1)).unwrap().status().failovers[0];
    assert_eq!(failover.suspect, NodeId(2));
    assert!(failover.handover.unwrap() < Duration::from_millis(100));
    assert_eq!(failover.outcome, FailoverOutcome::Confirmed);
    // 30 ms of silence at 50 us per packet: about 700 packets of n2's
    // share go unsent; after that, exactly one sender again.
    assert_exactly_one(&run, 3, 800, script);
    assert!(h.steady());
}

/// "n1,n2,n3 packet-rr; 500 packets; n1 deaf to n3 for 100 ms; 5000
/// packets; settle": n3 is taken out through the log, then back; no
/// number twice meanwhile (n1 and n3 both worked n3's share).
#[test]
fn s04_false_suspicion() {
    let script = "n1,n2,n3 packet-rr; 500 packets; n1 deaf to n3 for 100 ms; 5000 packets; settle";
    let (mut h, _) = run(script);
    assert_safe(&h, script);
    let status = h.node(NodeId(1)).unwrap().status();
    assert_eq!(status.failovers[0].outcome, FailoverOutcome::Corrected);
    assert_eq!(status.view.len(), 3);
    settle(&mut h);
    assert!(h.steady());
}

/// "n1,n2 packet-rr; 500 packets; join n3 at once; 3000 packets": n3
/// gets the state, owns nothing before Ready, then its share; the stream
/// is never interrupted.
#[test]
fn s05_join_without_interruption() {
    let script = "n1,n2 packet-rr; 500 packets; join n3 at once; 3000 packets";
    let (h, run) = run(script);
    assert_safe(&h, script);
    assert_exactly_one(&run, 3, 0, script);
    let n3 = run
        .clause(3)
        .iter()
        .filter(|o| o.senders[0].0 == NodeId(3))
        .count();
    assert!(n3 > 500, "n3 sent {n3} packets");
    assert!(h.events(NodeId(3)).contains(&ClusterEvent::StateReceived));
    assert!(h.steady());
}

/// "n1,n2,n3 packet-rr; 500 packets; n2 misses 3 packets; 2000 packets":
/// n2's counter heals from a checkpoint; one sender per packet after.
#[test]
fn s06_missed_packets_heal() {
    let script = "n1,n2,n3 packet-rr; 500 packets; n2 misses 3 packets; 2000 packets";
    let (h, run) = run(script);
    assert_safe(&h, script);
    assert!(h.path(NodeId(2)).unwrap().stats().heals >= 1);
    assert_exactly_one(&run, 3, 600, script);
    assert!(h.steady());
}

/// "n1,n2,n3 packet-rr; 600 inbound; kill n3; idle 60 ms; replay
/// inbound; 300 inbound": every replayed packet is refused by its new
/// owner; new packets are accepted once.
#[test]
fn s07_replays_refused_after_failover() {
    let script =
        "n1,n2,n3 packet-rr; 600 inbound; kill n3; idle 60 ms; replay inbound; 300 inbound";
    let (h, run) = run(script);
    assert_safe(&h, script);
    assert_eq!(run.replays_accepted, 0);
    assert_eq!(run.replays_unowned, 0);
    assert_eq!(run.inbound_once, 600 + 300);
}

/// The same after Corosync confirmed, for every scheme.
#[test]
fn s08_replays_refused_every_scheme() {
    for scheme in DispatchScheme::ALL {
        let script = format!(
            "n1,n2,n3 {scheme}; 600 inbound; kill n1; idle 400 ms; replay inbound; 200 inbound"
        );
        let (h, run) = run(&script);
        assert_safe(&h, &script);
        assert_eq!(run.replays_accepted, 0, "{script}");
    }
}

/// "n1,n2,n3 <scheme>; 1500 packets; kill n1; idle 400 ms; 2000
/// packets": the lowest node (which sends transfers and replay
/// checkpoints) fails, for every scheme.
#[test]
fn s09_kill_the_first_every_scheme() {
    for scheme in DispatchScheme::ALL {
        let script = format!("n1,n2,n3 {scheme}; 1500 packets; kill n1; idle 400 ms; 2000 packets");
        let (h, run) = run(&script);
        assert_safe(&h, &script);
        assert_exactly_one(&run, 4, 0, &script);
    }
}

/// "n2 hears heartbeats 12 ms late; kill n3": n1 and n2 suspect n3 at
/// different packets, enter the takeover block at different counters, and
/// heal.
#[test]
fn s10_skewed_detection() {
    let script = "n1,n2,n3 packet-rr; n2 hears heartbeats 12000 us late; 500 packets; \
                  kill n3; 4000 packets";
    let (h, run) = run_with(script, |c| c.corosync_delay = Duration::from_secs(5));
    assert_safe(&h, script);
    assert_exactly_one(&run, 4, 1500, script);
}

/// "n2 reads the log 3 ms late; kill n1": every log event reaches n2 60
/// packets late; generations start at different packets and heal.
#[test]
fn s11_skewed_log() {
    let script = "n1,n2,n3 packet-rr; n2 reads the log 3000 us late; 500 packets; kill n1; \
                  6000 packets";
    let (h, run) = run(script);
    assert_safe(&h, script);
    assert!(
        h.path(NodeId(2)).unwrap().stats().heals + h.path(NodeId(3)).unwrap().stats().heals > 0
    );
    assert_exactly_one(&run, 4, 5000, script);
}

/// "n1 packet-rr; join n2; join n3": a cluster grows one node at a time.
#[test]
fn s12_grow_from_one() {
    let script = "n1 packet-rr; 200 packets; join n2 at once; 1000 packets; join n3 at once; \
                  2000 packets";
    let (h, run) = run(script);
    assert_safe(&h, script);
    assert_exactly_one(&run, 5, 0, script);
    assert_eq!(h.node(NodeId(1)).unwrap().status().view.len(), 3);
}

/// "kill n2; idle 400 ms; join n2": a restarted n2 (a fresh process with
/// the same id, hence the same IV prefix) never reuses a number.
#[test]
fn s13_restart_with_the_same_id() {
    let script = "n1,n2,n3 packet-rr; 2000 packets; kill n2; idle 400 ms; join n2; 3000 packets";
    let (h, run) = run(script);
    assert_safe(&h, script);
    assert_exactly_one(&run, 5, 0, script);
}

/// Two failures before the log catches up: "kill n2; kill n3" at once,
/// with the log slow for n1. n1 takes over both (the second within its
/// takeover block), safely.
#[test]
fn s14_two_failures_at_once() {
    let script = "n1,n2,n3,n4 packet-rr; n1 reads the log 20000 us late; 500 packets; \
                  kill n2; kill n3; 3000 packets";
    let (h, run) = run(script);
    assert_safe(&h, script);
    assert!(h.path(NodeId(1)).unwrap().stats().deferred_takeovers > 0);
    assert_exactly_one(&run, 5, 2000, script);
}

/// A lease as short as the view: renewals every few packets, never a gap.
#[test]
fn s15_tiny_leases() {
    let script = "n1,n2,n3 packet-rr; 2000 packets; kill n3; 2000 packets";
    let (h, run) = run_with(script, |c| c.lease_len = 12);
    assert_safe(&h, script);
    assert_exactly_one(&run, 1, 0, script);
    assert!(h.record.grants[&OUT].len() > 2 * 2000 / 12);
}

/// "n1; join n2 at once; idle 20 ms; kill n1" before n1's transfer
/// reached n2 (n1 reads the log 50 ms late): the only state is gone. n2
/// heard n1 say it held one, so it does not found a new cluster (which
/// would start the SA's numbers over): it owns nothing and sends nothing.
#[test]
fn s16_no_refounding_after_total_loss() {
    let script = "n1 packet-rr; n1 reads the log 50000 us late; 500 packets; join n2 at once; \
                  idle 20 ms; kill n1; idle 2000 ms; 500 packets";
    let (h, run) = run(script);
    assert_safe(&h, script);
    let n2 = h.node(NodeId(2)).unwrap();
    assert!(!n2.is_synced());
    assert!(run.clause(7).iter().all(|o| o.senders.is_empty()));
}

/// "n1,n2,n3 packet-sqf; 600 inbound; replay inbound": with shortest
/// queue first a replayed packet may land on another node than the
/// original; the marks every owned packet carries make it refuse it too.
#[test]
fn s17_sqf_replays_refused_without_failover() {
    for scheme in ["packet-sqf", "session-sqf"] {
        let script = format!("n1,n2,n3 {scheme}; 600 inbound; replay inbound; 300 inbound");
        let (h, run) = run(&script);
        assert_safe(&h, &script);
        assert_eq!(run.replays_accepted, 0, "{script}");
        assert_eq!(run.inbound_once, 900, "{script}");
    }
}

/// Senders of the packets of clause `clause`.
fn senders(run: &common::Run, clause: usize) -> std::collections::BTreeSet<NodeId> {
    run.clause(clause)
        .iter()
        .flat_map(|o| o.senders.iter().map(|(n, _)| *n))
        .collect()
}

/// "split n3 | n1,n2" (a 1 | 2 cut of the cluster link, every node still
/// seeing every packet): n3 stands down at once (its view is one of
/// three), the two go on; Corosync reforms, n3's log grants nothing. On
/// "reconnect" Corosync merges: n3's side yields, gets n1's state and
/// owns its share again; one view everywhere, nothing sent twice.
#[test]
fn s18_cut_one_of_three_and_merge() {
    let script = "n1,n2,n3 packet-rr; 500 packets; split n3 | n1,n2; 2000 packets; \
                  idle 400 ms; 2000 packets; reconnect; idle 400 ms; settle; 3000 packets";
    let (h, run) = run(script);
    assert_safe(&h, script);
    assert_eq!(run.side_overlaps, 0, "{script}");
    assert_exactly_one(&run, 3, common::SIDE_GRACE, script);
    assert_exactly_one(&run, 5, 0, script);
    assert!(!senders(&run, 5).contains(&NodeId(3)));
    let n3 = h.node(NodeId(3)).unwrap();
    assert!(n3.status().counters.quorum_losses >= 1);
    assert_eq!(n3.status().counters.merges_lost, 1);
    assert!(h.node(NodeId(1)).unwrap().status().counters.merges_won >= 1);
    assert!(h.events(NodeId(3)).contains(&ClusterEvent::StateReceived));
    assert!(h.steady(), "{script}: not steady after the merge");
    assert_exactly_one(&run, 9, 0, script);
    assert!(
        senders(&run, 9).contains(&NodeId(3)),
        "n3 owns its share again"
    );
}

/// The same with the lowest node (the ARP owner) cut off: n2 and n3 keep
/// the state, n1 yields to them.
#[test]
fn s19_cut_the_first_and_merge() {
    let script = "n1,n2,n3 packet-rr; 500 packets; split n1 | n2,n3; 2000 packets; \
                  idle 400 ms; 1000 packets; reconnect; idle 400 ms; settle; 3000 packets";
    let (h, run) = run(script);
    assert_safe(&h, script);
    assert_eq!(run.side_overlaps, 0, "{script}");
    assert_eq!(senders(&run, 5), [NodeId(2), NodeId(3)].into());
    assert!(h.node(NodeId(1)).unwrap().dispatch_view().is_empty() || h.steady());
    assert_eq!(h.node(NodeId(1)).unwrap().status().counters.merges_lost, 1);
    assert!(h.steady(), "{script}: not steady after the merge");
    assert_exactly_one(&run, 9, 0, script);
    assert_eq!(senders(&run, 9).len(), 3);
}

/// A two-node cluster split in two: the tie-break keeps the lower node
/// (n1) going alone; n2 stands down, then yields at the merge.
#[test]
fn s20_two_node_split() {
    let script = "n1,n2 packet-rr; 500 packets; split n1 | n2; 2000 packets; idle 400 ms; \
                  2000 packets; reconnect; idle 400 ms; settle; 2000 packets";
    let (h, run) = run(script);
    assert_safe(&h, script);
    assert_eq!(run.side_overlaps, 0, "{script}");
    assert_exactly_one(&run, 5, 0, script);
    assert_eq!(senders(&run, 5), [NodeId(1)].into());
    assert!(!h.node(NodeId(2)).unwrap().quorum().quorate || h.steady());
    assert_eq!(h.node(NodeId(2)).unwrap().status().counters.merges_lost, 1);
    assert!(h.steady(), "{script}");
    assert_exactly_one(&run, 9, 0, script);
}

/// A false suspicion on a loaded node: n3 stops hearing both others for
/// 100 ms while still in Corosync's membership (and reading the log). n3
/// stands down while it hears neither (one of three); the log takes at most one of
/// its suspicions (a second would leave no quorum); n1 and n2 suspect
/// nobody. Rejoin corrects it; nothing sent twice; steady after.
#[test]
fn s21_false_suspicion_by_a_loaded_node() {
    let script = "n1,n2,n3 packet-rr; 500 packets; n3 deaf to n1 for 100 ms; \
                  n3 deaf to n2 for 100 ms; 4000 packets; settle; 2000 packets";
    let (mut h, run) = run(script);
    assert_safe(&h, script);
    let n3 = h.node(NodeId(3)).unwrap().status();
    assert!(n3.counters.quorum_losses >= 1);
    assert_eq!(n3.counters.corrected, 2, "{:?}", n3.failovers);
    settle(&mut h);
    assert!(h.steady());
    assert_exactly_one(&run, 6, 0, script);
}

/// With quorum off both sides of "split n3 | n1,n2" go on (numbers may
/// repeat during the partition: IVs stay unique), but once the sides
/// merged nothing sent is ever a repeat of anything sent before.
#[test]
fn s22_quorum_off_merge_keeps_numbers_unique() {
    let first = "n1,n2,n3 packet-rr; 500 packets; split n3 | n1,n2; 2000 packets; \
                 idle 400 ms; 2000 packets";
    let (mut h, mut run) = run_with(first, |c| c.quorum = QuorumPolicy::Off);
    assert!(run.side_overlaps > 0, "both sides went on");
    let before = h.record.violations.len();
    run_more(
        &mut h,
        &mut run,
        6,
        "reconnect; idle 400 ms; settle; 3000 packets",
    );
    let after: Vec<&String> = h.record.violations[before..].iter().collect();
    assert!(after.is_empty(), "after the merge: {after:?}");
    assert!(h.steady());
    assert_exactly_one(&run, 9, 0, first);
}

/// A kill and a false suspicion at once ("kill n1; n2 deaf to n3 for 35
/// ms", four nodes, shortest queue first): n2 hears one of four and stands
/// down while n3 is silent; the log refuses n2's suspicion of n3 (it would
/// leave [2, 4]: no quorum), and n2's Rejoin still starts a generation, so
/// n2's dispatch state (which ran without n3) restarts with everyone's.
#[test]
fn s23_false_suspicion_during_a_kill() {
    let script = "n1,n2,n3,n4 packet-sqf; kill n1; 50 packets; n2 deaf to n3 for 35 ms; \
                  idle 400 ms; settle; 3000 packets";
    let (h, run) = run(script);
    assert_safe(&h, script);
    let n2 = h.node(NodeId(2)).unwrap().status();
    assert_eq!(n2.counters.quorum_losses, 1);
    assert_eq!(n2.counters.corrected, 1);
    assert_exactly_one(&run, 6, 0, script);
}

/// "n1,n2; kill n1": n2 (half of [1, 2] without its lowest) stands down,
/// yet it still observes and checkpoints the inbound numbers, so n1,
/// restarted, catches up from it: the packets n1 never processed are
/// refused when replayed.
#[test]
fn s24_stood_down_node_still_checkpoints() {
    let script = "n1 packet-rr; join n2; kill n1; 20 inbound; join n1; idle 400 ms; settle; \
                  3000 packets; replay inbound";
    let (h, run) = run(script);
    assert_safe(&h, script);
    assert!(h.node(NodeId(2)).unwrap().status().counters.quorum_losses >= 1);
    assert_eq!(run.replays_accepted, 0);
    assert_exactly_one(&run, 7, 0, script);
}

/// A false suspicion while the log is slow (as when Corosync reforms its
/// ring after a real failure): "n1 deaf to n3 for 60 ms" with every node
/// reading the log 500 ms late. n3 never knows it is suspected and keeps
/// processing its inbound share (n1 takes it over meanwhile: 100 inbound
/// packets while n3 is suspected); once n1 hears it steadily again, n1
/// hands that share back at once (its inbound view has n3 again) instead of
/// delivering every such packet a second time until the log's `Rejoin`.
/// Outbound stays with n1 until the log agrees. Every scheme.
#[test]
fn s25_false_suspicion_ends_inbound_before_the_log() {
    for scheme in DispatchScheme::ALL {
        let first = format!(
            "n1,n2,n3 {scheme}; 300 inbound; n1 reads the log 500000 us late; \
             n2 reads the log 500000 us late; n3 reads the log 500000 us late; \
             n1 deaf to n3 for 60 ms; idle 40 ms; 100 inbound; idle 60 ms"
        );
        let (mut h, mut run) = run(&first);
        let n1 = h.node(NodeId(1)).unwrap();
        let status = n1.status();
        assert_eq!(status.suspects, [NodeId(3)], "{first}");
        let n3 = status.members.iter().find(|m| m.node == NodeId(3)).unwrap();
        assert!(n3.suspected_here && n3.heard_again && !n3.live, "{first}");
        let shared = n1.shared();
        assert!(!shared.view().contains(NodeId(3)), "{first}: outbound kept");
        assert!(
            shared.inbound_view().contains(NodeId(3)),
            "{first}: inbound handed back"
        );
        run_more(
            &mut h,
            &mut run,
            9,
            "600 inbound; n1 reads the log 0 us late; n2 reads the log 0 us late; \
             n3 reads the log 0 us late; settle; 300 inbound; 2000 packets",
        );
        assert_safe(&h, &first);
        assert_inbound_once(&run, 1, &first);
        assert_inbound_once(&run, 9, &first);
        assert_inbound_once(&run, 14, &first);
        assert_exactly_one(&run, 15, 0, &first);
        let status = h.node(NodeId(1)).unwrap().status();
        assert_eq!(
            status.failovers[0].outcome,
            FailoverOutcome::Corrected,
            "{first}"
        );
    }
}

/// "n1,n2,n3 <scheme>; nX stalls for 100 ms; ...": a node that owns
/// inbound packets runs nothing for 100 ms (SIGSTOP) while they keep
/// arriving (n2; with the whole-SA schemes the SA's owner). The others
/// suspect it after 30 ms and take over its share by arrival time. When
/// it runs again its data path waits until the others' reports say what
/// they took over (its fence is uncertain), then works off the 2,000
/// packets queued for it under the view they arrived in, fencing what
/// the others took. No packet is accepted twice, and almost none is lost
/// (at most 15 ms of its share: the others' last reports before the
/// stall lag up to two heartbeat intervals).
///
/// What arrives after it runs again it decides under the state it holds
/// then: before, it decided that too under the old one, and with
/// `packet-sqf`, whose queue model restarts at every generation, 222
/// packets came out twice and 224 were lost.
#[test]
fn s26_a_stalled_node_fences_its_backlog() {
    for scheme in DispatchScheme::ALL {
        let owners = inbound_owners(scheme);
        let stalled = if owners.len() == 1 {
            owners.first().copied().unwrap()
        } else {
            NodeId(2)
        };
        let share = 1.0 / owners.len() as f64;
        let first = format!(
            "n1,n2,n3 {scheme}; 300 inbound; n{} stalls for 100 ms; 3000 inbound; settle; \
             300 inbound; 1000 packets",
            stalled.0
        );
        let (h, run) = run(&first);
        assert_safe(&h, &first);
        let twice = run.inbound.iter().filter(|(_, a)| a.len() > 1).count();
        let lost = run.inbound.iter().filter(|(_, a)| a.is_empty()).count();
        // 15 ms of its share at 20 packets per ms.
        let bound = (15.0 * 20.0 * share) as usize;
        eprintln!("s26 {scheme}: twice {twice}, lost {lost} (bound {bound})");
        assert_eq!(twice, 0, "{first}: accepted twice");
        assert!(lost <= bound, "{first}: {lost} lost, more than {bound}");
        assert_inbound_once(&run, 1, &first);
        assert_inbound_once(&run, 5, &first);
        let fenced = h.path(stalled).unwrap().stats().inbound_fenced;
        assert!(fenced > 0, "{first}: nothing fenced");
        let gaps = h.node(stalled).unwrap().status().counters.heartbeat_gaps;
        assert_eq!(gaps, 1, "{first}");
        assert!(
            !h.record.late_inbound.is_empty(),
            "{first}: none of the backlog from before the suspicion processed"
        );
    }
}

/// Packet round robin and the hash segments: the owner is a function of
/// the packet and the view, not of the packets before.
fn stateless(scheme: DispatchScheme) -> bool {
    matches!(
        scheme,
        DispatchScheme::PacketRoundRobin | DispatchScheme::HashSegments { .. }
    )
}

/// "...; 5000 inbound; replay inbound; kill n2; ...; replay inbound": a
/// replay of packets older than the observers' window (4,096 numbers,
/// ESN SAs) must not move the observers: with the receiver's ESN rule
/// (RFC 4303 A2.2) they took the old numbers for the next 2^32, slid
/// 2^32 ahead and lost every number they kept, so after the kill the
/// survivors accepted replays of n2's share (found by the property tests
/// once runs had more than 4,096 inbound packets).
#[test]
fn s27_old_replays_do_not_move_the_observers() {
    for scheme in DispatchScheme::ALL {
        let script = format!(
            "n1,n2,n3 {scheme}; 5000 inbound; replay inbound; kill n2; idle 400 ms; settle; \
             replay inbound"
        );
        let (h, run) = run(&script);
        assert_safe(&h, &script);
        assert_eq!(run.replays_accepted, 0, "{script}");
        assert_inbound_once(&run, 1, &script);
    }
}

/// "...; n1 deaf to nX for 60 ms; 2000 inbound; ...": n1 stops hearing a
/// node that owns inbound packets (n3; with the whole-SA schemes the
/// SA's owner) while that node runs and hears everyone. n1 suspects it
/// after 30 ms and takes over its share; the node learns so from n1's
/// hearing reports (which heartbeat of it n1 heard last, whether n1
/// holds its share) and fences that share until n1 reports it handed it
/// back, only the packets n1 owns without it (stateless schemes; with
/// the stateful ones all of its share). No packet is accepted twice;
/// what is lost is what the node fences but n1 does not take: between
/// the last heartbeat n1 reported heard and n1's suspicion (up to two
/// report intervals, 10 ms), and between n1's hand-back and its report
/// of it arriving, plus 5 ms for n1's data path to adopt it (up to
/// 10 ms), plus, with the stateful schemes,
/// the packets n1 does not own without the node during the suspicion.
#[test]
fn s28_a_node_suspected_while_it_runs_fences_its_share() {
    for scheme in DispatchScheme::ALL {
        let owners = inbound_owners(scheme);
        let victim = if owners.len() == 1 {
            owners.first().copied().unwrap()
        } else {
            NodeId(3)
        };
        let deaf = if victim == NodeId(1) { 2 } else { 1 };
        let first = format!(
            "n1,n2,n3 {scheme}; 300 inbound; n1 reads the log 500000 us late; \
             n2 reads the log 500000 us late; n3 reads the log 500000 us late; \
             n{deaf} deaf to n{} for 60 ms; 2000 inbound; n1 reads the log 0 us late; \
             n2 reads the log 0 us late; n3 reads the log 0 us late; settle; 300 inbound; \
             1000 packets",
            victim.0
        );
        let (h, run) = run(&first);
        assert_safe(&h, &first);
        let twice: Vec<_> = run.inbound.iter().filter(|(_, a)| a.len() > 1).collect();
        assert!(
            twice.is_empty(),
            "{first}: {} accepted twice, first {:?}",
            twice.len(),
            twice.first()
        );
        assert_inbound_once(&run, 1, &first);
        assert_inbound_once(&run, 11, &first);
        let lost = run.inbound.iter().filter(|(_, a)| a.is_empty()).count();
        let share = 1.0 / owners.len() as f64;
        // 20 packets a ms; the suspicion lasts about 45 ms.
        let ms = if stateless(scheme) { 22.0 } else { 50.0 };
        let bound = (ms * 20.0 * share) as usize;
        assert!(lost <= bound, "{first}: {lost} lost, more than {bound}");
        eprintln!(
            "s28 {scheme}: fenced {}, lost {lost} (bound {bound})",
            h.path(victim).unwrap().stats().inbound_fenced
        );
    }
}

/// Runs `script` (`{scheme}` replaced) for every scheme: its fifth
/// clause (after a view change one node adopts late) has one sender per
/// packet from its 2,000th packet on, at most `unsent` packets without a
/// sender and fewer than `doubled` with two.
fn agrees_again(script: &str, unsent: usize, doubled: usize) {
    for scheme in DispatchScheme::ALL {
        let script = script.replace("{scheme}", scheme.name());
        let (h, run) = run(&script);
        assert_safe(&h, &script);
        assert_exactly_one(&run, 4, 2000, &script);
        let outcomes = run.clause(4);
        let none = outcomes.iter().filter(|o| o.senders.is_empty()).count();
        let two = outcomes.iter().filter(|o| o.senders.len() > 1).count();
        assert!(
            none < unsent && two < doubled,
            "{script}: {none} unsent, {two} twice"
        );
    }
}

/// A view change that nodes adopt at different packets (one reads the log
/// 1 ms late: 21 packets): for every scheme the senders agree again within
/// 100 ms of the failure, and the packets in between go out twice at most
/// a few dozen times. Before the entry checkpoints and the state restarts
/// at fixed lineage positions, counters agreed only at the next periodic
/// checkpoint, and the stateful schemes' tables, built from different
/// packets, never did: session-rr sent 3,693 of 8,000 packets twice and
/// 3,881 not at all.
#[test]
fn s29_a_late_log_reader_agrees_again_after_a_kill() {
    // n3's share of the 30 ms before the suspicion (600 packets; all of
    // them with hash-src, whose one SA n3 owns) is unsent; the rest is
    // the adoption skew.
    agrees_again(
        "n1,n2,n3 {scheme}; n2 reads the log 1050 us late; 500 packets; kill n3; 8000 packets",
        700,
        40,
    );
}

/// The same for a join, the reader 5 ms late (101 packets).
#[test]
fn s30_a_late_log_reader_agrees_again_after_a_join() {
    agrees_again(
        "n1,n2,n3 {scheme}; n3 reads the log 5050 us late; 500 packets; join n4 at once; 8000 packets",
        120,
        120,
    );
}

/// "n1..n4; n2 stalls for 100 ms; kill n4": the view changes twice while
/// n2 is stopped (the log takes n2 out, then n4). When n2 runs again its
/// cluster thread reads those changes, and the inbound packets that
/// arrived since go by them: n2 processes none of what the others now own.
/// Deciding them under the view of before the stall, as the backlog, sent
/// 17 packets twice (packet-rr) and 156 (packet-sqf).
#[test]
fn s31_a_node_stalled_across_a_view_change() {
    for scheme in DispatchScheme::ALL {
        let script = format!(
            "n1,n2,n3,n4 {scheme}; 300 inbound; n2 stalls for 100 ms; 200 inbound; kill n4; \
             4000 inbound; settle; 300 inbound"
        );
        let (h, run) = run(&script);
        assert_safe(&h, &script);
        let twice = run.inbound.iter().filter(|(_, a)| a.len() > 1).count();
        assert_eq!(twice, 0, "{script}: accepted twice");
        assert_inbound_once(&run, 7, &script);
    }
}

/// "n2 stalls for 32 ms" with n1 hearing heartbeats a microsecond late:
/// only n3 suspects n2, the log takes n2 out, and n1, which suspects
/// nobody, owns n2's share by the base view from then on. n2 reads that
/// only after its backlog; its fence must cover all of its share, not
/// only the part n3 reports taking over (found by the property test: 7
/// packets accepted by n1 and n2).
#[test]
fn s32_a_stall_the_log_answers_with_a_removal() {
    for scheme in DispatchScheme::ALL {
        let script = format!(
            "n1,n2,n3 {scheme}; n1 hears heartbeats 1 us late; 100 packets; n2 stalls for 32 ms; \
             640 inbound; idle 400 ms; settle; 3000 packets; replay inbound"
        );
        let (h, run) = run(&script);
        assert_safe(&h, &script);
        let twice = run.inbound.iter().filter(|(_, a)| a.len() > 1).count();
        assert_eq!(twice, 0, "{script}: accepted twice");
        assert_eq!(run.replays_accepted, 0, "{script}");
    }
}
