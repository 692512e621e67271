//! What the kernel knows of the path to a peer, and a way to tell an
//! inner sender that its packet did not fit.
//!
//! - [`route_mtu`]: the path MTU of the route to an address, from a
//!   given source if asked: the route's MTU (its own, or the outgoing
//!   link's), or a smaller value the kernel learned from ICMP (a route
//!   exception, aged by `net.ipv4.route.mtu_expires`). Read as ip(7)
//!   `IP_MTU` / ipv6(7) `IPV6_MTU` on a throwaway connected UDP socket; no
//!   packet is sent.
//! - [`IcmpSocket`] (from [`icmp`](crate::icmp), re-exported here): a
//!   send-only raw ICMP or ICMPv6 socket, to tell an inner sender its
//!   packet did not fit.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;

use nix::sys::socket::{getsockopt, sockopt};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::sys;
use crate::udp::set_freebind;

pub use crate::icmp::IcmpSocket;

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
