//! Reassembly of RFC 7383 fragments (§2.6).
//!
//! Each fragment is verified and decrypted on arrival and only then kept
//! (§2.6.1: an attacker must not be able to fill the reassembly state with
//! forged fragments). Fragments are collected per (Message ID, request or
//! response); a duplicate is ignored; a fragment announcing more Total
//! Fragments than those kept restarts the message (the sender went to a
//! smaller MTU), one announcing fewer is dropped (§2.6). State is bounded
//! by [`ReassemblyLimits`]: fragments per message, octets per message, and
//! messages in progress (the oldest is dropped to make room).

use phalanx_wire::ike::iana::PayloadType;
use phalanx_wire::ike::limits::MAX_MESSAGE_LEN;
use phalanx_wire::ike::{parse_payloads, IkeHeaderRepr};
use zeroize::Zeroizing;

use super::{locate, Opened, ProtectError, Protection};

/// Bounds on what a peer can make us hold while reassembling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReassemblyLimits {
    /// Most Total Fragments accepted. RFC 7383 sets none; 64 fragments of
    /// the 1280-octet minimum carry over 70 KiB, more than any message.
    pub max_fragments: u16,
    /// Most decrypted octets of one message: what one unfragmented
    /// message could hold (RFC 7383 §2.6).
    pub max_message_len: usize,
    /// Most messages reassembled at once; with the default window of 1
    /// (RFC 7296 §2.3) a request and a response are the most in flight.
    pub max_messages: usize,
}

impl Default for ReassemblyLimits {
    fn default() -> ReassemblyLimits {
        ReassemblyLimits {
            max_fragments: 64,
            max_message_len: MAX_MESSAGE_LEN,
            max_messages: 4,
        }
    }
}

/// One message being reassembled.
struct Partial {
    message_id: u32,
    response: bool,
    /// The SPIs and exchange every fragment must share.
    header: IkeHeaderRepr,
    total: u16,
    /// Next Payload of fragment 1, once it is here.
    first_inner: Option<PayloadType>,
    fragments: Vec<Option<Zeroizing<Vec<u8>>>>,
    bytes: usize,
}

impl Partial {
    fn new(header: IkeHeaderRepr, total: u16) -> Partial {
        Partial {
            message_id: header.message_id,
            response: header.response,
            header,
            total,
            first_inner: None,
            fragments: (0..total).map(|_| None).collect(),
            bytes: 0,
        }
    }

    /// Whether `header` belongs to the same message (RFC 7383 §2.6: the
    /// fragments of a message share its IKE header but for Length and
    /// Next Payload).
    fn same_message(&self, header: &IkeHeaderRepr) -> bool {
        let h = &self.header;
        h.initiator_spi == header.initiator_spi
            && h.responder_spi == header.responder_spi
            && h.exchange_type == header.exchange_type
            && h.initiator == header.initiator
    }

    fn is_complete(&self) -> bool {
        self.first_inner.is_some() && self.fragments.iter().all(Option::is_some)
    }

    /// The decrypted fragments in order.
    fn joined(&self) -> Zeroizing<Vec<u8>> {
        let mut all = Zeroizing::new(Vec::with_capacity(self.bytes));
        for data in self.fragments.iter().flatten() {
            all.extend_from_slice(data);
        }
        all
    }
}

/// Collects the fragments of encrypted messages into whole messages.
pub struct Reassembler {
    limits: ReassemblyLimits,
    /// In arrival order of each message's first kept fragment.
    partial: Vec<Partial>,
}

impl core::fmt::Debug for Reassembler {
    /// Counts only; never prints decrypted data.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Reassembler")
            .field("limits", &self.limits)
            .field("in_progress", &self.partial.len())
            .finish()
    }
}

impl Default for Reassembler {
    fn default() -> Reassembler {
        Reassembler::new(ReassemblyLimits::default())
    }
}

impl Reassembler {
    /// An empty reassembler bounded by `limits`.
    pub fn new(limits: ReassemblyLimits) -> Reassembler {
        Reassembler {
            limits,
            partial: Vec::new(),
        }
    }

    /// Messages in progress.
    pub fn in_progress(&self) -> usize {
        self.partial.len()
    }

    /// Drops what was kept of one message (e.g. once its Message ID is
    /// out of the window).
    pub fn forget(&mut self, message_id: u32, response: bool) {
        self.partial
            .retain(|p| (p.message_id, p.response) != (message_id, response));
    }

    /// Drops everything kept.
    pub fn clear(&mut self) {
        self.partial.clear();
    }

    /// Takes one datagram: an SK message is opened at once; an SKF
    /// fragment is verified, kept, and when it completes its message the
    /// message is returned. `Ok(None)`: kept (or ignored as a duplicate or
    /// an outdated fragment), message not complete yet.
    ///
    /// Errors: those of [`Protection::open`], and
    /// [`ProtectError::Oversize`] for a fragment past the limits (the
    /// message's fragments so far are dropped).
    pub fn add(
        &mut self,
        protection: &Protection,
        datagram: &[u8],
    ) -> Result<Option<Opened>, ProtectError> {
        let located = locate(datagram)?;
        let Some((number, total)) = located.fragment else {
            return protection.open_located(datagram, located).map(Some);
        };
        if total > self.limits.max_fragments {
            return Err(ProtectError::Oversize);
        }
        // RFC 7383 §2.6.1: verify before keeping anything.
        let data = protection.decrypt(datagram, located.body_start)?;
        let header = located.header;
        let Some(index) = self.slot(&header, total) else {
            return Ok(None);
        };
        let partial = &mut self.partial[index];
        let Some(entry) = partial.fragments.get_mut(usize::from(number - 1)) else {
            return Ok(None);
        };
        if entry.is_some() {
            return Ok(None);
        }
        if partial.bytes + data.len() > self.limits.max_message_len {
            self.partial.remove(index);
            return Err(ProtectError::Oversize);
        }
        partial.bytes += data.len();
        *entry = Some(data);
        if number == 1 {
            partial.first_inner = Some(located.first_inner);
        }
        if !partial.is_complete() {
            return Ok(None);
        }
        let done = self.partial.remove(index);
        let plaintext = done.joined();
        let payloads = parse_payloads(done.first_inner.unwrap_or(PayloadType::NONE), &plaintext)
            .map_err(|_| ProtectError::InvalidSyntax)?;
        Ok(Some(Opened {
            header,
            unencrypted: located.unencrypted,
            payloads,
            fragments: total,
            plaintext,
        }))
    }

    /// The index of the message this fragment belongs to, created or
    /// restarted as RFC 7383 §2.6 says; `None` to drop the fragment.
    fn slot(&mut self, header: &IkeHeaderRepr, total: u16) -> Option<usize> {
        let key = (header.message_id, header.response);
        let found = self
            .partial
            .iter()
            .position(|p| (p.message_id, p.response) == key);
        match found {
            Some(i) if !self.partial[i].same_message(header) => None,
            Some(i) if total < self.partial[i].total => None,
            Some(i) if total > self.partial[i].total => {
                self.partial[i] = Partial::new(*header, total);
                Some(i)
            }
            Some(i) => Some(i),
            None => {
                if self.limits.max_messages == 0 {
                    return None;
                }
                if self.partial.len() >= self.limits.max_messages {
                    self.partial.remove(0);
                }
                self.partial.push(Partial::new(*header, total));
                Some(self.partial.len() - 1)
            }
        }
    }
}
