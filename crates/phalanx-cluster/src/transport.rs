//! The group transport: totally ordered multicast with agreed membership,
//! as Corosync's closed process groups provide it (CPG, "agreed" delivery
//! guarantee, virtual synchrony).
//!
//! The cluster core never touches it itself: the shell (`phalanxd`'s CPG
//! adapter, or `phalanx-testkit`'s in-memory group) polls the transport
//! and hands each [`GroupEvent`] to `ClusterNode::handle_delivery` or
//! `ClusterNode::handle_membership`, in the order the transport returns
//! them, and multicasts what `ClusterNode::poll_group` returns.
//!
//! What the core relies on:
//! - every member receives the same events in the same order from the
//!   membership event that made it a member on (its own messages too);
//! - a membership event lists every member, and a node that appears in it
//!   for the first time sees it as its first event;
//! - messages are delivered whole, never duplicated, never reordered.

use core::fmt;

use crate::view::NodeId;

/// One event of the agreed log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupEvent {
    /// A message multicast by `from` (possibly this node).
    Delivered {
        /// The sender, as the group transport authenticates it.
        from: NodeId,
        /// The message bytes (see `codec`).
        message: Vec<u8>,
    },
    /// A new agreed membership (Corosync confchg): every member, any order.
    Membership {
        /// The members after the change.
        members: Vec<NodeId>,
    },
}

/// Why a multicast did not go out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportError {
    /// The transport's queue is full (Corosync `CS_ERR_TRY_AGAIN`); try
    /// again later.
    Congested,
    /// This node is not (or no longer) a member of the group.
    Closed,
    /// The message is larger than the transport carries.
    TooLarge,
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TransportError::Congested => "group transport congested",
            TransportError::Closed => "not a member of the group",
            TransportError::TooLarge => "message too large for the group transport",
        })
    }
}

impl std::error::Error for TransportError {}

/// Totally ordered multicast to a closed group with agreed membership.
pub trait GroupTransport {
    /// This node's id in the group.
    fn local(&self) -> NodeId;
    /// Multicast `message` to every member, this node included.
    fn multicast(&mut self, message: &[u8]) -> Result<(), TransportError>;
    /// The next event of the agreed log, if one is waiting.
    fn poll(&mut self) -> Option<GroupEvent>;
}
