//! Inbound batch processing, device-free: datagrams from the UDP socket
//! (ESP in UDP, RFC 3948) or ESP packets from the raw socket in, inner IP
//! packets for the TUN side out.
//!
//! Per packet: UDP payloads are classified first (RFC 3948 §2: a single
//! 0xFF octet is a NAT-keepalive, a zero marker an IKE message; both are
//! counted and consumed here, IKE comes with the next issue); the outer
//! IP (and UDP) header is rebuilt in front of the ESP packet from the
//! receive metadata (see the `packet` module); `prepare_inbound` (SAD by
//! SPI, replay pre-check, RFC 4303 §3.4) builds the op; the engine runs
//! it; `finish_inbound_with_events` authenticates, commits the replay
//! window, strips the trailer and checks the inner packet against the
//! SA's selectors (RFC 4301 §5.2); survivors go to [`Delivery`].

use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Instant;

use phalanx_crypto::Frame;
use phalanx_esp::{
    finish_inbound_with_events, prepare_inbound, DropReason, InboundPending, Verdict,
};
use phalanx_io::PacketBatch;
use phalanx_wire::natt::{classify, UdpEncapPayload};

use super::counters::{DaemonCounter, WorkerStats};
use super::engine::CryptoEngine;
use super::packet::{rebuild_outer, BufPool};
use crate::install::Runtime;

/// Headroom of inbound buffers: nothing is prepended inbound, but a
/// little room keeps the rebuilt header off the allocation's first line.
const INBOUND_HEADROOM: usize = 64;

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
}

/// A received batch and the socket it came from.
#[derive(Clone, Copy, Debug)]
pub struct Received<'a> {
    /// The packets: UDP payloads or ESP packets, with their addresses.
    pub batch: &'a PacketBatch,
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
        }
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
        let mut frame = self.spare.pop().unwrap_or_default();
        for i in 0..input.len() {
            let Some(op) = self.prepare(rt, input, i, ingress, stats, now) else {
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
        }
    }

    /// Packet `i` as a crypto op, its pending state queued; `None` when it
    /// was consumed or dropped (and counted).
    fn prepare(
        &mut self,
        rt: &Runtime,
        input: &PacketBatch,
        i: usize,
        ingress: Ingress,
        stats: &mut WorkerStats,
        now: Instant,
    ) -> Option<phalanx_crypto::Op> {
        let (payload, meta) = (input.packet(i), input.meta(i));
        if ingress == Ingress::Udp {
            match classify(payload) {
                Ok(UdpEncapPayload::Esp(_)) => {}
                Ok(UdpEncapPayload::Keepalive) => {
                    stats.daemon.bump(DaemonCounter::NattKeepalives);
                    return None;
                }
                Ok(UdpEncapPayload::Ike(_)) => {
                    stats.daemon.bump(DaemonCounter::IkeMessages);
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
        let udp = (ingress == Ingress::Udp).then(|| (meta.remote.port(), self.udp_port));
        let addresses = (meta.remote.ip(), meta.local.unwrap_or(self.local));
        let mut buf = self.bufs.take(INBOUND_HEADROOM);
        if !rebuild_outer(&mut buf, addresses, udp, payload) {
            stats.daemon.bump(DaemonCounter::OuterHeader);
            stats
                .inbound
                .record(Verdict::Drop(DropReason::NoRoom), payload.len());
            self.bufs.put(buf);
            return None;
        }
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
