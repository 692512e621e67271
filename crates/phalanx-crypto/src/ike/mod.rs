//! IKEv2 cryptography (RFC 7296): the PRF and prf+, the key schedule, the
//! key exchanges and the protection of the Encrypted payload.
//!
//! Contract, as for the rest of the crate: nothing here reads the clock or
//! draws OS randomness. Every function that needs randomness takes an
//! [`IkeRng`] handed in by the caller (the daemon passes an OS-seeded CSPRNG,
//! tests a seeded one), with one documented exception: ML-KEM key
//! generation and encapsulation inside aws-lc-rs, which offers no way to
//! hand it a seed (see [`kex`]).
//!
//! Every algorithm is reached through the [`CryptoProvider`](crate::CryptoProvider):
//! [`CryptoProvider::prf`](crate::CryptoProvider::prf),
//! [`CryptoProvider::key_exchange`](crate::CryptoProvider::key_exchange),
//! [`CryptoProvider::kem_encapsulate`](crate::CryptoProvider::kem_encapsulate),
//! and for the Encrypted payload the ESP algorithm objects
//! (`aead`, `cbc`, `integrity`). Secrets leave this module only in
//! [`Zeroizing`](zeroize::Zeroizing) buffers.
//!
//! - [`prf`](mod@prf): [`PrfAlgorithm`], [`PrfKey`], [`prf_plus`] (RFC 7296 §2.13).
//! - [`keys`]: [`IkeSaKeys`] (§2.14, §2.18, RFC 9370 §2.2.2 and §2.2.4),
//!   [`child_keymat`] and [`ChildKeys`] (§2.17).
//! - [`kex`]: [`KeGroup`], [`KexState`], [`respond`] (§1.2, §3.4, RFC 5903,
//!   RFC 8031, RFC 3526, RFC 6989, ML-KEM-768).
//! - [`sk`]: [`SkCipher`] (§3.14, RFC 5282, RFC 7634, RFC 7383 §2.5).
//!
//! Transform ids come from the IKE codec's open enums: `PrfAlgorithm` and
//! `KeGroup` convert with `TryFrom<PrfId>` / `TryFrom<KeId>` (an id not
//! implemented here is [`CryptoError::UnsupportedAlgorithm`](crate::CryptoError))
//! and back with `From`; `from_id(u16)` takes the raw registry value.

#[cfg(feature = "aws-lc")]
pub(crate) mod aws_lc_kex;
pub mod kex;
pub mod keys;
mod modp;
pub mod prf;
pub mod sk;

pub use kex::{respond, start_initiator, KeGroup, KeRole, KexResponse, KexState, KeyExchangeState};
pub use keys::{child_keymat, ChildKeys, IkeSaKeys, KdfInputs, KeyLengths};
pub use prf::{prf, prf_plus, prf_plus_parts, PrfAlgorithm, PrfKey};
pub use sk::{sk_key_lengths, SkCipher};

/// The `rand_core` (0.6) whose traits [`IkeRng`] builds on, so callers
/// name the same version.
pub use rand_core;

/// A cryptographically secure random number generator handed in by the
/// caller (sans-IO: this crate never draws OS randomness itself).
///
/// Blanket-implemented for every `RngCore + CryptoRng` from `rand_core`
/// 0.6, so any CSPRNG can be passed as `&mut dyn IkeRng`.
pub trait IkeRng: rand_core::RngCore + rand_core::CryptoRng {}

impl<T: rand_core::RngCore + rand_core::CryptoRng + ?Sized> IkeRng for T {}
