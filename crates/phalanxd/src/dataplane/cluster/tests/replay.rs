//! Why the netns replay check can fail: the frames it re-sends after a
//! takeover are refused only because the survivor's replay window carries
//! the failed node's share over.
//!
//! tests/netns/test_cluster.py (`_check_replays`) re-sends gwB's ESP
//! frames of the last ~50 ms before a node fails, as soon as the
//! survivors have taken over its share, and requires every one of them to
//! be refused as `replayed` (a duplicate inside the window, RFC 4303
//! §3.4.3), none as `too_old`. Here the same moment with three nodes and
//! node 3 failing, seen from node 1 twice: once as it runs (it observed
//! every frame, so the takeover marks the failed node's numbers in its
//! window: `FrameClassifier::take_over_marks`), once as a survivor whose
//! window for that share is empty (it never observed those frames:
//! nothing to carry over). The second accepts the re-sent frames of the
//! failed node's share (and of node 2's, which the view without node 3
//! hands node 1 too): the check would see fewer `replayed` than frames
//! re-sent, and hostA would receive them twice. The harness agrees the
//! suspicion through its log within the 60 ms, as the cluster log does
//! in the netns test before the frames arrive.

use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::{Duration, Instant};

use phalanx_cluster::NodeId;
use phalanx_sa::{InboundSa, IpsecProtocol, ReplayError};

use super::{classifier, esp_frame, founded, store, Shape, IN_SPI};
use crate::dataplane::cluster::{FrameClassifier, Side};
use crate::dataplane::WorkerStats;
use crate::install::{Runtime, SaStore};

/// Inbound packets before the failure (about 0.5 s of the netns test's
/// inbound stream).
const BEFORE: u32 = 300;
/// The re-sent ones: the newest 30 (the last ~50 ms at ~600 packets/s),
/// far inside the 1,024-packet window (`limits::DEFAULT_REPLAY_WINDOW`).
const RESENT: RangeInclusive<u32> = 271..=300;

/// Node 1 with its own SA store (its own replay windows).
struct Survivor {
    classifier: FrameClassifier,
    _store: SaStore,
    rt: Arc<Runtime>,
}

/// What node 1's replay window said about the re-sent frames it owns.
#[derive(Debug, Default, PartialEq, Eq)]
struct Verdicts {
    /// Accepted: they would be decrypted and delivered again.
    accepted: Vec<u32>,
    /// Refused as duplicates (phalanx-esp counts them as `replayed`).
    replayed: Vec<u32>,
    /// Refused as left of the window (`too_old`).
    too_old: Vec<u32>,
}

impl Survivor {
    fn new() -> Survivor {
        let store = store();
        let rt = Arc::clone(&store.load());
        Survivor {
            classifier: classifier(1),
            _store: store,
            rt,
        }
    }

    /// Whether node 1 owns (opens) `seq`, arrived at `arrival`.
    fn opens(&mut self, seq: u32, arrival: Instant) -> bool {
        let frame = esp_frame(IN_SPI, seq);
        let mut stats = WorkerStats::default();
        let decision =
            self.classifier
                .classify(Side::Outside, &frame, arrival, &self.rt, &mut stats);
        matches!(Shape::of(decision), Shape::Open { .. })
    }

    /// The inbound path's replay commit after the packet authenticated.
    fn commit(&self, seq: u32) {
        self.sa().replay_commit(u64::from(seq)).unwrap();
    }

    fn sa(&self) -> Arc<InboundSa> {
        self.rt.inbound.get(IN_SPI, IpsecProtocol::Esp).unwrap()
    }
}

/// The newest 30 of 300 inbound frames re-sent after node 3 fails: node
/// 1 refuses every one it owns as a duplicate when its window carried the
/// others' numbers over; with that window empty it accepts every one it
/// did not own before.
#[test]
fn replays_after_a_takeover_are_refused_only_with_the_carried_over_window() {
    let (mut h, states) = founded(3);
    let (mut carried, mut blank) = (Survivor::new(), Survivor::new());
    for s in [&mut carried, &mut blank] {
        s.classifier
            .begin_batch(&states[0], &s.rt, &mut WorkerStats::default());
    }
    // Before the failure: `carried` sees every frame (as every node's
    // ring does), `blank` only those node 1 owns; both commit those.
    let arrival = h.now();
    for seq in 1..=BEFORE {
        if carried.opens(seq, arrival) {
            carried.commit(seq);
            assert!(blank.opens(seq, arrival), "{seq}: same owner");
            blank.commit(seq);
        }
    }
    h.kill(NodeId(3));
    h.run_for(Duration::from_millis(60));
    let after = h.node(NodeId(1)).unwrap().shared();
    assert_eq!(
        after.view().members(),
        &[NodeId(1), NodeId(2)],
        "taken over"
    );
    // packet-rr: the owner of `seq` is view[seq % n]; n1's own numbers
    // before the failure were those with seq % 3 == 0, n3's seq % 3 == 2.
    let (was_n1s, was_n3s) = (|seq: &u32| seq % 3 == 0, |seq: &u32| seq % 3 == 2);
    let mut verdicts = Vec::new();
    for s in [&mut carried, &mut blank] {
        s.classifier
            .begin_batch(&after, &s.rt, &mut WorkerStats::default());
        let mut v = Verdicts::default();
        for seq in RESENT {
            if !s.opens(seq, h.now()) {
                continue; // node 2's now
            }
            match s.sa().replay_check(seq) {
                Ok(_) => v.accepted.push(seq),
                Err(ReplayError::Duplicate) => v.replayed.push(seq),
                Err(ReplayError::TooOld) => v.too_old.push(seq),
                Err(e) => panic!("{seq}: {e}"),
            }
        }
        verdicts.push(v);
    }
    let [carried, blank] = [&verdicts[0], &verdicts[1]];
    assert!(
        carried.accepted.is_empty() && carried.too_old.is_empty(),
        "carried over: every re-sent frame n1 owns is refused as replayed: {carried:?}"
    );
    let moved: Vec<u32> = carried
        .replayed
        .iter()
        .copied()
        .filter(|seq| !was_n1s(seq))
        .collect();
    assert!(
        moved.iter().any(was_n3s),
        "n1 owns some of n3's re-sent share now: {carried:?}"
    );
    assert_eq!(
        blank.accepted, moved,
        "without the carried-over window, what n1 took over is accepted again"
    );
    assert!(blank.too_old.is_empty(), "{blank:?}");
    assert!(
        blank.replayed.iter().all(was_n1s),
        "only n1's own numbers refused: {blank:?}"
    );
}
