//! Shared test helpers: SA pairs, inner packets, engine runs, counters.
#![allow(
    dead_code,
    unreachable_pub,
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Instant;

use phalanx_crypto::{CryptoProvider, Engine, Frame, Op, PacketBuf, SaTransform, Suite};
use phalanx_esp::{
    finish_inbound, finish_outbound, prepare_inbound, prepare_outbound, Counters, DropReason,
    InboundPending, IvSource, OutboundContext, Verdict,
};
use phalanx_sa::{
    InboundSa, IpsecProtocol, LifetimeLimits, OutboundSa, SaMode, SaParams, Sad, Selector, UdpEncap,
};
use phalanx_testkit::counters::CounterSet;
use phalanx_wire::{
    EncrId, IntegId, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, UdpPacket, UdpRepr,
};

/// Tunnel endpoints: gateway A sends, gateway B receives.
pub const GW_A4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
pub const GW_B4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
pub const GW_A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
pub const GW_B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2);

/// Hosts behind the gateways.
pub const HOST_A4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const HOST_B4: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
pub const HOST_A6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
pub const HOST_B6: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1);

/// Every ESP suite the crypto crate implements.
pub fn esp_suites() -> Vec<Suite> {
    let mut all = vec![
        Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE),
        Suite::esp(EncrId::AES_GCM_16, 256, IntegId::NONE),
        Suite::esp(EncrId::CHACHA20_POLY1305, 256, IntegId::NONE),
        Suite::esp(EncrId::NULL_AUTH_AES_GMAC, 128, IntegId::NONE),
        Suite::esp(EncrId::NULL_AUTH_AES_GMAC, 256, IntegId::NONE),
    ];
    for integ in hmacs() {
        all.push(Suite::esp(EncrId::AES_CBC, 128, integ));
        all.push(Suite::esp(EncrId::AES_CBC, 256, integ));
        all.push(Suite::esp(EncrId::NULL, 0, integ));
    }
    all
}

/// The HMAC integrity transforms.
pub fn hmacs() -> [IntegId; 3] {
    [
        IntegId::HMAC_SHA2_256_128,
        IntegId::HMAC_SHA2_384_192,
        IntegId::HMAC_SHA2_512_256,
    ]
}

/// AES-128-GCM.
pub fn gcm128() -> Suite {
    Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE)
}

/// NULL encryption with HMAC-SHA-256-128: plaintext on the wire, so tests
/// can craft bad trailers and re-seal them.
pub fn null_sha256() -> Suite {
    Suite::esp(EncrId::NULL, 0, IntegId::HMAC_SHA2_256_128)
}

/// The address families of a combination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ip {
    V4,
    V6,
}

/// Mode and families: tunnel (inner, outer) or transport (family).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeCase {
    Tunnel { inner: Ip, outer: Ip },
    Transport(Ip),
}

/// The four tunnel combinations and two transport ones.
pub fn mode_cases() -> [ModeCase; 6] {
    use Ip::*;
    [
        ModeCase::Tunnel {
            inner: V4,
            outer: V4,
        },
        ModeCase::Tunnel {
            inner: V6,
            outer: V6,
        },
        ModeCase::Tunnel {
            inner: V4,
            outer: V6,
        },
        ModeCase::Tunnel {
            inner: V6,
            outer: V4,
        },
        ModeCase::Transport(V4),
        ModeCase::Transport(V6),
    ]
}

impl ModeCase {
    /// The family of the packets the SA protects.
    pub fn inner(self) -> Ip {
        match self {
            ModeCase::Tunnel { inner, .. } => inner,
            ModeCase::Transport(ip) => ip,
        }
    }

    /// SA mode as seen by the sender (A) and by the receiver (B).
    pub fn sa_modes(self) -> (SaMode, SaMode) {
        match self {
            ModeCase::Tunnel { outer: Ip::V4, .. } => (
                SaMode::Tunnel {
                    local: GW_A4.into(),
                    remote: GW_B4.into(),
                },
                SaMode::Tunnel {
                    local: GW_B4.into(),
                    remote: GW_A4.into(),
                },
            ),
            ModeCase::Tunnel { outer: Ip::V6, .. } => (
                SaMode::Tunnel {
                    local: GW_A6.into(),
                    remote: GW_B6.into(),
                },
                SaMode::Tunnel {
                    local: GW_B6.into(),
                    remote: GW_A6.into(),
                },
            ),
            ModeCase::Transport(_) => (SaMode::Transport, SaMode::Transport),
        }
    }
}

/// What an SA pair is built from.
#[derive(Clone)]
pub struct PairSpec {
    pub provider: &'static dyn CryptoProvider,
    pub suite: Suite,
    pub protocol: IpsecProtocol,
    pub mode: ModeCase,
    pub encap: bool,
    pub esn: bool,
    pub spi: u32,
    pub lifetime: LifetimeLimits,
    pub selectors: Vec<Selector>,
    pub tfc_pad_to: Option<u16>,
    pub replay_window: u32,
}

impl std::fmt::Debug for PairSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PairSpec")
            .field("provider", &self.provider.name())
            .field("suite", &self.suite)
            .field("mode", &self.mode)
            .field("encap", &self.encap)
            .field("esn", &self.esn)
            .finish_non_exhaustive()
    }
}

impl PairSpec {
    /// An ESP tunnel v4-in-v4 pair with AES-128-GCM and the default provider.
    pub fn esp(suite: Suite, mode: ModeCase) -> PairSpec {
        PairSpec {
            provider: phalanx_crypto::default_provider(),
            suite,
            protocol: if suite.ah {
                IpsecProtocol::Ah
            } else {
                IpsecProtocol::Esp
            },
            mode,
            encap: false,
            esn: false,
            spi: 0x0102_0304,
            lifetime: LifetimeLimits::default(),
            selectors: Vec::new(),
            tfc_pad_to: None,
            replay_window: 64,
        }
    }

    /// Deterministic key material of the right lengths.
    pub fn keys(&self) -> (Vec<u8>, Vec<u8>) {
        let encr = (0..self.suite.encr_key_len())
            .map(|i| i as u8 ^ 0x5a)
            .collect();
        let integ = (0..self.suite.integ_key_len())
            .map(|i| (i as u8).wrapping_mul(7))
            .collect();
        (encr, integ)
    }

    pub fn transform(&self) -> Arc<SaTransform> {
        let (encr, integ) = self.keys();
        Arc::new(SaTransform::new(self.provider, self.suite, &encr, &integ).expect("valid suite"))
    }

    fn params(&self, mode: SaMode, encap: Option<UdpEncap>) -> SaParams {
        SaParams {
            spi: self.spi,
            protocol: self.protocol,
            mode,
            encap,
            esn: self.esn,
            replay_window: self.replay_window,
            lifetime: self.lifetime,
            selectors: self.selectors.clone(),
            tfc_pad_to: self.tfc_pad_to,
        }
    }

    /// Gateway A's outbound SA.
    pub fn outbound(&self, now: Instant) -> OutboundSa {
        let encap = self.encap.then_some(UdpEncap {
            local_port: 4500,
            remote_port: 4501,
        });
        OutboundSa::new(
            self.params(self.mode.sa_modes().0, encap),
            self.transform(),
            now,
        )
    }

    /// Gateway B's inbound SA.
    pub fn inbound(&self, now: Instant) -> Arc<InboundSa> {
        let encap = self.encap.then_some(UdpEncap {
            local_port: 4501,
            remote_port: 4500,
        });
        let params = self.params(self.mode.sa_modes().1, encap);
        Arc::new(InboundSa::new(params, self.transform(), now).expect("valid window"))
    }

    /// Gateway B's SAD holding [`Self::inbound`].
    pub fn sad(&self, now: Instant) -> (Sad, Arc<InboundSa>) {
        let sad = Sad::new();
        let sa = self.inbound(now);
        sad.insert(sa.clone()).expect("fresh SAD");
        (sad, sa)
    }
}

/// A UDP/IPv4 packet from host A to host B with `payload` bytes.
pub fn udp4(payload: usize, tos: u8, df: bool) -> Vec<u8> {
    udp4_between(HOST_A4, HOST_B4, payload, tos, df)
}

pub fn udp4_between(src: Ipv4Addr, dst: Ipv4Addr, payload: usize, tos: u8, df: bool) -> Vec<u8> {
    let udp = UdpRepr {
        src_port: 1234,
        dst_port: 5678,
        payload_len: payload,
    };
    let ip = Ipv4Repr {
        src,
        dst,
        protocol: IpProtocol::UDP,
        payload_len: udp.buffer_len(),
        ttl: 33,
        dscp_ecn: tos,
        ident: 0x4242,
        dont_frag: df,
    };
    let mut buf = vec![0u8; ip.buffer_len()];
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
    let mut dgram = UdpPacket::new_unchecked(&mut buf[20..]);
    udp.emit(&mut dgram);
    for (i, b) in dgram.payload_mut().iter_mut().enumerate() {
        *b = (i * 31 + 7) as u8;
    }
    dgram.fill_checksum_v4(src, dst);
    buf
}

/// A UDP/IPv6 packet from host A to host B with `payload` bytes.
pub fn udp6(payload: usize, tc: u8) -> Vec<u8> {
    let udp = UdpRepr {
        src_port: 4321,
        dst_port: 53,
        payload_len: payload,
    };
    let ip = Ipv6Repr {
        src: HOST_A6,
        dst: HOST_B6,
        next_header: IpProtocol::UDP,
        payload_len: udp.buffer_len(),
        hop_limit: 17,
        traffic_class: tc,
        flow_label: 0x12345,
    };
    let mut buf = vec![0u8; ip.buffer_len()];
    ip.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
    let mut dgram = UdpPacket::new_unchecked(&mut buf[40..]);
    udp.emit(&mut dgram);
    for (i, b) in dgram.payload_mut().iter_mut().enumerate() {
        *b = (i * 13 + 1) as u8;
    }
    dgram.fill_checksum_v6(HOST_A6, HOST_B6);
    buf
}

/// An IPv6 packet with a Hop-by-Hop header (one may-change option) and a
/// Destination Options header in front of UDP.
pub fn udp6_with_extensions(payload: usize) -> Vec<u8> {
    let plain = udp6(payload, 0);
    let mut buf = plain[..40].to_vec();
    buf[6] = IpProtocol::HOPOPT.0;
    // Hop-by-Hop: next = Destination Options, len 0, option 0x3e (may change) len 4.
    buf.extend_from_slice(&[60, 0, 0x3e, 4, 0xde, 0xad, 0xbe, 0xef]);
    // Destination Options: next = UDP, len 0, PadN(4).
    buf.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
    buf.extend_from_slice(&plain[40..]);
    let payload_len = (buf.len() - 40) as u16;
    buf[4..6].copy_from_slice(&payload_len.to_be_bytes());
    buf
}

/// A packet of the family of `ip` with `payload` bytes of UDP data.
pub fn udp_of(ip: Ip, payload: usize) -> Vec<u8> {
    match ip {
        Ip::V4 => udp4(payload, 0x28, true),
        Ip::V6 => udp6(payload, 0x28),
    }
}

/// A buffer with the room outbound processing needs (TFC padding up to 600
/// bytes included).
pub fn outbound_buf(packet: &[u8]) -> PacketBuf {
    PacketBuf::from_slice(packet, 128, 1024)
}

/// A received packet in a buffer with the room inbound processing needs.
pub fn inbound_buf(packet: &[u8]) -> PacketBuf {
    PacketBuf::from_slice(packet, 64, 128)
}

/// An IV source that counts: deterministic and unpredictable enough for tests.
pub fn counting_rng() -> impl FnMut(&mut [u8]) {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    move |out: &mut [u8]| {
        for b in out {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *b = (state >> 56) as u8;
        }
    }
}

/// Runs `ops` through `engine` in frames of at most 64, in order.
pub fn run_engine(engine: &mut dyn Engine, ops: Vec<Op>) -> Vec<Op> {
    let mut out = Vec::with_capacity(ops.len());
    let mut frame = Frame::new();
    let mut pending = 0;
    for op in ops {
        if frame.is_full() {
            submit(engine, std::mem::take(&mut frame), &mut out);
            pending += 1;
        }
        frame.push(op).expect("frame has room");
    }
    if !frame.is_empty() {
        submit(engine, frame, &mut out);
        pending += 1;
    }
    let _ = pending;
    while engine.in_flight() > 0 {
        if let Some(mut done) = engine.poll_completed() {
            out.extend(done.drain());
        } else {
            std::thread::yield_now();
        }
    }
    out
}

fn submit(engine: &mut dyn Engine, mut frame: Frame, out: &mut Vec<Op>) {
    loop {
        match engine.submit(frame) {
            Ok(()) => return,
            Err(back) => {
                frame = back;
                if let Some(mut done) = engine.poll_completed() {
                    out.extend(done.drain());
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }
}

/// Encrypts `packets` with `sa` through `engine`; every packet must be
/// forwarded. `iv` picks the IV source for the suite.
pub fn seal_all(
    sa: &OutboundSa,
    packets: &[Vec<u8>],
    engine: &mut dyn Engine,
    counters: &mut Counters,
) -> Vec<Vec<u8>> {
    let mut rng = counting_rng();
    let iv = if sa.transform.suite().iv_len() == 16 {
        IvSource::Random(&mut rng)
    } else {
        IvSource::Sequence
    };
    let mut ctx = OutboundContext::new(Instant::now(), iv);
    let ops: Vec<Op> = packets
        .iter()
        .map(|p| prepare_outbound(sa, outbound_buf(p), &mut ctx).expect("prepare_outbound"))
        .collect();
    run_engine(engine, ops)
        .into_iter()
        .map(|op| {
            let (buf, verdict) = finish_outbound(op);
            counters.record(verdict, buf.len());
            assert_eq!(verdict, Verdict::Forward);
            buf.to_vec()
        })
        .collect()
}

/// Decrypts `packets` against `sad` through `engine`, returning each verdict
/// and output; prepare failures are recorded as drops.
pub fn open_all(
    sad: &Sad,
    packets: &[Vec<u8>],
    engine: &mut dyn Engine,
    counters: &mut Counters,
) -> Vec<(Verdict, Vec<u8>)> {
    let now = Instant::now();
    let mut results: Vec<Option<(Verdict, Vec<u8>)>> = vec![None; packets.len()];
    let mut pendings: Vec<(usize, InboundPending)> = Vec::new();
    let mut ops = Vec::new();
    for (i, p) in packets.iter().enumerate() {
        match prepare_inbound(sad, inbound_buf(p), now) {
            Ok((pending, op)) => {
                pendings.push((i, pending));
                ops.push(op);
            }
            Err((buf, reason)) => {
                counters.record(Verdict::Drop(reason), buf.len());
                results[i] = Some((Verdict::Drop(reason), buf.to_vec()));
            }
        }
    }
    let done = run_engine(engine, ops);
    for ((i, pending), op) in pendings.into_iter().zip(done) {
        let (buf, verdict) = finish_inbound(pending, op);
        counters.record(verdict, buf.len());
        results[i] = Some((verdict, buf.to_vec()));
    }
    results
        .into_iter()
        .map(|r| r.expect("every packet has a result"))
        .collect()
}

/// One packet through inbound processing with the inline engine.
pub fn open_one(sad: &Sad, packet: &[u8], counters: &mut Counters) -> (Verdict, Vec<u8>) {
    let mut engine = phalanx_crypto::InlineEngine::new();
    open_all(sad, &[packet.to_vec()], &mut engine, counters).remove(0)
}

/// One packet through outbound processing with the inline engine.
pub fn seal_one(sa: &OutboundSa, packet: &[u8]) -> Vec<u8> {
    let mut engine = phalanx_crypto::InlineEngine::new();
    seal_all(sa, &[packet.to_vec()], &mut engine, &mut Counters::new()).remove(0)
}

/// Every counter of [`Counters`], named, for delta assertions.
pub fn counter_set() -> CounterSet<Counters> {
    let mut set = CounterSet::new().with("forwarded", |c: &Counters| c.forwarded_packets);
    for reason in DropReason::ALL {
        set = set.with(reason.name(), move |c: &Counters| c.drops(reason));
    }
    set
}

/// Address helpers.
pub fn v4(a: Ipv4Addr) -> IpAddr {
    IpAddr::V4(a)
}
