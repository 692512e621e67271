//! Validation of an [`OpLayout`] against a buffer and a suite, done before
//! any byte is touched, so that the processing code can slice without
//! panicking whatever the layout says.

use super::suite::{Suite, AES_BLOCK_LEN};
use crate::engine::OpLayout;
use phalanx_wire::EncrId;

/// The sizes of a suite that layout validation needs, computed once per
/// SA: [`Suite`]'s accessors match on the transform ids, which the data
/// path would otherwise repeat for every packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sizes {
    /// Bytes of explicit IV ([`Suite::iv_len`]).
    pub(super) iv: usize,
    /// Bytes of ICV ([`Suite::icv_len`]).
    pub(super) icv: usize,
    /// Padding alignment ([`Suite::block_size`]).
    pub(super) block: usize,
    /// AES-CBC: the ciphertext must be whole blocks (RFC 3602 §2.4).
    pub(super) cbc: bool,
}

impl Sizes {
    /// The sizes of `suite`.
    pub(super) fn of(suite: &Suite) -> Sizes {
        Sizes {
            iv: suite.iv_len(),
            icv: suite.icv_len(),
            block: suite.block_size(),
            cbc: suite.encr == EncrId::AES_CBC,
        }
    }
}

/// Length of the ESP header in front of the IV: SPI and Sequence Number
/// (RFC 4303 §2).
pub(super) const ESP_HEADER_LEN: usize = 8;

/// Offsets of a layout that passed validation, as indices into the
/// buffer's data.
///
/// Invariants (established by [`esp`] and [`ah`], relied on by every user):
/// ESP: `auth_start + 8 == iv_start`, `iv_start + suite.iv_len() ==
/// payload_start <= auth_end == icv_start`, `icv_end == icv_start +
/// suite.icv_len() <= data length`, and for AES-CBC the payload is a whole
/// number of blocks. AH: `auth_start <= icv_start`, `icv_end ==
/// icv_start + suite.icv_len() <= auth_end <= data length`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Span {
    pub(super) auth_start: usize,
    pub(super) iv_start: usize,
    pub(super) payload_start: usize,
    pub(super) auth_end: usize,
    pub(super) icv_start: usize,
    pub(super) icv_end: usize,
}

/// Offsets from a `u32` field. Lossless on every target with at least
/// 32-bit pointers; elsewhere an offset that does not fit is refused.
fn offset(v: u32) -> Option<usize> {
    usize::try_from(v).ok()
}

fn span(layout: &OpLayout, sizes: &Sizes) -> Option<Span> {
    let icv_start = offset(layout.icv_start)?;
    Some(Span {
        auth_start: offset(layout.auth_start)?,
        iv_start: offset(layout.iv_start)?,
        payload_start: offset(layout.payload_start)?,
        auth_end: offset(layout.auth_end)?,
        icv_start,
        icv_end: icv_start.checked_add(sizes.icv)?,
    })
}

/// Validates an ESP layout (RFC 4303 §2) for a buffer of `len` data bytes.
/// (AES-GCM and ChaCha20-Poly1305 check the same inline, see
/// `combined::seal_or_open`.)
pub(super) fn esp(layout: &OpLayout, sizes: &Sizes, len: usize) -> Option<Span> {
    let s = span(layout, sizes)?;
    let header_ok = s.iv_start.checked_sub(s.auth_start) == Some(ESP_HEADER_LEN);
    let iv_ok = s.payload_start.checked_sub(s.iv_start) == Some(sizes.iv);
    let ordered = s.payload_start <= s.auth_end && s.auth_end == s.icv_start && s.icv_end <= len;
    if !(header_ok && iv_ok && ordered) {
        return None;
    }
    // RFC 3602 §2.4: the ciphertext is a whole number of AES blocks.
    if sizes.cbc && (s.auth_end - s.payload_start) % AES_BLOCK_LEN != 0 {
        return None;
    }
    Some(s)
}

/// Validates an AH layout (RFC 4302 §3.3.3): the ICV field lies inside the
/// authenticated bytes, which lie inside the buffer.
pub(super) fn ah(layout: &OpLayout, sizes: &Sizes, len: usize) -> Option<Span> {
    let s = span(layout, sizes)?;
    let ok = s.auth_start <= s.icv_start && s.icv_end <= s.auth_end && s.auth_end <= len;
    ok.then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use phalanx_wire::IntegId;

    fn layout(auth: u32, iv: u32, payload: u32, end: u32) -> OpLayout {
        OpLayout {
            auth_start: auth,
            iv_start: iv,
            payload_start: payload,
            auth_end: end,
            icv_start: end,
            esn_high: None,
        }
    }

    #[test]
    fn esp_layouts() {
        let gcm = Sizes::of(&Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE));
        assert!(esp(&layout(20, 28, 36, 100), &gcm, 116).is_some());
        assert!(
            esp(&layout(20, 28, 36, 100), &gcm, 115).is_none(),
            "no room for the ICV"
        );
        assert!(
            esp(&layout(20, 27, 36, 100), &gcm, 116).is_none(),
            "header too short"
        );
        assert!(
            esp(&layout(20, 28, 35, 100), &gcm, 116).is_none(),
            "IV too short"
        );
        assert!(
            esp(&layout(20, 28, 36, 35), &gcm, 116).is_none(),
            "payload before IV end"
        );
        let mut l = layout(20, 28, 36, 100);
        l.icv_start = 101;
        assert!(
            esp(&l, &gcm, 200).is_none(),
            "ICV not right after the trailer"
        );
        l = layout(u32::MAX, 7, 15, 15);
        assert!(esp(&l, &gcm, 200).is_none());
        l.icv_start = u32::MAX;
        assert!(esp(&l, &gcm, usize::MAX).is_none());
    }

    #[test]
    fn cbc_needs_whole_blocks() {
        let cbc = Sizes::of(&Suite::esp(
            EncrId::AES_CBC,
            128,
            IntegId::HMAC_SHA2_256_128,
        ));
        assert!(esp(&layout(0, 8, 24, 56), &cbc, 72).is_some());
        assert!(esp(&layout(0, 8, 24, 60), &cbc, 76).is_none());
        assert!(
            esp(&layout(0, 8, 24, 24), &cbc, 40).is_some(),
            "empty payload is aligned"
        );
    }

    #[test]
    fn ah_layouts() {
        let ah = Sizes::of(&Suite::ah(IntegId::HMAC_SHA2_256_128));
        let mut l = OpLayout {
            auth_start: 0,
            auth_end: 80,
            icv_start: 32,
            ..OpLayout::default()
        };
        assert!(super::ah(&l, &ah, 80).is_some());
        assert!(super::ah(&l, &ah, 79).is_none());
        l.icv_start = 65;
        assert!(
            super::ah(&l, &ah, 80).is_none(),
            "ICV runs past the authenticated bytes"
        );
        l.icv_start = 32;
        l.auth_start = 33;
        assert!(
            super::ah(&l, &ah, 80).is_none(),
            "ICV before the authenticated bytes"
        );
    }
}
