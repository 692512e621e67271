//! Proptest strategies for every IKE representation. Each generates only
//! values whose fields fit their wire fields and that parse back as
//! themselves (no unknown payload typed like a known one, etc.).

use alloc::vec::Vec;
use core::net::{Ipv4Addr, Ipv6Addr};

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::Union;

use crate::iana::IpProtocol;
use crate::ike::iana::*;
use crate::ike::*;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> + Clone {
    vec(any::<u8>(), 0..max)
}

fn transform_attr() -> impl Strategy<Value = TransformAttr> {
    let ty = (0u16..0x8000).prop_map(TransformAttributeType);
    prop_oneof![
        (ty.clone(), any::<u16>()).prop_map(|(ty, value)| TransformAttr::Tv { ty, value }),
        (ty, bytes(8)).prop_map(|(ty, value)| TransformAttr::Tlv { ty, value }),
    ]
}

fn transform() -> impl Strategy<Value = Transform> {
    (any::<u8>(), any::<u16>(), vec(transform_attr(), 0..3)).prop_map(|(t, id, attributes)| {
        Transform {
            transform_type: TransformType(t),
            transform_id: id,
            attributes,
        }
    })
}

fn spi() -> impl Strategy<Value = Spi> {
    prop_oneof![
        Just(Spi::None),
        any::<u32>().prop_map(Spi::Child),
        any::<u64>().prop_map(Spi::Ike),
    ]
}

fn proposal() -> impl Strategy<Value = Proposal> {
    (any::<u8>(), any::<u8>(), spi(), vec(transform(), 0..6)).prop_map(
        |(number, protocol, spi, transforms)| Proposal {
            number,
            protocol_id: ProtocolId(protocol),
            spi,
            transforms,
        },
    )
}

pub(super) fn sa() -> impl Strategy<Value = SaPayload> {
    vec(proposal(), 1..4).prop_map(|proposals| SaPayload { proposals })
}

fn selector() -> impl Strategy<Value = TrafficSelector> {
    let addresses = prop_oneof![
        (any::<[u8; 4]>(), any::<[u8; 4]>()).prop_map(|(s, e)| TsAddresses::V4 {
            start: Ipv4Addr::from(s),
            end: Ipv4Addr::from(e),
        }),
        (any::<[u8; 16]>(), any::<[u8; 16]>()).prop_map(|(s, e)| TsAddresses::V6 {
            start: Ipv6Addr::from(s),
            end: Ipv6Addr::from(e),
        }),
    ];
    (any::<u8>(), any::<u16>(), any::<u16>(), addresses).prop_map(|(p, start_port, end_port, a)| {
        TrafficSelector {
            ip_protocol: IpProtocol(p),
            start_port,
            end_port,
            addresses: a,
        }
    })
}

pub(super) fn ts() -> impl Strategy<Value = TsPayload> {
    let unknown = (
        any::<u8>().prop_filter("not a range", |t| !(7..=8).contains(t)),
        bytes(12),
    )
        .prop_map(|(t, data)| UnknownSelector {
            ts_type: TsType(t),
            data,
        });
    (vec(selector(), 0..4), vec(unknown, 0..2)).prop_map(|(selectors, unknown_selectors)| {
        TsPayload {
            selectors,
            unknown_selectors,
        }
    })
}

fn notify() -> impl Strategy<Value = NotifyPayload> {
    (any::<u8>(), bytes(9), any::<u16>(), bytes(24)).prop_map(|(p, spi, t, data)| NotifyPayload {
        protocol_id: ProtocolId(p),
        spi,
        notify_type: NotifyType(t),
        data,
    })
}

fn cp() -> impl Strategy<Value = CpPayload> {
    let attribute = (0u16..0x8000, bytes(16)).prop_map(|(t, value)| CfgAttribute {
        attribute_type: CfgAttributeType(t),
        value,
    });
    (any::<u8>(), vec(attribute, 0..4)).prop_map(|(t, attributes)| CpPayload {
        cfg_type: CfgType(t),
        attributes,
    })
}

fn unknown() -> impl Strategy<Value = Payload> {
    let ty = any::<u8>().prop_filter("not a known type", |t| {
        *t != 0 && !(33..=48).contains(t) && *t != 53
    });
    (ty, any::<bool>(), bytes(16)).prop_map(|(t, critical, body)| Payload::Unknown {
        ty: PayloadType(t),
        critical,
        body,
    })
}

/// Payloads that identify and authenticate.
fn identity_payload() -> impl Strategy<Value = Payload> {
    let id = (any::<u8>(), bytes(32)).prop_map(|(t, data)| IdPayload {
        id_type: IdType(t),
        data,
    });
    prop_oneof![
        id.clone().prop_map(Payload::Idi),
        id.prop_map(Payload::Idr),
        (any::<u8>(), bytes(40)).prop_map(|(e, data)| Payload::Cert(CertPayload {
            encoding: CertEncoding(e),
            data
        })),
        (any::<u8>(), bytes(40)).prop_map(|(e, authorities)| Payload::CertReq(CertReqPayload {
            encoding: CertEncoding(e),
            authorities
        })),
        (any::<u8>(), bytes(40)).prop_map(|(m, data)| Payload::Auth(AuthPayload {
            method: AuthMethod(m),
            data
        })),
        bytes(32).prop_map(|message| Payload::Eap(EapPayload { message })),
    ]
}

/// Payloads that negotiate SAs and keys.
fn negotiation_payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        sa().prop_map(Payload::Sa),
        (any::<u16>(), bytes(64)).prop_map(|(g, data)| Payload::Ke(KePayload {
            group: KeId(g),
            data
        })),
        vec(any::<u8>(), 16..=256).prop_map(|data| Payload::Nonce(NoncePayload { data })),
        ts().prop_map(Payload::Tsi),
        ts().prop_map(Payload::Tsr),
        cp().prop_map(Payload::Cp),
    ]
}

/// Status and housekeeping payloads, and unknown ones.
fn other_payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        notify().prop_map(Payload::Notify),
        (any::<u8>(), vec(any::<u32>(), 0..5)).prop_map(|(p, spis)| Payload::Delete(
            DeletePayload {
                protocol_id: ProtocolId(p),
                spis
            }
        )),
        bytes(20).prop_map(|data| Payload::VendorId(VendorIdPayload { data })),
        unknown(),
    ]
}

/// Any payload but SK and SKF.
pub(super) fn inner_payload() -> impl Strategy<Value = Payload> {
    Union::new([
        identity_payload().boxed(),
        negotiation_payload().boxed(),
        other_payload().boxed(),
    ])
}

/// SK or SKF.
fn encrypted_payload() -> impl Strategy<Value = Payload> {
    let skf = (1u16..100).prop_flat_map(|total| (Just(total), 1..=total));
    prop_oneof![
        (any::<u8>(), bytes(64)).prop_map(|(t, body)| Payload::Sk(SkPayload {
            first_inner: PayloadType(t),
            body
        })),
        (any::<u8>(), skf, bytes(64)).prop_map(|(t, (total, n), body)| Payload::Skf(SkfPayload {
            first_inner: PayloadType(t),
            fragment_number: n,
            total_fragments: total,
            body
        })),
    ]
}

/// A chain: inner payloads, then possibly SK or SKF last.
pub(super) fn chain() -> impl Strategy<Value = Vec<Payload>> {
    (
        vec(inner_payload(), 0..8),
        proptest::option::of(encrypted_payload()),
    )
        .prop_map(|(mut payloads, last)| {
            payloads.extend(last);
            payloads
        })
}

/// A whole message.
pub(super) fn message() -> impl Strategy<Value = MessageRepr> {
    let header = (
        any::<u64>(),
        any::<u64>(),
        any::<u8>(),
        any::<bool>(),
        any::<bool>(),
        any::<u32>(),
    );
    (header, chain()).prop_map(|((spi_i, spi_r, x, i, r, id), payloads)| MessageRepr {
        initiator_spi: spi_i,
        responder_spi: spi_r,
        exchange_type: ExchangeType(x),
        initiator: i,
        response: r,
        message_id: id,
        payloads,
    })
}
