//! The Configuration payload of IKE_AUTH, responder side (RFC 7296 §2.19,
//! §3.15): an End-User asks for an inner address and gets one out of the
//! connection's pools; its Child SAs are narrowed to that address.
//!
//! ```text
//! Initiator                         Responder
//! -------------------------------------------------------------------
//! HDR, SK {IDi, [CERT,] AUTH, CP(CFG_REQUEST), SAi2, TSi, TSr}  -->
//!                          <--  HDR, SK {IDr, [CERT,] AUTH, CP(CFG_REPLY),
//!                                   SAr2, TSi, TSr}
//! ```
//!
//! An address asked for and not given is INTERNAL_ADDRESS_FAILURE: the IKE
//! SA is created, the Child SA is not (§3.15.4, §1.2). A request for both
//! families that gets one is answered with that one.

use core::net::IpAddr;

use phalanx_wire::ike::iana::{CfgAttributeType, CfgType};
use phalanx_wire::ike::{CfgAttribute, CpPayload, Payload, TrafficSelector, TsAddresses};

use crate::counters::Counter;
use crate::error::IkeError;
use crate::ike_sa::{Ctx, IkeSa};
use crate::pool::AddressPools;
use crate::ts::{intersect, ts_host};

/// An inner address one IKE SA holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct VirtualIp {
    /// The pool it came from.
    pub(crate) pool: String,
    /// The identity it is leased to.
    pub(crate) identity: String,
    /// The address.
    pub(crate) address: IpAddr,
}

/// What a CFG_REQUEST asks for.
#[derive(Default)]
struct Wants {
    v4: bool,
    v6: bool,
    dns4: bool,
    dns6: bool,
    subnet4: bool,
    subnet6: bool,
}

impl Wants {
    fn read(cp: &CpPayload) -> Wants {
        let has = |ty| cp.attributes.iter().any(|a| a.attribute_type == ty);
        Wants {
            v4: has(CfgAttributeType::INTERNAL_IP4_ADDRESS),
            v6: has(CfgAttributeType::INTERNAL_IP6_ADDRESS),
            dns4: has(CfgAttributeType::INTERNAL_IP4_DNS),
            dns6: has(CfgAttributeType::INTERNAL_IP6_DNS),
            subnet4: has(CfgAttributeType::INTERNAL_IP4_SUBNET),
            subnet6: has(CfgAttributeType::INTERNAL_IP6_SUBNET),
        }
    }
}

/// A traffic selector that is one prefix of any protocol and port, as
/// (network, prefix length).
fn ts_prefix(ts: &TrafficSelector) -> Option<(IpAddr, u8)> {
    if ts.ip_protocol.0 != 0 || ts.start_port != 0 || ts.end_port != u16::MAX {
        return None;
    }
    let (start, end, bits): (u128, u128, u32) = match ts.addresses {
        TsAddresses::V4 { start, end } => (u32::from(start).into(), u32::from(end).into(), 32),
        TsAddresses::V6 { start, end } => (u128::from(start), u128::from(end), 128),
    };
    let span = end.checked_sub(start)?.checked_add(1)?;
    let host_bits = span.trailing_zeros();
    let aligned = span.is_power_of_two() && start.trailing_zeros() >= host_bits.min(127);
    if !aligned || host_bits > bits {
        return None;
    }
    let len = u8::try_from(bits - host_bits).ok()?;
    let addr = match ts.addresses {
        TsAddresses::V4 { start, .. } => IpAddr::V4(start),
        TsAddresses::V6 { start, .. } => IpAddr::V6(start),
    };
    Some((addr, len))
}

/// INTERNAL_IP4_SUBNET (address, netmask) and INTERNAL_IP6_SUBNET
/// (address, prefix length) attributes for the selectors of `local` that
/// are prefixes (§3.15.1), of the families asked for, without repeats.
fn subnet_attributes<'a>(
    local: impl Iterator<Item = &'a TrafficSelector>,
    v4: bool,
    v6: bool,
) -> Vec<CfgAttribute> {
    let mut out = Vec::new();
    for ts in local {
        let Some((addr, len)) = ts_prefix(ts) else {
            continue;
        };
        let attribute = match addr {
            IpAddr::V4(a) if v4 => {
                let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
                let mut value = a.octets().to_vec();
                value.extend_from_slice(&mask.to_be_bytes());
                CfgAttribute {
                    attribute_type: CfgAttributeType::INTERNAL_IP4_SUBNET,
                    value,
                }
            }
            IpAddr::V6(a) if v6 => {
                let mut value = a.octets().to_vec();
                value.push(len);
                CfgAttribute {
                    attribute_type: CfgAttributeType::INTERNAL_IP6_SUBNET,
                    value,
                }
            }
            _ => continue,
        };
        if !out.contains(&attribute) {
            out.push(attribute);
        }
    }
    out
}

/// The attribute carrying `address` (§3.15.1: IPv6 adds a prefix length,
/// 128 for one host).
fn address_attribute(address: IpAddr) -> CfgAttribute {
    match address {
        IpAddr::V4(a) => CfgAttribute {
            attribute_type: CfgAttributeType::INTERNAL_IP4_ADDRESS,
            value: a.octets().to_vec(),
        },
        IpAddr::V6(a) => {
            let mut value = a.octets().to_vec();
            value.push(128);
            CfgAttribute {
                attribute_type: CfgAttributeType::INTERNAL_IP6_ADDRESS,
                value,
            }
        }
    }
}

fn dns_attribute(server: IpAddr) -> CfgAttribute {
    let (attribute_type, value) = match server {
        IpAddr::V4(a) => (CfgAttributeType::INTERNAL_IP4_DNS, a.octets().to_vec()),
        IpAddr::V6(a) => (CfgAttributeType::INTERNAL_IP6_DNS, a.octets().to_vec()),
    };
    CfgAttribute {
        attribute_type,
        value,
    }
}

/// Initiator: the CFG_REQUEST for `vips` (an empty value asks for any
/// address of the family, §3.15.1), with DNS servers of those families.
pub(crate) fn cfg_request(vips: &[IpAddr]) -> Option<Payload> {
    if vips.is_empty() {
        return None;
    }
    let mut attributes = Vec::new();
    for vip in vips {
        let mut attribute = address_attribute(*vip);
        if vip.is_unspecified() {
            attribute.value.clear();
        }
        attributes.push(attribute);
        let dns = match vip {
            IpAddr::V4(_) => CfgAttributeType::INTERNAL_IP4_DNS,
            IpAddr::V6(_) => CfgAttributeType::INTERNAL_IP6_DNS,
        };
        attributes.push(CfgAttribute {
            attribute_type: dns,
            value: Vec::new(),
        });
    }
    Some(Payload::Cp(CpPayload {
        cfg_type: CfgType::REQUEST,
        attributes,
    }))
}

/// The addresses of a CFG_REPLY (INTERNAL_IP4_ADDRESS: 4 octets;
/// INTERNAL_IP6_ADDRESS: 16 and a prefix length); others ignored.
pub(crate) fn replied_addresses(cp: &CpPayload) -> Vec<IpAddr> {
    if cp.cfg_type != CfgType::REPLY {
        return Vec::new();
    }
    cp.attributes
        .iter()
        .filter_map(|a| match (a.attribute_type, a.value.len()) {
            (CfgAttributeType::INTERNAL_IP4_ADDRESS, 4) => <[u8; 4]>::try_from(a.value.as_slice())
                .ok()
                .map(IpAddr::from),
            (CfgAttributeType::INTERNAL_IP6_ADDRESS, 17) => {
                <[u8; 16]>::try_from(&a.value[..16]).ok().map(IpAddr::from)
            }
            _ => None,
        })
        .collect()
}

impl IkeSa {
    /// Responder: leases what a CFG_REQUEST asks for and builds the
    /// CFG_REPLY; `Ok(None)` for no request (or another CFG Type) or a
    /// connection without pools.
    pub(crate) fn answer_cfg_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        cp: Option<&CpPayload>,
    ) -> Result<Option<Payload>, IkeError> {
        let Some(cp) = cp.filter(|cp| cp.cfg_type == CfgType::REQUEST) else {
            return Ok(None);
        };
        if self.conn.pools.is_empty() && self.assigned_vip.is_none() {
            return Ok(None);
        }
        let wants = Wants::read(cp);
        let identity = self.peer_id();
        let mut attributes = Vec::new();
        for (wanted, v4) in [(wants.v4, true), (wants.v6, false)] {
            if !wanted {
                continue;
            }
            let assigned = self
                .assigned_vip
                .filter(|ip| ip.is_ipv4() == v4)
                .map(|address| VirtualIp {
                    // No pool's: nothing to give back.
                    pool: String::new(),
                    identity: identity.clone(),
                    address,
                });
            if let Some(vip) = assigned.or_else(|| self.lease(ctx.pools, &identity, v4)) {
                attributes.push(address_attribute(vip.address));
                self.virtual_ips.push(vip);
            }
        }
        if (wants.v4 || wants.v6) && self.virtual_ips.is_empty() {
            ctx.count(Counter::VirtualIpsRefused);
            return Err(IkeError::InternalAddressFailure);
        }
        ctx.counters
            .add(Counter::VirtualIpsAssigned, self.virtual_ips.len() as u64);
        attributes.extend(self.dns_servers(ctx.pools, &wants).map(dns_attribute));
        attributes.extend(self.protected_subnets(&wants));
        Ok(Some(Payload::Cp(CpPayload {
            cfg_type: CfgType::REPLY,
            attributes,
        })))
    }

    /// An address of the family (`v4`) from the first of the connection's
    /// pools that has one for `identity`.
    fn lease(&self, pools: &mut AddressPools, identity: &str, v4: bool) -> Option<VirtualIp> {
        self.conn.pools.iter().find_map(|name| {
            let family_v4 = pools.config(name)?.first.is_ipv4();
            if family_v4 != v4 {
                return None;
            }
            let address = pools.acquire(name, identity).ok()?;
            Some(VirtualIp {
                pool: name.clone(),
                identity: identity.to_owned(),
                address,
            })
        })
    }

    /// The DNS servers of the pools our addresses came from, of the
    /// families asked for.
    fn dns_servers<'a>(
        &'a self,
        pools: &'a AddressPools,
        wants: &'a Wants,
    ) -> impl Iterator<Item = IpAddr> + 'a {
        let mut seen = Vec::new();
        self.virtual_ips
            .iter()
            .filter_map(|vip| pools.config(&vip.pool))
            .flat_map(|c| c.dns.iter().copied())
            .filter(|d| if d.is_ipv4() { wants.dns4 } else { wants.dns6 })
            .filter(move |d| {
                let new = !seen.contains(d);
                seen.push(*d);
                new
            })
    }

    /// INTERNAL_IP4_SUBNET / INTERNAL_IP6_SUBNET (§3.15.1, §3.15.2): the
    /// networks behind us, from the children's local selectors that are
    /// prefixes of any protocol and port, for the families asked for (a
    /// client may route just those through the tunnel).
    fn protected_subnets(&self, wants: &Wants) -> Vec<CfgAttribute> {
        let local = self.conn.children.iter().flat_map(|c| &c.local_ts);
        subnet_attributes(local, wants.subnet4, wants.subnet6)
    }

    /// The peer's side of a Child SA narrowed to our virtual IPs, when the
    /// peer holds any (§2.19: its traffic comes from the address it was
    /// given); the selectors as they are otherwise. Empty when no selector
    /// covers a virtual IP: TS_UNACCEPTABLE.
    pub(crate) fn narrow_to_virtual_ips(
        &self,
        remote: Vec<TrafficSelector>,
    ) -> Vec<TrafficSelector> {
        if self.virtual_ips.is_empty() {
            return remote;
        }
        let mut out = Vec::new();
        for vip in &self.virtual_ips {
            for ts in &remote {
                if let Some(host) = intersect(ts, &ts_host(vip.address)) {
                    if !out.contains(&host) {
                        out.push(host);
                    }
                }
            }
        }
        out
    }

    /// Gives the leases back (the IKE SA is closed; a successor of a rekey
    /// took them over first, leaving none here).
    pub(crate) fn release_virtual_ips(&mut self, pools: &mut AddressPools) {
        for vip in self.virtual_ips.drain(..) {
            pools.release(&vip.pool, &vip.identity, vip.address);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ts::ts_any_port;
    use phalanx_sa::IpPrefix;

    fn prefix(s: &str) -> TrafficSelector {
        let (a, l) = s.split_once('/').unwrap();
        ts_any_port(IpPrefix::new(a.parse().unwrap(), l.parse().unwrap()).unwrap())
    }

    #[test]
    fn subnets_of_both_families_as_rfc_7296_section_3_15_1_writes_them() {
        let local = [
            prefix("10.2.0.0/24"),
            prefix("fd02::/64"),
            prefix("10.2.0.0/24"),
        ];
        let both = subnet_attributes(local.iter(), true, true);
        assert_eq!(both.len(), 2, "no repeats");
        assert_eq!(
            both[0].attribute_type,
            CfgAttributeType::INTERNAL_IP4_SUBNET
        );
        assert_eq!(both[0].value, [10, 2, 0, 0, 255, 255, 255, 0]);
        assert_eq!(
            both[1].attribute_type,
            CfgAttributeType::INTERNAL_IP6_SUBNET
        );
        assert_eq!(both[1].value[..2], [0xfd, 0x02]);
        assert_eq!(both[1].value[16], 64);
        assert_eq!(subnet_attributes(local.iter(), false, true).len(), 1);
        assert!(subnet_attributes(local.iter(), false, false).is_empty());
    }

    #[test]
    fn only_whole_prefixes_of_any_port_are_subnets() {
        assert!(ts_prefix(&prefix("0.0.0.0/0")).is_some_and(|(_, l)| l == 0));
        let mut ports = prefix("10.2.0.0/24");
        ports.start_port = 80;
        ports.end_port = 80;
        assert_eq!(ts_prefix(&ports), None);
        let range = TrafficSelector {
            addresses: TsAddresses::V4 {
                start: "10.2.0.1".parse().unwrap(),
                end: "10.2.0.9".parse().unwrap(),
            },
            ..prefix("10.2.0.0/24")
        };
        assert_eq!(ts_prefix(&range), None);
    }
}
