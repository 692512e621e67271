//! The keyed transform of one SA and the ESP/AH cryptographic processing of
//! one operation.
//!
//! [`Suite`] names the algorithms and knows their sizes; [`SaTransform`]
//! holds the keyed objects made by a provider and executes an
//! [`Op`](crate::engine::Op) given its [`OpLayout`]. Every layout is
//! validated against the buffer and the suite before any byte is read, so
//! no layout — and nothing a peer sends — can make `execute` panic.

mod combined;
mod integrity;
mod layout;
mod suite;

pub use suite::{
    Suite, AEAD_IV_LEN, AEAD_TAG_LEN, AES_BLOCK_LEN, CBC_IV_LEN, ESP_MIN_ALIGN, SALT_LEN,
};

use crate::buf::PacketBuf;
use crate::engine::{OpKind, OpLayout, OpStatus, MAX_ICV_LEN};
use crate::provider::{AeadKey, CbcKey, CryptoProvider, IntegrityKey};
use crate::CryptoError;
use phalanx_wire::EncrId;
use zeroize::Zeroizing;

/// The 4-byte ESP salt, wiped on drop.
type Salt = Zeroizing<[u8; SALT_LEN]>;

/// The keyed algorithm objects of one SA.
///
/// Key material held here directly (the ESP salt) is wiped on drop; the
/// provider objects wipe their own keys (see each provider).
enum Keyed {
    /// AES-GCM or ChaCha20-Poly1305 (RFC 4106, RFC 7634).
    Aead { key: Box<dyn AeadKey>, salt: Salt },
    /// AES-GMAC, integrity only (RFC 4543).
    Gmac { key: Box<dyn AeadKey>, salt: Salt },
    /// AES-CBC with HMAC (RFC 3602, RFC 4868), or NULL encryption with
    /// HMAC (RFC 2410) when `cipher` is `None`. Also AH (RFC 4302).
    Integrity {
        cipher: Option<Box<dyn CbcKey>>,
        mac: Box<dyn IntegrityKey>,
    },
}

/// The keyed algorithms of one SA, shared (in an `Arc`) by every operation
/// on that SA, from any engine thread.
pub struct SaTransform {
    suite: Suite,
    /// The suite's sizes, computed once: every packet needs them.
    sizes: layout::Sizes,
    provider: &'static str,
    keyed: Keyed,
}

impl SaTransform {
    /// Keys the algorithms of `suite` with `provider`.
    ///
    /// `encr_key` is the encryption key material as taken from KEYMAT
    /// (RFC 7296 §2.17), salt included for AES-GCM, AES-GMAC and
    /// ChaCha20-Poly1305 ([`Suite::encr_key_len`] bytes; empty for NULL);
    /// `integ_key` is [`Suite::integ_key_len`] bytes (empty for the
    /// combined modes).
    ///
    /// Errors: the suite's own [`Suite::validate`] error,
    /// [`CryptoError::BadKeyLength`] for key material of the wrong length,
    /// or what the provider refuses.
    pub fn new(
        provider: &dyn CryptoProvider,
        suite: Suite,
        encr_key: &[u8],
        integ_key: &[u8],
    ) -> Result<SaTransform, CryptoError> {
        suite.validate()?;
        if encr_key.len() != suite.encr_key_len() || integ_key.len() != suite.integ_key_len() {
            return Err(CryptoError::BadKeyLength);
        }
        let keyed = match suite.encr {
            EncrId::AES_GCM_16 | EncrId::CHACHA20_POLY1305 => {
                let (key, salt) = split_salt(provider, suite.encr, encr_key)?;
                Keyed::Aead { key, salt }
            }
            EncrId::NULL_AUTH_AES_GMAC => {
                let (key, salt) = split_salt(provider, suite.encr, encr_key)?;
                Keyed::Gmac { key, salt }
            }
            _ => {
                let cipher = match suite.encr {
                    EncrId::AES_CBC => Some(provider.cbc(suite.encr, encr_key)?),
                    _ => None,
                };
                Keyed::Integrity {
                    cipher,
                    mac: provider.integrity(suite.integ, integ_key)?,
                }
            }
        };
        Ok(SaTransform {
            suite,
            sizes: layout::Sizes::of(&suite),
            provider: provider.name(),
            keyed,
        })
    }

    /// Keys an AH transform: `SaTransform::new(provider, Suite::ah(integ), &[], integ_key)`.
    pub fn new_ah(
        provider: &dyn CryptoProvider,
        integ: phalanx_wire::IntegId,
        integ_key: &[u8],
    ) -> Result<SaTransform, CryptoError> {
        SaTransform::new(provider, Suite::ah(integ), &[], integ_key)
    }

    /// The algorithms.
    pub fn suite(&self) -> Suite {
        self.suite
    }

    /// Bytes of explicit IV per ESP packet: [`Suite::iv_len`], computed
    /// once when the SA was keyed (the data path asks for every packet).
    #[inline]
    pub fn iv_len(&self) -> usize {
        self.sizes.iv
    }

    /// Bytes of ICV: [`Suite::icv_len`], computed once.
    #[inline]
    pub fn icv_len(&self) -> usize {
        self.sizes.icv
    }

    /// The ESP padding alignment: [`Suite::block_size`], computed once.
    #[inline]
    pub fn block_size(&self) -> usize {
        self.sizes.block
    }

    /// The name of the provider that keyed the algorithms.
    pub fn provider_name(&self) -> &'static str {
        self.provider
    }

    /// Runs one operation on `buf`. The layout is validated first; a
    /// layout that does not fit the buffer, the suite or the kind (an AH
    /// kind on an ESP transform and vice versa) is
    /// [`OpStatus::InvalidLayout`] and leaves `buf` untouched.
    #[inline]
    pub(crate) fn execute(
        &self,
        kind: OpKind,
        layout: &OpLayout,
        buf: &mut PacketBuf,
        received_icv: &[u8; MAX_ICV_LEN],
    ) -> OpStatus {
        match kind {
            OpKind::EspSeal | OpKind::EspOpen if !self.suite.ah => {
                self.esp(kind == OpKind::EspSeal, layout, buf)
            }
            OpKind::AhSign | OpKind::AhVerify if self.suite.ah => {
                let Some(span) = layout::ah(layout, &self.sizes, buf.len()) else {
                    return OpStatus::InvalidLayout;
                };
                let Keyed::Integrity { mac, .. } = &self.keyed else {
                    return OpStatus::InvalidLayout;
                };
                let sign = kind == OpKind::AhSign;
                let data = buf.as_mut_slice();
                integrity::ah(
                    mac.as_ref(),
                    sign,
                    &span,
                    layout.esn_high,
                    data,
                    received_icv,
                )
            }
            _ => OpStatus::InvalidLayout,
        }
    }

    #[inline]
    fn esp(&self, seal: bool, layout: &OpLayout, buf: &mut PacketBuf) -> OpStatus {
        let esn = layout.esn_high;
        let span = || layout::esp(layout, &self.sizes, buf.len());
        match &self.keyed {
            // Validates the layout itself, fused with the slicing.
            Keyed::Aead { key, salt } => {
                combined::seal_or_open(key.as_ref(), salt, seal, layout, buf.as_mut_slice())
            }
            Keyed::Gmac { key, salt } => match span() {
                Some(span) => combined::gmac_esp(key.as_ref(), salt, seal, &span, esn, buf),
                None => OpStatus::InvalidLayout,
            },
            Keyed::Integrity { cipher, mac } => {
                let Some(span) = span() else {
                    return OpStatus::InvalidLayout;
                };
                let (cipher, mac, data) = (cipher.as_deref(), mac.as_ref(), buf.as_mut_slice());
                if seal {
                    integrity::esp_seal(cipher, mac, &span, esn, data)
                } else {
                    integrity::esp_open(cipher, mac, &span, esn, data)
                }
            }
        }
    }
}

/// Splits combined-mode key material into the cipher key and the trailing
/// 4-byte salt (RFC 4106 §8.1, RFC 4543 §3.2, RFC 7634 §2) and keys the
/// AEAD. The caller checked the length, which includes the salt.
fn split_salt(
    provider: &dyn CryptoProvider,
    encr: EncrId,
    material: &[u8],
) -> Result<(Box<dyn AeadKey>, Salt), CryptoError> {
    let split = material
        .len()
        .checked_sub(SALT_LEN)
        .ok_or(CryptoError::BadKeyLength)?;
    let (key, salt_bytes) = material.split_at(split);
    let mut salt = Zeroizing::new([0u8; SALT_LEN]);
    salt.copy_from_slice(salt_bytes);
    Ok((provider.aead(encr, key)?, salt))
}

impl core::fmt::Debug for SaTransform {
    /// Names the suite and provider; never prints key material.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SaTransform")
            .field("suite", &self.suite)
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
}

// One SA's transform is shared by every engine worker (`Arc<SaTransform>`).
const _: () = {
    const fn shared_across_threads<T: Send + Sync>() {}
    shared_across_threads::<SaTransform>();
};
