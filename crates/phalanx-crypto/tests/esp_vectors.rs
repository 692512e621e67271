//! Known answers for whole ESP and AH operations, checking how the
//! transform assembles nonces, AADs, ESN high bits and ICVs.
//!
//! Source: computed independently of this crate with Python
//! `cryptography` 48 (AESGCM, ChaCha20Poly1305, AES-CBC) and the standard
//! `hmac`/`hashlib` modules, following RFC 4106 §4-§5 (nonce = salt || IV,
//! AAD = SPI || [Seq high] || Seq low), RFC 7634 §2-§2.1, RFC 4543 §3 and
//! Table 2 (GMAC AAD = SPI || [Seq high] || Seq low || IV || payload),
//! RFC 4303 §2.2.1 / §3.3.2.2 (Seq high appended for the HMAC only) and
//! RFC 4302 §3.3.3 (AH ICV over the packet with the ICV field zeroed).
//! Inputs: SPI 0a0b0c0d, Seq low 00000102, Seq high 3 when ESN is on, AEAD
//! IV 0001..07, CBC IV 0001..0f, payload 40..5f, encryption key material
//! 80 81 .. (salt = its last 4 bytes), integrity key 20 21 ..; AH packet
//! 60..9f with a 24-byte ICV field at offset 24.

mod support;

use phalanx_crypto::{providers, OpLayout, OpStatus, PacketBuf, Suite};
use phalanx_wire::{EncrId, IntegId};
use support::{esp_packet, protect, transform, unprotect};

const HEADER: [u8; 8] = [0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0x01, 0x02];
const SEQ_HIGH: u32 = 3;

fn payload() -> Vec<u8> {
    (0x40..0x60).collect()
}

/// (suite, IV length, expected without ESN, expected with ESN)
fn esp_cases() -> Vec<(Suite, usize, &'static str, &'static str)> {
    vec![
        (
            Suite::esp(EncrId::AES_GCM_16, 128, IntegId::NONE),
            8,
            "0a0b0c0d0000010200010203040506071e67af276e3e249baf37a6794604628b\
             3399e16f335cf72ff0645257ddbf31d40a2feae4367df60bff2cf4e82069964c",
            "0a0b0c0d0000010200010203040506071e67af276e3e249baf37a6794604628b\
             3399e16f335cf72ff0645257ddbf31d4c315073e97a766d81df2c9579ca59862",
        ),
        (
            Suite::esp(EncrId::CHACHA20_POLY1305, 256, IntegId::NONE),
            8,
            "0a0b0c0d000001020001020304050607633d8d8ab29d0876135d935b8d2c94e2\
             d6381ccf070925efafc50c50b8b187b78291bdd10b016d95fff66e6ad9d2521a",
            "0a0b0c0d000001020001020304050607633d8d8ab29d0876135d935b8d2c94e2\
             d6381ccf070925efafc50c50b8b187b7f8ac2042bf60a45e7f256c3d8f21b3e4",
        ),
        (
            Suite::esp(EncrId::NULL_AUTH_AES_GMAC, 256, IntegId::NONE),
            8,
            "0a0b0c0d000001020001020304050607404142434445464748494a4b4c4d4e4f\
             505152535455565758595a5b5c5d5e5fe37eed33d04e8bd437e6955a34d00d08",
            "0a0b0c0d000001020001020304050607404142434445464748494a4b4c4d4e4f\
             505152535455565758595a5b5c5d5e5fae765520567fbb938b703e6d745f71bd",
        ),
        (
            Suite::esp(EncrId::AES_CBC, 128, IntegId::HMAC_SHA2_256_128),
            16,
            "0a0b0c0d00000102000102030405060708090a0b0c0d0e0f2a1388832d04d714\
             acca7aba3328796edcff4c27c430636a972bbcbfa3a80e69910fa79681f6d1a3\
             9b7f390d9970b99e",
            "0a0b0c0d00000102000102030405060708090a0b0c0d0e0f2a1388832d04d714\
             acca7aba3328796edcff4c27c430636a972bbcbfa3a80e698ef4bc93937552de\
             f95923c46d1f4d4d",
        ),
        (
            Suite::esp(EncrId::NULL, 0, IntegId::HMAC_SHA2_512_256),
            0,
            "0a0b0c0d00000102404142434445464748494a4b4c4d4e4f5051525354555657\
             58595a5b5c5d5e5f64b90bd447baefc397da85469e569b955396c267d01020f8\
             bc3b6265966a02f3",
            "0a0b0c0d00000102404142434445464748494a4b4c4d4e4f5051525354555657\
             58595a5b5c5d5e5f0c1df10a1f2867dcc1a7505da8e6220a69f8fa288e045ab2\
             199ca2e4b97a0dc4",
        ),
    ]
}

#[test]
fn esp_known_answers() {
    for p in providers() {
        for (suite, iv_len, plain, esn) in esp_cases() {
            let t = transform(p, suite);
            let iv: Vec<u8> = (0..iv_len as u8).collect();
            for (esn_high, expected) in [(None, plain), (Some(SEQ_HIGH), esn)] {
                let (buf, mut layout) = esp_packet(&suite, HEADER, &iv, &payload(), 4);
                layout.esn_high = esn_high;
                let (status, sealed) = protect(&t, layout, buf);
                assert_eq!(status, OpStatus::Completed);
                let what = format!("{} {suite:?} esn={esn_high:?}", p.name());
                assert_eq!(hex::encode(sealed.as_slice()), expected, "{what}");
                let (status, opened) = unprotect(&t, layout, sealed);
                assert_eq!(status, OpStatus::Completed, "{what}");
                let start = layout.payload_start as usize;
                assert_eq!(
                    &opened.as_slice()[start..start + 32],
                    &payload()[..],
                    "{what}"
                );
            }
        }
    }
}

#[test]
fn ah_known_answers() {
    let expected = [
        (
            None,
            "606162636465666768696a6b6c6d6e6f707172737475767739821e6087c8a121\
             fd2b23a98d6c7cd4a83ad32af440068f909192939495969798999a9b9c9d9e9f",
        ),
        (
            Some(SEQ_HIGH),
            "606162636465666768696a6b6c6d6e6f70717273747576770cbb5d8a4e053c88\
             214baf91f88cbb437a686678ca79a79d909192939495969798999a9b9c9d9e9f",
        ),
    ];
    let suite = Suite::ah(IntegId::HMAC_SHA2_384_192);
    for p in providers() {
        let t = transform(p, suite);
        for (esn_high, hex_packet) in expected {
            let mut packet: Vec<u8> = (0x60..0xa0).collect();
            packet[24..48].fill(0);
            let layout = OpLayout {
                auth_start: 0,
                auth_end: 64,
                icv_start: 24,
                esn_high,
                ..OpLayout::default()
            };
            let (status, signed) = protect(&t, layout, PacketBuf::from_slice(&packet, 0, 0));
            assert_eq!(status, OpStatus::Completed);
            assert_eq!(
                hex::encode(signed.as_slice()),
                hex_packet,
                "{} esn={esn_high:?}",
                p.name()
            );
            let (status, _) = unprotect(&t, layout, signed);
            assert_eq!(status, OpStatus::Completed);
        }
    }
}
