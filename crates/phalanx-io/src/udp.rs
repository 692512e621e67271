//! Batched UDP: `recvmmsg` with `UDP_GRO`, `sendmmsg` with `UDP_SEGMENT`
//! (GSO), `IP_PKTINFO`/`IPV6_PKTINFO` and the outer TOS / Traffic Class
//! (`IP_RECVTOS`/`IPV6_RECVTCLASS` in, `IP_TOS`/`IPV6_TCLASS` out) both
//! ways.
//!
//! Receive. With GRO on, the kernel hands over runs of datagrams of one
//! flow as one super-datagram plus its segment size (`UDP_GRO` control
//! message). They land in buffers the socket owns (64 KiB each) and are
//! split into the caller's batch, one datagram per buffer behind the
//! headroom: one copy per datagram, which buys the ESP layer uniform
//! buffers to decrypt in place and costs far less than the system calls GRO
//! saves. Segments that do not fit the batch wait in the socket for the next
//! call; nothing is lost. With GRO off, `recvmmsg` writes straight into the
//! batch.
//!
//! Send. Runs of consecutive packets to one destination (and from one
//! source, with one TOS), all of one size but the last, which may be shorter, go out as
//! one message with `UDP_SEGMENT` and one iovec per packet: the kernel
//! segments, nothing is copied here. If the kernel refuses GSO on this
//! socket's path with `EIO` (the device cannot checksum or an xfrm policy
//! applies), GSO is turned off for the socket's lifetime, counted in
//! [`SocketStats::gso_refusals`], and the batch goes out as plain
//! datagrams. `EINVAL` (and, since Linux 6.14, `EMSGSIZE`) for a GSO
//! message is ambiguous: the segment size does not fit the route's path
//! MTU (`udp_send_skb`: `hlen + gso_size > fragsize`), which happens
//! whenever the path shrinks, or (`EINVAL`) the socket rules GSO out. The
//! message's datagrams then go again one by one: those too big fail with
//! `EMSGSIZE` each (reported by `take_send_failures`; the kernel queues
//! the path MTU on the error queue), shorter ones go out, and GSO is
//! turned off for good only if one of the segment size was accepted
//! alone.
//!
//! Path MTU. The socket is opened with path-MTU discovery "do" and
//! extended error reporting (see [`crate::errqueue`]): the kernel never
//! fragments a datagram locally; one larger than the route's path MTU is
//! refused with `EMSGSIZE`.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd};

use nix::sys::socket::{getsockopt, setsockopt, sockopt};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::batch::{PacketBatch, PacketMeta};
use crate::datagram::{canonical, DatagramIo, SendFailure};
use crate::errqueue::{self, enable_error_reporting, SocketError};
use crate::limits::{DEFAULT_MAX_BATCH, DEFAULT_MMSG_BATCH, DEFAULT_SOCKET_BUFFER, GRO_BUFFER_LEN};
use crate::plan::segments;
use crate::stats::SocketStats;
use crate::sys::RecvInfo;

/// How to open a [`UdpSocket`]. Start from [`UdpConfig::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct UdpConfig {
    /// Address to bind (e.g. `0.0.0.0:4500`, RFC 3948). An unspecified IPv6
    /// address binds dual-stack.
    pub bind: SocketAddr,
    /// Ask for `UDP_GRO` (default on; off if the kernel lacks it).
    pub gro: bool,
    /// Use `UDP_SEGMENT` when sending (default on; off if the kernel lacks it
    /// or refuses it later).
    pub gso: bool,
    /// Nonblocking descriptor (default off: `recv_batch` blocks for the first
    /// datagram). A worker that polls several descriptors wants it on.
    pub nonblocking: bool,
    /// `SO_REUSEPORT`, for one socket per worker thread.
    pub reuse_port: bool,
    /// Bind and send from an address no interface holds, a cluster's
    /// virtual address (default off): ip(7) `IP_FREEBIND` for the bind and
    /// `IP_TRANSPARENT` for the sends (the route lookup refuses a source
    /// that is not local without it); `IPV6_FREEBIND` and
    /// `IPV6_TRANSPARENT` for an IPv6 address. Needs `CAP_NET_ADMIN` at
    /// bind time.
    pub freebind: bool,
    /// `SO_RCVBUF` in bytes.
    pub recv_buffer: usize,
    /// `SO_SNDBUF` in bytes.
    pub send_buffer: usize,
    /// Most messages per `recvmmsg`/`sendmmsg`.
    pub max_msgs: usize,
    /// Most packets of one batch handed to `send_batch`: the room of the
    /// record of send failures (`take_send_failures`), allocated at open.
    /// Every refusal of a batch up to this size is reported.
    pub max_batch: usize,
    /// GRO receive buffers (64 KiB each): the most super-datagrams one
    /// `recv_batch` takes from the kernel.
    pub gro_slots: usize,
}

impl UdpConfig {
    /// Defaults: GRO and GSO on, blocking, 8 MiB socket buffers, 64
    /// messages per call, failures of batches up to 256 packets recorded,
    /// 32 GRO buffers.
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            bind,
            gro: true,
            gso: true,
            nonblocking: false,
            reuse_port: false,
            freebind: false,
            recv_buffer: DEFAULT_SOCKET_BUFFER,
            send_buffer: DEFAULT_SOCKET_BUFFER,
            max_msgs: DEFAULT_MMSG_BATCH,
            max_batch: DEFAULT_MAX_BATCH,
            gro_slots: 32,
        }
    }
}

/// A UDP socket moving [`PacketBatch`]es.
pub struct UdpSocket {
    socket: Socket,
    io: DatagramIo,
    gro: Option<GroStash>,
}

impl std::fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSocket")
            .field("local", &self.local_addr().ok())
            .field("gro", &self.gro_enabled())
            .field("gso", &self.gso_enabled())
            .finish()
    }
}

impl UdpSocket {
    /// Opens, configures and binds a socket.
    pub fn bind(config: &UdpConfig) -> io::Result<Self> {
        let v6 = config.bind.is_ipv6();
        let socket = Socket::new(
            Domain::for_address(config.bind),
            Type::DGRAM,
            Some(Protocol::UDP),
        )?;
        if v6 && config.bind.ip().is_unspecified() {
            socket.set_only_v6(false)?;
        }
        if config.reuse_port {
            socket.set_reuse_port(true)?;
        }
        if config.freebind {
            set_freebind(&socket, config.bind.ip())?;
        }
        set_buffers(&socket, config.recv_buffer, config.send_buffer)?;
        enable_error_reporting(&socket, v6)?;
        enable_pktinfo(&socket, v6)?;
        enable_recv_tos(&socket, v6)?;
        socket.set_nonblocking(config.nonblocking)?;
        socket.bind(&SockAddr::from(config.bind))?;
        // udp(7): UDP_GRO since Linux 5.0, UDP_SEGMENT since 4.18.
        let gro = config.gro && setsockopt(&socket, sockopt::UdpGroSegment, &true).is_ok();
        let gso = config.gso && getsockopt(&socket, sockopt::UdpGsoSegment).is_ok();
        let stash = gro.then(|| GroStash::new(config.gro_slots.min(config.max_msgs)));
        Ok(Self {
            socket,
            io: DatagramIo::new(config.max_msgs, config.max_batch, gso, v6, false),
            gro: stash,
        })
    }

    /// The bound address (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an IP socket address"))
    }

    /// Whether received datagrams may arrive coalesced (GRO).
    pub fn gro_enabled(&self) -> bool {
        self.gro.is_some()
    }

    /// Whether sends currently use GSO.
    pub fn gso_enabled(&self) -> bool {
        self.io.gso
    }

    /// Counters since open.
    pub fn stats(&self) -> SocketStats {
        self.io.stats
    }

    /// Appends received datagrams to the free slots of `batch`, one per
    /// slot behind the headroom, with `remote` = source, `local` =
    /// destination address, `stride` = GRO segment size, `tos` = the outer
    /// TOS / Traffic Class. Returns how many
    /// were added: 0 if `batch` is full, every message received was
    /// dropped, or the kernel returned the pending error an ICMP error set
    /// (counted in [`SocketStats::recv_pending_errors`]; the error is on
    /// the error queue, see [`recv_errors`](Self::recv_errors)); call
    /// again. A blocking socket waits for the first datagram; a
    /// nonblocking one returns `WouldBlock` when there is none.
    pub fn recv_batch(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        let fd = self.socket.as_fd();
        match &mut self.gro {
            Some(stash) => stash.recv(&mut self.io, fd, batch),
            None => self
                .io
                .recv_direct(fd, batch, false, |info, _| describe(info)),
        }
    }

    /// Sends every packet of `batch` to its `meta.remote` (from
    /// `meta.local` if set, with `meta.tos` as the outer TOS / Traffic
    /// Class if not 0). Returns the number of packets consumed, from
    /// the front: sent, or dropped because the kernel refused them (counted
    /// in [`SocketStats::send_dropped`] and reported, with their indices
    /// and `errno`, by [`take_send_failures`](Self::take_send_failures)).
    /// Fewer than `batch.len()` only on a nonblocking socket whose buffer
    /// is full: continue with [`send_batch_from`](Self::send_batch_from)
    /// once it is writable.
    pub fn send_batch(&mut self, batch: &PacketBatch) -> io::Result<usize> {
        self.send_batch_from(batch, 0)
    }

    /// Like [`send_batch`](Self::send_batch) for packets `first..`.
    pub fn send_batch_from(&mut self, batch: &PacketBatch, first: usize) -> io::Result<usize> {
        self.io.send(self.socket.as_fd(), batch, first)
    }

    /// Hands `f` each refusal of the last
    /// [`send_batch`](Self::send_batch) /
    /// [`send_batch_from`](Self::send_batch_from) call, in packet order,
    /// and forgets them (the next send call forgets them too). Indices are
    /// into that call's batch; consecutive packets refused with one `errno`
    /// come as one [`SendFailure`]. Allocates nothing.
    pub fn take_send_failures(&mut self, f: impl FnMut(SendFailure)) {
        self.io.take_failures(f);
    }

    /// Sends one datagram that the kernel may fragment: `payload` to
    /// `meta.remote` (from `meta.local` if set, with `meta.tos`), with
    /// path-MTU discovery "dont" for this one send (ip(7)
    /// `IP_PMTUDISC_DONT` / ipv6(7) `IPV6_PMTUDISC_DONT`: no DF on IPv4,
    /// fragments to the path MTU), "do" again afterwards even if the send
    /// failed. For a packet that must not be dropped although it exceeds
    /// the path (RFC 4459 §3.1: fragmentation by the tunnel endpoint). A
    /// refusal is returned (`WouldBlock` when the buffer is full) and
    /// counted like a batch's, not recorded for
    /// [`take_send_failures`](Self::take_send_failures).
    pub fn send_fragmentable(&mut self, payload: &[u8], meta: PacketMeta) -> io::Result<()> {
        let fd = self.socket.as_fd();
        let io = &mut self.io;
        errqueue::send_fragmentable(fd, io.v6_socket(), meta.remote.ip(), || {
            io.send_one(fd, payload, &meta)
        })
    }

    /// Hands `f` the errors queued on the socket (see
    /// [`errqueue`]), oldest first, until the queue is
    /// empty or `max` were handed out; returns how many were. Never
    /// blocks (`MSG_ERRQUEUE | MSG_DONTWAIT`). Call it when `poll`
    /// reports an error on the descriptor (`POLLERR`), until it returns
    /// fewer than `max`: an entry left in the queue keeps `POLLERR` set
    /// and holds receive-buffer room.
    pub fn recv_errors(&mut self, max: usize, f: impl FnMut(SocketError)) -> io::Result<usize> {
        errqueue::recv_errors(self.socket.as_fd(), max, f)
    }
}

impl AsFd for UdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

/// The packet a plain (not coalesced) datagram becomes.
fn describe(info: &RecvInfo) -> Option<(usize, usize, PacketMeta)> {
    if info.truncated {
        return None;
    }
    let meta = PacketMeta {
        remote: canonical(info.remote?),
        local: info.local.map(canonical_ip),
        stride: info.len,
        tos: info.tos,
    };
    Some((0, info.len, meta))
}

fn canonical_ip(ip: IpAddr) -> IpAddr {
    canonical(SocketAddr::new(ip, 0)).ip()
}

/// Asks for big socket buffers: the `*FORCE` options first (root is not
/// capped by `net.core.rmem_max`), the plain ones if those are refused.
pub(crate) fn set_buffers(socket: &Socket, recv: usize, send: usize) -> io::Result<()> {
    if setsockopt(socket, sockopt::RcvBufForce, &recv).is_err() {
        socket.set_recv_buffer_size(recv)?;
    }
    if setsockopt(socket, sockopt::SndBufForce, &send).is_err() {
        socket.set_send_buffer_size(send)?;
    }
    Ok(())
}

/// Lets `socket` bind `address` although no interface holds it, and send
/// from it: ip(7) `IP_FREEBIND` for the bind, and `IP_TRANSPARENT` for
/// the sends, since the route lookup of a socket without it refuses a
/// source address that is not local (`ENETUNREACH`, measured on Linux
/// 6.18); for an IPv6 address ipv6(7)'s `IPV6_FREEBIND` and
/// `IPV6_TRANSPARENT`. The transparent option needs `CAP_NET_ADMIN` when
/// it is set, so set it before privileges are dropped.
pub(crate) fn set_freebind(socket: &Socket, address: IpAddr) -> io::Result<()> {
    if address.is_ipv6() {
        socket.set_freebind_v6(true)?;
        socket.set_ip_transparent_v6(true)?;
    } else {
        socket.set_freebind_v4(true)?;
        setsockopt(socket, sockopt::IpTransparent, &true)?;
    }
    Ok(())
}

/// Asks for the destination address of each datagram (ip(7) `IP_PKTINFO`,
/// RFC 3542 §6 `IPV6_RECVPKTINFO`). A dual-stack IPv6 socket gets both, for
/// its IPv4-mapped peers.
pub(crate) fn enable_pktinfo(socket: &Socket, v6: bool) -> io::Result<()> {
    if v6 {
        setsockopt(socket, sockopt::Ipv6RecvPacketInfo, &true)?;
        // Refused on an IPv6-only socket; then no IPv4 peers arrive anyway.
        let _ = setsockopt(socket, sockopt::Ipv4PacketInfo, &true);
    } else {
        setsockopt(socket, sockopt::Ipv4PacketInfo, &true)?;
    }
    Ok(())
}

/// Asks for the TOS / Traffic Class octet of each datagram (ip(7)
/// `IP_RECVTOS`, RFC 3542 §6.5 `IPV6_RECVTCLASS`): the ECN field a router
/// set on the outer header must reach the decapsulator (RFC 6040 §4.2). A
/// dual-stack IPv6 socket gets both, for its IPv4-mapped peers.
pub(crate) fn enable_recv_tos(socket: &Socket, v6: bool) -> io::Result<()> {
    if v6 {
        setsockopt(socket, sockopt::Ipv6RecvTClass, &true)?;
        // Refused on an IPv6-only socket; then no IPv4 peers arrive anyway.
        let _ = setsockopt(socket, sockopt::IpRecvTos, &true);
    } else {
        setsockopt(socket, sockopt::IpRecvTos, &true)?;
    }
    Ok(())
}

/// GRO super-datagrams received but not yet split into a batch.
struct GroStash {
    bufs: Vec<Box<[u8]>>,
    /// Messages the last `recvmmsg` filled.
    filled: usize,
    /// Next message to split.
    next: usize,
    /// Segments of message `next` already handed out.
    done: usize,
}

impl GroStash {
    fn new(slots: usize) -> Self {
        let slots = slots.max(1);
        Self {
            bufs: (0..slots)
                .map(|_| vec![0; GRO_BUFFER_LEN].into_boxed_slice())
                .collect(),
            filled: 0,
            next: 0,
            done: 0,
        }
    }

    /// Splits what is pending into `batch`, then, if `batch` still has room,
    /// receives more (without waiting if something was already added).
    fn recv(
        &mut self,
        io: &mut DatagramIo,
        fd: BorrowedFd<'_>,
        batch: &mut PacketBatch,
    ) -> io::Result<usize> {
        let mut added = self.split_into(io, batch);
        if self.next < self.filled || batch.free() == 0 {
            return Ok(added);
        }
        let want = batch.free().min(self.bufs.len());
        let got = match io.recv_raw(
            fd,
            self.bufs.iter_mut().map(|b| &mut b[..]),
            want,
            added > 0,
        ) {
            Ok(got) => got,
            // What was added is worth returning; a lasting error recurs on the
            // next call.
            Err(_) if added > 0 => return Ok(added),
            Err(err) => return Err(err),
        };
        (self.filled, self.next, self.done) = (got, 0, 0);
        added += self.split_into(io, batch);
        Ok(added)
    }

    /// Copies pending segments into the free slots of `batch`.
    fn split_into(&mut self, io: &mut DatagramIo, batch: &mut PacketBatch) -> usize {
        let mut added = 0;
        while self.next < self.filled && batch.free() > 0 {
            let info = io.received()[self.next];
            let Some(meta) = gro_meta(&info) else {
                io.stats.recv_dropped += 1;
                self.advance();
                continue;
            };
            if self.done == 0 && meta.stride < info.len {
                io.stats.coalesced_received += 1;
            }
            let data = &self.bufs[self.next][..info.len.min(GRO_BUFFER_LEN)];
            for range in segments(data.len(), meta.stride).skip(self.done) {
                if batch.free() == 0 {
                    io.stats.packets_received += added as u64;
                    return added;
                }
                if batch.push_segment(&data[range], meta) {
                    added += 1;
                } else {
                    io.stats.recv_dropped += 1;
                }
                self.done += 1;
            }
            self.advance();
        }
        io.stats.packets_received += added as u64;
        added
    }

    fn advance(&mut self) {
        self.next += 1;
        self.done = 0;
    }
}

/// Metadata shared by the segments of one received message, or `None` to
/// drop it (truncated, or no source address).
fn gro_meta(info: &RecvInfo) -> Option<PacketMeta> {
    if info.truncated {
        return None;
    }
    let stride = if info.gro_size > 0 {
        info.gro_size
    } else {
        info.len
    };
    Some(PacketMeta {
        remote: canonical(info.remote?),
        local: info.local.map(canonical_ip),
        stride,
        tos: info.tos,
    })
}

#[cfg(test)]
mod tests;
