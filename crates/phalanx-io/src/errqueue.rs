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
//!   packets (unreachable, fragmentation needed / packet too big, time
//!   exceeded, parameter problem) are queued on the socket's error queue;
//!   `poll(2)` reports `POLLERR` while it is not empty. The caller drains
//!   it with `recv_errors`. The queue is charged to the receive buffer, so
//!   an undrained queue eventually starves reception.
//! - **`SO_RXQ_OVFL`** (socket(7)): each received datagram carries the
//!   socket's cumulative count of datagrams dropped for lack of
//!   receive-buffer room.

use std::io;
use std::os::fd::AsFd;

use nix::sys::socket::{setsockopt, sockopt};
use socket2::Socket;

use crate::sys::{self, PmtuDiscovery};

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

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Protocol, Type};

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
