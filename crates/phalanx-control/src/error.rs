//! Errors: the one carried on the wire and the one the client returns.

use std::fmt;
use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Why the daemon refused a request: an open registry, so a code this
/// build does not know is still data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ErrorCode(pub u16);

impl ErrorCode {
    /// The line is not a JSON request object.
    pub const MALFORMED: ErrorCode = ErrorCode(1);
    /// The request's `version` is not [`crate::PROTOCOL_VERSION`].
    pub const UNSUPPORTED_VERSION: ErrorCode = ErrorCode(2);
    /// The request `type` is not one this daemon serves.
    pub const UNKNOWN_REQUEST: ErrorCode = ErrorCode(3);
    /// The line exceeded [`crate::MAX_REQUEST_LINE_BYTES`]; the connection closes.
    pub const LINE_TOO_LONG: ErrorCode = ErrorCode(4);
    /// Too many control connections are open; try again later.
    pub const BUSY: ErrorCode = ErrorCode(5);
    /// The new configuration was refused; nothing changed.
    pub const RELOAD_FAILED: ErrorCode = ErrorCode(6);
    /// The daemon failed to answer for a reason of its own.
    pub const INTERNAL: ErrorCode = ErrorCode(7);
    /// No connection of that name is configured.
    pub const UNKNOWN_CONNECTION: ErrorCode = ErrorCode(8);
    /// The IKE request failed (the message says why: no remote address,
    /// authentication failed, peer unreachable, ...).
    pub const IKE_FAILED: ErrorCode = ErrorCode(9);
    /// IKE did not answer within the wait; the request may still complete.
    pub const TIMED_OUT: ErrorCode = ErrorCode(10);
    /// IKE is not enabled in this daemon (no `[ike]` or `[[connection]]`).
    pub const IKE_DISABLED: ErrorCode = ErrorCode(11);
    /// The daemon runs no cluster (no `[cluster]` in its configuration).
    pub const CLUSTER_DISABLED: ErrorCode = ErrorCode(12);

    /// A snake_case name, or `"unknown"` for codes this build lacks.
    pub const fn name(self) -> &'static str {
        match self.0 {
            1 => "malformed",
            2 => "unsupported_version",
            3 => "unknown_request",
            4 => "line_too_long",
            5 => "busy",
            6 => "reload_failed",
            7 => "internal",
            8 => "unknown_connection",
            9 => "ike_failed",
            10 => "timed_out",
            11 => "ike_disabled",
            12 => "cluster_disabled",
            _ => "unknown",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

/// The `"error"` member of a response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Machine-readable reason.
    pub code: ErrorCode,
    /// Human-readable detail (for a reload: file, line and field).
    pub message: String,
}

impl ErrorBody {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorBody {
        ErrorBody {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for ErrorBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.name(), self.message)
    }
}

/// Why a client call failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ControlError {
    /// The socket could not be reached (daemon not running, wrong path,
    /// no permission).
    Connect {
        /// The socket path tried.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// Reading or writing the connection failed.
    Io(io::Error),
    /// The daemon closed the connection before answering.
    Closed,
    /// The answer line exceeded [`crate::MAX_RESPONSE_LINE_BYTES`].
    LineTooLong,
    /// The answer was not a valid response object.
    Malformed(String),
    /// The answer speaks another protocol version.
    VersionMismatch {
        /// What this build speaks.
        expected: u32,
        /// What the daemon sent.
        found: u32,
    },
    /// The answer's id is not the request's.
    IdMismatch {
        /// The request's id.
        expected: u64,
        /// The answer's id.
        found: u64,
    },
    /// The answer is of another kind than the request called for.
    UnexpectedResponse,
    /// The daemon answered with an error.
    Remote(ErrorBody),
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlError::Connect { path, source } => write!(
                f,
                "cannot connect to the control socket {}: {source} (is phalanxd running?)",
                path.display()
            ),
            ControlError::Io(e) => write!(f, "control connection failed: {e}"),
            ControlError::Closed => {
                f.write_str("the daemon closed the connection without answering")
            }
            ControlError::LineTooLong => f.write_str("the daemon's answer is too long"),
            ControlError::Malformed(m) => write!(f, "malformed answer from the daemon: {m}"),
            ControlError::VersionMismatch { expected, found } => write!(
                f,
                "protocol version mismatch: this client speaks {expected}, the daemon {found}"
            ),
            ControlError::IdMismatch { expected, found } => {
                write!(f, "answer id {found} does not match request id {expected}")
            }
            ControlError::UnexpectedResponse => {
                f.write_str("the daemon answered a different request")
            }
            ControlError::Remote(body) => write!(f, "the daemon refused: {body}"),
        }
    }
}

impl std::error::Error for ControlError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ControlError::Connect { source, .. } => Some(source),
            ControlError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for ControlError {
    fn from(e: io::Error) -> ControlError {
        ControlError::Io(e)
    }
}
