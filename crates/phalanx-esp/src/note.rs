//! What an outbound operation tells `finish_outbound`, packed into
//! [`Op::user`](phalanx_crypto::Op::user).
//!
//! `finish_outbound` receives only the op, so the little it needs beyond
//! the buffer travels in the op's caller field: which protocol built it,
//! where a UDP header over IPv6 sits (its checksum covers the ciphertext),
//! and how many saved AH mutable-field bytes follow the packet.
//! ```text
//! bits  0..8   kind: 1 ESP, 2 AH (0: not built by this crate)
//! bits  8..24  ESP: offset of the UDP header whose IPv6 checksum is due (0: none)
//! bits 24..40  AH: bytes of saved mutable fields after the packet
//! ```

/// Which protocol built the op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Not an op from this crate (or the caller overwrote `user`).
    Unknown,
    /// ESP (RFC 4303).
    Esp,
    /// AH (RFC 4302).
    Ah,
}

/// The decoded note.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Note {
    /// Which protocol built the op.
    pub(crate) kind: Kind,
    /// ESP over IPv6 with UDP encapsulation: the UDP header offset.
    pub(crate) udp6_offset: Option<u16>,
    /// AH: saved mutable-field bytes behind the packet.
    pub(crate) ah_saved: u16,
}

const KIND_ESP: u64 = 1;
const KIND_AH: u64 = 2;

impl Note {
    /// An ESP op that needs nothing more.
    pub(crate) fn esp() -> Note {
        Note {
            kind: Kind::Esp,
            udp6_offset: None,
            ah_saved: 0,
        }
    }

    /// An ESP op whose UDP header at `offset` needs its IPv6 checksum.
    pub(crate) fn esp_udp6(offset: usize) -> Note {
        Note {
            kind: Kind::Esp,
            udp6_offset: u16::try_from(offset).ok(),
            ah_saved: 0,
        }
    }

    /// An AH op with `saved` bytes of mutable fields behind the packet.
    pub(crate) fn ah(saved: u16) -> Note {
        Note {
            kind: Kind::Ah,
            udp6_offset: None,
            ah_saved: saved,
        }
    }

    /// The `u64` stored in the op.
    pub(crate) fn pack(self) -> u64 {
        let kind = match self.kind {
            Kind::Unknown => 0,
            Kind::Esp => KIND_ESP,
            Kind::Ah => KIND_AH,
        };
        kind | u64::from(self.udp6_offset.unwrap_or(0)) << 8 | u64::from(self.ah_saved) << 24
    }

    /// Decodes an op's `user` field.
    pub(crate) fn unpack(user: u64) -> Note {
        let kind = match user & 0xff {
            KIND_ESP => Kind::Esp,
            KIND_AH => Kind::Ah,
            _ => Kind::Unknown,
        };
        let udp = (user >> 8) as u16;
        Note {
            kind,
            udp6_offset: (udp != 0).then_some(udp),
            ah_saved: (user >> 24) as u16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for note in [Note::esp(), Note::esp_udp6(40), Note::ah(1234), Note::ah(0)] {
            assert_eq!(Note::unpack(note.pack()), note);
        }
        assert_eq!(Note::unpack(0).kind, Kind::Unknown);
        assert_eq!(Note::unpack(0xff).kind, Kind::Unknown);
    }
}
