//! The harness of the `ike_responder` fuzz target
//! (`fuzz/fuzz_targets/ike_responder.rs`): one responder [`Endpoint`] with
//! a fixed configuration, a seeded RNG and a virtual clock, fed the fuzz
//! input as a sequence of datagrams and commands, with every timer fired
//! and every output drained and checked. A panic here is a finding.
//!
//! Compiled for this crate's tests and with the `fuzzing` feature only.
//! The provider is an argument: the fuzz target passes the testkit's
//! **insecure** `IkeFuzzProvider::PAST_AUTHENTICATION` (NULL ciphers that
//! accept every ICV and a PRF whose output is zeros), so a fuzzed message
//! gets past the integrity check and a forged AUTH of zeros verifies; the
//! whole state machine of an established IKE SA is then reachable. (The
//! testkit depends on this crate, so this crate cannot name it.)
//!
//! Input: records, each
//!
//! ```text
//!  0                   1                   2
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |            Length             |C|S|P|  Wait   |  Length octets ...
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! - Wait: virtual time advances by Wait × [`WAIT_UNIT`] first (timers
//!   that fall due fire);
//! - C ([`CTL_COMMAND`]): the octets are an API call, not a datagram (the
//!   first octet picks it: soft or hard Child SA expiry, terminate,
//!   reconfigure);
//! - S ([`CTL_FIX_SPIS`]): the datagram's two SPIs are replaced by those of
//!   the responder's last datagram, so inputs reach an IKE SA whose SPI
//!   the seeded RNG chose;
//! - P ([`CTL_PORT_4500`]): the datagram arrives on port 4500 from port
//!   4500 (after NAT-T's non-ESP marker).
//!
//! A truncated last record takes what is left. Checked after every step:
//! every datagram sent is a well-formed IKE message, no SA is removed more
//! often than it was installed, and no timer is still due once
//! `handle_timeout` returned.

mod seeds;

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use phalanx_crypto::CryptoProvider;
use phalanx_sa::{IpsecProtocol, SaMode};
use phalanx_wire::ike::IkeHeader;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use zeroize::Zeroizing;

use crate::auth::Identity;
use crate::config::{
    ChildConfig, ChildProposal, Connection, EndpointConfig, EndpointLimits, IkeProposal, LocalAuth,
    RemoteAuth, SaLifetimeConfig, StartAction,
};
use crate::ts::ts_any;
use crate::{Datagram, Endpoint, IkeCounters, SaEvent};

pub use seeds::seed_inputs;

/// Record flag: the record is an API call (module doc).
pub const CTL_COMMAND: u8 = 0x80;
/// Record flag: take the SPIs of the responder's last datagram.
pub const CTL_FIX_SPIS: u8 = 0x40;
/// Record flag: the datagram arrives on port 4500.
pub const CTL_PORT_4500: u8 = 0x20;
/// The Wait bits of a record's control octet.
pub const CTL_WAIT: u8 = 0x1f;
/// Virtual time per Wait step.
pub const WAIT_UNIT: Duration = Duration::from_millis(500);

/// The responder's address.
pub const RESPONDER: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
/// Where the fuzzed datagrams come from.
pub const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));
/// The shared secret of the connection.
pub const PSK: &[u8] = b"fuzzing";
/// The connection's name.
pub const CONNECTION: &str = "fuzz";
/// The IKE proposals of the responder: hybrid post-quantum with optional
/// ML-KEM (RFC 9370), and a CBC suite.
pub const IKE_PROPOSALS: &str =
    "aes128gcm16-prfsha256-x25519-ke1_mlkem768-ke1_none,aes128-sha256-prfsha256-ecp256";
/// The ESP proposals of its child, PFS optional.
pub const ESP_PROPOSALS: &str = "aes128gcm16-esn-noesn,aes128-sha256-x25519";
/// Timer rounds run after the input, so retransmissions, expiries and
/// lingering SAs come to their end.
const FINAL_TIMER_ROUNDS: usize = 32;

/// One record of the input format (module doc), for building inputs.
pub fn record(ctl: u8, bytes: &[u8]) -> Vec<u8> {
    let len = u16::try_from(bytes.len()).unwrap_or(u16::MAX);
    let mut out = Vec::with_capacity(3 + bytes.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.push(ctl);
    out.extend_from_slice(&bytes[..usize::from(len)]);
    out
}

/// The responder's configuration: one PSK connection answering any peer,
/// with one child over any address.
pub fn responder_config() -> EndpointConfig {
    let parse_esp = ChildProposal::parse_list(ESP_PROPOSALS);
    let child = ChildConfig {
        name: "any".to_owned(),
        local_ts: vec![ts_any(false)],
        remote_ts: vec![ts_any(false)],
        protocol: IpsecProtocol::Esp,
        proposals: parse_esp.unwrap_or_else(|_| ChildProposal::default_set()),
        mode: SaMode::Tunnel {
            local: RESPONDER,
            remote: PEER,
        },
        lifetime: SaLifetimeConfig::child_default(),
        replay_window: 64,
        peer_replay_window: 0,
    };
    let connection = Connection {
        name: CONNECTION.to_owned(),
        local_addr: RESPONDER,
        remote_addr: None,
        local_port: 500,
        remote_port: 500,
        local_id: Identity::Fqdn("responder.fuzz".to_owned()),
        remote_id: None,
        local_auth: LocalAuth::Psk(Zeroizing::new(PSK.to_vec())),
        remote_auth: RemoteAuth::Psk(Zeroizing::new(PSK.to_vec())),
        ike_proposals: IkeProposal::parse_list(IKE_PROPOSALS)
            .unwrap_or_else(|_| IkeProposal::default_set()),
        children: vec![child],
        start_action: StartAction::None,
        dpd_delay: Some(Duration::from_secs(30)),
        ike_lifetime: SaLifetimeConfig::ike_default(),
        fragmentation: true,
        force_encap: false,
        send_certreq: false,
        send_cert: false,
        mobike: true,
        pools: Vec::new(),
        vips: Vec::new(),
        local_signatures: Vec::new(),
        remote_signatures: Vec::new(),
    };
    let limits = EndpointLimits {
        // Small enough that the fuzzer meets the cookie and half-open paths.
        half_open_max: 8,
        cookie_threshold: 4,
        window_size: 4,
        fragment_mtu: 576,
        ..EndpointLimits::default()
    };
    EndpointConfig {
        connections: vec![connection],
        limits,
        pools: Vec::new(),
    }
}

/// Runs one fuzz input against a fresh responder using `provider`, time
/// starting at `start`; returns the endpoint's counters.
pub fn responder(
    data: &[u8],
    provider: &'static dyn CryptoProvider,
    start: Instant,
) -> IkeCounters {
    let mut harness = Harness::new(provider, start);
    let mut rest = data;
    while rest.len() >= 3 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        let ctl = rest[2];
        let body = &rest[3..];
        let (bytes, next) = body.split_at(len.min(body.len()));
        harness.step(ctl, bytes);
        rest = next;
    }
    harness.finish();
    harness.endpoint.counters().clone()
}

/// The responder and what the checks remember.
struct Harness {
    endpoint: Endpoint,
    config: EndpointConfig,
    now: Instant,
    /// The SPIs of the responder's last datagram.
    last_spis: Option<[u8; 16]>,
    /// Installs and removals per (inbound, SPI).
    balance: HashMap<(bool, u32), (u32, u32)>,
    /// Inbound SPIs installed, for the expiry commands.
    inbound: Vec<u32>,
}

impl Harness {
    fn new(provider: &'static dyn CryptoProvider, start: Instant) -> Harness {
        let config = responder_config();
        let rng = Box::new(ChaCha20Rng::seed_from_u64(0x1ce_f022));
        Harness {
            endpoint: Endpoint::new(config.clone(), provider, rng, start),
            config,
            now: start,
            last_spis: None,
            balance: HashMap::new(),
            inbound: Vec::new(),
        }
    }

    fn step(&mut self, ctl: u8, bytes: &[u8]) {
        self.now += WAIT_UNIT * u32::from(ctl & CTL_WAIT);
        self.fire_timers();
        if ctl & CTL_COMMAND != 0 {
            self.command(bytes);
        } else {
            self.deliver(ctl, bytes);
        }
        self.drain();
        // The status snapshot reads every SA's state.
        let _ = self.endpoint.ike_sas();
    }

    fn deliver(&mut self, ctl: u8, bytes: &[u8]) {
        let mut message = bytes.to_vec();
        if let (true, Some(spis), Some(head)) = (
            ctl & CTL_FIX_SPIS != 0,
            self.last_spis,
            message.get_mut(..16),
        ) {
            head.copy_from_slice(&spis);
        }
        let port = if ctl & CTL_PORT_4500 != 0 { 4500 } else { 500 };
        let datagram = Datagram {
            local: SocketAddr::new(RESPONDER, port),
            remote: SocketAddr::new(PEER, port),
            bytes: &message,
        };
        self.endpoint.handle_datagram(self.now, datagram);
    }

    fn command(&mut self, bytes: &[u8]) {
        let now = self.now;
        match bytes.first().copied().unwrap_or(0) % 4 {
            0 => {
                if let Some(&spi) = self.inbound.first() {
                    self.endpoint.handle_child_expiry(now, spi, false);
                }
            }
            1 => {
                if let Some(&spi) = self.inbound.last() {
                    self.endpoint.handle_child_expiry(now, spi, true);
                }
            }
            2 => {
                // Nothing established is an error the API reports.
                let _ = self.endpoint.terminate(now, CONNECTION);
            }
            _ => self.endpoint.reconfigure(self.config.clone(), now),
        }
    }

    /// Fires what is due; afterwards nothing may be due any more.
    fn fire_timers(&mut self) {
        if self.endpoint.poll_timeout().is_some_and(|t| t <= self.now) {
            self.endpoint.handle_timeout(self.now);
            self.drain();
            let again = self.endpoint.poll_timeout();
            assert!(
                again.is_none_or(|t| t > self.now),
                "a timer is still due after handle_timeout"
            );
        }
    }

    /// Runs the timers to their end (bounded).
    fn finish(&mut self) {
        for _ in 0..FINAL_TIMER_ROUNDS {
            let Some(next) = self.endpoint.poll_timeout() else {
                return;
            };
            self.now = self.now.max(next);
            self.fire_timers();
        }
    }

    /// Drains events then datagrams, checking both.
    fn drain(&mut self) {
        while let Some(event) = self.endpoint.poll_event() {
            self.check_event(&event);
        }
        while let Some(transmit) = self.endpoint.poll_transmit() {
            if transmit.nat_keepalive {
                // RFC 3948 §2.3: the one octet 0xFF, not an IKE message.
                assert_eq!(transmit.bytes, [crate::limits::NAT_KEEPALIVE_OCTET]);
                continue;
            }
            let header = IkeHeader::new_checked(&transmit.bytes[..]);
            assert!(header.is_ok(), "a datagram sent is not an IKE message");
            let mut spis = [0u8; 16];
            spis.copy_from_slice(&transmit.bytes[..16]);
            self.last_spis = Some(spis);
        }
    }

    fn check_event(&mut self, event: &SaEvent) {
        let (key, install) = match event {
            SaEvent::InstallInbound(i) => ((true, i.spi), true),
            SaEvent::InstallOutbound(i) => ((false, i.spi), true),
            SaEvent::RemoveInbound { spi, .. } => ((true, *spi), false),
            SaEvent::RemoveOutbound { spi, .. } => ((false, *spi), false),
            _ => return,
        };
        let entry = self.balance.entry(key).or_default();
        if install {
            entry.0 += 1;
            if key.0 {
                self.inbound.push(key.1);
            }
        } else {
            entry.1 += 1;
            self.inbound.retain(|&spi| !(key.0 && spi == key.1));
        }
        assert!(
            entry.1 <= entry.0,
            "SA {key:?} removed more often than installed"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Counter;
    use phalanx_testkit::ike_pair::IkeFuzzProvider;

    static PROVIDER: IkeFuzzProvider = IkeFuzzProvider::PAST_AUTHENTICATION;

    #[test]
    fn configuration_parses() {
        assert!(IkeProposal::parse_list(IKE_PROPOSALS).is_ok());
        assert!(ChildProposal::parse_list(ESP_PROPOSALS).is_ok());
    }

    #[test]
    fn seeds_reach_an_established_ike_sa() {
        let start = Instant::now();
        let seeds = seed_inputs(&PROVIDER);
        assert!(seeds.len() >= 2);
        for (i, seed) in seeds.iter().enumerate() {
            let counters = responder(seed, &PROVIDER, start);
            assert_eq!(counters.get(Counter::IkeSasEstablished), 1, "seed {i}");
            assert!(counters.get(Counter::ChildSasEstablished) >= 2, "seed {i}");
            assert_eq!(counters.get(Counter::IkeSasDeleted), 1, "seed {i}");
        }
        // The second seed runs an ML-KEM-768 IKE_INTERMEDIATE exchange.
        let counters = responder(&seeds[1], &PROVIDER, start);
        assert_eq!(counters.get(Counter::AdditionalKeyExchanges), 1);
        if let Some(dir) = std::env::var_os("PHALANX_FUZZ_SEEDS") {
            for (i, seed) in seeds.iter().enumerate() {
                std::fs::write(std::path::Path::new(&dir).join(format!("seed{i}")), seed).unwrap();
            }
        }
    }

    #[test]
    fn garbage_and_truncation_do_not_panic() {
        let start = Instant::now();
        let seed = &seed_inputs(&PROVIDER)[0];
        for cut in [0, 1, 2, 3, 40, seed.len() / 2, seed.len() - 1] {
            responder(&seed[..cut], &PROVIDER, start);
        }
        let mut flipped = seed.clone();
        for i in (3..flipped.len()).step_by(97) {
            flipped[i] ^= 0x5a;
        }
        responder(&flipped, &PROVIDER, start);
        responder(&[0xff; 64], &PROVIDER, start);
    }
}
