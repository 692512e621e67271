//! The IKE part of the TOML schema as written in the file (`[ike]`,
//! `[[connection]]`, `[[connection.child]]`), with byte spans kept for
//! the messages of [`super::ike`]. The contract is
//! `/work/briefs/ike-config-format.md`, documented in CONFIG.md.

use serde::Deserialize;
use toml::Spanned;

/// `[ike]`: endpoint-wide IKE settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawIke {
    pub(crate) port: Option<Spanned<u32>>,
    pub(crate) half_open_max: Option<Spanned<u32>>,
    pub(crate) cookie_threshold: Option<Spanned<u32>>,
    pub(crate) retransmit_base: Option<Spanned<String>>,
    pub(crate) retransmit_tries: Option<Spanned<u32>>,
    pub(crate) fragment_mtu: Option<Spanned<u32>>,
}

/// One `[[connection]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConnection {
    pub(crate) name: Spanned<String>,
    pub(crate) remote_addr: Option<Spanned<String>>,
    pub(crate) local_addr: Option<Spanned<String>>,
    pub(crate) remote_port: Option<Spanned<u32>>,
    pub(crate) local_id: Option<Spanned<String>>,
    pub(crate) remote_id: Option<Spanned<String>>,
    #[serde(alias = "local_auth")]
    pub(crate) auth: Spanned<String>,
    pub(crate) psk: Option<Spanned<String>>,
    pub(crate) certificate: Option<Spanned<String>>,
    pub(crate) private_key: Option<Spanned<String>>,
    pub(crate) ca: Option<Spanned<Vec<Spanned<String>>>>,
    pub(crate) proposals: Option<Spanned<Vec<Spanned<String>>>>,
    pub(crate) start_action: Option<Spanned<String>>,
    pub(crate) dpd_delay: Option<Spanned<String>>,
    pub(crate) rekey_time: Option<Spanned<String>>,
    pub(crate) rekey_jitter: Option<Spanned<String>>,
    pub(crate) lifetime: Option<Spanned<String>>,
    pub(crate) fragmentation: Option<bool>,
    pub(crate) force_encap: Option<bool>,
    pub(crate) send_certreq: Option<bool>,
    pub(crate) send_cert: Option<bool>,
    pub(crate) mobike: Option<bool>,
    pub(crate) pools: Option<Spanned<Vec<Spanned<String>>>>,
    pub(crate) remote_auth: Option<Spanned<String>>,
    pub(crate) eap_tls13: Option<Spanned<String>>,
    pub(crate) eap_tls_fragment_size: Option<Spanned<u32>>,
    pub(crate) local_signature: Option<Spanned<Vec<Spanned<String>>>>,
    pub(crate) remote_signature: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    pub(crate) child: Vec<Spanned<RawChild>>,
}

/// One `[[connection.child]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawChild {
    pub(crate) name: Spanned<String>,
    pub(crate) local_ts: Spanned<Vec<Spanned<String>>>,
    pub(crate) remote_ts: Spanned<Vec<Spanned<String>>>,
    pub(crate) esp_proposals: Option<Spanned<Vec<Spanned<String>>>>,
    pub(crate) ah_proposals: Option<Spanned<Vec<Spanned<String>>>>,
    pub(crate) mode: Option<Spanned<String>>,
    pub(crate) rekey_time: Option<Spanned<String>>,
    pub(crate) rekey_jitter: Option<Spanned<String>>,
    pub(crate) lifetime: Option<Spanned<String>>,
    pub(crate) rekey_bytes: Option<Spanned<u64>>,
    pub(crate) rekey_packets: Option<Spanned<u64>>,
    pub(crate) replay_window: Option<Spanned<u32>>,
    pub(crate) peer_replay_window: Option<Spanned<u32>>,
    pub(crate) priority: Option<Spanned<u32>>,
}

/// One `[[eap_secret]]` table: an End-User's EAP password.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEapSecret {
    pub(crate) id: Spanned<String>,
    pub(crate) secret: Spanned<String>,
}
