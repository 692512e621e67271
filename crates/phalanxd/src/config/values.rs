//! Parsers for the value syntaxes of the file: hex keys, address
//! prefixes, protocols and port ranges. Each returns a message on error;
//! the caller adds the place.

use std::net::IpAddr;
use std::time::Duration;

use phalanx_ike::ts::ts_from_prefix;
use phalanx_sa::{IpPrefix, PortRange};
use phalanx_wire::ike::{TrafficSelector, TsAddresses};
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

/// A duration: a whole number with a unit, `ms`, `s`, `m`, `h` or `d`
/// (`"500ms"`, `"30s"`, `"4h"`); a bare number is seconds.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "{text:?} is not a duration (write e.g. \"500ms\", \"30s\", \"10m\", \"4h\", \"1d\")"
        )
    };
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    n.checked_mul(unit_ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is too long a duration"))
}

/// A traffic selector in strongSwan syntax (RFC 7296 §3.13.1): a prefix
/// (`"10.1.0.0/24"`), an address, or an inclusive range
/// (`"10.0.0.1-10.0.0.9"`), optionally followed by `[proto]` or
/// `[proto/port]` / `[proto/first-last]` (`"10.1.0.0/24[tcp/80]"`).
/// Ports are only allowed with TCP, UDP and SCTP.
pub(crate) fn traffic_selector(text: &str) -> Result<TrafficSelector, String> {
    let (addresses, suffix) = match text.split_once('[') {
        None => (text.trim(), None),
        Some((a, rest)) => {
            let inner = rest.strip_suffix(']').ok_or_else(|| {
                format!("{text:?}: the protocol suffix must end with ']' (e.g. \"10.1.0.0/24[tcp/80]\")")
            })?;
            (a.trim(), Some(inner))
        }
    };
    let (protocol, ports) = match suffix {
        None => (IpProtocol(0), PortRange::ANY),
        Some(inner) => ts_protocol(text, inner)?,
    };
    let addresses = ts_addresses(addresses)?;
    Ok(TrafficSelector {
        ip_protocol: protocol,
        start_port: ports.start,
        end_port: ports.end,
        addresses,
    })
}

/// The address part of a traffic selector.
fn ts_addresses(text: &str) -> Result<TsAddresses, String> {
    let Some((first, last)) = text.split_once('-') else {
        let p = prefix(text)?;
        return Ok(ts_from_prefix(p, IpProtocol(0), 0, u16::MAX).addresses);
    };
    let bad = || format!("{text:?} is not an address range (write \"10.0.0.1-10.0.0.9\")");
    let first: IpAddr = first.trim().parse().map_err(|_| bad())?;
    let last: IpAddr = last.trim().parse().map_err(|_| bad())?;
    match (first, last) {
        (IpAddr::V4(start), IpAddr::V4(end)) if start <= end => Ok(TsAddresses::V4 { start, end }),
        (IpAddr::V6(start), IpAddr::V6(end)) if start <= end => Ok(TsAddresses::V6 { start, end }),
        (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => {
            Err(format!("{text:?}: the range is empty (first > last)"))
        }
        _ => Err(format!(
            "{text:?}: both ends of a range must be of one address family"
        )),
    }
}

/// `proto` or `proto/ports` of a traffic selector.
fn ts_protocol(text: &str, inner: &str) -> Result<(IpProtocol, PortRange), String> {
    let (proto, ports_text) = match inner.split_once('/') {
        None => (inner, None),
        Some((p, q)) => (p, Some(q)),
    };
    let protocol = protocol(&Word::Text(proto.trim().to_owned()))?.unwrap_or(IpProtocol(0));
    let Some(ports_text) = ports_text.map(str::trim).filter(|q| !q.is_empty()) else {
        return Ok((protocol, PortRange::ANY));
    };
    let range = if ports_text == "%any" {
        PortRange::ANY
    } else {
        ports(&Word::Text(ports_text.to_owned()))?
    };
    let has_ports = matches!(
        protocol,
        IpProtocol::TCP | IpProtocol::UDP | IpProtocol::SCTP
    );
    if !range.is_any() && !has_ports {
        return Err(format!(
            "{text:?}: ports need protocol tcp, udp or sctp (RFC 7296 §3.13.1)"
        ));
    }
    Ok((protocol, range))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(duration("4h").unwrap(), Duration::from_secs(14_400));
        assert_eq!(duration("1d").unwrap(), Duration::from_secs(86_400));
        assert_eq!(duration("0s").unwrap(), Duration::ZERO);
        for bad in ["", "h", "1.5h", "4 hours", "-1s", "10y"] {
            assert!(
                duration(bad).unwrap_err().contains("not a duration"),
                "{bad}"
            );
        }
    }

    #[test]
    fn traffic_selectors() {
        let ts = traffic_selector("10.1.0.0/24").unwrap();
        assert_eq!(
            ts.addresses,
            TsAddresses::V4 {
                start: "10.1.0.0".parse().unwrap(),
                end: "10.1.0.255".parse().unwrap()
            }
        );
        assert_eq!(
            (ts.ip_protocol, ts.start_port, ts.end_port),
            (IpProtocol(0), 0, 65535)
        );
        let ts = traffic_selector("10.0.0.1-10.0.0.9[tcp/80]").unwrap();
        assert_eq!(
            (ts.ip_protocol, ts.start_port, ts.end_port),
            (IpProtocol::TCP, 80, 80)
        );
        let ts = traffic_selector("fd01::/64[udp/1000-2000]").unwrap();
        assert!(matches!(ts.addresses, TsAddresses::V6 { .. }));
        assert_eq!((ts.start_port, ts.end_port), (1000, 2000));
        let ts = traffic_selector("192.0.2.7[icmp]").unwrap();
        assert_eq!(ts.ip_protocol, IpProtocol::ICMP);
        assert!(traffic_selector("10.0.0.9-10.0.0.1")
            .unwrap_err()
            .contains("empty"));
        assert!(traffic_selector("10.0.0.1-fd01::1")
            .unwrap_err()
            .contains("one address family"));
        assert!(traffic_selector("10.1.0.0/24[icmp/8]")
            .unwrap_err()
            .contains("ports need"));
        assert!(traffic_selector("10.1.0.0/24[tcp/80")
            .unwrap_err()
            .contains("']'"));
        assert!(traffic_selector("10.1.0.0/40")
            .unwrap_err()
            .contains("at most 32"));
        assert!(traffic_selector("10.1.0.0/24[tcpp]")
            .unwrap_err()
            .contains("unknown protocol"));
    }

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
