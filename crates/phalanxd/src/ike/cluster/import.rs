//! A delivered IKE SA state, applied under the ownership rule of
//! [`super::order`]: kept (this node runs the IKE SA and its own state
//! comes back or is on the way), demoted to (another node's state came
//! last), held in standby, or ignored (its owner is out of the view).

use std::time::Instant;

use phalanx_cluster::NodeId;
use phalanx_ike::ha::{HaError, IkeSaState};
use phalanx_ike::Transmit;
use phalanx_wire::ike::{IkeHeader, IkeHeaderRepr};

use super::order::{relay_verdict, verdict, Delivery, Verdict};
use super::ownership::Spis;
use super::{Batch, ClusterIke, Io, Registration};

impl ClusterIke {
    /// A state the log delivered, sent by `from`, naming `owner`.
    pub(super) fn import(
        &mut self,
        now: Instant,
        io: &mut Io<'_>,
        from: NodeId,
        owner: NodeId,
        octets: &[u8],
    ) {
        let state = match IkeSaState::decode(octets) {
            Ok(state) => state,
            Err(e) => {
                self.counters.decode_errors += 1;
                tracing::warn!(owner = owner.0, error = %e, "cluster IKE: undecodable IKE SA state");
                return;
            }
        };
        let spis = state.spis();
        let runs_here = io.endpoint.runs_ike_sa(spis.0, spis.1);
        let owner_in_view = if owner == self.local {
            self.in_view
        } else {
            self.view.contains(owner)
        };
        let claim = from == owner;
        let verdict = if claim {
            verdict(Delivery {
                local: self.local,
                owner,
                runs_here,
                own_in_flight: self.in_flight.contains(spis),
                owner_in_view,
            })
        } else {
            relay_verdict(self.owners.owner(spis), owner, runs_here, owner_in_view)
        };
        match verdict {
            Verdict::Keep => self.keep(owner, &state),
            Verdict::Demote => self.demote_one(now, io, owner, state),
            Verdict::Import => self.hold_standby(now, io, claim, owner, state),
            // A relayed copy of an owner superseded since: older news.
            Verdict::Ignore if !claim => self.counters.stale += 1,
            Verdict::Ignore => {
                self.counters.stale_owner_states += 1;
                tracing::info!(
                    owner = owner.0,
                    spi_i = %hex::encode(spis.0),
                    "cluster IKE: a state of a node out of the dispatch view changes no owner"
                );
            }
        }
    }

    /// This node runs the IKE SA and goes on: its own state came back, or
    /// one of its own comes after another node's (which is counted).
    fn keep(&mut self, owner: NodeId, state: &IkeSaState) {
        let spis = state.spis();
        self.owners.record(spis, owner, state.remote.ip());
        if owner != self.local {
            self.counters.owner_conflicts += 1;
            tracing::warn!(
                other = owner.0,
                spi_i = %hex::encode(spis.0),
                "cluster IKE: another node also runs an IKE SA this node runs (takeovers on views \
                 that differed); this node's later state settles it"
            );
        }
    }

    /// Held in standby. A new owner's first state replaces the copy held
    /// whatever its generation (it numbers on from the copy it took over).
    fn hold_standby(
        &mut self,
        now: Instant,
        io: &mut Io<'_>,
        claim: bool,
        owner: NodeId,
        state: IkeSaState,
    ) {
        let (spis, peer) = (state.spis(), state.remote.ip());
        let new_owner = claim && self.owners.owner(spis) != Some(owner);
        self.owners.record(spis, owner, peer);
        let result = if new_owner {
            io.endpoint.import_ike_sa_of_new_owner(now, state)
        } else {
            io.endpoint.import_ike_sa(now, state, false)
        };
        match result {
            Ok(()) => self.counters.imported += 1,
            Err(HaError::Stale { .. }) => self.counters.stale += 1,
            Err(e) => {
                self.counters.import_refused += 1;
                tracing::warn!(owner = owner.0, error = %e, "cluster IKE: IKE SA state not imported");
            }
        }
    }

    /// Another node's state came last for an IKE SA this node runs, and
    /// none of this node's own is on the way: this node stops running it
    /// (nothing more is sent for it, held datagrams included) and holds
    /// that state in standby.
    fn demote_one(&mut self, now: Instant, io: &mut Io<'_>, owner: NodeId, state: IkeSaState) {
        let (spis, peer) = (state.spis(), state.remote.ip());
        self.owners.record(spis, owner, peer);
        if let Err(e) = io.endpoint.demote_ike_sa(now, state) {
            self.counters.import_refused += 1;
            tracing::error!(
                other = owner.0,
                spi_i = %hex::encode(spis.0),
                error = %e,
                "cluster IKE: another node owns an IKE SA this node runs, but it could not stand down"
            );
            return;
        }
        self.counters.owner_demotions += 1;
        let dropped = self.drop_held_datagrams(spis);
        // Its installs and removals go behind the batches held: one of
        // those may install a Child SA this demotion removes.
        let batch = Batch {
            events: std::iter::from_fn(|| io.endpoint.poll_event()).collect(),
            transmits: Vec::new(),
            register: Registration::Removals,
        };
        if let Err(batch) = self.hold.push(None, batch) {
            self.counters.hold_overflow += 1;
            self.carry_out(now, io, batch);
        }
        tracing::warn!(
            owner = owner.0,
            spi_i = %hex::encode(spis.0),
            spi_r = %hex::encode(spis.1),
            datagrams_dropped = dropped,
            "cluster IKE: the log names another owner for an IKE SA this node ran; it is a standby copy here now"
        );
    }

    /// Takes the datagrams of IKE SA `spis` out of every held batch.
    fn drop_held_datagrams(&mut self, spis: Spis) -> u64 {
        let mut dropped = 0;
        for batch in self.hold.batches_mut() {
            let before = batch.transmits.len();
            batch.transmits.retain(|t| transmit_spis(t) != Some(spis));
            dropped += (before - batch.transmits.len()) as u64;
        }
        self.counters.datagrams_dropped += dropped;
        dropped
    }
}

/// The IKE SA a datagram belongs to (RFC 7296 §3.1: both SPIs lead the
/// header); `None` for a NAT-keepalive or anything unreadable.
pub(super) fn transmit_spis(transmit: &Transmit) -> Option<Spis> {
    if transmit.nat_keepalive {
        return None;
    }
    let header = IkeHeader::new_checked(&transmit.bytes[..]).ok()?;
    let hdr = IkeHeaderRepr::parse(&header).ok()?;
    Some((
        hdr.initiator_spi.to_be_bytes(),
        hdr.responder_spi.to_be_bytes(),
    ))
}

#[cfg(test)]
#[path = "import_tests.rs"]
mod tests;
