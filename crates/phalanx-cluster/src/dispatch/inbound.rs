//! Inbound dispatch with takeover: the owner of an inbound packet in the
//! base view (suspects included, so every node computes the same owner
//! and the stateful schemes the same tables, whoever it suspects), and
//! for a packet whose owner is a silent suspect, its owner among the
//! others. See `SharedState::inbound_view`.
//!
//! A suspect's share is taken over by arrival time: only packets that
//! arrived after the moment it could first be suspected (its last
//! heartbeat heard plus `suspect_after`), even when this node processes
//! them later, out of its ring's backlog. The suspect, which fences its
//! own share from its last heartbeat sent plus `suspect_after` (see
//! `fence`), processes the ones before: never both.

use std::time::Instant;

use super::{Direction, DispatchScheme, Dispatcher, PacketKey};
use crate::view::{NodeId, View};

/// The two-level inbound dispatch. See the module docs.
#[derive(Clone, Debug)]
pub struct InboundDispatcher {
    /// Over the base view.
    primary: Dispatcher,
    /// Over the base view without `silent`: packets whose primary owner
    /// is silent.
    takeover: Dispatcher,
    silent: Vec<NodeId>,
    /// Per silent suspect: the arrivals taken over start here (`None`:
    /// all).
    since: Vec<Option<Instant>>,
}

impl InboundDispatcher {
    /// Dispatch over `view`, taking over the share of `silent`.
    pub fn new(scheme: DispatchScheme, view: View, silent: &[NodeId]) -> InboundDispatcher {
        InboundDispatcher {
            takeover: Dispatcher::new(scheme, view.without(silent)),
            primary: Dispatcher::new(scheme, view),
            silent: silent.to_vec(),
            since: vec![None; silent.len()],
        }
    }

    /// A new view or set of silent suspects, each taken over for the
    /// arrivals from its `since` on (the primary tables survive a change
    /// of `silent` alone).
    pub fn set(&mut self, view: &View, silent: &[NodeId], since: &[Instant]) {
        if self.primary.view() != view {
            self.primary.set_view(view.clone());
        }
        self.takeover.set_view(view.without(silent));
        self.silent = silent.to_vec();
        self.since = (0..silent.len()).map(|i| since.get(i).copied()).collect();
    }

    /// The scheme.
    pub fn scheme(&self) -> DispatchScheme {
        self.primary.scheme()
    }

    /// The base view.
    pub fn view(&self) -> &View {
        self.primary.view()
    }

    /// The suspects whose share is taken over.
    pub fn silent(&self) -> &[NodeId] {
        &self.silent
    }

    /// Whether `view`, `silent` and `since` are what this dispatches
    /// over.
    pub fn is_over(&self, view: &View, silent: &[NodeId], since: &[Instant]) -> bool {
        self.primary.view() == view
            && self.silent == silent
            && self.since.iter().zip(since).all(|(a, b)| *a == Some(*b))
    }

    /// Who processes inbound packet `key`, whenever it arrived.
    #[inline]
    pub fn owner(&mut self, key: &PacketKey) -> Option<NodeId> {
        let owner = self.primary.owner(key);
        match owner {
            Some(o) if self.silent.contains(&o) => self.takeover.owner(key),
            _ => owner,
        }
    }

    /// Who processes inbound packet `key`, which arrived at `arrival`:
    /// a silent suspect's packet is taken over only if it arrived after
    /// its `since` (see the module docs).
    #[inline]
    pub fn owner_at(&mut self, key: &PacketKey, arrival: Instant) -> Option<NodeId> {
        let owner = self.primary.owner(key);
        let taken = owner
            .and_then(|o| self.silent.iter().position(|&s| s == o))
            .is_some_and(|i| self.since[i].is_none_or(|since| arrival >= since));
        if taken {
            self.takeover.owner(key)
        } else {
            owner
        }
    }

    /// Inbound SA `spi`'s dispatch state starts over.
    pub fn forget_stream(&mut self, spi: u32) {
        self.primary.forget_stream(Direction::Inbound, spi);
        self.takeover.forget_stream(Direction::Inbound, spi);
    }
}
