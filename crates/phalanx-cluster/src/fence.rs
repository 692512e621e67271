//! Fencing a node that stopped sending heartbeats: it drops its own
//! inbound share for the arrival times another node may have taken it
//! over.
//!
//! A node that stalls (its process stopped, its CPU taken away) sends
//! no heartbeat; after `suspect_after` every peer that is running takes
//! its inbound share over (`InboundDispatcher`). When it runs again it
//! finds its ring full of frames that arrived meanwhile, still owned by
//! it in its own view, and would process each one a second time: the
//! cluster as a whole would accept those sequence numbers twice. Nothing
//! it receives after the stall can tell it in time what the others did
//! (their messages queue behind the same stall), so it judges from what
//! it sent:
//!
//! - A peer suspects it at the earliest `suspect_after` after it heard
//!   its last heartbeat, so after `S + suspect_after`, `S` the last
//!   heartbeat sent before the gap. The suspecter takes over frames that
//!   *arrived* after that ([`InboundDispatcher::owner_at`](crate::dispatch::InboundDispatcher::owner_at)).
//! - The suspecter hands the share back when it has heard
//!   `REJOIN_HEARTBEATS` heartbeats again, the last of them sent at
//!   `S'`; it hears it before `S' + suspect_after` (the cluster link's
//!   delay is far below that).
//!
//! So a gap longer than `suspect_after` between two heartbeats sent
//! fences the arrivals in `[S + suspect_after, S' + suspect_after)`, or
//! only until every peer that reported before the gap has reported again
//! having heard a heartbeat sent after it (from then on its reports say
//! what it took over: see below), and
//! while no heartbeat has been sent for `suspect_after`, every arrival
//! after the last one's `+ suspect_after` is fenced (the data path may
//! run while the cluster thread is stopped). A fenced packet is dropped
//! and counted (`inbound_fenced`) and its number marked in the replay
//! window like another node's. If nobody took it over (no peer was
//! running), it is lost, never accepted twice.
//!
//! A peer may also stop hearing this node while it sends (heartbeats
//! lost on the link, a peer's socket full). Every node reports with each
//! heartbeat what its detector knows of each peer ([`Hearing`]): the last
//! heartbeat of it heard, whether it takes over its share now, and how
//! often it handed the share back. From a peer whose reports arrive (one
//! within the last `suspect_after / 2`), this node knows:
//!
//! - the peer cannot take its share over before the last heartbeat it
//!   reports heard was sent + `suspect_after`: arrivals from then on are
//!   fenced until a newer report moves that on;
//! - while the peer reports it takes the share over, every arrival from
//!   its last heartbeat heard before that + `suspect_after` is fenced;
//! - when it reports it handed the share back, that spell ends at the
//!   report's arrival here (the hand-back happened before it was sent),
//!   plus a sixth of `suspect_after` (5 ms), the time its data-plane
//!   threads may still take to adopt the hand-back (they take over by
//!   arrival time, but decide with the state they last adopted).
//!
//! A peer that reports takes over only the packets it owns among the
//! members without this node, so only those are fenced for it (the
//! stateless schemes, packet round robin and the hash segments, compute
//! that owner here as the peer does when this node is the only one it
//! takes over from; with the stateful ones every packet is fenced).
//!
//! A peer whose reports stopped arriving is dead or cut off: it is left
//! out, and this node's own detector and quorum take over from there (a
//! cut in both directions makes both sides take over until the minority
//! stands down). A node that has just stalled itself reports nothing
//! heard of the peers it has not heard since (its last heartbeat heard
//! of them is old only because it did not read), so that its report
//! does not make them fence. The cost of the reports is loss: the share
//! a peer takes over, from the last heartbeat of this node its latest
//! report says it heard (up to two report intervals before the one it
//! heard last) + `suspect_after` to its suspicion, and from its
//! hand-back to its report of it arriving here + 5 ms.
//!
//! When the log takes this node out of the base view (a peer's suspicion
//! agreed), every member owns its share by the base view itself, not only
//! the reporting peers that take it over as a silent suspect's. A node
//! that reads the log late (it stalled) decides its backlog under the view
//! before, so from then until it is back in the view its whole share is
//! fenced from the earliest takeover a peer reported (`set_in_view`).
//!
//! [`Hearing`]: crate::codec::Hearing
//!
//! The cluster thread writes, the data-plane threads read, without
//! locks: each spell's `from` is stored before its `until`, the peer
//! slots' fields before `open_from` (release, on every change); a reader
//! loads `open_from` first (acquire). A reader that sees the old
//! `open_from` fences every arrival after the gap's start anyway; every
//! torn read of a spell fences more, never less, or nothing that
//! `open_from` does not.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::codec::HeardPeer;
use crate::limits::REJOIN_HEARTBEATS;
use crate::view::NodeId;

/// Past gaps remembered: frames older than the fourth last gap are long
/// out of every ring.
const SPELLS: usize = 4;

/// Nanoseconds since the epoch of "never" (no heartbeat sent yet).
const NEVER: u64 = u64::MAX;

/// Heartbeats sent whose time is kept, to read the peers' reports: 1.3 s
/// at the default interval. A report of an older one is judged by the
/// oldest kept (fencing more, never less).
const SENT_LOG: usize = 256;

/// Reporting peers kept apart (one slot each); what more report fences
/// every packet.
const PEER_SLOTS: usize = 32;
const _: () = assert!(PEER_SLOTS <= u32::BITS as usize, "slots are bits of a u32");

/// A gap in the heartbeats sent, waiting for the peers' reports.
#[derive(Clone, Debug)]
struct GapWait {
    /// Its spell.
    slot: usize,
    /// The first heartbeat after it.
    first: u64,
    /// When it was found.
    at: Instant,
    /// The peers that reported before it and have not reported hearing
    /// `first` yet.
    waiting: BTreeSet<NodeId>,
}

/// What a peer last reported of this node.
#[derive(Clone, Copy, Debug)]
struct PeerReport {
    /// Its slot in the fence (`None`: all taken).
    slot: Option<usize>,
    /// When the report arrived.
    received: Instant,
    /// The peer cannot take the share over before this (`None`: it never
    /// heard this node, so it cannot).
    earliest: Option<Instant>,
    /// The peer takes the share over from here on, now.
    silent_from: Option<Instant>,
    handbacks: u32,
}

/// One fenced interval of arrival times, `[from, until)` in nanoseconds
/// since the fence's epoch.
#[derive(Debug)]
struct Spell {
    from: AtomicU64,
    until: AtomicU64,
}

impl Spell {
    fn empty() -> Spell {
        Spell {
            from: AtomicU64::new(NEVER),
            until: AtomicU64::new(0),
        }
    }

    fn covers(&self, at: u64) -> bool {
        at >= self.from.load(Ordering::Relaxed) && at < self.until.load(Ordering::Relaxed)
    }
}

/// What one reporting peer may take over: the arrivals from `from` on,
/// and those of the last spell it reported it handed back.
#[derive(Debug)]
struct PeerSlot {
    /// The peer's node id (0: a free slot).
    node: AtomicU64,
    from: AtomicU64,
    spell: Spell,
}

/// Who may have taken over a packet of this node's share that arrived
/// at a given time ([`Fence::takers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takers {
    /// Nobody: this node processes it.
    Nobody,
    /// Any peer (this node sent no heartbeats then).
    Anyone,
    /// The reporting peers of these fence slots, each the packets it owns
    /// among the members without this node ([`Fence::is_among`]).
    Peers(u32),
}

/// The arrival times at which this node must not process its own inbound
/// share. See the module docs.
#[derive(Debug)]
pub struct Fence {
    epoch: Instant,
    /// `suspect_after` in nanoseconds.
    suspect_after: u64,
    /// Every arrival from here on ([`NEVER`]: none yet).
    open_from: AtomicU64,
    /// The last heartbeat sent + `suspect_after`.
    own_from: AtomicU64,
    /// After a gap: the data path waits with its ring until the peers'
    /// reports say what they took over, at most until then.
    uncertain_until: AtomicU64,
    spells: [Spell; SPELLS],
    peers: [PeerSlot; PEER_SLOTS],
    /// Bit `i`: `peers[i]` holds a peer (the data path looks at those
    /// alone, not at every slot per packet).
    occupied: AtomicU32,
}

impl Fence {
    fn new(epoch: Instant, suspect_after: Duration) -> Fence {
        Fence {
            epoch,
            suspect_after: u64::try_from(suspect_after.as_nanos()).unwrap_or(NEVER),
            open_from: AtomicU64::new(NEVER),
            own_from: AtomicU64::new(NEVER),
            uncertain_until: AtomicU64::new(0),
            spells: std::array::from_fn(|_| Spell::empty()),
            peers: std::array::from_fn(|_| PeerSlot {
                node: AtomicU64::new(0),
                from: AtomicU64::new(NEVER),
                spell: Spell::empty(),
            }),
            occupied: AtomicU32::new(0),
        }
    }

    fn nanos(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(NEVER - 1)
    }

    /// Who may have taken over a packet of this node's share that
    /// arrived at `arrival`.
    #[inline]
    pub fn takers(&self, arrival: Instant) -> Takers {
        let open_from = self.open_from.load(Ordering::Acquire);
        let at = self.nanos(arrival);
        if at >= open_from || self.spells.iter().any(|s| s.covers(at)) {
            return Takers::Anyone;
        }
        let mut mask = 0u32;
        let mut occupied = self.occupied.load(Ordering::Relaxed);
        while occupied != 0 {
            let i = occupied.trailing_zeros() as usize;
            occupied &= occupied - 1;
            let p = &self.peers[i];
            if at >= p.from.load(Ordering::Relaxed) || p.spell.covers(at) {
                mask |= 1 << i;
            }
        }
        match mask {
            0 => Takers::Nobody,
            mask => Takers::Peers(mask),
        }
    }

    /// Whether `node` is the peer of one of the slots in `mask`.
    pub fn is_among(&self, mask: u32, node: NodeId) -> bool {
        let id = u64::from(node.0);
        self.peers
            .iter()
            .enumerate()
            .any(|(i, p)| mask & (1 << i) != 0 && p.node.load(Ordering::Relaxed) == id)
    }

    /// Whether the data path should leave its ring unread at `now`: this
    /// node has just found a gap in its heartbeats and waits for its
    /// peers' reports, or its cluster thread has sent no heartbeat for
    /// `suspect_after` (it may be stalled itself, and run again in a
    /// moment: the whole process was, if the data path finds this just
    /// after waking). What arrives meanwhile waits in the ring instead of
    /// being fenced for want of knowledge; the data path waits at most
    /// [`wait_limit`](Self::wait_limit) in a row.
    pub fn uncertain(&self, now: Instant) -> bool {
        let now = self.nanos(now);
        now < self.uncertain_until.load(Ordering::Acquire)
            || now >= self.own_from.load(Ordering::Acquire)
    }

    /// The longest the data path waits in a row while the fence is
    /// [`uncertain`](Self::uncertain) (twice `suspect_after`): then the
    /// cluster thread is stuck, and what arrived is fenced.
    pub fn wait_limit(&self) -> Duration {
        Duration::from_nanos(self.suspect_after.saturating_mul(2))
    }

    /// Whether anyone may have taken over a packet that arrived at
    /// `arrival`.
    pub fn fenced(&self, arrival: Instant) -> bool {
        self.takers(arrival) != Takers::Nobody
    }
}

/// The cluster thread's side: records each heartbeat sent.
#[derive(Debug)]
pub(crate) struct FenceWriter {
    fence: Arc<Fence>,
    suspect_after: Duration,
    last_sent: Option<Instant>,
    next: usize,
    /// The spell whose end is not known yet, and the heartbeats sent
    /// since its gap.
    open: Option<(usize, u32)>,
    /// The last gap, until the peers' reports say what they took over.
    gap_waiting: Option<GapWait>,
    /// Gaps found (for the status).
    gaps: u64,
    /// The last heartbeats sent: counter and time.
    sent_log: VecDeque<(u64, Instant)>,
    reports: BTreeMap<NodeId, PeerReport>,
    /// Spells of arrival times a peer reported it had taken over.
    handbacks: u64,
    /// The spell open while the log holds this node out of the base view.
    removal: Option<usize>,
    /// The log held this node in the base view when last told.
    in_view: bool,
    /// While `removal` is open: the earliest takeover a peer reported
    /// since (its start replaces the estimate the spell opened with).
    removal_from: Option<Instant>,
}

impl FenceWriter {
    pub(crate) fn new(epoch: Instant, suspect_after: Duration) -> FenceWriter {
        FenceWriter {
            fence: Arc::new(Fence::new(epoch, suspect_after)),
            suspect_after,
            last_sent: None,
            next: 0,
            open: None,
            gap_waiting: None,
            gaps: 0,
            sent_log: VecDeque::with_capacity(SENT_LOG),
            reports: BTreeMap::new(),
            handbacks: 0,
            removal: None,
            in_view: false,
            removal_from: None,
        }
    }

    /// The log took this node out of the base view (`in_view` false), or
    /// back in. Out of it, this node's whole share belongs to the others
    /// by the base view itself, not only the part a reporting peer takes
    /// over as a silent suspect's: a node that reads the log late (it
    /// stalled) and decides its backlog under the view before must fence
    /// all of it, from the earliest moment a peer may have taken any over
    /// (the removal followed a suspicion; the peers' own reports of when
    /// they started make that exact once they arrive), until it is back
    /// in the view (as at any view change, the others adopt that at about
    /// the same time).
    ///
    /// A node that was never in the view (a joiner) fences nothing here:
    /// it owned nothing the others could take.
    pub(crate) fn set_in_view(&mut self, now: Instant, in_view: bool) {
        let was = std::mem::replace(&mut self.in_view, in_view);
        match (self.removal, in_view) {
            (None, false) if was => {
                let sa = self.suspect_after;
                let from = self
                    .reports
                    .values()
                    .flat_map(|r| [r.silent_from, r.earliest])
                    .chain([self.last_sent.map(|s| s + sa)])
                    .flatten()
                    .min()
                    .unwrap_or(now);
                let slot = self.take_slot();
                let fence = &*self.fence;
                let spell = &fence.spells[slot];
                spell.from.store(fence.nanos(from), Ordering::Relaxed);
                spell.until.store(NEVER, Ordering::Relaxed);
                self.removal = Some(slot);
                self.removal_from = None;
            }
            (Some(slot), true) => {
                let fence = &*self.fence;
                fence.spells[slot]
                    .until
                    .store(fence.nanos(now), Ordering::Relaxed);
                self.removal = None;
            }
            _ => {}
        }
    }

    /// Times a peer reported it had taken over this node's share and
    /// handed it back (for the status).
    pub(crate) fn handbacks(&self) -> u64 {
        self.handbacks
    }

    /// The fence the data path reads.
    pub(crate) fn fence(&self) -> &Arc<Fence> {
        &self.fence
    }

    /// Gaps longer than `suspect_after` between two heartbeats sent.
    pub(crate) fn gaps(&self) -> u64 {
        self.gaps
    }

    /// Heartbeat `counter` was sent at `now`.
    pub(crate) fn sent(&mut self, now: Instant, counter: u64) {
        if self.sent_log.len() == SENT_LOG {
            self.sent_log.pop_front();
        }
        self.sent_log.push_back((counter, now));
        let gap = self
            .last_sent
            .filter(|&prev| now.saturating_duration_since(prev) > self.suspect_after);
        if let Some(prev) = gap {
            self.gaps += 1;
            let slot = match &mut self.open {
                // Silent again before the peers could hand back: the same
                // spell goes on.
                Some((slot, heard)) => {
                    *heard = 1;
                    *slot
                }
                None => {
                    let slot = self.take_slot();
                    let fence = &*self.fence;
                    let spell = &fence.spells[slot];
                    spell
                        .from
                        .store(fence.nanos(prev + self.suspect_after), Ordering::Relaxed);
                    spell.until.store(NEVER, Ordering::Relaxed);
                    self.open = Some((slot, 1));
                    slot
                }
            };
            // Wait for the peers' reports of this gap (with no peer that
            // reports, none or older nodes, the spell ends by the rule
            // above).
            if !self.reports.is_empty() {
                self.gap_waiting = Some(GapWait {
                    slot,
                    first: counter,
                    at: now,
                    waiting: self.reports.keys().copied().collect(),
                });
                // Until the reports resolve it (at the latest
                // `suspect_after / 2` from now); the data path bounds its
                // own wait.
                let fence = &*self.fence;
                fence.uncertain_until.store(NEVER, Ordering::Release);
            }
        } else if let Some((slot, heard)) = &mut self.open {
            *heard += 1;
            if *heard >= REJOIN_HEARTBEATS {
                let fence = &*self.fence;
                fence.spells[*slot]
                    .until
                    .store(fence.nanos(now + self.suspect_after), Ordering::Relaxed);
                self.open = None;
            }
        }
        self.last_sent = Some(self.last_sent.map_or(now, |prev| prev.max(now)));
        self.end_gap_if_heard(now);
        self.publish(now);
    }

    /// When heartbeat `counter` was sent: `None` for one not sent by this
    /// incarnation (a report about a former one); the oldest kept for an
    /// older one.
    fn sent_at(&self, counter: u64) -> Option<Instant> {
        let &(newest, _) = self.sent_log.back()?;
        if counter > newest {
            return None;
        }
        let &(oldest, oldest_at) = self.sent_log.front()?;
        if counter <= oldest {
            return Some(oldest_at);
        }
        let i = self
            .sent_log
            .partition_point(|&(c, _)| c < counter)
            .min(self.sent_log.len() - 1);
        Some(self.sent_log[i].1)
    }

    /// Peer `from`'s report of this node arrived at `now`.
    pub(crate) fn report(&mut self, now: Instant, from: NodeId, heard: &HeardPeer) {
        let sa = self.suspect_after;
        let earliest = heard.heard.and_then(|k| self.sent_at(k)).map(|s| s + sa);
        // 0: it never took the share over (or last heard only the first
        // heartbeat); the oldest time kept covers both.
        let silent_start = self.sent_at(heard.silent_after).map(|s| s + sa);
        if !self.reports.contains_key(&from) {
            let slot = self.free_slot(from);
            self.reports.insert(
                from,
                PeerReport {
                    slot,
                    received: now,
                    earliest: None,
                    silent_from: None,
                    handbacks: heard.handbacks,
                },
            );
        }
        let entry = self.reports.entry(from).or_insert(PeerReport {
            slot: None,
            received: now,
            earliest: None,
            silent_from: None,
            handbacks: heard.handbacks,
        });
        let mut ended = None;
        if heard.silent {
            if let Some(start) = silent_start {
                entry.silent_from = Some(entry.silent_from.map_or(start, |f| f.min(start)));
            }
        } else {
            ended = entry
                .silent_from
                .take()
                .or_else(|| silent_start.filter(|_| heard.handbacks != entry.handbacks));
        }
        if let Some(slot) = self.removal {
            // A report of a takeover that started (now, or before the
            // hand-back it reports), never the "none" of counter 0.
            let started = match heard.silent {
                true => silent_start,
                false => ended,
            }
            .filter(|_| heard.silent_after != 0);
            if let Some(start) = started {
                let from = self.removal_from.map_or(start, |f| f.min(start));
                self.removal_from = Some(from);
                let fence = &*self.fence;
                fence.spells[slot]
                    .from
                    .store(fence.nanos(from), Ordering::Relaxed);
            }
        }
        entry.handbacks = heard.handbacks;
        entry.received = now;
        entry.earliest = earliest;
        let slot = entry.slot;
        if let Some(gap) = &mut self.gap_waiting {
            if heard.heard.is_some_and(|k| k >= gap.first) {
                gap.waiting.remove(&from);
            }
        }
        self.end_gap_if_heard(now);
        if let Some(start) = ended {
            self.handbacks += 1;
            let until = now + sa / 6;
            match slot {
                Some(i) => {
                    let fence = &*self.fence;
                    let spell = &fence.peers[i].spell;
                    spell.from.store(fence.nanos(start), Ordering::Relaxed);
                    spell.until.store(fence.nanos(until), Ordering::Relaxed);
                }
                None => self.close_spell(start, until),
            }
        }
        self.publish(now);
    }

    /// A free slot for peer `node`'s reports (`None`: all taken).
    fn free_slot(&self, node: NodeId) -> Option<usize> {
        let fence = &*self.fence;
        let occupied = fence.occupied.load(Ordering::Relaxed);
        let i = (!occupied).trailing_zeros() as usize;
        let slot = fence.peers.get(i)?;
        slot.from.store(NEVER, Ordering::Relaxed);
        slot.spell.from.store(NEVER, Ordering::Relaxed);
        slot.spell.until.store(0, Ordering::Relaxed);
        slot.node.store(u64::from(node.0), Ordering::Relaxed);
        fence.occupied.store(occupied | 1 << i, Ordering::Relaxed);
        Some(i)
    }

    /// The peers whose reports are kept.
    pub(crate) fn reporters(&self) -> Vec<NodeId> {
        self.reports.keys().copied().collect()
    }

    /// Cancels the last gap's spell once every peer that reported before
    /// the gap has reported hearing a heartbeat sent after it (its slot
    /// says what it took over, the arrivals of the gap included), and at
    /// the latest `suspect_after / 2` after the gap: a peer that sent no
    /// report since is dead or cut off (it took nothing over, or quorum
    /// decides), one whose reports do not show the new heartbeats yet
    /// does not hear this node, and its slot fences from the last one it
    /// heard. The data path stops waiting.
    fn end_gap_if_heard(&mut self, now: Instant) {
        let sa = self.suspect_after;
        let Some(gap) = &mut self.gap_waiting else {
            return;
        };
        if now.saturating_duration_since(gap.at) >= sa / 2 {
            gap.waiting.clear();
        }
        if !gap.waiting.is_empty() {
            return;
        }
        let slot = gap.slot;
        let fence = &*self.fence;
        let spell = &fence.spells[slot];
        spell
            .until
            .store(spell.from.load(Ordering::Relaxed), Ordering::Relaxed);
        fence.uncertain_until.store(0, Ordering::Release);
        if self.open.is_some_and(|(open, _)| open == slot) {
            self.open = None;
        }
        self.gap_waiting = None;
    }

    /// Peer `peer` left: its reports no longer count.
    pub(crate) fn forget(&mut self, peer: NodeId) {
        if let Some(gap) = &mut self.gap_waiting {
            gap.waiting.remove(&peer);
        }
        if let Some(slot) = self.reports.remove(&peer).and_then(|r| r.slot) {
            let fence = &*self.fence;
            fence.occupied.fetch_and(!(1 << slot), Ordering::Relaxed);
            let p = &fence.peers[slot];
            p.node.store(0, Ordering::Relaxed);
            p.from.store(NEVER, Ordering::Relaxed);
        }
    }

    /// The slot for a new spell: the oldest, but never the gap's spell
    /// whose end is not known yet.
    fn take_slot(&mut self) -> usize {
        for _ in 0..2 {
            let busy = self.open.is_some_and(|(slot, _)| slot == self.next)
                || self.removal == Some(self.next);
            if busy {
                self.next = (self.next + 1) % SPELLS;
            }
        }
        let slot = self.next;
        self.next = (self.next + 1) % SPELLS;
        if self.gap_waiting.as_ref().is_some_and(|g| g.slot == slot) {
            self.gap_waiting = None;
            self.fence.uncertain_until.store(0, Ordering::Release);
        }
        slot
    }

    /// A spell `[from, until)` that is over.
    fn close_spell(&mut self, from: Instant, until: Instant) {
        let slot = self.take_slot();
        let fence = &*self.fence;
        let spell = &fence.spells[slot];
        spell.from.store(fence.nanos(from), Ordering::Relaxed);
        spell.until.store(fence.nanos(until), Ordering::Relaxed);
    }

    /// Every arrival from the earliest moment a peer may take over the
    /// share, as far as this node knows at `now`, is fenced (for that
    /// peer, in its slot); `open_from` last.
    fn publish(&self, now: Instant) {
        let sa = self.suspect_after;
        let fence = &*self.fence;
        let mut open_from = self.last_sent.map(|s| s + sa);
        fence.own_from.store(
            open_from.map_or(NEVER, |t| fence.nanos(t)),
            Ordering::Release,
        );
        for r in self.reports.values() {
            let recent = now.saturating_duration_since(r.received) <= sa / 2;
            let from = r.silent_from.or(r.earliest).filter(|_| recent);
            match r.slot {
                Some(i) => fence.peers[i]
                    .from
                    .store(from.map_or(NEVER, |t| fence.nanos(t)), Ordering::Relaxed),
                None => open_from = open_from.into_iter().chain(from).min(),
            }
        }
        fence.open_from.store(
            open_from.map_or(NEVER, |t| fence.nanos(t)),
            Ordering::Release,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Sends the writer's next heartbeat at `at`.
    fn send(w: &mut FenceWriter, at: Instant) {
        let counter = w.sent_log.back().map_or(0, |&(c, _)| c + 1);
        w.sent(at, counter);
    }

    #[test]
    fn nothing_is_fenced_while_heartbeats_go_out() {
        let t0 = Instant::now();
        let mut w = FenceWriter::new(t0, 30 * MS);
        assert!(!w.fence().fenced(t0 + 100 * MS), "no heartbeat yet");
        for i in 0..20 {
            send(&mut w, t0 + i * 5 * MS);
        }
        let f = w.fence();
        assert!(!f.fenced(t0), "before the heartbeats");
        assert!(!f.fenced(t0 + 95 * MS + 29 * MS));
        assert!(f.fenced(t0 + 95 * MS + 30 * MS), "no heartbeat for 30 ms");
        assert_eq!(w.gaps(), 0);
    }

    #[test]
    fn a_gap_fences_from_its_start_to_the_third_heartbeat_after() {
        let t0 = Instant::now();
        let mut w = FenceWriter::new(t0, 30 * MS);
        send(&mut w, t0);
        send(&mut w, t0 + 5 * MS);
        // Stopped for 100 ms.
        send(&mut w, t0 + 105 * MS);
        let f = Arc::clone(w.fence());
        assert!(!f.fenced(t0 + 34 * MS), "the peers still heard it");
        assert!(f.fenced(t0 + 35 * MS), "a peer may have suspected it");
        assert!(f.fenced(t0 + 104 * MS), "the backlog of the stall");
        assert!(f.fenced(t0 + 200 * MS), "the end is not known yet");
        send(&mut w, t0 + 110 * MS);
        send(&mut w, t0 + 115 * MS);
        send(&mut w, t0 + 120 * MS);
        assert!(
            f.fenced(t0 + 144 * MS),
            "peers hand back before the third + 30 ms"
        );
        assert!(!f.fenced(t0 + 145 * MS));
        assert_eq!(w.gaps(), 1);
    }

    #[test]
    fn a_second_gap_before_the_hand_back_extends_the_spell() {
        let t0 = Instant::now();
        let mut w = FenceWriter::new(t0, 30 * MS);
        send(&mut w, t0);
        send(&mut w, t0 + 100 * MS);
        send(&mut w, t0 + 105 * MS);
        send(&mut w, t0 + 200 * MS);
        send(&mut w, t0 + 205 * MS);
        let f = Arc::clone(w.fence());
        assert!(f.fenced(t0 + 150 * MS), "the first spell never ended");
        send(&mut w, t0 + 210 * MS);
        send(&mut w, t0 + 215 * MS);
        assert!(f.fenced(t0 + 239 * MS) && !f.fenced(t0 + 240 * MS));
        assert!(f.fenced(t0 + 30 * MS) && !f.fenced(t0 + 29 * MS));
    }

    #[test]
    fn old_spells_are_reused() {
        let t0 = Instant::now();
        let mut w = FenceWriter::new(t0, 30 * MS);
        let mut t = t0;
        send(&mut w, t);
        for _ in 0..(SPELLS + 2) {
            t += 100 * MS;
            for k in 0..3 {
                send(&mut w, t + k * 5 * MS);
            }
        }
        let f = w.fence();
        assert!(f.fenced(t - 20 * MS), "the last gap");
        assert!(!f.fenced(t0 + 30 * MS), "the first gap is forgotten");
        assert_eq!(w.gaps(), SPELLS as u64 + 2);
    }

    fn heard(heard: Option<u64>, silent: bool, silent_after: u64, handbacks: u32) -> HeardPeer {
        HeardPeer {
            node: NodeId(1),
            heard,
            silent,
            silent_after,
            handbacks,
        }
    }

    /// A peer that stops hearing this node, takes its share over and
    /// hands it back: fenced for that peer alone, from its last heartbeat
    /// heard + 30 ms until its report of the hand-back arrives + 5 ms.
    #[test]
    fn a_peers_reports_fence_for_that_peer() {
        let t0 = Instant::now();
        let mut w = FenceWriter::new(t0, 30 * MS);
        let p = NodeId(7);
        for i in 0..10u32 {
            send(&mut w, t0 + i * 5 * MS);
        }
        // Heard up to heartbeat 2 (sent at 10 ms), still.
        w.report(t0 + 44 * MS, p, &heard(Some(2), false, 0, 0));
        let f = Arc::clone(w.fence());
        assert_eq!(f.takers(t0 + 39 * MS), Takers::Nobody);
        let Takers::Peers(mask) = f.takers(t0 + 40 * MS) else {
            panic!("not fenced for the peer");
        };
        assert!(f.is_among(mask, p) && !f.is_among(mask, NodeId(8)));
        // It takes over, then hands back at 60 ms.
        w.report(t0 + 46 * MS, p, &heard(Some(2), true, 2, 0));
        send(&mut w, t0 + 50 * MS);
        w.report(t0 + 60 * MS, p, &heard(Some(11), false, 2, 1));
        assert!(matches!(f.takers(t0 + 64 * MS), Takers::Peers(_)));
        assert_eq!(f.takers(t0 + 65 * MS), Takers::Nobody);
        assert_eq!(w.handbacks(), 1);
        // Its reports stop (dead or cut off): it no longer counts.
        for i in 11..=20u32 {
            send(&mut w, t0 + i * 5 * MS);
        }
        assert_eq!(f.takers(t0 + 100 * MS), Takers::Nobody);
        w.forget(p);
        assert_eq!(f.takers(t0 + 45 * MS), Takers::Nobody);
    }

    /// A report about a former incarnation (a counter this one never
    /// sent) fences nothing.
    #[test]
    fn reports_of_a_former_incarnation_are_ignored() {
        let t0 = Instant::now();
        let mut w = FenceWriter::new(t0, 30 * MS);
        send(&mut w, t0);
        w.report(t0 + MS, NodeId(2), &heard(Some(5000), true, 4000, 3));
        assert_eq!(w.fence().takers(t0 + 2 * MS), Takers::Nobody);
    }

    /// After a gap, the reports of every peer that reported before it,
    /// once they heard a heartbeat sent after it, end the gap's spell:
    /// from then on they say what they took over.
    #[test]
    fn reports_after_a_gap_end_its_spell() {
        let t0 = Instant::now();
        let mut w = FenceWriter::new(t0, 30 * MS);
        let p = NodeId(7);
        send(&mut w, t0); // heartbeat 0
        w.report(t0 + MS, p, &heard(Some(0), false, 0, 0));
        send(&mut w, t0 + 100 * MS); // heartbeat 1, after a gap
        send(&mut w, t0 + 100 * MS); // 2
        send(&mut w, t0 + 105 * MS); // 3: the default end, 135 ms
        let f = Arc::clone(w.fence());
        assert_eq!(f.takers(t0 + 120 * MS), Takers::Anyone);
        w.report(t0 + 102 * MS, p, &heard(Some(0), true, 0, 0));
        assert_eq!(f.takers(t0 + 120 * MS), Takers::Anyone, "still waiting");
        w.report(t0 + 106 * MS, p, &heard(Some(3), false, 0, 1));
        assert!(matches!(
            f.takers(t0 + 105 * MS),
            Takers::Anyone | Takers::Peers(_)
        ));
        assert_eq!(
            f.takers(t0 + 120 * MS),
            Takers::Nobody,
            "ended at 106 ms + 5"
        );
    }

    /// A second gap before the spell of the first ended: reports of a
    /// heartbeat between the two do not end it, reports of one after the
    /// second do.
    #[test]
    fn a_second_gap_waits_for_reports_after_it() {
        let t0 = Instant::now();
        let mut w = FenceWriter::new(t0, 30 * MS);
        let p = NodeId(7);
        send(&mut w, t0); // 0
        w.report(t0 + MS, p, &heard(Some(0), false, 0, 0));
        send(&mut w, t0 + 100 * MS); // 1, after a gap
        send(&mut w, t0 + 105 * MS); // 2
        send(&mut w, t0 + 200 * MS); // 3, after a second gap
        let f = Arc::clone(w.fence());
        w.report(t0 + 201 * MS, p, &heard(Some(2), false, 0, 0));
        assert_eq!(f.takers(t0 + 150 * MS), Takers::Anyone, "between the gaps");
        assert!(f.uncertain(t0 + 202 * MS));
        w.report(t0 + 206 * MS, p, &heard(Some(3), false, 0, 0));
        assert_eq!(f.takers(t0 + 150 * MS), Takers::Nobody, "p took nothing");
        assert!(!f.uncertain(t0 + 207 * MS));
    }
}
