//! From an [`IkeSaState`] back to a running IKE SA (takeover), or to a
//! standby copy: checks, key reconstruction, and the state machine rebuilt
//! with its Message IDs, response cache, unanswered requests, Child SAs
//! and timers.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use phalanx_crypto::ike::IkeSaKeys;
use phalanx_crypto::CryptoProvider;

use super::install::child_install;
use super::state::{ChildSaState, ChildSaStatus, IkeKeys, IkeSaState, RequestPurpose};
use super::tracker::{spis_of, Change, Owned, Passive};
use super::HaError;
use crate::config::Connection;
use crate::counters::Counter;
use crate::exchange::child::{child_config, first_pfs_additional_ke};
use crate::exchange::config_payload::VirtualIp;
use crate::ike_sa::window::{retransmit_timeout, Outstanding, Window};
use crate::ike_sa::{ChildSa, ChildStatus, Ctx, IkeSa, Pending, SaCrypto, State};
use crate::limits::{HA_IV_MARGIN, NAT_KEEPALIVE_INTERVAL};
use crate::proposal::NegotiatedIke;
use crate::protect::{Protection, Reassembler};
use crate::timers::{after, ChildTimer, IkeTimer, TimerTable};
use crate::Endpoint;

impl Endpoint {
    /// Keeps `state` as a standby copy (no timers, nothing sent) and
    /// installs or removes what its Child SAs changed in the data plane.
    pub(crate) fn import_standby(
        &mut self,
        now: Instant,
        state: IkeSaState,
        freshness: Freshness,
    ) -> Result<(), HaError> {
        let key = state.spis();
        self.fresh(&state, freshness)?;
        self.usable(&state)?;
        let before = self.ha.passive.remove(&key);
        self.reserve(&state);
        let held = before.as_ref().map(|p| &p.state);
        self.reconcile(held, Some(&state), Change::Standby);
        self.follow_peer(held, &state);
        self.ha.passive.insert(
            key,
            Passive {
                state,
                imported_at: now,
            },
        );
        if let Some(before) = before {
            self.unreserve(&before.state);
        }
        Ok(())
    }

    /// Runs `state` here from `now` on: the successor of the node that ran
    /// it. Its unanswered requests are sent again at once.
    pub(crate) fn import_live(&mut self, now: Instant, state: IkeSaState) -> Result<(), HaError> {
        let key = state.spis();
        self.fresh(&state, Freshness::NewerOrSame)?;
        let conn = self.usable(&state)?;
        let sa = build_sa(self.provider, now, conn, &state)?;
        self.claim_spis(&state)?;
        let spi = sa.our_spi();
        self.sas.insert(spi, sa);
        // The running IKE SA holds its leases (the standby copy's hold,
        // if any, goes with it below).
        let conflicts = self.pools.adopt(&state.virtual_ips);
        self.counters.add(Counter::VirtualIpConflicts, conflicts);
        let before = self.ha.passive.remove(&key);
        let held = before.as_ref().map(|p| &p.state);
        self.reconcile(held, Some(&state), Change::TakeOver);
        self.follow_peer(held, &state);
        if let Some(before) = before {
            self.unreserve(&before.state);
        }
        self.drop_predecessors(&state);
        self.ha
            .owned
            .insert(spi, Owned::new(&state.connection, key, state.generation));
        self.counters.bump(Counter::HaTakeovers);
        self.with_sa(now, spi, IkeSa::resume);
        Ok(())
    }

    /// Refuses a snapshot of an IKE SA running here, or one that is not
    /// fresh enough against the standby copy held.
    fn fresh(&self, state: &IkeSaState, freshness: Freshness) -> Result<(), HaError> {
        let key = state.spis();
        if self.live_sa_of(key).is_some() {
            return Err(HaError::ActiveHere);
        }
        let Some(held) = self.ha.passive.get(&key) else {
            return Ok(());
        };
        let (held, offered) = (held.state.generation, state.generation);
        let fresh = match freshness {
            Freshness::Newer => offered > held,
            Freshness::NewerOrSame => offered >= held,
            Freshness::Any => true,
        };
        if fresh {
            Ok(())
        } else {
            Err(HaError::Stale { held, offered })
        }
    }

    /// Our SPI of the running IKE SA named by these SPIs, if any.
    pub(crate) fn live_sa_of(&self, (spi_i, spi_r): ([u8; 8], [u8; 8])) -> Option<u64> {
        let (i, r) = (u64::from_be_bytes(spi_i), u64::from_be_bytes(spi_r));
        [i, r].into_iter().find(|s| {
            self.sas
                .get(s)
                .is_some_and(|sa| sa.spi_i == i && sa.spi_r == r)
        })
    }

    /// The connection of `state`, if this node can run it: the connection
    /// and every child config exist, the suite runs here, and the keys have
    /// the suite's lengths.
    pub(crate) fn usable(&self, state: &IkeSaState) -> Result<Arc<Connection>, HaError> {
        let conn = self
            .connections
            .iter()
            .find(|c| c.name == state.connection)
            .cloned()
            .ok_or_else(|| HaError::UnknownConnection(state.connection.clone()))?;
        for child in &state.children {
            if !conn.children.iter().any(|c| c.name == child.name) {
                return Err(HaError::UnknownChild(child.name.clone()));
            }
        }
        ike_sa_keys(&state.suite, &state.keys)?;
        Ok(conn)
    }

    /// Registers the IKE and Child SPIs the taken-over SA uses here. Only
    /// an IKE SA running here conflicts: standby copies reserve the SPIs
    /// of exactly the IKE SAs that may be taken over.
    fn claim_spis(&mut self, state: &IkeSaState) -> Result<(), HaError> {
        let (ikes, children) = spis_of(state);
        let runs = |sa: &IkeSa| {
            ikes.contains(&sa.our_spi()) || sa.children.iter().any(|c| children.contains(&c.spi_in))
        };
        if self.sas.values().any(runs) {
            return Err(HaError::SpiInUse);
        }
        self.ike_spis.extend(ikes);
        self.child_spis.extend(children);
        Ok(())
    }

    /// Standby copies that share a Child SA with the IKE SA just taken
    /// over are its predecessors (an IKE SA rekey whose removal is still
    /// on its way): they go, without touching what now runs here.
    fn drop_predecessors(&mut self, state: &IkeSaState) {
        let ours: Vec<u32> = state.children.iter().map(|c| c.spi_in).collect();
        let stale: Vec<_> = self
            .ha
            .passive
            .iter()
            .filter(|(_, p)| p.state.children.iter().any(|c| ours.contains(&c.spi_in)))
            .map(|(k, _)| *k)
            .collect();
        for key in stale {
            if let Some(p) = self.ha.passive.remove(&key) {
                self.reconcile(Some(&p.state), None, Change::Standby);
                self.unreserve(&p.state);
            }
        }
    }
}

/// How a snapshot's generation must compare with the standby copy held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Above it: a standby import (the same owner numbers its snapshots
    /// one by one).
    Newer,
    /// Not below it: a takeover of that very copy.
    NewerOrSame,
    /// Whatever it is: the first snapshot of a new owner, which numbers
    /// its snapshots on from the copy it took over, not from what the
    /// previous owner emitted since.
    Any,
}

/// The keys as the crypto layer holds them, checked against the suite's
/// lengths.
fn ike_sa_keys(suite: &NegotiatedIke, keys: &IkeKeys) -> Result<IkeSaKeys, HaError> {
    let lengths = suite
        .key_lengths()
        .map_err(|_| HaError::Unusable("IKE suite not supported here"))?;
    let prf = suite
        .prf_algorithm()
        .map_err(|_| HaError::Unusable("PRF not supported here"))?;
    IkeSaKeys::from_secrets(prf, lengths, keys.all().map(|k| k.clone()))
        .map_err(|_| HaError::Unusable("key lengths do not match the suite"))
}

/// Keys and protection, the AEAD IV counter moved past anything the
/// previous node may have used ([`HA_IV_MARGIN`]).
fn sa_crypto(provider: &dyn CryptoProvider, state: &IkeSaState) -> Result<SaCrypto, HaError> {
    let negotiated = state.suite.clone();
    let keys = ike_sa_keys(&negotiated, &state.keys)?;
    let prf = negotiated
        .prf_algorithm()
        .map_err(|_| HaError::Unusable("PRF not supported here"))?;
    let mut protection = Protection::with_provider(provider, &keys, &negotiated, state.initiator)
        .map_err(|_| HaError::Unusable("IKE suite refused by the provider"))?;
    protection.skip_iv_counter(state.iv_counter.saturating_add(HA_IV_MARGIN));
    Ok(SaCrypto {
        negotiated,
        prf,
        keys,
        protection,
        reassembler: Reassembler::default(),
    })
}

/// The running IKE SA of `state`, its timers restarted from `now`.
fn build_sa(
    provider: &dyn CryptoProvider,
    now: Instant,
    conn: Arc<Connection>,
    state: &IkeSaState,
) -> Result<IkeSa, HaError> {
    let crypto = sa_crypto(provider, state)?;
    let children = state
        .children
        .iter()
        .map(|c| child_sa(&conn, state, c, now))
        .collect();
    let mut sa = IkeSa::new(
        conn,
        state.initiator,
        state.local,
        state.remote,
        State::Established,
        now,
    );
    sa.spi_i = u64::from_be_bytes(state.spi_i);
    sa.spi_r = u64::from_be_bytes(state.spi_r);
    sa.crypto = Some(crypto);
    sa.encap = state.nat.encap;
    sa.local_behind_nat = state.nat.local_behind_nat;
    sa.fragmentation = state.fragmentation;
    sa.mobike = state.mobike;
    sa.remote_identity = Some(state.peer_id.clone());
    sa.virtual_ips = state
        .virtual_ips
        .iter()
        .map(|v| VirtualIp {
            pool: v.pool.clone(),
            identity: v.identity.clone(),
            address: v.address,
        })
        .collect();
    sa.established_at = Some(now.checked_sub(state.age).unwrap_or(now));
    sa.window = window(state, now);
    sa.children = children;
    sa.tasks = state.queued.iter().cloned().collect();
    sa.delayed = state
        .delayed
        .iter()
        .map(|(wait, work)| (after(now, *wait), work.clone()))
        .collect();
    arm_ike_timers(&mut sa, state, now);
    Ok(sa)
}

/// Both Message ID sequences, the response cache and the unanswered
/// requests, due to be sent again at once.
fn window(state: &IkeSaState, now: Instant) -> Window {
    let m = &state.message_ids;
    Window {
        next_request_id: m.next_request_id,
        outstanding: state
            .in_flight
            .iter()
            .map(|r| Outstanding {
                id: r.message_id,
                exchange: r.exchange,
                datagrams: r.datagrams.clone(),
                tries: 0,
                retransmit_at: now,
                pending: pending(&r.purpose),
            })
            .collect(),
        peer_window: m.peer_window,
        receive_window: m.receive_window,
        expected_request_id: m.expected_request_id,
        responses: state
            .responses
            .iter()
            .map(|r| (r.message_id, r.datagrams.clone()))
            .collect::<VecDeque<_>>(),
    }
}

/// What the response to a resent request completes: deletes and liveness
/// checks as usual; CREATE_CHILD_SA exchanges whose secrets stayed on the
/// failed node only undo what the peer created.
fn pending(purpose: &RequestPurpose) -> Pending {
    match purpose {
        RequestPurpose::Informational => Pending::Informational,
        RequestPurpose::DeleteChildren(spis) => Pending::DeleteChildren(spis.clone()),
        other => Pending::Lost(Box::new(other.clone())),
    }
}

/// RFC 7296 §1.4: liveness checks start over from `now`; the lifetimes
/// keep what was left of them.
fn arm_ike_timers(sa: &mut IkeSa, state: &IkeSaState, now: Instant) {
    if let Some(delay) = sa.conn.dpd_delay.filter(|d| !d.is_zero()) {
        sa.timers.set(IkeTimer::Dpd, after(now, delay));
    }
    if sa.local_behind_nat {
        sa.timers
            .set(IkeTimer::NatKeepalive, after(now, NAT_KEEPALIVE_INTERVAL));
    }
    set_left(&mut sa.timers, IkeTimer::Rekey, state.rekey_in, now);
    set_left(&mut sa.timers, IkeTimer::Expire, state.expire_in, now);
    if let Some(next) = sa.delayed.iter().map(|(at, _)| *at).min() {
        sa.timers.set(IkeTimer::Retry, next);
    }
}

fn set_left<K: crate::timers::TimerKind>(
    timers: &mut TimerTable<K>,
    timer: K,
    left: Option<Duration>,
    now: Instant,
) {
    if let Some(left) = left {
        timers.set(timer, after(now, left));
    }
}

/// One Child SA as the running IKE SA tracks it.
fn child_sa(conn: &Connection, ike: &IkeSaState, c: &ChildSaState, now: Instant) -> ChildSa {
    let mut timers = TimerTable::default();
    set_left(&mut timers, ChildTimer::Rekey, c.rekey_in, now);
    set_left(&mut timers, ChildTimer::Expire, c.expire_in, now);
    set_left(&mut timers, ChildTimer::Retire, c.retire_in, now);
    let held = c
        .outbound_held
        .then(|| child_install(conn, ike, c, false))
        .flatten()
        .map(Box::new);
    ChildSa {
        config: c.name.clone(),
        spi_in: c.spi_in,
        spi_out: c.spi_out,
        suite: c.suite,
        esn: c.esn,
        pfs: c.pfs,
        // Not in the snapshot: the config's, as for a Child SA from
        // IKE_AUTH (RFC 9370 additional key exchanges on rekey).
        additional_ke: c
            .pfs
            .and_then(|_| child_config(conn, &c.name))
            .map(first_pfs_additional_ke)
            .unwrap_or_default(),
        transport: c.transport,
        local_ts: c.local_ts.clone(),
        remote_ts: c.remote_ts.clone(),
        established_at: now.checked_sub(c.age).unwrap_or(now),
        timers,
        status: c.status.into(),
        inbound_installed: c.inbound_installed,
        outbound_installed: c.outbound_installed,
        pending_outbound: held,
        replaces: c.replaces,
        nonces: c.nonces.clone(),
        peer_rekey: c.peer_rekey,
        rekey_of: None,
        keys: c.keys.clone(),
        lifetime_jitter: c.lifetime_jitter,
    }
}

impl IkeSa {
    /// Just taken over: the previous node's unanswered requests go out
    /// again as they were (RFC 7296 §2.1: the peer answers a request it
    /// saw from its cache, and processes one it never saw), then queued
    /// work starts.
    pub(crate) fn resume(&mut self, ctx: &mut Ctx<'_>) {
        let base = ctx.limits.retransmit_base;
        let mut datagrams = Vec::new();
        for out in &mut self.window.outstanding {
            out.retransmit_at = retransmit_timeout(ctx.now, base, 0);
            datagrams.extend(out.datagrams.iter().cloned());
            ctx.count(Counter::RetransmitsSent);
        }
        for datagram in datagrams {
            ctx.transmit(self.local, self.remote, datagram);
        }
        self.arm_retransmit();
        self.pump(ctx);
    }
}

impl From<ChildSaStatus> for ChildStatus {
    fn from(status: ChildSaStatus) -> ChildStatus {
        match status {
            ChildSaStatus::Active => ChildStatus::Active,
            ChildSaStatus::Rekeying => ChildStatus::Rekeying,
            ChildSaStatus::Rekeyed => ChildStatus::Rekeyed,
            ChildSaStatus::Deleting => ChildStatus::Deleting,
        }
    }
}
