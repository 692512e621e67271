//! The ARP frames a cluster node sends for a virtual address (RFC 826):
//! replies to requests, and RFC 5227 §3 announcements (gratuitous ARP)
//! when it becomes the node that answers.
//!
//! The ARP packet names the virtual MAC (`ar$sha`), which is what the
//! requester caches; the Ethernet header's source is the node's own MAC.
//! That keeps the switch from learning the virtual MAC on one node's port:
//! frames to it stay unknown unicast, flooded to every node, which is how
//! every node sees every packet.

use phalanx_wire::arp::{arp_reply, gratuitous_arp, ArpRepr};
use phalanx_wire::ethernet::{EthernetFrame, MIN_FRAME_LEN};

use super::frames::VirtualSide;

/// One ARP frame, untagged and padded to the Ethernet minimum (14 octets
/// of header, 28 of ARP, zeros).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ArpFrame {
    bytes: [u8; MIN_FRAME_LEN],
}

impl ArpFrame {
    /// The frame's octets.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// `repr` in a frame from `side`'s own MAC.
    fn build(repr: &ArpRepr, side: &VirtualSide) -> ArpFrame {
        let mut bytes = [0u8; MIN_FRAME_LEN];
        // An untagged Ethernet/IPv4 ARP frame is exactly MIN_FRAME_LEN
        // octets (`ArpRepr::frame_len(None)`), so it always fits.
        let _ = repr.emit_frame(None, &mut bytes);
        EthernetFrame::new_unchecked(&mut bytes[..]).set_src_addr(side.own_mac);
        ArpFrame { bytes }
    }
}

impl std::fmt::Debug for ArpFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArpFrame")
            .field("bytes", &hex::encode(self.bytes))
            .finish()
    }
}

/// The reply to `request` (a request for `side.address`): `side.mac` is
/// at `side.address`, sent to the requester.
pub fn reply_frame(request: &ArpRepr, side: &VirtualSide) -> ArpFrame {
    ArpFrame::build(&arp_reply(request, side.mac), side)
}

/// The RFC 5227 §3 announcement of `side.address` at `side.mac`,
/// broadcast.
pub fn announcement_frame(side: &VirtualSide) -> ArpFrame {
    ArpFrame::build(&gratuitous_arp(side.mac, side.address), side)
}
