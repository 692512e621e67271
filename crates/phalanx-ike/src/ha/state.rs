//! The replicated snapshot of one established IKE SA: what another node
//! needs to carry it on with the same peer without renegotiating (same
//! SPIs, keys and Message IDs, RFC 7296 §2.1–§2.3).
//!
//! Every field is plain data. Times are durations relative to the moment
//! the snapshot was taken (an `Instant` means nothing on another node).
//! Secrets (the seven IKE SA keys, RFC 7296 §2.14, and the Child SA keys,
//! §2.17) are wiped on drop, compared in constant time and never printed.

use core::fmt;
use core::net::SocketAddr;
use core::time::Duration;

use phalanx_crypto::Suite;
use phalanx_wire::ike::iana::{ExchangeType, KeId};
use phalanx_wire::ike::TrafficSelector;
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use crate::auth::Identity;
use crate::proposal::NegotiatedIke;

/// One established IKE SA, as the node that runs it replicates it to the
/// others ([`crate::ha`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IkeSaState {
    /// Counts the snapshots of this IKE SA: each one the owner emits is one
    /// higher. A standby refuses one not newer than what it holds.
    pub generation: u64,
    /// The connection's name (every node has the same configuration).
    pub connection: String,
    /// Whether the owner is the initiator of this IKE SA: the I flag it
    /// sends (RFC 7296 §3.1; after an IKE SA rekey, the rekey's initiator,
    /// §2.18).
    pub initiator: bool,
    /// The initiator's SPI.
    pub spi_i: [u8; 8],
    /// The responder's SPI.
    pub spi_r: [u8; 8],
    /// The negotiated transforms (RFC 7296 §3.3).
    pub suite: NegotiatedIke,
    /// SK_d, SK_a*, SK_e*, SK_p* (RFC 7296 §2.14).
    pub keys: IkeKeys,
    /// The counter the next AEAD IV of SK payloads is taken from (RFC 5282
    /// §3.1: never repeated under one key).
    pub iv_counter: u64,
    /// The owner's address and port.
    pub local: SocketAddr,
    /// The peer's address and port.
    pub remote: SocketAddr,
    /// NAT detection results (RFC 7296 §2.23).
    pub nat: NatState,
    /// Both sides announced IKE fragmentation (RFC 7383).
    pub fragmentation: bool,
    /// MOBIKE agreed (RFC 4555): a successor follows the peer's
    /// UPDATE_SA_ADDRESSES too.
    pub mobike: bool,
    /// The peer's authenticated identity.
    pub peer_id: Identity,
    /// Both Message ID sequences and both windows (RFC 7296 §2.2, §2.3).
    pub message_ids: MessageIds,
    /// The last responses the owner sent, oldest first, as sent: a
    /// retransmitted request is answered with exactly these octets
    /// (RFC 7296 §2.1).
    pub responses: Vec<CachedResponse>,
    /// The owner's requests still unanswered, oldest first, as sent.
    pub in_flight: Vec<InFlightRequest>,
    /// Work queued for the window (RFC 7296 §2.3), in order.
    pub queued: Vec<QueuedWork>,
    /// Work waiting for a time (retries after TEMPORARY_FAILURE, §2.25):
    /// how long from the snapshot, and what.
    pub delayed: Vec<(Duration, QueuedWork)>,
    /// How long the IKE SA had been established.
    pub age: Duration,
    /// Time left until the IKE SA is rekeyed, if scheduled.
    pub rekey_in: Option<Duration>,
    /// Time left until the IKE SA's hard lifetime ends, if set.
    pub expire_in: Option<Duration>,
    /// Its Child SAs.
    pub children: Vec<ChildSaState>,
    /// The inner addresses leased to the peer from pools (RFC 7296
    /// §2.19): every node marks them leased, so none hands one out twice,
    /// and a successor keeps them.
    pub virtual_ips: Vec<VirtualIpLease>,
}

/// An inner address an IKE SA holds from a pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VirtualIpLease {
    /// The pool (empty: assigned by the EAP backend, no pool's).
    pub pool: String,
    /// The identity the lease belongs to.
    pub identity: String,
    /// The address.
    pub address: core::net::IpAddr,
}

impl IkeSaState {
    /// The SPIs (initiator's, responder's) that name this IKE SA.
    pub fn spis(&self) -> ([u8; 8], [u8; 8]) {
        (self.spi_i, self.spi_r)
    }

    /// The same snapshot `elapsed` later: every time left shortened, the
    /// ages lengthened (a standby that imported it some time ago takes it
    /// over now).
    pub(crate) fn aged(mut self, elapsed: Duration) -> IkeSaState {
        let less = |d: Option<Duration>| d.map(|d| d.saturating_sub(elapsed));
        self.age = self.age.saturating_add(elapsed);
        self.rekey_in = less(self.rekey_in);
        self.expire_in = less(self.expire_in);
        for (wait, _) in &mut self.delayed {
            *wait = wait.saturating_sub(elapsed);
        }
        for child in &mut self.children {
            child.age = child.age.saturating_add(elapsed);
            child.rekey_in = less(child.rekey_in);
            child.expire_in = less(child.expire_in);
            child.retire_in = less(child.retire_in);
        }
        self
    }
}

/// The seven secrets of an IKE SA (RFC 7296 §2.14), wiped on drop. "i"
/// and "r" name the original initiator and responder.
#[derive(Clone, Default)]
pub struct IkeKeys {
    /// SK_d: keys Child SAs and the next rekey.
    pub sk_d: Zeroizing<Vec<u8>>,
    /// SK_ai: integrity of the initiator's messages.
    pub sk_ai: Zeroizing<Vec<u8>>,
    /// SK_ar: integrity of the responder's messages.
    pub sk_ar: Zeroizing<Vec<u8>>,
    /// SK_ei: encryption of the initiator's messages (salt included).
    pub sk_ei: Zeroizing<Vec<u8>>,
    /// SK_er: encryption of the responder's messages (salt included).
    pub sk_er: Zeroizing<Vec<u8>>,
    /// SK_pi: the initiator's AUTH payload (§2.15).
    pub sk_pi: Zeroizing<Vec<u8>>,
    /// SK_pr: the responder's AUTH payload (§2.15).
    pub sk_pr: Zeroizing<Vec<u8>>,
}

impl IkeKeys {
    /// The keys in the order prf+ produces them (§2.14).
    pub(crate) fn all(&self) -> [&Zeroizing<Vec<u8>>; 7] {
        [
            &self.sk_d,
            &self.sk_ai,
            &self.sk_ar,
            &self.sk_ei,
            &self.sk_er,
            &self.sk_pi,
            &self.sk_pr,
        ]
    }
}

impl PartialEq for IkeKeys {
    /// Constant time in the key octets.
    fn eq(&self, other: &IkeKeys) -> bool {
        let mut same = subtle::Choice::from(1);
        for (a, b) in self.all().iter().zip(other.all()) {
            same &= a.as_slice().ct_eq(b.as_slice());
        }
        same.into()
    }
}

impl Eq for IkeKeys {}

impl fmt::Debug for IkeKeys {
    /// Key lengths only; never key material.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lengths: Vec<usize> = self.all().iter().map(|k| k.len()).collect();
        f.debug_struct("IkeKeys")
            .field("lengths", &lengths)
            .finish_non_exhaustive()
    }
}

/// NAT detection results of an IKE SA (RFC 7296 §2.23).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NatState {
    /// ESP is UDP-encapsulated (RFC 3948): a NAT was detected, or
    /// encapsulation was forced.
    pub encap: bool,
    /// The owner's side is behind a NAT: it sends NAT-keepalives
    /// (RFC 3948 §2.3).
    pub local_behind_nat: bool,
}

/// The Message ID state of an IKE SA (RFC 7296 §2.2, §2.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MessageIds {
    /// The Message ID of the owner's next request.
    pub next_request_id: u32,
    /// The Message ID the peer's next request must carry.
    pub expected_request_id: u32,
    /// The window the peer announced (SET_WINDOW_SIZE; 1 if none).
    pub peer_window: u32,
    /// The window the owner announced: how many responses it caches.
    pub receive_window: u32,
}

/// A response the owner sent, kept for retransmitted requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedResponse {
    /// The Message ID of the request it answered.
    pub message_id: u32,
    /// The datagrams as sent (several when fragmented, RFC 7383).
    pub datagrams: Vec<Vec<u8>>,
}

/// A request the owner sent that was not answered yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InFlightRequest {
    /// Its Message ID.
    pub message_id: u32,
    /// Its exchange type.
    pub exchange: ExchangeType,
    /// The datagrams as sent; a successor resends exactly these
    /// (RFC 7296 §2.1: a retransmission is the same message).
    pub datagrams: Vec<Vec<u8>>,
    /// What it was for.
    pub purpose: RequestPurpose,
}

/// What an unanswered request was for.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestPurpose {
    /// An INFORMATIONAL with nothing to complete: a liveness check or a
    /// notify (RFC 7296 §1.4).
    Informational,
    /// An INFORMATIONAL deleting these Child SAs (our inbound SPIs).
    DeleteChildren(Vec<u32>),
    /// A CREATE_CHILD_SA for a new or rekeyed Child SA. Its nonce and key
    /// exchange secret stayed on the node that sent it, so a successor
    /// cannot complete it: it undoes what the peer created and starts
    /// again ([`crate::ha`]).
    CreateChild {
        /// The child config's name.
        child: String,
        /// Our inbound SPI in the offer.
        spi_in: u32,
        /// Our inbound SPI of the Child SA it rekeys.
        rekey_of: Option<u32>,
    },
    /// A CREATE_CHILD_SA rekeying the IKE SA; like `CreateChild`, it
    /// cannot be completed elsewhere.
    RekeyIke {
        /// Our SPI of the IKE SA it would create.
        spi: [u8; 8],
    },
}

/// Work an IKE SA has queued (RFC 7296 §2.3: while its window is full):
/// the SA's own task type, replicated as it is.
pub use crate::ike_sa::task::Task as QueuedWork;

/// Where a Child SA is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChildSaStatus {
    /// In use.
    Active,
    /// The owner's rekey of it is in flight.
    Rekeying,
    /// Replaced by a rekey; deleted after the overlap (RFC 7296 §2.8).
    Rekeyed,
    /// The owner's Delete of it is in flight.
    Deleting,
}

/// One Child SA pair of a replicated IKE SA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildSaState {
    /// The child config's name.
    pub name: String,
    /// Our (inbound) SPI.
    pub spi_in: u32,
    /// The peer's (outbound) SPI.
    pub spi_out: u32,
    /// The negotiated ESP transforms.
    pub suite: Suite,
    /// Extended sequence numbers (RFC 4303 §2.2.1).
    pub esn: bool,
    /// The PFS group re-offered on rekey.
    pub pfs: Option<KeId>,
    /// Transport mode; otherwise tunnel mode between the IKE SA's
    /// addresses (RFC 7296 §2.11).
    pub transport: bool,
    /// Our side's traffic selectors.
    pub local_ts: Vec<TrafficSelector>,
    /// The peer's side's traffic selectors.
    pub remote_ts: Vec<TrafficSelector>,
    /// Where it is in its life.
    pub status: ChildSaStatus,
    /// The inbound SA is installed in the data plane.
    pub inbound_installed: bool,
    /// The outbound SA is installed in the data plane.
    pub outbound_installed: bool,
    /// The outbound SA is negotiated but held back until the SA it
    /// replaces is deleted (a rekey responder, RFC 7296 §2.8).
    pub outbound_held: bool,
    /// For an SA the peer's rekey created: our inbound SPI of the SA it
    /// replaces.
    pub replaces: Option<u32>,
    /// On an SA the peer rekeyed: our inbound SPI of the SA that rekey
    /// created (for collisions, §2.8.1).
    pub peer_rekey: Option<u32>,
    /// Ni and Nr of the exchange that created it (§2.8.1).
    pub nonces: Option<(Vec<u8>, Vec<u8>)>,
    /// The keys of both directions (§2.17).
    pub keys: ChildSaKeys,
    /// How long it had existed.
    pub age: Duration,
    /// Time left until it is rekeyed, if scheduled.
    pub rekey_in: Option<Duration>,
    /// Time left until its hard lifetime ends, if set.
    pub expire_in: Option<Duration>,
    /// Time left until a replaced SA is deleted, if scheduled.
    pub retire_in: Option<Duration>,
    /// The jitter taken off its soft lifetime (RFC 7296 §2.8).
    pub lifetime_jitter: Duration,
}

/// The keys of both directions of a Child SA (RFC 7296 §2.17), wiped on
/// drop.
#[derive(Clone, Default)]
pub struct ChildSaKeys {
    /// Inbound encryption key (salt included for AEADs).
    pub encr_in: Zeroizing<Vec<u8>>,
    /// Inbound integrity key (empty for AEADs).
    pub integ_in: Zeroizing<Vec<u8>>,
    /// Outbound encryption key (salt included for AEADs).
    pub encr_out: Zeroizing<Vec<u8>>,
    /// Outbound integrity key (empty for AEADs).
    pub integ_out: Zeroizing<Vec<u8>>,
}

impl ChildSaKeys {
    /// The four keys, inbound first.
    pub(crate) fn all(&self) -> [&Zeroizing<Vec<u8>>; 4] {
        [
            &self.encr_in,
            &self.integ_in,
            &self.encr_out,
            &self.integ_out,
        ]
    }
}

impl PartialEq for ChildSaKeys {
    /// Constant time in the key octets.
    fn eq(&self, other: &ChildSaKeys) -> bool {
        let mut same = subtle::Choice::from(1);
        for (a, b) in self.all().iter().zip(other.all()) {
            same &= a.as_slice().ct_eq(b.as_slice());
        }
        same.into()
    }
}

impl Eq for ChildSaKeys {}

impl fmt::Debug for ChildSaKeys {
    /// Key lengths only; never key material.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lengths: Vec<usize> = self.all().iter().map(|k| k.len()).collect();
        f.debug_struct("ChildSaKeys")
            .field("lengths", &lengths)
            .finish_non_exhaustive()
    }
}
