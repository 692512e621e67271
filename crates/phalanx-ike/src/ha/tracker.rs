//! What an endpoint has replicated and what it holds for others: the
//! snapshots it emitted for its own IKE SAs (to emit only changes, and
//! `IkeStateRemoved` once), the snapshots other nodes sent it (standby,
//! never transmitting), and which Child SAs those put in this node's data
//! plane.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::export::HaMark;
use super::install::{child_install, installed, udp_encap, Direction};
use super::state::{ChildSaState, IkeSaState, RequestPurpose};
use crate::counters::Counter;
use crate::events::SaEvent;
use crate::Endpoint;

/// The replication state of one endpoint.
#[derive(Default)]
pub(crate) struct HaTracker {
    /// Whether snapshots of our IKE SAs are emitted.
    pub(crate) enabled: bool,
    /// Our IKE SAs (by our SPI) whose snapshots went out.
    pub(crate) owned: HashMap<u64, Owned>,
    /// Other nodes' IKE SAs held in standby, by (SPIi, SPIr).
    pub(crate) passive: HashMap<([u8; 8], [u8; 8]), Passive>,
    /// How many standby snapshots have each Child SA direction installed.
    installed: HashMap<Direction, usize>,
}

/// The last snapshot emitted for one of our IKE SAs.
pub(crate) struct Owned {
    /// What it was made from; `None` forces the next one out.
    pub(crate) mark: Option<HaMark>,
    /// Its generation.
    pub(crate) generation: u64,
    /// For `IkeStateRemoved`.
    connection: String,
    spis: ([u8; 8], [u8; 8]),
}

impl Owned {
    /// A record for an IKE SA; its first snapshot is `generation + 1`.
    pub(crate) fn new(connection: &str, spis: ([u8; 8], [u8; 8]), generation: u64) -> Owned {
        Owned {
            mark: None,
            generation,
            connection: connection.to_owned(),
            spis,
        }
    }
}

/// What a [`reconcile`](Endpoint::reconcile) moves between: only standby
/// copies count as holders of the Child SAs they list; an IKE SA running
/// here holds its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// From one standby copy (or none) to another (or none).
    Standby,
    /// From a standby copy (or none) to the IKE SA now run here.
    TakeOver,
    /// From the IKE SA run here until now to a standby copy.
    Demotion,
}

/// Another node's IKE SA, held in standby.
pub(crate) struct Passive {
    /// Its latest snapshot.
    pub(crate) state: IkeSaState,
    /// When it arrived (its times run from then).
    pub(crate) imported_at: Instant,
}

impl Endpoint {
    /// After a call that touched our IKE SA `spi`: emits its snapshot if
    /// anything replicated changed, or `IkeStateRemoved` once it is no
    /// longer established (deleted, dead, rekeyed away, being deleted).
    pub(crate) fn replicate(&mut self, now: Instant, spi: u64) {
        if !self.ha.enabled {
            return;
        }
        let Some(sa) = self.sas.get(&spi).filter(|sa| sa.is_established()) else {
            if let Some(gone) = self.ha.owned.remove(&spi) {
                self.events.push_back(SaEvent::IkeStateRemoved {
                    connection: gone.connection,
                    ike_spi_i: gone.spis.0,
                    ike_spi_r: gone.spis.1,
                });
            }
            return;
        };
        let spis = (sa.spi_i.to_be_bytes(), sa.spi_r.to_be_bytes());
        let owned = self
            .ha
            .owned
            .entry(spi)
            .or_insert_with(|| Owned::new(&sa.conn.name, spis, 0));
        let mark = sa.ha_mark();
        if owned.mark.as_ref() == Some(&mark) {
            return;
        }
        let Some(state) = sa.ha_state(now, owned.generation + 1) else {
            return;
        };
        owned.generation += 1;
        owned.mark = Some(mark);
        self.counters.bump(Counter::HaStatesEmitted);
        self.events.push_back(SaEvent::IkeStateChanged {
            state: Box::new(state),
        });
    }

    /// Brings this node's data plane from what `before` installed to what
    /// `after` installs, counting every standby snapshot that holds a
    /// Child SA: installs (inbound first, make-before-break) for what no
    /// snapshot had, removals (outbound first) for what none has any more
    /// and no IKE SA running here holds. `change` says which side is (or
    /// was) run here rather than held in standby.
    pub(crate) fn reconcile(
        &mut self,
        before: Option<&IkeSaState>,
        after: Option<&IkeSaState>,
        change: Change,
    ) {
        let old = holdings(before);
        let new = holdings(after);
        let mut installs: Vec<_> = new
            .iter()
            .filter(|(d, _)| !old.iter().any(|(o, _)| o == d) && self.holders(*d) == 0)
            .copied()
            .collect();
        installs.sort_by_key(|(d, _)| !d.inbound);
        if change != Change::TakeOver {
            for (d, _) in &new {
                *self.ha.installed.entry(*d).or_default() += 1;
            }
        }
        if change != Change::Demotion {
            for (d, _) in &old {
                self.release(*d);
            }
        }
        let mut removals: Vec<_> = old
            .iter()
            .filter(|(d, c)| {
                !new.iter().any(|(n, _)| n == d)
                    && self.holders(*d) == 0
                    && !self.runs_child(c.spi_in)
            })
            .copied()
            .collect();
        removals.sort_by_key(|(d, _)| d.inbound);
        if let Some(after) = after {
            self.emit_installs(after, &installs);
        }
        if let Some(before) = before {
            emit_removals(&mut self.events, &before.connection, &removals);
        }
    }

    /// Whether an IKE SA running here has the Child SA with our inbound
    /// SPI `spi_in`.
    fn runs_child(&self, spi_in: u32) -> bool {
        self.sas
            .values()
            .any(|sa| sa.children.iter().any(|c| c.spi_in == spi_in))
    }

    /// Keeps the SPIs of a standby copy from being chosen here: every
    /// node of a cluster shares one address and one data plane, so IKE
    /// and inbound Child SA SPIs must be unique across the cluster
    /// (RFC 7296 §2.6, RFC 4303 §2.1).
    pub(crate) fn reserve(&mut self, state: &IkeSaState) {
        let (ike, children) = spis_of(state);
        self.ike_spis.extend(ike);
        self.child_spis.extend(children);
        // Its virtual IPs are leased here too: no node hands them out.
        let conflicts = self.pools.adopt(&state.virtual_ips);
        self.counters.add(Counter::VirtualIpConflicts, conflicts);
    }

    /// Releases the SPIs of a standby copy that no other copy and no IKE
    /// SA running here still uses.
    pub(crate) fn unreserve(&mut self, state: &IkeSaState) {
        for vip in &state.virtual_ips {
            self.pools.release(&vip.pool, &vip.identity, vip.address);
        }
        let (ike, children) = spis_of(state);
        let (held_ike, held_children) = self.standby_spis();
        for spi in ike {
            if !held_ike.contains(&spi) && !self.sas.contains_key(&spi) {
                self.ike_spis.remove(&spi);
            }
        }
        for spi in children {
            if !held_children.contains(&spi) && !self.runs_child(spi) {
                self.child_spis.remove(&spi);
            }
        }
    }

    /// The SPIs every standby copy uses.
    fn standby_spis(&self) -> (HashSet<u64>, HashSet<u32>) {
        let (mut ike, mut children) = (HashSet::new(), HashSet::new());
        for held in self.ha.passive.values() {
            let (i, c) = spis_of(&held.state);
            ike.extend(i);
            children.extend(c);
        }
        (ike, children)
    }

    /// The peer of a standby copy moved (RFC 7296 §2.23: a NAT mapping
    /// changed, or IKE floated to port 4500): the outbound SAs installed
    /// for it send to the new address now, as on the owner.
    pub(crate) fn follow_peer(&mut self, before: Option<&IkeSaState>, after: &IkeSaState) {
        let Some(before) = before else {
            return;
        };
        let encap = udp_encap(after);
        if (before.local, before.remote, udp_encap(before)) == (after.local, after.remote, encap) {
            return;
        }
        let outbound_spis = after
            .children
            .iter()
            .filter(|c| c.outbound_installed)
            .map(|c| c.spi_out)
            .collect();
        self.events.push_back(SaEvent::PeerMoved {
            connection: after.connection.clone(),
            ike_spi_i: after.spi_i,
            ike_spi_r: after.spi_r,
            local: after.local,
            remote: after.remote,
            encap,
            outbound_spis,
        });
    }

    fn holders(&self, d: Direction) -> usize {
        self.ha.installed.get(&d).copied().unwrap_or(0)
    }

    fn release(&mut self, d: Direction) {
        if let Some(n) = self.ha.installed.get_mut(&d) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.ha.installed.remove(&d);
            }
        }
    }

    fn emit_installs(&mut self, ike: &IkeSaState, list: &[(Direction, &ChildSaState)]) {
        let Some(conn) = self.connections.iter().find(|c| c.name == ike.connection) else {
            return;
        };
        for (d, child) in list {
            if let Some(install) = child_install(conn, ike, child, d.inbound) {
                self.events.push_back(if d.inbound {
                    SaEvent::InstallInbound(install)
                } else {
                    SaEvent::InstallOutbound(install)
                });
            }
        }
    }
}

/// The IKE SPIs (the owner's, and those its unanswered IKE SA rekeys
/// offered) and inbound Child SPIs (its Child SAs' and those its
/// unanswered CREATE_CHILD_SA requests offered) a snapshot uses.
pub(crate) fn spis_of(state: &IkeSaState) -> (Vec<u64>, Vec<u32>) {
    let owner = if state.initiator {
        state.spi_i
    } else {
        state.spi_r
    };
    let mut ike = vec![u64::from_be_bytes(owner)];
    let mut children: Vec<u32> = state.children.iter().map(|c| c.spi_in).collect();
    for request in &state.in_flight {
        match &request.purpose {
            RequestPurpose::CreateChild { spi_in, .. } => children.push(*spi_in),
            RequestPurpose::RekeyIke { spi } => ike.push(u64::from_be_bytes(*spi)),
            _ => {}
        }
    }
    (ike, children)
}

/// The Child SA directions a snapshot has installed.
fn holdings(state: Option<&IkeSaState>) -> Vec<(Direction, &ChildSaState)> {
    state
        .map(|s| {
            s.children
                .iter()
                .flat_map(|c| installed(c).map(move |d| (d, c)))
                .collect()
        })
        .unwrap_or_default()
}

fn emit_removals(
    events: &mut std::collections::VecDeque<SaEvent>,
    connection: &str,
    list: &[(Direction, &ChildSaState)],
) {
    for (d, child) in list {
        let (connection, child, spi) = (connection.to_owned(), child.name.clone(), d.spi);
        events.push_back(if d.inbound {
            SaEvent::RemoveInbound {
                connection,
                child,
                spi,
            }
        } else {
            SaEvent::RemoveOutbound {
                connection,
                child,
                spi,
            }
        });
    }
}
