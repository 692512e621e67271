//! SA databases for the inbound fuzz targets (fuzz/fuzz_targets/
//! esp_inbound.rs and ah_inbound.rs).
//!
//! Every SA is keyed by the **insecure** [`NullProvider::ACCEPT_ALL`], so
//! any ICV verifies and the fuzzer reaches padding, next-header, inner
//! packet and selector processing. SPIs are small (0x100 + n) and the
//! tunnel addresses documentation prefixes, so a fuzzer finds them through
//! its comparison tracing. The set covers tunnel and transport, IPv4 and
//! IPv6 outer headers, UDP encapsulation, ESN and a selector that rejects
//! most inner packets.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Instant;

use phalanx_crypto::{SaTransform, Suite};
use phalanx_sa::{InboundSa, IpPrefix, IpsecProtocol, SaMode, SaParams, Sad, Selector, UdpEncap};
use phalanx_wire::{EncrId, IntegId, IpProtocol};

use crate::null::NullProvider;

/// The gateway's own IPv4 address (outer destination of tunnel SAs).
pub const LOCAL_V4: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
/// The peer's IPv4 address.
pub const REMOTE_V4: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
/// The gateway's own IPv6 address.
pub const LOCAL_V6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));
/// The peer's IPv6 address.
pub const REMOTE_V6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));

/// Replay window of the fuzzing SAs.
const WINDOW: u32 = 64;

/// One fuzzing SA: SPI, algorithms, mode, encapsulation, ESN, selectors.
#[derive(Clone, Debug)]
pub struct FuzzSa {
    /// SPI.
    pub spi: u32,
    /// Algorithms (keyed with zero keys by the null provider).
    pub suite: Suite,
    /// Tunnel or transport.
    pub mode: SaMode,
    /// UDP encapsulation.
    pub encap: Option<UdpEncap>,
    /// Extended sequence numbers.
    pub esn: bool,
    /// Inner-packet selectors (empty: any).
    pub selectors: Vec<Selector>,
}

fn tunnel_v4() -> SaMode {
    SaMode::Tunnel {
        local: LOCAL_V4,
        remote: REMOTE_V4,
    }
}

fn tunnel_v6() -> SaMode {
    SaMode::Tunnel {
        local: LOCAL_V6,
        remote: REMOTE_V6,
    }
}

const NAT_T: Option<UdpEncap> = Some(UdpEncap {
    local_port: 4500,
    remote_port: 4500,
});

/// Only UDP from 10.0.0.0/8 to 10.0.0.0/8 (everything else is a selector
/// mismatch, RFC 4301 §5.2).
fn udp_10_8() -> Vec<Selector> {
    let ten = IpPrefix::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8).unwrap_or(IpPrefix::ANY_V4);
    let mut s = Selector::between(ten, ten);
    s.protocol = Some(IpProtocol::UDP);
    vec![s]
}

fn sa(spi: u32, suite: Suite, mode: SaMode, encap: Option<UdpEncap>, esn: bool) -> FuzzSa {
    FuzzSa {
        spi,
        suite,
        mode,
        encap,
        esn,
        selectors: Vec::new(),
    }
}

/// The ESP SAs, SPIs 0x101..=0x106.
pub fn esp_sas() -> Vec<FuzzSa> {
    let gcm = Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE);
    let chacha = Suite::esp(EncrId::CHACHA20_POLY1305, 256, IntegId::NONE);
    let cbc = Suite::esp(EncrId::AES_CBC, 128, IntegId::HMAC_SHA2_256_128);
    let null = Suite::esp(EncrId::NULL, 0, IntegId::HMAC_SHA2_512_256);
    let gmac = Suite::esp(EncrId::NULL_AUTH_AES_GMAC, 256, IntegId::NONE);
    let mut limited = sa(0x106, cbc, tunnel_v4(), None, false);
    limited.selectors = udp_10_8();
    vec![
        sa(0x101, gcm, tunnel_v4(), None, false),
        sa(0x102, chacha, tunnel_v6(), None, true),
        sa(0x103, cbc, SaMode::Transport, NAT_T, false),
        sa(0x104, null, SaMode::Transport, None, true),
        sa(0x105, gmac, tunnel_v4(), NAT_T, true),
        limited,
    ]
}

/// The AH SAs, SPIs 0x201..=0x204.
pub fn ah_sas() -> Vec<FuzzSa> {
    let mut limited = sa(
        0x204,
        Suite::ah(IntegId::HMAC_SHA2_256_128),
        tunnel_v4(),
        None,
        false,
    );
    limited.selectors = udp_10_8();
    vec![
        sa(
            0x201,
            Suite::ah(IntegId::HMAC_SHA2_256_128),
            tunnel_v4(),
            None,
            false,
        ),
        sa(
            0x202,
            Suite::ah(IntegId::HMAC_SHA2_384_192),
            SaMode::Transport,
            None,
            true,
        ),
        sa(
            0x203,
            Suite::ah(IntegId::HMAC_SHA2_512_256),
            tunnel_v6(),
            None,
            false,
        ),
        limited,
    ]
}

impl FuzzSa {
    /// The SA's parameters (no lifetime limits, no TFC).
    pub fn params(&self) -> SaParams {
        SaParams {
            spi: self.spi,
            protocol: if self.suite.is_ah() {
                IpsecProtocol::Ah
            } else {
                IpsecProtocol::Esp
            },
            mode: self.mode,
            encap: self.encap,
            esn: self.esn,
            replay_window: WINDOW,
            lifetime: Default::default(),
            selectors: self.selectors.clone(),
            tfc_pad_to: None,
        }
    }

    /// The inbound SA, keyed with zeros by [`NullProvider::ACCEPT_ALL`].
    pub fn inbound(&self, now: Instant) -> Option<Arc<InboundSa>> {
        let suite = self.suite;
        let encr_key = vec![0; suite.encr_key_len()];
        let integ_key = vec![0; suite.integ_key_len()];
        let transform =
            SaTransform::new(&NullProvider::ACCEPT_ALL, suite, &encr_key, &integ_key).ok()?;
        InboundSa::new(self.params(), Arc::new(transform), now)
            .ok()
            .map(Arc::new)
    }
}

/// A SAD holding the inbound side of `sas`. Panics if one cannot be built:
/// the set above is fixed, so that is a bug in this module or its
/// dependencies, which a fuzz run should report at once.
pub fn inbound_sad(sas: &[FuzzSa], now: Instant) -> Sad {
    let sad = Sad::new();
    for spec in sas {
        let sa = spec.inbound(now);
        let inserted = sa.is_some_and(|sa| sad.insert(sa).is_ok());
        assert!(
            inserted,
            "fuzzing SA {:#x} could not be built or inserted",
            spec.spi
        );
    }
    sad
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fuzzing_sa_builds() {
        let now = Instant::now();
        assert_eq!(inbound_sad(&esp_sas(), now).len(), 6);
        assert_eq!(inbound_sad(&ah_sas(), now).len(), 4);
    }
}
