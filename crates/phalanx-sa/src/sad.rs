//! The Security Association Database (RFC 4301 §4.4.2): inbound SAs by
//! SPI and protocol, outbound SAs by the id a policy names.
//!
//! Reads take no lock: the current map is an immutable snapshot published
//! through an [`ArcSwap`] (read-copy-update). Writers, serialised by a
//! mutex, clone the map, change the clone and publish it; a reader that
//! loaded the old snapshot keeps using it until it is done. Writes cost
//! O(SAs), which suits a control plane that adds an SA per rekey.

use crate::hash::BuildFoldHasher;
use crate::sa::{InboundSa, IpsecProtocol, OutboundSa};
use arc_swap::ArcSwap;
use core::fmt;
use core::hash::Hash;
use core::net::IpAddr;
use std::collections::HashMap;
use std::sync::Arc;

/// Why a SAD change was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SadError {
    /// An SA with the same key is already installed.
    Duplicate,
}

impl fmt::Display for SadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SadError::Duplicate => f.write_str("an SA with this key is already installed"),
        }
    }
}

impl std::error::Error for SadError {}

type Snapshot<K, V> = HashMap<K, Arc<V>, BuildFoldHasher>;

/// A map with lock-free reads and copy-on-write updates.
struct RcuMap<K, V> {
    current: ArcSwap<Snapshot<K, V>>,
    writer: parking_lot::Mutex<()>,
}

impl<K: Eq + Hash + Clone, V> RcuMap<K, V> {
    fn new() -> Self {
        RcuMap {
            current: ArcSwap::from_pointee(HashMap::default()),
            writer: Default::default(),
        }
    }

    #[inline]
    fn get(&self, key: &K) -> Option<Arc<V>> {
        self.current.load().get(key).cloned()
    }

    fn len(&self) -> usize {
        self.current.load().len()
    }

    fn values(&self) -> Vec<Arc<V>> {
        self.current.load().values().cloned().collect()
    }

    /// Apply `change` to a copy and publish it when `change` says so.
    fn update<R>(&self, change: impl FnOnce(&mut Snapshot<K, V>) -> (R, bool)) -> R {
        let _writer = self.writer.lock();
        let mut next = Snapshot::clone(&self.current.load());
        let (result, changed) = change(&mut next);
        if changed {
            self.current.store(Arc::new(next));
        }
        result
    }

    fn insert(&self, key: K, value: Arc<V>) -> Result<(), SadError> {
        self.update(|map| {
            if map.contains_key(&key) {
                return (Err(SadError::Duplicate), false);
            }
            map.insert(key, value);
            (Ok(()), true)
        })
    }

    fn replace(&self, key: K, value: Arc<V>) -> Option<Arc<V>> {
        self.update(|map| (map.insert(key, value), true))
    }

    fn remove(&self, key: &K) -> Option<Arc<V>> {
        self.update(|map| {
            let removed = map.remove(key);
            let changed = removed.is_some();
            (removed, changed)
        })
    }
}

/// Inbound SAs by (SPI, protocol) (RFC 4301 §4.1: for unicast SAs the SPI,
/// with the protocol, is enough to find the SA; the destination is checked
/// for tunnel-mode SAs).
pub struct Sad {
    map: RcuMap<u64, InboundSa>,
}

/// The map key of (SPI, protocol): one word, hashed with one
/// multiplication and compared with one instruction on every lookup.
#[inline]
fn sad_key(spi: u32, protocol: IpsecProtocol) -> u64 {
    let protocol = match protocol {
        IpsecProtocol::Esp => 0,
        IpsecProtocol::Ah => 1,
    };
    u64::from(spi) | protocol << 32
}

impl Sad {
    /// An empty SAD.
    pub fn new() -> Sad {
        Sad { map: RcuMap::new() }
    }

    /// The SA for a received packet: by SPI and protocol, and, for a
    /// tunnel-mode SA, only if `dst` is its local tunnel address.
    #[inline]
    pub fn lookup(&self, spi: u32, protocol: IpsecProtocol, dst: IpAddr) -> Option<Arc<InboundSa>> {
        self.map
            .get(&sad_key(spi, protocol))
            .filter(|sa| sa.accepts_destination(dst))
    }

    /// The SA installed under (SPI, protocol), whatever its destination.
    #[inline]
    pub fn get(&self, spi: u32, protocol: IpsecProtocol) -> Option<Arc<InboundSa>> {
        self.map.get(&sad_key(spi, protocol))
    }

    /// Install an SA; fails if its (SPI, protocol) is taken.
    pub fn insert(&self, sa: Arc<InboundSa>) -> Result<(), SadError> {
        self.map
            .insert(sad_key(sa.params.spi, sa.params.protocol), sa)
    }

    /// Remove and return the SA under (SPI, protocol).
    pub fn remove(&self, spi: u32, protocol: IpsecProtocol) -> Option<Arc<InboundSa>> {
        self.map.remove(&sad_key(spi, protocol))
    }

    /// Number of SAs.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there is no SA.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every SA, in no particular order.
    pub fn sas(&self) -> Vec<Arc<InboundSa>> {
        self.map.values()
    }
}

impl Default for Sad {
    fn default() -> Self {
        Sad::new()
    }
}

impl fmt::Debug for Sad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sad").field("len", &self.len()).finish()
    }
}

/// Outbound SAs by the id that [`PolicyAction::Protect`] names, so a
/// rekey switches every policy to the new SA with one
/// [`replace`](OutboundSad::replace).
///
/// [`PolicyAction::Protect`]: crate::spd::PolicyAction::Protect
pub struct OutboundSad {
    map: RcuMap<u32, OutboundSa>,
}

impl OutboundSad {
    /// An empty table.
    pub fn new() -> OutboundSad {
        OutboundSad { map: RcuMap::new() }
    }

    /// The SA under `id`.
    #[inline]
    pub fn lookup(&self, id: u32) -> Option<Arc<OutboundSa>> {
        self.map.get(&id)
    }

    /// Install an SA under `id`; fails if `id` is taken.
    pub fn insert(&self, id: u32, sa: Arc<OutboundSa>) -> Result<(), SadError> {
        self.map.insert(id, sa)
    }

    /// Install `sa` under `id`, returning the SA it replaces (make-before-
    /// break rekeying: the new inbound SA is installed first, then this).
    pub fn replace(&self, id: u32, sa: Arc<OutboundSa>) -> Option<Arc<OutboundSa>> {
        self.map.replace(id, sa)
    }

    /// Remove and return the SA under `id`.
    pub fn remove(&self, id: u32) -> Option<Arc<OutboundSa>> {
        self.map.remove(&id)
    }

    /// Number of SAs.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there is no SA.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for OutboundSad {
    fn default() -> Self {
        OutboundSad::new()
    }
}

impl fmt::Debug for OutboundSad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutboundSad")
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sa::tests::{params, transform, tunnel};
    use crate::sa::SaMode;
    use std::time::Instant;

    fn inbound(spi: u32, mode: SaMode) -> Arc<InboundSa> {
        Arc::new(InboundSa::new(params(spi, mode), transform(), Instant::now()).expect("valid"))
    }

    fn addr(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn lookup_by_spi_protocol_and_tunnel_destination() {
        let sad = Sad::new();
        sad.insert(inbound(0x100, tunnel("192.0.2.1", "198.51.100.9")))
            .expect("new");
        sad.insert(inbound(0x200, SaMode::Transport)).expect("new");
        assert_eq!(sad.len(), 2);
        let hit = sad.lookup(0x100, IpsecProtocol::Esp, addr("192.0.2.1"));
        assert_eq!(hit.map(|sa| sa.spi()), Some(0x100));
        assert!(sad
            .lookup(0x100, IpsecProtocol::Esp, addr("192.0.2.2"))
            .is_none());
        assert!(sad
            .lookup(0x100, IpsecProtocol::Ah, addr("192.0.2.1"))
            .is_none());
        assert!(sad
            .lookup(0x200, IpsecProtocol::Esp, addr("2001:db8::1"))
            .is_some());
        assert!(sad
            .lookup(0x300, IpsecProtocol::Esp, addr("192.0.2.1"))
            .is_none());
        assert!(sad.get(0x100, IpsecProtocol::Esp).is_some());
        assert_eq!(sad.sas().len(), 2);
    }

    #[test]
    fn duplicates_are_refused_and_removal_publishes() {
        let sad = Sad::new();
        sad.insert(inbound(7, SaMode::Transport)).expect("new");
        assert_eq!(
            sad.insert(inbound(7, SaMode::Transport)),
            Err(SadError::Duplicate)
        );
        let held = sad
            .lookup(7, IpsecProtocol::Esp, addr("10.0.0.1"))
            .expect("installed");
        assert_eq!(
            sad.remove(7, IpsecProtocol::Esp).map(|sa| sa.spi()),
            Some(7)
        );
        assert!(sad.remove(7, IpsecProtocol::Esp).is_none());
        assert!(sad.is_empty());
        assert_eq!(
            held.replay_check(1),
            Ok(1),
            "a reader's SA outlives its removal"
        );
    }

    #[test]
    fn outbound_table_replaces_for_rekey() {
        let table = OutboundSad::new();
        let sa = |spi| {
            Arc::new(OutboundSa::new(
                params(spi, SaMode::Transport),
                transform(),
                Instant::now(),
            ))
        };
        table.insert(1, sa(0xa)).expect("new");
        assert_eq!(table.insert(1, sa(0xb)), Err(SadError::Duplicate));
        assert_eq!(table.replace(1, sa(0xb)).map(|old| old.spi()), Some(0xa));
        assert_eq!(table.lookup(1).map(|sa| sa.spi()), Some(0xb));
        assert_eq!(table.len(), 1);
        assert!(table.remove(1).is_some() && table.is_empty());
    }

    #[test]
    fn readers_on_other_threads_see_a_consistent_map() {
        let sad = Arc::new(Sad::new());
        sad.insert(inbound(1, SaMode::Transport)).expect("new");
        let reader = {
            let sad = Arc::clone(&sad);
            std::thread::spawn(move || {
                (0..20_000)
                    .filter(|_| {
                        sad.lookup(1, IpsecProtocol::Esp, addr("10.0.0.1"))
                            .is_some()
                    })
                    .count()
            })
        };
        for spi in 2..200 {
            sad.insert(inbound(spi, SaMode::Transport)).expect("new");
        }
        assert_eq!(
            reader.join().expect("reader"),
            20_000,
            "SPI 1 never disappears"
        );
        assert_eq!(sad.len(), 199);
    }
}
