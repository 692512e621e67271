//! ECDSA signature encodings: the DER `ECDSA-Sig-Value` of RFC 7427 (and
//! X.509) and the fixed-size `r || s` of RFC 4754 §7.

/// Converts a fixed-size `r || s` ECDSA signature (RFC 4754 §7: r and s
/// each left-padded to the field size) into the DER
/// `ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER }` (RFC 3279
/// §2.2.3) that X.509 verifiers take. `None` when the length is odd, zero
/// or too long for the encoding here (scalars up to 125 bytes).
pub fn ecdsa_fixed_to_der(fixed: &[u8]) -> Option<Vec<u8>> {
    if fixed.is_empty() || fixed.len() % 2 != 0 || fixed.len() / 2 > 125 {
        return None;
    }
    let (r, s) = fixed.split_at(fixed.len() / 2);
    let mut body = Vec::with_capacity(fixed.len() + 6);
    push_unsigned_integer(&mut body, r);
    push_unsigned_integer(&mut body, s);
    let mut der = Vec::with_capacity(body.len() + 3);
    der.push(0x30);
    push_length(&mut der, body.len());
    der.extend_from_slice(&body);
    Some(der)
}

/// Appends `value` (big-endian, unsigned) as a minimal DER INTEGER.
fn push_unsigned_integer(out: &mut Vec<u8>, value: &[u8]) {
    let first = value.iter().position(|&b| b != 0).unwrap_or(value.len());
    let digits = &value[first..];
    // X.690 §8.3.2: minimal two's complement; a set top bit needs a 0x00 in
    // front to stay positive, and zero is one 0x00 byte.
    let pad = digits.first().is_none_or(|&b| b & 0x80 != 0);
    out.push(0x02);
    push_length(out, digits.len() + usize::from(pad));
    if pad {
        out.push(0);
    }
    out.extend_from_slice(digits);
}

/// Appends a DER length (X.690 §8.1.3), short or one-byte long form; the
/// callers' lengths are under 256.
fn push_length(out: &mut Vec<u8>, len: usize) {
    if len >= 0x80 {
        out.push(0x81);
    }
    // Callers bound `len` below 256.
    out.push(len as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_and_padding() {
        // r = 1, s = 0x80 (needs a leading zero) with 2-byte scalars.
        let der = ecdsa_fixed_to_der(&[0x00, 0x01, 0x00, 0x80]).unwrap();
        assert_eq!(der, [0x30, 0x07, 0x02, 0x01, 0x01, 0x02, 0x02, 0x00, 0x80]);
        // r = 0 encodes as one zero byte.
        let der = ecdsa_fixed_to_der(&[0x00, 0x00, 0x7f, 0xff]).unwrap();
        assert_eq!(der, [0x30, 0x07, 0x02, 0x01, 0x00, 0x02, 0x02, 0x7f, 0xff]);
    }

    #[test]
    fn p521_sized_signature_uses_long_form() {
        let fixed = [0xffu8; 132];
        let der = ecdsa_fixed_to_der(&fixed).unwrap();
        assert_eq!(&der[..3], &[0x30, 0x81, 2 * (2 + 67)]);
        assert_eq!(der.len(), 3 + 2 * 69);
    }

    #[test]
    fn bad_lengths() {
        assert_eq!(ecdsa_fixed_to_der(&[]), None);
        assert_eq!(ecdsa_fixed_to_der(&[1, 2, 3]), None);
        assert_eq!(ecdsa_fixed_to_der(&[1u8; 252]), None);
    }
}
