//! The IKE thread's sockets: its own UDP socket on the IKE port (500,
//! bound to the protected address before privileges are dropped), and a
//! duplicate of a data-plane worker's ESP-in-UDP socket (port 4500) that
//! it only sends on: IKE on the NAT-T port goes out with the four-octet
//! non-ESP marker in front (RFC 3948 §2.2, RFC 7296 §2.23) and comes in
//! through the workers (see [`super::link`]).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use phalanx_ike::Transmit;
use phalanx_wire::ike::with_non_esp_marker;

/// Opens the IKE port's socket on `bind`, nonblocking (before privileges
/// are dropped: a port below 1024 needs `CAP_NET_BIND_SERVICE` at bind).
pub fn open_ike_socket(bind: SocketAddr) -> io::Result<UdpSocket> {
    let socket = UdpSocket::bind(bind)?;
    socket.set_nonblocking(true)?;
    Ok(socket)
}

/// Cluster mode: the IKE port's socket on the outside virtual address,
/// which no interface holds (`IP_FREEBIND`, set while `CAP_NET_ADMIN` is
/// held). It only sends: IKE to the virtual address arrives through the
/// cluster worker's ring.
pub fn open_ike_socket_freebind(bind: SocketAddr) -> io::Result<UdpSocket> {
    let mut config = phalanx_io::udp::UdpConfig::new(bind);
    (config.nonblocking, config.freebind, config.gro) = (true, true, false);
    let socket = phalanx_io::udp::UdpSocket::bind(&config)?;
    // Nobody reads this socket's error queue (it only sends).
    phalanx_io::errqueue::disable_error_reporting(&socket, bind.is_ipv6())?;
    // The duplicate outlives `socket`, whose descriptor closes on drop.
    Ok(UdpSocket::from(socket.as_fd().try_clone_to_owned()?))
}

/// Where IKE datagrams are sent from and received on.
#[derive(Debug)]
pub struct IkeSockets {
    ike: UdpSocket,
    ike_local: SocketAddr,
    natt: Option<UdpSocket>,
    natt_port: u16,
    /// Datagrams the kernel refused (full buffer, unreachable): IKE
    /// retransmits requests, so they are counted, not retried.
    pub send_errors: u64,
    /// Transmits from a port we have no socket for.
    pub no_socket: u64,
}

impl IkeSockets {
    /// `ike` bound to the IKE port; `natt`, a duplicate descriptor of a
    /// worker's socket on `natt_port` (send only).
    pub fn new(ike: UdpSocket, natt: Option<OwnedFd>, natt_port: u16) -> io::Result<IkeSockets> {
        let ike_local = ike.local_addr()?;
        Ok(IkeSockets {
            ike,
            ike_local,
            natt: natt.map(UdpSocket::from),
            natt_port,
            send_errors: 0,
            no_socket: 0,
        })
    }

    /// The IKE socket's descriptor, to poll.
    pub fn ike_fd(&self) -> BorrowedFd<'_> {
        self.ike.as_fd()
    }

    /// The address the IKE socket is bound to.
    pub fn ike_local(&self) -> SocketAddr {
        self.ike_local
    }

    /// One datagram from the IKE port into `buf`: its length and source,
    /// or `None` when there is none.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        match self.ike.recv_from(buf) {
            Ok(got) => Ok(Some(got)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sends one transmit from the socket of its local port; on the NAT-T
    /// port with the non-ESP marker, except a NAT-keepalive (RFC 3948
    /// §2.3), which goes out as its one octet.
    pub fn send(&mut self, transmit: &Transmit) {
        let sent = if transmit.nat_keepalive {
            match &self.natt {
                Some(natt) => natt.send_to(&transmit.bytes, transmit.remote),
                None => {
                    self.no_socket += 1;
                    return;
                }
            }
        } else if transmit.local.port() == self.natt_port || transmit.needs_non_esp_marker() {
            match &self.natt {
                // The ESP socket refuses datagrams larger than the path
                // MTU (phalanx-io sets path-MTU discovery "do"); an IKE
                // message may be fragmented by IP (RFC 7296 §2).
                Some(natt) => phalanx_io::errqueue::send_to_fragmentable(
                    natt,
                    &with_non_esp_marker(&transmit.bytes),
                    transmit.remote,
                ),
                None => {
                    self.no_socket += 1;
                    return;
                }
            }
        } else {
            self.ike.send_to(&transmit.bytes, transmit.remote)
        };
        if sent.is_err() {
            self.send_errors += 1;
        }
    }
}
