//! Authentication tests: a small PKI built with rcgen per key type, AUTH
//! payload round trips and refusals, and PSK known answers.

mod chain;
mod payload;
mod pki;
mod psk;
mod robustness;
