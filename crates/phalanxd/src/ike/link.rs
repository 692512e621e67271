//! From the data-plane workers to the IKE thread: one bounded queue that a
//! worker never waits on (a full queue drops the message and counts it),
//! and a waker that interrupts the IKE thread's `poll`.
//!
//! What travels: IKE datagrams that arrived on the NAT-T port (RFC 3948
//! §2.2: behind the non-ESP marker, which the worker strips), acquires
//! from trap policies, and SA lifetime events (RFC 4301 §4.4.2.1 soft
//! limits; hard expiry is found by the IKE thread itself).

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use phalanx_io::poll::Waker;

use crate::config::ChildRef;

/// A message for the IKE thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToIke {
    /// An IKE message received on the NAT-T port, marker stripped.
    Datagram {
        /// Where it arrived (our address, the ESP-in-UDP port).
        local: SocketAddr,
        /// Where it came from.
        remote: SocketAddr,
        /// The IKE message.
        bytes: Vec<u8>,
    },
    /// A packet hit a trap policy of `child`, which has no SA.
    Acquire {
        /// Whose SA is missing.
        child: ChildRef,
        /// The packet's (source, destination), offered first in TSi/TSr
        /// (RFC 7296 §2.9).
        trigger: Option<(IpAddr, IpAddr)>,
    },
    /// An SA crossed a soft lifetime limit (bytes or packets).
    SoftExpired {
        /// Its SPI.
        spi: u32,
        /// Whether it is an outbound SA (else inbound).
        outbound: bool,
    },
}

/// What workers share to reach the IKE thread.
#[derive(Clone, Debug)]
pub struct WorkerLink {
    tx: SyncSender<ToIke>,
    waker: Arc<Waker>,
    dropped: Arc<AtomicU64>,
}

/// The IKE thread's end.
#[derive(Debug)]
pub struct IkeInbox {
    /// Messages in arrival order.
    pub rx: Receiver<ToIke>,
    /// Messages dropped because the queue was full.
    pub dropped: Arc<AtomicU64>,
}

/// A queue of `capacity` messages whose sender wakes `waker`.
pub fn channel(capacity: usize, waker: Arc<Waker>) -> (WorkerLink, IkeInbox) {
    let (tx, rx) = mpsc::sync_channel(capacity);
    let dropped = Arc::new(AtomicU64::new(0));
    (
        WorkerLink {
            tx,
            waker,
            dropped: Arc::clone(&dropped),
        },
        IkeInbox { rx, dropped },
    )
}

impl WorkerLink {
    /// Queues `message` without waiting; false (and counted) when the
    /// queue is full or the IKE thread is gone.
    pub fn send(&self, message: ToIke) -> bool {
        match self.tx.try_send(message) {
            Ok(()) => {
                // A failed eventfd write only delays the message to the IKE
                // thread's next timeout (at most IKE_HOUSEKEEPING).
                let _ = self.waker.wake();
                true
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Messages dropped so far (all workers).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soft(spi: u32) -> ToIke {
        ToIke::SoftExpired {
            spi,
            outbound: true,
        }
    }

    /// A full queue drops and counts; the sender never blocks; what was
    /// queued arrives in order.
    #[test]
    fn overflow_is_counted_not_waited_for() {
        let waker = Arc::new(Waker::new().unwrap());
        let (link, inbox) = channel(2, Arc::clone(&waker));
        let other = link.clone();
        assert!(link.send(soft(1)));
        assert!(other.send(soft(2)));
        assert!(!link.send(soft(3)));
        assert!(!other.send(soft(4)));
        assert_eq!(
            (link.dropped(), inbox.dropped.load(Ordering::Relaxed)),
            (2, 2)
        );
        assert_eq!(inbox.rx.try_recv().unwrap(), soft(1));
        assert_eq!(inbox.rx.try_recv().unwrap(), soft(2));
        assert!(inbox.rx.try_recv().is_err());
        // The queue has room again; the waker was signalled.
        assert!(link.send(soft(5)));
        assert!(waker.reset().unwrap() >= 1);
        drop(inbox);
        assert!(!link.send(soft(6)), "IKE thread gone: dropped, counted");
        assert_eq!(link.dropped(), 3);
    }
}
