//! Open enums for the IKEv2 IANA registries ("Internet Key Exchange Version
//! 2 (IKEv2) Parameters"). An unknown value is data, never a parse error.
//!
//! Transform Types 1 and 3 share their registries with ESP and AH and live in
//! [`crate::iana`]; they are re-exported here as [`EncrId`] and [`IntegId`].

use core::fmt;

pub use crate::iana::{EncrId, IntegId};

open_enum! {
    /// IKEv2 Exchange Types (RFC 7296 §3.1 and later).
    ExchangeType(u8) {
        /// IKE_SA_INIT (RFC 7296 §1.2).
        IKE_SA_INIT = 34,
        /// IKE_AUTH (RFC 7296 §1.2).
        IKE_AUTH = 35,
        /// CREATE_CHILD_SA (RFC 7296 §1.3).
        CREATE_CHILD_SA = 36,
        /// INFORMATIONAL (RFC 7296 §1.4).
        INFORMATIONAL = 37,
        /// IKE_SESSION_RESUME (RFC 5723).
        IKE_SESSION_RESUME = 38,
        /// IKE_INTERMEDIATE (RFC 9242).
        IKE_INTERMEDIATE = 43,
        /// IKE_FOLLOWUP_KE (RFC 9370).
        IKE_FOLLOWUP_KE = 44,
    }
}

open_enum! {
    /// IKEv2 Payload Types (RFC 7296 §3.2 and later).
    PayloadType(u8) {
        /// No Next Payload: the end of a payload chain.
        NONE = 0,
        /// Security Association (§3.3).
        SA = 33,
        /// Key Exchange (§3.4).
        KE = 34,
        /// Identification - Initiator (§3.5).
        #[allow(non_upper_case_globals)]
        IDi = 35,
        /// Identification - Responder (§3.5).
        #[allow(non_upper_case_globals)]
        IDr = 36,
        /// Certificate (§3.6).
        CERT = 37,
        /// Certificate Request (§3.7).
        CERTREQ = 38,
        /// Authentication (§3.8).
        AUTH = 39,
        /// Nonce, Ni or Nr (§3.9).
        NONCE = 40,
        /// Notify (§3.10).
        NOTIFY = 41,
        /// Delete (§3.11).
        DELETE = 42,
        /// Vendor ID (§3.12).
        VENDOR_ID = 43,
        /// Traffic Selector - Initiator (§3.13).
        #[allow(non_upper_case_globals)]
        TSi = 44,
        /// Traffic Selector - Responder (§3.13).
        #[allow(non_upper_case_globals)]
        TSr = 45,
        /// Encrypted and Authenticated (§3.14).
        SK = 46,
        /// Configuration (§3.15).
        CP = 47,
        /// Extensible Authentication (§3.16).
        EAP = 48,
        /// Encrypted and Authenticated Fragment (RFC 7383 §2.5).
        SKF = 53,
    }
}

open_enum! {
    /// IKEv2 Transform Types (RFC 7296 §3.3.2, renamed and extended by RFC 9370).
    TransformType(u8) {
        /// Encryption Algorithm (ENCR); ids are [`EncrId`].
        ENCR = 1,
        /// Pseudorandom Function (PRF); ids are [`PrfId`].
        PRF = 2,
        /// Integrity Algorithm (INTEG); ids are [`IntegId`].
        INTEG = 3,
        /// Key Exchange Method (KE), formerly Diffie-Hellman Group; ids are [`KeId`].
        KE = 4,
        /// Extended Sequence Numbers (ESN); ids are [`EsnId`].
        ESN = 5,
        /// Additional Key Exchange 1 (RFC 9370); ids are [`KeId`].
        ADDKE1 = 6,
        /// Additional Key Exchange 2 (RFC 9370).
        ADDKE2 = 7,
        /// Additional Key Exchange 3 (RFC 9370).
        ADDKE3 = 8,
        /// Additional Key Exchange 4 (RFC 9370).
        ADDKE4 = 9,
        /// Additional Key Exchange 5 (RFC 9370).
        ADDKE5 = 10,
        /// Additional Key Exchange 6 (RFC 9370).
        ADDKE6 = 11,
        /// Additional Key Exchange 7 (RFC 9370).
        ADDKE7 = 12,
    }
}

impl TransformType {
    /// True for ADDKE1..ADDKE7 (RFC 9370).
    pub fn is_additional_key_exchange(self) -> bool {
        (6..=12).contains(&self.0)
    }
}

open_enum! {
    /// Transform Type 2, "Pseudorandom Function Transform IDs" (RFC 7296 §3.3.2, RFC 4868).
    PrfId(u16) {
        /// PRF_HMAC_SHA1 (RFC 2104).
        HMAC_SHA1 = 2,
        /// PRF_AES128_XCBC (RFC 4434).
        AES128_XCBC = 4,
        /// PRF_HMAC_SHA2_256 (RFC 4868).
        HMAC_SHA2_256 = 5,
        /// PRF_HMAC_SHA2_384 (RFC 4868).
        HMAC_SHA2_384 = 6,
        /// PRF_HMAC_SHA2_512 (RFC 4868).
        HMAC_SHA2_512 = 7,
        /// PRF_AES128_CMAC (RFC 4615).
        AES128_CMAC = 8,
    }
}

open_enum! {
    /// Transform Type 4, "Key Exchange Method Transform IDs", formerly the
    /// Diffie-Hellman groups (RFC 7296 §3.3.2, RFC 9370); also the Group Num
    /// of the KE payload (§3.4).
    KeId(u16) {
        /// NONE: no key exchange (RFC 9370: an optional additional key exchange).
        NONE = 0,
        /// 2048-bit MODP group (RFC 3526).
        MODP_2048 = 14,
        /// 3072-bit MODP group (RFC 3526).
        MODP_3072 = 15,
        /// 4096-bit MODP group (RFC 3526).
        MODP_4096 = 16,
        /// 256-bit random ECP group, P-256 (RFC 5903).
        ECP_256 = 19,
        /// 384-bit random ECP group, P-384 (RFC 5903).
        ECP_384 = 20,
        /// 521-bit random ECP group, P-521 (RFC 5903).
        ECP_521 = 21,
        /// Curve25519 (RFC 8031).
        CURVE25519 = 31,
        /// Curve448 (RFC 8031).
        CURVE448 = 32,
        /// ML-KEM-512 (draft-ietf-ipsecme-ikev2-mlkem).
        ML_KEM_512 = 35,
        /// ML-KEM-768 (draft-ietf-ipsecme-ikev2-mlkem).
        ML_KEM_768 = 36,
        /// ML-KEM-1024 (draft-ietf-ipsecme-ikev2-mlkem).
        ML_KEM_1024 = 37,
    }
}

open_enum! {
    /// Transform Type 5, "Extended Sequence Numbers Transform IDs" (RFC 7296 §3.3.2).
    EsnId(u16) {
        /// No Extended Sequence Numbers.
        NO = 0,
        /// Extended Sequence Numbers.
        YES = 1,
    }
}

open_enum! {
    /// IKEv2 Transform Attribute Types (RFC 7296 §3.3.5).
    TransformAttributeType(u16) {
        /// Key Length in bits (TV format).
        KEY_LENGTH = 14,
    }
}

open_enum! {
    /// IKEv2 Security Protocol Identifiers (RFC 7296 §3.3.1).
    ProtocolId(u8) {
        /// Reserved; what a Notify carries when no SPI applies (§3.10).
        NONE = 0,
        /// IKE.
        IKE = 1,
        /// Authentication Header.
        AH = 2,
        /// Encapsulating Security Payload.
        ESP = 3,
    }
}

open_enum! {
    /// IKEv2 Authentication Method (RFC 7296 §3.8 and later).
    AuthMethod(u8) {
        /// RSA Digital Signature with PKCS#1 v1.5 (§3.8).
        RSA_SIG = 1,
        /// Shared Key Message Integrity Code (§3.8).
        SHARED_KEY_MIC = 2,
        /// DSS Digital Signature (§3.8).
        DSS = 3,
        /// ECDSA with SHA-256 on P-256 (RFC 4754).
        ECDSA_256 = 9,
        /// ECDSA with SHA-384 on P-384 (RFC 4754).
        ECDSA_384 = 10,
        /// ECDSA with SHA-512 on P-521 (RFC 4754).
        ECDSA_521 = 11,
        /// NULL Authentication (RFC 7619).
        NULL = 13,
        /// Digital Signature with an AlgorithmIdentifier (RFC 7427 §3).
        DIGITAL_SIGNATURE = 14,
    }
}

open_enum! {
    /// IKEv2 Identification Payload ID Types (RFC 7296 §3.5).
    IdType(u8) {
        /// A single four-octet IPv4 address.
        IPV4_ADDR = 1,
        /// A fully qualified domain name string.
        FQDN = 2,
        /// An RFC 822 email address string.
        RFC822_ADDR = 3,
        /// A single sixteen-octet IPv6 address.
        IPV6_ADDR = 5,
        /// The binary DER encoding of an ASN.1 X.500 Distinguished Name.
        DER_ASN1_DN = 9,
        /// The binary DER encoding of an ASN.1 X.509 GeneralName.
        DER_ASN1_GN = 10,
        /// An opaque octet stream for vendor-specific information.
        KEY_ID = 11,
        /// No identity (RFC 7619 §3.1, with NULL authentication).
        NULL = 13,
    }
}

open_enum! {
    /// IKEv2 Certificate Encodings (RFC 7296 §3.6).
    CertEncoding(u8) {
        /// PKCS #7 wrapped X.509 certificate.
        PKCS7_WRAPPED_X509 = 1,
        /// X.509 Certificate - Signature (DER).
        X509_SIGNATURE = 4,
        /// Certificate Revocation List (CRL).
        CRL = 7,
        /// Hash and URL of X.509 certificate.
        HASH_AND_URL_X509 = 12,
        /// Hash and URL of X.509 bundle.
        HASH_AND_URL_X509_BUNDLE = 13,
        /// OCSP Content (RFC 4806).
        OCSP_CONTENT = 14,
        /// Raw Public Key (RFC 7670).
        RAW_PUBLIC_KEY = 15,
    }
}

open_enum! {
    /// IKEv2 Notify Message Types (RFC 7296 §3.10.1 and later). Types below
    /// 16384 report errors, the rest status ([`NotifyType::is_error`]).
    NotifyType(u16) {
        /// A critical payload was not understood (§3.10.1).
        UNSUPPORTED_CRITICAL_PAYLOAD = 1,
        /// A message arrived for an IKE SA we do not know (§3.10.1).
        INVALID_IKE_SPI = 4,
        /// The major version is not 2 (§3.10.1).
        INVALID_MAJOR_VERSION = 5,
        /// A message was malformed (§3.10.1).
        INVALID_SYNTAX = 7,
        /// The message ID is outside the window (§3.10.1).
        INVALID_MESSAGE_ID = 9,
        /// A packet arrived for an unknown ESP or AH SPI (§3.10.1).
        INVALID_SPI = 11,
        /// None of the proposals was acceptable (§3.10.1).
        NO_PROPOSAL_CHOSEN = 14,
        /// The KE group is not the one the responder wants (§3.10.1).
        INVALID_KE_PAYLOAD = 17,
        /// The AUTH payload did not verify (§3.10.1).
        AUTHENTICATION_FAILED = 24,
        /// Only one pair of selectors is acceptable (§3.10.1).
        SINGLE_PAIR_REQUIRED = 34,
        /// No more Child SAs are accepted on this IKE SA (§3.10.1).
        NO_ADDITIONAL_SAS = 35,
        /// No internal address could be assigned (§3.10.1).
        INTERNAL_ADDRESS_FAILURE = 36,
        /// A CP payload was required but missing (§3.10.1).
        FAILED_CP_REQUIRED = 37,
        /// The traffic selectors are not acceptable (§3.10.1).
        TS_UNACCEPTABLE = 38,
        /// A decapsulated packet did not match the SA's selectors (§3.10.1).
        INVALID_SELECTORS = 39,
        /// The new addresses are not acceptable (RFC 4555).
        UNACCEPTABLE_ADDRESSES = 40,
        /// A NAT was detected where none is allowed (RFC 4555).
        UNEXPECTED_NAT_DETECTED = 41,
        /// Use the assigned home address (RFC 5026).
        USE_ASSIGNED_HOA = 42,
        /// Try again later (§3.10.1).
        TEMPORARY_FAILURE = 43,
        /// The Child SA to rekey or delete does not exist (§3.10.1).
        CHILD_SA_NOT_FOUND = 44,
        /// Unknown group (G-IKEv2, draft-ietf-ipsecme-g-ikev2).
        INVALID_GROUP_ID = 45,
        /// Not authorized for the group (G-IKEv2, draft-ietf-ipsecme-g-ikev2).
        AUTHORIZATION_FAILED = 46,
        /// The responder lost the state of an IKE_FOLLOWUP_KE (RFC 9370).
        STATE_NOT_FOUND = 47,
        /// This is the only IKE SA with the peer (§3.10.1).
        INITIAL_CONTACT = 16384,
        /// Number of concurrent requests the sender accepts (§3.10.1).
        SET_WINDOW_SIZE = 16385,
        /// Other selectors could be accepted in another SA (§3.10.1).
        ADDITIONAL_TS_POSSIBLE = 16386,
        /// IPComp is supported, with its CPI and transform (§3.10.1).
        IPCOMP_SUPPORTED = 16387,
        /// Hash of the sender's SPIs, address and port (§2.23).
        NAT_DETECTION_SOURCE_IP = 16388,
        /// Hash of the SPIs and the receiver's address and port (§2.23).
        NAT_DETECTION_DESTINATION_IP = 16389,
        /// Stateless cookie (§2.6).
        COOKIE = 16390,
        /// Transport mode requested (§1.3.1).
        USE_TRANSPORT_MODE = 16391,
        /// Hash-and-URL certificates can be fetched (§3.10.1).
        HTTP_CERT_LOOKUP_SUPPORTED = 16392,
        /// The SPI of the SA being rekeyed (§1.3.3).
        REKEY_SA = 16393,
        /// TFC padding is not supported (§1.3.1).
        ESP_TFC_PADDING_NOT_SUPPORTED = 16394,
        /// Non-first fragments are sent on this SA too (§1.3.1).
        NON_FIRST_FRAGMENTS_ALSO = 16395,
        /// MOBIKE is supported (RFC 4555).
        MOBIKE_SUPPORTED = 16396,
        /// Another IPv4 address of the sender (RFC 4555).
        ADDITIONAL_IP4_ADDRESS = 16397,
        /// Another IPv6 address of the sender (RFC 4555).
        ADDITIONAL_IP6_ADDRESS = 16398,
        /// The sender has no other addresses (RFC 4555).
        NO_ADDITIONAL_ADDRESSES = 16399,
        /// Update the SA addresses to this message's (RFC 4555).
        UPDATE_SA_ADDRESSES = 16400,
        /// Return routability check (RFC 4555).
        COOKIE2 = 16401,
        /// No NAT is allowed on this path (RFC 4555).
        NO_NATS_ALLOWED = 16402,
        /// IKE fragmentation is supported (RFC 7383 §2.3).
        IKEV2_FRAGMENTATION_SUPPORTED = 16430,
        /// Hash algorithms accepted in signatures (RFC 7427 §4).
        SIGNATURE_HASH_ALGORITHMS = 16431,
        /// A Postquantum Preshared Key is wanted (RFC 8784).
        USE_PPK = 16435,
        /// The PPK_ID in use (RFC 8784).
        PPK_IDENTITY = 16436,
        /// An AUTH computed without the PPK (RFC 8784).
        NO_PPK_AUTH = 16437,
        /// IKE_INTERMEDIATE is supported (RFC 9242).
        INTERMEDIATE_EXCHANGE_SUPPORTED = 16438,
        /// A follow-up key exchange is to come (RFC 9370).
        ADDITIONAL_KEY_EXCHANGE = 16441,
    }
}

impl NotifyType {
    /// RFC 7296 §3.10.1: "Types in the range 0 - 16383 are intended for
    /// reporting errors"; the rest are status notifications.
    pub fn is_error(self) -> bool {
        self.0 < 16384
    }
}

open_enum! {
    /// IKEv2 Traffic Selector Types (RFC 7296 §3.13.1 and later).
    TsType(u8) {
        /// An IPv4 address range with protocol and ports (16 octets).
        TS_IPV4_ADDR_RANGE = 7,
        /// An IPv6 address range with protocol and ports (40 octets).
        TS_IPV6_ADDR_RANGE = 8,
        /// Fibre Channel address range (RFC 4595).
        TS_FC_ADDR_RANGE = 9,
        /// Security label (RFC 9478).
        TS_SECLABEL = 10,
    }
}

open_enum! {
    /// IKEv2 Hash Algorithms for digital signatures (RFC 7427 §7, RFC 8420).
    HashAlgorithm(u16) {
        /// SHA-1 (RFC 7427).
        SHA1 = 1,
        /// SHA2-256 (RFC 7427).
        SHA2_256 = 2,
        /// SHA2-384 (RFC 7427).
        SHA2_384 = 3,
        /// SHA2-512 (RFC 7427).
        SHA2_512 = 4,
        /// Identity, for Ed25519 and Ed448 (RFC 8420).
        IDENTITY = 5,
    }
}

open_enum! {
    /// IKEv2 Configuration Payload CFG Types (RFC 7296 §3.15).
    CfgType(u8) {
        /// CFG_REQUEST.
        REQUEST = 1,
        /// CFG_REPLY.
        REPLY = 2,
        /// CFG_SET.
        SET = 3,
        /// CFG_ACK.
        ACK = 4,
    }
}

open_enum! {
    /// IKEv2 Configuration Payload Attribute Types (RFC 7296 §3.15.1).
    CfgAttributeType(u16) {
        /// INTERNAL_IP4_ADDRESS.
        INTERNAL_IP4_ADDRESS = 1,
        /// INTERNAL_IP4_NETMASK.
        INTERNAL_IP4_NETMASK = 2,
        /// INTERNAL_IP4_DNS.
        INTERNAL_IP4_DNS = 3,
        /// INTERNAL_IP4_NBNS.
        INTERNAL_IP4_NBNS = 4,
        /// INTERNAL_IP4_DHCP.
        INTERNAL_IP4_DHCP = 6,
        /// APPLICATION_VERSION.
        APPLICATION_VERSION = 7,
        /// INTERNAL_IP6_ADDRESS.
        INTERNAL_IP6_ADDRESS = 8,
        /// INTERNAL_IP6_DNS.
        INTERNAL_IP6_DNS = 10,
        /// INTERNAL_IP6_DHCP.
        INTERNAL_IP6_DHCP = 12,
        /// INTERNAL_IP4_SUBNET.
        INTERNAL_IP4_SUBNET = 13,
        /// SUPPORTED_ATTRIBUTES.
        SUPPORTED_ATTRIBUTES = 14,
        /// INTERNAL_IP6_SUBNET.
        INTERNAL_IP6_SUBNET = 15,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_registries() {
        assert_eq!(format!("{:?}", PayloadType::IDi), "IDi");
        assert_eq!(format!("{:?}", PayloadType(99)), "PayloadType(99)");
        assert_eq!(ExchangeType::from(43), ExchangeType::IKE_INTERMEDIATE);
        assert_eq!(KeId::ML_KEM_768.0, 36);
        assert_eq!(TransformType::ADDKE7.0, 12);
    }

    #[test]
    fn error_and_status_notifies() {
        assert!(NotifyType::UNSUPPORTED_CRITICAL_PAYLOAD.is_error());
        assert!(NotifyType::STATE_NOT_FOUND.is_error());
        assert!(NotifyType(16383).is_error());
        assert!(!NotifyType::INITIAL_CONTACT.is_error());
        assert!(!NotifyType::ADDITIONAL_KEY_EXCHANGE.is_error());
    }

    #[test]
    fn additional_key_exchanges() {
        assert!(!TransformType::ESN.is_additional_key_exchange());
        assert!(TransformType::ADDKE1.is_additional_key_exchange());
        assert!(TransformType::ADDKE7.is_additional_key_exchange());
        assert!(!TransformType(13).is_additional_key_exchange());
    }
}
