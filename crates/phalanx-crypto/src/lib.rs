//! Cryptographic algorithms for ESP and AH behind provider traits, and the
//! engine interface that decouples protocol processing from cryptography.
//!
//! Contract: nothing here reads the clock, draws randomness (except aws-lc's
//! own CSPRNG when [`sign`] makes an IKE signature) or spawns a thread; keys
//! are zeroized when dropped; every algorithm is reached through a
//! [`CryptoProvider`] so the whole suite can run against two
//! independent implementations.
//!
//! Providers: [`AwsLcProvider`] (feature `aws-lc`, the data plane) and
//! [`RustCryptoProvider`] (feature `rustcrypto`, the cross-check used by
//! tests). [`providers`] lists every provider compiled in, so tests can run
//! the same body per provider.
#![forbid(unsafe_code)]
// STYLE.md: `unwrap()` is fine in tests.
#![cfg_attr(test, allow(clippy::unwrap_used))]

#[cfg(feature = "aws-lc")]
mod aws_lc;
pub mod buf;
pub mod engine;
pub mod error;
pub mod ike;
pub mod provider;
#[cfg(feature = "rustcrypto")]
mod rustcrypto;
pub mod sign;
pub mod transform;

#[cfg(feature = "aws-lc")]
pub use aws_lc::AwsLcProvider;
pub use buf::PacketBuf;
pub use engine::{
    Engine, Frame, InlineEngine, Op, OpKind, OpLayout, OpStatus, MAX_FRAME_OPS, MAX_ICV_LEN,
};
pub use error::CryptoError;
pub use ike::{IkeRng, KeGroup, PrfAlgorithm, PrfKey};
pub use provider::{AeadKey, CbcKey, CryptoProvider, IntegrityKey, AEAD_NONCE_LEN};
#[cfg(feature = "rustcrypto")]
pub use rustcrypto::RustCryptoProvider;
#[cfg(feature = "aws-lc")]
pub use sign::SigningKey;
pub use sign::{KeyKind, SignError, SignatureScheme};
pub use transform::{SaTransform, Suite};

/// The data-plane provider, aws-lc-rs.
#[cfg(feature = "aws-lc")]
pub fn default_provider() -> &'static dyn CryptoProvider {
    &AwsLcProvider
}

/// Every provider compiled in, data-plane provider first, for tests that
/// run the same body against each implementation.
// The pushes depend on the features compiled in, which `vec![]` cannot
// express (and with none, nothing is pushed).
#[allow(clippy::vec_init_then_push, unused_mut)]
pub fn providers() -> Vec<&'static dyn CryptoProvider> {
    let mut all: Vec<&'static dyn CryptoProvider> = Vec::new();
    #[cfg(feature = "aws-lc")]
    all.push(&AwsLcProvider);
    #[cfg(feature = "rustcrypto")]
    all.push(&RustCryptoProvider);
    all
}
