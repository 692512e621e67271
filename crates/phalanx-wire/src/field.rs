//! Big-endian field access shared by the views.
//!
//! Callers pass offsets that `check_len` has proven in bounds; for views made
//! with `new_unchecked` over a short buffer these index out of bounds and
//! panic, exactly as the view documents. Ranges are clamped instead
//! ([`clamp`]), so variable-length parts never panic even then.

use core::ops::Range;

/// A byte range inside a header.
pub(crate) type Field = Range<usize>;

/// Reads a big-endian `u16` at `at`.
#[inline]
pub(crate) fn read_u16(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([buf[at], buf[at + 1]])
}

/// Reads a big-endian `u32` at `at`.
#[inline]
pub(crate) fn read_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

/// Writes a big-endian `u16` at `at`.
#[inline]
pub(crate) fn write_u16(buf: &mut [u8], at: usize, value: u16) {
    buf[at..at + 2].copy_from_slice(&value.to_be_bytes());
}

/// Writes a big-endian `u32` at `at`.
#[inline]
pub(crate) fn write_u32(buf: &mut [u8], at: usize, value: u32) {
    buf[at..at + 4].copy_from_slice(&value.to_be_bytes());
}

/// `start..end` cut down to a buffer of `len` bytes, never inverted.
#[inline]
pub(crate) fn clamp(start: usize, end: usize, len: usize) -> Range<usize> {
    let end = end.min(len);
    start.min(end)..end
}

/// Declares a view struct `$name<T: AsRef<[u8]>>` with the constructors every
/// view shares; the module supplies `check_len`.
macro_rules! view {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Wraps `buffer` without checking it. Fixed-field accessors
            /// panic if the buffer is too short for them; variable parts are
            /// clamped to the buffer. Meant for buffers about to be filled by
            /// an `emit`; use [`Self::new_checked`] for received bytes.
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            /// Wraps `buffer` after [`Self::check_len`]: every accessor is then
            /// in bounds and no method panics.
            pub fn new_checked(buffer: T) -> $crate::Result<Self> {
                let view = Self::new_unchecked(buffer);
                view.check_len()?;
                Ok(view)
            }

            /// Gives the buffer back.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }

        impl<T: AsRef<[u8]>> AsRef<[u8]> for $name<T> {
            fn as_ref(&self) -> &[u8] {
                self.buffer.as_ref()
            }
        }
    };
}
pub(crate) use view;
