//! The command line of `phalanx-sim`.

use phalanx_cluster::{Direction, DispatchScheme};

use crate::cost::CostCurve;
use crate::scenario::Scenario;
use crate::traffic::{SizeMix, TrafficShape};

/// The usage text.
pub const USAGE: &str = "\
usage: phalanx-sim --q-ns SIZE:NS[,SIZE:NS...] --r-ns SIZE:NS[,SIZE:NS...] [options]

  --q-ns CURVE      time a node spends on a packet it does not own (measured)
  --r-ns CURVE      time a node spends on a packet it owns (measured)
  --nodes LIST      cluster sizes, 1..=64 each          [1,2,4,8,16,32,64]
  --scheme NAME     packet-rr | packet-sqf | session-rr | session-sqf |
                    hash-src | hash-src-spi | all       [packet-rr]
  --size SIZE       64 | 512 | 1500 | imix | bytes       [1500]
  --load X          offered load, multiple of the model capacity [1.2]
  --packets N       packets in the trace (at most 50,000,000) [200000]
  --queue N         packets a node's queue holds        [1024]
  --seed N          trace seed                          [1]
  --sas N           SAs (streams)                       [1]
  --peers N         peer gateways                       [1]
  --flows N         inner flows                         [1024]
  --direction D     outbound | inbound                  [outbound]
  --json            print JSON instead of tables
";

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// The experiment.
    pub scenario: Scenario,
    /// Print JSON.
    pub json: bool,
}

/// Most packets a trace may hold (keeps a run's memory bounded).
pub const MAX_PACKETS: usize = 50_000_000;

/// Largest cluster simulated.
pub const MAX_NODES: usize = 64;

/// Parse the arguments after the program name. `Err` carries a message
/// for the user (the usage text for `--help`).
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Options, String> {
    let mut args = args.into_iter();
    let mut q = None;
    let mut r = None;
    let mut json = false;
    let mut scenario = Scenario {
        schemes: vec![DispatchScheme::PacketRoundRobin],
        nodes: vec![1, 2, 4, 8, 16, 32, 64],
        mix: SizeMix::Fixed(1500),
        // Replaced below: both costs are required.
        q: CostCurve::constant(0.0),
        r: CostCurve::constant(0.0),
        load: 1.2,
        packets: 200_000,
        queue_limit: 1024,
        seed: 1,
        shape: TrafficShape::default(),
    };
    while let Some(flag) = args.next() {
        if flag == "--json" {
            json = true;
            continue;
        }
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.to_owned());
        }
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n\n{USAGE}"))?;
        let bad = |what: &str| format!("{flag} {value}: {what}");
        match flag.as_str() {
            "--q-ns" => q = Some(value.parse().map_err(|e| bad(&format!("{e}")))?),
            "--r-ns" => r = Some(value.parse().map_err(|e| bad(&format!("{e}")))?),
            "--nodes" => scenario.nodes = node_list(&value).map_err(|e| bad(&e))?,
            "--scheme" => scenario.schemes = schemes(&value).map_err(|e| bad(&e))?,
            "--size" => scenario.mix = value.parse().map_err(|e: String| bad(&e))?,
            "--load" => scenario.load = positive(&value).map_err(|e| bad(&e))?,
            "--packets" => scenario.packets = bounded(&value, MAX_PACKETS).map_err(|e| bad(&e))?,
            "--queue" => scenario.queue_limit = bounded(&value, 1 << 20).map_err(|e| bad(&e))?,
            "--seed" => scenario.seed = value.parse().map_err(|_| bad("not a number"))?,
            "--sas" => scenario.shape.sas = count(&value).map_err(|e| bad(&e))?,
            "--peers" => scenario.shape.peers = count(&value).map_err(|e| bad(&e))?,
            "--flows" => scenario.shape.flows = count(&value).map_err(|e| bad(&e))?,
            "--direction" => scenario.shape.direction = direction(&value).map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown option {flag}\n\n{USAGE}")),
        }
    }
    scenario.q = q.ok_or_else(|| format!("--q-ns is required (a measured cost)\n\n{USAGE}"))?;
    scenario.r = r.ok_or_else(|| format!("--r-ns is required (a measured cost)\n\n{USAGE}"))?;
    if scenario.mix.mean(|s| scenario.r.at(s)) <= 0.0 {
        return Err("--r-ns: an owned packet must cost some time".to_owned());
    }
    Ok(Options { scenario, json })
}

/// `1,2,4,8`: each in 1..=64.
fn node_list(text: &str) -> Result<Vec<usize>, String> {
    text.split(',')
        .map(|item| match item.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_NODES).contains(&n) => Ok(n),
            _ => Err(format!("`{item}` is not a cluster size in 1..={MAX_NODES}")),
        })
        .collect()
}

/// A scheme name or `all`.
fn schemes(text: &str) -> Result<Vec<DispatchScheme>, String> {
    if text == "all" {
        return Ok(DispatchScheme::ALL.to_vec());
    }
    text.parse()
        .map(|scheme| vec![scheme])
        .map_err(|e| format!("{e}"))
}

/// A finite number above zero.
fn positive(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err("expected a number above 0".to_owned()),
    }
}

/// An integer in 1..=max.
fn bounded(text: &str, max: usize) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected an integer in 1..={max}")),
    }
}

/// An integer in 1..=1,000,000 (SAs, peers, flows).
fn count(text: &str) -> Result<u32, String> {
    bounded(text, 1_000_000).map(|n| n as u32)
}

/// `outbound` or `inbound`.
fn direction(text: &str) -> Result<Direction, String> {
    match text {
        "outbound" => Ok(Direction::Outbound),
        "inbound" => Ok(Direction::Inbound),
        _ => Err("expected outbound or inbound".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Result<Options, String> {
        parse(line.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn defaults_and_required_costs() {
        let Ok(options) = args("--q-ns 1500:120 --r-ns 1500:1400") else {
            panic!("refused the minimal command line");
        };
        let s = options.scenario;
        assert_eq!(s.nodes, [1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(s.schemes, [DispatchScheme::PacketRoundRobin]);
        assert_eq!(s.mix, SizeMix::Fixed(1500));
        assert!(!options.json);
        assert!(args("--r-ns 1500:1400").is_err_and(|e| e.contains("--q-ns is required")));
        assert!(args("--q-ns 1500:120").is_err_and(|e| e.contains("--r-ns is required")));
    }

    #[test]
    fn every_option_parses() {
        let line = "--q-ns 1500:120,64:90 --r-ns 1500:1400,64:300 --nodes 1,3,64 \
                    --scheme all --size imix --load 2 --packets 10 --queue 8 --seed 7 \
                    --sas 3 --peers 2 --flows 5 --direction inbound --json";
        let Ok(options) = args(line) else {
            panic!("refused a full command line")
        };
        let s = options.scenario;
        assert_eq!(s.nodes, [1, 3, 64]);
        assert_eq!(s.schemes.len(), 6);
        assert_eq!(s.mix, SizeMix::Imix);
        assert_eq!((s.load, s.packets, s.queue_limit, s.seed), (2.0, 10, 8, 7));
        assert_eq!((s.shape.sas, s.shape.peers, s.shape.flows), (3, 2, 5));
        assert_eq!(s.shape.direction, Direction::Inbound);
        assert!(options.json);
    }

    #[test]
    fn refuses_bad_values() {
        let base = "--q-ns 1500:120 --r-ns 1500:1400";
        for extra in [
            "--nodes 0",
            "--nodes 65",
            "--nodes 1,x",
            "--scheme fastest",
            "--size 9",
            "--load 0",
            "--load -1",
            "--packets 0",
            "--packets 50000001",
            "--direction sideways",
            "--bogus 1",
            "--seed",
        ] {
            assert!(args(&format!("{base} {extra}")).is_err(), "{extra}");
        }
        assert!(args("--q-ns 1500:120 --r-ns 1500:0").is_err());
        assert!(args("--help").is_err_and(|e| e.starts_with("usage")));
    }
}
