//! Constants of the I/O layer, each with where it comes from.

/// IP protocol number of ESP (RFC 4303 §2, IANA "Assigned Internet Protocol
/// Numbers"): what a raw ESP socket is opened for.
pub const IPPROTO_ESP: i32 = 50;

/// IP protocol number of AH (RFC 4302).
pub const IPPROTO_AH: i32 = 51;

/// Largest UDP payload that fits one IPv4 datagram: the 16-bit Total Length
/// (RFC 791 §3.1) less a 20-byte IPv4 header and the 8-byte UDP header
/// (RFC 768). Also the cap on one GSO send, whose whole payload must fit one
/// IP datagram before the kernel segments it; IPv6 could go 20 bytes further,
/// one limit for both keeps the planner simple.
pub const MAX_UDP_PAYLOAD: usize = 65_535 - 20 - 8;

/// Most segments one `UDP_SEGMENT` send may carry. Linux's
/// `UDP_MAX_SEGMENTS` was 64 when UDP GSO appeared (4.18); later kernels
/// allow more, 64 works on all of them.
pub const MAX_GSO_SEGMENTS: usize = 64;

/// Size of one receive buffer for a UDP GRO super-datagram: the kernel never
/// coalesces past 64 KiB (one IP datagram's worth).
pub const GRO_BUFFER_LEN: usize = 65_536;

/// Size of the scratch buffer a TUN read lands in when offload is on: the
/// virtio-net header plus the largest GSO super-packet (64 KiB).
pub const TUN_READ_BUFFER_LEN: usize = tun_rs::VIRTIO_NET_HDR_LEN + 65_535;

/// Bytes of `struct virtio_net_hdr` that precede every packet on a TUN
/// descriptor opened with `IFF_VNET_HDR` (Virtio 1.x §5.1.6). A packet sent
/// with offload on needs this much headroom in its buffer.
pub const VIRTIO_NET_HDR_LEN: usize = tun_rs::VIRTIO_NET_HDR_LEN;

/// Default headroom in front of each packet: room for the largest outer
/// header ESP adds in place (IPv6 40 + UDP 8 + ESP 8 + IV 16 = 72 bytes,
/// RFC 4303 §2, RFC 3948 §2.1) and the virtio-net header, rounded up to a
/// cache line.
pub const DEFAULT_HEADROOM: usize = 128;

/// Default socket buffer size asked for with `SO_RCVBUF`/`SO_SNDBUF`
/// (`*FORCE` first, so root is not capped by `net.core.[rw]mem_max`).
pub const DEFAULT_SOCKET_BUFFER: usize = 8 << 20;

/// Most messages one `recvmmsg`/`sendmmsg` call carries by default.
pub const DEFAULT_MMSG_BATCH: usize = 64;

/// `SO_RCVBUF` asked for on a send-only [`IcmpSocket`](crate::icmp::IcmpSocket),
/// whose filter lets nothing in: as small as the kernel allows (it rounds
/// up to `SOCK_MIN_RCVBUF`, socket(7)).
pub const ICMP_RECV_BUFFER: usize = 1;

/// Default for the most packets of one batch handed to a socket's
/// `send_batch` whose refusals are each reported (`take_send_failures`):
/// the room, fixed at open, of the socket's record of send failures.
/// Above the daemon's batches (128 packets).
pub const DEFAULT_MAX_BATCH: usize = 256;

/// The kernel caps the iovec count of one message and the message count of
/// one `sendmmsg` at `UIO_MAXIOV` (1024).
pub const UIO_MAXIOV: usize = 1024;

/// Bytes of an IPv4 header without options (RFC 791 §3.1): the shortest
/// header a raw IPv4 socket can deliver.
pub const IPV4_MIN_HEADER_LEN: usize = 20;

/// TCP/UDP plus IP header bytes assumed when estimating how many segments a
/// TUN super-packet splits into (IPv6 40 + TCP 20): the segment payload is at
/// least the device MTU less this.
pub const TUN_SEGMENT_OVERHEAD: usize = 60;
