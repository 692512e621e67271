//! Key exchange tests: both sides agree for every group and provider, the
//! RFC 5903 §8 (ECP-256/384) and RFC 7748 §6.1 (X25519) vectors, a
//! Python-computed MODP-2048 vector, and refused peer values.

use super::*;
use crate::providers;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

const ALL: [KeGroup; 5] = [
    KeGroup::Modp2048,
    KeGroup::Ecp256,
    KeGroup::Ecp384,
    KeGroup::Curve25519,
    KeGroup::MlKem768,
];

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s.split_whitespace().collect::<String>()).unwrap()
}

/// An "RNG" that hands out fixed bytes, to inject the private keys of the
/// published vectors through the normal API.
struct FixedRng(Vec<u8>);

impl rand_core::RngCore for FixedRng {
    fn next_u32(&mut self) -> u32 {
        rand_core::impls::next_u32_via_fill(self)
    }
    fn next_u64(&mut self) -> u64 {
        rand_core::impls::next_u64_via_fill(self)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        assert!(dest.len() <= self.0.len(), "fixed RNG ran dry");
        dest.copy_from_slice(&self.0[..dest.len()]);
        self.0.drain(..dest.len());
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl rand_core::CryptoRng for FixedRng {}

fn rng() -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(7)
}

/// The providers that implement `group`: aws-lc-rs all, RustCrypto MODP only.
fn supporting(group: KeGroup) -> Vec<&'static dyn CryptoProvider> {
    providers()
        .into_iter()
        .filter(|p| start_initiator(*p, group, &mut rng()).is_ok())
        .collect()
}

#[test]
fn ids_and_length_table() {
    for group in ALL {
        assert_eq!(KeGroup::from_id(group.id()), Some(group));
        assert_eq!(
            public_value_len(group.id(), KeRole::Initiator),
            Some(group.public_value_len(KeRole::Initiator))
        );
    }
    assert_eq!(KeGroup::from_id(2), None); // MODP-1024: not offered
    assert_eq!(KeGroup::try_from(KeId::ML_KEM_768), Ok(KeGroup::MlKem768));
    assert_eq!(
        KeGroup::try_from(KeId::CURVE448),
        Err(CryptoError::UnsupportedAlgorithm)
    );
    assert_eq!(KeId::from(KeGroup::Ecp384), KeId::ECP_384);
    assert_eq!(public_value_len(21, KeRole::Initiator), None); // ECP-521
    assert_eq!(KeGroup::MlKem768.public_value_len(KeRole::Initiator), 1184);
    assert_eq!(KeGroup::MlKem768.public_value_len(KeRole::Responder), 1088);
    assert_eq!(KeGroup::Ecp384.public_value_len(KeRole::Responder), 96);
    assert!(KeGroup::MlKem768.is_kem() && !KeGroup::Curve25519.is_kem());
}

#[test]
fn both_sides_agree_for_every_group() {
    for group in ALL {
        let providers = supporting(group);
        assert!(!providers.is_empty(), "{group:?}");
        for provider in providers {
            let mut rng = rng();
            let initiator = start_initiator(provider, group, &mut rng).unwrap();
            assert_eq!(initiator.group(), group);
            let public_i = initiator.public_value().to_vec();
            assert_eq!(public_i.len(), group.public_value_len(KeRole::Initiator));
            let response = respond(provider, group, &public_i, &mut rng).unwrap();
            assert_eq!(
                response.public_value.len(),
                group.public_value_len(KeRole::Responder)
            );
            assert_eq!(response.shared_secret.len(), group.shared_secret_len());
            let secret = initiator.complete(&response.public_value).unwrap();
            assert_eq!(
                secret,
                response.shared_secret,
                "{group:?} {}",
                provider.name()
            );
            assert!(secret.iter().any(|&b| b != 0));
        }
    }
}

#[test]
fn rustcrypto_has_only_modp() {
    let names: Vec<_> = supporting(KeGroup::Ecp256)
        .iter()
        .map(|p| p.name())
        .collect();
    assert!(!names.contains(&"rustcrypto"));
    let names: Vec<_> = supporting(KeGroup::Modp2048)
        .iter()
        .map(|p| p.name())
        .collect();
    assert_eq!(names.len(), providers().len());
}

/// MODP-2048 with exponents x1 = 0x0123…ef and x2 = 0xfedc…10 (64 bytes
/// each), Python: `pow(2, x2, p)` and `pow(pow(2, x2, p), x1, p)`.
#[test]
fn modp_python_vector() {
    for provider in supporting(KeGroup::Modp2048) {
        let x1 = unhex(&"0123456789abcdef".repeat(8));
        let x2 = unhex(&"fedcba9876543210".repeat(8));
        let first = start_initiator(provider, KeGroup::Modp2048, &mut FixedRng(x1.clone()));
        let public_x1 = first.unwrap().public_value().to_vec();
        let responder =
            respond(provider, KeGroup::Modp2048, &public_x1, &mut FixedRng(x2)).unwrap();
        assert_eq!(hex::encode(&responder.public_value), MODP_PUBLIC_X2);
        assert_eq!(hex::encode(&*responder.shared_secret), MODP_SHARED);
        let initiator = start_initiator(provider, KeGroup::Modp2048, &mut FixedRng(x1)).unwrap();
        let secret = initiator.complete(&responder.public_value).unwrap();
        assert_eq!(hex::encode(&*secret), MODP_SHARED);
    }
}

/// RFC 5903 §8.1 (256-bit random ECP group) and §8.2 (384-bit): i, g^i,
/// r, g^r and the x-coordinate of g^ir, with Key Exchange Data = x | y.
#[cfg(feature = "aws-lc")]
#[test]
fn rfc5903_vectors() {
    let vectors = [
        (
            KeGroup::Ecp256,
            "C88F01F510D9AC3F70A292DAA2316DE544E9AAB8AFE84049C62A9C57862D1433",
            "DAD0B65394221CF9B051E1FECA5787D098DFE637FC90B9EF945D0C3772581180
             5271A0461CDB8252D61F1C456FA3E59AB1F45B33ACCF5F58389E0577B8990BB3",
            "C6EF9C5D78AE012A011164ACB397CE2088685D8F06BF9BE0B283AB46476BEE53",
            "D12DFB5289C8D4F81208B70270398C342296970A0BCCB74C736FC7554494BF63
             56FBF3CA366CC23E8157854C13C58D6AAC23F046ADA30F8353E74F33039872AB",
            "D6840F6B42F6EDAFD13116E0E12565202FEF8E9ECE7DCE03812464D04B9442DE",
        ),
        (
            KeGroup::Ecp384,
            "099F3C7034D4A2C699884D73A375A67F7624EF7C6B3C0F160647B67414DCE655
             E35B538041E649EE3FAEF896783AB194",
            "667842D7D180AC2CDE6F74F37551F55755C7645C20EF73E31634FE72B4C55EE6
             DE3AC808ACB4BDB4C88732AEE95F41AA9482ED1FC0EEB9CAFC4984625CCFC23F
             65032149E0E144ADA024181535A0F38EEB9FCFF3C2C947DAE69B4C634573A81C",
            "41CB0779B4BDB85D47846725FBEC3C9430FAB46CC8DC5060855CC9BDA0AA2942
             E0308312916B8ED2960E4BD55A7448FC",
            "E558DBEF53EECDE3D3FCCFC1AEA08A89A987475D12FD950D83CFA41732BC509D
             0D1AC43A0336DEF96FDA41D0774A3571DCFBEC7AACF3196472169E838430367F
             66EEBE3C6E70C416DD5F0C68759DD1FFF83FA40142209DFF5EAAD96DB9E6386C",
            "11187331C279962D93D604243FD592CB9D0A926F422E47187521287E7156C5C4
             D603135569B9E9D09CF5D4A270F59746",
        ),
    ];
    for (group, i, gi, r, gr, gir) in vectors {
        published_exchange(group, [i, gi, r, gr, gir]);
    }
}

/// RFC 7748 §6.1: Alice's and Bob's private keys, public keys and K.
#[cfg(feature = "aws-lc")]
#[test]
fn rfc7748_x25519_vector() {
    published_exchange(
        KeGroup::Curve25519,
        [
            "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
            "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a",
            "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb",
            "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
            "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742",
        ],
    );
}

/// Runs a published exchange `[i, g^i, r, g^r, g^ir]` through both roles.
#[cfg(feature = "aws-lc")]
fn published_exchange(group: KeGroup, [i, gi, r, gr, gir]: [&str; 5]) {
    let provider = &crate::AwsLcProvider;
    let initiator = start_initiator(provider, group, &mut FixedRng(unhex(i))).unwrap();
    assert_eq!(initiator.public_value(), &unhex(gi)[..], "{group:?} g^i");
    let response = respond(provider, group, &unhex(gi), &mut FixedRng(unhex(r))).unwrap();
    assert_eq!(response.public_value, unhex(gr), "{group:?} g^r");
    assert_eq!(
        &response.shared_secret[..],
        &unhex(gir)[..],
        "{group:?} responder g^ir"
    );
    let secret = initiator.complete(&unhex(gr)).unwrap();
    assert_eq!(&secret[..], &unhex(gir)[..], "{group:?} initiator g^ir");
}

#[test]
fn wrong_lengths_are_refused() {
    for group in ALL {
        for provider in supporting(group) {
            let len_i = group.public_value_len(KeRole::Initiator);
            for bad_len in [0, len_i - 1, len_i + 1] {
                let r = respond(provider, group, &vec![5; bad_len], &mut rng());
                assert_eq!(r.err(), Some(CryptoError::BadLength), "{group:?} {bad_len}");
            }
            let len_r = group.public_value_len(KeRole::Responder);
            for bad_len in [0, len_r - 1, len_r + 1] {
                let state = start_initiator(provider, group, &mut rng()).unwrap();
                let r = state.complete(&vec![5; bad_len]);
                assert_eq!(r.err(), Some(CryptoError::BadLength), "{group:?} {bad_len}");
            }
        }
    }
}

/// RFC 6989 §2.3: a point that is not on the curve is refused; so is the
/// all-zero value (the point at infinity has no x | y encoding).
#[cfg(feature = "aws-lc")]
#[test]
fn ecp_points_off_the_curve_are_refused() {
    let provider = &crate::AwsLcProvider;
    for group in [KeGroup::Ecp256, KeGroup::Ecp384] {
        let honest = start_initiator(provider, group, &mut rng()).unwrap();
        let mut off_curve = honest.public_value().to_vec();
        let last = off_curve.len() - 1;
        off_curve[last] ^= 1;
        let zero = vec![0; off_curve.len()];
        for bad in [off_curve, zero] {
            let r = respond(provider, group, &bad, &mut rng());
            assert_eq!(r.err(), Some(CryptoError::BadLength), "{group:?}");
            let state = start_initiator(provider, group, &mut rng()).unwrap();
            assert_eq!(state.complete(&bad).err(), Some(CryptoError::BadLength));
        }
    }
}

/// RFC 8031 §2: low-order points give the all-zero secret, which is
/// refused. u = 0 and u = 1 are such points (RFC 7748 §6.1 discussion).
#[cfg(feature = "aws-lc")]
#[test]
fn x25519_low_order_points_are_refused() {
    let provider = &crate::AwsLcProvider;
    let mut one = [0u8; 32];
    one[0] = 1;
    for bad in [[0u8; 32], one] {
        let r = respond(provider, KeGroup::Curve25519, &bad, &mut rng());
        assert_eq!(r.err(), Some(CryptoError::BadLength));
    }
}

#[test]
fn modp_values_out_of_range_are_refused() {
    let p = unhex(&format!(
        "{}{}",
        "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD1", &MODP_PRIME_TAIL
    ));
    let mut p_minus_1 = p.clone();
    p_minus_1[255] -= 1;
    let mut one = vec![0u8; 256];
    one[255] = 1;
    for provider in supporting(KeGroup::Modp2048) {
        for bad in [&vec![0u8; 256], &one, &p_minus_1, &p, &vec![0xff; 256]] {
            let r = respond(provider, KeGroup::Modp2048, bad, &mut rng());
            assert_eq!(r.err(), Some(CryptoError::BadLength));
        }
    }
}

/// FIPS 203 §7.2: an encapsulation key whose coefficients are not reduced
/// modulo q = 3329 is refused. The first 12-bit coefficient is set to 4095.
#[cfg(feature = "aws-lc")]
#[test]
fn mlkem_unreduced_encapsulation_key_is_refused() {
    let provider = &crate::AwsLcProvider;
    let honest = start_initiator(provider, KeGroup::MlKem768, &mut rng()).unwrap();
    let mut bad = honest.public_value().to_vec();
    bad[0] = 0xff;
    bad[1] |= 0x0f;
    let r = respond(provider, KeGroup::MlKem768, &bad, &mut rng());
    assert_eq!(r.err(), Some(CryptoError::BadLength));
}

/// FIPS 203 §6.3 implicit rejection: a tampered ciphertext yields a
/// different secret, not an error (the AUTH exchange then fails).
#[cfg(feature = "aws-lc")]
#[test]
fn mlkem_tampered_ciphertext_gives_another_secret() {
    let provider = &crate::AwsLcProvider;
    let initiator = start_initiator(provider, KeGroup::MlKem768, &mut rng()).unwrap();
    let response = respond(
        provider,
        KeGroup::MlKem768,
        initiator.public_value(),
        &mut rng(),
    )
    .unwrap();
    let mut tampered = response.public_value.clone();
    tampered[100] ^= 0x40;
    let secret = initiator.complete(&tampered).unwrap();
    assert_ne!(secret, response.shared_secret);
}

#[test]
fn debug_never_prints_secrets() {
    let provider = supporting(KeGroup::Modp2048)[0];
    let state = start_initiator(provider, KeGroup::Modp2048, &mut rng()).unwrap();
    assert_eq!(format!("{state:?}"), "KexState { group: Modp2048, .. }");
    let response = respond(
        provider,
        KeGroup::Modp2048,
        state.public_value(),
        &mut rng(),
    )
    .unwrap();
    assert!(!format!("{response:?}").contains(&hex::encode(&response.shared_secret[..4])));
}

/// Bytes 24.. of the RFC 3526 §3 prime (see `modp.rs`).
const MODP_PRIME_TAIL: &str = concat!(
    "29024E088A67CC74020BBEA63B139B22514A08798E3404DD",
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245",
    "E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED",
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3D",
    "C2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F",
    "83655D23DCA3AD961C62F356208552BB9ED529077096966D",
    "670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B",
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9",
    "DE2BCBF6955817183995497CEA956AE515D2261898FA0510",
    "15728E5A8AACAA68FFFFFFFFFFFFFFFF",
);

/// Python: `pow(2, x2, p)`.
const MODP_PUBLIC_X2: &str = concat!(
    "a9110b2ddce141f845502ca4808200a45c676f5586e65026f7145f30262f5d12",
    "aceb7604bc24126d4593f07b02cfcfaebf7802dca88bedf5162a8af54dc03a7e",
    "7502d541205363c29d38f07183124ae097c3e798ed50b8e6ca6d08b8f0cea880",
    "5cf0abb3c0e56db606d63f4a05f7080f0798c0dd22359b545c9e4766f5fa0f8b",
    "ca4240b7a94acad607283eecfd666b0a90b0643f3bbadcbb08727f7005de9f65",
    "7bba18c57250747335849fc2c780f4c02c11f5d8500d8a72a33984177a3cdb9d",
    "396f4c3184c5517a8e33f079fb68481c8781e9daeae0f04db5abc20ab11322b2",
    "13238853ad16e660107de9b18186328eb4e5f627f72d1256b043fa2203520bb4",
);

/// Python: `pow(pow(2, x2, p), x1, p)`.
const MODP_SHARED: &str = concat!(
    "3f4c23eb16eff99981cdcb727ae29a483faba889b58b42b3af75bf72057ee7a2",
    "c66a8151a01b3ab76da4fb6c2bd72fd076d3ed786b8081416bc5f3fa002818a0",
    "15012e096e38c09fb90a0cc2ce113c7c7a364ce15d1bc5e2a4be261e73169178",
    "1a910908f0cd4d164b680db87a7219264d37e029a704fa65034198ce000ecbc2",
    "11f73cca4519c3fae4bbc1f9617e9b47abdfd6a41d59e53f057c72d8e2c1c99e",
    "e8e42d296895e8f6f9e13689463e7a04d4dd63bd2e38c8190e00ddc5c6d31950",
    "586eae4a93d6be7287cb4df979148e81ec9c091dcc48883dafdf2003b1c63b63",
    "a5bb7c934ec9e11ab6166c4985f9ac737a643bcb59c27464ca3eec36dd3a8a39",
);
