//! SA and policy installation: the one path by which SAs reach the data
//! plane, used by the configuration (at start and on reload) and, later,
//! by IKE.
//!
//! The data plane reads a [`Runtime`] snapshot — inbound SAD, outbound
//! SAD, SPD and the installed entries — published through an [`ArcSwap`]:
//! a worker loads it once per batch and never waits for a writer. Writers
//! are serialised by a mutex.
//!
//! - [`SaStore::apply_config`] replaces the whole set at once: every SA of
//!   the new configuration is built first (an error publishes nothing),
//!   SAs whose definition did not change keep their existing
//!   `Arc<InboundSa>` / `Arc<OutboundSa>` (sequence counter, replay window,
//!   lifetime and counters carry on: no packet of theirs is lost or
//!   replayed), then one new snapshot is published.
//! - [`SaStore::install_sa`] / [`SaStore::remove_sa`] add or remove one SA
//!   (the IKE path): the live SADs are updated in place (read-copy-update
//!   inside phalanx-sa), so the cost is that of one SAD update, not a
//!   rebuild. An SA is usable by every worker when the call returns: the
//!   SAD a worker reads is the same object the insert went into, so a
//!   worker that loaded its snapshot before the call sees it too.
//! - IKE Child SAs ([`ike`]): each configured child has a *slot*, an id in
//!   the outbound SAD that its policies protect with and that always holds
//!   the child's current outbound SA (every outbound SA also keeps an id
//!   of its own). Installing a child's outbound SA switches the slot in
//!   one atomic replace (a rekey: packets move to the new SA, the old one
//!   stays installed until it is removed); removing the current one empties
//!   the slot, so the policies drop as `no_outbound_sa` (and, for
//!   `start_action = "trap"`, ask IKE for an SA through [`Trap`]).
//!   [`SaStore::apply_config`] keeps IKE SAs and slots across reloads.
//!
//! Policy ids double as the index of each worker's policy hit counters
//! ([`PolicyHits`](crate::dataplane::PolicyHits)). A policy whose
//! definition did not change keeps its id (and so its count) across a
//! reload; a new or changed one gets the lowest id no kept policy holds,
//! and with it a new `generation`, which tells the counters that the slot
//! now counts another policy and starts again from 0.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::{ArcSwap, Guard};
use phalanx_crypto::{CryptoError, SaTransform};
use phalanx_sa::{
    InboundSa, OutboundSa, OutboundSad, Policy, PolicyAction, PolicyId, SaError, SaMode, Sad, Spd,
    SpdError,
};

use crate::config::{ChildRef, Config, Direction, PolicyConfig, PolicyTarget, SaConfig};

pub mod ike;
pub mod peer;

pub use ike::{ChildSlot, Trap};
pub use peer::{PeerKey, PeerSlot};

/// The runtime object of an installed SA.
#[derive(Debug, Clone)]
pub enum SaHandle {
    /// An inbound SA, in the SAD by SPI.
    Inbound(Arc<InboundSa>),
    /// An outbound SA, in the outbound SAD under `id` (what policies name).
    Outbound {
        /// The id policies use (`PolicyAction::Protect(id)`).
        id: u32,
        /// The SA.
        sa: Arc<OutboundSa>,
    },
}

/// Where an installed SA came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SaOrigin {
    /// An `[[sa]]` table of the configuration.
    Config,
    /// IKE, for this Child SA.
    Ike(ChildRef),
}

/// An installed SA: its definition and runtime object.
#[derive(Debug)]
pub struct InstalledSa {
    /// What was asked for.
    pub config: SaConfig,
    /// The runtime object.
    pub handle: SaHandle,
    /// When it was installed.
    pub installed: Instant,
    /// Who installed it.
    pub origin: SaOrigin,
}

/// An installed policy.
#[derive(Debug, Clone)]
pub struct InstalledPolicy {
    /// What was asked for.
    pub config: PolicyConfig,
    /// Its id in the SPD, from 1; kept across reloads while the
    /// definition does not change. `id - 1` indexes the hit counters.
    pub id: PolicyId,
    /// The [`Runtime::generation`] that installed this definition: hit
    /// counts recorded under another generation belong to a policy that
    /// held this id before.
    pub generation: u64,
}

/// One consistent view of everything the data plane looks up.
#[derive(Debug, Default)]
pub struct Runtime {
    /// Bumped on every publication.
    pub generation: u64,
    /// Inbound SAs by SPI (RFC 4301 §4.4.2).
    pub inbound: Arc<Sad>,
    /// Outbound SAs by the id policies name.
    pub outbound: Arc<OutboundSad>,
    /// The outbound SPD (RFC 4301 §4.4.1).
    pub spd: Arc<Spd>,
    /// Every installed SA.
    pub sas: Vec<Arc<InstalledSa>>,
    /// Every installed policy, in configuration order (the `[[policy]]`
    /// tables, then the policies of the IKE children).
    pub policies: Vec<InstalledPolicy>,
    /// The IKE children's outbound slots.
    pub slots: Arc<HashMap<ChildRef, ChildSlot>>,
    /// The trap of each slot id whose child has `start_action = "trap"`.
    pub traps: Arc<HashMap<u32, Arc<Trap>>>,
    /// The End-Users' slots of per-peer children ([`peer`]).
    pub peers: Arc<HashMap<PeerKey, PeerSlot>>,
    /// The per-peer children (connections with pools) and their policy
    /// priority.
    pub per_peer: Arc<HashMap<ChildRef, u32>>,
}

impl Runtime {
    /// The installed SA named `name`.
    pub fn sa(&self, name: &str) -> Option<&Arc<InstalledSa>> {
        self.sas.iter().find(|sa| sa.config.name == name)
    }

    /// The installed outbound SA whose SPI is `spi`. A scan: for the rare
    /// packet a socket refused, or an ICMP error about one.
    pub fn outbound_with_spi(&self, spi: u32) -> Option<&Arc<OutboundSa>> {
        self.outbound_sas().find(|sa| sa.params.spi == spi)
    }

    /// Every installed outbound SA.
    pub fn outbound_sas(&self) -> impl Iterator<Item = &Arc<OutboundSa>> {
        self.sas
            .iter()
            .filter_map(|installed| match &installed.handle {
                SaHandle::Outbound { sa, .. } => Some(sa),
                SaHandle::Inbound(_) => None,
            })
    }

    /// The trap behind outbound id `id`, if it is a trap child's slot
    /// (the data plane asks this only when the id holds no SA).
    #[inline]
    pub fn trap(&self, id: u32) -> Option<&Arc<Trap>> {
        if self.traps.is_empty() {
            return None;
        }
        self.traps.get(&id)
    }
}

/// Why an installation was refused; nothing was changed.
#[derive(Debug)]
#[non_exhaustive]
pub enum InstallError {
    /// The keys or algorithms were refused by the crypto provider.
    Crypto {
        /// The SA.
        name: String,
        /// Why.
        error: CryptoError,
    },
    /// The SA parameters were refused (e.g. the replay window).
    Sa {
        /// The SA.
        name: String,
        /// Why.
        error: SaError,
    },
    /// An SA with this name, or an inbound SA with this SPI, exists.
    Duplicate(String),
    /// No SA with this name is installed.
    NotFound(String),
    /// A policy protects with an SA that is not an installed outbound SA.
    UnknownSa {
        /// The policy.
        policy: String,
        /// The SA it names.
        sa: String,
    },
    /// The SPD refused a policy.
    Spd {
        /// The policy.
        policy: String,
        /// Why.
        error: SpdError,
    },
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallError::Crypto { name, error } => write!(f, "SA {name:?}: {error}"),
            InstallError::Sa { name, error } => write!(f, "SA {name:?}: {error}"),
            InstallError::Duplicate(name) => write!(f, "SA {name:?}: already installed"),
            InstallError::NotFound(name) => write!(f, "SA {name:?}: not installed"),
            InstallError::UnknownSa { policy, sa } => {
                write!(f, "policy {policy:?}: no outbound SA {sa:?}")
            }
            InstallError::Spd { policy, error } => write!(f, "policy {policy:?}: {error}"),
        }
    }
}

impl std::error::Error for InstallError {}

/// What [`SaStore::apply_config`] changed, by SA and policy name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplySummary {
    /// New names.
    pub added: Vec<String>,
    /// Names whose definition changed (replaced, counters restart).
    pub changed: Vec<String>,
    /// Names that are gone.
    pub removed: Vec<String>,
    /// Entries kept as they were.
    pub unchanged: usize,
}

/// The writer's private state.
#[derive(Debug)]
struct Writer {
    next_outbound_id: u32,
    /// Sequence numbers an outbound SA skips when it moves to a new peer
    /// address ([`SaStore::move_outbound`]).
    move_gap: u64,
}

impl Writer {
    /// A fresh outbound id (never 0).
    fn allocate_id(&mut self) -> u32 {
        let id = self.next_outbound_id;
        self.next_outbound_id = self.next_outbound_id.wrapping_add(1).max(1);
        id
    }
}

/// The installed SAs and policies, published to the workers.
#[derive(Debug)]
pub struct SaStore {
    current: ArcSwap<Runtime>,
    writer: parking_lot::Mutex<Writer>,
}

impl Default for SaStore {
    fn default() -> Self {
        SaStore::new()
    }
}

impl SaStore {
    /// Cluster mode: the dispatcher assigns every outbound packet its
    /// sequence number from this node's lease class (no worker takes one
    /// from an SA's own counter), so an SA moved to a new peer address goes
    /// on without a gap. A gap would put this node's counter past the
    /// numbers its leases hand out (`cluster_sequence_behind`, every packet
    /// it owns dropped) while the other nodes go on below it.
    pub fn set_assigned_sequence_numbers(&self) {
        self.writer.lock().move_gap = 0;
    }

    /// An empty store.
    pub fn new() -> SaStore {
        SaStore {
            current: ArcSwap::from_pointee(Runtime::default()),
            writer: parking_lot::Mutex::new(Writer {
                next_outbound_id: 1,
                move_gap: crate::limits::PEER_MOVE_SEQUENCE_GAP,
            }),
        }
    }

    /// The current snapshot, cheaply (the data plane's call, once per batch).
    #[inline]
    pub fn load(&self) -> Guard<Arc<Runtime>> {
        self.current.load()
    }

    /// The current snapshot as an owned `Arc` (the control plane's call).
    pub fn snapshot(&self) -> Arc<Runtime> {
        self.current.load_full()
    }

    /// Makes `config`'s SAs and policies the installed set, in one
    /// publication. Unchanged SAs keep their runtime objects; SAs IKE
    /// installed stay, and so do the slots of the children still
    /// configured. On error nothing changes.
    pub fn apply_config(
        &self,
        config: &Config,
        now: Instant,
    ) -> Result<ApplySummary, InstallError> {
        let mut writer = self.writer.lock();
        let current = self.current.load_full();
        let mut summary = ApplySummary::default();
        let mut sas = Vec::with_capacity(config.sas.len());
        for sa in &config.sas {
            match current.sa(&sa.name) {
                Some(old) if old.config.same_definition(sa) && old.origin == SaOrigin::Config => {
                    summary.unchanged += 1;
                    sas.push(Arc::clone(old));
                }
                old => {
                    let list = if old.is_some() {
                        &mut summary.changed
                    } else {
                        &mut summary.added
                    };
                    list.push(sa.name.clone());
                    sas.push(Arc::new(build(sa, SaOrigin::Config, &mut writer, now)?));
                }
            }
        }
        for old in &current.sas {
            match old.origin {
                SaOrigin::Ike(_) => sas.push(Arc::clone(old)),
                SaOrigin::Config if config.sa(&old.config.name).is_none() => {
                    summary.removed.push(old.config.name.clone());
                }
                SaOrigin::Config => {}
            }
        }
        let (inbound, outbound) = sads(&sas)?;
        let (slots, traps) = ike::place_slots(config, &current, &mut writer);
        ike::alias_current(&slots, &sas, &outbound)?;
        let per_peer = ike::per_peer_children(config);
        let peers = peer::kept(&current, &per_peer, &sas);
        peer::alias(&peers, &sas, &outbound);
        let generation = current.generation + 1;
        let mut wanted = ike::all_policies(config);
        wanted.extend(peer::all_policies(&peers, &per_peer));
        let policies = place_policies(&wanted, &current.policies, generation);
        let spd = spd(&policies, &sas, &slots)?;
        diff_policies(&current.policies, &config.policies, &mut summary);
        self.current.store(Arc::new(Runtime {
            generation,
            inbound: Arc::new(inbound),
            outbound: Arc::new(outbound),
            spd: Arc::new(spd),
            sas,
            policies,
            slots: Arc::new(slots),
            traps: Arc::new(traps),
            peers: Arc::new(peers),
            per_peer: Arc::new(per_peer),
        }));
        Ok(summary)
    }

    /// Installs one new SA (the IKE path). Its name must be new, and an
    /// inbound SA's SPI unused.
    pub fn install_sa(&self, sa: SaConfig, now: Instant) -> Result<(), InstallError> {
        self.install_with_origin(sa, SaOrigin::Config, now)
    }

    /// [`install_sa`](Self::install_sa) for an SA of `origin`.
    fn install_with_origin(
        &self,
        sa: SaConfig,
        origin: SaOrigin,
        now: Instant,
    ) -> Result<(), InstallError> {
        let mut writer = self.writer.lock();
        let current = self.current.load_full();
        if current.sa(&sa.name).is_some() {
            return Err(InstallError::Duplicate(sa.name));
        }
        let installed = Arc::new(build(&sa, origin, &mut writer, now)?);
        match &installed.handle {
            SaHandle::Inbound(inbound) => current
                .inbound
                .insert(Arc::clone(inbound))
                .map_err(|_| InstallError::Duplicate(sa.name.clone()))?,
            SaHandle::Outbound { id, sa: outbound } => current
                .outbound
                .insert(*id, Arc::clone(outbound))
                .map_err(|_| InstallError::Duplicate(sa.name.clone()))?,
        }
        let mut sas = current.sas.clone();
        sas.push(installed);
        self.publish_same_tables(&current, sas, None);
        Ok(())
    }

    /// Removes the SA named `name` (the IKE path); policies that protect
    /// with it then drop their packets as `no_outbound_sa` until another
    /// configuration names a new one. The current outbound SA of an IKE
    /// child leaves its slot empty.
    pub fn remove_sa(&self, name: &str) -> Result<(), InstallError> {
        let _writer = self.writer.lock();
        let current = self.current.load_full();
        let Some(old) = current.sa(name) else {
            return Err(InstallError::NotFound(name.to_owned()));
        };
        let mut slots = None;
        match &old.handle {
            SaHandle::Inbound(sa) => {
                current.inbound.remove(sa.spi(), sa.params.protocol);
            }
            SaHandle::Outbound { id, .. } => {
                slots = ike::vacate_slot(&current, name);
                current.outbound.remove(*id);
            }
        }
        let sas: Vec<Arc<InstalledSa>> = current
            .sas
            .iter()
            .filter(|sa| sa.config.name != name)
            .cloned()
            .collect();
        if let Some((key, slot)) = peer::current_of(&current, name) {
            // The End-User is gone: its slot and policies go too.
            current.outbound.remove(slot.id);
            let mut peers = (*current.peers).clone();
            peers.remove(key);
            let policies = peer::without_slot(&current.policies, slot.id);
            return self.publish_policies(&current, sas, policies, peers);
        }
        self.publish_same_tables(&current, sas, slots);
        Ok(())
    }

    /// Publishes `sas` with `policies` and `peers` (a peer slot came or
    /// went): the SPD is rebuilt, the SADs are those of `current`
    /// (already updated in place).
    fn publish_policies(
        &self,
        current: &Runtime,
        sas: Vec<Arc<InstalledSa>>,
        policies: Vec<InstalledPolicy>,
        peers: HashMap<PeerKey, PeerSlot>,
    ) -> Result<(), InstallError> {
        let spd = spd(&policies, &sas, &current.slots)?;
        self.current.store(Arc::new(Runtime {
            generation: current.generation + 1,
            inbound: Arc::clone(&current.inbound),
            outbound: Arc::clone(&current.outbound),
            spd: Arc::new(spd),
            sas,
            policies,
            slots: Arc::clone(&current.slots),
            traps: Arc::clone(&current.traps),
            peers: Arc::new(peers),
            per_peer: Arc::clone(&current.per_peer),
        }));
        Ok(())
    }

    /// Publishes `sas` (and `slots`, when they changed) with the tables of
    /// `current` (already updated in place).
    fn publish_same_tables(
        &self,
        current: &Runtime,
        sas: Vec<Arc<InstalledSa>>,
        slots: Option<HashMap<ChildRef, ChildSlot>>,
    ) {
        self.current.store(Arc::new(Runtime {
            generation: current.generation + 1,
            inbound: Arc::clone(&current.inbound),
            outbound: Arc::clone(&current.outbound),
            spd: Arc::clone(&current.spd),
            sas,
            policies: current.policies.clone(),
            slots: slots.map_or_else(|| Arc::clone(&current.slots), Arc::new),
            traps: Arc::clone(&current.traps),
            peers: Arc::clone(&current.peers),
            per_peer: Arc::clone(&current.per_peer),
        }));
    }
}

/// Keys the transform and creates the runtime SA.
fn build(
    sa: &SaConfig,
    origin: SaOrigin,
    writer: &mut Writer,
    now: Instant,
) -> Result<InstalledSa, InstallError> {
    let transform = SaTransform::new(
        phalanx_crypto::default_provider(),
        sa.suite(),
        &sa.keys.encryption,
        &sa.keys.integrity,
    )
    .map_err(|error| InstallError::Crypto {
        name: sa.name.clone(),
        error,
    })?;
    let transform = Arc::new(transform);
    let handle = match sa.direction {
        Direction::In => {
            let inbound = InboundSa::new(sa.params.clone(), transform, now).map_err(|error| {
                InstallError::Sa {
                    name: sa.name.clone(),
                    error,
                }
            })?;
            SaHandle::Inbound(Arc::new(inbound))
        }
        Direction::Out => {
            let id = writer.allocate_id();
            SaHandle::Outbound {
                id,
                sa: Arc::new(OutboundSa::new(sa.params.clone(), transform, now)),
            }
        }
    };
    Ok(InstalledSa {
        config: sa.clone(),
        handle,
        installed: now,
        origin,
    })
}

/// Fresh SADs holding `sas`.
fn sads(sas: &[Arc<InstalledSa>]) -> Result<(Sad, OutboundSad), InstallError> {
    let (inbound, outbound) = (Sad::new(), OutboundSad::new());
    for sa in sas {
        let duplicate = || InstallError::Duplicate(sa.config.name.clone());
        match &sa.handle {
            SaHandle::Inbound(s) => inbound.insert(Arc::clone(s)).map_err(|_| duplicate())?,
            SaHandle::Outbound { id, sa: s } => {
                outbound
                    .insert(*id, Arc::clone(s))
                    .map_err(|_| duplicate())?;
            }
        }
    }
    Ok((inbound, outbound))
}

/// The policies of `configs` with their ids: an unchanged policy of `old`
/// keeps its id and generation; the others get, in file order, the lowest
/// ids not kept, and `generation`.
fn place_policies(
    configs: &[PolicyConfig],
    old: &[InstalledPolicy],
    generation: u64,
) -> Vec<InstalledPolicy> {
    let by_name: HashMap<&str, &InstalledPolicy> =
        old.iter().map(|o| (o.config.name.as_str(), o)).collect();
    let kept: Vec<Option<&InstalledPolicy>> = configs
        .iter()
        .map(|c| {
            by_name
                .get(c.name.as_str())
                .copied()
                .filter(|o| o.config.same_definition(c))
        })
        .collect();
    let taken: HashSet<PolicyId> = kept.iter().flatten().map(|o| o.id).collect();
    let mut free = free_policy_ids(taken);
    configs
        .iter()
        .zip(kept)
        .map(|(config, kept)| {
            let (id, generation) = match kept {
                Some(o) => (o.id, o.generation),
                // At most 2^32 - 1 ids are free: a Vec read from a file
                // cannot hold that many policies, and `Spd::insert`
                // refuses more anyway.
                None => (free.next().unwrap_or(PolicyId(u32::MAX)), generation),
            };
            InstalledPolicy {
                config: config.clone(),
                id,
                generation,
            }
        })
        .collect()
}

/// Policy ids not in `taken`, lowest first.
fn free_policy_ids(taken: HashSet<PolicyId>) -> impl Iterator<Item = PolicyId> {
    (1..=u32::MAX)
        .map(PolicyId)
        .filter(move |id| !taken.contains(id))
}

/// A fresh SPD of `policies`, inserted in file order: equal priorities
/// keep file order (phalanx-sa breaks ties by insertion order).
fn spd(
    policies: &[InstalledPolicy],
    sas: &[Arc<InstalledSa>],
    slots: &HashMap<ChildRef, ChildSlot>,
) -> Result<Spd, InstallError> {
    let ids: HashMap<&str, u32> = sas
        .iter()
        .filter(|sa| sa.origin == SaOrigin::Config)
        .filter_map(|sa| match sa.handle {
            SaHandle::Outbound { id, .. } => Some((sa.config.name.as_str(), id)),
            SaHandle::Inbound(_) => None,
        })
        .collect();
    let mut spd = Spd::new();
    for installed in policies {
        let policy = &installed.config;
        let action = match &policy.target {
            PolicyTarget::Protect(name) => match ids.get(name.as_str()) {
                Some(id) => PolicyAction::Protect(*id),
                None => {
                    return Err(InstallError::UnknownSa {
                        policy: policy.name.clone(),
                        sa: name.clone(),
                    })
                }
            },
            PolicyTarget::Child(child) => match slots.get(child) {
                Some(slot) => PolicyAction::Protect(slot.id),
                None => {
                    return Err(InstallError::UnknownSa {
                        policy: policy.name.clone(),
                        sa: child.to_string(),
                    })
                }
            },
            PolicyTarget::Peer { slot, .. } => PolicyAction::Protect(*slot),
            PolicyTarget::Bypass => PolicyAction::Bypass,
            PolicyTarget::Discard => PolicyAction::Discard,
        };
        let entry = Policy {
            id: installed.id,
            priority: policy.priority,
            selector: policy.selector,
            action,
        };
        spd.insert(entry).map_err(|error| InstallError::Spd {
            policy: policy.name.clone(),
            error,
        })?;
    }
    Ok(spd)
}

/// Adds the names of the `[[policy]]` tables to the summary (the
/// policies of IKE children follow their connections, reported apart).
fn diff_policies(old: &[InstalledPolicy], new: &[PolicyConfig], summary: &mut ApplySummary) {
    let old: Vec<&InstalledPolicy> = old
        .iter()
        .filter(|o| !matches!(o.config.target, PolicyTarget::Child(_)))
        .collect();
    for policy in new {
        match old.iter().find(|o| o.config.name == policy.name) {
            Some(o) if o.config.same_definition(policy) => summary.unchanged += 1,
            Some(_) => summary.changed.push(policy.name.clone()),
            None => summary.added.push(policy.name.clone()),
        }
    }
    for o in old {
        if !new.iter().any(|p| p.name == o.config.name) {
            summary.removed.push(o.config.name.clone());
        }
    }
}

/// Teaches every tunnel-mode outbound SA of `rt` the path MTU of the
/// kernel's route to its peer (the outgoing link's MTU, or a smaller value
/// the kernel learned from ICMP for our packets), one query per peer
/// address, so that packets too big for it are answered (RFC 4301 §8.2.1)
/// instead of refused by the socket. Returns how many SAs learned a value.
/// Run by a worker at its start and every `ROUTE_MTU_REFRESH`, it keeps
/// each value from ageing out and picks up what the kernel learned since.
pub fn refresh_route_mtus(rt: &Runtime, now: Instant) -> u64 {
    let mut known: Vec<(std::net::IpAddr, Option<u32>)> = Vec::new();
    let mut learned = 0;
    for sa in rt.outbound_sas() {
        let SaMode::Tunnel { remote, .. } = sa.params.mode else {
            continue;
        };
        let mtu = match known.iter().find(|(r, _)| *r == remote) {
            Some((_, mtu)) => *mtu,
            None => {
                let mtu = phalanx_io::path_mtu::route_mtu(remote, None).ok();
                known.push((remote, mtu));
                mtu
            }
        };
        if let Some(mtu) = mtu {
            sa.path_mtu.learn(mtu, remote.is_ipv6(), now);
            learned += 1;
        }
    }
    learned
}

#[cfg(test)]
mod tests;
