//! The Phalanx cluster, sans-IO: N equal nodes behind one virtual address,
//! every node sees every packet and runs the same deterministic dispatch
//! function over the same view, so exactly one node processes each packet
//! without any per-packet message.
//!
//! Contract: nothing here reads the clock, touches a socket or spawns a
//! thread; time comes in as an `Instant`, messages in and out as bytes.
//! The Corosync CPG adapter and the heartbeat socket live in `phalanxd`,
//! an in-memory group transport in `phalanx-testkit`. Nothing a peer or
//! another node sends can panic this crate.
#![forbid(unsafe_code)]
// STYLE.md: `unwrap()` is fine in tests, where a panic is the failure report.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod codec;
pub mod datapath;
pub mod detector;
pub mod dispatch;
pub mod fence;
pub mod lease;
pub mod limits;
pub mod node;
pub mod observer;
pub mod segments;
pub mod sequencer;
pub mod transport;
pub mod view;

pub use codec::{
    decode, encode, DecodeError, Message, QuorumState, APP_CHANNEL_IKE, MAX_APP_PAYLOAD,
};
pub use datapath::{
    DataPathReport, DataPathStats, InboundDecision, NodeDataPath, OutboundDecision, SharedState,
};
pub use detector::FailureDetector;
pub use dispatch::{
    flow_hash, pins_outbound, spreads_outbound, Direction, DispatchScheme, Dispatcher,
    InboundDispatcher, PacketKey,
};
pub use fence::Fence;
pub use lease::{BlockKind, Grant, LeaseBlock, LeaseTable, SaLeases};
pub use node::{
    AppMessage, ClusterConfig, ClusterCounters, ClusterEvent, ClusterNode, ClusterStatus,
    FailoverOutcome, FailoverRecord, MemberStatus, QuorumPolicy, QuorumStatus, ReplicateError,
    SaDescriptor, SaStatus,
};
pub use observer::{InboundObserver, Observed};
pub use segments::{segment_of, segment_owner, SEGMENTS};
pub use sequencer::{OutboundSequencer, Spacing, TakeoverOutcome};
pub use transport::{GroupEvent, GroupTransport, TransportError};
pub use view::{NodeId, View};
