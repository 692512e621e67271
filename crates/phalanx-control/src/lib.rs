//! The control-socket protocol spoken between `phalanxd` and `phalanxctl`.
//!
//! Contract: one JSON object per line over a Unix stream socket. A request
//! is `{"version":1,"id":N,"request":{"type":"sas"}}`; the answer carries the
//! same `id` and either `"result":{"type":"sas","data":[...]}` or
//! `"error":{"code":C,"message":"..."}`. A request whose `version` is not
//! [`PROTOCOL_VERSION`] is answered with [`ErrorCode::UNSUPPORTED_VERSION`].
//! Unknown fields are ignored on decode, so either side may add optional
//! fields without a version bump; removing or retyping a field needs one.
//! Optional fields added within version 1 (absent from older daemons, so
//! `None` on decode): `PolicyInfo::hits` filled in; `WorkerLoad::busy_1s`,
//! `busy_avg`, `busy_seconds` (and `busy_ratio` now means the last second,
//! not the last 100 ms). The `cluster` request was added within version 1
//! too: an older daemon answers it with [`ErrorCode::UNKNOWN_REQUEST`], a
//! daemon without `[cluster]` with [`ErrorCode::CLUSTER_DISABLED`].
//!
//! This crate knows nothing of Phalanx's data plane: it holds plain data
//! types (serde), the line codec used by both sides, a bounded line reader
//! and a small blocking [`Client`]. Nothing a peer sends can panic it: every
//! decode failure is a typed error.
#![forbid(unsafe_code)]

mod client;
mod cluster;
mod codec;
mod error;
mod ike;
mod types;

pub use client::Client;
pub use cluster::{
    ClusterMember, ClusterReport, ClusterSaReport, FailoverReport, LeaseBlockReport, QuorumReport,
    TakeoverBlockReport, VirtualSideReport,
};
pub use codec::{
    decode_request, decode_response, encode_error, encode_request, encode_response,
    read_line_bounded, LineRead, RequestEnvelope, RequestError, ResponseEnvelope,
    MAX_REQUEST_LINE_BYTES, MAX_RESPONSE_LINE_BYTES, PROTOCOL_VERSION,
};
pub use error::{ControlError, ErrorBody, ErrorCode};
pub use ike::{ActionResult, ChildSaReport, IkeSaReport, PoolReport};
pub use types::{
    CounterReport, Direction, DropCounter, NamedCounter, PolicyInfo, ReloadSummary, Request,
    Response, SaInfo, Status, WorkerLoad,
};

/// Where `phalanxd` listens and `phalanxctl` connects unless told otherwise.
pub const DEFAULT_SOCKET_PATH: &str = "/run/phalanx/phalanxd.sock";
