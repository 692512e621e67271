//! Key schedule tests: one published vector (HMAC-SHA1, from the NIST
//! CAVP SP 800-135 IKEv2 KDF format) and vectors computed independently
//! with Python's `hmac`/`hashlib` for every derivation.
//!
//! The Python reference (run with python3; prints the constants below):
//!
//! ```text
//! import hmac, hashlib
//! H = {5: hashlib.sha256, 6: hashlib.sha384, 7: hashlib.sha512, 2: hashlib.sha1}
//! def prf(alg, k, s): return hmac.new(k, s, H[alg]).digest()
//! def prf_plus(alg, k, s, n):
//!     out, t, i = b"", b"", 1
//!     while len(out) < n:
//!         t = prf(alg, k, t + s + bytes([i])); out += t; i += 1
//!     return out[:n]
//! def ike_keys(alg, skeyseed, ni, nr, spii, spir, prf_len, integ, encr):
//!     return prf_plus(alg, skeyseed, ni + nr + spii + spir, 3 * prf_len + 2 * integ + 2 * encr)
//! b = bytes.fromhex
//! ni = bytes(range(0x00, 0x20)); nr = bytes(range(0x20, 0x40))
//! gir = bytes(range(0x40, 0x60)); spii = b("0011223344556677"); spir = b("8899aabbccddeeff")
//! skeyseed = prf(5, ni + nr, gir)
//! keys = ike_keys(5, skeyseed, ni, nr, spii, spir, 32, 0, 36)
//! print("INITIAL", keys.hex()); sk_d = keys[:32]
//! sk1 = bytes(range(0x80, 0xa0))
//! skeyseed1 = prf(5, sk_d, sk1 + ni + nr)
//! print("ADDKE", ike_keys(5, skeyseed1, ni, nr, spii, spir, 32, 0, 36).hex())
//! ni2 = bytes(range(0xa0, 0xb8)); nr2 = bytes(range(0xb8, 0xd0))
//! gir2 = bytes(range(0xd0, 0xf0)); spii2 = b("0102030405060708"); spir2 = b("1112131415161718")
//! skeyseed2 = prf(5, sk_d, gir2 + ni2 + nr2)
//! print("REKEY", ike_keys(6, skeyseed2, ni2, nr2, spii2, spir2, 48, 32, 16).hex())
//! skeyseed3 = prf(5, sk_d, gir2 + ni2 + nr2 + sk1)
//! print("REKEY_ADDKE", ike_keys(6, skeyseed3, ni2, nr2, spii2, spir2, 48, 32, 16).hex())
//! print("CHILD", prf_plus(5, sk_d, ni + nr, 96).hex())
//! print("CHILD_PFS", prf_plus(5, sk_d, gir2 + ni2 + nr2, 96).hex())
//! print("CHILD_PFS_ADDKE", prf_plus(5, sk_d, gir2 + ni2 + nr2 + sk1, 96).hex())
//! ```

use super::*;
use crate::ike::prf::prf;
use crate::providers;

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s).unwrap()
}

fn range(from: u8, to: u8) -> Vec<u8> {
    (from..to).collect()
}

/// All seven keys in prf+ order.
fn stream(keys: &IkeSaKeys) -> String {
    let all = [
        &keys.sk_d,
        &keys.sk_ai,
        &keys.sk_ar,
        &keys.sk_ei,
        &keys.sk_er,
        &keys.sk_pi,
        &keys.sk_pr,
    ];
    all.iter().map(hex::encode).collect()
}

/// The inputs of the Python script's first exchange.
struct Fixture {
    ni: Vec<u8>,
    nr: Vec<u8>,
    gir: Vec<u8>,
    sk1: Vec<u8>,
    ni2: Vec<u8>,
    nr2: Vec<u8>,
    gir2: Vec<u8>,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            ni: range(0x00, 0x20),
            nr: range(0x20, 0x40),
            gir: range(0x40, 0x60),
            sk1: range(0x80, 0xa0),
            ni2: range(0xa0, 0xb8),
            nr2: range(0xb8, 0xd0),
            gir2: range(0xd0, 0xf0),
        }
    }

    fn inputs(&self) -> KdfInputs<'_> {
        KdfInputs {
            ni: &self.ni,
            nr: &self.nr,
            spi_i: [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77],
            spi_r: [0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff],
        }
    }

    fn rekey_inputs(&self) -> KdfInputs<'_> {
        KdfInputs {
            ni: &self.ni2,
            nr: &self.nr2,
            spi_i: [1, 2, 3, 4, 5, 6, 7, 8],
            spi_r: [0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18],
        }
    }

    /// PRF_HMAC_SHA2_256 with AES-256-GCM-16: SK_e* 32 + 4 salt, no SK_a*.
    fn initial(&self, provider: &dyn CryptoProvider) -> IkeSaKeys {
        let lengths = KeyLengths::new(PrfAlgorithm::HmacSha2_256, 0, 36);
        IkeSaKeys::derive(
            provider,
            PrfAlgorithm::HmacSha2_256,
            lengths,
            &self.inputs(),
            &self.gir,
        )
        .unwrap()
    }
}

#[test]
fn initial_ike_sa_keys() {
    let f = Fixture::new();
    for provider in providers() {
        let keys = f.initial(provider);
        assert_eq!(stream(&keys), INITIAL, "{}", provider.name());
        assert_eq!(keys.sk_d.len(), 32);
        assert!(keys.sk_ai.is_empty() && keys.sk_ar.is_empty());
        assert_eq!(keys.sk_ei.len(), 36);
        assert_eq!(keys.prf(), PrfAlgorithm::HmacSha2_256);
        assert_eq!(keys.lengths().total(), 3 * 32 + 2 * 36);
    }
}

#[test]
fn additional_key_exchange_updates_keys() {
    let f = Fixture::new();
    for provider in providers() {
        let keys = f.initial(provider);
        let next = keys
            .update_with_additional_ke(provider, &f.inputs(), &f.sk1)
            .unwrap();
        assert_eq!(stream(&next), ADDKE, "{}", provider.name());
        assert_eq!(next.lengths(), keys.lengths());
    }
}

#[test]
fn rekey_uses_old_prf_for_skeyseed_and_new_prf_for_keys() {
    let f = Fixture::new();
    // New IKE SA: PRF_HMAC_SHA2_384, AES-128-CBC + HMAC-SHA-256-128.
    let lengths = KeyLengths::new(PrfAlgorithm::HmacSha2_384, 32, 16);
    for provider in providers() {
        let old = f.initial(provider);
        let rekey = |secrets: &[&[u8]]| {
            IkeSaKeys::derive_rekey(
                provider,
                old.prf(),
                &old.sk_d,
                PrfAlgorithm::HmacSha2_384,
                lengths,
                &f.rekey_inputs(),
                secrets,
            )
            .unwrap()
        };
        let new = rekey(&[&f.gir2]);
        assert_eq!(stream(&new), REKEY, "{}", provider.name());
        assert_eq!(new.prf(), PrfAlgorithm::HmacSha2_384);
        assert_eq!(new.sk_d.len(), 48);
        let with_addke = rekey(&[&f.gir2, &f.sk1]);
        assert_eq!(stream(&with_addke), REKEY_ADDKE, "{}", provider.name());
        let none = IkeSaKeys::derive_rekey(
            provider,
            old.prf(),
            &old.sk_d,
            PrfAlgorithm::HmacSha2_384,
            lengths,
            &f.rekey_inputs(),
            &[],
        );
        assert_eq!(none.err(), Some(CryptoError::BadLength));
    }
}

#[test]
fn child_sa_keymat_with_and_without_pfs() {
    let f = Fixture::new();
    for provider in providers() {
        let keys = f.initial(provider);
        let alg = PrfAlgorithm::HmacSha2_256;
        let keymat = |secrets: &[&[u8]], ni: &[u8], nr: &[u8]| {
            child_keymat(provider, alg, &keys.sk_d, secrets, ni, nr, 96).unwrap()
        };
        assert_eq!(hex::encode(&*keymat(&[], &f.ni, &f.nr)), CHILD);
        assert_eq!(hex::encode(&*keymat(&[&f.gir2], &f.ni2, &f.nr2)), CHILD_PFS);
        let addke = keymat(&[&f.gir2, &f.sk1], &f.ni2, &f.nr2);
        assert_eq!(hex::encode(&*addke), CHILD_PFS_ADDKE);
    }
}

#[test]
fn child_keys_split_in_rfc_order() {
    let keymat: Vec<u8> = (0..96).collect();
    let keys = ChildKeys::split(&keymat, 16, 32).unwrap();
    // RFC 7296 §2.17: encr then integ, initiator-to-responder first.
    assert_eq!(&keys.encr_i[..], &keymat[0..16]);
    assert_eq!(&keys.integ_i[..], &keymat[16..48]);
    assert_eq!(&keys.encr_r[..], &keymat[48..64]);
    assert_eq!(&keys.integ_r[..], &keymat[64..96]);
    assert_eq!(ChildKeys::keymat_len(16, 32), 96);
    // AEAD: 36-byte keys with salt, no integrity keys.
    let aead = ChildKeys::split(&keymat[..72], 36, 0).unwrap();
    assert_eq!(&aead.encr_r[..], &keymat[36..72]);
    assert!(aead.integ_i.is_empty() && aead.integ_r.is_empty());
    assert_eq!(
        ChildKeys::split(&keymat[..95], 16, 32).err(),
        Some(CryptoError::BadLength)
    );
    assert!(!format!("{keys:?}").contains("00, 01"));
}

#[test]
fn keymat_beyond_prf_plus_limit_is_refused() {
    for provider in providers() {
        let alg = PrfAlgorithm::HmacSha2_256;
        let too_long = alg.max_prf_plus_len() + 1;
        let r = child_keymat(provider, alg, &[1; 32], &[], b"ni", b"nr", too_long);
        assert_eq!(r.err(), Some(CryptoError::BadLength));
    }
}

#[test]
fn debug_never_prints_keys() {
    let f = Fixture::new();
    let keys = f.initial(providers()[0]);
    let shown = format!("{keys:?}");
    assert!(shown.contains("HmacSha2_256"));
    assert!(!shown.contains(&hex::encode(&keys.sk_d[..4])));
}

/// The published HMAC-SHA1 vector (CAVP SP 800-135 IKEv2 KDF layout, as
/// printed by libreswan's `libreswan-ikev2-cavs -h 2 -l 132` test): SKEYSEED,
/// DKM = prf+(SKEYSEED, Ni | Nr | SPIi | SPIr), DKM(Child SA), DKM(Child SA
/// D-H) and SKEYSEED(Rekey). aws-lc-rs only: the RustCrypto provider carries
/// no SHA-1.
#[cfg(feature = "aws-lc")]
#[test]
fn cavp_layout_hmac_sha1_vector() {
    let provider = &crate::AwsLcProvider;
    let alg = PrfAlgorithm::HmacSha1;
    let gir = unhex("4b2c1f971981a8ad8d0abeafabf38cf75fc8349c148142465ed9c8b516b8be52");
    let gir_new = unhex("863f3c9d06efd39d2b907b97f8699e5dd5251ef64a2a176f36ee40c87d4f9330");
    let (ni, nr) = (unhex("32b50d5f4a3763f3"), unhex("9206a04b26564cb1"));
    let inputs = KdfInputs {
        ni: &ni,
        nr: &nr,
        spi_i: [0x34, 0xc9, 0xe7, 0xc1, 0x88, 0x86, 0x87, 0x85],
        spi_r: [0x3f, 0xf7, 0x7d, 0x76, 0x0d, 0x2b, 0x21, 0x99],
    };
    let key = provider.prf(alg, &[&ni[..], &nr[..]].concat()).unwrap();
    assert_eq!(
        hex::encode(&*prf(key.as_ref(), &[&gir])),
        "a9a7b222b59f8f48645f28a1db5b5f5d7479cba7"
    );
    // 132 bytes of DKM = 3 * 20 (SK_d, SK_pi, SK_pr) + 2 * 20 + 2 * 16.
    let keys =
        IkeSaKeys::derive(provider, alg, KeyLengths::new(alg, 20, 16), &inputs, &gir).unwrap();
    assert_eq!(stream(&keys), CAVP_SHA1_DKM);
    let child = child_keymat(provider, alg, &keys.sk_d, &[], &ni, &nr, 132).unwrap();
    assert_eq!(hex::encode(&*child), CAVP_SHA1_DKM_CHILD);
    let child_dh = child_keymat(provider, alg, &keys.sk_d, &[&gir_new], &ni, &nr, 132).unwrap();
    assert_eq!(hex::encode(&*child_dh), CAVP_SHA1_DKM_CHILD_DH);
    let sk_d = provider.prf(alg, &keys.sk_d).unwrap();
    assert_eq!(
        hex::encode(&*prf(sk_d.as_ref(), &[&gir_new, &ni, &nr])),
        "63e81194946ebd05df7df5ebf5d8750056bf1f1d"
    );
}

/// A snapshot's secrets become the same keys again; a secret of the
/// wrong length is refused.
#[test]
fn from_secrets_rebuilds_derived_keys_and_checks_lengths() {
    let provider = &crate::AwsLcProvider;
    let alg = PrfAlgorithm::HmacSha1;
    let lengths = KeyLengths::new(alg, 20, 16);
    let inputs = KdfInputs {
        ni: &[1; 16],
        nr: &[2; 16],
        spi_i: [3; 8],
        spi_r: [4; 8],
    };
    let keys = IkeSaKeys::derive(provider, alg, lengths, &inputs, &[5; 32]).unwrap();
    let secrets = || {
        [
            &keys.sk_d,
            &keys.sk_ai,
            &keys.sk_ar,
            &keys.sk_ei,
            &keys.sk_er,
            &keys.sk_pi,
            &keys.sk_pr,
        ]
        .map(|k| k.clone())
    };
    let rebuilt = IkeSaKeys::from_secrets(alg, lengths, secrets()).unwrap();
    assert_eq!(stream(&rebuilt), stream(&keys));
    assert_eq!((rebuilt.prf(), rebuilt.lengths()), (alg, lengths));
    let mut short = secrets();
    short[3].pop();
    assert!(IkeSaKeys::from_secrets(alg, lengths, short).is_err());
}

const CAVP_SHA1_DKM: &str = concat!(
    "a14293677cc80ff8f9cc0eee30d895da9d8f405666e30ef0dfcb63c634a46002a2a63080e514a0",
    "62768b76606f9fa5e992204fc5a670bde3f10d6b027113936a5c55b648a194ae587b0088d52204",
    "b702c979fa280870d2ed41efa9c549fd11198af1670b143d384bd275c5f594cf266b05ebadca85",
    "5e4249520a441a81157435a7a56cc4",
);
const CAVP_SHA1_DKM_CHILD: &str = concat!(
    "8059e3ee8810e6c3a91bc8bcd2a7a41151b8d0e6ae239c7b38093ad85ef4c5811a8e7b5d1cdabd",
    "9560b2d5e092d1f24e2d4b85eccdf0ad0dc9abd94b51ee71814ca6dbc8bb51b6309f5b9545c7eb",
    "35cf5580b1e521a8fe20754a2d883ba0c2cf285f524aea6545b33106bc03e614296d319d41d4b5",
    "0b3f510b1c0a22f3e664994d234cb4",
);
const CAVP_SHA1_DKM_CHILD_DH: &str = concat!(
    "bb43244c1860ad65ee1e211ffe8bb3661750c8f89cb9f547df7f4fa61d37301628190e38c66232",
    "eab4b3ab14c400a5197dd3730ed4820a8a10394d51e1c0400052f63ebd36b0e7ef53aaed31eba4",
    "a5080d7d4b5666023a8bbb5ffb7857240f9a05884d1b7d2f933708450b7b3288f1fc863ab49fa9",
    "01227cffc06e27899c7054d56fd74c",
);
const INITIAL: &str = concat!(
    "ed417dd11150c8c69d9fefe2d13db45c773738fd8aed63c1b7dc180c32c959794daf4ec8",
    "0dae5fd9f208a952420d890b4ea6ee9d74ea4c3d9aaa1677c84c996388b23e4ac4042c0e",
    "900fd6c6271929a111a56e68b1e67377430a93b983101ad994b727eb86684a3a6baed35c",
    "4d61b1b341cfc228d9f9b6afba087df8d325e7c2d5838fb629a1a2181112e5f7c9450cf7",
    "93e1c0d6c336fe1d8413eafbea3a73d82d2cf32a55cab667",
);
const ADDKE: &str = concat!(
    "77204c764001ac091478b21e694899f739904573a25e837af285b96a800c9845d5f3e3ad",
    "1664dedef86a68c2f598f7015fca3c03a720361657232647049ce20bc224a700a729c1ab",
    "df8197c483ead447ddb5c25f77a0fd9dc156a9f3381576d84d1df61bff5031a7712b1787",
    "d4cfe3f9420156290ecc53e2248d5e8c063fbe804c973d0fa20c3e43ad18327586a00884",
    "221e7327de949c35617ea7b16749288eaa998d0963e283f7",
);
const REKEY: &str = concat!(
    "aa1f5a762ba0caf20b39eba8657795b9cfacf7b38329ee288404035a09ecb7649ddaef0b",
    "3d0405f64cee9cd9ba789b8e25feeaf9ee3ce8d108080d8651ddd052e10b4ae5f0078e56",
    "1f6414a5e6b860fb1f4d17c25760e0604694cde342fd744848716307d98a7d2ad24220e1",
    "1f57ab1ec1577450c418ef670a6945eeba8108a572fbb034942e23ac98825d503da9bf7a",
    "48411b313c902737765330e2b0a2c38e3be1ea7f46c4fc03920c2915d019d4e93267b0ea",
    "32a305cbf32fe7315ea50eeba652e05551b70d5e63e2289a64d3764df1ba92debd75e615",
    "a9a0dafea1c2bf711ec704b5bf080e98cc591962e24d5638",
);
const REKEY_ADDKE: &str = concat!(
    "2613b788e5ee83efa7e97ddcf7a1f7bb84d23d6e938aae94714675ba58b392947d24b733",
    "48b3aff641b6171792939046cb7a24c1e0fa80f98e0e8097e83d4fb8061c9a44a081f8d4",
    "a6a5607e8780dd0926eaf9a15404238ce934393af03d5c791d3ca0a7152c58b06340bcee",
    "cdd8af4180c42183ea4687286a7d5c8c2758ee1ee59226f657ac72aa5e1b8cd18faa5a96",
    "d5564b5f0a17daab434b0ed918d05fb725484707b5a1a715b0275db54a72bc1221e66038",
    "bc3d204d77fc613e9b2e275615f2c72dd934e92323ea88c06de626663efd45abaeedc3bb",
    "ed4f6a17cb9cfa9a92a395924222bfadf7da00e492e590b7",
);
const CHILD: &str = concat!(
    "ea5cadca995f9f6834fcae49836008c04f322d42c491b08426e6bcbeae5fa507b1320d7b",
    "b0e85667c199678cfffcf9f0fa619bf68415346f8c7a980b50d6451568c223037b50b39d",
    "52feb2c973f0a4b1c479d0af3752bcf6b83a5b8094af2007",
);
const CHILD_PFS: &str = concat!(
    "9940e476798ea96d32f87f177bb96a3bea2d0be2362b1c42c0efda321b47147fe86eab96",
    "2a95bc54b72db70e38bfce6c97b61f000a9f0edc3f560a6b824891d578f5f3f0cb14a0ae",
    "774f5b1d0862df10eac45824a55eedfacd0ae8e4a5713ee1",
);
const CHILD_PFS_ADDKE: &str = concat!(
    "bd112b6de2f2f95ca6c15d2cfe182556c3abc82dd5c844630fc57cb2a0f45155236567ea",
    "b98555c146002f4ed8fb273b427b58a5949215dc1607a2f64ed366a303957cb847cac18c",
    "0dc7f6d888dc96af1e33ef1e74595a7afe49cf0c89cee19a",
);
