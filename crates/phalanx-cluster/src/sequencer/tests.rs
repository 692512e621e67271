use super::*;
use crate::lease::LeaseTable;
use crate::view::View;
use std::collections::BTreeSet;

const SPI: u32 = 0x100;

fn leases(lease_len: u64, ids: &[u32]) -> LeaseTable {
    let mut table = LeaseTable::new(lease_len);
    let mut out = Vec::new();
    table.set_view(View::new(0, ids.iter().map(|&i| NodeId(i))), &mut out);
    table.add_sa(SPI, true, &mut out);
    table
}

fn sequencers(ids: &[u32], spacing: Spacing, table: &LeaseTable) -> Vec<OutboundSequencer> {
    ids.iter()
        .map(|&id| {
            let mut s = OutboundSequencer::new(NodeId(id), spacing);
            assert!(s.enter_generation(table.sa(SPI).unwrap()));
            s
        })
        .collect()
}

/// Grant every lease request the sequencers make (the log, instantly).
fn serve_requests(table: &mut LeaseTable, seqs: &mut [OutboundSequencer]) {
    let mut out = Vec::new();
    for s in seqs.iter_mut() {
        if let Some(end) = s.lease_request(table.sa(SPI).unwrap()) {
            table.request(SPI, end, &mut out);
        }
    }
}

/// "n1,n2,n3 packet-rr, 100 packets, lease 12": the owner of packet `c`
/// (member `c % 3`) sends exactly the number of its position, across
/// block boundaries, and every number is sent once.
#[test]
fn dense_round_robin_sends_the_position() {
    let ids = [1, 2, 3];
    let mut table = leases(12, &ids);
    let mut seqs = sequencers(&ids, Spacing::Dense, &table);
    let mut sent = Vec::new();
    for packet in 0..100u64 {
        let counters: Vec<u64> = seqs.iter_mut().map(|s| s.count(packet)).collect();
        assert!(counters.windows(2).all(|w| w[0] == w[1]));
        let c = counters[0];
        let owner = (c % 3) as usize;
        let seq = seqs[owner].assign(c, table.sa(SPI).unwrap()).unwrap();
        let block = table
            .sa(SPI)
            .unwrap()
            .blocks()
            .iter()
            .find(|b| b.start <= seq && seq <= b.end);
        assert!(block.unwrap().may_send(NodeId(ids[owner]), seq));
        sent.push(seq);
        serve_requests(&mut table, &mut seqs);
    }
    // Exactly one number per packet, without a hole: the nine blocks are
    // one run, granted back to back (the takeover blocks lie above it).
    assert!(sent.windows(2).all(|w| w[1] == w[0] + 1), "{sent:?}");
    let first = table.sa(SPI).unwrap().regular_lineage().unwrap();
    assert_eq!(sent[0], first);
    assert_eq!(
        sent[11],
        first + 11,
        "the first block is used number by number"
    );
}

/// "n1,n2,n3 session-like (owner random), 300 packets": strided numbers
/// stay within one stride of the counter's number whoever owns the packet.
#[test]
fn strided_numbers_stay_level() {
    let ids = [1, 2, 3];
    let mut table = leases(30, &ids);
    let mut seqs = sequencers(&ids, Spacing::Strided, &table);
    let mut seen = BTreeSet::new();
    let mut last_by_owner = [0u64; 3];
    for packet in 0..300u64 {
        let c = seqs.iter_mut().map(|s| s.count(packet)).last().unwrap();
        // A skewed owner pattern: node 1 owns 5 packets in 7.
        let owner = if packet % 7 < 5 {
            0
        } else {
            1 + (packet % 2) as usize
        };
        let seq = seqs[owner].assign(c, table.sa(SPI).unwrap()).unwrap();
        assert!(seen.insert(seq), "number {seq} sent twice");
        assert!(seq > last_by_owner[owner]);
        last_by_owner[owner] = seq;
        serve_requests(&mut table, &mut seqs);
    }
    // The numbers of the three nodes stay within a few blocks of each
    // other (no drift), although node 1 sent most packets.
    let spread = last_by_owner.iter().max().unwrap() - last_by_owner.iter().min().unwrap();
    assert!(spread < 4 * 30 * 4, "spread {spread}");
}

/// No successor granted: the owner gets `None` (no lease), and once the
/// grant arrives the counter maps into it without any node jumping.
#[test]
fn no_lease_until_the_successor_arrives() {
    let ids = [1];
    let mut table = leases(4, &ids);
    let mut seqs = sequencers(&ids, Spacing::Dense, &table);
    let sa = table.sa(SPI).unwrap().clone();
    for p in 0..4 {
        let c = seqs[0].count(p);
        assert_eq!(seqs[0].assign(c, &sa), Some(c));
    }
    let c = seqs[0].count(4);
    assert_eq!(seqs[0].assign(c, &sa), None);
    assert_eq!(seqs[0].lease_request(&sa), Some(4));
    assert_eq!(seqs[0].lease_request(&sa), None, "asked once");
    let mut out = Vec::new();
    table.request(SPI, 4, &mut out);
    let c = seqs[0].count(5);
    let next = table.sa(SPI).unwrap().blocks()[1].start;
    assert_eq!(seqs[0].assign(c, table.sa(SPI).unwrap()), Some(next + 1));
}

/// "n1,n2,n3; n1 and n2 suspect n3": both enter T(n3) with classes of the
/// view {n1,n2}; n3, still sending from the regular block, collides with
/// nobody.
#[test]
fn takeover_block_excludes_the_suspect() {
    let ids = [1, 2, 3];
    let table = leases(120, &ids);
    let sa = table.sa(SPI).unwrap();
    let mut seqs = sequencers(&ids, Spacing::Dense, &table);
    let mut sent = BTreeSet::new();
    for p in 0..5 {
        let c = seqs.iter_mut().map(|s| s.count(p)).last().unwrap();
        let seq = seqs[(c % 3) as usize].assign(c, sa).unwrap();
        assert!(sent.insert(seq));
    }
    assert_eq!(seqs[0].take_over(NodeId(3), sa), TakeoverOutcome::Entered);
    assert_eq!(seqs[1].take_over(NodeId(3), sa), TakeoverOutcome::Entered);
    let t = sa
        .takeover_for(sa.regular_lineage().unwrap(), NodeId(3))
        .unwrap();
    assert_eq!(seqs[0].lineage(), t.lineage);
    for p in 5..40 {
        let cs: Vec<u64> = seqs.iter_mut().map(|s| s.count(p)).collect();
        // n1 and n2 dispatch over {n1, n2}; n3 still believes in {n1,n2,n3}.
        let seq = seqs[(cs[0] % 2) as usize].assign(cs[0], sa).unwrap();
        assert!(t.may_send(NodeId(1 + (cs[0] % 2) as u32), seq));
        assert!(sent.insert(seq));
        if cs[2] % 3 == 2 {
            if let Some(seq) = seqs[2].assign(cs[2], sa) {
                assert!(sent.insert(seq), "n3 collided at {seq}");
            }
        }
    }
    assert_eq!(seqs[0].take_over(NodeId(2), sa), TakeoverOutcome::Deferred);
    assert_eq!(
        seqs[2].take_over(NodeId(9), sa),
        TakeoverOutcome::NotApplicable
    );
}

/// "n2 misses packet 10": the others' next checkpoint heals it by one; the
/// same checkpoint again heals nothing.
#[test]
fn heal_by_fingerprint_once() {
    let ids = [1, 2];
    let table = leases(1000, &ids);
    let mut seqs = sequencers(&ids, Spacing::Dense, &table);
    for p in 0..30u64 {
        seqs[0].count(p);
        if p != 10 {
            seqs[1].count(p);
        }
    }
    assert_eq!(seqs[0].counter(), seqs[1].counter() + 1);
    let mark = seqs[0].checkpoint(1, true).unwrap();
    assert_eq!(seqs[1].heal(mark.lineage, mark.c, mark.fingerprint), 1);
    assert_eq!(seqs[0].counter(), seqs[1].counter());
    assert_eq!(seqs[1].heal(mark.lineage, mark.c, mark.fingerprint), 0);
    assert_eq!(seqs[1].heals(), 1);
    // The healed node never pulls the other back.
    let mark = seqs[1].checkpoint(1, true).unwrap();
    assert_eq!(seqs[0].heal(mark.lineage, mark.c, mark.fingerprint), 0);
    // An advance no missed packet explains is ignored (a bug or a lie).
    assert_eq!(seqs[1].heal(mark.lineage, u64::MAX, mark.fingerprint), 0);
    // Another lineage, or an unknown packet: nothing.
    assert_eq!(seqs[1].heal(mark.lineage + 1, mark.c + 5, 29), 0);
    assert_eq!(seqs[1].heal(mark.lineage, mark.c + 5, 12_345), 0);
}

#[test]
fn checkpoint_every_and_forced() {
    let table = leases(100, &[1]);
    let mut seqs = sequencers(&[1], Spacing::Dense, &table);
    assert_eq!(seqs[0].checkpoint(3, true), None, "nothing counted");
    seqs[0].count(1);
    seqs[0].count(2);
    assert_eq!(seqs[0].checkpoint(3, false), None);
    let c = seqs[0].count(3);
    let mark = seqs[0].checkpoint(3, false).unwrap();
    assert_eq!((mark.c, mark.fingerprint), (c, 3));
    seqs[0].count(4);
    assert!(seqs[0].checkpoint(3, true).is_some());
}

/// A new generation moves the counter to the new regular lineage and
/// leaves the takeover.
#[test]
fn new_generation_resets_the_lineage() {
    let mut table = leases(10, &[1, 2]);
    let mut seqs = sequencers(&[1, 2], Spacing::Dense, &table);
    seqs[0].count(1);
    assert_eq!(
        seqs[0].take_over(NodeId(2), table.sa(SPI).unwrap()),
        TakeoverOutcome::Entered
    );
    let mut out = Vec::new();
    table.set_view(View::new(0, [NodeId(1)]), &mut out);
    let sa = table.sa(SPI).unwrap();
    assert!(seqs[0].enter_generation(sa));
    assert!(!seqs[0].enter_generation(sa));
    assert_eq!(seqs[0].takeover(), None);
    assert_eq!(seqs[0].lineage(), sa.regular_lineage().unwrap());
    let c = seqs[0].count(2);
    assert_eq!(seqs[0].assign(c, sa), Some(sa.regular_lineage().unwrap()));
}

/// Two nodes enter a lineage 5 packets apart (one adopted the view
/// change later): the one ahead checkpoints after its 1st, 2nd, 4th, ...
/// packet there, and the first of those the late one has counted heals
/// it level.
#[test]
fn entry_checkpoints_heal_a_late_entry() {
    let ids = [1, 2];
    let table = leases(100_000, &ids);
    let mut seqs = sequencers(&ids, Spacing::Dense, &table);
    let marks: Vec<u64> = (1..=600u64)
        .filter(|&p| {
            seqs[0].count(p);
            seqs[0].entry_checkpoint().is_some()
        })
        .collect();
    assert_eq!(marks, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]);

    let table = leases(100_000, &ids);
    let mut ahead = OutboundSequencer::new(NodeId(1), Spacing::Dense);
    let mut late = OutboundSequencer::new(NodeId(2), Spacing::Dense);
    let sa = table.sa(SPI).unwrap();
    assert!(ahead.enter_generation(sa));
    for p in 0..5u64 {
        ahead.count(p);
        late.count(p);
    }
    assert!(late.enter_generation(sa));
    for p in 5..40u64 {
        ahead.count(p);
        late.count(p);
        if let Some(mark) = ahead.entry_checkpoint() {
            late.heal(mark.lineage, mark.c, mark.fingerprint);
        }
    }
    assert_eq!(ahead.counter(), late.counter());
    assert_eq!(late.heals(), 1);
}

/// The stateful schemes' stream state restarts exactly at the fixed
/// lineage positions, for every node whose counter agrees.
#[test]
fn state_restarts_at_fixed_positions() {
    let table = leases(100_000, &[1]);
    let mut seqs = sequencers(&[1], Spacing::Dense, &table);
    let lineage = seqs[0].lineage();
    let restarts: Vec<u64> = (0..20_000u64)
        .filter_map(|p| {
            let c = seqs[0].count(p);
            seqs[0].at_state_restart().then_some(c - lineage)
        })
        .collect();
    assert_eq!(restarts, STATE_RESTART_POSITIONS);
    assert!(!OutboundSequencer::new(NodeId(1), Spacing::Dense).at_state_restart());
}
