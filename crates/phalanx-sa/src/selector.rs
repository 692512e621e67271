//! Traffic selectors (RFC 4301 §4.4.1.1): address prefixes, port ranges and
//! the protocol, matched against the 5-tuple of a packet.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use phalanx_wire::IpProtocol;

/// Why a selector could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SelectorError {
    /// The prefix length exceeds the address width (32 for IPv4, 128 for
    /// IPv6).
    PrefixTooLong,
    /// The port range starts after it ends.
    EmptyPortRange,
}

impl fmt::Display for SelectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelectorError::PrefixTooLong => f.write_str("prefix length exceeds the address width"),
            SelectorError::EmptyPortRange => f.write_str("port range starts after it ends"),
        }
    }
}

impl std::error::Error for SelectorError {}

/// The address family of an address or prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AddressFamily {
    /// IPv4: 32-bit addresses.
    V4,
    /// IPv6: 128-bit addresses.
    V6,
}

impl AddressFamily {
    /// The family of `addr`.
    pub fn of(addr: IpAddr) -> AddressFamily {
        match addr {
            IpAddr::V4(_) => AddressFamily::V4,
            IpAddr::V6(_) => AddressFamily::V6,
        }
    }

    /// Address width in bits.
    pub fn bits(self) -> u8 {
        match self {
            AddressFamily::V4 => 32,
            AddressFamily::V6 => 128,
        }
    }
}

/// An address as a 128-bit integer: IPv4 in the low 32 bits. Only ever
/// compared within one family.
#[inline(always)]
pub(crate) fn addr_bits(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The network mask of a `len`-bit prefix in `family`, as in [`addr_bits`].
/// `len` must not exceed the family's width.
#[inline(always)]
pub(crate) fn prefix_mask(family: AddressFamily, len: u8) -> u128 {
    let width = u32::from(family.bits());
    let len = u32::from(len).min(width);
    if len == 0 {
        return 0;
    }
    // Shift within the family's width, then keep only that width.
    let all = if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    (all << (width - len)) & all
}

fn addr_from_bits(family: AddressFamily, bits: u128) -> IpAddr {
    match family {
        AddressFamily::V4 => IpAddr::V4(Ipv4Addr::from(bits as u32)),
        AddressFamily::V6 => IpAddr::V6(Ipv6Addr::from(bits)),
    }
}

/// An address prefix such as 192.0.2.0/24 (RFC 4301 §4.4.1.1 allows ranges;
/// prefixes are what IKEv2 narrowing and every real policy produce).
///
/// Host bits are zero: [`IpPrefix::new`] masks them.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpPrefix {
    addr: IpAddr,
    len: u8,
}

impl IpPrefix {
    /// The prefix `addr/len`, host bits cleared. Fails if `len` exceeds the
    /// width of `addr`'s family.
    pub fn new(addr: IpAddr, len: u8) -> Result<IpPrefix, SelectorError> {
        let family = AddressFamily::of(addr);
        if len > family.bits() {
            return Err(SelectorError::PrefixTooLong);
        }
        let masked = addr_bits(addr) & prefix_mask(family, len);
        Ok(IpPrefix {
            addr: addr_from_bits(family, masked),
            len,
        })
    }

    /// The single address `addr` (/32 or /128).
    pub fn host(addr: IpAddr) -> IpPrefix {
        IpPrefix {
            addr,
            len: AddressFamily::of(addr).bits(),
        }
    }

    /// 0.0.0.0/0: every IPv4 address.
    pub const ANY_V4: IpPrefix = IpPrefix {
        addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        len: 0,
    };

    /// ::/0: every IPv6 address.
    pub const ANY_V6: IpPrefix = IpPrefix {
        addr: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        len: 0,
    };

    /// The network address (host bits zero).
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length in bits.
    // A prefix always holds at least one address, so an `is_empty` would
    // be constant; `len` is the RFC name of the field.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u8 {
        self.len
    }

    /// The address family.
    pub fn family(&self) -> AddressFamily {
        AddressFamily::of(self.addr)
    }

    /// Whether `addr` lies inside this prefix. An IPv4 prefix never
    /// contains an IPv6 address and vice versa (IPv4-mapped IPv6 addresses
    /// included: they are IPv6 on the wire).
    pub fn contains(&self, addr: IpAddr) -> bool {
        let family = self.family();
        if AddressFamily::of(addr) != family {
            return false;
        }
        addr_bits(addr) & prefix_mask(family, self.len) == addr_bits(self.addr)
    }
}

impl fmt::Debug for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// An inclusive port range (RFC 4301 §4.4.1.1). For ICMP and ICMPv6 the
/// "ports" of a [`FlowKey`] are the message type and code.
///
/// A range whose `start` is after its `end` matches nothing; that is how
/// IKEv2 writes OPAQUE (RFC 7296 §3.13.1: start 65535, end 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortRange {
    /// First port in the range.
    pub start: u16,
    /// Last port in the range (inclusive).
    pub end: u16,
}

impl PortRange {
    /// Every port, 0..=65535.
    pub const ANY: PortRange = PortRange {
        start: 0,
        end: u16::MAX,
    };

    /// The range `start..=end`; fails if it is empty.
    pub fn new(start: u16, end: u16) -> Result<PortRange, SelectorError> {
        if start > end {
            return Err(SelectorError::EmptyPortRange);
        }
        Ok(PortRange { start, end })
    }

    /// Just `port`.
    pub const fn single(port: u16) -> PortRange {
        PortRange {
            start: port,
            end: port,
        }
    }

    /// Whether `port` is in the range.
    #[inline(always)]
    pub fn contains(&self, port: u16) -> bool {
        self.start <= port && port <= self.end
    }

    /// Whether this is 0..=65535.
    pub fn is_any(&self) -> bool {
        *self == PortRange::ANY
    }
}

/// The fields of a packet that selectors look at (RFC 4301 §4.4.1.1):
/// addresses, next-layer protocol and ports (ICMP: type and code).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Next-layer protocol (after IPv6 extension headers).
    pub protocol: IpProtocol,
    /// Source port; ICMP type; 0 when the protocol has none.
    pub src_port: u16,
    /// Destination port; ICMP code; 0 when the protocol has none.
    pub dst_port: u16,
}

impl From<phalanx_wire::ip::Flow> for FlowKey {
    fn from(flow: phalanx_wire::ip::Flow) -> FlowKey {
        FlowKey {
            src: flow.src,
            dst: flow.dst,
            protocol: flow.protocol,
            src_port: flow.src_port,
            dst_port: flow.dst_port,
        }
    }
}

/// One traffic selector: a packet matches when every field does (RFC 4301
/// §4.4.1). `protocol: None` is ANY. Source and destination must be of the
/// same family for anything to match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Selector {
    /// Source address prefix.
    pub src: IpPrefix,
    /// Destination address prefix.
    pub dst: IpPrefix,
    /// Next-layer protocol, or `None` for any.
    pub protocol: Option<IpProtocol>,
    /// Source ports (ICMP: type).
    pub src_ports: PortRange,
    /// Destination ports (ICMP: code).
    pub dst_ports: PortRange,
}

impl Selector {
    /// Every IPv4 packet.
    pub const ANY_V4: Selector = Selector::between(IpPrefix::ANY_V4, IpPrefix::ANY_V4);

    /// Every IPv6 packet.
    pub const ANY_V6: Selector = Selector::between(IpPrefix::ANY_V6, IpPrefix::ANY_V6);

    /// Any protocol and port from `src` to `dst`.
    pub const fn between(src: IpPrefix, dst: IpPrefix) -> Selector {
        Selector {
            src,
            dst,
            protocol: None,
            src_ports: PortRange::ANY,
            dst_ports: PortRange::ANY,
        }
    }

    /// Whether the packet described by `key` matches (RFC 4301 §4.4.1).
    pub fn matches(&self, key: &FlowKey) -> bool {
        self.src.contains(key.src)
            && self.dst.contains(key.dst)
            && self.protocol.is_none_or(|p| p == key.protocol)
            && self.src_ports.contains(key.src_port)
            && self.dst_ports.contains(key.dst_port)
    }

    /// The address family, or `None` when source and destination differ
    /// (such a selector matches nothing).
    pub fn family(&self) -> Option<AddressFamily> {
        let family = self.src.family();
        (family == self.dst.family()).then_some(family)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> IpAddr {
        IpAddr::V4(s.parse().expect("test address"))
    }

    fn v6(s: &str) -> IpAddr {
        IpAddr::V6(s.parse().expect("test address"))
    }

    #[test]
    fn prefix_masks_host_bits_and_validates_length() {
        let p = IpPrefix::new(v4("192.0.2.77"), 24).expect("valid");
        assert_eq!(p.addr(), v4("192.0.2.0"));
        assert_eq!(p.to_string(), "192.0.2.0/24");
        assert_eq!(
            IpPrefix::new(v4("1.2.3.4"), 33),
            Err(SelectorError::PrefixTooLong)
        );
        assert!(IpPrefix::new(v6("2001:db8::1"), 128).is_ok());
        assert_eq!(
            IpPrefix::new(v6("2001:db8::1"), 129),
            Err(SelectorError::PrefixTooLong)
        );
        let p6 = IpPrefix::new(v6("2001:db8:ffff::1"), 33).expect("valid");
        assert_eq!(p6.addr(), v6("2001:db8:8000::"));
    }

    #[test]
    fn prefix_contains_respects_family_and_length() {
        let p = IpPrefix::new(v4("10.1.0.0"), 16).expect("valid");
        assert!(p.contains(v4("10.1.255.255")));
        assert!(!p.contains(v4("10.2.0.0")));
        assert!(!p.contains(v6("::ffff:10.1.0.1")));
        assert!(IpPrefix::ANY_V4.contains(v4("255.255.255.255")));
        assert!(!IpPrefix::ANY_V4.contains(v6("::")));
        assert!(IpPrefix::ANY_V6.contains(v6("ffff::1")));
        assert!(!IpPrefix::ANY_V6.contains(v4("0.0.0.0")));
        let host = IpPrefix::host(v4("10.1.2.3"));
        assert_eq!(host.len(), 32);
        assert!(host.contains(v4("10.1.2.3")));
        assert!(!host.contains(v4("10.1.2.4")));
    }

    #[test]
    fn masks_are_exact() {
        assert_eq!(prefix_mask(AddressFamily::V4, 0), 0);
        assert_eq!(prefix_mask(AddressFamily::V4, 1), 0x8000_0000);
        assert_eq!(prefix_mask(AddressFamily::V4, 32), 0xffff_ffff);
        assert_eq!(prefix_mask(AddressFamily::V6, 128), u128::MAX);
        assert_eq!(prefix_mask(AddressFamily::V6, 1), 1 << 127);
    }

    #[test]
    fn port_ranges_are_inclusive() {
        let r = PortRange::new(1000, 2000).expect("valid");
        assert!(r.contains(1000) && r.contains(2000) && !r.contains(999) && !r.contains(2001));
        assert_eq!(PortRange::new(2, 1), Err(SelectorError::EmptyPortRange));
        assert!(PortRange::single(53).contains(53) && !PortRange::single(53).contains(54));
        let opaque = PortRange {
            start: u16::MAX,
            end: 0,
        };
        assert!(!opaque.contains(0) && !opaque.contains(u16::MAX));
        assert!(PortRange::ANY.is_any());
    }

    #[test]
    fn flow_key_from_wire_flow() {
        let flow = phalanx_wire::ip::Flow {
            src: v4("10.0.0.1"),
            dst: v6("2001:db8::1"),
            protocol: IpProtocol::ICMP,
            src_port: 8,
            dst_port: 0,
        };
        let key = FlowKey::from(flow);
        assert_eq!(
            (key.src, key.dst, key.protocol),
            (flow.src, flow.dst, flow.protocol)
        );
        assert_eq!((key.src_port, key.dst_port), (8, 0));
    }

    #[test]
    fn selector_matches_every_field() {
        let sel = Selector {
            src: IpPrefix::new(v4("10.0.0.0"), 8).expect("valid"),
            dst: IpPrefix::new(v4("192.0.2.0"), 24).expect("valid"),
            protocol: Some(IpProtocol::TCP),
            src_ports: PortRange::ANY,
            dst_ports: PortRange::single(443),
        };
        let key = FlowKey {
            src: v4("10.9.8.7"),
            dst: v4("192.0.2.1"),
            protocol: IpProtocol::TCP,
            src_port: 40000,
            dst_port: 443,
        };
        assert!(sel.matches(&key));
        assert!(!sel.matches(&FlowKey {
            protocol: IpProtocol::UDP,
            ..key
        }));
        assert!(!sel.matches(&FlowKey {
            dst_port: 80,
            ..key
        }));
        assert!(!sel.matches(&FlowKey {
            src: v4("11.0.0.1"),
            ..key
        }));
        assert!(!sel.matches(&FlowKey {
            dst: v4("192.0.3.1"),
            ..key
        }));
        assert!(Selector::ANY_V4.matches(&key));
        assert!(!Selector::ANY_V6.matches(&key));
        assert_eq!(sel.family(), Some(AddressFamily::V4));
        let mixed = Selector::between(IpPrefix::ANY_V4, IpPrefix::ANY_V6);
        assert_eq!(mixed.family(), None);
        assert!(!mixed.matches(&key));
    }
}
