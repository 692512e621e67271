//! The state a `ClusterNode` publishes for the data-plane threads: an
//! immutable snapshot behind an `Arc`, replaced as a whole whenever
//! something changed (the daemon keeps it in an `ArcSwap`). Per-SA parts
//! are `Arc`s of their own, so a new snapshot copies pointers, not leases.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use crate::codec::ReplayCheckpoint;
use crate::fence::Fence;
use crate::lease::SaLeases;
use crate::node::SaDescriptor;
use crate::view::{NodeId, View};

/// Another node's outbound checkpoint, numbered so that the data path
/// applies each once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CheckpointNote {
    pub(crate) serial: u64,
    pub(crate) lineage: u64,
    pub(crate) c: u64,
    pub(crate) fingerprint: u64,
}

/// One outbound SA: its leases and the recent checkpoints of the others.
#[derive(Clone, Debug)]
pub(crate) struct OutboundShared {
    pub(crate) descriptor: SaDescriptor,
    /// Changes when the SA is added again (a new SA lifetime, whose
    /// leases start over): the data path then starts a new sequencer.
    pub(crate) incarnation: u64,
    /// `None` until this node holds the replicated state.
    pub(crate) leases: Option<Arc<SaLeases>>,
    pub(crate) notes: VecDeque<CheckpointNote>,
}

/// One inbound SA: the latest replay checkpoint of another node.
#[derive(Clone, Debug)]
pub(crate) struct InboundShared {
    pub(crate) descriptor: SaDescriptor,
    /// Changes when the SA is added again: a new observer.
    pub(crate) incarnation: u64,
    pub(crate) replay: Option<(u64, Arc<ReplayCheckpoint>)>,
}

/// The node-wide part of a [`SharedState`]: views, generation,
/// suspects. A new snapshot is published when it changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Head {
    /// Who owns outbound packets (and answers ARP / ND, runs IKE): the
    /// base view without every member this node suspects.
    pub(crate) view: View,
    /// Who owns inbound ESP: the base view (every member the log has,
    /// suspected here or not); empty while not quorate. A packet whose
    /// owner there is in `silent` goes to its owner in this view without
    /// `silent` (see [`SharedState::inbound_view`]).
    pub(crate) inbound_view: View,
    /// The members of `inbound_view` this node suspects that have not
    /// been heard steadily since.
    pub(crate) silent: Vec<NodeId>,
    /// Per member of `silent`: its packets that arrived from here on
    /// are taken over (its last heartbeat heard plus `suspect_after`).
    pub(crate) silent_since: Vec<Instant>,
    pub(crate) generation: u64,
    pub(crate) suspects: Vec<NodeId>,
    pub(crate) ready: bool,
    pub(crate) transfers: u64,
    /// This node sends the observer checkpoints: the first of its view
    /// before quorum empties it (a node that stands down still observes,
    /// and a joiner catches up from it).
    pub(crate) replay_sender: bool,
}

/// An immutable snapshot of what the data path needs. See the module
/// docs.
#[derive(Clone, Debug)]
pub struct SharedState {
    pub(crate) local: NodeId,
    pub(crate) version: u64,
    pub(crate) head: Head,
    pub(crate) tick: u64,
    pub(crate) checkpoint_every: u64,
    /// This node's own fence (see `fence`); `None` in a state not
    /// published by a node.
    pub(crate) fence: Option<Arc<Fence>>,
    pub(crate) outbound: BTreeMap<u32, Arc<OutboundShared>>,
    pub(crate) inbound: BTreeMap<u32, Arc<InboundShared>>,
}

impl SharedState {
    /// The state of a node that knows nothing yet: empty view, no SA.
    pub fn empty(local: NodeId) -> SharedState {
        SharedState {
            local,
            version: 0,
            head: Head::default(),
            tick: 0,
            checkpoint_every: crate::limits::DEFAULT_CHECKPOINT_EVERY,
            fence: None,
            outbound: BTreeMap::new(),
            inbound: BTreeMap::new(),
        }
    }

    /// The node it was published by.
    pub fn local(&self) -> NodeId {
        self.local
    }

    /// Increases with every publication.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The dispatch view: the members that own traffic, as this node sees
    /// them (its first member answers ARP for the virtual addresses).
    pub fn view(&self) -> &View {
        &self.head.view
    }

    /// The view inbound ESP is dispatched over: the base view, suspects
    /// included, so that every node computes the same owner (and the
    /// stateful schemes the same tables) whoever it suspects. Only a
    /// packet whose owner is one of [`silent`](Self::silent) is taken
    /// over: it goes to its owner in this view without them.
    ///
    /// So a suspicion held by one node alone moves nothing but the
    /// suspect's share, and it ends here as soon as the suspect is heard
    /// steadily again, while the log's `Rejoin` may wait for Corosync to
    /// reform its ring after a real failure: the suspect, which does not
    /// know it is suspected, goes on processing its inbound share all the
    /// time, and a suspecter that kept the share would deliver each of
    /// those packets a second time. Outbound packets stay with the
    /// suspecter until the log agrees ([`view`](Self::view)): it sends
    /// them from the suspect's takeover block, ahead of the numbers the
    /// suspect still uses, which the peer then refuses as too old.
    pub fn inbound_view(&self) -> &View {
        &self.head.inbound_view
    }

    /// The suspects whose inbound share this node takes over: suspected
    /// here and not heard steadily since.
    pub fn silent(&self) -> &[NodeId] {
        &self.head.silent
    }

    /// This node's fence (see `fence`): the data path leaves its outside
    /// ring unread while it is [`uncertain`](Fence::uncertain).
    pub fn fence(&self) -> Option<&Arc<Fence>> {
        self.fence.as_ref()
    }

    /// Per [`silent`](Self::silent) suspect, the arrival time from which
    /// its inbound share is taken over.
    pub fn silent_since(&self) -> &[Instant] {
        &self.head.silent_since
    }

    /// The lease generation (changes with the base view).
    pub fn generation(&self) -> u64 {
        self.head.generation
    }

    /// The members this node suspects (their share is taken over).
    pub fn suspects(&self) -> &[NodeId] {
        &self.head.suspects
    }

    /// Whether this node owns traffic.
    pub fn is_ready(&self) -> bool {
        self.head.ready
    }

    /// The outbound SAs.
    pub fn outbound_sas(&self) -> impl Iterator<Item = &SaDescriptor> {
        self.outbound.values().map(|sa| &sa.descriptor)
    }

    /// The inbound SAs.
    pub fn inbound_sas(&self) -> impl Iterator<Item = &SaDescriptor> {
        self.inbound.values().map(|sa| &sa.descriptor)
    }

    /// The leases of outbound SA `spi`.
    pub fn leases(&self, spi: u32) -> Option<&SaLeases> {
        self.outbound.get(&spi)?.leases.as_deref()
    }
}
