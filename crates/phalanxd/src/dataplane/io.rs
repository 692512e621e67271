//! The device side of a worker: [`Egress`] and [`Delivery`] over real
//! sockets and the TUN queue, each collecting packets into a reusable
//! [`PacketBatch`] and flushing it with one batched call when it is full
//! or the input batch is done.
//!
//! Back-pressure: when a socket's send buffer is full the worker waits
//! for it to drain (bounded, `SEND_WAIT` at a time, `SEND_WAITS`
//! times) instead of dropping at once, which slows the TUN reads and so
//! the senders; what still does not fit is dropped and counted.

use std::io;
use std::net::IpAddr;
use std::ops::Range;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use phalanx_esp::{Counters, DropReason, Verdict};
use phalanx_io::path_mtu::IcmpSocket;
use phalanx_io::poll::{Interest, PollSet};
use phalanx_io::raw::RawEspSocket;
use phalanx_io::tun::TunDevice;
use phalanx_io::udp::UdpSocket;
use phalanx_io::{ErrorOrigin, PacketBatch, PacketMeta, SendFailure, SocketError};
use phalanx_sa::SaMode;

use super::counters::{DaemonCounter, DaemonCounters};
use super::inbound::Delivery;
use super::outbound::Egress;
use crate::install::Runtime;

/// Longest single wait for a full socket buffer to drain.
const SEND_WAIT: Duration = Duration::from_millis(5);

/// Most waits per flush before the rest of the batch is dropped.
const SEND_WAITS: usize = 20;

/// The raw ESP socket, shared by the workers (one raw socket receives a
/// copy of every ESP packet, so only one worker reads it; all send).
pub type SharedRaw = Arc<parking_lot::Mutex<RawEspSocket>>;

/// A socket that sends batches.
trait BatchSender: AsFd {
    fn send_from(&mut self, batch: &PacketBatch, first: usize) -> io::Result<usize>;
    /// The refusals of the last `send_from`.
    fn take_failures(&mut self, f: &mut dyn FnMut(SendFailure));
}

impl BatchSender for UdpSocket {
    fn send_from(&mut self, batch: &PacketBatch, first: usize) -> io::Result<usize> {
        self.send_batch_from(batch, first)
    }

    fn take_failures(&mut self, f: &mut dyn FnMut(SendFailure)) {
        self.take_send_failures(f);
    }
}

impl BatchSender for RawEspSocket {
    fn send_from(&mut self, batch: &PacketBatch, first: usize) -> io::Result<usize> {
        self.send_batch_from(batch, first)
    }

    fn take_failures(&mut self, f: &mut dyn FnMut(SendFailure)) {
        self.take_send_failures(f);
    }
}

/// Sends all of `batch`, waiting for room when the socket is full; hands
/// every packet the socket refused, or that could not be handed over, to
/// `refused` with the errno; returns how many packets went out. Clears the
/// batch.
fn flush_batch<S: BatchSender>(
    socket: &mut S,
    batch: &mut PacketBatch,
    refused: &mut dyn FnMut(&[u8], i32),
) -> usize {
    let (total, mut consumed, mut waits, mut lost) = (batch.len(), 0, 0, 0);
    let mut last_error = nix::libc::ENOBUFS;
    while consumed < total {
        let result = socket.send_from(batch, consumed);
        socket.take_failures(&mut |failure| {
            for k in failure.packets() {
                lost += 1;
                refused(batch.packet(k), failure.errno);
            }
        });
        match result {
            Ok(n) if n > 0 => consumed += n,
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && waits < SEND_WAITS => {
                waits += 1;
                let mut set = PollSet::with_capacity(1);
                set.add(socket.as_fd(), Interest::WRITE);
                if set.wait(Some(SEND_WAIT)).is_err() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                last_error = e.raw_os_error().unwrap_or(nix::libc::ENOBUFS);
                break;
            }
        }
    }
    // What the socket never took (its buffer stayed full past the waits,
    // or the descriptor failed) is lost too.
    for k in consumed..total {
        lost += 1;
        refused(batch.packet(k), last_error);
    }
    batch.clear();
    total - lost
}

/// Counts a packet a socket refused with `errno` (or never took) as an
/// outbound drop in `drops`, and on its SA, found by the SPI the packet
/// starts with (ESP in UDP and plain ESP alike: RFC 3948 §2.1): too big
/// for the path when the kernel said `EMSGSIZE`, else `send_failed`.
fn refused(rt: Option<&Runtime>, drops: &mut Counters, packet: &[u8], errno: i32) {
    let reason = if errno == nix::libc::EMSGSIZE {
        DropReason::PathMtuExceeded
    } else {
        DropReason::SendFailed
    };
    drops.record(Verdict::Drop(reason), packet.len());
    let spi = packet.first_chunk::<4>().map(|b| u32::from_be_bytes(*b));
    if let Some(sa) = spi.and_then(|spi| rt?.outbound_with_spi(spi)) {
        reason.record_on(&sa.drops);
    }
}

/// The raw ICMP sockets the path-MTU errors to inner senders go out on
/// (RFC 4301 §8.2.1), opened while `CAP_NET_RAW` is held; a family whose
/// socket could not be opened counts its errors as `icmp_send_failed`.
#[derive(Debug, Default)]
pub struct IcmpSockets {
    v4: Option<IcmpSocket>,
    v6: Option<IcmpSocket>,
}

impl IcmpSockets {
    /// No sockets: every error is counted as not sent.
    pub const fn none() -> IcmpSockets {
        IcmpSockets { v4: None, v6: None }
    }

    /// Opens both families; logs (once) a family it cannot open.
    pub fn open() -> IcmpSockets {
        let open = |v6: bool| match IcmpSocket::open(v6) {
            Ok(socket) => Some(socket),
            Err(error) => {
                let family = if v6 { "ICMPv6" } else { "ICMP" };
                tracing::warn!(%error, "no raw {family} socket: packets too big for the path MTU are dropped without telling their sender");
                None
            }
        };
        IcmpSockets {
            v4: open(false),
            v6: open(true),
        }
    }

    /// Sends `message` to `to` on the socket of its family.
    pub fn send(&self, message: &[u8], to: IpAddr) -> bool {
        let socket = if to.is_ipv6() { &self.v6 } else { &self.v4 };
        socket.as_ref().is_some_and(|s| s.send(message, to).is_ok())
    }
}

/// The protected side of one worker.
pub struct SocketEgress<'a> {
    /// This worker's UDP socket.
    pub udp: &'a mut UdpSocket,
    /// Its send batch.
    pub udp_tx: &'a mut PacketBatch,
    /// The raw socket, if plain ESP is on.
    pub raw: Option<&'a SharedRaw>,
    /// Its send batch.
    pub raw_tx: &'a mut PacketBatch,
    /// The raw AH socket, when an SA uses AH (packets go one by one).
    pub ah: Option<&'a SharedRaw>,
    /// Where ICMP errors to inner senders go.
    pub icmp: &'a IcmpSockets,
    /// The SAs, to count a refused packet on its SA.
    pub rt: Option<&'a Runtime>,
    /// What happened, merged into the worker's stats afterwards.
    pub counters: DaemonCounters,
    /// Packets the sockets refused, by reason (outbound drops), merged
    /// into the worker's outbound counters afterwards.
    pub drops: Counters,
}

impl SocketEgress<'_> {
    /// One packet alone on a raw socket (`None`: not opened, counted as
    /// refused); `attributed` starts at its SPI, for the per-SA count of
    /// a refusal.
    fn send_raw_one(
        &mut self,
        socket: Option<&SharedRaw>,
        attributed: &[u8],
        send: impl FnOnce(&mut RawEspSocket) -> io::Result<()>,
    ) {
        let sent = match socket {
            Some(socket) => send(&mut socket.lock()),
            None => Err(io::Error::from_raw_os_error(nix::libc::ENOTSOCK)),
        };
        match sent {
            Ok(()) => self.counters.bump(DaemonCounter::RawTxPackets),
            Err(e) => refused(self.rt, &mut self.drops, attributed, errno_of(&e)),
        }
    }

    /// Sends whatever is queued.
    pub fn flush(&mut self) {
        self.flush_udp();
        self.flush_raw();
    }

    /// Sends the queued UDP datagrams.
    fn flush_udp(&mut self) {
        if !self.udp_tx.is_empty() {
            let (rt, drops) = (self.rt, &mut self.drops);
            let mut on_refused = |p: &[u8], errno| refused(rt, drops, p, errno);
            let sent = flush_batch(self.udp, self.udp_tx, &mut on_refused) as u64;
            self.counters.add(DaemonCounter::UdpTxPackets, sent);
        }
    }

    /// Sends the queued raw ESP packets.
    fn flush_raw(&mut self) {
        if !self.raw_tx.is_empty() {
            let (rt, drops) = (self.rt, &mut self.drops);
            let mut on_refused = |p: &[u8], errno| refused(rt, drops, p, errno);
            let sent = match self.raw {
                Some(raw) => flush_batch(&mut *raw.lock(), self.raw_tx, &mut on_refused) as u64,
                None => {
                    // Validation refuses plain-ESP SAs without the raw
                    // socket; should one get here, it is counted.
                    for k in 0..self.raw_tx.len() {
                        on_refused(self.raw_tx.packet(k), nix::libc::ENOTSOCK);
                    }
                    self.raw_tx.clear();
                    0
                }
            };
            self.counters.add(DaemonCounter::RawTxPackets, sent);
        }
    }
}

/// Queues `packet` in `batch`, flushing first when it is full.
fn queue(
    batch: &mut PacketBatch,
    packet: &[u8],
    meta: PacketMeta,
    flush: &mut dyn FnMut(&mut PacketBatch),
) -> bool {
    if batch.push(packet, meta).is_some() {
        return true;
    }
    if !batch.is_empty() {
        flush(batch);
    }
    batch.push(packet, meta).is_some()
}

impl Egress for SocketEgress<'_> {
    fn udp(&mut self, payload: &[u8], meta: PacketMeta) {
        let (udp, counters, rt, drops) =
            (&mut *self.udp, &mut self.counters, self.rt, &mut self.drops);
        let queued = queue(self.udp_tx, payload, meta, &mut |batch| {
            let mut on_refused = |p: &[u8], errno| refused(rt, drops, p, errno);
            let sent = flush_batch(udp, batch, &mut on_refused) as u64;
            counters.add(DaemonCounter::UdpTxPackets, sent);
        });
        if !queued {
            self.counters.bump(DaemonCounter::IoDropped);
        }
    }

    fn udp_owned(&mut self, buf: &mut Vec<u8>, bounds: Range<usize>, meta: PacketMeta) {
        if self.udp_tx.free() == 0 {
            self.flush_udp();
        }
        // Swapped in when the lengths match; copied otherwise.
        if self.udp_tx.push_buffer(buf, bounds.clone(), meta).is_none() {
            match buf.get(bounds) {
                Some(payload) => self.udp(payload, meta),
                None => self.counters.bump(DaemonCounter::IoDropped),
            }
        }
    }

    fn raw_owned(&mut self, buf: &mut Vec<u8>, bounds: Range<usize>, meta: PacketMeta) {
        if self.raw.is_some() {
            if self.raw_tx.free() == 0 {
                self.flush_raw();
            }
            if self.raw_tx.push_buffer(buf, bounds.clone(), meta).is_some() {
                return;
            }
        }
        match buf.get(bounds) {
            Some(esp) => self.raw(esp, meta),
            None => self.counters.bump(DaemonCounter::IoDropped),
        }
    }

    fn udp_fragmentable(&mut self, payload: &[u8], meta: PacketMeta) {
        // What is queued goes first (the SA's order); then this datagram
        // alone, with the kernel allowed to fragment it.
        self.flush_udp();
        match self.udp.send_fragmentable(payload, meta) {
            Ok(()) => self.counters.bump(DaemonCounter::UdpTxPackets),
            Err(e) => refused(self.rt, &mut self.drops, payload, errno_of(&e)),
        }
    }

    fn raw_fragmentable(&mut self, esp: &[u8], meta: PacketMeta) {
        self.flush_raw();
        self.send_raw_one(self.raw, esp, |raw| raw.send_fragmentable(esp, meta));
    }

    fn icmp(&mut self, message: &[u8], to: IpAddr) -> bool {
        self.icmp.send(message, to)
    }

    fn ah(&mut self, packet: &[u8], meta: PacketMeta) {
        // The SPI, for the per-SA drop count: behind the IPv4 header, or
        // first in the IPv6 case (RFC 4302 §2: 4 octets into AH).
        let ah_at = if meta.remote.is_ipv4() {
            packet.first().map_or(0, |b| usize::from(b & 0x0f) * 4)
        } else {
            0
        };
        let spi_at = packet.get(ah_at + 4..).unwrap_or_default();
        self.send_raw_one(self.ah, spi_at, |ah| ah.send(packet, meta));
    }

    fn raw(&mut self, esp: &[u8], meta: PacketMeta) {
        let Some(raw) = self.raw else {
            // Validation refuses plain-ESP SAs without the raw socket;
            // should one get here, it is counted.
            refused(self.rt, &mut self.drops, esp, nix::libc::ENOTSOCK);
            return;
        };
        let (counters, rt, drops) = (&mut self.counters, self.rt, &mut self.drops);
        let queued = queue(self.raw_tx, esp, meta, &mut |batch| {
            let mut on_refused = |p: &[u8], errno| refused(rt, drops, p, errno);
            let sent = flush_batch(&mut *raw.lock(), batch, &mut on_refused) as u64;
            counters.add(DaemonCounter::RawTxPackets, sent);
        });
        if !queued {
            self.counters.bump(DaemonCounter::IoDropped);
        }
    }
}

/// Errors read from a socket's queue per call, and calls per wake-up:
/// what is left keeps `POLLERR` set and is read at the next one.
const ERRORS_PER_CALL: usize = 64;
const ERROR_CALLS: usize = 4;

/// A socket with an error queue (ip(7) `IP_RECVERR`, set by phalanx-io).
pub trait ErrorQueue {
    /// Hands `f` up to `max` queued errors; returns how many.
    fn errors(&mut self, max: usize, f: &mut dyn FnMut(SocketError)) -> io::Result<usize>;
}

impl ErrorQueue for UdpSocket {
    fn errors(&mut self, max: usize, f: &mut dyn FnMut(SocketError)) -> io::Result<usize> {
        self.recv_errors(max, f)
    }
}

impl ErrorQueue for RawEspSocket {
    fn errors(&mut self, max: usize, f: &mut dyn FnMut(SocketError)) -> io::Result<usize> {
        self.recv_errors(max, f)
    }
}

/// Reads what the kernel queued on `socket` about our packets (at most
/// `ERROR_CALLS` × `ERRORS_PER_CALL` entries) and learns from each
/// ([`learn_from_error`]).
pub fn drain_errors(
    socket: &mut dyn ErrorQueue,
    rt: &Runtime,
    now: Instant,
    counters: &mut DaemonCounters,
) {
    for _ in 0..ERROR_CALLS {
        let read = socket.errors(ERRORS_PER_CALL, &mut |e| {
            learn_from_error(&e, rt, now, counters)
        });
        if !matches!(read, Ok(n) if n == ERRORS_PER_CALL) {
            break;
        }
    }
}

/// What one report of the kernel teaches (RFC 1191 §4, RFC 8201 §4): an
/// ICMP error about our packet is counted (`icmp_errors_received`); a path
/// MTU (`EMSGSIZE`: a send the kernel refused locally, Fragmentation
/// Needed, Packet Too Big) is learned by the SA whose SPI the quoted ESP
/// header carries, or, when the report quotes nothing (a local refusal),
/// by every outbound SA to its destination (`path_mtu_learned`). The SA
/// raises values below the family's floor (RFC 5927 §7.1).
pub fn learn_from_error(
    e: &SocketError,
    rt: &Runtime,
    now: Instant,
    counters: &mut DaemonCounters,
) {
    if matches!(e.origin, ErrorOrigin::Icmp | ErrorOrigin::Icmp6) {
        counters.bump(DaemonCounter::IcmpErrorsReceived);
    }
    if e.errno != nix::libc::EMSGSIZE || e.info == 0 {
        return;
    }
    // A zero SPI is the non-ESP marker of an IKE message (RFC 3948 §2.2).
    let spi = e
        .payload()
        .first_chunk::<4>()
        .map(|b| u32::from_be_bytes(*b))
        .filter(|&s| s != 0);
    let destination = e.destination.map(|d| d.ip());
    for sa in rt.outbound_sas() {
        let SaMode::Tunnel { remote, .. } = sa.params.mode else {
            continue;
        };
        let ours = match spi {
            Some(spi) => sa.params.spi == spi,
            None => destination == Some(remote),
        };
        if ours {
            sa.path_mtu.learn(e.info, remote.is_ipv6(), now);
            counters.bump(DaemonCounter::PathMtuLearned);
        }
    }
}

/// The errno of a failed send (`ENOBUFS` when the error carries none).
fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(nix::libc::ENOBUFS)
}

/// The cleartext side of one worker.
pub struct TunDelivery<'a> {
    /// This worker's TUN queue.
    pub tun: &'a mut TunDevice,
    /// Its write batch (GRO coalesces runs of one flow on the way out).
    pub tx: &'a mut PacketBatch,
    /// What happened, merged into the worker's stats afterwards.
    pub counters: DaemonCounters,
}

impl TunDelivery<'_> {
    /// Writes whatever is queued.
    pub fn flush(&mut self) {
        flush_tun(self.tun, self.tx, &mut self.counters);
    }
}

fn flush_tun(tun: &mut TunDevice, tx: &mut PacketBatch, counters: &mut DaemonCounters) {
    if tx.is_empty() {
        return;
    }
    let total = tx.len() as u64;
    match tun.send_batch(tx) {
        Ok(n) => {
            counters.add(DaemonCounter::TunTxPackets, n as u64);
            counters.add(DaemonCounter::SendErrors, total.saturating_sub(n as u64));
        }
        Err(_) => counters.add(DaemonCounter::SendErrors, total),
    }
    tx.clear();
}

impl Delivery for TunDelivery<'_> {
    fn deliver(&mut self, packet: &[u8]) {
        let (tun, counters) = (&mut *self.tun, &mut self.counters);
        let queued = queue(self.tx, packet, PacketMeta::default(), &mut |batch| {
            flush_tun(tun, batch, counters)
        });
        if !queued {
            self.counters.bump(DaemonCounter::IoDropped);
        }
    }
}
