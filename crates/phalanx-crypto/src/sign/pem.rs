//! PEM decoding (RFC 7468): the base64 body between `-----BEGIN <label>-----`
//! and `-----END <label>-----` lines.
//!
//! Text outside the blocks is ignored (RFC 7468 §5.2 allows explanatory
//! text). RFC 1421-style header lines inside a block (`Proc-Type: ...`) are
//! skipped but remembered, so that a legacy encrypted key is reported as
//! such instead of failing as garbage. Decoded bytes and the base64 they came
//! from are zeroized on drop: a block may hold a private key.

use super::SignError;
use zeroize::Zeroizing;

/// One decoded PEM block.
#[derive(Debug)]
pub struct PemBlock {
    /// The label of the BEGIN/END lines: `PRIVATE KEY`, `CERTIFICATE`, ...
    pub label: String,
    /// The decoded body (DER for every label used here).
    pub der: Zeroizing<Vec<u8>>,
    /// True when an RFC 1421 header marked the block encrypted
    /// (`Proc-Type: 4,ENCRYPTED`, as `openssl genrsa -aes256` writes).
    pub encrypted: bool,
}

const BEGIN: &[u8] = b"-----BEGIN ";
const END: &[u8] = b"-----END ";
const DASHES: &[u8] = b"-----";

/// Decodes every PEM block of `input`, in order. An input with no block
/// gives an empty list; an unterminated block, mismatched BEGIN/END labels
/// or a body that is not base64 is [`SignError::BadPem`].
pub fn decode_pem(input: &[u8]) -> Result<Vec<PemBlock>, SignError> {
    let mut blocks = Vec::new();
    let mut open: Option<OpenBlock> = None;
    for line in input.split(|&b| b == b'\n').map(trim) {
        match open.as_mut() {
            None => {
                if let Some(label) = delimited(line, BEGIN) {
                    open = Some(OpenBlock::new(label)?);
                }
            }
            Some(block) => {
                if let Some(label) = delimited(line, END) {
                    if label != block.label.as_bytes() {
                        return Err(SignError::BadPem);
                    }
                    // `open` is Some in this arm.
                    let done = open.take().ok_or(SignError::BadPem)?;
                    blocks.push(done.finish()?);
                } else {
                    block.add_line(line);
                }
            }
        }
    }
    match open {
        Some(_) => Err(SignError::BadPem),
        None => Ok(blocks),
    }
}

/// A block whose END line has not been seen yet.
struct OpenBlock {
    label: String,
    body: Zeroizing<Vec<u8>>,
    encrypted: bool,
}

impl OpenBlock {
    fn new(label: &[u8]) -> Result<Self, SignError> {
        let label = core::str::from_utf8(label).map_err(|_| SignError::BadPem)?;
        Ok(OpenBlock {
            label: label.to_owned(),
            body: Zeroizing::new(Vec::new()),
            encrypted: false,
        })
    }

    fn add_line(&mut self, line: &[u8]) {
        if line.contains(&b':') {
            // RFC 1421 §4.6.1.1: `Proc-Type: 4,ENCRYPTED` marks an encrypted body.
            if line.starts_with(b"Proc-Type:") && contains(line, b"ENCRYPTED") {
                self.encrypted = true;
            }
            return;
        }
        self.body.extend_from_slice(line);
    }

    fn finish(self) -> Result<PemBlock, SignError> {
        Ok(PemBlock {
            der: base64_decode(&self.body)?,
            label: self.label,
            encrypted: self.encrypted,
        })
    }
}

/// The label of a `-----BEGIN label-----` / `-----END label-----` line.
fn delimited<'a>(line: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    line.strip_prefix(prefix)?.strip_suffix(DASHES)
}

fn trim(line: &[u8]) -> &[u8] {
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    let end = line
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &line[start..end]
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The value of one character of the standard base64 alphabet (RFC 4648 §4).
fn sextet(c: u8) -> Option<u32> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// Decodes standard base64 (RFC 4648 §4), ignoring whitespace. Padding is
/// optional but, when present, only at the end.
pub(crate) fn base64_decode(text: &[u8]) -> Result<Zeroizing<Vec<u8>>, SignError> {
    let mut out = Zeroizing::new(Vec::with_capacity(text.len() / 4 * 3));
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    let mut chars = 0usize;
    let mut padding = false;
    for &c in text.iter().filter(|c| !c.is_ascii_whitespace()) {
        if c == b'=' {
            padding = true;
            continue;
        }
        let v = sextet(c).filter(|_| !padding).ok_or(SignError::BadPem)?;
        acc = (acc << 6 | v) & 0xff_ffff;
        bits += 6;
        chars += 1;
        if bits >= 8 {
            bits -= 8;
            // Masked to one byte: the truncation is the point.
            out.push((acc >> bits) as u8);
        }
    }
    // One leftover character carries fewer than 8 bits: not base64.
    if chars % 4 == 1 {
        return Err(SignError::BadPem);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_rfc4648_vectors() {
        // RFC 4648 §10.
        let cases: [(&[u8], &[u8]); 7] = [
            (b"", b""),
            (b"Zg==", b"f"),
            (b"Zm8=", b"fo"),
            (b"Zm9v", b"foo"),
            (b"Zm9vYg==", b"foob"),
            (b"Zm9vYmE=", b"fooba"),
            (b"Zm9vYmFy", b"foobar"),
        ];
        for (text, plain) in cases {
            assert_eq!(base64_decode(text).unwrap().as_slice(), plain);
        }
        assert_eq!(
            base64_decode(b"Zm9v\r\nYmFy").unwrap().as_slice(),
            b"foobar"
        );
        assert_eq!(base64_decode(b"Zm8").unwrap().as_slice(), b"fo");
    }

    #[test]
    fn base64_rejects_garbage() {
        assert_eq!(base64_decode(b"Zm9v!"), Err(SignError::BadPem));
        assert_eq!(base64_decode(b"Zg==Zg=="), Err(SignError::BadPem));
        assert_eq!(base64_decode(b"Zm9vY"), Err(SignError::BadPem));
    }

    #[test]
    fn blocks_labels_and_text_around() {
        let pem = b"explanatory text\n-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n\
            -----END EC PARAMETERS-----\r\n-----BEGIN CERTIFICATE-----\r\nZm9v\r\nYmFy\r\n\
            -----END CERTIFICATE-----\n";
        let blocks = decode_pem(pem).unwrap();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].label, "EC PARAMETERS");
        assert_eq!(
            blocks[0].der.as_slice(),
            &[6, 8, 0x2a, 0x86, 0x48, 0xce, 0x3d, 3, 1, 7]
        );
        assert_eq!(blocks[1].label, "CERTIFICATE");
        assert_eq!(blocks[1].der.as_slice(), b"foobar");
        assert!(!blocks[1].encrypted);
    }

    #[test]
    fn malformed_blocks() {
        let unterminated = b"-----BEGIN CERTIFICATE-----\nZm9v\n";
        assert_eq!(decode_pem(unterminated).unwrap_err(), SignError::BadPem);
        let mismatched = b"-----BEGIN CERTIFICATE-----\nZm9v\n-----END PRIVATE KEY-----\n";
        assert_eq!(decode_pem(mismatched).unwrap_err(), SignError::BadPem);
        assert!(decode_pem(b"no pem here").unwrap().is_empty());
    }

    #[test]
    fn legacy_encrypted_header_is_flagged() {
        let pem = b"-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\
            DEK-Info: AES-256-CBC,00112233445566778899AABBCCDDEEFF\n\nZm9v\n\
            -----END RSA PRIVATE KEY-----\n";
        let blocks = decode_pem(pem).unwrap();
        assert!(blocks[0].encrypted);
        assert_eq!(blocks[0].der.as_slice(), b"foo");
    }
}
