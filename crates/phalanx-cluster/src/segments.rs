//! Hash segments: the scheme of other gateways' HA plugins, where the
//! peer's address (optionally with the SPI) picks one of [`SEGMENTS`]
//! segments and each segment is owned by one live member.
//!
//! Both functions are fixed and seedless (see `dispatch::hash`), so every
//! node, in every process and build, computes the same segment and the
//! same owner. Ownership is rendezvous hashing (highest random weight,
//! Thaler and Ravishankar 1998): each member draws a weight for each
//! segment and the heaviest wins. Removing a member therefore moves only
//! the segments it owned, and adding one takes only the segments it wins;
//! no table has to be agreed on.

use core::net::IpAddr;

use crate::dispatch::hash::{fmix64, FixedHasher};
use crate::view::{NodeId, View};

/// How many segments the address space is cut into.
pub const SEGMENTS: u16 = 256;

/// The segment of a peer address, and of the SPI when one is given
/// (scheme `hash-src-spi`). Always below [`SEGMENTS`].
pub fn segment_of(peer: IpAddr, spi: Option<u32>) -> u16 {
    let mut hasher = FixedHasher::new();
    hasher.write_addr(peer);
    if let Some(spi) = spi {
        hasher.write_u32(spi);
    }
    (hasher.finish() % u64::from(SEGMENTS)) as u16
}

/// The live member that owns `segment`, `None` for an empty view.
pub fn segment_owner(view: &View, segment: u16) -> Option<NodeId> {
    let mut best: Option<(u64, NodeId)> = None;
    for &node in view.members() {
        let weight = rendezvous_weight(node, segment);
        // Members ascend, and only a strictly heavier weight replaces the
        // best: an (improbable) tie goes to the lower node id everywhere.
        if best.is_none_or(|(top, _)| weight > top) {
            best = Some((weight, node));
        }
    }
    best.map(|(_, node)| node)
}

/// The owner of every segment, indexed by segment; empty for an empty
/// view. What a dispatcher caches per view.
pub fn segment_table(view: &View) -> Vec<NodeId> {
    (0..SEGMENTS)
        .filter_map(|segment| segment_owner(view, segment))
        .collect()
}

/// Member `node`'s weight for `segment`.
fn rendezvous_weight(node: NodeId, segment: u16) -> u64 {
    let draw = FixedHasher::new()
        .write_u32(node.0)
        .write_u16(segment)
        .finish();
    // A second avalanche: node ids are small consecutive integers, and
    // the weights of neighbours must look independent.
    fmix64(draw ^ 0x9e37_79b9_7f4a_7c15)
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    fn view(ids: &[u32]) -> View {
        View::new(1, ids.iter().map(|&id| NodeId(id)))
    }

    #[test]
    fn segment_is_in_range_and_stable() {
        let peer = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
        let s = segment_of(peer, None);
        assert!(s < SEGMENTS);
        assert_eq!(s, segment_of(peer, None));
        let v6 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
        assert!(segment_of(v6, Some(0x1234)) < SEGMENTS);
    }

    #[test]
    fn spi_spreads_one_peer() {
        let peer = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));
        let mut seen = [false; SEGMENTS as usize];
        for spi in 0..64u32 {
            seen[segment_of(peer, Some(0x1000 + spi)) as usize] = true;
        }
        // 64 draws over 256 segments: expect about 57 distinct.
        assert!(seen.iter().filter(|&&s| s).count() > 40);
    }

    #[test]
    fn empty_view_owns_nothing() {
        assert_eq!(segment_owner(&View::default(), 3), None);
        assert!(segment_table(&View::default()).is_empty());
    }

    #[test]
    fn single_member_owns_everything() {
        let table = segment_table(&view(&[42]));
        assert_eq!(table.len(), SEGMENTS as usize);
        assert!(table.iter().all(|&node| node == NodeId(42)));
    }

    #[test]
    fn adding_a_member_only_takes_segments() {
        let before = segment_table(&view(&[1, 2, 3]));
        let after = segment_table(&view(&[1, 2, 3, 4]));
        let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
        assert!(before
            .iter()
            .zip(&after)
            .all(|(b, a)| b == a || *a == NodeId(4)));
        // About a quarter moves to the newcomer.
        assert!((32..=100).contains(&moved), "{moved}");
    }
}
