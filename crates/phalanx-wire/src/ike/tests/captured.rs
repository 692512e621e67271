//! Messages written out octet by octet from RFC 7296 §3, read through every
//! accessor and written back identically.

use alloc::vec::Vec;
use core::net::Ipv4Addr;

use crate::error::Error;
use crate::iana::IpProtocol;
use crate::ike::iana::*;
use crate::ike::*;

/// Joins hex fragments (spaces allowed) into octets.
pub(super) fn octets(parts: &[&str]) -> Vec<u8> {
    let hex: alloc::string::String = parts.concat().split_whitespace().collect();
    hex::decode(hex).unwrap()
}

fn repeat(byte: &str, n: usize) -> alloc::string::String {
    byte.repeat(n)
}

/// IKE_SA_INIT request { SA, KE, Ni, N(NAT_DETECTION_SOURCE_IP),
/// N(NAT_DETECTION_DESTINATION_IP) }, 208 octets.
pub(super) fn ike_sa_init() -> Vec<u8> {
    let ke_data = repeat("aa", 32);
    let nonce = repeat("bb", 32);
    let nat_src = repeat("cc", 20);
    let nat_dst = repeat("dd", 20);
    octets(&[
        // IKE header: SPIi, SPIr = 0, Next SA(33), version 2.0,
        // IKE_SA_INIT(34), flags I, Message ID 0, Length 208.
        "0011223344556677 0000000000000000 21 20 22 08 00000000 000000d0",
        // SA: Next KE(34), length 48.
        "22 00 0030",
        //   Proposal: last, length 44, #1, IKE, SPI size 0, 4 transforms.
        "00 00 002c 01 01 00 04",
        //     ENCR AES_GCM_16 (20), more, length 12, Key Length 256 (TV).
        "03 00 000c 01 00 0014 800e 0100",
        //     PRF_HMAC_SHA2_256 (5), more.
        "03 00 0008 02 00 0005",
        //     KE Curve25519 (31), more.
        "03 00 0008 04 00 001f",
        //     ADDKE1 ML-KEM-768 (36), last.
        "00 00 0008 06 00 0024",
        // KE: Next Nonce(40), length 40, group 31, RESERVED.
        "28 00 0028 001f 0000",
        &ke_data,
        // Nonce: Next Notify(41), length 36.
        "29 00 0024",
        &nonce,
        // Notify: Next Notify, length 28, no protocol, no SPI, 16388.
        "29 00 001c 00 00 4004",
        &nat_src,
        // Notify: last, length 28, 16389.
        "00 00 001c 00 00 4005",
        &nat_dst,
    ])
}

fn expected_sa_init() -> MessageRepr {
    let proposal = Proposal {
        number: 1,
        protocol_id: ProtocolId::IKE,
        spi: Spi::None,
        transforms: alloc::vec![
            Transform::encr(EncrId::AES_GCM_16, Some(256)),
            Transform::prf(PrfId::HMAC_SHA2_256),
            Transform::ke(TransformType::KE, KeId::CURVE25519),
            Transform::ke(TransformType::ADDKE1, KeId::ML_KEM_768),
        ],
    };
    MessageRepr {
        initiator_spi: 0x0011_2233_4455_6677,
        responder_spi: 0,
        exchange_type: ExchangeType::IKE_SA_INIT,
        initiator: true,
        response: false,
        message_id: 0,
        payloads: alloc::vec![
            Payload::Sa(SaPayload {
                proposals: alloc::vec![proposal]
            }),
            Payload::Ke(KePayload {
                group: KeId::CURVE25519,
                data: alloc::vec![0xaa; 32]
            }),
            Payload::Nonce(NoncePayload {
                data: alloc::vec![0xbb; 32]
            }),
            Payload::Notify(NotifyPayload::new(
                NotifyType::NAT_DETECTION_SOURCE_IP,
                alloc::vec![0xcc; 20]
            )),
            Payload::Notify(NotifyPayload::new(
                NotifyType::NAT_DETECTION_DESTINATION_IP,
                alloc::vec![0xdd; 20]
            )),
        ],
    }
}

#[test]
fn ike_sa_init_header() {
    let bytes = ike_sa_init();
    assert_eq!(bytes.len(), 208);
    let h = IkeHeader::new_checked(&bytes[..]).unwrap();
    assert!(h.check_version().is_ok());
    assert_eq!(h.initiator_spi(), 0x0011_2233_4455_6677);
    assert_eq!(h.responder_spi(), 0);
    assert_eq!(h.next_payload(), PayloadType::SA);
    assert_eq!((h.major_version(), h.minor_version()), (2, 0));
    assert_eq!(h.exchange_type(), ExchangeType::IKE_SA_INIT);
    assert_eq!(h.flags(), 0x08);
    assert!(h.initiator() && !h.response() && !h.version_flag());
    assert_eq!((h.message_id(), h.length()), (0, 208));
    assert_eq!(h.payload_chain(), &bytes[28..]);
    let repr = IkeHeaderRepr::parse(&h).unwrap();
    let mut out = [0u8; 28];
    repr.emit(&mut IkeHeader::new_unchecked(&mut out[..]));
    assert_eq!(out[..], bytes[..28]);
}

#[test]
fn ike_sa_init_payload_walk() {
    let bytes = ike_sa_init();
    let h = IkeHeader::new_checked(&bytes[..]).unwrap();
    let raws: Vec<RawPayload<'_>> = h.payloads().map(Result::unwrap).collect();
    let seen: Vec<_> = raws
        .iter()
        .map(|r| {
            (
                r.payload_type,
                r.next_payload,
                r.critical,
                r.body.len(),
                r.offset,
            )
        })
        .collect();
    let n = PayloadType::NOTIFY;
    assert_eq!(
        seen,
        [
            (PayloadType::SA, PayloadType::KE, false, 44, 0),
            (PayloadType::KE, PayloadType::NONCE, false, 36, 48),
            (PayloadType::NONCE, n, false, 32, 88),
            (n, n, false, 24, 124),
            (n, PayloadType::NONE, false, 24, 152),
        ]
    );
    let generic = GenericPayloadHeader::new_checked(&h.payload_chain()[48..]).unwrap();
    assert_eq!(generic.next_payload(), PayloadType::NONCE);
    assert_eq!((generic.payload_length(), generic.reserved()), (40, 0));
    assert_eq!(generic.body(), raws[1].body);
}

#[test]
fn ike_sa_init_repr() {
    let bytes = ike_sa_init();
    let repr = MessageRepr::parse(&bytes).unwrap();
    assert_eq!(repr, expected_sa_init());
    let Payload::Sa(sa) = &repr.payloads[0] else {
        panic!("first payload is SA")
    };
    let encr = sa.proposals[0]
        .transforms_of(TransformType::ENCR)
        .next()
        .unwrap();
    assert_eq!(encr.key_length(), Some(256));
    assert_eq!(sa.proposals[0].transforms[1].key_length(), None);
    let nat = repr
        .notify(NotifyType::NAT_DETECTION_DESTINATION_IP)
        .unwrap();
    assert_eq!(nat.data, [0xdd; 20]);
    assert_eq!(repr.notifies().count(), 2);
    assert_eq!(repr.unsupported_critical_payload(), None);
    assert_eq!(repr.buffer_len(), 208);
    assert_eq!(repr.emit_to_vec().unwrap(), bytes);
}

#[test]
fn ike_sa_init_over_port_4500() {
    let bytes = ike_sa_init();
    let datagram = with_non_esp_marker(&bytes);
    assert_eq!(datagram[..4], [0, 0, 0, 0]);
    assert_eq!(strip_non_esp_marker(&datagram), Some(&bytes[..]));
    // An ESP packet (non-zero SPI) and a keepalive are not IKE.
    assert_eq!(strip_non_esp_marker(&[0, 0, 1, 0, 0, 0, 0, 1]), None);
    assert_eq!(strip_non_esp_marker(&[0xff]), None);
}

/// IKE_AUTH request { SK { IDi, AUTH, SA, TSi, TSr } }: SK's Next Payload
/// names IDi, and its body is opaque here.
#[test]
fn ike_auth_with_sk() {
    let body = repeat("5a", 48);
    let bytes = octets(&[
        "0011223344556677 8899aabbccddeeff 2e 20 23 08 00000001 00000050",
        "23 00 0034",
        &body,
    ]);
    let h = IkeHeader::new_checked(&bytes[..]).unwrap();
    assert_eq!(h.next_payload(), PayloadType::SK);
    let repr = MessageRepr::parse(&bytes).unwrap();
    assert_eq!(repr.exchange_type, ExchangeType::IKE_AUTH);
    assert_eq!(repr.responder_spi, 0x8899_aabb_ccdd_eeff);
    assert_eq!(
        repr.payloads,
        [Payload::Sk(SkPayload {
            first_inner: PayloadType::IDi,
            body: alloc::vec![0x5a; 48]
        })]
    );
    assert_eq!(repr.emit_to_vec().unwrap(), bytes);
    // Anything after SK is refused: SK is always last (RFC 7296 §3.14).
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0, 0, 0, 4]);
    longer[27] += 4;
    assert_eq!(MessageRepr::parse(&longer), Err(Error::Malformed));
}

/// The plaintext inside that SK: IDi(FQDN), AUTH(PSK), TSi, TSr.
#[test]
fn inner_chain() {
    let bytes = octets(&[
        // IDi: Next AUTH(39), length 19, FQDN, "gw.example".
        "27 00 0012 02 000000 67772e6578616d706c65",
        // AUTH: Next TSi(44), length 12, SHARED_KEY_MIC, 4 octets.
        "2c 00 000c 02 000000 01020304",
        // TSi: Next TSr(45), length 24, one TS: TCP, ports 0-65535,
        // 10.0.0.0-10.0.0.255.
        "2d 00 0018 01 000000 07 06 0010 0000 ffff 0a000000 0a0000ff",
        // TSr: last, length 48, one TS: IPv6, any protocol, OPAQUE ports,
        // ::-ffff:...:ffff (any).
        "00 00 0030 01 000000 08 00 0028 ffff 0000",
        "00000000000000000000000000000000 ffffffffffffffffffffffffffffffff",
    ]);
    let payloads = parse_payloads(PayloadType::IDi, &bytes).unwrap();
    assert_eq!(payloads.len(), 4);
    let Payload::Idi(id) = &payloads[0] else {
        panic!("IDi first")
    };
    assert_eq!(
        (id.id_type, &id.data[..]),
        (IdType::FQDN, &b"gw.example"[..])
    );
    let Payload::Tsi(tsi) = &payloads[2] else {
        panic!("TSi third")
    };
    assert_eq!(
        tsi.selectors,
        [TrafficSelector {
            ip_protocol: IpProtocol::TCP,
            start_port: 0,
            end_port: 0xffff,
            addresses: TsAddresses::V4 {
                start: Ipv4Addr::new(10, 0, 0, 0),
                end: Ipv4Addr::new(10, 0, 0, 255),
            },
        }]
    );
    let Payload::Tsr(tsr) = &payloads[3] else {
        panic!("TSr fourth")
    };
    assert_eq!(tsr.selectors[0].ts_type(), TsType::TS_IPV6_ADDR_RANGE);
    assert_eq!(
        (tsr.selectors[0].start_port, tsr.selectors[0].end_port),
        (0xffff, 0)
    );
    assert_eq!(emit_payloads(&payloads).unwrap(), (PayloadType::IDi, bytes));
}

#[test]
fn delete_notify_and_rekey_spis() {
    // INFORMATIONAL plaintext: Delete(ESP, two SPIs), N(REKEY_SA) for ESP SPI.
    let bytes = octets(&[
        "29 00 0010 03 04 0002 c0000001 c0000002",
        "00 00 000c 03 04 4009 c0000003",
    ]);
    let payloads = parse_payloads(PayloadType::DELETE, &bytes).unwrap();
    assert_eq!(
        payloads[0],
        Payload::Delete(DeletePayload {
            protocol_id: ProtocolId::ESP,
            spis: alloc::vec![0xc000_0001, 0xc000_0002]
        })
    );
    let Payload::Notify(n) = &payloads[1] else {
        panic!("notify second")
    };
    assert_eq!(
        n,
        &NotifyPayload::for_child(ProtocolId::ESP, 0xc000_0003, NotifyType::REKEY_SA)
    );
    assert_eq!(n.child_spi(), Some(0xc000_0003));
    assert_eq!(emit_payloads(&payloads).unwrap().1, bytes);
    // Deleting the IKE SA: SPI size 0, no SPIs.
    let ike = octets(&["00 00 0008 01 00 0000"]);
    let payloads = parse_payloads(PayloadType::DELETE, &ike).unwrap();
    assert_eq!(
        payloads,
        [Payload::Delete(DeletePayload {
            protocol_id: ProtocolId::IKE,
            spis: Vec::new()
        })]
    );
    assert_eq!(emit_payloads(&payloads).unwrap().1, ike);
}

#[test]
fn fragment_cp_and_signature() {
    // SKF 2 of 3 (Next Payload 0 after the first fragment), 8-octet body.
    let skf = octets(&["00 00 0010 0002 0003 0102030405060708"]);
    let payloads = parse_payloads(PayloadType::SKF, &skf).unwrap();
    assert_eq!(
        payloads,
        [Payload::Skf(SkfPayload {
            first_inner: PayloadType::NONE,
            fragment_number: 2,
            total_fragments: 3,
            body: (1..=8).collect()
        })]
    );
    // CP(CFG_REQUEST) asking for INTERNAL_IP4_ADDRESS and INTERNAL_IP4_DNS.
    let cp = octets(&["00 00 0010 01 000000 0001 0000 0003 0000"]);
    let Payload::Cp(cp_payload) = &parse_payloads(PayloadType::CP, &cp).unwrap()[0] else {
        panic!("CP")
    };
    assert_eq!(cp_payload.cfg_type, CfgType::REQUEST);
    assert_eq!(
        cp_payload.attributes[1].attribute_type,
        CfgAttributeType::INTERNAL_IP4_DNS
    );
    // RFC 7427 AUTH: ASN.1 length, AlgorithmIdentifier, signature.
    let auth = AuthPayload::digital_signature(&[0x30, 0x05, 1, 2, 3, 4, 5], &[9, 9]).unwrap();
    assert_eq!(auth.data, [7, 0x30, 0x05, 1, 2, 3, 4, 5, 9, 9]);
    assert_eq!(
        auth.signature_parts().unwrap(),
        (&[0x30, 0x05, 1, 2, 3, 4, 5][..], &[9, 9][..])
    );
    let psk = AuthPayload {
        method: AuthMethod::SHARED_KEY_MIC,
        data: auth.data.clone(),
    };
    assert_eq!(psk.signature_parts(), Err(Error::Malformed));
    let cut = AuthPayload {
        data: alloc::vec![9, 0x30],
        ..auth
    };
    assert_eq!(cut.signature_parts(), Err(Error::Truncated));
}

#[test]
fn identity_helpers() {
    let v4 = IdPayload::from_ip(Ipv4Addr::new(192, 0, 2, 1).into());
    assert_eq!(v4.id_type, IdType::IPV4_ADDR);
    assert_eq!(v4.ip_addr(), Some(Ipv4Addr::new(192, 0, 2, 1).into()));
    let v6 = IdPayload::from_ip(core::net::Ipv6Addr::LOCALHOST.into());
    assert_eq!(v6.ip_addr(), Some(core::net::Ipv6Addr::LOCALHOST.into()));
    let bad = IdPayload {
        id_type: IdType::IPV4_ADDR,
        data: alloc::vec![1, 2, 3],
    };
    assert_eq!(bad.ip_addr(), None);
    let req = CertReqPayload {
        encoding: CertEncoding::X509_SIGNATURE,
        authorities: alloc::vec![7; 40],
    };
    assert_eq!(req.ca_key_hashes().unwrap().count(), 2);
    let odd = CertReqPayload {
        authorities: alloc::vec![7; 21],
        ..req
    };
    assert!(odd.ca_key_hashes().is_err());
}
