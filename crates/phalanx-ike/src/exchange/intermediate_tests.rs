use super::*;
use crate::config::EncrAlg;
use crate::proposal::NegotiatedIke;
use crate::protect::{Protection, Reassembler};
use hmac::{Hmac, Mac};
use phalanx_crypto::ike::{IkeSaKeys, KdfInputs};
use phalanx_crypto::PrfAlgorithm;
use phalanx_wire::ike::iana::PrfId;
use phalanx_wire::ike::{NoncePayload, NotifyPayload};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sha2::Sha256;

fn negotiated(encr: EncrAlg) -> NegotiatedIke {
    NegotiatedIke {
        proposal_num: 1,
        encr,
        integ: (!encr.is_aead()).then_some(phalanx_wire::ike::iana::IntegId::HMAC_SHA2_256_128),
        prf: PrfId::HMAC_SHA2_256,
        ke: KeId::CURVE25519,
        additional_ke: vec![KeId::ML_KEM_768],
        peer_spi: None,
    }
}

fn keys(n: &NegotiatedIke, secret: u8) -> IkeSaKeys {
    let inputs = KdfInputs {
        ni: &[1; 32],
        nr: &[2; 32],
        spi_i: [3; 8],
        spi_r: [4; 8],
    };
    IkeSaKeys::derive(
        phalanx_crypto::default_provider(),
        PrfAlgorithm::HmacSha2_256,
        n.key_lengths().unwrap(),
        &inputs,
        &[secret; 32],
    )
    .unwrap()
}

fn header(response: bool) -> IkeHeaderRepr {
    IkeHeaderRepr {
        initiator_spi: 0x0102_0304_0506_0708,
        responder_spi: 0x1112_1314_1516_1718,
        next_payload: PayloadType::SK,
        exchange_type: ExchangeType::IKE_INTERMEDIATE,
        initiator: !response,
        response,
        message_id: 1,
        length: 0,
    }
}

fn payloads(ke_len: usize) -> Vec<Payload> {
    vec![
        Payload::Ke(KePayload {
            group: KeId::ML_KEM_768,
            data: (0..ke_len).map(|i| i as u8).collect(),
        }),
        Payload::Nonce(NoncePayload { data: vec![9; 32] }),
    ]
}

fn hmac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

#[test]
fn sent_blob_counts_no_iv_padding_or_icv() {
    let p = payloads(1184);
    let blob = sent_blob(&header(false), &p).unwrap();
    let (first, inner) = emit_payloads(&p).unwrap();
    let total = HEADER_LEN + 4 + inner.len();
    assert_eq!(blob.len(), total);
    let view = IkeHeader::new_checked(&blob[..]).unwrap();
    assert_eq!(view.next_payload(), PayloadType::SK);
    assert_eq!(view.length() as usize, total);
    assert_eq!(view.exchange_type(), ExchangeType::IKE_INTERMEDIATE);
    // Encrypted payload header: first inner payload, C/RESERVED 0,
    // Payload Length of header plus inner payloads only.
    assert_eq!(blob[28], first.0);
    assert_eq!(blob[29], 0);
    assert_eq!(
        usize::from(u16::from_be_bytes([blob[30], blob[31]])),
        4 + inner.len()
    );
    assert_eq!(&blob[32..], &inner[..]);
}

#[test]
fn received_blob_matches_the_senders_whole_and_fragmented() {
    for encr in [EncrAlg::AES256_GCM16, EncrAlg::AES128_CBC] {
        let n = negotiated(encr);
        let k = keys(&n, 5);
        let mut sender = Protection::new(&k, &n, true).unwrap();
        let receiver = Protection::new(&k, &n, false).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let p = payloads(1184);
        let expected = sent_blob(&header(false), &p).unwrap();
        for mtu in [None, Some(400)] {
            let datagrams = sender.seal(&header(false), &p, mtu, &mut rng).unwrap();
            assert_eq!(datagrams.len() > 1, mtu.is_some());
            let mut reassembler = Reassembler::default();
            let mut opened = None;
            for d in &datagrams {
                opened = reassembler.add(&receiver, d).unwrap();
            }
            let opened = opened.unwrap();
            assert_eq!(opened.payloads, p);
            let last = datagrams.last().unwrap();
            assert_eq!(
                received_blob(last, &opened).unwrap(),
                expected,
                "{encr:?} {mtu:?}"
            );
        }
    }
}

#[test]
fn received_blob_keeps_unencrypted_payloads() {
    // RFC 7296 §3.14 allows payloads before SK; they are part of _A. The
    // message is edited after sealing, so NULL ciphers open it.
    let null = &phalanx_testkit::NullProvider::ACCEPT_ALL;
    let n = negotiated(EncrAlg::AES256_GCM16);
    let k = keys(&n, 5);
    let mut sender = Protection::with_provider(null, &k, &n, true).unwrap();
    let receiver = Protection::with_provider(null, &k, &n, false).unwrap();
    let p = payloads(32);
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let sealed = sender
        .seal(&header(false), &p, None, &mut rng)
        .unwrap()
        .remove(0);
    // Rebuild with a Notify before SK: header NP -> N, N's NP -> SK.
    let extra = NotifyPayload::new(NotifyType::COOKIE, vec![7; 8]);
    let (first, mut chain) = emit_payloads(&[Payload::Notify(extra)]).unwrap();
    chain[0] = PayloadType::SK.0;
    let notify_len = chain.len();
    let mut message = sealed[..HEADER_LEN].to_vec();
    message[16] = first.0;
    message.extend_from_slice(&chain);
    message.extend_from_slice(&sealed[HEADER_LEN..]);
    let len = message.len() as u32;
    message[24..28].copy_from_slice(&len.to_be_bytes());
    let opened = receiver.open(&message).unwrap();
    let blob = received_blob(&message, &opened).unwrap();
    let inner_len = opened.plaintext.len();
    // Everything up to the SK header's Payload Length as received, but
    // the header's Length.
    let kept = HEADER_LEN + notify_len + 2;
    assert_eq!(&blob[..24], &message[..24]);
    assert_eq!(&blob[HEADER_LEN..kept], &message[HEADER_LEN..kept]);
    assert_eq!(
        u32::from_be_bytes(blob[24..28].try_into().unwrap()) as usize,
        HEADER_LEN + notify_len + 4 + inner_len
    );
    assert_eq!(blob.len(), HEADER_LEN + notify_len + 4 + inner_len);
}

#[test]
fn chain_follows_rfc_9242() {
    let n = negotiated(EncrAlg::AES256_GCM16);
    let (k1, k2) = (keys(&n, 5), keys(&n, 6));
    let prf = prf_closure(
        phalanx_crypto::default_provider(),
        PrfAlgorithm::HmacSha2_256,
    );
    let mut chain = IntAuthChain::default();
    assert!(chain.value(1).is_empty());
    chain.add(&prf, &k1, b"request 1", b"response 1");
    chain.add(&prf, &k2, b"request 2", b"response 2");
    let i1 = hmac(&k1.sk_pi, &[b"request 1"]);
    let i2 = hmac(&k2.sk_pi, &[&i1, b"request 2"]);
    let r1 = hmac(&k1.sk_pr, &[b"response 1"]);
    let r2 = hmac(&k2.sk_pr, &[&r1, b"response 2"]);
    let expected = [i2, r2, 3u32.to_be_bytes().to_vec()].concat();
    assert_eq!(chain.value(3), expected);
}
