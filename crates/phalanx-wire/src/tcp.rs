//! A minimal TCP header view (RFC 9293 §3.1): what a security gateway
//! reads for selectors, not a TCP codec.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          Source Port          |       Destination Port        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                        Sequence Number                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Acknowledgment Number                      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Data |       |C|E|U|A|P|R|S|F|                               |
//! | Offset| Rsrvd |W|C|R|C|S|S|Y|I|            Window             |
//! |       |       |R|E|G|K|H|T|N|N|                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |           Checksum            |         Urgent Pointer        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                           [Options]                           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use crate::error::{Error, Result};
use crate::field::{clamp, read_u16, read_u32, view};

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;

view! {
    /// A read view of a TCP segment: ports, numbers, flags, header length.
    TcpPacket
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Checks that the fixed header fits and that `20 <= Data Offset * 4 <=
    /// buffer`.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.header_len() < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if self.header_len() > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The Source Port.
    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 0)
    }

    /// The Destination Port.
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 2)
    }

    /// The Sequence Number.
    pub fn seq_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 4)
    }

    /// The Acknowledgment Number.
    pub fn ack_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 8)
    }

    /// Header length in octets (Data Offset × 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[12] >> 4) * 4
    }

    /// The eight control bits CWR..FIN (RFC 9293 §3.1, RFC 3168).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[13]
    }

    /// The SYN control bit.
    pub fn syn(&self) -> bool {
        self.flags() & 0x02 != 0
    }

    /// The Window field.
    pub fn window(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 14)
    }

    /// The Checksum field.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 16)
    }

    /// The options between the fixed header and the data.
    pub fn options(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[clamp(HEADER_LEN, self.header_len(), buf.len())]
    }

    /// The data after the header, to the end of the buffer (TCP has no
    /// length field: the IP layer bounds the segment).
    pub fn payload(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[clamp(self.header_len(), buf.len(), buf.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A SYN 49152 -> 443 with one MSS option (02 04 05b4) and 3 data octets.
    const SYN: &str = "c00001bb000003e8000000006002faf0abcd0000020405b4616263";

    #[test]
    fn known_segment() {
        let bytes = hex::decode(SYN).unwrap();
        let t = TcpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!((t.src_port(), t.dst_port()), (49152, 443));
        assert_eq!((t.seq_number(), t.ack_number()), (1000, 0));
        assert_eq!((t.header_len(), t.flags(), t.syn()), (24, 0x02, true));
        assert_eq!((t.window(), t.checksum()), (0xfaf0, 0xabcd));
        assert_eq!(t.options(), &[2, 4, 5, 0xb4]);
        assert_eq!(t.payload(), b"abc");
        for len in 0..24 {
            assert_eq!(
                TcpPacket::new_checked(&bytes[..len]).unwrap_err(),
                Error::Truncated
            );
        }
        let mut bad = bytes.clone();
        bad[12] = 0x40;
        assert_eq!(
            TcpPacket::new_checked(&bad[..]).unwrap_err(),
            Error::Malformed
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            crate::fuzzing::tcp(&bytes);
        }
    }
}
