//! The crate's limits and defaults, each with where it comes from.

/// EAP-TLS: TLS octets per EAP-TLS message we send (RFC 5216 §2.1.5 leaves
/// the size to the implementation). 1000 keeps the IKE_AUTH message that
/// carries it under 1280 octets, the IPv6 minimum MTU: 1000 + 10 octets of
/// EAP-TLS header + 4 of EAP payload header + 4 of SK payload header, 16 of
/// IV, up to 16 of padding and 16 of ICV, 28 of IKE header, 4 of non-ESP
/// marker, 8 of UDP and 40 of IPv6 header: 1146. strongSwan's default is
/// 1024 octets for the whole EAP message.
pub const TLS_FRAGMENT_SIZE: usize = 1000;

/// EAP-TLS: the smallest fragment size a configuration may set; below it
/// a certificate chain needs hundreds of round trips.
pub const TLS_MIN_FRAGMENT_SIZE: usize = 64;

/// EAP-TLS: the largest TLS message (all fragments of one flight) the peer
/// may send us, announced or reassembled. A client flight is a certificate
/// chain, a key share and a signature; strongSwan refuses more than
/// 4 × (16384 + 2048) octets, 64 KiB is as generous for a client.
pub const TLS_MAX_MESSAGE_LEN: usize = 64 * 1024;

/// EAP-TLS: Responses one exchange may take before it fails. A full
/// handshake takes 4 to 5 rounds without fragmentation; 64 KiB from the
/// peer in 1000-octet fragments is 66 more. strongSwan allows 32
/// messages.
pub const TLS_MAX_ROUNDS: usize = 128;

/// EAP-TLS: Key_Material is 128 octets, the MSK its first 64 and the EMSK
/// the next 64 (RFC 5216 §2.3, RFC 9190 §2.3).
pub const TLS_KEY_MATERIAL_LEN: usize = 128;

/// The MSK and the EMSK are 64 octets each (RFC 5247 §1.2).
pub const MSK_LEN: usize = 64;
