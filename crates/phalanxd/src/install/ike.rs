//! Child SAs from IKE: slots (the outbound id a child's policies protect
//! with, holding its current outbound SA), traps, and the SaStore calls
//! the IKE thread makes ([`SaStore::install_child`],
//! [`SaStore::move_outbound`]; removal is [`SaStore::remove_sa`]).
//!
//! Make-before-break (DESIGN.md): an inbound SA is in the SAD the workers
//! read when [`SaStore::install_child`] returns; an outbound one switches
//! the slot with one replace, so a packet is protected with the old SA or
//! the new one, never with none; the old SA stays installed (its own id)
//! until IKE removes it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use phalanx_crypto::{CryptoError, Suite};
use phalanx_ike::proposal::suite_protocol;
use phalanx_ike::ChildSaInstall;
use phalanx_sa::{LifetimeLimits, OutboundSad, SaMode, SaParams, UdpEncap};
use phalanx_wire::{EncrId, IntegId};

use super::peer::{self, PeerKey, PeerSlot};
use super::{
    build, InstallError, InstalledPolicy, InstalledSa, Runtime, SaHandle, SaOrigin, SaStore, Writer,
};
use crate::config::{
    ChildRef, Config, Direction, Encryption, Integrity, PolicyConfig, PolicyTarget, SaConfig,
    SaKeys,
};
use crate::limits::{ACQUIRE_INTERVAL_MS, IKE_HARD_LIFETIME_GRACE};

/// A configured IKE child's place in the outbound SAD.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildSlot {
    /// The outbound id its policies protect with.
    pub id: u32,
    /// The name of the SA the id holds now, if any.
    pub current: Option<String>,
}

/// The acquire gate of a `start_action = "trap"` child: at most one
/// acquire per [`ACQUIRE_INTERVAL_MS`] over all workers.
#[derive(Debug)]
pub struct Trap {
    /// Whose SA to ask for.
    pub child: ChildRef,
    epoch: Instant,
    /// Milliseconds after `epoch` of the last acquire, plus one (0: never).
    last: AtomicU64,
}

impl Trap {
    /// A gate that has never fired.
    pub fn new(child: ChildRef, epoch: Instant) -> Trap {
        Trap {
            child,
            epoch,
            last: AtomicU64::new(0),
        }
    }

    /// Whether a packet seen at `now` should ask IKE for an SA: true for
    /// the first caller after the interval, false for every other.
    pub fn should_acquire(&self, now: Instant) -> bool {
        let ms = u64::try_from(now.saturating_duration_since(self.epoch).as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let last = self.last.load(Ordering::Relaxed);
        if last != 0 && ms.saturating_sub(last) < ACQUIRE_INTERVAL_MS {
            return false;
        }
        self.last
            .compare_exchange(last, ms, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

/// The name of an IKE SA in the store: `site-b/net/in/c0a8f001`.
pub fn ike_sa_name(child: &ChildRef, direction: Direction, spi: u32) -> String {
    format!("{child}/{}/{spi:08x}", direction.as_str())
}

/// The file's names of a negotiated suite, if the data plane runs it.
fn suite_names(suite: &Suite) -> Option<(Encryption, Integrity)> {
    let encryption = match (suite.encr, suite.encr_key_bits) {
        (EncrId::AES_GCM_16, 128) => Encryption::Aes128gcm16,
        (EncrId::AES_GCM_16, 256) => Encryption::Aes256gcm16,
        (EncrId::CHACHA20_POLY1305, _) => Encryption::Chacha20poly1305,
        (EncrId::NULL_AUTH_AES_GMAC, 128) => Encryption::Aes128gmac,
        (EncrId::NULL_AUTH_AES_GMAC, 256) => Encryption::Aes256gmac,
        (EncrId::AES_CBC, 128) => Encryption::Aes128,
        (EncrId::AES_CBC, 256) => Encryption::Aes256,
        (EncrId::NULL, _) => Encryption::Null,
        _ => return None,
    };
    let integrity = match suite.integ {
        IntegId::NONE => Integrity::None,
        IntegId::HMAC_SHA2_256_128 => Integrity::Sha256,
        IntegId::HMAC_SHA2_384_192 => Integrity::Sha384,
        IntegId::HMAC_SHA2_512_256 => Integrity::Sha512,
        _ => return None,
    };
    Some((encryption, integrity))
}

/// The data-plane SA of one direction of a Child SA. The soft time limit
/// is left out: IKE rekeys on its own timers; byte and packet soft limits
/// and the hard limits stay with the data plane, which reports them. The
/// hard time limit is the backstop behind IKE's own deletion at that time:
/// it comes [`IKE_HARD_LIFETIME_GRACE`] later.
pub fn child_sa_config(
    install: &ChildSaInstall,
    direction: Direction,
) -> Result<SaConfig, InstallError> {
    let child = ChildRef {
        connection: install.connection.clone(),
        child: install.child.clone(),
    };
    let name = ike_sa_name(&child, direction, install.spi);
    let Some((encryption, integrity)) = suite_names(&install.suite) else {
        return Err(InstallError::Crypto {
            name,
            error: CryptoError::UnsupportedAlgorithm,
        });
    };
    let lifetime = LifetimeLimits {
        soft_time: None,
        hard_time: install
            .lifetime
            .hard_time
            .map(|t| t + IKE_HARD_LIFETIME_GRACE),
        ..install.lifetime
    };
    Ok(SaConfig {
        name,
        direction,
        encryption,
        integrity,
        params: SaParams {
            spi: install.spi,
            protocol: suite_protocol(&install.suite),
            mode: install.mode,
            encap: install.encap,
            esn: install.esn,
            replay_window: install.replay_window,
            lifetime,
            selectors: install.selectors.clone(),
            tfc_pad_to: None,
        },
        keys: SaKeys {
            encryption: install.encr_key.clone(),
            integrity: install.integ_key.clone(),
        },
        peer_replay_window: match direction {
            Direction::Out => install.peer_replay_window,
            Direction::In => 0,
        },
        line: 0,
    })
}

/// The slots of `config`'s children: kept (id, current SA, trap state)
/// for children `current` already had, new ids for the others.
pub(super) fn place_slots(
    config: &Config,
    current: &Runtime,
    writer: &mut Writer,
) -> (HashMap<ChildRef, ChildSlot>, HashMap<u32, Arc<Trap>>) {
    let mut slots = HashMap::new();
    let mut traps = HashMap::new();
    let Some(ike) = &config.ike else {
        return (slots, traps);
    };
    let epoch = Instant::now();
    for set in ike.child_policies.iter().filter(|set| !set.per_peer) {
        let slot = match current.slots.get(&set.child) {
            Some(old) => ChildSlot {
                id: old.id,
                current: old
                    .current
                    .clone()
                    .filter(|name| current.sa(name).is_some()),
            },
            None => ChildSlot {
                id: writer.allocate_id(),
                current: None,
            },
        };
        if set.trap {
            let trap = current
                .traps
                .get(&slot.id)
                .filter(|t| t.child == set.child)
                .cloned()
                .unwrap_or_else(|| Arc::new(Trap::new(set.child.clone(), epoch)));
            traps.insert(slot.id, trap);
        }
        slots.insert(set.child.clone(), slot);
    }
    (slots, traps)
}

/// Puts each slot's current SA under the slot's id in a fresh outbound SAD.
pub(super) fn alias_current(
    slots: &HashMap<ChildRef, ChildSlot>,
    sas: &[Arc<InstalledSa>],
    outbound: &OutboundSad,
) -> Result<(), InstallError> {
    for slot in slots.values() {
        let Some(name) = &slot.current else { continue };
        let found = sas.iter().find(|sa| &sa.config.name == name);
        if let Some(SaHandle::Outbound { sa, .. }) = found.map(|s| &s.handle) {
            outbound
                .insert(slot.id, Arc::clone(sa))
                .map_err(|_| InstallError::Duplicate(name.clone()))?;
        }
    }
    Ok(())
}

/// The `[[policy]]` tables, then every child's policies.
pub(super) fn all_policies(config: &Config) -> Vec<PolicyConfig> {
    let mut all = config.policies.clone();
    let Some(ike) = &config.ike else {
        return all;
    };
    for set in ike.child_policies.iter().filter(|set| !set.per_peer) {
        for (n, selector) in set.selectors.iter().enumerate() {
            all.push(PolicyConfig {
                name: set.policy_name(n),
                priority: set.priority,
                selector: *selector,
                target: PolicyTarget::Child(set.child.clone()),
                line: 0,
            });
        }
    }
    all
}

/// The per-peer children of `config` (connections with pools) and their
/// policy priority.
pub(super) fn per_peer_children(config: &Config) -> HashMap<ChildRef, u32> {
    let Some(ike) = &config.ike else {
        return HashMap::new();
    };
    ike.child_policies
        .iter()
        .filter(|set| set.per_peer)
        .map(|set| (set.child.clone(), set.priority))
        .collect()
}

/// If `name` is the current SA of a slot: empties the slot in the live
/// outbound SAD and returns the slots with it vacated.
pub(super) fn vacate_slot(current: &Runtime, name: &str) -> Option<HashMap<ChildRef, ChildSlot>> {
    let (child, slot) = current
        .slots
        .iter()
        .find(|(_, s)| s.current.as_deref() == Some(name))?;
    current.outbound.remove(slot.id);
    let mut slots = (*current.slots).clone();
    slots.insert(
        child.clone(),
        ChildSlot {
            id: slot.id,
            current: None,
        },
    );
    Some(slots)
}

impl SaStore {
    /// Installs one direction of `child`'s Child SA (the IKE path). An
    /// inbound SA is in the SAD when this returns; an outbound one becomes
    /// the child's current SA (its policies switch to it at once) unless
    /// the child is no longer configured.
    pub fn install_child(
        &self,
        child: &ChildRef,
        sa: SaConfig,
        now: Instant,
    ) -> Result<(), InstallError> {
        if sa.direction == Direction::In {
            return self.install_with_origin(sa, SaOrigin::Ike(child.clone()), now);
        }
        let mut writer = self.writer.lock();
        let current = self.current.load_full();
        if current.sa(&sa.name).is_some() {
            return Err(InstallError::Duplicate(sa.name));
        }
        let installed = Arc::new(build(&sa, SaOrigin::Ike(child.clone()), &mut writer, now)?);
        if let Some(&priority) = current.per_peer.get(child) {
            return self.switch_peer(&current, child, installed, priority, &mut writer);
        }
        self.switch_outbound(&current, child, installed)
    }

    /// [`Self::switch_outbound`] for an End-User's Child SA: its peer slot
    /// switches to `installed`, or is created with its policies
    /// ([`peer`]).
    fn switch_peer(
        &self,
        current: &Runtime,
        child: &ChildRef,
        installed: Arc<InstalledSa>,
        priority: u32,
        writer: &mut Writer,
    ) -> Result<(), InstallError> {
        let name = installed.config.name.clone();
        let SaHandle::Outbound { id, sa } = &installed.handle else {
            return Err(InstallError::NotFound(name));
        };
        current
            .outbound
            .insert(*id, Arc::clone(sa))
            .map_err(|_| InstallError::Duplicate(name.clone()))?;
        let key = PeerKey {
            child: child.clone(),
            selectors: installed.config.params.selectors.clone(),
        };
        let mut peers = (*current.peers).clone();
        let mut sas = current.sas.clone();
        sas.push(Arc::clone(&installed));
        if let Some(slot) = peers.get_mut(&key) {
            // A rekey: one replace, as for a configured child's slot.
            current.outbound.replace(slot.id, Arc::clone(sa));
            slot.current = name;
            let policies = current.policies.clone();
            return self.publish_policies(current, sas, policies, peers);
        }
        let slot = writer.allocate_id();
        current
            .outbound
            .insert(slot, Arc::clone(sa))
            .map_err(|_| InstallError::Duplicate(name.clone()))?;
        let configs = peer::policies(&key, slot, priority);
        let ids = peer::free_ids(&current.policies, configs.len());
        let mut policies = current.policies.clone();
        policies.extend(
            configs
                .into_iter()
                .zip(ids)
                .map(|(config, id)| InstalledPolicy {
                    config,
                    id,
                    generation: current.generation + 1,
                }),
        );
        peers.insert(
            key,
            PeerSlot {
                id: slot,
                current: name,
            },
        );
        self.publish_policies(current, sas, policies, peers)
    }

    /// Adds `installed` (outbound) under its own id and makes it `child`'s
    /// current SA; publishes.
    fn switch_outbound(
        &self,
        current: &Runtime,
        child: &ChildRef,
        installed: Arc<InstalledSa>,
    ) -> Result<(), InstallError> {
        let SaHandle::Outbound { id, sa } = &installed.handle else {
            return Err(InstallError::NotFound(installed.config.name.clone()));
        };
        current
            .outbound
            .insert(*id, Arc::clone(sa))
            .map_err(|_| InstallError::Duplicate(installed.config.name.clone()))?;
        let slots = current.slots.get(child).map(|slot| {
            current.outbound.replace(slot.id, Arc::clone(sa));
            let mut slots = (*current.slots).clone();
            slots.insert(
                child.clone(),
                ChildSlot {
                    id: slot.id,
                    current: Some(installed.config.name.clone()),
                },
            );
            slots
        });
        let mut sas = current.sas.clone();
        sas.push(installed);
        self.publish_same_tables(current, sas, slots);
        Ok(())
    }

    /// The peer moved (RFC 7296 §2.23: a NAT mapping changed, or IKE
    /// floated to port 4500): the outbound SA `name` is rebuilt for
    /// `remote` and `encap`, with the same keys, its sequence numbers
    /// continuing [`PEER_MOVE_SEQUENCE_GAP`](crate::limits::PEER_MOVE_SEQUENCE_GAP)
    /// past the old SA's (workers may still take numbers from the old one
    /// for a batch; a number is never used twice; no gap in cluster mode,
    /// [`SaStore::set_assigned_sequence_numbers`]), and takes its place (and its slot, if current). Its
    /// lifetime runs on from the old SA's installation; its byte and packet
    /// counts start again from zero.
    pub fn move_outbound(
        &self,
        name: &str,
        remote: IpAddr,
        encap: Option<UdpEncap>,
    ) -> Result<(), InstallError> {
        let mut writer = self.writer.lock();
        let current = self.current.load_full();
        let Some(old) = current.sa(name).cloned() else {
            return Err(InstallError::NotFound(name.to_owned()));
        };
        let (
            SaHandle::Outbound {
                id: old_id,
                sa: old_sa,
            },
            SaOrigin::Ike(child),
        ) = (&old.handle, &old.origin)
        else {
            return Err(InstallError::NotFound(name.to_owned()));
        };
        let mut config = old.config.clone();
        config.params.encap = encap;
        if let SaMode::Tunnel { local, .. } = config.params.mode {
            config.params.mode = SaMode::Tunnel { local, remote };
        }
        let moved = Arc::new(build(
            &config,
            old.origin.clone(),
            &mut writer,
            old.installed,
        )?);
        if let SaHandle::Outbound { sa, .. } = &moved.handle {
            let next = old_sa.seq.peek_next().unwrap_or(u64::MAX);
            sa.seq.advance_to(next.saturating_add(writer.move_gap));
        }
        let is_current = current
            .slots
            .get(child)
            .is_some_and(|s| s.current.as_deref() == Some(name));
        if let (Some((_, slot)), SaHandle::Outbound { sa, .. }) =
            (peer::current_of(&current, name), &moved.handle)
        {
            // The same name: the peer slot keeps pointing at it.
            current.outbound.replace(slot.id, Arc::clone(sa));
        }
        current.outbound.remove(*old_id);
        let without: Vec<Arc<InstalledSa>> = current
            .sas
            .iter()
            .filter(|sa| sa.config.name != name)
            .cloned()
            .collect();
        let staged = Runtime {
            sas: without,
            ..clone_runtime(&current)
        };
        if is_current {
            return self.switch_outbound(&staged, child, moved);
        }
        let SaHandle::Outbound { id, sa } = &moved.handle else {
            return Err(InstallError::NotFound(name.to_owned()));
        };
        staged
            .outbound
            .insert(*id, Arc::clone(sa))
            .map_err(|_| InstallError::Duplicate(name.to_owned()))?;
        let mut sas = staged.sas.clone();
        sas.push(Arc::clone(&moved));
        self.publish_same_tables(&staged, sas, None);
        Ok(())
    }
}

/// A shallow copy of a snapshot (the tables are shared).
fn clone_runtime(rt: &Runtime) -> Runtime {
    Runtime {
        generation: rt.generation,
        inbound: Arc::clone(&rt.inbound),
        outbound: Arc::clone(&rt.outbound),
        spd: Arc::clone(&rt.spd),
        sas: rt.sas.clone(),
        policies: rt.policies.clone(),
        slots: Arc::clone(&rt.slots),
        traps: Arc::clone(&rt.traps),
        peers: Arc::clone(&rt.peers),
        per_peer: Arc::clone(&rt.per_peer),
    }
}
