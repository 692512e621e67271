//! The IKE App channel's messages, as the daemon frames them inside the
//! cluster's `App` message (the cluster only orders the octets):
//!
//! ```text
//! 0      version (1)
//! 1      kind: 1 state, 2 removed
//! 2..6   owner node id (u32, network order): who runs the IKE SA
//! 6..14  hold number (u64): the sender's write-ahead hold, 0 for none
//! kind 1: the rest is `phalanx_ike::IkeSaState::encode`
//! kind 2: SPIi (8) | SPIr (8) | connection name length (u16) | name (UTF-8)
//! ```
//!
//! The state holds the IKE SA's and its Child SAs' keys: the cluster link
//! must be private (Corosync's knet `crypto_cipher`/`crypto_hash`).
//! Decoding never panics; anything malformed is a typed error.

use phalanx_cluster::NodeId;

/// The version octet.
pub const VERSION: u8 = 1;
const KIND_STATE: u8 = 1;
const KIND_REMOVED: u8 = 2;
const HEADER_LEN: usize = 14;

/// One message of the IKE channel.
#[derive(Clone, PartialEq, Eq)]
pub enum IkeAppMessage {
    /// An IKE SA's new state.
    State {
        /// The node that runs it.
        owner: NodeId,
        /// The sender's hold number (0: none).
        hold: u64,
        /// `IkeSaState::encode` octets.
        state: Vec<u8>,
    },
    /// An IKE SA is gone.
    Removed {
        /// The node that ran it.
        owner: NodeId,
        /// The sender's hold number (0: none).
        hold: u64,
        /// Initiator's and responder's SPIs.
        spis: ([u8; 8], [u8; 8]),
        /// Its connection.
        connection: String,
    },
}

impl core::fmt::Debug for IkeAppMessage {
    /// Without the state's octets (they hold keys).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            IkeAppMessage::State { owner, hold, state } => f
                .debug_struct("State")
                .field("owner", owner)
                .field("hold", hold)
                .field("len", &state.len())
                .finish_non_exhaustive(),
            IkeAppMessage::Removed {
                owner,
                hold,
                spis,
                connection,
            } => f
                .debug_struct("Removed")
                .field("owner", owner)
                .field("hold", hold)
                .field("spis", spis)
                .field("connection", connection)
                .finish(),
        }
    }
}

/// Why a message was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than its fields.
    Truncated,
    /// A version this daemon does not read.
    Version(u8),
    /// An unknown kind.
    Kind(u8),
    /// The connection name is not UTF-8, or octets follow it.
    Invalid,
}

impl IkeAppMessage {
    /// The hold number.
    pub fn hold(&self) -> u64 {
        match self {
            IkeAppMessage::State { hold, .. } | IkeAppMessage::Removed { hold, .. } => *hold,
        }
    }

    /// The octets.
    pub fn encode(&self) -> Vec<u8> {
        let (kind, owner, hold) = match self {
            IkeAppMessage::State { owner, hold, .. } => (KIND_STATE, owner, hold),
            IkeAppMessage::Removed { owner, hold, .. } => (KIND_REMOVED, owner, hold),
        };
        let mut out = Vec::with_capacity(HEADER_LEN + 64);
        out.extend_from_slice(&[VERSION, kind]);
        out.extend_from_slice(&owner.0.to_be_bytes());
        out.extend_from_slice(&hold.to_be_bytes());
        match self {
            IkeAppMessage::State { state, .. } => out.extend_from_slice(state),
            IkeAppMessage::Removed {
                spis, connection, ..
            } => {
                out.extend_from_slice(&spis.0);
                out.extend_from_slice(&spis.1);
                // Connection names are short (the file's); cut at u16.
                let name = &connection.as_bytes()[..connection.len().min(usize::from(u16::MAX))];
                out.extend_from_slice(&(name.len() as u16).to_be_bytes());
                out.extend_from_slice(name);
            }
        }
        out
    }

    /// Reads a message; never panics.
    pub fn decode(bytes: &[u8]) -> Result<IkeAppMessage, WireError> {
        let header = bytes.get(..HEADER_LEN).ok_or(WireError::Truncated)?;
        if header[0] != VERSION {
            return Err(WireError::Version(header[0]));
        }
        let owner = NodeId(u32::from_be_bytes([
            header[2], header[3], header[4], header[5],
        ]));
        let mut hold = [0_u8; 8];
        hold.copy_from_slice(&header[6..HEADER_LEN]);
        let hold = u64::from_be_bytes(hold);
        let body = &bytes[HEADER_LEN..];
        match header[1] {
            KIND_STATE => Ok(IkeAppMessage::State {
                owner,
                hold,
                state: body.to_vec(),
            }),
            KIND_REMOVED => {
                let fixed = body.get(..18).ok_or(WireError::Truncated)?;
                let mut spi_i = [0_u8; 8];
                let mut spi_r = [0_u8; 8];
                spi_i.copy_from_slice(&fixed[..8]);
                spi_r.copy_from_slice(&fixed[8..16]);
                let len = usize::from(u16::from_be_bytes([fixed[16], fixed[17]]));
                let name = body.get(18..18 + len).ok_or(WireError::Truncated)?;
                if body.len() != 18 + len {
                    return Err(WireError::Invalid);
                }
                let connection =
                    String::from_utf8(name.to_vec()).map_err(|_| WireError::Invalid)?;
                Ok(IkeAppMessage::Removed {
                    owner,
                    hold,
                    spis: (spi_i, spi_r),
                    connection,
                })
            }
            other => Err(WireError::Kind(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let messages = [
            IkeAppMessage::State {
                owner: NodeId(3),
                hold: 42,
                state: vec![1, 2, 3, 4],
            },
            IkeAppMessage::Removed {
                owner: NodeId(65535),
                hold: 0,
                spis: ([1; 8], [2; 8]),
                connection: "site-b".into(),
            },
        ];
        for m in messages {
            let bytes = m.encode();
            assert_eq!(IkeAppMessage::decode(&bytes), Ok(m.clone()));
            assert_eq!(IkeAppMessage::decode(&bytes).unwrap().hold(), m.hold());
        }
    }

    /// Every prefix and a changed version or kind are refused, never a
    /// panic; a removal with trailing octets is refused.
    #[test]
    fn malformed_is_refused() {
        let removed = IkeAppMessage::Removed {
            owner: NodeId(1),
            hold: 7,
            spis: ([9; 8], [8; 8]),
            connection: "c".into(),
        }
        .encode();
        for n in 0..removed.len() {
            assert!(IkeAppMessage::decode(&removed[..n]).is_err(), "prefix {n}");
        }
        let mut v = removed.clone();
        v[0] = 2;
        assert_eq!(IkeAppMessage::decode(&v), Err(WireError::Version(2)));
        let mut k = removed.clone();
        k[1] = 9;
        assert_eq!(IkeAppMessage::decode(&k), Err(WireError::Kind(9)));
        let mut long = removed;
        long.push(0);
        assert_eq!(IkeAppMessage::decode(&long), Err(WireError::Invalid));
    }
}
