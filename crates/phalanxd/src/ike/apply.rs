//! IKE's [`SaEvent`]s into the data plane, in the order the endpoint gives
//! them, and one structured log line per IKE SA and Child SA change and
//! per failure (RFC 7296 exchanges are not logged per packet).
//!
//! | event | data plane |
//! |---|---|
//! | `InstallInbound` | [`SaStore::install_child`]: in the SAD when the call returns, before the message announcing the SPI is sent |
//! | `InstallOutbound` | [`SaStore::install_child`]: becomes the child's current SA; its policies switch at once |
//! | `RemoveInbound` / `RemoveOutbound` | [`SaStore::remove_sa`]; removing the current outbound SA empties the child's slot |
//! | `PeerMoved` | [`SaStore::move_outbound`] for each outbound SA listed |
//! | the others | logged only |

use std::time::Instant;

use phalanx_ike::{ChildSaInstall, SaEvent};
use phalanx_sa::UdpEncap;

use crate::config::{ChildRef, Direction};
use crate::install::ike::{child_sa_config, ike_sa_name};
use crate::install::{InstallError, SaHandle, SaOrigin, SaStore};

/// What the events of one round told the IKE thread.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Notes {
    /// Failures, by connection: (connection, reason).
    pub failures: Vec<(String, String)>,
    /// Whether anything changed (the status is published again).
    pub changed: bool,
    /// Installations the data plane refused.
    pub install_errors: u64,
}

/// Who a connection's peer is, for log lines (`192.0.2.2:500`, or `any`).
pub type PeerOf<'a> = &'a dyn Fn(&str) -> String;

/// Applies one event.
pub fn apply(store: &SaStore, event: SaEvent, now: Instant, notes: &mut Notes, peer: PeerOf<'_>) {
    notes.changed = true;
    match event {
        SaEvent::InstallInbound(install) => install_one(store, &install, Direction::In, now, notes),
        SaEvent::InstallOutbound(install) => {
            install_one(store, &install, Direction::Out, now, notes)
        }
        SaEvent::RemoveInbound {
            connection,
            child,
            spi,
        } => {
            remove_one(store, ChildRef { connection, child }, Direction::In, spi);
        }
        SaEvent::RemoveOutbound {
            connection,
            child,
            spi,
        } => {
            remove_one(store, ChildRef { connection, child }, Direction::Out, spi);
        }
        SaEvent::PeerMoved {
            connection,
            remote,
            encap,
            outbound_spis,
            ..
        } => peer_moved(store, &connection, remote, encap, &outbound_spis),
        other => log_ike_sa(other, notes, peer),
    }
}

fn install_one(
    store: &SaStore,
    install: &ChildSaInstall,
    direction: Direction,
    now: Instant,
    notes: &mut Notes,
) {
    let child = ChildRef {
        connection: install.connection.clone(),
        child: install.child.clone(),
    };
    let result =
        child_sa_config(install, direction).and_then(|sa| store.install_child(&child, sa, now));
    match result {
        Ok(()) => tracing::info!(
            connection = %child.connection,
            child = %child.child,
            direction = direction.as_str(),
            spi = format_args!("{:#010x}", install.spi),
            algorithms = %super::report::child_algorithms(&install.suite),
            esn = install.esn,
            encap = install.encap.is_some(),
            remote = %install.remote,
            "Child SA installed"
        ),
        Err(error) => {
            notes.install_errors += 1;
            let reason = format!(
                "the data plane refused the {} SA: {error}",
                direction.as_str()
            );
            tracing::error!(connection = %child.connection, child = %child.child, spi = format_args!("{:#010x}", install.spi), %error, "Child SA not installed");
            notes.failures.push((child.connection, reason));
        }
    }
}

fn remove_one(store: &SaStore, child: ChildRef, direction: Direction, spi: u32) {
    let name = ike_sa_name(&child, direction, spi);
    match store.remove_sa(&name) {
        Ok(()) => tracing::info!(
            connection = %child.connection,
            child = %child.child,
            direction = direction.as_str(),
            spi = format_args!("{spi:#010x}"),
            "Child SA removed"
        ),
        // An SA the data plane refused to install is not there to remove.
        Err(InstallError::NotFound(_)) => {
            tracing::debug!(sa = %name, "Child SA removal: not installed");
        }
        Err(error) => tracing::error!(sa = %name, %error, "Child SA removal failed"),
    }
}

/// Rebuilds every outbound SA of `connection` listed in `spis` for the
/// peer's new address and encapsulation.
fn peer_moved(
    store: &SaStore,
    connection: &str,
    remote: std::net::SocketAddr,
    encap: Option<UdpEncap>,
    spis: &[u32],
) {
    let rt = store.snapshot();
    let names: Vec<String> = rt
        .sas
        .iter()
        .filter(|sa| matches!(&sa.origin, SaOrigin::Ike(c) if c.connection == connection))
        .filter(|sa| {
            matches!(sa.handle, SaHandle::Outbound { .. }) && spis.contains(&sa.config.params.spi)
        })
        .map(|sa| sa.config.name.clone())
        .collect();
    tracing::info!(connection, %remote, encap = encap.is_some(), outbound_sas = names.len(), "IKE peer moved");
    for name in names {
        if let Err(error) = store.move_outbound(&name, remote.ip(), encap) {
            tracing::error!(sa = %name, %error, "outbound SA not moved to the peer's new address");
        }
    }
}

/// The IKE SA events: logged; failures noted for `initiate --wait`.
fn log_ike_sa(event: SaEvent, notes: &mut Notes, peer: PeerOf<'_>) {
    match event {
        SaEvent::IkeSaUp {
            connection,
            ike_spi_i,
            ike_spi_r,
            local,
            remote,
            peer_id,
            virtual_ips,
        } => {
            tracing::info!(
                %connection,
                spi_i = %hex::encode(ike_spi_i),
                spi_r = %hex::encode(ike_spi_r),
                %local,
                %remote,
                peer_id = %peer_id,
                "IKE SA established"
            );
            if !virtual_ips.is_empty() {
                tracing::info!(
                    %connection,
                    identity = %peer_id,
                    virtual_ips = %join(&virtual_ips),
                    %remote,
                    "client connected"
                );
            }
        }
        SaEvent::IkeSaDown {
            connection,
            ike_spi_i,
            ike_spi_r,
            reason,
            peer_id,
            virtual_ips,
        } => {
            tracing::info!(%connection, peer = %peer(&connection), spi_i = %hex::encode(ike_spi_i), spi_r = %hex::encode(ike_spi_r), %reason, "IKE SA down");
            if !virtual_ips.is_empty() {
                tracing::info!(
                    %connection,
                    identity = %peer_id,
                    virtual_ips = %join(&virtual_ips),
                    %reason,
                    "client disconnected"
                );
            }
            notes
                .failures
                .push((connection, format!("IKE SA down: {reason}")));
        }
        SaEvent::IkeSaFailed { connection, reason } => {
            tracing::warn!(%connection, peer = %peer(&connection), %reason, "IKE SA failed");
            notes.failures.push((connection, reason));
        }
        SaEvent::IkeSaRekeyed {
            connection,
            old_spis,
            new_spis,
        } => tracing::info!(
            %connection,
            old_spi_i = %hex::encode(old_spis.0),
            old_spi_r = %hex::encode(old_spis.1),
            spi_i = %hex::encode(new_spis.0),
            spi_r = %hex::encode(new_spis.1),
            "IKE SA rekeyed"
        ),
        SaEvent::ChildSaFailed {
            connection,
            child,
            reason,
        } => {
            tracing::warn!(%connection, %child, peer = %peer(&connection), %reason, "Child SA failed");
            notes
                .failures
                .push((connection, format!("Child SA {child}: {reason}")));
        }
        other => tracing::debug!(event = ?other, "IKE event"),
    }
}

/// Addresses as one comma-separated log value.
fn join(addresses: &[std::net::IpAddr]) -> String {
    addresses
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod tests;
