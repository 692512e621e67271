//! Control-plane errors of the IKE state machine.
//!
//! STYLE.md: errors are typed and each maps to what goes on the wire. An
//! error met while processing a peer's request is answered with the Notify
//! [`IkeError::notify_type`] names (RFC 7296 §2.21); `None` means the
//! message is dropped without an answer, as §2.21 asks for messages that
//! fail integrity or cannot be tied to an IKE SA. Every error is also
//! counted ([`crate::counters`]).

use core::fmt;

use phalanx_crypto::CryptoError;
use phalanx_wire::ike::iana::{KeId, NotifyType, PayloadType};

use crate::auth::AuthError;

/// Why an IKE operation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IkeError {
    /// No connection of that name is configured (API callers only).
    UnknownConnection(String),
    /// The connection has no remote address, so it can only respond.
    NoRemoteAddress(String),
    /// No established IKE SA belongs to the connection (API callers only).
    NotEstablished(String),
    /// The message is not well formed (RFC 7296 §2.21.1: INVALID_SYNTAX).
    Malformed,
    /// The major version is not 2 (RFC 7296 §2.5: INVALID_MAJOR_VERSION).
    UnsupportedVersion,
    /// A payload we do not understand is marked critical (RFC 7296 §2.5).
    UnsupportedCriticalPayload(PayloadType),
    /// A payload the exchange needs is missing (RFC 7296 §2.21.1:
    /// INVALID_SYNTAX).
    MissingPayload(PayloadType),
    /// None of the peer's proposals is acceptable (RFC 7296 §2.7).
    NoProposalChosen,
    /// The proposal is acceptable but the KE payload's group is not: the
    /// group we want goes back in INVALID_KE_PAYLOAD (RFC 7296 §1.2).
    InvalidKe(KeId),
    /// The peer failed authentication (RFC 7296 §2.21.2).
    Authentication(AuthError),
    /// The traffic selectors leave nothing (RFC 7296 §2.9).
    TsUnacceptable,
    /// A rekey names a Child SA that does not exist (RFC 7296 §2.25).
    ChildSaNotFound,
    /// The request collides with a rekey or delete in progress
    /// (RFC 7296 §2.25).
    TemporaryFailure,
    /// The message failed its integrity check: dropped without an answer
    /// (RFC 7296 §2.21.2).
    Integrity,
    /// A cryptographic operation of our own failed.
    Crypto(CryptoError),
    /// The peer answered with an error Notify.
    PeerError(NotifyType),
    /// The peer stopped answering (RFC 7296 §2.4).
    Timeout,
    /// An AH Child SA over a NAT or forced UDP encapsulation: AH protects
    /// the outer addresses a NAT rewrites, and RFC 3948 encapsulates ESP
    /// only. Answered with NO_PROPOSAL_CHOSEN.
    AhThroughNat,
    /// A CFG_REQUEST asked for addresses and the pools had none to give
    /// (RFC 7296 §3.15.4 via §2.19): INTERNAL_ADDRESS_FAILURE, and no
    /// Child SA.
    InternalAddressFailure,
}

impl IkeError {
    /// The Notify this error is answered with, or `None` when the message
    /// is dropped without an answer (RFC 7296 §2.21).
    pub fn notify_type(&self) -> Option<NotifyType> {
        Some(match self {
            IkeError::Malformed | IkeError::MissingPayload(_) => NotifyType::INVALID_SYNTAX,
            IkeError::UnsupportedVersion => NotifyType::INVALID_MAJOR_VERSION,
            IkeError::UnsupportedCriticalPayload(_) => NotifyType::UNSUPPORTED_CRITICAL_PAYLOAD,
            IkeError::NoProposalChosen | IkeError::AhThroughNat => NotifyType::NO_PROPOSAL_CHOSEN,
            IkeError::InvalidKe(_) => NotifyType::INVALID_KE_PAYLOAD,
            IkeError::Authentication(_) => NotifyType::AUTHENTICATION_FAILED,
            IkeError::TsUnacceptable => NotifyType::TS_UNACCEPTABLE,
            IkeError::InternalAddressFailure => NotifyType::INTERNAL_ADDRESS_FAILURE,
            IkeError::ChildSaNotFound => NotifyType::CHILD_SA_NOT_FOUND,
            IkeError::TemporaryFailure => NotifyType::TEMPORARY_FAILURE,
            IkeError::UnknownConnection(_)
            | IkeError::NoRemoteAddress(_)
            | IkeError::NotEstablished(_)
            | IkeError::Integrity
            | IkeError::Crypto(_)
            | IkeError::PeerError(_)
            | IkeError::Timeout => return None,
        })
    }

    /// The Notification Data that goes with [`Self::notify_type`]: the
    /// group for INVALID_KE_PAYLOAD (RFC 7296 §3.10.1), the payload type
    /// for UNSUPPORTED_CRITICAL_PAYLOAD; empty otherwise.
    pub fn notify_data(&self) -> Vec<u8> {
        match self {
            IkeError::InvalidKe(group) => group.0.to_be_bytes().to_vec(),
            IkeError::UnsupportedCriticalPayload(ty) => vec![ty.0],
            _ => Vec::new(),
        }
    }
}

impl fmt::Display for IkeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IkeError::UnknownConnection(name) => write!(f, "no connection named {name:?}"),
            IkeError::NoRemoteAddress(name) => {
                write!(
                    f,
                    "connection {name:?} has no remote address to initiate to"
                )
            }
            IkeError::NotEstablished(name) => write!(f, "connection {name:?} has no IKE SA"),
            IkeError::Malformed => f.write_str("malformed message"),
            IkeError::UnsupportedVersion => f.write_str("unsupported IKE major version"),
            IkeError::UnsupportedCriticalPayload(ty) => {
                write!(f, "unsupported critical payload {ty:?}")
            }
            IkeError::MissingPayload(ty) => write!(f, "missing {ty:?} payload"),
            IkeError::NoProposalChosen => f.write_str("no acceptable proposal"),
            IkeError::InvalidKe(group) => write!(f, "key exchange group {group:?} wanted"),
            IkeError::Authentication(e) => write!(f, "authentication failed: {e}"),
            IkeError::TsUnacceptable => f.write_str("traffic selectors unacceptable"),
            IkeError::ChildSaNotFound => f.write_str("child SA not found"),
            IkeError::TemporaryFailure => f.write_str("temporary failure"),
            IkeError::InternalAddressFailure => f.write_str("no virtual IP to give"),
            IkeError::AhThroughNat => {
                f.write_str("AH cannot pass a NAT or UDP encapsulation (RFC 3948 carries ESP only)")
            }
            IkeError::Integrity => f.write_str("integrity check failed"),
            IkeError::Crypto(e) => write!(f, "crypto error: {e:?}"),
            IkeError::PeerError(ty) => write!(f, "peer answered {ty:?}"),
            IkeError::Timeout => f.write_str("peer not answering"),
        }
    }
}

impl std::error::Error for IkeError {}

impl From<CryptoError> for IkeError {
    fn from(e: CryptoError) -> Self {
        IkeError::Crypto(e)
    }
}

impl From<AuthError> for IkeError {
    fn from(e: AuthError) -> Self {
        IkeError::Authentication(e)
    }
}

impl From<phalanx_wire::Error> for IkeError {
    fn from(e: phalanx_wire::Error) -> Self {
        match e {
            phalanx_wire::Error::BadVersion => IkeError::UnsupportedVersion,
            _ => IkeError::Malformed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wire_error_has_its_notify() {
        assert_eq!(
            IkeError::InvalidKe(KeId::ECP_256).notify_data(),
            vec![0, 19]
        );
        assert_eq!(
            IkeError::Authentication(AuthError::PskMismatch).notify_type(),
            Some(NotifyType::AUTHENTICATION_FAILED)
        );
        assert_eq!(IkeError::Integrity.notify_type(), None);
        assert_eq!(
            IkeError::from(phalanx_wire::Error::BadVersion).notify_type(),
            Some(NotifyType::INVALID_MAJOR_VERSION)
        );
    }
}
