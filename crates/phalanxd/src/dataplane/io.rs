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
use std::time::Duration;

use phalanx_io::path_mtu::IcmpSocket;
use phalanx_io::poll::{Interest, PollSet};
use phalanx_io::raw::RawEspSocket;
use phalanx_io::tun::TunDevice;
use phalanx_io::udp::UdpSocket;
use phalanx_io::{PacketBatch, PacketMeta};

use super::counters::{DaemonCounter, DaemonCounters};
use super::inbound::Delivery;
use super::outbound::Egress;

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
}

impl BatchSender for UdpSocket {
    fn send_from(&mut self, batch: &PacketBatch, first: usize) -> io::Result<usize> {
        self.send_batch_from(batch, first)
    }
}

impl BatchSender for RawEspSocket {
    fn send_from(&mut self, batch: &PacketBatch, first: usize) -> io::Result<usize> {
        self.send_batch_from(batch, first)
    }
}

/// Sends all of `batch`, waiting for room when the socket is full; returns
/// how many packets the socket consumed. Clears the batch.
fn flush_batch<S: BatchSender>(socket: &mut S, batch: &mut PacketBatch) -> usize {
    let (total, mut sent, mut waits) = (batch.len(), 0, 0);
    while sent < total {
        match socket.send_from(batch, sent) {
            Ok(n) if n > 0 => sent += n,
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
            Err(_) => break,
        }
    }
    batch.clear();
    sent
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
    /// Where ICMP errors to inner senders go.
    pub icmp: &'a IcmpSockets,
    /// What happened, merged into the worker's stats afterwards.
    pub counters: DaemonCounters,
}

impl SocketEgress<'_> {
    /// Sends whatever is queued.
    pub fn flush(&mut self) {
        self.flush_udp();
        self.flush_raw();
    }

    /// Sends the queued UDP datagrams.
    fn flush_udp(&mut self) {
        if !self.udp_tx.is_empty() {
            let total = self.udp_tx.len() as u64;
            let sent = flush_batch(self.udp, self.udp_tx) as u64;
            self.counters.add(DaemonCounter::UdpTxPackets, sent);
            self.counters.add(DaemonCounter::SendErrors, total - sent);
        }
    }

    /// Sends the queued raw ESP packets.
    fn flush_raw(&mut self) {
        if !self.raw_tx.is_empty() {
            let total = self.raw_tx.len() as u64;
            let sent = match self.raw {
                Some(raw) => flush_batch(&mut *raw.lock(), self.raw_tx) as u64,
                None => {
                    self.raw_tx.clear();
                    0
                }
            };
            self.counters.add(DaemonCounter::RawTxPackets, sent);
            self.counters.add(DaemonCounter::SendErrors, total - sent);
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
        let (udp, counters) = (&mut *self.udp, &mut self.counters);
        let queued = queue(self.udp_tx, payload, meta, &mut |batch| {
            let total = batch.len() as u64;
            let sent = flush_batch(udp, batch) as u64;
            counters.add(DaemonCounter::UdpTxPackets, sent);
            counters.add(DaemonCounter::SendErrors, total - sent);
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
        // The sockets leave path-MTU discovery at the kernel's default
        // (ip(7) IP_PMTUDISC_WANT): the kernel fragments a datagram larger
        // than the route's MTU. Queued behind what is queued, it keeps
        // the SA's order.
        self.udp(payload, meta);
    }

    fn icmp(&mut self, message: &[u8], to: IpAddr) -> bool {
        self.icmp.send(message, to)
    }

    fn raw(&mut self, esp: &[u8], meta: PacketMeta) {
        let Some(raw) = self.raw else {
            // Validation refuses plain-ESP SAs without the raw socket.
            self.counters.bump(DaemonCounter::SendErrors);
            return;
        };
        let counters = &mut self.counters;
        let queued = queue(self.raw_tx, esp, meta, &mut |batch| {
            let total = batch.len() as u64;
            let sent = flush_batch(&mut *raw.lock(), batch) as u64;
            counters.add(DaemonCounter::RawTxPackets, sent);
            counters.add(DaemonCounter::SendErrors, total - sent);
        });
        if !queued {
            self.counters.bump(DaemonCounter::IoDropped);
        }
    }
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
