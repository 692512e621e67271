//! `[[pool]]`: virtual-IP pools for End-Users (RFC 7296 §2.19), named by
//! a connection's `pools`.
//!
//! ```toml
//! [[pool]]
//! name = "rw4"
//! addrs = "10.3.0.0/24"          # or "10.3.0.10-10.3.0.99"
//! dns = ["10.1.0.53"]
//! ```
//!
//! A prefix hands out its host addresses: not the network address, and
//! for IPv4 not the broadcast address either (strongSwan does the same).

use std::collections::HashSet;
use std::net::IpAddr;

use phalanx_ike::config::PoolConfig;
use serde::Deserialize;
use toml::Spanned;

use super::{values, ConfigError, Source};

/// One `[[pool]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPool {
    pub(crate) name: Spanned<String>,
    pub(crate) addrs: Spanned<String>,
    #[serde(default)]
    pub(crate) dns: Vec<Spanned<String>>,
}

/// Every pool, checked; names are unique.
pub(crate) fn all(
    source: &Source<'_>,
    raw: &[Spanned<RawPool>],
) -> Result<Vec<PoolConfig>, ConfigError> {
    let mut names = HashSet::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, spanned) in raw.iter().enumerate() {
        let raw = spanned.get_ref();
        let field = |f: &str| format!("pool[{i}].{f}");
        let name = raw.name.get_ref();
        if name.is_empty() || !names.insert(name.clone()) {
            let msg = format!("pool names must be unique and not empty ({name:?})");
            return Err(source.error(raw.name.span(), field("name"), msg));
        }
        let (first, last) = range(raw.addrs.get_ref())
            .map_err(|m| source.error(raw.addrs.span(), field("addrs"), m))?;
        let mut dns = Vec::with_capacity(raw.dns.len());
        for (n, server) in raw.dns.iter().enumerate() {
            let addr: IpAddr = server.get_ref().parse().map_err(|_| {
                let msg = format!("{:?} is not an IP address", server.get_ref());
                source.error(server.span(), format!("pool[{i}].dns[{n}]"), msg)
            })?;
            dns.push(addr);
        }
        out.push(PoolConfig {
            name: name.clone(),
            first,
            last,
            dns,
        });
    }
    Ok(out)
}

/// `first-last` or a prefix's host addresses.
fn range(text: &str) -> Result<(IpAddr, IpAddr), String> {
    if let Some((a, b)) = text.split_once('-') {
        let parse = |s: &str| {
            s.trim()
                .parse::<IpAddr>()
                .map_err(|_| format!("{s:?} is not an IP address"))
        };
        let (first, last) = (parse(a)?, parse(b)?);
        let ordered = match (first, last) {
            (IpAddr::V4(f), IpAddr::V4(l)) => f <= l,
            (IpAddr::V6(f), IpAddr::V6(l)) => f <= l,
            _ => return Err("both ends of a range must be of one family".to_owned()),
        };
        if !ordered {
            return Err(format!("{last} is below {first}: the range is empty"));
        }
        return Ok((first, last));
    }
    let prefix = values::prefix(text)?;
    hosts(prefix.addr(), prefix.len())
        .ok_or_else(|| format!("{text:?} holds no host address to hand out"))
}

/// The first and last host address of `addr/len`.
fn hosts(addr: IpAddr, len: u8) -> Option<(IpAddr, IpAddr)> {
    match addr {
        IpAddr::V4(a) => {
            let base = u32::from(a);
            let span = u32::MAX.checked_shr(u32::from(len)).unwrap_or(0);
            let (first, last) = match len {
                32 => (base, base),
                31 => (base, base | span),
                _ => (base + 1, (base | span) - 1),
            };
            (first <= last).then(|| (IpAddr::V4(first.into()), IpAddr::V4(last.into())))
        }
        IpAddr::V6(a) => {
            let base = u128::from(a);
            let span = u128::MAX.checked_shr(u32::from(len)).unwrap_or(0);
            let first = if len == 128 { base } else { base + 1 };
            let last = base | span;
            (first <= last).then(|| (IpAddr::V6(first.into()), IpAddr::V6(last.into())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ranges_and_prefixes() {
        assert_eq!(range("10.3.0.0/24"), Ok((ip("10.3.0.1"), ip("10.3.0.254"))));
        assert_eq!(
            range("10.3.0.10-10.3.0.99"),
            Ok((ip("10.3.0.10"), ip("10.3.0.99")))
        );
        assert_eq!(range("10.3.0.7/32"), Ok((ip("10.3.0.7"), ip("10.3.0.7"))));
        assert_eq!(range("10.3.0.6/31"), Ok((ip("10.3.0.6"), ip("10.3.0.7"))));
        assert_eq!(
            range("fd00:3::/64"),
            Ok((ip("fd00:3::1"), ip("fd00:3::ffff:ffff:ffff:ffff")))
        );
        assert!(range("10.3.0.9-10.3.0.1").unwrap_err().contains("empty"));
        assert!(range("10.3.0.1-fd00::1")
            .unwrap_err()
            .contains("one family"));
        assert!(range("10.3.0.0/33").is_err());
        assert!(range("pool").is_err());
    }
}
