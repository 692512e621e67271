//! `[cluster]`: this node's place in a flat Phalanx cluster.
//!
//! ```toml
//! [cluster]
//! node_id = 1                      # 1..=65535, the Corosync nodeid
//! scheme = "packet-rr"             # packet-rr packet-sqf session-rr session-sqf hash-src hash-src-spi
//! group = "phalanx"                # CPG group name
//! heartbeat_port = 7400
//! heartbeat_interval_ms = 5
//! suspect_after_ms = 30
//! lease_len = 65536
//! checkpoint_every = 1024
//! quorum = "majority"              # majority (default) or off
//! kernel_filter = true             # drop ESP other nodes own in the kernel (eBPF), default true
//! kernel_filter_xdp = true         # ... already in the driver (XDP), default true
//! [cluster.outside]                # the protected (WAN) side: virtual address shared by all nodes
//! interface = "wan0"
//! address = "192.0.2.1"
//! mac = "02:00:5e:10:00:01"
//! [cluster.inside]                 # the clear side (site LAN)
//! interface = "lan0"
//! address = ["10.1.0.1", "fd01::1"] # one address, or one per family
//! mac = "02:00:5e:10:00:02"
//! [[cluster.node]]                 # every node, this one included: heartbeat address
//! id = 1
//! address = "10.99.0.11"
//! ```
//!
//! Checked here: the node id fits the 16 bits the explicit IV gives it
//! (RFC 4106 §3.1 only asks for uniqueness; the cluster partitions the IV
//! by node), this node is listed, ids and heartbeat addresses are unique
//! and of one family, the virtual MACs are unicast (IEEE 802: the I/G bit,
//! bit 0 of the first octet, is 0), the outside virtual address is the
//! tunnel endpoint (`protected.local`, one address of either family), a
//! side has at most one virtual address per family (IPv4 ones are
//! answered by ARP, IPv6 ones by neighbour discovery), and
//! the failure detector cannot
//! suspect a live node for one late heartbeat (`suspect_after_ms` more than
//! twice `heartbeat_interval_ms`). IKE runs in cluster mode with its
//! state replicated (see `crate::ike::cluster`); what it cannot use there
//! is refused by [`ike_rules`]. None of it can change on reload
//! ([`check_cluster_reload`]): sockets, CPG membership and leases are set
//! up once at start.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::time::Duration;
use std::collections::HashSet;
use std::ops::{Range, RangeInclusive};

use phalanx_cluster::limits::MAX_NODE_ID;
use phalanx_cluster::DispatchScheme;
use phalanx_cluster::NodeId;
use phalanx_cluster::QuorumPolicy;
use serde::Deserialize;
use toml::Spanned;

use super::{ConfigError, ProtectedSettings, Source};
use crate::limits::MAX_IFNAME_LEN;

/// The CPG group joined when `group` is not given.
pub(crate) const DEFAULT_GROUP: &str = "phalanx";
/// The UDP port of the heartbeats when `heartbeat_port` is not given.
pub(crate) const DEFAULT_HEARTBEAT_PORT: u16 = 7400;
/// Heartbeat period: a failure is seen within a few of these
/// (issue 5: failover in under 100 ms).
pub(crate) const DEFAULT_HEARTBEAT_INTERVAL_MS: u32 = 5;
/// Silence after which a node is suspected: six missed heartbeats.
pub(crate) const DEFAULT_SUSPECT_AFTER_MS: u32 = 30;
/// Sequence numbers per lease block (cluster contract: 65,536).
pub(crate) const DEFAULT_LEASE_LEN: u64 = 65_536;
/// Packets between two counter checkpoints of a stream (cluster contract).
pub(crate) const DEFAULT_CHECKPOINT_EVERY: u64 = 1024;
/// Longest CPG group name: `CPG_MAX_NAME_LENGTH` (128) less the NUL.
pub(crate) const MAX_GROUP_LEN: usize = 127;
/// Heartbeat periods allowed, in milliseconds.
const HEARTBEAT_INTERVAL_MS: RangeInclusive<u32> = 1..=1000;
/// Suspicion delays allowed, in milliseconds (the upper bound keeps a
/// typo from disabling the fast detector; Corosync's own membership
/// takes over beyond a few seconds anyway).
const SUSPECT_AFTER_MS: RangeInclusive<u32> = 3..=60_000;
/// Lease block lengths allowed. A block far below 2^48 (the highest
/// sequence number a node-partitioned IV can carry) and large enough to
/// hold many numbers per class.
const LEASE_LEN: RangeInclusive<u64> = 64..=(1 << 32);
/// Checkpoint periods allowed, in packets (the observer and the heal ring
/// keep 4,096 entries; a checkpoint must fall well inside them).
const CHECKPOINT_EVERY: RangeInclusive<u64> = 1..=2048;

/// The scheme names, for messages.
const SCHEME_NAMES: &str =
    "packet-rr, packet-sqf, session-rr, session-sqf, hash-src or hash-src-spi";

/// `[cluster]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSettings {
    /// This node (its Corosync nodeid; the top 16 bits of its explicit IVs).
    pub node_id: NodeId,
    /// How packets are spread over the nodes.
    pub scheme: DispatchScheme,
    /// The Corosync CPG group every node joins.
    pub group: String,
    /// UDP port of the heartbeats on the cluster link.
    pub heartbeat_port: u16,
    /// Period of this node's heartbeats.
    pub heartbeat_interval: Duration,
    /// Silence after which a peer is suspected and its share taken over.
    pub suspect_after: Duration,
    /// Sequence numbers per lease block.
    pub lease_len: u64,
    /// Packets of a stream between two counter checkpoints.
    pub checkpoint_every: u64,
    /// Whether a side of a partition without a majority stands down
    /// (every node of a cluster must use the same).
    pub quorum: QuorumPolicy,
    /// Drop inbound ESP that other nodes own in the kernel, before it is
    /// copied to this node's ring (an eBPF socket filter on the outside
    /// ring, `dataplane::cluster::kernel_filter`); if it cannot be loaded
    /// the node warns and runs without it.
    pub kernel_filter: bool,
    /// With `kernel_filter`: also run its ESP decision as an XDP program
    /// on the outside interface, which drops in the driver before the
    /// kernel allocates anything for the frame; if it cannot be loaded or
    /// attached the node warns and keeps the socket filter alone.
    pub kernel_filter_xdp: bool,
    /// The protected (WAN) side's virtual address.
    pub outside: ClusterSide,
    /// The clear (LAN) side's virtual address.
    pub inside: ClusterSide,
    /// Every node with its heartbeat address, this one included, in file
    /// order.
    pub nodes: Vec<(NodeId, IpAddr)>,
}

impl ClusterSettings {
    /// This node's share of the virtual-IP pools' fresh addresses: its
    /// place among the configured nodes by id, of all of them (a node down
    /// keeps its share; the others never hand it out, so no two nodes
    /// lease one address whatever the membership).
    pub fn pool_partition(&self) -> phalanx_ike::pool::Partition {
        let mut ids: Vec<NodeId> = self.nodes.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        let node = ids.iter().position(|id| *id == self.node_id).unwrap_or(0);
        phalanx_ike::pool::Partition {
            node: u32::try_from(node).unwrap_or(0),
            nodes: u32::try_from(ids.len()).unwrap_or(1).max(1),
        }
    }

    /// This node's heartbeat address (it is listed: checked when read).
    pub fn local_address(&self) -> Option<IpAddr> {
        self.address_of(self.node_id)
    }

    /// The heartbeat address of `node`.
    pub fn address_of(&self, node: NodeId) -> Option<IpAddr> {
        self.nodes.iter().find(|(id, _)| *id == node).map(|n| n.1)
    }

    /// The node whose heartbeat address is `address`.
    pub fn node_at(&self, address: IpAddr) -> Option<NodeId> {
        self.nodes.iter().find(|(_, a)| *a == address).map(|n| n.0)
    }
}

/// One side's virtual addresses, shared by every node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSide {
    /// The interface every node receives that side's frames on.
    pub interface: String,
    /// The virtual IP addresses (configured on no interface): one, or one
    /// of each family.
    pub addresses: SideAddresses,
    /// The virtual MAC address the view's first node answers ARP and
    /// neighbour solicitations with.
    pub mac: [u8; 6],
}

/// A side's virtual addresses: at most one per family, at least one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SideAddresses {
    /// The IPv4 address (answered by ARP).
    pub v4: Option<Ipv4Addr>,
    /// The IPv6 address (answered by neighbour discovery).
    pub v6: Option<Ipv6Addr>,
}

impl SideAddresses {
    /// Whether `address` is one of them.
    pub fn contains(&self, address: IpAddr) -> bool {
        match address {
            IpAddr::V4(a) => self.v4 == Some(a),
            IpAddr::V6(a) => self.v6 == Some(a),
        }
    }

    /// The addresses, IPv4 first.
    pub fn iter(&self) -> impl Iterator<Item = IpAddr> + '_ {
        let v4 = self.v4.map(IpAddr::V4);
        v4.into_iter().chain(self.v6.map(IpAddr::V6))
    }

    /// The one address of a side that has one (the outside: checked when
    /// read), else the IPv4 one.
    pub fn first(&self) -> Option<IpAddr> {
        self.iter().next()
    }
}

impl From<IpAddr> for SideAddresses {
    /// A side with `address` alone.
    fn from(address: IpAddr) -> SideAddresses {
        match address {
            IpAddr::V4(a) => SideAddresses {
                v4: Some(a),
                v6: None,
            },
            IpAddr::V6(a) => SideAddresses {
                v4: None,
                v6: Some(a),
            },
        }
    }
}

impl std::fmt::Display for SideAddresses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, address) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{address}")?;
        }
        Ok(())
    }
}

/// Refuses a reload that changes `[cluster]` (or adds or removes it):
/// the CPG membership, the heartbeat socket and the leases are set up at
/// start. `path` names the file in the message.
pub fn check_cluster_reload(
    path: &str,
    current: Option<&ClusterSettings>,
    new: Option<&ClusterSettings>,
) -> Result<(), String> {
    if current == new {
        return Ok(());
    }
    let what = match (current, new) {
        (None, _) => "[cluster] added",
        (_, None) => "[cluster] removed",
        _ => "[cluster] changed",
    };
    Err(format!(
        "{path}: {what}; cluster settings need a restart (nothing applied)"
    ))
}

/// `[cluster]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCluster {
    node_id: Spanned<i64>,
    scheme: Option<Spanned<String>>,
    group: Option<Spanned<String>>,
    heartbeat_port: Option<Spanned<i64>>,
    heartbeat_interval_ms: Option<Spanned<i64>>,
    suspect_after_ms: Option<Spanned<i64>>,
    lease_len: Option<Spanned<i64>>,
    checkpoint_every: Option<Spanned<i64>>,
    quorum: Option<Spanned<String>>,
    kernel_filter: Option<Spanned<bool>>,
    kernel_filter_xdp: Option<Spanned<bool>>,
    outside: Spanned<RawClusterSide>,
    inside: Spanned<RawClusterSide>,
    #[serde(default)]
    node: Vec<Spanned<RawClusterNode>>,
}

/// `[cluster.outside]` / `[cluster.inside]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClusterSide {
    interface: Spanned<String>,
    address: Spanned<RawAddresses>,
    mac: Spanned<String>,
}

/// `address = "10.1.0.1"` or `address = ["10.1.0.1", "fd01::1"]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawAddresses {
    /// One address.
    One(String),
    /// One per family.
    Many(Vec<String>),
}

/// One `[[cluster.node]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClusterNode {
    id: Spanned<i64>,
    address: Spanned<String>,
}

/// `[cluster]`, checked.
pub(crate) fn settings(
    source: &Source<'_>,
    raw: Option<Spanned<RawCluster>>,
    protected: &ProtectedSettings,
) -> Result<Option<ClusterSettings>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let raw = raw.into_inner();
    let node_id = node_id(source, &raw.node_id, "cluster.node_id")?;
    let (heartbeat_interval, suspect_after) = timers(source, &raw)?;
    let outside = side(source, raw.outside, "outside")?;
    let inside = side(source, raw.inside, "inside")?;
    check_sides(source, &outside, &inside, protected)?;
    let nodes = nodes(source, raw.node, node_id, &raw.node_id)?;
    Ok(Some(ClusterSettings {
        node_id,
        scheme: scheme(source, raw.scheme.as_ref())?,
        group: group(source, raw.group)?,
        heartbeat_port: heartbeat_port(source, raw.heartbeat_port.as_ref())?,
        heartbeat_interval,
        suspect_after,
        lease_len: ranged(source, raw.lease_len.as_ref(), "lease_len", LEASE_LEN)?
            .unwrap_or(DEFAULT_LEASE_LEN),
        checkpoint_every: ranged(
            source,
            raw.checkpoint_every.as_ref(),
            "checkpoint_every",
            CHECKPOINT_EVERY,
        )?
        .unwrap_or(DEFAULT_CHECKPOINT_EVERY),
        quorum: quorum(source, raw.quorum.as_ref())?,
        kernel_filter: raw.kernel_filter.is_none_or(|k| *k.get_ref()),
        kernel_filter_xdp: raw.kernel_filter_xdp.is_none_or(|k| *k.get_ref()),
        outside: outside.0,
        inside: inside.0,
        nodes,
    }))
}

/// An optional integer of `cluster.<field>` within `range`.
fn ranged(
    source: &Source<'_>,
    value: Option<&Spanned<i64>>,
    field: &str,
    range: RangeInclusive<u64>,
) -> Result<Option<u64>, ConfigError> {
    let Some(value) = value else {
        return Ok(None);
    };
    match u64::try_from(*value.get_ref()) {
        Ok(v) if range.contains(&v) => Ok(Some(v)),
        _ => {
            let msg = format!(
                "{} out of range {}..={}",
                value.get_ref(),
                range.start(),
                range.end()
            );
            Err(source.error(value.span(), format!("cluster.{field}"), msg))
        }
    }
}

/// A node id: 1..=65535 (it fills 16 bits of every explicit IV).
fn node_id(source: &Source<'_>, value: &Spanned<i64>, field: &str) -> Result<NodeId, ConfigError> {
    match u32::try_from(*value.get_ref()) {
        Ok(id) if (1..=MAX_NODE_ID).contains(&id) => Ok(NodeId(id)),
        _ => {
            let msg = format!(
                "node id {} out of range 1..={MAX_NODE_ID} (it is the Corosync nodeid and \
                 fills the top 16 bits of every explicit IV)",
                value.get_ref()
            );
            Err(source.error(value.span(), field, msg))
        }
    }
}

fn scheme(
    source: &Source<'_>,
    value: Option<&Spanned<String>>,
) -> Result<DispatchScheme, ConfigError> {
    let Some(value) = value else {
        return Ok(DispatchScheme::PacketRoundRobin);
    };
    value.get_ref().parse::<DispatchScheme>().map_err(|_| {
        let msg = format!(
            "unknown scheme {:?}; expected one of {SCHEME_NAMES}",
            value.get_ref()
        );
        source.error(value.span(), "cluster.scheme", msg)
    })
}

/// `cluster.quorum`: `majority` (the default) or `off`.
fn quorum(
    source: &Source<'_>,
    value: Option<&Spanned<String>>,
) -> Result<QuorumPolicy, ConfigError> {
    let Some(value) = value else {
        return Ok(QuorumPolicy::default());
    };
    QuorumPolicy::from_name(value.get_ref()).ok_or_else(|| {
        let msg = format!(
            "unknown quorum policy {:?}; expected \"majority\" (a minority side stands down) \
             or \"off\" (every side keeps going)",
            value.get_ref()
        );
        source.error(value.span(), "cluster.quorum", msg)
    })
}

fn group(source: &Source<'_>, value: Option<Spanned<String>>) -> Result<String, ConfigError> {
    let Some(value) = value else {
        return Ok(DEFAULT_GROUP.to_owned());
    };
    let name = value.get_ref();
    if name.is_empty() || name.len() > MAX_GROUP_LEN || name.contains('\0') {
        let msg = format!("a CPG group name is 1 to {MAX_GROUP_LEN} bytes without NUL");
        return Err(source.error(value.span(), "cluster.group", msg));
    }
    Ok(value.into_inner())
}

fn heartbeat_port(source: &Source<'_>, value: Option<&Spanned<i64>>) -> Result<u16, ConfigError> {
    let port = ranged(source, value, "heartbeat_port", 1..=u64::from(u16::MAX))?;
    // In range 1..=65535.
    Ok(port.map_or(DEFAULT_HEARTBEAT_PORT, |p| {
        u16::try_from(p).unwrap_or(DEFAULT_HEARTBEAT_PORT)
    }))
}

/// The heartbeat period and the suspicion delay; the delay must exceed
/// two periods so that one late or lost heartbeat never causes a
/// takeover.
fn timers(source: &Source<'_>, raw: &RawCluster) -> Result<(Duration, Duration), ConfigError> {
    let widen = |r: RangeInclusive<u32>| u64::from(*r.start())..=u64::from(*r.end());
    let interval = ranged(
        source,
        raw.heartbeat_interval_ms.as_ref(),
        "heartbeat_interval_ms",
        widen(HEARTBEAT_INTERVAL_MS),
    )?
    .unwrap_or(u64::from(DEFAULT_HEARTBEAT_INTERVAL_MS));
    let suspect = ranged(
        source,
        raw.suspect_after_ms.as_ref(),
        "suspect_after_ms",
        widen(SUSPECT_AFTER_MS),
    )?
    .unwrap_or(u64::from(DEFAULT_SUSPECT_AFTER_MS));
    if suspect <= 2 * interval {
        let msg = format!(
            "{suspect} ms must be more than twice heartbeat_interval_ms ({interval} ms): \
             one late heartbeat must not make a live node suspected"
        );
        let span = raw
            .suspect_after_ms
            .as_ref()
            .or(raw.heartbeat_interval_ms.as_ref())
            .map_or(0..0, Spanned::span);
        return Err(source.error(span, "cluster.suspect_after_ms", msg));
    }
    Ok((
        Duration::from_millis(interval),
        Duration::from_millis(suspect),
    ))
}

/// One side with the spans of its address and interface (for the
/// cross-checks).
type CheckedSide = (ClusterSide, Range<usize>, Range<usize>);

fn side(
    source: &Source<'_>,
    raw: Spanned<RawClusterSide>,
    name: &str,
) -> Result<CheckedSide, ConfigError> {
    let raw = raw.into_inner();
    let field = |f: &str| format!("cluster.{name}.{f}");
    let interface = raw.interface.get_ref();
    let name_ok = !interface.is_empty()
        && interface.len() <= MAX_IFNAME_LEN
        && !interface.contains(['/', ' ', '\0']);
    if !name_ok {
        let msg = format!(
            "{interface:?} is not an interface name (1 to {MAX_IFNAME_LEN} bytes, no '/' or space)"
        );
        return Err(source.error(raw.interface.span(), field("interface"), msg));
    }
    let addresses = side_addresses(source, &raw.address, &field("address"))?;
    let mac =
        mac(raw.mac.get_ref()).map_err(|msg| source.error(raw.mac.span(), field("mac"), msg))?;
    let spans = (raw.address.span(), raw.interface.span());
    Ok((
        ClusterSide {
            interface: raw.interface.into_inner(),
            addresses,
            mac,
        },
        spans.0,
        spans.1,
    ))
}

/// A side's virtual addresses: one, or a list of one per family.
fn side_addresses(
    source: &Source<'_>,
    raw: &Spanned<RawAddresses>,
    field: &str,
) -> Result<SideAddresses, ConfigError> {
    let texts = match raw.get_ref() {
        RawAddresses::One(text) => std::slice::from_ref(text),
        RawAddresses::Many(texts) => texts.as_slice(),
    };
    let fail = |msg: String| source.error(raw.span(), field, msg);
    let mut out = SideAddresses { v4: None, v6: None };
    for text in texts {
        let address = parse_unicast(text).map_err(fail)?;
        let taken = match address {
            IpAddr::V4(a) => out.v4.replace(a).is_some(),
            IpAddr::V6(a) => out.v6.replace(a).is_some(),
        };
        if taken {
            return Err(fail(format!(
                "two {} addresses: a side has at most one virtual address per family",
                if address.is_ipv4() { "IPv4" } else { "IPv6" }
            )));
        }
    }
    if out.first().is_none() {
        return Err(fail("no address: give one, or one per family".to_owned()));
    }
    Ok(out)
}

/// An address a node can be reached at (or answer for).
fn unicast_address(
    source: &Source<'_>,
    text: &Spanned<String>,
    field: &str,
) -> Result<IpAddr, ConfigError> {
    parse_unicast(text.get_ref()).map_err(|msg| source.error(text.span(), field, msg))
}

/// `text` as a unicast IP address, or why not.
fn parse_unicast(text: &str) -> Result<IpAddr, String> {
    let address: IpAddr = text
        .parse()
        .map_err(|_| format!("{text:?} is not an IP address"))?;
    let broadcast = matches!(address, IpAddr::V4(a) if a.is_broadcast());
    if address.is_unspecified() || address.is_multicast() || broadcast {
        return Err(format!("{address} is not a unicast address"));
    }
    Ok(address)
}

/// The two sides must not share an interface or address, and the outside
/// address is the tunnel endpoint the peer sends to.
fn check_sides(
    source: &Source<'_>,
    (outside, outside_span, _): &CheckedSide,
    (inside, inside_span, inside_interface): &CheckedSide,
    protected: &ProtectedSettings,
) -> Result<(), ConfigError> {
    if outside.addresses != SideAddresses::from(protected.local) {
        let msg = format!(
            "the outside virtual address {} must be protected.local ({}) alone: it is the \
             tunnel endpoint of every SA",
            outside.addresses, protected.local
        );
        return Err(source.error(outside_span.clone(), "cluster.outside.address", msg));
    }
    if inside.addresses.contains(protected.local) {
        let msg = "the inside and outside virtual addresses must differ";
        return Err(source.error(inside_span.clone(), "cluster.inside.address", msg));
    }
    if inside.interface == outside.interface {
        let msg = "the inside and outside interfaces must differ";
        return Err(source.error(inside_interface.clone(), "cluster.inside.interface", msg));
    }
    Ok(())
}

/// A MAC address, six hex octets separated by `:` or `-`; unicast only.
pub(crate) fn mac(text: &str) -> Result<[u8; 6], String> {
    let bad = || format!("{text:?} is not a MAC address (write \"02:00:5e:10:00:01\")");
    let mut out = [0_u8; 6];
    let mut parts = text.split([':', '-']);
    for octet in &mut out {
        let part = parts.next().filter(|p| p.len() == 2).ok_or_else(bad)?;
        *octet = u8::from_str_radix(part, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    // IEEE 802: bit 0 of the first octet set means a group address.
    if out[0] & 1 == 1 {
        return Err(format!(
            "{text} is a multicast MAC; a virtual address needs a unicast one \
             (e.g. locally administered 02:...)"
        ));
    }
    if out == [0; 6] {
        return Err("the all-zero MAC is not an address".to_owned());
    }
    Ok(out)
}

/// `[[cluster.node]]`: unique ids and addresses of one family, this node
/// among them.
fn nodes(
    source: &Source<'_>,
    raw: Vec<Spanned<RawClusterNode>>,
    local: NodeId,
    local_span: &Spanned<i64>,
) -> Result<Vec<(NodeId, IpAddr)>, ConfigError> {
    let mut out: Vec<(NodeId, IpAddr)> = Vec::with_capacity(raw.len());
    let (mut ids, mut addresses) = (HashSet::new(), HashSet::new());
    for (i, node) in raw.into_iter().enumerate() {
        let node = node.into_inner();
        let field = |f: &str| format!("cluster.node[{i}].{f}");
        let id = node_id(source, &node.id, &field("id"))?;
        if !ids.insert(id) {
            let msg = format!("node id {} is listed twice", id.0);
            return Err(source.error(node.id.span(), field("id"), msg));
        }
        let address = unicast_address(source, &node.address, &field("address"))?;
        if !addresses.insert(address) {
            let msg = format!("address {address} is listed twice");
            return Err(source.error(node.address.span(), field("address"), msg));
        }
        if let Some((_, first)) = out.first() {
            if first.is_ipv4() != address.is_ipv4() {
                let msg = "every node's heartbeat address must be of the same family";
                return Err(source.error(node.address.span(), field("address"), msg));
            }
        }
        out.push((id, address));
    }
    if !ids.contains(&local) {
        let msg = format!(
            "this node (node_id = {}) is not listed in [[cluster.node]]: its heartbeat \
             address is needed",
            local.0
        );
        return Err(source.error(local_span.span(), "cluster.node", msg));
    }
    Ok(out)
}

pub(crate) mod ike_rules;

#[cfg(test)]
mod tests;
