//! Path-MTU discovery and error reporting on the UDP and raw ESP sockets.
//!
//! Every [`UdpSocket`](crate::udp::UdpSocket) and
//! [`RawEspSocket`](crate::raw::RawEspSocket) is opened with:
//!
//! - **Path-MTU discovery "do"**: ip(7) `IP_MTU_DISCOVER =
//!   IP_PMTUDISC_DO` (on an IPv6 socket too, for its IPv4-mapped peers;
//!   an IPv6 raw socket refuses IPv4-level options and has no such peers)
//!   and ipv6(7) `IPV6_MTU_DISCOVER = IPV6_PMTUDISC_DO`. The kernel never
//!   fragments our packets locally and sets DF on IPv4 (RFC 1191 §3,
//!   RFC 8201 §4): a packet larger than the path MTU it knows for the
//!   route fails its send with `EMSGSIZE` and queues a local error
//!   carrying that MTU; a router on the way that cannot forward a packet
//!   answers with ICMP Fragmentation Needed / ICMPv6 Packet Too Big, which
//!   lowers the route's path MTU (a route exception, aged by
//!   `net.ipv4.route.mtu_expires`) so the next send of that size fails
//!   locally.
//! - **Extended error reporting**: ip(7) `IP_RECVERR` (on an IPv6 socket
//!   too, for its IPv4-mapped peers) and ipv6(7) `IPV6_RECVERR`. Local
//!   errors (`EMSGSIZE` with the MTU) and the ICMP errors that concern our
//!   packets (destination unreachable, fragmentation needed / packet too
//!   big, time exceeded, parameter problem) are queued on the socket's
//!   error queue; `poll(2)` reports `POLLERR` while it is not empty. The
//!   caller drains it with `recv_errors`, one [`SocketError`] per entry.
//!   The queue is charged to the receive buffer: left undrained, it
//!   starves reception and keeps `poll` returning at once.
//! - **`SO_RXQ_OVFL`** (socket(7)): each received datagram carries the
//!   socket's cumulative count of datagrams dropped for lack of
//!   receive-buffer room, kept in
//!   [`SocketStats::kernel_rx_dropped`](crate::SocketStats::kernel_rx_dropped).
//!
//! With `IP_RECVERR` the kernel also sets the socket's pending error
//! (`sk_err`) for every ICMP error it queues (`__udp4_lib_err`,
//! `raw_err`), and the next receive call returns that errno once
//! (`ECONNREFUSED`, `EMSGSIZE`, `EHOSTUNREACH`, ...) instead of data,
//! even when datagrams are waiting. `recv_batch` of both sockets takes
//! such a return for "nothing received, call again": it returns `Ok(0)`
//! and counts it in
//! [`SocketStats::recv_pending_errors`](crate::SocketStats::recv_pending_errors);
//! the error itself is on the error queue. Reading the last ICMP entry
//! off the error queue clears the pending error (`sock_dequeue_err_skb`),
//! so a caller that drains the queue on `POLLERR` before it receives
//! rarely meets it.

use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use nix::errno::Errno;
use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrStorage,
};
use socket2::Socket;

use crate::datagram::canonical;
use crate::sys::{self, PmtuDiscovery};

/// Bytes of the original packet a [`SocketError`] keeps: an ESP header
/// (SPI, sequence number, RFC 4303 §2) and the start of what follows.
pub const ERROR_PAYLOAD_LEN: usize = 16;

/// Control-message space for one error-queue entry. The most an entry
/// carries (an IPv4 ICMP error on a dual-stack IPv6 socket) is one
/// `IPV6_RECVERR` (`CMSG_SPACE(16 + 28)` = 64 on LP64: the extended error
/// and the offender's `sockaddr_in6`), one `IPV6_PKTINFO` (40), one
/// `IP_PKTINFO` (32) and one `IP_TOS` (24): 160 bytes.
const ERROR_CMSG_LEN: usize = 256;

/// A control-message buffer, aligned for `struct cmsghdr`.
#[repr(C, align(8))]
struct ErrorCmsgBuf([u8; ERROR_CMSG_LEN]);

/// Where a queued error came from: `ee_origin` of ip(7)'s `struct
/// sock_extended_err`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorOrigin {
    /// `SO_EE_ORIGIN_LOCAL`: raised by this host's stack, e.g. `EMSGSIZE`
    /// for a packet larger than the path MTU.
    Local,
    /// `SO_EE_ORIGIN_ICMP`: an ICMP error about one of our IPv4 packets.
    Icmp,
    /// `SO_EE_ORIGIN_ICMP6`: an ICMPv6 error about one of our IPv6
    /// packets.
    Icmp6,
    /// Any other origin (timestamping, zerocopy: not asked for here), or
    /// 0 for an entry whose extended error did not arrive.
    Other(u8),
}

impl ErrorOrigin {
    fn from_raw(origin: u8) -> Self {
        match origin {
            libc::SO_EE_ORIGIN_LOCAL => ErrorOrigin::Local,
            libc::SO_EE_ORIGIN_ICMP => ErrorOrigin::Icmp,
            libc::SO_EE_ORIGIN_ICMP6 => ErrorOrigin::Icmp6,
            other => ErrorOrigin::Other(other),
        }
    }
}

/// One entry of a socket's error queue (ip(7) / ipv6(7) `IP_RECVERR`,
/// read with `MSG_ERRQUEUE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketError {
    /// Who raised it.
    pub origin: ErrorOrigin,
    /// The errno it stands for (`ee_errno`): `EMSGSIZE` for a local
    /// too-big error, Fragmentation Needed or Packet Too Big;
    /// `ECONNREFUSED` for port unreachable; `EHOSTUNREACH`,
    /// `ENETUNREACH`, `EACCES` (administratively prohibited), `EPROTO`
    /// (parameter problem), ...
    pub errno: i32,
    /// The ICMP / ICMPv6 type (`ee_type`), 0 for a local error.
    pub icmp_type: u8,
    /// The ICMP / ICMPv6 code (`ee_code`), 0 for a local error.
    pub icmp_code: u8,
    /// `ee_info`: the MTU for `EMSGSIZE` (the path MTU of a local error,
    /// the next-hop MTU of Fragmentation Needed, RFC 1191 §4, or of
    /// Packet Too Big, RFC 4443 §3.2), 0 otherwise.
    pub info: u32,
    /// The destination of the packet the error is about (`msg_name`),
    /// IPv4-mapped addresses given back as IPv4. The port is the
    /// original one for ICMP errors and IPv6 local errors; a local IPv4
    /// error of an unconnected socket carries port 0 (`ip_local_error`
    /// takes the connected port), as does every raw socket's.
    pub destination: Option<SocketAddr>,
    /// Who sent the ICMP error (`SO_EE_OFFENDER`), IPv4-mapped addresses
    /// given back as IPv4; `None` for a local error.
    pub offender: Option<IpAddr>,
    /// The start of what the kernel returns as data for the entry:
    ///
    /// - ICMP errors, UDP socket: the original UDP payload, as far as the
    ///   ICMP message quoted it (the ESP header, SPI first, for
    ///   ESP-in-UDP; the non-ESP marker for IKE, RFC 3948 §2.2).
    /// - ICMP errors, raw ESP socket (IPv4 and IPv6 alike): the original
    ///   IP payload, i.e. the ESP header, SPI first: the kernel skips the
    ///   quoted IP header and, for IPv6, its extension headers
    ///   (`raw_err`, `rawv6_err`).
    /// - Local errors: nothing (`payload_len` 0).
    pub payload: [u8; ERROR_PAYLOAD_LEN],
    /// Valid bytes of `payload`.
    pub payload_len: usize,
}

impl SocketError {
    /// The valid bytes of [`payload`](Self::payload).
    pub fn payload(&self) -> &[u8] {
        &self.payload[..self.payload_len.min(ERROR_PAYLOAD_LEN)]
    }
}

/// Sets path-MTU discovery "do", extended error reporting and
/// `SO_RXQ_OVFL` on a new socket (see the module doc). `v6`: an IPv6
/// socket, which also gets the IPv4-level options where it takes them.
pub(crate) fn enable_error_reporting(socket: &Socket, v6: bool) -> io::Result<()> {
    let fd = socket.as_fd();
    if v6 {
        sys::set_mtu_discover(fd, true, PmtuDiscovery::Do)?;
        setsockopt(socket, sockopt::Ipv6RecvErr, &true)?;
        // A dual-stack socket sends to IPv4-mapped peers through the IPv4
        // path, which reads only the IPv4-level options. Raw IPv6 sockets
        // refuse them (ipv6_setsockopt) and have no IPv4 peers.
        let _ = sys::set_mtu_discover(fd, false, PmtuDiscovery::Do);
        let _ = setsockopt(socket, sockopt::Ipv4RecvErr, &true);
    } else {
        sys::set_mtu_discover(fd, false, PmtuDiscovery::Do)?;
        setsockopt(socket, sockopt::Ipv4RecvErr, &true)?;
    }
    setsockopt(socket, sockopt::RxqOvfl, &1)?;
    Ok(())
}

/// Sends one packet that the kernel may fragment to the path MTU: path-MTU
/// discovery "dont" (ip(7) `IP_PMTUDISC_DONT`, ipv6(7)
/// `IPV6_PMTUDISC_DONT`: no DF, local fragmentation) at the level of
/// `destination`'s family for the duration of `send`, "do" again after it,
/// whatever `send` returned. `v6_socket`: an IPv6 socket, which sends to
/// IPv4(-mapped) destinations through the IPv4 level.
pub(crate) fn send_fragmentable(
    fd: BorrowedFd<'_>,
    v6_socket: bool,
    destination: IpAddr,
    send: impl FnOnce() -> io::Result<()>,
) -> io::Result<()> {
    let ipv6_level = v6_socket && canonical_ip(destination).is_ipv6();
    sys::set_mtu_discover(fd, ipv6_level, PmtuDiscovery::Dont)?;
    let sent = send();
    let restored = sys::set_mtu_discover(fd, ipv6_level, PmtuDiscovery::Do);
    sent.and(restored)
}

/// Sends `payload` to `to` on a socket of this crate (path-MTU discovery
/// "do", see the module doc) with local fragmentation allowed for this one
/// datagram, as [`UdpSocket::send_fragmentable`](crate::udp::UdpSocket::send_fragmentable)
/// does: for a descriptor held as a plain `std::net::UdpSocket`, e.g. a
/// duplicate the IKE daemon sends on. IKE needs it: RFC 7296 §2 leaves a
/// message larger than the path to IP fragmentation unless both peers
/// fragment IKE themselves (RFC 7383).
pub fn send_to_fragmentable(
    socket: &std::net::UdpSocket,
    payload: &[u8],
    to: SocketAddr,
) -> io::Result<usize> {
    let v6_socket = socket.local_addr()?.is_ipv6();
    let mut sent = 0;
    send_fragmentable(socket.as_fd(), v6_socket, to.ip(), || {
        sent = socket.send_to(payload, to)?;
        Ok(())
    })?;
    Ok(sent)
}

/// Turns extended error reporting off again on a socket of this crate that
/// nobody reads the error queue of (ip(7) `IP_RECVERR`, ipv6(7)
/// `IPV6_RECVERR`): a send-only socket would otherwise keep `POLLERR` set
/// and fill its receive buffer with reports.
pub fn disable_error_reporting(socket: &impl AsFd, v6: bool) -> io::Result<()> {
    if v6 {
        setsockopt(socket, sockopt::Ipv6RecvErr, &false)?;
    }
    setsockopt(socket, sockopt::Ipv4RecvErr, &false).or_else(|e| {
        if v6 {
            Ok(())
        } else {
            Err(e.into())
        }
    })
}

/// Whether `err`, returned by a receive call, is the socket's pending
/// error that an ICMP error set (`sk_err`, see the module doc) rather
/// than an error of the call: the errnos of `icmp_err_convert` and
/// `icmpv6_err_convert`, which a receive on a datagram socket returns for
/// no other reason.
pub(crate) fn is_pending_icmp_error(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(
            libc::ENETUNREACH
                | libc::EHOSTUNREACH
                | libc::ENOPROTOOPT
                | libc::ECONNREFUSED
                | libc::EMSGSIZE
                | libc::EOPNOTSUPP
                | libc::EHOSTDOWN
                | libc::ENONET
                | libc::EACCES
                | libc::EPROTO
        )
    )
}

/// Reads the error queue of `fd` (`MSG_ERRQUEUE | MSG_DONTWAIT`) until it
/// is empty or `max` entries were handed to `f`; returns how many were.
pub(crate) fn recv_errors(
    fd: BorrowedFd<'_>,
    max: usize,
    mut f: impl FnMut(SocketError),
) -> io::Result<usize> {
    let mut cmsg = ErrorCmsgBuf([0; ERROR_CMSG_LEN]);
    let mut handed = 0;
    while handed < max {
        match recv_error(fd, &mut cmsg) {
            Ok(Some(error)) => {
                f(error);
                handed += 1;
            }
            Ok(None) => break,
            Err(Errno::EINTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(handed)
}

/// One entry of the error queue, `None` when it is empty.
fn recv_error(fd: BorrowedFd<'_>, cmsg: &mut ErrorCmsgBuf) -> nix::Result<Option<SocketError>> {
    let mut error = SocketError {
        origin: ErrorOrigin::Other(0),
        errno: 0,
        icmp_type: 0,
        icmp_code: 0,
        info: 0,
        destination: None,
        offender: None,
        payload: [0; ERROR_PAYLOAD_LEN],
        payload_len: 0,
    };
    let mut payload = [0u8; ERROR_PAYLOAD_LEN];
    let mut iov = [IoSliceMut::new(&mut payload)];
    let flags = MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT;
    let msg = match recvmsg::<SockaddrStorage>(fd.as_raw_fd(), &mut iov, Some(&mut cmsg.0), flags) {
        Ok(msg) => msg,
        Err(Errno::EAGAIN) => return Ok(None),
        Err(err) => return Err(err),
    };
    error.payload_len = msg.bytes.min(ERROR_PAYLOAD_LEN);
    error.destination = msg.address.as_ref().and_then(socket_addr);
    // A truncated control area (never, see ERROR_CMSG_LEN) leaves the
    // entry with origin `Other(0)`: still handed out, not dropped. nix
    // decodes every control message asked for here without allocating.
    for message in msg.cmsgs().into_iter().flatten() {
        let (ee, offender) = match message {
            ControlMessageOwned::Ipv4RecvErr(ee, offender) => (
                ee,
                offender
                    .filter(|o| i32::from(o.sin_family) == libc::AF_INET)
                    .map(|o| IpAddr::V4(Ipv4Addr::from(u32::from_be(o.sin_addr.s_addr)))),
            ),
            ControlMessageOwned::Ipv6RecvErr(ee, offender) => (
                ee,
                offender
                    .filter(|o| i32::from(o.sin6_family) == libc::AF_INET6)
                    .map(|o| canonical_ip(IpAddr::V6(Ipv6Addr::from(o.sin6_addr.s6_addr)))),
            ),
            _ => continue,
        };
        error.origin = ErrorOrigin::from_raw(ee.ee_origin);
        error.errno = i32::try_from(ee.ee_errno).unwrap_or(0);
        (error.icmp_type, error.icmp_code, error.info) = (ee.ee_type, ee.ee_code, ee.ee_info);
        error.offender = offender;
    }
    error.payload = payload;
    Ok(Some(error))
}

/// A kernel-written address as a std one, IPv4-mapped given back as IPv4.
fn socket_addr(addr: &SockaddrStorage) -> Option<SocketAddr> {
    let std = if let Some(v4) = addr.as_sockaddr_in() {
        SocketAddr::V4(SocketAddrV4::from(*v4))
    } else {
        SocketAddr::V6(SocketAddrV6::from(*addr.as_sockaddr_in6()?))
    };
    Some(canonical(std))
}

fn canonical_ip(ip: IpAddr) -> IpAddr {
    canonical(SocketAddr::new(ip, 0)).ip()
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Protocol, Type};

    #[test]
    fn icmp_errnos_are_told_from_errors_of_the_call() {
        for errno in [
            libc::ECONNREFUSED,
            libc::EMSGSIZE,
            libc::EHOSTUNREACH,
            libc::EPROTO,
        ] {
            assert!(is_pending_icmp_error(&io::Error::from_raw_os_error(errno)));
        }
        for errno in [libc::EAGAIN, libc::EBADF, libc::EINVAL, libc::ENOMEM] {
            assert!(!is_pending_icmp_error(&io::Error::from_raw_os_error(errno)));
        }
        assert!(!is_pending_icmp_error(&io::Error::other("not an OS error")));
    }

    #[test]
    fn origins_are_an_open_set() {
        assert_eq!(ErrorOrigin::from_raw(1), ErrorOrigin::Local);
        assert_eq!(ErrorOrigin::from_raw(2), ErrorOrigin::Icmp);
        assert_eq!(ErrorOrigin::from_raw(3), ErrorOrigin::Icmp6);
        assert_eq!(ErrorOrigin::from_raw(5), ErrorOrigin::Other(5));
    }

    #[test]
    fn udp_sockets_of_both_families_say_do() {
        let v4 = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        enable_error_reporting(&v4, false).unwrap();
        assert_eq!(
            sys::mtu_discover(v4.as_fd(), false).unwrap(),
            libc::IP_PMTUDISC_DO
        );
        assert!(nix::sys::socket::getsockopt(&v4, sockopt::Ipv4RecvErr).unwrap());
        let v6 = Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        v6.set_only_v6(false).unwrap();
        enable_error_reporting(&v6, true).unwrap();
        assert_eq!(
            sys::mtu_discover(v6.as_fd(), true).unwrap(),
            libc::IPV6_PMTUDISC_DO
        );
        assert_eq!(
            sys::mtu_discover(v6.as_fd(), false).unwrap(),
            libc::IP_PMTUDISC_DO,
            "the IPv4 level of a dual-stack socket too"
        );
        assert!(nix::sys::socket::getsockopt(&v6, sockopt::Ipv6RecvErr).unwrap());
        assert!(nix::sys::socket::getsockopt(&v6, sockopt::Ipv4RecvErr).unwrap());
        assert_eq!(
            nix::sys::socket::getsockopt(&v6, sockopt::RxqOvfl).unwrap(),
            1
        );
    }
}
