//! Checked reading and length-patching writing shared by the payload codecs.
//!
//! Every read goes through [`Reader`], which returns [`Error::Truncated`]
//! instead of slicing past the end; every length or count field is written
//! through a `try_from`, which returns [`Error::Malformed`] instead of
//! truncating a value that does not fit.

use alloc::vec::Vec;

use crate::error::{Error, Result};

/// Reads big-endian fields off the front of a slice.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over all of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    /// The next `n` octets.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let (head, tail) = self.buf.split_at_checked(n).ok_or(Error::Truncated)?;
        self.buf = tail;
        Ok(head)
    }

    /// The next `N` octets as an array.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        // `take(N)` returned exactly N octets, so the conversion succeeds.
        self.take(N)?.try_into().map_err(|_| Error::Truncated)
    }

    /// One octet.
    pub(crate) fn u8(&mut self) -> Result<u8> {
        let [b] = self.array::<1>()?;
        Ok(b)
    }

    /// A big-endian `u16`.
    pub(crate) fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// A big-endian `u32`.
    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// A big-endian `u64`.
    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// Everything left.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        core::mem::take(&mut self.buf)
    }

    /// True when nothing is left.
    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Refuses trailing octets: `Ok` only when everything was read.
    pub(crate) fn finish(&self) -> Result<()> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(Error::Malformed)
        }
    }
}

/// Appends a big-endian `u16`.
pub(crate) fn put_u16(out: &mut Vec<u8>, value: u16) {
    out.extend_from_slice(&value.to_be_bytes());
}

/// Appends a big-endian `u32`.
pub(crate) fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_be_bytes());
}

/// Appends a big-endian `u64`.
pub(crate) fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_be_bytes());
}

/// Writes the number of octets from `start` to the end of `out` into the
/// 16-bit length field at `at` (the substructure's own header included).
pub(crate) fn patch_len16(out: &mut [u8], start: usize, at: usize) -> Result<()> {
    let len = u16::try_from(out.len().saturating_sub(start)).map_err(|_| Error::Malformed)?;
    let field = out.get_mut(at..at + 2).ok_or(Error::Malformed)?;
    field.copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// A count or size that must fit an 8-bit field.
pub(crate) fn count_u8(n: usize) -> Result<u8> {
    u8::try_from(n).map_err(|_| Error::Malformed)
}

/// A count or size that must fit a 16-bit field.
pub(crate) fn count_u16(n: usize) -> Result<u16> {
    u16::try_from(n).map_err(|_| Error::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_checked() {
        let mut r = Reader::new(&[1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(r.u8(), Ok(1));
        assert_eq!(r.u16(), Ok(0x0203));
        assert_eq!(r.u64(), Err(Error::Truncated));
        assert_eq!(r.u32(), Ok(0x0405_0607));
        assert!(r.is_empty() && r.finish().is_ok());
        assert_eq!(r.u8(), Err(Error::Truncated));
        let mut r = Reader::new(&[9, 9]);
        assert_eq!(r.finish(), Err(Error::Malformed));
        assert_eq!(r.rest(), &[9, 9]);
    }

    #[test]
    fn length_patching_refuses_overflow() {
        let mut out = alloc::vec![0u8; 4];
        patch_len16(&mut out, 0, 2).unwrap();
        assert_eq!(out, [0, 0, 0, 4]);
        let big = alloc::vec![0u8; 70_000];
        assert_eq!(patch_len16(&mut out.clone(), 0, 9), Err(Error::Malformed));
        assert_eq!(patch_len16(&mut big.clone(), 0, 2), Err(Error::Malformed));
        assert_eq!(count_u8(256), Err(Error::Malformed));
        assert_eq!(count_u16(65_535), Ok(65_535));
    }
}
