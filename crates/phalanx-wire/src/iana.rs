//! Open enums for the IANA registries Phalanx reads and writes.
//!
//! Every registry value is a newtype over its wire width with named
//! constants: an unknown value is data, never a parse error, so a peer can
//! send anything and we can still log and count it.

use core::fmt;

macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        $name:ident($repr:ty) { $( $(#[$cmeta:meta])* $cname:ident = $value:expr ),* $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub $repr);

        impl $name {
            $( $(#[$cmeta])* pub const $cname: $name = $name($value); )*

            /// The registry name of this value, if it is one we know.
            pub fn name(self) -> Option<&'static str> {
                match self {
                    $( $name::$cname => Some(stringify!($cname)), )*
                    _ => None,
                }
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{}({})", stringify!($name), self.0),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self, f)
            }
        }

        impl From<$repr> for $name {
            fn from(v: $repr) -> Self {
                $name(v)
            }
        }
    };
}

open_enum! {
    /// IANA "Assigned Internet Protocol Numbers" (IPv4 protocol / IPv6 next header).
    IpProtocol(u8) {
        /// IPv6 Hop-by-Hop Options (RFC 8200 §4.3).
        HOPOPT = 0,
        /// ICMP (RFC 792).
        ICMP = 1,
        /// IPv4 encapsulation, the inner header of IPv4 tunnel mode (RFC 2003).
        IPV4 = 4,
        /// TCP (RFC 9293).
        TCP = 6,
        /// UDP (RFC 768).
        UDP = 17,
        /// DCCP (RFC 4340): ports in the first four octets, like TCP.
        DCCP = 33,
        /// IPv6 encapsulation, the inner header of IPv6 tunnel mode (RFC 2473).
        IPV6 = 41,
        /// IPv6 Routing header (RFC 8200 §4.4).
        IPV6_ROUTE = 43,
        /// IPv6 Fragment header (RFC 8200 §4.5).
        IPV6_FRAG = 44,
        /// Encapsulating Security Payload (RFC 4303).
        ESP = 50,
        /// Authentication Header (RFC 4302).
        AH = 51,
        /// ICMPv6 (RFC 4443).
        ICMPV6 = 58,
        /// No next header: ESP dummy packets (RFC 4303 §2.6) and IPv6 (RFC 8200 §4.7).
        NO_NEXT_HEADER = 59,
        /// IPv6 Destination Options (RFC 8200 §4.6).
        IPV6_OPTS = 60,
        /// SCTP (RFC 9260).
        SCTP = 132,
        /// Mobility header (RFC 6275).
        MOBILITY = 135,
        /// UDP-Lite (RFC 3828): ports in the first four octets, like UDP.
        UDPLITE = 136,
        /// Host Identity Protocol (RFC 7401).
        HIP = 139,
        /// Shim6 (RFC 5533).
        SHIM6 = 140,
    }
}

impl IpProtocol {
    /// True for the IPv6 extension headers that share the generic
    /// `Next Header | Hdr Ext Len` layout and are walked to find the upper
    /// layer (RFC 8200 §4, RFC 7045). ESP and AH are not in this list: they
    /// are where IPsec processing starts.
    pub fn is_ipv6_extension(self) -> bool {
        matches!(
            self,
            IpProtocol::HOPOPT
                | IpProtocol::IPV6_ROUTE
                | IpProtocol::IPV6_FRAG
                | IpProtocol::IPV6_OPTS
                | IpProtocol::MOBILITY
                | IpProtocol::HIP
                | IpProtocol::SHIM6
        )
    }
}

open_enum! {
    /// IKEv2 Transform Type 1, "Encryption Algorithm Transform IDs" (RFC 7296 §3.3.2 and later).
    EncrId(u16) {
        /// AES-CBC (RFC 3602).
        AES_CBC = 12,
        /// NULL encryption (RFC 2410).
        NULL = 11,
        /// AES-CTR (RFC 3686).
        AES_CTR = 13,
        /// AES-CCM with a 16-octet ICV (RFC 4309).
        AES_CCM_16 = 16,
        /// AES-GCM with an 8-octet ICV (RFC 4106).
        AES_GCM_8 = 18,
        /// AES-GCM with a 12-octet ICV (RFC 4106).
        AES_GCM_12 = 19,
        /// AES-GCM with a 16-octet ICV (RFC 4106).
        AES_GCM_16 = 20,
        /// NULL_AUTH_AES_GMAC, authentication only (RFC 4543).
        NULL_AUTH_AES_GMAC = 21,
        /// ChaCha20-Poly1305 (RFC 7634).
        CHACHA20_POLY1305 = 28,
    }
}

open_enum! {
    /// IKEv2 Transform Type 3, "Integrity Algorithm Transform IDs" (RFC 7296 §3.3.2, RFC 4868).
    IntegId(u16) {
        /// No integrity transform (combined-mode ciphers).
        NONE = 0,
        /// HMAC-SHA1-96 (RFC 2404).
        HMAC_SHA1_96 = 2,
        /// HMAC-SHA-256-128 (RFC 4868).
        HMAC_SHA2_256_128 = 12,
        /// HMAC-SHA-384-192 (RFC 4868).
        HMAC_SHA2_384_192 = 13,
        /// HMAC-SHA-512-256 (RFC 4868).
        HMAC_SHA2_512_256 = 14,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_values_are_data() {
        let p = IpProtocol(253);
        assert_eq!(p.name(), None);
        assert_eq!(format!("{p:?}"), "IpProtocol(253)");
        assert_eq!(format!("{:?}", IpProtocol::ESP), "ESP");
        assert_eq!(EncrId::from(20), EncrId::AES_GCM_16);
    }

    #[test]
    fn extension_headers() {
        assert!(IpProtocol::IPV6_FRAG.is_ipv6_extension());
        assert!(!IpProtocol::ESP.is_ipv6_extension());
        assert!(!IpProtocol::TCP.is_ipv6_extension());
    }
}
