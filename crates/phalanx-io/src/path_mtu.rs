//! What the kernel knows of the path to a peer, and a way to tell an
//! inner sender that its packet did not fit.
//!
//! - [`route_mtu`]: the path MTU of the route to an address, from a
//!   given source if asked: the route's MTU (its own, or the outgoing
//!   link's), or a smaller value the kernel learned from ICMP (a route
//!   exception, aged by `net.ipv4.route.mtu_expires`). Read as ip(7)
//!   `IP_MTU` / ipv6(7) `IPV6_MTU` on a throwaway connected UDP socket; no
//!   packet is sent.
//! - [`IcmpSocket`]: a send-only raw ICMP or ICMPv6 socket. The caller
//!   builds the ICMP message; the kernel adds the IP header and picks the
//!   source address by routing, as it does for the ICMP errors a router
//!   originates. Needs `CAP_NET_RAW` when opened.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd};

use nix::sys::socket::{getsockopt, sockopt};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::sys;
use crate::udp::set_freebind;

/// The path MTU the kernel knows for `remote` (the largest IP packet the
/// route takes without fragmentation): ip(7) `IP_MTU` / ipv6(7)
/// `IPV6_MTU` on a throwaway UDP socket `connect`ed to `remote` (the
/// discard port, 9; nothing is sent), which gives the route's MTU or the
/// smaller one the kernel learned from ICMP (a route exception).
///
/// `local`, if given, is the source address the route is looked up from
/// (policy routing by source): the socket is bound to it, port 0. An
/// address no interface holds (a cluster's virtual address) is bound
/// with `IP_FREEBIND` and `IP_TRANSPARENT` (`IPV6_*` alike), without which
/// the route lookup refuses it; that needs `CAP_NET_ADMIN`. `local` must
/// be of `remote`'s family.
pub fn route_mtu(remote: IpAddr, local: Option<IpAddr>) -> io::Result<u32> {
    let socket = Socket::new(
        Domain::for_address(SocketAddr::new(remote, 0)),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    if let Some(local) = local {
        if local.is_ipv6() != remote.is_ipv6() {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        bind_source(&socket, local)?;
    }
    // The discard port: connect only selects the route, nothing is sent.
    socket.connect(&SockAddr::from(SocketAddr::new(remote, 9)))?;
    match remote {
        IpAddr::V4(_) => {
            let mtu = getsockopt(&socket, sockopt::IpMtu)?;
            u32::try_from(mtu).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
        }
        IpAddr::V6(_) => sys::ipv6_path_mtu(socket.as_fd()),
    }
}

/// Binds `socket` to `local`, port 0: plainly when an interface holds the
/// address, else as a free bind (see [`route_mtu`]).
fn bind_source(socket: &Socket, local: IpAddr) -> io::Result<()> {
    let address = SockAddr::from(SocketAddr::new(local, 0));
    match socket.bind(&address) {
        Err(err) if err.kind() == io::ErrorKind::AddrNotAvailable => {
            set_freebind(socket, local)?;
            socket.bind(&address)
        }
        other => other,
    }
}

/// A send-only raw socket for ICMP (IPv4) or ICMPv6 errors.
#[derive(Debug)]
pub struct IcmpSocket {
    socket: Socket,
    v6: bool,
}

impl IcmpSocket {
    /// Opens a nonblocking raw ICMP (`v6` false) or ICMPv6 socket that
    /// receives nothing (every type filtered, RFC 3542 §3.2).
    pub fn open(v6: bool) -> io::Result<Self> {
        let (domain, protocol) = if v6 {
            (Domain::IPV6, Protocol::ICMPV6)
        } else {
            (Domain::IPV4, Protocol::ICMPV4)
        };
        let socket = Socket::new(domain, Type::RAW, Some(protocol))?;
        sys::block_all_icmp(socket.as_fd(), v6)?;
        socket.set_nonblocking(true)?;
        Ok(IcmpSocket { socket, v6 })
    }

    /// Whether this is the ICMPv6 socket.
    pub fn is_ipv6(&self) -> bool {
        self.v6
    }

    /// Sends `message` (from the ICMP type octet on; the ICMPv4 checksum
    /// filled by the caller, the ICMPv6 one by the kernel, RFC 3542 §3.1)
    /// to `to`. A full socket buffer is an error, not a wait.
    pub fn send(&self, message: &[u8], to: IpAddr) -> io::Result<()> {
        if to.is_ipv6() != self.v6 {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        let sent = self
            .socket
            .send_to(message, &SockAddr::from(SocketAddr::new(to, 0)))?;
        if sent == message.len() {
            Ok(())
        } else {
            Err(io::Error::from(io::ErrorKind::WriteZero))
        }
    }
}

impl AsFd for IcmpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}
