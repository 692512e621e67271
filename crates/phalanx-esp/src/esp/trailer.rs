//! The ESP trailer (RFC 4303 §2.4-§2.6) over `phalanx_wire::esp`: padding,
//! Pad Length and Next Header, written outbound and checked inbound.
//!
//! ```text
//! | payload (+ TFC padding) | Padding 1,2,3,.. (0-255) | Pad Length | Next Header | ICV |
//! ```

use phalanx_wire::esp::{EspTrailer, MAX_PAD_LEN};
use phalanx_wire::IpProtocol;

use crate::drop::DropReason;
use phalanx_wire::esp::TRAILER_LEN as ESP_TRAILER_LEN;

/// The longest default padding, 1, 2, 3, ..., 255 (RFC 4303 §2.4): the
/// padding of every packet is a prefix of it, copied or compared at once.
const DEFAULT_PADDING: [u8; MAX_PAD_LEN] = {
    let mut bytes = [0u8; MAX_PAD_LEN];
    let mut i = 0;
    while i < MAX_PAD_LEN {
        bytes[i] = (i + 1) as u8;
        i += 1;
    }
    bytes
};

/// Padding bytes that make `payload_len + pad + 2` a multiple of the
/// cipher's `block_size`, at least 4 (RFC 4303 §2.4): `pad_len_for` of
/// `phalanx_wire::esp`, with the alignment (a power of two) applied as a
/// mask rather than a division.
pub(crate) fn pad_len(payload_len: usize, block_size: usize) -> usize {
    let align = block_size.next_power_of_two().clamp(4, MAX_PAD_LEN + 1);
    let mask = align - 1;
    (align - ((payload_len + ESP_TRAILER_LEN) & mask)) & mask
}

/// Writes the default padding 1, 2, 3, ..., the Pad Length and the Next
/// Header into `trailer`, which is `pad + 2` bytes long (pad < 256).
pub(crate) fn write(trailer: &mut [u8], next_header: IpProtocol) {
    let pad = trailer
        .len()
        .saturating_sub(ESP_TRAILER_LEN)
        .min(MAX_PAD_LEN);
    trailer[..pad].copy_from_slice(&DEFAULT_PADDING[..pad]);
    let fields = EspTrailer {
        pad_len: pad as u8,
        next_header,
    };
    // The slice holds the two trailer bytes: write() cannot fail.
    let _ = fields.write(trailer);
}

/// What a checked trailer says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Trailer {
    /// Bytes before the padding (TFC padding included).
    pub(crate) payload_len: usize,
    /// The Next Header field.
    pub(crate) next_header: IpProtocol,
}

/// Reads the trailer at the end of the decrypted `plaintext` (payload,
/// padding, Pad Length, Next Header) and checks the padding: Pad Length
/// must fit (RFC 4303 §2.5) and the bytes must be 1, 2, 3, ... (§2.4: the
/// receiver SHOULD check the default padding).
pub(crate) fn parse(plaintext: &[u8]) -> Result<Trailer, DropReason> {
    // `EspTrailer::parse` reads the last two octets and checks that the
    // padding fits in front of them (else BadPadLength).
    let trailer = EspTrailer::parse(plaintext).map_err(|_| DropReason::BadPadLength)?;
    let pad = usize::from(trailer.pad_len);
    // parse() checked pad + 2 <= len.
    let payload_len = plaintext.len() - ESP_TRAILER_LEN - pad;
    let padding = plaintext
        .get(payload_len..payload_len + pad)
        .unwrap_or_default();
    // A byte loop against the table: paddings are short (0-3 bytes with
    // the AEADs), too short for a call to memcmp to pay.
    let expected = DEFAULT_PADDING.iter();
    if !padding.iter().zip(expected).all(|(got, want)| got == want) {
        return Err(DropReason::BadPadding);
    }
    Ok(Trailer {
        payload_len,
        next_header: trailer.next_header,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pad_len_matches_wire_pad_len_for() {
        for block in [1, 4, 8, 16, 32] {
            for len in 0..600 {
                let wire = phalanx_wire::esp::pad_len_for(len, block);
                assert_eq!(pad_len(len, block), usize::from(wire), "{len} {block}");
            }
        }
    }

    #[test]
    fn default_padding_table() {
        let mut long = [0u8; 257];
        write(&mut long, IpProtocol::IPV6);
        assert!(phalanx_wire::esp::is_default_padding(&long[..255]));
        assert_eq!(&long[255..], &[255, 41]);
        assert_eq!(parse(&long).map(|t| t.payload_len), Ok(0));
    }

    #[test]
    fn pad_len_aligns() {
        for align in [4, 16] {
            for len in 0..100 {
                let p = pad_len(len, align);
                assert!(p < align);
                assert_eq!((len + p + 2) % align, 0, "len {len} align {align}");
            }
        }
    }

    #[test]
    fn write_then_parse() {
        let mut t = [0u8; 20];
        t[..5].copy_from_slice(b"hello");
        write(&mut t[5..], IpProtocol::IPV4);
        assert_eq!(&t[5..], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 13, 4]);
        let ok = Trailer {
            payload_len: 5,
            next_header: IpProtocol::IPV4,
        };
        assert_eq!(parse(&t), Ok(ok));
        let mut bad = t;
        bad[9] = 0;
        assert_eq!(parse(&bad), Err(DropReason::BadPadding));
        assert_eq!(parse(&t[15..]), Err(DropReason::BadPadLength));
        assert_eq!(parse(&[]), Err(DropReason::BadPadLength));
        assert_eq!(parse(&[7]), Err(DropReason::BadPadLength));
        let dummy = Trailer {
            payload_len: 0,
            next_header: IpProtocol::NO_NEXT_HEADER,
        };
        assert_eq!(parse(&[0, 59]), Ok(dummy));
    }
}
