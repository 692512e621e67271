//! The dispatch schemes of the clustered-gateway literature and the two
//! traffic directions, with their configuration names.

use core::fmt;
use core::str::FromStr;

/// How the cluster decides which node processes a packet. Every node runs
/// the same scheme over the same view and the same stream of packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DispatchScheme {
    /// Packet-based round robin: packet `index` goes to member
    /// `index % n`. Stateless; spreads one SA over every node.
    PacketRoundRobin,
    /// Packet-based shortest queue first: a per-stream model of each
    /// member's queue in bytes, computed only from the stream's packets.
    PacketShortestQueue,
    /// Session-based round robin: each new flow (inbound: each SA) goes to
    /// the next member in turn, and keeps it.
    SessionRoundRobin,
    /// Session-based shortest queue first: each new flow goes to the member
    /// whose modelled queue is shortest, and keeps it.
    SessionShortestQueue,
    /// Hash segments: the peer's address (and the SPI when `with_spi`)
    /// selects one of 256 segments, each owned by one member (the HA
    /// plugins of other gateways do this).
    HashSegments {
        /// Include the SPI in the segment hash (spreads the SAs of one
        /// peer; without it one peer lands on one node).
        with_spi: bool,
    },
}

impl DispatchScheme {
    /// Every scheme, in the order of their configuration names.
    pub const ALL: [DispatchScheme; 6] = [
        DispatchScheme::PacketRoundRobin,
        DispatchScheme::PacketShortestQueue,
        DispatchScheme::SessionRoundRobin,
        DispatchScheme::SessionShortestQueue,
        DispatchScheme::HashSegments { with_spi: false },
        DispatchScheme::HashSegments { with_spi: true },
    ];

    /// True for the schemes that spread the packets of one SA over all
    /// nodes (and so need the striped sequence numbers of the contract).
    pub fn is_packet_based(self) -> bool {
        matches!(
            self,
            DispatchScheme::PacketRoundRobin | DispatchScheme::PacketShortestQueue
        )
    }

    /// True for the schemes that may send the outbound packets of one SA
    /// from several nodes: the packet-based ones and, through its flows,
    /// the session-based ones (the hash schemes give an SA one node).
    pub fn spreads_one_sa(self) -> bool {
        !matches!(self, DispatchScheme::HashSegments { .. })
    }

    /// True for the schemes that keep a flow table.
    pub fn is_session_based(self) -> bool {
        matches!(
            self,
            DispatchScheme::SessionRoundRobin | DispatchScheme::SessionShortestQueue
        )
    }

    /// True for the schemes whose decisions depend on the stream's earlier
    /// packets (a flow table or queue models).
    pub fn is_stateful(self) -> bool {
        self.is_session_based() || self == DispatchScheme::PacketShortestQueue
    }

    /// The configuration name (`packet-rr`, `packet-sqf`, `session-rr`,
    /// `session-sqf`, `hash-src`, `hash-src-spi`).
    pub fn name(self) -> &'static str {
        match self {
            DispatchScheme::PacketRoundRobin => "packet-rr",
            DispatchScheme::PacketShortestQueue => "packet-sqf",
            DispatchScheme::SessionRoundRobin => "session-rr",
            DispatchScheme::SessionShortestQueue => "session-sqf",
            DispatchScheme::HashSegments { with_spi: false } => "hash-src",
            DispatchScheme::HashSegments { with_spi: true } => "hash-src-spi",
        }
    }
}

impl fmt::Display for DispatchScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A dispatch scheme name that is not one of [`DispatchScheme::ALL`]'s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownScheme {
    /// The name as given.
    pub name: String,
}

impl fmt::Display for UnknownScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown dispatch scheme `{}` (expected one of",
            self.name
        )?;
        for (i, scheme) in DispatchScheme::ALL.iter().enumerate() {
            let sep = if i == 0 { " " } else { ", " };
            write!(f, "{sep}{scheme}")?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for UnknownScheme {}

impl FromStr for DispatchScheme {
    type Err = UnknownScheme;

    fn from_str(name: &str) -> Result<DispatchScheme, UnknownScheme> {
        DispatchScheme::ALL
            .into_iter()
            .find(|scheme| scheme.name() == name)
            .ok_or_else(|| UnknownScheme {
                name: name.to_owned(),
            })
    }
}

/// The direction of a stream, seen from the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// Cleartext from the protected site, leaving as ESP on an outbound SA.
    Outbound,
    /// ESP from the peer gateway on an inbound SA.
    Inbound,
}

impl Direction {
    /// `outbound` or `inbound`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Outbound => "outbound",
            Direction::Inbound => "inbound",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for scheme in DispatchScheme::ALL {
            assert_eq!(scheme.to_string().parse::<DispatchScheme>(), Ok(scheme));
        }
        assert_eq!(
            "hash-src-spi".parse(),
            Ok(DispatchScheme::HashSegments { with_spi: true })
        );
    }

    #[test]
    fn unknown_name_is_refused_with_the_choices() {
        let Err(err) = "packet-lru".parse::<DispatchScheme>() else {
            panic!("an unknown name was accepted");
        };
        assert_eq!(err.name, "packet-lru");
        let text = err.to_string();
        assert!(
            text.contains("packet-lru") && text.contains("session-sqf"),
            "{text}"
        );
        assert!("".parse::<DispatchScheme>().is_err());
        assert!("PACKET-RR".parse::<DispatchScheme>().is_err());
    }

    #[test]
    fn classes_of_schemes() {
        let packet: Vec<_> = DispatchScheme::ALL
            .into_iter()
            .filter(|s| s.is_packet_based())
            .collect();
        assert_eq!(
            packet,
            [
                DispatchScheme::PacketRoundRobin,
                DispatchScheme::PacketShortestQueue
            ]
        );
        let session = DispatchScheme::ALL
            .into_iter()
            .filter(|s| s.is_session_based())
            .count();
        assert_eq!(session, 2);
        assert_eq!(Direction::Inbound.to_string(), "inbound");
    }
}
