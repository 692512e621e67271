//! The algorithms of an SA and their sizes.

use crate::CryptoError;
use phalanx_wire::{EncrId, IntegId};

/// Length of the salt that follows the cipher key in the ESP key material of
/// AES-GCM (RFC 4106 §8.1), AES-GMAC (RFC 4543 §3.2) and ChaCha20-Poly1305
/// (RFC 7634 §2).
pub const SALT_LEN: usize = 4;

/// Length of the explicit IV of AES-GCM (RFC 4106 §3.1), AES-GMAC
/// (RFC 4543 §3.1) and ChaCha20-Poly1305 (RFC 7634 §2).
pub const AEAD_IV_LEN: usize = 8;

/// Length of the AES-CBC IV: one AES block (RFC 3602 §2.1).
pub const CBC_IV_LEN: usize = 16;

/// The AES block size (RFC 3602 §2.4).
pub const AES_BLOCK_LEN: usize = 16;

/// Length of the full AEAD tag used here: AES-GCM with a 16-octet ICV
/// (RFC 4106 §6), AES-GMAC (RFC 4543 §3.2), Poly1305 (RFC 7634 §2).
pub const AEAD_TAG_LEN: usize = 16;

/// Alignment of the ESP trailer when the cipher imposes none: the Pad
/// Length and Next Header fields end on a 4-byte boundary (RFC 4303 §2.4).
pub const ESP_MIN_ALIGN: usize = 4;

/// The algorithms of an ESP or AH SA.
///
/// For AH, `encr` is [`EncrId::NULL`], `encr_key_bits` is 0 and `ah` is
/// true; build one with [`Suite::ah`]. ESP suites come from [`Suite::esp`].
/// The size accessors are meaningful only for a suite that passes
/// [`Suite::validate`]; for others they return 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Suite {
    /// Encryption transform.
    pub encr: EncrId,
    /// Cipher key size in bits (128, 256; 256 for ChaCha20; 0 for NULL).
    pub encr_key_bits: u16,
    /// Integrity transform ([`IntegId::NONE`] for AEADs).
    pub integ: IntegId,
    /// True for an AH SA (RFC 4302): integrity only, over the IP packet.
    pub ah: bool,
}

impl Suite {
    /// An ESP suite.
    pub const fn esp(encr: EncrId, encr_key_bits: u16, integ: IntegId) -> Suite {
        Suite {
            encr,
            encr_key_bits,
            integ,
            ah: false,
        }
    }

    /// An AH suite with the integrity transform `integ` (RFC 4302).
    pub const fn ah(integ: IntegId) -> Suite {
        Suite {
            encr: EncrId::NULL,
            encr_key_bits: 0,
            integ,
            ah: true,
        }
    }

    /// Checks that the combination is one this crate implements.
    ///
    /// ESP: AES-GCM-16 (128/256, RFC 4106), ChaCha20-Poly1305 (256,
    /// RFC 7634) and AES-GMAC (128/256, RFC 4543), each without an
    /// integrity transform (combined mode, RFC 7296 §3.3); AES-CBC
    /// (128/256, RFC 3602) or NULL (RFC 2410) with an HMAC-SHA-2
    /// (RFC 4868). AH: NULL with an HMAC-SHA-2.
    ///
    /// Errors: an algorithm not implemented here is
    /// [`CryptoError::UnsupportedAlgorithm`]; a key size the algorithm does
    /// not take is [`CryptoError::BadKeyLength`]; a combination RFC 7296
    /// §3.3 forbids (an AEAD with an integrity transform, a cipher without
    /// one, encryption on AH) is [`CryptoError::InvalidSuite`].
    pub fn validate(&self) -> Result<(), CryptoError> {
        if hmac_len(self.integ).is_none() && self.integ != IntegId::NONE {
            return Err(CryptoError::UnsupportedAlgorithm);
        }
        if self.ah && self.encr != EncrId::NULL {
            return Err(CryptoError::InvalidSuite);
        }
        let key_bits_ok = match self.encr {
            EncrId::AES_GCM_16 | EncrId::NULL_AUTH_AES_GMAC | EncrId::AES_CBC => {
                matches!(self.encr_key_bits, 128 | 256)
            }
            EncrId::CHACHA20_POLY1305 => self.encr_key_bits == 256,
            EncrId::NULL => self.encr_key_bits == 0,
            _ => return Err(CryptoError::UnsupportedAlgorithm),
        };
        if !key_bits_ok {
            return Err(CryptoError::BadKeyLength);
        }
        // RFC 7296 §3.3: combined-mode ciphers take no integrity transform;
        // every other cipher (NULL included, RFC 4303 §3.2) needs one.
        if self.is_aead() == (self.integ != IntegId::NONE) {
            return Err(CryptoError::InvalidSuite);
        }
        Ok(())
    }

    /// Bytes of encryption key material: the cipher key plus, for AES-GCM,
    /// AES-GMAC and ChaCha20-Poly1305, the 4-byte salt (RFC 4106 §8.1,
    /// RFC 4543 §3.2, RFC 7634 §2).
    pub fn encr_key_len(&self) -> usize {
        let key = usize::from(self.encr_key_bits) / 8;
        match self.encr {
            EncrId::AES_GCM_16 | EncrId::NULL_AUTH_AES_GMAC | EncrId::CHACHA20_POLY1305 => {
                key + SALT_LEN
            }
            EncrId::AES_CBC => key,
            _ => 0,
        }
    }

    /// Bytes of integrity key material: the hash output length for the
    /// HMAC-SHA-2 transforms (RFC 4868 §2.1.1), 0 for combined modes.
    pub fn integ_key_len(&self) -> usize {
        hmac_len(self.integ).map_or(0, |(key, _)| key)
    }

    /// Bytes of explicit IV carried in every ESP packet.
    pub fn iv_len(&self) -> usize {
        match self.encr {
            EncrId::AES_GCM_16 | EncrId::NULL_AUTH_AES_GMAC | EncrId::CHACHA20_POLY1305 => {
                AEAD_IV_LEN
            }
            EncrId::AES_CBC => CBC_IV_LEN,
            _ => 0,
        }
    }

    /// The alignment ESP padding must reach for (payload + Pad Length +
    /// Next Header): the cipher block size for AES-CBC, otherwise 4
    /// (RFC 4303 §2.4).
    pub fn block_size(&self) -> usize {
        match self.encr {
            EncrId::AES_CBC => AES_BLOCK_LEN,
            _ => ESP_MIN_ALIGN,
        }
    }

    /// Bytes of ICV: the 16-byte tag of the combined modes, or the
    /// truncated HMAC (RFC 4868 §2.3: 16, 24 or 32 bytes).
    pub fn icv_len(&self) -> usize {
        if self.is_aead() {
            return AEAD_TAG_LEN;
        }
        hmac_len(self.integ).map_or(0, |(_, icv)| icv)
    }

    /// True for the combined-mode transforms, which provide integrity
    /// themselves: AES-GCM, ChaCha20-Poly1305 and AES-GMAC (RFC 7296 §3.3).
    pub fn is_aead(&self) -> bool {
        matches!(
            self.encr,
            EncrId::AES_GCM_16 | EncrId::NULL_AUTH_AES_GMAC | EncrId::CHACHA20_POLY1305
        )
    }

    /// True for an AH suite.
    pub fn is_ah(&self) -> bool {
        self.ah
    }
}

/// (key length, truncated ICV length) of the HMAC-SHA-2 transforms
/// (RFC 4868 §2.1.1 and §2.3).
fn hmac_len(integ: IntegId) -> Option<(usize, usize)> {
    match integ {
        IntegId::HMAC_SHA2_256_128 => Some((32, 16)),
        IntegId::HMAC_SHA2_384_192 => Some((48, 24)),
        IntegId::HMAC_SHA2_512_256 => Some((64, 32)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HMACS: [IntegId; 3] = [
        IntegId::HMAC_SHA2_256_128,
        IntegId::HMAC_SHA2_384_192,
        IntegId::HMAC_SHA2_512_256,
    ];

    #[test]
    fn allowed_suites_validate() {
        for bits in [128, 256] {
            assert_eq!(
                Suite::esp(EncrId::AES_GCM_16, bits, IntegId::NONE).validate(),
                Ok(())
            );
            let gmac = Suite::esp(EncrId::NULL_AUTH_AES_GMAC, bits, IntegId::NONE);
            assert_eq!(gmac.validate(), Ok(()));
            for integ in HMACS {
                assert_eq!(Suite::esp(EncrId::AES_CBC, bits, integ).validate(), Ok(()));
            }
        }
        let chacha = Suite::esp(EncrId::CHACHA20_POLY1305, 256, IntegId::NONE);
        assert_eq!(chacha.validate(), Ok(()));
        for integ in HMACS {
            assert_eq!(Suite::esp(EncrId::NULL, 0, integ).validate(), Ok(()));
            assert_eq!(Suite::ah(integ).validate(), Ok(()));
        }
    }

    #[test]
    fn refused_suites() {
        let sha256 = IntegId::HMAC_SHA2_256_128;
        let cases = [
            (
                Suite::esp(EncrId::AES_GCM_16, 128, sha256),
                CryptoError::InvalidSuite,
            ),
            (
                Suite::esp(EncrId::AES_CBC, 128, IntegId::NONE),
                CryptoError::InvalidSuite,
            ),
            (
                Suite::esp(EncrId::NULL, 0, IntegId::NONE),
                CryptoError::InvalidSuite,
            ),
            (Suite::ah(IntegId::NONE), CryptoError::InvalidSuite),
            (
                Suite {
                    encr: EncrId::AES_CBC,
                    encr_key_bits: 128,
                    integ: sha256,
                    ah: true,
                },
                CryptoError::InvalidSuite,
            ),
            (
                Suite::esp(EncrId::AES_GCM_16, 192, IntegId::NONE),
                CryptoError::BadKeyLength,
            ),
            (
                Suite::esp(EncrId::CHACHA20_POLY1305, 128, IntegId::NONE),
                CryptoError::BadKeyLength,
            ),
            (
                Suite::esp(EncrId::NULL, 128, sha256),
                CryptoError::BadKeyLength,
            ),
            (
                Suite::esp(EncrId::AES_CTR, 128, sha256),
                CryptoError::UnsupportedAlgorithm,
            ),
            (
                Suite::esp(EncrId::AES_GCM_8, 128, IntegId::NONE),
                CryptoError::UnsupportedAlgorithm,
            ),
            (
                Suite::esp(EncrId(999), 128, sha256),
                CryptoError::UnsupportedAlgorithm,
            ),
            (
                Suite::esp(EncrId::AES_CBC, 128, IntegId::HMAC_SHA1_96),
                CryptoError::UnsupportedAlgorithm,
            ),
        ];
        for (suite, err) in cases {
            assert_eq!(suite.validate(), Err(err), "{suite:?}");
        }
    }

    #[test]
    fn sizes() {
        let gcm128 = Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE);
        assert_eq!(
            (
                gcm128.encr_key_len(),
                gcm128.integ_key_len(),
                gcm128.iv_len(),
                gcm128.icv_len()
            ),
            (20, 0, 8, 16)
        );
        assert_eq!(gcm128.block_size(), 4);
        let gmac256 = Suite::esp(EncrId::NULL_AUTH_AES_GMAC, 256, IntegId::NONE);
        assert_eq!((gmac256.encr_key_len(), gmac256.iv_len()), (36, 8));
        let chacha = Suite::esp(EncrId::CHACHA20_POLY1305, 256, IntegId::NONE);
        assert_eq!((chacha.encr_key_len(), chacha.icv_len()), (36, 16));
        let cbc = Suite::esp(EncrId::AES_CBC, 256, IntegId::HMAC_SHA2_384_192);
        assert_eq!(
            (
                cbc.encr_key_len(),
                cbc.integ_key_len(),
                cbc.iv_len(),
                cbc.icv_len()
            ),
            (32, 48, 16, 24)
        );
        assert_eq!(cbc.block_size(), 16);
        let null = Suite::esp(EncrId::NULL, 0, IntegId::HMAC_SHA2_512_256);
        assert_eq!(
            (null.encr_key_len(), null.integ_key_len(), null.iv_len()),
            (0, 64, 0)
        );
        assert_eq!((null.icv_len(), null.block_size()), (32, 4));
        let ah = Suite::ah(IntegId::HMAC_SHA2_256_128);
        assert!(ah.is_ah() && !ah.is_aead());
        assert_eq!((ah.integ_key_len(), ah.icv_len()), (32, 16));
        assert!(gmac256.is_aead() && !gmac256.is_ah());
    }
}
