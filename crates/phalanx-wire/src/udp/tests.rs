use super::*;
use proptest::prelude::*;

// Checksums below were computed with an independent RFC 1071 script over the
// pseudo-header and datagram, not with this crate.

/// 192.168.0.1:1234 -> 192.168.0.199:53, "hello".
const V4: &str = "04d20035000d34e268656c6c6f";
/// [2001:db8::1]:4500 -> [2001:db8::2]:4500, "hello!".
const V6: &str = "11941194000e3d4268656c6c6f21";

fn v4_addrs() -> (Ipv4Addr, Ipv4Addr) {
    (
        Ipv4Addr::new(192, 168, 0, 1),
        Ipv4Addr::new(192, 168, 0, 199),
    )
}

fn v6_addrs() -> (Ipv6Addr, Ipv6Addr) {
    (
        "2001:db8::1".parse().unwrap(),
        "2001:db8::2".parse().unwrap(),
    )
}

#[test]
fn ipv4_datagram() {
    let bytes = hex::decode(V4).unwrap();
    let (src, dst) = v4_addrs();
    let p = UdpPacket::new_checked(&bytes[..]).unwrap();
    assert_eq!(
        (p.src_port(), p.dst_port(), p.len(), p.checksum()),
        (1234, 53, 13, 0x34e2)
    );
    assert_eq!(p.payload(), b"hello");
    assert!(!p.is_empty());
    assert!(p.verify_checksum_v4(src, dst));
    assert!(!p.verify_checksum_v4(src, Ipv4Addr::new(192, 168, 0, 198)));
    let repr = UdpRepr::parse(&p).unwrap();
    assert_eq!(
        repr,
        UdpRepr {
            src_port: 1234,
            dst_port: 53,
            payload_len: 5
        }
    );

    let mut out = vec![0u8; repr.buffer_len()];
    let mut q = UdpPacket::new_unchecked(&mut out[..]);
    repr.emit(&mut q);
    q.payload_mut().copy_from_slice(b"hello");
    assert_eq!(q.checksum(), 0);
    assert!(
        q.verify_checksum_v4(src, dst),
        "zero means no checksum over IPv4"
    );
    q.fill_checksum_v4(src, dst);
    assert_eq!(out, bytes);
}

#[test]
fn ipv6_datagram() {
    let bytes = hex::decode(V6).unwrap();
    let (src, dst) = v6_addrs();
    let p = UdpPacket::new_checked(&bytes[..]).unwrap();
    assert_eq!(
        (p.src_port(), p.dst_port(), p.len(), p.checksum()),
        (4500, 4500, 14, 0x3d42)
    );
    assert!(p.verify_checksum_v6(src, dst));
    assert!(!p.verify_checksum_v6(src, "2001:db8::3".parse().unwrap()));

    let mut out = bytes.clone();
    let mut q = UdpPacket::new_checked(&mut out[..]).unwrap();
    q.set_checksum(0);
    assert!(
        !q.verify_checksum_v6(src, dst),
        "zero is invalid over IPv6 (RFC 8200 §8.1)"
    );
    q.fill_checksum_v6(src, dst);
    assert_eq!(out, bytes);
}

#[test]
fn computed_zero_is_sent_as_ones() {
    // Pick the data so the checksum computes to zero: set the last two data
    // octets to the value that makes the sum all ones without them.
    let (src, dst) = v4_addrs();
    let mut bytes = hex::decode("04d20035000c000000000000").unwrap();
    let mut p = UdpPacket::new_checked(&mut bytes[..]).unwrap();
    p.fill_checksum_v4(src, dst);
    let needed = p.checksum();
    p.payload_mut()[2..4].copy_from_slice(&needed.to_be_bytes());
    p.fill_checksum_v4(src, dst);
    assert_eq!(p.checksum(), 0xffff);
    assert!(p.verify_checksum_v4(src, dst));
}

#[test]
fn every_truncation_is_rejected() {
    let bytes = hex::decode(V4).unwrap();
    for len in 0..bytes.len() {
        assert_eq!(
            UdpPacket::new_checked(&bytes[..len]).unwrap_err(),
            Error::Truncated
        );
    }
}

#[test]
fn length_field_bounds() {
    let mut bytes = hex::decode(V4).unwrap();
    bytes[5] = 7;
    assert_eq!(
        UdpPacket::new_checked(&bytes[..]).unwrap_err(),
        Error::Malformed
    );
    bytes[5] = 8;
    let p = UdpPacket::new_checked(&bytes[..]).unwrap();
    assert!(p.is_empty() && p.payload().is_empty());
    assert_eq!(p.datagram().len(), 8);
    bytes[5] = 14;
    assert_eq!(
        UdpPacket::new_checked(&bytes[..]).unwrap_err(),
        Error::Truncated
    );
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        crate::fuzzing::udp(&bytes);
    }

    #[test]
    fn fill_then_verify(data in proptest::collection::vec(any::<u8>(), 0..100),
                        sp in any::<u16>(), dp in any::<u16>(),
                        s4 in any::<[u8; 4]>(), d4 in any::<[u8; 4]>(),
                        s6 in any::<[u8; 16]>(), d6 in any::<[u8; 16]>()) {
        let repr = UdpRepr { src_port: sp, dst_port: dp, payload_len: data.len() };
        let mut out = vec![0u8; repr.buffer_len()];
        let mut p = UdpPacket::new_unchecked(&mut out[..]);
        repr.emit(&mut p);
        p.payload_mut().copy_from_slice(&data);
        p.fill_checksum_v4(s4.into(), d4.into());
        prop_assert!(p.checksum() != 0);
        prop_assert!(p.verify_checksum_v4(s4.into(), d4.into()));
        p.fill_checksum_v6(s6.into(), d6.into());
        prop_assert!(p.verify_checksum_v6(s6.into(), d6.into()));
        prop_assert_eq!(UdpRepr::parse(&p).unwrap(), repr);
    }
}
