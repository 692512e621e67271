//! The worker-pool engine.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread::{self, JoinHandle};

use crossbeam_channel::{Receiver, Sender};
use phalanx_crypto::{Engine, Frame};

use crate::reorder::ReorderBuffer;

/// A frame with its ticket (its submission number).
type Ticketed = (u64, Frame);

/// Runs frames on a pool of worker threads and returns them in submission
/// order.
///
/// Submission: each frame gets the next ticket and goes to whichever worker
/// is free (one shared channel). Completion: workers send frames back with
/// their ticket; [`poll_completed`](Engine::poll_completed) and
/// [`wait_completed`](WorkerPool::wait_completed) file them in a reorder
/// buffer and release only the next ticket in line. At most
/// `max_in_flight` frames are outstanding (submitted and not yet returned);
/// beyond that `submit` hands the frame back (back-pressure).
///
/// Dropping the pool closes the job channel, lets the workers finish what
/// they hold, and joins them; frames not yet returned are dropped.
#[derive(Debug)]
pub struct WorkerPool {
    /// `None` only during `drop`, to close the channel before joining.
    jobs: Option<Sender<Ticketed>>,
    done: Receiver<Ticketed>,
    workers: Vec<JoinHandle<()>>,
    reorder: ReorderBuffer,
    next_ticket: u64,
    max_in_flight: usize,
}

impl WorkerPool {
    /// A pool of `threads` workers (at least 1) named `phalanx-crypto-N`,
    /// accepting at most `max_in_flight` (at least 1) outstanding frames.
    ///
    /// If the OS refuses to start a thread the pool runs with the workers
    /// it got; with none at all, frames run on the submitting thread.
    pub fn new(threads: usize, max_in_flight: usize) -> WorkerPool {
        let (jobs, job_rx) = crossbeam_channel::unbounded::<Ticketed>();
        let (done_tx, done) = crossbeam_channel::unbounded::<Ticketed>();
        let workers = (0..threads.max(1))
            .filter_map(|index| {
                let (job_rx, done_tx) = (job_rx.clone(), done_tx.clone());
                thread::Builder::new()
                    .name(format!("phalanx-crypto-{index}"))
                    .spawn(move || work(&job_rx, &done_tx))
                    .ok()
            })
            .collect();
        WorkerPool {
            jobs: Some(jobs),
            done,
            workers,
            reorder: ReorderBuffer::default(),
            next_ticket: 0,
            max_in_flight: max_in_flight.max(1),
        }
    }

    /// Number of worker threads running.
    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    /// Completed frames held back because an earlier frame has not
    /// completed yet (a gauge for metrics).
    pub fn held_back(&self) -> usize {
        self.reorder.len()
    }

    /// The next frame in submission order, waiting for it if it is still
    /// being processed; `None` when nothing is in flight. For tests,
    /// benchmarks and draining at shutdown.
    pub fn wait_completed(&mut self) -> Option<Frame> {
        while self.in_flight() > 0 {
            if let Some(frame) = self.reorder.pop_next() {
                return Some(frame);
            }
            // Every worker holds a sender, so this fails only when all of
            // them are gone, and then nothing more can complete.
            let (ticket, frame) = self.done.recv().ok()?;
            self.reorder.insert(ticket, frame);
        }
        None
    }

    /// Files every completion that has arrived, without blocking.
    fn collect_done(&mut self) {
        while let Ok((ticket, frame)) = self.done.try_recv() {
            self.reorder.insert(ticket, frame);
        }
    }
}

/// A worker: runs frames until the job channel closes.
///
/// A panic inside a frame (a bug: transforms validate every layout and do
/// not panic) must not stall the tickets behind it, so the frame goes back
/// anyway; the operations it did not finish keep `OpStatus::Pending`,
/// which finish code treats as not processed.
fn work(jobs: &Receiver<Ticketed>, done: &Sender<Ticketed>) {
    for (ticket, mut frame) in jobs.iter() {
        let _ = catch_unwind(AssertUnwindSafe(|| frame.execute_all()));
        if done.send((ticket, frame)).is_err() {
            return;
        }
    }
}

impl Engine for WorkerPool {
    fn submit(&mut self, mut frame: Frame) -> Result<(), Frame> {
        if self.in_flight() >= self.max_in_flight {
            return Err(frame);
        }
        let ticket = self.next_ticket;
        match &self.jobs {
            Some(jobs) if !self.workers.is_empty() => {
                // Fails only if every worker has exited; the frame comes back.
                jobs.send((ticket, frame)).map_err(|e| e.into_inner().1)?;
            }
            _ => {
                frame.execute_all();
                self.reorder.insert(ticket, frame);
            }
        }
        self.next_ticket += 1;
        Ok(())
    }

    fn poll_completed(&mut self) -> Option<Frame> {
        if let Some(frame) = self.reorder.pop_next() {
            return Some(frame);
        }
        self.collect_done();
        self.reorder.pop_next()
    }

    fn in_flight(&self) -> usize {
        // Tickets below `next_ticket()` of the reorder buffer have been
        // returned; the difference is bounded by `max_in_flight`.
        usize::try_from(self.next_ticket - self.reorder.next_ticket()).unwrap_or(usize::MAX)
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        // Closing the job channel ends each worker's loop once the queue
        // is empty; then wait for all of them.
        self.jobs = None;
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}
