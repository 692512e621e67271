//! MOBIKE (RFC 4555), responder side: an End-User that moves to another
//! address tells the gateway with UPDATE_SA_ADDRESSES, and the IKE SA and
//! its Child SAs follow at once.
//!
//! ```text
//! Initiator                         Responder
//! -------------------------------------------------------------------
//! HDR, SK {IDi, ..., N(MOBIKE_SUPPORTED), ...}  -->
//!                          <--  HDR, SK {IDr, ..., N(MOBIKE_SUPPORTED), ...}
//!   (the initiator's address changes)
//! HDR, SK {N(UPDATE_SA_ADDRESSES), N(NAT_DETECTION_SOURCE_IP),
//!          N(NAT_DETECTION_DESTINATION_IP), [N(COOKIE2)]}  -->
//!                          <--  HDR, SK {N(NAT_DETECTION_SOURCE_IP),
//!                                   N(NAT_DETECTION_DESTINATION_IP),
//!                                   [N(COOKIE2)]}
//! ```
//!
//! The request is authenticated, so its source becomes the IKE SA's peer
//! address (§3.5) and the data plane moves the outbound SAs there
//! ([`SaEvent::PeerMoved`](crate::SaEvent::PeerMoved)); NAT detection on
//! the new path decides UDP encapsulation (§3.9, RFC 7296 §2.23); COOKIE2
//! is echoed (§3.5). Not done yet: the responder's own return-routability
//! check of the new address (§5.2, a SHOULD against a peer that redirects
//! traffic to a third party), and MOBIKE as initiator.

use core::net::SocketAddr;

use phalanx_wire::ike::iana::NotifyType;
use phalanx_wire::ike::Payload;

use crate::counters::Counter;
use crate::exchange::init::{nat_notifies, nat_status};
use crate::exchange::{notify, Found};
use crate::ike_sa::{Ctx, IkeSa};

impl IkeSa {
    /// Responder, IKE_AUTH: agree to MOBIKE when the initiator offers it
    /// (§3.3); the N(MOBIKE_SUPPORTED) to answer with.
    pub(crate) fn agree_mobike(&mut self, found: &Found<'_>) -> Option<Payload> {
        self.mobike =
            self.conn.mobike && !self.initiator && found.has(NotifyType::MOBIKE_SUPPORTED);
        self.mobike
            .then(|| notify(NotifyType::MOBIKE_SUPPORTED, Vec::new()))
    }

    /// An INFORMATIONAL with UPDATE_SA_ADDRESSES that came from `from`
    /// (our address, the peer's): move there, and answer with NAT
    /// detection for the new path and the COOKIE2 echoed.
    pub(crate) fn update_sa_addresses(
        &mut self,
        ctx: &mut Ctx<'_>,
        found: &Found<'_>,
        (local, remote): (SocketAddr, SocketAddr),
    ) -> Vec<Payload> {
        if !self.mobike {
            ctx.count(Counter::Unprocessable);
            return Vec::new();
        }
        let nat = nat_status(found, self.spi_i, self.spi_r, (local, remote));
        if (local, remote) != (self.local, self.remote) || nat.any() != self.encap {
            self.local = local;
            self.remote = remote;
            // Encapsulation stays once forced or floated (§3.9: a NAT may
            // come and go; the ports do not change back).
            self.encap |= nat.any();
            self.announce_move(ctx);
        }
        ctx.count(Counter::MobikeUpdates);
        let mut out: Vec<Payload> =
            nat_notifies(ctx, self.spi_i, self.spi_r, self.local, self.remote, false).into();
        if let Some(cookie2) = found.notify(NotifyType::COOKIE2) {
            out.push(notify(NotifyType::COOKIE2, cookie2.data.clone()));
        }
        out
    }
}
