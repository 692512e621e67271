//! IKE identities: the Identification payloads IDi/IDr (RFC 7296 §3.5),
//! their configuration syntax and how a configured identity matches the one
//! a peer presents.
//!
//! ```text
//!                      1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Next Payload  |C|  RESERVED   |         Payload Length        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   ID Type     |                 RESERVED                      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                   Identification Data                         ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! [`Identity::to_id_body`] is the Identification Data;
//! [`Identity::rest_of_id_payload`] is everything after the generic
//! payload header (ID Type, RESERVED, data), the `RestOfInitIDPayload` /
//! `RestOfRespIDPayload` that RFC 7296 §2.15 MACs into the signed octets.

use super::dn::{attributes_match, attributes_to_string, encode_dn, hex, parse_dn};
use super::AuthError;
use core::fmt;
use core::str::FromStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An identity as carried in an ID payload (RFC 7296 §3.5).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Identity {
    /// ID_IPV4_ADDR: a single four-octet IPv4 address.
    Ipv4(Ipv4Addr),
    /// ID_IPV6_ADDR: a single sixteen-octet IPv6 address.
    Ipv6(Ipv6Addr),
    /// ID_FQDN: a fully-qualified domain name, no terminator.
    Fqdn(String),
    /// ID_RFC822_ADDR: an RFC 822 email address, no terminator.
    Email(String),
    /// ID_DER_ASN1_DN: the DER encoding of an X.501 `Name` (SEQUENCE
    /// included).
    Dn(Vec<u8>),
    /// ID_KEY_ID: opaque octets for vendor-specific information.
    KeyId(Vec<u8>),
}

impl Identity {
    /// ID type ID_IPV4_ADDR (RFC 7296 §3.5).
    pub const ID_IPV4_ADDR: u8 = 1;
    /// ID type ID_FQDN.
    pub const ID_FQDN: u8 = 2;
    /// ID type ID_RFC822_ADDR.
    pub const ID_RFC822_ADDR: u8 = 3;
    /// ID type ID_IPV6_ADDR.
    pub const ID_IPV6_ADDR: u8 = 5;
    /// ID type ID_DER_ASN1_DN.
    pub const ID_DER_ASN1_DN: u8 = 9;
    /// ID type ID_KEY_ID.
    pub const ID_KEY_ID: u8 = 11;

    /// The ID Type field for this identity.
    pub fn id_type(&self) -> u8 {
        match self {
            Identity::Ipv4(_) => Self::ID_IPV4_ADDR,
            Identity::Ipv6(_) => Self::ID_IPV6_ADDR,
            Identity::Fqdn(_) => Self::ID_FQDN,
            Identity::Email(_) => Self::ID_RFC822_ADDR,
            Identity::Dn(_) => Self::ID_DER_ASN1_DN,
            Identity::KeyId(_) => Self::ID_KEY_ID,
        }
    }

    /// The Identification Data field.
    pub fn to_id_body(&self) -> Vec<u8> {
        match self {
            Identity::Ipv4(a) => a.octets().to_vec(),
            Identity::Ipv6(a) => a.octets().to_vec(),
            Identity::Fqdn(s) | Identity::Email(s) => s.as_bytes().to_vec(),
            Identity::Dn(der) => der.clone(),
            Identity::KeyId(k) => k.clone(),
        }
    }

    /// ID Type, three zero RESERVED octets and the Identification Data:
    /// the ID payload after its generic header (RFC 7296 §2.15).
    pub fn rest_of_id_payload(&self) -> Vec<u8> {
        let mut out = vec![self.id_type(), 0, 0, 0];
        out.extend_from_slice(&self.to_id_body());
        out
    }

    /// Parses the ID payload after its generic header (the inverse of
    /// [`rest_of_id_payload`](Self::rest_of_id_payload); RESERVED octets
    /// are ignored on receipt, RFC 7296 §3.2).
    pub fn from_rest_of_id_payload(bytes: &[u8]) -> Result<Self, AuthError> {
        match bytes {
            [id_type, _, _, _, data @ ..] => Self::from_id(*id_type, data),
            _ => Err(AuthError::MalformedIdentity),
        }
    }

    /// Parses Identification Data of the given ID type, checking that it is
    /// well formed for that type.
    pub fn from_id(id_type: u8, data: &[u8]) -> Result<Self, AuthError> {
        match id_type {
            Self::ID_IPV4_ADDR => <[u8; 4]>::try_from(data)
                .map(|a| Identity::Ipv4(a.into()))
                .map_err(|_| AuthError::MalformedIdentity),
            Self::ID_IPV6_ADDR => <[u8; 16]>::try_from(data)
                .map(|a| Identity::Ipv6(a.into()))
                .map_err(|_| AuthError::MalformedIdentity),
            Self::ID_FQDN => name_text(data).map(Identity::Fqdn),
            Self::ID_RFC822_ADDR => name_text(data).map(Identity::Email),
            Self::ID_DER_ASN1_DN => match parse_dn(data) {
                Some(_) => Ok(Identity::Dn(data.to_vec())),
                None => Err(AuthError::MalformedIdentity),
            },
            Self::ID_KEY_ID if !data.is_empty() => Ok(Identity::KeyId(data.to_vec())),
            Self::ID_KEY_ID => Err(AuthError::MalformedIdentity),
            other => Err(AuthError::UnsupportedIdType(other)),
        }
    }

    /// Parses a configured identity, in strongSwan's syntax:
    ///
    /// | text | identity |
    /// |---|---|
    /// | `@#0123ab` | KEY_ID, hex octets |
    /// | `@@user@example.com` | RFC822_ADDR |
    /// | `@host.example.com` | FQDN (never an IP or email) |
    /// | `C=CH, O=Org, CN=name` (anything with `=`) | DER_ASN1_DN |
    /// | `192.0.2.1`, `2001:db8::1` | IPV4_ADDR / IPV6_ADDR |
    /// | `user@example.com` | RFC822_ADDR |
    /// | `host.example.com` | FQDN |
    ///
    /// FQDN and email patterns may start with `*` (`*.example.com`,
    /// `*@example.com`) and DN values may be `*`; see [`matches`](Self::matches).
    pub fn parse_config(text: &str) -> Result<Self, AuthError> {
        let text = text.trim();
        if let Some(hex) = text.strip_prefix("@#") {
            return parse_hex(hex).map(Identity::KeyId);
        }
        if let Some(email) = text.strip_prefix("@@") {
            return config_text(email).map(Identity::Email);
        }
        if let Some(fqdn) = text.strip_prefix('@') {
            return config_text(fqdn).map(Identity::Fqdn);
        }
        if text.contains('=') {
            return encode_dn(text).map(Identity::Dn);
        }
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(ip.into());
        }
        if text.contains('@') {
            return config_text(text).map(Identity::Email);
        }
        config_text(text).map(Identity::Fqdn)
    }

    /// True when `presented` (what a peer sent, or what its certificate
    /// holds) satisfies this configured identity. Same type required.
    /// Addresses and KEY_IDs compare exactly; FQDNs and email addresses
    /// ignore ASCII case, and a configured leading `*` matches any
    /// non-empty prefix; DNs follow the rule in the `dn` module (per
    /// attribute, string type and ASCII case ignored, `*` values).
    pub fn matches(&self, presented: &Identity) -> bool {
        match (self, presented) {
            (Identity::Ipv4(a), Identity::Ipv4(b)) => a == b,
            (Identity::Ipv6(a), Identity::Ipv6(b)) => a == b,
            (Identity::Fqdn(pattern), Identity::Fqdn(name))
            | (Identity::Email(pattern), Identity::Email(name)) => text_matches(pattern, name),
            (Identity::Dn(pattern), Identity::Dn(name)) => {
                match (parse_dn(pattern), parse_dn(name)) {
                    (Some(p), Some(n)) => attributes_match(&p, &n, true),
                    _ => false,
                }
            }
            (Identity::KeyId(a), Identity::KeyId(b)) => a == b,
            _ => false,
        }
    }
}

/// FQDN / email comparison: ASCII case-insensitive, `*` prefix wildcard.
pub(crate) fn text_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_prefix('*') {
        Some(suffix) => {
            name.len() > suffix.len()
                && name
                    .get(name.len() - suffix.len()..)
                    .is_some_and(|tail| tail.eq_ignore_ascii_case(suffix))
        }
        None => pattern.eq_ignore_ascii_case(name),
    }
}

/// FQDN and RFC 822 identification data: non-empty printable ASCII, no
/// terminators or spaces (RFC 7296 §3.5: "MUST NOT contain any terminators").
fn name_text(data: &[u8]) -> Result<String, AuthError> {
    if data.is_empty() || !data.iter().all(u8::is_ascii_graphic) {
        return Err(AuthError::MalformedIdentity);
    }
    // All ASCII, so valid UTF-8.
    String::from_utf8(data.to_vec()).map_err(|_| AuthError::MalformedIdentity)
}

fn config_text(text: &str) -> Result<String, AuthError> {
    name_text(text.as_bytes())
        .map_err(|_| AuthError::InvalidIdentityConfig(format!("`{text}` is not a valid name")))
}

fn parse_hex(text: &str) -> Result<Vec<u8>, AuthError> {
    let invalid = || AuthError::InvalidIdentityConfig(format!("`{text}` is not hex octets"));
    if text.is_empty() || text.len() % 2 != 0 {
        return Err(invalid());
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(invalid)
}

impl From<IpAddr> for Identity {
    fn from(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(a) => Identity::Ipv4(a),
            IpAddr::V6(a) => Identity::Ipv6(a),
        }
    }
}

impl FromStr for Identity {
    type Err = AuthError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_config(s)
    }
}

impl fmt::Display for Identity {
    /// strongSwan's notation: addresses and names as text, a DN as
    /// `C=CH, O=Org, CN=name`, a KEY_ID as `@#` and hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Ipv4(a) => write!(f, "{a}"),
            Identity::Ipv6(a) => write!(f, "{a}"),
            Identity::Fqdn(s) | Identity::Email(s) => f.write_str(s),
            Identity::Dn(der) => match parse_dn(der) {
                Some(attributes) => f.write_str(&attributes_to_string(&attributes)),
                None => write!(f, "(invalid DN #{})", hex(der)),
            },
            Identity::KeyId(k) => write!(f, "@#{}", hex(k)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_syntax() {
        let cases = [
            ("192.0.2.1", Identity::Ipv4(Ipv4Addr::new(192, 0, 2, 1))),
            (
                "2001:db8::1",
                Identity::Ipv6("2001:db8::1".parse().unwrap()),
            ),
            (
                "moon.example.com",
                Identity::Fqdn("moon.example.com".into()),
            ),
            (
                "@moon.example.com",
                Identity::Fqdn("moon.example.com".into()),
            ),
            ("@192.0.2.1", Identity::Fqdn("192.0.2.1".into())),
            (
                "carol@example.com",
                Identity::Email("carol@example.com".into()),
            ),
            (
                "@@carol@example.com",
                Identity::Email("carol@example.com".into()),
            ),
            ("@#0a0B", Identity::KeyId(vec![0x0a, 0x0b])),
        ];
        for (text, expected) in cases {
            assert_eq!(Identity::parse_config(text).unwrap(), expected, "{text}");
        }
        let dn = Identity::parse_config("C=CH, O=Org, CN=name").unwrap();
        assert_eq!(dn.id_type(), Identity::ID_DER_ASN1_DN);
        assert_eq!(dn.to_string(), "C=CH, O=Org, CN=name");
        for bad in ["", "@", "@#", "@#abc", "@#zz", "a b", "Q=1", "CN=a, =b"] {
            assert!(Identity::parse_config(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn id_payload_round_trip() {
        let ids = [
            "192.0.2.1",
            "2001:db8::1",
            "moon.example.com",
            "carol@example.com",
            "C=CH, O=Org, CN=name",
            "@#01020304",
        ];
        let types = [1, 5, 2, 3, 9, 11];
        for (text, id_type) in ids.into_iter().zip(types) {
            let id: Identity = text.parse().unwrap();
            assert_eq!(id.id_type(), id_type);
            let rest = id.rest_of_id_payload();
            assert_eq!(&rest[..4], &[id_type, 0, 0, 0]);
            assert_eq!(&rest[4..], id.to_id_body().as_slice());
            assert_eq!(Identity::from_rest_of_id_payload(&rest).unwrap(), id);
            assert_eq!(Identity::from_id(id_type, &id.to_id_body()).unwrap(), id);
            assert_eq!(id.to_string().parse::<Identity>().unwrap(), id, "{text}");
        }
        assert_eq!(
            Identity::Ipv4(Ipv4Addr::new(10, 0, 0, 1)).to_id_body(),
            [10, 0, 0, 1]
        );
        assert_eq!(Identity::Fqdn("a.b".into()).to_id_body(), b"a.b");
    }

    #[test]
    fn malformed_id_data() {
        assert_eq!(
            Identity::from_id(1, &[1, 2, 3]),
            Err(AuthError::MalformedIdentity)
        );
        assert_eq!(
            Identity::from_id(5, &[0; 4]),
            Err(AuthError::MalformedIdentity)
        );
        assert_eq!(Identity::from_id(2, b""), Err(AuthError::MalformedIdentity));
        assert_eq!(
            Identity::from_id(2, b"a\0b"),
            Err(AuthError::MalformedIdentity)
        );
        assert_eq!(
            Identity::from_id(3, "ü@x".as_bytes()),
            Err(AuthError::MalformedIdentity)
        );
        assert_eq!(
            Identity::from_id(9, &[0x30, 0x01]),
            Err(AuthError::MalformedIdentity)
        );
        assert_eq!(
            Identity::from_id(11, &[]),
            Err(AuthError::MalformedIdentity)
        );
        assert_eq!(
            Identity::from_id(4, &[0; 8]),
            Err(AuthError::UnsupportedIdType(4))
        );
        assert_eq!(
            Identity::from_id(10, &[0; 8]),
            Err(AuthError::UnsupportedIdType(10))
        );
        assert_eq!(
            Identity::from_rest_of_id_payload(&[1, 0, 0]),
            Err(AuthError::MalformedIdentity)
        );
    }

    #[test]
    fn matching_rules() {
        let id = |s: &str| Identity::parse_config(s).unwrap();
        assert!(id("Moon.Example.COM").matches(&id("moon.example.com")));
        assert!(id("*.example.com").matches(&id("moon.example.com")));
        assert!(!id("*.example.com").matches(&id("example.com")));
        assert!(!id("*.example.com").matches(&id("moon.example.org")));
        assert!(id("*@example.com").matches(&id("carol@EXAMPLE.com")));
        assert!(!id("carol@example.com").matches(&id("dave@example.com")));
        assert!(id("192.0.2.1").matches(&id("192.0.2.1")));
        assert!(!id("192.0.2.1").matches(&id("192.0.2.2")));
        assert!(!id("192.0.2.1").matches(&id("@192.0.2.1")));
        assert!(id("C=CH, O=Org, CN=*").matches(&id("c=ch, o=org, cn=anything")));
        assert!(!id("C=CH, O=Org, CN=a").matches(&id("C=CH, O=Org, CN=b")));
        assert!(id("@#0102").matches(&id("@#0102")));
        assert!(!id("@#0102").matches(&id("@#0103")));
    }
}
