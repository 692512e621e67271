//! The per-packet touches of SA state shared by ESP and AH, both
//! directions: lifetimes (RFC 4301 §4.4.2.1), statistics, and the mapping
//! of replay errors to drop reasons.

use std::time::Instant;

use phalanx_sa::lifetime::{LifetimeState, UsageCounter};
use phalanx_sa::{ReplayError, SaStats};

use crate::drop::DropReason;

/// Turns a lifetime state into a verdict: hard → drop, soft → one rekey
/// event (`spi` pushed to `events`), else nothing.
fn apply(state: LifetimeState, spi: u32, events: &mut Vec<u32>) -> Result<(), DropReason> {
    match state {
        LifetimeState::Ok => Ok(()),
        LifetimeState::SoftExpired => {
            events.push(spi);
            Ok(())
        }
        LifetimeState::HardExpired => Err(DropReason::SaHardExpired),
    }
}

/// True when the SA has a time limit: only then is the clock compared
/// (most data-plane SAs are rekeyed by bytes and the IKE daemon's timers).
fn has_time_limits(usage: &UsageCounter) -> bool {
    let limits = usage.limits();
    limits.soft_time.is_some() || limits.hard_time.is_some()
}

/// Outbound: the SA must not have reached a hard limit of time, and the
/// packet is counted against the byte and packet limits before it is sent
/// (the hard packet limit applies to this packet).
pub(crate) fn admit_outbound(
    usage: &UsageCounter,
    now: Instant,
    bytes: usize,
    spi: u32,
    events: &mut Vec<u32>,
) -> Result<(), DropReason> {
    if has_time_limits(usage) {
        apply(usage.check_time(now), spi, events)?;
    }
    apply(usage.record(bytes as u64), spi, events)
}

/// Inbound, before the ICV: only whether the SA is still usable at `now`.
/// A soft time limit crossed here stays recorded in `usage`
/// ([`UsageCounter::is_soft_expired`]); inbound rekeying is driven by the
/// outbound side and the control plane.
pub(crate) fn usable_inbound(usage: &UsageCounter, now: Instant) -> Result<(), DropReason> {
    let state = if has_time_limits(usage) {
        usage.check_time(now)
    } else if usage.is_hard_expired() {
        LifetimeState::HardExpired
    } else {
        LifetimeState::Ok
    };
    match state {
        LifetimeState::HardExpired => Err(DropReason::SaHardExpired),
        LifetimeState::Ok | LifetimeState::SoftExpired => Ok(()),
    }
}

/// Inbound, after authentication: counts the packet against the byte and
/// packet limits.
pub(crate) fn account_inbound(
    usage: &UsageCounter,
    bytes: usize,
    spi: u32,
    events: &mut Vec<u32>,
) -> Result<(), DropReason> {
    apply(usage.record(bytes as u64), spi, events)
}

/// Counts a packet in the SA's operator statistics.
pub(crate) fn count(stats: &SaStats, bytes: usize) {
    stats.record(bytes as u64);
}

/// The drop reason of a replay-window refusal (RFC 4303 §3.4.3).
pub(crate) fn replay_reason(error: ReplayError) -> DropReason {
    match error {
        ReplayError::Duplicate => DropReason::Replayed,
        ReplayError::TooOld => DropReason::TooOld,
        _ => DropReason::InvalidSequence,
    }
}
