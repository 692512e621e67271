//! `phalanxctl cluster`: members, the virtual addresses and who answers
//! for them, ownership, leases, checkpoint lag, counters and the last
//! failovers, as tables.

use phalanx_control::{
    ClusterMember, ClusterReport, ClusterSaReport, FailoverReport, LeaseBlockReport, QuorumReport,
};

use crate::table::{Align, Table};

/// The whole human output of a cluster report.
pub(crate) fn render(report: &ClusterReport) -> String {
    let state = if report.ready {
        "ready"
    } else {
        "joining (owns nothing until its state transfer)"
    };
    let mut out = format!(
        "node {} of group {:?}, scheme {}, generation {}: {state}\n",
        report.node_id, report.group, report.scheme, report.generation
    );
    if let Some(error) = &report.corosync_error {
        out.push_str(&format!(
            "corosync: LOST ({error}); this node sends no heartbeats and owns nothing\n"
        ));
    }
    if let Some(q) = &report.quorum {
        out.push_str(&quorum(q));
    }
    out.push_str(&format!("members:\n{}", members(&report.members)));
    if !report.virtual_sides.is_empty() {
        out.push_str(&virtual_sides(report));
    }
    if !report.segment_owners.is_empty() {
        out.push_str(&format!("segments:\n{}", segments(&report.segment_owners)));
    }
    if report.sas.is_empty() {
        out.push_str("SAs: none registered\n");
    } else {
        out.push_str(&format!("SAs:\n{}", sas(&report.sas, report.node_id)));
    }
    if !report.counters.is_empty() {
        let mut t = Table::new(&[("NAME", Align::Left), ("COUNT", Align::Right)]);
        for c in &report.counters {
            t.row(vec![c.name.clone(), c.count.to_string()]);
        }
        out.push_str(&format!("counters:\n{}", t.render(2)));
    }
    if report.failovers.is_empty() {
        out.push_str("failovers: none\n");
    } else {
        out.push_str(&format!("failovers:\n{}", failovers(&report.failovers)));
    }
    out
}

/// The virtual addresses of both sides and the node that answers ARP and
/// neighbour solicitations for them.
fn virtual_sides(report: &ClusterReport) -> String {
    let by = match report.resolver {
        Some(node) if node == report.node_id => {
            format!("node {node} (this node, the view's first)")
        }
        Some(node) => format!("node {node} (the view's first)"),
        None => "nobody (no view yet)".to_owned(),
    };
    let mut t = Table::new(&[
        ("SIDE", Align::Left),
        ("INTERFACE", Align::Left),
        ("ADDRESSES", Align::Left),
        ("MAC", Align::Left),
    ]);
    for v in &report.virtual_sides {
        t.row(vec![
            v.side.clone(),
            v.interface.clone(),
            v.addresses.join(","),
            v.mac.clone(),
        ]);
    }
    format!("virtual addresses, answered by {by}:\n{}", t.render(2))
}

/// One line: the policy, whether this side may own traffic, and the
/// membership its votes are counted against.
fn quorum(q: &QuorumReport) -> String {
    let base: Vec<String> = q.base.iter().map(u32::to_string).collect();
    let base = if base.is_empty() {
        "none yet".to_owned()
    } else {
        base.join(",")
    };
    let state = match (q.policy.as_str(), q.quorate) {
        ("off", _) => "not enforced (every side of a partition keeps going)",
        (_, true) => "quorate",
        (_, false) => "NOT QUORATE: this side stands down and owns nothing",
    };
    format!("quorum: {} {state}; base [{base}]\n", q.policy)
}

fn yes_no(flag: bool) -> String {
    if flag { "yes" } else { "no" }.to_owned()
}

fn members(members: &[ClusterMember]) -> String {
    let mut t = Table::new(&[
        ("NODE", Align::Left),
        ("ADDRESS", Align::Left),
        ("AGREED", Align::Left),
        ("LIVE", Align::Left),
        ("SUSPECTED", Align::Left),
        ("READY", Align::Left),
        ("HEARTBEAT", Align::Right),
    ]);
    for m in members {
        let name = if m.local {
            format!("{} (this)", m.node_id)
        } else {
            m.node_id.to_string()
        };
        let heartbeat = match (m.local, m.last_heartbeat_ms) {
            (true, _) => "-".to_owned(),
            (false, Some(ms)) => format!("{ms} ms ago"),
            (false, None) => "never".to_owned(),
        };
        t.row(vec![
            name,
            m.address.clone().unwrap_or_else(|| "-".to_owned()),
            yes_no(m.agreed),
            yes_no(m.live),
            if m.heard_again {
                "heard again".to_owned()
            } else {
                yes_no(m.suspected)
            },
            yes_no(m.ready),
            heartbeat,
        ]);
    }
    t.render(2)
}

/// Each owner with its segments as ranges (`0-41,97,200-255`).
fn segments(owners: &[u32]) -> String {
    let mut nodes: Vec<u32> = owners.to_vec();
    nodes.sort_unstable();
    nodes.dedup();
    let mut t = Table::new(&[
        ("OWNER", Align::Left),
        ("COUNT", Align::Right),
        ("SEGMENTS", Align::Left),
    ]);
    for node in nodes {
        let mine: Vec<usize> = (0..owners.len()).filter(|&s| owners[s] == node).collect();
        let name = if node == 0 {
            "none".to_owned()
        } else {
            node.to_string()
        };
        t.row(vec![name, mine.len().to_string(), ranges(&mine)]);
    }
    t.render(2)
}

/// Ascending numbers as comma-separated runs.
fn ranges(numbers: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &n in numbers {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == n => *last = n,
            _ => runs.push((n, n)),
        }
    }
    let text: Vec<String> = runs
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    text.join(",")
}

/// `start-end/[view]`.
fn block(b: &LeaseBlockReport) -> String {
    let view: Vec<String> = b.view.iter().map(u32::to_string).collect();
    format!("{}-{} [{}]", b.start, b.end, view.join(","))
}

fn sas(sas: &[ClusterSaReport], local: u32) -> String {
    let mut t = Table::new(&[
        ("SPI", Align::Left),
        ("DIR", Align::Left),
        ("PEER", Align::Left),
        ("SENT BY", Align::Left),
        ("COUNTER", Align::Right),
        ("BLOCK [VIEW]", Align::Left),
        ("CLASS", Align::Right),
        ("TAKEOVER BLOCKS", Align::Left),
        ("CHECKPOINT", Align::Right),
    ]);
    for sa in sas {
        let class = match (sa.class, &sa.block) {
            (Some(c), Some(b)) => format!("{c}/{}", b.view.len()),
            (Some(c), None) => c.to_string(),
            (None, _) => "-".to_owned(),
        };
        // The blocks this node would enter when another member fails.
        let takeover: Vec<String> = sa
            .takeover_blocks
            .iter()
            .filter(|t| t.suspect != local)
            .map(|t| format!("if {} fails: {}", t.suspect, block(&t.block)))
            .collect();
        t.row(vec![
            format!("0x{:08x}", sa.spi),
            sa.direction.to_string(),
            sa.peer.clone().unwrap_or_else(|| "-".to_owned()),
            senders(sa),
            sa.counter.to_string(),
            match (&sa.block, sa.exhausted) {
                (_, true) => "EXHAUSTED (rekey)".to_owned(),
                (Some(b), false) => block(b),
                (None, false) => "-".to_owned(),
            },
            class,
            if takeover.is_empty() {
                "-".to_owned()
            } else {
                takeover.join("; ")
            },
            sa.checkpoint_age_ms
                .map_or_else(|| "-".to_owned(), |ms| format!("{ms} ms ago")),
        ]);
    }
    t.render(2)
}

/// Who sends an outbound SA: every node, or one (with the peer window
/// that keeps it from being spread).
fn senders(sa: &ClusterSaReport) -> String {
    let window = sa
        .peer_window
        .map_or_else(|| "unknown".to_owned(), |w| w.to_string());
    match sa.spread {
        Some(true) => format!("all (peer window {window})"),
        Some(false) => format!("one node (peer window {window})"),
        None => "-".to_owned(),
    }
}

fn failovers(list: &[FailoverReport]) -> String {
    let mut t = Table::new(&[
        ("SUSPECT", Align::Left),
        ("DETECTED", Align::Right),
        ("HANDOVER", Align::Right),
        ("COROSYNC", Align::Left),
        ("WHEN", Align::Right),
    ]);
    for f in list {
        t.row(vec![
            f.suspect.to_string(),
            millis(f.detected_after_ms),
            f.handover_ms.map_or_else(|| "-".to_owned(), millis),
            f.outcome.clone(),
            format!("{}s ago", f.age_seconds),
        ]);
    }
    t.render(2)
}

/// Milliseconds with one decimal.
fn millis(ms: f64) -> String {
    format!("{ms:.1} ms")
}

#[cfg(test)]
mod tests {
    use phalanx_control::{Direction, NamedCounter, TakeoverBlockReport, VirtualSideReport};

    use super::*;

    fn member(node_id: u32, local: bool, suspected: bool) -> ClusterMember {
        ClusterMember {
            node_id,
            local,
            agreed: true,
            live: !suspected,
            suspected,
            heard_again: false,
            ready: true,
            address: Some(format!("10.99.0.1{node_id}")),
            last_heartbeat_ms: Some(if suspected { 1500 } else { 2 }),
        }
    }

    fn report() -> ClusterReport {
        let lease = |start: u64, view: &[u32]| LeaseBlockReport {
            start,
            end: start + 4095,
            view: view.to_vec(),
        };
        ClusterReport {
            node_id: 1,
            scheme: "packet-rr".into(),
            group: "phalanx".into(),
            ready: true,
            generation: 4,
            corosync_error: None,
            quorum: Some(QuorumReport {
                policy: "majority".into(),
                quorate: true,
                base: vec![1, 2, 3],
            }),
            members: vec![
                member(1, true, false),
                member(2, false, true),
                ClusterMember {
                    heard_again: true,
                    ..member(3, false, true)
                },
            ],
            segment_owners: vec![],
            sas: vec![ClusterSaReport {
                spi: 0x1001,
                direction: Direction::Out,
                peer: Some("192.0.2.2".into()),
                counter: 5000,
                exhausted: false,
                peer_window: Some(1024),
                spread: Some(true),
                block: Some(lease(4097, &[1, 2])),
                class: Some(0),
                takeover_blocks: vec![
                    TakeoverBlockReport {
                        suspect: 1,
                        block: lease(8193, &[2]),
                    },
                    TakeoverBlockReport {
                        suspect: 2,
                        block: lease(12_289, &[1]),
                    },
                ],
                checkpoint_age_ms: Some(12),
            }],
            counters: vec![NamedCounter {
                name: "takeovers".into(),
                count: 1,
            }],
            failovers: vec![FailoverReport {
                suspect: 2,
                detected_after_ms: 31.3,
                handover_ms: Some(31.5),
                outcome: "confirmed".into(),
                age_seconds: 9,
            }],
            virtual_sides: vec![
                VirtualSideReport {
                    side: "inside".into(),
                    interface: "lan0".into(),
                    addresses: vec!["10.1.0.1".into(), "fd01::1".into()],
                    mac: "02:00:5e:10:00:02".into(),
                },
                VirtualSideReport {
                    side: "outside".into(),
                    interface: "wan0".into(),
                    addresses: vec!["2001:db8:f::1".into()],
                    mac: "02:00:5e:10:00:01".into(),
                },
            ],
            resolver: Some(1),
        }
    }

    #[test]
    fn shows_members_leases_and_failovers() {
        let out = render(&report());
        assert!(
            out.starts_with("node 1 of group \"phalanx\", scheme packet-rr, generation 4: ready\n")
        );
        assert!(out.contains("all (peer window 1024)"), "{out}");
        let mut pinned = report();
        pinned.sas[0].peer_window = None;
        pinned.sas[0].spread = Some(false);
        assert!(
            render(&pinned).contains("one node (peer window unknown)"),
            "{out}"
        );
        let has = |words: &[&str]| {
            out.lines()
                .any(|l| l.split_whitespace().eq(words.iter().copied()))
        };
        assert!(
            has(&["1", "(this)", "10.99.0.11", "yes", "yes", "no", "yes", "-"]),
            "{out}"
        );
        assert!(
            has(&[
                "2",
                "10.99.0.12",
                "yes",
                "no",
                "yes",
                "yes",
                "1500",
                "ms",
                "ago"
            ]),
            "{out}"
        );
        assert!(
            has(&[
                "3",
                "10.99.0.13",
                "yes",
                "no",
                "heard",
                "again",
                "yes",
                "1500",
                "ms",
                "ago"
            ]),
            "{out}"
        );
        let sa = out
            .lines()
            .find(|l| l.contains("0x00001001"))
            .expect("an SA row");
        assert!(sa.contains("4097-8192 [1,2]"), "{sa}");
        assert!(sa.contains(" 192.0.2.2 "), "{sa}");
        assert!(sa.contains(" 0/2 "), "{sa}");
        assert!(sa.contains("if 2 fails: 12289-16384 [1]"), "{sa}");
        assert!(
            !sa.contains("if 1 fails"),
            "a node never enters its own takeover block: {sa}"
        );
        assert!(sa.trim_end().ends_with("12 ms ago"), "{sa}");
        assert!(
            has(&["2", "31.3", "ms", "31.5", "ms", "confirmed", "9s", "ago"]),
            "{out}"
        );
        assert!(has(&["takeovers", "1"]), "{out}");
        assert!(
            out.contains("virtual addresses, answered by node 1 (this node, the view's first):\n"),
            "{out}"
        );
        assert!(
            has(&["inside", "lan0", "10.1.0.1,fd01::1", "02:00:5e:10:00:02"]),
            "{out}"
        );
        assert!(
            has(&["outside", "wan0", "2001:db8:f::1", "02:00:5e:10:00:01"]),
            "{out}"
        );
        assert!(
            out.contains("quorum: majority quorate; base [1,2,3]\n"),
            "{out}"
        );
        assert!(!out.contains("segments:"));
    }

    #[test]
    fn segments_are_grouped_by_owner_as_ranges() {
        let mut owners = vec![1_u32; 256];
        for (s, owner) in owners.iter_mut().enumerate() {
            if (100..=199).contains(&s) || s == 7 {
                *owner = 2;
            }
        }
        owners[255] = 0;
        let out = segments(&owners);
        let lines: Vec<Vec<&str>> = out
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(lines[1], ["none", "1", "255"]);
        assert_eq!(lines[2], ["1", "154", "0-6,8-99,200-254"]);
        assert_eq!(lines[3], ["2", "101", "7,100-199"]);
    }

    #[test]
    fn empty_parts_say_so() {
        let mut r = report();
        r.ready = false;
        r.sas.clear();
        r.failovers.clear();
        r.corosync_error = Some("cpg_dispatch failed: ErrLibrary".into());
        r.quorum = Some(QuorumReport {
            policy: "majority".into(),
            quorate: false,
            base: vec![],
        });
        let out = render(&r);
        assert!(
            out.contains("NOT QUORATE: this side stands down and owns nothing; base [none yet]"),
            "{out}"
        );
        assert!(
            out.contains("corosync: LOST (cpg_dispatch failed: ErrLibrary)"),
            "{out}"
        );
        assert!(out.contains("joining (owns nothing until its state transfer)"));
        assert!(out.contains("SAs: none registered\n"));
        assert!(out.contains("failovers: none\n"));
    }
}
