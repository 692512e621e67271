//! The crypto engine a worker submits its frames to: inline (the crypto
//! runs on the worker thread, the default) or a worker pool of
//! `crypto_threads` threads that returns frames in submission order.

use phalanx_crypto::{Engine, Frame, InlineEngine};
use phalanx_engine::WorkerPool;

use crate::limits::MAX_FRAMES_IN_FLIGHT;

/// A worker's crypto engine.
#[derive(Debug)]
pub enum CryptoEngine {
    /// Crypto on the calling thread.
    Inline(InlineEngine),
    /// Crypto on a pool of threads, completions in submission order.
    Pool(WorkerPool),
}

impl CryptoEngine {
    /// Inline for `threads == 0`, else a pool of `threads`.
    pub fn new(threads: usize) -> CryptoEngine {
        match threads {
            0 => CryptoEngine::Inline(InlineEngine::new()),
            n => CryptoEngine::Pool(WorkerPool::new(n, MAX_FRAMES_IN_FLIGHT)),
        }
    }

    /// Submits `frame` and hands every frame completed so far to `done`,
    /// in submission order. When the pool is saturated, waits for the
    /// oldest frame first (back-pressure instead of loss).
    pub fn submit(&mut self, frame: Frame, done: &mut dyn FnMut(Frame)) {
        match self {
            CryptoEngine::Inline(engine) => {
                // The inline engine never refuses: it runs the frame now.
                if let Err(frame) = engine.submit(frame) {
                    done(frame);
                }
                while let Some(completed) = engine.poll_completed() {
                    done(completed);
                }
            }
            CryptoEngine::Pool(pool) => {
                let mut frame = frame;
                loop {
                    match pool.submit(frame) {
                        Ok(()) => break,
                        Err(refused) => {
                            frame = refused;
                            match pool.wait_completed() {
                                Some(completed) => done(completed),
                                // Refused with nothing in flight: run it here.
                                None => {
                                    frame.execute_all();
                                    done(frame);
                                    break;
                                }
                            }
                        }
                    }
                }
                while let Some(completed) = pool.poll_completed() {
                    done(completed);
                }
            }
        }
    }

    /// Waits for every frame in flight and hands each to `done`.
    pub fn drain(&mut self, done: &mut dyn FnMut(Frame)) {
        match self {
            CryptoEngine::Inline(engine) => {
                while let Some(completed) = engine.poll_completed() {
                    done(completed);
                }
            }
            CryptoEngine::Pool(pool) => {
                while let Some(completed) = pool.wait_completed() {
                    done(completed);
                }
            }
        }
    }
}
