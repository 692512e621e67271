//! Whole Ethernet frames of one interface through an `AF_PACKET` socket
//! (packet(7)): what a cluster node uses to see every frame of its shared
//! segment, including those for the cluster's virtual MAC that its own
//! stack ignores, and to send ARP replies and frames from that MAC.
//!
//! Receive: a `TPACKET_V3` ring (`PACKET_RX_RING`, mapped into the process)
//! of `block_count` blocks of `block_size` bytes. The kernel fills a block
//! with frames and hands it over when it is full or `block_timeout` after
//! its first frame; [`PacketSocket::recv_batch`] walks every block handed
//! over, calls back with a slice of each frame *inside the ring* (no copy)
//! and returns the block to the kernel. It never blocks: poll
//! [`PacketSocket::as_fd`] for readability (a block is ready) first.
//!
//! What the ring delivers (packet(7), `SOCK_RAW`, `ETH_P_ALL`):
//! - every frame of the bound interface, from the Ethernet destination on
//!   (no FCS), with its [`PacketType`]: to us, broadcast, multicast, or to
//!   another host (the last only reaches a promiscuous interface, or one
//!   that does not filter by address, like veth);
//! - not the frames this host sends (`PACKET_IGNORE_OUTGOING`, unless
//!   [`PacketSocketConfig::ignore_outgoing`] is off), so a node never
//!   reads its own transmissions back;
//! - the outer 802.1Q tag is removed by the kernel on receive and reported
//!   in [`FrameMeta::vlan`];
//! - frames the sender's kernel offloaded arrive as it built them: a TCP
//!   super-frame longer than the MTU ([`FrameMeta::gso`]), a transport
//!   checksum not yet filled in ([`FrameMeta::checksum_pending`]). A node
//!   that forwards such a frame must fill the checksum or segment it; test
//!   topologies switch the offloads off on the hosts that send (`ethtool -K
//!   <dev> tx off tso off gso off`).
//!
//! Send: [`PacketSocket::send`] and [`PacketSocket::send_batch`]
//! (`sendmmsg`) write whole frames, Ethernet header included, to the bound
//! interface.
//!
//! The ring's memory mapping and block hand-off are the only `unsafe` here,
//! in `sys::packet`; this module reads frames out of a block through
//! bounds-checked slices, so a malformed ring descriptor is counted
//! ([`PacketStats::malformed_blocks`]), never trusted.

use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use socket2::{Domain, Socket, Type};

use crate::sys::packet::{
    bind_link, packet_statistics, send_frames, set_option, FrameScratch, RxRing, BLOCK_DESC_LEN,
};

/// Default bytes per ring block: room for 128 full-size frames, and for a
/// 64 KiB GSO super-frame.
pub const DEFAULT_BLOCK_SIZE: u32 = 256 << 10;
/// Default number of ring blocks: 16 MiB of ring, about 10 ms of a
/// 10 Gbit/s link.
pub const DEFAULT_BLOCK_COUNT: u32 = 64;
/// Default `tp_frame_size`: `TPACKET_V3` packs frames back to back in a
/// block, so this only has to hold the headers and a standard frame.
pub const DEFAULT_FRAME_SIZE: u32 = 2048;
/// Default block retire timeout: the longest a frame waits in a block that
/// is not full.
pub const DEFAULT_BLOCK_TIMEOUT: Duration = Duration::from_millis(2);
/// Most frames per `sendmmsg` of [`PacketSocket::send_batch`]. This socket
/// sends little (ARP replies and announcements), so a small fixed batch
/// on the stack is enough.
pub const SEND_BATCH: usize = 64;

/// `ETH_P_ALL` (linux/if_ether.h): every protocol.
const ETH_P_ALL: u16 = libc::ETH_P_ALL as u16;
/// `TPACKET_V3` of `enum tpacket_versions` (linux/if_packet.h).
const TPACKET_V3: libc::c_int = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
/// `TP_STATUS_GSO_TCP` (linux/if_packet.h, Linux 5.1), not in `libc`.
const TP_STATUS_GSO_TCP: u32 = 1 << 8;
/// Page size the ring's block size must be a multiple of. 4 KiB on every
/// architecture this gateway targets; the kernel refuses anything else
/// with `EINVAL` anyway.
const PAGE_SIZE: u32 = 4096;

/// How to open a [`PacketSocket`]. Start from [`PacketSocketConfig::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PacketSocketConfig {
    /// The interface to bind, by name (`eth0`).
    pub interface: String,
    /// Put the interface in promiscuous mode while the socket is open
    /// (`PACKET_MR_PROMISC`, counted by the kernel and undone on close),
    /// so frames to the cluster's virtual MAC are delivered (default off).
    pub promiscuous: bool,
    /// Skip the frames this host sends (`PACKET_IGNORE_OUTGOING`, Linux
    /// 4.20; default on).
    pub ignore_outgoing: bool,
    /// Bytes per ring block: a multiple of 4096.
    pub block_size: u32,
    /// Number of ring blocks.
    pub block_count: u32,
    /// `tp_frame_size`: a multiple of 16, at least 80 (the ring's frame
    /// headers, `TPACKET3_HDRLEN`), at most `block_size`. `TPACKET_V3`
    /// packs frames back to back, so this does not bound a frame's length;
    /// the block size does.
    pub frame_size: u32,
    /// Longest a frame waits in a block that is not full (whole
    /// milliseconds, at least 1).
    pub block_timeout: Duration,
}

impl PacketSocketConfig {
    /// Defaults: not promiscuous, own sends ignored, 64 blocks of 256 KiB,
    /// 2 ms block timeout.
    pub fn new(interface: impl Into<String>) -> Self {
        Self {
            interface: interface.into(),
            promiscuous: false,
            ignore_outgoing: true,
            block_size: DEFAULT_BLOCK_SIZE,
            block_count: DEFAULT_BLOCK_COUNT,
            frame_size: DEFAULT_FRAME_SIZE,
            block_timeout: DEFAULT_BLOCK_TIMEOUT,
        }
    }

    /// The `PACKET_RX_RING` request, or why the kernel would refuse it
    /// (checked here to say which field is wrong).
    fn ring_request(&self) -> io::Result<libc::tpacket_req3> {
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_owned());
        if self.block_size == 0 || self.block_size % PAGE_SIZE != 0 {
            return Err(invalid(
                "packet ring: block_size must be a multiple of 4096",
            ));
        }
        let min_frame = libc::TPACKET3_HDRLEN as u32;
        let aligned = self.frame_size % libc::TPACKET_ALIGNMENT as u32 == 0;
        if !aligned || self.frame_size < min_frame || self.frame_size > self.block_size {
            return Err(invalid(
                "packet ring: frame_size must be a multiple of 16 between 80 and block_size",
            ));
        }
        let frames_per_block = self.block_size / self.frame_size;
        let frame_count = frames_per_block
            .checked_mul(self.block_count)
            .filter(|_| self.block_count > 0)
            .ok_or_else(|| invalid("packet ring: block_count must be 1 or more, and not huge"))?;
        let timeout_ms = u32::try_from(self.block_timeout.as_millis())
            .ok()
            .filter(|&ms| ms > 0)
            .ok_or_else(|| invalid("packet ring: block_timeout must be 1 ms or more"))?;
        Ok(libc::tpacket_req3 {
            tp_block_size: self.block_size,
            tp_block_nr: self.block_count,
            tp_frame_size: self.frame_size,
            tp_frame_nr: frame_count,
            tp_retire_blk_tov: timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        })
    }
}

/// `sll_pkttype` (linux/if_packet.h): who a received frame was for, as
/// the kernel classified it by destination address.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PacketType(pub u8);

impl PacketType {
    /// To this host's MAC address (`PACKET_HOST`).
    pub const HOST: PacketType = PacketType(libc::PACKET_HOST);
    /// To the broadcast address (`PACKET_BROADCAST`).
    pub const BROADCAST: PacketType = PacketType(libc::PACKET_BROADCAST);
    /// To a multicast address (`PACKET_MULTICAST`).
    pub const MULTICAST: PacketType = PacketType(libc::PACKET_MULTICAST);
    /// To another host's unicast address, the cluster's virtual MAC
    /// included (`PACKET_OTHERHOST`).
    pub const OTHER_HOST: PacketType = PacketType(libc::PACKET_OTHERHOST);
    /// Sent by this host (`PACKET_OUTGOING`; only seen with
    /// [`PacketSocketConfig::ignore_outgoing`] off).
    pub const OUTGOING: PacketType = PacketType(libc::PACKET_OUTGOING);
    /// Looped back (`PACKET_LOOPBACK`).
    pub const LOOPBACK: PacketType = PacketType(libc::PACKET_LOOPBACK);

    /// The kernel's name for this value, if it is one we know.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Self::HOST => "HOST",
            Self::BROADCAST => "BROADCAST",
            Self::MULTICAST => "MULTICAST",
            Self::OTHER_HOST => "OTHER_HOST",
            Self::OUTGOING => "OUTGOING",
            Self::LOOPBACK => "LOOPBACK",
            _ => return None,
        })
    }
}

impl std::fmt::Debug for PacketType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "PacketType({})", self.0),
        }
    }
}

/// What the ring says about one received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameMeta {
    /// Who the frame was for.
    pub packet_type: PacketType,
    /// Length of the frame as received (`tp_len`); the slice handed out
    /// is shorter when [`Self::truncated`].
    pub len: u32,
    /// The ring kept only the first octets of the frame (`tp_snaplen <
    /// tp_len`): it did not fit a block. Counted in
    /// [`PacketStats::truncated`].
    pub truncated: bool,
    /// The TCI of the 802.1Q tag the kernel took off the frame
    /// (`TP_STATUS_VLAN_VALID`); read it with
    /// `phalanx_wire::VlanTag::from_tci`.
    pub vlan: Option<u16>,
    /// The sender offloaded the transport checksum and it is not filled
    /// in (`TP_STATUS_CSUMNOTREADY`).
    pub checksum_pending: bool,
    /// A TCP segmentation-offload super-frame (`TP_STATUS_GSO_TCP`),
    /// possibly longer than the MTU.
    pub gso: bool,
    /// When the kernel received it (`tp_sec`, `tp_nsec`; `CLOCK_REALTIME`
    /// since the Unix epoch).
    pub timestamp: Duration,
}

/// Counters of a [`PacketSocket`], monotonic since open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketStats {
    /// Frames handed to the `recv_batch` callback.
    pub frames_received: u64,
    /// Ring blocks walked and given back.
    pub blocks_received: u64,
    /// Frames handed out cut short ([`FrameMeta::truncated`]).
    pub truncated: u64,
    /// Blocks whose descriptors pointed outside the block; their remaining
    /// frames are skipped. Never expected from a correct kernel.
    pub malformed_blocks: u64,
    /// Frames the kernel accepted for this socket, drops included
    /// (`tp_packets` of `PACKET_STATISTICS`).
    pub kernel_packets: u64,
    /// Frames the kernel dropped because the ring was full (`tp_drops`).
    pub ring_drops: u64,
    /// Times the ring filled up and the kernel froze it until a block came
    /// back (`tp_freeze_q_cnt`).
    pub ring_freezes: u64,
    /// Frames the kernel accepted for sending.
    pub frames_sent: u64,
    /// Frames not sent: the kernel refused them (too short, too long,
    /// interface down, ...).
    pub send_errors: u64,
}

/// An `AF_PACKET` socket bound to one interface, with a `TPACKET_V3`
/// receive ring. See the module doc.
pub struct PacketSocket {
    // Field order is drop order: the ring must be unmapped before the
    // socket closes (the kernel complains about a busy mapping otherwise).
    ring: RxRing,
    socket: Socket,
    interface: String,
    ifindex: u32,
    promiscuous: bool,
    scratch: FrameScratch,
    stats: PacketStats,
    frames_sent: AtomicU64,
    send_errors: AtomicU64,
}

impl std::fmt::Debug for PacketSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketSocket")
            .field("interface", &self.interface)
            .field("ifindex", &self.ifindex)
            .field("promiscuous", &self.promiscuous)
            .field("blocks", &self.ring.block_count())
            .finish()
    }
}

impl PacketSocket {
    /// Opens the socket, sets up and maps the ring, binds it to the
    /// interface and, if asked, joins promiscuous mode. Needs `CAP_NET_RAW`.
    /// An unknown interface is [`io::ErrorKind::NotFound`]; a ring the
    /// kernel would refuse is [`io::ErrorKind::InvalidInput`].
    pub fn open(config: &PacketSocketConfig) -> io::Result<Self> {
        let request = config.ring_request()?;
        let ifindex = nix::net::if_::if_nametoindex(config.interface.as_str()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("interface {:?}: {e}", config.interface),
            )
        })?;
        // Protocol 0: nothing is queued until `bind` names the interface,
        // so no frame of another interface ever reaches the ring.
        let socket = Socket::new(Domain::PACKET, Type::RAW, None)?;
        let fd = socket.as_fd();
        set_option(fd, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V3)?;
        if config.ignore_outgoing {
            let one: libc::c_int = 1;
            set_option(fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &one)?;
        }
        set_option(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &request)?;
        let ring = RxRing::map(fd, config.block_size as usize, config.block_count as usize)?;
        bind_link(fd, ifindex, ETH_P_ALL)?;
        if config.promiscuous {
            set_option(
                fd,
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                &promisc(ifindex),
            )?;
        }
        Ok(Self {
            ring,
            socket,
            interface: config.interface.clone(),
            ifindex,
            promiscuous: config.promiscuous,
            scratch: FrameScratch::new(SEND_BATCH),
            stats: PacketStats::default(),
            frames_sent: AtomicU64::new(0),
            send_errors: AtomicU64::new(0),
        })
    }

    /// The bound interface's name.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The bound interface's index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Calls `f` with every frame of every block the kernel has handed
    /// over (at most one lap of the ring per call), in arrival order, each
    /// frame a slice into the ring valid for that call only; gives the
    /// blocks back. Never blocks. Returns the number of frames.
    pub fn recv_batch(&mut self, mut f: impl FnMut(&[u8], FrameMeta)) -> usize {
        let mut frames = 0;
        for _ in 0..self.ring.block_count() {
            let Some(block) = self.ring.next_ready() else {
                break;
            };
            let walk = walk_block(
                block.num_packets(),
                block.first_offset(),
                block.body(),
                &mut f,
            );
            drop(block);
            self.stats.blocks_received += 1;
            self.stats.frames_received += walk.frames;
            self.stats.truncated += walk.truncated;
            self.stats.malformed_blocks += u64::from(walk.malformed);
            frames += walk.frames as usize;
        }
        frames
    }

    /// Sends one whole frame (Ethernet header first) on the interface.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        match self.socket.send(frame) {
            Ok(_) => {
                self.frames_sent.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                self.send_errors.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// Sends frames, up to [`SEND_BATCH`] per `sendmmsg`. A frame the
    /// kernel refuses (too short or long, interface down, ...) is counted
    /// in [`PacketStats::send_errors`] and skipped. Stops at an error of
    /// the socket itself or a full queue (`EAGAIN`, `ENOBUFS`): that error
    /// is returned if nothing was sent. Returns how many frames were sent.
    pub fn send_batch<'a>(
        &mut self,
        frames: impl IntoIterator<Item = &'a [u8]>,
    ) -> io::Result<usize> {
        let mut chunk: [&[u8]; SEND_BATCH] = [&[]; SEND_BATCH];
        let mut frames = frames.into_iter();
        let mut sent = 0;
        let mut failure = None;
        while failure.is_none() {
            // `zip` asks `chunk` first, so no frame is taken without a slot.
            let n = chunk
                .iter_mut()
                .zip(frames.by_ref())
                .map(|(slot, frame)| *slot = frame)
                .count();
            if n == 0 {
                break;
            }
            let (k, error) = self.send_chunk(&chunk[..n]);
            sent += k;
            failure = error;
        }
        self.frames_sent.fetch_add(sent as u64, Ordering::Relaxed);
        match failure {
            Some(e) if sent == 0 => Err(e),
            _ => Ok(sent),
        }
    }

    /// Sends `chunk`, skipping the frames the kernel refuses; returns how
    /// many were sent and the socket error that stopped it, if any.
    fn send_chunk(&mut self, chunk: &[&[u8]]) -> (usize, Option<io::Error>) {
        let (mut at, mut sent) = (0, 0);
        while at < chunk.len() {
            match send_frames(self.socket.as_fd(), &mut self.scratch, &chunk[at..]) {
                Ok(n) => {
                    sent += n;
                    at += n.max(1);
                }
                Err(e) if is_socket_error(&e) => return (sent, Some(e)),
                Err(_) => {
                    // sendmmsg reports the first message's error: skip it.
                    self.send_errors.fetch_add(1, Ordering::Relaxed);
                    at += 1;
                }
            }
        }
        (sent, None)
    }

    /// Counters since open. Reads (and folds in) the kernel's ring
    /// statistics, which the kernel resets on every read.
    pub fn stats(&mut self) -> io::Result<PacketStats> {
        let kernel = packet_statistics(self.socket.as_fd())?;
        self.stats.kernel_packets += u64::from(kernel.tp_packets);
        self.stats.ring_drops += u64::from(kernel.tp_drops);
        self.stats.ring_freezes += u64::from(kernel.tp_freeze_q_cnt);
        Ok(PacketStats {
            frames_sent: self.frames_sent.load(Ordering::Relaxed),
            send_errors: self.send_errors.load(Ordering::Relaxed),
            ..self.stats
        })
    }
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

impl Drop for PacketSocket {
    fn drop(&mut self) {
        if self.promiscuous {
            // Closing the socket drops the membership too (packet(7));
            // leaving explicitly makes the order plain. Best effort: the
            // close below undoes it anyway.
            let mreq = promisc(self.ifindex);
            let fd = self.socket.as_fd();
            let _ = set_option(fd, libc::SOL_PACKET, libc::PACKET_DROP_MEMBERSHIP, &mreq);
        }
    }
}

/// A `PACKET_MR_PROMISC` membership of interface `ifindex`.
fn promisc(ifindex: u32) -> libc::packet_mreq {
    libc::packet_mreq {
        // `bind_link` already refused an index that does not fit.
        mr_ifindex: libc::c_int::try_from(ifindex).unwrap_or(0),
        mr_type: libc::PACKET_MR_PROMISC as libc::c_ushort,
        mr_alen: 0,
        mr_address: [0; 8],
    }
}

/// The socket is unusable, or the queue is full: stop sending this batch.
fn is_socket_error(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::WouldBlock
        || matches!(
            err.raw_os_error(),
            Some(libc::EBADF | libc::ENOTSOCK | libc::ENOBUFS)
        )
}

/// Byte offsets inside one ring frame: `struct tpacket3_hdr`, then at
/// `TPACKET_ALIGN(sizeof(struct tpacket3_hdr))` a `struct sockaddr_ll`.
mod frame {
    use super::{offset_of, size_of};

    pub(super) const NEXT_OFFSET: usize = offset_of!(libc::tpacket3_hdr, tp_next_offset);
    pub(super) const SEC: usize = offset_of!(libc::tpacket3_hdr, tp_sec);
    pub(super) const NSEC: usize = offset_of!(libc::tpacket3_hdr, tp_nsec);
    pub(super) const SNAPLEN: usize = offset_of!(libc::tpacket3_hdr, tp_snaplen);
    pub(super) const LEN: usize = offset_of!(libc::tpacket3_hdr, tp_len);
    pub(super) const STATUS: usize = offset_of!(libc::tpacket3_hdr, tp_status);
    pub(super) const MAC: usize = offset_of!(libc::tpacket3_hdr, tp_mac);
    pub(super) const VLAN_TCI: usize =
        offset_of!(libc::tpacket3_hdr, hv1) + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tci);
    /// `TPACKET_ALIGN(sizeof(struct tpacket3_hdr))`, where the kernel puts
    /// the `sockaddr_ll`.
    const SLL: usize = size_of::<libc::tpacket3_hdr>().next_multiple_of(libc::TPACKET_ALIGNMENT);
    pub(super) const PKTTYPE: usize = SLL + offset_of!(libc::sockaddr_ll, sll_pkttype);
    /// Bytes a frame's headers occupy before `tp_mac` can point.
    pub(super) const HEADERS_LEN: usize = libc::TPACKET3_HDRLEN;
}

/// What walking one block found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct BlockWalk {
    frames: u64,
    truncated: u64,
    /// A frame offset or length pointed outside the block.
    malformed: bool,
}

/// Calls `f` for each of the `num_packets` frames of a block, the first
/// at `first_offset` from the block start, each at `tp_next_offset` from
/// the previous. `body` is the block after its descriptor. Every offset and
/// length the kernel wrote is checked against `body`; the walk stops at the
/// first that does not fit.
fn walk_block(
    num_packets: u32,
    first_offset: u32,
    body: &[u8],
    f: &mut impl FnMut(&[u8], FrameMeta),
) -> BlockWalk {
    let mut walk = BlockWalk::default();
    let mut at = (first_offset as usize).checked_sub(BLOCK_DESC_LEN);
    for _ in 0..num_packets {
        let Some((data, meta, next)) = at.and_then(|at| read_frame(body, at)) else {
            walk.malformed = true;
            break;
        };
        walk.frames += 1;
        walk.truncated += u64::from(meta.truncated);
        f(data, meta);
        at = at.and_then(|at| at.checked_add(next)).filter(|_| next > 0);
    }
    walk
}

/// The frame whose `tpacket3_hdr` is at `at` in `body`: its data, its
/// meta and `tp_next_offset`. `None` if anything lies outside `body`.
fn read_frame(body: &[u8], at: usize) -> Option<(&[u8], FrameMeta, usize)> {
    let hdr = body.get(at..at.checked_add(frame::HEADERS_LEN)?)?;
    let u32_at = |i: usize| u32::from_ne_bytes([hdr[i], hdr[i + 1], hdr[i + 2], hdr[i + 3]]);
    let mac = usize::from(u16::from_ne_bytes([hdr[frame::MAC], hdr[frame::MAC + 1]]));
    let snaplen = u32_at(frame::SNAPLEN);
    let start = at.checked_add(mac)?;
    let data = body.get(start..start.checked_add(snaplen as usize)?)?;
    let len = u32_at(frame::LEN);
    let status = u32_at(frame::STATUS);
    let meta = FrameMeta {
        packet_type: PacketType(hdr[frame::PKTTYPE]),
        len,
        truncated: snaplen < len,
        vlan: (status & libc::TP_STATUS_VLAN_VALID != 0).then(|| u32_at(frame::VLAN_TCI) as u16),
        checksum_pending: status & libc::TP_STATUS_CSUMNOTREADY != 0,
        gso: status & TP_STATUS_GSO_TCP != 0,
        timestamp: Duration::new(
            u64::from(u32_at(frame::SEC)),
            u32_at(frame::NSEC) % 1_000_000_000,
        ),
    };
    Some((data, meta, u32_at(frame::NEXT_OFFSET) as usize))
}

#[cfg(test)]
mod tests;
