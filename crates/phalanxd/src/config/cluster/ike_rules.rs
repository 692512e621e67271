//! What IKE may not use on a cluster node (`[cluster]` with `[ike]` or
//! `[[connection]]`), checked on the file as written so that each refusal
//! names its line.
//!
//! - `start_action = "trap"`: acquires come from a host-mode worker's
//!   SPD miss; the cluster worker dispatches every cleartext packet by
//!   its SA, and a packet without one must not make every node start IKE.
//! - `mode = "transport"`: the cluster tunnels between the virtual
//!   addresses; a transport-mode SA's packets are addressed to a node.
//! - RADIUS accounting (`acct_port` other than 0 on a `[[radius.server]]`,
//!   1813 by default) with `remote_auth = "eap-radius"`: an accounting
//!   session lives on the node that runs the IKE SA and is not replicated
//!   (a successor would never send its Stop), and each node counts only
//!   the packets it processes. EAP through RADIUS itself works (the node
//!   that runs the IKE SA relays it), as does EAP-MSCHAPv2 with local
//!   secrets: an exchange in progress is not replicated, so an End-User
//!   whose node fails mid-EAP starts again; established IKE SAs replicate
//!   as usual.
//! - `ah_proposals`: AH is not carried by the cluster worker (as for a
//!   static `protocol = "ah"` SA).
//! - `rekey_bytes` / `rekey_packets`: each node counts only the packets it
//!   processes, so no node sees the SA's volume (time-based rekeying,
//!   which the IKE SA's owner runs, works).
//!
//! The IKE local address is the outside virtual address: `local_addr`
//! must already be `protected.local`, which `[cluster.outside]` must be.

use toml::Spanned;

use super::super::radius::RawRadius;
use super::super::raw_ike::RawConnection;
use super::super::{ConfigError, Source};

/// Refuses what cannot work in cluster mode (module doc).
pub(crate) fn check(
    source: &Source<'_>,
    connections: &[Spanned<RawConnection>],
    radius: Option<&Spanned<RawRadius>>,
) -> Result<(), ConfigError> {
    let eap_radius = connections.iter().any(|c| {
        c.get_ref()
            .remote_auth
            .as_ref()
            .is_some_and(|h| h.get_ref() == "eap-radius")
    });
    if let Some(radius) = radius.filter(|_| eap_radius) {
        for (j, server) in radius.get_ref().server.iter().enumerate() {
            let acct = &server.get_ref().acct_port;
            if acct.as_ref().is_some_and(|p| *p.get_ref() == 0) {
                continue;
            }
            let span = acct
                .as_ref()
                .map_or_else(|| server.get_ref().address.span(), Spanned::span);
            let msg = "RADIUS accounting is not available on a cluster node yet: accounting \
                       sessions are not replicated and each node counts only its own packets; \
                       set acct_port = 0 (EAP through RADIUS works)";
            return Err(source.error(span, format!("radius.server[{j}].acct_port"), msg));
        }
    }
    for (i, conn) in connections.iter().enumerate() {
        let conn = conn.get_ref();
        if let Some(action) = &conn.start_action {
            if action.get_ref() == "trap" {
                let msg = "start_action = \"trap\" is not available in cluster mode (the \
                           cluster worker raises no acquires); use \"start\" or \"none\"";
                return Err(source.error(
                    action.span(),
                    format!("connection[{i}].start_action"),
                    msg,
                ));
            }
        }
        for (j, child) in conn.child.iter().enumerate() {
            let child = child.get_ref();
            let field = |f: &str| format!("connection[{i}].child[{j}].{f}");
            if let Some(mode) = &child.mode {
                if mode.get_ref() == "transport" {
                    let msg = "transport mode is not available in cluster mode (the cluster \
                               tunnels between its virtual addresses)";
                    return Err(source.error(mode.span(), field("mode"), msg));
                }
            }
            if let Some(ah) = &child.ah_proposals {
                let msg = "AH (ah_proposals) is not carried by a cluster node yet (host mode only)";
                return Err(source.error(ah.span(), field("ah_proposals"), msg));
            }
            let volume = [
                ("rekey_bytes", &child.rekey_bytes),
                ("rekey_packets", &child.rekey_packets),
            ];
            for (name, value) in volume {
                if let Some(value) = value.as_ref().filter(|v| *v.get_ref() != 0) {
                    let msg = format!(
                        "{name} is not available in cluster mode (each node counts only the \
                         packets it processes); rekey by time (rekey_time)"
                    );
                    return Err(source.error(value.span(), field(name), msg));
                }
            }
        }
    }
    Ok(())
}
