//! Runs the scapy interop vectors through Phalanx for
//! `tests/interop/test_scapy_esp.py`.
//!
//! ```text
//! cargo run -q -p phalanx-esp --example esp_vectors -- check FILE
//! cargo run -q -p phalanx-esp --example esp_vectors -- encrypt FILE OUT
//! ```
//!
//! `check`: for each vector and each crypto provider, (a) encrypt the
//! inner packet with the vector's SA, sequence number and IV and compare
//! with scapy's outer packet, (c) decrypt scapy's outer packet and compare
//! with the inner one. Prints one JSON object per vector:
//! `{"name": .., "encrypt": "ok" | why, "decrypt": "ok" | why}`.
//!
//! `encrypt`: for each vector, encrypt the inner packet with the default
//! provider, another sequence number ([`Vector::other_seq`]) and Phalanx's
//! own IVs — random for AES-CBC (RFC 3602 §2.1), the sequence number for
//! the AEADs (RFC 4106 §3.1) — and write the vectors with the new `seq`,
//! `iv` and `outer` (or `error`) to OUT, for scapy to decrypt (check (b)).
//!
//! Exit status: 0 all vectors passed, 1 some failed, 2 usage or I/O error.

#[path = "../tests/vectors/glue.rs"]
mod glue;

use std::process::ExitCode;

use phalanx_crypto::{default_provider, providers, Suite};
use phalanx_esp::IvSource;
use phalanx_testkit::vectors::{self, Vector, VectorFile};
use phalanx_wire::EncrId;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["check", file] => read(file).map(|f| check(&f)),
        ["encrypt", file, out] => read(file).and_then(|f| encrypt(&f, out)),
        _ => Err("usage: esp_vectors check FILE | esp_vectors encrypt FILE OUT".to_string()),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("esp_vectors: {e}");
            ExitCode::from(2)
        }
    }
}

fn read(path: &str) -> Result<VectorFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    vectors::load(&text).map_err(|e| format!("{path}: {e}"))
}

/// Checks (a) and (c) with every provider; true when all passed.
fn check(file: &VectorFile) -> bool {
    let mut all_ok = true;
    for v in &file.vectors {
        let mut enc = Vec::new();
        let mut dec = Vec::new();
        for provider in providers() {
            if let Err(e) = glue::check_encrypt(v, provider) {
                enc.push(format!("[{}] {e}", provider.name()));
            }
            if let Err(e) = glue::check_decrypt(v, provider) {
                dec.push(format!("[{}] {e}", provider.name()));
            }
        }
        all_ok &= enc.is_empty() && dec.is_empty();
        let verdict = |errs: Vec<String>| {
            if errs.is_empty() {
                "ok".to_string()
            } else {
                errs.join("; ")
            }
        };
        let line =
            serde_json::json!({ "name": v.name, "encrypt": verdict(enc), "decrypt": verdict(dec) });
        println!("{line}");
    }
    all_ok
}

/// Encrypts every vector with Phalanx's own IVs and another sequence number.
fn encrypt(file: &VectorFile, out: &str) -> Result<bool, String> {
    let vectors: Vec<Vector> = file.vectors.iter().map(encrypt_one).collect();
    let all_ok = vectors.iter().all(|v| v.error.is_none());
    let header = serde_json::json!({
        "generator": "phalanx-esp/examples/esp_vectors.rs encrypt",
        "provider": default_provider().name(),
        "from": file.header,
    });
    let text = vectors::to_json(&VectorFile { header, vectors });
    std::fs::write(out, text).map_err(|e| format!("{out}: {e}"))?;
    Ok(all_ok)
}

fn encrypt_one(original: &Vector) -> Vector {
    let mut v = original.with_seq(original.other_seq());
    let mut used_iv = Vec::new();
    let mut random = |iv: &mut [u8]| {
        // The OS CSPRNG failing leaves no IV to use; this is a test tool.
        aws_lc_rs::rand::fill(iv).expect("the system CSPRNG works");
        used_iv = iv.to_vec();
    };
    let source = match v.suite() {
        Suite {
            encr: EncrId::AES_CBC,
            ..
        } => IvSource::Random(&mut random),
        _ => IvSource::Sequence,
    };
    match glue::encrypt(&v, default_provider(), source) {
        Ok(outer) => {
            v.outer = hex::encode(outer);
            v.iv = sent_iv(&v, used_iv);
        }
        Err(e) => {
            v.outer = String::new();
            v.error = Some(e);
        }
    }
    v
}

/// The IV Phalanx put in the packet, as hex: what the random source drew
/// for CBC, the sequence number for the AEADs (RFC 4106 §3.1), none for
/// NULL and AH. The pytest suite reads the IV back from the packet and
/// compares.
fn sent_iv(v: &Vector, random: Vec<u8>) -> String {
    let suite = v.suite();
    if suite.is_ah() || suite.iv_len() == 0 {
        String::new()
    } else if suite.encr == EncrId::AES_CBC {
        hex::encode(random)
    } else {
        hex::encode(v.seq.to_be_bytes())
    }
}
