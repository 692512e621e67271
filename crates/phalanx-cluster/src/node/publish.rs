//! Keeps the per-SA parts of the shared state up to date as the log moves,
//! and publishes a new snapshot only when something changed.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use super::log::Replicated;
use super::SaDescriptor;
use crate::codec::{Checkpoint, ReplayCheckpoint};
use crate::datapath::shared::{CheckpointNote, Head, InboundShared, OutboundShared, SharedState};
use crate::dispatch::Direction;
use crate::fence::Fence;
use crate::limits::CHECKPOINT_NOTES;
use crate::view::NodeId;

/// Builds [`SharedState`] snapshots. See the module docs.
#[derive(Debug)]
pub(super) struct Publisher {
    current: Arc<SharedState>,
    dirty: bool,
    tick: u64,
    synced: bool,
    serial: u64,
    outbound: BTreeMap<u32, Arc<OutboundShared>>,
    inbound: BTreeMap<u32, Arc<InboundShared>>,
    /// SAs registered on this node: observed before the state arrives.
    local_sas: BTreeMap<(Direction, u32), SaDescriptor>,
}

impl Publisher {
    pub(super) fn new(local: NodeId, checkpoint_every: u64, fence: Arc<Fence>) -> Publisher {
        let mut state = SharedState::empty(local);
        state.checkpoint_every = checkpoint_every.max(1);
        state.fence = Some(fence);
        Publisher {
            current: Arc::new(state),
            dirty: false,
            tick: 0,
            synced: false,
            serial: 0,
            outbound: BTreeMap::new(),
            inbound: BTreeMap::new(),
            local_sas: BTreeMap::new(),
        }
    }

    pub(super) fn set_tick(&mut self, tick: u64) {
        self.tick = tick;
        self.dirty = true;
    }

    /// An SA registered here: observed at once while unsynced.
    pub(super) fn set_local_sa(&mut self, sa: SaDescriptor) {
        self.local_sas.insert((sa.direction, sa.spi), sa);
        if !self.synced {
            self.add_sa(None, sa);
        }
    }

    pub(super) fn remove_local_sa(&mut self, direction: Direction, spi: u32) {
        self.local_sas.remove(&(direction, spi));
        if !self.synced {
            self.remove_sa(direction, spi);
        }
    }

    /// The state arrived: the SAs are the log's from now on (an SA this
    /// node observed already stays the same SA).
    pub(super) fn sync_from(&mut self, log: Option<&Replicated>) {
        let Some(log) = log else { return };
        self.synced = true;
        self.outbound
            .retain(|&spi, _| log.sas.contains_key(&(Direction::Outbound, spi)));
        self.inbound
            .retain(|&spi, _| log.sas.contains_key(&(Direction::Inbound, spi)));
        for entry in log.sas.values() {
            self.add_sa(Some(log), entry.descriptor);
            if let Some(replay) = &entry.replay {
                self.replay(replay);
            }
        }
        self.dirty = true;
    }

    /// The state was dropped: back to the locally registered SAs.
    pub(super) fn unsync(&mut self) {
        self.synced = false;
        let local = &self.local_sas;
        self.outbound
            .retain(|&spi, _| local.contains_key(&(Direction::Outbound, spi)));
        self.inbound
            .retain(|&spi, _| local.contains_key(&(Direction::Inbound, spi)));
        let local: Vec<SaDescriptor> = self.local_sas.values().copied().collect();
        for sa in local {
            self.add_sa(None, sa);
        }
        self.dirty = true;
    }

    /// The state was dropped after a lost partition merge: the locally
    /// registered SAs start over with new incarnations (new sequencers and
    /// observers in the data path), as in a restarted node.
    pub(super) fn restart(&mut self) {
        self.synced = false;
        self.outbound.clear();
        self.inbound.clear();
        let local: Vec<SaDescriptor> = self.local_sas.values().copied().collect();
        for sa in local {
            self.add_sa(None, sa);
        }
        self.dirty = true;
    }

    /// Publish SA `sa` (with its leases when the log holds them). The same
    /// SA published again keeps its incarnation; a different one with the
    /// same SPI gets a new one.
    pub(super) fn add_sa(&mut self, log: Option<&Replicated>, sa: SaDescriptor) {
        match sa.direction {
            Direction::Outbound => {
                let leases = log.and_then(|l| l.leases.sa(sa.spi)).cloned().map(Arc::new);
                let incarnation = match self.outbound.get(&sa.spi) {
                    Some(old) if old.descriptor == sa => old.incarnation,
                    _ => self.next_serial(),
                };
                let shared = OutboundShared {
                    descriptor: sa,
                    incarnation,
                    leases,
                    notes: VecDeque::new(),
                };
                self.outbound.insert(sa.spi, Arc::new(shared));
            }
            Direction::Inbound => {
                let incarnation = match self.inbound.get(&sa.spi) {
                    Some(old) if old.descriptor == sa => old.incarnation,
                    _ => self.next_serial(),
                };
                let shared = InboundShared {
                    descriptor: sa,
                    incarnation,
                    replay: None,
                };
                self.inbound.insert(sa.spi, Arc::new(shared));
            }
        }
        self.dirty = true;
    }

    fn next_serial(&mut self) -> u64 {
        self.serial += 1;
        self.serial
    }

    pub(super) fn remove_sa(&mut self, direction: Direction, spi: u32) {
        let removed = match direction {
            Direction::Outbound => self.outbound.remove(&spi).is_some(),
            Direction::Inbound => self.inbound.remove(&spi).is_some(),
        };
        self.dirty |= removed;
    }

    /// The log granted blocks for `spi`.
    pub(super) fn refresh_leases(&mut self, log: Option<&Replicated>, spi: u32) {
        let leases = log.and_then(|l| l.leases.sa(spi)).cloned().map(Arc::new);
        if let Some(sa) = self.outbound.get_mut(&spi) {
            Arc::make_mut(sa).leases = leases;
            self.dirty = true;
        }
    }

    /// Another node's checkpoint, for the data path to heal from.
    pub(super) fn note(&mut self, checkpoint: &Checkpoint) {
        let Some(sa) = self.outbound.get_mut(&checkpoint.spi) else {
            return;
        };
        self.serial += 1;
        let notes = &mut Arc::make_mut(sa).notes;
        if notes.len() >= CHECKPOINT_NOTES {
            notes.pop_front();
        }
        notes.push_back(CheckpointNote {
            serial: self.serial,
            lineage: checkpoint.lineage,
            c: checkpoint.c,
            fingerprint: checkpoint.fingerprint,
        });
        self.dirty = true;
    }

    /// Another node's observations of an inbound SA.
    pub(super) fn replay(&mut self, replay: &ReplayCheckpoint) {
        let Some(sa) = self.inbound.get_mut(&replay.spi) else {
            return;
        };
        self.serial += 1;
        Arc::make_mut(sa).replay = Some((self.serial, Arc::new(replay.clone())));
        self.dirty = true;
    }

    /// The snapshot published last.
    pub(super) fn current(&self) -> Arc<SharedState> {
        Arc::clone(&self.current)
    }

    /// Publish a new snapshot when anything changed.
    pub(super) fn publish(&mut self, head: Head) {
        let old = &self.current;
        if !self.dirty && old.head == head {
            return;
        }
        let state = SharedState {
            local: old.local,
            version: old.version + 1,
            head,
            tick: self.tick,
            checkpoint_every: old.checkpoint_every,
            fence: old.fence.clone(),
            outbound: self.outbound.clone(),
            inbound: self.inbound.clone(),
        };
        self.current = Arc::new(state);
        self.dirty = false;
    }
}
