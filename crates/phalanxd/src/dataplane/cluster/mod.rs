//! The cluster data plane (DESIGN.md "Cluster mode", issue 5): every
//! node of the cluster receives every frame of both sides and processes
//! only the packets the dispatcher gives it.
//!
//! One worker thread per node for now ([`worker`]): the clear and the
//! protected sides each arrive on an AF_PACKET ring in promiscuous mode
//! (the shared segment floods frames for the virtual MAC to every node);
//! the node's kernel never owns a virtual address — it is configured on
//! no interface, and frames to the virtual MAC are `PACKET_OTHERHOST` to
//! it, so its stack never answers for them. What the worker sends goes
//! through the kernel: ESP from the UDP (port 4500) and raw ESP sockets
//! bound with `IP_FREEBIND` / `IP_TRANSPARENT` to the outside virtual
//! address (the kernel routes and resolves the next hop), decrypted
//! packets into the TUN device (the kernel forwards them to the LAN from
//! the node's own address), ARP replies on the ring's socket.
//!
//! Per frame ([`frames::FrameClassifier`], device-free):
//! - ARP requests for a side's virtual IPv4 address and neighbour
//!   solicitations (RFC 4861) for its virtual IPv6 address (to it, or to
//!   its solicited-node group, whose Ethernet group every node's ring
//!   receives in promiscuous mode) are answered with its virtual MAC, by
//!   the view's first node only ([`neighbour`]); when a node becomes the
//!   first it announces every virtual address (gratuitous ARP,
//!   unsolicited neighbour advertisements).
//! - Outside, IPv4 or IPv6 to the outside virtual address: ESP (protocol 50) or
//!   ESP in UDP (port 4500, non-zero marker, RFC 3948) — the SPI and
//!   sequence number go to the dispatcher (`NodeDataPath::inbound`); an
//!   owned packet goes through the host-mode [`InboundPath`] to the TUN,
//!   after the numbers other nodes observed for its SA were entered into
//!   the SA's replay window (once per view change: the window "continues
//!   from what every node observed"). A packet another node owns only
//!   has its number observed. IKE to the virtual address (UDP 500, or
//!   4500 behind the non-ESP marker) goes to the IKE thread's bounded
//!   queue on every node (`crate::ike::cluster` decides who answers);
//!   without IKE configured it is counted and dropped.
//! - Inside, IPv4 or IPv6 to the inside virtual MAC for a destination that is not
//!   a virtual address: the SPD through a flow cache; PROTECT packets are
//!   counted by every node (`NodeDataPath::outbound`, which returns the
//!   sequence number of this node's lease class when it owns the packet)
//!   and the owner protects them through the host-mode [`OutboundPath`]
//!   with node-partitioned IVs.
//!
//! With `[cluster] kernel_filter` (default on) an eBPF socket filter on
//! the outside ring ([`kernel_filter`]) drops the inbound ESP another node
//! owns before it is copied to the ring (packet round robin on non-ESN
//! SAs, the hash schemes), records its numbers for the observer, and
//! counts it (`cluster_inbound_not_owned_kernel`); such frames never reach
//! the classifier. It decides ESP to the outside virtual address over
//! IPv4 and over IPv6; IPv6 packets with extension headers (fragments
//! included) reach the classifier, which walks the chain.
//!
//! Every frame that is not processed is counted with its reason
//! ([`DaemonCounter`](super::DaemonCounter)`::Cluster*`), so `phalanxctl
//! counters` and the metrics show them.
//!
//! [`InboundPath`]: super::InboundPath
//! [`OutboundPath`]: super::OutboundPath

pub mod frames;
pub mod kernel_filter;
pub mod neighbour;
pub mod worker;

#[cfg(test)]
mod tests;

pub use frames::{Decision, FrameClassifier, VirtualSide};

use std::net::{IpAddr, Ipv4Addr};

use phalanx_cluster::{Direction, SaDescriptor};
use phalanx_sa::SaMode;

use crate::config::{self, SaConfig};

/// The two sides of a cluster node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The clear side: the site LAN, cleartext in, decrypted out.
    Inside,
    /// The protected side: ESP in and out.
    Outside,
}

/// What the cluster thread must know of the static SAs of the
/// configuration, registered with it at start: direction, SPI, ESN, and
/// the peer (the tunnel's remote end; unspecified for a transport-mode
/// SA, whose peer is each packet's own address).
pub fn sa_descriptors(sas: &[SaConfig]) -> Vec<SaDescriptor> {
    sas.iter()
        .map(|sa| SaDescriptor {
            direction: match sa.direction {
                config::Direction::In => Direction::Inbound,
                config::Direction::Out => Direction::Outbound,
            },
            spi: sa.params.spi,
            esn: sa.params.esn,
            peer: match sa.params.mode {
                SaMode::Tunnel { remote, .. } => remote,
                SaMode::Transport => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            },
            peer_window: sa.peer_replay_window,
        })
        .collect()
}
