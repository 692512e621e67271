//! From a running IKE SA to its [`IkeSaState`], and the mark that says
//! whether anything replicated changed since the last snapshot.

use core::net::SocketAddr;
use std::time::Instant;

use super::state::{
    CachedResponse, ChildSaState, ChildSaStatus, IkeKeys, IkeSaState, InFlightRequest, MessageIds,
    NatState, RequestPurpose, VirtualIpLease,
};
use crate::ike_sa::{ChildSa, ChildStatus, IkeSa, Pending};
use crate::timers::{ChildTimer, IkeTimer};

/// What a snapshot depends on, cheap to compare: when it differs from the
/// last one emitted, a new snapshot goes out. Timers count only through
/// the changes that arm them (a Child SA appears, a status changes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HaMark {
    message_ids: (u32, u32, u32, u32),
    outstanding: Vec<u32>,
    last_response: Option<u32>,
    iv_counter: u64,
    addresses: (SocketAddr, SocketAddr),
    nat: (bool, bool),
    children: Vec<ChildMark>,
    work: (usize, usize),
}

/// A Child SA's part of the mark.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ChildMark {
    spis: (u32, u32),
    status: ChildStatus,
    installed: (bool, bool, bool),
    links: (Option<u32>, Option<u32>),
}

impl IkeSa {
    /// The mark of the replicated fields.
    pub(crate) fn ha_mark(&self) -> HaMark {
        let w = &self.window;
        HaMark {
            message_ids: (
                w.next_request_id,
                w.expected_request_id,
                w.peer_window,
                w.receive_window,
            ),
            outstanding: w.outstanding.iter().map(|o| o.id).collect(),
            last_response: w.responses.back().map(|(id, _)| *id),
            iv_counter: self
                .crypto
                .as_ref()
                .map_or(0, |c| c.protection.iv_counter()),
            addresses: (self.local, self.remote),
            nat: (self.encap, self.local_behind_nat),
            children: self.children.iter().map(ChildMark::of).collect(),
            work: (self.tasks.len(), self.delayed.len()),
        }
    }

    /// The snapshot at `now`, numbered `generation`; `None` unless the SA
    /// is established (keys and peer identity known).
    pub(crate) fn ha_state(&self, now: Instant, generation: u64) -> Option<IkeSaState> {
        if !self.is_established() {
            return None;
        }
        let crypto = self.crypto.as_ref()?;
        let left = |timer| remaining(self.timers.get(timer), now);
        Some(IkeSaState {
            generation,
            connection: self.conn.name.clone(),
            initiator: self.initiator,
            spi_i: self.spi_i.to_be_bytes(),
            spi_r: self.spi_r.to_be_bytes(),
            suite: crypto.negotiated.clone(),
            keys: IkeKeys {
                sk_d: crypto.keys.sk_d.clone(),
                sk_ai: crypto.keys.sk_ai.clone(),
                sk_ar: crypto.keys.sk_ar.clone(),
                sk_ei: crypto.keys.sk_ei.clone(),
                sk_er: crypto.keys.sk_er.clone(),
                sk_pi: crypto.keys.sk_pi.clone(),
                sk_pr: crypto.keys.sk_pr.clone(),
            },
            iv_counter: crypto.protection.iv_counter(),
            local: self.local,
            remote: self.remote,
            nat: NatState {
                encap: self.encap,
                local_behind_nat: self.local_behind_nat,
            },
            fragmentation: self.fragmentation,
            mobike: self.mobike,
            peer_id: self.remote_identity.clone()?,
            message_ids: self.ha_message_ids(),
            responses: self.ha_responses(),
            in_flight: self.ha_in_flight(),
            queued: self.tasks.iter().cloned().collect(),
            delayed: self
                .delayed
                .iter()
                .map(|(at, task)| (at.saturating_duration_since(now), task.clone()))
                .collect(),
            age: self
                .established_at
                .map_or(core::time::Duration::ZERO, |at| {
                    now.saturating_duration_since(at)
                }),
            rekey_in: left(IkeTimer::Rekey),
            expire_in: left(IkeTimer::Expire),
            children: self.children.iter().map(|c| c.ha_state(now)).collect(),
            virtual_ips: self
                .virtual_ips
                .iter()
                .map(|v| VirtualIpLease {
                    pool: v.pool.clone(),
                    identity: v.identity.clone(),
                    address: v.address,
                })
                .collect(),
        })
    }

    fn ha_message_ids(&self) -> MessageIds {
        let w = &self.window;
        MessageIds {
            next_request_id: w.next_request_id,
            expected_request_id: w.expected_request_id,
            peer_window: w.peer_window,
            receive_window: w.receive_window,
        }
    }

    fn ha_responses(&self) -> Vec<CachedResponse> {
        self.window
            .responses
            .iter()
            .map(|(id, datagrams)| CachedResponse {
                message_id: *id,
                datagrams: datagrams.clone(),
            })
            .collect()
    }

    /// Every outstanding request; those of an established SA always have
    /// a purpose that can be written down.
    fn ha_in_flight(&self) -> Vec<InFlightRequest> {
        self.window
            .outstanding
            .iter()
            .filter_map(|o| {
                Some(InFlightRequest {
                    message_id: o.id,
                    exchange: o.exchange,
                    datagrams: o.datagrams.clone(),
                    purpose: purpose(&o.pending)?,
                })
            })
            .collect()
    }
}

impl ChildMark {
    fn of(c: &ChildSa) -> ChildMark {
        ChildMark {
            spis: (c.spi_in, c.spi_out),
            status: c.status,
            installed: (
                c.inbound_installed,
                c.outbound_installed,
                c.pending_outbound.is_some(),
            ),
            links: (c.replaces, c.peer_rekey),
        }
    }
}

impl ChildSa {
    fn ha_state(&self, now: Instant) -> ChildSaState {
        let left = |timer| remaining(self.timers.get(timer), now);
        ChildSaState {
            name: self.config.clone(),
            spi_in: self.spi_in,
            spi_out: self.spi_out,
            suite: self.suite,
            esn: self.esn,
            pfs: self.pfs,
            transport: self.transport,
            local_ts: self.local_ts.clone(),
            remote_ts: self.remote_ts.clone(),
            status: self.status.into(),
            inbound_installed: self.inbound_installed,
            outbound_installed: self.outbound_installed,
            outbound_held: self.pending_outbound.is_some(),
            replaces: self.replaces,
            peer_rekey: self.peer_rekey,
            nonces: self.nonces.clone(),
            keys: self.keys.clone(),
            age: now.saturating_duration_since(self.established_at),
            rekey_in: left(ChildTimer::Rekey),
            expire_in: left(ChildTimer::Expire),
            retire_in: left(ChildTimer::Retire),
            lifetime_jitter: self.lifetime_jitter,
        }
    }
}

/// Time from `now` until a deadline, if armed.
fn remaining(at: Option<Instant>, now: Instant) -> Option<core::time::Duration> {
    at.map(|at| at.saturating_duration_since(now))
}

/// What an outstanding request of an established IKE SA was for. IKE_SA_INIT,
/// IKE_INTERMEDIATE, IKE_AUTH and our Delete of the IKE SA are never
/// outstanding on an established one (the last moves it to Deleting).
fn purpose(pending: &Pending) -> Option<RequestPurpose> {
    match pending {
        // A standby that takes over does not finish the check: its data
        // plane already follows the replicated addresses.
        Pending::Informational | Pending::CheckPath { .. } => Some(RequestPurpose::Informational),
        Pending::DeleteChildren(spis) => Some(RequestPurpose::DeleteChildren(spis.clone())),
        Pending::Child(offer) => Some(RequestPurpose::CreateChild {
            child: offer.config.clone(),
            spi_in: offer.spi_in,
            rekey_of: offer.rekey_of,
        }),
        Pending::RekeyIke(offer) => Some(RequestPurpose::RekeyIke {
            spi: offer.spi.to_be_bytes(),
        }),
        // RFC 9370 §2.2.4: its secrets stay here, like the
        // CREATE_CHILD_SA's; a successor undoes and retries it as one.
        Pending::Followup(f) => match (f.child_offer(), f.new_ike_spi()) {
            (Some(offer), _) => Some(RequestPurpose::CreateChild {
                child: offer.config.clone(),
                spi_in: offer.spi_in,
                rekey_of: offer.rekey_of,
            }),
            (None, Some(spi)) => Some(RequestPurpose::RekeyIke {
                spi: spi.to_be_bytes(),
            }),
            (None, None) => None,
        },
        Pending::Lost(purpose) => Some((**purpose).clone()),
        Pending::Init | Pending::Intermediate | Pending::Auth | Pending::DeleteIke => None,
    }
}

impl From<ChildStatus> for ChildSaStatus {
    fn from(status: ChildStatus) -> ChildSaStatus {
        match status {
            ChildStatus::Active => ChildSaStatus::Active,
            ChildStatus::Rekeying => ChildSaStatus::Rekeying,
            ChildStatus::Rekeyed => ChildSaStatus::Rekeyed,
            ChildStatus::Deleting => ChildSaStatus::Deleting,
        }
    }
}
