//! Published test vectors, run against every provider compiled in.
//!
//! Sources: AES-GCM — McGrew & Viega, "The Galois/Counter Mode of
//! Operation (GCM)", Appendix B test cases 1, 2, 4 and 16;
//! ChaCha20-Poly1305 — RFC 8439 §2.8.2; HMAC-SHA-2 — RFC 4231 §4.2 and
//! §4.3 (test cases 1 and 2), truncated as RFC 4868 §2.3 prescribes;
//! AES-CBC — RFC 3602 §4, cases #1 and #2.

use phalanx_crypto::{providers, CryptoError, CryptoProvider};
use phalanx_wire::{EncrId, IntegId};

fn h(s: &str) -> Vec<u8> {
    hex::decode(s).expect("test vector hex")
}

/// Seals `plaintext`, checks ciphertext and tag, opens it again, and
/// checks that a flipped tag bit is refused.
fn check_aead(p: &dyn CryptoProvider, encr: EncrId, vector: (&str, &str, &str, &str, &str, &str)) {
    let (key, nonce, aad, plaintext, ciphertext, tag) = vector;
    let key = p.aead(encr, &h(key)).expect("aead key");
    let nonce: [u8; 12] = h(nonce).try_into().expect("12-byte nonce");
    let aad = h(aad);
    let mut data = h(plaintext);
    let mut computed = [0u8; 16];
    key.seal_in_place(&nonce, &aad, &mut data, &mut computed)
        .expect("seal");
    assert_eq!(hex::encode(&data), ciphertext, "{} ciphertext", p.name());
    assert_eq!(hex::encode(computed), tag, "{} tag", p.name());
    key.open_in_place(&nonce, &aad, &mut data, &computed)
        .expect("open");
    assert_eq!(hex::encode(&data), plaintext);
    computed[15] ^= 1;
    let err = key.open_in_place(&nonce, &aad, &mut data, &computed);
    assert_eq!(err, Err(CryptoError::AuthenticationFailed), "{}", p.name());
}

const GCM_P: &str = "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72\
                     1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39";
const GCM_A: &str = "feedfacedeadbeeffeedfacedeadbeefabaddad2";
const GCM_IV: &str = "cafebabefacedbaddecaf888";

#[test]
fn aes_gcm_spec_vectors() {
    let zero_key = "00000000000000000000000000000000";
    let zero_iv = "000000000000000000000000";
    for p in providers() {
        // Test case 1: empty plaintext, which is exactly GMAC (RFC 4543).
        let tc1 = (
            zero_key,
            zero_iv,
            "",
            "",
            "",
            "58e2fccefa7e3061367f1d57a4e7455a",
        );
        check_aead(p, EncrId::NULL_AUTH_AES_GMAC, tc1);
        let tc2 = (
            zero_key,
            zero_iv,
            "",
            "00000000000000000000000000000000",
            "0388dace60b6a392f328c2b971b2fe78",
            "ab6e47d42cec13bdf53a67b21257bddf",
        );
        check_aead(p, EncrId::AES_GCM_16, tc2);
        let tc4 = (
            "feffe9928665731c6d6a8f9467308308",
            GCM_IV,
            GCM_A,
            GCM_P,
            "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e\
             21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091",
            "5bc94fbc3221a5db94fae95ae7121a47",
        );
        check_aead(p, EncrId::AES_GCM_16, tc4);
        let tc16 = (
            "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
            GCM_IV,
            GCM_A,
            GCM_P,
            "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa\
             8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
            "76fc6ece0f4e1768cddf8853bb2d551b",
        );
        check_aead(p, EncrId::AES_GCM_16, tc16);
    }
}

#[test]
fn chacha20_poly1305_rfc8439_2_8_2() {
    let plaintext = hex::encode(
        "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for \
         the future, sunscreen would be it.",
    );
    let vector = (
        "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f",
        "070000004041424344454647",
        "50515253c0c1c2c3c4c5c6c7",
        plaintext.as_str(),
        "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d6\
         3dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b36\
         92ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc\
         3ff4def08e4b7a9de576d26586cec64b6116",
        "1ae10b594f09e26a7e902ecbd0600691",
    );
    for p in providers() {
        check_aead(p, EncrId::CHACHA20_POLY1305, vector);
    }
}

/// RFC 4231 test cases 1 and 2: (key, data, [full HMAC-SHA-256, -384, -512]).
const RFC4231: [(&str, &str, [&str; 3]); 2] = [
    (
        "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b",
        "4869205468657265", // "Hi There"
        [
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59c\
             faea9ea9076ede7f4af152e8b2fa9cb6",
            "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cde\
             daa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854",
        ],
    ),
    (
        "4a656665", // "Jefe"
        "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
        [
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e\
             8e2240ca5e69e2c78b3239ecfab21649",
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554\
             9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
        ],
    ),
];

#[test]
fn hmac_sha2_rfc4231_truncated_per_rfc4868() {
    let integs = [
        IntegId::HMAC_SHA2_256_128,
        IntegId::HMAC_SHA2_384_192,
        IntegId::HMAC_SHA2_512_256,
    ];
    for p in providers() {
        for (key, data, macs) in RFC4231 {
            let data = h(data);
            for (integ, full) in integs.into_iter().zip(macs) {
                let mac = p.integrity(integ, &h(key)).expect("hmac key");
                let n = mac.icv_len();
                assert_eq!(n * 4, full.len(), "RFC 4868: ICV is half the output");
                let mut icv = vec![0u8; n];
                // Split input: the MAC is over the concatenation of the parts.
                mac.sign(&[&data[..3], &data[3..], &[]], &mut icv);
                assert_eq!(hex::encode(&icv), full[..2 * n], "{} {integ:?}", p.name());
                assert!(mac.verify(&[&data], &icv));
                assert!(!mac.verify(&[&data], &icv[..n - 1]), "short ICV refused");
                icv[n - 1] ^= 0x80;
                assert!(!mac.verify(&[&data], &icv));
            }
        }
    }
}

#[test]
fn aes_cbc_rfc3602_cases_1_and_2() {
    let cases = [
        (
            "06a9214036b8a15b512e03d534120006",
            "3dafba429d9eb430b422da802c9fac41",
            hex::encode("Single block msg"),
            "e353779c1079aeb82708942dbe77181a",
        ),
        (
            "c286696d887c9aa0611bbb3e2025a45a",
            "562e17996d093d28ddb3ba695a2e6f58",
            "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f".to_string(),
            "d296cd94c2cccf8a3a863028b5e1dc0a7586602d253cfff91b8266bea6d61ab1",
        ),
    ];
    for p in providers() {
        for (key, iv, plaintext, ciphertext) in &cases {
            let cbc = p.cbc(EncrId::AES_CBC, &h(key)).expect("cbc key");
            let iv: [u8; 16] = h(iv).try_into().expect("16-byte IV");
            let mut data = h(plaintext);
            cbc.encrypt_in_place(&iv, &mut data).expect("encrypt");
            assert_eq!(hex::encode(&data), *ciphertext, "{}", p.name());
            cbc.decrypt_in_place(&iv, &mut data).expect("decrypt");
            assert_eq!(hex::encode(&data), *plaintext);
            let mut ragged = [0u8; 17];
            assert_eq!(
                cbc.encrypt_in_place(&iv, &mut ragged),
                Err(CryptoError::BadLength)
            );
            assert_eq!(
                cbc.decrypt_in_place(&iv, &mut ragged),
                Err(CryptoError::BadLength)
            );
        }
    }
}

#[test]
fn providers_refuse_what_they_do_not_implement() {
    for p in providers() {
        assert_eq!(
            p.aead(EncrId::AES_GCM_16, &[0; 24]).err(),
            Some(CryptoError::BadKeyLength)
        );
        assert_eq!(
            p.aead(EncrId::CHACHA20_POLY1305, &[0; 16]).err(),
            Some(CryptoError::BadKeyLength)
        );
        assert_eq!(
            p.aead(EncrId::AES_CCM_16, &[0; 16]).err(),
            Some(CryptoError::UnsupportedAlgorithm)
        );
        assert_eq!(
            p.cbc(EncrId::AES_CBC, &[0; 24]).err(),
            Some(CryptoError::BadKeyLength)
        );
        assert_eq!(
            p.cbc(EncrId::AES_CTR, &[0; 16]).err(),
            Some(CryptoError::UnsupportedAlgorithm)
        );
        let sha1 = p.integrity(IntegId::HMAC_SHA1_96, &[0; 20]);
        assert_eq!(sha1.err(), Some(CryptoError::UnsupportedAlgorithm));
    }
}

#[cfg(all(feature = "aws-lc", feature = "rustcrypto"))]
#[test]
fn both_providers_are_compiled_in() {
    let names: Vec<&str> = providers().iter().map(|p| p.name()).collect();
    assert_eq!(names, ["aws-lc-rs", "rustcrypto"]);
    assert_eq!(phalanx_crypto::default_provider().name(), "aws-lc-rs");
}
