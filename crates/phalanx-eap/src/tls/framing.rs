//! EAP-TLS framing (RFC 5216 §3.1, §2.1.5): the Flags octet, the TLS
//! Message Length, fragments, acknowledgements.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Code      |   Identifier  |            Length             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Type (13)    |     Flags     |      TLS Message Length
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     TLS Message Length        |       TLS Data...
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! Flags   0 1 2 3 4 5 6 7
//!        +-+-+-+-+-+-+-+-+
//!        |L M S R R R R R|      L: TLS Message Length included
//!        +-+-+-+-+-+-+-+-+      M: more fragments follow
//!                               S: EAP-TLS start (server only)
//! ```
//!
//! Here the Type-Data after the Type: Flags, the four-octet TLS Message
//! Length when L is set, then TLS data. A fragment with M set is answered
//! with an acknowledgement: a message of the same Type with Flags 0 and no
//! data (§2.1.5). We set L on the first fragment of a fragmented message
//! only (the RFC's MUST); we accept it on any message and on later
//! fragments when it repeats the first one's value (strongSwan sets it on
//! every message it sends). Reserved bits are ignored.

use super::{TlsFailure, TlsFailureKind};

/// Flags: L, TLS Message Length included.
pub(crate) const LENGTH_INCLUDED: u8 = 0x80;
/// Flags: M, more fragments follow.
pub(crate) const MORE_FRAGMENTS: u8 = 0x40;
/// Flags: S, EAP-TLS start.
pub(crate) const START: u8 = 0x20;
/// Octets of the TLS Message Length field.
const MESSAGE_LENGTH_LEN: usize = 4;

/// One EAP-TLS message's Type-Data, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fragment<'a> {
    /// Flags.
    pub(crate) flags: u8,
    /// TLS Message Length, when L is set.
    pub(crate) message_length: Option<u32>,
    /// TLS data.
    pub(crate) data: &'a [u8],
}

impl<'a> Fragment<'a> {
    /// Reads the Type-Data of an EAP-TLS message.
    pub(crate) fn parse(type_data: &'a [u8]) -> Result<Fragment<'a>, TlsFailure> {
        let Some((&flags, rest)) = type_data.split_first() else {
            return Err(bad("no Flags octet"));
        };
        if flags & LENGTH_INCLUDED == 0 {
            return Ok(Fragment {
                flags,
                message_length: None,
                data: rest,
            });
        }
        match rest.split_first_chunk::<MESSAGE_LENGTH_LEN>() {
            Some((length, data)) => Ok(Fragment {
                flags,
                message_length: Some(u32::from_be_bytes(*length)),
                data,
            }),
            None => Err(bad("L set but no four-octet TLS Message Length")),
        }
    }

    /// M: more fragments follow.
    pub(crate) fn more(&self) -> bool {
        self.flags & MORE_FRAGMENTS != 0
    }

    /// S: the server's EAP-TLS Start.
    pub(crate) fn start(&self) -> bool {
        self.flags & START != 0
    }

    /// An acknowledgement (§2.1.5), or the peer's empty answer to the
    /// server's last flight (§2.1.1): no data, no M, no S, and no length
    /// other than 0 announced.
    pub(crate) fn is_ack(&self) -> bool {
        self.data.is_empty()
            && self.flags & (MORE_FRAGMENTS | START) == 0
            && self.message_length.unwrap_or(0) == 0
    }
}

/// The Type-Data of an acknowledgement.
pub(crate) fn ack() -> Vec<u8> {
    vec![0]
}

/// The Type-Data of the server's EAP-TLS Start (§2.1.1: S set, no data).
pub(crate) fn start() -> Vec<u8> {
    vec![START]
}

fn bad(detail: impl Into<String>) -> TlsFailure {
    TlsFailure::new(TlsFailureKind::BadFraming, detail)
}

/// The peer's fragments of one TLS message, up to a limit.
#[derive(Debug)]
pub(crate) struct Reassembly {
    buf: Vec<u8>,
    /// The TLS Message Length of the first fragment.
    announced: Option<usize>,
    limit: usize,
}

impl Reassembly {
    /// Refuses messages longer than `limit` octets.
    pub(crate) fn new(limit: usize) -> Reassembly {
        Reassembly {
            buf: Vec::new(),
            announced: None,
            limit,
        }
    }

    /// Whether a fragmented message is half in.
    pub(crate) fn in_progress(&self) -> bool {
        !self.buf.is_empty() || self.announced.is_some()
    }

    /// Adds `fragment`: the whole message once its last fragment (M clear)
    /// is in, `None` while more are to come.
    pub(crate) fn push(&mut self, fragment: &Fragment<'_>) -> Result<Option<Vec<u8>>, TlsFailure> {
        if let Some(length) = fragment.message_length {
            let length = usize::try_from(length).unwrap_or(usize::MAX);
            if length > self.limit {
                return Err(too_large(length, self.limit));
            }
            match self.announced {
                None if self.buf.is_empty() => self.announced = Some(length),
                Some(first) if first == length => {}
                Some(first) => {
                    let detail =
                        format!("TLS Message Length {length} after {first} in the first fragment");
                    return Err(bad(detail));
                }
                None => return Err(bad("TLS Message Length in a later fragment only")),
            }
        }
        if fragment.data.is_empty() && fragment.more() {
            return Err(bad("an empty fragment with M set"));
        }
        let len = self.buf.len() + fragment.data.len();
        if len > self.limit {
            return Err(too_large(len, self.limit));
        }
        if let Some(announced) = self.announced.filter(|&a| len > a) {
            let detail = format!("{len} octets of a TLS message of {announced}");
            return Err(bad(detail));
        }
        self.buf.extend_from_slice(fragment.data);
        if fragment.more() {
            return Ok(None);
        }
        let announced = self.announced.take();
        let message = core::mem::take(&mut self.buf);
        match announced {
            Some(announced) if announced != message.len() => {
                let detail = format!(
                    "TLS Message Length {announced} but the last fragment ends it at {}",
                    message.len()
                );
                Err(bad(detail))
            }
            _ => Ok(Some(message)),
        }
    }
}

fn too_large(length: usize, limit: usize) -> TlsFailure {
    let detail = format!("a TLS message of {length} octets, the limit is {limit}");
    TlsFailure::new(TlsFailureKind::TooLarge, detail)
}

/// Our TLS data, sent in fragments of at most `fragment_size` octets.
#[derive(Debug)]
pub(crate) struct Outgoing {
    data: Vec<u8>,
    sent: usize,
    fragment_size: usize,
}

impl Outgoing {
    /// `data` (not empty) in fragments of `fragment_size` (at least 1).
    pub(crate) fn new(data: Vec<u8>, fragment_size: usize) -> Outgoing {
        Outgoing {
            data,
            sent: 0,
            fragment_size: fragment_size.max(1),
        }
    }

    /// The next fragment's Type-Data: L and the TLS Message Length on the
    /// first of several, M on all but the last.
    pub(crate) fn next_fragment(&mut self) -> Vec<u8> {
        let rest = &self.data[self.sent..];
        let take = rest.len().min(self.fragment_size);
        let more = take < rest.len();
        let first = self.sent == 0;
        let mut out = Vec::with_capacity(1 + MESSAGE_LENGTH_LEN + take);
        match (first, more) {
            (true, true) => {
                out.push(LENGTH_INCLUDED | MORE_FRAGMENTS);
                // rustls writes one flight at a time: far below 4 GiB.
                let total = u32::try_from(self.data.len()).unwrap_or(u32::MAX);
                out.extend_from_slice(&total.to_be_bytes());
            }
            (_, true) => out.push(MORE_FRAGMENTS),
            (_, false) => out.push(0),
        }
        out.extend_from_slice(&rest[..take]);
        self.sent += take;
        out
    }

    /// Whether the last fragment is out.
    pub(crate) fn finished(&self) -> bool {
        self.sent >= self.data.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kind(r: Result<Option<Vec<u8>>, TlsFailure>) -> TlsFailureKind {
        r.expect_err("refused").kind
    }

    #[test]
    fn flags_and_length_parse() {
        let f = Fragment::parse(&[0xc0, 0, 0, 1, 0, 0x16, 3]).unwrap();
        assert!(f.more() && !f.start() && !f.is_ack());
        assert_eq!(f.message_length, Some(256));
        assert_eq!(f.data, [0x16, 3]);
        let start_data = start();
        let start = Fragment::parse(&start_data).unwrap();
        assert!(start.start() && !start.is_ack());
        assert!(Fragment::parse(&ack()).unwrap().is_ack());
        // strongSwan's acknowledgement carries no length; one with length
        // 0 is one too, one announcing data is not.
        assert!(Fragment::parse(&[0x80, 0, 0, 0, 0]).unwrap().is_ack());
        assert!(!Fragment::parse(&[0x80, 0, 0, 0, 9]).unwrap().is_ack());
        // Reserved bits are ignored.
        assert!(Fragment::parse(&[0x1f]).unwrap().is_ack());
        assert_eq!(
            Fragment::parse(&[]).unwrap_err().kind,
            TlsFailureKind::BadFraming
        );
        assert_eq!(
            Fragment::parse(&[0x80, 0, 0, 1]).unwrap_err().kind,
            TlsFailureKind::BadFraming,
            "L without four octets of length"
        );
    }

    #[test]
    fn fragments_go_out_with_l_on_the_first_and_m_on_all_but_the_last() {
        let data: Vec<u8> = (0..25).collect();
        let mut out = Outgoing::new(data.clone(), 10);
        let first = out.next_fragment();
        assert_eq!(first[..5], [0xc0, 0, 0, 0, 25]);
        assert_eq!(first[5..], data[..10]);
        let second = out.next_fragment();
        assert_eq!(second[0], 0x40);
        assert_eq!(second[1..], data[10..20]);
        assert!(!out.finished());
        let last = out.next_fragment();
        assert_eq!(last[0], 0);
        assert_eq!(last[1..], data[20..]);
        assert!(out.finished());
        // One that fits goes out whole, without L.
        let mut whole = Outgoing::new(vec![1, 2, 3], 10);
        assert_eq!(whole.next_fragment(), [0, 1, 2, 3]);
        assert!(whole.finished());
    }

    #[test]
    fn what_goes_out_comes_back_in_one_piece() {
        let data: Vec<u8> = (0..=255).cycle().take(2500).collect();
        let mut out = Outgoing::new(data.clone(), 999);
        let mut inbound = Reassembly::new(4096);
        let mut whole = None;
        while !out.finished() {
            let bytes = out.next_fragment();
            assert!(whole.is_none(), "a message before its last fragment");
            whole = inbound.push(&Fragment::parse(&bytes).unwrap()).unwrap();
        }
        assert_eq!(whole, Some(data));
        assert!(!inbound.in_progress());
    }

    #[test]
    fn reassembly_refuses_what_breaks_the_rules() {
        let frag = |bytes: &'static [u8]| Fragment::parse(bytes).unwrap();
        // Announced beyond the limit: refused before any data.
        let mut r = Reassembly::new(100);
        assert_eq!(
            kind(r.push(&frag(&[0xc0, 0, 0, 0, 101, 1]))),
            TlsFailureKind::TooLarge
        );
        // Unannounced fragments beyond the limit.
        let mut r = Reassembly::new(4);
        assert_eq!(r.push(&frag(&[0x40, 1, 2, 3])), Ok(None));
        assert_eq!(kind(r.push(&frag(&[0, 4, 5]))), TlsFailureKind::TooLarge);
        // More data than announced.
        let mut r = Reassembly::new(100);
        assert_eq!(r.push(&frag(&[0xc0, 0, 0, 0, 3, 1, 2])), Ok(None));
        assert_eq!(
            kind(r.push(&frag(&[0x40, 3, 4]))),
            TlsFailureKind::BadFraming
        );
        // The last fragment before the announced length is reached.
        let mut r = Reassembly::new(100);
        assert_eq!(r.push(&frag(&[0xc0, 0, 0, 0, 5, 1, 2])), Ok(None));
        assert_eq!(kind(r.push(&frag(&[0, 3]))), TlsFailureKind::BadFraming);
        // A later fragment that changes the length, or announces it first.
        let mut r = Reassembly::new(100);
        assert_eq!(r.push(&frag(&[0xc0, 0, 0, 0, 5, 1, 2])), Ok(None));
        assert_eq!(
            kind(r.push(&frag(&[0xc0, 0, 0, 0, 6, 3]))),
            TlsFailureKind::BadFraming
        );
        let mut r = Reassembly::new(100);
        assert_eq!(r.push(&frag(&[0x40, 1, 2])), Ok(None));
        assert_eq!(
            kind(r.push(&frag(&[0x80, 0, 0, 0, 3, 3]))),
            TlsFailureKind::BadFraming
        );
        // An empty fragment with M set makes no progress.
        let mut r = Reassembly::new(100);
        assert_eq!(kind(r.push(&frag(&[0x40]))), TlsFailureKind::BadFraming);
        // strongSwan's way: L on a message that is not fragmented, and
        // repeated on a later fragment.
        let mut r = Reassembly::new(100);
        assert_eq!(
            r.push(&frag(&[0x80, 0, 0, 0, 2, 7, 8])),
            Ok(Some(vec![7, 8]))
        );
        assert_eq!(r.push(&frag(&[0xc0, 0, 0, 0, 3, 1])), Ok(None));
        assert_eq!(
            r.push(&frag(&[0x80, 0, 0, 0, 3, 2, 3])),
            Ok(Some(vec![1, 2, 3]))
        );
    }

    proptest! {
        #[test]
        fn no_fragment_sequence_panics_or_exceeds_the_limit(
            fragments in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..20),
        ) {
            let mut r = Reassembly::new(64);
            for bytes in &fragments {
                let Ok(fragment) = Fragment::parse(bytes) else { continue };
                match r.push(&fragment) {
                    Ok(Some(message)) => prop_assert!(message.len() <= 64),
                    Ok(None) => {}
                    Err(e) => {
                        prop_assert!(matches!(e.kind, TlsFailureKind::BadFraming | TlsFailureKind::TooLarge));
                        r = Reassembly::new(64);
                    }
                }
            }
        }
    }
}
