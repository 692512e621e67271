//! SK payload tests: round trips per suite and provider, every flipped
//! byte refused, providers byte-identical, and known answers from an
//! independent implementation (python3-cryptography).
//!
//! The Python reference (prints the constants at the end of this file):
//!
//! ```text
//! import hmac, hashlib, struct
//! from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
//! from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
//! inner = bytes(range(37))
//! def header(enc_len):
//!     total = 28 + 4 + enc_len
//!     ike = bytes.fromhex("0011223344556677" "8899aabbccddeeff") + bytes([46, 0x20, 35, 0x08]) \
//!         + struct.pack(">II", 1, total)
//!     return ike + bytes([35, 0]) + struct.pack(">H", 4 + enc_len)
//! def aead(cls, key, salt, iv):
//!     enc_len = 8 + len(inner) + 1 + 16
//!     aad = header(enc_len)
//!     ct = cls(key).encrypt(salt + iv, inner + b"\x00", aad)
//!     return aad + iv + ct
//! def cbc_hmac(key, integ_key, iv):
//!     padded = -(-(len(inner) + 1) // 16) * 16
//!     pad = padded - len(inner) - 1
//!     pt = inner + bytes(pad) + bytes([pad])
//!     enc_len = 16 + padded + 16
//!     hdr = header(enc_len)
//!     enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
//!     ct = enc.update(pt) + enc.finalize()
//!     icv = hmac.new(integ_key, hdr + iv + ct, hashlib.sha256).digest()[:16]
//!     return hdr + iv + ct + icv
//! r = lambda a, b: bytes(range(a, b))
//! print("GCM128", aead(AESGCM, r(0x10, 0x20), r(0x20, 0x24), r(0x30, 0x38)).hex())
//! print("CHACHA", aead(ChaCha20Poly1305, r(0x40, 0x60), r(0x60, 0x64), r(0x70, 0x78)).hex())
//! print("CBC256", cbc_hmac(r(0x80, 0xa0), r(0xa0, 0xc0), r(0xc0, 0xd0)).hex())
//! ```

use super::*;
use crate::providers;

/// (encr, key bits, integ) for every suite offered.
const SUITES: [(EncrId, u16, IntegId); 6] = [
    (EncrId::AES_GCM_16, 128, IntegId::NONE),
    (EncrId::AES_GCM_16, 256, IntegId::NONE),
    (EncrId::CHACHA20_POLY1305, 0, IntegId::NONE),
    (EncrId::AES_CBC, 128, IntegId::HMAC_SHA2_256_128),
    (EncrId::AES_CBC, 256, IntegId::HMAC_SHA2_384_192),
    (EncrId::AES_CBC, 256, IntegId::HMAC_SHA2_512_256),
];

fn range(from: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| from.wrapping_add(i as u8)).collect()
}

/// IKE header (IKE_AUTH, message id 1) and SK generic payload header,
/// lengths set for `encrypted_len` bytes of SK body.
fn header(encrypted_len: usize) -> Vec<u8> {
    let total = (28 + 4 + encrypted_len) as u32;
    let mut m = hex::decode("00112233445566778899aabbccddeeff").unwrap();
    m.extend_from_slice(&[46, 0x20, 35, 0x08]);
    m.extend_from_slice(&1u32.to_be_bytes());
    m.extend_from_slice(&total.to_be_bytes());
    m.extend_from_slice(&[35, 0]);
    m.extend_from_slice(&((4 + encrypted_len) as u16).to_be_bytes());
    m
}

fn cipher(provider: &dyn CryptoProvider, suite: (EncrId, u16, IntegId), seed: u8) -> SkCipher {
    let (encr, bits, integ) = suite;
    let (encr_len, integ_len) = sk_key_lengths(encr, bits, integ).unwrap();
    let sk_e = range(seed, encr_len);
    let sk_a = range(seed.wrapping_add(0x80), integ_len);
    SkCipher::new(provider, encr, bits, integ, &sk_e, &sk_a).unwrap()
}

/// Builds and seals a message; returns it with the SK body offset.
fn sealed(sk: &SkCipher, plaintext: &[u8], iv_seed: u8) -> (Vec<u8>, usize) {
    let mut message = header(sk.encrypted_len(plaintext.len()));
    let body_start = message.len();
    sk.seal(&mut message, &range(iv_seed, sk.iv_len()), plaintext)
        .unwrap();
    (message, body_start)
}

#[test]
fn key_lengths() {
    assert_eq!(
        sk_key_lengths(EncrId::AES_GCM_16, 128, IntegId::NONE),
        Ok((20, 0))
    );
    assert_eq!(
        sk_key_lengths(EncrId::AES_GCM_16, 256, IntegId::NONE),
        Ok((36, 0))
    );
    assert_eq!(
        sk_key_lengths(EncrId::CHACHA20_POLY1305, 0, IntegId::NONE),
        Ok((36, 0))
    );
    assert_eq!(
        sk_key_lengths(EncrId::CHACHA20_POLY1305, 256, IntegId::NONE),
        Ok((36, 0))
    );
    assert_eq!(
        sk_key_lengths(EncrId::AES_CBC, 128, IntegId::HMAC_SHA2_256_128),
        Ok((16, 32))
    );
    assert_eq!(
        sk_key_lengths(EncrId::AES_CBC, 256, IntegId::HMAC_SHA2_512_256),
        Ok((32, 64))
    );
    let invalid = [
        (EncrId::AES_GCM_16, 128, IntegId::HMAC_SHA2_256_128),
        (EncrId::AES_CBC, 128, IntegId::NONE),
    ];
    for (encr, bits, integ) in invalid {
        assert_eq!(
            sk_key_lengths(encr, bits, integ),
            Err(CryptoError::InvalidSuite)
        );
    }
    let unsupported = [
        (EncrId::AES_GCM_16, 192, IntegId::NONE),
        (EncrId::CHACHA20_POLY1305, 128, IntegId::NONE),
        (EncrId::AES_CTR, 128, IntegId::HMAC_SHA2_256_128),
        (EncrId::AES_CBC, 128, IntegId::HMAC_SHA1_96),
    ];
    for (encr, bits, integ) in unsupported {
        assert_eq!(
            sk_key_lengths(encr, bits, integ),
            Err(CryptoError::UnsupportedAlgorithm)
        );
    }
}

#[test]
fn wrong_key_lengths_are_refused() {
    let provider = providers()[0];
    let r = SkCipher::new(
        provider,
        EncrId::AES_GCM_16,
        128,
        IntegId::NONE,
        &[0; 16],
        &[],
    );
    assert_eq!(r.err(), Some(CryptoError::BadKeyLength));
    let r = SkCipher::new(
        provider,
        EncrId::AES_CBC,
        128,
        IntegId::HMAC_SHA2_256_128,
        &[0; 16],
        &[0; 16],
    );
    assert_eq!(r.err(), Some(CryptoError::BadKeyLength));
}

#[test]
fn sizes() {
    let provider = providers()[0];
    let gcm = cipher(provider, SUITES[0], 1);
    assert_eq!((gcm.iv_len(), gcm.icv_len()), (8, 16));
    // RFC 5282 §3: no alignment, but the Pad Length octet is always there.
    assert_eq!(gcm.encrypted_len(0), 8 + 1 + 16);
    assert_eq!(gcm.encrypted_len(37), 8 + 38 + 16);
    let cbc = cipher(provider, SUITES[4], 1);
    assert_eq!((cbc.iv_len(), cbc.icv_len()), (16, 24));
    assert_eq!(cbc.encrypted_len(15), 16 + 16 + 24);
    assert_eq!(cbc.encrypted_len(16), 16 + 32 + 24);
}

#[test]
fn round_trip_every_suite_and_provider() {
    for provider in providers() {
        for suite in SUITES {
            let sk = cipher(provider, suite, 3);
            for len in [0, 1, 15, 16, 17, 37, 100] {
                let plaintext = range(0x55, len);
                let (message, body_start) = sealed(&sk, &plaintext, 9);
                assert_eq!(message.len(), body_start + sk.encrypted_len(len));
                let opened = sk.open(&message, body_start).unwrap();
                assert_eq!(&opened[..], &plaintext[..], "{suite:?} {}", provider.name());
            }
        }
    }
}

/// Any flipped bit, in the header, the IV, the ciphertext or the ICV, makes
/// `open` fail.
#[test]
fn every_flipped_byte_is_refused() {
    for provider in providers() {
        for suite in SUITES {
            let sk = cipher(provider, suite, 3);
            let (message, body_start) = sealed(&sk, &range(0, 37), 9);
            for i in 0..message.len() {
                let mut forged = message.clone();
                forged[i] ^= 0x01;
                let r = sk.open(&forged, body_start);
                assert_eq!(
                    r.err(),
                    Some(CryptoError::AuthenticationFailed),
                    "{suite:?} byte {i}"
                );
            }
        }
    }
}

#[test]
fn other_keys_are_refused() {
    for suite in SUITES {
        let provider = providers()[0];
        let (message, body_start) = sealed(&cipher(provider, suite, 3), b"payloads", 9);
        let other = cipher(provider, suite, 4);
        assert_eq!(
            other.open(&message, body_start).err(),
            Some(CryptoError::AuthenticationFailed)
        );
    }
}

#[test]
fn short_or_misaligned_bodies_are_refused() {
    let provider = providers()[0];
    for suite in SUITES {
        let sk = cipher(provider, suite, 3);
        let (message, body_start) = sealed(&sk, &range(0, 37), 9);
        let minimum = body_start + sk.iv_len() + sk.icv_len();
        for cut in [0, 1, minimum - body_start] {
            let r = sk.open(&message[..body_start + cut], body_start);
            assert_eq!(r.err(), Some(CryptoError::BadLength), "{suite:?} {cut}");
        }
        assert_eq!(
            sk.open(&message, message.len() + 1).err(),
            Some(CryptoError::BadLength)
        );
        assert_eq!(
            sk.seal(&mut header(0), &range(0, sk.iv_len() + 1), b"x")
                .err(),
            Some(CryptoError::BadLength)
        );
    }
    // CBC: a body that is not whole blocks.
    let sk = cipher(provider, SUITES[3], 3);
    let (message, body_start) = sealed(&sk, &range(0, 37), 9);
    let mut cut = message[..message.len() - 17].to_vec();
    cut.extend_from_slice(&message[message.len() - 16..]);
    assert_eq!(
        sk.open(&cut, body_start).err(),
        Some(CryptoError::BadLength)
    );
}

/// A Pad Length that reaches before the start of the plaintext is refused
/// (after authentication): `seal` always writes an honest one, so the
/// body is sealed by hand with one block whose last octet claims 200.
#[test]
fn pad_length_beyond_plaintext_is_refused() {
    let provider = providers()[0];
    for suite in [SUITES[0], SUITES[3]] {
        let sk = cipher(provider, suite, 3);
        let mut padded = vec![0u8; 16];
        let mut message = header(sk.iv_len() + padded.len() + sk.icv_len());
        let body_start = message.len();
        padded[15] = 15; // honest: 15 bytes of padding, no payloads
        seal_raw(&sk, &mut message, &range(9, sk.iv_len()), &padded);
        assert!(sk.open(&message, body_start).unwrap().is_empty());
        message.truncate(body_start);
        padded[15] = 200;
        seal_raw(&sk, &mut message, &range(9, sk.iv_len()), &padded);
        assert_eq!(
            sk.open(&message, body_start).err(),
            Some(CryptoError::BadLength),
            "{suite:?}"
        );
    }
}

/// Seals `padded` (already padded, Pad Length included) as the body.
fn seal_raw(sk: &SkCipher, message: &mut Vec<u8>, iv: &[u8], padded: &[u8]) {
    let aad_len = message.len();
    message.extend_from_slice(iv);
    let body_start = message.len();
    message.extend_from_slice(padded);
    let mut icv = vec![0u8; sk.icv_len()];
    match &sk.keyed {
        Keyed::Aead { key, salt } => {
            let (aad, rest) = message.split_at_mut(aad_len);
            let nonce = nonce(salt, iv).unwrap();
            key.seal_in_place(&nonce, aad, &mut rest[iv.len()..], &mut icv)
                .unwrap();
        }
        Keyed::Cbc { cipher, mac } => {
            cipher
                .encrypt_in_place(iv.try_into().unwrap(), &mut message[body_start..])
                .unwrap();
            mac.sign(&[message.as_slice()], &mut icv);
        }
    }
    message.extend_from_slice(&icv);
}

/// Every provider produces the same bytes, and opens the others' output.
#[test]
fn providers_agree() {
    let all = providers();
    for suite in SUITES {
        let outputs: Vec<_> = all
            .iter()
            .map(|p| sealed(&cipher(*p, suite, 3), &range(7, 50), 9))
            .collect();
        for (provider, (message, body_start)) in all.iter().zip(outputs.iter().rev()) {
            assert_eq!(message, &outputs[0].0, "{suite:?}");
            let opened = cipher(*provider, suite, 3)
                .open(message, *body_start)
                .unwrap();
            assert_eq!(&opened[..], &range(7, 50)[..]);
        }
    }
}

/// The messages of the Python reference, sealed here byte for byte, and
/// opened back.
#[test]
fn known_answers_from_python_cryptography() {
    let cases = [
        (
            EncrId::AES_GCM_16,
            128,
            IntegId::NONE,
            range(0x10, 20),
            vec![],
            range(0x30, 8),
            GCM128,
        ),
        (
            EncrId::CHACHA20_POLY1305,
            0,
            IntegId::NONE,
            range(0x40, 36),
            vec![],
            range(0x70, 8),
            CHACHA,
        ),
        (
            EncrId::AES_CBC,
            256,
            IntegId::HMAC_SHA2_256_128,
            range(0x80, 32),
            range(0xa0, 32),
            range(0xc0, 16),
            CBC256,
        ),
    ];
    let inner = range(0, 37);
    for provider in providers() {
        for (encr, bits, integ, sk_e, sk_a, iv, expected) in &cases {
            let sk = SkCipher::new(provider, *encr, *bits, *integ, sk_e, sk_a).unwrap();
            let mut message = header(sk.encrypted_len(inner.len()));
            let body_start = message.len();
            sk.seal(&mut message, iv, &inner).unwrap();
            assert_eq!(
                hex::encode(&message),
                *expected,
                "{encr:?} {}",
                provider.name()
            );
            assert_eq!(&sk.open(&message, body_start).unwrap()[..], &inner[..]);
        }
    }
}

/// RFC 7383 §2.5: for SKF the Associated Data runs through the Fragment
/// Number and Total Fragments fields, which `seal` finds in `message`.
#[test]
fn skf_fields_are_authenticated() {
    let provider = providers()[0];
    for suite in SUITES {
        let sk = cipher(provider, suite, 3);
        let mut message = header(4 + sk.encrypted_len(10));
        message.extend_from_slice(&[0, 2, 0, 3]); // fragment 2 of 3
        let body_start = message.len();
        sk.seal(&mut message, &range(1, sk.iv_len()), &range(0, 10))
            .unwrap();
        assert!(sk.open(&message, body_start).is_ok());
        message[body_start - 3] = 1; // fragment 1 of 3
        assert_eq!(
            sk.open(&message, body_start).err(),
            Some(CryptoError::AuthenticationFailed)
        );
    }
}

#[test]
fn debug_shows_sizes_only() {
    let sk = cipher(providers()[0], SUITES[0], 3);
    assert_eq!(
        format!("{sk:?}"),
        "SkCipher { iv_len: 8, icv_len: 16, block: 1, .. }"
    );
}

const GCM128: &str = concat!(
    "00112233445566778899aabbccddeeff2e202308000000010000005e23000042",
    "30313233343536379f144f09a9cf72f15c05fafa23f63672171771beed1fe050",
    "8294c4e1a76d4cc60171060d8ba0f669c8434b787cca8fba09ee3585257d",
);
const CHACHA: &str = concat!(
    "00112233445566778899aabbccddeeff2e202308000000010000005e23000042",
    "707172737475767719dc42ae1c68edb7caceebe9772f97203b9d216dc18bb566",
    "ec654f142ac22bf7637afdf3cfcdb63487382e440154588653b7941b3844",
);
const CBC256: &str = concat!(
    "00112233445566778899aabbccddeeff2e202308000000010000007023000054",
    "c0c1c2c3c4c5c6c7c8c9cacbcccdcecfe6c4e40950406991c0e45bd6f16aa802",
    "847c9dbdf7f963c7af2d9b04df5a302eb5cb614e605f6d27e6aa58e14c9553f9",
    "d4638ac87a747eeac8416b57e2386a13",
);
