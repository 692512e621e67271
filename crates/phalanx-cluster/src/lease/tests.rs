use super::*;
use proptest::prelude::*;

fn view(ids: &[u32]) -> View {
    View::new(0, ids.iter().map(|&id| NodeId(id)))
}

fn table(lease_len: u64, ids: &[u32]) -> (LeaseTable, Vec<Grant>) {
    let mut table = LeaseTable::new(lease_len);
    let mut out = Vec::new();
    table.set_view(view(ids), &mut out);
    (table, out)
}

fn spans(grants: &[Grant]) -> Vec<(u64, u64, BlockKind)> {
    grants
        .iter()
        .map(|g| (g.block.start, g.block.end, g.block.kind))
        .collect()
}

/// Numbered table: "n1,n2,n3; SaAdd(7) with lease 10" grants a regular
/// block aligned to 3 (12 numbers), keeps room for the 63 other blocks of
/// its run after it (up to 770), and one takeover block per member
/// aligned to 2 above that.
#[test]
fn t01_first_generation_layout() {
    let (mut table, _) = table(10, &[1, 2, 3]);
    let mut out = Vec::new();
    assert!(table.add_sa(7, false, &mut out));
    assert_eq!(
        spans(&out),
        vec![
            (3, 14, BlockKind::Regular),
            (772, 781, BlockKind::Takeover(NodeId(1))),
            (782, 791, BlockKind::Takeover(NodeId(2))),
            (792, 801, BlockKind::Takeover(NodeId(3))),
        ]
    );
    assert_eq!(out[0].block.backs, 3, "a run head backs itself");
    let sa = table.sa(7).unwrap();
    assert_eq!(sa.generation(), 1);
    assert_eq!(sa.regular_lineage(), Some(3));
    let t2 = sa.takeover_for(3, NodeId(2)).unwrap();
    assert_eq!(t2.view.members(), &[NodeId(1), NodeId(3)]);
    assert_eq!(t2.backs, 3);
}

/// "n1,n2; request after_end twice": the first grants the successor right
/// after the head (inside its run: no takeover block), the duplicate and a
/// stale end are ignored.
#[test]
fn t02_first_request_wins() {
    let (mut table, _) = table(8, &[1, 2]);
    let mut out = Vec::new();
    table.add_sa(1, true, &mut out);
    let head = table.sa(1).unwrap().blocks()[0].clone();
    let max_end = table.sa(1).unwrap().max_end();
    out.clear();
    assert!(table.request(1, head.end, &mut out));
    assert_eq!(out.len(), 1, "the successor alone");
    let next = out[0].block.clone();
    assert_eq!((next.lineage, next.offset), (head.lineage, head.len()));
    assert_eq!((next.start, next.backs), (head.end + 1, head.start));
    assert_eq!(
        table.sa(1).unwrap().max_end(),
        max_end,
        "inside the reserved room"
    );
    assert_eq!(table.sa(1).unwrap().regular_end(), next.end);
    out.clear();
    assert!(!table.request(1, head.end, &mut out), "duplicate");
    assert!(!table.request(1, 12_345, &mut out), "no such block");
    assert!(!table.request(9, head.end, &mut out), "no such SA");
    assert!(out.is_empty());
    assert_eq!(table.sa(1).unwrap().successor(&head), Some(&next));
}

/// "n1,n2,n3; view becomes n1,n3": a new generation above everything, the
/// old blocks forgotten.
#[test]
fn t03_view_change_starts_a_generation() {
    let (mut table, _) = table(10, &[1, 2, 3]);
    let mut out = Vec::new();
    table.add_sa(5, false, &mut out);
    let max = table.sa(5).unwrap().max_end();
    out.clear();
    table.set_view(view(&[1, 3]), &mut out);
    let sa = table.sa(5).unwrap();
    assert_eq!(sa.generation(), 2);
    assert!(out.iter().all(|g| g.block.start > max));
    assert_eq!(sa.blocks().len(), 3, "regular + two takeover blocks");
    assert_eq!(sa.blocks()[0].view.epoch(), 2);
}

/// "n1 alone": no takeover block (the view without n1 is empty).
#[test]
fn t04_single_member_has_no_takeover() {
    let (mut table, _) = table(4, &[1]);
    let mut out = Vec::new();
    table.add_sa(1, false, &mut out);
    assert_eq!(spans(&out), vec![(1, 4, BlockKind::Regular)]);
}

/// "empty view": nothing granted until a view arrives.
#[test]
fn t05_empty_view_grants_nothing() {
    let mut table = LeaseTable::new(16);
    let mut out = Vec::new();
    table.add_sa(1, false, &mut out);
    assert!(out.is_empty());
    assert_eq!(table.sa(1).unwrap().regular_lineage(), None);
    table.set_view(view(&[2]), &mut out);
    assert_eq!(out.len(), 1);
}

/// "no ESN, lease 2^31": the space runs out; the SA is exhausted.
#[test]
fn t06_space_exhaustion() {
    let (mut table, _) = table(1 << 31, &[1, 2]);
    let mut out = Vec::new();
    table.add_sa(1, false, &mut out);
    let sa = table.sa(1).unwrap();
    assert!(sa.is_exhausted());
    assert!(sa.max_end() <= MAX_SEQ_32);
    assert!(sa.blocks().iter().all(|b| b.end <= MAX_SEQ_32));
}

/// Lineage positions map onto numbers across the gap between blocks.
#[test]
fn t07_positions_continue_across_blocks() {
    let (mut table, _) = table(6, &[1, 2, 3]);
    let mut out = Vec::new();
    table.add_sa(1, false, &mut out);
    let head = table.sa(1).unwrap().blocks()[0].clone();
    table.request(1, head.end, &mut out);
    let sa = table.sa(1).unwrap();
    assert_eq!(sa.block_at(head.lineage, 5).unwrap().start, head.start);
    let next = sa.block_at(head.lineage, 6).unwrap();
    assert_eq!(next.offset, 6);
    assert_eq!(next.start % 3, 0);
    assert_eq!(sa.last_of(head.lineage), Some(next));
}

/// Only the last few regular blocks are kept; the takeover heads of a run
/// stay while one of its blocks is kept, and go once none is.
#[test]
fn t08_pruning() {
    let (mut table, _) = table(4, &[1, 2]);
    let mut out = Vec::new();
    table.add_sa(1, false, &mut out);
    let request = |table: &mut LeaseTable, out: &mut Vec<Grant>| {
        let lineage = table.sa(1).unwrap().regular_lineage().unwrap();
        let last = table.sa(1).unwrap().last_of(lineage).unwrap().end;
        assert!(table.request(1, last, out));
    };
    for _ in 0..10 {
        request(&mut table, &mut out);
    }
    let regular = |sa: &SaLeases| {
        sa.blocks()
            .iter()
            .filter(|b| b.kind == BlockKind::Regular)
            .count()
    };
    let sa = table.sa(1).unwrap();
    assert_eq!(regular(sa), LEASE_REGULAR_KEPT);
    assert_eq!(
        sa.blocks().len(),
        LEASE_REGULAR_KEPT + 2,
        "one run: its two takeover heads"
    );
    // Past the run: a new run head above the old takeover blocks, with
    // takeover blocks of its own; a block of the old run is still kept.
    for _ in 10..LEASE_RUN_BLOCKS {
        request(&mut table, &mut out);
    }
    let sa = table.sa(1).unwrap();
    let heads: Vec<u64> = sa.blocks().iter().map(|b| b.backs).collect();
    assert_eq!(regular(sa), LEASE_REGULAR_KEPT);
    assert_eq!(
        sa.blocks().len(),
        LEASE_REGULAR_KEPT + 4,
        "two runs: {heads:?}"
    );
    for _ in 0..LEASE_REGULAR_KEPT {
        request(&mut table, &mut out);
    }
    let sa = table.sa(1).unwrap();
    assert_eq!(
        sa.blocks().len(),
        LEASE_REGULAR_KEPT + 2,
        "the old run forgotten"
    );
}

#[test]
fn may_send_follows_the_class_rule() {
    let block = LeaseBlock {
        start: 9,
        end: 17,
        view: view(&[4, 5, 6]),
        kind: BlockKind::Regular,
        lineage: 9,
        offset: 0,
        backs: 0,
    };
    assert!(block.may_send(NodeId(4), 9));
    assert!(block.may_send(NodeId(5), 10));
    assert!(block.may_send(NodeId(6), 17));
    assert!(!block.may_send(NodeId(4), 10));
    assert!(!block.may_send(NodeId(7), 9));
    assert!(!block.may_send(NodeId(4), 18));
}

#[test]
fn from_parts_refuses_overlap() {
    let a = LeaseBlock {
        start: 2,
        end: 5,
        view: view(&[1, 2]),
        kind: BlockKind::Regular,
        lineage: 2,
        offset: 0,
        backs: 0,
    };
    let mut b = a.clone();
    b.start = 4;
    b.end = 9;
    assert!(SaLeases::from_parts(false, 1, 9, false, vec![a.clone(), b]).is_none());
    assert!(SaLeases::from_parts(false, 1, 4, false, vec![a.clone()]).is_none());
    assert!(SaLeases::from_parts(false, 1, 5, false, vec![a]).is_some());
}

/// One operation of a random log.
#[derive(Clone, Debug)]
enum Op {
    View(Vec<u32>),
    Add(u32, bool),
    Remove(u32),
    /// Request after the last block of lineage number `lineage % count`.
    Request(u32, usize),
    /// Request after an arbitrary number.
    Stale(u32, u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        proptest::collection::vec(1u32..8, 0..6).prop_map(Op::View),
        (0u32..4, any::<bool>()).prop_map(|(s, e)| Op::Add(s, e)),
        (0u32..4).prop_map(Op::Remove),
        (0u32..4, 0usize..16).prop_map(|(s, l)| Op::Request(s, l)),
        (0u32..4, 0u64..200).prop_map(|(s, e)| Op::Stale(s, e)),
    ]
}

fn apply(table: &mut LeaseTable, op: &Op, out: &mut Vec<Grant>) {
    match op {
        Op::View(ids) => table.set_view(view(ids), out),
        Op::Add(spi, esn) => {
            table.add_sa(*spi, *esn, out);
        }
        Op::Remove(spi) => {
            table.remove_sa(*spi);
        }
        Op::Request(spi, pick) => {
            let Some(sa) = table.sa(*spi) else { return };
            let mut lineages: Vec<u64> = sa.blocks().iter().map(|b| b.lineage).collect();
            lineages.dedup();
            if lineages.is_empty() {
                return;
            }
            let lineage = lineages[pick % lineages.len()];
            let end = sa.last_of(lineage).map(|b| b.end).unwrap_or(0);
            table.request(*spi, end, out);
        }
        Op::Stale(spi, end) => {
            table.request(*spi, *end, out);
        }
    }
}

proptest! {
    /// Blocks granted for one SA never overlap, takeover blocks included,
    /// whatever the log; every block is inside the SA's space, aligned,
    /// and no member has two classes in one.
    #[test]
    fn grants_never_overlap(lease_len in 1u64..40, ops in proptest::collection::vec(op(), 0..80)) {
        let mut table = LeaseTable::new(lease_len);
        // Blocks per SA lifetime: removing an SA and adding it again starts
        // a new SA (a new key), whose space starts over.
        let mut lifetime: BTreeMap<u32, u32> = BTreeMap::new();
        let mut by_sa: BTreeMap<(u32, u32), Vec<LeaseBlock>> = BTreeMap::new();
        for op in &ops {
            let mut out = Vec::new();
            apply(&mut table, op, &mut out);
            for grant in out {
                let life = *lifetime.get(&grant.spi).unwrap_or(&0);
                by_sa.entry((grant.spi, life)).or_default().push(grant.block);
            }
            if let Op::Remove(spi) = op {
                *lifetime.entry(*spi).or_default() += 1;
            }
        }
        for blocks in by_sa.values() {
            for (i, a) in blocks.iter().enumerate() {
                prop_assert!(a.start >= 1 && a.start <= a.end);
                prop_assert_eq!(a.start % a.view.len() as u64, 0);
                let members = a.view.members();
                prop_assert!(members.windows(2).all(|w| w[0] < w[1]));
                for b in &blocks[i + 1..] {
                    prop_assert!(!a.overlaps(b), "{:?} {:?}", a, b);
                    // A successor inside its run lies above its own
                    // lineage only; every other grant above everything.
                    let in_run = b.kind == BlockKind::Regular && b.backs != b.start;
                    if !in_run || a.lineage == b.lineage {
                        prop_assert!(b.start > a.end, "later grants lie above {:?} {:?}", a, b);
                    }
                }
            }
        }
    }

    /// The same log gives the same table.
    #[test]
    fn same_log_same_table(lease_len in 1u64..40, ops in proptest::collection::vec(op(), 0..60)) {
        let (mut a, mut b) = (LeaseTable::new(lease_len), LeaseTable::new(lease_len));
        let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
        for op in &ops {
            apply(&mut a, op, &mut out_a);
            apply(&mut b, op, &mut out_b);
        }
        prop_assert_eq!(a, b);
        prop_assert_eq!(out_a, out_b);
    }
}
