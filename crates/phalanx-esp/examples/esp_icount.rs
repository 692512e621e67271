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

#[path = "../benches/fixture/mod.rs"]
mod fixture;

use fixture::{
    aad, bare_key, buffers, esp_template, inner_packet, nonce, run_inline, sender, BATCH, HEADROOM,
};

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use aws_lc_rs::aead::{Aad, LessSafeKey};
use phalanx_crypto::{Frame, InlineEngine, PacketBuf};
use phalanx_esp::{
    finish_inbound, finish_outbound, prepare_inbound, prepare_outbound, InboundPending, IvSource,
    OutboundContext, Verdict,
};
use phalanx_sa::{OutboundSa, Sad};

/// Frame sizes for `n` packets: full frames of [`BATCH`], then the rest.
fn frames(n: usize) -> impl Iterator<Item = usize> {
    let full = n / BATCH;
    let rest = n % BATCH;
    std::iter::repeat_n(BATCH, full).chain((rest > 0).then_some(rest))
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
        let sa = sender();
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
