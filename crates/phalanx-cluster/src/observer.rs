//! The inbound observer of one SA on one node: which ESP sequence numbers
//! went past, whoever processed them.
//!
//! Every node sees every inbound packet but processes (authenticates) only
//! the ones it owns; of the others it only *observes* the sequence number
//! field (RFC 4303 §2.2), unauthenticated, in a bitmap of the last
//! [`OBSERVER_WINDOW`] numbers below the highest one seen. With ESN the
//! high half is inferred from the observer's own highest number, the same
//! way on every node, so every node expands a packet's number the same
//! way and dispatches it the same way: as the candidate nearest to that
//! number (serial number arithmetic, RFC 1982), not as the receiver does
//! (RFC 4303 Appendix A2.2, where a number below the window belongs to
//! the next 2^32). The receiver learns from the ICV whether its guess was
//! right; the observer cannot, and with the receiver's rule an old
//! packet replayed, or any packet with a small forged number, would move
//! its window 2^32 ahead and wipe every number it kept for the next
//! takeover.
//!
//! When ownership moves (a takeover, a view change; with the
//! shortest-queue schemes, any packet), the node feeds the numbers it
//! observed but did not own into the SA's replay window before it
//! processes anything (`InboundSa::replay_commit`): a packet the peer sent
//! before, captured and replayed after, finds its number already marked,
//! although another node processed the original. The replay window thus
//! continues from what every node observed. Numbers this node owns are
//! never marked (their own commit, after authentication, does that; a
//! mark would make it fail), and each number is marked once.
//!
//! History before the observer's first packet is unknown: unless a replay
//! checkpoint from another node covers it, every number below the first
//! one observed is marked too (a late, reordered genuine packet from then
//! is refused; a replay never passes for want of knowledge).
//!
//! Known cost: the numbers are not authenticated. Forged packets observed
//! before a takeover make the new owner refuse the genuine packets with
//! those numbers (a denial of service limited to the takeover moment and
//! to numbers inside the window), and a forged number far ahead moves the
//! observer's window past the genuine ones, which are then not carried
//! over (the new owner's own window still checks them). Replay windows
//! larger than [`OBSERVER_WINDOW`] are carried over only in part.

use crate::limits::OBSERVER_WINDOW;

/// Ring words: a power of two above `OBSERVER_WINDOW / 64`, so the window
/// never aliases with itself (as in RFC 6479).
const RING_WORDS: usize = (OBSERVER_WINDOW as usize / 64 + 1).next_power_of_two();

/// One observed packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observed {
    /// Its full sequence number.
    pub seq: u64,
    /// The first packet with that number seen here.
    pub first: bool,
}

/// The observed sequence numbers of one inbound SA. See the module docs.
#[derive(Clone, Debug)]
pub struct InboundObserver {
    esn: bool,
    /// Highest number observed (0: none).
    top: u64,
    /// Numbers observed.
    ring: Box<[u64; RING_WORDS]>,
    /// Numbers this node owned (processed).
    owned: Box<[u64; RING_WORDS]>,
    /// Numbers already handed out as marks.
    marked: Box<[u64; RING_WORDS]>,
    /// Knowledge is complete from this number on (`None`: nothing known).
    known_from: Option<u64>,
    /// The lowest number that may have become markable since the last
    /// drain (`None`: nothing new), so a drain scans only from there.
    pending_from: Option<u64>,
    observed: u64,
}

impl InboundObserver {
    /// An empty observer for an SA with or without ESN.
    pub fn new(esn: bool) -> InboundObserver {
        InboundObserver {
            esn,
            top: 0,
            ring: Box::new([0; RING_WORDS]),
            owned: Box::new([0; RING_WORDS]),
            marked: Box::new([0; RING_WORDS]),
            known_from: None,
            pending_from: Some(1),
            observed: 0,
        }
    }

    /// The highest number observed (0: none).
    pub fn top(&self) -> u64 {
        self.top
    }

    /// How many packets were observed.
    pub fn observed(&self) -> u64 {
        self.observed
    }

    /// The full number of a received low half: the field itself without
    /// ESN; with ESN, of the numbers with that low half in the subspace
    /// of `top` and its two neighbours, the nearest to `top` (see the
    /// module docs). `None` for 0 (never sent, RFC 4303 §3.3.3).
    pub fn expand(&self, seq_low: u32) -> Option<u64> {
        if !self.esn {
            return (seq_low != 0).then_some(u64::from(seq_low));
        }
        let th = self.top >> 32;
        let seql = u64::from(seq_low);
        let seq = [th.checked_sub(1), Some(th), th.checked_add(1)]
            .into_iter()
            .flatten()
            .filter(|&h| h <= u64::from(u32::MAX))
            .map(|h| (h << 32) | seql)
            .min_by_key(|&seq| seq.abs_diff(self.top))?;
        (seq != 0).then_some(seq)
    }

    /// Observe a packet's sequence number field: the full number (see
    /// [`expand`](Self::expand)), and whether it is the first packet with
    /// that number (a second one is a retransmission or a replay).
    #[inline]
    pub fn observe(&mut self, seq_low: u32) -> Option<Observed> {
        let seq = self.expand(seq_low)?;
        let first = !self.seen(seq);
        self.observed += 1;
        self.known_from.get_or_insert(seq);
        self.pending(seq);
        self.mark(seq);
        Some(Observed { seq, first })
    }

    /// Whether `seq` was observed (false once it left the window).
    pub fn seen(&self, seq: u64) -> bool {
        self.in_window(seq) && self.ring[word_of(seq)] & bit_of(seq) != 0
    }

    /// This node owns (processes) the first packet with number `seq`: the
    /// number is never marked. (Own only first packets: a number observed
    /// before, when another node owned it, must stay markable so that a
    /// replay of it is refused.)
    pub fn own(&mut self, seq: u64) {
        if self.in_window(seq) {
            self.owned[word_of(seq)] |= bit_of(seq);
        }
    }

    /// Every number in the window observed (here or by others, merged),
    /// or older than what this node knows, but neither owned by this node
    /// nor marked before, ascending; they are marked now. What the replay
    /// window must treat as seen before this node processes a packet.
    pub fn drain_marks(&mut self, out: &mut Vec<u64>) {
        let Some(from) = self.pending_from.take() else {
            return;
        };
        if self.top == 0 {
            return;
        }
        let low = self.top.saturating_sub(OBSERVER_WINDOW - 1).max(1);
        let unknown_below = self.known_from.unwrap_or(0).max(low);
        let mut word = from.max(low) / 64;
        while word <= self.top / 64 {
            let i = (word % RING_WORDS as u64) as usize;
            let unknown = below_mask(word, unknown_below);
            let mut fresh = (self.ring[i] | unknown) & !self.owned[i] & !self.marked[i];
            self.marked[i] |= fresh;
            while fresh != 0 {
                let seq = word * 64 + u64::from(fresh.trailing_zeros());
                if seq >= low {
                    out.push(seq);
                }
                fresh &= fresh - 1;
            }
            word += 1;
        }
    }

    /// Numbers observed elsewhere on this node: by a kernel filter that
    /// dropped, before user space saw them, the packets other nodes own,
    /// and kept the latest number that fell on each of its cells. Each
    /// non-zero cell within [`OBSERVER_WINDOW`] below the highest number
    /// known (this observer's or the cells') is recorded as observed, not
    /// owned, so the next drain marks it. Cells hold 32-bit numbers, so an
    /// ESN observer takes none (the filter passes ESN SAs to user space).
    /// Absorbing the same cells again changes nothing. Returns how many
    /// numbers were new.
    pub fn absorb(&mut self, cells: &[u32]) -> usize {
        if self.esn {
            return 0;
        }
        let high = cells.iter().copied().max().map_or(0, u64::from);
        if high == 0 {
            return 0;
        }
        let top = high.max(self.top);
        let plausible = |seq: u64| seq != 0 && top - seq < OBSERVER_WINDOW;
        let Some(low) = cells
            .iter()
            .map(|&c| u64::from(c))
            .filter(|&s| plausible(s))
            .min()
        else {
            return 0;
        };
        if top > self.top {
            self.slide_to(top);
        }
        // As for a first observed packet: history below it is unknown.
        self.known_from.get_or_insert(low);
        let mut fresh = 0;
        for seq in cells
            .iter()
            .map(|&c| u64::from(c))
            .filter(|&s| plausible(s))
        {
            if !self.seen(seq) {
                fresh += 1;
                self.mark(seq);
            }
        }
        if fresh > 0 {
            self.pending(low);
        }
        fresh
    }

    /// The state to multicast (`ReplayCheckpoint`): the highest number and
    /// the received bits, newest first (bit `i` of word `i / 64` is number
    /// `top - i`).
    pub fn checkpoint(&self) -> (u64, Vec<u64>) {
        let mut words = vec![0u64; (OBSERVER_WINDOW / 64) as usize];
        for i in 0..OBSERVER_WINDOW.min(self.top) {
            if self.seen(self.top - i) {
                words[(i / 64) as usize] |= 1 << (i % 64);
            }
        }
        (self.top, words)
    }

    /// Add another node's observations (a `ReplayCheckpoint`): the union.
    /// It covers `top - 4095 ..= top`, so knowledge reaches down to there
    /// when it joins what this node knew.
    pub fn merge(&mut self, top: u64, words: &[u64]) {
        let covered_from = top.saturating_sub(OBSERVER_WINDOW - 1).max(1);
        let joins = self.known_from.is_none_or(|k| top.saturating_add(1) >= k);
        if top > 0 && joins {
            let k = self
                .known_from
                .map_or(covered_from, |k| k.min(covered_from));
            self.known_from = Some(k);
        }
        for (w, &word) in words.iter().enumerate() {
            for bit in 0..64u64 {
                let i = w as u64 * 64 + bit;
                if word & (1 << bit) != 0 && i < top {
                    self.mark(top - i);
                }
            }
        }
    }

    /// Numbers from `seq` on may have become markable.
    fn pending(&mut self, seq: u64) {
        self.pending_from = Some(self.pending_from.map_or(seq, |p| p.min(seq)));
    }

    /// Record `seq`, sliding the window when it is the new highest.
    fn mark(&mut self, seq: u64) {
        if seq > self.top {
            self.slide_to(seq);
        }
        if self.in_window(seq) {
            self.ring[word_of(seq)] |= bit_of(seq);
        }
    }

    /// Whether `seq` is inside the window below `top`.
    fn in_window(&self, seq: u64) -> bool {
        seq != 0 && seq <= self.top && self.top - seq < OBSERVER_WINDOW
    }

    /// Make `new_top` the highest number: clear the ring words the window
    /// slides onto.
    fn slide_to(&mut self, new_top: u64) {
        let old_word = self.top / 64;
        let new_word = new_top / 64;
        let count = (new_word - old_word).min(RING_WORDS as u64);
        for step in 1..=count {
            let i = ((old_word + step) % RING_WORDS as u64) as usize;
            self.ring[i] = 0;
            self.owned[i] = 0;
            self.marked[i] = 0;
        }
        self.top = new_top;
    }
}

/// The bits of ring word `word` (numbers `word * 64 ..`) below `limit`.
fn below_mask(word: u64, limit: u64) -> u64 {
    let first = word * 64;
    if limit <= first {
        0
    } else if limit - first >= 64 {
        u64::MAX
    } else {
        (1u64 << (limit - first)) - 1
    }
}

fn word_of(seq: u64) -> usize {
    ((seq / 64) % RING_WORDS as u64) as usize
}

fn bit_of(seq: u64) -> u64 {
    1 << (seq % 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbered table: (top before, received low half, expected full).
    #[test]
    fn esn_expansion_table() {
        const W: u64 = OBSERVER_WINDOW;
        let rows: [(u64, u32, Option<u64>); 10] = [
            (0, 1, Some(1)),
            (0, 0, None),
            (10_000, 9_000, Some(9_000)),
            // Far behind: an old packet or a forgery, not the next 2^32.
            (10_000, 5, Some(5)),
            ((1 << 32) - 10, 5, Some((1 << 32) + 5)),
            ((1 << 32) + 10, u32::MAX - 3, Some((1 << 32) - 4)),
            ((1 << 32) + 10, 20, Some((1 << 32) + 20)),
            ((1 << 32) + W, 3, Some((1 << 32) + 3)),
            (0, u32::MAX, Some(u64::from(u32::MAX))),
            ((1 << 32) + 5, 0, Some(1 << 32)),
        ];
        for (row, (top, low, want)) in rows.into_iter().enumerate() {
            let mut obs = InboundObserver::new(true);
            obs.top = top;
            assert_eq!(obs.expand(low), want, "row {row}");
        }
        let plain = InboundObserver::new(false);
        assert_eq!(plain.expand(7), Some(7));
        assert_eq!(plain.expand(0), None);
    }

    /// Marks: observed, not owned, each once, inside the window.
    #[test]
    fn marks_are_observed_not_owned() {
        let mut obs = InboundObserver::new(false);
        for seq in [1u32, 5, 3, 9, 4] {
            obs.observe(seq);
        }
        obs.own(1);
        obs.own(4);
        let mut marks = Vec::new();
        obs.drain_marks(&mut marks);
        assert_eq!(marks, vec![3, 5, 9]);
        marks.clear();
        obs.drain_marks(&mut marks);
        assert!(marks.is_empty(), "each number once");
        obs.observe(70);
        obs.observe(9 + OBSERVER_WINDOW as u32 - 1);
        obs.drain_marks(&mut marks);
        assert_eq!(marks, vec![70, 9 + OBSERVER_WINDOW - 1]);
        assert!(!obs.seen(5));
        assert!(obs.seen(9));
        assert_eq!(obs.observed(), 7);
    }

    /// A node that started observing at 40 marks everything below it, until
    /// a checkpoint from another node tells it what happened there.
    #[test]
    fn unknown_history_is_marked() {
        let mut obs = InboundObserver::new(false);
        obs.observe(40);
        obs.own(40);
        let mut marks = Vec::new();
        obs.drain_marks(&mut marks);
        assert_eq!(marks, (1..40).collect::<Vec<u64>>());
        let mut other = InboundObserver::new(false);
        other.observe(2);
        other.observe(39);
        other.observe(40);
        let (top, words) = other.checkpoint();
        let mut late = InboundObserver::new(false);
        late.observe(41);
        late.own(41);
        late.merge(top, &words);
        marks.clear();
        late.drain_marks(&mut marks);
        assert_eq!(marks, vec![2, 39, 40]);
        // A checkpoint that leaves a gap teaches nothing about the gap.
        let mut gap = InboundObserver::new(false);
        gap.observe(45);
        gap.merge(top, &words);
        marks.clear();
        gap.drain_marks(&mut marks);
        assert_eq!(marks, (1..=45).collect::<Vec<u64>>());
    }

    /// A second packet with a number is not "first"; owning it leaves the
    /// number markable.
    #[test]
    fn replays_stay_markable() {
        let mut obs = InboundObserver::new(false);
        obs.observe(1);
        obs.own(1);
        assert!(obs.observe(8).unwrap().first);
        let again = obs.observe(8).unwrap();
        assert_eq!((again.seq, again.first), (8, false));
        let mut marks = Vec::new();
        obs.drain_marks(&mut marks);
        assert_eq!(marks, vec![8]);
    }

    #[test]
    fn slide_clears_reused_words() {
        let mut obs = InboundObserver::new(false);
        obs.observe(70);
        obs.own(70);
        obs.observe(70 + 64 * RING_WORDS as u32);
        assert!(!obs.seen(70));
        obs.observe(70 + 64 * RING_WORDS as u32 - 1);
        let mut marks = Vec::new();
        obs.drain_marks(&mut marks);
        assert_eq!(
            marks.len(),
            2,
            "the reused words' owned bits are cleared too"
        );
    }

    /// Kernel cells: plausible numbers become markable, each once; zeros,
    /// numbers out of the window and ESN observers take nothing.
    #[test]
    fn absorbed_cells_are_marked_not_owned() {
        let mut obs = InboundObserver::new(false);
        obs.observe(10);
        obs.own(10);
        let mut cells = vec![0u32; 16];
        cells[1] = 11;
        cells[2] = 12;
        cells[3] = 9;
        cells[4] = 20;
        assert_eq!(obs.absorb(&cells), 4);
        assert_eq!(obs.absorb(&cells), 0, "absorbing again adds nothing");
        assert_eq!(obs.top(), 20);
        let mut marks = Vec::new();
        obs.drain_marks(&mut marks);
        let want: Vec<u64> = (1..=9).chain([11, 12, 20]).collect();
        assert_eq!(marks, want, "below 10 unknown; owned 10 is never marked");
        let far = [20 + OBSERVER_WINDOW as u32 + 5, 20];
        assert_eq!(
            obs.absorb(&far),
            1,
            "20 fell out of the window below the new top"
        );
        let mut esn = InboundObserver::new(true);
        assert_eq!(esn.absorb(&cells), 0);
        let mut empty = InboundObserver::new(false);
        assert_eq!(empty.absorb(&[0; 4]), 0);
        assert_eq!(empty.absorb(&[7, 5]), 2);
        marks.clear();
        empty.drain_marks(&mut marks);
        assert_eq!(
            marks,
            (1..=7).filter(|&s| s != 6).collect::<Vec<u64>>(),
            "below 5 unknown"
        );
    }

    #[test]
    fn checkpoint_merge_is_a_union() {
        let mut a = InboundObserver::new(false);
        let mut b = InboundObserver::new(false);
        for seq in 1..=100u32 {
            if seq % 3 == 0 {
                a.observe(seq);
            } else {
                b.observe(seq);
            }
        }
        let (top, words) = a.checkpoint();
        assert_eq!(top, 99);
        b.merge(top, &words);
        assert!((1..=100).all(|seq| b.seen(seq)));
    }
}
