//! Inbound dispatch with takeover: the owner of an inbound packet in the
//! base view (suspects included, so every node computes the same owner
//! and the stateful schemes the same tables, whoever it suspects), and
//! for a packet whose owner is a silent suspect, its owner among the
//! others. See `SharedState::inbound_view`.

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
}

impl InboundDispatcher {
    /// Dispatch over `view`, taking over the share of `silent`.
    pub fn new(scheme: DispatchScheme, view: View, silent: &[NodeId]) -> InboundDispatcher {
        InboundDispatcher {
            takeover: Dispatcher::new(scheme, view.without(silent)),
            primary: Dispatcher::new(scheme, view),
            silent: silent.to_vec(),
        }
    }

    /// A new view or set of silent suspects (the primary tables survive
    /// a change of `silent` alone).
    pub fn set(&mut self, view: &View, silent: &[NodeId]) {
        if self.primary.view() != view {
            self.primary.set_view(view.clone());
        }
        self.takeover.set_view(view.without(silent));
        self.silent = silent.to_vec();
    }

    /// The base view.
    pub fn view(&self) -> &View {
        self.primary.view()
    }

    /// The suspects whose share is taken over.
    pub fn silent(&self) -> &[NodeId] {
        &self.silent
    }

    /// Whether `view` and `silent` are what this dispatches over.
    pub fn is_over(&self, view: &View, silent: &[NodeId]) -> bool {
        self.primary.view() == view && self.silent == silent
    }

    /// Who processes inbound packet `key`.
    #[inline]
    pub fn owner(&mut self, key: &PacketKey) -> Option<NodeId> {
        let owner = self.primary.owner(key);
        match owner {
            Some(o) if self.silent.contains(&o) => self.takeover.owner(key),
            _ => owner,
        }
    }

    /// Inbound SA `spi`'s dispatch state starts over.
    pub fn forget_stream(&mut self, spi: u32) {
        self.primary.forget_stream(Direction::Inbound, spi);
        self.takeover.forget_stream(Direction::Inbound, spi);
    }
}
