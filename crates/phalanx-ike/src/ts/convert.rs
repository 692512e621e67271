//! From IKE traffic selectors to data-plane [`Selector`]s and back.
//!
//! [`to_selectors`] makes the selectors of packets travelling from the
//! `src` side to the `dst` side: one per pair of a source and a
//! destination selector of one family whose protocols agree, times the
//! prefixes covering each address range. The address cover is exact
//! ([`prefixes_of_range`]: the fewest prefixes whose union is the range).
//! Ports are exact for the protocols that have them; where the data plane
//! cannot say what the selector says, the selector is widened, never
//! narrowed, so no negotiated packet is refused:
//!
//! - OPAQUE ports (RFC 7296 §3.13.1) become "any": the data plane sees
//!   port 0 where the ports are unavailable (non-first fragments).
//! - ICMP and ICMPv6: RFC 4301 §4.4.1.1 puts the type in the high octet and
//!   the code in the low octet of one 16-bit field; the data plane matches
//!   the type as the source port and the code as the destination port
//!   ([`phalanx_wire::ip::Flow`]). The field is read from the selector of
//!   the side that sends the ICMP message, the source (as Linux XFRM and
//!   strongSwan do); a range that spans several types keeps the types and
//!   allows every code.
//! - Mobility Header: the MH type is the high octet, matched as the source
//!   port.
//! - Other protocols have no ports (the data plane sees 0): "any".

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use phalanx_sa::{IpPrefix, PortRange, Selector};
use phalanx_wire::ike::{TrafficSelector, TsAddresses};
use phalanx_wire::IpProtocol;

use super::{intersect_protocol, AddrRange, TsError, MAX_SELECTORS_PER_SA};

/// The selector of exactly `prefix`, with protocol and port range.
pub fn ts_from_prefix(
    prefix: IpPrefix,
    ip_protocol: IpProtocol,
    start_port: u16,
    end_port: u16,
) -> TrafficSelector {
    let addresses = match prefix.addr() {
        IpAddr::V4(start) => {
            let host = u32::MAX.checked_shr(u32::from(prefix.len())).unwrap_or(0);
            TsAddresses::V4 {
                start,
                end: Ipv4Addr::from(u32::from(start) | host),
            }
        }
        IpAddr::V6(start) => {
            let host = u128::MAX.checked_shr(u32::from(prefix.len())).unwrap_or(0);
            TsAddresses::V6 {
                start,
                end: Ipv6Addr::from(u128::from(start) | host),
            }
        }
    };
    TrafficSelector {
        ip_protocol,
        start_port,
        end_port,
        addresses,
    }
}

/// The fewest prefixes whose union is exactly `start..=end` (both of one
/// family); empty when the families differ or `start > end`. At most 62
/// prefixes for IPv4, 254 for IPv6.
pub fn prefixes_of_range(start: IpAddr, end: IpAddr) -> Vec<IpPrefix> {
    let range = match (start, end) {
        (IpAddr::V4(s), IpAddr::V4(e)) => AddrRange {
            v6: false,
            start: u32::from(s).into(),
            end: u32::from(e).into(),
        },
        (IpAddr::V6(s), IpAddr::V6(e)) => AddrRange {
            v6: true,
            start: u128::from(s),
            end: u128::from(e),
        },
        _ => return Vec::new(),
    };
    cover(&range)
}

/// The last address of the aligned block of 2^`bits` addresses at `at`.
fn block_end(at: u128, bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        at | ((1u128 << bits) - 1)
    }
}

/// The exact minimal prefix cover: at each step the largest aligned block
/// that starts at the cursor and stays inside the range.
fn cover(range: &AddrRange) -> Vec<IpPrefix> {
    let width: u32 = if range.v6 { 128 } else { 32 };
    let mut out = Vec::new();
    let mut at = range.start;
    while at <= range.end {
        let mut bits = at.trailing_zeros().min(width);
        while block_end(at, bits) > range.end {
            bits -= 1;
        }
        out.push(prefix(range.v6, at, width - bits));
        match block_end(at, bits).checked_add(1) {
            Some(next) if block_end(at, bits) < range.end => at = next,
            _ => break,
        }
    }
    out
}

/// The prefix `bits/len` of the family; `len` is at most the width.
fn prefix(v6: bool, bits: u128, len: u32) -> IpPrefix {
    let addr = if v6 {
        IpAddr::V6(Ipv6Addr::from(bits))
    } else {
        IpAddr::V4(Ipv4Addr::from(u32::try_from(bits).unwrap_or(u32::MAX)))
    };
    // `len` is `width - bits` with `bits <= width`, so it fits both the u8
    // and the family: `new` cannot fail; the host fallback is never taken.
    let len = u8::try_from(len).unwrap_or(u8::MAX);
    IpPrefix::new(addr, len).unwrap_or(IpPrefix::host(addr))
}

/// Whether the protocol carries ports in its first four octets.
fn has_ports(protocol: IpProtocol) -> bool {
    matches!(
        protocol,
        IpProtocol::TCP
            | IpProtocol::UDP
            | IpProtocol::SCTP
            | IpProtocol::DCCP
            | IpProtocol::UDPLITE
    )
}

fn is_icmp(protocol: IpProtocol) -> bool {
    matches!(protocol, IpProtocol::ICMP | IpProtocol::ICMPV6)
}

/// A TS port field as a data-plane range; OPAQUE (and any empty range)
/// widened to "any" (module doc).
fn port_range(ts: &TrafficSelector) -> PortRange {
    PortRange::new(ts.start_port, ts.end_port).unwrap_or(PortRange::ANY)
}

/// The (source, destination) port ranges for packets from `src` to `dst`
/// under `protocol` (module doc).
fn ports(
    protocol: Option<IpProtocol>,
    src: &TrafficSelector,
    dst: &TrafficSelector,
) -> (PortRange, PortRange) {
    match protocol {
        None => (port_range(src), port_range(dst)),
        Some(p) if has_ports(p) => (port_range(src), port_range(dst)),
        Some(p) if is_icmp(p) => type_and_code(port_range(src)),
        Some(IpProtocol::MOBILITY) => {
            let field = port_range(src);
            let types = PortRange {
                start: field.start >> 8,
                end: field.end >> 8,
            };
            (types, PortRange::ANY)
        }
        Some(_) => (PortRange::ANY, PortRange::ANY),
    }
}

/// RFC 4301 §4.4.1.1: type in the high octet, code in the low octet.
fn type_and_code(field: PortRange) -> (PortRange, PortRange) {
    if field.is_any() {
        return (PortRange::ANY, PortRange::ANY);
    }
    let types = PortRange {
        start: field.start >> 8,
        end: field.end >> 8,
    };
    if types.start == types.end {
        let codes = PortRange {
            start: field.start & 0xff,
            end: field.end & 0xff,
        };
        return (types, codes);
    }
    (types, PortRange::ANY)
}

/// The data-plane selectors of packets from the `src` selectors to the
/// `dst` selectors (module doc): outbound is `to_selectors(local, remote)`,
/// inbound `to_selectors(remote, local)`. Duplicates are dropped.
///
/// Errors: [`TsError::TooManySelectors`] past [`MAX_SELECTORS_PER_SA`].
pub fn to_selectors(
    src: &[TrafficSelector],
    dst: &[TrafficSelector],
) -> Result<Vec<Selector>, TsError> {
    let mut out: Vec<Selector> = Vec::new();
    for s in src {
        for d in dst {
            let (rs, rd) = (AddrRange::of(s), AddrRange::of(d));
            let Some(protocol) = intersect_protocol(s.ip_protocol, d.ip_protocol) else {
                continue;
            };
            let protocol = (protocol.0 != 0).then_some(protocol);
            let (src_ports, dst_ports) = ports(protocol, s, d);
            if rs.v6 != rd.v6 {
                continue;
            }
            let (src_prefixes, dst_prefixes) = (cover(&rs), cover(&rd));
            if out.len() + src_prefixes.len() * dst_prefixes.len() > MAX_SELECTORS_PER_SA {
                return Err(TsError::TooManySelectors);
            }
            for src in &src_prefixes {
                for dst in &dst_prefixes {
                    let sel = Selector {
                        src: *src,
                        dst: *dst,
                        protocol,
                        src_ports,
                        dst_ports,
                    };
                    if !out.contains(&sel) {
                        out.push(sel);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The (source, destination) traffic selectors of a data-plane selector:
/// exact, except an ICMP type range with a partial code range, which
/// becomes every code of those types.
pub fn from_selector(sel: &Selector) -> (TrafficSelector, TrafficSelector) {
    let protocol = sel.protocol.unwrap_or(IpProtocol(0));
    let (src_ports, dst_ports) = match sel.protocol {
        Some(p) if is_icmp(p) => (icmp_field(sel.src_ports, sel.dst_ports), PortRange::ANY),
        Some(IpProtocol::MOBILITY) => (mh_field(sel.src_ports), PortRange::ANY),
        _ => (sel.src_ports, sel.dst_ports),
    };
    let ts = |prefix: IpPrefix, ports: PortRange| {
        ts_from_prefix(prefix, protocol, ports.start, ports.end)
    };
    (ts(sel.src, src_ports), ts(sel.dst, dst_ports))
}

/// The 16-bit ICMP field of a type range and a code range.
fn icmp_field(types: PortRange, codes: PortRange) -> PortRange {
    if types.is_any() && codes.is_any() {
        return PortRange::ANY;
    }
    let (t0, t1) = (types.start.min(0xff), types.end.min(0xff));
    if t0 == t1 {
        return PortRange {
            start: (t0 << 8) | codes.start.min(0xff),
            end: (t1 << 8) | codes.end.min(0xff),
        };
    }
    PortRange {
        start: t0 << 8,
        end: (t1 << 8) | 0xff,
    }
}

/// The 16-bit field of an MH type range.
fn mh_field(types: PortRange) -> PortRange {
    if types.is_any() {
        return PortRange::ANY;
    }
    PortRange {
        start: types.start.min(0xff) << 8,
        end: (types.end.min(0xff) << 8) | 0xff,
    }
}
