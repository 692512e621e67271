//! Message IDs, the outstanding request and the response cache of one IKE
//! SA (RFC 7296 §2.1–§2.3).
//!
//! Each direction has its own sequence of Message IDs from 0. We keep one
//! request outstanding (window size 1, §2.3), retransmit it with
//! exponential backoff until answered or given up, and keep our last
//! response so a retransmitted request is answered again, never processed
//! twice (§2.1).

use std::time::{Duration, Instant};

use phalanx_wire::ike::iana::ExchangeType;

use crate::ike_sa::task::Pending;

/// One request in flight.
pub(crate) struct Outstanding {
    /// Its Message ID.
    pub(crate) id: u32,
    /// Its exchange type.
    pub(crate) exchange: ExchangeType,
    /// The datagrams as sent (several when fragmented).
    pub(crate) datagrams: Vec<Vec<u8>>,
    /// Retransmissions so far.
    pub(crate) tries: u32,
    /// What the response will complete.
    pub(crate) pending: Pending,
}

/// What an incoming request's Message ID means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RequestId {
    /// The next request: process it.
    New,
    /// The request we answered last: resend the cached response.
    Retransmit,
    /// Anything else: drop it (§2.3).
    OutOfWindow,
}

/// The Message ID state of one IKE SA.
#[derive(Default)]
pub(crate) struct Window {
    /// Message ID of our next request.
    pub(crate) next_request_id: u32,
    /// Our request in flight, if any.
    pub(crate) outstanding: Option<Outstanding>,
    /// Message ID the peer's next request must carry.
    pub(crate) expected_request_id: u32,
    /// Our last response: its Message ID and datagrams.
    pub(crate) last_response: Option<(u32, Vec<Vec<u8>>)>,
}

impl Window {
    /// Whether a new request may be sent now.
    pub(crate) fn is_free(&self) -> bool {
        self.outstanding.is_none()
    }

    /// Classifies a request's Message ID.
    pub(crate) fn classify_request(&self, id: u32) -> RequestId {
        if id == self.expected_request_id {
            RequestId::New
        } else if self
            .last_response
            .as_ref()
            .is_some_and(|(last, _)| *last == id)
        {
            RequestId::Retransmit
        } else {
            RequestId::OutOfWindow
        }
    }

    /// Records a processed request and the response sent for it.
    pub(crate) fn answered(&mut self, id: u32, datagrams: Vec<Vec<u8>>) {
        self.expected_request_id = id.wrapping_add(1);
        self.last_response = Some((id, datagrams));
    }

    /// Takes a Message ID for a new request.
    pub(crate) fn take_request_id(&mut self) -> u32 {
        let id = self.next_request_id;
        self.next_request_id = id.wrapping_add(1);
        id
    }
}

/// When the `tries`-th retransmission (0 = the first transmission) times
/// out: `base * 2^tries` after it was sent (RFC 7296 §2.1: "the
/// retransmission times MUST increase exponentially").
pub(crate) fn retransmit_timeout(now: Instant, base: Duration, tries: u32) -> Instant {
    crate::timers::after(
        now,
        base.saturating_mul(1u32.checked_shl(tries).unwrap_or(u32::MAX)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids() {
        let mut w = Window::default();
        assert_eq!(w.classify_request(0), RequestId::New);
        assert_eq!(w.classify_request(1), RequestId::OutOfWindow);
        w.answered(0, vec![vec![1]]);
        assert_eq!(w.classify_request(0), RequestId::Retransmit);
        assert_eq!(w.classify_request(1), RequestId::New);
        assert_eq!(w.classify_request(7), RequestId::OutOfWindow);
        assert_eq!(w.take_request_id(), 0);
        assert_eq!(w.take_request_id(), 1);
    }

    #[test]
    fn backoff_doubles() {
        let t = Instant::now();
        let base = Duration::from_millis(500);
        assert_eq!(retransmit_timeout(t, base, 0), t + base);
        assert_eq!(retransmit_timeout(t, base, 3), t + base * 8);
        assert!(retransmit_timeout(t, base, 40) > t);
    }
}
