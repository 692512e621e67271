//! Message IDs, the outstanding requests and the response cache of one IKE
//! SA (RFC 7296 §2.1–§2.3).
//!
//! Each direction has its own sequence of Message IDs from 0. We keep up
//! to `send_limit` requests outstanding — one (§2.3: "The default value
//! ... is 1") until the peer announces a larger window with
//! SET_WINDOW_SIZE, and never more than our own window — retransmit each
//! with exponential backoff until answered or given up, and keep our last
//! `receive_window` responses so that a retransmission of any request the
//! peer may still have outstanding is answered again, never processed
//! twice (§2.1). Requests are processed in Message ID order: one that
//! arrives ahead of the one expected (reordered, within the window we
//! announced) is dropped and comes again as a retransmission.

use std::collections::VecDeque;
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
    /// When it is sent again (or given up).
    pub(crate) retransmit_at: Instant,
    /// What the response will complete.
    pub(crate) pending: Pending,
}

/// What an incoming request's Message ID means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RequestId {
    /// The next request: process it.
    New,
    /// A request we answered recently: resend the cached response.
    Retransmit,
    /// A later request of the peer's window, ahead of the one expected:
    /// drop it; the peer sends it again.
    Ahead,
    /// Anything else: drop it (§2.3).
    OutOfWindow,
}

/// The Message ID state of one IKE SA.
pub(crate) struct Window {
    /// Message ID of our next request.
    pub(crate) next_request_id: u32,
    /// Our requests in flight, oldest first.
    pub(crate) outstanding: Vec<Outstanding>,
    /// The peer's window: what it announced with SET_WINDOW_SIZE (§2.3).
    pub(crate) peer_window: u32,
    /// Our window as announced: how many responses are cached.
    pub(crate) receive_window: u32,
    /// Message ID the peer's next request must carry.
    pub(crate) expected_request_id: u32,
    /// Our last responses, oldest first: Message ID and datagrams.
    pub(crate) responses: VecDeque<(u32, Vec<Vec<u8>>)>,
}

impl Default for Window {
    fn default() -> Window {
        Window {
            next_request_id: 0,
            outstanding: Vec::new(),
            peer_window: 1,
            receive_window: 1,
            expected_request_id: 0,
            responses: VecDeque::new(),
        }
    }
}

impl Window {
    /// Whether a new request may be sent now, with our own window `ours`:
    /// fewer than min(ours, the peer's) are outstanding (§2.3).
    pub(crate) fn has_room(&self, ours: u32) -> bool {
        let limit = ours.clamp(1, self.peer_window.max(1));
        self.outstanding.len() < usize::try_from(limit).unwrap_or(usize::MAX)
    }

    /// Whether no request is outstanding.
    pub(crate) fn is_idle(&self) -> bool {
        self.outstanding.is_empty()
    }

    /// Classifies a request's Message ID.
    pub(crate) fn classify_request(&self, id: u32) -> RequestId {
        let ahead = id.wrapping_sub(self.expected_request_id);
        if ahead == 0 {
            RequestId::New
        } else if self.cached_response(id).is_some() {
            RequestId::Retransmit
        } else if ahead < self.receive_window {
            RequestId::Ahead
        } else {
            RequestId::OutOfWindow
        }
    }

    /// The cached response to the request with Message ID `id`.
    pub(crate) fn cached_response(&self, id: u32) -> Option<&[Vec<u8>]> {
        self.responses
            .iter()
            .find(|(cached, _)| *cached == id)
            .map(|(_, datagrams)| datagrams.as_slice())
    }

    /// Records a processed request and the response sent for it, keeping
    /// the last `receive_window` responses.
    pub(crate) fn answered(&mut self, id: u32, datagrams: Vec<Vec<u8>>) {
        self.expected_request_id = id.wrapping_add(1);
        self.responses.push_back((id, datagrams));
        let keep = usize::try_from(self.receive_window.max(1)).unwrap_or(usize::MAX);
        while self.responses.len() > keep {
            self.responses.pop_front();
        }
    }

    /// Takes a Message ID for a new request.
    pub(crate) fn take_request_id(&mut self) -> u32 {
        let id = self.next_request_id;
        self.next_request_id = id.wrapping_add(1);
        id
    }

    /// Removes and returns the outstanding request a response answers.
    pub(crate) fn take_outstanding(
        &mut self,
        id: u32,
        exchange: ExchangeType,
    ) -> Option<Outstanding> {
        let at = self.find(id, exchange)?;
        Some(self.outstanding.remove(at))
    }

    /// Where the outstanding request with this Message ID and exchange is.
    pub(crate) fn find(&self, id: u32, exchange: ExchangeType) -> Option<usize> {
        self.outstanding
            .iter()
            .position(|o| o.id == id && o.exchange == exchange)
    }

    /// The earliest retransmission deadline.
    pub(crate) fn next_retransmit(&self) -> Option<Instant> {
        self.outstanding.iter().map(|o| o.retransmit_at).min()
    }

    /// Whether any outstanding request's pending work matches.
    pub(crate) fn any_pending(&self, f: impl Fn(&Pending) -> bool) -> bool {
        self.outstanding.iter().any(|o| f(&o.pending))
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
    fn a_larger_window_caches_more_and_drops_what_is_ahead() {
        let mut w = Window {
            receive_window: 3,
            ..Window::default()
        };
        for id in 0..5 {
            w.answered(id, vec![vec![id as u8]]);
        }
        // The last three responses are kept.
        assert_eq!(w.classify_request(1), RequestId::OutOfWindow);
        for id in 2..5 {
            assert_eq!(w.classify_request(id), RequestId::Retransmit);
            assert_eq!(w.cached_response(id), Some(&[vec![id as u8]][..]));
        }
        assert_eq!(w.classify_request(5), RequestId::New);
        assert_eq!(w.classify_request(6), RequestId::Ahead);
        assert_eq!(w.classify_request(7), RequestId::Ahead);
        assert_eq!(w.classify_request(8), RequestId::OutOfWindow);
    }

    #[test]
    fn room_is_the_smaller_window() {
        let mut w = Window::default();
        assert!(w.has_room(4));
        let now = Instant::now();
        let out = |id| Outstanding {
            id,
            exchange: ExchangeType::INFORMATIONAL,
            datagrams: Vec::new(),
            tries: 0,
            retransmit_at: now,
            pending: Pending::Informational,
        };
        w.outstanding.push(out(0));
        // The peer has not announced a window: one at a time.
        assert!(!w.has_room(4));
        w.peer_window = 8;
        assert!(w.has_room(4));
        w.outstanding.extend([out(1), out(2)]);
        assert!(w.has_room(4));
        w.outstanding.push(out(3));
        assert!(!w.has_room(4));
        assert!(!w.has_room(0));
        assert_eq!(
            w.take_outstanding(2, ExchangeType::INFORMATIONAL)
                .map(|o| o.id),
            Some(2)
        );
        assert!(w.take_outstanding(2, ExchangeType::INFORMATIONAL).is_none());
        assert!(w.has_room(4));
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
