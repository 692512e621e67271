//! A deliberately insecure [`CryptoProvider`] for fuzzing and tests.
//!
//! # WARNING: NO SECURITY WHATSOEVER
//!
//! [`NullProvider`] encrypts nothing and authenticates nothing: its AEAD
//! and CBC "ciphers" leave the data as it is and its tags and ICVs are all
//! zeros. It exists so that a fuzzer can reach the code *behind*
//! authentication (padding, next header, inner packet parsing, selector
//! checks) without having to forge a MAC, as rustls does with its fuzzing
//! provider. It lives in the dev-only testkit and must never be reachable
//! from a data plane: no Phalanx crate outside tests depends on this one.

use phalanx_crypto::provider::AEAD_NONCE_LEN;
use phalanx_crypto::{AeadKey, CbcKey, CryptoError, CryptoProvider, IntegrityKey};
use phalanx_wire::{EncrId, IntegId};

/// How the [`NullProvider`] answers verification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NullVerify {
    /// Every tag and ICV verifies: a fuzzer gets past authentication with
    /// any input.
    AcceptAll,
    /// Only an all-zero tag or ICV verifies (what sealing writes), so tests
    /// can still produce authentication failures by flipping a bit.
    ZeroTag,
}

/// **Insecure** identity "crypto" (see the [module docs](self)): AEAD and
/// CBC leave data untouched, tags and ICVs are zeros.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NullProvider {
    verify: NullVerify,
}

impl NullProvider {
    /// Accepts every tag: for fuzz targets.
    pub const ACCEPT_ALL: NullProvider = NullProvider {
        verify: NullVerify::AcceptAll,
    };
    /// Accepts only all-zero tags: for tests that also need auth failures.
    pub const ZERO_TAG: NullProvider = NullProvider {
        verify: NullVerify::ZeroTag,
    };

    /// A provider with the given verification behaviour.
    pub const fn new(verify: NullVerify) -> NullProvider {
        NullProvider { verify }
    }

    /// How this provider verifies.
    pub fn verify_mode(&self) -> NullVerify {
        self.verify
    }
}

impl CryptoProvider for NullProvider {
    fn name(&self) -> &'static str {
        "null-INSECURE"
    }

    fn aead(&self, encr: EncrId, _key: &[u8]) -> Result<Box<dyn AeadKey>, CryptoError> {
        match encr {
            EncrId::AES_GCM_16 | EncrId::NULL_AUTH_AES_GMAC | EncrId::CHACHA20_POLY1305 => {
                Ok(Box::new(NullKey {
                    verify: self.verify,
                    icv_len: 16,
                }))
            }
            _ => Err(CryptoError::UnsupportedAlgorithm),
        }
    }

    fn cbc(&self, encr: EncrId, _key: &[u8]) -> Result<Box<dyn CbcKey>, CryptoError> {
        match encr {
            EncrId::AES_CBC => Ok(Box::new(NullKey {
                verify: self.verify,
                icv_len: 0,
            })),
            _ => Err(CryptoError::UnsupportedAlgorithm),
        }
    }

    fn integrity(&self, integ: IntegId, _key: &[u8]) -> Result<Box<dyn IntegrityKey>, CryptoError> {
        // RFC 4868 §2.3 truncation lengths, kept so layouts are realistic.
        let icv_len = match integ {
            IntegId::HMAC_SHA2_256_128 => 16,
            IntegId::HMAC_SHA2_384_192 => 24,
            IntegId::HMAC_SHA2_512_256 => 32,
            _ => return Err(CryptoError::UnsupportedAlgorithm),
        };
        Ok(Box::new(NullKey {
            verify: self.verify,
            icv_len,
        }))
    }
}

/// The one keyed object behind every null algorithm.
struct NullKey {
    verify: NullVerify,
    icv_len: usize,
}

impl NullKey {
    fn accepts(&self, tag: &[u8]) -> bool {
        match self.verify {
            NullVerify::AcceptAll => true,
            NullVerify::ZeroTag => tag.iter().all(|&b| b == 0),
        }
    }
}

impl AeadKey for NullKey {
    fn seal_in_place(
        &self,
        _nonce: &[u8; AEAD_NONCE_LEN],
        _aad: &[u8],
        _in_out: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), CryptoError> {
        tag.fill(0);
        Ok(())
    }

    fn open_in_place(
        &self,
        _nonce: &[u8; AEAD_NONCE_LEN],
        _aad: &[u8],
        _in_out: &mut [u8],
        tag: &[u8],
    ) -> Result<(), CryptoError> {
        if self.accepts(tag) {
            Ok(())
        } else {
            Err(CryptoError::AuthenticationFailed)
        }
    }
}

impl CbcKey for NullKey {
    fn encrypt_in_place(&self, _iv: &[u8; 16], data: &mut [u8]) -> Result<(), CryptoError> {
        block_aligned(data)
    }

    fn decrypt_in_place(&self, _iv: &[u8; 16], data: &mut [u8]) -> Result<(), CryptoError> {
        block_aligned(data)
    }
}

/// CBC still refuses partial blocks (RFC 3602 §2.4), like a real cipher.
fn block_aligned(data: &[u8]) -> Result<(), CryptoError> {
    if data.len() % 16 == 0 {
        Ok(())
    } else {
        Err(CryptoError::BadLength)
    }
}

impl IntegrityKey for NullKey {
    fn icv_len(&self) -> usize {
        self.icv_len
    }

    fn sign(&self, _parts: &[&[u8]], icv: &mut [u8]) {
        icv.fill(0);
    }

    fn verify(&self, _parts: &[&[u8]], icv: &[u8]) -> bool {
        self.accepts(icv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_tag_accepts_only_zeros() {
        let key = NullProvider::ZERO_TAG
            .aead(EncrId::AES_GCM_16, &[0; 16])
            .unwrap();
        let mut data = *b"plaintext stays!";
        let mut tag = [0xAA; 16];
        key.seal_in_place(&[0; 12], b"aad", &mut data, &mut tag)
            .unwrap();
        assert_eq!(&data, b"plaintext stays!");
        assert_eq!(tag, [0; 16]);
        assert!(key.open_in_place(&[0; 12], b"", &mut data, &tag).is_ok());
        tag[3] = 1;
        assert_eq!(
            key.open_in_place(&[0; 12], b"", &mut data, &tag),
            Err(CryptoError::AuthenticationFailed)
        );
    }

    #[test]
    fn accept_all_accepts_anything() {
        let mac = NullProvider::ACCEPT_ALL
            .integrity(IntegId::HMAC_SHA2_384_192, &[])
            .unwrap();
        assert_eq!(mac.icv_len(), 24);
        assert!(mac.verify(&[b"x"], &[0xFF; 24]));
        let mut icv = [7u8; 24];
        mac.sign(&[b"x"], &mut icv);
        assert_eq!(icv, [0; 24]);
    }

    #[test]
    fn cbc_is_identity_on_whole_blocks() {
        let cbc = NullProvider::ZERO_TAG
            .cbc(EncrId::AES_CBC, &[0; 16])
            .unwrap();
        let mut data = [5u8; 32];
        cbc.encrypt_in_place(&[0; 16], &mut data).unwrap();
        assert_eq!(data, [5; 32]);
        assert_eq!(
            cbc.decrypt_in_place(&[0; 16], &mut data[..17]),
            Err(CryptoError::BadLength)
        );
    }

    /// Through the real transform: ESP seal leaves the payload as it is
    /// with a zero ICV; open accepts it, and a flipped ICV bit only under
    /// `ZERO_TAG`.
    #[test]
    fn drives_sa_transform_for_every_esp_suite() {
        use phalanx_crypto::{Op, OpKind, OpLayout, OpStatus, PacketBuf, SaTransform, Suite};
        use std::sync::Arc;
        let suites = [
            Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE),
            Suite::esp(EncrId::CHACHA20_POLY1305, 256, IntegId::NONE),
            Suite::esp(EncrId::NULL_AUTH_AES_GMAC, 256, IntegId::NONE),
            Suite::esp(EncrId::AES_CBC, 256, IntegId::HMAC_SHA2_384_192),
            Suite::esp(EncrId::NULL, 0, IntegId::HMAC_SHA2_512_256),
        ];
        for suite in suites {
            for (provider, tamper_ok) in [
                (NullProvider::ZERO_TAG, false),
                (NullProvider::ACCEPT_ALL, true),
            ] {
                let keys = (
                    vec![0; suite.encr_key_len()],
                    vec![0; suite.integ_key_len()],
                );
                let t = Arc::new(SaTransform::new(&provider, suite, &keys.0, &keys.1).unwrap());
                let payload_start = 8 + suite.iv_len();
                let auth_end = payload_start + 32;
                let mut data = vec![0x5a; auth_end + suite.icv_len()];
                data[..8].copy_from_slice(&[0, 0, 1, 0, 0, 0, 0, 1]);
                let layout = OpLayout {
                    auth_start: 0,
                    iv_start: 8,
                    payload_start: payload_start as u32,
                    auth_end: auth_end as u32,
                    icv_start: auth_end as u32,
                    esn_high: Some(7),
                };
                let buf = PacketBuf::from_slice(&data, 16, 0);
                let mut op = Op::new(OpKind::EspSeal, t.clone(), layout, buf);
                op.execute();
                assert_eq!(op.status, OpStatus::Completed, "{suite:?}");
                let sealed = op.buf.to_vec();
                assert_eq!(
                    sealed[..auth_end],
                    data[..auth_end],
                    "{suite:?}: identity cipher"
                );
                assert!(
                    sealed[auth_end..].iter().all(|&b| b == 0),
                    "{suite:?}: zero ICV"
                );
                let mut open = Op::new(OpKind::EspOpen, t.clone(), layout, op.buf);
                open.execute();
                assert_eq!(open.status, OpStatus::Completed, "{suite:?}");
                let mut tampered = sealed.clone();
                tampered[auth_end] ^= 1;
                let mut open = Op::new(
                    OpKind::EspOpen,
                    t,
                    layout,
                    PacketBuf::from_slice(&tampered, 16, 0),
                );
                open.execute();
                let want = if tamper_ok {
                    OpStatus::Completed
                } else {
                    OpStatus::AuthenticationFailed
                };
                assert_eq!(open.status, want, "{suite:?} {provider:?}");
            }
        }
    }

    #[test]
    fn unknown_algorithms_are_refused() {
        let p = NullProvider::ACCEPT_ALL;
        assert!(p.aead(EncrId::AES_CBC, &[]).is_err());
        assert!(p.cbc(EncrId::AES_GCM_16, &[]).is_err());
        assert!(p.integrity(IntegId::NONE, &[]).is_err());
    }
}
