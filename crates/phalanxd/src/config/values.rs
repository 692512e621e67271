//! Parsers for the value syntaxes of the file: hex keys, address
//! prefixes, protocols and port ranges. Each returns a message on error;
//! the caller adds the place.

use std::net::IpAddr;

use phalanx_sa::{IpPrefix, PortRange};
use phalanx_wire::IpProtocol;
use zeroize::Zeroizing;

use super::raw::Word;

/// Hex key material; `:` and `_` separators and a `0x` prefix allowed.
pub(crate) fn hex_key(text: &str) -> Result<Zeroizing<Vec<u8>>, String> {
    let body = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    let digits: Zeroizing<String> = Zeroizing::new(
        body.chars()
            .filter(|c| !matches!(c, ':' | '_' | ' '))
            .collect(),
    );
    hex::decode(digits.as_bytes())
        .map(Zeroizing::new)
        .map_err(|e| format!("not a hex key: {e}"))
}

/// An address (a host prefix) or `addr/len`.
pub(crate) fn prefix(text: &str) -> Result<IpPrefix, String> {
    let bad = || {
        format!("{text:?} is not an address prefix (write \"10.1.0.0/24\" or \"2001:db8::/32\")")
    };
    match text.split_once('/') {
        None => text
            .parse::<IpAddr>()
            .map(IpPrefix::host)
            .map_err(|_| bad()),
        Some((addr, len)) => {
            let addr: IpAddr = addr.parse().map_err(|_| bad())?;
            let len: u8 = len.parse().map_err(|_| bad())?;
            IpPrefix::new(addr, len).map_err(|_| {
                let max = if addr.is_ipv4() { 32 } else { 128 };
                format!("prefix length {len} too long for {addr} (at most {max})")
            })
        }
    }
}

/// An address with a prefix length, for an interface (`10.1.0.1/24`).
pub(crate) fn interface_address(text: &str) -> Result<(IpAddr, u8), String> {
    let bad = || format!("{text:?} is not an interface address (write \"10.1.0.1/24\")");
    let (addr, len) = text.split_once('/').ok_or_else(bad)?;
    let addr: IpAddr = addr.parse().map_err(|_| bad())?;
    let len: u8 = len.parse().map_err(|_| bad())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if len > max {
        return Err(format!("prefix length {len} too long (at most {max})"));
    }
    Ok((addr, len))
}

/// A protocol: `any`, a name, or a number 0..=255. `None` is any.
pub(crate) fn protocol(word: &Word) -> Result<Option<IpProtocol>, String> {
    match word {
        Word::Number(n) => u8::try_from(*n)
            .map(|p| Some(IpProtocol(p)))
            .map_err(|_| format!("protocol number {n} out of range 0..=255")),
        Word::Text(text) => match text.to_ascii_lowercase().as_str() {
            "any" => Ok(None),
            "tcp" => Ok(Some(IpProtocol::TCP)),
            "udp" => Ok(Some(IpProtocol::UDP)),
            "icmp" => Ok(Some(IpProtocol::ICMP)),
            "icmpv6" | "ipv6-icmp" => Ok(Some(IpProtocol::ICMPV6)),
            "sctp" => Ok(Some(IpProtocol::SCTP)),
            "gre" => Ok(Some(IpProtocol(47))),
            other => other.parse::<u8>().map(|p| Some(IpProtocol(p))).map_err(|_| {
                format!(
                    "unknown protocol {text:?}; expected one of any, tcp, udp, icmp, icmpv6, sctp, gre or a number"
                )
            }),
        },
    }
}

/// A port range: `any`, a port, or `first-last`.
pub(crate) fn ports(word: &Word) -> Result<PortRange, String> {
    let port = |n: i64| u16::try_from(n).map_err(|_| format!("port {n} out of range 0..=65535"));
    let text_port = |s: &str| {
        s.trim()
            .parse::<i64>()
            .map_err(|_| format!("{s:?} is not a port"))
            .and_then(port)
    };
    match word {
        Word::Number(n) => port(*n).map(PortRange::single),
        Word::Text(text) if text.eq_ignore_ascii_case("any") => Ok(PortRange::ANY),
        Word::Text(text) => match text.split_once('-') {
            None => text_port(text).map(PortRange::single),
            Some((first, last)) => {
                let (first, last) = (text_port(first)?, text_port(last)?);
                PortRange::new(first, last)
                    .map_err(|_| format!("port range {first}-{last} is empty (first > last)"))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_prefixes_protocols_ports() {
        assert_eq!(hex_key("0x0a:0B_0c").unwrap().as_slice(), &[10, 11, 12]);
        assert!(hex_key("abc").is_err());
        let p = prefix("10.1.0.5/24").unwrap();
        assert_eq!(p.to_string(), "10.1.0.0/24");
        assert_eq!(prefix("2001:db8::1").unwrap().len(), 128);
        assert!(prefix("10.1.0.0/33").unwrap_err().contains("at most 32"));
        assert!(prefix("10.1.0/24").is_err());
        assert_eq!(interface_address("10.0.0.1/24").unwrap().1, 24);
        assert!(interface_address("10.0.0.1").is_err());
        assert_eq!(
            protocol(&Word::Text("TCP".into())).unwrap(),
            Some(IpProtocol::TCP)
        );
        assert_eq!(protocol(&Word::Text("any".into())).unwrap(), None);
        assert_eq!(protocol(&Word::Number(50)).unwrap(), Some(IpProtocol::ESP));
        assert!(protocol(&Word::Number(256)).is_err());
        assert!(protocol(&Word::Text("tcpp".into())).is_err());
        assert_eq!(ports(&Word::Number(80)).unwrap(), PortRange::single(80));
        assert_eq!(ports(&Word::Text("any".into())).unwrap(), PortRange::ANY);
        assert_eq!(
            ports(&Word::Text("1000-2000".into())).unwrap(),
            PortRange::new(1000, 2000).unwrap()
        );
        assert!(ports(&Word::Text("2000-1000".into()))
            .unwrap_err()
            .contains("empty"));
        assert!(ports(&Word::Number(70000)).is_err());
    }
}
