//! Between the IKE thread and the cluster thread: two bounded queues,
//! one each way, and a waker on each side. Neither thread ever waits on
//! the other: a full queue drops the message and counts it.
//!
//! One exception to "dropped when full": what the log delivered to the
//! IKE thread is never dropped (a lost own message would hold the IKE
//! thread's datagrams for good, a lost state would leave a standby
//! behind); the cluster end keeps what does not fit and retries every turn
//! ([`ClusterEnd::flush`]), in order.
//!
//! What travels to the cluster thread ([`ToCluster`]): IKE SA state to
//! replicate through the agreed log, and the negotiated Child SAs the
//! owner registers with the cluster (or removes), like the static SAs
//! of the file. Back to the IKE thread ([`FromCluster`]): every App
//! message of the IKE channel the log delivered (own ones included), a
//! replication the node refused, and the news that this node sent a
//! joiner its state transfer.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use phalanx_cluster::{Direction, NodeId, SaDescriptor, View};
use phalanx_io::poll::Waker;

/// From the IKE thread to the cluster thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToCluster {
    /// Multicast `payload` on the IKE App channel; `hold` is the hold
    /// number it carries (returned in [`FromCluster::Refused`]).
    Replicate {
        /// The hold number inside the payload.
        hold: u64,
        /// The framed message ([`super::wire`]).
        payload: Vec<u8>,
    },
    /// Register a negotiated SA with the cluster (`ClusterNode::register_sa`).
    Register(SaDescriptor),
    /// Remove it cluster-wide (`ClusterNode::remove_sa`).
    Remove {
        /// Its direction.
        direction: Direction,
        /// Its SPI.
        spi: u32,
    },
}

/// From the cluster thread to the IKE thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FromCluster {
    /// An App message of the IKE channel, in the agreed order.
    Delivered {
        /// The member that replicated it.
        from: NodeId,
        /// Its octets.
        payload: Vec<u8>,
    },
    /// The node refused to replicate the message with this hold number
    /// (not synced, or too large).
    Refused {
        /// The hold number.
        hold: u64,
    },
    /// This node sent a joining node its state transfer: the IKE SA
    /// states must follow it.
    StateTransferSent,
    /// The dispatch view changed (`ClusterEvent::ViewChanged`), in order.
    View(View),
}

/// One direction: a bounded queue whose sends wake the receiver.
#[derive(Debug)]
struct Lane<T> {
    tx: Sender<T>,
    wake: Arc<Waker>,
    dropped: Arc<AtomicU64>,
}

impl<T> Lane<T> {
    fn send(&self, message: T) -> bool {
        match self.tx.try_send(message) {
            Ok(()) => {
                // A failed wake delays the message to the receiver's next turn.
                drop(self.wake.wake());
                true
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }
}

/// The IKE thread's end.
#[derive(Debug)]
pub struct IkeEnd {
    out: Lane<ToCluster>,
    rx: Receiver<FromCluster>,
    waker: Arc<Waker>,
    /// Times a message to the IKE thread found its queue full (shared
    /// with the cluster end, which keeps and retries it).
    inbound_dropped: Arc<AtomicU64>,
}

/// The cluster thread's end.
#[derive(Debug)]
pub struct ClusterEnd {
    out: Lane<FromCluster>,
    rx: Receiver<ToCluster>,
    waker: Arc<Waker>,
    /// What did not fit in the IKE thread's queue yet, in order.
    pending: VecDeque<FromCluster>,
}

/// Both ends, each queue holding `capacity` messages.
pub fn channel(capacity: usize) -> io::Result<(IkeEnd, ClusterEnd)> {
    let (ike_waker, cluster_waker) = (Arc::new(Waker::new()?), Arc::new(Waker::new()?));
    let (to_cluster, from_ike) = crossbeam_channel::bounded(capacity);
    let (to_ike, from_cluster) = crossbeam_channel::bounded(capacity);
    let ike_dropped = Arc::new(AtomicU64::new(0));
    let ike = IkeEnd {
        out: Lane {
            tx: to_cluster,
            wake: Arc::clone(&cluster_waker),
            dropped: Arc::new(AtomicU64::new(0)),
        },
        rx: from_cluster,
        waker: Arc::clone(&ike_waker),
        inbound_dropped: Arc::clone(&ike_dropped),
    };
    let cluster = ClusterEnd {
        out: Lane {
            tx: to_ike,
            wake: ike_waker,
            dropped: ike_dropped,
        },
        rx: from_ike,
        waker: cluster_waker,
        pending: VecDeque::new(),
    };
    Ok((ike, cluster))
}

impl IkeEnd {
    /// Queues `message` for the cluster thread; false (counted) when full.
    pub fn send(&self, message: ToCluster) -> bool {
        self.out.send(message)
    }

    /// The next message from the cluster thread.
    pub fn try_recv(&self) -> Option<FromCluster> {
        self.rx.try_recv().ok()
    }

    /// The descriptor the IKE thread polls.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.waker.as_fd()
    }

    /// Clears the waker (before the queue is drained).
    pub fn reset(&self) {
        // A failed reset only makes the next poll return at once.
        drop(self.waker.reset());
    }

    /// (Messages to the cluster thread dropped, messages from it delayed)
    /// because a queue was full.
    pub fn dropped(&self) -> (u64, u64) {
        (
            self.out.dropped.load(Ordering::Relaxed),
            self.inbound_dropped.load(Ordering::Relaxed),
        )
    }
}

impl ClusterEnd {
    /// Queues `message` for the IKE thread; kept here (counted) when its
    /// queue is full, and sent by a later [`ClusterEnd::flush`].
    pub fn send(&mut self, message: FromCluster) {
        self.pending.push_back(message);
        self.flush();
    }

    /// Hands on what waits, in order, as far as the queue takes it.
    pub fn flush(&mut self) {
        let mut woke = false;
        while let Some(message) = self.pending.pop_front() {
            match self.out.tx.try_send(message) {
                Ok(()) => woke = true,
                Err(TrySendError::Full(message) | TrySendError::Disconnected(message)) => {
                    self.out.dropped.fetch_add(1, Ordering::Relaxed);
                    self.pending.push_front(message);
                    break;
                }
            }
        }
        if woke {
            // A failed wake delays the messages to the IKE thread's next turn.
            drop(self.out.wake.wake());
        }
    }

    /// Messages waiting for room in the IKE thread's queue.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The next message from the IKE thread.
    pub fn try_recv(&self) -> Option<ToCluster> {
        self.rx.try_recv().ok()
    }

    /// Wakes the IKE thread (the cluster published a new state).
    pub fn wake_ike(&self) {
        // A failed wake leaves the IKE thread to see it at its next round.
        drop(self.out.wake.wake());
    }

    /// The descriptor the cluster thread polls.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.waker.as_fd()
    }

    /// Clears the waker (before the queue is drained).
    pub fn reset(&self) {
        // A failed reset only makes the next poll return at once.
        drop(self.waker.reset());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each way: bounded, never blocking, counted when full, the other
    /// side woken.
    #[test]
    fn both_ways_bounded_and_woken() {
        let (ike, mut cluster) = channel(1).unwrap();
        let register = ToCluster::Remove {
            direction: Direction::Inbound,
            spi: 7,
        };
        assert!(ike.send(register.clone()));
        assert!(!ike.send(register.clone()));
        assert_eq!(ike.dropped(), (1, 0));
        assert!(cluster.waker.reset().unwrap() >= 1);
        assert_eq!(cluster.try_recv(), Some(register));
        assert_eq!(cluster.try_recv(), None);
        cluster.send(FromCluster::StateTransferSent);
        cluster.send(FromCluster::Refused { hold: 1 });
        assert_eq!(ike.dropped(), (1, 1), "the second waits");
        assert_eq!(cluster.pending(), 1);
        assert!(ike.waker.reset().unwrap() >= 1);
        assert_eq!(ike.try_recv(), Some(FromCluster::StateTransferSent));
        assert_eq!(ike.try_recv(), None);
        cluster.flush();
        assert_eq!(cluster.pending(), 0);
        assert_eq!(ike.try_recv(), Some(FromCluster::Refused { hold: 1 }));
    }
}
