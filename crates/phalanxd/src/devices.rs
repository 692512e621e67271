//! Opening the devices, all before privileges are dropped: the TUN device
//! with one queue per worker (`IFF_MULTI_QUEUE`), one UDP socket per
//! worker on the ESP-in-UDP port (`SO_REUSEPORT`, so the kernel spreads
//! peers over workers by 4-tuple hash), and the raw ESP socket.
//!
//! Cluster mode ([`open_cluster`]): one TUN queue, the UDP and raw ESP
//! sockets bound to the outside virtual address (which no interface
//! holds: `IP_FREEBIND` / `IP_TRANSPARENT`, set while `CAP_NET_ADMIN` is
//! still held), and an AF_PACKET ring in promiscuous mode on each side's
//! interface; with `[cluster] kernel_filter` the ESP pre-filter's maps and
//! program are created and attached to the outside ring here too (they
//! need `CAP_BPF`; the mapped maps need nothing after the drop).

use crate::dataplane::io::{IcmpSockets, SharedRaw};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use phalanx_io::ethtool::disable_rx_coalescing;
use phalanx_io::packet::{PacketSocket, PacketSocketConfig};
use phalanx_io::raw::{RawEspConfig, RawEspSocket, RawProtocol};
use phalanx_io::tun::{TunConfig, TunDevice};
use phalanx_io::udp::{UdpConfig, UdpSocket};
use phalanx_wire::ethernet::MacAddress;

use crate::config::{ClusterSettings, Config};
use crate::dataplane::cluster::kernel_filter::{FilterAddresses, KernelFilter};
use crate::dataplane::cluster::worker::{ClusterDevices, KernelFilterState};
use crate::dataplane::worker::WorkerDevices;

/// Opening a device failed; the message names the device.
#[derive(Debug)]
pub struct DeviceError {
    /// Which device, e.g. `TUN phx0`.
    pub device: String,
    /// Why.
    pub error: io::Error,
}

impl std::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "opening {}: {}", self.device, self.error)
    }
}

impl std::error::Error for DeviceError {}

fn named(device: String) -> impl FnOnce(io::Error) -> DeviceError {
    move |error| DeviceError { device, error }
}

/// The number of workers `config` asks for: `workers`, or one per core.
pub fn worker_count(config: &Config) -> usize {
    match config.daemon.workers {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// Opens everything `workers` workers need.
pub fn open(config: &Config, workers: usize) -> Result<Vec<WorkerDevices>, DeviceError> {
    let queues = match config.clear.queues {
        0 => workers,
        n => n.min(workers),
    }
    .max(1);
    let tuns = open_tun(config, queues)?;
    let raw = open_raw(config, false)?;
    let ah = open_raw_ah(config)?;
    let icmp = Arc::new(IcmpSockets::open());
    let mut devices = Vec::with_capacity(workers);
    let mut tuns = tuns.into_iter();
    for index in 0..workers {
        // Fewer queues than workers: the extra workers only serve sockets.
        let tun = match tuns.next() {
            Some(tun) => tun,
            None => break,
        };
        devices.push(WorkerDevices {
            tun,
            udp: open_udp(config, workers > 1)?,
            raw: raw.clone(),
            reads_raw: index == 0,
            ah: ah.clone(),
            icmp: Arc::clone(&icmp),
        });
    }
    Ok(devices)
}

/// The TUN device and `queues - 1` more queues.
fn open_tun(config: &Config, queues: usize) -> Result<Vec<TunDevice>, DeviceError> {
    let clear = &config.clear;
    let mut tun_config = TunConfig::new(clear.tun.clone());
    tun_config.mtu = Some(clear.mtu);
    tun_config.offload = clear.offload;
    tun_config.multi_queue = queues > 1;
    tun_config.ipv4 = clear.ipv4;
    tun_config.ipv6 = clear.ipv6;
    let what = || format!("TUN {}", clear.tun);
    let first = TunDevice::open(&tun_config).map_err(named(what()))?;
    let mut all = Vec::with_capacity(queues);
    for _ in 1..queues {
        all.push(first.open_queue().map_err(named(what()))?);
    }
    all.insert(0, first);
    Ok(all)
}

/// One worker's UDP socket on the protected address.
fn open_udp(config: &Config, reuse_port: bool) -> Result<UdpSocket, DeviceError> {
    let bind = SocketAddr::new(config.protected.local, config.protected.udp_port);
    let mut udp = UdpConfig::new(bind);
    udp.nonblocking = true;
    udp.reuse_port = reuse_port;
    UdpSocket::bind(&udp).map_err(named(format!("UDP socket {bind}")))
}

/// The raw ESP socket, when `raw_esp` is on; `freebind` in cluster mode.
fn open_raw(config: &Config, freebind: bool) -> Result<Option<SharedRaw>, DeviceError> {
    if !config.protected.raw_esp {
        return Ok(None);
    }
    open_raw_socket(config, RawProtocol::Esp, freebind).map(Some)
}

/// The raw AH socket (IP protocol 51, RFC 4302) when an SA may use AH.
fn open_raw_ah(config: &Config) -> Result<Option<SharedRaw>, DeviceError> {
    if !config.uses_ah() {
        return Ok(None);
    }
    open_raw_socket(config, RawProtocol::Ah, false).map(Some)
}

/// A nonblocking raw socket for `protocol` on `[protected] local`.
fn open_raw_socket(
    config: &Config,
    protocol: RawProtocol,
    freebind: bool,
) -> Result<SharedRaw, DeviceError> {
    let mut raw = RawEspConfig::new(config.protected.local);
    raw.protocol = protocol;
    raw.nonblocking = true;
    raw.freebind = freebind;
    let name = match protocol {
        RawProtocol::Esp => "ESP",
        RawProtocol::Ah => "AH",
    };
    let socket = RawEspSocket::open(&raw).map_err(named(format!(
        "raw {name} socket on {}",
        config.protected.local
    )))?;
    Ok(Arc::new(parking_lot::Mutex::new(socket)))
}

/// Opens everything the cluster worker needs (`cluster` is
/// `config.cluster`; its outside address is `protected.local`, checked
/// with the configuration).
pub fn open_cluster(
    config: &Config,
    cluster: &ClusterSettings,
) -> Result<ClusterDevices, DeviceError> {
    let mut tuns = open_tun(config, 1)?;
    let tun = tuns.pop().ok_or_else(|| DeviceError {
        device: format!("TUN {}", config.clear.tun),
        error: io::Error::other("no queue"),
    })?;
    let bind = SocketAddr::new(config.protected.local, config.protected.udp_port);
    let mut udp = UdpConfig::new(bind);
    // Sends only: nothing reaches the virtual address through the
    // kernel, the rings read the traffic.
    (udp.nonblocking, udp.freebind, udp.gro) = (true, true, false);
    let udp = UdpSocket::bind(&udp).map_err(named(format!("UDP socket {bind} (freebind)")))?;
    let outside = open_ring(&cluster.outside.interface)?;
    let inside = open_ring(&cluster.inside.interface)?;
    let kernel_filter = if cluster.kernel_filter {
        open_kernel_filter(cluster, config.protected.udp_port, (&inside, &outside))
    } else {
        KernelFilterState::Off
    };
    Ok(ClusterDevices {
        inside,
        outside,
        tun,
        udp,
        raw: open_raw(config, true)?,
        kernel_filter,
        icmp: IcmpSockets::open(),
    })
}

/// The ESP pre-filter on the outside ring; a failure (no `CAP_BPF`, an
/// old kernel, the verifier's refusal) is logged with its reason and the
/// node runs without it.
fn open_kernel_filter(
    cluster: &ClusterSettings,
    udp_port: u16,
    (inside, outside): (&PacketSocket, &PacketSocket),
) -> KernelFilterState {
    let addresses = FilterAddresses {
        outside_mac: MacAddress(cluster.outside.mac),
        outside_v4: cluster.outside.addresses.v4,
        outside_v6: cluster.outside.addresses.v6,
        inside_mac: MacAddress(cluster.inside.mac),
    };
    let loaded = KernelFilter::load(cluster.node_id, cluster.scheme, addresses, udp_port)
        .and_then(|filter| filter.attach(outside).map(|()| filter))
        .and_then(|filter| filter.attach_inside(inside).map(|()| filter));
    match loaded {
        Ok(mut filter) => {
            tracing::info!(
                interface = %cluster.outside.interface,
                "kernel filter attached: inbound ESP other nodes own is dropped before the ring"
            );
            if cluster.kernel_filter_xdp {
                match filter.attach_xdp(outside.ifindex()) {
                    Ok(mode) => tracing::info!(
                        interface = %cluster.outside.interface,
                        mode = mode.name(),
                        "kernel filter: XDP attached; inbound ESP other nodes own is dropped \
                         before the kernel allocates anything for it"
                    ),
                    Err(e) => tracing::warn!(
                        error = %e,
                        interface = %cluster.outside.interface,
                        "kernel filter: XDP unavailable; the socket filter alone drops inbound \
                         ESP other nodes own (later, correct)"
                    ),
                }
            }
            KernelFilterState::On(Box::new(filter))
        }
        Err(e) => {
            tracing::warn!(
                error = %e,
                "kernel filter unavailable; every inbound frame reaches user space (slower, \
                 correct)"
            );
            KernelFilterState::Failed
        }
    }
}

/// A promiscuous AF_PACKET ring on `interface`, with GRO and LRO turned
/// off there first: a ring taps frames after receive coalescing, and a
/// TCP superframe is neither what the peer sent nor fits a ring frame.
fn open_ring(interface: &str) -> Result<PacketSocket, DeviceError> {
    let was = disable_rx_coalescing(interface).map_err(named(format!(
        "turning receive coalescing (GRO/LRO) off on {interface}"
    )))?;
    if was.any() {
        tracing::warn!(
            interface,
            gro = was.gro,
            lro = was.lro,
            "cluster interface: receive coalescing was on; turned off (the packet ring must see \
             the frames as they were sent)"
        );
    }
    let mut ring = PacketSocketConfig::new(interface);
    ring.promiscuous = true;
    PacketSocket::open(&ring).map_err(named(format!("packet ring on {interface}")))
}

/// The MAC address of `interface` (sysfs), the Ethernet source of what
/// the cluster worker sends there.
pub fn interface_mac(interface: &str) -> Result<MacAddress, DeviceError> {
    let path = format!("/sys/class/net/{interface}/address");
    let what = || format!("MAC address of {interface}");
    let text = std::fs::read_to_string(&path).map_err(named(what()))?;
    text.trim().parse().map_err(|_| DeviceError {
        device: what(),
        error: io::Error::new(io::ErrorKind::InvalidData, format!("{path}: {text:?}")),
    })
}
