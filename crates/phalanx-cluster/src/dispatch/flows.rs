//! The session schemes' flow table: a bounded map from flow identity to
//! owner, evicting the flow least recently used.
//!
//! "Recently" is measured in the stream's own packets, never the clock:
//! the entries form a list ordered by last use (each packet moves its flow
//! to the front), so two nodes that saw the same packets evict the same
//! flow. Slots live in one vector linked by index, so a lookup moves no
//! memory and allocates nothing; only inserting a flow may allocate.

use std::collections::BTreeMap;

use crate::view::NodeId;

/// End of the use-order list.
const NIL: u32 = u32::MAX;

/// One flow and its place in the use order.
#[derive(Clone, Copy, Debug)]
struct FlowSlot {
    flow: u64,
    owner: NodeId,
    /// The slot used just more recently, or `NIL`.
    newer: u32,
    /// The slot used just less recently, or `NIL`.
    older: u32,
}

/// A bounded flow table with least-recently-used eviction.
#[derive(Clone, Debug)]
pub(crate) struct FlowTable {
    /// Flow identity to slot. An ordered map: its worst case does not
    /// depend on how an attacker picks flows (the flow hash is unkeyed).
    index: BTreeMap<u64, u32>,
    slots: Vec<FlowSlot>,
    /// Most recently used slot.
    newest: u32,
    /// Least recently used slot: the next to be evicted.
    oldest: u32,
    capacity: usize,
}

impl FlowTable {
    /// An empty table holding at most `capacity` flows (at least one).
    pub(crate) fn new(capacity: usize) -> FlowTable {
        FlowTable {
            index: BTreeMap::new(),
            slots: Vec::new(),
            newest: NIL,
            oldest: NIL,
            capacity: capacity.clamp(1, NIL as usize),
        }
    }

    /// How many flows are held.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Drop every flow.
    pub(crate) fn clear(&mut self) {
        self.index.clear();
        self.slots.clear();
        self.newest = NIL;
        self.oldest = NIL;
    }

    /// The owner of `flow`, marking it used now; `None` when unknown.
    pub(crate) fn touch(&mut self, flow: u64) -> Option<&mut NodeId> {
        let slot = *self.index.get(&flow)?;
        self.unlink(slot);
        self.push_newest(slot);
        Some(&mut self.slots[slot as usize].owner)
    }

    /// Add `flow` (not held yet) owned by `owner` as the most recently
    /// used, evicting the least recently used flow when full.
    pub(crate) fn insert(&mut self, flow: u64, owner: NodeId) {
        let fresh = FlowSlot {
            flow,
            owner,
            newer: NIL,
            older: NIL,
        };
        let slot = if self.slots.len() < self.capacity {
            self.slots.push(fresh);
            (self.slots.len() - 1) as u32
        } else {
            let victim = self.oldest;
            self.unlink(victim);
            self.index.remove(&self.slots[victim as usize].flow);
            self.slots[victim as usize] = fresh;
            victim
        };
        self.index.insert(flow, slot);
        self.push_newest(slot);
    }

    /// Take `slot` out of the use-order list.
    fn unlink(&mut self, slot: u32) {
        let FlowSlot { newer, older, .. } = self.slots[slot as usize];
        match newer {
            NIL => self.newest = older,
            n => self.slots[n as usize].older = older,
        }
        match older {
            NIL => self.oldest = newer,
            o => self.slots[o as usize].newer = newer,
        }
    }

    /// Put `slot` (unlinked) at the front of the use-order list.
    fn push_newest(&mut self, slot: u32) {
        let previous = self.newest;
        self.slots[slot as usize].newer = NIL;
        self.slots[slot as usize].older = previous;
        match previous {
            NIL => self.oldest = slot,
            p => self.slots[p as usize].newer = slot,
        }
        self.newest = slot;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner_of(table: &mut FlowTable, flow: u64) -> Option<u32> {
        table.touch(flow).map(|owner| owner.0)
    }

    #[test]
    fn evicts_least_recently_used() {
        let mut table = FlowTable::new(3);
        table.insert(10, NodeId(1));
        table.insert(20, NodeId(2));
        table.insert(30, NodeId(3));
        assert_eq!(owner_of(&mut table, 10), Some(1)); // 20 is now the oldest
        table.insert(40, NodeId(4));
        assert_eq!(table.len(), 3);
        assert_eq!(owner_of(&mut table, 20), None);
        assert_eq!(owner_of(&mut table, 30), Some(3)); // use order now 30, 40, 10: 10 is the oldest
        table.insert(50, NodeId(5));
        assert_eq!(owner_of(&mut table, 10), None);
        assert_eq!(owner_of(&mut table, 40), Some(4));
        assert_eq!(owner_of(&mut table, 50), Some(5));
    }

    #[test]
    fn capacity_one_keeps_the_latest() {
        let mut table = FlowTable::new(0); // clamped to one
        table.insert(1, NodeId(1));
        assert_eq!(owner_of(&mut table, 1), Some(1));
        table.insert(2, NodeId(2));
        assert_eq!(owner_of(&mut table, 1), None);
        assert_eq!(owner_of(&mut table, 2), Some(2));
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn owner_can_be_reassigned_and_clear_empties() {
        let mut table = FlowTable::new(4);
        table.insert(7, NodeId(1));
        if let Some(owner) = table.touch(7) {
            *owner = NodeId(9);
        }
        assert_eq!(owner_of(&mut table, 7), Some(9));
        table.clear();
        assert_eq!(table.len(), 0);
        assert_eq!(owner_of(&mut table, 7), None);
        table.insert(8, NodeId(2));
        assert_eq!(owner_of(&mut table, 8), Some(2));
    }
}
