//! NAT detection (RFC 7296 §2.23).
//!
//! ```text
//! NAT_DETECTION_SOURCE_IP / NAT_DETECTION_DESTINATION_IP notification data:
//!     SHA-1 ( SPIi | SPIr | IP | Port )
//! ```
//!
//! "In the IKE_SA_INIT request the SPIr is zero"; IP is four or sixteen
//! octets, Port two, in network order. The source hash names the sender's
//! address and port, the destination hash the address and port it sent to.
//! A receiver whose computed source hash differs learns that the peer is
//! behind a NAT; one whose destination hash differs learns that it is. SHA-1
//! is what the RFC fixes here: it is a fingerprint, not a signature.

use core::net::{IpAddr, SocketAddr};

use aws_lc_rs::digest;

/// Octets of a NAT detection hash (SHA-1).
pub const NAT_HASH_LEN: usize = 20;

/// SHA-1(SPIi | SPIr | IP | Port) for `addr` (RFC 7296 §2.23).
pub fn nat_detection_hash(spi_i: u64, spi_r: u64, addr: SocketAddr) -> [u8; NAT_HASH_LEN] {
    let mut ctx = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(&spi_i.to_be_bytes());
    ctx.update(&spi_r.to_be_bytes());
    match addr.ip() {
        IpAddr::V4(ip) => ctx.update(&ip.octets()),
        IpAddr::V6(ip) => ctx.update(&ip.octets()),
    }
    ctx.update(&addr.port().to_be_bytes());
    let mut out = [0u8; NAT_HASH_LEN];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// What the NAT detection notifies of a received IKE_SA_INIT message say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NatStatus {
    /// The peer is behind a NAT: no NAT_DETECTION_SOURCE_IP hash matched
    /// the address and port the message came from.
    pub peer_behind_nat: bool,
    /// We are behind a NAT: the NAT_DETECTION_DESTINATION_IP hash did not
    /// match the address and port the message arrived at.
    pub local_behind_nat: bool,
}

impl NatStatus {
    /// Either side is behind a NAT: ESP must be UDP-encapsulated and IKE
    /// move to port 4500 (RFC 7296 §2.23).
    pub fn any(&self) -> bool {
        self.peer_behind_nat || self.local_behind_nat
    }

    /// Compares the hashes a peer sent with the addresses the message
    /// travelled between. `None` when the peer sent no NAT detection
    /// notifies (it does not support NAT traversal: no NAT is assumed).
    /// RFC 7296 §2.23: there may be several source hashes (one per address
    /// of a multihomed sender); any match counts.
    pub fn detect(
        spi_i: u64,
        spi_r: u64,
        source_hashes: &[&[u8]],
        destination_hash: Option<&[u8]>,
        remote: SocketAddr,
        local: SocketAddr,
    ) -> Option<NatStatus> {
        if source_hashes.is_empty() && destination_hash.is_none() {
            return None;
        }
        let expected_source = nat_detection_hash(spi_i, spi_r, remote);
        let expected_destination = nat_detection_hash(spi_i, spi_r, local);
        Some(NatStatus {
            peer_behind_nat: !source_hashes.iter().any(|h| *h == expected_source),
            local_behind_nat: destination_hash.is_some_and(|h| h != expected_destination),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SHA-1 over 0x0102030405060708 | 0 | 192.0.2.1 | 500, computed with
    /// python3: `hashlib.sha1(bytes.fromhex("0102030405060708" + "00"*8 +
    /// "c0000201" + "01f4")).hexdigest()`.
    #[test]
    fn known_answer() {
        let addr: SocketAddr = "192.0.2.1:500".parse().unwrap();
        let hash = nat_detection_hash(0x0102_0304_0506_0708, 0, addr);
        assert_eq!(
            hex::encode(hash),
            "644b4575455bd6fcc1efe2be8162a9218e448e5f"
        );
    }

    #[test]
    fn detects_each_side() {
        let a: SocketAddr = "192.0.2.1:500".parse().unwrap();
        let b: SocketAddr = "198.51.100.7:500".parse().unwrap();
        let nat: SocketAddr = "203.0.113.9:31000".parse().unwrap();
        let src = nat_detection_hash(1, 0, a);
        let dst = nat_detection_hash(1, 0, b);
        let clean = NatStatus::detect(1, 0, &[&src], Some(&dst), a, b).unwrap();
        assert!(!clean.any());
        let behind = NatStatus::detect(1, 0, &[&src], Some(&dst), nat, b).unwrap();
        assert!(behind.peer_behind_nat && !behind.local_behind_nat);
        let us = NatStatus::detect(1, 0, &[&src], Some(&dst), a, nat).unwrap();
        assert!(us.local_behind_nat && !us.peer_behind_nat);
        assert_eq!(NatStatus::detect(1, 0, &[], None, a, b), None);
    }
}
