//! strongSwan-style proposal strings.
//!
//! A proposal is lower-case algorithm names joined by `-`, in any order; several of
//! one type are alternatives, listed most preferred first:
//!
//! | type | names |
//! |---|---|
//! | encryption | `aes128` `aes256` (AES-CBC), `aes128gcm16` `aes256gcm16` (also `…gcm128`, `…gcm`), `chacha20poly1305` |
//! | integrity | `sha256` `sha384` `sha512` (also `sha2_256` …): HMAC-SHA2-*n* truncated to *n*/2 (RFC 4868) |
//! | PRF (IKE only) | `prfsha256` `prfsha384` `prfsha512` |
//! | key exchange | `x25519` (`curve25519`), `ecp256`, `ecp384`, `modp2048`, `mlkem768` |
//! | additional key exchange (RFC 9370) | `ke1_<method>` … `ke7_<method>`, `<method>` as above or `none` |
//! | ESN (ESP and AH) | `esn`, `noesn` |
//!
//! Only algorithms this implementation can run are accepted, so a
//! configuration never offers what it cannot complete. As in strongSwan, an
//! IKE proposal without a PRF takes the PRFs matching its integrity
//! algorithms, and one with a combined-mode cipher must name its PRF; an
//! ESP proposal without an ESN keyword means `noesn`. Combined-mode and
//! other ciphers cannot share a proposal (RFC 7296 §3.3), an AH proposal
//! names integrity, key exchange and ESN only (§3.3.3), and ADDKE*n*
//! needs ADDKE*n−1* (exchanges follow the type order, RFC 9370 §2.2.2).

use core::fmt;

use phalanx_wire::ike::iana::{IntegId, KeId, PrfId};

use super::{ChildProposal, EncrAlg, IkeProposal};

/// Highest additional key exchange type number, ADDKE7 (RFC 9370 §2.2.1).
const MAX_ADDITIONAL_KE: usize = 7;

/// Why a proposal string was refused; names the offending token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposalParseError {
    /// The whole proposal.
    pub proposal: String,
    /// The token at fault, or empty when the proposal as a whole is.
    pub token: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for ProposalParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.token.is_empty() {
            write!(f, "proposal {:?}: {}", self.proposal, self.reason)
        } else {
            write!(
                f,
                "proposal {:?}: {:?}: {}",
                self.proposal, self.token, self.reason
            )
        }
    }
}

impl std::error::Error for ProposalParseError {}

/// One algorithm name, classified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    Encr(EncrAlg),
    Integ(IntegId),
    Prf(PrfId),
    Ke(KeId),
    /// ADDKE*n*, `n` counted from 0.
    AdditionalKe(usize, KeId),
    Esn(bool),
}

fn encr(name: &str) -> Option<EncrAlg> {
    Some(match name {
        "aes128" => EncrAlg::AES128_CBC,
        "aes256" => EncrAlg::AES256_CBC,
        "aes128gcm16" | "aes128gcm128" | "aes128gcm" => EncrAlg::AES128_GCM16,
        "aes256gcm16" | "aes256gcm128" | "aes256gcm" => EncrAlg::AES256_GCM16,
        "chacha20poly1305" => EncrAlg::CHACHA20_POLY1305,
        _ => return None,
    })
}

fn integ(name: &str) -> Option<IntegId> {
    Some(match name {
        "sha256" | "sha2_256" => IntegId::HMAC_SHA2_256_128,
        "sha384" | "sha2_384" => IntegId::HMAC_SHA2_384_192,
        "sha512" | "sha2_512" => IntegId::HMAC_SHA2_512_256,
        _ => return None,
    })
}

fn prf(name: &str) -> Option<PrfId> {
    Some(match name {
        "prfsha256" => PrfId::HMAC_SHA2_256,
        "prfsha384" => PrfId::HMAC_SHA2_384,
        "prfsha512" => PrfId::HMAC_SHA2_512,
        _ => return None,
    })
}

fn ke(name: &str) -> Option<KeId> {
    Some(match name {
        "x25519" | "curve25519" => KeId::CURVE25519,
        "ecp256" => KeId::ECP_256,
        "ecp384" => KeId::ECP_384,
        "modp2048" => KeId::MODP_2048,
        "mlkem768" => KeId::ML_KEM_768,
        _ => return None,
    })
}

/// `keN_<method>`: ADDKE*N* (1..=7) with a method or `none`.
fn additional_ke(name: &str) -> Option<(usize, KeId)> {
    let rest = name.strip_prefix("ke")?;
    let (number, method) = rest.split_once('_')?;
    let n: usize = number.parse().ok()?;
    if !(1..=MAX_ADDITIONAL_KE).contains(&n) {
        return None;
    }
    let id = if method == "none" {
        KeId::NONE
    } else {
        ke(method)?
    };
    Some((n - 1, id))
}

fn classify(name: &str) -> Option<Token> {
    encr(name)
        .map(Token::Encr)
        .or_else(|| integ(name).map(Token::Integ))
        .or_else(|| prf(name).map(Token::Prf))
        .or_else(|| ke(name).map(Token::Ke))
        .or_else(|| additional_ke(name).map(|(n, id)| Token::AdditionalKe(n, id)))
        .or(match name {
            "esn" => Some(Token::Esn(true)),
            "noesn" => Some(Token::Esn(false)),
            _ => None,
        })
}

/// The transforms of one proposal string, in order, duplicates dropped,
/// each remembering the token it came from.
#[derive(Default)]
struct Collected<'a> {
    proposal: &'a str,
    encr: Vec<(EncrAlg, &'a str)>,
    integ: Vec<(IntegId, &'a str)>,
    prf: Vec<(PrfId, &'a str)>,
    ke: Vec<KeId>,
    additional_ke: Vec<Vec<KeId>>,
    /// The token of each ADDKE type's first method.
    additional_ke_tokens: Vec<&'a str>,
    esn: Vec<(bool, &'a str)>,
}

fn push_unique<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if !list.contains(&item) {
        list.push(item);
    }
}

impl<'a> Collected<'a> {
    fn error(&self, token: &str, reason: &'static str) -> ProposalParseError {
        ProposalParseError {
            proposal: self.proposal.to_owned(),
            token: token.to_owned(),
            reason,
        }
    }

    fn read(proposal: &'a str) -> Result<Collected<'a>, ProposalParseError> {
        let mut c = Collected {
            proposal,
            ..Collected::default()
        };
        for name in proposal.trim().split('-') {
            if name.is_empty() {
                return Err(c.error("", "empty algorithm name"));
            }
            let token = classify(name).ok_or_else(|| c.error(name, "unknown algorithm"))?;
            c.add(name, token);
        }
        Ok(c)
    }

    fn add(&mut self, name: &'a str, token: Token) {
        match token {
            Token::Encr(alg) if !self.encr.iter().any(|(a, _)| *a == alg) => {
                self.encr.push((alg, name));
            }
            Token::Integ(id) if !self.integ.iter().any(|(i, _)| *i == id) => {
                self.integ.push((id, name));
            }
            Token::Prf(id) if !self.prf.iter().any(|(p, _)| *p == id) => self.prf.push((id, name)),
            Token::Ke(id) => push_unique(&mut self.ke, id),
            Token::AdditionalKe(n, id) => {
                if self.additional_ke.len() <= n {
                    self.additional_ke.resize(n + 1, Vec::new());
                    self.additional_ke_tokens.resize(n + 1, "");
                }
                if self.additional_ke[n].is_empty() {
                    self.additional_ke_tokens[n] = name;
                }
                push_unique(&mut self.additional_ke[n], id);
            }
            Token::Esn(on) if !self.esn.iter().any(|(e, _)| *e == on) => self.esn.push((on, name)),
            _ => {}
        }
    }

    /// The ciphers, all combined-mode or all not; the integrity algorithms
    /// that go with them (none with combined mode, RFC 7296 §3.3).
    fn ciphers(&self) -> Result<(Vec<EncrAlg>, Vec<IntegId>), ProposalParseError> {
        let (first, _) = self
            .encr
            .first()
            .ok_or_else(|| self.error("", "no encryption algorithm"))?;
        let aead = first.is_aead();
        if let Some((_, name)) = self.encr.iter().find(|(a, _)| a.is_aead() != aead) {
            return Err(self.error(name, "combined-mode and other ciphers in one proposal"));
        }
        if let (true, Some((_, name))) = (aead, self.integ.first()) {
            return Err(self.error(name, "integrity algorithm with a combined-mode cipher"));
        }
        if !aead && self.integ.is_empty() {
            return Err(self.error("", "no integrity algorithm"));
        }
        let encr = self.encr.iter().map(|(a, _)| *a).collect();
        let integ = self.integ.iter().map(|(i, _)| *i).collect();
        Ok((encr, integ))
    }

    /// ADDKE types without gaps (module doc).
    fn additional_ke(&self) -> Result<Vec<Vec<KeId>>, ProposalParseError> {
        if let Some(n) = self.additional_ke.iter().position(Vec::is_empty) {
            let next = self.additional_ke_tokens[n + 1..]
                .iter()
                .find(|t| !t.is_empty())
                .copied()
                .unwrap_or_default();
            return Err(self.error(next, "additional key exchange after a missing one"));
        }
        Ok(self.additional_ke.clone())
    }

    /// PRFs as named, else those matching the integrity algorithms.
    fn prfs(&self, integ: &[IntegId]) -> Result<Vec<PrfId>, ProposalParseError> {
        if !self.prf.is_empty() {
            return Ok(self.prf.iter().map(|(p, _)| *p).collect());
        }
        let mut prfs = Vec::new();
        for id in integ {
            push_unique(&mut prfs, prf_for_integ(*id));
        }
        if prfs.is_empty() {
            return Err(self.error("", "no PRF (a combined-mode IKE proposal must name one)"));
        }
        Ok(prfs)
    }
}

/// The PRF built on an integrity algorithm's hash (strongSwan's implied
/// PRF).
fn prf_for_integ(id: IntegId) -> PrfId {
    match id {
        IntegId::HMAC_SHA2_384_192 => PrfId::HMAC_SHA2_384,
        IntegId::HMAC_SHA2_512_256 => PrfId::HMAC_SHA2_512,
        _ => PrfId::HMAC_SHA2_256,
    }
}

/// An IKE proposal (see the module doc).
pub(super) fn ike(text: &str) -> Result<IkeProposal, ProposalParseError> {
    let c = Collected::read(text)?;
    if let Some((_, name)) = c.esn.first() {
        return Err(c.error(name, "ESN is not an IKE transform"));
    }
    let (encr, integ) = c.ciphers()?;
    let prf = c.prfs(&integ)?;
    if c.ke.is_empty() {
        return Err(c.error("", "no key exchange method"));
    }
    Ok(IkeProposal {
        encr,
        integ,
        prf,
        ke: c.ke.clone(),
        additional_ke: c.additional_ke()?,
    })
}

/// An ESP proposal (see the module doc).
pub(super) fn esp(text: &str) -> Result<ChildProposal, ProposalParseError> {
    let c = Collected::read(text)?;
    if let Some((_, name)) = c.prf.first() {
        return Err(c.error(name, "PRF is not an ESP transform"));
    }
    let (encr, integ) = c.ciphers()?;
    c.child(encr, integ)
}

/// An AH proposal: integrity, PFS and ESN, nothing else (RFC 7296 §3.3.3).
pub(super) fn ah(text: &str) -> Result<ChildProposal, ProposalParseError> {
    let c = Collected::read(text)?;
    if let Some((_, name)) = c.prf.first() {
        return Err(c.error(name, "PRF is not an AH transform"));
    }
    if let Some((_, name)) = c.encr.first() {
        return Err(c.error(name, "AH has no encryption"));
    }
    if c.integ.is_empty() {
        return Err(c.error("", "no integrity algorithm"));
    }
    let integ = c.integ.iter().map(|(i, _)| *i).collect();
    c.child(Vec::new(), integ)
}

impl Collected<'_> {
    /// A Child SA proposal of these ciphers with the collected PFS, ADDKE
    /// and ESN transforms (no ESN keyword: `noesn`).
    fn child(
        &self,
        encr: Vec<EncrAlg>,
        integ: Vec<IntegId>,
    ) -> Result<ChildProposal, ProposalParseError> {
        let additional_ke = self.additional_ke()?;
        if self.ke.is_empty() && !additional_ke.is_empty() {
            return Err(self.error(
                self.additional_ke_tokens[0],
                "additional key exchange without PFS",
            ));
        }
        let mut esn: Vec<bool> = self.esn.iter().map(|(e, _)| *e).collect();
        if esn.is_empty() {
            esn.push(false);
        }
        Ok(ChildProposal {
            encr,
            integ,
            ke: self.ke.clone(),
            esn,
            additional_ke,
        })
    }
}

/// A comma-separated list of proposals, `default` expanding to `defaults`.
pub(super) fn list<T>(
    text: &str,
    one: fn(&str) -> Result<T, ProposalParseError>,
    defaults: fn() -> Vec<T>,
) -> Result<Vec<T>, ProposalParseError> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim) {
        if item == "default" {
            out.extend(defaults());
        } else {
            out.push(one(item)?);
        }
    }
    Ok(out)
}
