//! Inbound batch processing, device-free: datagrams from the UDP socket
//! (ESP in UDP, RFC 3948) or ESP packets from the raw socket in, inner IP
//! packets for the TUN side out.
//!
//! Per packet: UDP payloads are classified first (RFC 3948 §2: a single
//! 0xFF octet is a NAT-keepalive, a zero marker an IKE message; both are
//! counted here, IKE messages handed to the IKE thread without the marker,
//! keepalives consumed); the outer
//! IP (and UDP) header is rebuilt in front of the ESP packet from the
//! receive metadata, its TOS included, so an outer CE mark reaches the
//! inner packet (RFC 6040 §4.2; see the `packet` module); `prepare_inbound` (SAD by
//! SPI, replay pre-check, RFC 4303 §3.4) builds the op; the engine runs
//! it; `finish_inbound_with_events` authenticates, commits the replay
//! window, strips the trailer and checks the inner packet against the
//! SA's selectors (RFC 4301 §5.2); survivors go to [`Delivery`].

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use phalanx_crypto::{Frame, PacketBuf};
use phalanx_esp::{
    finish_inbound_with_events, prepare_inbound, DropReason, InboundPending, Verdict,
};
use phalanx_io::PacketBatch;
use phalanx_wire::natt::{classify, UdpEncapPayload};

use super::counters::{DaemonCounter, WorkerStats};
use super::engine::CryptoEngine;
use super::packet::{
    prepend_outer, rebuild_outer, BufPool, Input, OuterHeader, MAX_REBUILT_HEADER,
};
use crate::ike::{ToIke, WorkerLink};
use crate::install::Runtime;

/// Headroom of inbound buffers and of the socket receive batch: room to
/// rebuild the outer IPv6 + UDP header (48 bytes) in front of a received
/// payload in place, rounded up to a cache line.
pub(crate) const INBOUND_HEADROOM: usize = 64;

/// Where decapsulated packets go.
pub trait Delivery {
    /// One inner IP packet for the TUN device.
    fn deliver(&mut self, packet: &[u8]);
}

/// Which socket a batch came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ingress {
    /// The ESP-in-UDP socket: packets are UDP payloads.
    Udp,
    /// The raw ESP socket: packets start at the SPI.
    Raw,
    /// The raw AH socket: IPv4 packets whole (their header is in the
    /// ICV), IPv6 packets from the AH header on (phalanx_io::raw).
    Ah,
}

/// A received batch and the socket it came from.
#[derive(Clone, Copy, Debug)]
pub struct Received<'a> {
    /// The packets: UDP payloads or ESP packets, with their addresses.
    pub batch: &'a PacketBatch,
    /// Which socket.
    pub ingress: Ingress,
}

/// A received batch whose buffers the inbound path may take, and the
/// socket it came from.
#[derive(Debug)]
pub struct ReceivedMut<'a> {
    /// The packets: UDP payloads or ESP packets, with their addresses.
    pub batch: &'a mut PacketBatch,
    /// Which socket.
    pub ingress: Ingress,
}

/// A worker's inbound state, reused across batches.
#[derive(Debug)]
pub struct InboundPath {
    bufs: BufPool,
    spare: Vec<Frame>,
    /// One per op in flight, in submission order (frames keep op order).
    pending: VecDeque<InboundPending>,
    soft: Vec<u32>,
    local: IpAddr,
    udp_port: u16,
    link: Option<WorkerLink>,
}

/// What the completion of a frame needs, borrowed apart from the rest of
/// the path.
struct Completion<'a, D: Delivery> {
    bufs: &'a mut BufPool,
    spare: &'a mut Vec<Frame>,
    pending: &'a mut VecDeque<InboundPending>,
    soft: &'a mut Vec<u32>,
    tun: &'a mut D,
    stats: &'a mut WorkerStats,
}

impl InboundPath {
    /// State for a worker whose protected address is `local` and UDP port
    /// `udp_port`; buffers of `buf_len` bytes (the largest datagram plus
    /// the rebuilt outer header).
    pub fn new(local: IpAddr, udp_port: u16, buf_len: usize, batch: usize) -> InboundPath {
        InboundPath {
            bufs: BufPool::new(batch, buf_len),
            spare: vec![Frame::new()],
            pending: VecDeque::with_capacity(batch * 2),
            soft: Vec::new(),
            local,
            udp_port,
            link: None,
        }
    }

    /// Hands IKE messages received on the NAT-T port and soft lifetime
    /// events to the IKE thread over `link`.
    pub fn set_link(&mut self, link: WorkerLink) {
        self.link = Some(link);
    }

    /// Decapsulates every packet of `input` with the SAs of `rt` and hands
    /// the inner packets to `tun`; counts everything in `stats`. Returns
    /// when every packet is done (the engine is drained).
    pub fn process<D: Delivery>(
        &mut self,
        rt: &Runtime,
        received: Received<'_>,
        engine: &mut CryptoEngine,
        tun: &mut D,
        stats: &mut WorkerStats,
        now: Instant,
    ) {
        let Received {
            batch: input,
            ingress,
        } = received;
        self.run(rt, (Input::Shared(input), ingress), engine, tun, stats, now);
    }

    /// As [`process`](Self::process), but each ESP packet's buffer is
    /// swapped out of the batch into the ESP layer instead of copied (the
    /// batch gets one of the path's buffers of the same length back), and
    /// the outer header is rebuilt in the headroom in front of it. Packets
    /// with less than 48 bytes (IPv6 + UDP header) in front of them are
    /// copied as before. Afterwards the batch's packet bytes are
    /// unspecified: clear it before reuse.
    pub fn process_batch<D: Delivery>(
        &mut self,
        rt: &Runtime,
        received: ReceivedMut<'_>,
        engine: &mut CryptoEngine,
        tun: &mut D,
        stats: &mut WorkerStats,
        now: Instant,
    ) {
        let input = (Input::Owned(received.batch), received.ingress);
        self.run(rt, input, engine, tun, stats, now);
    }

    /// The body of both entry points.
    fn run<D: Delivery>(
        &mut self,
        rt: &Runtime,
        (mut input, ingress): (Input<'_>, Ingress),
        engine: &mut CryptoEngine,
        tun: &mut D,
        stats: &mut WorkerStats,
        now: Instant,
    ) {
        let mut frame = self.spare.pop().unwrap_or_default();
        for i in 0..input.batch().len() {
            let Some(op) = self.prepare(rt, &mut input, i, ingress, stats, now) else {
                continue;
            };
            if let Err(op) = frame.push(op) {
                let next = self.spare.pop().unwrap_or_default();
                let full = std::mem::replace(&mut frame, next);
                let mut done = self.completion(tun, stats);
                engine.submit(full, &mut |f| done.frame(f));
                // The frame was just emptied; a push cannot fail.
                if let Err(op) = frame.push(op) {
                    self.pending.pop_back();
                    self.bufs.put(op.buf);
                }
            }
        }
        let mut done = self.completion(tun, stats);
        if frame.is_empty() {
            done.spare.push(frame);
        } else {
            engine.submit(frame, &mut |f| done.frame(f));
        }
        engine.drain(&mut |f| done.frame(f));
        for spi in self.soft.drain(..) {
            stats.daemon.bump(DaemonCounter::SoftExpiredIn);
            tracing::info!(
                spi = format_args!("{spi:#x}"),
                "inbound SA reached a soft lifetime limit"
            );
            let message = ToIke::SoftExpired {
                spi,
                outbound: false,
            };
            if self.link.as_ref().is_some_and(|l| !l.send(message)) {
                stats.daemon.bump(DaemonCounter::IkeQueueFull);
            }
        }
    }

    /// Packet `i` as a crypto op, its pending state queued; `None` when it
    /// was consumed or dropped (and counted).
    fn prepare(
        &mut self,
        rt: &Runtime,
        input: &mut Input<'_>,
        i: usize,
        ingress: Ingress,
        stats: &mut WorkerStats,
        now: Instant,
    ) -> Option<phalanx_crypto::Op> {
        let (payload, meta) = (input.batch().packet(i), *input.batch().meta(i));
        if ingress == Ingress::Udp {
            match classify(payload) {
                Ok(UdpEncapPayload::Esp(_)) => {}
                Ok(UdpEncapPayload::Keepalive) => {
                    stats.daemon.bump(DaemonCounter::NattKeepalives);
                    return None;
                }
                Ok(UdpEncapPayload::Ike(message)) => {
                    stats.daemon.bump(DaemonCounter::IkeMessages);
                    self.forward_ike(message, &meta, stats);
                    return None;
                }
                Err(_) => {
                    stats
                        .inbound
                        .record(Verdict::Drop(DropReason::Truncated), payload.len());
                    return None;
                }
            }
        }
        let header = OuterHeader {
            src: meta.remote.ip(),
            dst: meta.local.unwrap_or(self.local),
            udp: (ingress == Ingress::Udp).then(|| (meta.remote.port(), self.udp_port)),
            tos: meta.tos,
            ah: ingress == Ingress::Ah,
        };
        // IPv4 AH arrives with the header its ICV covers: kept as it is.
        let whole = ingress == Ingress::Ah && meta.remote.is_ipv4();
        let payload_len = payload.len();
        let Some(buf) = self.outer_packet(input, i, (!whole).then_some(&header)) else {
            stats.daemon.bump(DaemonCounter::OuterHeader);
            stats
                .inbound
                .record(Verdict::Drop(DropReason::NoRoom), payload_len);
            return None;
        };
        match prepare_inbound(&rt.inbound, buf, now) {
            Ok((pending, op)) => {
                self.pending.push_back(pending);
                Some(op)
            }
            Err((buf, reason)) => {
                stats.inbound.record(Verdict::Drop(reason), buf.len());
                self.bufs.put(buf);
                None
            }
        }
    }

    /// An IKE message from the NAT-T port (RFC 7296 §2.23), marker
    /// stripped, to the IKE thread; never waits (a full queue is counted).
    fn forward_ike(&self, message: &[u8], meta: &phalanx_io::PacketMeta, stats: &mut WorkerStats) {
        let Some(link) = &self.link else {
            return;
        };
        let sent = link.send(ToIke::Datagram {
            local: SocketAddr::new(meta.local.unwrap_or(self.local), self.udp_port),
            remote: meta.remote,
            bytes: message.to_vec(),
        });
        if !sent {
            stats.daemon.bump(DaemonCounter::IkeQueueFull);
        }
    }

    /// Packet `i` of `input` behind its rebuilt outer `header`, in a
    /// buffer for the ESP layer: swapped out of an owned batch when there
    /// is room in front of it, else copied. `None` when the header cannot
    /// be built or the packet does not fit.
    fn outer_packet(
        &mut self,
        input: &mut Input<'_>,
        i: usize,
        header: Option<&OuterHeader>,
    ) -> Option<PacketBuf> {
        let swapped = match input {
            Input::Owned(batch) => self.bufs.swap_out(batch, i, (MAX_REBUILT_HEADER, 0)),
            Input::Shared(_) => None,
        };
        let (mut buf, built) = match (swapped, header) {
            (Some(mut buf), Some(header)) => {
                let built = prepend_outer(&mut buf, header);
                (buf, built)
            }
            (Some(buf), None) => (buf, true),
            (None, Some(header)) => {
                let mut buf = self.bufs.take(INBOUND_HEADROOM);
                let built = rebuild_outer(&mut buf, header, input.batch().packet(i));
                (buf, built)
            }
            (None, None) => {
                let mut buf = self.bufs.take(INBOUND_HEADROOM);
                let built = buf.extend_from_slice(input.batch().packet(i));
                (buf, built)
            }
        };
        if built {
            return Some(buf);
        }
        buf.reset(0);
        self.bufs.put(buf);
        None
    }

    fn completion<'a, D: Delivery>(
        &'a mut self,
        tun: &'a mut D,
        stats: &'a mut WorkerStats,
    ) -> Completion<'a, D> {
        Completion {
            bufs: &mut self.bufs,
            spare: &mut self.spare,
            pending: &mut self.pending,
            soft: &mut self.soft,
            tun,
            stats,
        }
    }
}

impl<D: Delivery> Completion<'_, D> {
    /// Finishes every op of a completed frame and delivers the survivors.
    fn frame(&mut self, mut frame: Frame) {
        for op in frame.drain() {
            // Every op in flight has its pending queued, in the same order.
            let Some(pending) = self.pending.pop_front() else {
                self.stats
                    .inbound
                    .record(Verdict::Drop(DropReason::InvalidLayout), op.buf.len());
                self.bufs.put(op.buf);
                continue;
            };
            let (buf, verdict) = finish_inbound_with_events(pending, op, self.soft);
            if verdict == Verdict::Forward {
                self.tun.deliver(buf.as_slice());
            }
            self.stats.inbound.record(verdict, buf.len());
            self.bufs.put(buf);
        }
        self.spare.push(frame);
    }
}
