//! Plain ESP (IP protocol 50, RFC 4303 §2) over raw IP sockets, batched
//! with `recvmmsg`/`sendmmsg`. Needs `CAP_NET_RAW`.
//!
//! Receive, normalized across families: every packet handed out is the ESP
//! payload (what follows the IP header), with `remote` = source address and
//! `local` = destination address, ports 0. An IPv4 raw socket delivers the
//! IPv4 header in front of the payload (raw(7)); it is checked and skipped
//! in place (the packet's bounds move, nothing is copied), and the
//! destination is read from it. An IPv6 raw socket delivers the payload
//! alone (ipv6(7)); the destination comes from `IPV6_PKTINFO`. The outer
//! TOS / Traffic Class (`meta.tos`, for RFC 6040 ECN decapsulation) is
//! read from the IPv4 header, or from `IPV6_TCLASS` (`IPV6_RECVTCLASS`).
//! Every raw
//! socket for protocol 50 gets a copy of every ESP packet the host
//! receives, whatever else handles it.
//!
//! Send: the kernel builds the outer IP header (no `IP_HDRINCL`): the packet
//! is the ESP payload, `meta.remote` its destination (port ignored),
//! `meta.local`, when set, its source (`IP_PKTINFO`/`IPV6_PKTINFO`), and
//! `meta.tos`, when not 0, the header's TOS / Traffic Class
//! (`IP_TOS`/`IPV6_TCLASS`). As on the UDP socket, path-MTU discovery is
//! "do" and errors are reported on the error queue (see
//! [`crate::errqueue`]): the kernel never fragments a packet locally.
//!
//! AH (IP protocol 51, RFC 4302, [`RawProtocol::Ah`]) over IPv4 differs
//! on both paths, because its ICV covers the outer header's immutable
//! fields, the Identification among them (RFC 4302 §3.3.3.1.1.1), which
//! the kernel would choose itself: a received packet is handed out whole,
//! IPv4 header included (`remote`, `local` and `tos` read from it as
//! above), and a packet to send is a whole IPv4 packet (`IP_HDRINCL`: the
//! kernel fills only the checksum; its Identification must not be 0,
//! which the kernel would replace). Over IPv6 every field the ICV covers
//! (addresses, payload length, next header) is what the kernel writes or
//! reports, so AH is carried as ESP is.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::batch::{PacketBatch, PacketMeta};
use crate::datagram::{DatagramIo, SendFailure};
use crate::errqueue::{self, enable_error_reporting, SocketError};
use crate::limits::{
    DEFAULT_MAX_BATCH, DEFAULT_MMSG_BATCH, DEFAULT_SOCKET_BUFFER, IPPROTO_AH, IPPROTO_ESP,
    IPV4_MIN_HEADER_LEN,
};
use crate::stats::SocketStats;
use crate::sys::RecvInfo;
use crate::udp::{enable_pktinfo, enable_recv_tos, set_buffers, set_freebind};

/// The IPsec protocol a raw socket carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RawProtocol {
    /// ESP, IP protocol 50 (RFC 4303).
    #[default]
    Esp,
    /// AH, IP protocol 51 (RFC 4302); see the module doc for IPv4.
    Ah,
}

impl RawProtocol {
    /// The IP protocol number.
    pub fn number(self) -> i32 {
        match self {
            RawProtocol::Esp => IPPROTO_ESP,
            RawProtocol::Ah => IPPROTO_AH,
        }
    }
}

/// How to open a [`RawEspSocket`]. Start from [`RawEspConfig::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RawEspConfig {
    /// Local address to bind; its family picks the socket's. Unspecified
    /// receives ESP for every local address of that family.
    pub bind: IpAddr,
    /// ESP (the default) or AH.
    pub protocol: RawProtocol,
    /// Nonblocking descriptor (default off).
    pub nonblocking: bool,
    /// Bind and send from an address no interface holds, as
    /// [`UdpConfig::freebind`](crate::udp::UdpConfig::freebind) (default
    /// off).
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
}

impl RawEspConfig {
    /// Defaults: blocking, 8 MiB socket buffers, 64 messages per call,
    /// failures of batches up to 256 packets recorded.
    pub fn new(bind: IpAddr) -> Self {
        Self {
            bind,
            protocol: RawProtocol::Esp,
            nonblocking: false,
            freebind: false,
            recv_buffer: DEFAULT_SOCKET_BUFFER,
            send_buffer: DEFAULT_SOCKET_BUFFER,
            max_msgs: DEFAULT_MMSG_BATCH,
            max_batch: DEFAULT_MAX_BATCH,
        }
    }
}

/// A raw IPv4 or IPv6 socket for protocol 50 (or 51: [`RawProtocol`]).
pub struct RawEspSocket {
    socket: Socket,
    io: DatagramIo,
    v6: bool,
    /// IPv4 AH: whole IP packets in and out.
    whole: bool,
}

impl std::fmt::Debug for RawEspSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawEspSocket")
            .field("v6", &self.v6)
            .field("whole", &self.whole)
            .finish()
    }
}

impl RawEspSocket {
    /// Opens and binds a raw ESP socket.
    pub fn open(config: &RawEspConfig) -> io::Result<Self> {
        let v6 = config.bind.is_ipv6();
        let domain = if v6 { Domain::IPV6 } else { Domain::IPV4 };
        let protocol = Protocol::from(config.protocol.number());
        let socket = Socket::new(domain, Type::RAW, Some(protocol))?;
        let whole = config.protocol == RawProtocol::Ah && !v6;
        if whole {
            socket.set_header_included_v4(true)?;
        }
        set_buffers(&socket, config.recv_buffer, config.send_buffer)?;
        enable_error_reporting(&socket, v6)?;
        if config.freebind {
            set_freebind(&socket, config.bind)?;
        }
        if v6 {
            // The IPv4 destination and TOS are read from the delivered
            // header instead.
            enable_pktinfo(&socket, true)?;
            enable_recv_tos(&socket, true)?;
        }
        socket.set_nonblocking(config.nonblocking)?;
        socket.bind(&SockAddr::from(SocketAddr::new(config.bind, 0)))?;
        Ok(Self {
            socket,
            io: DatagramIo::new(config.max_msgs, config.max_batch, false, false, true),
            v6,
            whole,
        })
    }

    /// Whether this is an IPv6 socket.
    pub fn is_ipv6(&self) -> bool {
        self.v6
    }

    /// Counters since open.
    pub fn stats(&self) -> SocketStats {
        self.io.stats
    }

    /// Appends received ESP payloads to the free slots of `batch` (see the
    /// module doc for the normalization). Returns how many were added;
    /// 0 as [`UdpSocket::recv_batch`](crate::udp::UdpSocket::recv_batch)
    /// (the pending error of an ICMP error included: call again).
    pub fn recv_batch(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        let fd = self.socket.as_fd();
        if self.v6 {
            self.io
                .recv_direct(fd, batch, false, |info, _| describe_v6(info))
        } else if self.whole {
            self.io.recv_direct(fd, batch, false, describe_v4_whole)
        } else {
            self.io.recv_direct(fd, batch, false, describe_v4)
        }
    }

    /// Sends every packet of `batch` as an ESP payload; returns the packets
    /// consumed, as [`UdpSocket::send_batch`](crate::udp::UdpSocket::send_batch).
    pub fn send_batch(&mut self, batch: &PacketBatch) -> io::Result<usize> {
        self.send_batch_from(batch, 0)
    }

    /// Like [`send_batch`](Self::send_batch) for packets `first..`.
    pub fn send_batch_from(&mut self, batch: &PacketBatch, first: usize) -> io::Result<usize> {
        self.io.send(self.socket.as_fd(), batch, first)
    }

    /// Sends one packet alone (an ESP payload; for IPv4 AH the whole IP
    /// packet, see the module doc).
    pub fn send(&mut self, packet: &[u8], meta: PacketMeta) -> io::Result<()> {
        let fd = self.socket.as_fd();
        self.io.send_one(fd, packet, &meta)
    }

    /// Hands `f` each refusal of the last send call and forgets them, as
    /// [`UdpSocket::take_send_failures`](crate::udp::UdpSocket::take_send_failures).
    pub fn take_send_failures(&mut self, f: impl FnMut(SendFailure)) {
        self.io.take_failures(f);
    }

    /// Sends one ESP payload that the kernel may fragment, as
    /// [`UdpSocket::send_fragmentable`](crate::udp::UdpSocket::send_fragmentable).
    pub fn send_fragmentable(&mut self, payload: &[u8], meta: PacketMeta) -> io::Result<()> {
        let fd = self.socket.as_fd();
        let io = &mut self.io;
        errqueue::send_fragmentable(fd, self.v6, meta.remote.ip(), || {
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

impl AsFd for RawEspSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

/// An IPv6 raw datagram is the payload already.
fn describe_v6(info: &RecvInfo) -> Option<(usize, usize, PacketMeta)> {
    if info.truncated {
        return None;
    }
    let remote = SocketAddr::new(info.remote?.ip(), 0);
    Some((
        0,
        info.len,
        PacketMeta {
            remote,
            local: info.local,
            stride: info.len,
            tos: info.tos,
        },
    ))
}

/// Skips the IPv4 header a raw IPv4 socket delivers.
///
/// ```text
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |Version|  IHL  |Type of Service|          Total Length         |
/// |         Identification        |Flags|      Fragment Offset    |
/// |  Time to Live |    Protocol   |         Header Checksum       |
/// |                       Source Address                          |
/// |                    Destination Address                        |
/// |                    Options                    |    Padding    |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// ```
/// (RFC 791 §3.1: IHL counts 32-bit words, at least 5.)
fn describe_v4(info: &RecvInfo, area: &[u8]) -> Option<(usize, usize, PacketMeta)> {
    if info.truncated {
        return None;
    }
    let packet = area.get(..info.len)?;
    let header = ipv4_header_len(packet)?;
    let src = Ipv4Addr::new(packet[12], packet[13], packet[14], packet[15]);
    let dst = Ipv4Addr::new(packet[16], packet[17], packet[18], packet[19]);
    let payload = packet.len() - header;
    let meta = PacketMeta {
        remote: SocketAddr::new(src.into(), 0),
        local: Some(dst.into()),
        stride: payload,
        tos: packet[1],
    };
    Some((header, payload, meta))
}

/// As [`describe_v4`], the IPv4 header kept in front of the payload
/// (IPv4 AH: its ICV covers the header).
fn describe_v4_whole(info: &RecvInfo, area: &[u8]) -> Option<(usize, usize, PacketMeta)> {
    let (header, payload, meta) = describe_v4(info, area)?;
    let whole = header + payload;
    Some((
        0,
        whole,
        PacketMeta {
            stride: whole,
            ..meta
        },
    ))
}

/// Length of the IPv4 header at the front of `packet`, if it is a
/// well-formed one.
fn ipv4_header_len(packet: &[u8]) -> Option<usize> {
    let first = *packet.first()?;
    let header = usize::from(first & 0x0f) * 4;
    let valid = first >> 4 == 4 && header >= IPV4_MIN_HEADER_LEN && header <= packet.len();
    valid.then_some(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(len: usize) -> RecvInfo {
        RecvInfo {
            len,
            remote: Some("192.0.2.1:0".parse().unwrap()),
            ..RecvInfo::default()
        }
    }

    fn ipv4(ihl: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; usize::from(ihl) * 4];
        p[0] = 0x40 | ihl;
        p[1] = 0xb8 | 3;
        p[9] = 50;
        p[12..16].copy_from_slice(&[192, 0, 2, 1]);
        p[16..20].copy_from_slice(&[198, 51, 100, 2]);
        p.extend_from_slice(payload);
        p
    }

    #[test]
    fn ipv4_header_is_skipped_in_place() {
        let p = ipv4(5, b"\x00\x00\x10\x01esp");
        let (offset, len, meta) = describe_v4(&info(p.len()), &p).unwrap();
        assert_eq!(&p[offset..offset + len], b"\x00\x00\x10\x01esp");
        assert_eq!(meta.remote, "192.0.2.1:0".parse().unwrap());
        assert_eq!(meta.local, Some("198.51.100.2".parse().unwrap()));
        assert_eq!(meta.tos, 0xb8 | 3, "TOS from the header");
    }

    #[test]
    fn ipv4_options_are_skipped_too() {
        let p = ipv4(7, b"payload");
        let (offset, len, _) = describe_v4(&info(p.len()), &p).unwrap();
        assert_eq!((offset, len), (28, 7));
    }

    #[test]
    fn malformed_ipv4_headers_are_dropped() {
        let mut p = ipv4(5, b"x");
        assert!(
            describe_v4(&info(10), &p).is_none(),
            "shorter than a header"
        );
        p[0] = 0x45 ^ 0x10;
        assert!(describe_v4(&info(p.len()), &p).is_none(), "not version 4");
        p[0] = 0x44;
        assert!(describe_v4(&info(p.len()), &p).is_none(), "IHL below 5");
        p[0] = 0x4f;
        assert!(
            describe_v4(&info(p.len()), &p).is_none(),
            "IHL past the end"
        );
        assert!(describe_v4(&info(0), &p).is_none(), "empty");
        let truncated = RecvInfo {
            truncated: true,
            ..info(p.len())
        };
        assert!(describe_v4(&truncated, &ipv4(5, b"x")).is_none());
        assert!(
            describe_v4(&info(p.len() + 1), &p).is_none(),
            "length past the area"
        );
    }

    #[test]
    fn ipv4_ah_keeps_its_header() {
        let p = ipv4(5, b"\x04\x04\x00\x00ah");
        let (offset, len, meta) = describe_v4_whole(&info(p.len()), &p).unwrap();
        assert_eq!((offset, len, meta.stride), (0, p.len(), p.len()));
        assert_eq!(meta.local, Some("198.51.100.2".parse().unwrap()));
        let mut bad = p.clone();
        bad[0] = 0x44;
        assert!(describe_v4_whole(&info(bad.len()), &bad).is_none());
    }

    #[test]
    fn ipv6_payload_is_taken_whole() {
        let i = RecvInfo {
            local: Some("2001:db8::2".parse().unwrap()),
            tos: 2,
            ..info(40)
        };
        let (offset, len, meta) = describe_v6(&i).unwrap();
        assert_eq!((offset, len, meta.remote.port(), meta.tos), (0, 40, 0, 2));
        assert_eq!(meta.local, i.local);
    }
}
