//! Crypto engines that own threads.
//!
//! [`WorkerPool`] implements [`phalanx_crypto::Engine`] with a pool of named
//! worker threads: frames are numbered (a ticket) as they are submitted,
//! spread over the workers, and handed back strictly in ticket order by a
//! reorder buffer. Global submission order implies per-SA order, which is
//! what ESP needs: sequence numbers are assigned before the crypto, and a
//! packet the engine delays behind the peer's replay window is discarded
//! there as too old (RFC 4303 §3.4.3), so the gateway must not reorder.
//!
//! Contract: the only threads are the pool's own; they are joined when the
//! pool is dropped. Every frame runs through `Frame::execute_all`, exactly
//! as in the inline engine, so both produce identical bytes.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod pool;
mod reorder;

pub use pool::WorkerPool;
