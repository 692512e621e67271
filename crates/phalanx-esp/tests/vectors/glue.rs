//! Runs one interop vector through phalanx-esp: `prepare_* → InlineEngine
//! → finish_*`.
//!
//! Shared, through `#[path]`, by `tests/scapy_vectors.rs` and
//! `examples/esp_vectors.rs`: phalanx-testkit builds the SA objects but
//! cannot call phalanx-esp (esp dev-depends on it), so the few lines that
//! call the ESP entry points live here once instead of in both.
// Each includer uses a different subset of these helpers.
#![allow(dead_code)]

use std::time::Instant;

use phalanx_crypto::CryptoProvider;
use phalanx_esp::{
    finish_inbound, finish_outbound, prepare_inbound, prepare_outbound, IvSource, OutboundContext,
    Verdict,
};
use phalanx_testkit::vectors::{describe_mismatch, run_inline, Vector};

/// Encrypts the vector's inner packet with its SA, sequence number and
/// `iv`; returns the outer packet or why Phalanx refused.
pub(crate) fn encrypt(
    v: &Vector,
    provider: &dyn CryptoProvider,
    iv: IvSource<'_>,
) -> Result<Vec<u8>, String> {
    let now = Instant::now();
    let sa = v.outbound_sa(provider, now).map_err(|e| e.to_string())?;
    let mut ctx = OutboundContext::new(now, iv);
    let op = prepare_outbound(&sa, v.inner_buf().map_err(|e| e.to_string())?, &mut ctx)
        .map_err(|(_, reason)| format!("prepare_outbound dropped: {reason:?}"))?;
    let (buf, verdict) = finish_outbound(run_inline(op));
    match verdict {
        Verdict::Forward => Ok(buf.to_vec()),
        Verdict::Drop(reason) => Err(format!("finish_outbound dropped: {reason:?}")),
    }
}

/// Decrypts the vector's outer packet with the receiving SA; returns the
/// inner packet or why Phalanx dropped it.
pub(crate) fn decrypt(v: &Vector, provider: &dyn CryptoProvider) -> Result<Vec<u8>, String> {
    let now = Instant::now();
    let sad = v.sad(provider, now).map_err(|e| e.to_string())?;
    let (pending, op) = prepare_inbound(&sad, v.outer_buf().map_err(|e| e.to_string())?, now)
        .map_err(|(_, reason)| format!("prepare_inbound dropped: {reason:?}"))?;
    let (buf, verdict) = finish_inbound(pending, run_inline(op));
    match verdict {
        Verdict::Forward => Ok(buf.to_vec()),
        Verdict::Drop(reason) => Err(format!("finish_inbound dropped: {reason:?}")),
    }
}

/// Check (a): Phalanx, given scapy's parameters and IV, produces scapy's
/// outer packet byte for byte.
pub(crate) fn check_encrypt(v: &Vector, provider: &dyn CryptoProvider) -> Result<(), String> {
    let iv = v.iv_bytes().map_err(|e| e.to_string())?;
    let outer = v.outer_bytes().map_err(|e| e.to_string())?;
    let got = encrypt(v, provider, IvSource::Fixed(&iv))?;
    match describe_mismatch(&outer, &got) {
        None => Ok(()),
        Some(diff) => Err(format!("outer packet differs from scapy's: {diff}")),
    }
}

/// Check (c): Phalanx decrypts scapy's outer packet to the inner one.
pub(crate) fn check_decrypt(v: &Vector, provider: &dyn CryptoProvider) -> Result<(), String> {
    let inner = v.inner_bytes().map_err(|e| e.to_string())?;
    let got = decrypt(v, provider)?;
    match describe_mismatch(&inner, &got) {
        None => Ok(()),
        Some(diff) => Err(format!(
            "decrypted packet differs from the inner one: {diff}"
        )),
    }
}
