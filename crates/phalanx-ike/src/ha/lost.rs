//! Answers to CREATE_CHILD_SA requests a failed node sent: the successor
//! resent them unchanged (RFC 7296 §2.1) so that both Message ID
//! sequences stay exact, but their nonces and key exchange secrets stayed
//! on the failed node. What the peer created from them cannot be used
//! here, so it is undone and the work starts over:
//!
//! - a new or rekeyed Child SA the peer created is deleted (an
//!   INFORMATIONAL Delete naming our inbound SPI of it, §1.4.1), and a
//!   fresh Child SA of the same config is created; the SA a lost rekey
//!   was replacing retires after the usual overlap (§2.8);
//! - a refused request is retried later (§2.25: never at once);
//! - a new IKE SA the peer created from a lost IKE SA rekey holds the
//!   Child SAs on the peer's side and cannot be reached from here: the
//!   IKE SA is deleted and its connection comes up again as configured.

use phalanx_crypto::Suite;
use phalanx_wire::ike::iana::{EncrId, IntegId, NotifyType};
use phalanx_wire::ike::{Payload, Spi};
use std::time::Instant;

use super::state::RequestPurpose;
use crate::counters::Counter;
use crate::exchange::Found;
use crate::ha::ChildSaKeys;
use crate::ike_sa::{ChildSa, ChildStatus, Ctx, IkeSa, Task};
use crate::limits::{REKEY_OVERLAP, TEMPORARY_FAILURE_RETRY_MIN};
use crate::timers::{after, ChildTimer, TimerTable};

impl IkeSa {
    /// The response to a request another node sent before this one took
    /// the IKE SA over.
    pub(crate) fn process_lost_response(
        &mut self,
        ctx: &mut Ctx<'_>,
        purpose: RequestPurpose,
        payloads: &[Payload],
    ) {
        ctx.count(Counter::HaLostRequests);
        let found = Found::scan(payloads);
        // RFC 9370 §2.2.4: a CREATE_CHILD_SA answered with
        // N(ADDITIONAL_KEY_EXCHANGE) waits for IKE_FOLLOWUP_KE and is
        // dropped by the peer when none comes; the answer to the last
        // IKE_FOLLOWUP_KE (KEr, no link) means the peer created the SA.
        let waits = found.has(NotifyType::ADDITIONAL_KEY_EXCHANGE);
        let created =
            found.error().is_none() && !waits && (found.sa.is_some() || found.ke.is_some());
        match purpose {
            RequestPurpose::CreateChild {
                child,
                spi_in,
                rekey_of,
            } => {
                let peer_spi = found.sa.and_then(|sa| sa.proposals.first()).map(|p| p.spi);
                let peer_spi = match peer_spi {
                    Some(Spi::Child(spi)) => spi,
                    _ => 0,
                };
                if created {
                    self.undo_lost_child(ctx, &child, (spi_in, peer_spi), rekey_of);
                } else {
                    self.retry_lost_child(ctx, &child, spi_in, rekey_of);
                }
            }
            RequestPurpose::RekeyIke { spi } => {
                ctx.ike_spis.remove(&u64::from_be_bytes(spi));
                if created {
                    // As `terminate` does: nothing else is worth starting.
                    self.tasks.clear();
                    self.tasks.push_front(Task::DeleteIke);
                } else {
                    let task = Task::RekeyIke { retries: 0 };
                    self.delay_task(ctx, task, TEMPORARY_FAILURE_RETRY_MIN);
                }
            }
            // Deletes and liveness checks complete as usual (never lost).
            RequestPurpose::Informational | RequestPurpose::DeleteChildren(_) => {}
        }
    }

    /// The peer created a Child SA (ours: `spis.0`, its: `spis.1`) we hold
    /// no keys for: delete it, retire what it was replacing, start again.
    fn undo_lost_child(
        &mut self,
        ctx: &mut Ctx<'_>,
        config: &str,
        spis: (u32, u32),
        rekey_of: Option<u32>,
    ) {
        self.children.push(ChildSa::unusable(config, spis, ctx.now));
        self.push_task(ctx, Task::DeleteChildren { spis: vec![spis.0] });
        let mut group = None;
        if let Some(old) = rekey_of.and_then(|s| self.children.iter_mut().find(|c| c.spi_in == s)) {
            old.status = ChildStatus::Rekeyed;
            old.timers.stop(ChildTimer::Rekey);
            old.timers
                .set(ChildTimer::Retire, after(ctx.now, REKEY_OVERLAP));
            group = old.pfs;
        }
        let task = Task::CreateChild {
            child: config.to_owned(),
            trigger: None,
            retries: 0,
            group,
        };
        self.push_task(ctx, task);
    }

    /// The peer refused: nothing to undo; the same work is retried later.
    fn retry_lost_child(
        &mut self,
        ctx: &mut Ctx<'_>,
        config: &str,
        spi_in: u32,
        rekey_of: Option<u32>,
    ) {
        ctx.free_child_spi(spi_in);
        let task = match rekey_of {
            Some(old) => {
                if let Some(c) = self.children.iter_mut().find(|c| c.spi_in == old) {
                    if c.status == ChildStatus::Rekeying {
                        c.status = ChildStatus::Active;
                    }
                }
                Task::RekeyChild {
                    spi_in: old,
                    retries: 0,
                }
            }
            None => Task::CreateChild {
                child: config.to_owned(),
                trigger: None,
                retries: 0,
                group: None,
            },
        };
        self.delay_task(ctx, task, TEMPORARY_FAILURE_RETRY_MIN);
    }
}

impl ChildSa {
    /// The record of a Child SA the peer created for a lost request: known
    /// by its SPIs only, never installed, kept just long enough to be
    /// deleted.
    fn unusable(config: &str, (spi_in, spi_out): (u32, u32), now: Instant) -> ChildSa {
        ChildSa {
            config: config.to_owned(),
            spi_in,
            spi_out,
            suite: Suite::esp(EncrId::NULL, 0, IntegId::NONE),
            esn: false,
            pfs: None,
            additional_ke: Vec::new(),
            transport: false,
            local_ts: Vec::new(),
            remote_ts: Vec::new(),
            established_at: now,
            timers: TimerTable::default(),
            status: ChildStatus::Active,
            inbound_installed: false,
            outbound_installed: false,
            pending_outbound: None,
            replaces: None,
            nonces: None,
            peer_rekey: None,
            rekey_of: None,
            keys: ChildSaKeys::default(),
            lifetime_jitter: core::time::Duration::ZERO,
        }
    }
}
