use super::*;
use crate::codec::{StateTransfer, TransferTarget};
use core::net::{IpAddr, Ipv4Addr};
use proptest::prelude::*;

fn n(ids: &[u32]) -> Vec<NodeId> {
    ids.iter().map(|&i| NodeId(i)).collect()
}

fn founded(ids: &[u32]) -> Replicated {
    let mut fx = Vec::new();
    let state = Replicated::founded(&n(ids), 64, Default::default(), &mut fx);
    assert!(fx.contains(&Effect::BaseChanged));
    state
}

fn sa(direction: Direction, spi: u32) -> SaDescriptor {
    SaDescriptor {
        direction,
        spi,
        esn: false,
        peer: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
        peer_window: 0,
    }
}

fn apply(state: &mut Replicated, from: u32, message: Message) -> Vec<Effect> {
    let mut fx = Vec::new();
    state.apply_message(NodeId(from), &message, &mut fx);
    fx
}

/// "found n1,n2,n3": all ready, generation 1, base = all.
#[test]
fn t01_founding() {
    let state = founded(&[3, 1, 2]);
    assert_eq!(state.base_members(), n(&[1, 2, 3]));
    assert_eq!(state.generation, 1);
    assert!(state.unsynced().is_empty());
}

/// "n1,n2 + n4 joins; a message; transfer; Ready": the join position, the
/// transfer, then a new generation with n4.
#[test]
fn t02_join_transfer_ready() {
    let mut state = founded(&[1, 2]);
    let mut fx = Vec::new();
    state.apply_membership(&n(&[1, 2, 4]), &mut fx);
    assert!(fx.contains(&Effect::TransferDue));
    assert!(fx.contains(&Effect::Joined(n(&[4]))));
    assert_eq!(state.generation, 1, "a joiner changes no view");
    assert_eq!(
        state.transfer_targets(),
        vec![TransferTarget {
            node: NodeId(4),
            position: 0
        }]
    );
    apply(&mut state, 1, Message::SaAdd(sa(Direction::Outbound, 9)));
    assert_eq!(state.transfer_targets()[0].position, 1);
    assert_eq!(state.lowest_synced(), Some(NodeId(1)));
    // Ready before the transfer is ignored.
    assert!(apply(&mut state, 4, Message::Ready { node: NodeId(4) }).is_empty());
    let transfer = StateTransfer {
        founding: false,
        targets: state.transfer_targets(),
        state: state.snapshot(),
    };
    let fx = apply(&mut state, 1, Message::StateTransfer(Box::new(transfer)));
    assert_eq!(fx, vec![Effect::Transferred(n(&[4]))]);
    // A Ready for another node is forged.
    assert!(apply(&mut state, 2, Message::Ready { node: NodeId(4) }).is_empty());
    let fx = apply(&mut state, 4, Message::Ready { node: NodeId(4) });
    assert!(fx.contains(&Effect::BaseChanged));
    assert!(fx.contains(&Effect::Ready(NodeId(4))));
    assert_eq!(state.base_members(), n(&[1, 2, 4]));
    assert_eq!(state.generation, 2);
}

/// "n1,n2,n3; n1 suspects n3; n3 suspects n1; n1 rejoins n3": the second
/// suspicion comes from a suspect and is ignored; Rejoin takes n3 back.
#[test]
fn t03_suspect_and_rejoin() {
    let mut state = founded(&[1, 2, 3]);
    assert!(apply(&mut state, 1, Message::Suspect { node: NodeId(1) }).is_empty());
    let fx = apply(&mut state, 1, Message::Suspect { node: NodeId(3) });
    assert!(fx.contains(&Effect::Suspected {
        node: NodeId(3),
        by: NodeId(1)
    }));
    assert_eq!(state.base_members(), n(&[1, 2]));
    assert!(apply(&mut state, 3, Message::Suspect { node: NodeId(1) }).is_empty());
    assert_eq!(state.base_members(), n(&[1, 2]));
    let fx = apply(&mut state, 1, Message::Rejoin { node: NodeId(3) });
    assert!(fx.contains(&Effect::BaseChanged));
    assert_eq!(state.base_members(), n(&[1, 2, 3]));
    assert_eq!(state.generation, 3);
    let fx = apply(&mut state, 1, Message::Rejoin { node: NodeId(3) });
    assert_eq!(
        fx,
        vec![Effect::Rejoined {
            node: NodeId(3),
            was_suspected: false
        }]
    );
}

/// "n2 suspects n3, then n2 leaves": nobody suspects n3 any more.
#[test]
fn t04_leaving_accuser_clears_the_suspicion() {
    let mut state = founded(&[1, 2, 3]);
    apply(&mut state, 2, Message::Suspect { node: NodeId(3) });
    assert_eq!(state.base_members(), n(&[1, 2]));
    let mut fx = Vec::new();
    state.apply_membership(&n(&[1, 3]), &mut fx);
    assert!(fx.contains(&Effect::Left(n(&[2]))));
    assert_eq!(state.base_members(), n(&[1, 3]));
}

/// Apply a membership change.
fn membership(state: &mut Replicated, ids: &[u32]) -> Vec<Effect> {
    let mut fx = Vec::new();
    state.apply_membership(&n(ids), &mut fx);
    fx
}

/// The transfer `state` sends to its unsynced members.
fn claim(state: &Replicated) -> Message {
    Message::StateTransfer(Box::new(StateTransfer {
        founding: false,
        targets: state.transfer_targets(),
        state: state.snapshot(),
    }))
}

/// "n1,n2,n3 split n3 | n1,n2": the two stay quorate (and take [1, 2] as
/// their quorum base), n3's side is not: it grants nothing, not even on
/// request; "n1 | n2" later keeps n1 (half of [1, 2] with its lowest).
#[test]
fn t06_quorum_after_a_split() {
    let mut majority = founded(&[1, 2, 3]);
    apply(&mut majority, 1, Message::SaAdd(sa(Direction::Outbound, 9)));
    let mut minority = majority.clone();
    membership(&mut majority, &[1, 2]);
    assert!(majority.quorum.quorate);
    assert_eq!(majority.quorum.base, n(&[1, 2]));
    membership(&mut minority, &[3]);
    assert!(!minority.quorum.quorate);
    assert_eq!(
        minority.quorum.base,
        n(&[1, 2, 3]),
        "a minority keeps its base"
    );
    assert!(minority.leases.sa(9).unwrap().blocks().is_empty());
    let end = majority.leases.sa(9).unwrap().blocks()[0].end;
    assert!(apply(
        &mut minority,
        3,
        Message::LeaseRequest {
            spi: 9,
            after_end: end
        }
    )
    .is_empty());
    let mut alone = majority.clone();
    membership(&mut alone, &[1]);
    assert!(alone.quorum.quorate, "half of [1, 2] with the lowest");
    membership(&mut majority, &[2]);
    assert!(
        !majority.quorum.quorate,
        "half of [1, 2] without the lowest"
    );
}

/// A suspicion that would leave a quorate state without quorum is
/// refused ("n3 suspects n1, then n2": the first goes through).
#[test]
fn t07_suspicion_keeps_quorum() {
    let mut state = founded(&[1, 2, 3]);
    assert!(!apply(&mut state, 3, Message::Suspect { node: NodeId(1) }).is_empty());
    assert!(apply(&mut state, 3, Message::Suspect { node: NodeId(2) }).is_empty());
    assert_eq!(state.base_members(), n(&[2, 3]));
    assert!(state.quorum.quorate);
    assert_eq!(state.quorum.refused, n(&[2]));
    // n3 dispatched without n2 meanwhile: its Rejoin starts a generation
    // (a second one does not).
    let generation = state.generation;
    let fx = apply(&mut state, 3, Message::Rejoin { node: NodeId(2) });
    assert!(fx.contains(&Effect::BaseChanged));
    assert_eq!(state.generation, generation + 1);
    let fx = apply(&mut state, 1, Message::Rejoin { node: NodeId(2) });
    assert!(!fx.contains(&Effect::BaseChanged));
}

/// "split n3 | n1,n2; merge": each side's transfer is the other's rival
/// claim. n3's side (not quorate before the merge) is defeated; the
/// majority outranks it and raises its lease floor above what n3's side
/// granted; n3's Yield makes it a joiner of the winners' state.
#[test]
fn t08_merge_claims_and_yield() {
    let mut a = founded(&[1, 2, 3]);
    apply(&mut a, 1, Message::SaAdd(sa(Direction::Outbound, 9)));
    let mut b = a.clone();
    membership(&mut a, &[1, 2]);
    membership(&mut b, &[3]);
    assert!(membership(&mut a, &[1, 2, 3]).contains(&Effect::TransferDue));
    assert!(membership(&mut b, &[1, 2, 3]).contains(&Effect::TransferDue));
    assert!(a.quorum.was_quorate && !b.quorum.was_quorate);
    let (claim_a, claim_b) = (claim(&a), claim(&b));
    // Each side recognises its own transfer.
    assert!(apply(&mut a.clone(), 1, claim_a.clone()).contains(&Effect::Transferred(n(&[3]))));
    assert_eq!(
        apply(&mut b, 1, claim_a),
        vec![Effect::Defeated { by: NodeId(1) }]
    );
    let fx = apply(&mut a, 3, claim_b);
    assert!(fx.contains(&Effect::Outranked { rival: NodeId(3) }));
    // The rival granted nothing above a's blocks: no new generation.
    assert!(!fx.iter().any(|e| matches!(e, Effect::Granted(_))));
    // n3's side had granted up to 10^6 (say, with quorum off).
    let marks = vec![(9, 1_000_000)];
    let fx = apply(
        &mut a,
        3,
        Message::Yield {
            node: NodeId(3),
            marks,
        },
    );
    assert!(fx.contains(&Effect::TransferDue));
    assert!(a
        .leases
        .sa(9)
        .unwrap()
        .blocks()
        .iter()
        .all(|b| b.start > 1_000_000));
    assert_eq!(a.unsynced(), n(&[3]));
    assert_eq!(a.transfer_targets()[0].position, 0);
    // A Yield from a non-member, or for another node, does nothing.
    assert!(apply(
        &mut a,
        4,
        Message::Yield {
            node: NodeId(4),
            marks: vec![]
        }
    )
    .is_empty());
    assert!(apply(
        &mut a,
        2,
        Message::Yield {
            node: NodeId(3),
            marks: vec![]
        }
    )
    .is_empty());
}

/// Neither side quorate ("n1 | n2 | n3" merged): the lowest node's side
/// wins; a claim for another membership is stale and ignored.
#[test]
fn t09_merge_without_quorum_and_stale_claims() {
    let base = founded(&[1, 2, 3]);
    let mut sides: Vec<Replicated> = (1..=3).map(|_| base.clone()).collect();
    for (i, side) in sides.iter_mut().enumerate() {
        membership(side, &[i as u32 + 1]);
        assert!(!side.quorum.quorate);
        membership(side, &[1, 2, 3]);
    }
    let claims: Vec<Message> = sides.iter().map(claim).collect();
    assert_eq!(
        apply(&mut sides[1].clone(), 1, claims[0].clone()),
        vec![Effect::Defeated { by: NodeId(1) }]
    );
    assert!(apply(&mut sides[0].clone(), 3, claims[2].clone())
        .contains(&Effect::Outranked { rival: NodeId(3) }));
    let mut later = sides[1].clone();
    membership(&mut later, &[1, 2]);
    assert!(apply(&mut later, 1, claims[0].clone()).is_empty(), "stale");
}

/// SAs: an outbound one gets leases, duplicates are ignored, deletion
/// forgets it.
#[test]
fn t05_sa_registry() {
    let mut state = founded(&[1, 2]);
    let fx = apply(&mut state, 2, Message::SaAdd(sa(Direction::Outbound, 5)));
    let grants = fx
        .iter()
        .filter(|e| matches!(e, Effect::Granted(_)))
        .count();
    assert_eq!(grants, 3, "regular + two takeover blocks");
    assert!(apply(&mut state, 1, Message::SaAdd(sa(Direction::Outbound, 5))).is_empty());
    apply(&mut state, 1, Message::SaAdd(sa(Direction::Inbound, 5)));
    assert_eq!(state.sas.len(), 2);
    let rc = ReplayCheckpoint {
        spi: 5,
        top: 10,
        words: vec![1],
    };
    apply(&mut state, 1, Message::ReplayCheckpoint(rc.clone()));
    let older = ReplayCheckpoint {
        top: 4,
        ..rc.clone()
    };
    apply(&mut state, 2, Message::ReplayCheckpoint(older));
    assert_eq!(state.sas[&(Direction::Inbound, 5)].replay, Some(rc));
    let fx = apply(
        &mut state,
        1,
        Message::SaDelete {
            direction: Direction::Outbound,
            spi: 5,
        },
    );
    assert_eq!(fx, vec![Effect::SaRemoved(Direction::Outbound, 5)]);
    assert!(state.leases.sa(5).is_none());
}

#[test]
fn snapshot_restore_round_trip() {
    let mut state = founded(&[1, 2, 3]);
    apply(&mut state, 1, Message::SaAdd(sa(Direction::Outbound, 5)));
    apply(&mut state, 2, Message::Suspect { node: NodeId(3) });
    let mut fx = Vec::new();
    state.apply_membership(&n(&[1, 2, 3, 7]), &mut fx);
    let restored = Replicated::restore(&state.snapshot(), Default::default()).unwrap();
    assert_eq!(restored, state);
}

/// One event of a random log.
#[derive(Clone, Debug)]
enum Event {
    Members(Vec<u32>),
    Msg(u32, Message),
}

fn event() -> impl Strategy<Value = Event> {
    let node = 1u32..6;
    prop_oneof![
        proptest::collection::vec(1u32..6, 0..5).prop_map(Event::Members),
        (node.clone(), node.clone())
            .prop_map(|(f, x)| Event::Msg(f, Message::Suspect { node: NodeId(x) })),
        (node.clone(), node.clone())
            .prop_map(|(f, x)| Event::Msg(f, Message::Rejoin { node: NodeId(x) })),
        node.clone()
            .prop_map(|f| Event::Msg(f, Message::Ready { node: NodeId(f) })),
        (node.clone(), 0u32..3)
            .prop_map(|(f, s)| Event::Msg(f, Message::SaAdd(sa(Direction::Outbound, s)))),
        (node, 0u32..3, 0u64..400).prop_map(|(f, spi, after_end)| Event::Msg(
            f,
            Message::LeaseRequest { spi, after_end }
        )),
    ]
}

proptest! {
    /// The same log gives the same state on two members, and a snapshot
    /// taken anywhere restores to it.
    #[test]
    fn deterministic_and_restorable(events in proptest::collection::vec(event(), 0..60)) {
        let (mut a, mut b) = (founded(&[1, 2, 3]), founded(&[1, 2, 3]));
        for event in &events {
            let (mut fa, mut fb) = (Vec::new(), Vec::new());
            match event {
                Event::Members(ids) => {
                    a.apply_membership(&n(ids), &mut fa);
                    b.apply_membership(&n(ids), &mut fb);
                }
                Event::Msg(from, message) => {
                    a.apply_message(NodeId(*from), message, &mut fa);
                    b.apply_message(NodeId(*from), message, &mut fb);
                }
            }
            prop_assert_eq!(fa, fb);
            prop_assert_eq!(&a, &b);
            prop_assert!(a.ready.is_subset(&a.synced));
            let restored = Replicated::restore(&a.snapshot(), Default::default());
            prop_assert_eq!(restored.as_ref(), Some(&a));
        }
    }
}
