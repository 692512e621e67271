//! Outbound batch processing, device-free: cleartext IP packets from the
//! TUN side in, ESP packets for the sockets out.
//!
//! Per packet (DESIGN.md "Packet path"): selectors read from the packet
//! (`flow_of`) → SPD through the worker's flow cache (RFC 4301 §5.1) →
//! PROTECT: outbound SA → `prepare_outbound` (sequence number, headers,
//! IV) into a crypto frame; BYPASS / DISCARD / no policy: counted and
//! dropped. Frames go to the engine as they fill; each completed op is
//! finished (`finish_outbound`), its outer header read for the
//! destination and stripped, and the rest handed to [`Egress`].
//!
//! IVs (RFC 4303 §3.3.2): the combined modes use the sequence number
//! (unique per key, RFC 4106 §3.1, RFC 7634 §2); AES-CBC gets bytes from
//! aws-lc's CSPRNG (unpredictable, RFC 3602 §2.1). If the CSPRNG ever
//! fails the packet is dropped as `iv_refused`, never sent with a stale IV.

use std::cell::Cell;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use phalanx_crypto::{Frame, PacketBuf};
use phalanx_esp::{
    finish_outbound, prepare_outbound, DropReason, IvSource, OutboundContext, Verdict,
};
use phalanx_io::{PacketBatch, PacketMeta};
use phalanx_sa::{FlowCache, FlowKey, OutboundSa, PolicyAction};
use phalanx_wire::EncrId;

use super::counters::{DaemonCounter, WorkerStats};
use super::engine::CryptoEngine;
use super::packet::{outer_route, BufPool};
use crate::install::Runtime;
use crate::limits::{FLOW_CACHE_ENTRIES, HEADROOM};

/// Where protected packets go.
pub trait Egress {
    /// An ESP packet to send in a UDP datagram (RFC 3948): `payload` is
    /// the UDP payload, `meta.remote` the peer address and port,
    /// `meta.local` our source address when known.
    fn udp(&mut self, payload: &[u8], meta: PacketMeta);
    /// A plain ESP packet for the raw socket: `esp` starts at the SPI;
    /// `meta.remote` is the peer (port 0).
    fn raw(&mut self, esp: &[u8], meta: PacketMeta);
}

/// A worker's outbound state, reused across batches.
#[derive(Debug)]
pub struct OutboundPath {
    cache: FlowCache,
    bufs: BufPool,
    spare: Vec<Frame>,
    local: IpAddr,
}

impl OutboundPath {
    /// State for a worker whose protected address is `local`; packet
    /// buffers of `buf_len` bytes (inner MTU plus head- and tailroom).
    pub fn new(local: IpAddr, buf_len: usize, batch: usize) -> OutboundPath {
        OutboundPath {
            cache: FlowCache::new(FLOW_CACHE_ENTRIES),
            bufs: BufPool::new(batch, buf_len),
            spare: vec![Frame::new()],
            local,
        }
    }

    /// Protects every packet of `input` with the SAs and policies of `rt`
    /// and hands the results to `egress`; counts everything in `stats`.
    /// Returns when every packet is done (the engine is drained).
    pub fn process<E: Egress>(
        &mut self,
        rt: &Runtime,
        input: &PacketBatch,
        engine: &mut CryptoEngine,
        egress: &mut E,
        stats: &mut WorkerStats,
        now: Instant,
    ) {
        let rng_failed = Cell::new(false);
        let mut fill = |iv: &mut [u8]| {
            if aws_lc_rs::rand::fill(iv).is_err() {
                rng_failed.set(true);
            }
        };
        let mut seq_ctx = OutboundContext::new(now, IvSource::Sequence);
        let mut rand_ctx = OutboundContext::new(now, IvSource::Random(&mut fill));
        let mut frame = self.spare.pop().unwrap_or_default();
        let mut last: Option<(u32, Arc<OutboundSa>)> = None;
        let local = self.local;
        for i in 0..input.len() {
            let packet = input.packet(i);
            let Some(id) = self.policy(rt, packet, stats) else {
                continue;
            };
            if last.as_ref().map(|(l, _)| *l) != Some(id) {
                last = rt.outbound.lookup(id).map(|sa| (id, sa));
            }
            let Some((_, sa)) = &last else {
                stats.daemon.bump(DaemonCounter::NoOutboundSa);
                continue;
            };
            let mut buf = self.bufs.take(HEADROOM);
            if !buf.extend_from_slice(packet) {
                stats
                    .outbound
                    .record(Verdict::Drop(DropReason::NoRoom), packet.len());
                self.bufs.put(buf);
                continue;
            }
            let ctx = if sa.transform.suite().encr == EncrId::AES_CBC {
                &mut rand_ctx
            } else {
                &mut seq_ctx
            };
            let op = match prepare_outbound(sa, buf, ctx) {
                Ok(op) if !rng_failed.replace(false) => op,
                Ok(op) => {
                    stats
                        .outbound
                        .record(Verdict::Drop(DropReason::IvRefused), op.buf.len());
                    self.bufs.put(op.buf);
                    continue;
                }
                Err((buf, reason)) => {
                    stats.outbound.record(Verdict::Drop(reason), buf.len());
                    self.bufs.put(buf);
                    continue;
                }
            };
            if let Err(op) = frame.push(op) {
                let next = self.spare.pop().unwrap_or_default();
                let full = std::mem::replace(&mut frame, next);
                engine.submit(full, &mut |done| {
                    complete(&mut self.bufs, &mut self.spare, done, egress, stats, local)
                });
                // The frame was just emptied; a push cannot fail.
                if let Err(op) = frame.push(op) {
                    self.bufs.put(op.buf);
                }
            }
        }
        if frame.is_empty() {
            self.spare.push(frame);
        } else {
            engine.submit(frame, &mut |done| {
                complete(&mut self.bufs, &mut self.spare, done, egress, stats, local)
            });
        }
        engine.drain(&mut |done| {
            complete(&mut self.bufs, &mut self.spare, done, egress, stats, local)
        });
        soft_events(&mut seq_ctx.soft_expired, stats);
        soft_events(&mut rand_ctx.soft_expired, stats);
    }

    /// The SA id of the policy that protects `packet`, or `None` (counted)
    /// when it is not protected.
    fn policy(&mut self, rt: &Runtime, packet: &[u8], stats: &mut WorkerStats) -> Option<u32> {
        let Ok(flow) = phalanx_wire::flow_of(packet) else {
            stats.daemon.bump(DaemonCounter::TunMalformed);
            return None;
        };
        let counter = match self.cache.lookup_action(&rt.spd, &FlowKey::from(flow)) {
            Some(found) => match found.action {
                PolicyAction::Protect(id) => return Some(id),
                PolicyAction::Bypass => DaemonCounter::PolicyBypass,
                PolicyAction::Discard => DaemonCounter::PolicyDiscard,
            },
            None => DaemonCounter::NoPolicy,
        };
        stats.daemon.bump(counter);
        None
    }
}

/// Finishes every op of a completed frame and hands the packets on.
fn complete<E: Egress>(
    bufs: &mut BufPool,
    spare: &mut Vec<Frame>,
    mut frame: Frame,
    egress: &mut E,
    stats: &mut WorkerStats,
    local: IpAddr,
) {
    for op in frame.drain() {
        let (buf, verdict) = finish_outbound(op);
        match verdict {
            Verdict::Forward if emit(&buf, egress, local) => {}
            Verdict::Forward => stats.daemon.bump(DaemonCounter::OuterHeader),
            Verdict::Drop(_) => {}
        }
        stats.outbound.record(verdict, buf.len());
        bufs.put(buf);
    }
    spare.push(frame);
}

/// Strips the outer header of a finished packet and hands the rest to
/// the socket that sends it; false when the header cannot be read.
fn emit<E: Egress>(buf: &PacketBuf, egress: &mut E, local: IpAddr) -> bool {
    let packet = buf.as_slice();
    let Some(route) = outer_route(packet) else {
        return false;
    };
    let Some(payload) = packet.get(route.payload_offset..) else {
        return false;
    };
    // Our tunnel address is the source; in transport mode the inner
    // source stays, and the kernel picks ours.
    let from = (route.src == local).then_some(route.src);
    match route.udp_dst_port {
        Some(port) => egress.udp(
            payload,
            PacketMeta {
                remote: SocketAddr::new(route.dst, port),
                local: from,
                stride: 0,
            },
        ),
        None => egress.raw(
            payload,
            PacketMeta {
                remote: SocketAddr::new(route.dst, 0),
                local: from,
                stride: 0,
            },
        ),
    }
    true
}

/// Counts (and logs: once per SA in its life) the SAs that crossed a soft
/// lifetime limit in this batch; the IKE daemon will rekey them.
fn soft_events(spis: &mut Vec<u32>, stats: &mut WorkerStats) {
    for spi in spis.drain(..) {
        stats.daemon.bump(DaemonCounter::SoftExpiredOut);
        tracing::info!(
            spi = format_args!("{spi:#x}"),
            "outbound SA reached a soft lifetime limit"
        );
    }
}
