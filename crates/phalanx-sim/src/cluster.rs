//! The discrete-event core: `n` nodes on virtual time, each a single
//! server with a bounded FIFO queue, all receiving every packet of a
//! trace and dispatching it with the real [`Dispatcher`].
//!
//! Nodes do not interact (no per-packet messages: that is the design), so
//! each node's queue is advanced at each arrival: departures up to the
//! arrival time leave, then the packet joins (or is dropped when the
//! queue is full). The dispatch decision is taken once per packet: every
//! node's dispatcher returns the same owner for the same view and packets
//! (`phalanx-cluster`'s `dispatch_props` tests), so one dispatcher stands
//! for all of them. Drops happen after the decision, in the node's work
//! queue, so counters stay in agreement; the checkpoint healing of the
//! real cluster is not modelled.

use std::collections::VecDeque;

use phalanx_cluster::{DispatchScheme, Dispatcher, NodeId, View};

use crate::cost::CostCurve;
use crate::traffic::Trace;

/// Picoseconds per nanosecond: virtual time is kept in integer ps.
const PS_PER_NS: f64 = 1_000.0;

/// The costs, queue bound and offered rate of one run.
#[derive(Clone, Debug)]
pub struct RunSetup<'a> {
    /// Time on a packet a node does not own, by size.
    pub q: &'a CostCurve,
    /// Time on a packet a node owns, by size.
    pub r: &'a CostCurve,
    /// Packets a node's queue holds, the one in service included.
    pub queue_limit: usize,
    /// Mean gap between arrivals, ns (the offered rate's inverse).
    pub mean_gap_ns: f64,
}

/// One node: a single server behind a bounded FIFO queue.
#[derive(Clone, Debug)]
struct Node {
    /// Departure times of the packets in the system, ascending.
    departures: VecDeque<u64>,
    /// Server busy time inside the measurement window, ps.
    busy_ps: u64,
}

impl Node {
    /// Offer a packet arriving `at` needing `service` ps; `None` when the
    /// queue is full, else its departure time. Busy time is counted up to
    /// `horizon`.
    fn offer(&mut self, at: u64, service: u64, limit: usize, horizon: u64) -> Option<u64> {
        while self.departures.front().is_some_and(|&done| done <= at) {
            self.departures.pop_front();
        }
        if self.departures.len() >= limit {
            return None;
        }
        let start = self
            .departures
            .back()
            .map_or(at, |&busy_until| busy_until.max(at));
        let end = start + service;
        self.busy_ps += end.min(horizon).saturating_sub(start.min(horizon));
        self.departures.push_back(end);
        Some(end)
    }
}

/// What one run of `n` nodes measured over the window from time 0 to the
/// last arrival.
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// The window, seconds.
    pub window_s: f64,
    /// Bytes offered in the window.
    pub offered_bytes: u64,
    /// Bytes whose owner finished them inside the window.
    pub delivered_bytes: u64,
    /// Packets whose owner finished them inside the window.
    pub delivered_packets: u64,
    /// Packets dropped by their owner's full queue: lost.
    pub lost: u64,
    /// Packets their owner accepted but finished after the window (so
    /// `delivered_packets + lost + unfinished` is every packet).
    pub unfinished: u64,
    /// Packets dropped by a non-owner's full queue (harmless here; a real
    /// node would heal its counter from the next checkpoint).
    pub missed: u64,
    /// Packets each node owned (by the dispatcher), in node order.
    pub owned: Vec<u64>,
    /// Busy fraction of each node's server over the window.
    pub utilisation: Vec<f64>,
}

impl RunResult {
    /// Delivered throughput, bytes per second.
    pub fn throughput(&self) -> f64 {
        if self.window_s > 0.0 {
            self.delivered_bytes as f64 / self.window_s
        } else {
            0.0
        }
    }

    /// Offered load, bytes per second.
    pub fn offered(&self) -> f64 {
        if self.window_s > 0.0 {
            self.offered_bytes as f64 / self.window_s
        } else {
            0.0
        }
    }
}

/// Run `trace` through `n` nodes (ids 1..=n) dispatching with `scheme`.
pub fn simulate(
    trace: &Trace,
    setup: &RunSetup<'_>,
    scheme: DispatchScheme,
    n: usize,
) -> RunResult {
    let view = View::new(1, (1..=n as u32).map(NodeId));
    let mut dispatcher = Dispatcher::new(scheme, view);
    let gap_ps = setup.mean_gap_ns * PS_PER_NS;
    let horizon = (trace.span() * gap_ps).round() as u64;
    let node = Node {
        departures: VecDeque::with_capacity(setup.queue_limit),
        busy_ps: 0,
    };
    let mut nodes = vec![node; n];
    let mut result = RunResult {
        nodes: n,
        window_s: horizon as f64 * 1e-12,
        offered_bytes: 0,
        delivered_bytes: 0,
        delivered_packets: 0,
        lost: 0,
        unfinished: 0,
        missed: 0,
        owned: vec![0; n],
        utilisation: Vec::new(),
    };
    for packet in &trace.packets {
        let at = (packet.arrival * gap_ps).round() as u64;
        let len = packet.key.len;
        result.offered_bytes += u64::from(len);
        // A non-empty view always has an owner; ids are 1..=n.
        let owner = dispatcher
            .owner(&packet.key)
            .map_or(0, |id| id.0 as usize - 1);
        result.owned[owner] += 1;
        let q = service_ps(setup.q, len);
        let r = service_ps(setup.r, len);
        for (i, node) in nodes.iter_mut().enumerate() {
            let owned = i == owner;
            let service = if owned { r } else { q };
            match node.offer(at, service, setup.queue_limit, horizon) {
                Some(done) if owned && done <= horizon => {
                    result.delivered_bytes += u64::from(len);
                    result.delivered_packets += 1;
                }
                Some(_) if owned => result.unfinished += 1,
                Some(_) => {}
                None if owned => result.lost += 1,
                None => result.missed += 1,
            }
        }
    }
    result.utilisation = nodes
        .iter()
        .map(|node| {
            if horizon == 0 {
                0.0
            } else {
                node.busy_ps as f64 / horizon as f64
            }
        })
        .collect();
    result
}

/// A cost curve's time for `len` bytes, in whole picoseconds.
fn service_ps(curve: &CostCurve, len: u32) -> u64 {
    (curve.at(len) * PS_PER_NS).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_queue_drops_and_fifo_serves_in_order() {
        let mut node = Node {
            departures: VecDeque::new(),
            busy_ps: 0,
        };
        assert_eq!(node.offer(0, 10, 2, 1_000), Some(10));
        assert_eq!(node.offer(1, 10, 2, 1_000), Some(20));
        assert_eq!(node.offer(2, 10, 2, 1_000), None); // two in the system
        assert_eq!(node.offer(10, 10, 2, 1_000), Some(30)); // first one left
        assert_eq!(node.offer(100, 5, 2, 1_000), Some(105)); // idle: starts now
        assert_eq!(node.busy_ps, 35);
        assert_eq!(node.offer(998, 10, 2, 1_000), Some(1_008));
        assert_eq!(node.busy_ps, 37, "busy time is clipped at the horizon");
    }
}
