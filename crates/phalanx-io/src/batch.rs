//! [`PacketBatch`]: N reusable fixed-size buffers, one packet in each, with
//! headroom and tailroom around it for in-place header work.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::Range;

/// What the I/O layer knows about one packet besides its bytes.
///
/// For a datagram received from a socket, `remote` is its source and `local`
/// the address it was sent to (`IP_PKTINFO` / `IPV6_PKTINFO`, or the raw IPv4
/// header). For one to send, `remote` is the destination and `local`, when
/// set, the source address to use. Packets of a TUN device carry
/// [`PacketMeta::default`]: their addresses are in the IP header.
///
/// `tos` is the outer IP header's DSCP/ECN octet, which the socket API
/// otherwise hides: on receive what the datagram arrived with
/// (`IP_RECVTOS` / `IPV6_RECVTCLASS`, or the raw IPv4 header), on send
/// what the kernel writes into the header it builds (`IP_TOS` /
/// `IPV6_TCLASS` control message). It is how ECN crosses a tunnel
/// (RFC 6040) and DSCP is kept (RFC 4301 §5.1.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMeta {
    /// Peer address: source on receive, destination on send. Raw ESP
    /// sockets use port 0.
    pub remote: SocketAddr,
    /// Our address: destination on receive, source on send (`None`: the
    /// kernel picks one by routing).
    pub local: Option<IpAddr>,
    /// Segment size of the UDP GRO super-datagram this packet was split
    /// from; equal to the packet length when the kernel did not coalesce
    /// (quinn's `RecvMeta::stride`). 0 for packets not received from a socket.
    pub stride: usize,
    /// IPv4 Type of Service / IPv6 Traffic Class octet of the outer header:
    /// DSCP in the upper six bits, ECN in the lower two (RFC 2474 §3,
    /// RFC 3168 §5). Received: as it arrived (the segments of a GRO
    /// super-datagram share it: the kernel coalesces only datagrams whose
    /// TOS is equal). To send: 0 leaves the socket's default (0).
    pub tos: u8,
}

impl Default for PacketMeta {
    fn default() -> Self {
        Self {
            remote: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
            local: None,
            stride: 0,
            tos: 0,
        }
    }
}

/// A packet's new bounds did not fit its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoundsError {
    /// The rejected bounds.
    pub requested: (usize, usize),
    /// Length of the buffer.
    pub buffer_len: usize,
}

impl fmt::Display for BoundsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (start, end) = self.requested;
        write!(
            f,
            "bounds {start}..{end} exceed a {}-byte buffer",
            self.buffer_len
        )
    }
}

impl std::error::Error for BoundsError {}

/// A batch of fixed-size packet buffers, reused across calls.
///
/// Slots `0..len()` hold packets; slots `len()..capacity()` are free and
/// are where receive calls put new packets. Packet `i` occupies
/// `bounds(i)` of buffer `i`; a received packet starts
/// [`headroom`](Self::headroom) bytes into its buffer. The ESP layer grows or
/// shrinks a packet in place with [`buffer_mut`](Self::buffer_mut) and
/// [`set_bounds`](Self::set_bounds).
///
/// Buffers are allocated once, by [`new`](Self::new); no method allocates
/// afterwards.
pub struct PacketBatch {
    bufs: Vec<Box<[u8]>>,
    starts: Vec<usize>,
    lens: Vec<usize>,
    meta: Vec<PacketMeta>,
    len: usize,
    headroom: usize,
}

impl fmt::Debug for PacketBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketBatch")
            .field("len", &self.len)
            .field("capacity", &self.bufs.len())
            .field("headroom", &self.headroom)
            .field("buffer_len", &self.buffer_len())
            .finish()
    }
}

impl PacketBatch {
    /// A batch of `capacity` buffers, each `headroom + room` bytes: `room`
    /// is the most a packet may occupy behind the headroom (for TUN GRO on
    /// send, 64 KiB lets a whole flow's segments coalesce in one buffer).
    pub fn new(capacity: usize, room: usize, headroom: usize) -> Self {
        let buffer_len = headroom + room;
        Self {
            bufs: (0..capacity)
                .map(|_| vec![0; buffer_len].into_boxed_slice())
                .collect(),
            starts: vec![headroom; capacity],
            lens: vec![0; capacity],
            meta: vec![PacketMeta::default(); capacity],
            len: 0,
            headroom,
        }
    }

    /// Number of packets in the batch.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch holds no packet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of buffers.
    pub fn capacity(&self) -> usize {
        self.bufs.len()
    }

    /// Number of free slots.
    pub fn free(&self) -> usize {
        self.bufs.len() - self.len
    }

    /// Headroom in front of a received packet.
    pub fn headroom(&self) -> usize {
        self.headroom
    }

    /// Length of each buffer (headroom included).
    pub fn buffer_len(&self) -> usize {
        self.headroom + self.room()
    }

    /// Most bytes a received packet may occupy (buffer less headroom).
    pub fn room(&self) -> usize {
        self.bufs.first().map_or(0, |b| b.len() - self.headroom)
    }

    /// Forgets all packets; buffers are kept.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Keeps the first `len` packets.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Packet `i`. Panics if `i >= len()` (a caller bug, like slice indexing).
    pub fn packet(&self, i: usize) -> &[u8] {
        assert!(i < self.len, "packet index {i} out of range {}", self.len);
        &self.bufs[i][self.starts[i]..self.starts[i] + self.lens[i]]
    }

    /// Packet `i`, mutable. Panics if `i >= len()`.
    pub fn packet_mut(&mut self, i: usize) -> &mut [u8] {
        assert!(i < self.len, "packet index {i} out of range {}", self.len);
        let start = self.starts[i];
        &mut self.bufs[i][start..start + self.lens[i]]
    }

    /// Metadata of packet `i`. Panics if `i >= len()`.
    pub fn meta(&self, i: usize) -> &PacketMeta {
        assert!(i < self.len, "packet index {i} out of range {}", self.len);
        &self.meta[i]
    }

    /// Metadata of packet `i`, mutable (e.g. to set the destination before
    /// sending). Panics if `i >= len()`.
    pub fn meta_mut(&mut self, i: usize) -> &mut PacketMeta {
        assert!(i < self.len, "packet index {i} out of range {}", self.len);
        &mut self.meta[i]
    }

    /// Where packet `i` lies in its buffer. Panics if `i >= len()`.
    pub fn bounds(&self, i: usize) -> Range<usize> {
        assert!(i < self.len, "packet index {i} out of range {}", self.len);
        self.starts[i]..self.starts[i] + self.lens[i]
    }

    /// The whole buffer of packet `i`, headroom and tailroom included, for
    /// in-place work; follow with [`set_bounds`](Self::set_bounds). Panics if
    /// `i >= len()`.
    pub fn buffer_mut(&mut self, i: usize) -> &mut [u8] {
        assert!(i < self.len, "packet index {i} out of range {}", self.len);
        &mut self.bufs[i]
    }

    /// Moves packet `i` to `bounds` of its buffer (after prepending outer
    /// headers, or stripping them). Panics if `i >= len()`.
    pub fn set_bounds(&mut self, i: usize, bounds: Range<usize>) -> Result<(), BoundsError> {
        assert!(i < self.len, "packet index {i} out of range {}", self.len);
        let buffer_len = self.bufs[i].len();
        if bounds.start > bounds.end || bounds.end > buffer_len {
            return Err(BoundsError {
                requested: (bounds.start, bounds.end),
                buffer_len,
            });
        }
        self.starts[i] = bounds.start;
        self.lens[i] = bounds.end - bounds.start;
        Ok(())
    }

    /// Copies `data` into the next free slot behind the headroom. Returns the
    /// packet's index, or `None` if the batch is full or `data` exceeds
    /// [`room`](Self::room).
    pub fn push(&mut self, data: &[u8], meta: PacketMeta) -> Option<usize> {
        let i = self.len;
        let room = self.room();
        if i == self.bufs.len() || data.len() > room {
            return None;
        }
        let start = self.headroom;
        self.bufs[i][start..start + data.len()].copy_from_slice(data);
        self.place(i, start, data.len(), meta);
        self.len += 1;
        Some(i)
    }

    /// Exchanges buffer `i` with `buf`, which must be exactly
    /// [`buffer_len`](Self::buffer_len) bytes long, so a packet moves to
    /// another owner (phalanx-crypto's `PacketBuf`) without a copy and the
    /// batch keeps a buffer of its size. Packet `i` keeps its bounds, now
    /// over the new buffer's bytes: follow with
    /// [`set_bounds`](Self::set_bounds) or drop the batch's packets with
    /// [`clear`](Self::clear). False (and nothing changed) when the lengths
    /// differ. Panics if `i >= len()`.
    pub fn swap_buffer(&mut self, i: usize, buf: &mut Vec<u8>) -> bool {
        assert!(i < self.len, "packet index {i} out of range {}", self.len);
        self.exchange(i, buf)
    }

    /// Appends a packet by moving `buf` into the next free slot instead of
    /// copying it: the packet is `bounds` of `buf`, and `buf` receives the
    /// slot's old buffer. Returns the packet's index, or `None` (and
    /// nothing changed) if the batch is full, `buf` is not
    /// [`buffer_len`](Self::buffer_len) bytes long, or `bounds` do not fit.
    pub fn push_buffer(
        &mut self,
        buf: &mut Vec<u8>,
        bounds: Range<usize>,
        meta: PacketMeta,
    ) -> Option<usize> {
        let i = self.len;
        if i == self.bufs.len() || bounds.start > bounds.end || bounds.end > buf.len() {
            return None;
        }
        if !self.exchange(i, buf) {
            return None;
        }
        self.place(i, bounds.start, bounds.end - bounds.start, meta);
        self.len += 1;
        Some(i)
    }

    /// Swaps buffer `i` and `buf` when their lengths are equal.
    fn exchange(&mut self, i: usize, buf: &mut Vec<u8>) -> bool {
        if buf.len() != self.bufs[i].len() {
            return false;
        }
        // `Vec::from(Box<[u8]>)` and `into_boxed_slice` of a full vector
        // reuse the allocation; only a vector with spare capacity is
        // shrunk (and so reallocated) on the way in.
        let mut old = Vec::from(std::mem::take(&mut self.bufs[i]));
        std::mem::swap(&mut old, buf);
        self.bufs[i] = old.into_boxed_slice();
        true
    }

    /// The packets in order, with their metadata.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &PacketMeta)> + '_ {
        (0..self.len).map(|i| (self.packet(i), &self.meta[i]))
    }

    fn place(&mut self, i: usize, start: usize, len: usize, meta: PacketMeta) {
        self.starts[i] = start;
        self.lens[i] = len;
        self.meta[i] = meta;
    }

    /// The free buffers and their length slots, for a device that writes
    /// packets at `headroom` (tun-rs `recv_multiple`).
    pub(crate) fn free_slots_mut(&mut self) -> (&mut [Box<[u8]>], &mut [usize]) {
        let n = self.len;
        (&mut self.bufs[n..], &mut self.lens[n..])
    }

    /// The receive areas (`headroom..`) of the free buffers, in slot order.
    pub(crate) fn free_rooms_mut(&mut self) -> impl Iterator<Item = &mut [u8]> + '_ {
        let headroom = self.headroom;
        self.bufs[self.len..]
            .iter_mut()
            .map(move |b| &mut b[headroom..])
    }

    /// Accepts the first `n` free slots, filled through
    /// [`free_slots_mut`](Self::free_slots_mut) with lengths already set.
    pub(crate) fn commit_lengths(&mut self, n: usize) {
        let n = n.min(self.free());
        for i in self.len..self.len + n {
            self.starts[i] = self.headroom;
            // The device wrote no more than the room it was given.
            self.lens[i] = self.lens[i].min(self.bufs[i].len() - self.headroom);
            self.meta[i] = PacketMeta::default();
        }
        self.len += n;
    }

    /// Accepts the first `filled` free slots, each described by `describe`
    /// (given the slot's number among the filled ones and its receive area):
    /// `Some((offset, len, meta))` keeps `offset..offset + len` of the area
    /// as a packet, `None` (or bounds past the area) drops the slot. Kept
    /// packets are packed in order (buffers are swapped, not copied).
    /// Returns the number kept.
    pub(crate) fn commit_with(
        &mut self,
        filled: usize,
        mut describe: impl FnMut(usize, &[u8]) -> Option<(usize, usize, PacketMeta)>,
    ) -> usize {
        let base = self.len;
        let filled = filled.min(self.free());
        let mut kept = base;
        for j in 0..filled {
            let slot = base + j;
            let area = &self.bufs[slot][self.headroom..];
            let Some((offset, len, meta)) = describe(j, area) else {
                continue;
            };
            if offset.checked_add(len).is_none_or(|end| end > area.len()) {
                continue;
            }
            self.bufs.swap(kept, slot);
            self.place(kept, self.headroom + offset, len, meta);
            kept += 1;
        }
        self.len = kept;
        kept - base
    }

    /// Appends a copy of `data` (one segment of a coalesced receive).
    /// Returns false if the batch is full or `data` does not fit a buffer.
    pub(crate) fn push_segment(&mut self, data: &[u8], meta: PacketMeta) -> bool {
        self.push(data, meta).is_some()
    }

    /// Every packet's whole buffer with its bounds, for devices that need
    /// the bytes around a packet (the virtio header in front of it, GRO
    /// room behind it).
    pub(crate) fn frames_mut(&mut self) -> impl Iterator<Item = (&mut [u8], Range<usize>)> + '_ {
        let n = self.len;
        self.bufs[..n]
            .iter_mut()
            .zip(&self.starts[..n])
            .zip(&self.lens[..n])
            .map(|((buf, &start), &len)| (&mut buf[..], start..start + len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(port: u16) -> PacketMeta {
        PacketMeta {
            remote: SocketAddr::from(([192, 0, 2, 1], port)),
            local: None,
            stride: 0,
            tos: 0,
        }
    }

    #[test]
    fn push_places_packets_behind_headroom() {
        let mut b = PacketBatch::new(2, 100, 16);
        assert_eq!(b.push(b"abc", meta(1)), Some(0));
        assert_eq!(b.push(b"de", meta(2)), Some(1));
        assert_eq!(b.push(b"f", meta(3)), None, "full");
        assert_eq!(b.bounds(0), 16..19);
        assert_eq!(b.packet(1), b"de");
        assert_eq!(b.meta(1).remote.port(), 2);
        assert_eq!(b.buffer_len(), 116);
    }

    #[test]
    fn push_refuses_oversize() {
        let mut b = PacketBatch::new(1, 4, 8);
        assert_eq!(b.push(&[0; 5], meta(1)), None);
        assert_eq!(b.push(&[0; 4], meta(1)), Some(0));
    }

    #[test]
    fn set_bounds_prepends_in_place() {
        let mut b = PacketBatch::new(1, 32, 8);
        b.push(b"payload", meta(1)).unwrap();
        b.buffer_mut(0)[4..8].copy_from_slice(b"HDR:");
        b.set_bounds(0, 4..15).unwrap();
        assert_eq!(b.packet(0), b"HDR:payload");
        let err = b.set_bounds(0, 4..41).unwrap_err();
        assert_eq!(err.buffer_len, 40);
        assert_eq!(b.packet(0), b"HDR:payload", "unchanged on error");
    }

    #[test]
    fn commit_with_packs_kept_slots_in_order() {
        let mut b = PacketBatch::new(4, 8, 2);
        b.push(b"first", meta(0)).unwrap();
        for (k, area) in b.free_rooms_mut().enumerate() {
            area[0] = b'a' + k as u8;
        }
        // Keep slots 0 and 2 of the three free ones, drop slot 1.
        let kept = b.commit_with(3, |j, area| (j != 1).then(|| (0, 1, meta(area[0] as u16))));
        assert_eq!(kept, 2);
        assert_eq!(b.len(), 3);
        assert_eq!(b.packet(1), b"a");
        assert_eq!(b.packet(2), b"c");
        assert_eq!(b.meta(2).remote.port(), u16::from(b'c'));
        // Bounds past the receive area are dropped, not kept.
        assert_eq!(
            b.commit_with(1, |_, area| Some((1, area.len(), meta(0)))),
            0
        );
        assert_eq!(b.len(), 3);
    }

    #[test]
    fn swap_buffer_moves_allocations() {
        let mut b = PacketBatch::new(2, 6, 2);
        b.push(b"abcd", meta(1)).unwrap();
        let mut mine = vec![7u8; 8];
        let mine_ptr = mine.as_ptr();
        assert!(b.swap_buffer(0, &mut mine));
        assert_eq!(&mine[2..6], b"abcd", "the packet left without a copy");
        assert_eq!(b.packet(0), &[7; 4], "bounds kept over the new bytes");
        assert_eq!(b.buffer_mut(0).as_ptr(), mine_ptr);
        let mut short = vec![0u8; 7];
        assert!(!b.swap_buffer(0, &mut short));
        assert_eq!(short.len(), 7);
    }

    #[test]
    fn push_buffer_appends_without_copy() {
        let mut b = PacketBatch::new(1, 6, 2);
        let mut packet = b"..wxyz..".to_vec();
        let ptr = packet.as_ptr();
        assert_eq!(b.push_buffer(&mut packet, 2..6, meta(9)), Some(0));
        assert_eq!(b.packet(0), b"wxyz");
        assert_eq!(b.meta(0).remote.port(), 9);
        assert_eq!(b.buffer_mut(0).as_ptr(), ptr);
        assert_eq!(packet.len(), 8, "got the slot's buffer back");
        let mut more = vec![0u8; 8];
        assert_eq!(b.push_buffer(&mut more, 0..1, meta(1)), None, "full");
        b.clear();
        assert_eq!(b.push_buffer(&mut more, 4..9, meta(1)), None, "bounds");
        assert_eq!(
            b.push_buffer(&mut vec![0; 3], 0..1, meta(1)),
            None,
            "length"
        );
        assert!(b.is_empty());
    }

    #[test]
    fn clear_keeps_buffers() {
        let mut b = PacketBatch::new(3, 8, 0);
        b.push(b"x", meta(0)).unwrap();
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.free(), 3);
        assert_eq!(b.room(), 8);
    }
}
