//! The responder's final choice of connection at IKE_AUTH (strongSwan's
//! two-step selection): IKE_SA_INIT picked a candidate by address; the
//! initiator's IDi, the IDr it asks for and how it authenticates pick the
//! connection that really applies, among those on the same addresses
//! (RFC 7296 §2.15: the responder chooses whose credentials to use from
//! IDi and IDr).
//!
//! A connection fits when its `remote_id` matches IDi (wildcards as in
//! [`Identity::matches`]; none: any), its `local_id` matches IDr when the
//! initiator sent one, its `remote_auth` is of the AUTH payload's kind (a
//! shared key, a signature, or EAP when there is no AUTH payload), and
//! its IKE proposals accept the suite
//! IKE_SA_INIT negotiated. Candidates are tried with the peer's exact
//! address first, then in configuration order. None fits:
//! AUTHENTICATION_FAILED, and nothing of the IKE SA is kept.

use core::net::IpAddr;
use std::sync::Arc;

use phalanx_wire::ike::iana::AuthMethod;

use crate::auth::Identity;
use crate::config::{Connection, IkeProposal, RemoteAuth};
use crate::proposal::NegotiatedIke;

/// What the IKE_AUTH request says about the initiator.
pub(crate) struct Presented<'a> {
    /// IDi.
    pub(crate) idi: &'a Identity,
    /// IDr, if sent.
    pub(crate) idr: Option<&'a Identity>,
    /// The AUTH payload's method; `None`: no AUTH, the peer wants EAP
    /// (RFC 7296 §2.16).
    pub(crate) method: Option<AuthMethod>,
}

/// The connection for `presented` among `all` on `local` ↔ `remote`.
pub(crate) fn final_connection(
    all: &[Arc<Connection>],
    (local, remote): (IpAddr, IpAddr),
    suite: &NegotiatedIke,
    presented: &Presented<'_>,
) -> Option<Arc<Connection>> {
    let local_ok = |c: &Connection| c.local_addr == local || c.local_addr.is_unspecified();
    let exact = all
        .iter()
        .filter(|c| local_ok(c) && c.remote_addr == Some(remote));
    let any = all
        .iter()
        .filter(|c| local_ok(c) && c.remote_addr.is_none());
    exact
        .chain(any)
        .find(|c| fits(c, suite, presented))
        .cloned()
}

fn fits(c: &Connection, suite: &NegotiatedIke, p: &Presented<'_>) -> bool {
    let remote_ok = c.remote_id.as_ref().is_none_or(|id| id.matches(p.idi));
    let local_ok = p.idr.is_none_or(|idr| c.local_id.matches(idr));
    remote_ok
        && local_ok
        && auth_kind_fits(&c.remote_auth, p.method)
        && accepts(&c.ike_proposals, suite)
}

/// A shared key for SHARED_KEY_MIC, a signature for the other methods,
/// EAP when there is no AUTH payload.
fn auth_kind_fits(auth: &RemoteAuth, method: Option<AuthMethod>) -> bool {
    match (auth, method) {
        (RemoteAuth::Psk(_), Some(m)) => m == AuthMethod::SHARED_KEY_MIC,
        (RemoteAuth::Signature { .. }, Some(m)) => m != AuthMethod::SHARED_KEY_MIC,
        (RemoteAuth::Eap, None) => true,
        _ => false,
    }
}

/// Whether one of `proposals` holds every transform of `suite`.
fn accepts(proposals: &[IkeProposal], suite: &NegotiatedIke) -> bool {
    proposals.iter().any(|p| {
        p.encr.contains(&suite.encr)
            && p.prf.contains(&suite.prf)
            && suite.integ.is_none_or(|i| p.integ.contains(&i))
            && p.ke.contains(&suite.ke)
    })
}
