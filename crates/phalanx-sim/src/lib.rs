//! `phalanx-sim`: a discrete-event model of a Phalanx cluster that drives
//! the real dispatch code (`phalanx_cluster::Dispatcher`) on virtual time,
//! and sets each result beside the closed-form model of the clustered-
//! gateway literature.
//!
//! # What is simulated
//! `n` nodes (1..=64). Every node receives every packet (the shared L2
//! segment), runs the dispatcher and either drops the packet quickly, a
//! cost `Q(s)` for a packet of `s` bytes it does not own, or processes it,
//! a cost `R(s)` for one it owns. Each node is one server (`P = 1`, one
//! core) behind a bounded FIFO queue; an arrival that finds the queue full
//! is dropped there (counted `lost` at the owner, `missed` elsewhere).
//! Arrivals are Poisson; sizes are fixed or IMIX; packets belong to inner
//! flows inside SAs to peers, which is what the session and hash schemes
//! look at. Virtual time is integer picoseconds; everything, the trace
//! included, follows from the seed, so a scenario always gives the same
//! report. `Q` and `R` are inputs, per size, measured on real nodes.
//!
//! # The closed form, derived
//! Let every node see every packet, own a fraction `1/n` of them (an even
//! spread: packet round robin), and spend `R(s)` on a packet it owns and
//! `Q(s)` on one it does not. Per arriving packet a node then works
//!
//! ```text
//!   w(n, s) = R(s)/n + (1 - 1/n)·Q(s) = (R(s) + (n - 1)·Q(s)) / n
//! ```
//!
//! At saturation each of the node's `P` servers is always busy, so the
//! cluster accepts `P / w` packets per second, and as each carries `s`
//! bytes:
//!
//! ```text
//!   µ(n, s) = n·P·s / (R(s) + (n - 1)·Q(s)) = n·P·s / (R'(s) + n·Q(s))
//! ```
//!
//! with `R'(s) = R(s) - Q(s)`, the extra time of owning a packet over
//! receiving and discarding it. The second form is the literature's
//! µ(n, s) = n·P·s / (R(s) + n·Q(s)), where `R` there is that extra time;
//! here `R` is what a node measures for a packet it processes, reception
//! included, hence `R'`. µ is in bytes per second when `R` and `Q` are in
//! seconds. The per-node efficiency is
//!
//! ```text
//!   E(n) = µ(n, s) / (n·µ(1, s)) = R(s) / (R(s) + (n - 1)·Q(s))
//! ```
//!
//! so it falls with `(n - 1)·Q/R`: 95 % at 8 nodes needs `Q ≤ R/133`. For
//! a size mix, `s`, `Q` and `R` are the mix means (the work per packet is
//! linear in them). The simulation reports, per scheme and cluster size,
//! the delivered throughput, each node's utilisation and `E(n)` measured
//! as throughput(n) / (n · throughput(1)), next to µ and the model's
//! `E(n)`. Offered load is given as a multiple of µ(n, s), so `--load
//! 1.2` saturates every cluster size by the same margin; the schemes that
//! do not spread evenly (hash segments of one peer, sessions of one SA)
//! fall short of µ, which is the point of comparing them.
#![forbid(unsafe_code)]

pub mod args;
pub mod cluster;
pub mod cost;
pub mod model;
pub mod scenario;
pub mod traffic;

pub use cluster::{simulate, RunResult, RunSetup};
pub use cost::CostCurve;
pub use model::ClosedForm;
pub use scenario::{run, Report, Scenario};
pub use traffic::{SizeMix, Trace, TrafficShape};
