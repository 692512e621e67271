//! One module per exchange (strongSwan's one task per exchange):
//!
//! - [`init`]: IKE_SA_INIT, both roles, cookies and NAT detection
//!   (RFC 7296 §1.2, §2.6, §2.10, §2.23);
//! - [`intermediate`]: IKE_INTERMEDIATE with RFC 9370 additional key
//!   exchanges, both roles (RFC 9242, RFC 9370 §2.2.2);
//! - [`auth`]: IKE_AUTH, both roles (§1.2, §2.15, §3.5–§3.8);
//! - [`child`]: Child SA negotiation shared by IKE_AUTH and CREATE_CHILD_SA
//!   (§1.2, §2.9, §2.17);
//! - [`create_child`]: CREATE_CHILD_SA for Child SAs, new and rekeyed, and
//!   rekey collisions (§1.3.1, §1.3.3, §2.8.1, §2.25);
//! - [`ike_rekey`]: CREATE_CHILD_SA rekeying the IKE SA (§1.3.2, §2.18);
//! - [`followup`]: IKE_FOLLOWUP_KE, the RFC 9370 additional key exchanges
//!   of CREATE_CHILD_SA (both kinds), both roles (RFC 9370 §2.2.4);
//! - [`info`]: INFORMATIONAL: deletes, liveness, error notifies (§1.4).
//!
//! This module holds what they share: finding payloads in a message.

pub(crate) mod auth;
pub(crate) mod child;
pub(crate) mod config_payload;
pub(crate) mod cookie;
pub(crate) mod create_child;
pub(crate) mod eap;
pub(crate) mod followup;
pub(crate) mod ike_rekey;
pub(crate) mod info;
pub(crate) mod init;
pub(crate) mod intermediate;
pub(crate) mod mobike;
pub(crate) mod select;

use phalanx_wire::ike::iana::NotifyType;
use phalanx_wire::ike::{
    AuthPayload, CertPayload, CpPayload, DeletePayload, EapPayload, IdPayload, KePayload,
    NoncePayload, NotifyPayload, Payload, SaPayload, TsPayload,
};

/// The payloads of one message, sorted by type (first of each kind; every
/// CERT, Notify and Delete).
#[derive(Default)]
pub(crate) struct Found<'a> {
    pub(crate) sa: Option<&'a SaPayload>,
    pub(crate) ke: Option<&'a KePayload>,
    pub(crate) nonce: Option<&'a NoncePayload>,
    pub(crate) idi: Option<&'a IdPayload>,
    pub(crate) idr: Option<&'a IdPayload>,
    pub(crate) auth: Option<&'a AuthPayload>,
    pub(crate) tsi: Option<&'a TsPayload>,
    pub(crate) tsr: Option<&'a TsPayload>,
    pub(crate) certs: Vec<&'a CertPayload>,
    pub(crate) certreq: bool,
    pub(crate) notifies: Vec<&'a NotifyPayload>,
    pub(crate) deletes: Vec<&'a DeletePayload>,
    pub(crate) cp: Option<&'a CpPayload>,
    pub(crate) eap: Option<&'a EapPayload>,
}

impl<'a> Found<'a> {
    /// Sorts `payloads`.
    pub(crate) fn scan(payloads: &'a [Payload]) -> Found<'a> {
        let mut found = Found::default();
        for payload in payloads {
            match payload {
                Payload::Sa(p) => found.sa = found.sa.or(Some(p)),
                Payload::Ke(p) => found.ke = found.ke.or(Some(p)),
                Payload::Nonce(p) => found.nonce = found.nonce.or(Some(p)),
                Payload::Idi(p) => found.idi = found.idi.or(Some(p)),
                Payload::Idr(p) => found.idr = found.idr.or(Some(p)),
                Payload::Auth(p) => found.auth = found.auth.or(Some(p)),
                Payload::Tsi(p) => found.tsi = found.tsi.or(Some(p)),
                Payload::Tsr(p) => found.tsr = found.tsr.or(Some(p)),
                Payload::Cert(p) => found.certs.push(p),
                Payload::CertReq(_) => found.certreq = true,
                Payload::Notify(p) => found.notifies.push(p),
                Payload::Delete(p) => found.deletes.push(p),
                Payload::Cp(p) => found.cp = found.cp.or(Some(p)),
                Payload::Eap(p) => found.eap = found.eap.or(Some(p)),
                _ => {}
            }
        }
        found
    }

    /// The first Notify of a type.
    pub(crate) fn notify(&self, ty: NotifyType) -> Option<&'a NotifyPayload> {
        self.notifies.iter().copied().find(|n| n.notify_type == ty)
    }

    /// Whether a Notify of a type is present.
    pub(crate) fn has(&self, ty: NotifyType) -> bool {
        self.notify(ty).is_some()
    }

    /// The first error Notify (types below 16384, RFC 7296 §3.10.1).
    pub(crate) fn error(&self) -> Option<NotifyType> {
        self.notifies
            .iter()
            .map(|n| n.notify_type)
            .find(|t| t.is_error())
    }

    /// The data of every Notify of a type.
    pub(crate) fn all_data(&self, ty: NotifyType) -> Vec<&'a [u8]> {
        self.notifies
            .iter()
            .filter(|n| n.notify_type == ty)
            .map(|n| n.data.as_slice())
            .collect()
    }
}

/// A status or error Notify payload with no SPI.
pub(crate) fn notify(ty: NotifyType, data: Vec<u8>) -> Payload {
    Payload::Notify(NotifyPayload::new(ty, data))
}
