//! Named counters of an [`Endpoint`](crate::Endpoint): every exchange,
//! every error and every Notify sent or received (STYLE.md: every drop and
//! every error has a counter with a one-line description; tests assert
//! counter deltas).

use std::collections::BTreeMap;

use phalanx_wire::ike::iana::{ExchangeType, NotifyType};

macro_rules! counters {
    ($( $(#[$doc:meta])* $name:ident => $text:literal, )*) => {
        /// One event counter of the IKE state machine. The discriminant
        /// indexes [`IkeCounters`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        #[non_exhaustive]
        pub enum Counter {
            $( $(#[$doc])* $name, )*
        }

        impl Counter {
            /// Every counter, in discriminant order.
            pub const ALL: &'static [Counter] = &[$(Counter::$name),*];

            /// How many counters there are.
            pub const COUNT: usize = Counter::ALL.len();

            /// The counter's name, as in metrics and `phalanxctl`.
            pub fn name(self) -> &'static str {
                match self { $(Counter::$name => stringify!($name),)* }
            }

            /// One line saying what the counter counts.
            pub fn description(self) -> &'static str {
                match self { $(Counter::$name => $text,)* }
            }
        }
    };
}

counters! {
    /// Datagrams handed in.
    DatagramsReceived => "IKE datagrams handed to handle_datagram",
    /// Datagrams handed out.
    DatagramsSent => "IKE datagrams queued for poll_transmit (fragments and retransmissions included)",
    /// Unparseable messages.
    Malformed => "messages that do not parse, answered INVALID_SYNTAX or dropped (RFC 7296 §2.21.1)",
    /// Wrong major version.
    UnsupportedVersion => "messages with a major version other than 2 (RFC 7296 §2.5)",
    /// Unknown critical payloads.
    UnsupportedCritical => "messages refused for an unknown critical payload (RFC 7296 §2.5)",
    /// Integrity failures.
    IntegrityFailed => "encrypted messages or fragments whose ICV did not verify, dropped silently (RFC 7296 §2.21.2)",
    /// Unknown IKE SPIs.
    UnknownSpi => "messages for an IKE SA we do not have, dropped (RFC 7296 §2.21.4)",
    /// Out-of-window requests.
    InvalidMessageId => "requests outside the window, dropped (RFC 7296 §2.3)",
    /// Stray responses.
    UnexpectedResponse => "responses that match no outstanding request, dropped (RFC 7296 §2.1)",
    /// Exchanges refused in the current state.
    UnexpectedExchange => "requests of an exchange the IKE SA's state does not allow, dropped or refused",
    /// Retransmitted requests.
    RetransmitsSent => "requests sent again after their timeout (RFC 7296 §2.1)",
    /// Duplicate requests answered.
    RetransmitsAnswered => "retransmitted requests answered from the response cache, never reprocessed (RFC 7296 §2.1)",
    /// Half-open table full.
    HalfOpenLimit => "IKE_SA_INIT requests dropped because the half-open table is full (RFC 7296 §2.6)",
    /// Half-open SAs timed out.
    HalfOpenExpired => "IKE SAs that answered IKE_SA_INIT but never completed IKE_AUTH",
    /// No connection matched.
    NoConnection => "IKE_SA_INIT requests that match no configured connection",
    /// Cookies asked for.
    CookiesSent => "IKE_SA_INIT requests answered with a COOKIE (RFC 7296 §2.6)",
    /// Bad cookies.
    CookiesRejected => "IKE_SA_INIT requests whose cookie did not verify (RFC 7296 §2.6)",
    /// Restarts with a cookie.
    CookieRestarts => "IKE_SA_INIT requests restarted with the responder's cookie (RFC 7296 §2.6)",
    /// Restarts with another group.
    InvalidKeRestarts => "IKE_SA_INIT requests restarted with the group named by INVALID_KE_PAYLOAD (RFC 7296 §1.2)",
    /// Proposals refused.
    ProposalsRefused => "SA payloads with no acceptable proposal (NO_PROPOSAL_CHOSEN, RFC 7296 §2.7)",
    /// Peers that failed authentication.
    AuthFailed => "peers whose identity or AUTH did not verify (AUTHENTICATION_FAILED, RFC 7296 §2.21.2)",
    /// Our authentication refused.
    AuthRejectedByPeer => "our AUTH refused by the peer with AUTHENTICATION_FAILED",
    /// Traffic selectors refused.
    TsRefused => "traffic selectors with an empty intersection (TS_UNACCEPTABLE, RFC 7296 §2.9)",
    /// EAP exchanges started.
    EapStarted => "IKE_AUTH requests without AUTH that started EAP (RFC 7296 §2.16)",
    /// EAP exchanges that succeeded.
    EapSucceeded => "EAP exchanges that ended in EAP-Success and an AUTH keyed with the MSK that verified",
    /// EAP exchanges that failed.
    EapFailed => "EAP exchanges that failed: EAP-Failure from the backend (wrong password, unknown identity, ...), the peer giving up, or no end before the establishment timeout",
    /// Virtual IPs handed out.
    VirtualIpsAssigned => "inner addresses leased to peers in a CFG_REPLY (RFC 7296 §2.19)",
    /// CFG_REQUESTs that got no address.
    VirtualIpsRefused => "address requests answered INTERNAL_ADDRESS_FAILURE: pools exhausted or none of the family (RFC 7296 §3.15.4)",
    /// A cluster node's replicated IKE SA holds an address this node had
    /// leased to another identity (the replicated lease wins).
    VirtualIpConflicts => "replicated virtual IPs that another identity held here (the replicated lease wins; should stay 0)",
    /// IKE SAs established.
    IkeSasEstablished => "IKE SAs that completed IKE_AUTH",
    /// IKE SAs that failed.
    IkeSasFailed => "IKE SAs that failed before they were established",
    /// IKE SAs deleted.
    IkeSasDeleted => "established IKE SAs closed by an INFORMATIONAL Delete (either side)",
    /// IKE SAs dead.
    IkeSasDead => "IKE SAs given up because the peer stopped answering (RFC 7296 §2.4)",
    /// IKE SA rekeys.
    IkeSasRekeyed => "IKE SAs replaced by a CREATE_CHILD_SA rekey (RFC 7296 §1.3.2)",
    /// Child SAs established.
    ChildSasEstablished => "Child SAs created (IKE_AUTH or CREATE_CHILD_SA), rekeys included",
    /// Child SAs that failed.
    ChildSasFailed => "Child SA creations that failed (proposal, selectors, peer error)",
    /// Child SA rekeys.
    ChildSasRekeyed => "Child SAs replaced by a rekey (RFC 7296 §1.3.3)",
    /// Child SAs deleted.
    ChildSasDeleted => "Child SAs removed by a Delete (either side) or with their IKE SA",
    /// Child SAs at their hard lifetime.
    ChildSasExpired => "Child SAs deleted because their hard lifetime was reached",
    /// Rekey collisions.
    RekeyCollisions => "simultaneous rekeys resolved by comparing nonces (RFC 7296 §2.8.1)",
    /// Redundant SAs deleted.
    RedundantSasDeleted => "SAs of a lost rekey collision deleted by their creator (RFC 7296 §2.8.1)",
    /// TEMPORARY_FAILURE seen.
    TemporaryFailures => "requests refused with, or retried after, TEMPORARY_FAILURE (RFC 7296 §2.25)",
    /// Liveness checks.
    DpdSent => "liveness checks (empty INFORMATIONAL requests) sent (RFC 7296 §1.4)",
    /// NAT mapping changes.
    PeerMoved => "peer address or port changes followed (RFC 7296 §2.23)",
    /// MOBIKE address updates.
    MobikeUpdates => "UPDATE_SA_ADDRESSES requests followed: the peer moved (RFC 4555 §3.5)",
    /// Return-routability checks sent.
    MobikePathChecks => "return-routability checks (INFORMATIONAL with COOKIE2) of a MOBIKE peer's new address sent (RFC 4555 §5.2)",
    /// Return-routability checks passed.
    MobikePathVerified => "return-routability checks answered with our COOKIE2: the data plane moved to the new address",
    /// Return-routability checks answered wrongly.
    MobikePathCheckFailed => "return-routability checks answered without our COOKIE2: the data plane stayed where it was",
    /// NATs detected.
    NatDetected => "IKE SAs that detected a NAT or forced UDP encapsulation (RFC 7296 §2.23)",
    /// Fragments sent.
    FragmentsSent => "IKE fragments sent (RFC 7383)",
    /// Fragments received.
    FragmentsReceived => "IKE fragments received that verified (RFC 7383)",
    /// Messages reassembled.
    MessagesReassembled => "messages reassembled from fragments (RFC 7383)",
    /// Request queue full.
    QueueFull => "requests not queued because the IKE SA's queue is full",
    /// Unusable message.
    Unprocessable => "authenticated messages that could not be processed (missing payloads, bad values)",
    /// State transitions.
    StateTransitions => "IKE SA state transitions",
    /// Additional key exchanges.
    AdditionalKeyExchanges => "additional key exchanges completed in IKE_INTERMEDIATE (RFC 9370 §2.2.2)",
    /// Additional key exchanges in IKE_FOLLOWUP_KE.
    FollowupKeExchanges => "additional key exchanges completed in IKE_FOLLOWUP_KE after a CREATE_CHILD_SA (RFC 9370 §2.2.4)",
    /// IKE_FOLLOWUP_KE series given up by their initiator.
    FollowupKeFailed => "CREATE_CHILD_SA exchanges given up during IKE_FOLLOWUP_KE (STATE_NOT_FOUND or another error from the responder, an unusable answer), nothing installed (RFC 9370 §2.2.4)",
    /// IKE_FOLLOWUP_KE requests with an unknown link.
    FollowupStateNotFound => "IKE_FOLLOWUP_KE requests answered STATE_NOT_FOUND: their link names no exchange waiting here (RFC 9370 §2.2.4)",
    /// Waiting IKE_FOLLOWUP_KE state dropped.
    FollowupKeTimeouts => "answered CREATE_CHILD_SA exchanges dropped because the next IKE_FOLLOWUP_KE request did not come in time (RFC 9370 §2.2.4)",
    /// NAT-keepalives sent.
    NatKeepalivesSent => "NAT-keepalives sent because we are behind a NAT (RFC 3948 §2.3)",
    /// HA snapshots emitted.
    HaStatesEmitted => "IKE SA snapshots emitted for the other cluster nodes (IkeStateChanged)",
    /// HA snapshots imported.
    HaStatesImported => "IKE SA snapshots of other cluster nodes imported (standby or takeover)",
    /// HA snapshots refused.
    HaImportsRefused => "IKE SA snapshots refused: stale, unknown connection, unusable keys or SPIs in use",
    /// HA takeovers.
    HaTakeovers => "IKE SAs taken over from another cluster node without renegotiation",
    /// Requests another node left unanswered.
    HaLostRequests => "CREATE_CHILD_SA requests of a failed node answered after a takeover, undone and retried",
}

/// Index of an exchange type in [`IkeCounters`]'s exchange table.
fn exchange_index(ty: ExchangeType) -> usize {
    match ty {
        ExchangeType::IKE_SA_INIT => 0,
        ExchangeType::IKE_AUTH => 1,
        ExchangeType::CREATE_CHILD_SA => 2,
        ExchangeType::INFORMATIONAL => 3,
        _ => 4,
    }
}

/// The exchange types counted one by one; others are counted together.
pub const COUNTED_EXCHANGES: [ExchangeType; 4] = [
    ExchangeType::IKE_SA_INIT,
    ExchangeType::IKE_AUTH,
    ExchangeType::CREATE_CHILD_SA,
    ExchangeType::INFORMATIONAL,
];

/// Messages of one exchange type, by direction and kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExchangeCounts {
    /// Requests we sent (first transmissions only).
    pub requests_sent: u64,
    /// Requests we received and processed.
    pub requests_received: u64,
    /// Responses we sent (first transmissions only).
    pub responses_sent: u64,
    /// Responses we received and processed.
    pub responses_received: u64,
}

/// Every counter of an endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IkeCounters {
    values: [u64; Counter::COUNT],
    exchanges: [ExchangeCounts; 5],
    notifies_sent: BTreeMap<NotifyType, u64>,
    notifies_received: BTreeMap<NotifyType, u64>,
}

impl Default for IkeCounters {
    fn default() -> Self {
        IkeCounters {
            values: [0; Counter::COUNT],
            exchanges: [ExchangeCounts::default(); 5],
            notifies_sent: BTreeMap::new(),
            notifies_received: BTreeMap::new(),
        }
    }
}

impl IkeCounters {
    /// The value of one counter.
    pub fn get(&self, counter: Counter) -> u64 {
        self.values[counter as usize]
    }

    /// Adds one to a counter.
    pub(crate) fn bump(&mut self, counter: Counter) {
        self.add(counter, 1);
    }

    /// Adds `n` to a counter.
    pub(crate) fn add(&mut self, counter: Counter, n: u64) {
        let slot = &mut self.values[counter as usize];
        *slot = slot.saturating_add(n);
    }

    /// Every event counter with its value, in [`Counter::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (Counter, u64)> + '_ {
        Counter::ALL.iter().map(|&c| (c, self.get(c)))
    }

    /// Messages of one exchange type (types not in [`COUNTED_EXCHANGES`]
    /// share one entry).
    pub fn exchange(&self, ty: ExchangeType) -> ExchangeCounts {
        self.exchanges[exchange_index(ty)]
    }

    pub(crate) fn exchange_mut(&mut self, ty: ExchangeType) -> &mut ExchangeCounts {
        &mut self.exchanges[exchange_index(ty)]
    }

    /// How many Notify payloads of a type we sent.
    pub fn notify_sent(&self, ty: NotifyType) -> u64 {
        self.notifies_sent.get(&ty).copied().unwrap_or(0)
    }

    /// How many Notify payloads of a type we received in processed
    /// messages.
    pub fn notify_received(&self, ty: NotifyType) -> u64 {
        self.notifies_received.get(&ty).copied().unwrap_or(0)
    }

    /// Every Notify type sent, with its count.
    pub fn notifies_sent(&self) -> impl Iterator<Item = (NotifyType, u64)> + '_ {
        self.notifies_sent.iter().map(|(&t, &n)| (t, n))
    }

    /// Every Notify type received, with its count.
    pub fn notifies_received(&self) -> impl Iterator<Item = (NotifyType, u64)> + '_ {
        self.notifies_received.iter().map(|(&t, &n)| (t, n))
    }

    pub(crate) fn count_notify_sent(&mut self, ty: NotifyType) {
        *self.notifies_sent.entry(ty).or_insert(0) += 1;
    }

    pub(crate) fn count_notify_received(&mut self, ty: NotifyType) {
        *self.notifies_received.entry(ty).or_insert(0) += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_is_named_and_described() {
        let mut names: Vec<_> = Counter::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Counter::COUNT);
        for (i, c) in Counter::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
            assert!(!c.description().is_empty());
        }
    }

    #[test]
    fn counts() {
        let mut c = IkeCounters::default();
        c.bump(Counter::Malformed);
        c.add(Counter::FragmentsSent, 3);
        c.exchange_mut(ExchangeType::IKE_AUTH).requests_sent += 1;
        c.exchange_mut(ExchangeType(99)).responses_sent += 1;
        c.count_notify_sent(NotifyType::COOKIE);
        assert_eq!(c.get(Counter::Malformed), 1);
        assert_eq!(c.get(Counter::FragmentsSent), 3);
        assert_eq!(c.exchange(ExchangeType::IKE_AUTH).requests_sent, 1);
        assert_eq!(c.exchange(ExchangeType(42)).responses_sent, 1);
        assert_eq!(c.notify_sent(NotifyType::COOKIE), 1);
        assert_eq!(c.notify_received(NotifyType::COOKIE), 0);
    }
}
