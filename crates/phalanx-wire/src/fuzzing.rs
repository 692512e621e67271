//! Harnesses shared by the fuzz targets (`fuzz/fuzz_targets/wire_*.rs`) and
//! this crate's property tests: each takes arbitrary bytes, goes through
//! `new_checked`, every accessor, `Repr::parse` and, where that succeeds, an
//! `emit` → `parse` round trip, and asserts the invariants the views promise.
//! A panic here is a finding.
//!
//! Compiled for tests and with the `fuzzing` feature only; it allocates
//! (round-trip buffers), so it links `std`.
// A failed unwrap or assert in a harness is the bug report it exists for.
#![allow(clippy::unwrap_used)]

extern crate std;

use core::hint::black_box;
use core::net::{Ipv4Addr, Ipv6Addr};
use std::string::ToString;
use std::vec;

use crate::ah::{self, AhPacket, AhRepr};
use crate::esp::{self, EspPacket, EspRepr};
use crate::ethernet::{self, MacAddress};
use crate::ike::iana::PayloadType;
use crate::ike::limits::HEADER_LEN as IKE_HEADER_LEN;
use crate::ike::{
    self, emit_payloads, parse_payloads, IkeHeader, IkeHeaderRepr, MessageRepr, Payload,
    PayloadIter,
};
use crate::ip::{flow_of, ip_version, IpVersion};
use crate::ipv4::{Ipv4Packet, Ipv4Repr};
use crate::ipv6::{self, Ipv6ExtHeader, Ipv6FragmentHeader, Ipv6Options, Ipv6Packet, Ipv6Repr};
use crate::natt::{self, UdpEncapPayload};
use crate::ndp::{self, Advertisement};
use crate::tcp::TcpPacket;
use crate::udp::{self, UdpPacket, UdpRepr};

/// IPv4 view and representation.
pub fn ipv4(data: &[u8]) {
    let Ok(p) = Ipv4Packet::new_checked(data) else {
        return;
    };
    let _ = black_box((
        p.version(),
        p.ihl(),
        p.dscp_ecn(),
        p.ident(),
        p.flags(),
        p.dont_frag(),
    ));
    let _ = black_box((
        p.more_frags(),
        p.frag_offset(),
        p.is_fragment(),
        p.ttl(),
        p.protocol(),
    ));
    let _ = black_box((
        p.checksum(),
        p.src_addr(),
        p.dst_addr(),
        p.verify_checksum(),
    ));
    assert_eq!(p.header().len(), p.header_len());
    assert_eq!(p.options().len() + 20, p.header_len());
    assert_eq!(
        p.header_len() + p.payload().len(),
        usize::from(p.total_len())
    );
    if let Ok(repr) = Ipv4Repr::parse(&p) {
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
        let again = Ipv4Packet::new_checked(&out[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&again).unwrap(), repr);
    }
}

/// IPv6 view, extension headers, both walks and the representation; then
/// Neighbor Discovery ([`ndp`]).
pub fn ipv6(data: &[u8]) {
    ndp(data);
    let Ok(p) = Ipv6Packet::new_checked(data) else {
        return;
    };
    let _ = black_box((
        p.version(),
        p.traffic_class(),
        p.flow_label(),
        p.next_header(),
    ));
    let _ = black_box((p.hop_limit(), p.src_addr(), p.dst_addr(), p.header()));
    assert_eq!(p.payload().len(), usize::from(p.payload_len()));
    for walk in [ipv6::upper_layer(&p), ipv6::ipsec_insertion_point(&p)] {
        let Ok(ul) = walk else { continue };
        assert!(ul.offset <= p.packet().len());
        assert!(ul.last_next_header_offset < ul.offset);
        assert_eq!(data[ul.last_next_header_offset], ul.protocol.0);
        let _ = black_box(ul.is_later_fragment());
    }
    if let Ok(e) = Ipv6ExtHeader::new_checked(p.payload()) {
        let _ = black_box((e.next_header(), e.hdr_ext_len()));
        assert_eq!(e.data().len() + 2, e.header_len());
        Ipv6Options::new(e.data()).flatten().for_each(|o| {
            let _ = black_box((o.action(), o.may_change(), &e.data()[o.data]));
        });
    }
    if let Ok(f) = Ipv6FragmentHeader::new_checked(p.payload()) {
        let _ = black_box((f.next_header(), f.frag_offset(), f.more_frags(), f.ident()));
    }
    if let Ok(repr) = Ipv6Repr::parse(&p) {
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
        assert_eq!(
            Ipv6Repr::parse(&Ipv6Packet::new_checked(&out[..]).unwrap()).unwrap(),
            repr
        );
    }
}

/// Neighbor Discovery (RFC 4861): both parsers and, for a solicitation
/// that passes, the reply built, emitted and parsed back.
pub fn ndp(data: &[u8]) {
    match ndp::parse_solicitation(data) {
        Ok(ns) => ndp_reply(&ns),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    if let Ok(na) = ndp::parse_advertisement(data) {
        assert!(!na.target.is_multicast());
        assert!(!(na.dst.is_multicast() && na.solicited), "RFC 4861 §7.1.2");
    }
}

/// The §7.1.1 promises of a parsed solicitation, and its reply's frame.
fn ndp_reply(ns: &ndp::NeighborSolicitation) {
    assert!(!ns.target.is_multicast() && !ns.src.is_multicast());
    let dad = ns.src.is_unspecified();
    assert!(!dad || ns.source_link_addr.is_none());
    let mac = MacAddress([2, 0, 0, 0, 0, 1]);
    let reply = Advertisement::reply(ns, MacAddress([2, 0, 0, 0, 0, 2]), mac, mac, false);
    let frame = reply.emit_frame();
    let parsed = ndp::parse_advertisement(&frame[ethernet::HEADER_LEN..]).unwrap();
    assert_eq!((parsed.src, parsed.dst), (ns.target, reply.dst));
    assert_eq!(
        (parsed.target, parsed.target_link_addr),
        (ns.target, Some(mac))
    );
    assert_eq!((parsed.solicited, parsed.override_flag), (!dad, true));
    assert_eq!(frame[..6], reply.eth_dst.0);
}

/// UDP view, both checksums and the representation.
pub fn udp(data: &[u8]) {
    let Ok(p) = UdpPacket::new_checked(data) else {
        return;
    };
    let _ = black_box((
        p.src_port(),
        p.dst_port(),
        p.is_empty(),
        p.checksum(),
        p.datagram(),
    ));
    let _ = black_box(p.verify_checksum_v4(Ipv4Addr::LOCALHOST, Ipv4Addr::BROADCAST));
    let _ = black_box(p.verify_checksum_v6(Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED));
    assert_eq!(p.payload().len() + udp::HEADER_LEN, usize::from(p.len()));
    if let Ok(repr) = UdpRepr::parse(&p) {
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut UdpPacket::new_unchecked(&mut out[..]));
        assert_eq!(
            UdpRepr::parse(&UdpPacket::new_checked(&out[..]).unwrap()).unwrap(),
            repr
        );
    }
}

/// TCP view.
pub fn tcp(data: &[u8]) {
    let Ok(t) = TcpPacket::new_checked(data) else {
        return;
    };
    let _ = black_box((
        t.src_port(),
        t.dst_port(),
        t.seq_number(),
        t.ack_number(),
        t.flags(),
    ));
    let _ = black_box((t.syn(), t.window(), t.checksum()));
    assert_eq!(t.header_len() + t.payload().len(), data.len());
    assert_eq!(t.options().len() + 20, t.header_len());
}

/// ESP view and representation, and the plaintext trailer split.
pub fn esp(data: &[u8]) {
    if let Ok(p) = EspPacket::new_checked(data) {
        let _ = black_box((p.spi(), p.sequence_number()));
        assert_eq!(p.payload().len() + esp::HEADER_LEN, data.len());
        if let Ok(repr) = EspRepr::parse(&p) {
            let mut out = [0u8; esp::HEADER_LEN];
            repr.emit(&mut EspPacket::new_unchecked(&mut out[..]));
            assert_eq!(
                EspRepr::parse(&EspPacket::new_checked(&out[..]).unwrap()).unwrap(),
                repr
            );
        }
    }
    if let Ok(parts) = esp::split_plaintext(data) {
        let _ = black_box(esp::is_default_padding(parts.padding));
        assert_eq!(parts.padding.len(), usize::from(parts.trailer.pad_len));
        assert_eq!(
            parts.payload.len() + parts.padding.len() + esp::TRAILER_LEN,
            data.len()
        );
    }
}

/// AH view and representation.
pub fn ah(data: &[u8]) {
    let Ok(p) = AhPacket::new_checked(data) else {
        return;
    };
    let _ = black_box((
        p.next_header(),
        p.payload_len(),
        p.reserved(),
        p.spi(),
        p.sequence_number(),
    ));
    let _ = black_box((p.check_alignment(true), p.check_alignment(false)));
    assert_eq!(ah::FIXED_LEN + p.icv().len(), p.header_len());
    assert_eq!(p.header_len() + p.payload().len(), data.len());
    if let Ok(repr) = AhRepr::parse(&p) {
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut AhPacket::new_unchecked(&mut out[..]));
        assert_eq!(
            AhRepr::parse(&AhPacket::new_checked(&out[..]).unwrap()).unwrap(),
            repr
        );
    }
}

/// RFC 3948 classification, then the ESP harness on what it calls ESP.
pub fn natt(data: &[u8]) {
    match natt::classify(data) {
        Ok(UdpEncapPayload::Keepalive) => assert_eq!(data, [natt::KEEPALIVE]),
        Ok(UdpEncapPayload::Ike(ike)) => assert_eq!(ike.len() + 4, data.len()),
        Ok(UdpEncapPayload::Esp(packet)) => {
            let view = EspPacket::new_checked(packet).unwrap();
            assert_ne!(view.spi(), 0);
            esp(packet);
        }
        Err(_) => assert!(data.len() < esp::HEADER_LEN),
    }
}

/// Version dispatch and selector extraction, plus every IP view.
pub fn flow(data: &[u8]) {
    if let Ok(flow) = flow_of(data) {
        match ip_version(data).unwrap() {
            IpVersion::V4 => assert!(flow.src.is_ipv4() && flow.dst.is_ipv4()),
            IpVersion::V6 => assert!(flow.src.is_ipv6() && flow.dst.is_ipv6()),
        }
    }
    ipv4(data);
    ipv6(data);
}

/// IKEv2: the non-ESP marker, the header view and representation, the
/// payload walk, and a `MessageRepr` round trip; then the same octets as a
/// decrypted SK plaintext (first octet: the first payload's type) through
/// `parse_payloads` → `emit_payloads` → `parse_payloads`.
pub fn ike_message(data: &[u8]) {
    if let Some(inner) = ike::strip_non_esp_marker(data) {
        assert_eq!(inner.len() + 4, data.len());
    }
    if let Ok(h) = IkeHeader::new_checked(data) {
        ike_header(&h);
    }
    if let Ok(message) = MessageRepr::parse(data) {
        // A parsed message always fits its fields again.
        let out = message.emit_to_vec().unwrap();
        assert_eq!(out.len(), message.buffer_len());
        assert_eq!(MessageRepr::parse(&out).unwrap(), message);
    }
    if let Some((&first, chain)) = data.split_first() {
        if let Ok(payloads) = parse_payloads(PayloadType(first), chain) {
            let (first_out, out) = emit_payloads(&payloads).unwrap();
            assert_eq!(parse_payloads(first_out, &out).unwrap(), payloads);
        }
    }
}

/// Every header accessor, the header representation, and the payload walk.
fn ike_header(h: &IkeHeader<&[u8]>) {
    let _ = black_box((h.initiator_spi(), h.responder_spi(), h.next_payload()));
    let _ = black_box((h.major_version(), h.minor_version(), h.exchange_type()));
    let _ = black_box((h.flags(), h.initiator(), h.version_flag(), h.response()));
    let _ = black_box((h.message_id(), h.check_version()));
    let chain_len = h.payload_chain().len();
    assert_eq!(chain_len + IKE_HEADER_LEN, h.length() as usize);
    ike_walk(h.payloads(), chain_len);
    if let Ok(repr) = IkeHeaderRepr::parse(h) {
        let mut out = [0u8; IKE_HEADER_LEN];
        repr.emit(&mut IkeHeader::new_unchecked(&mut out[..]));
        let again = IkeHeader::new_unchecked(&out[..]);
        assert_eq!((again.length(), again.major_version()), (repr.length, 2));
        assert_eq!(again.initiator_spi(), repr.initiator_spi);
    }
}

/// Walks a chain: offsets grow, bodies stay inside it, each body is parsed.
fn ike_walk(walk: PayloadIter<'_>, chain_len: usize) {
    let mut end = 0;
    for raw in walk {
        let Ok(raw) = raw else { break };
        assert_eq!(raw.offset, end);
        end = raw.offset + 4 + raw.body.len();
        assert!(end <= chain_len);
        if let Ok(payload) = Payload::parse(&raw) {
            assert_eq!(payload.body_len(), raw.body.len());
        }
    }
}
