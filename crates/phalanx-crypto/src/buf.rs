//! Packet buffers with headroom and tailroom.
//!
//! A [`PacketBuf`] travels by value through the engine (inside an
//! [`Op`](crate::engine::Op)) and comes back in the completion, so the
//! worker-pool engine can process it on another thread without copying.
//! Buffers are meant to be reused from a pool: [`PacketBuf::reset`] keeps the
//! allocation.

/// Bytes of a packet inside a larger allocation, with room to prepend outer
/// headers and append trailers and ICVs without moving the payload.
#[derive(Clone, PartialEq, Eq)]
pub struct PacketBuf {
    storage: Vec<u8>,
    start: usize,
    end: usize,
}

impl PacketBuf {
    /// An empty buffer of `capacity` bytes whose data starts after `headroom`
    /// bytes. `headroom` is clamped to `capacity`.
    pub fn with_capacity(capacity: usize, headroom: usize) -> Self {
        let start = headroom.min(capacity);
        PacketBuf {
            storage: vec![0; capacity],
            start,
            end: start,
        }
    }

    /// A buffer holding a copy of `data` with the given head- and tailroom.
    pub fn from_slice(data: &[u8], headroom: usize, tailroom: usize) -> Self {
        let mut buf = PacketBuf::with_capacity(headroom + data.len() + tailroom, headroom);
        buf.storage[headroom..headroom + data.len()].copy_from_slice(data);
        buf.end = headroom + data.len();
        buf
    }

    /// A buffer over an existing allocation whose data is
    /// `storage[start..end]`, without copying: for moving a packet out of an
    /// I/O batch into the engine. Bounds past the allocation are clamped
    /// (`end` to `storage.len()`, then `start` to `end`), so any input
    /// gives a valid buffer.
    pub fn from_parts(storage: Vec<u8>, start: usize, end: usize) -> Self {
        let end = end.min(storage.len());
        let start = start.min(end);
        PacketBuf {
            storage,
            start,
            end,
        }
    }

    /// The allocation and the data's bounds in it, the inverse of
    /// [`from_parts`](Self::from_parts): for handing the packet back to an
    /// I/O batch without copying.
    pub fn into_parts(self) -> (Vec<u8>, usize, usize) {
        (self.storage, self.start, self.end)
    }

    /// Empties the buffer and sets its headroom again, keeping the allocation.
    pub fn reset(&mut self, headroom: usize) {
        self.start = headroom.min(self.storage.len());
        self.end = self.start;
    }

    /// Number of data bytes.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// True when there are no data bytes.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Bytes free in front of the data.
    pub fn headroom(&self) -> usize {
        self.start
    }

    /// Bytes free behind the data.
    pub fn tailroom(&self) -> usize {
        self.storage.len() - self.end
    }

    /// The data bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.end]
    }

    /// The data bytes, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.end]
    }

    /// Grows the data by `n` bytes at the front and returns them, or `None`
    /// (and changes nothing) when the headroom is too small.
    pub fn prepend(&mut self, n: usize) -> Option<&mut [u8]> {
        if n > self.start {
            return None;
        }
        self.start -= n;
        Some(&mut self.storage[self.start..self.start + n])
    }

    /// Grows the data by `n` bytes at the back and returns them, or `None`
    /// (and changes nothing) when the tailroom is too small.
    pub fn append(&mut self, n: usize) -> Option<&mut [u8]> {
        if n > self.tailroom() {
            return None;
        }
        let old_end = self.end;
        self.end += n;
        Some(&mut self.storage[old_end..self.end])
    }

    /// Appends a copy of `data`; false (and nothing changed) when it does not fit.
    pub fn extend_from_slice(&mut self, data: &[u8]) -> bool {
        match self.append(data.len()) {
            Some(dst) => {
                dst.copy_from_slice(data);
                true
            }
            None => false,
        }
    }

    /// Removes `n` bytes from the front; false (and nothing changed) when
    /// there are fewer.
    pub fn trim_front(&mut self, n: usize) -> bool {
        if n > self.len() {
            return false;
        }
        self.start += n;
        true
    }

    /// Shortens the data to `len` bytes; longer lengths change nothing.
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.end = self.start + len;
        }
    }

    /// The whole allocation and the offset at which the data starts.
    ///
    /// For transforms that must briefly borrow bytes in front of the data,
    /// such as the RFC 4543 AAD with extended sequence numbers.
    pub fn storage_mut(&mut self) -> (&mut [u8], usize) {
        (&mut self.storage[..self.end], self.start)
    }

    /// A copy of the data bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        self.as_slice().to_vec()
    }
}

impl core::fmt::Debug for PacketBuf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PacketBuf")
            .field("len", &self.len())
            .field("headroom", &self.headroom())
            .field("tailroom", &self.tailroom())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepend_append_trim() {
        let mut b = PacketBuf::from_slice(b"abc", 4, 2);
        assert_eq!(b.as_slice(), b"abc");
        b.prepend(2).unwrap().copy_from_slice(b"xy");
        assert!(b.extend_from_slice(b"zz"));
        assert_eq!(b.as_slice(), b"xyabczz");
        assert!(b.prepend(3).is_none());
        assert!(!b.extend_from_slice(b"q"));
        assert!(b.trim_front(2));
        b.truncate(3);
        assert_eq!(b.as_slice(), b"abc");
        assert!(!b.trim_front(4));
    }

    #[test]
    fn parts_round_trip_without_copy_and_clamp() {
        let storage = b"..abc...".to_vec();
        let ptr = storage.as_ptr();
        let mut b = PacketBuf::from_parts(storage, 2, 5);
        assert_eq!(b.as_slice(), b"abc");
        assert_eq!((b.headroom(), b.tailroom()), (2, 3));
        b.prepend(1).unwrap()[0] = b'>';
        let (storage, start, end) = b.into_parts();
        assert_eq!(storage.as_ptr(), ptr, "same allocation");
        assert_eq!((start, end), (1, 5));
        assert_eq!(&storage[start..end], b">abc");
        let clamped = PacketBuf::from_parts(vec![0; 4], 9, 7);
        assert_eq!((clamped.headroom(), clamped.len()), (4, 0));
    }
}
