//! The replication codec: every message the nodes exchange, on the
//! heartbeat link (UDP) and through the agreed log (Corosync CPG).
//!
//! Every message starts with a version byte (1) and a type byte. Decoding
//! refuses anything malformed with a typed [`DecodeError`] and never
//! panics, whatever the bytes; an unknown type is
//! [`DecodeError::UnknownType`], which the node counts and ignores (a
//! newer peer). Integers are big-endian. Node ids are 1..=65535.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Version (1)  |     Type      |        Body ...               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! Hello 0x01, Heartbeat 0x02 (UDP only):
//!   Node (32) | Counter (64) | Flags (8: bit 0 synced, bit 1 ready)
//! Hearing 0x03 (UDP only, with each heartbeat; older nodes ignore it):
//!   Node (32) | Peers (16) x { Node (32) | Flags (8: bit 0 heard ever,
//!   bit 1 silent) | Heard (64) | Silent after (64) | Handbacks (32) }
//!   (what the sender's detector knows of each peer: the counter of the
//!   last heartbeat heard; whether it takes over the peer's inbound share
//!   now; the counter of the last heartbeat heard before it last did;
//!   how many times it handed the share back)
//! LeaseRequest 0x10:      SPI (32) | After end (64)
//! Checkpoint 0x11:        SPI (32) | Lineage (64) | C (64) | Fingerprint (64)
//! ReplayCheckpoint 0x12:  SPI (32) | Top (64) | Words (8, <= 64) | Word (64) ...
//!                         (bit i of word i/64: number Top - i was seen)
//! Suspect 0x13, Rejoin 0x14, Ready 0x16:  Node (32)
//! SaAdd 0x17:   Layout (8, = 1) | Direction (8: 0 out, 1 in) | SPI (32) |
//!               Flags (8: bit 0 ESN, bit 1 peer window) | Family (8: 4|6) |
//!               Peer (32|128) | [with bit 1: Peer window (32, not 0)]
//!               [a layout above 1 may append fields; this version skips them]
//! SaDelete 0x18:          Direction (8) | SPI (32)
//! Yield 0x20:             Node (32) | Marks (16) x { SPI (32) | High (64) }
//!                         (a node whose side lost a partition merge drops
//!                         its state; High: the highest number its side's
//!                         log ever granted for the outbound SA)
//! StateTransfer 0x15:     Flags (8: bit 0 founding) |
//!                         Targets (16) x { Node (32) | Position (64) } |
//!                         State (see `codec/state.rs`)
//! App 0x40:               Channel (8) | Length (32, <= 256 KiB) | Payload
//! ```
//!
//! `App` carries another component's state (IKE SAs: channel 1) through
//! the same agreed order; the cluster never looks inside it.

mod state;
mod wire;

use core::fmt;

use crate::dispatch::Direction;
use crate::lease::SaLeases;
use crate::limits::OBSERVER_WINDOW;
use crate::node::SaDescriptor;
use crate::view::NodeId;
use wire::{Reader, Writer};

/// The codec version this build speaks.
pub const CODEC_VERSION: u8 = 1;

/// Message type byte (an open registry: unknown values are data).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MessageType(pub u8);

impl MessageType {
    /// First heartbeat of a node's life.
    pub const HELLO: MessageType = MessageType(0x01);
    /// Heartbeat.
    pub const HEARTBEAT: MessageType = MessageType(0x02);
    /// What a node's detector knows of its peers (see [`Hearing`]).
    pub const HEARING: MessageType = MessageType(0x03);
    /// Ask for the next lease block of a lineage.
    pub const LEASE_REQUEST: MessageType = MessageType(0x10);
    /// An outbound counter checkpoint.
    pub const CHECKPOINT: MessageType = MessageType(0x11);
    /// An inbound observer checkpoint.
    pub const REPLAY_CHECKPOINT: MessageType = MessageType(0x12);
    /// A node's failure detector suspects a member.
    pub const SUSPECT: MessageType = MessageType(0x13);
    /// A suspected member is heard again.
    pub const REJOIN: MessageType = MessageType(0x14);
    /// The replicated state, for joining nodes.
    pub const STATE_TRANSFER: MessageType = MessageType(0x15);
    /// A joined node has its state and may own traffic.
    pub const READY: MessageType = MessageType(0x16);
    /// An SA was added.
    pub const SA_ADD: MessageType = MessageType(0x17);
    /// An SA was deleted.
    pub const SA_DELETE: MessageType = MessageType(0x18);
    /// An application payload (e.g. IKE SA state) for the agreed log.
    pub const APP: MessageType = MessageType(0x40);
    /// A node whose side lost a partition merge drops its state and
    /// rejoins; it names its side's lease high-water marks.
    pub const YIELD: MessageType = MessageType(0x20);
}

/// Why bytes are not a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// Shorter than its fields, or a count larger than the rest.
    Truncated,
    /// Bytes after the last field.
    TrailingBytes,
    /// A version this build does not speak.
    UnsupportedVersion(u8),
    /// A type this build does not know (a newer peer): ignore it.
    UnknownType(u8),
    /// A node id outside 1..=65535.
    InvalidNode(u32),
    /// A field with a value that cannot be.
    InvalidField(&'static str),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated => f.write_str("message truncated"),
            DecodeError::TrailingBytes => f.write_str("trailing bytes after the message"),
            DecodeError::UnsupportedVersion(v) => write!(f, "unsupported codec version {v}"),
            DecodeError::UnknownType(t) => write!(f, "unknown message type {t:#04x}"),
            DecodeError::InvalidNode(id) => write!(f, "invalid node id {id}"),
            DecodeError::InvalidField(what) => write!(f, "invalid {what}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A heartbeat (UDP, never through the log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    /// The sender.
    pub node: NodeId,
    /// Heartbeats sent before this one.
    pub counter: u64,
    /// The sender holds the replicated state.
    pub synced: bool,
    /// The sender owns traffic (Ready applied).
    pub ready: bool,
}

/// What a node's failure detector knows of one peer, sent to every peer
/// with each heartbeat, so that a node learns whether another may have
/// taken over its inbound share (see `fence`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeardPeer {
    /// The peer.
    pub node: NodeId,
    /// The counter of its last heartbeat heard (`None`: never heard).
    pub heard: Option<u64>,
    /// The sender takes over the peer's inbound share now (suspected and
    /// not heard steadily since).
    pub silent: bool,
    /// The counter of the peer's last heartbeat heard before the sender
    /// last started to take over its share (0: never did).
    pub silent_after: u64,
    /// How many times the sender handed the peer's share back.
    pub handbacks: u32,
}

/// A node's report of what it hears from its peers (UDP, never through
/// the log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hearing {
    /// The sender.
    pub node: NodeId,
    /// One entry per peer.
    pub peers: Vec<HeardPeer>,
}

/// Entries of a [`Hearing`]: more than any cluster has members.
pub const MAX_HEARD_PEERS: usize = 1024;

/// An outbound counter checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The outbound SA.
    pub spi: u32,
    /// The lease lineage the counter runs in.
    pub lineage: u64,
    /// The sender's counter for the packet.
    pub c: u64,
    /// The packet's fingerprint (a hash of its first bytes).
    pub fingerprint: u64,
}

/// An inbound observer checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayCheckpoint {
    /// The inbound SA.
    pub spi: u32,
    /// The highest number observed.
    pub top: u64,
    /// Observed bits, newest first: bit `i` of word `i / 64` is `top - i`.
    pub words: Vec<u64>,
}

/// A node a state transfer is for, and where in its log the state was
/// taken: right after the event `position` events after the membership
/// change that made it a member (0: that change itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransferTarget {
    /// The joining node.
    pub node: NodeId,
    /// Events after its joining membership change.
    pub position: u64,
}

/// One SA in a state transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaRecord {
    /// The SA.
    pub descriptor: SaDescriptor,
    /// Outbound SAs: the leases.
    pub leases: Option<SaLeases>,
    /// Inbound SAs: the latest replay checkpoint in the log.
    pub replay: Option<ReplayCheckpoint>,
}

/// Where a replicated state stands for quorum and partition merges (see
/// the `node` module docs, "Quorum" and "Partitions").
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct QuorumState {
    /// A hash chain over every agreed membership the state applied: equal
    /// on every node holding this lineage of the state, different on the
    /// two sides of a partition (each applied its own membership).
    pub history: u64,
    /// The last values of `history` (newest last), so that a transfer
    /// taken a little earlier in the same lineage is recognised.
    pub recent: Vec<u64>,
    /// The last agreed membership in which the state was quorate.
    pub base: Vec<NodeId>,
    /// Members whose suspicion the log refused (it would have cost the
    /// quorum): their `Rejoin` starts a generation all the same.
    pub refused: Vec<NodeId>,
    /// Whether the state is quorate now.
    pub quorate: bool,
    /// Standing at the last membership change, for merges: quorate then.
    pub was_quorate: bool,
    /// Standing at the last membership change: the lowest member holding
    /// the state then.
    pub lowest: Option<NodeId>,
}

/// The replicated state, as a state transfer carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateSnapshot {
    /// Log events applied since the state was founded.
    pub applied: u64,
    /// Membership changes applied.
    pub epoch: u64,
    /// Base-view changes applied.
    pub generation: u64,
    /// State transfers applied.
    pub transfers: u64,
    /// The lease length.
    pub lease_len: u64,
    /// The agreed membership.
    pub agreed: Vec<NodeId>,
    /// Members holding the state.
    pub synced: Vec<NodeId>,
    /// Members owning traffic.
    pub ready: Vec<NodeId>,
    /// For members without the state: `applied` at their joining change.
    pub joined_at: Vec<(NodeId, u64)>,
    /// Suspected members and who suspects them.
    pub suspects: Vec<(NodeId, Vec<NodeId>)>,
    /// Quorum and lineage.
    pub quorum: QuorumState,
    /// Every registered SA.
    pub sas: Vec<SaRecord>,
}

/// The replicated state for joining nodes (or, founding, a new cluster).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateTransfer {
    /// A new cluster: every member without state adopts it at once.
    pub founding: bool,
    /// The nodes it is for.
    pub targets: Vec<TransferTarget>,
    /// The state.
    pub state: StateSnapshot,
}

/// Every message of the replication protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Message {
    /// First heartbeat of a node's life (UDP).
    Hello(Heartbeat),
    /// Heartbeat (UDP).
    Heartbeat(Heartbeat),
    /// What the sender hears from its peers (UDP).
    Hearing(Hearing),
    /// Grant the successor of the block ending at `after_end`.
    LeaseRequest {
        /// The outbound SA.
        spi: u32,
        /// The last number of the block.
        after_end: u64,
    },
    /// An outbound counter checkpoint.
    Checkpoint(Checkpoint),
    /// An inbound observer checkpoint.
    ReplayCheckpoint(ReplayCheckpoint),
    /// The sender's failure detector suspects `node`.
    Suspect {
        /// The suspect.
        node: NodeId,
    },
    /// The sender hears `node` again.
    Rejoin {
        /// The node.
        node: NodeId,
    },
    /// The replicated state.
    StateTransfer(Box<StateTransfer>),
    /// `node` (the sender) has its state and may own traffic.
    Ready {
        /// The node.
        node: NodeId,
    },
    /// An SA was added.
    SaAdd(SaDescriptor),
    /// An SA was deleted.
    SaDelete {
        /// Its direction.
        direction: Direction,
        /// Its SPI.
        spi: u32,
    },
    /// Another component's payload, in the agreed order ([`APP_CHANNEL_IKE`]: IKE SA state).
    App {
        /// Which component it is for.
        channel: u8,
        /// Opaque to the cluster; at most [`MAX_APP_PAYLOAD`] octets.
        payload: Vec<u8>,
    },
    /// `node` (the sender) lost a partition merge: it drops its state and
    /// joins again; the winners' log first raises each outbound SA's lease
    /// floor above `marks` (SPI, highest number its side granted).
    Yield {
        /// The node.
        node: NodeId,
        /// Per outbound SA: the highest number its side's log granted.
        marks: Vec<(u32, u64)>,
    },
}

/// The App channel of IKE SA state (`phalanx_ike::IkeSaState` octets and
/// removals, as the daemon frames them).
pub const APP_CHANNEL_IKE: u8 = 1;

/// The largest App payload: an IKE SA snapshot with its cached responses
/// and certificates stays far below; Corosync CPG carries up to 1 MiB.
pub const MAX_APP_PAYLOAD: usize = 256 * 1024;

impl Message {
    /// The type byte.
    pub fn message_type(&self) -> MessageType {
        match self {
            Message::Hello(_) => MessageType::HELLO,
            Message::Heartbeat(_) => MessageType::HEARTBEAT,
            Message::Hearing(_) => MessageType::HEARING,
            Message::LeaseRequest { .. } => MessageType::LEASE_REQUEST,
            Message::Checkpoint(_) => MessageType::CHECKPOINT,
            Message::ReplayCheckpoint(_) => MessageType::REPLAY_CHECKPOINT,
            Message::Suspect { .. } => MessageType::SUSPECT,
            Message::Rejoin { .. } => MessageType::REJOIN,
            Message::StateTransfer(_) => MessageType::STATE_TRANSFER,
            Message::Ready { .. } => MessageType::READY,
            Message::SaAdd(_) => MessageType::SA_ADD,
            Message::SaDelete { .. } => MessageType::SA_DELETE,
            Message::App { .. } => MessageType::APP,
            Message::Yield { .. } => MessageType::YIELD,
        }
    }
}

/// The bytes of `message`.
pub fn encode(message: &Message) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(CODEC_VERSION).u8(message.message_type().0);
    match message {
        Message::Hello(hb) | Message::Heartbeat(hb) => {
            let flags = u8::from(hb.synced) | u8::from(hb.ready) << 1;
            w.node(hb.node).u64(hb.counter).u8(flags);
        }
        Message::Hearing(hearing) => {
            let peers = &hearing.peers[..hearing.peers.len().min(MAX_HEARD_PEERS)];
            w.node(hearing.node).count16(peers.len());
            for p in peers {
                let flags = u8::from(p.heard.is_some()) | u8::from(p.silent) << 1;
                w.node(p.node)
                    .u8(flags)
                    .u64(p.heard.unwrap_or(0))
                    .u64(p.silent_after)
                    .u32(p.handbacks);
            }
        }
        Message::LeaseRequest { spi, after_end } => {
            w.u32(*spi).u64(*after_end);
        }
        Message::Checkpoint(cp) => {
            w.u32(cp.spi).u64(cp.lineage).u64(cp.c).u64(cp.fingerprint);
        }
        Message::ReplayCheckpoint(rc) => replay_body(&mut w, rc),
        Message::Suspect { node } | Message::Rejoin { node } | Message::Ready { node } => {
            w.node(*node);
        }
        Message::StateTransfer(st) => state::encode_transfer(&mut w, st),
        Message::SaAdd(sa) => sa_body(&mut w, sa),
        Message::SaDelete { direction, spi } => {
            w.u8(direction_byte(*direction)).u32(*spi);
        }
        Message::App { channel, payload } => {
            // `replicate` refuses larger payloads; a longer one is cut to
            // the limit rather than sent unreadable.
            let payload = &payload[..payload.len().min(MAX_APP_PAYLOAD)];
            w.u8(*channel).u32(payload.len() as u32).bytes(payload);
        }
        Message::Yield { node, marks } => {
            let marks = &marks[..marks.len().min(usize::from(u16::MAX))];
            w.node(*node).count16(marks.len());
            for &(spi, high) in marks {
                w.u32(spi).u64(high);
            }
        }
    }
    w.buf
}

/// Parse a message; never panics.
pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
    let mut r = Reader::new(bytes);
    let version = r.u8()?;
    if version != CODEC_VERSION {
        return Err(DecodeError::UnsupportedVersion(version));
    }
    let kind = MessageType(r.u8()?);
    let message = match kind {
        MessageType::HELLO => Message::Hello(heartbeat(&mut r)?),
        MessageType::HEARTBEAT => Message::Heartbeat(heartbeat(&mut r)?),
        MessageType::HEARING => Message::Hearing(hearing(&mut r)?),
        MessageType::LEASE_REQUEST => Message::LeaseRequest {
            spi: r.u32()?,
            after_end: r.u64()?,
        },
        MessageType::CHECKPOINT => Message::Checkpoint(Checkpoint {
            spi: r.u32()?,
            lineage: r.u64()?,
            c: r.u64()?,
            fingerprint: r.u64()?,
        }),
        MessageType::REPLAY_CHECKPOINT => Message::ReplayCheckpoint(replay(&mut r)?),
        MessageType::SUSPECT => Message::Suspect { node: r.node()? },
        MessageType::REJOIN => Message::Rejoin { node: r.node()? },
        MessageType::READY => Message::Ready { node: r.node()? },
        MessageType::STATE_TRANSFER => {
            Message::StateTransfer(Box::new(state::decode_transfer(&mut r)?))
        }
        MessageType::SA_ADD => {
            // A newer layout may append fields: they are skipped.
            return sa_add(&mut r).map(Message::SaAdd);
        }
        MessageType::SA_DELETE => Message::SaDelete {
            direction: direction(&mut r)?,
            spi: r.u32()?,
        },
        MessageType::APP => {
            let channel = r.u8()?;
            let len = usize::try_from(r.u32()?).unwrap_or(usize::MAX);
            if len > MAX_APP_PAYLOAD {
                return Err(DecodeError::InvalidField("App payload length"));
            }
            Message::App {
                channel,
                payload: r.bytes(len)?.to_vec(),
            }
        }
        MessageType::YIELD => yield_body(&mut r)?,
        MessageType(other) => return Err(DecodeError::UnknownType(other)),
    };
    r.finish()?;
    Ok(message)
}

fn yield_body(r: &mut Reader<'_>) -> Result<Message, DecodeError> {
    let node = r.node()?;
    let n = r.count16(12)?;
    let mut marks = Vec::with_capacity(n);
    for _ in 0..n {
        marks.push((r.u32()?, r.u64()?));
    }
    Ok(Message::Yield { node, marks })
}

fn hearing(r: &mut Reader<'_>) -> Result<Hearing, DecodeError> {
    let node = r.node()?;
    let n = r.count16(25)?;
    if n > MAX_HEARD_PEERS {
        return Err(DecodeError::InvalidField("hearing peers"));
    }
    let mut peers = Vec::with_capacity(n);
    for _ in 0..n {
        let node = r.node()?;
        let flags = r.u8()?;
        if flags & !0b11 != 0 {
            return Err(DecodeError::InvalidField("hearing flags"));
        }
        let heard = r.u64()?;
        if flags & 1 == 0 && heard != 0 {
            return Err(DecodeError::InvalidField("hearing heard"));
        }
        peers.push(HeardPeer {
            node,
            heard: (flags & 1 != 0).then_some(heard),
            silent: flags & 2 != 0,
            silent_after: r.u64()?,
            handbacks: r.u32()?,
        });
    }
    Ok(Hearing { node, peers })
}

fn heartbeat(r: &mut Reader<'_>) -> Result<Heartbeat, DecodeError> {
    let node = r.node()?;
    let counter = r.u64()?;
    let flags = r.u8()?;
    if flags & !0b11 != 0 {
        return Err(DecodeError::InvalidField("heartbeat flags"));
    }
    Ok(Heartbeat {
        node,
        counter,
        synced: flags & 1 != 0,
        ready: flags & 2 != 0,
    })
}

fn replay_body(w: &mut Writer, rc: &ReplayCheckpoint) {
    let words = &rc.words[..rc.words.len().min(MAX_REPLAY_WORDS)];
    w.u32(rc.spi).u64(rc.top).u8(words.len() as u8);
    for &word in words {
        w.u64(word);
    }
}

/// Bitmap words of a replay checkpoint: the observer's window.
const MAX_REPLAY_WORDS: usize = (OBSERVER_WINDOW / 64) as usize;

fn replay(r: &mut Reader<'_>) -> Result<ReplayCheckpoint, DecodeError> {
    let spi = r.u32()?;
    let top = r.u64()?;
    let n = usize::from(r.u8()?);
    if n > MAX_REPLAY_WORDS {
        return Err(DecodeError::InvalidField("replay bitmap length"));
    }
    let mut words = Vec::with_capacity(n.min(r.remaining() / 8));
    for _ in 0..n {
        words.push(r.u64()?);
    }
    Ok(ReplayCheckpoint { spi, top, words })
}

/// The SaAdd body layout this build writes.
const SA_LAYOUT: u8 = 1;

/// SA flags: extended sequence numbers.
const SA_FLAG_ESN: u8 = 1;
/// SA flags: the peer's replay window follows the address.
const SA_FLAG_PEER_WINDOW: u8 = 2;

fn sa_body(w: &mut Writer, sa: &SaDescriptor) {
    let mut flags = if sa.esn { SA_FLAG_ESN } else { 0 };
    if sa.peer_window != 0 {
        flags |= SA_FLAG_PEER_WINDOW;
    }
    w.u8(SA_LAYOUT)
        .u8(direction_byte(sa.direction))
        .u32(sa.spi)
        .u8(flags)
        .addr(sa.peer);
    if sa.peer_window != 0 {
        w.u32(sa.peer_window);
    }
}

fn sa_add(r: &mut Reader<'_>) -> Result<SaDescriptor, DecodeError> {
    let layout = r.u8()?;
    if layout == 0 {
        return Err(DecodeError::InvalidField("SA layout"));
    }
    let sa = sa_fields(r)?;
    if layout == SA_LAYOUT {
        r.finish()?;
    }
    Ok(sa)
}

fn sa_fields(r: &mut Reader<'_>) -> Result<SaDescriptor, DecodeError> {
    let direction = direction(r)?;
    let spi = r.u32()?;
    let flags = r.u8()?;
    if flags & !(SA_FLAG_ESN | SA_FLAG_PEER_WINDOW) != 0 {
        return Err(DecodeError::InvalidField("SA flags"));
    }
    let peer = r.addr()?;
    let peer_window = if flags & SA_FLAG_PEER_WINDOW != 0 {
        match r.u32()? {
            0 => return Err(DecodeError::InvalidField("peer window")),
            w => w,
        }
    } else {
        0
    };
    Ok(SaDescriptor {
        direction,
        spi,
        esn: flags & SA_FLAG_ESN != 0,
        peer,
        peer_window,
    })
}

fn direction_byte(direction: Direction) -> u8 {
    match direction {
        Direction::Outbound => 0,
        Direction::Inbound => 1,
    }
}

fn direction(r: &mut Reader<'_>) -> Result<Direction, DecodeError> {
    match r.u8()? {
        0 => Ok(Direction::Outbound),
        1 => Ok(Direction::Inbound),
        _ => Err(DecodeError::InvalidField("direction")),
    }
}

#[cfg(test)]
mod tests;
