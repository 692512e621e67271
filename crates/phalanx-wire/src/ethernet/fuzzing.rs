//! Harness of the `wire_ethernet_arp` fuzz target, shared with the
//! property tests of [`crate::ethernet`] and [`crate::arp`]: arbitrary
//! bytes go through `new_checked`, every accessor, `Repr::parse` and,
//! where that succeeds, a byte-exact `emit` → `parse` round trip. A panic
//! here is a finding.
//!
//! Compiled for tests and with the `fuzzing` feature only; it allocates
//! (round-trip buffers), so it links `std`.
// A failed unwrap or assert in a harness is the bug report it exists for.
#![allow(clippy::unwrap_used)]

extern crate std;

use core::net::Ipv4Addr;
use std::string::ToString;
use std::vec;

use crate::arp::{arp_reply, gratuitous_arp, ArpPacket, ArpRepr};
use crate::ethernet::{EtherType, EthernetFrame, EthernetRepr, MacAddress, MIN_FRAME_LEN};

/// The input as an Ethernet frame (and its ARP payload, if it has one),
/// then as a bare ARP packet.
pub fn ethernet_arp(data: &[u8]) {
    ethernet(data);
    arp(data);
}

/// Ethernet view and representation.
fn ethernet(data: &[u8]) {
    let Ok(f) = EthernetFrame::new_checked(data) else {
        return;
    };
    let _ = (f.dst_addr(), f.src_addr(), f.dst_addr().is_unicast());
    assert_eq!(f.vlan().is_some(), f.outer_ethertype() == EtherType::VLAN);
    assert_eq!(f.header_len() + f.payload().len(), data.len());
    if let Ok(repr) = EthernetRepr::parse(&f) {
        assert_eq!(repr.header_len(), f.header_len());
        let mut out = vec![0u8; repr.header_len()];
        repr.emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
        assert_eq!(&out[..], &data[..repr.header_len()], "header is byte-exact");
        let again = EthernetFrame::new_checked(&out[..]).unwrap();
        assert_eq!(EthernetRepr::parse(&again).unwrap(), repr);
    } else {
        assert!(f.ethertype().is_length());
    }
    if f.ethertype() == EtherType::ARP {
        arp(f.payload());
    }
}

/// ARP view, representation, frame building and the reply builders.
fn arp(data: &[u8]) {
    let Ok(p) = ArpPacket::new_checked(data) else {
        return;
    };
    let _ = (p.hardware_type(), p.protocol_type(), p.operation());
    let (hln, pln) = (usize::from(p.hardware_len()), usize::from(p.protocol_len()));
    assert_eq!(p.sender_hardware_addr().len(), hln);
    assert_eq!(p.target_hardware_addr().len(), hln);
    assert_eq!(p.sender_protocol_addr().len(), pln);
    assert_eq!(p.target_protocol_addr().len(), pln);
    assert!(p.packet_len() <= data.len());
    let repr = match ArpRepr::parse(&p) {
        Ok(repr) => repr,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ArpPacket::new_unchecked(&mut out[..]));
    assert_eq!(&out[..], &data[..repr.buffer_len()], "packet is byte-exact");
    assert_eq!(
        ArpRepr::parse(&ArpPacket::new_checked(&out[..]).unwrap()),
        Ok(repr)
    );
    frame_round_trip(&repr);
    let reply = arp_reply(&repr, MacAddress([2, 0, 0, 0, 0, 1]));
    assert_eq!(
        (reply.target_mac, reply.target_ip),
        (repr.sender_mac, repr.sender_ip)
    );
    assert_eq!(reply.sender_ip, repr.target_ip);
    frame_round_trip(&reply);
    frame_round_trip(&gratuitous_arp(
        repr.sender_mac,
        Ipv4Addr::from(0x0a00_0001),
    ));
}

/// `emit_frame` → Ethernet → ARP gives the representation back.
fn frame_round_trip(repr: &ArpRepr) {
    let mut buf = [0xa5u8; 80];
    let len = repr.emit_frame(None, &mut buf).unwrap();
    assert_eq!(len, MIN_FRAME_LEN);
    let frame = EthernetFrame::new_checked(&buf[..len]).unwrap();
    assert_eq!(frame.ethertype(), EtherType::ARP);
    assert_eq!(frame.dst_addr(), repr.frame_dst());
    let packet = ArpPacket::new_checked(frame.payload()).unwrap();
    assert_eq!(ArpRepr::parse(&packet), Ok(*repr));
    assert!(buf[14 + 28..len].iter().all(|&b| b == 0), "zero padding");
}
