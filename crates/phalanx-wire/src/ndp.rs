//! IPv6 Neighbor Discovery (RFC 4861), the part a cluster node needs to
//! answer for the cluster's virtual IPv6 address and to announce it after a
//! takeover: Neighbor Solicitations in ([`parse_solicitation`]), Neighbor
//! Advertisements out ([`Advertisement`]). The IPv6 counterpart of
//! [`crate::arp`].
//!
//! Neighbor Solicitation (RFC 4861 §4.3) and Neighbor Advertisement (§4.4),
//! as the ICMPv6 payload of an IPv6 packet with Hop Limit 255:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Type      |     Code      |          Checksum             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |R|S|O|                  Reserved (NS: all 32 bits)             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                                                               +
//! |                                                               |
//! +                       Target Address                          +
//! |                                                               |
//! +                                                               +
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   Options ...
//! +-+-+-+-+-+-+-+-+-+-+-+-
//! ```
//!
//! Each option (RFC 4861 §4.6) is a type, a length in units of 8 octets and
//! its data; the source (type 1) and target (type 2) link-layer address
//! options carry a MAC address on Ethernet (RFC 2464 §6, length 1):
//!
//! ```text
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Type      |    Length     |    Link-Layer Address ...
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Parsing takes one IPv6 packet, validates it as RFC 4861 §7.1.1 (§7.1.2
//! for advertisements) asks, and reports each failed rule as its own
//! [`NdpError`] for the caller to count. Nothing here panics on received
//! input or allocates; whether to answer (is the target ours?) is the
//! caller's decision.

use core::fmt;
use core::net::Ipv6Addr;

use crate::checksum;
use crate::ethernet::{EtherType, EthernetFrame, EthernetRepr, MacAddress, HEADER_LEN};
use crate::iana::IpProtocol;
use crate::ipv6::{self, Ipv6Packet, Ipv6Repr};

/// ICMPv6 type of a Neighbor Solicitation (RFC 4861 §4.3).
pub const NEIGHBOR_SOLICITATION: u8 = 135;
/// ICMPv6 type of a Neighbor Advertisement (RFC 4861 §4.4).
pub const NEIGHBOR_ADVERTISEMENT: u8 = 136;
/// Octets of an untagged Ethernet frame carrying the advertisements built
/// here: 14 Ethernet + 40 IPv6 + 24 NA + 8 target link-layer address
/// option = 86.
pub const ADVERTISEMENT_FRAME_LEN: usize =
    HEADER_LEN + ipv6::HEADER_LEN + MESSAGE_LEN + LINK_ADDR_OPTION_LEN;
const _: () = assert!(ADVERTISEMENT_FRAME_LEN == 86);
/// Octets of a Neighbor Solicitation or Advertisement without options
/// (RFC 4861 §7.1.1: "ICMP length (derived from the IP length) is 24 or
/// more octets").
pub const MESSAGE_LEN: usize = 24;
/// The Hop Limit of every Neighbor Discovery packet (RFC 4861 §7.1.1: a
/// packet from off-link was decremented on its way and is dropped).
pub const HOP_LIMIT: u8 = 255;
/// Option type of the Source Link-Layer Address option (RFC 4861 §4.6.1).
pub const SOURCE_LINK_ADDR: u8 = 1;
/// Option type of the Target Link-Layer Address option (RFC 4861 §4.6.1).
pub const TARGET_LINK_ADDR: u8 = 2;
/// Octets of a link-layer address option for Ethernet (RFC 2464 §6:
/// length 1, in units of 8 octets).
pub const LINK_ADDR_OPTION_LEN: usize = 8;
/// The link-scope all-nodes multicast address, ff02::1 (RFC 4291 §2.7.1),
/// where unsolicited advertisements and answers to DAD go (RFC 4861
/// §7.2.4, §7.2.6).
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// Router flag of an advertisement (RFC 4861 §4.4), in its flags octet.
const FLAG_ROUTER: u8 = 0x80;
/// Solicited flag.
const FLAG_SOLICITED: u8 = 0x40;
/// Override flag.
const FLAG_OVERRIDE: u8 = 0x20;
/// Octets of the advertisement's ICMPv6 message with its one option.
const ADVERTISEMENT_ICMP_LEN: usize = MESSAGE_LEN + LINK_ADDR_OPTION_LEN;

mod field {
    use crate::field::Field;

    pub(super) const TYPE: usize = 0;
    pub(super) const CODE: usize = 1;
    pub(super) const CHECKSUM: usize = 2;
    pub(super) const FLAGS: usize = 4;
    pub(super) const TARGET: Field = 8..24;
}

/// Why an IPv6 packet is not a valid Neighbor Solicitation (or, for
/// [`parse_advertisement`], Advertisement): each a reason the caller counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NdpError {
    /// The next header is not ICMPv6: another protocol, or an extension
    /// header in front of the message (this parser does not walk them).
    NotIcmpv6,
    /// ICMPv6, but not of the type asked for: not a Neighbor Solicitation
    /// for [`parse_solicitation`], not an Advertisement for
    /// [`parse_advertisement`].
    NotSolicitation,
    /// Not an IPv6 packet (version, length, a multicast source), a Payload
    /// Length past the end of the buffer, a message shorter than
    /// [`MESSAGE_LEN`], or (in an
    /// advertisement) the Solicited flag on a multicast one (§7.1.2).
    Malformed,
    /// Hop Limit other than 255 (RFC 4861 §7.1.1).
    HopLimit,
    /// ICMP Code other than 0.
    Code,
    /// The ICMPv6 checksum does not verify (RFC 4443 §2.3).
    Checksum,
    /// The Target Address is a multicast address.
    MulticastTarget,
    /// An option of length 0, one running past the message, or a
    /// link-layer address option whose length is not 1 (8 octets).
    BadOption,
    /// The source is the unspecified address (DAD) but the solicitation
    /// carries a source link-layer address option or does not go to a
    /// solicited-node multicast address.
    Unspecified,
}

impl fmt::Display for NdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NdpError::NotIcmpv6 => "next header is not ICMPv6",
            NdpError::NotSolicitation => {
                "ICMPv6 type is not the neighbor discovery message expected"
            }
            NdpError::Malformed => "malformed IPv6 packet or neighbor discovery message",
            NdpError::HopLimit => "neighbor discovery hop limit is not 255",
            NdpError::Code => "neighbor discovery ICMP code is not 0",
            NdpError::Checksum => "ICMPv6 checksum does not verify",
            NdpError::MulticastTarget => "neighbor discovery target is a multicast address",
            NdpError::BadOption => "neighbor discovery option has a bad length",
            NdpError::Unspecified => {
                "solicitation from the unspecified address breaks the DAD rules"
            }
        })
    }
}

impl core::error::Error for NdpError {}

/// A Neighbor Solicitation that passed RFC 4861 §7.1.1 validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NeighborSolicitation {
    /// IPv6 source (the unspecified address for DAD, RFC 4862 §5.4.2).
    pub src: Ipv6Addr,
    /// IPv6 destination (solicited-node multicast or unicast).
    pub dst: Ipv6Addr,
    /// The Target Address: whose link-layer address is asked for.
    pub target: Ipv6Addr,
    /// The Source Link-Layer Address option (type 1), if present.
    pub source_link_addr: Option<MacAddress>,
}

/// A Neighbor Advertisement that passed RFC 4861 §7.1.2 validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParsedAdvertisement {
    /// IPv6 source.
    pub src: Ipv6Addr,
    /// IPv6 destination.
    pub dst: Ipv6Addr,
    /// The Target Address.
    pub target: Ipv6Addr,
    /// The Target Link-Layer Address option (type 2), if present.
    pub target_link_addr: Option<MacAddress>,
    /// R: the sender is a router.
    pub router: bool,
    /// S: sent in response to a solicitation.
    pub solicited: bool,
    /// O: should override an existing cache entry.
    pub override_flag: bool,
}

/// The parts every Neighbor Discovery message shares after the common
/// §7.1.1 / §7.1.2 checks.
struct Message<'a> {
    src: Ipv6Addr,
    dst: Ipv6Addr,
    /// The whole ICMPv6 message, bounded by Payload Length.
    icmp: &'a [u8],
    target: Ipv6Addr,
}

impl Message<'_> {
    /// The options after the fixed part.
    fn options(&self) -> &[u8] {
        self.icmp.get(MESSAGE_LEN..).unwrap_or_default()
    }
}

/// Reads `packet` as a Neighbor Solicitation and validates it as RFC 4861
/// §7.1.1 asks.
///
/// `packet` is one IPv6 packet starting at its fixed header; octets past
/// its Payload Length (Ethernet padding) are ignored; a Payload Length past
/// the end of `packet`, or a multicast source (RFC 4291 §2.7), is
/// [`NdpError::Malformed`]. The next header must be
/// ICMPv6 directly ([`NdpError::NotIcmpv6`] otherwise, extension headers
/// included), of type 135; then Hop Limit 255, Code 0, a verified checksum
/// (pseudo-header of RFC 8200 §8.1), at least 24 octets, a target that is
/// not multicast, options of non-zero length inside the message, and from
/// the unspecified address only to a solicited-node multicast address
/// without a source link-layer address option. A source link-layer address
/// option other than 8 octets long is [`NdpError::BadOption`]; unknown
/// options are skipped (§4.6: "silently ignore").
pub fn parse_solicitation(packet: &[u8]) -> Result<NeighborSolicitation, NdpError> {
    let message = parse_message(packet, NEIGHBOR_SOLICITATION)?;
    let source_link_addr = link_addr_option(message.options(), SOURCE_LINK_ADDR)?;
    // RFC 4861 §7.1.1: "If the IP source address is the unspecified
    // address, the IP destination address is a solicited-node multicast
    // address" and "there is no source link-layer address option".
    if message.src.is_unspecified()
        && (!is_solicited_node(message.dst) || source_link_addr.is_some())
    {
        return Err(NdpError::Unspecified);
    }
    Ok(NeighborSolicitation {
        src: message.src,
        dst: message.dst,
        target: message.target,
        source_link_addr,
    })
}

/// Reads `packet` as a Neighbor Advertisement and validates it as RFC 4861
/// §7.1.2 asks: the checks of [`parse_solicitation`] up to the options
/// (type 136 instead of 135, [`NdpError::NotSolicitation`] otherwise), and
/// the Solicited flag clear when the destination is multicast
/// ([`NdpError::Malformed`] otherwise). A target link-layer address option
/// other than 8 octets long is [`NdpError::BadOption`].
pub fn parse_advertisement(packet: &[u8]) -> Result<ParsedAdvertisement, NdpError> {
    let message = parse_message(packet, NEIGHBOR_ADVERTISEMENT)?;
    let target_link_addr = link_addr_option(message.options(), TARGET_LINK_ADDR)?;
    let flags = message.icmp.get(field::FLAGS).copied().unwrap_or_default();
    let solicited = flags & FLAG_SOLICITED != 0;
    // RFC 4861 §7.1.2: "If the IP Destination Address is a multicast
    // address the Solicited flag is zero."
    if message.dst.is_multicast() && solicited {
        return Err(NdpError::Malformed);
    }
    Ok(ParsedAdvertisement {
        src: message.src,
        dst: message.dst,
        target: message.target,
        target_link_addr,
        router: flags & FLAG_ROUTER != 0,
        solicited,
        override_flag: flags & FLAG_OVERRIDE != 0,
    })
}

/// The checks RFC 4861 §7.1.1 and §7.1.2 share, for a message of
/// `icmp_type`.
fn parse_message(packet: &[u8], icmp_type: u8) -> Result<Message<'_>, NdpError> {
    let ip = Ipv6Packet::new_checked(packet).map_err(|_| NdpError::Malformed)?;
    if ip.version() != 6 {
        return Err(NdpError::Malformed);
    }
    // RFC 4291 §2.7: "Multicast addresses must not be used as source
    // addresses in IPv6 packets"; a reply would go to a group with S=1.
    if ip.src_addr().is_multicast() {
        return Err(NdpError::Malformed);
    }
    if ip.next_header() != IpProtocol::ICMPV6 {
        return Err(NdpError::NotIcmpv6);
    }
    // check_len proved the payload inside `packet`; read it from `packet`
    // so that it outlives the view.
    let end = ipv6::HEADER_LEN + usize::from(ip.payload_len());
    let icmp = packet
        .get(ipv6::HEADER_LEN..end)
        .ok_or(NdpError::Malformed)?;
    match icmp.get(field::TYPE) {
        None => return Err(NdpError::Malformed),
        Some(&t) if t != icmp_type => return Err(NdpError::NotSolicitation),
        Some(_) => {}
    }
    check_fixed_fields(&ip, icmp)?;
    let target = Ipv6Addr::from(address_at(icmp)?);
    if target.is_multicast() {
        return Err(NdpError::MulticastTarget);
    }
    Ok(Message {
        src: ip.src_addr(),
        dst: ip.dst_addr(),
        icmp,
        target,
    })
}

/// Hop Limit, length, Code and checksum (RFC 4861 §7.1.1 / §7.1.2).
fn check_fixed_fields(ip: &Ipv6Packet<&[u8]>, icmp: &[u8]) -> Result<(), NdpError> {
    if ip.hop_limit() != HOP_LIMIT {
        return Err(NdpError::HopLimit);
    }
    if icmp.len() < MESSAGE_LEN {
        return Err(NdpError::Malformed);
    }
    if icmp.get(field::CODE) != Some(&0) {
        return Err(NdpError::Code);
    }
    if !checksum_verifies(ip.src_addr(), ip.dst_addr(), icmp) {
        return Err(NdpError::Checksum);
    }
    Ok(())
}

/// The Target Address octets of a message at least [`MESSAGE_LEN`] long.
fn address_at(icmp: &[u8]) -> Result<[u8; 16], NdpError> {
    icmp.get(field::TARGET)
        .and_then(|octets| octets.try_into().ok())
        .ok_or(NdpError::Malformed)
}

/// The sum of the pseudo-header (RFC 8200 §8.1) and the ICMPv6 message
/// with its checksum field: all ones when the checksum is right (RFC 4443
/// §2.3, RFC 1071).
fn checksum_verifies(src: Ipv6Addr, dst: Ipv6Addr, icmp: &[u8]) -> bool {
    icmp_sum(src, dst, icmp) == 0xffff
}

/// One's-complement sum of the pseudo-header and `icmp`. The length fits
/// 32 bits: it is bounded by a 16-bit Payload Length.
fn icmp_sum(src: Ipv6Addr, dst: Ipv6Addr, icmp: &[u8]) -> u16 {
    let length = u32::try_from(icmp.len()).unwrap_or(u32::MAX);
    let pseudo = checksum::pseudo_header_v6(src, dst, IpProtocol::ICMPV6, length);
    checksum::combine(&[pseudo, checksum::data(icmp)])
}

/// Walks the options (RFC 4861 §4.6): every length must be non-zero and
/// every option inside `options` (§7.1.1), else [`NdpError::BadOption`].
/// Returns the MAC of the first link-layer address option of type
/// `wanted`, which must be 8 octets long on Ethernet (RFC 2464 §6); other
/// options, and later ones of the same type, are skipped.
fn link_addr_option(mut options: &[u8], wanted: u8) -> Result<Option<MacAddress>, NdpError> {
    let mut found = None;
    while !options.is_empty() {
        let (option, rest) = next_option(options)?;
        if option.first() == Some(&wanted) && found.is_none() {
            found = Some(ethernet_link_addr(option)?);
        }
        options = rest;
    }
    Ok(found)
}

/// Splits the first option off a non-empty `options`: its Length octet
/// counts units of 8 octets, type and length included.
fn next_option(options: &[u8]) -> Result<(&[u8], &[u8]), NdpError> {
    // A lone last octet is an option without its length.
    let units = options.get(1).copied().ok_or(NdpError::BadOption)?;
    let len = usize::from(units) * 8;
    if len == 0 {
        // RFC 4861 §4.6: "Nodes MUST silently discard an ND packet that
        // contains an option with length zero."
        return Err(NdpError::BadOption);
    }
    options.split_at_checked(len).ok_or(NdpError::BadOption)
}

/// The MAC of a link-layer address option of length 1 (RFC 2464 §6:
/// type, length, six octets of address).
fn ethernet_link_addr(option: &[u8]) -> Result<MacAddress, NdpError> {
    if option.len() != LINK_ADDR_OPTION_LEN {
        return Err(NdpError::BadOption);
    }
    MacAddress::from_slice(&option[2..]).ok_or(NdpError::BadOption)
}

/// Whether `address` is a solicited-node multicast address,
/// ff02::1:ff00:0/104 (RFC 4291 §2.7.1).
fn is_solicited_node(address: Ipv6Addr) -> bool {
    let prefix = solicited_node(Ipv6Addr::UNSPECIFIED).octets();
    address.octets()[..13] == prefix[..13]
}

/// The solicited-node multicast address of `address` (RFC 4291 §2.7.1):
/// ff02::1:ff00:0/104 followed by the low 24 bits of `address`.
pub fn solicited_node(address: Ipv6Addr) -> Ipv6Addr {
    let low = address.octets();
    let mut group = [0u8; 16];
    group[..2].copy_from_slice(&[0xff, 0x02]);
    group[11..13].copy_from_slice(&[0x01, 0xff]);
    group[13..].copy_from_slice(&low[13..]);
    Ipv6Addr::from(group)
}

/// The Ethernet multicast address of IPv6 multicast `group` (RFC 2464 §7):
/// 33:33 followed by its last 32 bits.
pub fn multicast_mac(group: Ipv6Addr) -> MacAddress {
    let o = group.octets();
    MacAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// A Neighbor Advertisement to send, for one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Advertisement {
    /// Ethernet source.
    pub eth_src: MacAddress,
    /// Ethernet destination.
    pub eth_dst: MacAddress,
    /// IPv6 source: the target address itself.
    pub src: Ipv6Addr,
    /// IPv6 destination.
    pub dst: Ipv6Addr,
    /// The Target Address.
    pub target: Ipv6Addr,
    /// Carried in the Target Link-Layer Address option (type 2), always
    /// present.
    pub target_link_addr: MacAddress,
    /// R: the sender is a router.
    pub router: bool,
    /// S: a response to a solicitation.
    pub solicited: bool,
    /// O: override existing cache entries.
    pub override_flag: bool,
}

impl Advertisement {
    /// The reply to `ns` (RFC 4861 §7.2.4) for its target at `link_addr`,
    /// sent from Ethernet address `eth_src`; `requester_mac` is the
    /// Ethernet source of the solicitation's frame.
    ///
    /// From the unspecified address (DAD): to all nodes (ff02::1,
    /// 33:33:00:00:00:01) with S=0. Otherwise to `ns.src` with S=1, at the
    /// solicitation's source link-layer address if it had one, else at
    /// `requester_mac`. O=1 always: the node answers for an address it
    /// owns, not an anycast one (§7.2.4). R is `router`.
    pub fn reply(
        ns: &NeighborSolicitation,
        requester_mac: MacAddress,
        link_addr: MacAddress,
        eth_src: MacAddress,
        router: bool,
    ) -> Advertisement {
        if ns.src.is_unspecified() {
            return Advertisement::unsolicited(ns.target, link_addr, eth_src, router);
        }
        Advertisement {
            eth_src,
            eth_dst: ns.source_link_addr.unwrap_or(requester_mac),
            src: ns.target,
            dst: ns.src,
            target: ns.target,
            target_link_addr: link_addr,
            router,
            solicited: true,
            override_flag: true,
        }
    }

    /// An unsolicited advertisement of `target` at `link_addr` to all
    /// nodes (RFC 4861 §7.2.6: ff02::1, S=0, O=1), sent from `eth_src`:
    /// what a new owner of a virtual address sends so that neighbours move
    /// to its MAC at once.
    pub fn unsolicited(
        target: Ipv6Addr,
        link_addr: MacAddress,
        eth_src: MacAddress,
        router: bool,
    ) -> Advertisement {
        Advertisement {
            eth_src,
            eth_dst: multicast_mac(ALL_NODES),
            src: target,
            dst: ALL_NODES,
            target,
            target_link_addr: link_addr,
            router,
            solicited: false,
            override_flag: true,
        }
    }

    /// The flags octet: R 0x80, S 0x40, O 0x20 (RFC 4861 §4.4).
    fn flags(&self) -> u8 {
        let mut flags = 0;
        for (set, bit) in [
            (self.router, FLAG_ROUTER),
            (self.solicited, FLAG_SOLICITED),
            (self.override_flag, FLAG_OVERRIDE),
        ] {
            if set {
                flags |= bit;
            }
        }
        flags
    }

    /// The frame: untagged Ethernet (EtherType 0x86DD); IPv6 with traffic
    /// class 0, flow label 0, Payload Length 32, next header ICMPv6, Hop
    /// Limit 255; the Neighbor Advertisement (type 136, code 0, checksum,
    /// flags, target address) and its Target Link-Layer Address option
    /// (type 2, length 1, the MAC). No padding is needed: 86 octets are
    /// past the Ethernet minimum.
    pub fn emit_frame(&self) -> [u8; ADVERTISEMENT_FRAME_LEN] {
        let mut buf = [0u8; ADVERTISEMENT_FRAME_LEN];
        let (eth, packet) = buf.split_at_mut(HEADER_LEN);
        EthernetRepr {
            dst_addr: self.eth_dst,
            src_addr: self.eth_src,
            vlan: None,
            ethertype: EtherType::IPV6,
        }
        .emit(&mut EthernetFrame::new_unchecked(eth));
        let (header, icmp) = packet.split_at_mut(ipv6::HEADER_LEN);
        self.ipv6_repr()
            .emit(&mut Ipv6Packet::new_unchecked(header));
        self.emit_icmp(icmp);
        buf
    }

    fn ipv6_repr(&self) -> Ipv6Repr {
        Ipv6Repr {
            src: self.src,
            dst: self.dst,
            next_header: IpProtocol::ICMPV6,
            payload_len: ADVERTISEMENT_ICMP_LEN,
            hop_limit: HOP_LIMIT,
            traffic_class: 0,
            flow_label: 0,
        }
    }

    /// Writes the message and its option into `icmp` (exactly
    /// [`ADVERTISEMENT_ICMP_LEN`] zeroed octets), checksum last.
    fn emit_icmp(&self, icmp: &mut [u8]) {
        icmp[field::TYPE] = NEIGHBOR_ADVERTISEMENT;
        icmp[field::FLAGS] = self.flags();
        icmp[field::TARGET].copy_from_slice(&self.target.octets());
        let option = &mut icmp[MESSAGE_LEN..];
        option[0] = TARGET_LINK_ADDR;
        option[1] = 1;
        option[2..].copy_from_slice(&self.target_link_addr.0);
        let sum = icmp_sum(self.src, self.dst, icmp);
        let at = field::CHECKSUM;
        icmp[at..at + 2].copy_from_slice(&(!sum).to_be_bytes());
    }
}

#[cfg(test)]
mod tests;
