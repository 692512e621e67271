//! X.501 distinguished names: parsing the config syntax into a DER `Name`,
//! printing a DER `Name`, and matching two of them.
//!
//! Encoding rule (as strongSwan's `atodn` does): each `key=value` becomes
//! one RDN; `emailAddress` values are IA5String (PKCS#9), every other value
//! is a PrintableString when its characters allow (X.680 §41.4) and a
//! UTF8String otherwise.
//!
//! Matching rule: both names are flattened to their sequence of
//! (attribute OID, value) pairs, which must have the same length and the
//! same OIDs in the same order. Two string values match when their octets
//! are equal ignoring ASCII case, whatever their string types
//! (PrintableString, UTF8String, IA5String, TeletexString) - RFC 5280 §7.1
//! asks for at least case-insensitive comparison, and CAs pick string types
//! freely. A configured value of `*` matches any value of that attribute.
//! Values that are not character strings must match type and octets.

use super::der::{
    encode_oid, oid_to_string, push_tlv, tlv, DerReader, TAG_IA5_STRING, TAG_OID,
    TAG_PRINTABLE_STRING, TAG_SEQUENCE, TAG_SET, TAG_T61_STRING, TAG_UTF8_STRING,
};
use super::AuthError;

/// One attribute of a name: its OID content octets, string tag and value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Attribute<'a> {
    pub(crate) oid: &'a [u8],
    pub(crate) tag: u8,
    pub(crate) value: &'a [u8],
}

/// The attribute keys the config syntax knows, with their OID arcs.
const KEYS: &[(&str, &[u64])] = &[
    ("C", &[2, 5, 4, 6]),
    ("ST", &[2, 5, 4, 8]),
    ("L", &[2, 5, 4, 7]),
    ("O", &[2, 5, 4, 10]),
    ("OU", &[2, 5, 4, 11]),
    ("CN", &[2, 5, 4, 3]),
    ("emailAddress", EMAIL_ADDRESS),
    ("E", EMAIL_ADDRESS),
    ("Email", EMAIL_ADDRESS),
];

/// PKCS#9 emailAddress, 1.2.840.113549.1.9.1 (RFC 2985 §5.2.1).
const EMAIL_ADDRESS: &[u64] = &[1, 2, 840, 113549, 1, 9, 1];

/// Encodes `C=CH, O=Org, CN=name` as a DER `Name` (RFC 5280 §4.1.2.4).
/// RDNs are separated by `,` (or `/` when the text starts with `/`);
/// spaces around keys and values are dropped; `\` escapes the next
/// character. Keys are matched case-insensitively.
pub(crate) fn encode_dn(text: &str) -> Result<Vec<u8>, AuthError> {
    let mut rdns = Vec::new();
    for part in split_rdns(text)? {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| invalid(format!("`{part}` is not key=value")))?;
        push_tlv(
            &mut rdns,
            TAG_SET,
            &encode_attribute(key.trim(), value.trim())?,
        );
    }
    if rdns.is_empty() {
        return Err(invalid("empty distinguished name".into()));
    }
    Ok(tlv(TAG_SEQUENCE, &rdns))
}

fn invalid(why: String) -> AuthError {
    AuthError::InvalidIdentityConfig(why)
}

/// Splits at unescaped separators and removes the escapes.
fn split_rdns(text: &str) -> Result<Vec<String>, AuthError> {
    let (sep, body) = match text.strip_prefix('/') {
        Some(rest) => ('/', rest),
        None => (',', text),
    };
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let escaped = chars
                    .next()
                    .ok_or_else(|| invalid("trailing `\\`".into()))?;
                current.push(escaped);
            }
            c if c == sep => parts.push(core::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    parts.push(current);
    // A trailing separator (`.../CN=x/`) leaves an empty last part.
    parts.retain(|p| !p.trim().is_empty());
    Ok(parts)
}

/// One `AttributeTypeAndValue` SEQUENCE (RFC 5280 §4.1.2.4).
fn encode_attribute(key: &str, value: &str) -> Result<Vec<u8>, AuthError> {
    let arcs = KEYS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(key))
        .map(|(_, arcs)| *arcs)
        .ok_or_else(|| invalid(format!("unknown DN attribute `{key}`")))?;
    // The table holds valid arcs only.
    let oid = encode_oid(arcs).ok_or_else(|| invalid(format!("bad OID for `{key}`")))?;
    let tag = if arcs == EMAIL_ADDRESS {
        if !value.is_ascii() {
            return Err(invalid(format!("emailAddress `{value}` is not ASCII")));
        }
        TAG_IA5_STRING
    } else if value.chars().all(is_printable_string_char) {
        TAG_PRINTABLE_STRING
    } else {
        TAG_UTF8_STRING
    };
    let mut atv = tlv(TAG_OID, &oid);
    push_tlv(&mut atv, tag, value.as_bytes());
    Ok(tlv(TAG_SEQUENCE, &atv))
}

/// The PrintableString character set (X.680 §41.4, Table 10).
fn is_printable_string_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || " '()+,-./:=?".contains(c)
}

/// The attributes of a DER `Name`, in order, multi-valued RDNs flattened.
/// `None` when `der` is not exactly one well-formed `Name`.
pub(crate) fn parse_dn(der: &[u8]) -> Option<Vec<Attribute<'_>>> {
    let mut outer = DerReader::new(der);
    let rdns = outer.expect(TAG_SEQUENCE)?;
    if !outer.is_empty() {
        return None;
    }
    parse_rdn_sequence(rdns)
}

/// Like [`parse_dn`], over the content octets of the `Name` SEQUENCE (what
/// rustls-webpki's `Cert::subject` returns).
pub(crate) fn parse_rdn_sequence(content: &[u8]) -> Option<Vec<Attribute<'_>>> {
    let mut attributes = Vec::new();
    let mut rdns = DerReader::new(content);
    while !rdns.is_empty() {
        let mut set = DerReader::new(rdns.expect(TAG_SET)?);
        // X.501: a RelativeDistinguishedName has at least one attribute.
        if set.is_empty() {
            return None;
        }
        while !set.is_empty() {
            let mut atv = DerReader::new(set.expect(TAG_SEQUENCE)?);
            let oid = atv.expect(TAG_OID)?;
            let (tag, value) = atv.read()?;
            if !atv.is_empty() {
                return None;
            }
            attributes.push(Attribute { oid, tag, value });
        }
    }
    Some(attributes)
}

/// True for the character string tags compared ignoring their type.
fn is_string_tag(tag: u8) -> bool {
    matches!(
        tag,
        TAG_PRINTABLE_STRING | TAG_UTF8_STRING | TAG_IA5_STRING | TAG_T61_STRING
    )
}

/// Matches a presented name against a configured one (the module doc's
/// rule). `*` values in `configured` are wildcards only when `wildcards`.
pub(crate) fn attributes_match(
    configured: &[Attribute<'_>],
    presented: &[Attribute<'_>],
    wildcards: bool,
) -> bool {
    configured.len() == presented.len()
        && configured
            .iter()
            .zip(presented)
            .all(|(c, p)| attribute_matches(c, p, wildcards))
}

fn attribute_matches(
    configured: &Attribute<'_>,
    presented: &Attribute<'_>,
    wildcards: bool,
) -> bool {
    if configured.oid != presented.oid {
        return false;
    }
    if wildcards && is_string_tag(configured.tag) && configured.value == b"*" {
        return true;
    }
    if is_string_tag(configured.tag) && is_string_tag(presented.tag) {
        return configured.value.eq_ignore_ascii_case(presented.value);
    }
    configured.tag == presented.tag && configured.value == presented.value
}

/// Prints attributes as `C=CH, O=Org, CN=name`: known keys by name, others
/// as dotted OIDs; string values as text with `,` and `\` escaped,
/// anything else as `#` and hex.
pub(crate) fn attributes_to_string(attributes: &[Attribute<'_>]) -> String {
    let mut out = String::new();
    for (i, attribute) in attributes.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&key_name(attribute.oid));
        out.push('=');
        match core::str::from_utf8(attribute.value) {
            Ok(text) if is_string_tag(attribute.tag) => {
                for c in text.chars() {
                    if c == ',' || c == '\\' {
                        out.push('\\');
                    }
                    out.push(c);
                }
            }
            _ => {
                out.push('#');
                out.push_str(&hex(attribute.value));
            }
        }
    }
    out
}

fn key_name(oid: &[u8]) -> String {
    KEYS.iter()
        .find(|(_, arcs)| encode_oid(arcs).as_deref() == Some(oid))
        .map(|(name, _)| (*name).to_owned())
        .or_else(|| oid_to_string(oid))
        .unwrap_or_else(|| format!("#{}", hex(oid)))
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `C=CH, O=Org, CN=name` as OpenSSL encodes it with `-utf8`
    /// (`openssl req -subj /C=CH/O=Org/CN=name -utf8`): C as
    /// PrintableString, O and CN as UTF8String.
    const OPENSSL_UTF8: &[u8] = &[
        0x30, 0x2a, 0x31, 0x0b, 0x30, 0x09, 0x06, 0x03, 0x55, 0x04, 0x06, 0x13, 0x02, b'C', b'H',
        0x31, 0x0c, 0x30, 0x0a, 0x06, 0x03, 0x55, 0x04, 0x0a, 0x0c, 0x03, b'O', b'r', b'g', 0x31,
        0x0d, 0x30, 0x0b, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x04, b'n', b'a', b'm', b'e',
    ];

    #[test]
    fn encodes_printable_strings_when_possible() {
        let der = encode_dn("C=CH, O=Org, CN=name").unwrap();
        let mut expected = OPENSSL_UTF8.to_vec();
        // Ours: PrintableString for every value here.
        expected[24] = TAG_PRINTABLE_STRING;
        expected[38] = TAG_PRINTABLE_STRING;
        assert_eq!(der, expected);
        let attrs = parse_dn(&der).unwrap();
        assert_eq!(attributes_to_string(&attrs), "C=CH, O=Org, CN=name");
    }

    #[test]
    fn utf8_and_ia5_values() {
        let der = encode_dn("CN=Zürich_1, E=a@b.example").unwrap();
        let attrs = parse_dn(&der).unwrap();
        assert_eq!(attrs[0].tag, TAG_UTF8_STRING);
        assert_eq!(attrs[1].tag, TAG_IA5_STRING);
        assert_eq!(attrs[1].oid, encode_oid(EMAIL_ADDRESS).unwrap().as_slice());
        assert_eq!(
            attributes_to_string(&attrs),
            "CN=Zürich_1, emailAddress=a@b.example"
        );
    }

    #[test]
    fn slash_separators_and_escapes() {
        let slash = encode_dn("/C=CH/O=Org/CN=name").unwrap();
        assert_eq!(slash, encode_dn("c=CH,o=Org,  cn = name ").unwrap());
        let escaped = encode_dn(r"O=Org\, Inc., CN=x").unwrap();
        let attrs = parse_dn(&escaped).unwrap();
        assert_eq!(attrs[0].value, b"Org, Inc.");
        assert_eq!(attributes_to_string(&attrs), r"O=Org\, Inc., CN=x");
    }

    #[test]
    fn config_errors() {
        assert!(encode_dn("XX=1").is_err());
        assert!(encode_dn("CN").is_err());
        assert!(encode_dn("").is_err());
        assert!(encode_dn(r"CN=a\").is_err());
        assert!(encode_dn("E=ü@x").is_err());
    }

    #[test]
    fn matching_ignores_string_type_and_case() {
        let ours = encode_dn("C=ch, O=ORG, CN=Name").unwrap();
        let a = parse_dn(&ours).unwrap();
        let b = parse_dn(OPENSSL_UTF8).unwrap();
        assert!(attributes_match(&a, &b, true));
        let other = encode_dn("C=CH, O=Org, CN=other").unwrap();
        assert!(!attributes_match(&parse_dn(&other).unwrap(), &b, true));
        let reordered = encode_dn("O=Org, C=CH, CN=name").unwrap();
        assert!(!attributes_match(&parse_dn(&reordered).unwrap(), &b, true));
        let shorter = encode_dn("C=CH, O=Org").unwrap();
        assert!(!attributes_match(&parse_dn(&shorter).unwrap(), &b, true));
        let wildcard = encode_dn("C=CH, O=Org, CN=*").unwrap();
        assert!(attributes_match(&parse_dn(&wildcard).unwrap(), &b, true));
        assert!(!attributes_match(&parse_dn(&wildcard).unwrap(), &b, false));
    }

    #[test]
    fn malformed_names_are_refused() {
        assert!(parse_dn(&[]).is_none());
        assert!(parse_dn(&[0x30, 0x02, 0x31, 0x00]).is_none());
        assert!(parse_dn(&[0x30, 0x00, 0x00]).is_none());
        assert_eq!(parse_dn(&[0x30, 0x00]).unwrap(), vec![]);
        let mut trailing = OPENSSL_UTF8.to_vec();
        trailing[1] += 2;
        trailing.extend_from_slice(&[0x05, 0x00]);
        assert!(parse_dn(&trailing).is_none());
    }
}
