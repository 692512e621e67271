//! The IKE answers: IKE SAs with their Child SAs (`phalanxctl ike`), and
//! the outcome of `initiate` / `terminate`.

use serde::{Deserialize, Serialize};

/// One IKE SA (RFC 7296 §1.2) as the daemon sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IkeSaReport {
    /// The connection's name.
    pub connection: String,
    /// `"INIT_SENT"`, `"AUTH_SENT"`, `"HALF_OPEN"`, `"ESTABLISHED"`,
    /// `"REKEYING"`, `"REKEYED"` or `"DELETING"`.
    pub state: String,
    /// Whether this end initiated the SA (or its last rekey).
    pub initiator: bool,
    /// Our address and port (`"192.0.2.1:500"`).
    pub local: String,
    /// The peer's address and port.
    pub remote: String,
    /// Our identity (strongSwan syntax).
    pub local_id: String,
    /// The peer's authenticated identity (empty before IKE_AUTH).
    pub remote_id: String,
    /// The initiator's IKE SPI, 16 hex digits.
    pub spi_i: String,
    /// The responder's IKE SPI, 16 hex digits (zeros until known).
    pub spi_r: String,
    /// The negotiated transforms, IANA names joined by `/`
    /// (`"AES_GCM_16_128/PRF_HMAC_SHA2_256/CURVE25519"`); empty before
    /// IKE_SA_INIT completes.
    pub algorithms: String,
    /// Whether a NAT was detected or UDP encapsulation forced.
    pub nat: bool,
    /// Seconds since IKE_AUTH completed.
    #[serde(default)]
    pub established_seconds: Option<u64>,
    /// Seconds until the next rekey, when one is scheduled.
    #[serde(default)]
    pub rekey_in_seconds: Option<u64>,
    /// Inner addresses: leased to the peer (a gateway's End-User) or given
    /// to us, in a CFG_REPLY (RFC 7296 §2.19).
    #[serde(default)]
    pub virtual_ips: Vec<String>,
    /// How the peer authenticated: `"psk"`, `"pubkey"`, or the EAP method
    /// (`"eap-mschapv2"`).
    #[serde(default)]
    pub peer_auth: String,
    /// The Child SAs.
    pub children: Vec<ChildSaReport>,
}

/// One Child SA (RFC 7296 §1.3) and its traffic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildSaReport {
    /// The child's name in its connection.
    pub name: String,
    /// `"INSTALLED"` (both directions in the data plane), `"INSTALLING"`
    /// (inbound only, the exchange not finished) or `"REKEYED"` (replaced,
    /// waiting for its Delete).
    pub state: String,
    /// Our (inbound) SPI.
    pub spi_in: u32,
    /// The peer's (outbound) SPI.
    pub spi_out: u32,
    /// The ESP transforms (`"AES_GCM_16_128"`, `"AES_CBC_256/HMAC_SHA2_256_128"`),
    /// or AH's (`"AH/HMAC_SHA2_256_128"`).
    pub algorithms: String,
    /// Extended sequence numbers.
    pub esn: bool,
    /// `"tunnel"` or `"transport"`.
    pub mode: String,
    /// UDP-encapsulated ESP (RFC 3948).
    pub encap: bool,
    /// Our side's traffic selectors (`"10.1.0.0/24"`, `"10.0.0.1-10.0.0.9[tcp/80]"`).
    pub local_ts: Vec<String>,
    /// The peer's side's traffic selectors.
    pub remote_ts: Vec<String>,
    /// Seconds since it was installed.
    pub installed_seconds: u64,
    /// Seconds until its rekey, when one is scheduled.
    #[serde(default)]
    pub rekey_in_seconds: Option<u64>,
    /// Bytes received and accepted.
    pub bytes_in: u64,
    /// Packets received and accepted.
    pub packets_in: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Packets sent.
    pub packets_out: u64,
    /// The key exchange methods that made its keys: the KE transform and
    /// each RFC 9370 additional one (`["CURVE25519", "ML_KEM_768"]`);
    /// empty without PFS.
    #[serde(default)]
    pub key_exchanges: Vec<String>,
}

/// What `initiate` or `terminate` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionResult {
    /// The connection.
    pub connection: String,
    /// `"queued"` (the request was handed to IKE) or `"established"`
    /// (`initiate` waited and every SA is up), `"terminating"`.
    pub outcome: String,
    /// A human-readable line.
    pub message: String,
}

/// One virtual-IP pool (`phalanxctl pools`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolReport {
    /// The pool's name.
    pub name: String,
    /// Addresses in it (saturating at 2^64 - 1).
    pub size: u64,
    /// Leases held by a connected End-User.
    pub online: u64,
    /// Leases kept for End-Users who are away.
    pub offline: u64,
}
