//! A minimal DER reader and writer (X.690) for the few structures
//! authentication needs that rustls-webpki does not expose: distinguished
//! names and the subjectAltName extension.
//!
//! Only single-byte tags and definite lengths up to four octets are
//! accepted; anything else is malformed (DER never needs more here).

/// DER tag: OCTET STRING.
pub(crate) const TAG_OCTET_STRING: u8 = 0x04;
/// DER tag: OBJECT IDENTIFIER.
pub(crate) const TAG_OID: u8 = 0x06;
/// DER tag: BOOLEAN.
pub(crate) const TAG_BOOLEAN: u8 = 0x01;
/// DER tag: UTF8String.
pub(crate) const TAG_UTF8_STRING: u8 = 0x0c;
/// DER tag: PrintableString.
pub(crate) const TAG_PRINTABLE_STRING: u8 = 0x13;
/// DER tag: TeletexString (T61String).
pub(crate) const TAG_T61_STRING: u8 = 0x14;
/// DER tag: IA5String.
pub(crate) const TAG_IA5_STRING: u8 = 0x16;
/// DER tag: SEQUENCE (constructed).
pub(crate) const TAG_SEQUENCE: u8 = 0x30;
/// DER tag: SET (constructed).
pub(crate) const TAG_SET: u8 = 0x31;

/// Reads consecutive TLVs from a byte slice, never past its end.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DerReader<'a> {
    rest: &'a [u8],
}

impl<'a> DerReader<'a> {
    /// A reader over `input`.
    pub(crate) fn new(input: &'a [u8]) -> Self {
        DerReader { rest: input }
    }

    /// True when every byte has been read.
    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Reads one TLV: its tag and value. `None` when malformed or at the end.
    pub(crate) fn read(&mut self) -> Option<(u8, &'a [u8])> {
        let (&tag, after_tag) = self.rest.split_first()?;
        // Multi-byte (high) tag numbers are never needed here.
        if tag & 0x1f == 0x1f {
            return None;
        }
        let (len, after_len) = read_length(after_tag)?;
        if after_len.len() < len {
            return None;
        }
        let (value, rest) = after_len.split_at(len);
        self.rest = rest;
        Some((tag, value))
    }

    /// Reads one TLV that must carry `tag`, returning its value.
    pub(crate) fn expect(&mut self, tag: u8) -> Option<&'a [u8]> {
        match self.read()? {
            (t, value) if t == tag => Some(value),
            _ => None,
        }
    }

    /// Reads the next TLV only if it carries `tag`; otherwise leaves the
    /// reader where it was.
    pub(crate) fn optional(&mut self, tag: u8) -> Option<&'a [u8]> {
        let mut probe = *self;
        match probe.read() {
            Some((t, value)) if t == tag => {
                *self = probe;
                Some(value)
            }
            _ => None,
        }
    }
}

/// Parses a definite DER length (X.690 §8.1.3) at the start of `input`.
fn read_length(input: &[u8]) -> Option<(usize, &[u8])> {
    let (&first, rest) = input.split_first()?;
    if first < 0x80 {
        return Some((usize::from(first), rest));
    }
    let count = usize::from(first & 0x7f);
    // 0x80 is the indefinite form (BER only); more than 4 octets is absurd here.
    if count == 0 || count > 4 || rest.len() < count {
        return None;
    }
    let (octets, rest) = rest.split_at(count);
    let len = octets
        .iter()
        .fold(0usize, |acc, &b| acc << 8 | usize::from(b));
    // X.690 §10.1: DER uses the fewest octets, and the long form only from 128.
    if octets[0] == 0 || len < 0x80 {
        return None;
    }
    Some((len, rest))
}

/// Appends a TLV with a definite DER length.
pub(crate) fn push_tlv(out: &mut Vec<u8>, tag: u8, value: &[u8]) {
    out.push(tag);
    let len = value.len();
    if len < 0x80 {
        // Short form: one octet.
        out.push(len as u8);
    } else {
        let octets = len.to_be_bytes();
        let skip = octets.iter().take_while(|&&b| b == 0).count();
        // At most size_of::<usize>() octets, so the count fits in 7 bits.
        out.push(0x80 | (octets.len() - skip) as u8);
        out.extend_from_slice(&octets[skip..]);
    }
    out.extend_from_slice(value);
}

/// A TLV built into a fresh vector.
pub(crate) fn tlv(tag: u8, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 6);
    push_tlv(&mut out, tag, value);
    out
}

/// Encodes an OBJECT IDENTIFIER's content octets (X.690 §8.19) from its
/// arcs. `None` for fewer than two arcs or a first pair out of range.
pub(crate) fn encode_oid(arcs: &[u64]) -> Option<Vec<u8>> {
    let (&first, rest) = arcs.split_first()?;
    let (&second, rest) = rest.split_first()?;
    if first > 2 || (first < 2 && second >= 40) {
        return None;
    }
    let mut out = Vec::new();
    push_base128(&mut out, first.checked_mul(40)?.checked_add(second)?);
    for &arc in rest {
        push_base128(&mut out, arc);
    }
    Some(out)
}

fn push_base128(out: &mut Vec<u8>, value: u64) {
    let mut groups = [0u8; 10];
    let mut n = 0;
    let mut v = value;
    loop {
        // The low seven bits: the truncation is the point.
        groups[n] = (v & 0x7f) as u8;
        n += 1;
        v >>= 7;
        if v == 0 {
            break;
        }
    }
    for i in (0..n).rev() {
        out.push(groups[i] | if i > 0 { 0x80 } else { 0 });
    }
}

/// Decodes OBJECT IDENTIFIER content octets into dotted form ("2.5.4.3").
/// `None` when malformed (empty, truncated, non-minimal or > 64-bit arcs).
pub(crate) fn oid_to_string(content: &[u8]) -> Option<String> {
    let mut arcs = Vec::new();
    let mut value: u64 = 0;
    let mut started = false;
    for &b in content {
        // X.690 §8.19.2: no leading 0x80 padding in a subidentifier.
        if !started && b == 0x80 {
            return None;
        }
        started = b & 0x80 != 0;
        value = value.checked_mul(128)? | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            arcs.push(value);
            value = 0;
        }
    }
    if started || arcs.is_empty() {
        return None;
    }
    let first = arcs[0];
    let (a, b) = match first {
        0..=39 => (0, first),
        40..=79 => (1, first - 40),
        _ => (2, first - 80),
    };
    let mut text = format!("{a}.{b}");
    for arc in &arcs[1..] {
        text.push_str(&format!(".{arc}"));
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_short_and_long() {
        let mut long = vec![0x04, 0x81, 0x80];
        long.extend_from_slice(&[0xaa; 0x80]);
        let mut r = DerReader::new(&long);
        assert_eq!(r.read().map(|(t, v)| (t, v.len())), Some((0x04, 0x80)));
        assert!(r.is_empty());
        assert_eq!(tlv(0x04, &[0xaa; 0x80]), long);
        // Non-minimal long form, indefinite length, truncated value.
        assert!(DerReader::new(&[0x04, 0x81, 0x05, 1, 2, 3, 4, 5])
            .read()
            .is_none());
        assert!(DerReader::new(&[0x30, 0x80, 0, 0]).read().is_none());
        assert!(DerReader::new(&[0x04, 0x03, 1]).read().is_none());
        assert!(DerReader::new(&[0x1f, 0x01, 0x00]).read().is_none());
    }

    #[test]
    fn optional_leaves_reader_untouched() {
        let mut r = DerReader::new(&[0x02, 0x01, 0x05]);
        assert_eq!(r.optional(0x30), None);
        assert_eq!(r.expect(0x02), Some(&[5u8][..]));
    }

    #[test]
    fn oids_round_trip() {
        // 1.2.840.113549.1.9.1 (emailAddress) and 2.5.4.3 (commonName).
        let email = encode_oid(&[1, 2, 840, 113549, 1, 9, 1]).unwrap();
        assert_eq!(
            email,
            [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01]
        );
        assert_eq!(oid_to_string(&email).unwrap(), "1.2.840.113549.1.9.1");
        assert_eq!(encode_oid(&[2, 5, 4, 3]).unwrap(), [0x55, 0x04, 0x03]);
        assert_eq!(oid_to_string(&[0x55, 0x04, 0x03]).unwrap(), "2.5.4.3");
        assert!(oid_to_string(&[0x2a, 0x86]).is_none());
        assert!(oid_to_string(&[0x80, 0x01]).is_none());
        assert!(encode_oid(&[1]).is_none());
        assert!(encode_oid(&[1, 40]).is_none());
    }
}
