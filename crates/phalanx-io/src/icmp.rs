//! A send-only raw ICMP / ICMPv6 socket, for the errors the gateway
//! originates as a router does (Fragmentation Needed, RFC 792 / RFC 1191
//! §4; Packet Too Big, RFC 4443 §3.2) towards an inner sender whose packet
//! does not fit the tunnel.
//!
//! The caller builds the ICMP message, from its type octet on; the kernel
//! adds the IP header and picks the source address by routing towards the
//! destination, as for the ICMP errors it originates itself. raw(7):
//! IPv4 sends carry the ICMP checksum the caller computed; RFC 3542 §3.1:
//! the kernel computes the ICMPv6 checksum (it covers a pseudo-header only
//! the kernel knows in full). Opening needs `CAP_NET_RAW`: open it before
//! privileges are dropped.
//!
//! Nothing is received: every ICMP type is filtered out (raw(7)
//! `ICMP_FILTER`; RFC 3542 §3.2 `ICMP6_FILTER`, all blocked), and the
//! receive buffer is the kernel's smallest, so a raw socket, which is
//! otherwise handed a copy of every ICMP message the host receives,
//! holds no memory.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::limits::ICMP_RECV_BUFFER;
use crate::sys;

/// A send-only, nonblocking raw socket for ICMP (IPv4) or ICMPv6 messages.
#[derive(Debug)]
pub struct IcmpSocket {
    socket: Socket,
    v6: bool,
}

impl IcmpSocket {
    /// Opens a nonblocking raw ICMP (`v6` false) or ICMPv6 socket that
    /// receives nothing (see the module doc). Needs `CAP_NET_RAW`.
    pub fn open(v6: bool) -> io::Result<Self> {
        let (domain, protocol) = if v6 {
            (Domain::IPV6, Protocol::ICMPV6)
        } else {
            (Domain::IPV4, Protocol::ICMPV4)
        };
        let socket = Socket::new(domain, Type::RAW, Some(protocol))?;
        sys::block_all_icmp(socket.as_fd(), v6)?;
        socket.set_recv_buffer_size(ICMP_RECV_BUFFER)?;
        socket.set_nonblocking(true)?;
        Ok(IcmpSocket { socket, v6 })
    }

    /// Whether this is the ICMPv6 socket.
    pub fn is_ipv6(&self) -> bool {
        self.v6
    }

    /// Sends `message` (from the ICMP type octet on; the ICMPv4 checksum
    /// filled by the caller, the ICMPv6 one by the kernel, RFC 3542 §3.1)
    /// to `to`, which must be of the socket's family. A full socket buffer
    /// is an error (`WouldBlock`), not a wait.
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
