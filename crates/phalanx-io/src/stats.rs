//! Counters kept by each device; every packet the I/O layer drops is
//! counted in one of them.

/// Counters of a [`UdpSocket`](crate::udp::UdpSocket) or
/// [`RawEspSocket`](crate::raw::RawEspSocket). Monotonic since open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SocketStats {
    /// `recvmmsg` calls that returned at least one message.
    pub recv_calls: u64,
    /// Packets handed to the caller (after GRO splitting).
    pub packets_received: u64,
    /// Received messages that the kernel had coalesced (GRO, more than one
    /// segment).
    pub coalesced_received: u64,
    /// Datagrams the kernel dropped before this socket could read them,
    /// for lack of receive-buffer room: the latest value of the socket's
    /// cumulative count the kernel reported (`SO_RXQ_OVFL`, socket(7)).
    /// It travels with received datagrams, so it only updates when one is
    /// received (and only once the count is not 0): drops after the last
    /// datagram read show with the next one.
    pub kernel_rx_dropped: u64,
    /// Received messages dropped: truncated (`MSG_TRUNC`), a segment larger
    /// than the batch's buffers, or (raw IPv4) a malformed IP header.
    pub recv_dropped: u64,
    /// Receive calls that returned, instead of data, the socket's pending
    /// error an ICMP error had set (`ECONNREFUSED`, `EMSGSIZE`, ...; see
    /// [`errqueue`](crate::errqueue)): `recv_batch` returned `Ok(0)`, the
    /// error itself is on the error queue.
    pub recv_pending_errors: u64,
    /// `sendmmsg` calls that sent at least one message.
    pub send_calls: u64,
    /// Packets the kernel accepted.
    pub packets_sent: u64,
    /// Messages sent with `UDP_SEGMENT` (each carries several packets).
    pub gso_messages: u64,
    /// Packets dropped because the kernel refused their message (too big,
    /// no route, filtered, ...): `send_too_big + send_other_errors`. Each
    /// refusal is also reported, with its packets and `errno`, by
    /// `take_send_failures`.
    pub send_dropped: u64,
    /// Packets of `send_dropped` refused with `EMSGSIZE`: larger than the
    /// path MTU the kernel knows for their route (path-MTU discovery is
    /// "do": nothing is fragmented locally), or than 64 KiB.
    pub send_too_big: u64,
    /// Packets of `send_dropped` refused for any other reason (`errno`
    /// other than `EMSGSIZE`).
    pub send_other_errors: u64,
    /// Packets of `send_dropped` whose refusal `take_send_failures` does
    /// not report because its record was full (a batch of more packets
    /// than the socket's `max_batch`, refused in more runs than that).
    pub send_failures_unrecorded: u64,
    /// Times the kernel refused GSO itself and GSO was turned off for good:
    /// `EIO`, or `EINVAL` / `EMSGSIZE` for a message whose datagrams of
    /// the segment size then went out alone (a segment size above the
    /// path MTU leaves GSO on).
    pub gso_refusals: u64,
}

/// Counters of a [`TunDevice`](crate::tun::TunDevice) queue. Monotonic since
/// open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TunStats {
    /// `read` calls that returned a packet.
    pub reads: u64,
    /// Packets handed to the caller (after GSO splitting).
    pub packets_received: u64,
    /// Reads that returned a GSO super-packet (split into several packets).
    pub super_packets: u64,
    /// Reads dropped: malformed virtio header or packet, or more segments
    /// than the batch had free buffers.
    pub read_dropped: u64,
    /// Packets handed to the kernel (before GRO coalescing: one write may
    /// carry several).
    pub packets_sent: u64,
    /// Packets not written: too little headroom for the virtio header, empty.
    pub send_dropped: u64,
    /// `send_batch` calls in which at least one write failed; tun-rs reports
    /// only the last error of a batch, so this counts batches, not packets.
    pub write_errors: u64,
}
