//! The closed-form throughput model the simulation is set beside (the
//! derivation is in the crate documentation).

use crate::cost::CostCurve;
use crate::traffic::SizeMix;

/// Servers per node in the model and the simulation (`P`): one core.
pub const SERVERS_PER_NODE: f64 = 1.0;

/// µ(n, s) = n·P·s / (R'(s) + n·Q(s)) with R' = R − Q, averaged over a
/// size mix (s, Q and R are the mix means).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClosedForm {
    /// Mean packet size, bytes.
    pub size: f64,
    /// Mean time a node spends on a packet it does not own, ns.
    pub q_ns: f64,
    /// Mean time a node spends on a packet it owns, ns.
    pub r_ns: f64,
}

impl ClosedForm {
    /// The model for `mix` with costs `q` (not owned) and `r` (owned).
    pub fn new(mix: SizeMix, q: &CostCurve, r: &CostCurve) -> ClosedForm {
        ClosedForm {
            size: mix.mean(f64::from),
            q_ns: mix.mean(|s| q.at(s)),
            r_ns: mix.mean(|s| r.at(s)),
        }
    }

    /// Packets per second `n` nodes accept when every server is busy.
    pub fn packet_rate(&self, n: usize) -> f64 {
        let n = n as f64;
        let extra_for_owning = self.r_ns - self.q_ns; // R'
        n * SERVERS_PER_NODE * 1e9 / (extra_for_owning + n * self.q_ns)
    }

    /// µ(n, s): bytes per second `n` nodes deliver at saturation.
    pub fn throughput(&self, n: usize) -> f64 {
        self.packet_rate(n) * self.size
    }

    /// µ(n) / (n · µ(1)) = R / (R + (n − 1)·Q).
    pub fn efficiency(&self, n: usize) -> f64 {
        self.throughput(n) / (n as f64 * self.throughput(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(q: &str, r: &str) -> ClosedForm {
        let (Ok(q), Ok(r)) = (q.parse::<CostCurve>(), r.parse::<CostCurve>()) else {
            panic!("curves");
        };
        ClosedForm::new(SizeMix::Fixed(1500), &q, &r)
    }

    #[test]
    fn one_node_is_one_over_r() {
        let m = model("1500:120", "1500:1400");
        assert!((m.packet_rate(1) - 1e9 / 1400.0).abs() < 1e-6);
        assert!((m.throughput(1) - 1500.0 * 1e9 / 1400.0).abs() < 1e-3);
        assert!((m.efficiency(1) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn efficiency_is_r_over_r_plus_n_minus_one_q() {
        let m = model("1500:120", "1500:1400");
        for n in [2usize, 8, 64] {
            let expected = 1400.0 / (1400.0 + (n as f64 - 1.0) * 120.0);
            assert!((m.efficiency(n) - expected).abs() < 1e-12, "n={n}");
        }
        // Free non-owned packets scale linearly.
        assert!((model("1500:0", "1500:1400").efficiency(64) - 1.0).abs() < 1e-12);
    }
}
