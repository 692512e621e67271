//! Virtual-IP pools: the inner addresses a responder hands to End-Users in
//! a CFG_REPLY (RFC 7296 §2.19, §3.15).
//!
//! A lease belongs to an identity (the peer's authenticated IDi), so an
//! End-User who reconnects gets the same address again, as strongSwan's
//! pools do. A lease is *online* while an IKE SA of that identity holds it
//! (several may: a rekeyed IKE SA hands it to its successor), then
//! *offline*: still reserved for the identity until the pool has no fresh
//! address left, when the lease offline the longest is reclaimed for
//! someone else. A pool with every lease online is exhausted, and the
//! request is answered INTERNAL_ADDRESS_FAILURE (§3.15.4 via §2.19).
//!
//! On a cluster each node keeps its own pools, in step through the
//! replicated IKE SA state: every node marks the addresses of every IKE
//! SA's snapshot leased and gives them back when the IKE SA is gone. Two
//! nodes never hand out one fresh address because each hands out only its
//! own share (a [`Partition`]: the offsets `k mod n` of node `k` of `n`),
//! and reclaims only offline leases of its share; an identity's own
//! offline lease comes back to it on any node.

use core::net::IpAddr;
use std::collections::{BTreeMap, HashMap};

use crate::config::PoolConfig;

/// Why no address came out of a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolError {
    /// No pool of that name is configured.
    Unknown,
    /// Every address is leased to an identity that is online.
    Exhausted,
}

/// How a pool is used, for `phalanxctl` and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolUsage {
    /// The pool's name.
    pub name: String,
    /// Addresses in the range (saturating at `u64::MAX`).
    pub size: u64,
    /// Leases held by an IKE SA now.
    pub online: u64,
    /// Leases kept for identities that are not connected.
    pub offline: u64,
}

/// One lease of one identity.
#[derive(Debug)]
struct Lease {
    /// The address's offset from the pool's first address.
    offset: u128,
    /// IKE SAs holding it.
    holders: u32,
    /// When it went offline, in the pool's release order.
    offline_since: Option<u64>,
}

/// One pool's leases.
#[derive(Debug)]
struct AddressPool {
    config: PoolConfig,
    /// Addresses in the range.
    size: u128,
    /// Offsets below this have been leased at least once.
    fresh_from: u128,
    by_identity: HashMap<String, Lease>,
    /// The identity holding each leased offset.
    by_offset: HashMap<u128, String>,
    /// Offline leases by the order they went offline: (stamp → identity).
    offline: BTreeMap<u64, String>,
    /// The next release stamp.
    stamp: u64,
}

impl AddressPool {
    fn new(config: PoolConfig) -> AddressPool {
        let size = span(config.first, config.last);
        AddressPool {
            config,
            size,
            fresh_from: 0,
            by_identity: HashMap::new(),
            by_offset: HashMap::new(),
            offline: BTreeMap::new(),
            stamp: 0,
        }
    }

    /// In range by construction: `offset < size`, and the range lies in
    /// its family.
    fn address(&self, offset: u128) -> IpAddr {
        address_at(&self.config, offset)
    }

    fn acquire(&mut self, identity: &str, part: Partition) -> Result<IpAddr, PoolError> {
        if let Some(lease) = self.by_identity.get_mut(identity) {
            if let Some(stamp) = lease.offline_since.take() {
                self.offline.remove(&stamp);
            }
            lease.holders += 1;
            let offset = lease.offset;
            return Ok(self.address(offset));
        }
        let offset = match self.fresh(part) {
            Some(offset) => offset,
            None => {
                // Reclaim the lease of our share offline the longest.
                let (stamp, owner) = self
                    .offline
                    .iter()
                    .find(|(_, identity)| {
                        self.by_identity
                            .get(*identity)
                            .is_some_and(|l| part.owns(l.offset))
                    })
                    .map(|(s, i)| (*s, i.clone()))
                    .ok_or(PoolError::Exhausted)?;
                self.offline.remove(&stamp);
                let old = self
                    .by_identity
                    .remove(&owner)
                    .ok_or(PoolError::Exhausted)?;
                old.offset
            }
        };
        self.hold_new(identity, offset);
        Ok(self.address(offset))
    }

    /// The next offset never leased (skipping those a reconfiguration
    /// carried over).
    /// A new lease of `offset` for `identity`, held once.
    fn hold_new(&mut self, identity: &str, offset: u128) {
        self.by_offset.insert(offset, identity.to_owned());
        self.by_identity.insert(
            identity.to_owned(),
            Lease {
                offset,
                holders: 1,
                offline_since: None,
            },
        );
    }

    /// The next never-leased offset of our share, or `None`.
    fn fresh(&mut self, part: Partition) -> Option<u128> {
        let (k, n) = (u128::from(part.node), u128::from(part.nodes.max(1)));
        // The first offset of the share at or after the cursor.
        let mut offset = self.fresh_from + (k + n - self.fresh_from % n) % n;
        while offset < self.size {
            if !self.by_offset.contains_key(&offset) {
                self.fresh_from = offset + 1;
                return Some(offset);
            }
            offset += n;
        }
        self.fresh_from = self.size;
        None
    }

    /// Marks `address` leased to `identity` by an IKE SA another node
    /// runs (or ran); whether another identity held it here.
    fn adopt(&mut self, identity: &str, address: IpAddr) -> bool {
        let Some(offset) = offset_of(self.config.first, address).filter(|o| *o < self.size) else {
            return false;
        };
        if let Some(lease) = self.by_identity.get_mut(identity) {
            if lease.offset == offset {
                if let Some(stamp) = lease.offline_since.take() {
                    self.offline.remove(&stamp);
                }
                lease.holders += 1;
                return false;
            }
            // The identity holds another address now.
            if let Some(old) = self.by_identity.remove(identity) {
                self.by_offset.remove(&old.offset);
                if let Some(stamp) = old.offline_since {
                    self.offline.remove(&stamp);
                }
            }
        }
        let mut conflict = false;
        if let Some(other) = self.by_offset.remove(&offset) {
            if let Some(lease) = self.by_identity.remove(&other) {
                if let Some(stamp) = lease.offline_since {
                    self.offline.remove(&stamp);
                }
                conflict = lease.holders > 0;
            }
        }
        self.hold_new(identity, offset);
        conflict
    }

    /// Takes over `old`'s leases whose addresses lie in this range (a
    /// reconfigured pool: an End-User keeps its address, and no address
    /// held by an IKE SA is handed out twice).
    fn carry_over(&mut self, old: AddressPool) {
        let mut offline: Vec<(u64, String)> = old.offline.into_iter().collect();
        offline.sort_unstable();
        for (identity, lease) in old.by_identity {
            let address = address_at(&old.config, lease.offset);
            let Some(offset) = offset_of(self.config.first, address).filter(|o| *o < self.size)
            else {
                continue;
            };
            self.by_offset.insert(offset, identity.clone());
            self.by_identity.insert(
                identity,
                Lease {
                    offset,
                    holders: lease.holders,
                    offline_since: None,
                },
            );
        }
        // Offline ones keep their order.
        for (_, identity) in offline {
            if let Some(lease) = self.by_identity.get_mut(&identity) {
                lease.offline_since = Some(self.stamp);
                self.offline.insert(self.stamp, identity);
                self.stamp += 1;
            }
        }
    }

    fn release(&mut self, identity: &str, address: IpAddr) {
        let offset = offset_of(self.config.first, address);
        let Some(lease) = self
            .by_identity
            .get_mut(identity)
            .filter(|l| Some(l.offset) == offset && l.holders > 0)
        else {
            return;
        };
        lease.holders -= 1;
        if lease.holders == 0 {
            lease.offline_since = Some(self.stamp);
            self.offline.insert(self.stamp, identity.to_owned());
            self.stamp += 1;
        }
    }

    fn usage(&self) -> PoolUsage {
        let online = self.by_identity.values().filter(|l| l.holders > 0).count();
        PoolUsage {
            name: self.config.name.clone(),
            size: u64::try_from(self.size).unwrap_or(u64::MAX),
            online: online as u64,
            offline: self.offline.len() as u64,
        }
    }
}

/// The address at `offset` of a pool's configuration.
fn address_at(config: &PoolConfig, offset: u128) -> IpAddr {
    match config.first {
        IpAddr::V4(a) => IpAddr::V4(
            u32::from(a)
                .wrapping_add(u32::try_from(offset).unwrap_or(0))
                .into(),
        ),
        IpAddr::V6(a) => IpAddr::V6(u128::from(a).wrapping_add(offset).into()),
    }
}

/// Addresses from `first` to `last` inclusive (0 if reversed or of two
/// families; the configuration refuses both).
fn span(first: IpAddr, last: IpAddr) -> u128 {
    offset_of(first, last).map_or(0, |o| o + 1)
}

/// `address - first`, if `address` is at or above `first` in its family.
fn offset_of(first: IpAddr, address: IpAddr) -> Option<u128> {
    match (first, address) {
        (IpAddr::V4(f), IpAddr::V4(a)) => u32::from(a).checked_sub(u32::from(f)).map(u128::from),
        (IpAddr::V6(f), IpAddr::V6(a)) => u128::from(a).checked_sub(u128::from(f)),
        _ => None,
    }
}

/// Every pool of an endpoint.
#[derive(Debug, Default)]
pub(crate) struct AddressPools {
    pools: Vec<AddressPool>,
    partition: Partition,
}

/// Which fresh addresses this endpoint may hand out: offsets `node` mod
/// `nodes` (all of them alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    /// This node's index, below `nodes`.
    pub node: u32,
    /// How many nodes share the pools.
    pub nodes: u32,
}

impl Default for Partition {
    fn default() -> Partition {
        Partition { node: 0, nodes: 1 }
    }
}

impl Partition {
    fn owns(self, offset: u128) -> bool {
        offset % u128::from(self.nodes.max(1)) == u128::from(self.node)
    }
}

impl AddressPools {
    /// Pools for `configs`.
    pub(crate) fn new(configs: &[PoolConfig]) -> AddressPools {
        AddressPools {
            pools: configs.iter().cloned().map(AddressPool::new).collect(),
            partition: Partition::default(),
        }
    }

    /// A reconfiguration: a pool whose definition is unchanged keeps its
    /// state; a changed one (same name) keeps the leases that still lie
    /// in its range; a removed pool's leases are forgotten (their IKE SAs
    /// keep their addresses until they close).
    pub(crate) fn reconfigure(&mut self, configs: &[PoolConfig]) {
        let mut old: Vec<AddressPool> = core::mem::take(&mut self.pools);
        for config in configs {
            let same = old.iter().position(|p| p.config == *config);
            let pool = match same {
                Some(i) => old.swap_remove(i),
                None => {
                    let mut pool = AddressPool::new(config.clone());
                    if let Some(i) = old.iter().position(|p| p.config.name == config.name) {
                        pool.carry_over(old.swap_remove(i));
                    }
                    pool
                }
            };
            self.pools.push(pool);
        }
    }

    fn pool_mut(&mut self, name: &str) -> Option<&mut AddressPool> {
        self.pools.iter_mut().find(|p| p.config.name == name)
    }

    /// The pool named `name`.
    pub(crate) fn config(&self, name: &str) -> Option<&PoolConfig> {
        self.pools
            .iter()
            .map(|p| &p.config)
            .find(|c| c.name == name)
    }

    /// An address of pool `name` for `identity` (its earlier one if it
    /// still has it).
    pub(crate) fn acquire(&mut self, name: &str, identity: &str) -> Result<IpAddr, PoolError> {
        let part = self.partition;
        self.pool_mut(name)
            .ok_or(PoolError::Unknown)?
            .acquire(identity, part)
    }

    /// One IKE SA of `identity` no longer holds `address` of pool `name`.
    pub(crate) fn release(&mut self, name: &str, identity: &str, address: IpAddr) {
        if let Some(pool) = self.pool_mut(name) {
            pool.release(identity, address);
        }
    }

    /// This node's share of fresh addresses (module doc).
    pub(crate) fn set_partition(&mut self, partition: Partition) {
        if partition != self.partition {
            self.partition = partition;
            for pool in &mut self.pools {
                pool.fresh_from = 0;
            }
        }
    }

    /// Marks the leases of a replicated IKE SA; how many another identity
    /// held here.
    pub(crate) fn adopt(&mut self, leases: &[crate::ha::VirtualIpLease]) -> u64 {
        let mut conflicts = 0;
        for lease in leases {
            if let Some(pool) = self.pool_mut(&lease.pool) {
                conflicts += u64::from(pool.adopt(&lease.identity, lease.address));
            }
        }
        conflicts
    }

    /// Every pool's usage, in configuration order.
    pub(crate) fn usage(&self) -> Vec<PoolUsage> {
        self.pools.iter().map(AddressPool::usage).collect()
    }
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
