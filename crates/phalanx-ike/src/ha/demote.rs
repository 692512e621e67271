//! An IKE SA run here handed back to standby: the cluster's agreed order
//! says another node runs it (both took it over on views that differed
//! for a moment, and the other node's state came last). It stops here
//! without a word to the peer — the IKE SA lives on at the other node,
//! under the same SPIs and keys, so a Delete would end it there too
//! (RFC 7296 §1.4.1) — and the other node's snapshot becomes its standby
//! copy, exactly as a standby import would hold it.

use std::time::Instant;

use super::state::IkeSaState;
use super::tracker::{Change, Passive};
use super::HaError;
use crate::Endpoint;

impl Endpoint {
    /// Stops running the IKE SA of `state` here; `state` becomes its
    /// standby copy. Refused, with nothing changed, when no established
    /// IKE SA of those SPIs runs here or `state` cannot run here.
    pub(crate) fn demote_live(&mut self, now: Instant, state: IkeSaState) -> Result<(), HaError> {
        let key = state.spis();
        let spi = self.live_sa_of(key).ok_or(HaError::NotRunning)?;
        // What the running IKE SA has installed, as a snapshot; `None`
        // when it is no longer established (its own Delete in flight).
        let ran = self.export(now, spi).ok_or(HaError::NotRunning)?;
        self.usable(&state)?;
        // Its timers, retransmissions and queued work go with it; no
        // `IkeStateRemoved` either: the IKE SA is not gone, it moved.
        self.sas.remove(&spi);
        self.ha.owned.remove(&spi);
        self.reserve(&state);
        // The Child SAs both hold stay installed as they are (the new
        // owner uses the same ones); those only one of them has are
        // removed or installed.
        self.reconcile(Some(&ran), Some(&state), Change::Demotion);
        self.follow_peer(Some(&ran), &state);
        self.ha.passive.insert(
            key,
            Passive {
                state,
                imported_at: now,
            },
        );
        self.unreserve(&ran);
        Ok(())
    }
}
