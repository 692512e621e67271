//! The shortest-queue-first model: per stream, an estimate of every
//! member's queue in bytes, computed only from that stream's packets so
//! that every node computes the same estimate.
//!
//! On each packet every queue drains by `len / n` (the cluster as a whole
//! serves what arrives), the member with the smallest queue gets the packet
//! (ties: the lowest index after the previous packet's owner, cyclically),
//! and its queue grows by `len`. Queues are kept in units of `1/n` byte so
//! the drain is exact integer arithmetic: a packet adds `len * n` units to
//! its owner and removes `len` units from every queue.

use crate::view::{NodeId, View};

/// Every member's modelled backlog, in view order.
#[derive(Clone, Debug, Default)]
pub(crate) struct QueueModel {
    /// One entry per view member; unit: `1/n` byte.
    backlog: Vec<u64>,
    /// The owner of the stream's previous packet; ties go to the member
    /// after it.
    last: Option<NodeId>,
}

impl QueueModel {
    /// Empty queues for a view of `n` members.
    pub(crate) fn new(n: usize) -> QueueModel {
        QueueModel {
            backlog: vec![0; n],
            last: None,
        }
    }

    /// Forget everything (empty queues, no previous owner); keeps the size.
    pub(crate) fn reset(&mut self) {
        self.backlog.fill(0);
        self.last = None;
    }

    /// Carry the model from `old` to `new`: members in both keep their
    /// backlog in bytes, new members start empty, departed ones are dropped.
    pub(crate) fn remap(&mut self, old: &View, new: &View) {
        let (old_n, new_n) = (old.len() as u128, new.len() as u128);
        let backlog = new
            .members()
            .iter()
            .map(|&node| match old.index_of(node) {
                Some(i) if i < self.backlog.len() => {
                    // Units are 1/n byte: rescale from 1/old_n to 1/new_n.
                    let scaled = u128::from(self.backlog[i]) * new_n / old_n;
                    u64::try_from(scaled).unwrap_or(u64::MAX)
                }
                _ => 0,
            })
            .collect();
        self.backlog = backlog;
    }

    /// The cluster served `len / n` bytes of every queue.
    pub(crate) fn drain(&mut self, len: u32) {
        for queue in &mut self.backlog {
            *queue = queue.saturating_sub(u64::from(len));
        }
    }

    /// The index of the shortest queue; ties go to the first one at or
    /// after the member following the previous owner (cyclically), or at
    /// or after `start` when there was none.
    pub(crate) fn shortest(&self, view: &View, start: usize) -> usize {
        let n = self.backlog.len();
        if n == 0 {
            return 0;
        }
        let from = match self.last {
            Some(last) => view.members().partition_point(|&m| m <= last) % n,
            None => start % n,
        };
        let mut best = from;
        for step in 1..n {
            let i = (from + step) % n;
            if self.backlog[i] < self.backlog[best] {
                best = i;
            }
        }
        best
    }

    /// Member `index` got a packet of `len` bytes.
    pub(crate) fn charge(&mut self, view: &View, index: usize, len: u32) {
        let n = self.backlog.len() as u64;
        if let Some(queue) = self.backlog.get_mut(index) {
            *queue = queue.saturating_add(u64::from(len) * n);
        }
        self.last = view.member(index);
    }

    /// Member `index`'s modelled queue in bytes (rounded down).
    #[cfg(test)]
    pub(crate) fn bytes(&self, index: usize) -> u64 {
        let n = (self.backlog.len() as u64).max(1);
        self.backlog.get(index).map_or(0, |units| units / n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(ids: &[u32]) -> View {
        View::new(1, ids.iter().map(|&id| NodeId(id)))
    }

    /// One packet through the model: drain, pick, charge.
    fn step(model: &mut QueueModel, view: &View, len: u32) -> usize {
        model.drain(len);
        let index = model.shortest(view, 0);
        model.charge(view, index, len);
        index
    }

    #[test]
    fn equal_sizes_degenerate_to_round_robin() {
        let view = view(&[1, 2, 3]);
        let mut model = QueueModel::new(3);
        let owners: Vec<usize> = (0..7).map(|_| step(&mut model, &view, 1000)).collect();
        assert_eq!(owners, [0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn drain_is_exact_in_bytes() {
        let view = view(&[1, 2, 3]);
        let mut model = QueueModel::new(3);
        step(&mut model, &view, 1500); // node 0 holds 1500 B
        assert_eq!(model.bytes(0), 1500);
        model.drain(300); // 100 B from each queue
        assert_eq!(model.bytes(0), 1400);
        assert_eq!(model.bytes(1), 0);
    }

    #[test]
    fn remap_keeps_bytes_of_surviving_members() {
        let old = view(&[1, 2, 3]);
        let mut model = QueueModel::new(3);
        step(&mut model, &old, 1500);
        step(&mut model, &old, 600);
        let new = view(&[2, 4]);
        model.remap(&old, &new);
        // Node 2 kept its 600 B; node 4 starts empty.
        assert_eq!(model.bytes(0), 600);
        assert_eq!(model.bytes(1), 0);
        // The previous owner (node 2) is still the tie-break anchor.
        assert_eq!(model.shortest(&new, 0), 1);
    }
}
