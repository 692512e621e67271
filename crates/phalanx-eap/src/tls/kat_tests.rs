//! Known answers for the EAP-TLS keys: the TLS secrets of a real
//! handshake are captured with a key log (NSS format: `CLIENT_RANDOM` is
//! the TLS 1.2 master secret, `EXPORTER_SECRET` the TLS 1.3 exporter
//! master secret) and the MSK and EMSK computed here from them, with
//! RustCrypto's HMAC, independently of rustls' exporter, by the RFCs'
//! formulas:
//!
//! ```text
//! TLS 1.2 (RFC 5216 §2.3, RFC 5246 §5):
//!   Key_Material = PRF(master_secret, "client EAP encryption",
//!                      client.random || server.random)[0..128]
//!   PRF = P_SHA256, or P_SHA384 for the *_SHA384 suites
//!   P_hash(secret, seed) = HMAC(secret, A(1) || seed) || HMAC(secret, A(2) || seed) || ...
//!   A(0) = seed, A(i) = HMAC(secret, A(i-1))
//!
//! TLS 1.3 (RFC 9190 §2.3, RFC 8446 §7.1, §7.5):
//!   Key_Material = HKDF-Expand-Label(Derive-Secret(exporter_master_secret,
//!                      "EXPORTER_EAP_TLS_Key_Material", ""),
//!                  "exporter", Hash(0x0D), 128)
//!   Derive-Secret(S, L, M) = HKDF-Expand-Label(S, L, Hash(M), Hash.length)
//!   HKDF-Expand-Label(S, L, C, n) = HKDF-Expand(S, n || "tls13 " L || C, n)
//!
//! MSK = Key_Material[0..64], EMSK = Key_Material[64..128]
//! ```

use std::sync::{Arc, Mutex};

use hmac::{Hmac, Mac};
use rustls::crypto::aws_lc_rs::cipher_suite;
use rustls::crypto::CryptoProvider;
use rustls::version::{TLS12, TLS13};
use rustls::{KeyLog, SupportedCipherSuite, SupportedProtocolVersion};
use sha2::{Digest, Sha256, Sha384};

use super::framing::Fragment;
use super::testpki::{client_config, now, server_name, Pki};
use super::{Tls13Keying, TlsAuthenticator, TlsPeer};
use crate::packet::EapType;
use crate::server::{EapServer, EapStep};

/// The hash of a cipher suite.
#[derive(Clone, Copy, Debug)]
enum Hash {
    Sha256,
    Sha384,
}

impl Hash {
    fn hmac(self, key: &[u8], data: &[&[u8]]) -> Vec<u8> {
        match self {
            Hash::Sha256 => {
                let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
                data.iter().for_each(|d| mac.update(d));
                mac.finalize().into_bytes().to_vec()
            }
            Hash::Sha384 => {
                let mut mac = Hmac::<Sha384>::new_from_slice(key).unwrap();
                data.iter().for_each(|d| mac.update(d));
                mac.finalize().into_bytes().to_vec()
            }
        }
    }

    fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            Hash::Sha256 => Sha256::digest(data).to_vec(),
            Hash::Sha384 => Sha384::digest(data).to_vec(),
        }
    }

    fn len(self) -> usize {
        match self {
            Hash::Sha256 => 32,
            Hash::Sha384 => 48,
        }
    }

    /// RFC 5246 §5: P_hash(secret, seed), `len` octets.
    fn p_hash(self, secret: &[u8], seed: &[u8], len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut a = seed.to_vec();
        while out.len() < len {
            a = self.hmac(secret, &[&a]);
            out.extend(self.hmac(secret, &[&a, seed]));
        }
        out.truncate(len);
        out
    }

    /// RFC 5869 §2.3: HKDF-Expand(PRK, info, L).
    fn hkdf_expand(self, prk: &[u8], info: &[u8], len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut t = Vec::new();
        let mut counter = 1u8;
        while out.len() < len {
            t = self.hmac(prk, &[&t, info, &[counter]]);
            out.extend_from_slice(&t);
            counter += 1;
        }
        out.truncate(len);
        out
    }

    /// RFC 8446 §7.1: HKDF-Expand-Label(Secret, Label, Context, Length).
    fn expand_label(self, secret: &[u8], label: &[u8], context: &[u8], len: usize) -> Vec<u8> {
        let full = [b"tls13 ", label].concat();
        let mut info = (len as u16).to_be_bytes().to_vec();
        info.push(full.len() as u8);
        info.extend_from_slice(&full);
        info.push(context.len() as u8);
        info.extend_from_slice(context);
        self.hkdf_expand(secret, &info, len)
    }

    /// RFC 8446 §7.5: TLS-Exporter(label, context_value, key_length).
    fn tls13_exporter(self, exporter_master: &[u8], label: &[u8], context: &[u8]) -> Vec<u8> {
        let derived = self.expand_label(exporter_master, label, &self.digest(b""), self.len());
        self.expand_label(&derived, b"exporter", &self.digest(context), 128)
    }
}

/// One line of the key log: label, client random, secret.
type Logged = (String, Vec<u8>, Vec<u8>);

/// The key log.
#[derive(Debug, Default)]
struct Secrets(Mutex<Vec<Logged>>);

impl KeyLog for Secrets {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        self.0
            .lock()
            .unwrap()
            .push((label.to_owned(), client_random.to_vec(), secret.to_vec()));
    }
}

impl Secrets {
    fn get(&self, label: &str) -> (Vec<u8>, Vec<u8>) {
        let all = self.0.lock().unwrap();
        let found: Vec<_> = all.iter().filter(|(l, _, _)| l == label).collect();
        assert_eq!(found.len(), 1, "one {label} in {all:?}");
        (found[0].1.clone(), found[0].2.clone())
    }
}

/// What a handshake with `suite` leaves: the keys of both sides, the
/// captured secrets of both, and the randoms from the hellos on the wire.
struct Handshake {
    server_msk: Vec<u8>,
    server_emsk: Vec<u8>,
    peer_msk: Vec<u8>,
    peer_emsk: Vec<u8>,
    peer_log: Arc<Secrets>,
    server_log: Arc<Secrets>,
    client_random: Vec<u8>,
    server_random: Vec<u8>,
}

/// The random of the first handshake message of the first record of an
/// EAP-TLS message's Type-Data: a ClientHello (1) or ServerHello (2).
fn hello_random(type_data: &[u8], handshake_type: u8) -> Vec<u8> {
    let data = Fragment::parse(type_data).unwrap().data;
    assert_eq!(data[0], 22, "a handshake record");
    assert_eq!(data[5], handshake_type, "the hello");
    // Record header (5), handshake header (4), legacy_version (2).
    data[11..43].to_vec()
}

fn handshake(
    suite: SupportedCipherSuite,
    version: &'static SupportedProtocolVersion,
    keying: Tls13Keying,
) -> Handshake {
    let pki = Pki::new();
    let peer_log = Arc::new(Secrets::default());
    let server_log = Arc::new(Secrets::default());
    let provider = Arc::new(CryptoProvider {
        cipher_suites: vec![suite],
        ..rustls::crypto::aws_lc_rs::default_provider()
    });
    let config = client_config(
        &pki.alice,
        &pki.ca.der(),
        provider,
        &[version],
        Some(peer_log.clone() as Arc<dyn KeyLog>),
    );
    let mut peer = TlsPeer::new(b"alice@example.com", config, server_name())
        .unwrap()
        .with_tls13_keying(keying);
    let server_config = pki
        .server()
        .with_tls13_keying(keying)
        .with_key_log(server_log.clone());
    let method = TlsAuthenticator::new(Arc::new(server_config), "ignored", now());
    let mut server = EapServer::new(1, Box::new(method));
    let mut request = server.start();
    let mut tls = Vec::new();
    let (msk, emsk) = loop {
        let response = peer.handle(&request).unwrap();
        for m in [&request, &response] {
            if m.len() > 5 && m[4] == EapType::TLS.0 {
                tls.push(m[5..].to_vec());
            }
        }
        match server.handle(&response) {
            EapStep::Send(next) => request = next,
            EapStep::Success {
                packet, msk, emsk, ..
            } => {
                assert_eq!(peer.handle(&packet), None);
                break (msk, emsk.unwrap());
            }
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(peer.cipher_suite(), Some(suite));
    // tls: Start, ClientHello, the server's flight, ...
    Handshake {
        server_msk: msk.to_vec(),
        server_emsk: emsk.to_vec(),
        peer_msk: peer.msk().unwrap().to_vec(),
        peer_emsk: peer.emsk().unwrap().to_vec(),
        client_random: hello_random(&tls[1], 1),
        server_random: hello_random(&tls[2], 2),
        peer_log,
        server_log,
    }
}

impl Handshake {
    /// Both sides derived `key_material`.
    fn assert_keys(&self, key_material: &[u8]) {
        assert_eq!(key_material.len(), 128);
        assert_eq!(self.server_msk, key_material[..64], "the server's MSK");
        assert_eq!(self.server_emsk, key_material[64..], "the server's EMSK");
        assert_eq!(self.peer_msk, key_material[..64], "the peer's MSK");
        assert_eq!(self.peer_emsk, key_material[64..], "the peer's EMSK");
    }
}

/// RFC 5216 §2.3 with TLS 1.2: the PRF of the suite over the master secret.
fn tls12(suite: SupportedCipherSuite, hash: Hash) {
    let h = handshake(suite, &TLS12, Tls13Keying::Rfc9190);
    let (client_random, master_secret) = h.peer_log.get("CLIENT_RANDOM");
    assert_eq!(client_random, h.client_random);
    assert_eq!(
        h.server_log.get("CLIENT_RANDOM").1,
        master_secret,
        "both logged one master secret"
    );
    assert_eq!(master_secret.len(), 48);
    let seed = [
        &b"client EAP encryption"[..],
        &h.client_random,
        &h.server_random,
    ]
    .concat();
    h.assert_keys(&hash.p_hash(&master_secret, &seed, 128));
}

/// RFC 9190 §2.3 (or the key derivation before it) with TLS 1.3.
fn tls13(suite: SupportedCipherSuite, hash: Hash, keying: Tls13Keying) {
    let h = handshake(suite, &TLS13, keying);
    let (client_random, exporter_master) = h.peer_log.get("EXPORTER_SECRET");
    assert_eq!(client_random, h.client_random);
    assert_eq!(h.server_log.get("EXPORTER_SECRET").1, exporter_master);
    assert_eq!(exporter_master.len(), hash.len());
    let key_material = match keying {
        Tls13Keying::Rfc9190 => {
            hash.tls13_exporter(&exporter_master, b"EXPORTER_EAP_TLS_Key_Material", &[0x0d])
        }
        Tls13Keying::PreRfc9190 => {
            hash.tls13_exporter(&exporter_master, b"client EAP encryption", b"")
        }
    };
    h.assert_keys(&key_material);
}

#[test]
fn tls12_keys_with_the_sha256_prf() {
    tls12(
        cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        Hash::Sha256,
    );
}

#[test]
fn tls12_keys_with_the_sha384_prf() {
    tls12(
        cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        Hash::Sha384,
    );
}

#[test]
fn tls13_keys_with_sha256() {
    tls13(
        cipher_suite::TLS13_AES_128_GCM_SHA256,
        Hash::Sha256,
        Tls13Keying::Rfc9190,
    );
}

#[test]
fn tls13_keys_with_sha384() {
    tls13(
        cipher_suite::TLS13_AES_256_GCM_SHA384,
        Hash::Sha384,
        Tls13Keying::Rfc9190,
    );
}

#[test]
fn tls13_keys_before_rfc9190() {
    tls13(
        cipher_suite::TLS13_AES_128_GCM_SHA256,
        Hash::Sha256,
        Tls13Keying::PreRfc9190,
    );
}

/// The formulas above against RFC 5869's test case 1 (HKDF-Expand with
/// SHA-256), so that a slip in the test's own HKDF cannot hide one in the
/// code under test.
#[test]
fn the_tests_hkdf_expand_meets_rfc5869() {
    let prk =
        hex::decode("077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5").unwrap();
    let info = hex::decode("f0f1f2f3f4f5f6f7f8f9").unwrap();
    let okm = Hash::Sha256.hkdf_expand(&prk, &info, 42);
    assert_eq!(
        hex::encode(okm),
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
    );
}
