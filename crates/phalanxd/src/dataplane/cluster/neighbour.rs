//! The frames a cluster node sends to resolve a virtual address: ARP
//! (RFC 826) for IPv4 — replies to requests, and RFC 5227 §3
//! announcements (gratuitous ARP) when it becomes the node that answers —
//! and neighbour discovery (RFC 4861) for IPv6 — advertisements in reply
//! to solicitations (§7.2.4), and unsolicited ones (§7.2.6) when it
//! becomes the node that answers.
//!
//! The ARP packet and the advertisement's target link-layer address name
//! the virtual MAC, which is what the requester caches; the Ethernet
//! header's source is the node's own MAC. That keeps the switch from
//! learning the virtual MAC on one node's port: frames to it stay unknown
//! unicast, flooded to every node, which is how every node sees every
//! packet.

use std::net::{IpAddr, Ipv6Addr};

use phalanx_wire::arp::{arp_reply, gratuitous_arp, ArpRepr};
use phalanx_wire::ethernet::{EthernetFrame, MacAddress, MIN_FRAME_LEN};
use phalanx_wire::ndp::{Advertisement, NeighborSolicitation, ADVERTISEMENT_FRAME_LEN};

use super::frames::VirtualSide;

/// The IsRouter flag of the advertisements (RFC 4861 §4.4): a cluster
/// node forwards between its sides, and LAN hosts route through the
/// inside virtual address.
const ROUTER: bool = true;

/// One frame to send on the side it concerns.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum NeighbourFrame {
    /// An ARP frame, untagged and padded to the Ethernet minimum (14
    /// octets of header, 28 of ARP, zeros).
    Arp([u8; MIN_FRAME_LEN]),
    /// A neighbour advertisement with the target link-layer address
    /// option.
    Nd([u8; ADVERTISEMENT_FRAME_LEN]),
}

impl NeighbourFrame {
    /// The frame's octets.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            NeighbourFrame::Arp(bytes) => bytes,
            NeighbourFrame::Nd(bytes) => bytes,
        }
    }

    /// `repr` in a frame from `side`'s own MAC.
    fn arp(repr: &ArpRepr, side: &VirtualSide) -> NeighbourFrame {
        let mut bytes = [0u8; MIN_FRAME_LEN];
        // An untagged Ethernet/IPv4 ARP frame is exactly MIN_FRAME_LEN
        // octets (`ArpRepr::frame_len(None)`), so it always fits.
        let _ = repr.emit_frame(None, &mut bytes);
        EthernetFrame::new_unchecked(&mut bytes[..]).set_src_addr(side.own_mac);
        NeighbourFrame::Arp(bytes)
    }
}

impl std::fmt::Debug for NeighbourFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            NeighbourFrame::Arp(_) => "Arp",
            NeighbourFrame::Nd(_) => "Nd",
        };
        f.debug_tuple(kind)
            .field(&hex::encode(self.as_bytes()))
            .finish()
    }
}

/// The reply to `request` (a request for the side's IPv4 address):
/// `side.mac` is at that address, sent to the requester.
pub fn arp_reply_frame(request: &ArpRepr, side: &VirtualSide) -> NeighbourFrame {
    NeighbourFrame::arp(&arp_reply(request, side.mac), side)
}

/// The advertisement answering `solicitation` (for the side's IPv6
/// address), whose frame came from `requester`: `side.mac` is at the
/// target (RFC 4861 §7.2.4; to all nodes when the solicitation came from
/// the unspecified address).
pub fn nd_reply_frame(
    solicitation: &NeighborSolicitation,
    requester: MacAddress,
    side: &VirtualSide,
) -> NeighbourFrame {
    let advert = Advertisement::reply(solicitation, requester, side.mac, side.own_mac, ROUTER);
    NeighbourFrame::Nd(advert.emit_frame())
}

/// The announcement of `address` at `side.mac`: an RFC 5227 §3
/// gratuitous ARP for IPv4, an RFC 4861 §7.2.6 unsolicited advertisement
/// (Override set, to all nodes) for IPv6.
pub fn announcement_frame(address: IpAddr, side: &VirtualSide) -> NeighbourFrame {
    match address {
        IpAddr::V4(v4) => NeighbourFrame::arp(&gratuitous_arp(side.mac, v4), side),
        IpAddr::V6(v6) => unsolicited_advertisement(v6, side),
    }
}

fn unsolicited_advertisement(address: Ipv6Addr, side: &VirtualSide) -> NeighbourFrame {
    let advert = Advertisement::unsolicited(address, side.mac, side.own_mac, ROUTER);
    NeighbourFrame::Nd(advert.emit_frame())
}
