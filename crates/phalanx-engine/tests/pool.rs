//! The worker pool against the inline engine: same bytes, same order,
//! bounded in-flight frames, clean shutdown.

use std::sync::Arc;

use phalanx_crypto::{
    default_provider, Engine, Frame, InlineEngine, Op, OpKind, OpLayout, OpStatus, PacketBuf,
    SaTransform, Suite, MAX_FRAME_OPS,
};
use phalanx_engine::WorkerPool;
use phalanx_wire::{EncrId, IntegId};
use proptest::prelude::*;

/// xorshift64*: a seeded, dependency-free source of test data.
struct TestRng(u64);

impl TestRng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn transforms() -> Vec<Arc<SaTransform>> {
    let suites = [
        Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE),
        Suite::esp(EncrId::CHACHA20_POLY1305, 256, IntegId::NONE),
        Suite::esp(EncrId::NULL_AUTH_AES_GMAC, 256, IntegId::NONE),
        Suite::esp(EncrId::AES_CBC, 128, IntegId::HMAC_SHA2_256_128),
        Suite::esp(EncrId::NULL, 0, IntegId::HMAC_SHA2_512_256),
    ];
    suites
        .iter()
        .map(|&suite| {
            let encr: Vec<u8> = (0..suite.encr_key_len() as u8).collect();
            let integ: Vec<u8> = (0..suite.integ_key_len() as u8).map(|b| !b).collect();
            let t = SaTransform::new(default_provider(), suite, &encr, &integ);
            Arc::new(t.expect("valid suite and key lengths"))
        })
        .collect()
}

/// A sealing op on a random ESP packet of up to `max_payload` bytes; the
/// op's `user` field records `tag` so order can be checked.
fn random_op(rng: &mut TestRng, t: &Arc<SaTransform>, max_payload: usize, tag: u64) -> Op {
    let suite = t.suite();
    let block = suite.block_size();
    let payload_len = rng.below(max_payload / block + 1) * block;
    let iv_len = suite.iv_len();
    let len = 8 + iv_len + payload_len + suite.icv_len();
    let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
    let payload_start = (8 + iv_len) as u32;
    let auth_end = payload_start + payload_len as u32;
    let layout = OpLayout {
        auth_start: 0,
        iv_start: 8,
        payload_start,
        auth_end,
        icv_start: auth_end,
        esn_high: (rng.next() % 2 == 0).then(|| rng.next() as u32),
    };
    let mut op = Op::new(
        OpKind::EspSeal,
        t.clone(),
        layout,
        PacketBuf::from_slice(&data, 8, 0),
    );
    op.user = tag;
    op
}

/// `frames` frames of random ops over several SAs, deterministically from `seed`.
fn random_frames(seed: u64, frames: usize, max_payload: usize) -> Vec<Frame> {
    let transforms = transforms();
    let mut rng = TestRng(seed | 1);
    let mut tag = 0;
    (0..frames)
        .map(|_| {
            let mut frame = Frame::new();
            for _ in 0..=rng.below(MAX_FRAME_OPS) {
                let t = &transforms[rng.below(transforms.len())];
                frame
                    .push(random_op(&mut rng, t, max_payload, tag))
                    .expect("frame has room");
                tag += 1;
            }
            frame
        })
        .collect()
}

/// What a completed frame says: per op its tag, status and bytes.
fn outcome(frame: &Frame) -> Vec<(u64, OpStatus, Vec<u8>)> {
    frame
        .ops()
        .iter()
        .map(|op| (op.user, op.status, op.buf.to_vec()))
        .collect()
}

/// Submits every frame (polling whenever the engine pushes back) and
/// returns the completed frames in the order the engine returned them.
fn drive(engine: &mut dyn Engine, frames: Vec<Frame>) -> Vec<Frame> {
    let mut out = Vec::new();
    for mut frame in frames {
        loop {
            match engine.submit(frame) {
                Ok(()) => break,
                Err(back) => frame = back,
            }
            out.extend(engine.poll_completed());
        }
        out.extend(engine.poll_completed());
    }
    while engine.in_flight() > 0 {
        out.extend(engine.poll_completed());
        std::thread::yield_now();
    }
    out
}

#[test]
fn same_bytes_and_order_as_inline_engine() {
    let inline = drive(&mut InlineEngine::new(), random_frames(7, 300, 1500));
    let mut pool = WorkerPool::new(4, 16);
    assert_eq!(pool.threads(), 4);
    let pooled = drive(&mut pool, random_frames(7, 300, 1500));
    assert_eq!(pooled.len(), 300);
    let inline: Vec<_> = inline.iter().flat_map(outcome).collect();
    let pooled: Vec<_> = pooled.iter().flat_map(outcome).collect();
    assert!(pooled
        .iter()
        .all(|(_, status, _)| *status == OpStatus::Completed));
    assert!(
        pooled.windows(2).all(|w| w[0].0 + 1 == w[1].0),
        "ops in submission order"
    );
    assert_eq!(pooled, inline);
}

#[test]
fn order_restored_when_a_big_frame_finishes_last() {
    // One frame of 64 jumbo packets followed by many one-op frames: with 4
    // workers the small ones complete first and must be held back.
    let transforms = transforms();
    let mut rng = TestRng(99);
    let mut frames = vec![Frame::new()];
    for tag in 0..MAX_FRAME_OPS as u64 {
        frames[0]
            .push(random_op(&mut rng, &transforms[3], 9000, tag))
            .expect("room");
    }
    for tag in 0..40 {
        let mut frame = Frame::new();
        frame
            .push(random_op(&mut rng, &transforms[0], 16, 1000 + tag))
            .expect("room");
        frames.push(frame);
    }
    let mut pool = WorkerPool::new(4, 64);
    for frame in frames {
        pool.submit(frame).expect("below max_in_flight");
    }
    assert_eq!(pool.in_flight(), 41);
    let first = pool.wait_completed().expect("in flight");
    assert_eq!(first.len(), MAX_FRAME_OPS);
    assert_eq!(first.ops()[0].user, 0);
    for tag in 0..40 {
        let frame = pool.wait_completed().expect("in flight");
        assert_eq!(frame.ops()[0].user, 1000 + tag);
    }
    assert!(pool.wait_completed().is_none());
    assert_eq!((pool.in_flight(), pool.held_back()), (0, 0));
}

#[test]
fn back_pressure_at_max_in_flight() {
    let mut pool = WorkerPool::new(2, 3);
    let mut frames = random_frames(3, 5, 100).into_iter();
    for _ in 0..3 {
        pool.submit(frames.next().expect("5 frames")).expect("room");
    }
    let fourth = frames.next().expect("5 frames");
    let ops = fourth.len();
    let refused = pool.submit(fourth).expect_err("full");
    assert_eq!(refused.len(), ops, "handed back untouched");
    assert!(refused
        .ops()
        .iter()
        .all(|op| op.status == OpStatus::Pending));
    assert_eq!(pool.in_flight(), 3);
    assert!(pool.wait_completed().is_some());
    pool.submit(refused).expect("room again");
    assert_eq!(pool.in_flight(), 3);
}

#[test]
fn drop_joins_workers_with_frames_in_flight() {
    let mut pool = WorkerPool::new(3, 100);
    for frame in random_frames(11, 50, 1500) {
        pool.submit(frame).expect("room");
    }
    drop(pool);
}

#[test]
fn zero_sizes_are_raised_to_one() {
    let mut pool = WorkerPool::new(0, 0);
    assert_eq!(pool.threads(), 1);
    let mut frames = random_frames(5, 2, 64).into_iter();
    pool.submit(frames.next().expect("2 frames"))
        .expect("one fits");
    assert!(pool.submit(frames.next().expect("2 frames")).is_err());
    assert_eq!(
        pool.wait_completed().map(|f| f.ops()[0].status),
        Some(OpStatus::Completed)
    );
}

#[test]
fn invalid_ops_complete_with_their_status() {
    // A refused layout is a per-op status, not an engine failure.
    let t = transforms().remove(0);
    let bad = OpLayout {
        auth_start: 5,
        icv_start: 999,
        ..OpLayout::default()
    };
    let mut frame = Frame::new();
    frame
        .push(Op::new(
            OpKind::EspOpen,
            t,
            bad,
            PacketBuf::from_slice(&[0; 40], 0, 0),
        ))
        .expect("room");
    let mut pool = WorkerPool::new(2, 4);
    pool.submit(frame).expect("room");
    let done = pool.wait_completed().expect("in flight");
    assert_eq!(done.ops()[0].status, OpStatus::InvalidLayout);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any mix of frame sizes, thread counts and in-flight limits gives the
    /// inline engine's bytes in the inline engine's order.
    #[test]
    fn pool_matches_inline(seed in any::<u64>(), frames in 1usize..40, threads in 1usize..6, limit in 1usize..10) {
        let inline = drive(&mut InlineEngine::new(), random_frames(seed, frames, 600));
        let pooled = drive(&mut WorkerPool::new(threads, limit), random_frames(seed, frames, 600));
        let inline: Vec<_> = inline.iter().flat_map(outcome).collect();
        let pooled: Vec<_> = pooled.iter().flat_map(outcome).collect();
        prop_assert_eq!(pooled, inline);
    }
}
