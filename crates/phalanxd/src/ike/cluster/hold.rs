//! The write-ahead hold (phalanx-ike `ha` module doc, "What the cluster
//! must do", step 1): what one round of the IKE endpoint produced — its
//! data-plane installs and its datagrams — waits until the IKE SA state
//! it replicated comes back from the agreed log, so that every member
//! holds the state before the peer can see its effect.
//!
//! Each replicated message carries a *hold number* (increasing per node).
//! A batch waits for the number of its last message, or for nothing when
//! it replicated none; batches leave in the order they came, so a batch
//! that waits for nothing still waits behind the ones before it (a
//! retransmitted answer must not overtake the exchange it answers).
//! Corosync delivers a sender's messages in the order sent, so the
//! delivery of number `h` releases every batch waiting for `h` or less.

use std::collections::VecDeque;

/// Batches held until their replication comes back.
#[derive(Debug)]
pub struct HoldQueue<T> {
    queue: VecDeque<(Option<u64>, T)>,
    /// The highest own hold number delivered.
    delivered: u64,
    limit: usize,
}

impl<T> HoldQueue<T> {
    /// An empty queue holding at most `limit` batches.
    pub fn new(limit: usize) -> HoldQueue<T> {
        HoldQueue {
            queue: VecDeque::new(),
            delivered: 0,
            limit,
        }
    }

    /// Queues `batch`, waiting for hold number `waits_for` (or only for
    /// the batches ahead); `Err(batch)` when the queue is full.
    pub fn push(&mut self, waits_for: Option<u64>, batch: T) -> Result<(), T> {
        if self.queue.len() >= self.limit {
            return Err(batch);
        }
        self.queue.push_back((waits_for, batch));
        Ok(())
    }

    /// This node's message with hold number `hold` was delivered (or
    /// refused: then nothing will come back for it).
    pub fn delivered(&mut self, hold: u64) {
        self.delivered = self.delivered.max(hold);
    }

    /// The next batch that may go, in order.
    pub fn pop_ready(&mut self) -> Option<T> {
        let ready = self
            .queue
            .front()
            .is_some_and(|(waits, _)| waits.is_none_or(|h| h <= self.delivered));
        if ready {
            self.queue.pop_front().map(|(_, batch)| batch)
        } else {
            None
        }
    }

    /// Batches waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Every batch waiting, in order, to change (a demoted IKE SA's
    /// datagrams are taken out).
    pub fn batches_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.queue.iter_mut().map(|(_, batch)| batch)
    }

    /// Takes every batch out, released or not (demotion: their datagrams
    /// must not be sent any more).
    pub fn drain_all(&mut self) -> Vec<T> {
        self.queue.drain(..).map(|(_, batch)| batch).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(q: &mut HoldQueue<&'static str>) -> Vec<&'static str> {
        std::iter::from_fn(|| q.pop_ready()).collect()
    }

    /// Nothing waiting and nothing ahead: goes at once.
    #[test]
    fn unreplicated_batch_passes_an_empty_queue() {
        let mut q = HoldQueue::new(4);
        q.push(None, "cache answer").unwrap();
        assert_eq!(ready(&mut q), ["cache answer"]);
        assert!(q.is_empty());
    }

    /// A batch waits for its own number; the one behind it waits too,
    /// even when it replicated nothing; a later delivery releases all
    /// up to it, in order.
    #[test]
    fn batches_wait_in_order_for_their_delivery() {
        let mut q = HoldQueue::new(8);
        q.push(Some(1), "auth response").unwrap();
        q.push(None, "retransmit").unwrap();
        q.push(Some(2), "dpd").unwrap();
        q.push(Some(3), "rekey").unwrap();
        assert!(ready(&mut q).is_empty(), "nothing delivered yet");
        q.delivered(1);
        assert_eq!(ready(&mut q), ["auth response", "retransmit"]);
        // Number 2 was lost on the way; 3 implies it (sender order).
        q.delivered(3);
        assert_eq!(ready(&mut q), ["dpd", "rekey"]);
        // An old number later changes nothing.
        q.delivered(2);
        q.push(Some(4), "delete").unwrap();
        assert!(ready(&mut q).is_empty());
        assert_eq!(q.len(), 1);
    }

    /// A full queue refuses (the caller counts it); draining empties it.
    #[test]
    fn bounded_and_drained_on_demotion() {
        let mut q = HoldQueue::new(2);
        q.push(Some(1), "a").unwrap();
        q.push(Some(2), "b").unwrap();
        assert_eq!(q.push(None, "c"), Err("c"));
        for batch in q.batches_mut() {
            *batch = if *batch == "a" { "a'" } else { batch };
        }
        assert_eq!(q.drain_all(), ["a'", "b"]);
        assert!(q.is_empty());
        q.delivered(2);
        assert_eq!(ready(&mut q), Vec::<&str>::new());
    }
}
