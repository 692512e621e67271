//! Sequence-number leases: the replicated lease table of the outbound SAs.
//!
//! The table is a deterministic state machine. Every member applies the
//! same operations in the order of the agreed log (membership changes,
//! `SaAdd`, `LeaseRequest`, ...), so every member computes the same grants
//! without a coordinator; a node that joins gets the table in its state
//! transfer.
//!
//! # Blocks
//! The sequence space of each outbound SA (RFC 4303 §2.2: 32 bits, or 64
//! with ESN, here at most 2^48 - 1 because the node-partitioned IV keeps
//! 48 bits) is cut into blocks. A block carries the view it was granted
//! for; a member's *class* in a block is its index in that view, and a
//! member may send only the numbers `s` of the block with
//! `(s - start) % view.len() == class`. Blocks never overlap, every block
//! lies above every block granted before it, and no member has two classes
//! in one block, so no `(SPI, sequence number)` pair can be sent twice by
//! two nodes, whatever they believe about each other; a node never sends a
//! number twice itself because it only moves forward.
//!
//! # Lineages
//! Blocks form lineages. A *generation* (a new view, or a new SA) starts a
//! regular lineage with one block at `[align(max_end + 1), ...]`; a
//! `LeaseRequest { after_end }` naming the last block of a lineage grants
//! its successor with the same view (first request wins, duplicates are
//! ignored). A counter runs through a lineage continuously: position `q`
//! of the lineage is number `start + (q - offset)` of the block whose
//! `offset..offset + len` holds `q`. Block starts are aligned to multiples
//! of the view size and lengths are multiples of it, so position and
//! number agree modulo `n` across the gaps between blocks.
//!
//! # Runs and takeover blocks
//! Regular blocks come in *runs*: the head of a run (a generation's first
//! block, or a successor when the run is full) is granted above
//! everything, and room for [`LEASE_RUN_BLOCKS`]` - 1` successors is kept
//! free right after it; a `LeaseRequest` for the run's last block grants
//! the next block there, so the numbers of a regular lineage continue
//! without a gap inside a run. For each member X of the head's view the
//! table reserves a takeover block `T(X)` above the whole run, whose view
//! is the head's view without X: a node whose failure detector suspects X
//! switches from whichever block of the run it is in to `T(X)` at once,
//! with no message. X never has a class in `T(X)`, so even a falsely
//! suspected X, still sending from the run, cannot collide. Each takeover
//! block heads a lineage of its own. Every grant lies above every block
//! granted before it, except a successor inside its run, which lies above
//! its lineage's blocks and below its run's takeover blocks; no two
//! blocks ever overlap.

use std::collections::BTreeMap;

use crate::limits::{
    LEASE_REGULAR_KEPT, LEASE_RUN_BLOCKS, LEASE_TAKEOVER_KEPT, MAX_PARTITIONED_SEQ, MAX_SEQ_32,
};
use crate::view::{NodeId, View};

/// What a block is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockKind {
    /// A block of the generation's regular lineage.
    Regular,
    /// A takeover block (or a successor of one) for when the given member
    /// is suspected.
    Takeover(NodeId),
}

/// One granted block of sequence numbers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseBlock {
    /// First number (at least 1; a multiple of the view size).
    pub start: u64,
    /// Last number, inclusive.
    pub end: u64,
    /// The members with a class in this block; the epoch is the SA's lease
    /// generation.
    pub view: View,
    /// Regular or takeover.
    pub kind: BlockKind,
    /// The lineage: the start of its first block.
    pub lineage: u64,
    /// Lineage positions before this block (the lengths of its
    /// predecessors).
    pub offset: u64,
    /// For the head of a takeover lineage: the start of the run head (the
    /// regular block whose run it backs up). For a regular block: the
    /// start of the head of its run (its own start for a head; 0 in a
    /// table from before runs, read as its own start). 0 otherwise.
    pub backs: u64,
}

impl LeaseBlock {
    /// How many numbers the block holds.
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }

    /// Never true: a block holds at least one number.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// `node`'s class in this block: its index in the block's view.
    pub fn class_of(&self, node: NodeId) -> Option<usize> {
        self.view.index_of(node)
    }

    /// Whether `node` may send number `seq` from this block.
    pub fn may_send(&self, node: NodeId, seq: u64) -> bool {
        let n = self.view.len() as u64;
        match self.class_of(node) {
            Some(class) if (self.start..=self.end).contains(&seq) => {
                (seq - self.start) % n == class as u64
            }
            _ => false,
        }
    }

    /// Whether two blocks share a number.
    pub fn overlaps(&self, other: &LeaseBlock) -> bool {
        self.start <= other.end && other.start <= self.end
    }
}

/// A block granted by one table operation, for events and logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The outbound SA.
    pub spi: u32,
    /// The block.
    pub block: LeaseBlock,
}

/// The leases of one outbound SA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaLeases {
    esn: bool,
    generation: u64,
    max_end: u64,
    exhausted: bool,
    /// The end of the regular lineage's last block (0: none). A successor
    /// inside a run does not move `max_end`; this moves with every grant
    /// of the regular lineage (derived from `blocks`).
    regular_end: u64,
    /// The current generation's live blocks, ascending.
    blocks: Vec<LeaseBlock>,
}

impl SaLeases {
    /// Leases rebuilt from a state transfer; `None` unless the blocks
    /// ascend without overlap, lie at or below `max_end` and inside the
    /// SA's space, and each has a non-empty view.
    pub fn from_parts(
        esn: bool,
        generation: u64,
        max_end: u64,
        exhausted: bool,
        blocks: Vec<LeaseBlock>,
    ) -> Option<SaLeases> {
        let regular_end = blocks
            .iter()
            .filter(|b| b.kind == BlockKind::Regular)
            .map(|b| b.end)
            .max()
            .unwrap_or(0);
        let leases = SaLeases {
            esn,
            generation,
            max_end,
            exhausted,
            regular_end,
            blocks,
        };
        let ordered = leases.blocks.windows(2).all(|w| w[0].end < w[1].start);
        let sane = leases
            .blocks
            .iter()
            .all(|b| b.start >= 1 && b.start <= b.end && b.end <= max_end && !b.view.is_empty());
        (ordered && sane && max_end <= leases.limit()).then_some(leases)
    }

    /// Whether the SA uses ESN (RFC 4303 §2.2.1).
    pub fn esn(&self) -> bool {
        self.esn
    }

    /// Counts the generations: a new one starts with every view change.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The highest number granted so far, in any block ever.
    pub fn max_end(&self) -> u64 {
        self.max_end
    }

    /// The end of the current regular lineage's last block (0: none).
    pub fn regular_end(&self) -> u64 {
        self.regular_end
    }

    /// True once a grant found no room left in the sequence space: the SA
    /// must be rekeyed (RFC 4303 §3.3.3: the counter must not cycle).
    pub fn is_exhausted(&self) -> bool {
        self.exhausted
    }

    /// The current generation's blocks, ascending.
    pub fn blocks(&self) -> &[LeaseBlock] {
        &self.blocks
    }

    /// The highest number this SA may ever use.
    pub fn limit(&self) -> u64 {
        if self.esn {
            MAX_PARTITIONED_SEQ
        } else {
            MAX_SEQ_32
        }
    }

    /// The current generation's regular lineage.
    pub fn regular_lineage(&self) -> Option<u64> {
        self.blocks
            .iter()
            .find(|b| b.kind == BlockKind::Regular)
            .map(|b| b.lineage)
    }

    /// The block of `lineage` that holds lineage position `position`.
    pub fn block_at(&self, lineage: u64, position: u64) -> Option<&LeaseBlock> {
        self.blocks
            .iter()
            .find(|b| b.lineage == lineage && b.offset <= position && position - b.offset < b.len())
    }

    /// The block that follows `block` in its lineage, once granted.
    pub fn successor(&self, block: &LeaseBlock) -> Option<&LeaseBlock> {
        let next = block.offset + block.len();
        self.blocks
            .iter()
            .find(|b| b.lineage == block.lineage && b.offset == next)
    }

    /// The last granted block of `lineage`.
    pub fn last_of(&self, lineage: u64) -> Option<&LeaseBlock> {
        self.blocks
            .iter()
            .filter(|b| b.lineage == lineage)
            .max_by_key(|b| b.offset)
    }

    /// The takeover block reserved for the run of regular block
    /// `regular_start` for when `suspect` fails.
    pub fn takeover_for(&self, regular_start: u64, suspect: NodeId) -> Option<&LeaseBlock> {
        let head = self.run_head_of(regular_start);
        self.takeovers_backing(head)
            .find(|b| b.kind == BlockKind::Takeover(suspect))
    }

    /// The takeover blocks reserved for the run of regular block
    /// `regular_start`.
    pub fn takeovers_of(&self, regular_start: u64) -> impl Iterator<Item = &LeaseBlock> {
        self.takeovers_backing(self.run_head_of(regular_start))
    }

    /// The takeover lineage heads backing the run headed at `head`.
    fn takeovers_backing(&self, head: u64) -> impl Iterator<Item = &LeaseBlock> {
        self.blocks
            .iter()
            .filter(move |b| b.kind != BlockKind::Regular && b.backs == head && b.offset == 0)
    }

    /// The start of the head of the run of the regular block starting at
    /// `regular_start` (itself when it is unknown).
    fn run_head_of(&self, regular_start: u64) -> u64 {
        self.blocks
            .iter()
            .find(|b| b.kind == BlockKind::Regular && b.start == regular_start)
            .map_or(regular_start, run_head)
    }

    /// Start a new generation for `view`: a fresh regular block above
    /// everything granted, with its takeover blocks.
    fn new_generation(&mut self, ctx: &mut GrantContext<'_>, view: &View) {
        self.generation += 1;
        self.blocks.clear();
        self.regular_end = 0;
        let view = View::new(self.generation, view.members().iter().copied());
        if let Some(head) = self.grant(ctx, &view, BlockKind::Regular, None, 0, 0) {
            self.reserve_run(ctx, &head);
        }
    }

    /// Keep room for the successors of run head `head` right after it
    /// (less when the space ends sooner: the takeover blocks must still
    /// fit), then reserve the run's takeover blocks above that room.
    fn reserve_run(&mut self, ctx: &mut GrantContext<'_>, head: &LeaseBlock) {
        let len = head.len();
        let n = head.view.len() as u64;
        // The takeover blocks: n of at most lease_len + n numbers each,
        // plus their alignment.
        let takeovers = n.saturating_mul(ctx.lease_len.saturating_add(2 * n));
        let free = self
            .limit()
            .saturating_sub(head.end)
            .saturating_sub(takeovers);
        let room = (LEASE_RUN_BLOCKS - 1)
            .saturating_mul(len)
            .min(free / len * len);
        self.max_end = self.max_end.max(head.end.saturating_add(room));
        self.reserve_takeovers(ctx, head);
    }

    /// The successor of regular block `block` right after it, inside its
    /// run; `None` when the run is full (or the room was cut short).
    fn grant_in_run(
        &mut self,
        ctx: &mut GrantContext<'_>,
        block: &LeaseBlock,
        offset: u64,
    ) -> Option<LeaseBlock> {
        let head = run_head(block);
        let len = block.len();
        let mut ceiling = head.saturating_add(LEASE_RUN_BLOCKS.saturating_mul(len));
        ceiling = ceiling.min(self.limit().saturating_add(1));
        if let Some(lowest) = self.takeovers_backing(head).map(|b| b.start).min() {
            ceiling = ceiling.min(lowest);
        }
        let start = block.end.checked_add(1)?;
        let end = start.checked_add(len - 1)?;
        if end >= ceiling || self.blocks.iter().any(|b| b.start <= end && start <= b.end) {
            return None;
        }
        let next = LeaseBlock {
            start,
            end,
            view: block.view.clone(),
            kind: BlockKind::Regular,
            lineage: block.lineage,
            offset,
            backs: head,
        };
        self.max_end = self.max_end.max(end);
        self.regular_end = end;
        self.insert(ctx, next.clone());
        Some(next)
    }

    /// Another lineage of the replicated state (the other side of a
    /// partition) may have granted, and used, numbers up to `high`. Raise
    /// the floor above them; when a block this table still holds could
    /// reach down to them, start a new generation above. True when it did.
    fn raise_floor(&mut self, ctx: &mut GrantContext<'_>, view: &View, high: u64) -> bool {
        let high = high.min(self.limit());
        let conflict = self.blocks.iter().any(|b| b.start <= high);
        self.max_end = self.max_end.max(high);
        if conflict {
            self.new_generation(ctx, view);
        }
        conflict
    }

    /// Grant the successor of the last block of a lineage; false when
    /// `after_end` names no block, or one that already has a successor.
    fn grant_successor(&mut self, ctx: &mut GrantContext<'_>, after_end: u64) -> bool {
        let Some(block) = self.blocks.iter().find(|b| b.end == after_end).cloned() else {
            return false;
        };
        if self.successor(&block).is_some() {
            return false;
        }
        let offset = block.offset + block.len();
        let in_run = match block.kind {
            BlockKind::Regular => self.grant_in_run(ctx, &block, offset),
            BlockKind::Takeover(_) => None,
        };
        if in_run.is_none() {
            let next = self.grant(ctx, &block.view, block.kind, Some(block.lineage), offset, 0);
            if let Some(next) = next.filter(|b| b.kind == BlockKind::Regular) {
                self.reserve_run(ctx, &next);
            }
        }
        self.prune();
        true
    }

    /// One takeover block per member of `regular`'s view.
    fn reserve_takeovers(&mut self, ctx: &mut GrantContext<'_>, regular: &LeaseBlock) {
        for &suspect in regular.view.members() {
            let view = regular.view.without(&[suspect]);
            if view.is_empty() {
                continue;
            }
            let kind = BlockKind::Takeover(suspect);
            self.grant(ctx, &view, kind, None, 0, regular.start);
        }
    }

    /// Grant one block above `max_end` for `view` (`backs`: see
    /// [`LeaseBlock::backs`]; a regular block granted here heads a run,
    /// and backs itself). Its start is aligned to
    /// the view size and its length a multiple of it (so lineage positions
    /// and numbers agree modulo `n`); the last block of the space may be
    /// shorter. `None` once the space is used up.
    fn grant(
        &mut self,
        ctx: &mut GrantContext<'_>,
        view: &View,
        kind: BlockKind,
        lineage: Option<u64>,
        offset: u64,
        backs: u64,
    ) -> Option<LeaseBlock> {
        let n = view.len() as u64;
        if n == 0 {
            return None;
        }
        let len = ctx.lease_len.div_ceil(n).checked_mul(n)?;
        let start = self
            .max_end
            .checked_add(1)
            .and_then(|s| s.checked_next_multiple_of(n))
            .filter(|&s| s <= self.limit());
        let Some(start) = start else {
            self.exhausted = true;
            return None;
        };
        let end = start.saturating_add(len - 1).min(self.limit());
        let block = LeaseBlock {
            start,
            end,
            view: view.clone(),
            kind,
            lineage: lineage.unwrap_or(start),
            offset,
            backs: match kind {
                BlockKind::Regular => start,
                BlockKind::Takeover(_) => backs,
            },
        };
        self.max_end = end;
        if kind == BlockKind::Regular {
            self.regular_end = end;
        }
        self.insert(ctx, block.clone());
        Some(block)
    }

    /// Record a granted block (the blocks stay ascending) and report it.
    fn insert(&mut self, ctx: &mut GrantContext<'_>, block: LeaseBlock) {
        let at = self.blocks.partition_point(|b| b.start < block.start);
        self.blocks.insert(at, block.clone());
        ctx.out.push(Grant {
            spi: ctx.spi,
            block,
        });
    }

    /// Forget blocks no node with an agreeing counter can need: regular
    /// blocks but the last few, takeover lineages backing a forgotten
    /// regular block that nobody entered (no successor was asked for), and
    /// old blocks of long takeover lineages.
    fn prune(&mut self) {
        let mut regular: Vec<u64> = self
            .blocks
            .iter()
            .filter(|b| b.kind == BlockKind::Regular)
            .map(|b| b.start)
            .collect();
        let dropped = regular.len().saturating_sub(LEASE_REGULAR_KEPT);
        let kept_regular = regular.split_off(dropped);
        let in_use: Vec<u64> = self
            .blocks
            .iter()
            .filter(|b| b.kind != BlockKind::Regular && b.offset > 0)
            .map(|b| b.lineage)
            .collect();
        let kept_runs: Vec<u64> = self
            .blocks
            .iter()
            .filter(|b| b.kind == BlockKind::Regular && kept_regular.contains(&b.start))
            .map(run_head)
            .collect();
        let heads_kept: Vec<u64> = self
            .blocks
            .iter()
            .filter(|b| {
                b.kind != BlockKind::Regular && b.offset == 0 && kept_runs.contains(&b.backs)
            })
            .map(|b| b.lineage)
            .collect();
        let last_offsets = self.last_offsets();
        self.blocks.retain(|b| match b.kind {
            BlockKind::Regular => kept_regular.contains(&b.start),
            BlockKind::Takeover(_) => {
                let live = in_use.contains(&b.lineage) || heads_kept.contains(&b.lineage);
                live && recent(b, &last_offsets, LEASE_TAKEOVER_KEPT)
            }
        });
    }

    /// Per lineage, the offsets of its blocks (ascending).
    fn last_offsets(&self) -> BTreeMap<u64, Vec<u64>> {
        let mut map: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for block in &self.blocks {
            map.entry(block.lineage).or_default().push(block.offset);
        }
        map
    }
}

/// The start of the head of regular block `block`'s run.
fn run_head(block: &LeaseBlock) -> u64 {
    if block.backs == 0 {
        block.start
    } else {
        block.backs
    }
}

/// Whether `block` is among the last `keep` blocks of its lineage.
fn recent(block: &LeaseBlock, offsets: &BTreeMap<u64, Vec<u64>>, keep: usize) -> bool {
    offsets.get(&block.lineage).is_none_or(|all| {
        let newer = all.iter().filter(|&&o| o > block.offset).count();
        newer < keep
    })
}

/// What one grant operation needs besides the SA.
struct GrantContext<'a> {
    spi: u32,
    lease_len: u64,
    out: &'a mut Vec<Grant>,
}

/// The replicated lease table: every outbound SA's leases and the view
/// new generations are granted for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseTable {
    lease_len: u64,
    view: View,
    sas: BTreeMap<u32, SaLeases>,
}

impl LeaseTable {
    /// An empty table granting blocks of `lease_len` numbers (at least 1;
    /// rounded up to a multiple of each block's view size).
    pub fn new(lease_len: u64) -> LeaseTable {
        LeaseTable {
            lease_len: lease_len.max(1),
            view: View::default(),
            sas: BTreeMap::new(),
        }
    }

    /// A table rebuilt from a state transfer.
    pub fn restore(lease_len: u64, view: View, sas: BTreeMap<u32, SaLeases>) -> LeaseTable {
        LeaseTable {
            lease_len: lease_len.max(1),
            view,
            sas,
        }
    }

    /// The block length asked for.
    pub fn lease_len(&self) -> u64 {
        self.lease_len
    }

    /// The view new generations are granted for.
    pub fn view(&self) -> &View {
        &self.view
    }

    /// The leases of outbound SA `spi`.
    pub fn sa(&self, spi: u32) -> Option<&SaLeases> {
        self.sas.get(&spi)
    }

    /// Every outbound SA's leases, by SPI.
    pub fn sas(&self) -> &BTreeMap<u32, SaLeases> {
        &self.sas
    }

    /// The view changed: every SA starts a new generation for `view`.
    pub fn set_view(&mut self, view: View, out: &mut Vec<Grant>) {
        self.view = view;
        for (&spi, sa) in &mut self.sas {
            let mut ctx = GrantContext {
                spi,
                lease_len: self.lease_len,
                out,
            };
            sa.new_generation(&mut ctx, &self.view);
        }
    }

    /// A new outbound SA gets its first generation; false (nothing
    /// granted) when `spi` is already known.
    pub fn add_sa(&mut self, spi: u32, esn: bool, out: &mut Vec<Grant>) -> bool {
        if self.sas.contains_key(&spi) {
            return false;
        }
        let mut sa = SaLeases {
            esn,
            generation: 0,
            max_end: 0,
            exhausted: false,
            regular_end: 0,
            blocks: Vec::new(),
        };
        let mut ctx = GrantContext {
            spi,
            lease_len: self.lease_len,
            out,
        };
        sa.new_generation(&mut ctx, &self.view);
        self.sas.insert(spi, sa);
        true
    }

    /// Forget an SA (deleted); false when unknown.
    pub fn remove_sa(&mut self, spi: u32) -> bool {
        self.sas.remove(&spi).is_some()
    }

    /// Partition merge: another lineage of the state may have granted and
    /// used SA `spi`'s numbers up to `high`; nothing this table grants
    /// from now on goes that low, and when one of its current blocks
    /// could, the SA starts a new generation above (true).
    pub fn raise_floor(&mut self, spi: u32, high: u64, out: &mut Vec<Grant>) -> bool {
        self.with_sa(spi, out, |sa, ctx, view| sa.raise_floor(ctx, view, high))
    }

    /// `LeaseRequest { spi, after_end }`: grant the successor of the block
    /// ending at `after_end`, unless another request did already (or the
    /// block is gone: an older generation). True when something was
    /// granted.
    pub fn request(&mut self, spi: u32, after_end: u64, out: &mut Vec<Grant>) -> bool {
        self.with_sa(spi, out, |sa, ctx, _| sa.grant_successor(ctx, after_end))
    }

    /// `f` on SA `spi` with a grant context writing to `out` and the
    /// current view; false when the SA is not in the table.
    fn with_sa(
        &mut self,
        spi: u32,
        out: &mut Vec<Grant>,
        f: impl FnOnce(&mut SaLeases, &mut GrantContext<'_>, &View) -> bool,
    ) -> bool {
        let Some(sa) = self.sas.get_mut(&spi) else {
            return false;
        };
        let mut ctx = GrantContext {
            spi,
            lease_len: self.lease_len,
            out,
        };
        f(sa, &mut ctx, &self.view)
    }
}

#[cfg(test)]
mod tests;
