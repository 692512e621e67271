//! Pure segmentation arithmetic: how a GRO super-datagram splits into
//! datagrams, and how consecutive datagrams group into one GSO send.

use std::net::{IpAddr, SocketAddr};
use std::ops::Range;

use crate::limits::{MAX_GSO_SEGMENTS, MAX_UDP_PAYLOAD};

/// The byte ranges of the datagrams inside a received message of `total`
/// bytes whose segments are `stride` bytes (the last may be shorter).
/// `stride == 0` (not coalesced) or `stride >= total` yields one range.
pub(crate) fn segments(total: usize, stride: usize) -> impl Iterator<Item = Range<usize>> {
    let stride = if stride == 0 { total.max(1) } else { stride };
    (0..total.div_ceil(stride).max(usize::from(total == 0)))
        .map(move |k| k * stride..((k + 1) * stride).min(total))
}

/// What the planner needs to know about one packet to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OutPacket {
    /// Destination.
    pub(crate) remote: SocketAddr,
    /// Source address to use, if any.
    pub(crate) local: Option<IpAddr>,
    /// Payload length.
    pub(crate) len: usize,
    /// Outer TOS / Traffic Class.
    pub(crate) tos: u8,
}

/// How many packets, starting at `packets[0]`, one GSO send can carry
/// (at least 1 if `packets` is not empty).
///
/// The kernel's rules for `UDP_SEGMENT` (udp(7), `udp_send_skb`): every
/// segment but the last is exactly the segment size, the last may be
/// shorter, all go to one destination from one source, at most
/// [`MAX_GSO_SEGMENTS`] of them, and the whole payload fits one IP datagram
/// ([`MAX_UDP_PAYLOAD`]). A shorter packet therefore closes its group.
/// The segments of one send share its one control message, so its TOS
/// too: a packet with another TOS starts a new group (RFC 6040 ECN marks
/// and RFC 2474 DSCP are per packet and must not be merged away).
pub(crate) fn gso_group_len(
    packets: impl IntoIterator<Item = OutPacket>,
    max_segments: usize,
) -> usize {
    let mut iter = packets.into_iter();
    let Some(head) = iter.next() else {
        return 0;
    };
    let max_segments = max_segments.clamp(1, MAX_GSO_SEGMENTS);
    if head.len == 0 {
        return 1;
    }
    let (mut count, mut total) = (1, head.len);
    for p in iter {
        let same_path = p.remote == head.remote && p.local == head.local && p.tos == head.tos;
        let fits = p.len > 0 && p.len <= head.len && total + p.len <= MAX_UDP_PAYLOAD;
        if count == max_segments || !same_path || !fits {
            break;
        }
        count += 1;
        total += p.len;
        if p.len < head.len {
            break;
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(port: u16, len: usize) -> OutPacket {
        OutPacket {
            remote: SocketAddr::from(([192, 0, 2, 1], port)),
            local: None,
            len,
            tos: 0,
        }
    }

    fn ranges(total: usize, stride: usize) -> Vec<Range<usize>> {
        segments(total, stride).collect()
    }

    #[test]
    fn segments_of_a_super_datagram() {
        assert_eq!(ranges(3000, 1000), vec![0..1000, 1000..2000, 2000..3000]);
        assert_eq!(
            ranges(2500, 1000),
            vec![0..1000, 1000..2000, 2000..2500],
            "short last"
        );
        assert_eq!(ranges(700, 1000), vec![0..700], "stride above length");
        assert_eq!(ranges(700, 0), vec![0..700], "not coalesced");
        assert_eq!(
            ranges(0, 0),
            vec![0..0],
            "an empty datagram is still a datagram"
        );
        assert_eq!(ranges(1, 1).len(), 1);
        assert_eq!(ranges(64 * 1000, 1000).len(), 64);
    }

    #[test]
    fn groups_equal_sizes_to_one_destination() {
        let p: Vec<_> = (0..10).map(|_| pkt(1, 1000)).collect();
        assert_eq!(gso_group_len(p, 64), 10);
    }

    #[test]
    fn shorter_packet_ends_the_group() {
        let p = vec![pkt(1, 1000), pkt(1, 1000), pkt(1, 400), pkt(1, 400)];
        assert_eq!(gso_group_len(p, 64), 3);
    }

    #[test]
    fn longer_packet_starts_a_new_group() {
        let p = vec![pkt(1, 1000), pkt(1, 1001)];
        assert_eq!(gso_group_len(p, 64), 1);
    }

    #[test]
    fn destination_or_source_change_splits() {
        assert_eq!(gso_group_len(vec![pkt(1, 100), pkt(2, 100)], 64), 1);
        let mut other_src = pkt(1, 100);
        other_src.local = Some("192.0.2.9".parse().unwrap());
        assert_eq!(gso_group_len(vec![pkt(1, 100), other_src], 64), 1);
    }

    #[test]
    fn tos_change_splits() {
        let with_tos = |tos| OutPacket { tos, ..pkt(1, 100) };
        let p = vec![with_tos(2), with_tos(2), with_tos(3), with_tos(2)];
        assert_eq!(gso_group_len(p.clone(), 64), 2, "ECT(0) run, then CE");
        assert_eq!(gso_group_len(p[2..].to_vec(), 64), 1);
        let dscp = vec![with_tos(0xb8), with_tos(0xb8 | 2)];
        assert_eq!(gso_group_len(dscp, 64), 1, "same DSCP, other ECN");
    }

    #[test]
    fn segment_and_byte_limits() {
        let p: Vec<_> = (0..100).map(|_| pkt(1, 100)).collect();
        assert_eq!(gso_group_len(p.clone(), 64), 64);
        assert_eq!(
            gso_group_len(p.clone(), 500),
            MAX_GSO_SEGMENTS,
            "clamped to the kernel limit"
        );
        assert_eq!(gso_group_len(p, 0), 1, "clamped to at least one");
        let big: Vec<_> = (0..64).map(|_| pkt(1, 1400)).collect();
        assert_eq!(gso_group_len(big, 64), MAX_UDP_PAYLOAD / 1400);
    }

    #[test]
    fn empty_packets_travel_alone() {
        assert_eq!(gso_group_len(vec![pkt(1, 0), pkt(1, 0)], 64), 1);
        assert_eq!(gso_group_len(vec![pkt(1, 10), pkt(1, 0)], 64), 1);
        assert_eq!(gso_group_len(Vec::new(), 64), 0);
    }
}
