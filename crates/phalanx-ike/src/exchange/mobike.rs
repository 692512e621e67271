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
//! address (§3.5) and the answer goes there; NAT detection on the new path
//! decides UDP encapsulation (§3.9, RFC 7296 §2.23); a COOKIE2 is echoed
//! (§3.5). The data plane does not follow yet: an authenticated peer could
//! name a third party's address and turn the gateway's traffic on it
//! (§5.2), so the new path must first answer a return-routability check:
//!
//! ```text
//! Responder (the gateway)           Initiator (the End-User)
//! -------------------------------------------------------------------
//! HDR, SK {N(COOKIE2)}  -->         (to the new address)
//!                          <--  HDR, SK {N(COOKIE2)}
//! ```
//!
//! The echo, inside SK, proves the peer received our request at the new
//! address; then the outbound SAs move there
//! ([`SaEvent::PeerMoved`](crate::SaEvent::PeerMoved)). A check nobody
//! answers ends like any unanswered request (the IKE SA is dead); one
//! answered without our COOKIE2 leaves the data plane where it was. The
//! check costs one round trip on the new path, in which outbound traffic
//! still takes the old one; a Child SA created or rekeyed meanwhile (a
//! strongSwan client on kernel-libipsec rekeys its Child SA right after
//! the update) is installed on the held path too and moves with the rest.
//! On a cluster the check is the owner's: a standby follows the replicated
//! IKE SA's addresses.
//!
//! Once MOBIKE is agreed, only UPDATE_SA_ADDRESSES moves the SA: the
//! implicit update of RFC 7296 §2.23 (follow the source of any
//! authenticated message behind a NAT) no longer applies, as strongSwan
//! does it; the End-User tells us. Not done: MOBIKE as initiator.

use core::net::SocketAddr;

use phalanx_wire::ike::iana::{ExchangeType, NotifyType};
use phalanx_wire::ike::Payload;

use crate::counters::Counter;
use crate::exchange::init::{nat_notifies, nat_status};
use crate::exchange::{notify, Found};
use crate::ike_sa::{Ctx, IkeSa, Pending, Task};

/// Octets of our COOKIE2 (RFC 4555 §3.5: 8 to 64).
const COOKIE2_LEN: usize = 16;

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
        if (local, remote) != (self.local, self.remote) || nat.any() && !self.encap {
            // The data plane stays where it is until the new path answers.
            let held = self.dataplane_path();
            self.local = local;
            self.remote = remote;
            // Encapsulation stays once forced or floated (§3.9: a NAT may
            // come and go; the ports do not change back).
            self.encap |= nat.any();
            if held == (self.local, self.remote, self.encap) {
                // Back where the data plane is: nothing to check.
                self.held_path = None;
            } else {
                self.held_path = Some(held);
                self.push_task(ctx, Task::CheckPath);
            }
        }
        ctx.count(Counter::MobikeUpdates);
        let mut out: Vec<Payload> =
            nat_notifies(ctx, self.spi_i, self.spi_r, self.local, self.remote, false).into();
        out.extend(echo_cookie2(found));
        out
    }

    /// Sends the return-routability check of the current path: an
    /// INFORMATIONAL request with a fresh COOKIE2 (§5.2).
    pub(crate) fn start_path_check(&mut self, ctx: &mut Ctx<'_>) {
        if !self.is_established() || self.held_path.is_none() {
            return;
        }
        let cookie = ctx.random_bytes(COOKIE2_LEN);
        let pending = Pending::CheckPath {
            cookie: cookie.clone(),
            path: (self.local, self.remote),
        };
        ctx.count(Counter::MobikePathChecks);
        // Nothing to release on failure: the check is simply not sent.
        let _ = self.send_request(
            ctx,
            ExchangeType::INFORMATIONAL,
            vec![notify(NotifyType::COOKIE2, cookie)],
            pending,
        );
    }

    /// The answer to a return-routability check: the data plane follows
    /// when it echoes our COOKIE2 and the path is still the SA's (a later
    /// move has a check of its own).
    pub(crate) fn process_path_check_response(
        &mut self,
        ctx: &mut Ctx<'_>,
        cookie: &[u8],
        path: (SocketAddr, SocketAddr),
        payloads: &[Payload],
    ) {
        let found = Found::scan(payloads);
        if found.notify(NotifyType::COOKIE2).map(|n| n.data.as_slice()) != Some(cookie) {
            ctx.count(Counter::MobikePathCheckFailed);
            return;
        }
        if path != (self.local, self.remote) || self.held_path.is_none() {
            // Superseded by a later move (checked by itself), or nothing
            // held back any more.
            return;
        }
        ctx.count(Counter::MobikePathVerified);
        self.held_path = None;
        self.announce_move(ctx);
    }
}

/// N(COOKIE2) copied from a request into its answer (RFC 4555 §3.5: any
/// INFORMATIONAL request may carry one).
pub(crate) fn echo_cookie2(found: &Found<'_>) -> Option<Payload> {
    found
        .notify(NotifyType::COOKIE2)
        .map(|c| notify(NotifyType::COOKIE2, c.data.clone()))
}
