//! Adopting a new [`SharedState`]: SAs added and removed, new lease
//! generations, view changes (takeover marks), takeovers, heals, ticks.

use std::sync::Arc;

use super::{
    push, push_checkpoint, DataPathReport, InboundStream, NodeDataPath, OutboundStream,
    SharedState, TakeoverOutcome, REPLAY_CHECKPOINT_TICKS, TRANSFER_REPLAY_TICKS,
};
use crate::codec::ReplayCheckpoint;
use crate::dispatch::{Direction, DispatchScheme, Dispatcher};
use crate::observer::InboundObserver;

impl NodeDataPath {
    /// Adopt the cluster thread's latest published state (cheap when
    /// unchanged). Call it once per batch, before the batch's packets.
    pub fn update(&mut self, state: &SharedState) {
        if self.version == Some(state.version) || state.local != self.local {
            return;
        }
        self.version = Some(state.version);
        if state.head.generation != 0 && !state.head.ready {
            let report = DataPathReport::Adopted {
                version: state.version,
            };
            push(&mut self.reports, &mut self.stats, report);
        }
        if let Some(fence) = &state.fence {
            if self.fence.as_ref().is_none_or(|f| !Arc::ptr_eq(f, fence)) {
                self.fence = Some(Arc::clone(fence));
            }
        }
        self.checkpoint_every = state.checkpoint_every.max(1);
        self.adopt_sas(state);
        if state.head.generation != self.generation {
            self.new_generation(state.head.generation);
        }
        self.enter_generations();
        self.merge_replays();
        if self.dispatcher.view() != &state.head.view {
            self.set_view(state);
        }
        if !self.inbound_dispatcher.is_over(
            &state.head.inbound_view,
            &state.head.silent,
            &state.head.silent_since,
        ) {
            self.set_inbound_view(state);
        }
        self.take_over(state);
        self.heal();
        self.on_tick(state);
    }

    /// Streams for new SAs, none for deleted ones.
    fn adopt_sas(&mut self, state: &SharedState) {
        let local = self.local;
        let spacing = self.spacing;
        let scheme = self.dispatcher.scheme();
        for (&spi, shared) in &state.outbound {
            let stream = self
                .outbound
                .entry(spi)
                .or_insert_with(|| OutboundStream::new(local, scheme, spacing, shared));
            if !Arc::ptr_eq(&stream.shared, shared) {
                // An SA deleted and added again (its leases start over)
                // is a new SA: a new sequencer.
                if shared.incarnation != stream.shared.incarnation {
                    *stream = OutboundStream::new(local, scheme, spacing, shared);
                    self.dispatcher.forget_stream(Direction::Outbound, spi);
                }
                stream.shared = Arc::clone(shared);
            }
        }
        let mut renewed = Vec::new();
        for (&spi, shared) in &state.inbound {
            let stream = self.inbound.entry(spi).or_insert_with(|| InboundStream {
                shared: Arc::clone(shared),
                observer: InboundObserver::new(shared.descriptor.esn),
                merged: 0,
                armed: false,
                traffic: false,
            });
            if !Arc::ptr_eq(&stream.shared, shared) {
                if shared.incarnation != stream.shared.incarnation {
                    stream.observer = InboundObserver::new(shared.descriptor.esn);
                    stream.merged = 0;
                    renewed.push(spi);
                }
                stream.shared = Arc::clone(shared);
            }
        }
        for spi in renewed {
            self.forget_inbound(spi);
        }
        let gone_out: Vec<u32> = self
            .outbound
            .keys()
            .filter(|spi| !state.outbound.contains_key(spi))
            .copied()
            .collect();
        for spi in gone_out {
            self.outbound.remove(&spi);
            self.dispatcher.forget_stream(Direction::Outbound, spi);
        }
        let gone_in: Vec<u32> = self
            .inbound
            .keys()
            .filter(|spi| !state.inbound.contains_key(spi))
            .copied()
            .collect();
        for spi in gone_in {
            self.inbound.remove(&spi);
            self.forget_inbound(spi);
        }
    }

    /// A new base view: dispatch state restarts on every node at the same
    /// log position, so a joiner's empty tables agree with the others'.
    fn new_generation(&mut self, generation: u64) {
        self.generation = generation;
        for &spi in self.outbound.keys() {
            self.dispatcher.forget_stream(Direction::Outbound, spi);
        }
        let inbound: Vec<u32> = self.inbound.keys().copied().collect();
        for spi in inbound {
            self.forget_inbound(spi);
        }
    }

    /// Inbound SA `spi`'s dispatch state starts over.
    fn forget_inbound(&mut self, spi: u32) {
        self.inbound_dispatcher.forget_stream(spi);
    }

    /// Sequencers move to their SA's current lease generation.
    fn enter_generations(&mut self) {
        for stream in self.outbound.values_mut() {
            if let Some(leases) = stream.shared.leases.as_deref() {
                if stream.sequencer.enter_generation(leases) {
                    self.stats.generations += 1;
                }
            }
        }
    }

    /// The others' observer checkpoints join this node's observations.
    fn merge_replays(&mut self) {
        for stream in self.inbound.values_mut() {
            if let Some((serial, replay)) = &stream.shared.replay {
                if *serial > stream.merged {
                    stream.observer.merge(replay.top, &replay.words);
                    stream.merged = *serial;
                }
            }
        }
    }

    /// Dispatch outbound packets over the new view.
    fn set_view(&mut self, state: &SharedState) {
        self.dispatcher.set_view(state.head.view.clone());
        self.active = state.head.view.contains(self.local);
    }

    /// Dispatch inbound ESP over the new inbound view and silent
    /// suspects; the observed numbers of every inbound SA become due as
    /// marks for its replay window.
    fn set_inbound_view(&mut self, state: &SharedState) {
        let head = &state.head;
        self.inbound_dispatcher
            .set(&head.inbound_view, &head.silent, &head.silent_since);
        self.inbound_active = head.inbound_view.contains(self.local);
        let scheme = self.inbound_dispatcher.scheme();
        if matches!(
            scheme,
            DispatchScheme::PacketRoundRobin | DispatchScheme::HashSegments { .. }
        ) {
            let others = head.inbound_view.without(&[self.local]);
            self.without_me = Some(Dispatcher::new(scheme, others));
        }
        for stream in self.inbound.values_mut() {
            stream.armed = true;
        }
    }

    /// Newly suspected members: every outbound SA switches to the
    /// suspect's takeover block.
    fn take_over(&mut self, state: &SharedState) {
        let fresh: Vec<_> = state
            .head
            .suspects
            .iter()
            .filter(|s| !self.suspects.contains(s))
            .copied()
            .collect();
        self.suspects = state.head.suspects.clone();
        for suspect in fresh {
            for stream in self.outbound.values_mut() {
                let Some(leases) = stream.shared.leases.as_deref() else {
                    continue;
                };
                match stream.sequencer.take_over(suspect, leases) {
                    TakeoverOutcome::Entered => self.stats.takeovers += 1,
                    TakeoverOutcome::Deferred => self.stats.deferred_takeovers += 1,
                    TakeoverOutcome::NotApplicable | TakeoverOutcome::NoBlock => {}
                }
            }
            if self.active {
                let report = DataPathReport::TakeoverApplied { suspect };
                push(&mut self.reports, &mut self.stats, report);
            }
        }
    }

    /// Heal the counters from the others' checkpoints.
    fn heal(&mut self) {
        for stream in self.outbound.values_mut() {
            let noted = stream.noted;
            for note in stream.shared.notes.iter().filter(|n| n.serial > noted) {
                let advance = stream
                    .sequencer
                    .heal(note.lineage, note.c, note.fingerprint);
                if advance > 0 {
                    self.stats.heals += 1;
                }
                stream.noted = note.serial;
            }
        }
    }

    /// Periodic work: counter checkpoints of every SA with traffic,
    /// observer checkpoints (by the view's first member: periodically, and
    /// on each of a few ticks after a state transfer, for the joiner), the
    /// counters.
    fn on_tick(&mut self, state: &SharedState) {
        let first = state.head.replay_sender;
        if state.head.transfers != self.transfers {
            self.transfers = state.head.transfers;
            if first {
                self.replay_ticks_left = TRANSFER_REPLAY_TICKS;
            }
        }
        if state.tick == self.tick {
            return;
        }
        self.tick = state.tick;
        self.tick_checkpoints();
        let all = self.replay_ticks_left > 0;
        self.replay_ticks_left = self.replay_ticks_left.saturating_sub(1);
        let periodic = first && self.tick % REPLAY_CHECKPOINT_TICKS == 0;
        self.tick_replays(all, periodic);
        if self.stats != self.reported {
            self.reported = self.stats;
            push(
                &mut self.reports,
                &mut self.stats,
                DataPathReport::Stats(self.reported),
            );
        }
    }

    fn tick_checkpoints(&mut self) {
        for (&spi, stream) in &mut self.outbound {
            if let Some(mark) = stream.sequencer.checkpoint(self.checkpoint_every, true) {
                push_checkpoint(&mut self.reports, &mut self.stats, spi, mark);
            }
        }
    }

    fn tick_replays(&mut self, all: bool, periodic: bool) {
        for (&spi, stream) in &mut self.inbound {
            if !(all || (periodic && stream.traffic)) {
                continue;
            }
            stream.traffic = false;
            let (top, words) = stream.observer.checkpoint();
            let replay = ReplayCheckpoint { spi, top, words };
            push(
                &mut self.reports,
                &mut self.stats,
                DataPathReport::ReplayCheckpoint(replay),
            );
            self.stats.replay_checkpoints += 1;
        }
    }
}
