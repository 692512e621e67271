//! Receive coalescing (GRO, LRO) of a network interface, through the
//! `SIOCETHTOOL` ioctl (linux/ethtool.h).
//!
//! A packet ring (`AF_PACKET`) taps frames after GRO: with GRO or LRO on,
//! a TCP stream arrives as 64 KiB "superframes" that no longer fit a ring
//! frame and are not the packets the peer sent. The cluster data plane
//! reads every frame of its interfaces from rings, so it turns both off
//! on them at start ([`disable_rx_coalescing`]), as user-space data
//! planes that read the wire do. Turning GRO off also turns off what
//! depends on it (hardware GRO, UDP GRO forwarding).

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsFd;

use crate::sys;

/// `ETHTOOL_GFLAGS`: get the `ETH_FLAG_*` flags.
const ETHTOOL_GFLAGS: u32 = 0x25;
/// `ETHTOOL_SFLAGS`: set them.
const ETHTOOL_SFLAGS: u32 = 0x26;
/// `ETHTOOL_GGRO`: get generic receive offload.
const ETHTOOL_GGRO: u32 = 0x2b;
/// `ETHTOOL_SGRO`: set it.
const ETHTOOL_SGRO: u32 = 0x2c;
/// `ETH_FLAG_LRO`: large receive offload.
const ETH_FLAG_LRO: u32 = 1 << 15;

/// Which receive coalescing an interface does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxCoalescing {
    /// Generic receive offload (software, in the kernel).
    pub gro: bool,
    /// Large receive offload (in the NIC).
    pub lro: bool,
}

impl RxCoalescing {
    /// Whether any of it is on.
    pub fn any(&self) -> bool {
        self.gro || self.lro
    }
}

/// The receive coalescing `interface` does now (in the calling thread's
/// network namespace).
pub fn rx_coalescing(interface: &str) -> io::Result<RxCoalescing> {
    let socket = control_socket()?;
    let fd = socket.as_fd();
    let gro = sys::ethtool_value(fd, interface, ETHTOOL_GGRO, 0)? != 0;
    let flags = sys::ethtool_value(fd, interface, ETHTOOL_GFLAGS, 0)?;
    Ok(RxCoalescing {
        gro,
        lro: flags & ETH_FLAG_LRO != 0,
    })
}

/// Turns GRO and LRO off on `interface` (needs `CAP_NET_ADMIN`); returns
/// what was on before. Nothing is written when both are off already.
pub fn disable_rx_coalescing(interface: &str) -> io::Result<RxCoalescing> {
    let before = rx_coalescing(interface)?;
    let socket = control_socket()?;
    let fd = socket.as_fd();
    if before.gro {
        sys::ethtool_value(fd, interface, ETHTOOL_SGRO, 0)?;
    }
    if before.lro {
        let flags = sys::ethtool_value(fd, interface, ETHTOOL_GFLAGS, 0)?;
        sys::ethtool_value(fd, interface, ETHTOOL_SFLAGS, flags & !ETH_FLAG_LRO)?;
    }
    let after = rx_coalescing(interface)?;
    if after.any() {
        return Err(io::Error::other(format!(
            "{interface}: receive coalescing still on after turning it off ({after:?}); \
             the driver may not allow it"
        )));
    }
    Ok(before)
}

/// Any datagram socket carries `SIOCETHTOOL`; it is not bound.
fn control_socket() -> io::Result<UdpSocket> {
    UdpSocket::bind("0.0.0.0:0").or_else(|_| UdpSocket::bind("[::]:0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_refused_before_the_kernel() {
        for name in ["", "a-name-longer-than-15", "nul\0name"] {
            let err = rx_coalescing(name).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{name:?}");
        }
    }

    #[test]
    fn an_unknown_interface_is_an_error() {
        let err = rx_coalescing("phx-no-such0").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENODEV), "{err}");
    }

    #[test]
    fn loopback_reads() {
        // Loopback exists in every namespace; it answers both requests.
        rx_coalescing("lo").unwrap();
    }
}
