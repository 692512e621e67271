//! The simulator against what must hold: a lightly loaded node delivers
//! everything; packet round robin at saturation matches the closed form;
//! hash segments of a single peer put everything on one node.

use phalanx_cluster::{Direction, DispatchScheme};
use phalanx_sim::{run, CostCurve, Report, Scenario, SizeMix, TrafficShape};

fn curve(text: &str) -> CostCurve {
    match text.parse() {
        Ok(curve) => curve,
        Err(err) => panic!("{text}: {err}"),
    }
}

/// Q = 120 ns, R = 1400 ns at 1500 B (the brief's example), saturated.
fn scenario(scheme: DispatchScheme, nodes: &[usize]) -> Scenario {
    Scenario {
        schemes: vec![scheme],
        nodes: nodes.to_vec(),
        mix: SizeMix::Fixed(1500),
        q: curve("1500:120,64:90"),
        r: curve("1500:1400,64:300"),
        load: 1.2,
        packets: 40_000,
        queue_limit: 256,
        seed: 11,
        shape: TrafficShape::default(),
    }
}

fn within(actual: f64, expected: f64, relative: f64) -> bool {
    (actual - expected).abs() <= relative * expected.abs()
}

#[test]
fn one_node_at_low_load_delivers_everything() {
    let mut s = scenario(DispatchScheme::PacketRoundRobin, &[1]);
    s.load = 0.3;
    let report = run(&s);
    let run = &report.schemes[0].rows[0].run;
    assert_eq!((run.lost, run.missed), (0, 0));
    assert_eq!(run.delivered_packets + run.unfinished, 40_000);
    // Only the packet(s) still in service when the last one arrives.
    assert!(run.unfinished <= 2, "{run:?}");
    assert!(within(run.throughput(), run.offered(), 0.001), "{run:?}");
    assert!(within(run.utilisation[0], 0.3, 0.03), "{run:?}");
}

#[test]
fn packet_round_robin_matches_the_closed_form_at_saturation() {
    for mix in [SizeMix::Fixed(1500), SizeMix::Imix] {
        let mut s = scenario(DispatchScheme::PacketRoundRobin, &[1, 2, 4, 8]);
        s.mix = mix;
        let report = run(&s);
        for row in &report.schemes[0].rows {
            let n = row.run.nodes;
            assert!(
                within(row.efficiency, row.model_efficiency, 0.02),
                "{mix} n={n}: efficiency {} vs model {}",
                row.efficiency,
                row.model_efficiency
            );
            assert!(
                within(row.run.throughput(), row.model_throughput, 0.02),
                "{mix} n={n}: {} vs {} B/s",
                row.run.throughput(),
                row.model_throughput
            );
            assert!(
                row.run.utilisation.iter().all(|&u| u > 0.97),
                "{mix} n={n}: {row:?}"
            );
            assert!(row.run.lost > 0, "{mix} n={n}: load 1.2 must saturate");
        }
    }
}

#[test]
fn model_efficiency_at_eight_nodes_is_r_over_r_plus_seven_q() {
    let report = run(&scenario(DispatchScheme::PacketRoundRobin, &[8]));
    let expected = 1400.0 / (1400.0 + 7.0 * 120.0);
    assert!((report.schemes[0].rows[0].model_efficiency - expected).abs() < 1e-12);
}

#[test]
fn hash_of_a_single_peer_puts_everything_on_one_node() {
    for with_spi in [false, true] {
        let report = run(&scenario(
            DispatchScheme::HashSegments { with_spi },
            &[2, 4, 8],
        ));
        for row in &report.schemes[0].rows {
            let n = row.run.nodes;
            let owners = row.run.owned.iter().filter(|&&count| count > 0).count();
            assert_eq!(owners, 1, "n={n}: {:?}", row.run.owned);
            assert!(
                within(row.efficiency, 1.0 / n as f64, 0.02),
                "n={n}: efficiency {} vs 1/n",
                row.efficiency
            );
        }
    }
}

#[test]
fn many_flows_spread_under_session_schemes() {
    for scheme in [
        DispatchScheme::SessionRoundRobin,
        DispatchScheme::SessionShortestQueue,
    ] {
        let report = run(&scenario(scheme, &[4]));
        let row = &report.schemes[0].rows[0];
        // 1,024 flows drawn uniformly: close to an even spread.
        assert!(
            within(row.efficiency, row.model_efficiency, 0.05),
            "{scheme}: {row:?}"
        );
    }
}

#[test]
fn inbound_sessions_of_one_sa_stay_on_one_node() {
    let mut s = scenario(DispatchScheme::SessionRoundRobin, &[4]);
    s.shape = TrafficShape {
        direction: Direction::Inbound,
        ..TrafficShape::default()
    };
    let report = run(&s);
    let owned = &report.schemes[0].rows[0].run.owned;
    assert_eq!(
        owned.iter().filter(|&&count| count > 0).count(),
        1,
        "{owned:?}"
    );
}

#[test]
fn same_seed_same_report_and_json_is_well_formed() {
    let mut s = scenario(DispatchScheme::PacketShortestQueue, &[1, 3]);
    s.packets = 5_000;
    let first: Report = run(&s);
    assert_eq!(first, run(&s));
    s.seed += 1;
    assert_ne!(first, run(&s));
    let json: serde_json::Value = match serde_json::from_str(&first.to_json()) {
        Ok(value) => value,
        Err(err) => panic!("{err}: {}", first.to_json()),
    };
    let rows = &json["schemes"][0]["rows"];
    assert_eq!(json["schemes"][0]["scheme"], "packet-sqf");
    assert_eq!(rows[1]["nodes"], 3);
    assert_eq!(rows[1]["utilisation"].as_array().map(Vec::len), Some(3));
    let text = first.to_text();
    assert!(
        text.contains("scheme packet-sqf") && text.contains("mu(n,s)"),
        "{text}"
    );
}
