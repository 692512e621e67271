//! Work an IKE SA has to do as an initiator of exchanges (strongSwan-style
//! tasks): queued while the window is busy, started one at a time, and
//! what the outstanding request's response completes.

use core::net::{IpAddr, SocketAddr};

use crate::exchange::child::ChildOffer;
use crate::exchange::followup::Followup;
use crate::exchange::ike_rekey::IkeRekeyOffer;
use crate::ha::RequestPurpose;

/// Queued work, started when the window is free. Public as
/// [`crate::ha::QueuedWork`], part of a replicated IKE SA snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Task {
    /// Create a Child SA of the named child config (RFC 7296 §1.3.1).
    CreateChild {
        /// The child config's name.
        child: String,
        /// The packet that triggered it (source, destination), if any
        /// (§2.9: the first selector describes it).
        trigger: Option<(IpAddr, IpAddr)>,
        /// Retries after TEMPORARY_FAILURE / INVALID_KE_PAYLOAD so far.
        retries: u32,
        /// The PFS group to offer first (after INVALID_KE_PAYLOAD).
        group: Option<phalanx_wire::ike::iana::KeId>,
    },
    /// Rekey the Child SA with this inbound SPI (§1.3.3).
    RekeyChild {
        /// Our inbound SPI of the SA to rekey.
        spi_in: u32,
        /// Retries after TEMPORARY_FAILURE so far.
        retries: u32,
    },
    /// Delete Child SAs by our inbound SPIs (§1.4.1).
    DeleteChildren {
        /// Our inbound SPIs.
        spis: Vec<u32>,
    },
    /// Rekey the IKE SA (§1.3.2).
    RekeyIke {
        /// Retries after TEMPORARY_FAILURE so far.
        retries: u32,
    },
    /// Delete the IKE SA (§1.4.1).
    DeleteIke,
    /// Liveness check: an empty INFORMATIONAL request (§1.4).
    Dpd,
    /// Return-routability check of a MOBIKE peer's new address: an
    /// INFORMATIONAL request with N(COOKIE2) (RFC 4555 §5.2).
    CheckPath,
}

/// What the response to our outstanding request completes.
pub(crate) enum Pending {
    /// IKE_SA_INIT; the state holds the rest.
    Init,
    /// IKE_INTERMEDIATE with an additional key exchange; the state holds
    /// the rest.
    Intermediate,
    /// IKE_AUTH; the state holds the rest.
    Auth,
    /// CREATE_CHILD_SA for a new or rekeyed Child SA.
    Child(Box<ChildOffer>),
    /// CREATE_CHILD_SA rekeying the IKE SA.
    RekeyIke(Box<IkeRekeyOffer>),
    /// IKE_FOLLOWUP_KE: an additional key exchange of a CREATE_CHILD_SA
    /// (RFC 9370 §2.2.4).
    Followup(Box<Followup>),
    /// INFORMATIONAL deleting these Child SAs (our inbound SPIs).
    DeleteChildren(Vec<u32>),
    /// INFORMATIONAL deleting the IKE SA.
    DeleteIke,
    /// An empty INFORMATIONAL (liveness), or one carrying only a notify.
    Informational,
    /// The return-routability check of the path (our address, the
    /// peer's) with this COOKIE2 (RFC 4555 §5.2).
    CheckPath {
        /// The COOKIE2 the answer must echo.
        cookie: Vec<u8>,
        /// The path it checks.
        path: (SocketAddr, SocketAddr),
    },
    /// A CREATE_CHILD_SA another cluster node sent before this one took
    /// the IKE SA over: its secrets stayed there, so the response is only
    /// used to undo what the peer created ([`crate::ha`]).
    Lost(Box<RequestPurpose>),
}

impl Pending {
    /// The Child SA offer it works on: a CREATE_CHILD_SA, or an
    /// IKE_FOLLOWUP_KE that completes one.
    pub(crate) fn child_offer(&self) -> Option<&ChildOffer> {
        match self {
            Pending::Child(offer) => Some(offer),
            Pending::Followup(f) => f.child_offer(),
            _ => None,
        }
    }

    /// Whether it rekeys the IKE SA (CREATE_CHILD_SA or IKE_FOLLOWUP_KE).
    pub(crate) fn rekeys_ike(&self) -> bool {
        match self {
            Pending::RekeyIke(_) => true,
            Pending::Followup(f) => f.new_ike_spi().is_some(),
            _ => false,
        }
    }
}
