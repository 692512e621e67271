//! A Child SA pair (inbound + outbound) as the IKE SA tracks it: SPIs,
//! what was negotiated, what the data plane has installed, its timers and
//! its place in rekeys (RFC 7296 §1.3, §2.8).

use std::time::{Duration, Instant};

use phalanx_crypto::Suite;
use phalanx_sa::{IpsecProtocol, SaMode, UdpEncap};
use phalanx_wire::ike::iana::KeId;
use phalanx_wire::ike::TrafficSelector;

use crate::events::{ChildSaInfo, ChildSaInstall, SaEvent};
use crate::ha::ChildSaKeys;
use crate::ike_sa::ctx::Ctx;
use crate::proposal::suite_protocol;
use crate::timers::{ChildTimer, TimerTable};

/// Where a Child SA is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChildStatus {
    /// In use.
    Active,
    /// Our rekey of it is in flight.
    Rekeying,
    /// Replaced by a rekey (ours or the peer's); deleted after the overlap.
    Rekeyed,
    /// Our Delete of it is in flight.
    Deleting,
}

/// One Child SA pair.
pub(crate) struct ChildSa {
    /// The child config's name.
    pub(crate) config: String,
    /// Our SPI (inbound).
    pub(crate) spi_in: u32,
    /// The peer's SPI (outbound).
    pub(crate) spi_out: u32,
    /// The negotiated transforms.
    pub(crate) suite: Suite,
    /// Extended sequence numbers.
    pub(crate) esn: bool,
    /// The KE group negotiated for PFS, re-offered on rekey.
    pub(crate) pfs: Option<KeId>,
    /// RFC 9370 additional key exchanges re-offered on rekey (with the
    /// PFS group; run in IKE_FOLLOWUP_KE): the methods of each ADDKE type
    /// in type order.
    pub(crate) additional_ke: Vec<Vec<KeId>>,
    /// The ESP proposal number accepted (for re-offering the same suite).
    pub(crate) transport: bool,
    /// Our side's selectors.
    pub(crate) local_ts: Vec<TrafficSelector>,
    /// The peer's side's selectors.
    pub(crate) remote_ts: Vec<TrafficSelector>,
    /// When it was created.
    pub(crate) established_at: Instant,
    /// Rekey, expiry and retirement.
    pub(crate) timers: TimerTable<ChildTimer>,
    /// Where it is in its life.
    pub(crate) status: ChildStatus,
    /// The data plane has the inbound SA.
    pub(crate) inbound_installed: bool,
    /// The data plane has the outbound SA.
    pub(crate) outbound_installed: bool,
    /// The outbound SA, held back until the peer can receive on it: a
    /// rekey responder switches when the old SA is deleted (§2.8).
    pub(crate) pending_outbound: Option<Box<ChildSaInstall>>,
    /// For an SA the peer's rekey created: our inbound SPI of the SA it
    /// replaces (its outbound is installed when that one is deleted).
    pub(crate) replaces: Option<u32>,
    /// Ni and Nr of the CREATE_CHILD_SA that created it (§2.8.1).
    pub(crate) nonces: Option<(Vec<u8>, Vec<u8>)>,
    /// On an SA the peer rekeyed: our inbound SPI of the SA that rekey
    /// created (for collisions with our own rekey, §2.8.1).
    pub(crate) peer_rekey: Option<u32>,
    /// For an SA our rekey created: our inbound SPI of the SA it replaced.
    /// A peer's rekey of that SA that completes after ours (its
    /// IKE_FOLLOWUP_KE still running when our rekey was done) is a
    /// collision too (§2.8.1). Not replicated: a takeover in that window
    /// may leave a redundant SA until its next rekey.
    pub(crate) rekey_of: Option<u32>,
    /// The keys of both directions (§2.17), kept for the replicated state
    /// other cluster nodes install the SA from ([`crate::ha`]).
    pub(crate) keys: ChildSaKeys,
    /// The jitter taken off the soft lifetime (§2.8).
    pub(crate) lifetime_jitter: Duration,
}

impl ChildSa {
    /// ESP or AH, as negotiated.
    pub(crate) fn protocol(&self) -> IpsecProtocol {
        suite_protocol(&self.suite)
    }

    /// Emits removals for whatever the data plane has, outbound first so
    /// nothing is sent on an SA the peer no longer accepts, and releases
    /// the inbound SPI.
    pub(crate) fn remove(&mut self, ctx: &mut Ctx<'_>, connection: &str) {
        self.pending_outbound = None;
        if self.outbound_installed {
            self.outbound_installed = false;
            ctx.event(SaEvent::RemoveOutbound {
                connection: connection.to_owned(),
                child: self.config.clone(),
                spi: self.spi_out,
            });
        }
        self.remove_inbound(ctx, connection);
    }

    /// Emits the inbound removal (if installed) and releases the SPI.
    pub(crate) fn remove_inbound(&mut self, ctx: &mut Ctx<'_>, connection: &str) {
        if self.inbound_installed {
            self.inbound_installed = false;
            ctx.event(SaEvent::RemoveInbound {
                connection: connection.to_owned(),
                child: self.config.clone(),
                spi: self.spi_in,
            });
        }
        ctx.free_child_spi(self.spi_in);
    }

    /// Emits the outbound removal, if installed.
    pub(crate) fn remove_outbound(&mut self, ctx: &mut Ctx<'_>, connection: &str) {
        self.pending_outbound = None;
        if self.outbound_installed {
            self.outbound_installed = false;
            ctx.event(SaEvent::RemoveOutbound {
                connection: connection.to_owned(),
                child: self.config.clone(),
                spi: self.spi_out,
            });
        }
    }

    /// Installs the held-back outbound SA, if there is one.
    pub(crate) fn install_pending_outbound(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(install) = self.pending_outbound.take() {
            self.outbound_installed = true;
            ctx.event(SaEvent::InstallOutbound(*install));
        }
    }

    /// The peer made this SA and it lost a rekey collision (§2.8.1): it
    /// never takes our traffic, and the peer deletes it.
    pub(crate) fn lost_collision(&mut self) {
        self.replaces = None;
        self.pending_outbound = None;
        self.status = ChildStatus::Rekeyed;
        self.timers.stop(ChildTimer::Rekey);
    }

    /// Whether it carries traffic (not replaced, not being deleted).
    pub(crate) fn is_current(&self) -> bool {
        matches!(self.status, ChildStatus::Active | ChildStatus::Rekeying)
    }

    /// The status snapshot for `phalanxctl`.
    pub(crate) fn info(&self, mode: SaMode, encap: Option<UdpEncap>) -> ChildSaInfo {
        ChildSaInfo {
            name: self.config.clone(),
            spi_in: self.spi_in,
            spi_out: self.spi_out,
            local_ts: self.local_ts.clone(),
            remote_ts: self.remote_ts.clone(),
            suite: self.suite,
            esn: self.esn,
            mode,
            encap,
            established_at: self.established_at,
            rekey_at: self.timers.get(ChildTimer::Rekey),
            expires_at: self.timers.get(ChildTimer::Expire),
            rekeyed: self.status == ChildStatus::Rekeyed,
            key_exchanges: self
                .pfs
                .into_iter()
                .chain(
                    self.additional_ke
                        .iter()
                        .filter_map(|ids| ids.first().copied()),
                )
                .filter(|id| *id != KeId::NONE)
                .collect(),
        }
    }
}
