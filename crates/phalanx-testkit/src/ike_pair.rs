//! Two IKE endpoints on a virtual clock, joined by a simulated network
//! (STYLE.md: "an in-memory pair of gateways on a virtual clock with
//! latency, MTU and loss, driving whole IKE exchanges and every rekey
//! collision").
//!
//! ```text
//!   side A  ---- latency a->b, loss, MTU, drop rules ---->  side B
//!   (addr_a) <--- latency b->a, loss, MTU, drop rules ----  (addr_b)
//!            [optional NAT in front of A: A's source rewritten]
//! ```
//!
//! Time is `start + offset`; [`IkePair::run_until`] always jumps to the
//! earliest of the next delivery and the endpoints' `poll_timeout`, so a
//! minute of IKE takes microseconds. Everything is recorded in order: each
//! SA event with the side and time it was emitted ([`IkePair::log`]) and
//! each datagram with its fate ([`IkePair::wire`]), so tests can assert
//! event order across both endpoints (make-before-break) and that every SA
//! installed is removed exactly once.
//!
//! Loss is drawn from a seeded ChaCha RNG; the endpoints get their own
//! seeded RNGs. The same seeds replay the same run.
//!
//! [`IkeFuzzProvider`] is the **insecure** provider the IKE fuzz target
//! and the no-panic tests run endpoints with: the [`NullProvider`]'s
//! ciphers, and optionally a PRF whose output is all zeros, so that
//! arbitrary input gets past integrity checks and even past AUTH.

use core::net::{IpAddr, SocketAddr};
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use phalanx_crypto::ike::{IkeRng, KexResponse, KeyExchangeState};
use phalanx_crypto::{
    AeadKey, CbcKey, CryptoError, CryptoProvider, IntegrityKey, KeGroup, PrfAlgorithm, PrfKey,
};
use phalanx_ike::config::EndpointConfig;
use phalanx_ike::{Datagram, Endpoint, SaEvent, Transmit};
use phalanx_wire::ike::iana::{ExchangeType, PayloadType};
use phalanx_wire::ike::IkeHeader;
use phalanx_wire::{EncrId, IntegId};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::NullProvider;

/// **Insecure** (see [`NullProvider`]): a provider for fuzzing IKE
/// endpoints. Its ciphers are [`NullProvider::ACCEPT_ALL`]'s (nothing is
/// encrypted and every ICV verifies), its key exchanges are the default
/// provider's (real X25519, ECP, MODP, ML-KEM), and its PRF is either the
/// default provider's or, with [`IkeFuzzProvider::PAST_AUTHENTICATION`],
/// one whose every output is zeros: then every IKE key is zeros and a
/// shared-key AUTH payload is zeros too, so a fuzzer can complete
/// IKE_AUTH and reach the exchanges of an established IKE SA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IkeFuzzProvider {
    zero_prf: bool,
}

impl IkeFuzzProvider {
    /// NULL ciphers, real PRFs: messages get past the integrity check but
    /// AUTH must still be right.
    pub const PAST_INTEGRITY: IkeFuzzProvider = IkeFuzzProvider { zero_prf: false };
    /// NULL ciphers and an all-zeros PRF: a forged AUTH of zeros verifies.
    pub const PAST_AUTHENTICATION: IkeFuzzProvider = IkeFuzzProvider { zero_prf: true };
}

impl CryptoProvider for IkeFuzzProvider {
    fn name(&self) -> &'static str {
        if self.zero_prf {
            "null ciphers, zero PRF (INSECURE, fuzzing)"
        } else {
            "null ciphers (INSECURE, fuzzing)"
        }
    }

    fn aead(&self, encr: EncrId, key: &[u8]) -> Result<Box<dyn AeadKey>, CryptoError> {
        NullProvider::ACCEPT_ALL.aead(encr, key)
    }

    fn cbc(&self, encr: EncrId, key: &[u8]) -> Result<Box<dyn CbcKey>, CryptoError> {
        NullProvider::ACCEPT_ALL.cbc(encr, key)
    }

    fn integrity(&self, integ: IntegId, key: &[u8]) -> Result<Box<dyn IntegrityKey>, CryptoError> {
        NullProvider::ACCEPT_ALL.integrity(integ, key)
    }

    fn prf(&self, alg: PrfAlgorithm, key: &[u8]) -> Result<Box<dyn PrfKey>, CryptoError> {
        if self.zero_prf {
            return Ok(Box::new(ZeroPrf(alg)));
        }
        phalanx_crypto::default_provider().prf(alg, key)
    }

    fn key_exchange(
        &self,
        group: KeGroup,
        rng: &mut dyn IkeRng,
    ) -> Result<Box<dyn KeyExchangeState>, CryptoError> {
        phalanx_crypto::default_provider().key_exchange(group, rng)
    }

    fn kem_encapsulate(
        &self,
        group: KeGroup,
        peer_public: &[u8],
        rng: &mut dyn IkeRng,
    ) -> Result<KexResponse, CryptoError> {
        phalanx_crypto::default_provider().kem_encapsulate(group, peer_public, rng)
    }
}

/// **Insecure**: a "PRF" whose output is all zeros, whatever the key.
struct ZeroPrf(PrfAlgorithm);

impl PrfKey for ZeroPrf {
    fn algorithm(&self) -> PrfAlgorithm {
        self.0
    }

    fn compute(&self, _parts: &[&[u8]], out: &mut [u8]) {
        out.fill(0);
    }
}

/// One of the two endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// The first endpoint (usually the initiator).
    A,
    /// The second endpoint.
    B,
}

impl Side {
    /// The other side.
    pub fn peer(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }

    fn index(self) -> usize {
        match self {
            Side::A => 0,
            Side::B => 1,
        }
    }
}

/// What a drop rule sees of a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketInfo {
    /// Its index among all datagrams sent, from 0.
    pub index: usize,
    /// The side that sent it.
    pub from: Side,
    /// Its exchange type.
    pub exchange: ExchangeType,
    /// The R flag.
    pub response: bool,
    /// The Message ID.
    pub message_id: u32,
    /// An RFC 7383 fragment (SKF).
    pub fragment: bool,
    /// Octets of the IKE message.
    pub len: usize,
}

/// What happened to a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Delivered at this time.
    Delivered(Instant),
    /// Larger than the MTU.
    TooBig,
    /// Lost at random.
    Lost,
    /// Dropped by a rule.
    Dropped,
    /// Still in flight.
    InFlight,
}

/// One datagram sent, for the record.
#[derive(Clone, Debug)]
pub struct WireRecord {
    /// When it was sent.
    pub at: Instant,
    /// Who sent it.
    pub from: Side,
    /// Its header fields.
    pub info: PacketInfo,
    /// The datagram as sent.
    pub transmit: Transmit,
    /// What became of it.
    pub fate: Fate,
}

/// One SA event, for the record.
#[derive(Clone, Debug)]
pub struct LogEntry {
    /// Its position in the global order.
    pub seq: usize,
    /// When it was emitted.
    pub at: Instant,
    /// Which endpoint emitted it.
    pub side: Side,
    /// The event.
    pub event: SaEvent,
}

/// What a rule does to the datagrams it matches.
type Mutator = Box<dyn FnMut(&mut Vec<u8>)>;

/// A rule dropping (or, with a mutator, changing) datagrams that match a
/// predicate.
struct Rule {
    predicate: Box<dyn FnMut(&PacketInfo) -> bool>,
    remaining: usize,
    mutate: Option<Mutator>,
}

struct InFlight {
    deliver_at: Instant,
    order: usize,
    to: Side,
    record: usize,
    datagram: Transmit,
}

/// Octets an IPv4 (IPv6) and UDP header add to a datagram.
const IPV4_UDP: usize = 28;
const IPV6_UDP: usize = 48;
/// The non-ESP marker on port 4500.
const MARKER: usize = 4;

/// The simulated network between the two sides.
pub struct Network {
    /// One-way latency from A to B and from B to A.
    pub latency: [Duration; 2],
    /// Largest IP packet carried (IP and UDP headers and, on port 4500,
    /// the non-ESP marker included).
    pub mtu: usize,
    /// Probability of losing a datagram.
    pub loss: f64,
    /// A NAT in front of side A: A's datagrams appear to come from this
    /// address, their source port raised by [`Network::nat_port_offset`].
    pub nat_a: Option<IpAddr>,
    /// The NAT's port mapping (30000 at first: 500 → 30500, 4500 → 34500);
    /// change it to simulate a NAT rebinding.
    pub nat_port_offset: u16,
    rng: ChaCha20Rng,
    rules: Vec<Rule>,
    in_flight: Vec<InFlight>,
    order: usize,
    /// NAT-keepalives sent by A and by B (RFC 3948 §2.3). They end at the
    /// receiver's data plane, never at its IKE endpoint, so the network
    /// counts them instead of delivering them.
    pub keepalives: [u64; 2],
}

impl Network {
    fn new(seed: u64) -> Network {
        Network {
            latency: [Duration::from_millis(10); 2],
            mtu: 1500,
            loss: 0.0,
            nat_a: None,
            nat_port_offset: 30_000,
            rng: ChaCha20Rng::seed_from_u64(seed),
            rules: Vec::new(),
            in_flight: Vec::new(),
            keepalives: [0; 2],
            order: 0,
        }
    }
}

/// One endpoint and its address.
pub struct Node {
    /// The endpoint under test.
    pub endpoint: Endpoint,
    /// The address it sends from.
    pub addr: IpAddr,
}

/// Two endpoints, a network and a virtual clock.
pub struct IkePair {
    /// Time zero.
    pub start: Instant,
    /// The current virtual time.
    pub now: Instant,
    /// The endpoints, A then B.
    pub nodes: [Node; 2],
    /// The network.
    pub net: Network,
    log: Vec<LogEntry>,
    wire: Vec<WireRecord>,
}

impl IkePair {
    /// Two endpoints with these configurations and addresses; `seed`
    /// seeds both endpoints' RNGs (differently) and the network's loss.
    pub fn new(a: (EndpointConfig, IpAddr), b: (EndpointConfig, IpAddr), seed: u64) -> IkePair {
        IkePair::with_provider(a, b, seed, phalanx_crypto::default_provider())
    }

    /// As [`IkePair::new`], both endpoints with `provider` (e.g. one whose
    /// ciphers are [`NullProvider`]s, so that fuzzed
    /// messages get past authentication).
    pub fn with_provider(
        a: (EndpointConfig, IpAddr),
        b: (EndpointConfig, IpAddr),
        seed: u64,
        provider: &'static dyn phalanx_crypto::CryptoProvider,
    ) -> IkePair {
        let start = Instant::now();
        let rng = |n: u64| {
            Box::new(ChaCha20Rng::seed_from_u64(
                seed.wrapping_mul(3).wrapping_add(n),
            ))
        };
        let node_a = Node {
            endpoint: Endpoint::new(a.0, provider, rng(1), start),
            addr: a.1,
        };
        let node_b = Node {
            endpoint: Endpoint::new(b.0, provider, rng(2), start),
            addr: b.1,
        };
        let mut pair = IkePair {
            start,
            now: start,
            nodes: [node_a, node_b],
            net: Network::new(seed),
            log: Vec::new(),
            wire: Vec::new(),
        };
        pair.flush();
        pair
    }

    /// Forget the exchange log and the wire records (and free their
    /// memory), for runs long enough that they would dominate what a
    /// test measures (e.g. the endpoints' heap over simulated hours). The
    /// checks that read the log see only what happened since.
    pub fn forget_history(&mut self) {
        self.log = Vec::new();
        // Datagrams still in flight keep their records (renumbered).
        let old = std::mem::take(&mut self.wire);
        for flight in &mut self.net.in_flight {
            self.wire.push(old[flight.record].clone());
            flight.record = self.wire.len() - 1;
        }
    }

    /// The endpoint of a side.
    pub fn endpoint(&mut self, side: Side) -> &mut Endpoint {
        &mut self.nodes[side.index()].endpoint
    }

    /// The endpoint of a side, read-only.
    pub fn endpoint_ref(&self, side: Side) -> &Endpoint {
        &self.nodes[side.index()].endpoint
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    /// Every SA event so far, in the order emitted.
    pub fn log(&self) -> &[LogEntry] {
        &self.log
    }

    /// Every datagram so far, in the order sent.
    pub fn wire(&self) -> &[WireRecord] {
        &self.wire
    }

    /// The events of one side, in order.
    pub fn events(&self, side: Side) -> Vec<&SaEvent> {
        self.log
            .iter()
            .filter(|e| e.side == side)
            .map(|e| &e.event)
            .collect()
    }

    /// Drops the next `count` datagrams matching `predicate`.
    pub fn drop_matching(
        &mut self,
        count: usize,
        predicate: impl FnMut(&PacketInfo) -> bool + 'static,
    ) {
        self.net.rules.push(Rule {
            predicate: Box::new(predicate),
            remaining: count,
            mutate: None,
        });
    }

    /// Changes the datagram with this index with `mutate` before it is
    /// delivered (a corrupting network, for fuzzing).
    pub fn mutate_index(&mut self, index: usize, mutate: impl FnMut(&mut Vec<u8>) + 'static) {
        self.net.rules.push(Rule {
            predicate: Box::new(move |p| p.index == index),
            remaining: 1,
            mutate: Some(Box::new(mutate)),
        });
    }

    /// Drops the datagram with this index (its position among all sent).
    pub fn drop_index(&mut self, index: usize) {
        self.drop_matching(1, move |p| p.index == index);
    }

    /// Runs `f` on one side's endpoint at the current time and records
    /// what it emits.
    pub fn with(&mut self, side: Side, f: impl FnOnce(&mut Endpoint, Instant)) {
        let now = self.now;
        f(self.endpoint(side), now);
        self.flush();
    }

    /// Drains both endpoints' events and datagrams (events first, as the
    /// daemon does).
    pub fn flush(&mut self) {
        for side in [Side::A, Side::B] {
            while let Some(event) = self.endpoint(side).poll_event() {
                let seq = self.log.len();
                self.log.push(LogEntry {
                    seq,
                    at: self.now,
                    side,
                    event,
                });
            }
            while let Some(transmit) = self.endpoint(side).poll_transmit() {
                self.send(side, transmit);
            }
        }
    }

    fn info(&self, from: Side, bytes: &[u8]) -> PacketInfo {
        let header = IkeHeader::new_checked(bytes).ok();
        PacketInfo {
            index: self.wire.len(),
            from,
            exchange: header
                .as_ref()
                .map_or(ExchangeType(0), |h| h.exchange_type()),
            response: header.as_ref().is_some_and(|h| h.response()),
            message_id: header.as_ref().map_or(0, |h| h.message_id()),
            fragment: header
                .as_ref()
                .is_some_and(|h| h.next_payload() == PayloadType::SKF),
            len: bytes.len(),
        }
    }

    fn send(&mut self, from: Side, mut transmit: Transmit) {
        if transmit.nat_keepalive {
            self.net.keepalives[from as usize] += 1;
            return;
        }
        let info = self.info(from, &transmit.bytes);
        let ip = if transmit.remote.is_ipv4() {
            IPV4_UDP
        } else {
            IPV6_UDP
        };
        let marker = if transmit.needs_non_esp_marker() {
            MARKER
        } else {
            0
        };
        let fate = if transmit.bytes.len() + ip + marker > self.net.mtu {
            Fate::TooBig
        } else if self.apply_rules(&info, &mut transmit.bytes) {
            Fate::Dropped
        } else if self.net.loss > 0.0 && self.net.rng.gen_bool(self.net.loss.min(1.0)) {
            Fate::Lost
        } else {
            Fate::InFlight
        };
        let record = self.wire.len();
        if fate == Fate::InFlight {
            let datagram = self.translate(from, &transmit);
            self.net.order += 1;
            self.net.in_flight.push(InFlight {
                deliver_at: self.now + self.net.latency[from.index()],
                order: self.net.order,
                to: from.peer(),
                record,
                datagram,
            });
        }
        self.wire.push(WireRecord {
            at: self.now,
            from,
            info,
            transmit,
            fate,
        });
    }

    /// Applies the first matching rule; true when it drops the datagram.
    fn apply_rules(&mut self, info: &PacketInfo, bytes: &mut Vec<u8>) -> bool {
        for rule in &mut self.net.rules {
            if rule.remaining > 0 && (rule.predicate)(info) {
                rule.remaining -= 1;
                return match rule.mutate.as_mut() {
                    Some(mutate) => {
                        mutate(bytes);
                        false
                    }
                    None => true,
                };
            }
        }
        false
    }

    /// What the receiver sees: addresses swapped, and the NAT applied.
    fn translate(&self, from: Side, t: &Transmit) -> Transmit {
        let (mut src, mut dst) = (t.local, t.remote);
        if let Some(nat) = self.net.nat_a {
            match from {
                Side::A => {
                    src = SocketAddr::new(nat, src.port().wrapping_add(self.net.nat_port_offset))
                }
                Side::B => {
                    let port = dst.port().wrapping_sub(self.net.nat_port_offset);
                    dst = SocketAddr::new(self.nodes[0].addr, port);
                }
            }
        }
        // As received: `local` is the receiver's address, `remote` the sender's.
        Transmit {
            local: dst,
            remote: src,
            bytes: t.bytes.clone(),
            nat_keepalive: t.nat_keepalive,
        }
    }

    /// The next time anything happens: a delivery or an endpoint timer.
    pub fn next_time(&self) -> Option<Instant> {
        let delivery = self.net.in_flight.iter().map(|f| f.deliver_at).min();
        let timers = self.nodes.iter().filter_map(|n| n.endpoint.poll_timeout());
        delivery.into_iter().chain(timers).min()
    }

    /// Advances to the next time anything happens and handles it. False
    /// when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        let Some(next) = self.next_time() else {
            return false;
        };
        self.now = self.now.max(next);
        self.deliver_due();
        for side in [Side::A, Side::B] {
            let now = self.now;
            if self.endpoint(side).poll_timeout().is_some_and(|t| t <= now) {
                self.endpoint(side).handle_timeout(now);
                self.flush();
            }
        }
        true
    }

    fn deliver_due(&mut self) {
        loop {
            let now = self.now;
            let due = self
                .net
                .in_flight
                .iter()
                .enumerate()
                .filter(|(_, f)| f.deliver_at <= now)
                .min_by_key(|(_, f)| (f.deliver_at, f.order))
                .map(|(i, _)| i);
            let Some(i) = due else {
                return;
            };
            let f = self.net.in_flight.swap_remove(i);
            self.wire[f.record].fate = Fate::Delivered(now);
            let datagram = Datagram {
                local: f.datagram.local,
                remote: f.datagram.remote,
                bytes: &f.datagram.bytes,
            };
            self.nodes[f.to.index()]
                .endpoint
                .handle_datagram(now, datagram);
            self.flush();
        }
    }

    /// Runs until `pred` holds (checked after every step) or `deadline`
    /// (since the start) passes. Returns whether `pred` held.
    pub fn run_until(
        &mut self,
        mut pred: impl FnMut(&IkePair) -> bool,
        deadline: Duration,
    ) -> bool {
        let end = self.start + deadline;
        loop {
            if pred(self) {
                return true;
            }
            match self.next_time() {
                Some(next) if next <= end => {
                    self.step();
                }
                _ => {
                    self.now = self.now.max(end);
                    return pred(self);
                }
            }
        }
    }

    /// Runs for `duration` of virtual time.
    pub fn run_for(&mut self, duration: Duration) {
        let until = self.elapsed() + duration;
        self.run_until(|_| false, until);
    }

    /// Checks make-before-break across the pair: every outbound SA a side
    /// installs was installed inbound by the peer no later than anything
    /// sent on it could arrive (install time plus the one-way latency).
    pub fn check_inbound_first(&self) -> Result<(), String> {
        for out in &self.log {
            let SaEvent::InstallOutbound(install) = &out.event else {
                continue;
            };
            let arrival = out.at + self.net.latency[out.side.index()];
            let inbound = self.log.iter().find(|e| {
                e.side == out.side.peer()
                    && matches!(&e.event, SaEvent::InstallInbound(i) if i.spi == install.spi)
            });
            match inbound {
                Some(e) if e.at <= arrival => {}
                Some(e) => {
                    return Err(format!(
                        "{:?} sends on SPI {:#x} at {:?}, peer installs it at {:?}",
                        out.side,
                        install.spi,
                        out.at - self.start,
                        e.at - self.start
                    ))
                }
                None => return Err(format!("SPI {:#x} is never installed inbound", install.spi)),
            }
        }
        Ok(())
    }

    /// Checks that the peer installed each outbound SA strictly before (in
    /// event order) the side started sending on it.
    pub fn check_inbound_strictly_first(&self, spi: u32) -> Result<(), String> {
        let out = self
            .log
            .iter()
            .find(|e| matches!(&e.event, SaEvent::InstallOutbound(i) if i.spi == spi))
            .ok_or_else(|| format!("SPI {spi:#x} never installed outbound"))?;
        let inbound = self
            .log
            .iter()
            .find(|e| {
                e.side == out.side.peer()
                    && matches!(&e.event, SaEvent::InstallInbound(i) if i.spi == spi)
            })
            .ok_or_else(|| format!("SPI {spi:#x} never installed inbound"))?;
        if inbound.seq < out.seq {
            Ok(())
        } else {
            Err(format!(
                "SPI {spi:#x}: outbound (seq {}) before inbound (seq {})",
                out.seq, inbound.seq
            ))
        }
    }

    /// Per side and direction, how often each SPI was installed and removed.
    pub fn sa_balance(&self) -> BTreeMap<(Side, bool, u32), (usize, usize)> {
        let mut out: BTreeMap<(Side, bool, u32), (usize, usize)> = BTreeMap::new();
        for e in &self.log {
            let (key, install) = match &e.event {
                SaEvent::InstallInbound(i) => ((e.side, true, i.spi), true),
                SaEvent::InstallOutbound(i) => ((e.side, false, i.spi), true),
                SaEvent::RemoveInbound { spi, .. } => ((e.side, true, *spi), false),
                SaEvent::RemoveOutbound { spi, .. } => ((e.side, false, *spi), false),
                _ => continue,
            };
            let slot = out.entry(key).or_default();
            if install {
                slot.0 += 1;
            } else {
                slot.1 += 1;
            }
        }
        out
    }

    /// Checks that every SA installed was removed exactly once and nothing
    /// was removed that was not installed (call after everything is torn
    /// down).
    pub fn check_removed_once(&self) -> Result<(), String> {
        for ((side, inbound, spi), (installs, removes)) in self.sa_balance() {
            if installs != 1 || removes != 1 {
                let dir = if inbound { "inbound" } else { "outbound" };
                return Err(format!(
                    "{side:?} {dir} SPI {spi:#x}: installed {installs}x, removed {removes}x"
                ));
            }
        }
        Ok(())
    }

    /// The SAs installed and not removed, per side: (inbound, outbound).
    pub fn installed(&self, side: Side) -> (Vec<u32>, Vec<u32>) {
        let mut inbound = Vec::new();
        let mut outbound = Vec::new();
        for ((s, is_in, spi), (installs, removes)) in self.sa_balance() {
            if s == side && installs > removes {
                if is_in {
                    inbound.push(spi);
                } else {
                    outbound.push(spi);
                }
            }
        }
        (inbound, outbound)
    }

    /// The datagrams in flight, oldest first.
    pub fn in_flight(&self) -> usize {
        self.net.in_flight.len()
    }

    /// Datagrams sent so far, by fate.
    pub fn fates(&self) -> VecDeque<Fate> {
        self.wire.iter().map(|w| w.fate).collect()
    }
}
