//! Protection of the Encrypted payload, SK (RFC 7296 §3.14), and of the
//! Encrypted Fragment payload, SKF (RFC 7383 §2.5).
//!
//! ```text
//!                      1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Next Payload  |C|  RESERVED   |         Payload Length        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                     Initialization Vector                     |
//! |         (length is block size for encryption algorithm)       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                    Encrypted IKE Payloads                     ~
//! +               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |               |             Padding (0-255 octets)            |
//! +-+-+-+-+-+-+-+-+                               +-+-+-+-+-+-+-+-+
//! |                                               |  Pad Length   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                    Integrity Checksum Data                    ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Suites: AES-GCM with a 16-octet ICV (RFC 5282; 128- or 256-bit key plus
//! a 4-byte salt, 8-byte IV), ChaCha20-Poly1305 (RFC 7634; 32-byte key
//! plus 4-byte salt, 8-byte IV), and AES-CBC-128/256 (RFC 3602, 16-byte
//! IV) with HMAC-SHA-256-128, -384-192 or -512-256 (RFC 4868).
//!
//! One [`SkCipher`] protects one direction: the original initiator seals
//! with SK_ei/SK_ai and opens with SK_er/SK_ar, the responder the other
//! way round (RFC 7296 §2.14). IVs are the caller's: AEAD IVs must never
//! repeat under one key (RFC 5282 §3.1: the IKE layer uses a per-SA
//! counter), CBC IVs must be unpredictable (RFC 7296 §3.14: RNG bytes).

use crate::provider::{AeadKey, CbcKey, IntegrityKey, AEAD_NONCE_LEN};
use crate::transform::{AEAD_IV_LEN, AEAD_TAG_LEN, AES_BLOCK_LEN, CBC_IV_LEN, SALT_LEN};
use crate::{CryptoError, CryptoProvider};
use phalanx_wire::{EncrId, IntegId};
use zeroize::Zeroizing;

/// The key material lengths `(encryption, integrity)` prf+ must produce
/// for SK_e* and SK_a* with these transforms; the encryption length
/// includes the AEAD salt (RFC 5282 §7.1, RFC 7634 §3).
///
/// `key_len_bits` is the Key Length attribute (RFC 7296 §3.3.5): 128 or
/// 256 for AES; absent (0) or 256 for ChaCha20-Poly1305.
///
/// Errors: [`CryptoError::UnsupportedAlgorithm`] for a transform or key
/// length not offered here, [`CryptoError::InvalidSuite`] for an AEAD
/// with an integrity transform or CBC without one.
pub fn sk_key_lengths(
    encr: EncrId,
    key_len_bits: u16,
    integ: IntegId,
) -> Result<(usize, usize), CryptoError> {
    let aead = matches!(encr, EncrId::AES_GCM_16 | EncrId::CHACHA20_POLY1305);
    let key_len = match (encr, key_len_bits) {
        (EncrId::AES_GCM_16 | EncrId::AES_CBC, 128) => 16,
        (EncrId::AES_GCM_16 | EncrId::AES_CBC, 256) => 32,
        // RFC 7634 §2: ChaCha20-Poly1305 has a fixed 256-bit key and no
        // Key Length attribute.
        (EncrId::CHACHA20_POLY1305, 0 | 256) => 32,
        _ => return Err(CryptoError::UnsupportedAlgorithm),
    };
    // RFC 7296 §3.3: combined-mode ciphers take no integrity transform
    // (or NONE); the others need one.
    let integ_len = match (aead, integ) {
        (true, IntegId::NONE) => return Ok((key_len + SALT_LEN, 0)),
        (true, _) | (false, IntegId::NONE) => return Err(CryptoError::InvalidSuite),
        // RFC 4868 §2.1.1: the key is as long as the hash output.
        (false, IntegId::HMAC_SHA2_256_128) => 32,
        (false, IntegId::HMAC_SHA2_384_192) => 48,
        (false, IntegId::HMAC_SHA2_512_256) => 64,
        (false, _) => return Err(CryptoError::UnsupportedAlgorithm),
    };
    Ok((key_len, integ_len))
}

/// The keyed algorithms of one direction of an IKE SA.
enum Keyed {
    /// AES-GCM-16 or ChaCha20-Poly1305 with the salt from SK_e.
    Aead {
        key: Box<dyn AeadKey>,
        salt: Zeroizing<[u8; SALT_LEN]>,
    },
    /// AES-CBC with a truncated HMAC.
    Cbc {
        cipher: Box<dyn CbcKey>,
        mac: Box<dyn IntegrityKey>,
    },
}

/// Seals and opens the Encrypted (SK) and Encrypted Fragment (SKF)
/// payloads of one direction of an IKE SA.
pub struct SkCipher {
    keyed: Keyed,
    iv_len: usize,
    icv_len: usize,
    /// Alignment of IKE payloads + Padding + Pad Length: the cipher block
    /// for CBC, 1 for the AEADs (RFC 5282 §3: no alignment needed).
    block: usize,
}

impl SkCipher {
    /// Keys the transforms with SK_e (salt included for AEADs) and SK_a
    /// (empty for AEADs) of one direction; their lengths must be those of
    /// [`sk_key_lengths`].
    ///
    /// Errors: those of [`sk_key_lengths`], [`CryptoError::BadKeyLength`]
    /// for keys of the wrong length, or what the provider refuses.
    pub fn new(
        provider: &dyn CryptoProvider,
        encr: EncrId,
        key_len_bits: u16,
        integ: IntegId,
        sk_e: &[u8],
        sk_a: &[u8],
    ) -> Result<SkCipher, CryptoError> {
        let (encr_len, integ_len) = sk_key_lengths(encr, key_len_bits, integ)?;
        if sk_e.len() != encr_len || sk_a.len() != integ_len {
            return Err(CryptoError::BadKeyLength);
        }
        if integ_len == 0 {
            // RFC 5282 §7.1 / RFC 7634 §3: the last 4 octets of the key
            // material are the salt.
            let (key, salt_bytes) = sk_e.split_at(encr_len - SALT_LEN);
            let mut salt = Zeroizing::new([0u8; SALT_LEN]);
            salt.copy_from_slice(salt_bytes);
            return Ok(SkCipher {
                keyed: Keyed::Aead {
                    key: provider.aead(encr, key)?,
                    salt,
                },
                iv_len: AEAD_IV_LEN,
                icv_len: AEAD_TAG_LEN,
                block: 1,
            });
        }
        let mac = provider.integrity(integ, sk_a)?;
        Ok(SkCipher {
            icv_len: mac.icv_len(),
            keyed: Keyed::Cbc {
                cipher: provider.cbc(encr, sk_e)?,
                mac,
            },
            iv_len: CBC_IV_LEN,
            block: AES_BLOCK_LEN,
        })
    }

    /// Bytes of Initialization Vector: 8 for the AEADs, 16 for AES-CBC.
    pub fn iv_len(&self) -> usize {
        self.iv_len
    }

    /// Bytes of Integrity Checksum Data.
    pub fn icv_len(&self) -> usize {
        self.icv_len
    }

    /// Bytes the protected body takes after the SK (or SKF) header for
    /// `plaintext_len` bytes of inner payloads: IV, payloads, Padding,
    /// Pad Length and ICV. Use it to set the Payload Length and the IKE
    /// header's Length before [`seal`](Self::seal).
    pub fn encrypted_len(&self, plaintext_len: usize) -> usize {
        self.iv_len + self.padded_len(plaintext_len) + self.icv_len
    }

    /// Payloads + Padding + Pad Length, aligned to the cipher block
    /// (RFC 7296 §3.14); the AEADs pad with nothing (RFC 5282 §3).
    fn padded_len(&self, plaintext_len: usize) -> usize {
        (plaintext_len + 1).div_ceil(self.block) * self.block
    }

    /// Appends IV | ciphertext | ICV to `message`, which holds the IKE
    /// header through the SK generic payload header (for SKF, through the
    /// Fragment Number and Total Fragments fields), lengths already set
    /// from [`encrypted_len`](Self::encrypted_len).
    ///
    /// AEAD: the Associated Data is all of `message` before the IV
    /// (RFC 5282 §5.1, RFC 7383 §2.5). CBC + HMAC: the ICV covers the
    /// message from the IKE header through the Pad Length (RFC 7296 §3.14).
    ///
    /// Errors: [`CryptoError::BadLength`] for an IV that is not
    /// [`iv_len`](Self::iv_len) bytes; what the provider refuses. On error
    /// `message` is wiped back to its original length.
    pub fn seal(
        &self,
        message: &mut Vec<u8>,
        iv: &[u8],
        plaintext: &[u8],
    ) -> Result<(), CryptoError> {
        if iv.len() != self.iv_len {
            return Err(CryptoError::BadLength);
        }
        let padded = self.padded_len(plaintext.len());
        // `block` <= 16, so the padding is below 16 bytes and fits the
        // one-octet Pad Length.
        let pad_len =
            u8::try_from(padded - plaintext.len() - 1).map_err(|_| CryptoError::BadLength)?;
        let aad_len = message.len();
        message.reserve(self.encrypted_len(plaintext.len()));
        message.extend_from_slice(iv);
        let body_start = message.len();
        message.extend_from_slice(plaintext);
        // RFC 7296 §3.14: "Padding MAY contain any value chosen by the
        // sender"; zeros here, so output depends only on the inputs.
        message.resize(body_start + padded - 1, 0);
        message.push(pad_len);
        let mut icv = [0u8; crate::MAX_ICV_LEN];
        let icv = icv.get_mut(..self.icv_len).ok_or(CryptoError::BadLength)?;
        if let Err(e) = self.encrypt(message, aad_len, iv, icv) {
            // Never leave the plaintext behind in the caller's buffer.
            zeroize::Zeroize::zeroize(&mut message[aad_len..]);
            message.truncate(aad_len);
            return Err(e);
        }
        message.extend_from_slice(icv);
        Ok(())
    }

    /// Encrypts `message[aad_len + iv_len..]` in place and computes the ICV.
    fn encrypt(
        &self,
        message: &mut [u8],
        aad_len: usize,
        iv: &[u8],
        icv: &mut [u8],
    ) -> Result<(), CryptoError> {
        match &self.keyed {
            Keyed::Aead { key, salt } => {
                let nonce = nonce(salt, iv)?;
                let (aad, rest) = message.split_at_mut(aad_len);
                let body = rest.get_mut(self.iv_len..).ok_or(CryptoError::BadLength)?;
                key.seal_in_place(&nonce, aad, body, icv)
            }
            Keyed::Cbc { cipher, mac } => {
                let iv: &[u8; CBC_IV_LEN] = iv.try_into().map_err(|_| CryptoError::BadLength)?;
                let body = message
                    .get_mut(aad_len + CBC_IV_LEN..)
                    .ok_or(CryptoError::BadLength)?;
                cipher.encrypt_in_place(iv, body)?;
                mac.sign(&[&*message], icv);
                Ok(())
            }
        }
    }

    /// Verifies and decrypts a received message whose SK (or SKF) body —
    /// IV, ciphertext, ICV — starts at `body_start` and runs to the end of
    /// `message`. Returns the inner payloads, Padding and Pad Length
    /// removed. The ICV is checked (in constant time) before anything is
    /// decrypted.
    ///
    /// Errors: [`CryptoError::BadLength`] for a body too short or not
    /// block-aligned, or a Pad Length larger than the plaintext;
    /// [`CryptoError::AuthenticationFailed`] when the ICV does not verify.
    pub fn open(
        &self,
        message: &[u8],
        body_start: usize,
    ) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        let body = message.get(body_start..).ok_or(CryptoError::BadLength)?;
        let ciphertext_len = body
            .len()
            .checked_sub(self.iv_len + self.icv_len)
            .ok_or(CryptoError::BadLength)?;
        // At least the Pad Length octet, in whole blocks.
        if ciphertext_len == 0 || ciphertext_len % self.block != 0 {
            return Err(CryptoError::BadLength);
        }
        let (iv, rest) = body.split_at(self.iv_len);
        let (ciphertext, icv) = rest.split_at(ciphertext_len);
        let mut plaintext = Zeroizing::new(ciphertext.to_vec());
        match &self.keyed {
            Keyed::Aead { key, salt } => {
                let aad = &message[..body_start];
                key.open_in_place(&nonce(salt, iv)?, aad, &mut plaintext, icv)?;
            }
            Keyed::Cbc { cipher, mac } => {
                let signed = &message[..message.len() - self.icv_len];
                if !mac.verify(&[signed], icv) {
                    return Err(CryptoError::AuthenticationFailed);
                }
                let iv: &[u8; CBC_IV_LEN] = iv.try_into().map_err(|_| CryptoError::BadLength)?;
                cipher.decrypt_in_place(iv, &mut plaintext)?;
            }
        }
        strip_padding(&mut plaintext)?;
        Ok(plaintext)
    }
}

impl core::fmt::Debug for SkCipher {
    /// Sizes only; never prints key material.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SkCipher")
            .field("iv_len", &self.iv_len)
            .field("icv_len", &self.icv_len)
            .field("block", &self.block)
            .finish_non_exhaustive()
    }
}

/// RFC 5282 §4 / RFC 7634 §2: nonce = salt (4 octets) | IV (8 octets).
fn nonce(salt: &[u8; SALT_LEN], iv: &[u8]) -> Result<[u8; AEAD_NONCE_LEN], CryptoError> {
    if iv.len() != AEAD_IV_LEN {
        return Err(CryptoError::BadLength);
    }
    let mut nonce = [0u8; AEAD_NONCE_LEN];
    nonce[..SALT_LEN].copy_from_slice(salt);
    nonce[SALT_LEN..].copy_from_slice(iv);
    Ok(nonce)
}

/// Removes Padding and Pad Length (RFC 7296 §3.14: "Pad Length is the
/// length of the Padding field"); a Pad Length that reaches before the
/// start of the plaintext is refused.
fn strip_padding(plaintext: &mut Zeroizing<Vec<u8>>) -> Result<(), CryptoError> {
    let pad_len = usize::from(*plaintext.last().ok_or(CryptoError::BadLength)?);
    let payload_len = plaintext
        .len()
        .checked_sub(pad_len + 1)
        .ok_or(CryptoError::BadLength)?;
    plaintext.truncate(payload_len);
    Ok(())
}

#[cfg(test)]
#[path = "sk_tests.rs"]
mod tests;
