//! Cluster high availability for IKE: one node runs each IKE SA, every
//! other node holds its replicated state, and when the node that runs it
//! fails a survivor carries it on with the peer — same SPIs, keys and
//! Message IDs, no renegotiation and no RFC 6311 exchange (DESIGN.md,
//! "Cluster mode"; the model of strongSwan's HA plugin).
//!
//! # What is replicated
//!
//! [`IkeSaState`]: everything an established IKE SA needs to go on
//! elsewhere — SPIs, suite, the seven keys, the AEAD IV counter, both
//! Message ID sequences and windows (RFC 7296 §2.2, §2.3), the cached
//! responses as sent (§2.1), the unanswered requests as sent, queued work,
//! the Child SAs with their keys, selectors and remaining lifetimes. It
//! travels as octets ([`IkeSaState::encode`], a versioned explicit codec).
//!
//! Responses are carried whole rather than as a hash: a retransmitted
//! request must get the same octets back (§2.1), and an AEAD-sealed
//! response cannot be rebuilt without re-running the request, which §2.1
//! forbids; they are a few hundred octets and one per window slot.
//!
//! # When it is emitted
//!
//! With [`Endpoint::set_ha_replication`] on, after every call that changes
//! what an established IKE SA replicates, [`SaEvent::IkeStateChanged`](crate::SaEvent::IkeStateChanged)
//! carries its new snapshot, queued after the call's other events and
//! before (in drain order) the datagrams of the call. That covers:
//!
//! - IKE_AUTH completing, either role (after `IkeSaUp`);
//! - every request sent on it — INFORMATIONAL liveness checks and Deletes
//!   of Child SAs, CREATE_CHILD_SA for new and rekeyed Child SAs and for
//!   the IKE SA — with the request already counted as in flight;
//! - every request answered — the next expected Message ID and the
//!   cached response;
//! - every response received (the exchange's result: Child SAs added,
//!   rekeyed or removed);
//! - a Child SA retired after a rekey overlap, the peer's address moving
//!   (§2.23), work queued while the window is full;
//! - an IKE SA rekey (§1.3.2): the new IKE SA's snapshot first, then
//!   [`SaEvent::IkeStateRemoved`](crate::SaEvent::IkeStateRemoved) for the old one.
//!
//! `IkeStateRemoved` goes out once when the IKE SA stops being
//! established: deleted by either side, given up (dead peer), rekeyed
//! away, terminated, or while our own Delete of it is in flight.
//! Retransmissions and answers from the response cache change nothing.
//!
//! # What the cluster must do
//!
//! 1. Deliver every `IkeStateChanged` / `IkeStateRemoved` to all members in
//!    one agreed order (Corosync CPG) and send the datagrams of the same
//!    call only once it is delivered: the snapshot is written ahead of the
//!    wire, so a successor never knows less than the peer has seen.
//! 2. On every member: [`Endpoint::import_ike_sa`] with `takeover = false`
//!    for `IkeStateChanged` (the owner's own delivery answers
//!    [`HaError::ActiveHere`]: ignore it; a [`HaError::Stale`] one is
//!    older than what is held: ignore it) and
//!    [`Endpoint::forget_ike_sa`] for `IkeStateRemoved`. A standby never
//!    transmits for an IKE SA it holds; the import's `InstallInbound`,
//!    `InstallOutbound`, `RemoveOutbound` and `RemoveInbound` events keep
//!    its data plane holding the same Child SAs as the owner's, so no
//!    separate replication of Child SA keys is needed.
//! 3. When the owner fails, the member that inherits the IKE SA calls
//!    [`Endpoint::take_over_ike_sa`] (or `import_ike_sa` with `takeover =
//!    true` and a snapshot it kept); from then on it runs the IKE SA, and
//!    its own `IkeStateChanged` events replicate it.
//! 4. A joining member gets [`Endpoint::export_ike_sas`] of every owner
//!    (or each owner turns replication off and on, which emits every
//!    established IKE SA again) before it owns anything.
//! 5. If two members took one IKE SA over (their views of who failed
//!    differed for a moment), the agreed order settles it: the owner is
//!    the node whose state was delivered last. A member running the IKE
//!    SA that is delivered another owner's state (and has none of its own
//!    still on the way) calls [`Endpoint::demote_ike_sa`]: it stops
//!    running it without a word to the peer and holds that state in
//!    standby. A standby delivered the first state of a new owner imports
//!    it with [`Endpoint::import_ike_sa_of_new_owner`]: generations count
//!    one owner's snapshots, and a new owner numbers on from the copy it
//!    took over, which may be below what the previous owner emitted since.
//!
//! # Takeover
//!
//! The successor keeps both Message ID sequences exactly: a responder
//! drops a request whose Message ID is not the next it expects (§2.3), so
//! no jump ahead would be answered. Instead it sends the failed node's
//! unanswered requests again as they were; the peer answers one it saw
//! from its cache and processes one it never saw (§2.1). Liveness checks
//! and Deletes then complete as usual; a CREATE_CHILD_SA is undone and
//! redone (see `lost.rs`: its nonce and key exchange secret stayed on the
//! failed node). A retransmitted request the failed node had answered is
//! answered with the same octets from the replicated cache. The AEAD IV
//! counter jumps by [`HA_IV_MARGIN`](crate::limits::HA_IV_MARGIN), so no
//! IV can repeat. Liveness checks (§1.4) and NAT-keepalives start over
//! from the takeover; rekey and expiry keep what was left of the
//! lifetimes.
//!
//! A snapshot older than the peer's view — taken before an exchange the
//! failed node completed and never replicated, which the write-ahead rule
//! of step 1 excludes — cannot be repaired without RFC 6311: the peer
//! drops or answers from its cache whatever the successor sends, the
//! successor gives the peer up after its retransmissions (§2.4,
//! `IkeSaDown`), and the connection comes up again as configured. Nothing
//! wrong is installed on the way: every message the successor sends is
//! under the replicated keys, and every answer it accepts verified.

mod codec;
mod demote;
mod export;
mod import;
mod install;
mod lost;
mod state;
mod tracker;

use core::fmt;
use std::time::Instant;

pub use codec::{DecodeError, STATE_VERSION};
pub use state::{
    CachedResponse, ChildSaKeys, ChildSaState, ChildSaStatus, IkeKeys, IkeSaState, InFlightRequest,
    MessageIds, NatState, QueuedWork, RequestPurpose, VirtualIpLease,
};
pub(crate) use tracker::HaTracker;

use crate::counters::Counter;
use crate::Endpoint;
use import::Freshness;
use tracker::Change;

/// Why a snapshot was not imported or taken over.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HaError {
    /// No connection of that name is configured here.
    UnknownConnection(String),
    /// The connection has no child config of that name here.
    UnknownChild(String),
    /// The keys or the suite cannot run here (why).
    Unusable(&'static str),
    /// Not newer than the snapshot held: its generation is not above the
    /// one held (a standby import) or below it (a takeover).
    Stale {
        /// The generation held.
        held: u64,
        /// The generation offered.
        offered: u64,
    },
    /// This node runs the IKE SA itself (its own snapshot came back).
    ActiveHere,
    /// An IKE or Child SA SPI of the snapshot is used by another SA here.
    SpiInUse,
    /// No snapshot of that IKE SA was imported here.
    NotImported,
    /// No established IKE SA with those SPIs runs here.
    NotRunning,
}

impl fmt::Display for HaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HaError::UnknownConnection(name) => write!(f, "unknown connection {name:?}"),
            HaError::UnknownChild(name) => write!(f, "unknown child {name:?}"),
            HaError::Unusable(why) => write!(f, "IKE SA state unusable: {why}"),
            HaError::Stale { held, offered } => {
                write!(f, "IKE SA state {offered} is stale (holding {held})")
            }
            HaError::ActiveHere => f.write_str("the IKE SA runs on this node"),
            HaError::SpiInUse => f.write_str("an SPI of the IKE SA is in use here"),
            HaError::NotImported => f.write_str("no state of that IKE SA is held here"),
            HaError::NotRunning => f.write_str("that IKE SA does not run on this node"),
        }
    }
}

impl std::error::Error for HaError {}

impl Endpoint {
    /// Turns the emission of [`SaEvent::IkeStateChanged`](crate::SaEvent::IkeStateChanged) and
    /// [`SaEvent::IkeStateRemoved`](crate::SaEvent::IkeStateRemoved) on or off (off by default: a single
    /// node needs none). Turning it on emits the snapshot of every
    /// established IKE SA at once, in SPI order (and `IkeStateRemoved` for
    /// those that went while it was off).
    pub fn set_ha_replication(&mut self, now: Instant, enabled: bool) {
        self.ha.enabled = enabled;
        if !enabled {
            return;
        }
        // Generations go on from where they were, so that standbys that
        // hold older snapshots take the new ones.
        for owned in self.ha.owned.values_mut() {
            owned.mark = None;
        }
        let mut spis: Vec<u64> = self
            .sas
            .keys()
            .chain(self.ha.owned.keys())
            .copied()
            .collect();
        spis.sort_unstable();
        spis.dedup();
        for spi in spis {
            self.replicate(now, spi);
        }
    }

    /// The snapshot of the established IKE SA with these SPIs, as of
    /// `now`; `None` if there is none here.
    pub fn export_ike_sa(
        &self,
        now: Instant,
        spi_i: [u8; 8],
        spi_r: [u8; 8],
    ) -> Option<IkeSaState> {
        let spi = self.live_sa_of((spi_i, spi_r))?;
        self.export(now, spi)
    }

    /// The snapshots of every established IKE SA here, in SPI order (the
    /// state transfer to a joining node).
    pub fn export_ike_sas(&self, now: Instant) -> Vec<IkeSaState> {
        let mut spis: Vec<u64> = self.sas.keys().copied().collect();
        spis.sort_unstable();
        spis.into_iter()
            .filter_map(|spi| self.export(now, spi))
            .collect()
    }

    fn export(&self, now: Instant, spi: u64) -> Option<IkeSaState> {
        let generation = self.ha.owned.get(&spi).map_or(0, |o| o.generation);
        self.sas.get(&spi)?.ha_state(now, generation)
    }

    /// Imports another node's snapshot. `takeover = false`: held in standby
    /// (nothing is sent for it, no timer runs), replacing an older one;
    /// the data plane gets the installs and removals that bring its Child
    /// SAs in line. `takeover = true`: this node runs the IKE SA from `now`
    /// (see the module doc); its Child SAs are installed here if no
    /// standby copy had them.
    pub fn import_ike_sa(
        &mut self,
        now: Instant,
        state: IkeSaState,
        takeover: bool,
    ) -> Result<(), HaError> {
        let result = if takeover {
            self.import_live(now, state)
        } else {
            self.import_standby(now, state, Freshness::Newer)
        };
        self.count_import(result)
    }

    /// Imports the snapshot of an IKE SA whose owner changed in standby
    /// (step 5 of the module doc), as `import_ike_sa(now, state, false)`
    /// does but whatever the generation of the copy held: the new owner's
    /// snapshots are numbered on from the copy it took over.
    pub fn import_ike_sa_of_new_owner(
        &mut self,
        now: Instant,
        state: IkeSaState,
    ) -> Result<(), HaError> {
        let result = self.import_standby(now, state, Freshness::Any);
        self.count_import(result)
    }

    /// Stops running the IKE SA with `state.spis()` here and holds `state`
    /// as its standby copy, as `import_ike_sa(now, state, false)` would:
    /// the cluster's agreed order says another node runs it (step 5 of the
    /// module doc). Nothing is sent for it any more — no Delete (the IKE
    /// SA lives on at the other node), no retransmission, no liveness
    /// check; its queued work is dropped, and no
    /// [`SaEvent::IkeStateRemoved`](crate::SaEvent::IkeStateRemoved) is emitted. The Child SAs that
    /// `state` holds stay installed; those the running IKE SA had and
    /// `state` lacks are removed, those only `state` has are installed.
    /// Later snapshots of the new owner are taken (generations go on from
    /// `state`'s), and [`Endpoint::take_over_ike_sa`] works on the copy.
    ///
    /// Datagrams of the IKE SA already queued and not yet polled are not
    /// taken back: poll them before (the cluster holds each call's
    /// datagrams until its state is delivered, and drops those of an IKE
    /// SA it demotes).
    ///
    /// [`HaError::NotRunning`] when no established IKE SA of those SPIs
    /// runs here; nothing changes on any error.
    pub fn demote_ike_sa(&mut self, now: Instant, state: IkeSaState) -> Result<(), HaError> {
        let result = self.demote_live(now, state);
        self.count_import(result)
    }

    /// Whether an IKE SA with these SPIs runs here (established, or its
    /// Delete in flight): a snapshot of it would be refused as
    /// [`HaError::ActiveHere`].
    pub fn runs_ike_sa(&self, spi_i: [u8; 8], spi_r: [u8; 8]) -> bool {
        self.live_sa_of((spi_i, spi_r)).is_some()
    }

    fn count_import(&mut self, result: Result<(), HaError>) -> Result<(), HaError> {
        self.counters.bump(match result {
            Ok(()) => Counter::HaStatesImported,
            Err(_) => Counter::HaImportsRefused,
        });
        result
    }

    /// Takes over the IKE SA held in standby with these SPIs: its snapshot,
    /// aged by the time since it arrived, runs here from `now`.
    pub fn take_over_ike_sa(
        &mut self,
        now: Instant,
        spi_i: [u8; 8],
        spi_r: [u8; 8],
    ) -> Result<(), HaError> {
        let held = self
            .ha
            .passive
            .get(&(spi_i, spi_r))
            .ok_or(HaError::NotImported)?;
        let elapsed = now.saturating_duration_since(held.imported_at);
        let state = held.state.clone().aged(elapsed);
        self.import_ike_sa(now, state, true)
    }

    /// Forgets the standby copy of an IKE SA (its owner emitted
    /// [`SaEvent::IkeStateRemoved`](crate::SaEvent::IkeStateRemoved)); its Child SAs leave the data plane
    /// unless another copy or a running IKE SA holds them. False if none
    /// was held.
    pub fn forget_ike_sa(&mut self, spi_i: [u8; 8], spi_r: [u8; 8]) -> bool {
        let Some(held) = self.ha.passive.remove(&(spi_i, spi_r)) else {
            return false;
        };
        self.reconcile(Some(&held.state), None, Change::Standby);
        self.unreserve(&held.state);
        true
    }

    /// The standby copies held here, in SPI order (to choose what to take
    /// over: each names its peer's address).
    pub fn imported_ike_sas(&self) -> Vec<&IkeSaState> {
        let mut out: Vec<&IkeSaState> = self.ha.passive.values().map(|p| &p.state).collect();
        out.sort_by_key(|s| s.spis());
        out
    }
}
