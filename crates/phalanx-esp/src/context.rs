//! What outbound processing needs from its caller besides the SA and the
//! packet: the time and an IV source (the crate is sans-IO, so it never
//! reads a clock or draws randomness itself), and where to report
//! soft-lifetime events.

use std::time::Instant;

/// Where explicit IVs come from.
pub enum IvSource<'a> {
    /// The 64-bit sequence number, big-endian, as the 8-byte IV of AES-GCM,
    /// AES-GMAC and ChaCha20-Poly1305: unique per key, which is all these
    /// modes require (RFC 4106 §3.1, RFC 4543 §3.1, RFC 7634 §2). Refused
    /// for AES-CBC, whose IV must be unpredictable (RFC 3602 §2.1).
    Sequence,
    /// Fills the IV with unpredictable bytes (a CSPRNG owned by the caller).
    /// Valid for every cipher.
    Random(&'a mut dyn FnMut(&mut [u8])),
    /// These exact bytes (tests and interop vectors); the length must equal
    /// the cipher's IV length.
    Fixed(&'a [u8]),
    /// A cluster node's share of the 8-byte IV space of the combined
    /// modes: the node id in the top 16 bits, the low 48 bits of the
    /// sequence number below. RFC 4106 §3.1 asks only that the IV be
    /// unique per key; with the space partitioned by node it stays unique
    /// across the cluster even if two nodes wrongly send the same sequence
    /// number. Sequence numbers from 2^48 on are refused (`iv_refused`)
    /// rather than wrapped into another packet's IV. Refused for AES-CBC,
    /// like [`IvSource::Sequence`].
    NodePartitioned(u16),
}

impl core::fmt::Debug for IvSource<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            IvSource::Sequence => f.write_str("Sequence"),
            IvSource::Random(_) => f.write_str("Random"),
            IvSource::Fixed(iv) => f.debug_tuple("Fixed").field(&iv.len()).finish(),
            IvSource::NodePartitioned(node) => {
                f.debug_tuple("NodePartitioned").field(node).finish()
            }
        }
    }
}

impl IvSource<'_> {
    /// True when this source can serve IVs of `iv_len` bytes: not
    /// [`IvSource::Sequence`] for a 16-byte AES-CBC IV, not a
    /// [`IvSource::Fixed`] IV of another length. Every source serves the
    /// empty IV of NULL encryption.
    pub(crate) fn serves(&self, iv_len: usize) -> bool {
        match self {
            _ if iv_len == 0 => true,
            IvSource::Sequence | IvSource::NodePartitioned(_) => iv_len == SEQUENCE_IV_LEN,
            IvSource::Random(_) => true,
            IvSource::Fixed(bytes) => bytes.len() == iv_len,
        }
    }

    /// Writes the IV for sequence number `seq` into `iv`. The caller
    /// checked [`serves`](Self::serves) for `iv.len()`; a source that does
    /// not serve it leaves `iv` as it is.
    pub(crate) fn fill(&mut self, seq: u64, iv: &mut [u8]) {
        if iv.is_empty() {
            return;
        }
        match self {
            IvSource::Sequence if iv.len() == SEQUENCE_IV_LEN => {
                iv.copy_from_slice(&seq.to_be_bytes());
            }
            IvSource::NodePartitioned(node) if iv.len() == SEQUENCE_IV_LEN => {
                let value = (u64::from(*node) << PARTITION_SHIFT) | (seq & PARTITION_SEQ_MASK);
                iv.copy_from_slice(&value.to_be_bytes());
            }
            IvSource::Random(fill) => fill(iv),
            IvSource::Fixed(bytes) if bytes.len() == iv.len() => iv.copy_from_slice(bytes),
            _ => {}
        }
    }

    /// True when this source can give sequence number `seq` an IV of its
    /// own: a node-partitioned IV holds only 48 bits of it.
    pub(crate) fn covers(&self, seq: u64) -> bool {
        match self {
            IvSource::NodePartitioned(_) => seq <= PARTITION_SEQ_MASK,
            _ => true,
        }
    }
}

/// Length of the sequence-number IV: the explicit IV of the combined modes.
const SEQUENCE_IV_LEN: usize = 8;

/// Where the node id starts in a node-partitioned IV.
const PARTITION_SHIFT: u32 = 48;

/// The sequence-number bits of a node-partitioned IV.
const PARTITION_SEQ_MASK: u64 = (1 << PARTITION_SHIFT) - 1;

/// The caller's side of outbound processing for one batch.
#[derive(Debug)]
pub struct OutboundContext<'a> {
    /// The current time, for time-based lifetimes.
    pub now: Instant,
    /// Where IVs come from.
    pub iv: IvSource<'a>,
    /// SPIs of outbound SAs that crossed a soft lifetime limit while
    /// processing: the rekey events (RFC 4301 §4.4.2.1). Each SA appears
    /// once in its life, so this grows rarely; the caller drains it.
    pub soft_expired: Vec<u32>,
    /// Refuse packets larger than the SA's path MTU
    /// ([`DropReason::PathMtuExceeded`](crate::DropReason)); default on. Off
    /// for a packet the caller sends with fragmentation allowed.
    pub check_path_mtu: bool,
}

impl<'a> OutboundContext<'a> {
    /// A context at `now` with the IV source `iv` and no events.
    pub fn new(now: Instant, iv: IvSource<'a>) -> Self {
        OutboundContext {
            now,
            iv,
            soft_expired: Vec::new(),
            check_path_mtu: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_iv_is_big_endian_and_refused_for_cbc() {
        let mut src = IvSource::Sequence;
        let mut iv = [0u8; 8];
        assert!(src.serves(8));
        src.fill(0x0102_0304_0506_0708, &mut iv);
        assert_eq!(iv, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(!src.serves(16));
        assert!(src.serves(0));
    }

    #[test]
    fn random_and_fixed() {
        let mut calls = 0;
        let mut rng = |b: &mut [u8]| {
            calls += 1;
            b.fill(0xab);
        };
        let mut iv = [0u8; 16];
        {
            let mut src = IvSource::Random(&mut rng);
            assert!(src.serves(16));
            src.fill(7, &mut iv);
        }
        assert_eq!(iv, [0xab; 16]);
        assert_eq!(calls, 1);
        let mut fixed = IvSource::Fixed(&[9; 8]);
        let mut iv = [0u8; 8];
        assert!(fixed.serves(8) && !fixed.serves(16));
        fixed.fill(1, &mut iv);
        assert_eq!(iv, [9; 8]);
    }

    #[test]
    fn node_partitioned_iv_puts_the_node_on_top_and_refuses_past_48_bits() {
        let mut a = IvSource::NodePartitioned(1);
        let mut b = IvSource::NodePartitioned(2);
        let (mut iv_a, mut iv_b) = ([0u8; 8], [0u8; 8]);
        assert!(a.serves(8) && !a.serves(16));
        // Two nodes sending the same sequence number still use distinct IVs.
        a.fill(0x0000_0a0b_0c0d_0e0f, &mut iv_a);
        b.fill(0x0000_0a0b_0c0d_0e0f, &mut iv_b);
        assert_eq!(iv_a, [0, 1, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f]);
        assert_eq!(iv_b, [0, 2, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f]);
        assert!(a.covers((1 << 48) - 1));
        assert!(!a.covers(1 << 48));
        assert!(IvSource::Sequence.covers(u64::MAX));
    }
}
