//! The builders' edges; byte-for-byte agreement with scapy is in
//! `tests/scapy_icmp.rs`.

use super::*;

#[test]
fn the_quote_is_bounded_by_rfc_1812_and_rfc_4443() {
    let original = [0x45u8; 1400];
    let mut out = [0u8; 2000];
    assert_eq!(frag_needed_v4(&mut out, 1218, &original), Some(576 - 20));
    let len = packet_too_big_v6(
        &mut out,
        1280,
        &original,
        Ipv6Addr::LOCALHOST,
        Ipv6Addr::LOCALHOST,
    );
    assert_eq!(len, Some(1280 - 40));
}

#[test]
fn a_short_buffer_is_refused_not_overrun() {
    let original = [0x45u8; 100];
    assert_eq!(frag_needed_v4(&mut [0u8; 30], 1218, &original), None);
    // Room for the header and the original's first 28 octets is enough.
    assert_eq!(frag_needed_v4(&mut [0u8; 36], 1218, &original), Some(36));
    assert_eq!(frag_needed_v4(&mut [0u8; 4], 1218, &original), None);
}

#[test]
fn the_view_reads_truncated_input_safely() {
    assert!(IcmpPacket::new_checked(&[3u8, 4, 0][..]).is_err());
    let view = IcmpPacket::new_checked(&[3u8, 4, 0, 0, 0, 0, 5, 0xdc][..]).unwrap();
    assert_eq!(view.next_hop_mtu(), 1500);
    assert!(view.quoted().is_empty());
}
