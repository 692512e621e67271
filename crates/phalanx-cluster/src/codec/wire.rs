//! Big-endian writer and a bounds-checked reader for the replication codec.
//! The reader never panics and never allocates more than the input can
//! hold: every count is checked against the bytes left before anything is
//! reserved for it.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::DecodeError;
use crate::limits::MAX_NODE_ID;
use crate::view::NodeId;

/// Appends fields to a message.
#[derive(Debug, Default)]
pub(super) struct Writer {
    pub(super) buf: Vec<u8>,
}

impl Writer {
    pub(super) fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    pub(super) fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub(super) fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub(super) fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub(super) fn node(&mut self, node: NodeId) -> &mut Self {
        self.u32(node.0)
    }

    pub(super) fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }

    /// A count that the caller bounded (lists are short by construction:
    /// members, blocks); saturates rather than wraps.
    pub(super) fn count16(&mut self, n: usize) -> &mut Self {
        self.u16(u16::try_from(n).unwrap_or(u16::MAX))
    }

    pub(super) fn nodes(&mut self, nodes: &[NodeId]) -> &mut Self {
        let nodes = &nodes[..nodes.len().min(usize::from(u16::MAX))];
        self.count16(nodes.len());
        for &node in nodes {
            self.node(node);
        }
        self
    }

    /// Family byte (4 or 6), then the address.
    pub(super) fn addr(&mut self, addr: IpAddr) -> &mut Self {
        match addr {
            IpAddr::V4(a) => {
                self.u8(4);
                self.buf.extend_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                self.u8(6);
                self.buf.extend_from_slice(&a.octets());
            }
        }
        self
    }
}

/// Reads fields from a message; every read checks the length.
#[derive(Debug)]
pub(super) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes }
    }

    pub(super) fn remaining(&self) -> usize {
        self.bytes.len()
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let (head, rest) = self
            .bytes
            .split_first_chunk::<N>()
            .ok_or(DecodeError::Truncated)?;
        self.bytes = rest;
        Ok(*head)
    }

    pub(super) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take::<1>()?[0])
    }

    /// The next `n` octets, borrowed.
    pub(super) fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.bytes.len() {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    pub(super) fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.take()?))
    }

    pub(super) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.take()?))
    }

    pub(super) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.take()?))
    }

    pub(super) fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::InvalidField("boolean")),
        }
    }

    /// A node id: 1..=65535 (it partitions the 16-bit IV space).
    pub(super) fn node(&mut self) -> Result<NodeId, DecodeError> {
        let id = self.u32()?;
        if id == 0 || id > MAX_NODE_ID {
            return Err(DecodeError::InvalidNode(id));
        }
        Ok(NodeId(id))
    }

    /// A 16-bit count of elements of at least `min_size` bytes each,
    /// refused when the rest of the message cannot hold them.
    pub(super) fn count16(&mut self, min_size: usize) -> Result<usize, DecodeError> {
        let n = usize::from(self.u16()?);
        self.check_count(n, min_size)
    }

    /// A 32-bit count, as [`count16`](Self::count16).
    pub(super) fn count32(&mut self, min_size: usize) -> Result<usize, DecodeError> {
        let n = usize::try_from(self.u32()?).map_err(|_| DecodeError::Truncated)?;
        self.check_count(n, min_size)
    }

    fn check_count(&self, n: usize, min_size: usize) -> Result<usize, DecodeError> {
        match n.checked_mul(min_size) {
            Some(bytes) if bytes <= self.remaining() => Ok(n),
            _ => Err(DecodeError::Truncated),
        }
    }

    /// A list of node ids, strictly ascending (a view).
    pub(super) fn nodes(&mut self) -> Result<Vec<NodeId>, DecodeError> {
        let n = self.count16(4)?;
        let mut nodes = Vec::with_capacity(n);
        for _ in 0..n {
            nodes.push(self.node()?);
        }
        if !nodes.windows(2).all(|w| w[0] < w[1]) {
            return Err(DecodeError::InvalidField("node list order"));
        }
        Ok(nodes)
    }

    pub(super) fn addr(&mut self) -> Result<IpAddr, DecodeError> {
        match self.u8()? {
            4 => Ok(IpAddr::V4(Ipv4Addr::from(self.take::<4>()?))),
            6 => Ok(IpAddr::V6(Ipv6Addr::from(self.take::<16>()?))),
            _ => Err(DecodeError::InvalidField("address family")),
        }
    }

    /// The message must end here.
    pub(super) fn finish(&self) -> Result<(), DecodeError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes)
        }
    }
}
