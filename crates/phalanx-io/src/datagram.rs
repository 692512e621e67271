//! The batched datagram engine shared by the UDP and raw ESP sockets:
//! `recvmmsg` into a batch, and `sendmmsg` of a batch grouped into GSO
//! messages, with the error policy of both.

use std::io;
use std::net::{SocketAddr, SocketAddrV6};
use std::os::fd::BorrowedFd;

use crate::batch::{PacketBatch, PacketMeta};
use crate::errqueue::is_pending_icmp_error;
use crate::plan::{gso_group_len, OutPacket};
use crate::stats::SocketStats;
use crate::sys::{self, MsgScratch, OutMsg, RecvInfo};

/// Packets of a batch the kernel refused to send, and why.
///
/// `first..first + count` index the batch handed to `send_batch` /
/// `send_batch_from` (the packets of one message: one, or a GSO run);
/// `errno` is what `sendmmsg(2)` returned for that message, e.g.
/// `EMSGSIZE` (larger than the route's path MTU: see
/// [`errqueue`](crate::errqueue)), `ENETUNREACH`, `EHOSTUNREACH`, `EPERM`
/// (a netfilter rule), `EINVAL` (an address the socket cannot send to).
/// Each such packet is also counted in
/// [`SocketStats::send_dropped`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendFailure {
    /// Index of the first refused packet in the batch.
    pub first: usize,
    /// Number of consecutive refused packets.
    pub count: usize,
    /// The `errno` of the refusal (`libc::EMSGSIZE`, ...).
    pub errno: i32,
}

impl SendFailure {
    /// The refused packets' indices.
    pub fn packets(&self) -> std::ops::Range<usize> {
        self.first..self.first + self.count
    }
}

/// What to do after `sendmmsg` failed on the first message of a call.
enum ErrorAction {
    /// Nothing more can go now (`EAGAIN`): report what was sent.
    Stop,
    /// GSO was refused and is now off: plan again.
    Replan,
    /// The first message cannot be sent: drop it (counted) and go on.
    Skip,
    /// The descriptor itself is unusable.
    Fatal,
}

/// A GSO message the kernel refused with `EINVAL`, being sent again as
/// single datagrams to learn whether the segment size or GSO itself was
/// the problem.
#[derive(Clone, Copy, Debug)]
struct GsoRetry {
    /// One past its last packet.
    end: usize,
    /// Its segment size.
    segment_size: usize,
    /// A single datagram of the segment size was accepted: the size fits
    /// the path, so GSO itself was refused.
    gso_at_fault: bool,
}

/// Message scratch, plan and counters of one socket.
pub(crate) struct DatagramIo {
    scratch: MsgScratch,
    infos: Vec<RecvInfo>,
    plan: Vec<OutMsg>,
    /// Refusals of the last send call, until taken; never grows past
    /// its capacity (`max_batch`).
    failures: Vec<SendFailure>,
    /// Counters, owned by the socket that owns this engine.
    pub(crate) stats: SocketStats,
    /// Whether sends may use `UDP_SEGMENT`.
    pub(crate) gso: bool,
    /// The GSO message of the current send call being sent again as
    /// single datagrams, if any.
    gso_retry: Option<GsoRetry>,
    /// Destinations of a dual-stack IPv6 socket are IPv4-mapped.
    v6_socket: bool,
    /// A raw socket: destination ports are meaningless and sent as 0
    /// (raw(7); IPv6 raw sockets refuse a port other than 0 or the protocol).
    raw: bool,
}

impl DatagramIo {
    /// Room for `max_msgs` messages per system call and for the refusals
    /// of a batch of `max_batch` packets; `gso` allows `UDP_SEGMENT`
    /// messages of up to `MAX_GSO_SEGMENTS` packets each.
    pub(crate) fn new(
        max_msgs: usize,
        max_batch: usize,
        gso: bool,
        v6_socket: bool,
        raw: bool,
    ) -> Self {
        let max_msgs = max_msgs.clamp(1, crate::limits::UIO_MAXIOV);
        // A GSO message takes one iovec per packet; allow a full batch of
        // packets even when the messages are few.
        let max_iovs = (max_msgs * 2).clamp(64, crate::limits::UIO_MAXIOV);
        Self {
            scratch: MsgScratch::new(max_msgs, max_iovs),
            infos: vec![RecvInfo::default(); max_msgs],
            plan: Vec::with_capacity(max_msgs),
            failures: Vec::with_capacity(max_batch.max(1)),
            stats: SocketStats::default(),
            gso,
            gso_retry: None,
            v6_socket,
            raw,
        }
    }

    /// `recvmmsg` into `bufs` (at most `max_msgs`); the reports are in
    /// [`received`](Self::received).
    pub(crate) fn recv_raw<'a>(
        &mut self,
        fd: BorrowedFd<'_>,
        bufs: impl Iterator<Item = &'a mut [u8]>,
        want: usize,
        dont_wait: bool,
    ) -> io::Result<usize> {
        let want = want.min(self.infos.len());
        let got = match sys::recv_mmsg(
            fd,
            &mut self.scratch,
            bufs,
            &mut self.infos[..want],
            dont_wait,
        ) {
            Ok(got) => got,
            // The pending error an ICMP error set: nothing received, the
            // error itself is on the error queue (crate::errqueue).
            Err(err) if is_pending_icmp_error(&err) => {
                self.stats.recv_pending_errors += 1;
                return Ok(0);
            }
            Err(err) => return Err(err),
        };
        if got > 0 {
            self.stats.recv_calls += 1;
        }
        // Messages come in queue order: the last count is the latest.
        if let Some(drops) = self.infos[..got].iter().rev().find_map(|i| i.kernel_drops) {
            self.stats.kernel_rx_dropped = u64::from(drops);
        }
        Ok(got)
    }

    /// Reports of the last [`recv_raw`](Self::recv_raw).
    pub(crate) fn received(&self) -> &[RecvInfo] {
        &self.infos
    }

    /// Receives straight into the free slots of `batch`. `describe` turns a
    /// message (report and receive area) into the packet to keep, or `None`
    /// to drop it (counted in `recv_dropped`). Returns the packets added.
    pub(crate) fn recv_direct(
        &mut self,
        fd: BorrowedFd<'_>,
        batch: &mut PacketBatch,
        dont_wait: bool,
        mut describe: impl FnMut(&RecvInfo, &[u8]) -> Option<(usize, usize, PacketMeta)>,
    ) -> io::Result<usize> {
        let want = batch.free();
        if want == 0 {
            return Ok(0);
        }
        let got = self.recv_raw(fd, batch.free_rooms_mut(), want, dont_wait)?;
        let infos = &self.infos;
        let kept = batch.commit_with(got, |j, area| describe(&infos[j], area));
        self.stats.recv_dropped += (got - kept) as u64;
        self.stats.packets_received += kept as u64;
        Ok(kept)
    }

    /// Sends packets `first..` of `batch` to their `meta.remote`, grouping
    /// runs into GSO messages when allowed. Returns the number of packets
    /// consumed: sent, or dropped (counted in `send_dropped` and recorded
    /// for [`take_failures`](Self::take_failures), which forgets those of
    /// the previous call). Fewer than `batch.len() - first` means the
    /// socket would block; `Err` only when nothing was consumed and the
    /// socket would block, or on an error of the descriptor itself.
    pub(crate) fn send(
        &mut self,
        fd: BorrowedFd<'_>,
        batch: &PacketBatch,
        first: usize,
    ) -> io::Result<usize> {
        self.failures.clear();
        self.gso_retry = None;
        let end = batch.len();
        let mut next = first.min(end);
        while next < end {
            self.settle_gso_retry(next);
            self.plan_from(batch, next);
            let result = sys::send_mmsg(fd, &mut self.scratch, &self.plan, |k| batch.packet(k));
            let err = match result {
                Ok(0) => io::Error::from(io::ErrorKind::WouldBlock),
                Ok(sent) => {
                    next = self.account_sent(batch, sent);
                    continue;
                }
                Err(err) => err,
            };
            match self.classify(&err) {
                ErrorAction::Stop if next > first => break,
                ErrorAction::Stop | ErrorAction::Fatal => return Err(err),
                ErrorAction::Replan => {}
                ErrorAction::Skip => {
                    // The error is about the plan's first message (sendmmsg(2)).
                    let Some(&dropped) = self.plan.first() else {
                        return Err(err);
                    };
                    self.refused(dropped.first, dropped.count, &err);
                    next = dropped.first + dropped.count;
                }
            }
        }
        self.settle_gso_retry(next);
        Ok(next - first)
    }

    /// Whether this is an IPv6 socket's engine (whose IPv4 destinations
    /// are sent IPv4-mapped).
    pub(crate) fn v6_socket(&self) -> bool {
        self.v6_socket
    }

    /// Sends one packet outside any batch: `payload` to `meta.remote`,
    /// from `meta.local`, with `meta.tos`, as a batch's packet would go.
    /// A refusal is returned and counted (`send_dropped` and its cause),
    /// not recorded for [`take_failures`](Self::take_failures).
    pub(crate) fn send_one(
        &mut self,
        fd: BorrowedFd<'_>,
        payload: &[u8],
        meta: &PacketMeta,
    ) -> io::Result<()> {
        let msg = OutMsg {
            remote: self.map_remote(meta.remote),
            local: meta.local,
            first: 0,
            count: 1,
            segment_size: 0,
            tos: meta.tos,
        };
        let err = match sys::send_mmsg(fd, &mut self.scratch, &[msg], |_| payload) {
            Ok(0) => io::Error::from(io::ErrorKind::WouldBlock),
            Ok(_) => {
                self.stats.send_calls += 1;
                self.stats.packets_sent += 1;
                return Ok(());
            }
            Err(err) => err,
        };
        if matches!(self.classify_single(&err), ErrorAction::Skip) {
            self.count_refused(1, &err);
        }
        Err(err)
    }

    /// Hands out (and forgets) the refusals of the last send call, in
    /// packet order.
    pub(crate) fn take_failures(&mut self, f: impl FnMut(SendFailure)) {
        self.failures.drain(..).for_each(f);
    }

    /// Counts `count` packets refused with `err`.
    fn count_refused(&mut self, count: usize, err: &io::Error) {
        let count = count as u64;
        self.stats.send_dropped += count;
        if err.raw_os_error() == Some(libc::EMSGSIZE) {
            self.stats.send_too_big += count;
        } else {
            self.stats.send_other_errors += count;
        }
    }

    /// Counts and records the refusal of packets `first..first + count`.
    fn refused(&mut self, first: usize, count: usize, err: &io::Error) {
        let errno = err.raw_os_error().unwrap_or(0);
        let count64 = count as u64;
        self.count_refused(count, err);
        let has_room = self.failures.len() < self.failures.capacity();
        match self.failures.last_mut() {
            // A run of packets refused for one reason is one record.
            Some(last) if last.errno == errno && last.first + last.count == first => {
                last.count += count;
            }
            _ if has_room => self.failures.push(SendFailure {
                first,
                count,
                errno,
            }),
            _ => self.stats.send_failures_unrecorded += count64,
        }
    }

    /// Fills the plan with messages starting at packet `next`: single
    /// datagrams only up to the end of a GSO message being retried.
    fn plan_from(&mut self, batch: &PacketBatch, next: usize) {
        self.plan.clear();
        let end = self
            .gso_retry
            .map_or(batch.len(), |r| r.end.min(batch.len()));
        let (mut i, mut iovs) = (next, 0);
        while i < end && self.plan.len() < self.scratch.max_msgs() {
            let room = self.scratch.max_iovs() - iovs;
            let mut count = if self.gso && self.gso_retry.is_none() {
                gso_group_len((i..batch.len()).map(|k| out_packet(batch, k)), room)
            } else {
                1
            };
            let segment_size = u16::try_from(batch.packet(i).len()).unwrap_or(0);
            if segment_size == 0 {
                count = 1;
            }
            if count == 0 || count > room {
                break;
            }
            let meta = batch.meta(i);
            let remote = self.map_remote(meta.remote);
            let segment_size = if count > 1 { segment_size } else { 0 };
            self.plan.push(OutMsg {
                remote,
                local: meta.local,
                first: i,
                count,
                segment_size,
                tos: meta.tos,
            });
            i += count;
            iovs += count;
        }
    }

    /// Counts the first `sent` planned messages; returns the next packet.
    fn account_sent(&mut self, batch: &PacketBatch, sent: usize) -> usize {
        self.stats.send_calls += 1;
        for m in &self.plan[..sent] {
            self.stats.packets_sent += m.count as u64;
            self.stats.gso_messages += u64::from(m.segment_size > 0);
            if let Some(retry) = &mut self.gso_retry {
                // Only a datagram of the full segment size proves the size
                // fits the path; the shorter last one proves nothing.
                retry.gso_at_fault |= batch.packet(m.first).len() == retry.segment_size;
            }
        }
        let last = self.plan[sent - 1];
        last.first + last.count
    }

    /// Ends the retry of a refused GSO message once packet `next` is past
    /// it: GSO is turned off for good if a datagram of its segment size
    /// went out alone (GSO itself was refused), kept otherwise (the size
    /// did not fit the path; those datagrams were refused one by one with
    /// `EMSGSIZE`, which queued the path MTU).
    fn settle_gso_retry(&mut self, next: usize) {
        let Some(retry) = self.gso_retry else {
            return;
        };
        if next < retry.end {
            return;
        }
        self.gso_retry = None;
        if retry.gso_at_fault {
            self.gso = false;
            self.stats.gso_refusals += 1;
        }
    }

    fn classify(&mut self, err: &io::Error) -> ErrorAction {
        let code = err.raw_os_error().unwrap_or(0);
        let gso_message = self.plan.first().filter(|m| m.segment_size > 0);
        match (gso_message, code) {
            // udp(7) / udp_send_skb: GSO fails with EIO when the route's
            // device cannot checksum or an xfrm policy applies. Quinn and
            // wireguard-go turn GSO off for good.
            (Some(_), libc::EIO) => {
                self.gso = false;
                self.stats.gso_refusals += 1;
                return ErrorAction::Replan;
            }
            // The segment size plus headers exceeds the route's path MTU
            // (udp_send_skb; EINVAL before Linux 6.14, `hlen + gso_size >
            // fragsize`, EMSGSIZE since, measured on 6.18), which happens
            // whenever the path shrinks; or (EINVAL) the socket rules GSO
            // out (SO_NO_CHECK). Either way no local error is queued. The
            // message's datagrams go again one by one, which tells the
            // cases apart (see `settle_gso_retry`) and gets each its own
            // verdict.
            (Some(m), libc::EINVAL | libc::EMSGSIZE) => {
                self.gso_retry = Some(GsoRetry {
                    end: m.first + m.count,
                    segment_size: usize::from(m.segment_size),
                    gso_at_fault: false,
                });
                return ErrorAction::Replan;
            }
            _ => {}
        }
        self.classify_single(err)
    }

    /// What to do after a message without GSO failed with `err`.
    fn classify_single(&self, err: &io::Error) -> ErrorAction {
        if err.kind() == io::ErrorKind::WouldBlock {
            return ErrorAction::Stop;
        }
        match err.raw_os_error().unwrap_or(0) {
            libc::EBADF | libc::ENOTSOCK | libc::EFAULT => ErrorAction::Fatal,
            _ => ErrorAction::Skip,
        }
    }

    fn map_remote(&self, remote: SocketAddr) -> SocketAddr {
        let remote = if self.raw {
            SocketAddr::new(remote.ip(), 0)
        } else {
            remote
        };
        match remote {
            SocketAddr::V4(v4) if self.v6_socket => {
                SocketAddr::V6(SocketAddrV6::new(v4.ip().to_ipv6_mapped(), v4.port(), 0, 0))
            }
            other => other,
        }
    }
}

fn out_packet(batch: &PacketBatch, k: usize) -> OutPacket {
    let meta = batch.meta(k);
    OutPacket {
        remote: meta.remote,
        local: meta.local,
        len: batch.packet(k).len(),
        tos: meta.tos,
    }
}

/// A received source address as the caller should see it: IPv4 peers of a
/// dual-stack IPv6 socket arrive IPv4-mapped and are given back as IPv4.
pub(crate) fn canonical(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), v6.port()),
            None => addr,
        },
        v4 => v4,
    }
}
