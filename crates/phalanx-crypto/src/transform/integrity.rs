//! ESP with a separate integrity transform (AES-CBC or NULL encryption with
//! HMAC-SHA-2) and AH.

use super::layout::Span;
use super::suite::CBC_IV_LEN;
use crate::engine::{OpStatus, MAX_ICV_LEN};
use crate::provider::{CbcKey, IntegrityKey};

/// The integrity input beyond the packet bytes: with ESN the high 32 bits
/// of the sequence number, big-endian, appended for the ICV computation
/// only (RFC 4303 §2.2.1 and §3.3.2.2, RFC 4302 §2.5.1 and §3.3.3.3).
fn seq_high(esn_high: Option<u32>) -> [u8; 4] {
    esn_high.map_or([0; 4], u32::to_be_bytes)
}

fn seq_high_len(esn_high: Option<u32>) -> usize {
    if esn_high.is_some() {
        4
    } else {
        0
    }
}

/// The CBC IV: the [`CBC_IV_LEN`] bytes at `iv_start` (RFC 3602 §3).
fn cbc_iv(bytes: &[u8]) -> [u8; CBC_IV_LEN] {
    let mut iv = [0u8; CBC_IV_LEN];
    iv.copy_from_slice(&bytes[..CBC_IV_LEN]);
    iv
}

/// ESP outbound, RFC 4303 §3.3.2 then §3.3.4: encrypt `[payload_start,
/// auth_end)` (unless NULL), then compute the ICV over `[auth_start,
/// auth_end)` (+ Seq high) and write it at `icv_start`.
pub(super) fn esp_seal(
    cipher: Option<&dyn CbcKey>,
    mac: &dyn IntegrityKey,
    s: &Span,
    esn_high: Option<u32>,
    data: &mut [u8],
) -> OpStatus {
    // Span invariant: auth_end == icv_start and icv_end <= len.
    let (body, tail) = data.split_at_mut(s.icv_start);
    if let Some(cipher) = cipher {
        let iv = cbc_iv(&body[s.iv_start..s.payload_start]);
        // Only a payload that is not whole blocks fails, and the span
        // refused those already.
        if cipher
            .encrypt_in_place(&iv, &mut body[s.payload_start..])
            .is_err()
        {
            return OpStatus::InvalidLayout;
        }
    }
    let high = seq_high(esn_high);
    let parts = [&body[s.auth_start..], &high[..seq_high_len(esn_high)]];
    mac.sign(&parts, &mut tail[..s.icv_end - s.icv_start]);
    OpStatus::Completed
}

/// ESP inbound, RFC 4303 §3.4.4: verify the ICV first (in constant time),
/// and decrypt only what authenticated.
pub(super) fn esp_open(
    cipher: Option<&dyn CbcKey>,
    mac: &dyn IntegrityKey,
    s: &Span,
    esn_high: Option<u32>,
    data: &mut [u8],
) -> OpStatus {
    let (body, tail) = data.split_at_mut(s.icv_start);
    let high = seq_high(esn_high);
    let parts = [&body[s.auth_start..], &high[..seq_high_len(esn_high)]];
    if !mac.verify(&parts, &tail[..s.icv_end - s.icv_start]) {
        return OpStatus::AuthenticationFailed;
    }
    if let Some(cipher) = cipher {
        let iv = cbc_iv(&body[s.iv_start..s.payload_start]);
        if cipher
            .decrypt_in_place(&iv, &mut body[s.payload_start..])
            .is_err()
        {
            return OpStatus::InvalidLayout;
        }
    }
    OpStatus::Completed
}

/// AH, RFC 4302 §3.3.3: the ICV over `[auth_start, auth_end)` (the ICV
/// field and mutable fields zeroed by the caller) and Seq high. Signing
/// writes it at `icv_start`; verifying compares it with `received_icv`.
pub(super) fn ah(
    mac: &dyn IntegrityKey,
    sign: bool,
    s: &Span,
    esn_high: Option<u32>,
    data: &mut [u8],
    received_icv: &[u8; MAX_ICV_LEN],
) -> OpStatus {
    // Suite invariant: the longest ICV (HMAC-SHA-512-256) is MAX_ICV_LEN.
    let icv_len = s.icv_end - s.icv_start;
    if icv_len > MAX_ICV_LEN {
        return OpStatus::InvalidLayout;
    }
    let high = seq_high(esn_high);
    let parts = [
        &data[s.auth_start..s.auth_end],
        &high[..seq_high_len(esn_high)],
    ];
    if !sign {
        return match mac.verify(&parts, &received_icv[..icv_len]) {
            true => OpStatus::Completed,
            false => OpStatus::AuthenticationFailed,
        };
    }
    // The ICV field lies inside the authenticated bytes: compute first,
    // then write.
    let mut icv = [0u8; MAX_ICV_LEN];
    mac.sign(&parts, &mut icv[..icv_len]);
    data[s.icv_start..s.icv_end].copy_from_slice(&icv[..icv_len]);
    OpStatus::Completed
}
