use super::*;
use crate::config::EncrAlg;
use phalanx_crypto::ike::{KdfInputs, KeyLengths};
use phalanx_crypto::{providers, PrfAlgorithm};
use phalanx_wire::ike::iana::{EncrId, ExchangeType, KeId, PrfId};
use phalanx_wire::ike::{NotifyPayload, VendorIdPayload};
use proptest::prelude::*;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use std::collections::HashSet;

/// Every IKE suite of the issue: (encryption, integrity).
fn suites() -> Vec<(EncrAlg, Option<IntegId>)> {
    let mut all = vec![
        (EncrAlg::AES128_GCM16, None),
        (EncrAlg::AES256_GCM16, None),
        (EncrAlg::CHACHA20_POLY1305, None),
    ];
    for encr in [EncrAlg::AES128_CBC, EncrAlg::AES256_CBC] {
        for integ in [
            IntegId::HMAC_SHA2_256_128,
            IntegId::HMAC_SHA2_384_192,
            IntegId::HMAC_SHA2_512_256,
        ] {
            all.push((encr, Some(integ)));
        }
    }
    all
}

fn negotiated(encr: EncrAlg, integ: Option<IntegId>) -> NegotiatedIke {
    NegotiatedIke {
        proposal_num: 1,
        encr,
        integ,
        prf: PrfId::HMAC_SHA2_256,
        ke: KeId::CURVE25519,
        additional_ke: Vec::new(),
        peer_spi: None,
    }
}

fn keys(provider: &dyn CryptoProvider, n: &NegotiatedIke) -> IkeSaKeys {
    let lengths: KeyLengths = n.key_lengths().unwrap();
    let inputs = KdfInputs {
        ni: &[1; 32],
        nr: &[2; 32],
        spi_i: [3; 8],
        spi_r: [4; 8],
    };
    IkeSaKeys::derive(
        provider,
        PrfAlgorithm::HmacSha2_256,
        lengths,
        &inputs,
        &[5; 32],
    )
    .unwrap()
}

/// The initiator's and the responder's protection of one IKE SA.
fn pair_with(
    provider: &dyn CryptoProvider,
    encr: EncrAlg,
    integ: Option<IntegId>,
) -> (Protection, Protection) {
    let n = negotiated(encr, integ);
    let k = keys(provider, &n);
    (
        Protection::with_provider(provider, &k, &n, true).unwrap(),
        Protection::with_provider(provider, &k, &n, false).unwrap(),
    )
}

fn pair(encr: EncrAlg, integ: Option<IntegId>) -> (Protection, Protection) {
    pair_with(phalanx_crypto::default_provider(), encr, integ)
}

fn header(message_id: u32, response: bool) -> IkeHeaderRepr {
    IkeHeaderRepr {
        initiator_spi: 0x0011_2233_4455_6677,
        responder_spi: 0x8899_aabb_ccdd_eeff,
        next_payload: PayloadType::NONE,
        exchange_type: ExchangeType::INFORMATIONAL,
        initiator: !response,
        response,
        message_id,
        length: 0,
    }
}

fn payloads(vendor_len: usize) -> Vec<Payload> {
    vec![
        Payload::Notify(NotifyPayload::new(NotifyType::INITIAL_CONTACT, Vec::new())),
        Payload::VendorId(VendorIdPayload {
            data: (0..vendor_len).map(|i| i as u8).collect(),
        }),
    ]
}

fn rng() -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(7)
}

#[test]
fn round_trip_every_suite_every_provider_both_directions() {
    for provider in providers() {
        for (encr, integ) in suites() {
            let (mut i, mut r) = pair_with(provider, encr, integ);
            let sent = payloads(33);
            let out = i.seal(&header(1, false), &sent, None, &mut rng()).unwrap();
            assert_eq!(out.len(), 1);
            let opened = r.open(&out[0]).unwrap();
            assert_eq!(
                opened.payloads,
                sent,
                "{encr:?}/{integ:?} via {}",
                provider.name()
            );
            assert_eq!(opened.header.message_id, 1);
            assert_eq!(opened.header.next_payload, PayloadType::SK);
            assert_eq!(opened.header.length as usize, out[0].len());
            assert!(opened.unencrypted.is_empty());
            assert_eq!(opened.fragments, 0);
            // The answer goes the other way, under the other keys.
            let back = r.seal(&header(1, true), &[], None, &mut rng()).unwrap();
            assert_eq!(i.open(&back[0]).unwrap().payloads, vec![]);
            // A message never opens with the sender's own direction.
            assert_eq!(i.open(&out[0]), Err(ProtectError::Integrity));
        }
    }
}

#[test]
fn integrity_covers_header_and_ciphertext() {
    for (encr, integ) in suites() {
        let (mut i, r) = pair(encr, integ);
        let out = i
            .seal(&header(2, false), &payloads(40), None, &mut rng())
            .unwrap();
        let good = &out[0];
        for at in [
            5,
            20,
            HEADER_LEN + 1,
            HEADER_LEN + 8,
            good.len() / 2,
            good.len() - 1,
        ] {
            let mut bad = good.clone();
            bad[at] ^= 0x01;
            assert_eq!(r.open(&bad), Err(ProtectError::Integrity), "byte {at}");
            assert_eq!(ProtectError::Integrity.notify_type(), None);
        }
    }
}

#[test]
fn structure_errors_are_malformed() {
    let (mut i, r) = pair(EncrAlg::AES256_GCM16, None);
    let good = i
        .seal(&header(3, false), &payloads(10), None, &mut rng())
        .unwrap()
        .remove(0);
    assert_eq!(r.open(&good[..20]), Err(ProtectError::Malformed));
    let mut longer = good.clone();
    longer.push(0);
    assert_eq!(r.open(&longer), Err(ProtectError::Malformed));
    // An SK body too short for IV and ICV.
    let mut short = good[..HEADER_LEN + 4 + 10].to_vec();
    let len = short.len() as u32;
    short[24..28].copy_from_slice(&len.to_be_bytes());
    short[HEADER_LEN + 2..HEADER_LEN + 4].copy_from_slice(&14u16.to_be_bytes());
    assert_eq!(r.open(&short), Err(ProtectError::Malformed));
    // No SK at all.
    let plain = phalanx_wire::ike::MessageRepr {
        initiator_spi: 1,
        responder_spi: 2,
        exchange_type: ExchangeType::INFORMATIONAL,
        initiator: true,
        response: false,
        message_id: 0,
        payloads: payloads(4),
    }
    .emit_to_vec()
    .unwrap();
    assert_eq!(r.open(&plain), Err(ProtectError::NotEncrypted));
}

#[test]
fn verified_garbage_is_invalid_syntax() {
    let provider = phalanx_crypto::default_provider();
    let n = negotiated(EncrAlg::AES128_GCM16, None);
    let k = keys(provider, &n);
    let r = Protection::with_provider(provider, &k, &n, false).unwrap();
    // Seal by hand: a Notify header claiming 200 octets of a 5-octet body.
    let sender = SkCipher::new(
        provider,
        EncrId::AES_GCM_16,
        128,
        IntegId::NONE,
        &k.sk_ei,
        &[],
    )
    .unwrap();
    let inner = [0u8, 0, 0, 200, 0];
    let mut h = header(4, false);
    h.next_payload = PayloadType::SK;
    h.length = (HEADER_LEN + 4 + sender.encrypted_len(inner.len())) as u32;
    let mut msg = vec![0u8; HEADER_LEN];
    h.emit(&mut IkeHeader::new_unchecked(&mut msg[..]));
    msg.extend_from_slice(&[PayloadType::NOTIFY.0, 0]);
    msg.extend_from_slice(&((4 + sender.encrypted_len(inner.len())) as u16).to_be_bytes());
    sender.seal(&mut msg, &[9; 8], &inner).unwrap();
    let err = r.open(&msg).unwrap_err();
    assert_eq!(err, ProtectError::InvalidSyntax);
    assert_eq!(err.notify_type(), Some(NotifyType::INVALID_SYNTAX));
}

#[test]
fn aead_ivs_never_repeat() {
    for encr in [EncrAlg::AES128_GCM16, EncrAlg::CHACHA20_POLY1305] {
        let (mut i, r) = pair(encr, None);
        let mut seen = HashSet::new();
        for id in 0..2000u32 {
            let out = i
                .seal(&header(id, false), &payloads(8), None, &mut rng())
                .unwrap();
            let iv = out[0][HEADER_LEN + 4..HEADER_LEN + 12].to_vec();
            assert!(seen.insert(iv), "IV repeated at message {id}");
            if id % 500 == 0 {
                assert!(r.open(&out[0]).is_ok());
            }
        }
        assert_eq!(i.iv_counter(), 2000);
        // A takeover moves the counter on, never back.
        i.skip_iv_counter(10_000);
        i.skip_iv_counter(5);
        assert_eq!(i.iv_counter(), 10_000);
        let out = i.seal(&header(0, false), &[], None, &mut rng()).unwrap();
        assert_eq!(
            out[0][HEADER_LEN + 4..HEADER_LEN + 12],
            10_000u64.to_be_bytes()
        );
        i.skip_iv_counter(u64::MAX);
        assert_eq!(
            i.seal(&header(0, false), &[], None, &mut rng()),
            Err(ProtectError::IvExhausted)
        );
    }
}

#[test]
fn cbc_ivs_come_from_the_rng() {
    let (mut i, _) = pair(EncrAlg::AES256_CBC, Some(IntegId::HMAC_SHA2_256_128));
    let mut rng = rng();
    let a = i.seal(&header(0, false), &[], None, &mut rng).unwrap();
    let b = i.seal(&header(0, false), &[], None, &mut rng).unwrap();
    assert_ne!(
        a[0][HEADER_LEN + 4..HEADER_LEN + 20],
        b[0][HEADER_LEN + 4..HEADER_LEN + 20]
    );
}

/// Seals a 5 kB message at `mtu` and checks every fragment's layout.
fn fragments(i: &mut Protection, message_id: u32, mtu: usize) -> (Vec<Payload>, Vec<Vec<u8>>) {
    let sent = payloads(5000);
    let out = i
        .seal(&header(message_id, false), &sent, Some(mtu), &mut rng())
        .unwrap();
    for (n, f) in out.iter().enumerate() {
        assert!(
            f.len() + FRAGMENT_OVERHEAD <= mtu,
            "fragment {n} is {} octets",
            f.len()
        );
        assert_eq!(f[16], PayloadType::SKF.0);
        let first_inner = f[HEADER_LEN];
        let expected = if n == 0 { PayloadType::NOTIFY.0 } else { 0 };
        assert_eq!(first_inner, expected);
        let number = u16::from_be_bytes([f[HEADER_LEN + 4], f[HEADER_LEN + 5]]);
        let total = u16::from_be_bytes([f[HEADER_LEN + 6], f[HEADER_LEN + 7]]);
        assert_eq!(
            (usize::from(number), usize::from(total)),
            (n + 1, out.len())
        );
    }
    (sent, out)
}

#[test]
fn five_kilobytes_at_1280_in_any_order() {
    for (encr, integ) in suites() {
        let (mut i, r) = pair(encr, integ);
        let (sent, out) = fragments(&mut i, 7, 1280);
        assert!(out.len() >= 5, "{} fragments", out.len());
        // A single fragment is not a message for `open`.
        assert_eq!(r.open(&out[0]), Err(ProtectError::Fragmented));
        let mut order: Vec<usize> = (0..out.len()).collect();
        order.reverse();
        order.swap(0, 2);
        let mut re = Reassembler::default();
        let (last, rest) = order.split_last().unwrap();
        for &k in rest {
            assert_eq!(re.add(&r, &out[k]).unwrap(), None);
            // Duplicates are ignored.
            assert_eq!(re.add(&r, &out[k]).unwrap(), None);
        }
        let opened = re.add(&r, &out[*last]).unwrap().unwrap();
        assert_eq!(opened.payloads, sent);
        assert_eq!(usize::from(opened.fragments), out.len());
        assert_eq!(re.in_progress(), 0);
    }
}

#[test]
fn unfragmented_messages_pass_through_the_reassembler() {
    let (mut i, r) = pair(EncrAlg::AES128_GCM16, None);
    let out = i
        .seal(&header(1, false), &payloads(100), Some(1280), &mut rng())
        .unwrap();
    assert_eq!(out.len(), 1, "fits: not fragmented");
    let mut re = Reassembler::default();
    assert_eq!(
        re.add(&r, &out[0]).unwrap().unwrap().payloads,
        payloads(100)
    );
}

#[test]
fn tampered_fragment_is_rejected_and_not_kept() {
    let (mut i, r) = pair(EncrAlg::AES256_CBC, Some(IntegId::HMAC_SHA2_384_192));
    let (sent, out) = fragments(&mut i, 9, 1280);
    let mut re = Reassembler::default();
    for f in &out[1..] {
        assert_eq!(re.add(&r, f).unwrap(), None);
    }
    let mut forged = out[0].clone();
    let at = forged.len() - 20;
    forged[at] ^= 0x80;
    assert_eq!(re.add(&r, &forged), Err(ProtectError::Integrity));
    assert_eq!(re.add(&r, &out[0]).unwrap().unwrap().payloads, sent);
}

#[test]
fn more_total_fragments_restart_fewer_are_dropped() {
    let (mut i, r) = pair(EncrAlg::AES256_GCM16, None);
    let (sent, big) = fragments(&mut i, 11, 1280);
    let (_, small) = fragments(&mut i, 11, 700);
    assert!(small.len() > big.len());
    let mut re = Reassembler::default();
    for f in &big[..big.len() - 1] {
        assert_eq!(re.add(&r, f).unwrap(), None);
    }
    // The sender went to a smaller MTU: start over with its fragments.
    assert_eq!(re.add(&r, &small[0]).unwrap(), None);
    // A late fragment of the old, shorter series is dropped.
    assert_eq!(re.add(&r, &big[big.len() - 1]).unwrap(), None);
    let mut done = None;
    for f in &small[1..] {
        done = re.add(&r, f).unwrap();
    }
    assert_eq!(done.unwrap().payloads, sent);
}

#[test]
fn reassembly_state_is_bounded() {
    let (mut i, r) = pair(EncrAlg::AES128_GCM16, None);
    let limits = ReassemblyLimits {
        max_fragments: 64,
        max_message_len: MAX_MESSAGE_LEN,
        max_messages: 3,
    };
    let mut re = Reassembler::new(limits);
    for id in 0..10 {
        let (_, out) = fragments(&mut i, id, 1280);
        assert_eq!(re.add(&r, &out[0]).unwrap(), None);
        assert!(re.in_progress() <= 3);
    }
    re.forget(9, false);
    assert_eq!(re.in_progress(), 2);
    re.clear();
    assert_eq!(re.in_progress(), 0);

    let few = ReassemblyLimits {
        max_fragments: 4,
        ..limits
    };
    let (_, out) = fragments(&mut i, 20, 1280);
    assert_eq!(
        Reassembler::new(few).add(&r, &out[0]),
        Err(ProtectError::Oversize)
    );

    let small = ReassemblyLimits {
        max_message_len: 2000,
        ..limits
    };
    let mut re = Reassembler::new(small);
    let results: Vec<_> = out.iter().map(|f| re.add(&r, f)).collect();
    assert!(results.contains(&Err(ProtectError::Oversize)));
    assert!(re.in_progress() <= 1);
}

#[test]
fn tiny_mtus_and_huge_messages_are_refused() {
    let (mut i, _) = pair(EncrAlg::AES256_CBC, Some(IntegId::HMAC_SHA2_512_256));
    let err = i.seal(&header(0, false), &payloads(2000), Some(120), &mut rng());
    assert_eq!(err, Err(ProtectError::MtuTooSmall));
    let huge: Vec<Payload> = (0..3)
        .map(|_| {
            Payload::VendorId(VendorIdPayload {
                data: vec![7; 30_000],
            })
        })
        .collect();
    assert_eq!(
        i.seal(&header(0, false), &huge, None, &mut rng()),
        Err(ProtectError::Oversize)
    );
    // Fragmented, the same message goes out.
    let out = i
        .seal(&header(0, false), &huge, Some(1280), &mut rng())
        .unwrap();
    assert!(out.len() > 64);
}

proptest! {
    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let (_, r) = pair(EncrAlg::AES128_GCM16, None);
        let _ = r.open(&bytes);
        let mut re = Reassembler::default();
        let _ = re.add(&r, &bytes);
    }

    #[test]
    fn mutated_fragments_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let (mut i, r) = pair(EncrAlg::CHACHA20_POLY1305, None);
        let (_, out) = fragments(&mut i, 1, 1280);
        let mut re = Reassembler::default();
        for f in &out {
            let mut m = f.clone();
            for (at, x) in &flips {
                let k = at.index(m.len());
                m[k] ^= x;
            }
            m.truncate(cut.index(m.len() + 1));
            let _ = re.add(&r, &m);
            let _ = r.open(&m);
        }
        prop_assert!(re.in_progress() <= ReassemblyLimits::default().max_messages);
    }
}
