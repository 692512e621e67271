//! The octets of an [`IkeSaState`]: a small explicit codec, big-endian,
//! one version octet first, every variable field length-prefixed, nothing
//! left over. Decoding checks every length against what is left before it
//! reads or allocates, and bounds every count, so arbitrary input yields a
//! [`DecodeError`] and never a panic or a large allocation.
//!
//! ```text
//!  version (1) | generation (8) | connection (str) | flags (1)
//!  SPIi (8) | SPIr (8) | suite | 7 x key (bytes16) | IV counter (8)
//!  local (addr) | remote (addr) | peer ID: type (1), data (bytes16)
//!  next request ID, expected request ID, peer window, our window (4 each)
//!  responses (count16, each: Message ID (4), datagrams)
//!  in-flight requests (count16, each: Message ID (4), exchange (1),
//!                      datagrams, purpose)
//!  queued work (count16, work) | delayed work (count16, duration, work)
//!  age (duration) | rekey in (opt duration) | expire in (opt duration)
//!  children (count16, child)
//!
//!  str = bytes16 of UTF-8; bytes16 = length (2) + octets;
//!  datagrams = count (1) + each length (4) + octets;
//!  addr = family (1: 4 or 6) + 4 or 16 octets + port (2);
//!  duration = nanoseconds (8); opt X = present (1) [+ X]
//! ```

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use core::time::Duration;

use phalanx_wire::ike::iana::{EncrId, ExchangeType, IntegId, KeId, PrfId};
use phalanx_wire::ike::limits::MAX_MESSAGE_LEN;
use zeroize::Zeroizing;

use super::state::{
    CachedResponse, IkeKeys, IkeSaState, InFlightRequest, MessageIds, NatState, QueuedWork,
    RequestPurpose, VirtualIpLease,
};
use crate::auth::Identity;
use crate::config::EncrAlg;
use crate::limits::{MAX_CHILD_SAS, MAX_QUEUED_REQUESTS};
use crate::proposal::NegotiatedIke;

/// Child SAs and traffic selectors.
mod child;

/// The version of the encoding written here; the first octet. Version 2
/// added the virtual IPs and the MOBIKE flag; version 1 is still read.
pub const STATE_VERSION: u8 = 2;

/// Most virtual IPs of one IKE SA (one per family is what clients ask;
/// a few more leave room).
const MAX_VIRTUAL_IPS: usize = 8;

/// Most fragments of one cached or in-flight message (RFC 7383 numbers
/// fragments in 16 bits, but a message of at most 64 KiB split at the
/// smallest useful MTU stays far below this).
const MAX_DATAGRAMS: usize = 255;

/// Most cached responses or in-flight requests: the windows of
/// RFC 7296 §2.3 as this implementation bounds its queues.
const MAX_WINDOW_ENTRIES: usize = MAX_QUEUED_REQUESTS;

/// Why octets are not an [`IkeSaState`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ends inside a field.
    Truncated,
    /// The version octet is not one this implementation reads.
    UnsupportedVersion(u8),
    /// A field holds a value it cannot hold (named).
    Invalid(&'static str),
    /// A count is above its bound (named).
    TooMany(&'static str),
    /// Octets are left after the last field.
    TrailingBytes,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated => f.write_str("IKE SA state truncated"),
            DecodeError::UnsupportedVersion(v) => write!(f, "IKE SA state version {v} unknown"),
            DecodeError::Invalid(what) => write!(f, "IKE SA state: invalid {what}"),
            DecodeError::TooMany(what) => write!(f, "IKE SA state: too many {what}"),
            DecodeError::TrailingBytes => f.write_str("IKE SA state: trailing octets"),
        }
    }
}

impl std::error::Error for DecodeError {}

impl IkeSaState {
    /// The snapshot as octets (see the module doc). They hold keys: the
    /// buffer is wiped on drop.
    pub fn encode(&self) -> Zeroizing<Vec<u8>> {
        let mut w = Writer::default();
        w.u8(STATE_VERSION);
        w.u64(self.generation);
        w.str(&self.connection);
        w.flags(&[
            self.initiator,
            self.nat.encap,
            self.nat.local_behind_nat,
            self.fragmentation,
            // Version 2.
            self.mobike,
        ]);
        w.raw(&self.spi_i);
        w.raw(&self.spi_r);
        w.suite(&self.suite);
        for key in self.keys.all() {
            w.bytes16(key);
        }
        w.u64(self.iv_counter);
        w.addr(self.local);
        w.addr(self.remote);
        w.u8(self.peer_id.id_type());
        w.bytes16(&self.peer_id.to_id_body());
        w.message_ids(&self.message_ids);
        w.count(self.responses.len());
        for r in &self.responses {
            w.u32(r.message_id);
            w.datagrams(&r.datagrams);
        }
        w.count(self.in_flight.len());
        for r in &self.in_flight {
            w.u32(r.message_id);
            w.u8(r.exchange.0);
            w.datagrams(&r.datagrams);
            w.purpose(&r.purpose);
        }
        w.count(self.queued.len());
        for work in &self.queued {
            w.work(work);
        }
        w.count(self.delayed.len());
        for (wait, work) in &self.delayed {
            w.duration(*wait);
            w.work(work);
        }
        w.duration(self.age);
        w.opt_duration(self.rekey_in);
        w.opt_duration(self.expire_in);
        w.count(self.children.len());
        for c in &self.children {
            w.child(c);
        }
        // Version 2: the virtual IPs.
        w.count(self.virtual_ips.len());
        for vip in &self.virtual_ips {
            w.str(&vip.pool);
            w.str(&vip.identity);
            w.addr(SocketAddr::new(vip.address, 0));
        }
        w.out
    }

    /// Reads a snapshot written by [`IkeSaState::encode`]. Never panics.
    pub fn decode(bytes: &[u8]) -> Result<IkeSaState, DecodeError> {
        let mut r = Reader::new(bytes);
        let version = r.u8()?;
        // Version 1 (no virtual IPs) is still read: a node of the
        // previous release may be in the cluster during an upgrade.
        if version != STATE_VERSION && version != 1 {
            return Err(DecodeError::UnsupportedVersion(version));
        }
        let generation = r.u64()?;
        let connection = r.str()?;
        // Version 1 wrote four flags; its fifth bit is always clear.
        let [initiator, encap, local_behind_nat, fragmentation, mobike] = r.flags()?;
        let spi_i = r.array()?;
        let spi_r = r.array()?;
        let suite = r.suite()?;
        let keys = r.ike_keys()?;
        let iv_counter = r.u64()?;
        let local = r.addr()?;
        let remote = r.addr()?;
        let peer_id = r.identity()?;
        let message_ids = r.message_ids()?;
        let responses = r.list(MAX_WINDOW_ENTRIES, "responses", Reader::response)?;
        let in_flight = r.list(MAX_WINDOW_ENTRIES, "requests", Reader::request)?;
        let queued = r.list(MAX_QUEUED_REQUESTS, "queued work", Reader::work)?;
        let delayed = r.list(MAX_QUEUED_REQUESTS, "delayed work", |r| {
            Ok((r.duration()?, r.work()?))
        })?;
        let state = IkeSaState {
            generation,
            connection,
            initiator,
            spi_i,
            spi_r,
            suite,
            keys,
            iv_counter,
            local,
            remote,
            nat: NatState {
                encap,
                local_behind_nat,
            },
            fragmentation,
            mobike,
            peer_id,
            message_ids,
            responses,
            in_flight,
            queued,
            delayed,
            age: r.duration()?,
            rekey_in: r.opt_duration()?,
            expire_in: r.opt_duration()?,
            children: r.list(MAX_CHILD_SAS, "Child SAs", Reader::child)?,
            virtual_ips: if version >= 2 {
                r.list(MAX_VIRTUAL_IPS, "virtual IPs", |r| {
                    Ok(VirtualIpLease {
                        pool: r.str()?,
                        identity: r.str()?,
                        address: r.addr()?.ip(),
                    })
                })?
            } else {
                Vec::new()
            },
        };
        r.finish()?;
        Ok(state)
    }
}

/// Appends fields to a buffer that is wiped on drop.
#[derive(Default)]
struct Writer {
    out: Zeroizing<Vec<u8>>,
}

impl Writer {
    fn u8(&mut self, v: u8) {
        self.out.push(v);
    }

    fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn raw(&mut self, v: &[u8]) {
        self.out.extend_from_slice(v);
    }

    /// Up to eight booleans in one octet, the first in the lowest bit.
    fn flags(&mut self, bits: &[bool]) {
        let octet = bits
            .iter()
            .enumerate()
            .fold(0u8, |acc, (i, b)| acc | (u8::from(*b) << i));
        self.u8(octet);
    }

    /// A count; the snapshot's own bounds keep every count far below
    /// 2^16 (a larger one is written saturated and refused on decode).
    fn count(&mut self, n: usize) {
        self.u16(u16::try_from(n).unwrap_or(u16::MAX));
    }

    /// Octets with a two-octet length. Keys, nonces, identities, names and
    /// selectors are far shorter than 64 KiB; longer input is cut there
    /// (and then fails its own check on decode).
    fn bytes16(&mut self, v: &[u8]) {
        let v = &v[..v.len().min(usize::from(u16::MAX))];
        self.count(v.len());
        self.raw(v);
    }

    fn str(&mut self, s: &str) {
        self.bytes16(s.as_bytes());
    }

    fn opt<T>(&mut self, v: Option<T>, f: impl FnOnce(&mut Self, T)) {
        self.u8(u8::from(v.is_some()));
        if let Some(v) = v {
            f(self, v);
        }
    }

    fn duration(&mut self, d: Duration) {
        self.u64(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    fn opt_duration(&mut self, d: Option<Duration>) {
        self.opt(d, Self::duration);
    }

    fn ip(&mut self, ip: IpAddr) {
        match ip {
            IpAddr::V4(a) => {
                self.u8(4);
                self.raw(&a.octets());
            }
            IpAddr::V6(a) => {
                self.u8(6);
                self.raw(&a.octets());
            }
        }
    }

    fn addr(&mut self, a: SocketAddr) {
        self.ip(a.ip());
        self.u16(a.port());
    }

    /// Messages of at most 64 KiB each (RFC 7296 §3.1: the Length field).
    fn datagrams(&mut self, datagrams: &[Vec<u8>]) {
        let n = datagrams.len().min(MAX_DATAGRAMS);
        self.u8(u8::try_from(n).unwrap_or(u8::MAX));
        for d in &datagrams[..n] {
            self.u32(u32::try_from(d.len()).unwrap_or(u32::MAX));
            self.raw(d);
        }
    }

    fn suite(&mut self, s: &NegotiatedIke) {
        self.u8(s.proposal_num);
        self.u16(s.encr.id.0);
        self.u16(s.encr.key_bits);
        self.opt(s.integ, |w, i| w.u16(i.0));
        self.u16(s.prf.0);
        self.u16(s.ke.0);
        self.count(s.additional_ke.len());
        for ke in &s.additional_ke {
            self.u16(ke.0);
        }
    }

    fn message_ids(&mut self, m: &MessageIds) {
        self.u32(m.next_request_id);
        self.u32(m.expected_request_id);
        self.u32(m.peer_window);
        self.u32(m.receive_window);
    }

    fn spis(&mut self, spis: &[u32]) {
        self.count(spis.len());
        for spi in spis {
            self.u32(*spi);
        }
    }

    fn purpose(&mut self, p: &RequestPurpose) {
        match p {
            RequestPurpose::Informational => self.u8(1),
            RequestPurpose::DeleteChildren(spis) => {
                self.u8(2);
                self.spis(spis);
            }
            RequestPurpose::CreateChild {
                child,
                spi_in,
                rekey_of,
            } => {
                self.u8(3);
                self.str(child);
                self.u32(*spi_in);
                self.opt(*rekey_of, Self::u32);
            }
            RequestPurpose::RekeyIke { spi } => {
                self.u8(4);
                self.raw(spi);
            }
        }
    }

    fn work(&mut self, work: &QueuedWork) {
        match work {
            QueuedWork::CreateChild {
                child,
                trigger,
                retries,
                group,
            } => {
                self.u8(1);
                self.str(child);
                self.opt(*trigger, |w, (src, dst)| {
                    w.ip(src);
                    w.ip(dst);
                });
                self.u32(*retries);
                self.opt(*group, |w, g| w.u16(g.0));
            }
            QueuedWork::RekeyChild { spi_in, retries } => {
                self.u8(2);
                self.u32(*spi_in);
                self.u32(*retries);
            }
            QueuedWork::DeleteChildren { spis } => {
                self.u8(3);
                self.spis(spis);
            }
            QueuedWork::RekeyIke { retries } => {
                self.u8(4);
                self.u32(*retries);
            }
            QueuedWork::DeleteIke => self.u8(5),
            QueuedWork::Dpd => self.u8(6),
            QueuedWork::CheckPath => self.u8(7),
        }
    }
}

/// Reads fields from the front of a slice; every read checks the length.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.rest.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let bytes = self.take(N)?;
        <[u8; N]>::try_from(bytes).map_err(|_| DecodeError::Truncated)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Invalid("boolean")),
        }
    }

    fn flags<const N: usize>(&mut self) -> Result<[bool; N], DecodeError> {
        let octet = self.u8()?;
        if u32::from(octet) >> N != 0 {
            return Err(DecodeError::Invalid("flags"));
        }
        Ok(core::array::from_fn(|i| octet & (1 << i) != 0))
    }

    /// A count no larger than `max`.
    fn count(&mut self, max: usize, what: &'static str) -> Result<usize, DecodeError> {
        let n = usize::from(self.u16()?);
        if n > max {
            return Err(DecodeError::TooMany(what));
        }
        Ok(n)
    }

    /// `count` items read by `item`. Nothing is reserved up front: each
    /// item consumes input, so a forged count ends at the input's end.
    fn list<T>(
        &mut self,
        max: usize,
        what: &'static str,
        mut item: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let n = self.count(max, what)?;
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(item(self)?);
        }
        Ok(out)
    }

    fn bytes16(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = usize::from(self.u16()?);
        self.take(n)
    }

    fn secret(&mut self) -> Result<Zeroizing<Vec<u8>>, DecodeError> {
        Ok(Zeroizing::new(self.bytes16()?.to_vec()))
    }

    fn str(&mut self) -> Result<String, DecodeError> {
        let bytes = self.bytes16()?;
        core::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| DecodeError::Invalid("name"))
    }

    fn opt<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, DecodeError> {
        if self.bool()? {
            f(self).map(Some)
        } else {
            Ok(None)
        }
    }

    fn duration(&mut self) -> Result<Duration, DecodeError> {
        Ok(Duration::from_nanos(self.u64()?))
    }

    fn opt_duration(&mut self) -> Result<Option<Duration>, DecodeError> {
        self.opt(Self::duration)
    }

    fn ip(&mut self) -> Result<IpAddr, DecodeError> {
        match self.u8()? {
            4 => Ok(IpAddr::V4(Ipv4Addr::from(self.array::<4>()?))),
            6 => Ok(IpAddr::V6(Ipv6Addr::from(self.array::<16>()?))),
            _ => Err(DecodeError::Invalid("address family")),
        }
    }

    fn addr(&mut self) -> Result<SocketAddr, DecodeError> {
        Ok(SocketAddr::new(self.ip()?, self.u16()?))
    }

    fn datagrams(&mut self) -> Result<Vec<Vec<u8>>, DecodeError> {
        let n = usize::from(self.u8()?);
        let mut out = Vec::new();
        for _ in 0..n {
            let len = usize::try_from(self.u32()?).unwrap_or(usize::MAX);
            if len > MAX_MESSAGE_LEN {
                return Err(DecodeError::Invalid("message length"));
            }
            out.push(self.take(len)?.to_vec());
        }
        Ok(out)
    }

    fn suite(&mut self) -> Result<NegotiatedIke, DecodeError> {
        Ok(NegotiatedIke {
            proposal_num: self.u8()?,
            encr: EncrAlg::new(EncrId(self.u16()?), self.u16()?),
            integ: self.opt(|r| r.u16().map(IntegId))?,
            prf: PrfId(self.u16()?),
            ke: KeId(self.u16()?),
            additional_ke: self
                .list(MAX_QUEUED_REQUESTS, "key exchanges", |r| r.u16().map(KeId))?,
            peer_spi: None,
        })
    }

    fn ike_keys(&mut self) -> Result<IkeKeys, DecodeError> {
        Ok(IkeKeys {
            sk_d: self.secret()?,
            sk_ai: self.secret()?,
            sk_ar: self.secret()?,
            sk_ei: self.secret()?,
            sk_er: self.secret()?,
            sk_pi: self.secret()?,
            sk_pr: self.secret()?,
        })
    }

    fn identity(&mut self) -> Result<Identity, DecodeError> {
        let id_type = self.u8()?;
        let data = self.bytes16()?;
        Identity::from_id(id_type, data).map_err(|_| DecodeError::Invalid("identity"))
    }

    fn message_ids(&mut self) -> Result<MessageIds, DecodeError> {
        Ok(MessageIds {
            next_request_id: self.u32()?,
            expected_request_id: self.u32()?,
            peer_window: self.u32()?,
            receive_window: self.u32()?,
        })
    }

    fn spis(&mut self) -> Result<Vec<u32>, DecodeError> {
        self.list(MAX_CHILD_SAS, "SPIs", Self::u32)
    }

    fn response(&mut self) -> Result<CachedResponse, DecodeError> {
        Ok(CachedResponse {
            message_id: self.u32()?,
            datagrams: self.datagrams()?,
        })
    }

    fn request(&mut self) -> Result<InFlightRequest, DecodeError> {
        Ok(InFlightRequest {
            message_id: self.u32()?,
            exchange: ExchangeType(self.u8()?),
            datagrams: self.datagrams()?,
            purpose: self.purpose()?,
        })
    }

    fn purpose(&mut self) -> Result<RequestPurpose, DecodeError> {
        Ok(match self.u8()? {
            1 => RequestPurpose::Informational,
            2 => RequestPurpose::DeleteChildren(self.spis()?),
            3 => RequestPurpose::CreateChild {
                child: self.str()?,
                spi_in: self.u32()?,
                rekey_of: self.opt(Self::u32)?,
            },
            4 => RequestPurpose::RekeyIke { spi: self.array()? },
            _ => return Err(DecodeError::Invalid("request purpose")),
        })
    }

    fn work(&mut self) -> Result<QueuedWork, DecodeError> {
        Ok(match self.u8()? {
            1 => QueuedWork::CreateChild {
                child: self.str()?,
                trigger: self.opt(|r| Ok((r.ip()?, r.ip()?)))?,
                retries: self.u32()?,
                group: self.opt(|r| r.u16().map(KeId))?,
            },
            2 => QueuedWork::RekeyChild {
                spi_in: self.u32()?,
                retries: self.u32()?,
            },
            3 => QueuedWork::DeleteChildren { spis: self.spis()? },
            4 => QueuedWork::RekeyIke {
                retries: self.u32()?,
            },
            5 => QueuedWork::DeleteIke,
            6 => QueuedWork::Dpd,
            7 => QueuedWork::CheckPath,
            _ => return Err(DecodeError::Invalid("queued work")),
        })
    }

    /// The input must be used up (a reader that refuses trailing octets).
    fn finish(self) -> Result<(), DecodeError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes)
        }
    }
}
