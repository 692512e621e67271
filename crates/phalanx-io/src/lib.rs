//! The gateway's only I/O: a TUN device on the clear side, a UDP socket
//! (ESP-in-UDP, RFC 3948) and a raw IP socket (plain ESP, protocol 50) on the
//! protected side, and a `poll(2)` helper so a worker thread can block on all
//! of them plus a wake-up event.
//!
//! Contract:
//! - **Batch first.** Every data-path call moves a [`PacketBatch`]: N
//!   caller-owned, fixed-size buffers that are reused across calls. Receiving
//!   appends to the batch's free slots; nothing on the packet path allocates.
//! - **One packet per buffer, with room around it.** Whatever the kernel
//!   coalesced (a TSO/USO super-packet from the TUN device, a UDP GRO
//!   super-datagram) is split into individual IP packets / datagrams, each in
//!   its own buffer behind a headroom, so the ESP layer can prepend outer
//!   headers and append its trailer in place. Sending coalesces again where
//!   the kernel allows it (TUN GRO through the virtio header, UDP GSO with
//!   `UDP_SEGMENT`).
//! - **The outer header's TOS octet travels with each packet**
//!   ([`PacketMeta::tos`]): read on receive (`IP_RECVTOS` /
//!   `IPV6_RECVTCLASS`, or the raw IPv4 header), written on send (`IP_TOS`
//!   / `IPV6_TCLASS`), so ECN marks (RFC 6040) and DSCP (RFC 4301
//!   §5.1.2.1) survive the socket API; GSO never merges packets of
//!   different TOS.
//! - **Every refused send is told, with its reason.** The sockets run
//!   path-MTU discovery "do" (nothing is fragmented locally) with
//!   extended error reporting ([`errqueue`]): the packets a send refused
//!   are reported by index and errno ([`SendFailure`]), and the local and
//!   ICMP errors about our packets, path MTU included, are read off the
//!   error queue ([`SocketError`]).
//! - **Knows no protocol.** Nothing here parses ESP or IKE. The only header
//!   this crate reads is the IPv4 header that raw IPv4 sockets deliver, and
//!   only to strip it (see [`raw`]).
//! - **Nothing a peer sends panics.** Truncated, malformed or unsplittable
//!   input is dropped and counted in the device's stats ([`TunStats`],
//!   [`SocketStats`]); only errors of the descriptor itself are returned.
//! - **`unsafe` lives in one module** (`sys`: `recvmmsg`/`sendmmsg`, control
//!   messages, socket addresses, `sys::packet`: the `AF_PACKET` ring's
//!   mapping, and `sys::bpf`: the `bpf(2)` system call and mmapable maps),
//!   each block with a `SAFETY:` comment.
//!
//! Cluster nodes also read whole Ethernet frames ([`packet`]: an
//! `AF_PACKET` socket with a mapped `TPACKET_V3` ring, handing out frames
//! in place through a callback rather than in a [`PacketBatch`]), and can
//! filter them in the kernel with an eBPF socket filter ([`bpf`]: maps,
//! program loading and a small assembler; the program itself is the
//! caller's).
//!
//! Linux only. The TUN device is driven through `tun-rs`, which owns the
//! virtio-net header handling (GSO split on read, GRO coalescing on write).
#![deny(unsafe_code)]
// STYLE.md: `unwrap()` is fine in tests, where a panic is the failure report.
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod batch;
pub mod bpf;
mod datagram;
pub mod errqueue;
pub mod ethtool;
pub mod icmp;
pub mod kernel_stats;
pub mod limits;
pub mod packet;
pub mod path_mtu;
mod plan;
pub mod poll;
pub mod raw;
pub mod sched;
mod stats;
#[allow(unsafe_code)]
mod sys;
#[doc(hidden)]
pub mod test_support;
pub mod tun;
pub mod udp;

pub use batch::{BoundsError, PacketBatch, PacketMeta};
pub use datagram::SendFailure;
pub use errqueue::{ErrorOrigin, SocketError};
pub use stats::{SocketStats, TunStats};
