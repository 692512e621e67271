//! Phalanx against scapy's ESP/AH output, without Python.
//!
//! `vectors/scapy.json` was written by `tests/interop/gen_scapy_vectors.py`
//! (scapy 2.5.0 `SecurityAssociation`; the pytest suite proves the
//! committed file is scapy's by regenerating it). For every vector and with
//! BOTH crypto providers:
//! - (a) Phalanx encrypts the inner packet with the vector's keys, SPI,
//!   sequence number and IV and must produce scapy's outer packet exactly;
//! - (c) Phalanx decrypts scapy's outer packet back to the inner packet.
//!
//! Check (b) — scapy decrypting what Phalanx encrypted with its own IVs —
//! needs Python and lives in `tests/interop/test_scapy_esp.py`.

#[path = "vectors/glue.rs"]
mod glue;

use std::collections::BTreeSet;

use phalanx_crypto::{providers, CryptoProvider};
use phalanx_testkit::vectors::{self, Vector, VectorMode, VectorProtocol};

const SCAPY_JSON: &str = include_str!("vectors/scapy.json");

fn scapy_vectors() -> Vec<Vector> {
    vectors::load(SCAPY_JSON)
        .expect("vectors/scapy.json parses")
        .vectors
}

/// Runs `check` on every vector; fails listing every vector that failed.
fn run_all(
    what: &str,
    provider: &dyn CryptoProvider,
    check: fn(&Vector, &dyn CryptoProvider) -> Result<(), String>,
) {
    let all = scapy_vectors();
    let failures: Vec<String> = all
        .iter()
        .filter_map(|v| check(v, provider).err().map(|e| format!("{}: {e}", v.name)))
        .collect();
    assert!(
        failures.is_empty(),
        "{what} with {}: {} of {} vectors failed:\n{}",
        provider.name(),
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

#[test]
fn phalanx_encrypts_like_scapy_with_every_provider() {
    for provider in providers() {
        run_all("(a) encrypt", provider, glue::check_encrypt);
    }
}

#[test]
fn phalanx_decrypts_scapy_with_every_provider() {
    for provider in providers() {
        run_all("(c) decrypt", provider, glue::check_decrypt);
    }
}

#[test]
fn both_providers_are_exercised() {
    let names: BTreeSet<_> = providers().iter().map(|p| p.name()).collect();
    assert!(
        names.len() >= 2,
        "the vectors must run against two providers, got {names:?}"
    );
}

/// The committed file covers every combination the brief asks for, so a
/// truncated or hand-edited file cannot silently shrink the check.
#[test]
fn vectors_cover_every_combination() {
    let all = scapy_vectors();
    let mut combos = BTreeSet::new();
    let mut names = BTreeSet::new();
    for v in &all {
        assert!(
            names.insert(v.name.clone()),
            "duplicate vector name {}",
            v.name
        );
        let family = |a: Option<std::net::IpAddr>| a.map(|a| a.is_ipv4());
        let inner_v4 = v.inner.starts_with('4');
        combos.insert((
            v.protocol == VectorProtocol::Esp,
            v.encr,
            v.encr_key_bits,
            v.integ,
            v.mode == VectorMode::Tunnel,
            inner_v4,
            family(v.tunnel_src),
            v.udp_encap.is_some(),
            v.esn,
        ));
    }
    // ESP: 14 suites x 6 IP combinations x UDP on/off x ESN on/off;
    // AH: 3 suites x 6 x ESN on/off.
    assert_eq!(combos.len(), 14 * 6 * 2 * 2 + 3 * 6 * 2);
    assert_eq!(all.len(), combos.len());
    assert!(
        all.iter().any(|v| v.esn && v.seq == 1 << 32),
        "the 2^32 boundary"
    );
    assert!(
        all.iter().any(|v| v.esn && v.seq > 1 << 33),
        "numbers far above 2^32"
    );
    assert!(
        all.iter().any(|v| !v.esn && v.seq == u64::from(u32::MAX)),
        "the last 32-bit number"
    );
}
