//! The state-transfer body.
//!
//! ```text
//! StateTransfer := Flags (8) | Targets (16) x { Node (32) | Position (64) } | State
//! State   := Applied (64) | Epoch (64) | Generation (64) | Transfers (64) |
//!            Lease length (64) | Agreed: Nodes | Synced: Nodes | Ready: Nodes |
//!            Joined (16) x { Node (32) | At (64) } |
//!            Suspects (16) x { Node (32) | Accusers: Nodes } |
//!            Quorum | SAs (32) x SaRecord
//! Quorum  := History (64) | Recent (16) x History (64) | Base: Nodes |
//!            Refused: Nodes |
//!            Flags (8: bit 0 quorate, bit 1 was quorate) | Lowest (32, 0: none)
//! Nodes   := Count (16) x Node (32), strictly ascending
//! SaRecord:= Direction (8) | SPI (32) | Flags (8) | Family (8) | Peer |
//!            Has leases (8) [Leases] | Has replay (8) [SPI (32) | Top (64) | Words]
//! Leases  := ESN (8) | Generation (64) | Max end (64) | Exhausted (8) |
//!            Blocks (16) x Block
//! Block   := Start (64) | End (64) | Lineage (64) | Offset (64) | Backs (64) |
//!            Kind (8: 0 regular, 1 takeover) [Suspect (32)] | View epoch (64) | Nodes
//! ```

use super::wire::{Reader, Writer};
use super::{
    replay, replay_body, sa_body, sa_fields, DecodeError, QuorumState, SaRecord, StateSnapshot,
    StateTransfer, TransferTarget,
};
use crate::lease::{BlockKind, LeaseBlock, SaLeases};
use crate::limits::MAX_NODE_ID;
use crate::view::{NodeId, View};

pub(super) fn encode_transfer(w: &mut Writer, st: &StateTransfer) {
    w.u8(u8::from(st.founding));
    w.count16(st.targets.len());
    for target in st.targets.iter().take(usize::from(u16::MAX)) {
        w.node(target.node).u64(target.position);
    }
    encode_state(w, &st.state);
}

pub(super) fn decode_transfer(r: &mut Reader<'_>) -> Result<StateTransfer, DecodeError> {
    let founding = r.bool()?;
    let n = r.count16(12)?;
    let mut targets = Vec::with_capacity(n);
    for _ in 0..n {
        targets.push(TransferTarget {
            node: r.node()?,
            position: r.u64()?,
        });
    }
    Ok(StateTransfer {
        founding,
        targets,
        state: decode_state(r)?,
    })
}

fn encode_state(w: &mut Writer, s: &StateSnapshot) {
    w.u64(s.applied)
        .u64(s.epoch)
        .u64(s.generation)
        .u64(s.transfers)
        .u64(s.lease_len);
    w.nodes(&s.agreed).nodes(&s.synced).nodes(&s.ready);
    w.count16(s.joined_at.len());
    for &(node, at) in s.joined_at.iter().take(usize::from(u16::MAX)) {
        w.node(node).u64(at);
    }
    w.count16(s.suspects.len());
    for (node, accusers) in s.suspects.iter().take(usize::from(u16::MAX)) {
        w.node(*node).nodes(accusers);
    }
    encode_quorum(w, &s.quorum);
    w.u32(u32::try_from(s.sas.len()).unwrap_or(u32::MAX));
    for record in s.sas.iter().take(u32::MAX as usize) {
        encode_record(w, record);
    }
}

fn decode_state(r: &mut Reader<'_>) -> Result<StateSnapshot, DecodeError> {
    let (applied, epoch, generation, transfers, lease_len) =
        (r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?);
    let (agreed, synced, ready) = (r.nodes()?, r.nodes()?, r.nodes()?);
    let n = r.count16(12)?;
    let mut joined_at = Vec::with_capacity(n);
    for _ in 0..n {
        joined_at.push((r.node()?, r.u64()?));
    }
    let n = r.count16(6)?;
    let mut suspects = Vec::with_capacity(n);
    for _ in 0..n {
        suspects.push((r.node()?, r.nodes()?));
    }
    let quorum = decode_quorum(r)?;
    let n = r.count32(9)?;
    let mut sas = Vec::with_capacity(n);
    for _ in 0..n {
        sas.push(decode_record(r)?);
    }
    Ok(StateSnapshot {
        applied,
        epoch,
        generation,
        transfers,
        lease_len,
        agreed,
        synced,
        ready,
        joined_at,
        suspects,
        quorum,
        sas,
    })
}

fn encode_quorum(w: &mut Writer, q: &QuorumState) {
    let recent = &q.recent[..q.recent.len().min(usize::from(u16::MAX))];
    w.u64(q.history).count16(recent.len());
    for &h in recent {
        w.u64(h);
    }
    w.nodes(&q.base)
        .nodes(&q.refused)
        .u8(u8::from(q.quorate) | u8::from(q.was_quorate) << 1)
        .u32(q.lowest.map_or(0, |n| n.0));
}

fn decode_quorum(r: &mut Reader<'_>) -> Result<QuorumState, DecodeError> {
    let history = r.u64()?;
    let n = r.count16(8)?;
    let mut recent = Vec::with_capacity(n);
    for _ in 0..n {
        recent.push(r.u64()?);
    }
    let base = r.nodes()?;
    let refused = r.nodes()?;
    let flags = r.u8()?;
    if flags & !0b11 != 0 {
        return Err(DecodeError::InvalidField("quorum flags"));
    }
    let lowest = match r.u32()? {
        0 => None,
        id if id <= MAX_NODE_ID => Some(NodeId(id)),
        id => return Err(DecodeError::InvalidNode(id)),
    };
    Ok(QuorumState {
        history,
        recent,
        base,
        refused,
        quorate: flags & 1 != 0,
        was_quorate: flags & 2 != 0,
        lowest,
    })
}

fn encode_record(w: &mut Writer, record: &SaRecord) {
    // The SaAdd body without its layout byte.
    let mut body = Writer::default();
    sa_body(&mut body, &record.descriptor);
    w.buf.extend_from_slice(&body.buf[1..]);
    w.u8(u8::from(record.leases.is_some()));
    if let Some(leases) = &record.leases {
        encode_leases(w, leases);
    }
    w.u8(u8::from(record.replay.is_some()));
    if let Some(rc) = &record.replay {
        replay_body(w, rc);
    }
}

fn decode_record(r: &mut Reader<'_>) -> Result<SaRecord, DecodeError> {
    let descriptor = sa_fields(r)?;
    let leases = if r.bool()? {
        Some(decode_leases(r)?)
    } else {
        None
    };
    let replay = if r.bool()? { Some(replay(r)?) } else { None };
    Ok(SaRecord {
        descriptor,
        leases,
        replay,
    })
}

fn encode_leases(w: &mut Writer, leases: &SaLeases) {
    w.u8(u8::from(leases.esn()))
        .u64(leases.generation())
        .u64(leases.max_end())
        .u8(u8::from(leases.is_exhausted()));
    let blocks = &leases.blocks()[..leases.blocks().len().min(usize::from(u16::MAX))];
    w.count16(blocks.len());
    for block in blocks {
        encode_block(w, block);
    }
}

fn decode_leases(r: &mut Reader<'_>) -> Result<SaLeases, DecodeError> {
    let esn = r.bool()?;
    let generation = r.u64()?;
    let max_end = r.u64()?;
    let exhausted = r.bool()?;
    let n = r.count16(51)?;
    let mut blocks = Vec::with_capacity(n);
    for _ in 0..n {
        blocks.push(decode_block(r)?);
    }
    SaLeases::from_parts(esn, generation, max_end, exhausted, blocks)
        .ok_or(DecodeError::InvalidField("lease blocks"))
}

fn encode_block(w: &mut Writer, block: &LeaseBlock) {
    w.u64(block.start)
        .u64(block.end)
        .u64(block.lineage)
        .u64(block.offset)
        .u64(block.backs);
    match block.kind {
        BlockKind::Regular => {
            w.u8(0);
        }
        BlockKind::Takeover(node) => {
            w.u8(1).node(node);
        }
    }
    w.u64(block.view.epoch()).nodes(block.view.members());
}

fn decode_block(r: &mut Reader<'_>) -> Result<LeaseBlock, DecodeError> {
    let (start, end, lineage, offset, backs) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?);
    let kind = match r.u8()? {
        0 => BlockKind::Regular,
        1 => BlockKind::Takeover(r.node()?),
        _ => return Err(DecodeError::InvalidField("block kind")),
    };
    let epoch = r.u64()?;
    let members: Vec<NodeId> = r.nodes()?;
    Ok(LeaseBlock {
        start,
        end,
        view: View::new(epoch, members),
        kind,
        lineage,
        offset,
        backs,
    })
}
