//! Nothing a peer sends can panic an endpoint (STYLE.md practice 9): random
//! datagrams, and real messages of a whole session mutated, fed to a
//! responder and an initiator.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use phalanx_ike::{Counter, Datagram};
use phalanx_testkit::ike_pair::{IkeFuzzProvider, IkePair, Side, WireRecord};
use proptest::prelude::*;

/// A recorded session: establishment, a child rekey, an IKE rekey and a
/// delete, its encrypted messages in RFC 7383 fragments (the fragment MTU
/// is lowered so that even short messages are split). Recorded once.
fn session() -> &'static [WireRecord] {
    static SESSION: OnceLock<Vec<WireRecord>> = OnceLock::new();
    SESSION.get_or_init(|| {
        let mut a = connection(Side::A, DEFAULT_IKE);
        a.ike_lifetime.rekey_time = Duration::from_secs(50);
        a.ike_lifetime.jitter = Duration::ZERO;
        let mut cfg_a = config(a);
        cfg_a.limits.fragment_mtu = 200;
        let mut cfg_b = config(connection(Side::B, DEFAULT_IKE));
        cfg_b.limits.fragment_mtu = 200;
        let mut p = IkePair::new((cfg_a, ip(ADDR_A)), (cfg_b, ip(ADDR_B)), 300);
        established(&mut p);
        let spi = p.installed(Side::A).0[0];
        p.with(Side::A, |e, now| e.handle_child_expiry(now, spi, false));
        p.run_for(Duration::from_secs(60));
        teardown(&mut p);
        assert!(p.wire().iter().any(|w| w.info.fragment));
        p.wire().to_vec()
    })
}

fn fresh() -> IkePair {
    let mut p = pair(DEFAULT_IKE, 301);
    established(&mut p);
    p
}

fn feed(p: &mut IkePair, to: Side, from_record: &WireRecord, bytes: &[u8]) {
    let now = p.now;
    let datagram = Datagram {
        local: from_record.transmit.remote,
        remote: from_record.transmit.local,
        bytes,
    };
    p.endpoint(to).handle_datagram(now, datagram);
    p.flush();
    // Let timers and answers run a little.
    p.run_for(Duration::from_secs(1));
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Append(Vec<u8>),
    Splice(usize, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(i, x)| Mutation::Flip(i, x)),
        any::<usize>().prop_map(Mutation::Truncate),
        proptest::collection::vec(any::<u8>(), 1..64).prop_map(Mutation::Append),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..16)
        )
            .prop_map(|(i, v)| Mutation::Splice(i, v)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len().max(1);
    match m {
        Mutation::Flip(i, x) => {
            if let Some(b) = bytes.get_mut(i % len) {
                *b ^= x;
            }
        }
        Mutation::Truncate(i) => bytes.truncate(i % len),
        Mutation::Append(v) => bytes.extend_from_slice(v),
        Mutation::Splice(i, v) => {
            let at = i % len;
            for (k, b) in v.iter().enumerate() {
                if let Some(slot) = bytes.get_mut(at + k) {
                    *slot = *b;
                }
            }
        }
    }
}

/// **Insecure**: the testkit's NULL ciphers (every tag accepted) with real
/// PRFs and key exchanges, so mutated messages get past the integrity
/// check and reach payload parsing and the state machine.
static PAST_AUTHENTICATION: IkeFuzzProvider = IkeFuzzProvider::PAST_INTEGRITY;

/// A whole session (establish, child rekey, IKE rekey, delete) through a
/// network that corrupts one datagram.
fn corrupted_session(index: usize, mutations: Vec<Mutation>) -> IkePair {
    corrupted(
        "aes256gcm16-prfsha256-x25519,aes128-sha256-x25519",
        1,
        index,
        mutations,
    )
}

/// The same with `ike` proposals and windows of `window` on both sides.
fn corrupted(ike: &str, window: u32, index: usize, mutations: Vec<Mutation>) -> IkePair {
    let mut a = connection(Side::A, ike);
    a.ike_lifetime.rekey_time = Duration::from_secs(50);
    a.ike_lifetime.jitter = Duration::ZERO;
    let mut cfg_a = config(a);
    cfg_a.limits.fragment_mtu = 300;
    cfg_a.limits.window_size = window;
    let mut cfg_b = config(connection(Side::B, ike));
    cfg_b.limits.window_size = window;
    let mut p = IkePair::with_provider(
        (cfg_a, ip(ADDR_A)),
        (cfg_b, ip(ADDR_B)),
        303,
        &PAST_AUTHENTICATION,
    );
    p.mutate_index(index, move |bytes| {
        for m in &mutations {
            apply(bytes, m);
        }
    });
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(3));
    if let Some(spi) = p.installed(Side::A).0.first().copied() {
        p.with(Side::A, |e, now| e.handle_child_expiry(now, spi, false));
    }
    p.run_for(Duration::from_secs(60));
    let now = p.now;
    let _ = p.endpoint(Side::A).terminate(now, "gw");
    p.flush();
    p.run_for(Duration::from_secs(60));
    p
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    // Mutated messages of a real session, to both sides of an established pair.
    #[test]
    fn mutated_session_messages(index in any::<usize>(), mutations in proptest::collection::vec(mutation(), 1..4)) {
        let wire = session();
        let record = &wire[index % wire.len()];
        let mut bytes = record.transmit.bytes.clone();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        let mut p = fresh();
        feed(&mut p, record.from.peer(), record, &bytes);
        // Whatever happened was counted, and nothing panicked.
        let c = p.endpoint_ref(record.from.peer()).counters();
        prop_assert!(c.get(Counter::DatagramsReceived) >= 3);
    }

    // Random bytes behind a plausible IKE header.
    #[test]
    fn random_datagrams(head in proptest::collection::vec(any::<u8>(), 0..28), body in proptest::collection::vec(any::<u8>(), 0..600), exchange in 33u8..=38, flags in any::<u8>()) {
        let wire = session();
        let record = &wire[0];
        let mut bytes = head;
        bytes.resize(28, 0);
        bytes[17] = 0x20;
        bytes[18] = exchange;
        bytes[19] = flags;
        let len = (28 + body.len()) as u32;
        bytes[24..28].copy_from_slice(&len.to_be_bytes());
        bytes.extend_from_slice(&body);
        let mut p = fresh();
        feed(&mut p, Side::B, record, &bytes);
        feed(&mut p, Side::A, record, &bytes);
    }

    // One datagram of a session corrupted behind a NULL cipher: the
    // mutation reaches payload parsing and the state machine of both sides.
    #[test]
    fn corrupted_session_past_authentication(index in 0usize..24, mutations in proptest::collection::vec(mutation(), 1..4)) {
        let p = corrupted_session(index, mutations);
        // Whatever happened, every SA installed was removed at most once.
        for ((_, _, _), (installs, removes)) in p.sa_balance() {
            prop_assert!(removes <= installs);
        }
    }

    // The same with hybrid ML-KEM proposals (IKE_INTERMEDIATE) and windows
    // of four.
    #[test]
    fn corrupted_hybrid_session_past_authentication(index in 0usize..40, mutations in proptest::collection::vec(mutation(), 1..4)) {
        let p = corrupted(HYBRID_WINDOWED, 4, index, mutations);
        for ((_, _, _), (installs, removes)) in p.sa_balance() {
            prop_assert!(removes <= installs);
        }
    }

    // Mutated IKE_SA_INIT requests reach the unauthenticated responder code.
    #[test]
    fn mutated_init_requests(mutations in proptest::collection::vec(mutation(), 1..6)) {
        let wire = session();
        let record = wire.iter().find(|w| w.info.exchange == phalanx_wire::ike::iana::ExchangeType::IKE_SA_INIT && !w.info.response).unwrap();
        let mut bytes = record.transmit.bytes.clone();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        let mut p = pair(DEFAULT_IKE, 302);
        feed(&mut p, Side::B, record, &bytes);
    }
}

// Every message of a real session, delivered again out of context to the
// other side after the session: dropped or answered, counted, no panic.
#[test]
fn replayed_session_out_of_context() {
    let wire = session();
    let mut p = fresh();
    for record in wire {
        feed(
            &mut p,
            record.from.peer(),
            record,
            &record.transmit.bytes.clone(),
        );
    }
    assert!(p.endpoint_ref(Side::B).counters().get(Counter::UnknownSpi) > 0);
}

/// Hybrid proposals for the corrupted sessions.
const HYBRID_WINDOWED: &str = "aes256gcm16-prfsha256-x25519-ke1_mlkem768,aes128-sha256-x25519";

// The hybrid corrupting session without corruption runs to its end.
#[test]
fn uncorrupted_hybrid_session_completes() {
    let p = corrupted(HYBRID_WINDOWED, 4, usize::MAX, Vec::new());
    let a = p.endpoint_ref(Side::A).counters();
    assert_eq!(a.get(Counter::IkeSasEstablished), 1);
    assert_eq!(a.get(Counter::AdditionalKeyExchanges), 1);
    assert_eq!(a.get(Counter::ChildSasRekeyed), 1);
    assert_eq!(a.get(Counter::IkeSasRekeyed), 1);
    assert!(p.endpoint_ref(Side::B).ike_sas().is_empty());
    p.check_removed_once().unwrap();
}

// The corrupting session without corruption runs to its end: the fuzz
// cases above do start from a working session.
#[test]
fn uncorrupted_session_completes() {
    let p = corrupted_session(usize::MAX, Vec::new());
    let a = p.endpoint_ref(Side::A).counters();
    assert_eq!(a.get(Counter::IkeSasEstablished), 1);
    assert_eq!(a.get(Counter::ChildSasRekeyed), 1);
    assert_eq!(a.get(Counter::IkeSasRekeyed), 1);
    assert!(a.get(Counter::FragmentsSent) > 0);
    assert!(p.endpoint_ref(Side::B).ike_sas().is_empty());
    p.check_removed_once().unwrap();
}
