//! The IP-header work shared by ESP and AH: reading what tunnel mode copies
//! from an inner header, building the outer header, finding where transport
//! mode splices its header in, and fixing lengths and checksums after a
//! splice. All over `phalanx-wire` views.

use core::net::IpAddr;

use phalanx_wire::ipv6::{ipsec_insertion_point, upper_layer};
use phalanx_wire::{ip_version, IpProtocol, Ipv4Packet, Ipv6Packet, Ipv6Repr};

use crate::drop::DropReason;
use phalanx_wire::ipv4::HEADER_LEN as IPV4_HEADER_LEN;
use phalanx_wire::ipv6::HEADER_LEN as IPV6_HEADER_LEN;

use crate::limits::{MAX_IP_LEN, OUTER_TTL};

pub(crate) mod fixed_v4;

/// IP version: `phalanx_wire`'s, with what ESP and AH need to know about it.
pub(crate) use phalanx_wire::IpVersion as Family;

/// The per-version facts of ESP and AH processing.
pub(crate) trait FamilyExt: Sized {
    /// The version of `packet` from its first nibble, if it is 4 or 6.
    fn of(packet: &[u8]) -> Option<Self>;
    /// The family of an address.
    fn of_addr(addr: IpAddr) -> Self;
    /// Length of the fixed header.
    fn header_len(self) -> usize;
    /// The protocol number of this family as the inner header of tunnel
    /// mode (RFC 4303 §2.6: 4 for IPv4, 41 for IPv6).
    fn tunnel_protocol(self) -> IpProtocol;
}

impl FamilyExt for Family {
    fn of(packet: &[u8]) -> Option<Family> {
        ip_version(packet).ok()
    }

    fn of_addr(addr: IpAddr) -> Family {
        match addr {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    fn header_len(self) -> usize {
        match self {
            Family::V4 => IPV4_HEADER_LEN,
            Family::V6 => IPV6_HEADER_LEN,
        }
    }

    fn tunnel_protocol(self) -> IpProtocol {
        match self {
            Family::V4 => IpProtocol::IPV4,
            Family::V6 => IpProtocol::IPV6,
        }
    }
}

/// What tunnel mode copies from the inner header into the outer one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InnerHeader {
    /// Inner IP version.
    pub(crate) family: Family,
    /// IPv4 TOS or IPv6 Traffic Class: DSCP (RFC 4301 §5.1.2.1) and ECN
    /// (RFC 6040 §4.1 normal mode) are copied as one octet.
    pub(crate) tos: u8,
    /// IPv4 DF, copied (RFC 4301 §8.1 "copy" option); false for IPv6.
    pub(crate) dont_frag: bool,
    /// Length of the IP packet by its own length field.
    pub(crate) len: usize,
}

/// What tunnel mode reads from an IPv4 packet, and its header length.
/// The packet is checked by `Ipv4Packet::new_checked`; the fields are then
/// read through a view over the fixed header, whose offsets the compiler
/// checks once.
fn inner_v4(packet: &[u8]) -> Option<(InnerHeader, usize)> {
    let header_len = Ipv4Packet::new_checked(packet).ok()?.header_len();
    let ip = Ipv4Packet::new_unchecked(&fixed_v4::header(packet)?[..]);
    let inner = InnerHeader {
        family: Family::V4,
        tos: ip.dscp_ecn(),
        dont_frag: ip.dont_frag(),
        len: usize::from(ip.total_len()),
    };
    Some((inner, header_len))
}

/// Reads the inner packet of tunnel mode. `None` when it is not a whole,
/// consistent IPv4 or IPv6 packet.
pub(crate) fn inner_header(packet: &[u8]) -> Option<InnerHeader> {
    match Family::of(packet)? {
        Family::V4 => inner_v4(packet).map(|(inner, _)| inner),
        Family::V6 => {
            let ip = Ipv6Packet::new_checked(packet).ok()?;
            let len = IPV6_HEADER_LEN + usize::from(ip.payload_len());
            Some(InnerHeader {
                family: Family::V6,
                tos: ip.traffic_class(),
                dont_frag: false,
                len,
            })
        }
    }
}

/// The length, by its own length field, of a decapsulated tunnel-mode
/// packet that must be of `family`; `None` unless it is a whole,
/// consistent packet of that family ([`inner_header`]) and, for IPv4, its
/// header checksum verifies (the peer authenticated the packet, but a
/// corrupt header would still be forwarded).
#[inline]
pub(crate) fn received_len(packet: &[u8], family: Family) -> Option<usize> {
    if Family::of(packet)? != family {
        return None;
    }
    match family {
        Family::V4 => {
            let (inner, header_len) = inner_v4(packet)?;
            fixed_v4::checksum_ok(packet, header_len).then_some(inner.len)
        }
        Family::V6 => inner_header(packet).map(|inner| inner.len),
    }
}

/// The outer header of tunnel mode.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OuterHeader {
    /// Tunnel source (our address).
    pub(crate) src: IpAddr,
    /// Tunnel destination (the peer).
    pub(crate) dst: IpAddr,
    /// Protocol of what follows (ESP, AH or UDP).
    pub(crate) protocol: IpProtocol,
    /// TOS / Traffic Class, copied from the inner header.
    pub(crate) tos: u8,
    /// DF, copied from an IPv4 inner header.
    pub(crate) dont_frag: bool,
    /// IPv4 Identification.
    pub(crate) ident: u16,
}

impl OuterHeader {
    /// The header's family, or `None` when source and destination differ.
    pub(crate) fn family(&self) -> Option<Family> {
        let family = Family::of_addr(self.src);
        (family == Family::of_addr(self.dst)).then_some(family)
    }

    /// Writes the header into `out` (exactly the family's header length)
    /// for a payload of `payload_len` bytes, which the caller checked
    /// against [`max_payload`].
    ///
    /// IPv4: version 4, IHL 5, TOS copied, Identification as given, DF
    /// copied, TTL 64, checksum computed. IPv6: Traffic Class copied, Flow
    /// Label 0, Hop Limit 64 (RFC 4301 §5.1.2.1 header construction).
    pub(crate) fn emit(&self, out: &mut [u8], payload_len: usize) {
        match (self.src, self.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let Some(out) = out.first_chunk_mut::<IPV4_HEADER_LEN>() else {
                    return;
                };
                let fields = fixed_v4::Fields {
                    src,
                    dst,
                    protocol: self.protocol,
                    tos: self.tos,
                    dont_frag: self.dont_frag,
                    ident: self.ident,
                    ttl: OUTER_TTL,
                    total_len: u16::try_from(IPV4_HEADER_LEN + payload_len).unwrap_or(u16::MAX),
                };
                fixed_v4::emit(out, &fields);
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let repr = Ipv6Repr {
                    src,
                    dst,
                    next_header: self.protocol,
                    payload_len,
                    hop_limit: OUTER_TTL,
                    traffic_class: self.tos,
                    flow_label: 0,
                };
                repr.emit(&mut Ipv6Packet::new_unchecked(out));
            }
            // Mixed families are refused by `family()` before emit.
            _ => {}
        }
    }
}

/// The largest payload behind a header of `family` of `header_len` bytes.
pub(crate) fn max_payload(family: Family, header_len: usize) -> usize {
    match family {
        Family::V4 => MAX_IP_LEN.saturating_sub(header_len),
        // IPv6 Payload Length counts the extension headers too.
        Family::V6 => MAX_IP_LEN.saturating_sub(header_len - IPV6_HEADER_LEN),
    }
}

/// Where transport mode splits a packet: the IP header (IPv6: with the
/// extension headers that stay in front) and the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Split {
    /// IP version.
    pub(crate) family: Family,
    /// Bytes that stay in front of the ESP/AH header.
    pub(crate) header_len: usize,
    /// Offset of the Next Header / Protocol octet that will name ESP or AH.
    pub(crate) next_header_offset: usize,
    /// What that octet names now: ESP/AH's Next Header.
    pub(crate) next_header: IpProtocol,
    /// Length of the whole packet by its length fields.
    pub(crate) len: usize,
}

/// Finds the transport-mode split of an outbound packet: after the IPv4
/// header with its options (RFC 4303 §3.1.1), or after the IPv6 extension
/// headers that must stay in front ([`ipsec_insertion_point`]). Transport
/// mode applies to whole datagrams only (RFC 4303 §3.1.1), so a fragment is
/// refused.
pub(crate) fn transport_split(packet: &[u8]) -> Result<Split, DropReason> {
    match Family::of(packet).ok_or(DropReason::InnerMalformed)? {
        Family::V4 => {
            let ip = Ipv4Packet::new_checked(packet).map_err(|_| DropReason::InnerMalformed)?;
            if ip.is_fragment() {
                return Err(DropReason::Fragment);
            }
            Ok(Split {
                family: Family::V4,
                header_len: ip.header_len(),
                next_header_offset: 9,
                next_header: ip.protocol(),
                len: usize::from(ip.total_len()),
            })
        }
        Family::V6 => {
            let ip = Ipv6Packet::new_checked(packet).map_err(|_| DropReason::InnerMalformed)?;
            let whole = upper_layer(&ip).map_err(|_| DropReason::InnerMalformed)?;
            // Any Fragment header, atomic ones included (deprecated by
            // RFC 8021), marks a piece that transport mode does not take.
            if whole.is_fragment {
                return Err(DropReason::Fragment);
            }
            let at = ipsec_insertion_point(&ip).map_err(|_| DropReason::InnerMalformed)?;
            Ok(Split {
                family: Family::V6,
                header_len: at.offset,
                next_header_offset: at.last_next_header_offset,
                next_header: at.protocol,
                len: IPV6_HEADER_LEN + usize::from(ip.payload_len()),
            })
        }
    }
}

/// After a transport-mode splice, sets the octet at `next_header_offset`
/// to `protocol` and the length fields of the IP header at the start of
/// `packet` (whose length is the new packet length), and recomputes the
/// IPv4 header checksum. The caller checked the length limit.
pub(crate) fn finish_splice(
    packet: &mut [u8],
    family: Family,
    next_header_offset: usize,
    protocol: IpProtocol,
) {
    let len = packet.len();
    if len < family.header_len() {
        return;
    }
    if let Some(byte) = packet.get_mut(next_header_offset) {
        *byte = protocol.0;
    }
    match family {
        Family::V4 => {
            let mut ip = Ipv4Packet::new_unchecked(packet);
            ip.set_total_len(u16::try_from(len).unwrap_or(u16::MAX));
            ip.fill_checksum();
        }
        Family::V6 => {
            let payload = len.saturating_sub(IPV6_HEADER_LEN);
            let mut ip = Ipv6Packet::new_unchecked(packet);
            ip.set_payload_len(u16::try_from(payload).unwrap_or(u16::MAX));
        }
    }
}

/// RFC 6040 §4.2 decapsulation (normal mode): an outer CE mark is carried
/// to an ECN-capable inner header. Returns false when the outer is CE and
/// the inner is Not-ECT, which RFC 6040 says to drop. Fixes the IPv4 checksum when it changes.
#[inline]
pub(crate) fn propagate_ecn(inner: &mut [u8], outer_tos: u8) -> bool {
    const ECN_MASK: u8 = 0b11;
    const CE: u8 = 0b11;
    if outer_tos & ECN_MASK != CE {
        return true;
    }
    match Family::of(inner) {
        Some(Family::V4) if inner.len() >= IPV4_HEADER_LEN => {
            let mut ip = Ipv4Packet::new_unchecked(inner);
            let tos = ip.dscp_ecn();
            if tos & ECN_MASK == 0 {
                return false;
            }
            if tos & ECN_MASK != CE {
                ip.set_dscp_ecn(tos | CE);
                ip.fill_checksum();
            }
            true
        }
        Some(Family::V6) if inner.len() >= IPV6_HEADER_LEN => {
            let mut ip = Ipv6Packet::new_unchecked(inner);
            let tc = ip.traffic_class();
            if tc & ECN_MASK == 0 {
                return false;
            }
            ip.set_traffic_class(tc | CE);
            true
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};
    use phalanx_wire::Ipv4Repr;

    fn v4(tos: u8, df: bool, payload: usize) -> Vec<u8> {
        let repr = Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            protocol: IpProtocol::UDP,
            payload_len: payload,
            ttl: 9,
            dscp_ecn: tos,
            ident: 77,
            dont_frag: df,
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
        buf
    }

    #[test]
    fn inner_v4_and_v6() {
        let p = v4(0xb9, true, 8);
        let h = inner_header(&p).unwrap();
        assert_eq!(
            h,
            InnerHeader {
                family: Family::V4,
                tos: 0xb9,
                dont_frag: true,
                len: 28
            }
        );
        let mut q = vec![0u8; 48];
        let repr = Ipv6Repr {
            src: Ipv6Addr::LOCALHOST,
            dst: Ipv6Addr::LOCALHOST,
            next_header: IpProtocol::UDP,
            payload_len: 8,
            hop_limit: 3,
            traffic_class: 0x2a,
            flow_label: 5,
        };
        repr.emit(&mut Ipv6Packet::new_unchecked(&mut q[..]));
        let h = inner_header(&q).unwrap();
        assert_eq!(
            h,
            InnerHeader {
                family: Family::V6,
                tos: 0x2a,
                dont_frag: false,
                len: 48
            }
        );
        assert!(inner_header(&q[..47]).is_none());
        assert!(inner_header(&[0x50; 40]).is_none());
    }

    #[test]
    fn outer_v4_rules() {
        let outer = OuterHeader {
            src: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
            protocol: IpProtocol::ESP,
            tos: 0x03,
            dont_frag: true,
            ident: 0x1234,
        };
        let mut out = [0u8; 20];
        outer.emit(&mut out, 100);
        let ip = Ipv4Packet::new_unchecked(&out[..]);
        assert_eq!(ip.total_len(), 120);
        assert_eq!(ip.ttl(), 64);
        assert_eq!(ip.dscp_ecn(), 3);
        assert!(ip.dont_frag());
        assert_eq!(ip.ident(), 0x1234);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn splice_v4_fixes_length_and_checksum() {
        let mut p = v4(0, false, 8);
        let split = transport_split(&p).unwrap();
        assert_eq!(split.header_len, 20);
        assert_eq!(split.next_header, IpProtocol::UDP);
        p.extend_from_slice(&[0; 4]);
        finish_splice(
            &mut p,
            Family::V4,
            split.next_header_offset,
            IpProtocol::ESP,
        );
        let ip = Ipv4Packet::new_checked(&p[..]).unwrap();
        assert_eq!(ip.total_len(), 32);
        assert_eq!(ip.protocol(), IpProtocol::ESP);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn fragments_refused_in_transport() {
        let mut p = v4(0, false, 8);
        let mut ip = Ipv4Packet::new_unchecked(&mut p[..]);
        ip.set_more_frags(true);
        ip.fill_checksum();
        assert_eq!(transport_split(&p), Err(DropReason::Fragment));
    }

    #[test]
    fn ecn_ce_propagates_to_ect_only() {
        let mut ect = v4(0b10, false, 0);
        assert!(propagate_ecn(&mut ect, 0b11));
        let ip = Ipv4Packet::new_checked(&ect[..]).unwrap();
        assert_eq!(ip.dscp_ecn() & 3, 3);
        assert!(ip.verify_checksum());
        let mut not_ect = v4(0, false, 0);
        assert!(!propagate_ecn(&mut not_ect, 0b11));
        assert!(propagate_ecn(&mut not_ect, 0b10));
    }
}
