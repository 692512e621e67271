//! The numbers the IKE state machine enforces or waits for, each with its
//! source. Per-connection values (DPD delay, lifetimes) and per-endpoint
//! ones an operator tunes (half-open table, retransmission, fragment MTU)
//! live in [`crate::config`]; these are the fixed ones.

use core::time::Duration;

/// Octets of every nonce we send. RFC 7296 §2.10: at least 128 bits and at
/// least half the key size of the negotiated PRF; the initiator picks it
/// before the PRF is known, so it must cover every PRF it offers: half of
/// HMAC-SHA2-512's 64-octet key.
pub const NONCE_LEN: usize = 32;

/// How long a responder keeps an IKE SA that answered IKE_SA_INIT but has
/// not seen a valid IKE_AUTH (a half-open SA), and how long an initiator
/// waits for IKE_AUTH to finish. RFC 7296 §2.6 asks responders to bound
/// half-open state; 30 s is what strongSwan's `half_open_timeout` uses.
pub const HALF_OPEN_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a cookie secret is used before a new one is drawn. RFC 7296
/// §2.6: the responder "should change the value of `<secret>` frequently";
/// cookies made with the previous secret stay valid one more period so an
/// initiator caught by a change is not refused.
pub const COOKIE_SECRET_LIFETIME: Duration = Duration::from_secs(120);

/// Octets of a cookie secret (the key of the SHA-256 in the cookie).
pub const COOKIE_SECRET_LEN: usize = 32;

/// Longest cookie accepted from a responder. RFC 7296 §2.6: "The data
/// associated with this notification MUST be between 1 and 64 octets".
pub const MAX_COOKIE_LEN: usize = 64;

/// Most times one IKE_SA_INIT is restarted because of COOKIE or
/// INVALID_KE_PAYLOAD answers (RFC 7296 §1.2, §2.6). A responder that keeps
/// asking is broken or hostile; the attempt then fails.
pub const MAX_INIT_RESTARTS: u32 = 4;

/// How long old and new Child SAs overlap after a rekey before the rekey
/// initiator deletes the old one (RFC 7296 §2.8: the old SA is deleted
/// after the new one is in place; the overlap lets packets in flight on
/// the old SA arrive). Make-before-break.
pub const REKEY_OVERLAP: Duration = Duration::from_secs(2);

/// How long a responder keeps an answered CREATE_CHILD_SA waiting for the
/// next IKE_FOLLOWUP_KE request (RFC 9370 §2.2.4: the initiator may lose
/// its state; "5-20 seconds" is suggested). Long enough for a few of the
/// initiator's retransmissions.
pub const FOLLOWUP_KE_TIMEOUT: Duration = Duration::from_secs(10);

/// Octets of the link an ADDITIONAL_KEY_EXCHANGE notify carries (RFC 9370
/// §2.2.4 leaves its content to the responder: random, fresh per round).
pub const FOLLOWUP_LINK_LEN: usize = 8;

/// How long a rekey responder waits for the rekey initiator to delete the
/// old Child SA before deleting it itself (RFC 7296 §2.8 lets either side
/// delete it). Until then the responder keeps sending on the old SA, since
/// only that Delete proves the initiator receives on the new one.
pub const REKEY_DELETE_FALLBACK: Duration = Duration::from_secs(10);

/// Shortest wait before retrying an exchange refused with
/// TEMPORARY_FAILURE. RFC 7296 §2.25: the recipient "MUST NOT immediately
/// retry the operation; it MUST wait so that the sender may complete
/// whatever operation caused the temporary condition".
pub const TEMPORARY_FAILURE_RETRY_MIN: Duration = Duration::from_secs(2);

/// Random spread added to [`TEMPORARY_FAILURE_RETRY_MIN`], so that two
/// peers refused by each other do not retry in lock step.
pub const TEMPORARY_FAILURE_RETRY_JITTER: Duration = Duration::from_secs(3);

/// Most retries after TEMPORARY_FAILURE. RFC 7296 §2.25: if TEMPORARY_FAILURE
/// continues "after several minutes, it SHOULD conclude that the state
/// information is out of sync and close the IKE SA".
pub const TEMPORARY_FAILURE_MAX_RETRIES: u32 = 10;

/// Message ID at which an IKE SA is rekeyed so that Message IDs never wrap.
/// RFC 7296 §2.2: "In the unlikely event that Message IDs grow too large
/// to fit in 32 bits, the IKE SA MUST be closed or rekeyed."
pub const MESSAGE_ID_REKEY_THRESHOLD: u32 = 0xffff_0000;

/// Most outbound requests queued on one IKE SA while the window is full.
/// RFC 7296 §2.3 lets a peer keep only `window` requests outstanding; the
/// queue bounds what `acquire` storms can make us hold.
pub const MAX_QUEUED_REQUESTS: usize = 64;

/// Most Child SAs one IKE SA carries (old and new during rekeys included).
/// RFC 7296 sets no number; NO_ADDITIONAL_SAS (§3.10.1) refuses more.
pub const MAX_CHILD_SAS: usize = 256;

/// Longest delay any timer is armed for; longer configured durations
/// (lifetimes, liveness) are clamped so that no deadline overflows
/// `Instant`. Ten years is "never" for an SA.
pub const MAX_TIMER_DELAY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// UDP port of IKE and ESP after NAT detection (RFC 7296 §2.23, RFC 3948).
pub const NATT_PORT: u16 = 4500;

/// How often the side behind a NAT sends a NAT-keepalive to keep the
/// mapping open (RFC 3948 §4: "The default keepalive interval is 20
/// seconds").
pub const NAT_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(20);

/// The payload of a NAT-keepalive packet (RFC 3948 §2.3).
pub const NAT_KEEPALIVE_OCTET: u8 = 0xff;

/// How far a node that takes over an IKE SA moves the AEAD IV counter of
/// its SK payloads past the replicated value (RFC 5282 §3.1, RFC 7634 §2:
/// an IV is never used twice under one key). The replicated counter is
/// exact when the cluster delivers each snapshot before the datagrams of
/// the same call leave ([`crate::ha`]); the jump keeps nonces unique even
/// if a snapshot were lost, at the cost of 2^32 of the 2^64 IVs per
/// takeover.
///
/// Message IDs get no such jump: RFC 7296 §2.3 has a responder drop a
/// request whose Message ID is not the one it expects (or one it has
/// just answered), so a successor that skipped ahead would never be
/// answered; it resends the dead node's unanswered requests as they were
/// sent instead (§2.1), which keeps both sequences exact.
pub const HA_IV_MARGIN: u64 = 1 << 32;
