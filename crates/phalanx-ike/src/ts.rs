//! Traffic selectors (RFC 7296 §2.9, §3.13): narrowing, the initiator's
//! subset check, and the conversion to data-plane
//! [`Selector`](phalanx_sa::Selector)s.
//!
//! The IKE layer keeps selectors as the exact inclusive ranges they are on
//! the wire ([`TrafficSelector`]); only when an SA is installed are they
//! turned into prefix-based selectors, by [`to_selectors`], which
//! covers each address range exactly with the fewest prefixes (see
//! [`convert`] for what is widened, and why).
//!
//! Narrowing (§2.9): what both sides allow is the intersection of what was
//! proposed with what is configured, selector by selector: address ranges
//! intersect, port ranges intersect (OPAQUE lies inside "any port"), and
//! protocols must be equal unless one is 0, "any". A configured Child SA
//! allows every pair of its local and remote selectors, so each side is
//! narrowed on its own. Selectors that lie inside another result are
//! dropped: when the initiator's first selector is the packet that
//! triggered the request (§2.9: it "SHOULD" be), the result still covers
//! it, inside the wider selector the rest of the proposal allows. Only when
//! that wider result would be too many data-plane selectors to install is
//! it cut down to the narrowing of the triggering selectors alone, which
//! §2.9 names as the part a responder must keep.

pub mod convert;

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use phalanx_sa::IpPrefix;
use phalanx_wire::ike::iana::NotifyType;
use phalanx_wire::ike::{TrafficSelector, TsAddresses};
use phalanx_wire::IpProtocol;

pub use convert::{from_selector, prefixes_of_range, to_selectors, ts_from_prefix};

/// Most data-plane selectors one Child SA may need (the product of the
/// prefixes covering each side). Pathological ranges (an IPv6 range needs
/// up to 254 prefixes) would otherwise make one SA install tens of
/// thousands of policies.
pub const MAX_SELECTORS_PER_SA: usize = 256;

/// Why traffic selectors were refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TsError {
    /// Nothing of TSi or TSr is allowed, or no TSi/TSr pair shares a
    /// family and protocol (RFC 7296 §2.9).
    Unacceptable,
    /// The responder answered selectors outside what we proposed
    /// (RFC 7296 §2.9: it may only narrow).
    NotSubset,
    /// More data-plane selectors than [`MAX_SELECTORS_PER_SA`].
    TooManySelectors,
}

impl TsError {
    /// The Notify that reports it: TS_UNACCEPTABLE (RFC 7296 §3.10.1).
    pub fn notify_type(&self) -> NotifyType {
        NotifyType::TS_UNACCEPTABLE
    }
}

impl fmt::Display for TsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TsError::Unacceptable => "traffic selectors unacceptable",
            TsError::NotSubset => "answered traffic selectors are not a subset of the proposal",
            TsError::TooManySelectors => "traffic selectors need too many policies",
        })
    }
}

impl std::error::Error for TsError {}

/// Our role in the exchange that carries TSi and TSr: "i" is always the
/// side that sent the request (RFC 7296 §2.9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TsRole {
    /// We sent the request: TSi is our side.
    Initiator,
    /// We answer it: TSi is the peer's side.
    Responder,
}

/// A selector's address range as integers of its family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AddrRange {
    pub(crate) v6: bool,
    pub(crate) start: u128,
    pub(crate) end: u128,
}

impl AddrRange {
    pub(crate) fn of(ts: &TrafficSelector) -> AddrRange {
        match ts.addresses {
            TsAddresses::V4 { start, end } => AddrRange {
                v6: false,
                start: u32::from(start).into(),
                end: u32::from(end).into(),
            },
            TsAddresses::V6 { start, end } => AddrRange {
                v6: true,
                start: u128::from(start),
                end: u128::from(end),
            },
        }
    }

    /// Back to wire form; IPv4 ranges are always below 2^32.
    pub(crate) fn addresses(&self) -> TsAddresses {
        if self.v6 {
            return TsAddresses::V6 {
                start: Ipv6Addr::from(self.start),
                end: Ipv6Addr::from(self.end),
            };
        }
        let v4 = |x: u128| Ipv4Addr::from(u32::try_from(x).unwrap_or(u32::MAX));
        TsAddresses::V4 {
            start: v4(self.start),
            end: v4(self.end),
        }
    }
}

/// RFC 7296 §3.13.1: "start 65535, end 0" is OPAQUE.
fn is_opaque(ts: &TrafficSelector) -> bool {
    ts.start_port == u16::MAX && ts.end_port == 0
}

fn any_ports(ts: &TrafficSelector) -> bool {
    ts.start_port == 0 && ts.end_port == u16::MAX
}

/// The intersection of two port fields; OPAQUE lies inside "any".
fn intersect_ports(a: &TrafficSelector, b: &TrafficSelector) -> Option<(u16, u16)> {
    match (is_opaque(a), is_opaque(b)) {
        (true, true) => Some((u16::MAX, 0)),
        (true, false) => any_ports(b).then_some((u16::MAX, 0)),
        (false, true) => any_ports(a).then_some((u16::MAX, 0)),
        (false, false) => {
            let (start, end) = (a.start_port.max(b.start_port), a.end_port.min(b.end_port));
            (start <= end).then_some((start, end))
        }
    }
}

/// Equal protocols, or the specific one when the other is 0 (any).
pub(crate) fn intersect_protocol(a: IpProtocol, b: IpProtocol) -> Option<IpProtocol> {
    match (a.0, b.0) {
        (0, _) => Some(b),
        (_, 0) => Some(a),
        _ => (a == b).then_some(a),
    }
}

/// The traffic both selectors cover, if any.
pub fn intersect(a: &TrafficSelector, b: &TrafficSelector) -> Option<TrafficSelector> {
    let (ra, rb) = (AddrRange::of(a), AddrRange::of(b));
    if ra.v6 != rb.v6 {
        return None;
    }
    let range = AddrRange {
        v6: ra.v6,
        start: ra.start.max(rb.start),
        end: ra.end.min(rb.end),
    };
    if range.start > range.end {
        return None;
    }
    let ip_protocol = intersect_protocol(a.ip_protocol, b.ip_protocol)?;
    let (start_port, end_port) = intersect_ports(a, b)?;
    Some(TrafficSelector {
        ip_protocol,
        start_port,
        end_port,
        addresses: range.addresses(),
    })
}

/// Whether all the traffic of `inner` is covered by `outer`.
pub fn is_subset(inner: &TrafficSelector, outer: &TrafficSelector) -> bool {
    intersect(inner, outer).as_ref() == Some(inner)
}

/// What of `proposed` our configured selectors `ours` allow: the non-empty
/// pairwise intersections, in the order of `proposed`, without those that
/// lie inside another.
pub fn narrow(ours: &[TrafficSelector], proposed: &[TrafficSelector]) -> Vec<TrafficSelector> {
    let all: Vec<TrafficSelector> = proposed
        .iter()
        .flat_map(|p| ours.iter().filter_map(move |o| intersect(p, o)))
        .collect();
    without_redundant(all)
}

/// Drops each selector inside another (the first of equal ones is kept).
fn without_redundant(all: Vec<TrafficSelector>) -> Vec<TrafficSelector> {
    let redundant = |i: usize, x: &TrafficSelector| {
        all.iter()
            .enumerate()
            .any(|(j, y)| j != i && is_subset(x, y) && (x != y || j < i))
    };
    all.iter()
        .enumerate()
        .filter(|(i, x)| !redundant(*i, x))
        .map(|(_, x)| *x)
        .collect()
}

/// The responder's narrowing of a request's TSi and TSr (RFC 7296 §2.9)
/// against the Child SA's configured selectors; `role` says which side TSi
/// is. Returns the TSi and TSr to answer.
///
/// Errors: [`TsError::Unacceptable`] when either side narrows to nothing
/// or no TSi/TSr pair could carry a packet (family or protocol differ);
/// [`TsError::TooManySelectors`] when even the triggering selectors need
/// too many data-plane selectors. Both answer TS_UNACCEPTABLE.
pub fn narrow_pair(
    local_cfg: &[TrafficSelector],
    remote_cfg: &[TrafficSelector],
    tsi: &[TrafficSelector],
    tsr: &[TrafficSelector],
    role: TsRole,
) -> Result<(Vec<TrafficSelector>, Vec<TrafficSelector>), TsError> {
    let (i_cfg, r_cfg) = match role {
        TsRole::Initiator => (local_cfg, remote_cfg),
        TsRole::Responder => (remote_cfg, local_cfg),
    };
    let narrowed = (narrow(i_cfg, tsi), narrow(r_cfg, tsr));
    match installable(&narrowed.0, &narrowed.1) {
        Err(TsError::TooManySelectors) => {}
        other => return other.map(|()| narrowed),
    }
    // §2.9: the first selectors may be the triggering packet; keep at
    // least that.
    let first = |ts: &[TrafficSelector]| ts.get(..1).unwrap_or(&[]).to_vec();
    let trigger = (narrow(i_cfg, &first(tsi)), narrow(r_cfg, &first(tsr)));
    installable(&trigger.0, &trigger.1).map(|()| trigger)
}

/// Whether a TSi/TSr pair can carry traffic and be installed.
fn installable(tsi: &[TrafficSelector], tsr: &[TrafficSelector]) -> Result<(), TsError> {
    let carries = tsi.iter().any(|i| {
        tsr.iter().any(|r| {
            AddrRange::of(i).v6 == AddrRange::of(r).v6
                && intersect_protocol(i.ip_protocol, r.ip_protocol).is_some()
        })
    });
    if !carries {
        return Err(TsError::Unacceptable);
    }
    to_selectors(tsi, tsr).map(drop)
}

/// The initiator's check of the responder's TSi or TSr (RFC 7296 §2.9):
/// not empty, and each selector inside one we proposed.
pub fn check_narrowed(
    proposed: &[TrafficSelector],
    answered: &[TrafficSelector],
) -> Result<(), TsError> {
    if answered.is_empty() {
        return Err(TsError::Unacceptable);
    }
    let inside = |a: &TrafficSelector| proposed.iter().any(|p| is_subset(a, p));
    if answered.iter().all(inside) {
        Ok(())
    } else {
        Err(TsError::NotSubset)
    }
}

/// A selector for exactly `prefix`, any protocol and port.
pub fn ts_any_port(prefix: IpPrefix) -> TrafficSelector {
    ts_from_prefix(prefix, IpProtocol(0), 0, u16::MAX)
}

/// A host selector for one address, any protocol and port (RFC 7296 §2.9:
/// the first TS describes the packet that triggered the request; §2.19: a
/// virtual IP).
pub fn ts_host(addr: IpAddr) -> TrafficSelector {
    let addresses = match addr {
        IpAddr::V4(a) => TsAddresses::V4 { start: a, end: a },
        IpAddr::V6(a) => TsAddresses::V6 { start: a, end: a },
    };
    TrafficSelector {
        ip_protocol: IpProtocol(0),
        start_port: 0,
        end_port: u16::MAX,
        addresses,
    }
}

/// The selector of the whole IPv4 or IPv6 address space (`0.0.0.0/0`,
/// `::/0`), any protocol and port.
pub fn ts_any(v6: bool) -> TrafficSelector {
    ts_any_port(if v6 {
        IpPrefix::ANY_V6
    } else {
        IpPrefix::ANY_V4
    })
}

#[cfg(test)]
#[path = "ts_tests.rs"]
mod tests;
