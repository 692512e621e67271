//! A whole experiment: one trace, every requested scheme and cluster size,
//! each set beside the closed-form model; rendered as text or JSON.

use core::fmt::Write as _;

use phalanx_cluster::DispatchScheme;

use crate::cluster::{simulate, RunResult, RunSetup};
use crate::cost::CostCurve;
use crate::model::{ClosedForm, SERVERS_PER_NODE};
use crate::traffic::{SizeMix, Trace, TrafficShape};

/// Everything an experiment depends on; the same scenario always gives
/// the same report.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Dispatch schemes to compare.
    pub schemes: Vec<DispatchScheme>,
    /// Cluster sizes, 1..=64 each.
    pub nodes: Vec<usize>,
    /// Packet sizes.
    pub mix: SizeMix,
    /// Time a node spends on a packet it does not own, by size.
    pub q: CostCurve,
    /// Time a node spends on a packet it owns, by size.
    pub r: CostCurve,
    /// Offered load as a multiple of the model's capacity µ(n, s) for each
    /// cluster size (above 1: saturation).
    pub load: f64,
    /// Packets in the trace.
    pub packets: usize,
    /// Packets a node's queue holds.
    pub queue_limit: usize,
    /// Seed of the trace (sizes, flows, arrival times).
    pub seed: u64,
    /// SAs, peers and flows.
    pub shape: TrafficShape,
}

/// One cluster size under one scheme.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// What the simulation measured.
    pub run: RunResult,
    /// µ(n, s), bytes per second.
    pub model_throughput: f64,
    /// Simulated throughput(n) / (n · throughput(1)).
    pub efficiency: f64,
    /// The model's µ(n) / (n · µ(1)).
    pub model_efficiency: f64,
}

/// Every cluster size under one scheme.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemeReport {
    /// The scheme.
    pub scheme: DispatchScheme,
    /// One row per requested cluster size, in the order requested.
    pub rows: Vec<Row>,
}

/// The result of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The inputs.
    pub scenario: Scenario,
    /// The closed-form model for the inputs' mix and costs.
    pub model: ClosedForm,
    /// One report per scheme, in the order requested.
    pub schemes: Vec<SchemeReport>,
}

/// Run `scenario`: generate the trace once, then simulate every scheme at
/// every cluster size (and at one node, the efficiency baseline).
pub fn run(scenario: &Scenario) -> Report {
    let model = ClosedForm::new(scenario.mix, &scenario.q, &scenario.r);
    let trace = Trace::generate(
        scenario.shape,
        scenario.mix,
        scenario.packets,
        scenario.seed,
    );
    let schemes = scenario
        .schemes
        .iter()
        .map(|&scheme| run_scheme(scenario, &model, &trace, scheme))
        .collect();
    Report {
        scenario: scenario.clone(),
        model,
        schemes,
    }
}

/// Every cluster size of `scenario` under `scheme`.
fn run_scheme(
    scenario: &Scenario,
    model: &ClosedForm,
    trace: &Trace,
    scheme: DispatchScheme,
) -> SchemeReport {
    let at = |n: usize| {
        let setup = RunSetup {
            q: &scenario.q,
            r: &scenario.r,
            queue_limit: scenario.queue_limit,
            mean_gap_ns: 1e9 / (scenario.load * model.packet_rate(n)),
        };
        simulate(trace, &setup, scheme, n)
    };
    let baseline = at(1).throughput();
    let rows = scenario
        .nodes
        .iter()
        .map(|&n| {
            let run = at(n);
            let efficiency = if baseline > 0.0 {
                run.throughput() / (n as f64 * baseline)
            } else {
                0.0
            };
            Row {
                run,
                model_throughput: model.throughput(n),
                efficiency,
                model_efficiency: model.efficiency(n),
            }
        })
        .collect();
    SchemeReport { scheme, rows }
}

/// Bytes per second as Gbit/s.
fn gbps(bytes_per_s: f64) -> f64 {
    bytes_per_s * 8.0 / 1e9
}

impl Report {
    /// A table per scheme, for people.
    pub fn to_text(&self) -> String {
        let s = &self.scenario;
        let m = &self.model;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "phalanx-sim: size {} B, load {:.2} x model capacity, {} packets, queue {}, seed {}",
            s.mix, s.load, s.packets, s.queue_limit, s.seed
        );
        let _ = writeln!(
            out,
            "traffic: {} {} SA(s), {} peer(s), {} flow(s)",
            s.shape.sas, s.shape.direction, s.shape.peers, s.shape.flows
        );
        let _ = writeln!(
            out,
            "costs: Q(s) = {} ns, R(s) = {} ns; mix means s = {:.1} B, Q = {:.1} ns, R = {:.1} ns",
            s.q, s.r, m.size, m.q_ns, m.r_ns
        );
        let _ = writeln!(
            out,
            "model: mu(n,s) = n*P*s / (R'(s) + n*Q(s)), R' = R - Q, P = {SERVERS_PER_NODE}"
        );
        for scheme in &self.schemes {
            let _ = writeln!(out, "\nscheme {}", scheme.scheme);
            let _ = writeln!(
                out,
                "{:>5} {:>10} {:>10} {:>10} {:>7} {:>7} {:>17} {:>9} {:>9}",
                "nodes",
                "offered",
                "delivered",
                "model",
                "eff",
                "eff",
                "utilisation",
                "lost",
                "missed"
            );
            let _ = writeln!(
                out,
                "{:>5} {:>10} {:>10} {:>10} {:>7} {:>7} {:>17} {:>9} {:>9}",
                "",
                "Gbit/s",
                "Gbit/s",
                "Gbit/s",
                "sim",
                "model",
                "min/mean/max",
                "packets",
                "packets"
            );
            for row in &scheme.rows {
                out.push_str(&text_row(row));
            }
        }
        out
    }

    /// The same as JSON, for scripts and plots.
    pub fn to_json(&self) -> String {
        let s = &self.scenario;
        let m = &self.model;
        let mut out = String::from("{");
        let _ = write!(
            out,
            "\"size\":\"{}\",\"load\":{},\"packets\":{},\"queue\":{},\"seed\":{},",
            s.mix,
            num(s.load),
            s.packets,
            s.queue_limit,
            s.seed
        );
        let _ = write!(
            out,
            "\"traffic\":{{\"direction\":\"{}\",\"sas\":{},\"peers\":{},\"flows\":{}}},",
            s.shape.direction, s.shape.sas, s.shape.peers, s.shape.flows
        );
        let _ = write!(
            out,
            "\"q_ns\":\"{}\",\"r_ns\":\"{}\",\"model\":{{\"size\":{},\"q_ns\":{},\"r_ns\":{},\"servers_per_node\":{}}},",
            s.q,
            s.r,
            num(m.size),
            num(m.q_ns),
            num(m.r_ns),
            num(SERVERS_PER_NODE)
        );
        out.push_str("\"schemes\":[");
        for (i, scheme) in self.schemes.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{{\"scheme\":\"{}\",\"rows\":[", scheme.scheme);
            let rows: Vec<String> = scheme.rows.iter().map(json_row).collect();
            out.push_str(&rows.join(","));
            out.push_str("]}");
        }
        out.push_str("]}");
        out
    }
}

/// One line of the text table.
fn text_row(row: &Row) -> String {
    let run = &row.run;
    let util = &run.utilisation;
    let (min, max) = util.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &u| {
        (lo.min(u), hi.max(u))
    });
    let mean = util.iter().sum::<f64>() / util.len().max(1) as f64;
    format!(
        "{:>5} {:>10.3} {:>10.3} {:>10.3} {:>7.3} {:>7.3}    {:.2}/{:.2}/{:.2} {:>9} {:>9}\n",
        run.nodes,
        gbps(run.offered()),
        gbps(run.throughput()),
        gbps(row.model_throughput),
        row.efficiency,
        row.model_efficiency,
        min,
        mean,
        max,
        run.lost,
        run.missed
    )
}

/// One row as a JSON object (throughputs in bytes per second).
fn json_row(row: &Row) -> String {
    let run = &row.run;
    let list = |values: Vec<String>| values.join(",");
    format!(
        "{{\"nodes\":{},\"window_s\":{},\"offered_bytes_per_s\":{},\"delivered_bytes_per_s\":{},\
         \"model_bytes_per_s\":{},\"efficiency\":{},\"model_efficiency\":{},\
         \"delivered_packets\":{},\"lost\":{},\"unfinished\":{},\"missed\":{},\"owned\":[{}],\"utilisation\":[{}]}}",
        run.nodes,
        num(run.window_s),
        num(run.offered()),
        num(run.throughput()),
        num(row.model_throughput),
        num(row.efficiency),
        num(row.model_efficiency),
        run.delivered_packets,
        run.lost,
        run.unfinished,
        run.missed,
        list(run.owned.iter().map(u64::to_string).collect()),
        list(run.utilisation.iter().map(|&u| num(u)).collect()),
    )
}

/// A JSON number (`null` for what JSON cannot hold).
fn num(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        "null".to_owned()
    }
}
