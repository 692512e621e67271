//! The `IkeSaState` codec: round trips (hand-built and random states),
//! refusals, and no panic on arbitrary or damaged input.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use phalanx_crypto::Suite;
use phalanx_ike::auth::Identity;
use phalanx_ike::config::EncrAlg;
use phalanx_ike::ha::{
    CachedResponse, ChildSaKeys, ChildSaState, ChildSaStatus, DecodeError, IkeKeys, IkeSaState,
    InFlightRequest, MessageIds, NatState, QueuedWork, RequestPurpose, VirtualIpLease,
    STATE_VERSION,
};
use phalanx_ike::proposal::NegotiatedIke;
use phalanx_wire::ike::iana::{EncrId, ExchangeType, IntegId, KeId, PrfId};
use phalanx_wire::ike::{TrafficSelector, TsAddresses};
use phalanx_wire::IpProtocol;
use proptest::collection::vec;
use proptest::prelude::*;
use zeroize::Zeroizing;

fn key(len: usize, fill: u8) -> Zeroizing<Vec<u8>> {
    Zeroizing::new(vec![fill; len])
}

fn ts(a: u32, b: u32) -> TrafficSelector {
    TrafficSelector {
        ip_protocol: IpProtocol(6),
        start_port: 80,
        end_port: 443,
        addresses: TsAddresses::V4 {
            start: Ipv4Addr::from(a),
            end: Ipv4Addr::from(b),
        },
    }
}

fn child(spi: u32) -> ChildSaState {
    ChildSaState {
        name: "net".to_owned(),
        spi_in: spi,
        spi_out: spi + 1,
        suite: Suite::esp(EncrId::AES_GCM_16, 256, IntegId::NONE),
        esn: true,
        pfs: Some(KeId(31)),
        transport: false,
        local_ts: vec![ts(1, 2)],
        remote_ts: vec![ts(3, 4), ts(5, 6)],
        status: ChildSaStatus::Rekeying,
        inbound_installed: true,
        outbound_installed: false,
        outbound_held: true,
        replaces: Some(7),
        peer_rekey: None,
        nonces: Some((vec![1; 32], vec![2; 32])),
        keys: ChildSaKeys {
            encr_in: key(36, 1),
            integ_in: key(0, 0),
            encr_out: key(36, 2),
            integ_out: key(0, 0),
        },
        age: Duration::from_millis(1500),
        rekey_in: Some(Duration::from_secs(3000)),
        expire_in: Some(Duration::from_secs(3600)),
        retire_in: None,
        lifetime_jitter: Duration::from_secs(12),
    }
}

/// A state with something in every field.
pub(crate) fn sample() -> IkeSaState {
    IkeSaState {
        generation: 42,
        connection: "gw".to_owned(),
        initiator: true,
        spi_i: [1; 8],
        spi_r: [2; 8],
        suite: NegotiatedIke {
            proposal_num: 1,
            encr: EncrAlg::new(EncrId::AES_GCM_16, 256),
            integ: None,
            prf: PrfId(5),
            ke: KeId(31),
            additional_ke: vec![KeId(35), KeId::NONE],
            peer_spi: None,
        },
        keys: IkeKeys {
            sk_d: key(32, 1),
            sk_ai: key(0, 0),
            sk_ar: key(0, 0),
            sk_ei: key(36, 2),
            sk_er: key(36, 3),
            sk_pi: key(32, 4),
            sk_pr: key(32, 5),
        },
        iv_counter: 17,
        local: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), 4500),
        remote: "[2001:db8::2]:4500".parse().unwrap(),
        nat: NatState {
            encap: true,
            local_behind_nat: false,
        },
        fragmentation: true,
        mobike: true,
        peer_id: Identity::Fqdn("b.example".to_owned()),
        message_ids: MessageIds {
            next_request_id: 5,
            expected_request_id: 3,
            peer_window: 4,
            receive_window: 2,
        },
        responses: vec![CachedResponse {
            message_id: 2,
            datagrams: vec![vec![9; 80], vec![8; 20]],
        }],
        in_flight: vec![InFlightRequest {
            message_id: 4,
            exchange: ExchangeType::CREATE_CHILD_SA,
            datagrams: vec![vec![7; 120]],
            purpose: RequestPurpose::CreateChild {
                child: "net".to_owned(),
                spi_in: 0x1000,
                rekey_of: Some(0x2000),
            },
        }],
        queued: vec![
            QueuedWork::Dpd,
            QueuedWork::CheckPath,
            QueuedWork::CreateChild {
                child: "net".to_owned(),
                trigger: Some((
                    IpAddr::V4(Ipv4Addr::new(10, 1, 0, 1)),
                    "fd00::1".parse().unwrap(),
                )),
                retries: 1,
                group: Some(KeId(31)),
            },
        ],
        delayed: vec![(Duration::from_secs(2), QueuedWork::RekeyIke { retries: 3 })],
        age: Duration::from_secs(100),
        rekey_in: Some(Duration::from_secs(14_000)),
        expire_in: None,
        children: vec![child(0x3000), child(0x4000)],
        virtual_ips: vec![
            VirtualIpLease {
                pool: "rw4".to_owned(),
                identity: "b.example".to_owned(),
                address: IpAddr::V4(Ipv4Addr::new(10, 3, 0, 7)),
            },
            VirtualIpLease {
                pool: "rw6".to_owned(),
                identity: "b.example".to_owned(),
                address: "fd03::7".parse().unwrap(),
            },
        ],
    }
}

#[test]
fn hand_built_state_round_trips() {
    let state = sample();
    let bytes = state.encode();
    assert_eq!(bytes[0], STATE_VERSION);
    assert_eq!(IkeSaState::decode(&bytes).unwrap(), state);
}

#[test]
fn versions_truncation_and_trailing_octets_are_refused() {
    let bytes = sample().encode().to_vec();
    let mut other = bytes.clone();
    other[0] = 3;
    assert_eq!(
        IkeSaState::decode(&other),
        Err(DecodeError::UnsupportedVersion(3))
    );
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(IkeSaState::decode(&longer), Err(DecodeError::TrailingBytes));
    for cut in 0..bytes.len() {
        assert!(IkeSaState::decode(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    assert_eq!(IkeSaState::decode(&[]), Err(DecodeError::Truncated));
}

/// Version 1 (before virtual IPs) is still read, as a state without them:
/// a node of the previous release may replicate during an upgrade.
#[test]
fn version_1_without_virtual_ips_is_read() {
    let mut state = sample();
    state.virtual_ips.clear();
    state.mobike = false;
    let mut v1 = state.encode().to_vec();
    v1[0] = 1;
    // Version 2 ends with the virtual IPs' count (two octets, zero here).
    assert_eq!(v1.split_off(v1.len() - 2), [0, 0]);
    assert_eq!(IkeSaState::decode(&v1).unwrap(), state);
}

#[test]
fn changed_keys_compare_unequal() {
    let a = sample();
    let mut b = sample();
    b.keys.sk_d = key(32, 0xee);
    assert_ne!(a, b);
    let mut c = sample();
    c.children[1].keys.encr_out = key(36, 0xee);
    assert_ne!(a, c);
}

fn arb_ts() -> impl Strategy<Value = TrafficSelector> {
    (
        any::<u8>(),
        any::<u16>(),
        any::<u16>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(|(proto, sp, ep, a, b)| TrafficSelector {
            ip_protocol: IpProtocol(proto),
            start_port: sp,
            end_port: ep,
            addresses: TsAddresses::V4 {
                start: Ipv4Addr::from(a),
                end: Ipv4Addr::from(b),
            },
        })
}

fn arb_key() -> impl Strategy<Value = Zeroizing<Vec<u8>>> {
    vec(any::<u8>(), 0..48).prop_map(Zeroizing::new)
}

fn arb_opt_duration() -> impl Strategy<Value = Option<Duration>> {
    proptest::option::of(any::<u64>().prop_map(Duration::from_nanos))
}

fn arb_child() -> impl Strategy<Value = ChildSaState> {
    let ids = (
        any::<u32>(),
        any::<u32>(),
        any::<u16>(),
        any::<u16>(),
        any::<u16>(),
        any::<bool>(),
    );
    let flags = (
        any::<[bool; 5]>(),
        proptest::option::of(any::<u16>()),
        0..4u8,
    );
    let links = (
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
        proptest::option::of((vec(any::<u8>(), 0..40), vec(any::<u8>(), 0..40))),
    );
    let ts = (vec(arb_ts(), 0..3), vec(arb_ts(), 0..3));
    let keys = (arb_key(), arb_key(), arb_key(), arb_key());
    let times = (
        any::<u64>(),
        arb_opt_duration(),
        arb_opt_duration(),
        arb_opt_duration(),
        any::<u64>(),
    );
    (ids, flags, links, ts, keys, times).prop_map(|(ids, flags, links, ts, keys, times)| {
        let status = [
            ChildSaStatus::Active,
            ChildSaStatus::Rekeying,
            ChildSaStatus::Rekeyed,
            ChildSaStatus::Deleting,
        ][usize::from(flags.2)];
        ChildSaState {
            name: format!("c{}", ids.0 % 7),
            spi_in: ids.0,
            spi_out: ids.1,
            suite: Suite {
                encr: EncrId(ids.2),
                encr_key_bits: ids.3,
                integ: IntegId(ids.4),
                ah: ids.5,
            },
            esn: flags.0[0],
            pfs: flags.1.map(KeId),
            transport: flags.0[1],
            local_ts: ts.0,
            remote_ts: ts.1,
            status,
            inbound_installed: flags.0[2],
            outbound_installed: flags.0[3],
            outbound_held: flags.0[4],
            replaces: links.0,
            peer_rekey: links.1,
            nonces: links.2,
            keys: ChildSaKeys {
                encr_in: keys.0,
                integ_in: keys.1,
                encr_out: keys.2,
                integ_out: keys.3,
            },
            age: Duration::from_nanos(times.0),
            rekey_in: times.1,
            expire_in: times.2,
            retire_in: times.3,
            lifetime_jitter: Duration::from_nanos(times.4),
        }
    })
}

fn arb_datagrams() -> impl Strategy<Value = Vec<Vec<u8>>> {
    vec(vec(any::<u8>(), 0..64), 0..3)
}

fn arb_purpose() -> impl Strategy<Value = RequestPurpose> {
    prop_oneof![
        Just(RequestPurpose::Informational),
        vec(any::<u32>(), 0..4).prop_map(RequestPurpose::DeleteChildren),
        (any::<u32>(), proptest::option::of(any::<u32>())).prop_map(|(spi_in, rekey_of)| {
            RequestPurpose::CreateChild {
                child: "net".to_owned(),
                spi_in,
                rekey_of,
            }
        }),
        any::<[u8; 8]>().prop_map(|spi| RequestPurpose::RekeyIke { spi }),
    ]
}

fn arb_work() -> impl Strategy<Value = QueuedWork> {
    prop_oneof![
        Just(QueuedWork::Dpd),
        Just(QueuedWork::CheckPath),
        Just(QueuedWork::DeleteIke),
        any::<u32>().prop_map(|retries| QueuedWork::RekeyIke { retries }),
        (any::<u32>(), any::<u32>())
            .prop_map(|(spi_in, retries)| QueuedWork::RekeyChild { spi_in, retries }),
        vec(any::<u32>(), 0..4).prop_map(|spis| QueuedWork::DeleteChildren { spis }),
        (
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            proptest::option::of(any::<u16>())
        )
            .prop_map(|(s, d, retries, group)| QueuedWork::CreateChild {
                child: "net".to_owned(),
                trigger: Some((Ipv4Addr::from(s).into(), Ipv4Addr::from(d).into())),
                retries,
                group: group.map(KeId),
            }),
    ]
}

fn arb_identity() -> impl Strategy<Value = Identity> {
    prop_oneof![
        any::<u32>().prop_map(|a| Identity::Ipv4(Ipv4Addr::from(a))),
        any::<u128>().prop_map(|a| Identity::Ipv6(a.into())),
        "[a-z0-9.-]{1,20}".prop_map(Identity::Fqdn),
        vec(any::<u8>(), 1..20).prop_map(Identity::KeyId),
    ]
}

fn arb_state() -> impl Strategy<Value = IkeSaState> {
    let head = (
        any::<u64>(),
        any::<[bool; 5]>(),
        any::<[u8; 8]>(),
        any::<[u8; 8]>(),
        any::<u64>(),
    );
    let suite = (
        any::<u8>(),
        any::<u16>(),
        any::<u16>(),
        proptest::option::of(any::<u16>()),
        any::<u16>(),
        any::<u16>(),
        vec(any::<u16>(), 0..3),
    );
    let keys = vec(arb_key(), 7..=7);
    let where_ = (
        any::<u32>(),
        any::<u16>(),
        any::<u128>(),
        any::<u16>(),
        arb_identity(),
    );
    let ids = any::<[u32; 4]>();
    let windows = (
        vec((any::<u32>(), arb_datagrams()), 0..3),
        vec(
            (any::<u32>(), any::<u8>(), arb_datagrams(), arb_purpose()),
            0..3,
        ),
        vec(arb_work(), 0..3),
        vec((any::<u64>(), arb_work()), 0..2),
    );
    let times = (any::<u64>(), arb_opt_duration(), arb_opt_duration());
    let children = vec(arb_child(), 0..3);
    (head, suite, keys, where_, ids, windows, times, children).prop_map(
        |(head, suite, keys, where_, ids, windows, times, children)| IkeSaState {
            generation: head.0,
            connection: "gw".to_owned(),
            initiator: head.1[0],
            spi_i: head.2,
            spi_r: head.3,
            suite: NegotiatedIke {
                proposal_num: suite.0,
                encr: EncrAlg::new(EncrId(suite.1), suite.2),
                integ: suite.3.map(IntegId),
                prf: PrfId(suite.4),
                ke: KeId(suite.5),
                additional_ke: suite.6.into_iter().map(KeId).collect(),
                peer_spi: None,
            },
            keys: IkeKeys {
                sk_d: keys[0].clone(),
                sk_ai: keys[1].clone(),
                sk_ar: keys[2].clone(),
                sk_ei: keys[3].clone(),
                sk_er: keys[4].clone(),
                sk_pi: keys[5].clone(),
                sk_pr: keys[6].clone(),
            },
            iv_counter: head.4,
            local: SocketAddr::new(Ipv4Addr::from(where_.0).into(), where_.1),
            remote: SocketAddr::new(IpAddr::V6(where_.2.into()), where_.3),
            nat: NatState {
                encap: head.1[1],
                local_behind_nat: head.1[2],
            },
            fragmentation: head.1[3],
            mobike: head.1[4],
            peer_id: where_.4,
            message_ids: MessageIds {
                next_request_id: ids[0],
                expected_request_id: ids[1],
                peer_window: ids[2],
                receive_window: ids[3],
            },
            responses: windows
                .0
                .into_iter()
                .map(|(message_id, datagrams)| CachedResponse {
                    message_id,
                    datagrams,
                })
                .collect(),
            in_flight: windows
                .1
                .into_iter()
                .map(|(message_id, ty, datagrams, purpose)| InFlightRequest {
                    message_id,
                    exchange: ExchangeType(ty),
                    datagrams,
                    purpose,
                })
                .collect(),
            queued: windows.2,
            delayed: windows
                .3
                .into_iter()
                .map(|(n, w)| (Duration::from_nanos(n), w))
                .collect(),
            age: Duration::from_nanos(times.0),
            rekey_in: times.1,
            expire_in: times.2,
            children,
            virtual_ips: Vec::new(),
        },
    )
}

proptest! {
    #[test]
    fn random_states_round_trip(state in arb_state()) {
        let bytes = state.encode();
        prop_assert_eq!(IkeSaState::decode(&bytes).unwrap(), state);
    }

    #[test]
    fn arbitrary_octets_never_panic(bytes in vec(any::<u8>(), 0..1024)) {
        let _ = IkeSaState::decode(&bytes);
        let mut versioned = bytes;
        versioned.insert(0, STATE_VERSION);
        let _ = IkeSaState::decode(&versioned);
    }

    #[test]
    fn damaged_encodings_never_panic(at in any::<usize>(), value in any::<u8>(), cut in any::<usize>()) {
        let mut bytes = sample().encode().to_vec();
        let i = at % bytes.len();
        bytes[i] = value;
        let _ = IkeSaState::decode(&bytes);
        bytes.truncate(cut % bytes.len());
        let _ = IkeSaState::decode(&bytes);
    }
}
