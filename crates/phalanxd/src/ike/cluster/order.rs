//! One owner per IKE SA, decided by the agreed log's order — the same
//! rule on every node, from inputs every node has, so all agree.
//!
//! Takeovers are decided on each node's own dispatch view, and two views
//! can differ for a moment (a false suspicion): two nodes may then both
//! take one IKE SA over. Every IKE SA state goes through the log, and
//! every node is delivered all of them in one order, so:
//!
//! 1. the owner of an IKE SA is the node named by the last state
//!    delivered for it (the owner table records it on every node);
//! 2. a node running the IKE SA that is delivered another node's state
//!    keeps running it if a state of its own for that SA is still on its
//!    way (multicast, not delivered back: it comes later in the order and
//!    wins), and otherwise stops running it and holds the delivered state
//!    in standby ([`Verdict::Demote`]);
//! 3. a state naming a node out of this node's dispatch view (suspected
//!    or gone) says nothing about ownership: a late message of a failed
//!    node must not make its successor stand down, leaving nobody to run
//!    the IKE SA.
//!
//! X and Y both took the IKE SA over and each multicast a state:
//!
//! ```text
//! log:  S_X        S_Y
//! X:    own        Y's, nothing of X's on the way -> demote
//! Y:    X's, S_Y on the way -> keep      own
//! end:  Y runs it, X holds S_Y in standby
//!
//! log:  S_X        S_Y                         S_X2 (X sent it before S_Y came)
//! X:    own        Y's, S_X2 on the way -> keep   own
//! Y:    X's, S_Y on the way -> keep   own      X's, nothing on the way -> demote
//! end:  X runs it, Y holds S_X2 in standby
//! ```
//!
//! The node whose state comes last always has nothing of another node's
//! after it, so it never demotes; every other running node processes that
//! last state with all of its own already delivered, so it demotes. Both
//! end with exactly one running copy.

use std::collections::HashMap;

use phalanx_cluster::NodeId;

use super::ownership::Spis;

/// What a node knows when a state is delivered to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// This node.
    pub local: NodeId,
    /// The owner the state names (the node that sent it).
    pub owner: NodeId,
    /// This node runs the IKE SA.
    pub runs_here: bool,
    /// A state of this node's own for the IKE SA is multicast and not
    /// delivered back yet.
    pub own_in_flight: bool,
    /// The named owner is in this node's dispatch view (for this node
    /// itself: it is in its own view).
    pub owner_in_view: bool,
}

/// What a delivered state does here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// This node runs the IKE SA and goes on running it: its own state
    /// came back, or a later one of its own is on the way.
    Keep,
    /// This node stops running the IKE SA; the state becomes its standby
    /// copy.
    Demote,
    /// Nothing changes: the named owner is out of the view, or this node
    /// no longer runs an IKE SA whose state it sent.
    Ignore,
    /// Held in standby (imported, replacing the copy held).
    Import,
}

/// The rule of the module doc for a state the owner sent itself.
pub fn verdict(d: Delivery) -> Verdict {
    if !d.owner_in_view {
        return Verdict::Ignore;
    }
    match (d.owner == d.local, d.runs_here) {
        (true, true) => Verdict::Keep,
        // Its own state of an IKE SA it stopped running (deleted since):
        // nothing to learn from it.
        (true, false) => Verdict::Ignore,
        (false, true) if d.own_in_flight => Verdict::Keep,
        (false, true) => Verdict::Demote,
        (false, false) => Verdict::Import,
    }
}

/// A state one node re-sends on its owner's behalf (the standby copies
/// that follow a state transfer to a joiner): content, never a claim of
/// ownership. It is held only where no other owner was delivered since
/// (`recorded`: the owner table's owner, if any) and the IKE SA does not
/// run here.
pub fn relay_verdict(
    recorded: Option<NodeId>,
    owner: NodeId,
    runs_here: bool,
    owner_in_view: bool,
) -> Verdict {
    let superseded = recorded.is_some_and(|r| r != owner);
    if runs_here || superseded || !owner_in_view {
        Verdict::Ignore
    } else {
        Verdict::Import
    }
}

/// Per IKE SA, the hold numbers of this node's messages for it that are
/// on their way through the log.
#[derive(Clone, Debug, Default)]
pub struct OwnInFlight {
    pending: HashMap<Spis, Vec<u64>>,
}

impl OwnInFlight {
    /// This node multicast a message for `spis` with hold number `hold`.
    pub fn sent(&mut self, spis: Spis, hold: u64) {
        self.pending.entry(spis).or_default().push(hold);
    }

    /// This node's message with hold number `hold` came back: so did
    /// every lower one (Corosync keeps a sender's order; one that never
    /// comes was refused).
    pub fn delivered(&mut self, hold: u64) {
        self.forget(|h| h <= hold);
    }

    /// The message with hold number `hold` never goes out (refused, or
    /// not handed over); lower ones may still be on their way.
    pub fn refused(&mut self, hold: u64) {
        self.forget(|h| h == hold);
    }

    fn forget(&mut self, done: impl Fn(u64) -> bool) {
        self.pending.retain(|_, holds| {
            holds.retain(|h| !done(*h));
            !holds.is_empty()
        });
    }

    /// Whether a message of this node for `spis` is on its way.
    pub fn contains(&self, spis: Spis) -> bool {
        self.pending.contains_key(&spis)
    }

    /// IKE SAs with a message on its way.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether none has.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: NodeId = NodeId(1);
    const Y: NodeId = NodeId(2);
    const Z: NodeId = NodeId(3);
    const SPIS: Spis = ([1; 8], [2; 8]);

    fn at(local: NodeId, owner: NodeId, runs_here: bool, own_in_flight: bool) -> Verdict {
        verdict(Delivery {
            local,
            owner,
            runs_here,
            own_in_flight,
            owner_in_view: true,
        })
    }

    /// Every input combination, one row each.
    #[test]
    fn rule_table() {
        let rows = [
            // (local, owner, runs, in flight, owner in view) -> verdict
            (X, X, true, false, true, Verdict::Keep),
            (X, X, true, true, true, Verdict::Keep),
            (X, X, false, false, true, Verdict::Ignore),
            (X, Y, true, true, true, Verdict::Keep),
            (X, Y, true, false, true, Verdict::Demote),
            (X, Y, false, false, true, Verdict::Import),
            (X, Y, false, true, true, Verdict::Import),
            (X, Y, true, false, false, Verdict::Ignore),
            (X, Y, false, false, false, Verdict::Ignore),
            (X, X, true, false, false, Verdict::Ignore),
        ];
        for (n, (local, owner, runs_here, own_in_flight, owner_in_view, want)) in
            rows.into_iter().enumerate()
        {
            let d = Delivery {
                local,
                owner,
                runs_here,
                own_in_flight,
                owner_in_view,
            };
            assert_eq!(verdict(d), want, "row {n}: {d:?}");
        }
    }

    /// Relays are content only.
    #[test]
    fn relays_never_change_owners() {
        assert_eq!(relay_verdict(None, X, false, true), Verdict::Import);
        assert_eq!(relay_verdict(Some(X), X, false, true), Verdict::Import);
        assert_eq!(relay_verdict(Some(Y), X, false, true), Verdict::Ignore);
        assert_eq!(relay_verdict(Some(X), X, true, true), Verdict::Ignore);
        assert_eq!(relay_verdict(None, X, false, false), Verdict::Ignore);
    }

    #[test]
    fn in_flight_until_the_last_own_message_is_back() {
        let mut f = OwnInFlight::default();
        let other = ([3; 8], [4; 8]);
        assert!(!f.contains(SPIS));
        f.sent(SPIS, 1);
        f.sent(other, 2);
        f.sent(SPIS, 3);
        f.delivered(1);
        assert!(f.contains(SPIS), "3 is on its way");
        f.delivered(2);
        assert!(!f.contains(other));
        assert!(f.contains(SPIS));
        assert_eq!(f.len(), 1);
        f.delivered(3);
        assert!(!f.contains(SPIS));
        assert!(f.is_empty());
        // An old number later changes nothing; a new message is tracked.
        f.delivered(2);
        f.sent(SPIS, 4);
        assert!(f.contains(SPIS));
        // A refused message never comes, but an older one still does.
        f.sent(SPIS, 5);
        f.refused(5);
        assert!(f.contains(SPIS), "4 is on its way");
        f.refused(4);
        assert!(f.is_empty());
    }

    /// One node of the model: whether it runs the IKE SA, its messages on
    /// the way, the owner its table records, and how far it read the log.
    #[derive(Debug)]
    struct Node {
        id: NodeId,
        runs: bool,
        in_flight: OwnInFlight,
        recorded: Option<NodeId>,
        read: usize,
        demotions: u32,
    }

    impl Node {
        fn new(id: NodeId, runs: bool) -> Node {
            Node {
                id,
                runs,
                in_flight: OwnInFlight::default(),
                recorded: None,
                read: 0,
                demotions: 0,
            }
        }

        /// Multicasts a state (only a node that runs the IKE SA does).
        fn send(&mut self, log: &mut Vec<(NodeId, u64)>) {
            assert!(self.runs);
            let hold = log.len() as u64 + 1;
            self.in_flight.sent(SPIS, hold);
            log.push((self.id, hold));
        }

        /// Reads the next log entry, as `ClusterIke::import` does.
        fn read(&mut self, log: &[(NodeId, u64)]) -> Option<Verdict> {
            let (owner, hold) = *log.get(self.read)?;
            self.read += 1;
            if owner == self.id {
                self.in_flight.delivered(hold);
            }
            let v = at(self.id, owner, self.runs, self.in_flight.contains(SPIS));
            if v == Verdict::Demote {
                self.runs = false;
                self.demotions += 1;
            }
            if v != Verdict::Ignore {
                self.recorded = Some(owner);
            }
            Some(v)
        }
    }

    // log: S_X, S_Y -> Y owns it; X demotes on S_Y, Y keeps on S_X
    // because S_Y is on its way.
    #[test]
    fn two_takeovers_the_later_state_wins() {
        let mut log = Vec::new();
        let (mut x, mut y, mut z) = (Node::new(X, true), Node::new(Y, true), Node::new(Z, false));
        x.send(&mut log);
        y.send(&mut log);
        assert_eq!(x.read(&log), Some(Verdict::Keep));
        assert_eq!(y.read(&log), Some(Verdict::Keep), "S_Y on its way");
        assert_eq!(x.read(&log), Some(Verdict::Demote));
        assert_eq!(y.read(&log), Some(Verdict::Keep));
        for _ in 0..2 {
            assert_eq!(z.read(&log), Some(Verdict::Import));
        }
        assert!(!x.runs && y.runs);
        for n in [&x, &y, &z] {
            assert_eq!(n.recorded, Some(Y), "{n:?}");
        }
    }

    // log: S_X, S_Y, S_X2 (X sent S_X2 before it read S_Y) -> X owns it;
    // X keeps on S_Y because S_X2 is on its way, Y demotes on S_X2.
    #[test]
    fn a_later_own_state_on_its_way_keeps_the_ike_sa() {
        let mut log = Vec::new();
        let (mut x, mut y, mut z) = (Node::new(X, true), Node::new(Y, true), Node::new(Z, false));
        x.send(&mut log);
        y.send(&mut log);
        assert_eq!(x.read(&log), Some(Verdict::Keep));
        x.send(&mut log);
        assert_eq!(x.read(&log), Some(Verdict::Keep), "S_X2 on its way");
        assert_eq!(x.read(&log), Some(Verdict::Keep));
        assert_eq!(y.read(&log), Some(Verdict::Keep));
        assert_eq!(y.read(&log), Some(Verdict::Keep));
        assert_eq!(y.read(&log), Some(Verdict::Demote));
        while z.read(&log).is_some() {}
        assert!(x.runs && !y.runs);
        for n in [&x, &y, &z] {
            assert_eq!(n.recorded, Some(X), "{n:?}");
        }
    }

    /// The failed node's late state: its successor keeps running the IKE
    /// SA, and no node takes the dead node for its owner.
    #[test]
    fn a_late_state_of_a_node_out_of_the_view_is_ignored() {
        let late = Delivery {
            local: Y,
            owner: X,
            runs_here: true,
            own_in_flight: false,
            owner_in_view: false,
        };
        assert_eq!(verdict(late), Verdict::Ignore);
        let standby = Delivery {
            local: Z,
            runs_here: false,
            ..late
        };
        assert_eq!(verdict(standby), Verdict::Ignore);
    }

    /// Any interleaving of two nodes that both took the IKE SA over —
    /// each sending states while it runs and reading the log at its own
    /// pace — ends with exactly one running it: the owner of the last
    /// state, which every node records.
    #[test]
    fn every_interleaving_ends_with_one_owner() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..2000 {
            let mut log = Vec::new();
            let mut nodes = [Node::new(X, true), Node::new(Y, true), Node::new(Z, false)];
            let mut sends = [1 + next(3), 1 + next(3), 0];
            for i in 0..2 {
                nodes[i].send(&mut log);
                sends[i] -= 1;
            }
            for _ in 0..20 {
                let i = next(3) as usize;
                if next(2) == 0 && sends[i] > 0 && nodes[i].runs {
                    sends[i] -= 1;
                    nodes[i].send(&mut log);
                } else {
                    nodes[i].read(&log);
                }
            }
            for node in &mut nodes {
                while node.read(&log).is_some() {}
            }
            let last = log.last().map(|(owner, _)| *owner);
            let running: Vec<NodeId> = nodes.iter().filter(|n| n.runs).map(|n| n.id).collect();
            assert_eq!(running.len(), 1, "{log:?} {nodes:?}");
            assert_eq!(Some(running[0]), last, "{log:?} {nodes:?}");
            assert!(nodes.iter().all(|n| n.recorded == last), "{nodes:?}");
            assert!(nodes.iter().all(|n| n.demotions <= 1));
        }
    }
}
