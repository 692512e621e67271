//! The outbound sequencer of one SA on one node: counts every packet of
//! the stream (owned or not), hands the owner its ESP sequence number
//! (RFC 4303 §3.3.3) from the leased blocks, and heals its counter from
//! other nodes' checkpoints.
//!
//! # Counter
//! `count(fingerprint)` returns `c`, the stream's packet counter. Every
//! node counts every packet, so all nodes hold the same `c` for the same
//! packet unless one missed a packet. The counter runs through one lease
//! lineage (see `lease`): `c = lineage + position`, and position `p` maps
//! to number `start + (p * stride - offset)` of the lineage block holding
//! it. It jumps only when the node enters another lineage: a new
//! generation (view change, applied from the log) or a takeover block
//! (its failure detector suspects a member).
//!
//! # Assignment
//! `assign(c)` returns the smallest number `s` of the lineage's blocks
//! with `s >=` the number of `c`, `s >` the last number this node sent,
//! and `(s - block.start) % n == class` (the node's index in the block's
//! view). That rule alone makes `(SPI, s)` unique across the cluster: the
//! classes of one block are distinct and blocks never overlap.
//!
//! - [`Spacing::Dense`] (packet round robin): stride 1. Packet `c` goes to
//!   member `c % n`, whose class is `c % n` because lineages start at
//!   multiples of `n`: with agreeing counters the owner sends exactly the
//!   number of its position, and no number is wasted.
//! - [`Spacing::Strided`] (every other scheme): stride `n`, so packet `c`
//!   has `n` numbers, one per class. Nodes then stay level with the
//!   counter however unevenly the scheme spreads the packets (a node that
//!   owns more than `1/n` of the packets would otherwise run ahead of the
//!   others, out of the peer's replay window), at the cost of using the
//!   space `n` times faster.
//!
//! # Healing
//! Each node multicasts `Checkpoint { lineage, c, fingerprint }` now and
//! then. A node in the same lineage that counted the packet with that
//! fingerprint at a lower `c'` advances by `c - c'`; counters only move
//! forward, so all converge on the most advanced. The ring remembers the
//! raw local count of each fingerprint, so a packet is never healed twice.
//!
//! Nodes enter a lineage when their data paths adopt the change, some
//! packets apart, and each counts from the lineage's start from its own
//! entry, so the one that entered first is ahead by the packets between.
//! Its checkpoints after its 1st, 2nd, 4th, ... 512th packet there
//! (`entry_checkpoint`, over the heartbeat channel only) heal the others
//! within a few packets instead of at the next periodic checkpoint.

use crate::lease::{BlockKind, LeaseBlock, SaLeases};
use crate::limits::{ENTRY_CHECKPOINTS_UNTIL, FINGERPRINT_RING, MAX_HEAL, STATE_RESTART_POSITIONS};
use crate::view::NodeId;

/// How lineage positions map to sequence numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spacing {
    /// One number per packet (packet round robin).
    Dense,
    /// One number per packet and class: `n` per packet.
    Strided,
}

/// What a suspicion did to the sequencer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TakeoverOutcome {
    /// Switched to the suspect's takeover block.
    Entered,
    /// Already in a takeover lineage: the second takeover waits for the
    /// log (the node keeps its block, which stays safe, and the dispatch
    /// view shrinks at once).
    Deferred,
    /// The suspect has no class in the current block, or there is none.
    NotApplicable,
    /// No takeover block is reserved (the space is exhausted).
    NoBlock,
}

/// A checkpoint of this node's counter, to multicast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterMark {
    /// The lineage the counter runs in.
    pub lineage: u64,
    /// The counter of the last packet counted.
    pub c: u64,
    /// That packet's fingerprint.
    pub fingerprint: u64,
}

impl CounterMark {
    /// The checkpoint of outbound SA `spi` this mark makes.
    pub fn of(self, spi: u32) -> crate::codec::Checkpoint {
        crate::codec::Checkpoint {
            spi,
            lineage: self.lineage,
            c: self.c,
            fingerprint: self.fingerprint,
        }
    }
}

/// The fields of a block the fast path needs.
#[derive(Clone, Copy, Debug)]
struct Slot {
    lineage: u64,
    offset: u64,
    start: u64,
    end: u64,
    n: u64,
    class: Option<u64>,
}

impl Slot {
    fn of(block: &LeaseBlock, local: NodeId) -> Slot {
        Slot {
            lineage: block.lineage,
            offset: block.offset,
            start: block.start,
            end: block.end,
            n: block.view.len() as u64,
            class: block.class_of(local).map(|c| c as u64),
        }
    }
}

/// The first number `>= low` of the slot's class, inside the slot.
#[inline]
fn first_of_class(slot: &Slot, low: u64) -> Option<u64> {
    let class = slot.class?;
    let from = low.max(slot.start);
    let phase = (from - slot.start) % slot.n;
    let s = from.checked_add((class + slot.n - phase) % slot.n)?;
    (s <= slot.end).then_some(s)
}

/// When a lineage's last block is half used, computed once per change of
/// the leases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RequestPlan {
    /// What the plan was computed for: lineage, `max_end`, generation and
    /// the regular lineage's end (a successor inside a run moves only that).
    key: (u64, u64, u64, u64),
    /// The last block's end (`None`: nothing to ask for).
    after_end: Option<u64>,
    /// Numbers per lineage position.
    stride: u64,
    /// Ask once the lineage position, in numbers, reaches this...
    position: u64,
    /// ... or the last number sent reaches this.
    sent: u64,
}

/// One remembered packet: local raw count and fingerprint.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    raw: u64,
    fingerprint: u64,
}

/// Sequence numbering of one outbound SA on one node. See the module docs.
#[derive(Clone, Debug)]
pub struct OutboundSequencer {
    local: NodeId,
    spacing: Spacing,
    /// Packets counted since creation; never jumps.
    raw: u64,
    /// `raw` when the current lineage was entered.
    raw_at_entry: u64,
    /// `c` of the packet before the first one of the lineage.
    base: u64,
    /// Healing so far in this lineage.
    shift: u64,
    /// The lineage (0: none yet).
    lineage: u64,
    /// The lease generation entered (0: none).
    generation: u64,
    /// The suspect whose takeover lineage this is.
    takeover: Option<NodeId>,
    /// The last number sent (0: none).
    last_sent: u64,
    /// `after_end` of the last lease request made.
    requested: u64,
    /// The block of the last assignment.
    cache: Option<Slot>,
    /// When to ask for the next block, for the leases as they were.
    request_plan: Option<RequestPlan>,
    ring: Box<[Seen]>,
    since_checkpoint: u64,
    last_fingerprint: u64,
    heals: u64,
}

impl OutboundSequencer {
    /// A sequencer for node `local`, counting from 1 outside any lineage.
    pub fn new(local: NodeId, spacing: Spacing) -> OutboundSequencer {
        OutboundSequencer {
            local,
            spacing,
            raw: 0,
            raw_at_entry: 0,
            base: 0,
            shift: 0,
            lineage: 0,
            generation: 0,
            takeover: None,
            last_sent: 0,
            requested: 0,
            cache: None,
            request_plan: None,
            ring: vec![Seen::default(); FINGERPRINT_RING].into_boxed_slice(),
            since_checkpoint: 0,
            last_fingerprint: 0,
            heals: 0,
        }
    }

    /// Count one packet of the stream; returns its counter `c`.
    #[inline]
    pub fn count(&mut self, fingerprint: u64) -> u64 {
        self.raw += 1;
        let slot = (self.raw % FINGERPRINT_RING as u64) as usize;
        self.ring[slot] = Seen {
            raw: self.raw,
            fingerprint,
        };
        self.since_checkpoint += 1;
        self.last_fingerprint = fingerprint;
        self.counter()
    }

    /// The counter of the last packet counted (`lineage - 1` right after
    /// entering a lineage).
    pub fn counter(&self) -> u64 {
        self.c_of(self.raw)
    }

    /// The lineage the counter runs in (0: none).
    pub fn lineage(&self) -> u64 {
        self.lineage
    }

    /// The lease generation entered (0: none).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The suspect whose takeover block this node sends from.
    pub fn takeover(&self) -> Option<NodeId> {
        self.takeover
    }

    /// The last number sent (0: none).
    pub fn last_sent(&self) -> u64 {
        self.last_sent
    }

    /// Times the counter was advanced by a checkpoint.
    pub fn heals(&self) -> u64 {
        self.heals
    }

    /// The sequence number for the packet counted as `c`, when this node
    /// owns it; `None` when no leased number is left for this node (the
    /// next block is not granted yet, or this node has no class).
    #[inline]
    pub fn assign(&mut self, c: u64, leases: &SaLeases) -> Option<u64> {
        if let Some(s) = self.assign_cached(c) {
            return Some(s);
        }
        let (block, target) = self.target(c, leases)?;
        let mut low = target.max(self.last_sent + 1);
        let mut block = block;
        loop {
            if let Some(s) = first_of_class(&Slot::of(block, self.local), low) {
                self.cache = Some(Slot::of(block, self.local));
                self.last_sent = s;
                return Some(s);
            }
            block = leases.successor(block)?;
            low = low.max(block.start);
        }
    }

    /// The fast path: `c` maps into the block of the last assignment.
    /// Granted blocks never change, so the cached copy stays valid.
    #[inline]
    fn assign_cached(&mut self, c: u64) -> Option<u64> {
        let slot = self.cache.as_ref().filter(|s| s.lineage == self.lineage)?;
        let stride = match self.spacing {
            Spacing::Dense => 1,
            Spacing::Strided => slot.n,
        };
        let q = c.checked_sub(self.lineage)?.checked_mul(stride)?;
        let inside = q >= slot.offset && q - slot.offset <= slot.end - slot.start;
        if !inside {
            return None;
        }
        let target = slot.start + (q - slot.offset);
        let s = first_of_class(slot, target.max(self.last_sent + 1))?;
        self.last_sent = s;
        Some(s)
    }

    /// The block and number that counter `c` maps to.
    fn target<'a>(&self, c: u64, leases: &'a SaLeases) -> Option<(&'a LeaseBlock, u64)> {
        let position = c.checked_sub(self.lineage).filter(|_| self.lineage != 0)?;
        let any = leases.last_of(self.lineage)?;
        let q = position.checked_mul(self.stride(any))?;
        let block = leases.block_at(self.lineage, q)?;
        Some((block, block.start + (q - block.offset)))
    }

    /// Numbers per lineage position.
    fn stride(&self, block: &LeaseBlock) -> u64 {
        match self.spacing {
            Spacing::Dense => 1,
            Spacing::Strided => block.view.len() as u64,
        }
    }

    /// The lineage position of counter `c` (0 before the lineage).
    fn position(&self, c: u64) -> u64 {
        c.saturating_sub(self.lineage)
    }

    /// The block the next packet falls in, or the lineage's last block
    /// when the counter ran past the granted ones.
    pub fn current_block<'a>(&self, leases: &'a SaLeases) -> Option<&'a LeaseBlock> {
        if self.lineage == 0 {
            return None;
        }
        let last = leases.last_of(self.lineage)?;
        let q = self
            .position(self.counter().saturating_add(1))
            .saturating_mul(self.stride(last));
        leases.block_at(self.lineage, q).or(Some(last))
    }

    /// Enter the current generation's regular lineage if the leases moved
    /// to a new one since; true when the counter jumped.
    pub fn enter_generation(&mut self, leases: &SaLeases) -> bool {
        if leases.generation() == self.generation {
            return false;
        }
        self.generation = leases.generation();
        self.takeover = None;
        match leases.regular_lineage() {
            Some(lineage) => self.enter_lineage(lineage),
            None => self.enter_lineage(0),
        }
        true
    }

    /// The failure detector suspects `suspect`: switch to its takeover
    /// block (reserved for the current regular block) at once.
    pub fn take_over(&mut self, suspect: NodeId, leases: &SaLeases) -> TakeoverOutcome {
        if self.takeover.is_some() {
            return TakeoverOutcome::Deferred;
        }
        let Some(current) = self.current_block(leases) else {
            return TakeoverOutcome::NotApplicable;
        };
        if current.kind != BlockKind::Regular || !current.view.contains(suspect) {
            return TakeoverOutcome::NotApplicable;
        }
        let Some(block) = leases.takeover_for(current.start, suspect) else {
            return TakeoverOutcome::NoBlock;
        };
        let lineage = block.lineage;
        self.enter_lineage(lineage);
        self.takeover = Some(suspect);
        TakeoverOutcome::Entered
    }

    /// Start counting in `lineage` (0: none) from the next packet on.
    fn enter_lineage(&mut self, lineage: u64) {
        // Lineage ids are unique within one SA lifetime only: forget the
        // cached block rather than trust an id.
        self.cache = None;
        self.lineage = lineage;
        self.raw_at_entry = self.raw;
        self.base = lineage.saturating_sub(1);
        self.shift = 0;
        self.since_checkpoint = 0;
    }

    /// `c` of the packet counted as raw count `raw`.
    fn c_of(&self, raw: u64) -> u64 {
        self.base
            .saturating_add(raw - self.raw_at_entry)
            .saturating_add(self.shift)
    }

    /// Another node counted the packet with `fingerprint` as `c` in
    /// `lineage`; advance if this node counted it lower. Returns the
    /// advance (0: nothing to heal, or the packet is unknown here).
    pub fn heal(&mut self, lineage: u64, c: u64, fingerprint: u64) -> u64 {
        if lineage != self.lineage || lineage == 0 {
            return 0;
        }
        let Some(raw) = self.find(fingerprint) else {
            return 0;
        };
        let mine = self.c_of(raw);
        if c <= mine || c - mine > MAX_HEAL {
            return 0;
        }
        let advance = c - mine;
        self.shift += advance;
        self.heals += 1;
        advance
    }

    /// The most recent raw count of `fingerprint` in this lineage.
    fn find(&self, fingerprint: u64) -> Option<u64> {
        let oldest = self
            .raw
            .saturating_sub(FINGERPRINT_RING as u64 - 1)
            .max(self.raw_at_entry + 1);
        self.ring
            .iter()
            .filter(|seen| seen.fingerprint == fingerprint)
            .map(|seen| seen.raw)
            .filter(|&raw| raw >= oldest && raw <= self.raw)
            .max()
    }

    /// The end of the lineage's last block when the counter (or the last
    /// number sent) is past its middle and no successor was asked for
    /// yet: the `after_end` of the `LeaseRequest` to multicast. Cheap on
    /// every packet: the thresholds are computed once per lease change.
    #[inline]
    pub fn lease_request(&mut self, leases: &SaLeases) -> Option<u64> {
        if self.lineage == 0 {
            return None;
        }
        let key = (
            self.lineage,
            leases.max_end(),
            leases.generation(),
            leases.regular_end(),
        );
        let plan = match self.request_plan {
            Some(plan) if plan.key == key => plan,
            _ => {
                let plan = self.plan_request(key, leases);
                self.request_plan = Some(plan);
                plan
            }
        };
        let after_end = plan.after_end?;
        if self.requested == after_end {
            return None;
        }
        let q = self.position(self.counter()).saturating_mul(plan.stride);
        if q >= plan.position || self.last_sent >= plan.sent {
            self.requested = after_end;
            return Some(after_end);
        }
        None
    }

    /// The request thresholds for the leases as they are now.
    fn plan_request(&self, key: (u64, u64, u64, u64), leases: &SaLeases) -> RequestPlan {
        let none = RequestPlan {
            key,
            after_end: None,
            stride: 1,
            position: u64::MAX,
            sent: u64::MAX,
        };
        let Some(last) = leases.last_of(self.lineage) else {
            return none;
        };
        if last.end >= leases.limit() {
            return none;
        }
        let half = last.len() / 2;
        RequestPlan {
            key,
            after_end: Some(last.end),
            stride: self.stride(last),
            position: last.offset.saturating_add(half),
            sent: last.start.saturating_add(half),
        }
    }

    /// Whether the packet counted last is at one of the lineage positions
    /// where the stateful schemes' stream state starts over
    /// ([`STATE_RESTART_POSITIONS`]).
    pub fn at_state_restart(&self) -> bool {
        self.lineage != 0 && STATE_RESTART_POSITIONS.contains(&self.position(self.counter()))
    }

    /// A checkpoint of the counter right after entering a lineage: after
    /// the 1st, 2nd, 4th, ... packet counted in it, up to the
    /// [`ENTRY_CHECKPOINTS_UNTIL`]th (see [`CounterMark`]).
    pub fn entry_checkpoint(&self) -> Option<CounterMark> {
        let counted = self.raw - self.raw_at_entry;
        if self.lineage == 0 || !counted.is_power_of_two() || counted > ENTRY_CHECKPOINTS_UNTIL {
            return None;
        }
        Some(CounterMark {
            lineage: self.lineage,
            c: self.counter(),
            fingerprint: self.last_fingerprint,
        })
    }

    /// A checkpoint of the counter when `every` packets were counted since
    /// the last one, or when `force`d (the periodic tick) and at least one
    /// was.
    pub fn checkpoint(&mut self, every: u64, force: bool) -> Option<CounterMark> {
        let due = force || self.since_checkpoint >= every;
        if self.since_checkpoint == 0 || !due || self.lineage == 0 {
            return None;
        }
        self.since_checkpoint = 0;
        Some(CounterMark {
            lineage: self.lineage,
            c: self.counter(),
            fingerprint: self.last_fingerprint,
        })
    }
}

#[cfg(test)]
mod tests;
