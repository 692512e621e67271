//! Signature schemes of IKEv2 Digital Signature authentication (RFC 7427)
//! and their ASN.1 `AlgorithmIdentifier` encodings.
//!
//! RFC 7427 §3 puts the DER `AlgorithmIdentifier` of the signature algorithm
//! in front of the signature itself; receivers match it byte for byte
//! against the encodings they know. The constants below are the encodings of
//! RFC 7427 Appendix A where it lists one, and built the same way where it
//! does not (RSASSA-PSS with SHA-384/512, Ed25519 from RFC 8420 §2).

use core::fmt;

/// A signature algorithm a [`SigningKey`](super::SigningKey) can use and an
/// IKE peer can verify.
///
/// For ECDSA the RFC 7427 `AlgorithmIdentifier` names only the hash
/// (`ecdsa-with-SHA256`); the curve comes from the certificate. The curve in
/// the variant name is the one a key of that curve signs with here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SignatureScheme {
    /// ECDSA on P-256 with SHA-256 (`ecdsa-with-SHA256`, RFC 5758 §3.2).
    EcdsaP256Sha256,
    /// ECDSA on P-384 with SHA-384 (`ecdsa-with-SHA384`, RFC 5758 §3.2).
    EcdsaP384Sha384,
    /// ECDSA on P-521 with SHA-512 (`ecdsa-with-SHA512`, RFC 5758 §3.2).
    EcdsaP521Sha512,
    /// RSASSA-PKCS1-v1_5 with SHA-256 (`sha256WithRSAEncryption`, RFC 4055 §5).
    RsaPkcs1Sha256,
    /// RSASSA-PKCS1-v1_5 with SHA-384 (`sha384WithRSAEncryption`).
    RsaPkcs1Sha384,
    /// RSASSA-PKCS1-v1_5 with SHA-512 (`sha512WithRSAEncryption`).
    RsaPkcs1Sha512,
    /// RSASSA-PSS with SHA-256, MGF1-SHA-256 and a 32-byte salt (RFC 4055 §3.1).
    RsaPssSha256,
    /// RSASSA-PSS with SHA-384, MGF1-SHA-384 and a 48-byte salt.
    RsaPssSha384,
    /// RSASSA-PSS with SHA-512, MGF1-SHA-512 and a 64-byte salt.
    RsaPssSha512,
    /// Ed25519 (RFC 8032), hashing nothing itself (RFC 8420).
    Ed25519,
}

/// The IANA "IKEv2 Hash Algorithms" registry, as carried in the
/// SIGNATURE_HASH_ALGORITHMS notify (RFC 7427 §4, §7; RFC 8420 §2): the
/// wire codec's open enum.
pub use phalanx_wire::ike::iana::HashAlgorithm;

/// The kind of a private or public key, as far as scheme choice cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// ECDSA on NIST P-256.
    EcdsaP256,
    /// ECDSA on NIST P-384.
    EcdsaP384,
    /// ECDSA on NIST P-521.
    EcdsaP521,
    /// RSA with a modulus of `bits` bits.
    Rsa {
        /// Modulus length in bits.
        bits: u32,
    },
    /// Ed25519.
    Ed25519,
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyKind::EcdsaP256 => f.write_str("ECDSA P-256"),
            KeyKind::EcdsaP384 => f.write_str("ECDSA P-384"),
            KeyKind::EcdsaP521 => f.write_str("ECDSA P-521"),
            KeyKind::Rsa { bits } => write!(f, "RSA-{bits}"),
            KeyKind::Ed25519 => f.write_str("Ed25519"),
        }
    }
}

// RFC 7427 A.1.2: sha256WithRSAEncryption, NULL parameters.
const RSA_PKCS1_SHA256: &[u8] = &[
    0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b, 0x05, 0x00,
];
// RFC 7427 A.1.3: sha384WithRSAEncryption, NULL parameters.
const RSA_PKCS1_SHA384: &[u8] = &[
    0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0c, 0x05, 0x00,
];
// RFC 7427 A.1.4: sha512WithRSAEncryption, NULL parameters.
const RSA_PKCS1_SHA512: &[u8] = &[
    0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0d, 0x05, 0x00,
];
// RFC 4055 §5: "Implementations MUST accept the parameters being absent as
// well as present" - the three PKCS#1 v1.5 OIDs without the NULL.
const RSA_PKCS1_SHA256_ABSENT: &[u8] = &[
    0x30, 0x0b, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b,
];
const RSA_PKCS1_SHA384_ABSENT: &[u8] = &[
    0x30, 0x0b, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0c,
];
const RSA_PKCS1_SHA512_ABSENT: &[u8] = &[
    0x30, 0x0b, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0d,
];

// RFC 7427 A.3.2: ecdsa-with-SHA256, parameters absent (RFC 5758 §3.2).
const ECDSA_SHA256: &[u8] = &[
    0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02,
];
// RFC 7427 A.3.3: ecdsa-with-SHA384.
const ECDSA_SHA384: &[u8] = &[
    0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03,
];
// RFC 7427 A.3.4: ecdsa-with-SHA512.
const ECDSA_SHA512: &[u8] = &[
    0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x04,
];

// RFC 8420 §2 (RFC 8410 §3): id-Ed25519 (1.3.101.112), parameters absent.
const ED25519: &[u8] = &[0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70];

/// RSASSA-PSS `AlgorithmIdentifier` (RFC 4055 §3.1) with explicit hash,
/// MGF1 with the same hash and salt = hash length. `h` is the last arc of
/// the NIST hash OID (2.16.840.1.101.3.4.2.h), `salt` the salt length.
/// `trailer` writes the DEFAULT `trailerField` 1 out, as RFC 7427 A.4.3
/// does; without it the encoding is strict DER (X.690 §11.5).
macro_rules! pss_alg_id {
    ($h:literal, $salt:literal, trailer) => {
        &[
            0x30, 0x46, // AlgorithmIdentifier
            0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a, // id-RSASSA-PSS
            0x30, 0x39, // RSASSA-PSS-params
            0xa0, 0x0f, 0x30, 0x0d, // [0] hashAlgorithm
            0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, $h, 0x05, 0x00, 0xa1, 0x1c,
            0x30, 0x1a, // [1] maskGenAlgorithm
            0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x08, // id-mgf1
            0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, $h, 0x05, 0x00,
            0xa2, 0x03, 0x02, 0x01, $salt, // [2] saltLength
            0xa3, 0x03, 0x02, 0x01, 0x01, // [3] trailerField
        ]
    };
    ($h:literal, $salt:literal) => {
        &[
            0x30, 0x41, // AlgorithmIdentifier
            0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a, // id-RSASSA-PSS
            0x30, 0x34, // RSASSA-PSS-params
            0xa0, 0x0f, 0x30, 0x0d, // [0] hashAlgorithm
            0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, $h, 0x05, 0x00, 0xa1, 0x1c,
            0x30, 0x1a, // [1] maskGenAlgorithm
            0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x08, // id-mgf1
            0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, $h, 0x05, 0x00,
            0xa2, 0x03, 0x02, 0x01, $salt, // [2] saltLength
        ]
    };
}

// RFC 7427 A.4.3: RSASSA-PSS with SHA-256 (72 bytes, trailerField written out).
const RSA_PSS_SHA256: &[u8] = pss_alg_id!(0x01, 0x20, trailer);
// The same structure with SHA-384 / SHA-512 (RFC 7427 has no vector for them).
const RSA_PSS_SHA384: &[u8] = pss_alg_id!(0x02, 0x30, trailer);
const RSA_PSS_SHA512: &[u8] = pss_alg_id!(0x03, 0x40, trailer);
// Strict DER leaves the DEFAULT trailerField out (OpenSSL writes this); accepted too.
const RSA_PSS_SHA256_DER: &[u8] = pss_alg_id!(0x01, 0x20);
const RSA_PSS_SHA384_DER: &[u8] = pss_alg_id!(0x02, 0x30);
const RSA_PSS_SHA512_DER: &[u8] = pss_alg_id!(0x03, 0x40);

impl SignatureScheme {
    /// Every scheme, in the order [`from_algorithm_identifier`] tries them.
    ///
    /// [`from_algorithm_identifier`]: Self::from_algorithm_identifier
    pub const ALL: [SignatureScheme; 10] = [
        SignatureScheme::EcdsaP256Sha256,
        SignatureScheme::EcdsaP384Sha384,
        SignatureScheme::EcdsaP521Sha512,
        SignatureScheme::RsaPkcs1Sha256,
        SignatureScheme::RsaPkcs1Sha384,
        SignatureScheme::RsaPkcs1Sha512,
        SignatureScheme::RsaPssSha256,
        SignatureScheme::RsaPssSha384,
        SignatureScheme::RsaPssSha512,
        SignatureScheme::Ed25519,
    ];

    /// The DER `AlgorithmIdentifier` we send in an RFC 7427 AUTH payload.
    pub fn algorithm_identifier(self) -> &'static [u8] {
        self.accepted_identifiers()[0]
    }

    /// Every encoding accepted as this scheme; the first is the one we send.
    fn accepted_identifiers(self) -> &'static [&'static [u8]] {
        match self {
            SignatureScheme::EcdsaP256Sha256 => &[ECDSA_SHA256],
            SignatureScheme::EcdsaP384Sha384 => &[ECDSA_SHA384],
            SignatureScheme::EcdsaP521Sha512 => &[ECDSA_SHA512],
            SignatureScheme::RsaPkcs1Sha256 => &[RSA_PKCS1_SHA256, RSA_PKCS1_SHA256_ABSENT],
            SignatureScheme::RsaPkcs1Sha384 => &[RSA_PKCS1_SHA384, RSA_PKCS1_SHA384_ABSENT],
            SignatureScheme::RsaPkcs1Sha512 => &[RSA_PKCS1_SHA512, RSA_PKCS1_SHA512_ABSENT],
            SignatureScheme::RsaPssSha256 => &[RSA_PSS_SHA256, RSA_PSS_SHA256_DER],
            SignatureScheme::RsaPssSha384 => &[RSA_PSS_SHA384, RSA_PSS_SHA384_DER],
            SignatureScheme::RsaPssSha512 => &[RSA_PSS_SHA512, RSA_PSS_SHA512_DER],
            SignatureScheme::Ed25519 => &[ED25519],
        }
    }

    /// The scheme whose `AlgorithmIdentifier` is exactly `der` (byte-exact
    /// match against the known encodings; RSA PKCS#1 v1.5 with or without
    /// NULL parameters, RSASSA-PSS with or without the explicit default
    /// trailerField). `None` for anything else, SHA-1 schemes included.
    pub fn from_algorithm_identifier(der: &[u8]) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|scheme| scheme.accepted_identifiers().contains(&der))
    }

    /// The hash this scheme signs with, as the SIGNATURE_HASH_ALGORITHMS
    /// notify names it (RFC 7427 §4; Ed25519 is "Identity", RFC 8420 §2).
    pub fn hash_algorithm(self) -> HashAlgorithm {
        match self {
            SignatureScheme::EcdsaP256Sha256
            | SignatureScheme::RsaPkcs1Sha256
            | SignatureScheme::RsaPssSha256 => HashAlgorithm::SHA2_256,
            SignatureScheme::EcdsaP384Sha384
            | SignatureScheme::RsaPkcs1Sha384
            | SignatureScheme::RsaPssSha384 => HashAlgorithm::SHA2_384,
            SignatureScheme::EcdsaP521Sha512
            | SignatureScheme::RsaPkcs1Sha512
            | SignatureScheme::RsaPssSha512 => HashAlgorithm::SHA2_512,
            SignatureScheme::Ed25519 => HashAlgorithm::IDENTITY,
        }
    }

    /// True when a key of `kind` can sign with this scheme here.
    pub fn fits(self, kind: KeyKind) -> bool {
        match self {
            SignatureScheme::EcdsaP256Sha256 => kind == KeyKind::EcdsaP256,
            SignatureScheme::EcdsaP384Sha384 => kind == KeyKind::EcdsaP384,
            SignatureScheme::EcdsaP521Sha512 => kind == KeyKind::EcdsaP521,
            SignatureScheme::Ed25519 => kind == KeyKind::Ed25519,
            SignatureScheme::RsaPkcs1Sha256
            | SignatureScheme::RsaPkcs1Sha384
            | SignatureScheme::RsaPkcs1Sha512
            | SignatureScheme::RsaPssSha256
            | SignatureScheme::RsaPssSha384
            | SignatureScheme::RsaPssSha512 => matches!(kind, KeyKind::Rsa { .. }),
        }
    }

    /// Length of each of r and s in the fixed-size `r || s` ECDSA encoding
    /// of RFC 4754 §7 (the curve's field size); `None` for other schemes.
    pub fn ecdsa_scalar_len(self) -> Option<usize> {
        match self {
            SignatureScheme::EcdsaP256Sha256 => Some(32),
            SignatureScheme::EcdsaP384Sha384 => Some(48),
            SignatureScheme::EcdsaP521Sha512 => Some(66),
            _ => None,
        }
    }
}

impl fmt::Display for SignatureScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SignatureScheme::EcdsaP256Sha256 => "ecdsa-p256-sha256",
            SignatureScheme::EcdsaP384Sha384 => "ecdsa-p384-sha384",
            SignatureScheme::EcdsaP521Sha512 => "ecdsa-p521-sha512",
            SignatureScheme::RsaPkcs1Sha256 => "rsa-pkcs1-sha256",
            SignatureScheme::RsaPkcs1Sha384 => "rsa-pkcs1-sha384",
            SignatureScheme::RsaPkcs1Sha512 => "rsa-pkcs1-sha512",
            SignatureScheme::RsaPssSha256 => "rsa-pss-sha256",
            SignatureScheme::RsaPssSha384 => "rsa-pss-sha384",
            SignatureScheme::RsaPssSha512 => "rsa-pss-sha512",
            SignatureScheme::Ed25519 => "ed25519",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 7427 Appendix A, as printed there.
    #[test]
    fn rfc7427_appendix_a_encodings() {
        let cases = [
            // A.1.2 sha256WithRSAEncryption
            (
                SignatureScheme::RsaPkcs1Sha256,
                "300d 0609 2a86 4886 f70d 0101 0b05 00",
            ),
            // A.1.3 sha384WithRSAEncryption
            (
                SignatureScheme::RsaPkcs1Sha384,
                "300d 0609 2a86 4886 f70d 0101 0c05 00",
            ),
            // A.1.4 sha512WithRSAEncryption
            (
                SignatureScheme::RsaPkcs1Sha512,
                "300d 0609 2a86 4886 f70d 0101 0d05 00",
            ),
            // A.3.2 ecdsa-with-sha256
            (
                SignatureScheme::EcdsaP256Sha256,
                "300a 0608 2a86 48ce 3d04 0302",
            ),
            // A.3.3 ecdsa-with-sha384
            (
                SignatureScheme::EcdsaP384Sha384,
                "300a 0608 2a86 48ce 3d04 0303",
            ),
            // A.3.4 ecdsa-with-sha512
            (
                SignatureScheme::EcdsaP521Sha512,
                "300a 0608 2a86 48ce 3d04 0304",
            ),
            // A.4.3 RSASSA-PSS with SHA-256
            (
                SignatureScheme::RsaPssSha256,
                "3046 0609 2a86 4886 f70d 0101 0a30 39a0 0f30 0d06 0960 8648 0165 0304 0201 0500 \
                 a11c 301a 0609 2a86 4886 f70d 0101 0830 0d06 0960 8648 0165 0304 0201 0500 a203 \
                 0201 20a3 0302 0101",
            ),
            // RFC 8420 §2: id-Ed25519
            (SignatureScheme::Ed25519, "3005 0603 2b65 70"),
        ];
        for (scheme, hex) in cases {
            let der = unhex(hex);
            assert_eq!(scheme.algorithm_identifier(), der.as_slice(), "{scheme}");
            assert_eq!(
                SignatureScheme::from_algorithm_identifier(&der),
                Some(scheme)
            );
        }
    }

    #[test]
    fn alternate_encodings_are_accepted() {
        let absent = unhex("300b 0609 2a86 4886 f70d 0101 0b");
        assert_eq!(
            SignatureScheme::from_algorithm_identifier(&absent),
            Some(SignatureScheme::RsaPkcs1Sha256)
        );
        // Strict DER PSS parameters, as OpenSSL writes them (no trailerField).
        let pss384 = unhex(
            "3041 0609 2a86 4886 f70d 0101 0a30 34a0 0f30 0d06 0960 8648 0165 0304 0202 0500 \
             a11c 301a 0609 2a86 4886 f70d 0101 0830 0d06 0960 8648 0165 0304 0202 0500 a203 \
             0201 30",
        );
        assert_eq!(
            SignatureScheme::from_algorithm_identifier(&pss384),
            Some(SignatureScheme::RsaPssSha384)
        );
    }

    #[test]
    fn unknown_and_sha1_encodings_are_refused() {
        // RFC 7427 A.1.1 sha1WithRSAEncryption and A.3.1 ecdsa-with-sha1.
        for hex in [
            "300d 0609 2a86 4886 f70d 0101 0505 00",
            "3009 0607 2a86 48ce 3d04 01",
        ] {
            assert_eq!(
                SignatureScheme::from_algorithm_identifier(&unhex(hex)),
                None
            );
        }
        // A.4.1 RSASSA-PSS with empty parameters (SHA-1 defaults).
        let pss_empty = unhex("300d 0609 2a86 4886 f70d 0101 0a30 00");
        assert_eq!(SignatureScheme::from_algorithm_identifier(&pss_empty), None);
        assert_eq!(SignatureScheme::from_algorithm_identifier(&[]), None);
    }

    #[test]
    fn pss_structures_have_consistent_lengths() {
        for scheme in [
            SignatureScheme::RsaPssSha256,
            SignatureScheme::RsaPssSha384,
            SignatureScheme::RsaPssSha512,
        ] {
            for der in scheme.accepted_identifiers() {
                assert_eq!(usize::from(der[1]) + 2, der.len());
                assert_eq!(usize::from(der[14]) + 15, der.len());
            }
        }
    }

    #[test]
    fn fits_and_hashes() {
        assert!(SignatureScheme::RsaPssSha512.fits(KeyKind::Rsa { bits: 3072 }));
        assert!(!SignatureScheme::EcdsaP256Sha256.fits(KeyKind::EcdsaP384));
        assert_eq!(
            SignatureScheme::Ed25519.hash_algorithm(),
            HashAlgorithm::IDENTITY
        );
        assert_eq!(
            SignatureScheme::RsaPkcs1Sha384.hash_algorithm(),
            HashAlgorithm::SHA2_384
        );
    }
}
