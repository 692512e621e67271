//! Restores ticket order among frames that complete out of order.

use std::collections::BTreeMap;

use phalanx_crypto::Frame;

/// Completed frames keyed by ticket; releases them one by one starting at
/// ticket 0, never skipping one.
#[derive(Debug, Default)]
pub(crate) struct ReorderBuffer {
    waiting: BTreeMap<u64, Frame>,
    next: u64,
}

impl ReorderBuffer {
    /// Files a completed frame.
    pub(crate) fn insert(&mut self, ticket: u64, frame: Frame) {
        self.waiting.insert(ticket, frame);
    }

    /// The frame with the next ticket, if it has completed.
    pub(crate) fn pop_next(&mut self) -> Option<Frame> {
        let frame = self.waiting.remove(&self.next)?;
        self.next += 1;
        Some(frame)
    }

    /// The ticket the next released frame will carry.
    pub(crate) fn next_ticket(&self) -> u64 {
        self.next
    }

    /// Completed frames held back behind an earlier, unfinished one.
    pub(crate) fn len(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_in_ticket_order_only() {
        let mut r = ReorderBuffer::default();
        r.insert(2, Frame::new());
        r.insert(1, Frame::new());
        assert!(r.pop_next().is_none(), "ticket 0 has not completed");
        assert_eq!(r.len(), 2);
        r.insert(0, Frame::new());
        for ticket in 0..3 {
            assert_eq!(r.next_ticket(), ticket);
            assert!(r.pop_next().is_some());
        }
        assert!(r.pop_next().is_none());
        assert_eq!(r.next_ticket(), 3);
    }
}
