//! The clear side: a Linux TUN device (layer 3, no packet information),
//! one queue per worker, with segmentation offload. Needs `CAP_NET_ADMIN`.
//!
//! Offload on (the default): the device is opened with `IFF_VNET_HDR` and
//! `TUNSETOFFLOAD` (checksum, TSO4, TSO6, and USO4/USO6 where the kernel has
//! them, Linux 6.2+), so the kernel hands over TCP/UDP super-packets of up to
//! 64 KiB instead of MTU-sized ones. tun-rs parses the virtio-net header and
//! splits each super-packet into IP packets, one per buffer of the batch
//! ([`TunDevice::recv_batch`]); on send it coalesces runs of one flow back
//! into super-packets (GRO) before writing ([`TunDevice::send_batch`]).
//! Offload off: one packet per `read`/`write`, nothing else changes for the
//! caller.
//!
//! Setup without the `ip` tool: name, MTU, up, and optionally one IPv4 and
//! one IPv6 address are set through ioctls when the device is opened.
//! Routes, and anything more, are left to the caller's setup script.
//!
//! Descriptors are always nonblocking: a worker waits for readiness with
//! [`poll`](crate::poll) and drains with `recv_batch`, which returns
//! `WouldBlock` when nothing is queued.

use std::io;
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, BorrowedFd};

use tun_rs::{DeviceBuilder, ExpandBuffer, GROTable, SyncDevice};

use crate::batch::PacketBatch;
use crate::limits::{TUN_READ_BUFFER_LEN, TUN_SEGMENT_OVERHEAD, VIRTIO_NET_HDR_LEN};
use crate::stats::TunStats;

/// How to open a [`TunDevice`]. Start from [`TunConfig::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TunConfig {
    /// Interface name (at most 15 bytes).
    pub name: String,
    /// MTU to set; `None` keeps the kernel's default (1500).
    pub mtu: Option<u16>,
    /// `IFF_VNET_HDR` with TSO/USO offload (default on).
    pub offload: bool,
    /// `IFF_MULTI_QUEUE`, so more queues can be opened with
    /// [`TunDevice::open_queue`] (default off).
    pub multi_queue: bool,
    /// An IPv4 address and prefix length to assign.
    pub ipv4: Option<(Ipv4Addr, u8)>,
    /// An IPv6 address and prefix length to assign.
    pub ipv6: Option<(Ipv6Addr, u8)>,
    /// Bring the link up (default on).
    pub up: bool,
}

impl TunConfig {
    /// Defaults: offload on, one queue, link up, no address, default MTU.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            mtu: None,
            offload: true,
            multi_queue: false,
            ipv4: None,
            ipv6: None,
            up: true,
        }
    }
}

/// One queue of a TUN device.
pub struct TunDevice {
    dev: SyncDevice,
    /// Taken at open: the ioctl behind it resolves names in the calling
    /// thread's namespace, which may not be the device's later.
    index: u32,
    read_buf: Box<[u8]>,
    gro: GROTable,
    frames: Vec<TunFrame<'static>>,
    /// Free buffers a batch must still have for another read: the most
    /// segments one super-packet is expected to split into.
    drain_reserve: usize,
    stats: TunStats,
}

impl std::fmt::Debug for TunDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunDevice")
            .field("name", &self.name().ok())
            .field("offload", &self.offload())
            .field("udp_offload", &self.udp_offload())
            .finish()
    }
}

impl TunDevice {
    /// Creates (or attaches to) the device and opens its first queue.
    pub fn open(config: &TunConfig) -> io::Result<Self> {
        let mut builder = DeviceBuilder::new()
            .name(config.name.clone())
            .offload(config.offload)
            .multi_queue(config.multi_queue)
            .enable(config.up);
        if let Some(mtu) = config.mtu {
            builder = builder.mtu(mtu);
        }
        if let Some((addr, prefix)) = config.ipv4 {
            builder = builder.ipv4(addr, prefix, None::<Ipv4Addr>);
        }
        if let Some((addr, prefix)) = config.ipv6 {
            builder = builder.ipv6(addr, prefix);
        }
        Self::from_device(builder.build_sync()?)
    }

    /// Opens another queue of the same device, with the same offloads
    /// (the device must have been opened with `multi_queue`). The kernel
    /// spreads flows over the queues by hash.
    ///
    /// Call it from a thread in the device's network namespace: `TUNSETIFF`
    /// looks the name up in the caller's namespace, and elsewhere would
    /// create a new device of that name. That case is refused with
    /// `NotFound` before anything is created.
    pub fn open_queue(&self) -> io::Result<Self> {
        let (name, index) = (self.name()?, self.index);
        if nix::net::if_::if_nametoindex(name.as_str()).ok() != Some(index) {
            let msg = format!("{name} (index {index}) is not in this thread's network namespace");
            return Err(io::Error::new(io::ErrorKind::NotFound, msg));
        }
        Self::from_device(self.dev.try_clone()?)
    }

    fn from_device(dev: SyncDevice) -> io::Result<Self> {
        dev.set_nonblocking(true)?;
        let drain_reserve = if dev.tcp_gso() {
            // A super-packet is at most 64 KiB of segments of about MTU size.
            let mtu = usize::from(dev.mtu()?);
            65_535usize.div_ceil(mtu.saturating_sub(TUN_SEGMENT_OVERHEAD).max(1))
        } else {
            1
        };
        Ok(Self {
            index: dev.if_index()?,
            dev,
            read_buf: vec![0; TUN_READ_BUFFER_LEN].into_boxed_slice(),
            gro: GROTable::new(),
            frames: Vec::new(),
            drain_reserve,
            stats: TunStats::default(),
        })
    }

    /// The interface name.
    pub fn name(&self) -> io::Result<String> {
        self.dev.name()
    }

    /// The interface index (in the device's network namespace).
    pub fn if_index(&self) -> u32 {
        self.index
    }

    /// The interface MTU.
    pub fn mtu(&self) -> io::Result<u16> {
        self.dev.mtu()
    }

    /// Whether TCP offload (virtio header, TSO, GRO on send) is on.
    pub fn offload(&self) -> bool {
        self.dev.tcp_gso()
    }

    /// Whether UDP offload (USO, Linux 6.2+) is on as well.
    pub fn udp_offload(&self) -> bool {
        self.dev.udp_gso()
    }

    /// Counters since open.
    pub fn stats(&self) -> TunStats {
        self.stats
    }

    /// Appends packets the kernel routed into the device to the free slots
    /// of `batch`, each one IP packet behind the headroom (super-packets
    /// are split). Reads until nothing is queued or the batch cannot take
    /// another super-packet. Returns how many were added; `WouldBlock` if
    /// none was queued.
    ///
    /// A read whose packet cannot be used (malformed virtio header or
    /// packet, more segments than free buffers, a packet larger than the
    /// batch's [`room`](PacketBatch::room)) is dropped and counted in
    /// [`TunStats::read_dropped`]; with offload on, batches should have at
    /// least 64 KiB / MSS buffers (128 covers any MSS of 512 or more).
    pub fn recv_batch(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        let mut added = 0;
        // Each pass consumes one packet from the kernel (or stops), so a
        // stream of bad packets cannot hold the caller here.
        for _ in 0..batch.capacity() {
            let free = batch.free();
            if free == 0 || (added > 0 && free < self.drain_reserve) {
                break;
            }
            match self.read_once(batch) {
                Ok(n) => added += n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) if is_packet_error(&err) => self.stats.read_dropped += 1,
                Err(_) if added > 0 => break,
                Err(err) => return Err(err),
            }
        }
        Ok(added)
    }

    fn read_once(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        let headroom = batch.headroom();
        let (bufs, lens) = batch.free_slots_mut();
        let n = self
            .dev
            .recv_multiple(&mut self.read_buf, bufs, lens, headroom)?;
        batch.commit_lengths(n);
        self.stats.reads += 1;
        self.stats.packets_received += n as u64;
        self.stats.super_packets += u64::from(n > 1);
        Ok(n)
    }

    /// Writes every packet of `batch` into the device and clears the batch.
    /// With offload on, runs of one TCP or UDP flow are coalesced in place
    /// first (the batch's buffers are scribbled on), so one write may carry
    /// many packets; each packet needs [`VIRTIO_NET_HDR_LEN`] bytes of
    /// headroom for the virtio header, and GRO can only grow a packet into
    /// the tailroom of its buffer.
    ///
    /// Returns the number of packets handed to the kernel. Packets that
    /// cannot be written (empty, too little headroom) are counted in
    /// [`TunStats::send_dropped`]; failed writes in
    /// [`TunStats::write_errors`]. Only an error of the descriptor itself
    /// is returned.
    pub fn send_batch(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        let result = if self.offload() {
            self.send_coalesced(batch)
        } else {
            self.send_plain(batch)
        };
        batch.clear();
        result
    }

    fn send_coalesced(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        let mut frames = recycle(mem::take(&mut self.frames));
        for (buf, bounds) in batch.frames_mut() {
            if bounds.start < VIRTIO_NET_HDR_LEN || bounds.is_empty() {
                self.stats.send_dropped += 1;
                continue;
            }
            let len = VIRTIO_NET_HDR_LEN + bounds.len();
            frames.push(TunFrame {
                buf: &mut buf[bounds.start - VIRTIO_NET_HDR_LEN..],
                len,
            });
        }
        let queued = frames.len();
        let result = if queued == 0 {
            Ok(0)
        } else {
            self.dev
                .send_multiple(&mut self.gro, &mut frames, VIRTIO_NET_HDR_LEN)
        };
        self.frames = recycle(frames);
        self.stats.packets_sent += queued as u64;
        match result {
            Err(err) if is_fatal(&err) => Err(err),
            Err(_) => {
                self.stats.write_errors += 1;
                Ok(queued)
            }
            Ok(_) => Ok(queued),
        }
    }

    fn send_plain(&mut self, batch: &PacketBatch) -> io::Result<usize> {
        let mut sent = 0;
        for (packet, _) in batch.iter() {
            if packet.is_empty() {
                self.stats.send_dropped += 1;
                continue;
            }
            match self.dev.send(packet) {
                Ok(_) => sent += 1,
                Err(err) if is_fatal(&err) => return Err(err),
                Err(_) => self.stats.write_errors += 1,
            }
        }
        self.stats.packets_sent += sent as u64;
        Ok(sent)
    }
}

impl AsFd for TunDevice {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.dev.as_fd()
    }
}

/// tun-rs reports problems with one packet (bad virtio header, cannot
/// split) as errors without an OS error code; the descriptor is fine.
fn is_packet_error(err: &io::Error) -> bool {
    err.raw_os_error().is_none()
}

/// The descriptor itself is gone.
fn is_fatal(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EBADF | libc::EBADFD))
}

/// A packet and the room around it, as tun-rs's `send_multiple` wants it:
/// the virtio header's bytes in front of the packet, and GRO room behind.
struct TunFrame<'a> {
    /// From the virtio header to the end of the packet's buffer.
    buf: &'a mut [u8],
    /// Header plus packet; never more than `buf.len()`.
    len: usize,
}

impl AsRef<[u8]> for TunFrame<'_> {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl AsMut<[u8]> for TunFrame<'_> {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }
}

/// tun-rs checks `buf_capacity` before it coalesces into a frame, so the
/// clamps below never cut a packet short; they keep a wrong length from
/// ever reaching past the buffer.
impl ExpandBuffer for TunFrame<'_> {
    fn buf_capacity(&self) -> usize {
        self.buf.len()
    }

    fn buf_resize(&mut self, new_len: usize, value: u8) {
        let new_len = new_len.min(self.buf.len());
        if new_len > self.len {
            self.buf[self.len..new_len].fill(value);
        }
        self.len = new_len;
    }

    fn buf_extend_from_slice(&mut self, src: &[u8]) {
        let end = (self.len + src.len()).min(self.buf.len());
        let n = end - self.len;
        self.buf[self.len..end].copy_from_slice(&src[..n]);
        self.len = end;
    }
}

/// Empties `frames` and hands its allocation to a vector of another
/// lifetime (in-place collect: same element layout), so the frame list
/// allocated on the first batch is reused by every later one.
// `filter_map` is the point: it changes the element type's lifetime, which
// `filter` cannot.
#[allow(clippy::unnecessary_filter_map)]
fn recycle<'b>(mut frames: Vec<TunFrame<'_>>) -> Vec<TunFrame<'b>> {
    frames.clear();
    frames.into_iter().filter_map(|_| None).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycle_keeps_the_allocation() {
        let mut backing = vec![0u8; 64];
        let mut frames: Vec<TunFrame<'_>> = Vec::with_capacity(128);
        frames.push(TunFrame {
            buf: &mut backing,
            len: 1,
        });
        let ptr = frames.as_ptr() as usize;
        let recycled: Vec<TunFrame<'static>> = recycle(frames);
        assert!(recycled.is_empty());
        assert_eq!(recycled.capacity(), 128);
        assert_eq!(recycled.as_ptr() as usize, ptr);
    }

    #[test]
    fn frame_grows_only_within_its_buffer() {
        let mut backing = [0u8; 16];
        let mut frame = TunFrame {
            buf: &mut backing,
            len: 4,
        };
        frame.buf_extend_from_slice(b"abcd");
        assert_eq!(&frame.as_ref()[4..], b"abcd");
        frame.buf_resize(10, 7);
        assert_eq!(&frame.as_ref()[8..], &[7, 7]);
        frame.buf_extend_from_slice(&[1; 10]);
        assert_eq!(frame.as_ref().len(), 16, "clamped at capacity");
        frame.buf_resize(2, 0);
        assert_eq!(frame.as_mut().len(), 2);
        assert_eq!(frame.buf_capacity(), 16);
    }

    #[test]
    fn packet_errors_are_told_from_descriptor_errors() {
        assert!(is_packet_error(&io::Error::other("too many GSO segments")));
        assert!(!is_packet_error(&io::Error::from_raw_os_error(
            libc::EAGAIN
        )));
        assert!(is_fatal(&io::Error::from_raw_os_error(libc::EBADFD)));
        assert!(!is_fatal(&io::Error::from_raw_os_error(libc::EINVAL)));
    }

    #[test]
    fn config_defaults() {
        let c = TunConfig::new("phx0");
        assert!(c.offload && c.up && !c.multi_queue);
        assert_eq!((c.mtu, c.ipv4, c.ipv6), (None, None, None));
    }
}
