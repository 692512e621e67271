//! IKE_INTERMEDIATE carrying RFC 9370 additional key exchanges, both
//! roles (RFC 9242, RFC 9370 §2.2.2).
//!
//! ```text
//! Initiator                         Responder
//! -------------------------------------------------------------------
//! HDR(IKE_SA_INIT), SAi1 (with ADDKE*), KEi, Ni,
//!   N(INTERMEDIATE_EXCHANGE_SUPPORTED)  -->
//!                                   <--  HDR(IKE_SA_INIT), SAr1, KEr, Nr,
//!                                          N(INTERMEDIATE_EXCHANGE_SUPPORTED)
//! HDR(IKE_INTERMEDIATE), SK {KEi(1)}  -->
//!                                   <--  HDR(IKE_INTERMEDIATE), SK {KEr(1)}
//! ...  one exchange per negotiated ADDKE type, in type order  ...
//! HDR(IKE_AUTH), SK {...}  -->
//! ```
//!
//! Each exchange is protected with the keys in force when it starts; once
//! it is done both sides derive the next set (RFC 9370 §2.2.2):
//!
//! ```text
//! SKEYSEED(n) = prf(SK_d(n-1), SK(n) | Ni | Nr)
//! {SK_d(n) | SK_ai(n) | SK_ar(n) | SK_ei(n) | SK_er(n) | SK_pi(n) | SK_pr(n)}
//!             = prf+ (SKEYSEED(n), Ni | Nr | SPIi | SPIr)
//! ```
//!
//! and IKE_AUTH authenticates every IKE_INTERMEDIATE message through the
//! IntAuth chain (RFC 9242 §3.3.2, keys as in its Appendix A: the SK_p of
//! the keys that protected that exchange):
//!
//! ```text
//! IntAuth_i1 = prf(SK_pi1,              IntAuth_i1_A [| IntAuth_i1_P])
//! IntAuth_iN = prf(SK_piN, IntAuth_iN-1 | IntAuth_iN_A [| IntAuth_iN_P])
//! IntAuth_r1 = prf(SK_pr1,              IntAuth_r1_A [| IntAuth_r1_P])
//! IntAuth_rN = prf(SK_prN, IntAuth_rN-1 | IntAuth_rN_A [| IntAuth_rN_P])
//! IntAuth    = IntAuth_iN | IntAuth_rN | IKE_AUTH_MID
//! ```
//!
//! IntAuth_*_A is the message from the first octet of the IKE header (no
//! non-ESP marker) to the last octet of the Encrypted payload's generic
//! header, with the header's Length and the Encrypted payload's Payload
//! Length counting neither IV, padding, Pad Length nor ICV; IntAuth_*_P
//! is the inner payloads in the clear. Both are taken as if the message
//! were not fragmented (§3.3.2). IntAuth is appended only when at least
//! one IKE_INTERMEDIATE exchange took place; this responder announces
//! INTERMEDIATE_EXCHANGE_SUPPORTED only when it selected an additional
//! key exchange, so between two Phalanx peers the two cases never differ.
//! The IKE SA is not established before IKE_AUTH (RFC 9242 §3.2).

use std::collections::VecDeque;

use phalanx_crypto::ike::{respond, start_initiator, IkeSaKeys, KdfInputs, KexState};
use phalanx_crypto::KeGroup;
use phalanx_wire::ike::iana::{ExchangeType, KeId, NotifyType, PayloadType};
use phalanx_wire::ike::limits::{GENERIC_PAYLOAD_HEADER_LEN, HEADER_LEN};
use phalanx_wire::ike::{emit_payloads, IkeHeader, IkeHeaderRepr, KePayload, Payload};

use crate::auth::Prf;
use crate::counters::Counter;
use crate::error::IkeError;
use crate::events::SaEvent;
use crate::exchange::auth::{prf_closure, AuthInputs};
use crate::exchange::init::HalfOpen;
use crate::exchange::{notify, Found};
use crate::ike_sa::{AfterSend, Ctx, IkeSa, Pending, Reply, SaCrypto, State};
use crate::protect::Opened;

/// The running IntAuth values of both directions (RFC 9242 §3.3.2).
#[derive(Clone, Debug, Default)]
pub(crate) struct IntAuthChain {
    /// IntAuth_iN so far (empty before the first exchange).
    i: Vec<u8>,
    /// IntAuth_rN so far.
    r: Vec<u8>,
    /// IKE_INTERMEDIATE exchanges folded in.
    exchanges: u32,
}

impl IntAuthChain {
    /// Folds in one exchange: its request (from the initiator) and response
    /// as IntAuth_*_A | IntAuth_*_P, with the keys that protected it.
    pub(crate) fn add(&mut self, prf: Prf<'_>, keys: &IkeSaKeys, request: &[u8], response: &[u8]) {
        // IntAuth_iN = prf(SK_piN, IntAuth_iN-1 | IntAuth_iN_A | IntAuth_iN_P)
        self.i = prf(&keys.sk_pi, &[&self.i, request]);
        // IntAuth_rN = prf(SK_prN, IntAuth_rN-1 | IntAuth_rN_A | IntAuth_rN_P)
        self.r = prf(&keys.sk_pr, &[&self.r, response]);
        self.exchanges += 1;
    }

    /// IntAuth = IntAuth_iN | IntAuth_rN | IKE_AUTH_MID, where
    /// `ike_auth_mid` is the Message ID of the IKE_AUTH request; empty when
    /// no IKE_INTERMEDIATE exchange took place.
    pub(crate) fn value(&self, ike_auth_mid: u32) -> Vec<u8> {
        if self.exchanges == 0 {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(self.i.len() + self.r.len() + 4);
        out.extend_from_slice(&self.i);
        out.extend_from_slice(&self.r);
        out.extend_from_slice(&ike_auth_mid.to_be_bytes());
        out
    }
}

/// IntAuth_*_A | IntAuth_*_P of a message we send with `header` and inner
/// `payloads`, as if it were not fragmented (RFC 9242 §3.3.2).
pub(crate) fn sent_blob(header: &IkeHeaderRepr, payloads: &[Payload]) -> Option<Vec<u8>> {
    let (first, inner) = emit_payloads(payloads).ok()?;
    let sk_len = GENERIC_PAYLOAD_HEADER_LEN + inner.len();
    let mut out = vec![0u8; HEADER_LEN];
    let mut adjusted = *header;
    adjusted.next_payload = PayloadType::SK;
    adjusted.length = u32::try_from(HEADER_LEN + sk_len).ok()?;
    adjusted.emit(&mut IkeHeader::new_unchecked(&mut out[..]));
    out.extend_from_slice(&[first.0, 0]);
    out.extend_from_slice(&u16::try_from(sk_len).ok()?.to_be_bytes());
    out.extend_from_slice(&inner);
    Some(out)
}

/// IntAuth_*_A | IntAuth_*_P of a message we received as `datagram` (its
/// last fragment, if reassembled) and opened as `opened`: the octets up to
/// the Encrypted payload's generic header as received, Length fields
/// adjusted; a reassembled message as if it had come whole (SK in place
/// of SKF, the first inner payload named, RESERVED octet zero).
pub(crate) fn received_blob(datagram: &[u8], opened: &Opened) -> Option<Vec<u8>> {
    let view = IkeHeader::new_checked(datagram).ok()?;
    // Offset of the Next Payload field that names the payload at hand:
    // the header's, then each payload's own generic header.
    let mut naming = 16;
    for raw in view.payloads() {
        let raw = raw.ok()?;
        let at = HEADER_LEN + raw.offset;
        let (first, flags) = match raw.payload_type {
            PayloadType::SK => (raw.next_payload, *datagram.get(at + 1)?),
            PayloadType::SKF => {
                let first = opened.payloads.first().map(Payload::payload_type);
                (first.unwrap_or(PayloadType::NONE), 0)
            }
            _ => {
                naming = at;
                continue;
            }
        };
        let mut out = datagram.get(..at)?.to_vec();
        *out.get_mut(naming)? = PayloadType::SK.0;
        let plaintext: &[u8] = &opened.plaintext;
        let sk_len = u16::try_from(GENERIC_PAYLOAD_HEADER_LEN + plaintext.len()).ok()?;
        out.extend_from_slice(&[first.0, flags]);
        out.extend_from_slice(&sk_len.to_be_bytes());
        let total = u32::try_from(out.len() + plaintext.len()).ok()?;
        out.get_mut(24..28)?.copy_from_slice(&total.to_be_bytes());
        out.extend_from_slice(plaintext);
        return Some(out);
    }
    None
}

/// Initiator: an IKE_INTERMEDIATE request in flight.
pub(crate) struct Intermediate {
    /// From IKE_SA_INIT, for IKE_AUTH.
    pub(crate) inputs: AuthInputs,
    /// The exchanges so far.
    pub(crate) chain: IntAuthChain,
    /// Methods of the exchanges after this one, in ADDKE type order.
    pub(crate) remaining: VecDeque<KeId>,
    /// Our key of this exchange.
    pub(crate) kex: KexState,
    /// IntAuth_i_A | IntAuth_i_P of our request.
    pub(crate) request_blob: Vec<u8>,
}

/// What a finished exchange leaves for the next step.
type Progress = (AuthInputs, IntAuthChain, VecDeque<KeId>);

impl IkeSa {
    /// Initiator: starts the next additional key exchange, or IKE_AUTH when
    /// none is left (with IntAuth for the IKE_AUTH request's Message ID).
    pub(crate) fn next_intermediate(
        &mut self,
        ctx: &mut Ctx<'_>,
        mut inputs: AuthInputs,
        chain: IntAuthChain,
        mut remaining: VecDeque<KeId>,
    ) {
        let Some(method) = remaining.pop_front() else {
            inputs.int_auth = chain.value(self.window.next_request_id);
            self.start_auth(ctx, inputs);
            return;
        };
        if let Err(e) = self.send_intermediate(ctx, method, (inputs, chain, remaining)) {
            self.fail(ctx, &format!("IKE_INTERMEDIATE: {e}"));
        }
    }

    fn send_intermediate(
        &mut self,
        ctx: &mut Ctx<'_>,
        method: KeId,
        (inputs, chain, remaining): Progress,
    ) -> Result<(), IkeError> {
        let group = KeGroup::try_from(method)?;
        let kex = start_initiator(ctx.provider, group, &mut *ctx.rng)?;
        // RFC 9370 §2.2.2: HDR(IKE_INTERMEDIATE), SK {KEi(n)}.
        let payloads = vec![Payload::Ke(KePayload {
            group: method,
            data: kex.public_value().to_vec(),
        })];
        let header = self.header(
            ExchangeType::IKE_INTERMEDIATE,
            false,
            self.window.next_request_id,
        );
        let request_blob = sent_blob(&header, &payloads).ok_or(IkeError::Malformed)?;
        let state = Intermediate {
            inputs,
            chain,
            remaining,
            kex,
            request_blob,
        };
        self.transition(ctx, State::Intermediate(Box::new(state)));
        self.send_request(
            ctx,
            ExchangeType::IKE_INTERMEDIATE,
            payloads,
            Pending::Intermediate,
        )
        .map_err(|_| IkeError::Malformed)
    }

    /// Initiator: the responder's KEr(n); `blob` is IntAuth_r_A | _P of
    /// the response.
    pub(crate) fn process_intermediate_response(
        &mut self,
        ctx: &mut Ctx<'_>,
        payloads: &[Payload],
        blob: Option<Vec<u8>>,
    ) {
        let State::Intermediate(st) = self.transition(ctx, State::Closed) else {
            return;
        };
        match self.finish_intermediate(ctx, *st, payloads, blob) {
            Ok((inputs, chain, remaining)) => self.next_intermediate(ctx, inputs, chain, remaining),
            Err(e) => self.fail(ctx, &format!("IKE_INTERMEDIATE: {e}")),
        }
    }

    fn finish_intermediate(
        &mut self,
        ctx: &mut Ctx<'_>,
        st: Intermediate,
        payloads: &[Payload],
        blob: Option<Vec<u8>>,
    ) -> Result<Progress, IkeError> {
        let found = Found::scan(payloads);
        if let Some(error) = found.error() {
            return Err(IkeError::PeerError(error));
        }
        let ke = found.ke.ok_or(IkeError::MissingPayload(PayloadType::KE))?;
        if ke.group != KeId::from(st.kex.group()) {
            return Err(IkeError::Malformed);
        }
        let shared = st.kex.complete(&ke.data).map_err(|_| IkeError::Malformed)?;
        let response_blob = blob.ok_or(IkeError::Malformed)?;
        let (inputs, mut chain) = (st.inputs, st.chain);
        let keys = self.next_keys(
            ctx,
            &mut chain,
            (&st.request_blob, &response_blob),
            (&inputs.ni, &inputs.nr),
            &shared,
        )?;
        self.switch_keys(ctx, keys)?;
        Ok((inputs, chain, st.remaining))
    }

    /// Folds one exchange into `chain` with the keys that protected it,
    /// then derives the next keys from its shared secret SK(n)
    /// (RFC 9370 §2.2.2, with IKE_SA_INIT's nonces and SPIs).
    fn next_keys(
        &self,
        ctx: &Ctx<'_>,
        chain: &mut IntAuthChain,
        (request, response): (&[u8], &[u8]),
        (ni, nr): (&[u8], &[u8]),
        shared: &[u8],
    ) -> Result<IkeSaKeys, IkeError> {
        let crypto = self.crypto.as_ref().ok_or(IkeError::Malformed)?;
        let prf = prf_closure(ctx.provider, crypto.prf);
        chain.add(&prf, &crypto.keys, request, response);
        let inputs = KdfInputs {
            ni,
            nr,
            spi_i: self.spi_i.to_be_bytes(),
            spi_r: self.spi_r.to_be_bytes(),
        };
        Ok(crypto
            .keys
            .update_with_additional_ke(ctx.provider, &inputs, shared)?)
    }

    /// Protects everything from now on with `keys` (RFC 9242 §3.3.1: the
    /// most recently calculated keys).
    pub(crate) fn switch_keys(
        &mut self,
        ctx: &mut Ctx<'_>,
        keys: IkeSaKeys,
    ) -> Result<(), IkeError> {
        let negotiated = self
            .crypto
            .as_ref()
            .ok_or(IkeError::Malformed)?
            .negotiated
            .clone();
        self.crypto = Some(SaCrypto::with_keys(ctx, negotiated, keys, self.initiator)?);
        ctx.count(Counter::AdditionalKeyExchanges);
        Ok(())
    }

    /// Responder: an IKE_INTERMEDIATE request with Message ID `id`;
    /// `blob` is IntAuth_i_A | _P of the request. The new keys take over
    /// once the answer is sent (it goes out under the current ones).
    pub(crate) fn process_intermediate_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        id: u32,
        payloads: &[Payload],
        blob: Option<&[u8]>,
    ) -> Reply {
        // Taken out and put back: not a state change.
        let state = core::mem::replace(&mut self.state, State::Closed);
        let State::HalfOpen(mut st) = state else {
            self.state = state;
            ctx.count(Counter::UnexpectedExchange);
            return Reply::of(vec![notify(NotifyType::INVALID_SYNTAX, Vec::new())]);
        };
        let answered = self.answer_intermediate(ctx, &mut st, id, payloads, blob);
        self.state = State::HalfOpen(st);
        answered.unwrap_or_else(|e| self.refuse_intermediate(ctx, &e))
    }

    fn answer_intermediate(
        &self,
        ctx: &mut Ctx<'_>,
        st: &mut HalfOpen,
        id: u32,
        payloads: &[Payload],
        blob: Option<&[u8]>,
    ) -> Result<Reply, IkeError> {
        // Only as many exchanges as ADDKE types were negotiated (RFC 9242
        // §5: their number is known after IKE_SA_INIT).
        let method = st.additional.front().copied().ok_or(IkeError::Malformed)?;
        let found = Found::scan(payloads);
        let kei = found.ke.ok_or(IkeError::MissingPayload(PayloadType::KE))?;
        // RFC 9370 §2.2.2: the KE payload carries the negotiated method of
        // this exchange; anything else is a syntax error.
        if kei.group != method {
            return Err(IkeError::Malformed);
        }
        let group = KeGroup::try_from(method)?;
        let answer = respond(ctx.provider, group, &kei.data, &mut *ctx.rng)
            .map_err(|_| IkeError::Malformed)?;
        let payloads = vec![Payload::Ke(KePayload {
            group: method,
            data: answer.public_value,
        })];
        let header = self.header(ExchangeType::IKE_INTERMEDIATE, true, id);
        let response_blob = sent_blob(&header, &payloads).ok_or(IkeError::Malformed)?;
        let request_blob = blob.ok_or(IkeError::Malformed)?;
        let keys = self.next_keys(
            ctx,
            &mut st.chain,
            (request_blob, &response_blob),
            (&st.ni, &st.nr),
            &answer.shared_secret,
        )?;
        st.additional.pop_front();
        Ok(Reply {
            payloads,
            after: vec![AfterSend::SwitchKeys(Box::new(keys))],
            deferred: false,
        })
    }

    /// A half-open IKE SA whose IKE_INTERMEDIATE fails is closed after the
    /// error answer (it can no longer authenticate).
    fn refuse_intermediate(&mut self, ctx: &mut Ctx<'_>, e: &IkeError) -> Reply {
        ctx.count(Counter::Unprocessable);
        ctx.count(Counter::IkeSasFailed);
        ctx.event(SaEvent::IkeSaFailed {
            connection: self.conn.name.clone(),
            reason: format!("IKE_INTERMEDIATE: {e}"),
        });
        let ty = e.notify_type().unwrap_or(NotifyType::INVALID_SYNTAX);
        Reply {
            payloads: vec![notify(ty, e.notify_data())],
            after: vec![AfterSend::Close],
            deferred: false,
        }
    }
}

#[cfg(test)]
#[path = "intermediate_tests.rs"]
mod tests;
