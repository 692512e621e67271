//! Why a packet was dropped, the per-packet [`Verdict`], and the per-worker
//! [`Counters`] that count both.
//!
//! Every drop has exactly one reason and every reason has a counter
//! (FreeBSD Fast IPsec, VPP `ipsec_*_error`): no drop is silent to the
//! operator. Counters are plain integers owned by one worker; a reader
//! merges the workers' copies, so the data path needs no atomics.

/// The reason a packet was not forwarded. One variant per reason; the
/// discriminant indexes [`Counters`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DropReason {
    /// The packet ends before a header or length field says it should.
    Truncated = 0,
    /// The outer IP header is not valid (version, header length, checksum, lengths).
    MalformedHeader,
    /// The outer packet carries neither ESP, AH nor UDP-encapsulated ESP.
    NotIpsec,
    /// No SA for the SPI (RFC 4303 §3.4.2: discard and audit).
    UnknownSpi,
    /// The SA exists but the outer destination is not the SA's address.
    WrongDestination,
    /// The outer packet is UDP-encapsulated and the SA is not, or the other way round.
    EncapMismatch,
    /// The sequence number was already received (RFC 4303 §3.4.3).
    Replayed,
    /// The sequence number lies left of the replay window (RFC 4303 §3.4.3).
    TooOld,
    /// The sequence number can never be valid (0, RFC 4303 §3.3.3).
    InvalidSequence,
    /// The ICV or AEAD tag did not verify (RFC 4303 §3.4.4, RFC 4302 §3.4.4).
    AuthFailed,
    /// The padding bytes are not 1, 2, 3, ... (RFC 4303 §2.4).
    BadPadding,
    /// The pad length is longer than the decrypted payload (RFC 4303 §2.5).
    BadPadLength,
    /// The next header is not valid for the SA's mode (tunnel needs 4 or 41).
    BadNextHeader,
    /// The decapsulated inner packet is not a valid IP packet.
    InnerMalformed,
    /// The inner packet does not match the SA's selectors (RFC 4301 §5.2 step 4).
    SelectorMismatch,
    /// The SA's hard lifetime (time, bytes or packets) is over (RFC 4301 §4.4.2.1).
    SaHardExpired,
    /// The outbound sequence number space is used up (RFC 4303 §3.3.3: never cycle).
    SequenceExhausted,
    /// The byte layout does not fit the transform (e.g. CBC data not block-aligned).
    InvalidLayout,
    /// A dummy packet, next header 59 (RFC 4303 §2.6): discarded by design, counted.
    Dummy,
    /// The buffer has too little head- or tailroom for the headers and trailer.
    NoRoom,
    /// The encapsulated packet would exceed the maximum IP packet length.
    TooBig,
    /// The IV source cannot serve the cipher (CBC needs unpredictable IVs, RFC 3602 §2.1).
    IvRefused,
    /// A NAT-keepalive (single 0xFF byte) on the UDP-encapsulation port (RFC 3948 §2.3).
    NattKeepalive,
    /// An IKE message (non-ESP marker) on the UDP-encapsulation port (RFC 3948 §2.2).
    IkeMarker,
    /// An IP fragment carrying ESP or AH: reassembly is not done here (RFC 4303 §3.4.1).
    Fragment,
    /// Outer header marked CE over a Not-ECT inner packet (RFC 6040 §4.2: drop).
    EcnNotEct,
    /// The SA cannot do this (e.g. a dummy packet on a transport-mode SA).
    Unsupported,
    /// The encapsulated packet is larger than the path MTU learned for the
    /// SA (RFC 4301 §8.2.1): the inner sender is told (ICMP) or the packet
    /// fragmented, as the caller decides.
    PathMtuExceeded,
    /// The socket refused the finished packet (no route, no buffer room
    /// after the wait, ...).
    SendFailed,
}

// Every reason has a slot in an SA's per-reason drop counters.
const _: () = assert!(DropReason::COUNT <= phalanx_sa::limits::SA_DROP_SLOTS);

impl DropReason {
    /// Every reason, in discriminant order.
    pub const ALL: [DropReason; 29] = [
        DropReason::Truncated,
        DropReason::MalformedHeader,
        DropReason::NotIpsec,
        DropReason::UnknownSpi,
        DropReason::WrongDestination,
        DropReason::EncapMismatch,
        DropReason::Replayed,
        DropReason::TooOld,
        DropReason::InvalidSequence,
        DropReason::AuthFailed,
        DropReason::BadPadding,
        DropReason::BadPadLength,
        DropReason::BadNextHeader,
        DropReason::InnerMalformed,
        DropReason::SelectorMismatch,
        DropReason::SaHardExpired,
        DropReason::SequenceExhausted,
        DropReason::InvalidLayout,
        DropReason::Dummy,
        DropReason::NoRoom,
        DropReason::TooBig,
        DropReason::IvRefused,
        DropReason::NattKeepalive,
        DropReason::IkeMarker,
        DropReason::Fragment,
        DropReason::EcnNotEct,
        DropReason::Unsupported,
        DropReason::PathMtuExceeded,
        DropReason::SendFailed,
    ];

    /// Number of reasons.
    pub const COUNT: usize = DropReason::ALL.len();

    /// Counts this drop on `drops`, an SA's per-reason counters.
    #[inline]
    pub fn record_on(self, drops: &phalanx_sa::SaDrops) {
        drops.record(self.index());
    }

    /// The counter index of this reason.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A snake_case name, stable, for metrics labels.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::MalformedHeader => "malformed_header",
            DropReason::NotIpsec => "not_ipsec",
            DropReason::UnknownSpi => "unknown_spi",
            DropReason::WrongDestination => "wrong_destination",
            DropReason::EncapMismatch => "encap_mismatch",
            DropReason::Replayed => "replayed",
            DropReason::TooOld => "too_old",
            DropReason::InvalidSequence => "invalid_sequence",
            DropReason::AuthFailed => "auth_failed",
            DropReason::BadPadding => "bad_padding",
            DropReason::BadPadLength => "bad_pad_length",
            DropReason::BadNextHeader => "bad_next_header",
            DropReason::InnerMalformed => "inner_malformed",
            DropReason::SelectorMismatch => "selector_mismatch",
            DropReason::SaHardExpired => "sa_hard_expired",
            DropReason::SequenceExhausted => "sequence_exhausted",
            DropReason::InvalidLayout => "invalid_layout",
            DropReason::Dummy => "dummy",
            DropReason::NoRoom => "no_room",
            DropReason::TooBig => "too_big",
            DropReason::IvRefused => "iv_refused",
            DropReason::NattKeepalive => "natt_keepalive",
            DropReason::IkeMarker => "ike_marker",
            DropReason::Fragment => "fragment",
            DropReason::EcnNotEct => "ecn_not_ect",
            DropReason::Unsupported => "unsupported",
            DropReason::PathMtuExceeded => "path_mtu_exceeded",
            DropReason::SendFailed => "send_failed",
        }
    }

    /// One line for operators.
    pub const fn description(self) -> &'static str {
        match self {
            DropReason::Truncated => "packet shorter than its headers say",
            DropReason::MalformedHeader => "outer IP header malformed",
            DropReason::NotIpsec => "not ESP, AH or UDP-encapsulated ESP",
            DropReason::UnknownSpi => "no SA for the SPI",
            DropReason::WrongDestination => "outer destination is not the SA's address",
            DropReason::EncapMismatch => "UDP encapsulation does not match the SA",
            DropReason::Replayed => "sequence number already received (replay)",
            DropReason::TooOld => "sequence number left of the replay window",
            DropReason::InvalidSequence => "sequence number can never be valid (zero)",
            DropReason::AuthFailed => "ICV or AEAD tag did not verify",
            DropReason::BadPadding => "ESP padding bytes are not 1, 2, 3, ...",
            DropReason::BadPadLength => "ESP pad length longer than the payload",
            DropReason::BadNextHeader => "next header not valid for the SA's mode",
            DropReason::InnerMalformed => "inner packet is not a valid IP packet",
            DropReason::SelectorMismatch => "inner packet outside the SA's selectors",
            DropReason::SaHardExpired => "SA hard lifetime expired",
            DropReason::SequenceExhausted => "outbound sequence numbers exhausted",
            DropReason::InvalidLayout => "layout does not fit the transform (block alignment)",
            DropReason::Dummy => "dummy packet (next header 59), discarded by design",
            DropReason::NoRoom => "not enough headroom or tailroom in the buffer",
            DropReason::TooBig => "encapsulated packet exceeds the maximum IP length",
            DropReason::IvRefused => "IV source not allowed for the cipher",
            DropReason::NattKeepalive => "NAT-keepalive on the ESP-in-UDP port",
            DropReason::IkeMarker => "IKE message (non-ESP marker) on the ESP path",
            DropReason::Fragment => "IP fragment (not reassembled here)",
            DropReason::EcnNotEct => "outer CE mark on a Not-ECT inner packet",
            DropReason::Unsupported => "operation not supported by the SA",
            DropReason::PathMtuExceeded => "encapsulated packet larger than the path MTU",
            DropReason::SendFailed => "the socket refused the packet",
        }
    }
}

impl core::fmt::Display for DropReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// What happens to one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Send it on: outbound to the network, inbound to the host or TUN.
    Forward,
    /// Discard it and count the reason.
    Drop(DropReason),
}

impl Verdict {
    /// True for [`Verdict::Forward`].
    pub fn is_forward(self) -> bool {
        matches!(self, Verdict::Forward)
    }
}

/// Packet and byte counters of one worker. Plain integers: each worker
/// owns its own set and a reader [`merge`](Counters::merge)s them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counters {
    /// Packets forwarded.
    pub forwarded_packets: u64,
    /// Bytes forwarded (as passed to [`record`](Counters::record)).
    pub forwarded_bytes: u64,
    /// Bytes of dropped packets.
    pub dropped_bytes: u64,
    drops: [u64; DropReason::COUNT],
}

impl Default for Counters {
    fn default() -> Self {
        Counters::new()
    }
}

impl Counters {
    /// All zero.
    pub const fn new() -> Self {
        Counters {
            forwarded_packets: 0,
            forwarded_bytes: 0,
            dropped_bytes: 0,
            drops: [0; DropReason::COUNT],
        }
    }

    /// Counts one packet of `bytes` bytes with its verdict.
    pub fn record(&mut self, verdict: Verdict, bytes: usize) {
        match verdict {
            Verdict::Forward => {
                self.forwarded_packets += 1;
                self.forwarded_bytes += bytes as u64;
            }
            Verdict::Drop(reason) => {
                self.drops[reason.index()] += 1;
                self.dropped_bytes += bytes as u64;
            }
        }
    }

    /// Packets dropped for `reason`.
    pub fn drops(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()]
    }

    /// Packets dropped for any reason.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Adds another worker's counters to these.
    pub fn merge(&mut self, other: &Counters) {
        self.forwarded_packets += other.forwarded_packets;
        self.forwarded_bytes += other.forwarded_bytes;
        self.dropped_bytes += other.dropped_bytes;
        for (mine, theirs) in self.drops.iter_mut().zip(other.drops.iter()) {
            *mine += theirs;
        }
    }

    /// Every reason with its count, in discriminant order (for metrics).
    pub fn iter_drops(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(move |&r| (r, self.drops[r.index()]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_discriminant_order_and_complete() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i, "{r:?}");
        }
        assert_eq!(DropReason::COUNT, DropReason::SendFailed as usize + 1);
    }

    #[test]
    fn names_are_unique_snake_case() {
        let mut names: Vec<&str> = DropReason::ALL.iter().map(|r| r.name()).collect();
        for n in &names {
            assert!(n.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{n}");
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
        for r in DropReason::ALL {
            assert!(!r.description().is_empty());
            assert!(!r.description().contains('\n'));
        }
    }

    #[test]
    fn record_and_merge() {
        let mut a = Counters::new();
        a.record(Verdict::Forward, 100);
        a.record(Verdict::Drop(DropReason::Replayed), 60);
        a.record(Verdict::Drop(DropReason::Replayed), 40);
        let mut b = Counters::new();
        b.record(Verdict::Drop(DropReason::Dummy), 10);
        b.record(Verdict::Forward, 1);
        a.merge(&b);
        assert_eq!(a.forwarded_packets, 2);
        assert_eq!(a.forwarded_bytes, 101);
        assert_eq!(a.dropped_bytes, 110);
        assert_eq!(a.drops(DropReason::Replayed), 2);
        assert_eq!(a.drops(DropReason::Dummy), 1);
        assert_eq!(a.drops(DropReason::AuthFailed), 0);
        assert_eq!(a.total_drops(), 3);
        assert_eq!(a.iter_drops().filter(|&(_, n)| n > 0).count(), 2);
    }
}
