//! The parts of an [`Endpoint`](crate::Endpoint) an IKE SA borrows while it
//! handles a message or a timer: time, randomness, the crypto provider, the
//! output queues, the counters and the SPI registries.

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use phalanx_crypto::ike::IkeRng;
use phalanx_crypto::CryptoProvider;
use phalanx_wire::ike::iana::ExchangeType;
use phalanx_wire::ike::Payload;
use rustls_pki_types::UnixTime;

use crate::config::EndpointLimits;
use crate::counters::{Counter, IkeCounters};
use crate::events::{SaEvent, Transmit};
use crate::ike_sa::IkeSa;
use crate::limits::NAT_KEEPALIVE_OCTET;
use crate::pool::AddressPools;

/// Random draws for an unused SPI before counting up from the last one.
const SPI_DRAWS: usize = 16;

/// What an IKE SA may touch outside itself.
pub(crate) struct Ctx<'a> {
    /// The time of the call being handled.
    pub(crate) now: Instant,
    /// Wall-clock time for certificate validation, if the caller set it.
    pub(crate) unix_time: Option<UnixTime>,
    /// Where every algorithm comes from.
    pub(crate) provider: &'static dyn CryptoProvider,
    /// The only source of randomness.
    pub(crate) rng: &'a mut (dyn IkeRng + Send),
    /// Endpoint-wide limits.
    pub(crate) limits: &'a EndpointLimits,
    /// Every counter.
    pub(crate) counters: &'a mut IkeCounters,
    /// Datagrams for `poll_transmit`.
    pub(crate) transmits: &'a mut VecDeque<Transmit>,
    /// Events for `poll_event`.
    pub(crate) events: &'a mut VecDeque<SaEvent>,
    /// Our IKE SPIs in use (ours: SPIi when we initiated, SPIr otherwise).
    pub(crate) ike_spis: &'a mut HashSet<u64>,
    /// Our inbound Child SA SPIs in use (the data plane's SAD is keyed by them).
    pub(crate) child_spis: &'a mut HashSet<u32>,
    /// IKE SAs created while handling this call (rekeys), for the endpoint
    /// to adopt.
    pub(crate) spawned: &'a mut Vec<IkeSa>,
    /// Child SAs to move from one IKE SA to another once this call is
    /// done (a rekeyed IKE SA hands them to its successor): our SPIs of
    /// (old, new).
    pub(crate) handovers: &'a mut Vec<(u64, u64)>,
    /// Virtual-IP leases (RFC 7296 §2.19).
    pub(crate) pools: &'a mut AddressPools,
    /// Every configured connection, for the responder's final choice at
    /// IKE_AUTH (by identities and authentication).
    pub(crate) connections: &'a [std::sync::Arc<crate::config::Connection>],
}

impl Ctx<'_> {
    /// Queues a datagram.
    pub(crate) fn transmit(
        &mut self,
        local: core::net::SocketAddr,
        remote: core::net::SocketAddr,
        bytes: Vec<u8>,
    ) {
        self.counters.bump(Counter::DatagramsSent);
        self.transmits.push_back(Transmit {
            local,
            remote,
            bytes,
            nat_keepalive: false,
        });
    }

    /// Queues a NAT-keepalive (RFC 3948 §2.3: one octet, 0xFF).
    pub(crate) fn nat_keepalive(
        &mut self,
        local: core::net::SocketAddr,
        remote: core::net::SocketAddr,
    ) {
        self.counters.bump(Counter::NatKeepalivesSent);
        self.transmits.push_back(Transmit {
            local,
            remote,
            bytes: vec![NAT_KEEPALIVE_OCTET],
            nat_keepalive: true,
        });
    }

    /// Queues an event.
    pub(crate) fn event(&mut self, event: SaEvent) {
        self.events.push_back(event);
    }

    /// Counts an event.
    pub(crate) fn count(&mut self, counter: Counter) {
        self.counters.bump(counter);
    }

    /// Counts the Notify payloads of a message we send.
    pub(crate) fn count_sent_notifies(&mut self, payloads: &[Payload]) {
        for payload in payloads {
            if let Payload::Notify(n) = payload {
                self.counters.count_notify_sent(n.notify_type);
            }
        }
    }

    /// Counts the Notify payloads of a message we processed.
    pub(crate) fn count_received_notifies(&mut self, payloads: &[Payload]) {
        for payload in payloads {
            if let Payload::Notify(n) = payload {
                self.counters.count_notify_received(n.notify_type);
            }
        }
    }

    /// Counts a request or response of an exchange, sent or received.
    pub(crate) fn count_exchange(&mut self, ty: ExchangeType, response: bool, sent: bool) {
        let counts = self.counters.exchange_mut(ty);
        let slot = match (response, sent) {
            (false, true) => &mut counts.requests_sent,
            (false, false) => &mut counts.requests_received,
            (true, true) => &mut counts.responses_sent,
            (true, false) => &mut counts.responses_received,
        };
        *slot += 1;
    }

    /// `n` random octets.
    pub(crate) fn random_bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out = vec![0u8; n];
        self.rng.fill_bytes(&mut out);
        out
    }

    /// A random duration in `0..max` (zero when `max` is zero): rekey jitter
    /// (RFC 7296 §2.8) and retry spread.
    pub(crate) fn random_duration(&mut self, max: Duration) -> Duration {
        let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
        if nanos == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(self.rng.next_u64() % nanos)
    }

    /// A fresh, non-zero IKE SPI not in use here (RFC 7296 §2.6: SPIs are
    /// chosen at random), registered as in use. Collisions are redrawn; a
    /// random source that keeps colliding gets the next free value after
    /// its last draw, so this always ends.
    pub(crate) fn new_ike_spi(&mut self) -> u64 {
        let mut spi = self.rng.next_u64();
        for _ in 0..SPI_DRAWS {
            if spi != 0 && self.ike_spis.insert(spi) {
                return spi;
            }
            spi = self.rng.next_u64();
        }
        while spi == 0 || !self.ike_spis.insert(spi) {
            spi = spi.wrapping_add(1);
        }
        spi
    }

    /// A fresh inbound Child SA SPI, registered as in use. RFC 4303 §2.1:
    /// values 1..=255 are reserved by IANA and 0 is never sent. Ends like
    /// [`Self::new_ike_spi`].
    pub(crate) fn new_child_spi(&mut self) -> u32 {
        let usable = |spi: u32| spi > 255;
        let mut spi = self.rng.next_u32();
        for _ in 0..SPI_DRAWS {
            if usable(spi) && self.child_spis.insert(spi) {
                return spi;
            }
            spi = self.rng.next_u32();
        }
        while !usable(spi) || !self.child_spis.insert(spi) {
            spi = spi.wrapping_add(1);
        }
        spi
    }

    /// Releases an inbound Child SA SPI.
    pub(crate) fn free_child_spi(&mut self, spi: u32) {
        self.child_spis.remove(&spi);
    }
}
