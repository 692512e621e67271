//! Stateless cookies against IKE_SA_INIT floods (RFC 7296 §2.6).
//!
//! ```text
//! Cookie = <VersionIDofSecret> | Hash(Ni | IPi | SPIi | <secret>)
//! ```
//!
//! VersionIDofSecret is four octets; the hash is SHA-256. The secret is
//! drawn from the endpoint's RNG and replaced every
//! [`COOKIE_SECRET_LIFETIME`]; cookies made with the previous secret are
//! still accepted ("a responder ... should change the value of `<secret>`
//! frequently ... keep the old value around", §2.6).

use core::net::IpAddr;
use std::time::Instant;

use aws_lc_rs::digest;
use phalanx_crypto::ike::IkeRng;
use subtle::ConstantTimeEq;

use crate::limits::{COOKIE_SECRET_LEN, COOKIE_SECRET_LIFETIME};

/// Octets of VersionIDofSecret.
const VERSION_LEN: usize = 4;

/// One secret.
struct Secret {
    version: u32,
    key: [u8; COOKIE_SECRET_LEN],
    created: Instant,
}

impl Drop for Secret {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.key);
    }
}

/// The current and the previous cookie secret.
#[derive(Default)]
pub(crate) struct CookieJar {
    current: Option<Secret>,
    previous: Option<Secret>,
}

impl CookieJar {
    /// A cookie for an initiator; draws or rotates the secret when due.
    pub(crate) fn make(
        &mut self,
        now: Instant,
        rng: &mut dyn IkeRng,
        ni: &[u8],
        ip: IpAddr,
        spi_i: u64,
    ) -> Vec<u8> {
        self.rotate(now, rng);
        let Some(secret) = self.current.as_ref() else {
            // `rotate` always leaves a current secret.
            return Vec::new();
        };
        let mut cookie = secret.version.to_be_bytes().to_vec();
        cookie.extend_from_slice(&hash(secret, ni, ip, spi_i));
        cookie
    }

    /// Whether a cookie returned by an initiator is one we made, with the
    /// current or the previous secret.
    pub(crate) fn verify(&self, cookie: &[u8], ni: &[u8], ip: IpAddr, spi_i: u64) -> bool {
        let Some((version, mac)) = cookie.split_first_chunk::<VERSION_LEN>() else {
            return false;
        };
        let version = u32::from_be_bytes(*version);
        [&self.current, &self.previous]
            .into_iter()
            .flatten()
            .filter(|s| s.version == version)
            .any(|s| bool::from(hash(s, ni, ip, spi_i).as_slice().ct_eq(mac)))
    }

    fn rotate(&mut self, now: Instant, rng: &mut dyn IkeRng) {
        let fresh = self
            .current
            .as_ref()
            .is_some_and(|s| now.saturating_duration_since(s.created) < COOKIE_SECRET_LIFETIME);
        if fresh {
            return;
        }
        let version = self
            .current
            .as_ref()
            .map_or(0, |s| s.version.wrapping_add(1));
        let mut key = [0u8; COOKIE_SECRET_LEN];
        rng.fill_bytes(&mut key);
        self.previous = self.current.replace(Secret {
            version,
            key,
            created: now,
        });
        zeroize::Zeroize::zeroize(&mut key);
    }
}

/// SHA-256(Ni | IPi | SPIi | secret).
fn hash(secret: &Secret, ni: &[u8], ip: IpAddr, spi_i: u64) -> Vec<u8> {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(ni);
    match ip {
        IpAddr::V4(a) => ctx.update(&a.octets()),
        IpAddr::V6(a) => ctx.update(&a.octets()),
    }
    ctx.update(&spi_i.to_be_bytes());
    ctx.update(&secret.key);
    ctx.finish().as_ref().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn cookies_verify_across_one_rotation() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        let t0 = Instant::now();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let mut jar = CookieJar::default();
        let cookie = jar.make(t0, &mut rng, b"nonce-nonce-nonce", ip, 42);
        assert_eq!(cookie.len(), VERSION_LEN + 32);
        assert!(jar.verify(&cookie, b"nonce-nonce-nonce", ip, 42));
        assert!(!jar.verify(&cookie, b"nonce-nonce-nonce", ip, 43));
        assert!(!jar.verify(&cookie[..10], b"nonce-nonce-nonce", ip, 42));
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        assert!(!jar.verify(&cookie, b"nonce-nonce-nonce", other, 42));
        // One rotation: still valid; two: not.
        let later = jar.make(t0 + COOKIE_SECRET_LIFETIME, &mut rng, b"x", ip, 1);
        assert_ne!(later[..4], cookie[..4]);
        assert!(jar.verify(&cookie, b"nonce-nonce-nonce", ip, 42));
        jar.make(t0 + COOKIE_SECRET_LIFETIME * 2, &mut rng, b"x", ip, 1);
        assert!(!jar.verify(&cookie, b"nonce-nonce-nonce", ip, 42));
    }
}
