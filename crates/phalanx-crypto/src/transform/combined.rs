//! ESP with the combined-mode transforms: AES-GCM (RFC 4106),
//! ChaCha20-Poly1305 (RFC 7634) and AES-GMAC (RFC 4543).

use super::layout::{Span, ESP_HEADER_LEN};
use super::suite::{AEAD_IV_LEN, AEAD_TAG_LEN, SALT_LEN};
use crate::buf::PacketBuf;
use crate::engine::OpLayout;
use crate::engine::OpStatus;
use crate::provider::{AeadKey, AEAD_NONCE_LEN};

/// Bytes of the SPI (RFC 4303 §2.1).
const SPI_LEN: usize = 4;

/// Longest ESP AAD of AES-GCM and ChaCha20-Poly1305: SPI, high and low
/// halves of the extended sequence number (RFC 4106 §5, RFC 7634 §2.1).
const MAX_AAD_LEN: usize = 12;

/// The nonce: salt then explicit IV (RFC 4106 §4, RFC 4543 §3.1,
/// RFC 7634 §2). `iv` is the [`AEAD_IV_LEN`] bytes at `iv_start`.
#[inline]
fn nonce(salt: &[u8; SALT_LEN], iv: &[u8]) -> [u8; AEAD_NONCE_LEN] {
    let mut nonce = [0u8; AEAD_NONCE_LEN];
    nonce[..SALT_LEN].copy_from_slice(salt);
    nonce[SALT_LEN..].copy_from_slice(&iv[..AEAD_IV_LEN]);
    nonce
}

/// The AAD of RFC 4106 §5 / RFC 7634 §2.1: SPI || Sequence Number, or with
/// ESN SPI || Seq high || Seq low. `header` starts with the 8-byte ESP
/// header.
#[inline]
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

/// Length of the ESP header and explicit IV of the combined modes, which
/// lie back to back in front of the payload (RFC 4106 §3).
const HEADER_AND_IV_LEN: usize = ESP_HEADER_LEN + AEAD_IV_LEN;

/// AES-GCM / ChaCha20-Poly1305 ESP: encrypts (or verifies and decrypts)
/// `[payload_start, auth_end)` with the tag at `icv_start`.
///
/// The layout is validated here, in the same steps that slice the
/// buffer, instead of by [`layout::esp`](super::layout::esp) first: the
/// same layouts are refused (with [`OpStatus::InvalidLayout`], the buffer
/// untouched), with half the work per packet.
#[inline]
pub(super) fn seal_or_open(
    key: &dyn AeadKey,
    salt: &[u8; SALT_LEN],
    seal: bool,
    layout: &OpLayout,
    data: &mut [u8],
) -> OpStatus {
    let Some((header, in_out, tag)) = split(layout, data) else {
        return OpStatus::InvalidLayout;
    };
    let nonce = nonce(salt, &header[ESP_HEADER_LEN..]);
    let (aad, aad_len) = esp_aad(&header, layout.esn_high);
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

/// Checks an AEAD ESP layout (RFC 4303 §2, RFC 4106 §3: SPI, Seq, an
/// 8-byte IV, the payload, the 16-byte tag right behind it, inside the
/// buffer) and cuts `data` along it: the ESP header and IV as an array,
/// the payload and the tag.
#[inline]
fn split<'a>(
    layout: &OpLayout,
    data: &'a mut [u8],
) -> Option<([u8; HEADER_AND_IV_LEN], &'a mut [u8], &'a mut [u8])> {
    let at = |offset: u32| usize::try_from(offset).ok();
    let auth_start = at(layout.auth_start)?;
    let payload_start = at(layout.payload_start)?;
    let icv_start = at(layout.icv_start)?;
    let ordered = at(layout.iv_start)? == auth_start.checked_add(ESP_HEADER_LEN)?
        && payload_start == auth_start.checked_add(HEADER_AND_IV_LEN)?
        && payload_start <= icv_start
        && at(layout.auth_end)? == icv_start;
    if !ordered {
        return None;
    }
    let data = data.get_mut(..icv_start.checked_add(AEAD_TAG_LEN)?)?;
    let (body, tag) = data.split_at_mut(icv_start);
    let (front, in_out) = body.split_at_mut(payload_start);
    let header = front.get(auth_start..)?.try_into().ok()?;
    Some((header, in_out, tag))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transform::layout::{self, Sizes};
    use crate::transform::Suite;
    use phalanx_wire::{EncrId, IntegId};

    /// The fused checks of `split` refuse exactly the layouts that
    /// `layout::esp` refuses, over offsets around the valid ones.
    #[test]
    fn split_accepts_what_layout_esp_accepts() {
        let sizes = Sizes::of(&Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE));
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |range: u32| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % u64::from(range)) as u32
        };
        let mut accepted = 0;
        for _ in 0..20_000 {
            let auth = next(40);
            // Mostly right, off by -2..=2 one time in three.
            let off = [0u32; 4].map(|_| if next(3) == 0 { next(5) } else { 2 });
            let jitter = |n: u32, j: u32| (n + j).saturating_sub(2);
            let payload = jitter(auth + 16, off[0]);
            let end = payload + next(64);
            let l = OpLayout {
                auth_start: auth,
                iv_start: jitter(auth + 8, off[1]),
                payload_start: payload,
                auth_end: jitter(end, off[2]),
                icv_start: end,
                esn_high: None,
            };
            let len = jitter(end + 16, off[3]);
            let mut data = vec![0u8; len as usize];
            let fused = split(&l, &mut data).is_some();
            let general = layout::esp(&l, &sizes, data.len()).is_some();
            assert_eq!(fused, general, "{l:?} len {len}");
            accepted += usize::from(fused);
        }
        assert!(
            accepted > 1000,
            "valid layouts were generated too: {accepted}"
        );
    }
}
