//! `SaTransform` behaviour for every suite and every provider: round trips
//! with and without ESN, tampering, layout validation, and agreement
//! between the providers.

mod support;

use std::sync::Arc;

use phalanx_crypto::{
    providers, CryptoError, OpKind, OpLayout, OpStatus, PacketBuf, SaTransform, Suite, MAX_ICV_LEN,
};
use phalanx_wire::{EncrId, IntegId};
use proptest::prelude::*;
use support::{ah_suites, esp_suites, protect, run, sample_ah, sample_esp, transform, unprotect};

const PAYLOAD_LENS: [usize; 5] = [0, 1, 16, 45, 1400];
const ESN: [Option<u32>; 2] = [None, Some(0x8000_0001)];

#[test]
fn esp_round_trip_every_suite() {
    for p in providers() {
        for suite in esp_suites() {
            let t = transform(p, suite);
            for len in PAYLOAD_LENS {
                for esn in ESN {
                    let (buf, layout) = sample_esp(&suite, len, esn);
                    let original = buf.clone();
                    let (status, sealed) = protect(&t, layout, buf);
                    let what = format!("{} {suite:?} len={len} esn={esn:?}", p.name());
                    assert_eq!(status, OpStatus::Completed, "{what}");
                    let icv = layout.icv_start as usize..sealed.len();
                    assert_ne!(
                        &sealed.as_slice()[icv.clone()],
                        &vec![0; icv.len()][..],
                        "{what}"
                    );
                    let encrypts = matches!(suite.encr, EncrId::AES_GCM_16 | EncrId::AES_CBC)
                        || suite.encr == EncrId::CHACHA20_POLY1305;
                    let body = layout.payload_start as usize..layout.auth_end as usize;
                    let changed =
                        sealed.as_slice()[body.clone()] != original.as_slice()[body.clone()];
                    assert_eq!(changed, encrypts && !body.is_empty(), "{what}");
                    let (status, opened) = unprotect(&t, layout, sealed);
                    assert_eq!(status, OpStatus::Completed, "{what}");
                    assert_eq!(
                        opened.as_slice()[..icv.start],
                        original.as_slice()[..icv.start]
                    );
                }
            }
        }
    }
}

#[test]
fn ah_round_trip_every_suite() {
    for p in providers() {
        for suite in ah_suites() {
            let t = transform(p, suite);
            for esn in ESN {
                let (buf, layout) = sample_ah(&suite, 120, 24, esn);
                let original = buf.clone();
                let (status, signed) = protect(&t, layout, buf);
                assert_eq!(status, OpStatus::Completed);
                let (status, verified) = unprotect(&t, layout, signed);
                assert_eq!(
                    status,
                    OpStatus::Completed,
                    "{} {suite:?} {esn:?}",
                    p.name()
                );
                assert_eq!(
                    verified, original,
                    "verify leaves the (zeroed) packet as it was"
                );
            }
        }
    }
}

/// Seals a sample packet, flips one bit at every authenticated or ICV byte
/// in turn and expects each to be refused.
#[test]
fn esp_any_tampered_byte_fails() {
    for p in providers() {
        for suite in esp_suites() {
            let t = transform(p, suite);
            for esn in ESN {
                let (buf, layout) = sample_esp(&suite, 20, esn);
                let (_, sealed) = protect(&t, layout, buf);
                for at in layout.auth_start as usize..sealed.len() {
                    let mut bad = sealed.clone();
                    bad.as_mut_slice()[at] ^= 0x01;
                    let (status, _) = unprotect(&t, layout, bad);
                    let what = format!("{} {suite:?} byte {at} esn={esn:?}", p.name());
                    assert_eq!(status, OpStatus::AuthenticationFailed, "{what}");
                }
            }
        }
    }
}

#[test]
fn esp_wrong_esn_high_fails() {
    for p in providers() {
        for suite in esp_suites() {
            let t = transform(p, suite);
            let (buf, mut layout) = sample_esp(&suite, 33, Some(7));
            let (_, sealed) = protect(&t, layout, buf);
            for other in [None, Some(6), Some(7 | 1 << 31)] {
                layout.esn_high = other;
                let (status, _) = unprotect(&t, layout, sealed.clone());
                assert_eq!(
                    status,
                    OpStatus::AuthenticationFailed,
                    "{} {suite:?}",
                    p.name()
                );
            }
        }
    }
}

#[test]
fn ah_any_tampered_byte_fails() {
    for p in providers() {
        for suite in ah_suites() {
            let t = transform(p, suite);
            for esn in ESN {
                let (buf, layout) = sample_ah(&suite, 60, 12, esn);
                let (_, signed) = protect(&t, layout, buf);
                for at in 0..signed.len() {
                    let mut bad = signed.clone();
                    bad.as_mut_slice()[at] ^= 0x40;
                    let (status, _) = unprotect(&t, layout, bad);
                    assert_eq!(
                        status,
                        OpStatus::AuthenticationFailed,
                        "{suite:?} byte {at}"
                    );
                }
                let mut wrong_high = layout;
                wrong_high.esn_high = Some(esn.map_or(1, |h| h ^ 1));
                let (status, _) = unprotect(&t, wrong_high, signed);
                assert_eq!(status, OpStatus::AuthenticationFailed);
            }
        }
    }
}

/// RFC 4543 with ESN borrows the 4 bytes in front of the SPI; they must be
/// put back, and without them the layout is refused.
#[test]
fn gmac_esn_restores_borrowed_bytes_and_needs_them() {
    let suite = Suite::esp(EncrId::NULL_AUTH_AES_GMAC, 128, IntegId::NONE);
    for p in providers() {
        let t = transform(p, suite);
        // The SPI at data offset 6, behind a 6-byte stand-in outer header.
        let (inner, inner_layout) = sample_esp(&suite, 40, Some(0xdead_beef));
        let mut data = vec![0x55, 0x66, 0x77, 0x88, 0x99, 0xaa];
        data.extend_from_slice(inner.as_slice());
        let shift = |v: u32| v + 6;
        let layout = OpLayout {
            auth_start: shift(inner_layout.auth_start),
            iv_start: shift(inner_layout.iv_start),
            payload_start: shift(inner_layout.payload_start),
            auth_end: shift(inner_layout.auth_end),
            icv_start: shift(inner_layout.icv_start),
            esn_high: inner_layout.esn_high,
        };
        let (status, sealed) = protect(&t, layout, PacketBuf::from_slice(&data, 0, 0));
        assert_eq!(status, OpStatus::Completed);
        assert_eq!(
            sealed.as_slice()[..layout.icv_start as usize],
            data[..layout.icv_start as usize]
        );
        let (_, reference) = protect(&t, inner_layout, inner.clone());
        assert_eq!(
            &sealed.as_slice()[6..],
            reference.as_slice(),
            "same tag wherever the SPI sits"
        );
        let (status, opened) = unprotect(&t, layout, sealed);
        assert_eq!(status, OpStatus::Completed);
        assert_eq!(
            opened.as_slice()[..layout.icv_start as usize],
            data[..layout.icv_start as usize]
        );

        // No room in front of the SPI: refused, buffer untouched.
        let tight = PacketBuf::from_slice(inner.as_slice(), 3, 0);
        let (status, after) = protect(&t, inner_layout, tight.clone());
        assert_eq!(status, OpStatus::InvalidLayout);
        assert_eq!(after, tight);
    }
}

#[test]
fn kind_must_match_protocol() {
    let p = providers()[0];
    let esp = transform(p, Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE));
    let ah = transform(p, Suite::ah(IntegId::HMAC_SHA2_256_128));
    let (buf, layout) = sample_esp(&esp.suite(), 16, None);
    for kind in [OpKind::AhSign, OpKind::AhVerify] {
        let (status, after) = run(&esp, kind, layout, buf.clone(), [0; MAX_ICV_LEN]);
        assert_eq!((status, &after), (OpStatus::InvalidLayout, &buf));
    }
    let (buf, layout) = sample_ah(&ah.suite(), 64, 8, None);
    for kind in [OpKind::EspSeal, OpKind::EspOpen] {
        let (status, after) = run(&ah, kind, layout, buf.clone(), [0; MAX_ICV_LEN]);
        assert_eq!((status, &after), (OpStatus::InvalidLayout, &buf));
    }
}

#[test]
fn bad_layouts_are_refused_untouched() {
    for p in providers() {
        for suite in esp_suites() {
            let t = transform(p, suite);
            let (buf, good) = sample_esp(&suite, 32, None);
            let mut bad = Vec::new();
            let mut l = good;
            l.icv_start += 1;
            bad.push(l); // ICV not right after the trailer
            l = good;
            l.auth_end += 16;
            l.icv_start += 16;
            bad.push(l); // runs past the buffer
            l = good;
            l.iv_start += 1;
            bad.push(l); // ESP header not 8 bytes
            l = good;
            l.payload_start += 1;
            bad.push(l); // IV of the wrong length
            l = good;
            l.payload_start = l.auth_end + 1;
            bad.push(l); // payload after its end
            if suite.encr == EncrId::AES_CBC {
                l = good;
                l.auth_end -= 1;
                l.icv_start -= 1;
                bad.push(l); // not whole blocks
            }
            for layout in bad {
                for kind in [OpKind::EspSeal, OpKind::EspOpen] {
                    let (status, after) = run(&t, kind, layout, buf.clone(), [0; MAX_ICV_LEN]);
                    assert_eq!(status, OpStatus::InvalidLayout, "{suite:?} {layout:?}");
                    assert_eq!(after, buf);
                }
            }
        }
    }
}

#[test]
fn both_providers_seal_identical_bytes() {
    let all = providers();
    for suite in esp_suites().into_iter().chain(ah_suites()) {
        let transforms: Vec<Arc<SaTransform>> = all.iter().map(|p| transform(*p, suite)).collect();
        for esn in ESN {
            let (buf, layout) = if suite.is_ah() {
                sample_ah(&suite, 300, 40, esn)
            } else {
                sample_esp(&suite, 300, esn)
            };
            let outputs: Vec<PacketBuf> = transforms
                .iter()
                .map(|t| protect(t, layout, buf.clone()).1)
                .collect();
            for (t, out) in transforms.iter().zip(&outputs) {
                assert_eq!(out, &outputs[0], "{suite:?}: {} differs", t.provider_name());
            }
        }
    }
}

#[test]
fn new_checks_suite_and_key_lengths() {
    let gcm = Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE);
    let cbc = Suite::esp(EncrId::AES_CBC, 256, IntegId::HMAC_SHA2_256_128);
    for p in providers() {
        let new = |suite, e: &[u8], i: &[u8]| SaTransform::new(p, suite, e, i).err();
        assert_eq!(new(gcm, &[0; 20], &[]), None);
        assert_eq!(
            new(gcm, &[0; 16], &[]),
            Some(CryptoError::BadKeyLength),
            "salt missing"
        );
        assert_eq!(
            new(gcm, &[0; 20], &[0; 32]),
            Some(CryptoError::BadKeyLength)
        );
        assert_eq!(new(cbc, &[0; 32], &[0; 32]), None);
        assert_eq!(
            new(cbc, &[0; 32], &[0; 20]),
            Some(CryptoError::BadKeyLength)
        );
        let mut bad = cbc;
        bad.integ = IntegId::NONE;
        assert_eq!(new(bad, &[0; 32], &[]), Some(CryptoError::InvalidSuite));
        let ah = SaTransform::new_ah(p, IntegId::HMAC_SHA2_512_256, &[0; 64]);
        assert_eq!(
            ah.map(|t| t.suite()),
            Ok(Suite::ah(IntegId::HMAC_SHA2_512_256))
        );
    }
}

#[test]
fn debug_never_shows_keys() {
    let p = providers()[0];
    let t = SaTransform::new(
        p,
        Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE),
        &[0xab; 20],
        &[],
    );
    let text = format!("{:?}", t.expect("valid"));
    assert!(
        text.contains("AES_GCM_16") && !text.contains("ab") && !text.contains("171"),
        "{text}"
    );
}

fn any_layout() -> impl Strategy<Value = OpLayout> {
    let offset = prop_oneof![0u32..200, Just(u32::MAX), any::<u32>()];
    (
        offset.clone(),
        offset.clone(),
        offset.clone(),
        offset.clone(),
        offset,
        any::<Option<u32>>(),
    )
        .prop_map(|(a, b, c, d, e, esn_high)| OpLayout {
            auth_start: a,
            iv_start: b,
            payload_start: c,
            auth_end: d,
            icv_start: e,
            esn_high,
        })
}

fn any_kind() -> impl Strategy<Value = OpKind> {
    prop_oneof![
        Just(OpKind::EspSeal),
        Just(OpKind::EspOpen),
        Just(OpKind::AhSign),
        Just(OpKind::AhVerify)
    ]
}

/// A valid sample layout with every offset nudged by -3..=3.
fn near_valid_layout(suite: &Suite, deltas: [i8; 5], esn: Option<u32>) -> (PacketBuf, OpLayout) {
    let (buf, l) = if suite.is_ah() {
        sample_ah(suite, 64, 16, esn)
    } else {
        sample_esp(suite, 32, esn)
    };
    let nudge = |v: u32, d: i8| v.saturating_add_signed(i32::from(d));
    let layout = OpLayout {
        auth_start: nudge(l.auth_start, deltas[0]),
        iv_start: nudge(l.iv_start, deltas[1]),
        payload_start: nudge(l.payload_start, deltas[2]),
        auth_end: nudge(l.auth_end, deltas[3]),
        icv_start: nudge(l.icv_start, deltas[4]),
        esn_high: esn,
    };
    (buf, layout)
}

proptest! {
    /// Layouts one step from valid: each either works or is refused
    /// untouched, never panics.
    #[test]
    fn near_valid_layouts_never_panic(
        suite_index in 0usize..20,
        deltas in proptest::array::uniform5(prop_oneof![3 => Just(0i8), 1 => -3i8..=3]),
        esn in any::<Option<u32>>(),
        open in any::<bool>(),
    ) {
        let suites: Vec<Suite> = esp_suites().into_iter().chain(ah_suites()).collect();
        let suite = suites[suite_index % suites.len()];
        let (buf, layout) = near_valid_layout(&suite, deltas, esn);
        let kind = match (suite.is_ah(), open) {
            (false, false) => OpKind::EspSeal,
            (false, true) => OpKind::EspOpen,
            (true, false) => OpKind::AhSign,
            (true, true) => OpKind::AhVerify,
        };
        for p in providers() {
            let t = transform(p, suite);
            let (status, after) = run(&t, kind, layout, buf.clone(), [0; MAX_ICV_LEN]);
            prop_assert_ne!(status, OpStatus::Pending);
            if status == OpStatus::InvalidLayout {
                prop_assert_eq!(after, buf.clone());
            }
        }
    }

    /// No layout, buffer or kind panics, and a refused layout leaves the
    /// buffer as it was.
    #[test]
    fn random_layouts_never_panic(
        suite_index in 0usize..20,
        kind in any_kind(),
        layout in any_layout(),
        data in proptest::collection::vec(any::<u8>(), 0..200),
        headroom in 0usize..8,
        icv in proptest::array::uniform32(any::<u8>()),
    ) {
        let suites: Vec<Suite> = esp_suites().into_iter().chain(ah_suites()).collect();
        let suite = suites[suite_index % suites.len()];
        for p in providers() {
            let t = transform(p, suite);
            let buf = PacketBuf::from_slice(&data, headroom, 0);
            let (status, after) = run(&t, kind, layout, buf.clone(), icv);
            prop_assert_ne!(status, OpStatus::Pending);
            if status == OpStatus::InvalidLayout {
                prop_assert_eq!(after, buf);
            }
        }
    }

    /// Sealing then opening restores any payload, for any suite and ESN.
    #[test]
    fn random_payloads_round_trip(
        suite_index in 0usize..20,
        payload_blocks in 0usize..40,
        fill in any::<u8>(),
        esn in any::<Option<u32>>(),
    ) {
        let suites: Vec<Suite> = esp_suites();
        let suite = suites[suite_index % suites.len()];
        let t = transform(providers()[0], suite);
        let (mut buf, layout) = sample_esp(&suite, payload_blocks * 16, esn);
        let body = layout.payload_start as usize..layout.auth_end as usize;
        buf.as_mut_slice()[body.clone()].iter_mut().for_each(|b| *b ^= fill);
        let original = buf.clone();
        let (status, sealed) = protect(&t, layout, buf);
        prop_assert_eq!(status, OpStatus::Completed);
        let (status, opened) = unprotect(&t, layout, sealed);
        prop_assert_eq!(status, OpStatus::Completed);
        prop_assert_eq!(&opened.as_slice()[body.clone()], &original.as_slice()[body]);
    }
}
