//! The heartbeat socket: one UDP socket on this node's cluster-link
//! address, sending the cluster node's heartbeat payload to every other
//! node and receiving theirs.
//!
//! A datagram is attributed to the node whose configured heartbeat
//! address it came from; anything else is counted and dropped (the
//! payload is only ever a hint to the failure detector: takeovers it
//! causes are safe by construction, and un-suspecting goes through the
//! replicated log). Sends never block: a full socket buffer or an
//! unreachable peer (a dead node's address answers with ICMP errors) is
//! counted, not retried — the next heartbeat follows within one interval.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};

use phalanx_cluster::NodeId;

use crate::config::ClusterSettings;

/// The largest heartbeat accepted; longer datagrams are truncated by the
/// kernel and dropped here.
pub const MAX_HEARTBEAT_BYTES: usize = 1024;

/// What the heartbeat socket counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeartbeatStats {
    /// Datagrams sent (one per peer per heartbeat).
    pub sent: u64,
    /// Sends that failed (peer unreachable, buffer full).
    pub send_errors: u64,
    /// Datagrams received from a configured peer.
    pub received: u64,
    /// Datagrams from an address no node is configured with (dropped).
    pub unknown_source: u64,
    /// Datagrams from this node's own address (dropped).
    pub from_self: u64,
    /// Datagrams longer than [`MAX_HEARTBEAT_BYTES`] (dropped).
    pub oversize: u64,
    /// Receive calls that failed with something else than "no more data".
    pub receive_errors: u64,
}

/// One node's heartbeat socket.
#[derive(Debug)]
pub struct HeartbeatSocket {
    socket: UdpSocket,
    local: NodeId,
    /// Every node with its heartbeat address, this one included.
    nodes: Vec<(NodeId, IpAddr)>,
    /// Where heartbeats go: every node but this one.
    peers: Vec<SocketAddr>,
    stats: HeartbeatStats,
}

impl HeartbeatSocket {
    /// Binds `(this node's heartbeat address, heartbeat_port)`,
    /// non-blocking.
    pub fn bind(settings: &ClusterSettings) -> io::Result<HeartbeatSocket> {
        let address = settings.local_address().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("node {} has no heartbeat address", settings.node_id.0),
            )
        })?;
        let bind = SocketAddr::new(address, settings.heartbeat_port);
        let socket = UdpSocket::bind(bind).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot bind the heartbeat socket to {bind}: {e} (is {address} configured on the cluster link?)"),
            )
        })?;
        socket.set_nonblocking(true)?;
        let peers = settings
            .nodes
            .iter()
            .filter(|(id, _)| *id != settings.node_id)
            .map(|(_, ip)| SocketAddr::new(*ip, settings.heartbeat_port))
            .collect();
        Ok(HeartbeatSocket {
            socket,
            local: settings.node_id,
            nodes: settings.nodes.clone(),
            peers,
            stats: HeartbeatStats::default(),
        })
    }

    /// Sends `payload` to every other node.
    pub fn send_to_peers(&mut self, payload: &[u8]) {
        for peer in &self.peers {
            match self.socket.send_to(payload, peer) {
                Ok(_) => self.stats.sent += 1,
                Err(_) => self.stats.send_errors += 1,
            }
        }
    }

    /// The next heartbeat waiting, with its sender, copied into `buf`;
    /// `None` when no more is waiting. Datagrams from unknown addresses,
    /// from this node, or too long are counted and skipped.
    pub fn receive<'b>(&mut self, buf: &'b mut [u8]) -> Option<(NodeId, &'b [u8])> {
        // Errors are consumed by the call that reports them; a bounded
        // number per call keeps a broken socket from spinning here.
        let mut errors = 0;
        loop {
            let (len, from) = match self.socket.recv_from(buf) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                Err(_) if errors < 16 => {
                    errors += 1;
                    self.stats.receive_errors += 1;
                    continue;
                }
                Err(_) => return None,
            };
            // A datagram that filled the buffer may have been truncated.
            if len > MAX_HEARTBEAT_BYTES || len == buf.len() {
                self.stats.oversize += 1;
                continue;
            }
            match self.node_at(from.ip()) {
                Some(node) if node == self.local => self.stats.from_self += 1,
                Some(node) => {
                    self.stats.received += 1;
                    return Some((node, &buf[..len]));
                }
                None => self.stats.unknown_source += 1,
            }
        }
    }

    /// The node configured with heartbeat address `ip` (an IPv4-mapped
    /// IPv6 source matches its IPv4 address).
    fn node_at(&self, ip: IpAddr) -> Option<NodeId> {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.nodes.iter().find(|(_, a)| *a == ip).map(|n| n.0)
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// What was counted so far.
    pub fn stats(&self) -> HeartbeatStats {
        self.stats
    }
}

impl AsFd for HeartbeatSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use core::net::Ipv4Addr;
    use core::time::Duration;

    use phalanx_cluster::DispatchScheme;

    use super::*;
    use crate::config::ClusterSide;

    /// Settings for node `local` of nodes on 127.0.0.1..=127.0.0.n (all
    /// loopback), heartbeats on `port`.
    fn settings(local: u32, n: u8, port: u16) -> ClusterSettings {
        let side = |last: u8| ClusterSide {
            interface: format!("if{last}"),
            addresses: IpAddr::V4(Ipv4Addr::new(192, 0, 2, last)).into(),
            mac: [2, 0, 0, 0, 0, last],
        };
        ClusterSettings {
            node_id: NodeId(local),
            scheme: DispatchScheme::PacketRoundRobin,
            group: "test".into(),
            heartbeat_port: port,
            heartbeat_interval: Duration::from_millis(5),
            suspect_after: Duration::from_millis(30),
            lease_len: 4096,
            checkpoint_every: 64,
            quorum: phalanx_cluster::QuorumPolicy::default(),
            kernel_filter: true,
            kernel_filter_xdp: true,
            outside: side(1),
            inside: side(2),
            nodes: (1..=n)
                .map(|i| {
                    (
                        NodeId(u32::from(i)),
                        IpAddr::V4(Ipv4Addr::new(127, 0, 0, i)),
                    )
                })
                .collect(),
        }
    }

    /// Waits (bounded) for the next heartbeat on `socket`.
    fn next(socket: &mut HeartbeatSocket) -> Option<(NodeId, Vec<u8>)> {
        let mut buf = [0_u8; 2048];
        for _ in 0..200 {
            if let Some((node, payload)) = socket.receive(&mut buf) {
                return Some((node, payload.to_vec()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    /// A free UDP port on loopback (bound, read, released).
    fn free_port() -> u16 {
        let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    }

    #[test]
    fn heartbeats_reach_every_peer_attributed_by_address() {
        let port = free_port();
        let mut sockets: Vec<HeartbeatSocket> = (1..=3)
            .map(|i| HeartbeatSocket::bind(&settings(i, 3, port)).unwrap())
            .collect();
        sockets[0].send_to_peers(b"beat-from-1");
        assert_eq!(sockets[0].stats().sent, 2);
        for receiver in &mut sockets[1..] {
            assert_eq!(next(receiver), Some((NodeId(1), b"beat-from-1".to_vec())));
            assert_eq!(receiver.stats().received, 1);
        }
        assert_eq!(sockets[0].receive(&mut [0; 64]), None, "nothing to itself");
    }

    #[test]
    fn unknown_sources_are_counted_and_dropped() {
        let port = free_port();
        let mut node = HeartbeatSocket::bind(&settings(1, 2, port)).unwrap();
        let target = node.local_addr().unwrap();
        // 127.0.0.9 is no configured node; 127.0.0.1 is the node itself.
        UdpSocket::bind("127.0.0.9:0")
            .unwrap()
            .send_to(b"x", target)
            .unwrap();
        UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .send_to(b"y", target)
            .unwrap();
        let peer = UdpSocket::bind("127.0.0.2:0").unwrap();
        peer.send_to(&[7; MAX_HEARTBEAT_BYTES + 1], target).unwrap();
        peer.send_to(b"ok", target).unwrap();
        assert_eq!(next(&mut node), Some((NodeId(2), b"ok".to_vec())));
        let stats = node.stats();
        assert_eq!(
            (stats.unknown_source, stats.from_self, stats.oversize),
            (1, 1, 1)
        );
    }

    #[test]
    fn binding_an_unconfigured_address_says_so() {
        let mut s = settings(1, 1, free_port());
        s.nodes[0].1 = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 77));
        let e = HeartbeatSocket::bind(&s).unwrap_err();
        assert!(
            e.to_string().contains("configured on the cluster link"),
            "{e}"
        );
    }
}
