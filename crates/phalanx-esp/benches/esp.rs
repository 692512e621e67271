//! ESP throughput against bare AES-128-GCM, taken in one run.
//!
//! For each inner packet size (64, 512, 1420, 8192 bytes; tunnel mode,
//! IPv4 in IPv4, AES-128-GCM, sequence-number IVs):
//! - `esp_encrypt/{size}`: reset a buffer from the inner-packet template
//!   (`copy_from_slice`), `prepare_outbound` → inline engine →
//!   `finish_outbound`;
//! - `bare_seal/{size}`: the same copy into a same-size buffer, then
//!   aws-lc-rs `LessSafeKey::seal_in_place_separate_tag` with an 8-byte AAD;
//! - `esp_decrypt/{size}`: reset a buffer from the ESP packet template,
//!   `prepare_inbound` → inline engine → `finish_inbound`;
//! - `bare_open/{size}`: the same copy, then `LessSafeKey::open_in_place`.
//!
//! Each iteration handles one frame of [`BATCH`] packets (the bare
//! baseline the same number of same-size buffers). Throughput is counted
//! in inner-packet bytes for all four. No allocation happens per
//! iteration: buffers, frames, pendings and the context are reused. The decrypt SA has anti-replay disabled (window 0) so the one
//! template can be opened again and again; the window's mutex is still
//! taken for the pre-check and the commit, only the bitmap update is
//! skipped.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod fixture;

use fixture::{
    aad, bare_key, buffers, esp_template, inner_packet, nonce, run_inline, sender, BATCH, HEADROOM,
};

use std::time::Instant;

use aws_lc_rs::aead::Aad;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use phalanx_crypto::{Frame, InlineEngine};
use phalanx_esp::{
    finish_inbound, finish_outbound, prepare_inbound, prepare_outbound, IvSource, OutboundContext,
    Verdict,
};

const SIZES: [usize; 4] = [64, 512, 1420, 8192];

fn encrypt(c: &mut Criterion) {
    let mut group = c.benchmark_group("encrypt");
    for size in SIZES {
        let template = inner_packet(size);
        group.throughput(Throughput::Bytes((BATCH * size) as u64));
        let sa = sender();
        group.bench_function(BenchmarkId::new("esp", size), |b| {
            let mut engine = InlineEngine::new();
            let mut frame = Some(Frame::new());
            let mut ctx = OutboundContext::new(Instant::now(), IvSource::Sequence);
            let mut bufs = buffers(HEADROOM + size + 128);
            b.iter(|| {
                let mut f = frame.take().expect("frame returned by the engine");
                for slot in &mut bufs {
                    let mut packet = slot.take().expect("buffer returned by finish");
                    packet.reset(HEADROOM);
                    packet.extend_from_slice(&template);
                    let op = prepare_outbound(&sa, packet, &mut ctx).expect("prepare_outbound");
                    f.push(op).expect("frame has room");
                }
                let mut f = run_inline(&mut engine, f);
                for (slot, op) in bufs.iter_mut().zip(f.drain()) {
                    let (packet, verdict) = finish_outbound(op);
                    assert!(verdict == Verdict::Forward);
                    *slot = Some(packet);
                }
                frame = Some(f);
            });
        });
        let key = bare_key();
        group.bench_function(BenchmarkId::new("bare", size), |b| {
            let mut bufs = vec![vec![0u8; size]; BATCH];
            let mut seq = 0u64;
            b.iter(|| {
                for buf in &mut bufs {
                    buf.copy_from_slice(&template);
                    seq += 1;
                    let tag = key.seal_in_place_separate_tag(nonce(seq), Aad::from(aad(seq)), buf);
                    let _ = criterion::black_box(tag.expect("seal"));
                }
            });
        });
    }
    group.finish();
}

fn decrypt(c: &mut Criterion) {
    let mut group = c.benchmark_group("decrypt");
    for size in SIZES {
        let inner = inner_packet(size);
        let (template, sad) = esp_template(&inner);
        group.throughput(Throughput::Bytes((BATCH * size) as u64));
        group.bench_function(BenchmarkId::new("esp", size), |b| {
            let mut engine = InlineEngine::new();
            let mut frame = Some(Frame::new());
            let now = Instant::now();
            let mut bufs = buffers(HEADROOM + template.len() + 64);
            let mut pendings = Vec::with_capacity(BATCH);
            b.iter(|| {
                let mut f = frame.take().expect("frame returned by the engine");
                for slot in &mut bufs {
                    let mut packet = slot.take().expect("buffer returned by finish");
                    packet.reset(HEADROOM);
                    packet.extend_from_slice(&template);
                    let (pending, op) =
                        prepare_inbound(&sad, packet, now).expect("prepare_inbound");
                    pendings.push(pending);
                    f.push(op).expect("frame has room");
                }
                let mut f = run_inline(&mut engine, f);
                for ((slot, op), pending) in bufs.iter_mut().zip(f.drain()).zip(pendings.drain(..))
                {
                    let (packet, verdict) = finish_inbound(pending, op);
                    assert!(verdict == Verdict::Forward);
                    *slot = Some(packet);
                }
                frame = Some(f);
            });
        });
        let key = bare_key();
        let mut sealed = inner.clone();
        let tag = key
            .seal_in_place_separate_tag(nonce(1), Aad::from(aad(1)), &mut sealed)
            .expect("seal");
        sealed.extend_from_slice(tag.as_ref());
        group.bench_function(BenchmarkId::new("bare", size), |b| {
            let mut bufs = vec![vec![0u8; sealed.len()]; BATCH];
            b.iter(|| {
                for buf in &mut bufs {
                    buf.copy_from_slice(&sealed);
                    let plain = key
                        .open_in_place(nonce(1), Aad::from(aad(1)), buf)
                        .expect("open");
                    criterion::black_box(plain.len());
                }
            });
        });
    }
    group.finish();
}

criterion_group!(benches, encrypt, decrypt);
criterion_main!(benches);
