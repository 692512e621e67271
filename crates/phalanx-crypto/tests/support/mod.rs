//! Helpers shared by the integration tests: keys, suites, packet builders.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use phalanx_crypto::{
    CryptoProvider, Op, OpKind, OpLayout, OpStatus, PacketBuf, SaTransform, Suite, MAX_ICV_LEN,
};
use phalanx_wire::{EncrId, IntegId};

/// Encryption key material used by the known-answer tests: 0x80, 0x81, ...
pub fn encr_key(len: usize) -> Vec<u8> {
    (0..len).map(|i| 0x80 + i as u8).collect()
}

/// Integrity key material used by the known-answer tests: 0x20, 0x21, ...
pub fn integ_key(len: usize) -> Vec<u8> {
    (0..len).map(|i| 0x20 + i as u8).collect()
}

/// A transform for `suite` keyed with [`encr_key`] and [`integ_key`].
pub fn transform(provider: &dyn CryptoProvider, suite: Suite) -> Arc<SaTransform> {
    let t = SaTransform::new(
        provider,
        suite,
        &encr_key(suite.encr_key_len()),
        &integ_key(suite.integ_key_len()),
    );
    Arc::new(t.unwrap_or_else(|e| panic!("{suite:?} with {}: {e}", provider.name())))
}

const HMACS: [IntegId; 3] = [
    IntegId::HMAC_SHA2_256_128,
    IntegId::HMAC_SHA2_384_192,
    IntegId::HMAC_SHA2_512_256,
];

/// Every ESP suite this crate implements.
pub fn esp_suites() -> Vec<Suite> {
    let mut all = vec![
        Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE),
        Suite::esp(EncrId::AES_GCM_16, 256, IntegId::NONE),
        Suite::esp(EncrId::CHACHA20_POLY1305, 256, IntegId::NONE),
        Suite::esp(EncrId::NULL_AUTH_AES_GMAC, 128, IntegId::NONE),
        Suite::esp(EncrId::NULL_AUTH_AES_GMAC, 256, IntegId::NONE),
    ];
    for integ in HMACS {
        all.push(Suite::esp(EncrId::AES_CBC, 128, integ));
        all.push(Suite::esp(EncrId::AES_CBC, 256, integ));
        all.push(Suite::esp(EncrId::NULL, 0, integ));
    }
    all
}

/// Every AH suite this crate implements.
pub fn ah_suites() -> Vec<Suite> {
    HMACS.into_iter().map(Suite::ah).collect()
}

/// An ESP packet `SPI | Seq | IV | payload | ICV room` (RFC 4303 §2) with
/// the SPI at data offset 0, and its layout.
pub fn esp_packet(
    suite: &Suite,
    header: [u8; 8],
    iv: &[u8],
    payload: &[u8],
    headroom: usize,
) -> (PacketBuf, OpLayout) {
    let mut data = header.to_vec();
    data.extend_from_slice(iv);
    data.extend_from_slice(payload);
    data.resize(data.len() + suite.icv_len(), 0);
    let payload_start = (8 + iv.len()) as u32;
    let auth_end = payload_start + payload.len() as u32;
    let layout = OpLayout {
        auth_start: 0,
        iv_start: 8,
        payload_start,
        auth_end,
        icv_start: auth_end,
        esn_high: None,
    };
    (PacketBuf::from_slice(&data, headroom, 0), layout)
}

/// A deterministic ESP packet for `suite` with a payload of `len` bytes
/// (rounded up to whole blocks for AES-CBC).
pub fn sample_esp(suite: &Suite, len: usize, esn_high: Option<u32>) -> (PacketBuf, OpLayout) {
    let len = len.div_ceil(suite.block_size()) * suite.block_size();
    let iv: Vec<u8> = (0..suite.iv_len()).map(|i| 0xa0 ^ i as u8).collect();
    let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    let (buf, mut layout) = esp_packet(suite, [0, 0, 0x12, 0x34, 0, 0, 0, 9], &iv, &payload, 8);
    layout.esn_high = esn_high;
    (buf, layout)
}

/// A deterministic AH "IP packet" of `len` bytes whose ICV field (at
/// `icv_at`, zeroed) is covered by the ICV (RFC 4302 §3.3.3).
pub fn sample_ah(
    suite: &Suite,
    len: usize,
    icv_at: usize,
    esn_high: Option<u32>,
) -> (PacketBuf, OpLayout) {
    let mut data: Vec<u8> = (0..len).map(|i| (i * 13 + 1) as u8).collect();
    data[icv_at..icv_at + suite.icv_len()].fill(0);
    let layout = OpLayout {
        auth_start: 0,
        auth_end: len as u32,
        icv_start: icv_at as u32,
        esn_high,
        ..OpLayout::default()
    };
    (PacketBuf::from_slice(&data, 0, 0), layout)
}

/// Runs one op through [`Op::execute`] and returns its status and buffer.
pub fn run(
    transform: &Arc<SaTransform>,
    kind: OpKind,
    layout: OpLayout,
    buf: PacketBuf,
    received_icv: [u8; MAX_ICV_LEN],
) -> (OpStatus, PacketBuf) {
    let mut op = Op::new(kind, transform.clone(), layout, buf);
    op.received_icv = received_icv;
    op.execute();
    (op.status, op.buf)
}

/// Seals (ESP) or signs (AH) and returns the status and buffer.
pub fn protect(t: &Arc<SaTransform>, layout: OpLayout, buf: PacketBuf) -> (OpStatus, PacketBuf) {
    let kind = if t.suite().is_ah() {
        OpKind::AhSign
    } else {
        OpKind::EspSeal
    };
    run(t, kind, layout, buf, [0; MAX_ICV_LEN])
}

/// Opens (ESP) or verifies (AH, moving the ICV into `received_icv` and
/// zeroing the field as AH prepare does) and returns the status and buffer.
pub fn unprotect(
    t: &Arc<SaTransform>,
    layout: OpLayout,
    mut buf: PacketBuf,
) -> (OpStatus, PacketBuf) {
    if !t.suite().is_ah() {
        return run(t, OpKind::EspOpen, layout, buf, [0; MAX_ICV_LEN]);
    }
    let mut received = [0; MAX_ICV_LEN];
    let n = t.suite().icv_len();
    let at = layout.icv_start as usize;
    received[..n].copy_from_slice(&buf.as_slice()[at..at + n]);
    buf.as_mut_slice()[at..at + n].fill(0);
    run(t, OpKind::AhVerify, layout, buf, received)
}
