//! The data-plane side of an imported IKE SA: the [`ChildSaInstall`]s of
//! its Child SAs, built from the snapshot the way the node that negotiated
//! them built its own (RFC 7296 §2.11 tunnel addresses, §2.17 keys,
//! RFC 3948 encapsulation).

use phalanx_sa::{LifetimeLimits, SaMode, UdpEncap};

use super::state::{ChildSaState, IkeSaState};
use crate::config::{ChildConfig, Connection};
use crate::events::ChildSaInstall;
use crate::exchange::child::{child_config, selectors};
use crate::limits::NATT_PORT;

/// One direction of a Child SA to install or remove.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Direction {
    /// Inbound (our SPI) or outbound (the peer's).
    pub(crate) inbound: bool,
    /// The SPI of that direction.
    pub(crate) spi: u32,
}

/// The directions of `child` the data plane has installed.
pub(crate) fn installed(child: &ChildSaState) -> impl Iterator<Item = Direction> {
    let inbound = child.inbound_installed.then_some(Direction {
        inbound: true,
        spi: child.spi_in,
    });
    let outbound = child.outbound_installed.then_some(Direction {
        inbound: false,
        spi: child.spi_out,
    });
    inbound.into_iter().chain(outbound)
}

/// UDP encapsulation of the Child SAs of `ike` (RFC 7296 §2.23: a NAT,
/// forced encapsulation, or IKE on port 4500).
pub(crate) fn udp_encap(ike: &IkeSaState) -> Option<UdpEncap> {
    let floated = ike.local.port() == NATT_PORT || ike.remote.port() == NATT_PORT;
    (ike.nat.encap || floated).then_some(UdpEncap {
        local_port: ike.local.port(),
        remote_port: ike.remote.port(),
    })
}

/// The installation of one direction of `child`; `None` when the
/// connection has no child config of that name (checked at import).
pub(crate) fn child_install(
    conn: &Connection,
    ike: &IkeSaState,
    child: &ChildSaState,
    inbound: bool,
) -> Option<ChildSaInstall> {
    let cfg = child_config(conn, &child.name)?;
    let keys = &child.keys;
    let (spi, encr_key, integ_key, src, dst) = if inbound {
        let k = (&keys.encr_in, &keys.integ_in);
        (child.spi_in, k.0, k.1, &child.remote_ts, &child.local_ts)
    } else {
        let k = (&keys.encr_out, &keys.integ_out);
        (child.spi_out, k.0, k.1, &child.local_ts, &child.remote_ts)
    };
    Some(ChildSaInstall {
        connection: conn.name.clone(),
        child: child.name.clone(),
        spi,
        suite: child.suite,
        encr_key: encr_key.clone(),
        integ_key: integ_key.clone(),
        mode: child_mode(ike, child.transport),
        esn: child.esn,
        local: ike.local.ip(),
        remote: ike.remote.ip(),
        encap: udp_encap(ike),
        selectors: selectors(src, dst),
        replay_window: cfg.replay_window,
        peer_replay_window: cfg.peer_replay_window,
        lifetime: lifetime(cfg, child),
    })
}

/// Tunnel between the IKE SA's addresses (§2.11), or transport.
fn child_mode(ike: &IkeSaState, transport: bool) -> SaMode {
    if transport {
        SaMode::Transport
    } else {
        SaMode::Tunnel {
            local: ike.local.ip(),
            remote: ike.remote.ip(),
        }
    }
}

/// The configured limits, the times shortened to what is left of them:
/// the SA was installed elsewhere earlier.
fn lifetime(cfg: &ChildConfig, child: &ChildSaState) -> LifetimeLimits {
    let mut limits = cfg.lifetime.limits(child.lifetime_jitter);
    if child.rekey_in.is_some() {
        limits.soft_time = child.rekey_in;
    }
    if child.expire_in.is_some() {
        limits.hard_time = child.expire_in;
    }
    limits
}
