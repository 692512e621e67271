//! Which node runs an IKE SA — the same answer on every node, from the
//! same inputs, with no message:
//!
//! - a *new* IKE SA (an IKE_SA_INIT request with responder SPI 0, or a
//!   configured connection this cluster initiates) is run by the owner
//!   of its peer's hash segment in the dispatch view
//!   ([`new_sa_owner`]: `segment_owner(view, segment_of(peer, None))`);
//!   every other node drops the request;
//! - an established IKE SA stays with the node that last replicated it
//!   (sticky: a node joining or coming back takes nothing over), as long
//!   as that node is in the dispatch view ([`OwnerTable`]);
//! - when its node leaves the dispatch view (suspected, or gone), the
//!   segment owner in the new view takes it over ([`OwnerTable::rehome`]).
//!
//! The dispatch view is the view the data path dispatches with, less the
//! members this node suspects ([`dispatch_view`]).

use core::net::IpAddr;
use std::collections::BTreeMap;

use phalanx_cluster::{segment_of, segment_owner, NodeId, SharedState, View};

/// An IKE SA's SPIs (initiator, responder).
pub type Spis = ([u8; 8], [u8; 8]);

/// The members that own traffic as this node sees them.
pub fn dispatch_view(state: &SharedState) -> View {
    state.view().without(state.suspects())
}

/// The node that runs a new IKE SA with `peer`; `None` for an empty view.
pub fn new_sa_owner(view: &View, peer: IpAddr) -> Option<NodeId> {
    segment_owner(view, segment_of(peer, None))
}

/// One IKE SA's owner as the replicated log told it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    owner: NodeId,
    peer: IpAddr,
}

/// Who runs each replicated IKE SA.
#[derive(Clone, Debug, Default)]
pub struct OwnerTable {
    entries: BTreeMap<Spis, Entry>,
}

impl OwnerTable {
    /// `owner` replicated the state of `spis` (with `peer`).
    pub fn record(&mut self, spis: Spis, owner: NodeId, peer: IpAddr) {
        self.entries.insert(spis, Entry { owner, peer });
    }

    /// The IKE SA is gone.
    pub fn remove(&mut self, spis: Spis) {
        self.entries.remove(&spis);
    }

    /// Who runs `spis`.
    pub fn owner(&self, spis: Spis) -> Option<NodeId> {
        self.entries.get(&spis).map(|e| e.owner)
    }

    /// The IKE SAs the table names `node` as the runner of, in SPI order.
    pub fn owned_by(&self, node: NodeId) -> Vec<Spis> {
        self.entries
            .iter()
            .filter(|(_, e)| e.owner == node)
            .map(|(spis, _)| *spis)
            .collect()
    }

    /// IKE SAs known.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is known.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every IKE SA whose owner is not in `view` moves to the segment
    /// owner of its peer in `view`; returns the moves, in SPI order.
    /// Nothing moves with an empty view (nobody could take it).
    pub fn rehome(&mut self, view: &View) -> Vec<(Spis, NodeId)> {
        let mut moved = Vec::new();
        for (spis, entry) in &mut self.entries {
            if view.contains(entry.owner) {
                continue;
            }
            if let Some(successor) = new_sa_owner(view, entry.peer) {
                entry.owner = successor;
                moved.push((*spis, successor));
            }
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    fn view(ids: &[u32]) -> View {
        View::new(1, ids.iter().map(|&id| NodeId(id)))
    }

    fn peer(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, last))
    }

    fn spis(n: u8) -> Spis {
        ([n; 8], [n.wrapping_add(100); 8])
    }

    /// A new SA goes to a member; the same one for the same inputs; none
    /// without members; many peers spread over all members.
    #[test]
    fn new_sas_go_to_the_segment_owner() {
        let v = view(&[1, 2, 3]);
        let owner = new_sa_owner(&v, peer(2)).unwrap();
        assert!(v.contains(owner));
        assert_eq!(new_sa_owner(&v, peer(2)), Some(owner));
        assert_eq!(new_sa_owner(&view(&[]), peer(2)), None);
        let mut seen = std::collections::BTreeSet::new();
        for last in 1..=60 {
            seen.insert(new_sa_owner(&v, peer(last)).unwrap());
        }
        assert_eq!(seen.len(), 3, "60 peers land on every member");
    }

    /// Established SAs stay where they are when a node joins (sticky),
    /// and only the failed node's SAs move, to the new segment owner;
    /// two tables fed the same inputs agree.
    #[test]
    fn sticky_then_rehomed_deterministically() {
        let mut a = OwnerTable::default();
        let full = view(&[1, 2, 3]);
        for n in 1..=30 {
            let owner = new_sa_owner(&view(&[1, 2]), peer(n)).unwrap();
            a.record(spis(n), owner, peer(n));
        }
        let mut b = a.clone();
        assert!(a.rehome(&full).is_empty(), "node 3 joined: nothing moves");
        let before: Vec<_> = (1..=30).map(|n| a.owner(spis(n))).collect();
        let survivors = full.without(&[NodeId(1)]);
        let moved = a.rehome(&survivors);
        assert_eq!(moved, b.rehome(&survivors), "every node computes the same");
        assert!(!moved.is_empty());
        for n in 1..=30 {
            let now = a.owner(spis(n)).unwrap();
            assert!(survivors.contains(now));
            let was = before[usize::from(n - 1)].unwrap();
            if was != NodeId(1) {
                assert_eq!(now, was, "a survivor's SA stays");
            } else {
                assert_eq!(Some(now), new_sa_owner(&survivors, peer(n)));
            }
        }
        let of_two = a.owned_by(NodeId(2));
        assert!(of_two.windows(2).all(|w| w[0] < w[1]), "in SPI order");
        assert_eq!(
            of_two.len(),
            (1..=30)
                .filter(|&n| a.owner(spis(n)) == Some(NodeId(2)))
                .count()
        );
        assert!(a.owned_by(NodeId(1)).is_empty(), "node 1 failed");
        assert!(a.rehome(&view(&[])).is_empty(), "nobody to take over");
        a.remove(spis(1));
        assert_eq!(a.owner(spis(1)), None);
        assert_eq!(a.len(), 29);
    }
}
