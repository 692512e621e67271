//! Node identities and the membership view every dispatch decision is
//! taken over.
//!
//! A [`View`] is the ordered set of live nodes: Corosync's agreed
//! membership minus the nodes this node's failure detector suspects. Two
//! nodes that hold equal views take equal dispatch decisions; the epoch
//! only names the agreed membership the view was derived from.

use core::fmt;

/// A cluster node: its Corosync node id (`nodelist.node.nodeid`), which
/// also partitions the explicit-IV space (so it must fit in 16 bits, see
/// `limits::MAX_NODE_ID`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0)
    }
}

/// The live members, sorted ascending and without duplicates, with the
/// epoch of the agreed membership they came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct View {
    epoch: u64,
    members: Vec<NodeId>,
}

impl View {
    /// A view of `members` (any order, duplicates dropped).
    pub fn new(epoch: u64, members: impl IntoIterator<Item = NodeId>) -> View {
        let mut members: Vec<NodeId> = members.into_iter().collect();
        members.sort_unstable();
        members.dedup();
        View { epoch, members }
    }

    /// The agreed membership's epoch (Corosync ring id sequence, or a count
    /// of configuration changes).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The live members, ascending.
    pub fn members(&self) -> &[NodeId] {
        &self.members
    }

    /// How many live members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// True with no live member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// True when `node` is live in this view.
    pub fn contains(&self, node: NodeId) -> bool {
        self.members.binary_search(&node).is_ok()
    }

    /// The position of `node` among the live members: its class in
    /// round-robin dispatch and sequence striping.
    pub fn index_of(&self, node: NodeId) -> Option<usize> {
        self.members.binary_search(&node).ok()
    }

    /// The member at position `index`.
    pub fn member(&self, index: usize) -> Option<NodeId> {
        self.members.get(index).copied()
    }

    /// The same epoch without `suspects`: what a node uses the moment its
    /// failure detector suspects them, before Corosync agrees.
    pub fn without(&self, suspects: &[NodeId]) -> View {
        View {
            epoch: self.epoch,
            members: self
                .members
                .iter()
                .copied()
                .filter(|node| !suspects.contains(node))
                .collect(),
        }
    }

    /// The lowest live node: answers ARP for the virtual addresses and
    /// coordinates nothing else (every decision is taken by every node).
    pub fn first(&self) -> Option<NodeId> {
        self.members.first().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_sorted_and_unique() {
        let view = View::new(3, [NodeId(7), NodeId(2), NodeId(7), NodeId(5)]);
        assert_eq!(view.members(), &[NodeId(2), NodeId(5), NodeId(7)]);
        assert_eq!(view.index_of(NodeId(5)), Some(1));
        assert_eq!(view.index_of(NodeId(4)), None);
        assert_eq!(view.first(), Some(NodeId(2)));
    }

    #[test]
    fn without_keeps_epoch_and_order() {
        let view = View::new(9, [NodeId(1), NodeId(2), NodeId(3)]);
        let less = view.without(&[NodeId(2)]);
        assert_eq!(less.epoch(), 9);
        assert_eq!(less.members(), &[NodeId(1), NodeId(3)]);
        assert!(!less.contains(NodeId(2)));
    }
}
