//! ESP with the combined-mode transforms: AES-GCM (RFC 4106),
//! ChaCha20-Poly1305 (RFC 7634) and AES-GMAC (RFC 4543).

use super::layout::{Span, ESP_HEADER_LEN};
use super::suite::{AEAD_IV_LEN, AEAD_TAG_LEN, SALT_LEN};
use crate::buf::PacketBuf;
use crate::engine::OpStatus;
use crate::provider::{AeadKey, AEAD_NONCE_LEN};

/// Bytes of the SPI (RFC 4303 §2.1).
const SPI_LEN: usize = 4;

/// Longest ESP AAD of AES-GCM and ChaCha20-Poly1305: SPI, high and low
/// halves of the extended sequence number (RFC 4106 §5, RFC 7634 §2.1).
const MAX_AAD_LEN: usize = 12;

/// The nonce: salt then explicit IV (RFC 4106 §4, RFC 4543 §3.1,
/// RFC 7634 §2). `iv` is the [`AEAD_IV_LEN`] bytes at `iv_start`.
fn nonce(salt: &[u8; SALT_LEN], iv: &[u8]) -> [u8; AEAD_NONCE_LEN] {
    let mut nonce = [0u8; AEAD_NONCE_LEN];
    nonce[..SALT_LEN].copy_from_slice(salt);
    nonce[SALT_LEN..].copy_from_slice(&iv[..AEAD_IV_LEN]);
    nonce
}

/// The AAD of RFC 4106 §5 / RFC 7634 §2.1: SPI || Sequence Number, or with
/// ESN SPI || Seq high || Seq low. `header` is the 8-byte ESP header.
fn esp_aad(header: &[u8], esn_high: Option<u32>) -> ([u8; MAX_AAD_LEN], usize) {
    let mut aad = [0u8; MAX_AAD_LEN];
    match esn_high {
        None => {
            aad[..ESP_HEADER_LEN].copy_from_slice(&header[..ESP_HEADER_LEN]);
            (aad, ESP_HEADER_LEN)
        }
        Some(high) => {
            aad[..SPI_LEN].copy_from_slice(&header[..SPI_LEN]);
            aad[SPI_LEN..SPI_LEN + 4].copy_from_slice(&high.to_be_bytes());
            aad[SPI_LEN + 4..].copy_from_slice(&header[SPI_LEN..ESP_HEADER_LEN]);
            (aad, MAX_AAD_LEN)
        }
    }
}

/// AES-GCM / ChaCha20-Poly1305 ESP: encrypts (or verifies and decrypts)
/// `[payload_start, auth_end)` with the tag at `icv_start`.
pub(super) fn seal_or_open(
    key: &dyn AeadKey,
    salt: &[u8; SALT_LEN],
    seal: bool,
    s: &Span,
    esn_high: Option<u32>,
    data: &mut [u8],
) -> OpStatus {
    let nonce = nonce(salt, &data[s.iv_start..s.payload_start]);
    let (aad, aad_len) = esp_aad(&data[s.auth_start..s.iv_start], esn_high);
    // Span invariant: payload_start <= auth_end == icv_start and
    // icv_start + 16 <= len, so both halves below are in bounds.
    let (body, tail) = data.split_at_mut(s.icv_start);
    let in_out = &mut body[s.payload_start..];
    let tag = &mut tail[..AEAD_TAG_LEN];
    if seal {
        // Sealing only fails on an internal error or a bad tag length;
        // either means this op cannot be processed as laid out.
        match key.seal_in_place(&nonce, &aad[..aad_len], in_out, tag) {
            Ok(()) => OpStatus::Completed,
            Err(_) => OpStatus::InvalidLayout,
        }
    } else {
        match key.open_in_place(&nonce, &aad[..aad_len], in_out, tag) {
            Ok(()) => OpStatus::Completed,
            Err(_) => OpStatus::AuthenticationFailed,
        }
    }
}

/// Computes (seal) or checks (open) the GMAC tag at `tag` over `aad` with
/// an empty plaintext (RFC 4543 §3: GMAC is GCM with nothing to encrypt).
fn gmac(
    key: &dyn AeadKey,
    nonce: &[u8; AEAD_NONCE_LEN],
    seal: bool,
    aad: &[u8],
    tag: &mut [u8],
) -> OpStatus {
    if seal {
        match key.seal_in_place(nonce, aad, &mut [], tag) {
            Ok(()) => OpStatus::Completed,
            Err(_) => OpStatus::InvalidLayout,
        }
    } else {
        match key.open_in_place(nonce, aad, &mut [], tag) {
            Ok(()) => OpStatus::Completed,
            Err(_) => OpStatus::AuthenticationFailed,
        }
    }
}

/// AES-GMAC ESP (RFC 4543 §3): nothing is encrypted; the AAD is
/// `[auth_start, auth_end)` = SPI, Seq, IV, payload and trailer.
///
/// With ESN the AAD is SPI || Seq high || Seq low || IV || ... (RFC 4543
/// §3.3, Table 2). Rather than copy the packet, the SPI is moved into the
/// 4 bytes in front of `auth_start` and Seq high is written where the SPI
/// was, so the AAD becomes one contiguous run; the borrowed bytes are
/// restored afterwards. This needs 4 bytes of buffer (data or headroom) in
/// front of the SPI, else the layout is refused.
pub(super) fn gmac_esp(
    key: &dyn AeadKey,
    salt: &[u8; SALT_LEN],
    seal: bool,
    s: &Span,
    esn_high: Option<u32>,
    buf: &mut PacketBuf,
) -> OpStatus {
    let (storage, start) = buf.storage_mut();
    let nonce = nonce(salt, &storage[start + s.iv_start..start + s.payload_start]);
    // Span invariant: icv_start + 16 <= data length, so every absolute
    // offset below lies within `storage` (which ends at the data end).
    let spi_at = start + s.auth_start;
    let (aad_start, saved) = match esn_high {
        None => (spi_at, None),
        Some(high) => {
            let Some(borrow_at) = spi_at.checked_sub(SPI_LEN) else {
                return OpStatus::InvalidLayout;
            };
            let mut saved = [0u8; SPI_LEN];
            saved.copy_from_slice(&storage[borrow_at..spi_at]);
            storage.copy_within(spi_at..spi_at + SPI_LEN, borrow_at);
            storage[spi_at..spi_at + SPI_LEN].copy_from_slice(&high.to_be_bytes());
            (borrow_at, Some(saved))
        }
    };
    let (body, tail) = storage.split_at_mut(start + s.icv_start);
    let status = gmac(
        key,
        &nonce,
        seal,
        &body[aad_start..],
        &mut tail[..AEAD_TAG_LEN],
    );
    if let Some(saved) = saved {
        storage.copy_within(aad_start..spi_at, spi_at);
        storage[aad_start..spi_at].copy_from_slice(&saved);
    }
    status
}
