//! The per-packet work of `benches/esp.rs`, without criterion, for
//! instruction counting under callgrind (`bench/icount.sh`).
//!
//! ```text
//! esp_icount MODE SIZE N
//!   MODE  esp-encrypt | bare-encrypt | esp-decrypt | bare-decrypt
//!         (or time-encrypt | time-decrypt, see below)
//!   SIZE  inner IPv4 packet size in bytes (at least 28)
//!   N     packets to process, in frames of 32 (the last one may be short)
//! ```
//!
//! Each of the four modes does exactly what the criterion benchmark of
//! the same name does per packet: the same template, the same buffer
//! reuse (32 buffers with 128 bytes of headroom, reset and refilled by
//! `copy_from_slice`), the same SA parameters (tunnel mode IPv4 in IPv4, AES-128-GCM,
//! sequence-number IVs, anti-replay off inbound) and the same frame
//! handling through the inline engine. Running it with N = 0 and N = K
//! and subtracting gives the instructions of K packets without the setup.
//!
//! Two more modes measure time instead, for machines too noisy for
//! criterion's one-after-the-other runs: `time-encrypt SIZE N` and
//! `time-decrypt SIZE N` run ESP and bare in alternating rounds of 256
//! packets until each has done N, and print the median ns/packet of each
//! and the ratio bare / ESP.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};
use phalanx_crypto::{Engine, Frame, InlineEngine, PacketBuf, SaTransform, Suite};
use phalanx_esp::{
    finish_inbound, finish_outbound, prepare_inbound, prepare_outbound, InboundPending, IvSource,
    OutboundContext, Verdict,
};
use phalanx_sa::{InboundSa, IpsecProtocol, OutboundSa, SaMode, SaParams, Sad};
use phalanx_wire::{EncrId, IntegId, IpProtocol, Ipv4Packet, Ipv4Repr};

/// Packets per frame, as in the benchmark.
const BATCH: usize = 32;
const HEADROOM: usize = 128;
const KEY: [u8; 20] = [0x42; 20];

fn transform() -> Arc<SaTransform> {
    let suite = Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE);
    let t = SaTransform::new(phalanx_crypto::default_provider(), suite, &KEY, &[]);
    Arc::new(t.expect("AES-128-GCM key"))
}

fn params(local: [u8; 4], remote: [u8; 4]) -> SaParams {
    SaParams {
        spi: 0x1000,
        protocol: IpsecProtocol::Esp,
        mode: SaMode::Tunnel {
            local: local.into(),
            remote: remote.into(),
        },
        encap: None,
        esn: false,
        replay_window: 0,
        lifetime: Default::default(),
        selectors: Vec::new(),
        tfc_pad_to: None,
    }
}

/// An IPv4 packet of exactly `size` bytes (the benchmark's template).
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

fn buffers(capacity: usize) -> Vec<Option<PacketBuf>> {
    (0..BATCH)
        .map(|_| Some(PacketBuf::with_capacity(capacity, HEADROOM)))
        .collect()
}

fn run_inline(engine: &mut InlineEngine, frame: Frame) -> Frame {
    engine.submit(frame).expect("inline engine never refuses");
    engine
        .poll_completed()
        .expect("inline engine completes at once")
}

/// Frame sizes for `n` packets: full frames of [`BATCH`], then the rest.
fn frames(n: usize) -> impl Iterator<Item = usize> {
    let full = n / BATCH;
    let rest = n % BATCH;
    std::iter::repeat_n(BATCH, full).chain((rest > 0).then_some(rest))
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

fn bare_key() -> LessSafeKey {
    LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &KEY[..16]).expect("key"))
}

/// One of the four per-packet workloads, run a frame at a time.
trait Workload {
    /// Handles `count` (at most [`BATCH`]) packets.
    fn frame(&mut self, count: usize);
}

/// `esp-encrypt`: reset a buffer from the inner packet, `prepare_outbound`
/// → inline engine → `finish_outbound`.
struct EspEncrypt {
    template: Vec<u8>,
    sa: OutboundSa,
    engine: InlineEngine,
    frame: Option<Frame>,
    ctx: OutboundContext<'static>,
    bufs: Vec<Option<PacketBuf>>,
}

impl EspEncrypt {
    fn new(size: usize) -> Self {
        let sa = OutboundSa::new(
            params([192, 0, 2, 1], [192, 0, 2, 2]),
            transform(),
            Instant::now(),
        );
        EspEncrypt {
            template: inner_packet(size),
            sa,
            engine: InlineEngine::new(),
            frame: Some(Frame::new()),
            ctx: OutboundContext::new(Instant::now(), IvSource::Sequence),
            bufs: buffers(HEADROOM + size + 128),
        }
    }
}

impl Workload for EspEncrypt {
    fn frame(&mut self, count: usize) {
        let mut f = self.frame.take().expect("frame returned by the engine");
        for slot in &mut self.bufs[..count] {
            let mut packet = slot.take().expect("buffer returned by finish");
            packet.reset(HEADROOM);
            packet.extend_from_slice(&self.template);
            let op = prepare_outbound(&self.sa, packet, &mut self.ctx).expect("prepare_outbound");
            f.push(op).expect("frame has room");
        }
        let mut f = run_inline(&mut self.engine, f);
        for (slot, op) in self.bufs.iter_mut().zip(f.drain()) {
            let (packet, verdict) = finish_outbound(op);
            assert!(verdict == Verdict::Forward);
            *slot = Some(packet);
        }
        self.frame = Some(f);
    }
}

/// `bare-encrypt`: the same copy into a same-size buffer, then
/// `seal_in_place_separate_tag` with an 8-byte AAD.
struct BareEncrypt {
    template: Vec<u8>,
    key: LessSafeKey,
    bufs: Vec<Vec<u8>>,
    seq: u64,
}

impl BareEncrypt {
    fn new(size: usize) -> Self {
        BareEncrypt {
            template: inner_packet(size),
            key: bare_key(),
            bufs: vec![vec![0u8; size]; BATCH],
            seq: 0,
        }
    }
}

impl Workload for BareEncrypt {
    fn frame(&mut self, count: usize) {
        for buf in &mut self.bufs[..count] {
            buf.copy_from_slice(&self.template);
            self.seq += 1;
            let seq = self.seq;
            let tag = self
                .key
                .seal_in_place_separate_tag(nonce(seq), Aad::from(aad(seq)), buf);
            let _ = black_box(tag.expect("seal"));
        }
    }
}

/// The ESP packet of `inner` from a fresh sender, and a SAD that takes it.
fn esp_template(inner: &[u8]) -> (Vec<u8>, Sad) {
    let now = Instant::now();
    let sender = OutboundSa::new(params([192, 0, 2, 1], [192, 0, 2, 2]), transform(), now);
    let mut ctx = OutboundContext::new(now, IvSource::Sequence);
    let buf = PacketBuf::from_slice(inner, HEADROOM, 128);
    let mut op = prepare_outbound(&sender, buf, &mut ctx).expect("prepare_outbound");
    op.execute();
    let (outer, verdict) = finish_outbound(op);
    assert_eq!(verdict, Verdict::Forward);
    let receiver = InboundSa::new(params([192, 0, 2, 2], [192, 0, 2, 1]), transform(), now);
    let sad = Sad::new();
    sad.insert(Arc::new(receiver.expect("valid")))
        .expect("fresh SAD");
    (outer.to_vec(), sad)
}

/// `esp-decrypt`: reset a buffer from the ESP packet, `prepare_inbound` →
/// inline engine → `finish_inbound` (anti-replay off: the same packet
/// opens again and again).
struct EspDecrypt {
    template: Vec<u8>,
    sad: Sad,
    engine: InlineEngine,
    frame: Option<Frame>,
    now: Instant,
    bufs: Vec<Option<PacketBuf>>,
    pendings: Vec<InboundPending>,
}

impl EspDecrypt {
    fn new(size: usize) -> Self {
        let (template, sad) = esp_template(&inner_packet(size));
        let bufs = buffers(HEADROOM + template.len() + 64);
        EspDecrypt {
            template,
            sad,
            engine: InlineEngine::new(),
            frame: Some(Frame::new()),
            now: Instant::now(),
            bufs,
            pendings: Vec::with_capacity(BATCH),
        }
    }
}

impl Workload for EspDecrypt {
    fn frame(&mut self, count: usize) {
        let mut f = self.frame.take().expect("frame returned by the engine");
        for slot in &mut self.bufs[..count] {
            let mut packet = slot.take().expect("buffer returned by finish");
            packet.reset(HEADROOM);
            packet.extend_from_slice(&self.template);
            let (pending, op) =
                prepare_inbound(&self.sad, packet, self.now).expect("prepare_inbound");
            self.pendings.push(pending);
            f.push(op).expect("frame has room");
        }
        let mut f = run_inline(&mut self.engine, f);
        let done = self.bufs.iter_mut().zip(f.drain());
        for ((slot, op), pending) in done.zip(self.pendings.drain(..)) {
            let (packet, verdict) = finish_inbound(pending, op);
            assert!(verdict == Verdict::Forward);
            *slot = Some(packet);
        }
        self.frame = Some(f);
    }
}

/// `bare-decrypt`: the same copy, then `open_in_place`.
struct BareDecrypt {
    sealed: Vec<u8>,
    key: LessSafeKey,
    bufs: Vec<Vec<u8>>,
}

impl BareDecrypt {
    fn new(size: usize) -> Self {
        let key = bare_key();
        let mut sealed = inner_packet(size);
        let tag = key
            .seal_in_place_separate_tag(nonce(1), Aad::from(aad(1)), &mut sealed)
            .expect("seal");
        sealed.extend_from_slice(tag.as_ref());
        let bufs = vec![vec![0u8; sealed.len()]; BATCH];
        BareDecrypt { sealed, key, bufs }
    }
}

impl Workload for BareDecrypt {
    fn frame(&mut self, count: usize) {
        for buf in &mut self.bufs[..count] {
            buf.copy_from_slice(&self.sealed);
            let plain = self
                .key
                .open_in_place(nonce(1), Aad::from(aad(1)), buf)
                .expect("open");
            black_box(plain.len());
        }
    }
}

fn workload(mode: &str, size: usize) -> Option<Box<dyn Workload>> {
    Some(match mode {
        "esp-encrypt" => Box::new(EspEncrypt::new(size)),
        "bare-encrypt" => Box::new(BareEncrypt::new(size)),
        "esp-decrypt" => Box::new(EspDecrypt::new(size)),
        "bare-decrypt" => Box::new(BareDecrypt::new(size)),
        _ => return None,
    })
}

/// Frames per round of the `time-*` modes: short enough that both sides
/// of a round see the same machine, long enough for the clock.
const ROUND_FRAMES: usize = 8;

/// `time-encrypt` / `time-decrypt`: ESP and bare in alternating rounds of
/// [`ROUND_FRAMES`] frames (the order flipped every round), for a ratio
/// that a machine whose speed drifts from second to second affects
/// equally on both sides. Prints the median ns/packet of each side and
/// their ratio (bare / ESP, as `bench/summary.py`).
fn time(direction: &str, size: usize, n: usize) {
    let mut esp = workload(&format!("esp-{direction}"), size).expect("known direction");
    let mut bare = workload(&format!("bare-{direction}"), size).expect("known direction");
    let per_round = ROUND_FRAMES * BATCH;
    let rounds = n.div_ceil(per_round).max(1);
    let timed = |w: &mut Box<dyn Workload>| {
        let start = Instant::now();
        for _ in 0..ROUND_FRAMES {
            w.frame(BATCH);
        }
        start.elapsed().as_nanos() as f64 / per_round as f64
    };
    // Warm-up: one round each.
    timed(&mut esp);
    timed(&mut bare);
    let (mut esp_ns, mut bare_ns) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        if round % 2 == 0 {
            esp_ns.push(timed(&mut esp));
            bare_ns.push(timed(&mut bare));
        } else {
            bare_ns.push(timed(&mut bare));
            esp_ns.push(timed(&mut esp));
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (e, b) = (median(&mut esp_ns), median(&mut bare_ns));
    println!(
        "{direction} {size}: esp {e:.1} ns/packet, bare {b:.1} ns/packet, ratio {:.3} ({rounds} rounds of {per_round} packets)",
        b / e
    );
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = match args.as_slice() {
        [mode, size, n] => size
            .parse::<usize>()
            .ok()
            .filter(|&s| (28..=65_000).contains(&s))
            .zip(n.parse::<usize>().ok())
            .map(|(size, n)| (mode.as_str(), size, n)),
        _ => None,
    };
    let Some((mode, size, n)) = parsed else {
        eprintln!("usage: esp_icount MODE SIZE N");
        return ExitCode::from(2);
    };
    if let Some(direction) = mode.strip_prefix("time-") {
        if direction == "encrypt" || direction == "decrypt" {
            time(direction, size, n);
            return ExitCode::SUCCESS;
        }
    }
    let Some(mut w) = workload(mode, size) else {
        eprintln!("esp_icount: MODE is esp-encrypt, bare-encrypt, esp-decrypt, bare-decrypt, time-encrypt or time-decrypt");
        return ExitCode::from(2);
    };
    for count in frames(n) {
        w.frame(count);
    }
    ExitCode::SUCCESS
}
