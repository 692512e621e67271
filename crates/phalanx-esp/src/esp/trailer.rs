//! The ESP trailer (RFC 4303 §2.4-§2.6) over `phalanx_wire::esp`: padding,
//! Pad Length and Next Header, written outbound and checked inbound.
//!
//! ```text
//! | payload (+ TFC padding) | Padding 1,2,3,.. (0-255) | Pad Length | Next Header | ICV |
//! ```

use phalanx_wire::esp::{
    fill_default_padding, is_default_padding, pad_len_for, split_plaintext, EspTrailer,
};
use phalanx_wire::IpProtocol;

use crate::drop::DropReason;
use phalanx_wire::esp::TRAILER_LEN as ESP_TRAILER_LEN;

/// Padding bytes that make `payload_len + pad + 2` a multiple of the
/// cipher's `block_size`, at least 4 (RFC 4303 §2.4).
pub(crate) fn pad_len(payload_len: usize, block_size: usize) -> usize {
    usize::from(pad_len_for(payload_len, block_size))
}

/// Writes the default padding 1, 2, 3, ..., the Pad Length and the Next
/// Header into `trailer`, which is `pad + 2` bytes long (pad < 256).
pub(crate) fn write(trailer: &mut [u8], next_header: IpProtocol) {
    let pad = trailer.len().saturating_sub(ESP_TRAILER_LEN);
    fill_default_padding(&mut trailer[..pad]);
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
    let parts = split_plaintext(plaintext).map_err(|_| DropReason::BadPadLength)?;
    if !is_default_padding(parts.padding) {
        return Err(DropReason::BadPadding);
    }
    Ok(Trailer {
        payload_len: parts.payload.len(),
        next_header: parts.trailer.next_header,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
