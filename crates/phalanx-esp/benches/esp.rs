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

use std::sync::Arc;
use std::time::Instant;

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use phalanx_crypto::{Engine, Frame, InlineEngine, PacketBuf, SaTransform, Suite};
use phalanx_esp::{
    finish_inbound, finish_outbound, prepare_inbound, prepare_outbound, IvSource, OutboundContext,
    Verdict,
};
use phalanx_sa::{InboundSa, IpsecProtocol, OutboundSa, SaMode, SaParams, Sad};
use phalanx_wire::{EncrId, IntegId, IpProtocol, Ipv4Packet, Ipv4Repr};

const SIZES: [usize; 4] = [64, 512, 1420, 8192];
const HEADROOM: usize = 128;
const KEY: [u8; 20] = [0x42; 20];

fn suite() -> Suite {
    Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE)
}

fn transform() -> Arc<SaTransform> {
    let t = SaTransform::new(phalanx_crypto::default_provider(), suite(), &KEY, &[]);
    Arc::new(t.expect("AES-128-GCM key"))
}

fn params(local: [u8; 4], remote: [u8; 4], replay_window: u32) -> SaParams {
    SaParams {
        spi: 0x1000,
        protocol: IpsecProtocol::Esp,
        mode: SaMode::Tunnel {
            local: local.into(),
            remote: remote.into(),
        },
        encap: None,
        esn: false,
        replay_window,
        lifetime: Default::default(),
        selectors: Vec::new(),
        tfc_pad_to: None,
    }
}

/// An IPv4 packet of exactly `size` bytes.
fn inner_packet(size: usize) -> Vec<u8> {
    let repr = Ipv4Repr {
        src: [10, 0, 0, 1].into(),
        dst: [10, 1, 0, 1].into(),
        protocol: IpProtocol::UDP,
        payload_len: size - 20,
        ttl: 64,
        dscp_ecn: 0,
        ident: 7,
        dont_frag: true,
    };
    let mut buf = vec![0xa5; size];
    repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
    buf
}

/// Packets per iteration: one crypto frame, as the data path submits them
/// (frames hold up to 64 ops; 32 keeps 32 × 8192 bytes of buffers in L2).
const BATCH: usize = 32;

/// Runs a frame through the inline engine and hands the frame back.
fn run_inline(engine: &mut InlineEngine, frame: Frame) -> Frame {
    engine.submit(frame).expect("inline engine never refuses");
    engine
        .poll_completed()
        .expect("inline engine completes at once")
}

fn buffers(capacity: usize) -> Vec<Option<PacketBuf>> {
    (0..BATCH)
        .map(|_| Some(PacketBuf::with_capacity(capacity, HEADROOM)))
        .collect()
}

fn encrypt(c: &mut Criterion) {
    let mut group = c.benchmark_group("encrypt");
    for size in SIZES {
        let template = inner_packet(size);
        group.throughput(Throughput::Bytes((BATCH * size) as u64));
        let sa = OutboundSa::new(
            params([192, 0, 2, 1], [192, 0, 2, 2], 0),
            transform(),
            Instant::now(),
        );
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
        let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &KEY[..16]).expect("key"));
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

fn nonce(seq: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[..4].copy_from_slice(&KEY[16..]);
    n[4..].copy_from_slice(&seq.to_be_bytes());
    Nonce::assume_unique_for_key(n)
}

fn aad(seq: u64) -> [u8; 8] {
    let mut a = [0u8; 8];
    a[..4].copy_from_slice(&0x1000u32.to_be_bytes());
    a[4..].copy_from_slice(&(seq as u32).to_be_bytes());
    a
}

/// The ESP packet of `inner` from a fresh sender, and a SAD that takes it.
fn esp_template(inner: &[u8]) -> (Vec<u8>, Sad) {
    let now = Instant::now();
    let sender = OutboundSa::new(params([192, 0, 2, 1], [192, 0, 2, 2], 0), transform(), now);
    let mut ctx = OutboundContext::new(now, IvSource::Sequence);
    let buf = PacketBuf::from_slice(inner, HEADROOM, 128);
    let mut op = prepare_outbound(&sender, buf, &mut ctx).expect("prepare_outbound");
    op.execute();
    let (outer, verdict) = finish_outbound(op);
    assert_eq!(verdict, Verdict::Forward);
    let receiver = InboundSa::new(params([192, 0, 2, 2], [192, 0, 2, 1], 0), transform(), now);
    let sad = Sad::new();
    sad.insert(Arc::new(receiver.expect("valid")))
        .expect("fresh SAD");
    (outer.to_vec(), sad)
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
        let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &KEY[..16]).expect("key"));
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
