//! The crypto engine interface (after FreeBSD's opencrypto and VPP's
//! `vnet/crypto`): protocol code splits every packet into a *prepare* half
//! that builds an [`Op`], an [`Engine`] that runs frames of up to
//! [`MAX_FRAME_OPS`] operations, and a *finish* half that reads each op's
//! [`OpStatus`]. The [`InlineEngine`] completes at once, so synchronous and
//! asynchronous processing share the same finish code.
//!
//! The op carries everything the engine needs — the keyed transform, the
//! buffer and the byte layout — and nothing protocol-specific beyond that,
//! so an engine never parses a packet.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::buf::PacketBuf;
use crate::transform::SaTransform;

/// Most operations in one frame (VPP's `VNET_CRYPTO_FRAME_SIZE`).
pub const MAX_FRAME_OPS: usize = 64;

/// Longest ICV any transform produces (HMAC-SHA-512-256: 32 bytes).
pub const MAX_ICV_LEN: usize = 32;

/// What an operation does to its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// ESP outbound: encrypt `[payload_start, auth_end)` and write the ICV at `icv_start`.
    EspSeal,
    /// ESP inbound: verify the ICV at `icv_start`, then decrypt `[payload_start, auth_end)`.
    EspOpen,
    /// AH outbound: compute the ICV over `[auth_start, auth_end)` (the ICV
    /// field and mutable fields already zeroed) and write it at `icv_start`.
    AhSign,
    /// AH inbound: compute the ICV over `[auth_start, auth_end)` (ICV field
    /// and mutable fields zeroed by prepare) and compare it with
    /// [`Op::received_icv`].
    AhVerify,
}

/// Byte offsets into the op's buffer data (relative to the start of
/// [`PacketBuf::as_slice`]).
///
/// ESP (RFC 4303 §2):
/// ```text
/// auth_start    iv_start     payload_start                auth_end = icv_start
/// | SPI | Seq   | IV          | payload | pad | pl | nh    | ICV |
/// ```
/// AH (RFC 4302 §3.3.3): `[auth_start, auth_end)` is the whole IP packet
/// that the ICV covers, and `icv_start` lies inside it (the AH ICV field).
/// `iv_start` and `payload_start` are unused for AH.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpLayout {
    /// First authenticated byte: the SPI for ESP, the IP header for AH.
    pub auth_start: u32,
    /// ESP: first byte of the explicit IV.
    pub iv_start: u32,
    /// ESP: first byte of the encrypted payload (right after the IV).
    pub payload_start: u32,
    /// End of the authenticated (ESP: and encrypted) bytes.
    pub auth_end: u32,
    /// Offset of the ICV; for ESP equal to `auth_end`.
    pub icv_start: u32,
    /// With extended sequence numbers, the high 32 bits, which are
    /// authenticated but not sent (RFC 4303 §2.2.1, RFC 4302 §2.5.1,
    /// RFC 4106 §5, RFC 4543 §3.3). `None` without ESN.
    pub esn_high: Option<u32>,
}

/// The outcome of one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpStatus {
    /// Not yet processed by an engine.
    Pending,
    /// Done: sealed, or verified and decrypted.
    Completed,
    /// The ICV or AEAD tag did not verify; the buffer content is unspecified.
    AuthenticationFailed,
    /// The layout does not fit the buffer or the transform (e.g. CBC data
    /// not block-aligned); nothing was verified.
    InvalidLayout,
}

/// One cryptographic operation on one packet.
pub struct Op {
    /// What to do.
    pub kind: OpKind,
    /// The SA's keyed algorithms.
    pub transform: Arc<SaTransform>,
    /// Where things are in `buf`.
    pub layout: OpLayout,
    /// The packet; comes back in the completion.
    pub buf: PacketBuf,
    /// AH inbound: the ICV as received (the field itself is zeroed in `buf`).
    pub received_icv: [u8; MAX_ICV_LEN],
    /// Result, set by the engine.
    pub status: OpStatus,
    /// Opaque to the engine: the caller's note of what `finish` needs.
    pub user: u64,
}

impl Op {
    /// A pending operation.
    pub fn new(
        kind: OpKind,
        transform: Arc<SaTransform>,
        layout: OpLayout,
        buf: PacketBuf,
    ) -> Self {
        Op {
            kind,
            transform,
            layout,
            buf,
            received_icv: [0; MAX_ICV_LEN],
            status: OpStatus::Pending,
            user: 0,
        }
    }

    /// Runs the operation on the calling thread and records its status.
    /// Every engine calls exactly this, so all engines produce identical
    /// bytes for identical input.
    pub fn execute(&mut self) {
        self.status =
            self.transform
                .execute(self.kind, &self.layout, &mut self.buf, &self.received_icv);
    }
}

impl core::fmt::Debug for Op {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Op")
            .field("kind", &self.kind)
            .field("layout", &self.layout)
            .field("buf", &self.buf)
            .field("status", &self.status)
            .field("user", &self.user)
            .finish()
    }
}

/// Up to [`MAX_FRAME_OPS`] operations submitted together. Frames are
/// reusable: [`Frame::clear`] keeps the allocation.
#[derive(Debug, Default)]
pub struct Frame {
    ops: Vec<Op>,
}

impl Frame {
    /// An empty frame with room for [`MAX_FRAME_OPS`] operations.
    pub fn new() -> Self {
        Frame {
            ops: Vec::with_capacity(MAX_FRAME_OPS),
        }
    }

    /// Adds an operation, or gives it back when the frame is full.
    pub fn push(&mut self, op: Op) -> Result<(), Op> {
        if self.ops.len() >= MAX_FRAME_OPS {
            return Err(op);
        }
        self.ops.push(op);
        Ok(())
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when the frame holds no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// True when no more operations fit.
    pub fn is_full(&self) -> bool {
        self.ops.len() >= MAX_FRAME_OPS
    }

    /// The operations, in the order they were pushed.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The operations, mutable (engines use this).
    pub fn ops_mut(&mut self) -> &mut [Op] {
        &mut self.ops
    }

    /// Removes and yields every operation in order, keeping the allocation.
    pub fn drain(&mut self) -> std::vec::Drain<'_, Op> {
        self.ops.drain(..)
    }

    /// Removes every operation, keeping the allocation.
    pub fn clear(&mut self) {
        self.ops.clear();
    }

    /// Runs every operation on the calling thread.
    pub fn execute_all(&mut self) {
        for op in &mut self.ops {
            op.execute();
        }
    }
}

/// Something that runs frames of crypto operations.
///
/// Contract: frames come back from [`poll_completed`](Engine::poll_completed)
/// in the order they were submitted, each op in its original position with
/// its status set. That keeps every SA's packets in order even when the
/// engine spreads frames over several threads.
pub trait Engine {
    /// Hands a frame to the engine, or gives it back untouched when the
    /// engine is full (back-pressure: poll, then submit again).
    fn submit(&mut self, frame: Frame) -> Result<(), Frame>;

    /// The next completed frame in submission order, if it is ready.
    fn poll_completed(&mut self) -> Option<Frame>;

    /// Frames submitted and not yet returned by `poll_completed`.
    fn in_flight(&self) -> usize;
}

/// Runs each frame on the calling thread during `submit`.
#[derive(Debug, Default)]
pub struct InlineEngine {
    done: VecDeque<Frame>,
}

impl InlineEngine {
    /// A new inline engine.
    pub fn new() -> Self {
        InlineEngine::default()
    }
}

impl Engine for InlineEngine {
    fn submit(&mut self, mut frame: Frame) -> Result<(), Frame> {
        frame.execute_all();
        self.done.push_back(frame);
        Ok(())
    }

    fn poll_completed(&mut self) -> Option<Frame> {
        self.done.pop_front()
    }

    fn in_flight(&self) -> usize {
        self.done.len()
    }
}
