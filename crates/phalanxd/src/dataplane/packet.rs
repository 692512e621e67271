//! Packet buffers and the outer headers the sockets do not carry.
//!
//! The sockets deal in what follows the outer headers: a UDP socket
//! receives and sends the UDP payload, a raw ESP socket the ESP packet (the
//! kernel builds the outer IP header on send, no `IP_HDRINCL`). phalanx-esp
//! deals in whole outer packets. So inbound, the outer IPv4/IPv6 (and UDP)
//! header is rebuilt in front of the payload from the receive metadata
//! (source, destination, ports, TOS); outbound, the header ESP built is
//! read for the destination and TOS and stripped before the socket sends
//! the rest, the TOS riding along as a control message.
//!
//! The TOS / Traffic Class octet is what carries ECN and DSCP across the
//! tunnel: phalanx-esp copies the inner one to the outer header on
//! encapsulation (RFC 6040 §4.1 normal mode, RFC 4301 §5.1.2.1), and on
//! decapsulation carries an outer CE mark in (RFC 6040 §4.2), so the
//! rebuilt header must have the octet the datagram arrived with.
//!
//! What the rebuilt header cannot carry: IPv6 extension headers, which the
//! kernel has consumed; and the TTL and identification, which no check
//! reads.

use std::net::IpAddr;

use phalanx_crypto::PacketBuf;
use phalanx_io::PacketBatch;
use phalanx_wire::udp::HEADER_LEN as UDP_HEADER_LEN;
use phalanx_wire::{IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, UdpPacket, UdpRepr};

/// TTL of a rebuilt outer header. Only the ESP layer reads it, and it
/// checks nothing about it; 64 is the common default (RFC 1700).
const REBUILT_TTL: u8 = 64;

/// IPv4 header without options (RFC 791).
const IPV4_HEADER_LEN: usize = 20;

/// IPv6 fixed header (RFC 8200 §3).
const IPV6_HEADER_LEN: usize = 40;

/// Most bytes [`prepend_outer`] puts in front of a payload: an IPv6
/// header and a UDP header (RFC 3948 §2.1).
pub(crate) const MAX_REBUILT_HEADER: usize = IPV6_HEADER_LEN + UDP_HEADER_LEN;

/// Reusable [`PacketBuf`]s of one size. Buffers travel through the
/// crypto engine by value and come back; the pool only allocates when more
/// are in flight than it ever held before.
#[derive(Debug)]
pub(crate) struct BufPool {
    free: Vec<PacketBuf>,
    buf_len: usize,
}

impl BufPool {
    /// `count` buffers of `buf_len` bytes each, allocated now.
    pub(crate) fn new(count: usize, buf_len: usize) -> BufPool {
        let mut free = Vec::with_capacity(count * 2);
        free.extend((0..count).map(|_| PacketBuf::with_capacity(buf_len, 0)));
        BufPool { free, buf_len }
    }

    /// An empty buffer whose data starts after `headroom` bytes.
    pub(crate) fn take(&mut self, headroom: usize) -> PacketBuf {
        match self.free.pop() {
            Some(mut buf) => {
                buf.reset(headroom);
                buf
            }
            None => PacketBuf::with_capacity(self.buf_len, headroom),
        }
    }

    /// Gives a buffer back.
    pub(crate) fn put(&mut self, buf: PacketBuf) {
        self.free.push(buf);
    }

    /// Packet `i` of `batch` as a buffer, moved out of the batch without a
    /// copy: the batch gets one of the pool's buffers in exchange. `None`
    /// (nothing changed) when the packet has less than `headroom` bytes in
    /// front or `tailroom` behind it; the caller copies it then.
    pub(crate) fn swap_out(
        &mut self,
        batch: &mut PacketBatch,
        i: usize,
        (headroom, tailroom): (usize, usize),
    ) -> Option<PacketBuf> {
        let bounds = batch.bounds(i);
        let buffer_len = batch.buffer_len();
        if bounds.start < headroom || buffer_len - bounds.end < tailroom {
            return None;
        }
        let mut spare = match self.free.pop() {
            Some(buf) if buf.headroom() + buf.len() + buf.tailroom() == buffer_len => {
                buf.into_parts().0
            }
            // A buffer of another size leaves the pool; the batch's own
            // buffer takes its place when it comes back.
            _ => vec![0; buffer_len],
        };
        // `spare` has the batch's buffer length, so the swap succeeds.
        batch
            .swap_buffer(i, &mut spare)
            .then(|| PacketBuf::from_parts(spare, bounds.start, bounds.end))
    }
}

/// The batch a path reads: borrowed (packets are copied out) or owned
/// (packet buffers are swapped out).
pub(crate) enum Input<'a> {
    /// Read only.
    Shared(&'a PacketBatch),
    /// Buffers may be exchanged.
    Owned(&'a mut PacketBatch),
}

impl Input<'_> {
    /// The batch, for reading.
    pub(crate) fn batch(&self) -> &PacketBatch {
        match self {
            Input::Shared(batch) => batch,
            Input::Owned(batch) => batch,
        }
    }
}

/// The outer header of a received packet, as the socket reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OuterHeader {
    /// Outer source address (the peer).
    pub(crate) src: IpAddr,
    /// Outer destination address (us).
    pub(crate) dst: IpAddr,
    /// (source port, destination port) of the UDP header (RFC 3948), or
    /// `None` for plain ESP.
    pub(crate) udp: Option<(u16, u16)>,
    /// IPv4 TOS / IPv6 Traffic Class: DSCP and ECN (RFC 2474, RFC 3168).
    pub(crate) tos: u8,
    /// The payload is AH (RFC 4302), not ESP (never with `udp`).
    pub(crate) ah: bool,
}

/// Writes `payload` into the empty `buf` behind a rebuilt outer `header`.
/// False when the addresses are of different families or the packet does
/// not fit (nothing usable is left in `buf` then).
pub(crate) fn rebuild_outer(buf: &mut PacketBuf, header: &OuterHeader, payload: &[u8]) -> bool {
    buf.extend_from_slice(payload) && prepend_outer(buf, header)
}

/// Rebuilds the outer IP header (and UDP header, when `header.udp` is
/// set) in front of the payload already in `buf`, in its headroom. False
/// (the payload left as it was) when the addresses are of different
/// families or the headroom or length limits do not allow it.
pub(crate) fn prepend_outer(buf: &mut PacketBuf, header: &OuterHeader) -> bool {
    let OuterHeader {
        src,
        dst,
        udp,
        tos,
        ah,
    } = *header;
    let payload_len = buf.len();
    let udp_len = if udp.is_some() { UDP_HEADER_LEN } else { 0 };
    let ip_payload = udp_len + payload_len;
    let protocol = match (udp, ah) {
        (Some(_), _) => IpProtocol::UDP,
        (None, true) => IpProtocol::AH,
        (None, false) => IpProtocol::ESP,
    };
    let ip_len = match (src, dst) {
        (IpAddr::V4(_), IpAddr::V4(_)) if ip_payload <= Ipv4Repr::MAX_PAYLOAD_LEN => {
            IPV4_HEADER_LEN
        }
        (IpAddr::V6(_), IpAddr::V6(_)) if ip_payload <= Ipv6Repr::MAX_PAYLOAD_LEN => {
            IPV6_HEADER_LEN
        }
        _ => return false,
    };
    let Some(bytes) = buf.prepend(ip_len + udp_len) else {
        return false;
    };
    let (ip, header) = bytes.split_at_mut(ip_len);
    match (src, dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => Ipv4Repr {
            src,
            dst,
            protocol,
            payload_len: ip_payload,
            ttl: REBUILT_TTL,
            dscp_ecn: tos,
            ident: 0,
            dont_frag: false,
        }
        .emit(&mut Ipv4Packet::new_unchecked(ip)),
        (IpAddr::V6(src), IpAddr::V6(dst)) => Ipv6Repr {
            src,
            dst,
            next_header: protocol,
            payload_len: ip_payload,
            hop_limit: REBUILT_TTL,
            traffic_class: tos,
            flow_label: 0,
        }
        .emit(&mut Ipv6Packet::new_unchecked(ip)),
        _ => return false,
    }
    if let Some((src_port, dst_port)) = udp {
        UdpRepr {
            src_port,
            dst_port,
            payload_len,
        }
        .emit(&mut UdpPacket::new_unchecked(header));
    }
    true
}

/// Where an outer packet built by phalanx-esp goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OuterRoute {
    /// Outer source address.
    pub(crate) src: IpAddr,
    /// Outer destination address.
    pub(crate) dst: IpAddr,
    /// The destination UDP port, when the packet is UDP-encapsulated.
    pub(crate) udp_dst_port: Option<u16>,
    /// Where the socket's part starts: the UDP payload, or the ESP header.
    pub(crate) payload_offset: usize,
    /// The outer TOS / Traffic Class phalanx-esp wrote (RFC 6040 §4.1:
    /// the inner ECN field and DSCP, copied), for the socket to send with.
    pub(crate) tos: u8,
    /// The packet is AH (RFC 4302): over IPv4 it goes whole (its header is
    /// in the ICV), over IPv6 from `payload_offset`.
    pub(crate) ah: bool,
}

/// Reads the outer header of a finished outbound packet. `None` when it
/// is neither ESP, AH nor UDP over IPv4/IPv6 (it cannot be: phalanx-esp
/// built it; but nothing here trusts that).
pub(crate) fn outer_route(packet: &[u8]) -> Option<OuterRoute> {
    let (src, dst, protocol, offset, tos) = match packet.first()? >> 4 {
        4 => {
            let ip = Ipv4Packet::new_checked(packet).ok()?;
            let (src, dst) = (IpAddr::V4(ip.src_addr()), IpAddr::V4(ip.dst_addr()));
            (src, dst, ip.protocol(), ip.header_len(), ip.dscp_ecn())
        }
        6 => {
            let ip = Ipv6Packet::new_checked(packet).ok()?;
            let upper = phalanx_wire::ipv6::upper_layer(&ip).ok()?;
            let (src, dst) = (IpAddr::V6(ip.src_addr()), IpAddr::V6(ip.dst_addr()));
            (src, dst, upper.protocol, upper.offset, ip.traffic_class())
        }
        _ => return None,
    };
    let route = OuterRoute {
        src,
        dst,
        udp_dst_port: None,
        payload_offset: offset,
        tos,
        ah: false,
    };
    match protocol {
        IpProtocol::ESP => Some(route),
        IpProtocol::AH => Some(OuterRoute { ah: true, ..route }),
        IpProtocol::UDP => {
            let udp = UdpPacket::new_checked(packet.get(offset..)?).ok()?;
            Some(OuterRoute {
                udp_dst_port: Some(udp.dst_port()),
                payload_offset: offset + UDP_HEADER_LEN,
                ..route
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(src: &str, dst: &str, udp: Option<(u16, u16)>, tos: u8) -> OuterHeader {
        OuterHeader {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            udp,
            tos,
            ah: false,
        }
    }

    #[test]
    fn rebuild_then_route_round_trips_v4_udp_and_v6_raw() {
        let mut buf = PacketBuf::with_capacity(256, 64);
        let h = header("192.0.2.1", "192.0.2.2", Some((4500, 4501)), 0);
        assert!(rebuild_outer(&mut buf, &h, &[1, 2, 3, 4, 5, 6, 7, 8]));
        assert_eq!(buf.len(), 20 + 8 + 8);
        assert!(Ipv4Packet::new_checked(buf.as_slice())
            .unwrap()
            .verify_checksum());
        let route = outer_route(buf.as_slice()).unwrap();
        assert_eq!(
            (route.src, route.dst, route.udp_dst_port),
            (h.src, h.dst, Some(4501))
        );
        assert_eq!(
            &buf.as_slice()[route.payload_offset..],
            &[1, 2, 3, 4, 5, 6, 7, 8]
        );

        let mut buf = PacketBuf::with_capacity(256, 64);
        let h = header("2001:db8::1", "2001:db8::2", None, 0);
        assert!(rebuild_outer(&mut buf, &h, &[9; 12]));
        let route = outer_route(buf.as_slice()).unwrap();
        assert_eq!(
            (
                route.src,
                route.dst,
                route.udp_dst_port,
                route.payload_offset
            ),
            (h.src, h.dst, None, 40)
        );
    }

    /// The TOS octet the socket reported lands in the rebuilt header, where
    /// phalanx-esp's RFC 6040 §4.2 decapsulation reads the outer ECN field;
    /// and the one phalanx-esp wrote is what the socket is told to send.
    #[test]
    fn rebuilt_header_carries_the_received_tos() {
        // DSCP EF (RFC 3246) with CE, Not-ECT, ECT(1), ECT(0).
        for tos in [0xb8 | 3, 0, 1, 2] {
            let mut buf = PacketBuf::with_capacity(256, 64);
            let h = header("192.0.2.1", "192.0.2.2", Some((4500, 4500)), tos);
            assert!(rebuild_outer(&mut buf, &h, &[7; 16]));
            let ip = Ipv4Packet::new_checked(buf.as_slice()).unwrap();
            assert_eq!(ip.dscp_ecn(), tos, "IPv4 TOS");
            assert!(ip.verify_checksum(), "checksum covers the TOS");
            assert_eq!(outer_route(buf.as_slice()).unwrap().tos, tos);

            let mut buf = PacketBuf::with_capacity(256, 64);
            let h = header("2001:db8::1", "2001:db8::2", None, tos);
            assert!(rebuild_outer(&mut buf, &h, &[7; 16]));
            let ip = Ipv6Packet::new_checked(buf.as_slice()).unwrap();
            assert_eq!(ip.traffic_class(), tos, "IPv6 Traffic Class");
            assert_eq!(outer_route(buf.as_slice()).unwrap().tos, tos);
        }
    }

    #[test]
    fn mixed_families_and_no_room_are_refused() {
        let mut buf = PacketBuf::with_capacity(64, 0);
        let mixed = header("192.0.2.1", "2001:db8::1", None, 0);
        assert!(!rebuild_outer(&mut buf, &mixed, &[0; 4]));
        let v4 = header("192.0.2.1", "192.0.2.1", None, 0);
        assert!(!rebuild_outer(&mut buf, &v4, &[0; 60]));
        assert!(outer_route(&[0x45]).is_none());
        assert!(outer_route(&[]).is_none());
    }

    #[test]
    fn swap_out_needs_room_and_keeps_the_batch_whole() {
        use phalanx_io::PacketMeta;
        let mut batch = PacketBatch::new(2, 32, 24);
        batch.push(b"abc", PacketMeta::default()).unwrap();
        let mut pool = BufPool::new(1, 100);
        assert!(pool.swap_out(&mut batch, 0, (25, 0)).is_none(), "headroom");
        assert!(pool.swap_out(&mut batch, 0, (0, 30)).is_none(), "tailroom");
        assert_eq!(batch.packet(0), b"abc", "refusals change nothing");
        let mut buf = pool.swap_out(&mut batch, 0, (24, 29)).unwrap();
        assert_eq!((buf.as_slice(), buf.headroom()), (&b"abc"[..], 24));
        assert_eq!(
            batch.buffer_len(),
            56,
            "the batch got a buffer of its length"
        );
        let h = header("192.0.2.1", "192.0.2.2", None, 0);
        assert!(prepend_outer(&mut buf, &h));
        assert!(!prepend_outer(&mut buf, &h), "no headroom left");
        assert_eq!(outer_route(buf.as_slice()).unwrap().payload_offset, 20);
    }

    #[test]
    fn pool_reuses_buffers() {
        let mut pool = BufPool::new(1, 128);
        let buf = pool.take(16);
        assert_eq!(buf.headroom(), 16);
        pool.put(buf);
        let again = pool.take(32);
        assert_eq!(again.headroom(), 32);
        // Empty pool: a new buffer is made.
        let extra = pool.take(8);
        assert_eq!(extra.tailroom(), 120);
    }
}
