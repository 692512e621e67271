//! What drives an IKE SA besides messages: the task queue, its timers
//! (retransmission, liveness, lifetimes, retries) and how it ends.

use std::time::{Duration, Instant};

use crate::counters::Counter;
use crate::events::SaEvent;
use crate::ike_sa::window::retransmit_timeout;
use crate::ike_sa::{Ctx, IkeSa, Pending, State, Task};
use crate::limits::{MAX_QUEUED_REQUESTS, MESSAGE_ID_REKEY_THRESHOLD};
use crate::timers::{ChildTimer, IkeTimer, TimerTable};

impl IkeSa {
    /// Queues work; starts it if the window is free.
    pub(crate) fn push_task(&mut self, ctx: &mut Ctx<'_>, task: Task) {
        if self.tasks.contains(&task) {
            return;
        }
        if self.tasks.len() >= MAX_QUEUED_REQUESTS {
            ctx.count(Counter::QueueFull);
            return;
        }
        self.tasks.push_back(task);
        self.pump(ctx);
    }

    /// Queues work after a delay (RFC 7296 §2.25: no immediate retry).
    pub(crate) fn delay_task(&mut self, ctx: &mut Ctx<'_>, task: Task, wait: Duration) {
        let at = crate::timers::after(ctx.now, wait);
        self.delayed.push((at, task));
        let next = self.delayed.iter().map(|(t, _)| *t).min().unwrap_or(at);
        self.timers.set(IkeTimer::Retry, next);
    }

    /// Starts queued work while the window has room (RFC 7296 §2.3).
    pub(crate) fn pump(&mut self, ctx: &mut Ctx<'_>) {
        if self.window.next_request_id >= MESSAGE_ID_REKEY_THRESHOLD
            && self.is_established()
            && !self.tasks.contains(&Task::RekeyIke { retries: 0 })
        {
            // RFC 7296 §2.2: rekey before Message IDs run out.
            self.tasks.push_front(Task::RekeyIke { retries: 0 });
        }
        while self.window.has_room(ctx.limits.window_size) {
            let ready = match self.state {
                State::Established => true,
                State::Rekeyed => matches!(self.tasks.front(), Some(Task::DeleteIke)),
                _ => false,
            };
            if !ready {
                return;
            }
            let Some(task) = self.next_startable().and_then(|i| self.tasks.remove(i)) else {
                return;
            };
            self.start_task(ctx, task);
        }
    }

    /// The first queued task that may start beside the requests in
    /// flight. With a window above one several exchanges run at once;
    /// these rules keep them from crossing: rekeying or deleting the IKE
    /// SA runs alone, and waits at the head of the queue until nothing is
    /// outstanding; work on a Child SA waits while another request works
    /// on the same one.
    fn next_startable(&self) -> Option<usize> {
        let alone = |p: &Pending| p.rekeys_ike() || matches!(p, Pending::DeleteIke);
        if self.window.any_pending(alone) {
            return None;
        }
        for (i, task) in self.tasks.iter().enumerate() {
            if matches!(task, Task::RekeyIke { .. } | Task::DeleteIke) {
                return self.window.is_idle().then_some(i);
            }
            if !self.crosses(task) {
                return Some(i);
            }
        }
        None
    }

    /// Whether `task` works on what an outstanding request works on.
    fn crosses(&self, task: &Task) -> bool {
        self.window.any_pending(|p| match (task, p) {
            (Task::CreateChild { child, .. }, p) if p.child_offer().is_some() => p
                .child_offer()
                .is_some_and(|offer| offer.rekey_of.is_none() && offer.config == *child),
            (Task::RekeyChild { spi_in, .. }, p) if p.child_offer().is_some() => p
                .child_offer()
                .is_some_and(|offer| offer.rekey_of == Some(*spi_in)),
            (Task::RekeyChild { spi_in, .. }, Pending::DeleteChildren(spis)) => {
                spis.contains(spi_in)
            }
            (Task::DeleteChildren { spis }, p) if p.child_offer().is_some() => p
                .child_offer()
                .is_some_and(|offer| offer.rekey_of.is_some_and(|old| spis.contains(&old))),
            (Task::DeleteChildren { spis }, Pending::DeleteChildren(sent)) => {
                spis.iter().any(|spi| sent.contains(spi))
            }
            (Task::Dpd, Pending::Informational) => true,
            _ => false,
        })
    }

    /// Starts one task; some turn out to be moot and send nothing.
    fn start_task(&mut self, ctx: &mut Ctx<'_>, task: Task) {
        match task {
            Task::CreateChild {
                child,
                trigger,
                retries,
                group,
            } => self.start_create_child(ctx, &child, trigger, retries, group),
            Task::RekeyChild { spi_in, retries } => self.start_rekey_child(ctx, spi_in, retries),
            Task::DeleteChildren { spis } => self.start_delete_children(ctx, spis),
            Task::RekeyIke { retries } => self.start_ike_rekey(ctx, retries),
            Task::DeleteIke => self.start_delete_ike(ctx),
            Task::Dpd => self.start_dpd(ctx),
            Task::CheckPath => self.start_path_check(ctx),
        }
    }

    /// The earliest timer of the SA and its children.
    pub(crate) fn next_timeout(&self) -> Option<Instant> {
        let children = self.children.iter().filter_map(|c| c.timers.next());
        self.timers.next().into_iter().chain(children).min()
    }

    /// Fires every timer due at `ctx.now`.
    pub(crate) fn handle_timeout(&mut self, ctx: &mut Ctx<'_>) {
        while let Some(timer) = self.timers.take_expired(ctx.now) {
            self.fire(ctx, timer);
        }
        let mut due = Vec::new();
        for child in &mut self.children {
            while let Some(timer) = child.timers.take_expired(ctx.now) {
                due.push((child.spi_in, timer));
            }
        }
        for (spi_in, timer) in due {
            self.fire_child(ctx, spi_in, timer);
        }
        self.pump(ctx);
    }

    fn fire(&mut self, ctx: &mut Ctx<'_>, timer: IkeTimer) {
        match timer {
            IkeTimer::Retransmit => self.retransmit(ctx),
            IkeTimer::Establish => self.establish_timeout(ctx),
            IkeTimer::Dpd => self.dpd_due(ctx),
            IkeTimer::Rekey => self.push_task(ctx, Task::RekeyIke { retries: 0 }),
            IkeTimer::Expire => self.hard_expire(ctx),
            IkeTimer::Retry => self.retry_due(ctx),
            IkeTimer::Linger => {}
            IkeTimer::NatKeepalive => self.send_nat_keepalive(ctx),
            IkeTimer::FollowupKe => self.expire_followups(ctx),
        }
    }

    fn fire_child(&mut self, ctx: &mut Ctx<'_>, spi_in: u32, timer: ChildTimer) {
        match timer {
            ChildTimer::Rekey => self.push_task(ctx, Task::RekeyChild { spi_in, retries: 0 }),
            ChildTimer::Expire => {
                ctx.count(Counter::ChildSasExpired);
                self.push_task(ctx, Task::DeleteChildren { spis: vec![spi_in] });
            }
            ChildTimer::Retire => self.push_task(ctx, Task::DeleteChildren { spis: vec![spi_in] }),
        }
    }

    /// Resends the outstanding requests that are due, or gives up on the
    /// peer (RFC 7296 §2.1, §2.4).
    fn retransmit(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        let spent = self
            .window
            .outstanding
            .iter()
            .any(|o| o.retransmit_at <= now && o.tries >= ctx.limits.retransmit_tries);
        if spent {
            self.peer_dead(ctx);
            return;
        }
        let mut datagrams = Vec::new();
        for out in self.window.outstanding.iter_mut() {
            if out.retransmit_at > now {
                continue;
            }
            out.tries += 1;
            out.retransmit_at = retransmit_timeout(now, ctx.limits.retransmit_base, out.tries);
            datagrams.extend(out.datagrams.iter().cloned());
            ctx.count(Counter::RetransmitsSent);
        }
        for datagram in datagrams {
            ctx.transmit(self.local, self.remote, datagram);
        }
        self.arm_retransmit();
    }

    /// No answer after every retransmission: the IKE SA is dead.
    fn peer_dead(&mut self, ctx: &mut Ctx<'_>) {
        self.window.outstanding.clear();
        match self.state {
            State::InitSent(_)
            | State::Intermediate(_)
            | State::AuthSent(_)
            | State::HalfOpen(_)
            | State::Eap(_) => self.fail(ctx, "peer not answering"),
            State::Established | State::Rekeyed => {
                ctx.count(Counter::IkeSasDead);
                self.down(ctx, "peer not answering (dead peer)");
            }
            State::Deleting | State::Closed => self.close(ctx),
        }
    }

    fn establish_timeout(&mut self, ctx: &mut Ctx<'_>) {
        if self.is_half_open() {
            ctx.count(Counter::HalfOpenExpired);
        }
        if matches!(self.state, State::Eap(_)) {
            // An End-User that never finished EAP (a Windows client does
            // not answer an MSCHAPv2 Failure with R=0).
            ctx.count(Counter::EapFailed);
        }
        if matches!(
            self.state,
            State::InitSent(_)
                | State::Intermediate(_)
                | State::AuthSent(_)
                | State::HalfOpen(_)
                | State::Eap(_)
        ) {
            self.fail(ctx, "establishment timed out");
        }
    }

    fn hard_expire(&mut self, ctx: &mut Ctx<'_>) {
        if matches!(self.state, State::Established | State::Rekeyed) {
            self.tasks.push_front(Task::DeleteIke);
            self.pump(ctx);
        }
    }

    fn retry_due(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        let (due, later): (Vec<_>, Vec<_>) = self.delayed.drain(..).partition(|(at, _)| *at <= now);
        self.delayed = later;
        if let Some(next) = self.delayed.iter().map(|(t, _)| *t).min() {
            self.timers.set(IkeTimer::Retry, next);
        }
        for (_, task) in due {
            self.push_task(ctx, task);
        }
    }

    /// Before it was established: report the failure and close.
    pub(crate) fn fail(&mut self, ctx: &mut Ctx<'_>, reason: &str) {
        ctx.count(Counter::IkeSasFailed);
        self.remove_children(ctx);
        ctx.event(SaEvent::IkeSaFailed {
            connection: self.conn.name.clone(),
            reason: reason.to_owned(),
        });
        self.close(ctx);
    }

    /// Once established: remove the Child SAs, report it down, close.
    pub(crate) fn down(&mut self, ctx: &mut Ctx<'_>, reason: &str) {
        self.remove_children(ctx);
        if !matches!(self.state, State::Rekeyed) {
            self.emit_down(ctx, reason);
        }
        self.close(ctx);
    }

    /// Emits `IkeSaDown`.
    pub(crate) fn emit_down(&mut self, ctx: &mut Ctx<'_>, reason: &str) {
        ctx.event(SaEvent::IkeSaDown {
            connection: self.conn.name.clone(),
            ike_spi_i: self.spi_i.to_be_bytes(),
            ike_spi_r: self.spi_r.to_be_bytes(),
            reason: reason.to_owned(),
            peer_id: self.peer_id(),
            virtual_ips: self.all_virtual_ips(),
        });
    }

    /// Removes every Child SA from the data plane.
    pub(crate) fn remove_children(&mut self, ctx: &mut Ctx<'_>) {
        let name = self.conn.name.clone();
        for mut child in self.children.drain(..) {
            ctx.count(Counter::ChildSasDeleted);
            child.remove(ctx, &name);
        }
    }

    /// Finished now.
    pub(crate) fn close(&mut self, ctx: &mut Ctx<'_>) {
        // Nothing stays installed for an IKE SA that is gone.
        self.remove_children(ctx);
        self.abandon_followups(ctx);
        self.transition(ctx, State::Closed);
        self.timers = TimerTable::default();
        self.window.outstanding.clear();
        self.tasks.clear();
        self.delayed.clear();
    }

    /// Finished, but answers a retransmission of the request just answered
    /// for as long as the peer would retransmit it (RFC 7296 §2.1).
    pub(crate) fn close_and_linger(&mut self, ctx: &mut Ctx<'_>) {
        self.close(ctx);
        let span = retransmit_timeout(
            ctx.now,
            ctx.limits.retransmit_base,
            ctx.limits.retransmit_tries + 1,
        );
        self.timers.set(IkeTimer::Linger, span);
    }
}
