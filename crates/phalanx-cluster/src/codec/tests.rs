use super::*;
use crate::lease::{BlockKind, LeaseBlock, LeaseTable};
use crate::view::View;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use proptest::prelude::*;

fn sa(direction: Direction, spi: u32, esn: bool, peer: IpAddr) -> SaDescriptor {
    SaDescriptor {
        direction,
        spi,
        esn,
        peer,
        peer_window: 0,
    }
}

fn leases() -> SaLeases {
    let mut table = LeaseTable::new(100);
    let mut out = Vec::new();
    table.set_view(View::new(1, [NodeId(1), NodeId(2), NodeId(3)]), &mut out);
    table.add_sa(7, true, &mut out);
    table.sa(7).unwrap().clone()
}

fn transfer() -> StateTransfer {
    StateTransfer {
        founding: false,
        targets: vec![TransferTarget {
            node: NodeId(4),
            position: 3,
        }],
        state: StateSnapshot {
            applied: 40,
            epoch: 3,
            generation: 2,
            transfers: 1,
            lease_len: 100,
            agreed: vec![NodeId(1), NodeId(2), NodeId(3), NodeId(4)],
            synced: vec![NodeId(1), NodeId(2), NodeId(3)],
            ready: vec![NodeId(1), NodeId(2)],
            joined_at: vec![(NodeId(4), 37)],
            suspects: vec![(NodeId(3), vec![NodeId(1)])],
            quorum: QuorumState {
                history: 0x1234_5678_9abc_def0,
                recent: vec![5, 0x1234_5678_9abc_def0],
                base: vec![NodeId(1), NodeId(2), NodeId(3)],
                refused: vec![NodeId(2)],
                quorate: true,
                was_quorate: false,
                lowest: Some(NodeId(1)),
            },
            sas: vec![
                SaRecord {
                    descriptor: sa(
                        Direction::Outbound,
                        7,
                        true,
                        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9)),
                    ),
                    leases: Some(leases()),
                    replay: None,
                },
                SaRecord {
                    descriptor: sa(
                        Direction::Inbound,
                        8,
                        false,
                        IpAddr::V6(Ipv6Addr::LOCALHOST),
                    ),
                    leases: None,
                    replay: Some(ReplayCheckpoint {
                        spi: 8,
                        top: 99,
                        words: vec![1, 2, 3],
                    }),
                },
            ],
        },
    }
}

fn samples() -> Vec<Message> {
    let hb = Heartbeat {
        node: NodeId(3),
        counter: 17,
        synced: true,
        ready: false,
    };
    vec![
        Message::Hello(hb),
        Message::Heartbeat(hb),
        Message::LeaseRequest {
            spi: 0xdead_beef,
            after_end: 1 << 40,
        },
        Message::Checkpoint(Checkpoint {
            spi: 1,
            lineage: 3,
            c: 1000,
            fingerprint: u64::MAX,
        }),
        Message::ReplayCheckpoint(ReplayCheckpoint {
            spi: 2,
            top: 5000,
            words: vec![u64::MAX; 64],
        }),
        Message::Suspect { node: NodeId(2) },
        Message::Rejoin {
            node: NodeId(65535),
        },
        Message::Ready { node: NodeId(1) },
        Message::SaAdd(sa(
            Direction::Outbound,
            9,
            true,
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        )),
        Message::SaAdd(sa(
            Direction::Inbound,
            10,
            false,
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        )),
        Message::SaDelete {
            direction: Direction::Inbound,
            spi: 10,
        },
        Message::StateTransfer(Box::new(transfer())),
        Message::App {
            channel: APP_CHANNEL_IKE,
            payload: vec![0xa5; 300],
        },
        Message::App {
            channel: 0xff,
            payload: Vec::new(),
        },
        Message::Yield {
            node: NodeId(3),
            marks: vec![(7, 1 << 47), (0xffff_ffff, 1)],
        },
        Message::Hearing(Hearing {
            node: NodeId(3),
            peers: vec![
                HeardPeer {
                    node: NodeId(1),
                    heard: Some(40),
                    silent: false,
                    silent_after: 0,
                    handbacks: 0,
                },
                HeardPeer {
                    node: NodeId(2),
                    heard: None,
                    silent: true,
                    silent_after: 12,
                    handbacks: 3,
                },
            ],
        }),
    ]
}

#[test]
fn every_message_round_trips() {
    for message in samples() {
        let bytes = encode(&message);
        assert_eq!(bytes[0], CODEC_VERSION);
        assert_eq!(bytes[1], message.message_type().0);
        assert_eq!(decode(&bytes), Ok(message));
    }
}

/// Captured bytes: a heartbeat and a lease request, field by field.
#[test]
fn wire_layout() {
    let hb = Message::Heartbeat(Heartbeat {
        node: NodeId(0x0102),
        counter: 3,
        synced: true,
        ready: true,
    });
    assert_eq!(
        encode(&hb),
        [1, 0x02, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0b11]
    );
    let req = Message::LeaseRequest {
        spi: 0x0a0b_0c0d,
        after_end: 0x1_0000,
    };
    assert_eq!(
        encode(&req),
        [1, 0x10, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 0, 0, 1, 0, 0]
    );
    let app = Message::App {
        channel: APP_CHANNEL_IKE,
        payload: vec![0xaa, 0xbb],
    };
    assert_eq!(encode(&app), [1, 0x40, 1, 0, 0, 0, 2, 0xaa, 0xbb]);
}

/// Numbered table of refusals.
#[test]
fn refusals() {
    let rows: [(&[u8], DecodeError); 12] = [
        (&[], DecodeError::Truncated),
        (&[2, 0x02], DecodeError::UnsupportedVersion(2)),
        (&[1, 0x7f, 1, 2], DecodeError::UnknownType(0x7f)),
        (&[1, 0x13, 0, 0, 0, 0], DecodeError::InvalidNode(0)),
        (&[1, 0x13, 0, 1, 0, 0], DecodeError::InvalidNode(65536)),
        (&[1, 0x13, 0, 0, 0, 1, 9], DecodeError::TrailingBytes),
        (
            &[1, 0x18, 2, 0, 0, 0, 1],
            DecodeError::InvalidField("direction"),
        ),
        (
            &[1, 0x12, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 65],
            DecodeError::InvalidField("replay bitmap length"),
        ),
        (&[1, 0x15, 0, 0xff, 0xff], DecodeError::Truncated),
        // App: a length past the end, a length above the limit, bytes after.
        (&[1, 0x40, 1, 0, 0, 0, 3, 7, 7], DecodeError::Truncated),
        (
            &[1, 0x40, 1, 0, 4, 0, 1, 0],
            DecodeError::InvalidField("App payload length"),
        ),
        (&[1, 0x40, 1, 0, 0, 0, 1, 7, 7], DecodeError::TrailingBytes),
    ];
    for (row, (bytes, want)) in rows.into_iter().enumerate() {
        assert_eq!(decode(bytes), Err(want), "row {row}");
    }
}

/// A newer SaAdd layout appends fields: this build reads what it knows.
#[test]
fn newer_sa_layout_is_read() {
    let mut bytes = encode(&samples()[8]);
    bytes[2] = 2;
    bytes.extend_from_slice(&[0xaa, 0xbb]);
    assert_eq!(decode(&bytes), Ok(samples()[8].clone()));
    bytes[2] = 1;
    assert_eq!(decode(&bytes), Err(DecodeError::TrailingBytes));
}

/// A transfer whose lease block is impossible (start after end) is
/// refused.
#[test]
fn transfer_with_bad_leases_is_refused() {
    const START: u64 = 0x1111_1111_1111;
    let block = LeaseBlock {
        start: START,
        end: START + 99,
        view: View::new(1, [NodeId(1)]),
        kind: BlockKind::Regular,
        lineage: START,
        offset: 0,
        backs: 0,
    };
    let good = SaLeases::from_parts(true, 1, START + 99, false, vec![block]).unwrap();
    let mut st = transfer();
    st.state.sas[0].leases = Some(good);
    let bytes = encode(&Message::StateTransfer(Box::new(st)));
    assert!(decode(&bytes).is_ok());
    let at = bytes
        .windows(8)
        .position(|w| w == START.to_be_bytes())
        .unwrap();
    let mut bad = bytes.clone();
    bad[at..at + 8].copy_from_slice(&u64::MAX.to_be_bytes());
    assert_eq!(decode(&bad), Err(DecodeError::InvalidField("lease blocks")));
}

fn message() -> impl Strategy<Value = Message> {
    let node = (1u32..=65535).prop_map(NodeId);
    prop_oneof![
        (node.clone(), any::<u64>(), any::<bool>(), any::<bool>()).prop_map(
            |(node, counter, synced, ready)| {
                Message::Heartbeat(Heartbeat {
                    node,
                    counter,
                    synced,
                    ready,
                })
            }
        ),
        (
            node.clone(),
            proptest::collection::vec(
                (
                    node.clone(),
                    any::<Option<u64>>(),
                    any::<bool>(),
                    any::<u64>(),
                    any::<u32>()
                ),
                0..8
            )
        )
            .prop_map(|(node, peers)| {
                let peers = peers
                    .into_iter()
                    .map(|(node, heard, silent, silent_after, handbacks)| HeardPeer {
                        node,
                        heard,
                        silent,
                        silent_after,
                        handbacks,
                    })
                    .collect();
                Message::Hearing(Hearing { node, peers })
            }),
        (any::<u32>(), any::<u64>())
            .prop_map(|(spi, after_end)| Message::LeaseRequest { spi, after_end }),
        (any::<u32>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
            |(spi, lineage, c, fingerprint)| {
                Message::Checkpoint(Checkpoint {
                    spi,
                    lineage,
                    c,
                    fingerprint,
                })
            }
        ),
        (
            any::<u32>(),
            any::<u64>(),
            proptest::collection::vec(any::<u64>(), 0..=64)
        )
            .prop_map(
                |(spi, top, words)| Message::ReplayCheckpoint(ReplayCheckpoint { spi, top, words })
            ),
        node.clone().prop_map(|node| Message::Suspect { node }),
        node.clone().prop_map(|node| Message::Rejoin { node }),
        (
            node.clone(),
            proptest::collection::vec((any::<u32>(), any::<u64>()), 0..8)
        )
            .prop_map(|(node, marks)| Message::Yield { node, marks }),
        node.prop_map(|node| Message::Ready { node }),
        (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..600))
            .prop_map(|(channel, payload)| Message::App { channel, payload }),
        (
            any::<bool>(),
            any::<u32>(),
            any::<bool>(),
            any::<[u8; 16]>(),
            any::<bool>(),
            prop_oneof![Just(0u32), any::<u32>()]
        )
            .prop_map(|(out, spi, esn, addr, v6, peer_window)| {
                let peer = if v6 {
                    IpAddr::V6(Ipv6Addr::from(addr))
                } else {
                    IpAddr::V4(Ipv4Addr::new(addr[0], addr[1], addr[2], addr[3]))
                };
                let direction = if out {
                    Direction::Outbound
                } else {
                    Direction::Inbound
                };
                Message::SaAdd(SaDescriptor {
                    direction,
                    spi,
                    esn,
                    peer,
                    peer_window,
                })
            }),
    ]
}

proptest! {
    #[test]
    fn decode_encode_is_identity(message in message()) {
        prop_assert_eq!(decode(&encode(&message)), Ok(message));
    }

    /// Arbitrary bytes never panic the decoder.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode(&bytes);
    }

    /// Mutations of valid messages (a state transfer included) never panic
    /// it either, and what decodes encodes back to the same bytes.
    #[test]
    fn mutated_messages_never_panic(pick in 0usize..samples().len(), at in any::<usize>(), byte in any::<u8>(), cut in any::<usize>()) {
        let mut bytes = encode(&samples()[pick]);
        let i = at % bytes.len();
        bytes[i] = byte;
        bytes.truncate(bytes.len() - cut % 3);
        if let Ok(message) = decode(&bytes) {
            if !matches!(message, Message::SaAdd(_)) {
                prop_assert_eq!(encode(&message), bytes);
            }
        }
    }
}
