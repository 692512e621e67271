//! The `unsafe` half of [`crate::packet`]: `AF_PACKET` socket options and
//! binding, the `TPACKET_V3` receive ring's mapping and the hand-off of its
//! blocks between kernel and user (packet(7), the kernel's
//! `Documentation/networking/packet_mmap.rst`), and `sendmmsg` of whole
//! frames. Reading frames out of a block is safe code over a byte slice, in
//! `packet.rs`.
//!
//! Ring ownership protocol: each block starts with a `tpacket_block_desc`
//! whose `block_status` the kernel sets to `TP_STATUS_USER` (with a write
//! barrier) once the block is full or its timeout expired; from then on the
//! kernel does not touch that block until user space stores
//! `TP_STATUS_KERNEL` back. Blocks are handed out strictly in ring order.

use std::io;
use std::marker::PhantomData;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering};

/// Octets of `struct tpacket_block_desc` in front of a block's first
/// frame (48: version, offset_to_priv and the 40-octet `tpacket_hdr_v1`).
pub(crate) const BLOCK_DESC_LEN: usize = size_of::<libc::tpacket_block_desc>();

/// Byte offsets inside `tpacket_block_desc` (`hdr.bh1` starts at 8).
mod desc {
    use std::mem::offset_of;

    const BH1: usize = offset_of!(libc::tpacket_block_desc, hdr);
    pub(super) const BLOCK_STATUS: usize = BH1 + offset_of!(libc::tpacket_hdr_v1, block_status);
    pub(super) const NUM_PKTS: usize = BH1 + offset_of!(libc::tpacket_hdr_v1, num_pkts);
    pub(super) const OFFSET_TO_FIRST_PKT: usize =
        BH1 + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);
}

/// Sets a socket option from a plain C value.
pub(crate) fn set_option<T: Copy>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: passes a pointer to a live `T` and its exact size; the
    // kernel only reads it. `T` is a C struct or integer (`Copy`).
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            ptr::from_ref(value).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads (and thereby resets, packet(7)) the socket's `PACKET_STATISTICS`.
pub(crate) fn packet_statistics(fd: BorrowedFd<'_>) -> io::Result<libc::tpacket_stats_v3> {
    let mut stats = MaybeUninit::<libc::tpacket_stats_v3>::zeroed();
    let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
    // SAFETY: `stats` is writable for `len` bytes and `len` is a live
    // socklen_t; the kernel writes at most `len` bytes and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            stats.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: zero-initialized above, and all-zero is a valid value of
    // this struct of integers whatever part the kernel wrote.
    Ok(unsafe { stats.assume_init() })
}

/// Binds a packet socket to interface `ifindex` for frames of `protocol`
/// (an `ETH_P_*` value, host order).
pub(crate) fn bind_link(fd: BorrowedFd<'_>, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: all-zero bytes are a valid `sockaddr_ll` (integers only).
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as libc::c_ushort;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = libc::c_int::try_from(ifindex)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface index too large"))?;
    // SAFETY: passes a pointer to a live `sockaddr_ll` and its exact size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            ptr::from_ref(&sll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A `TPACKET_V3` receive ring mapped into this process, and the index of
/// the next block to hand out. Unmapped on drop.
pub(crate) struct RxRing {
    base: NonNull<u8>,
    block_size: usize,
    block_count: usize,
    next: usize,
}

// SAFETY: the mapping is owned by this value alone; its memory is only
// read or written through `&mut self` (`next_ready`), so moving the ring
// to another thread or sharing `&RxRing` (which allows nothing) is sound.
unsafe impl Send for RxRing {}
// SAFETY: as above: `&RxRing` gives no access to the mapping.
unsafe impl Sync for RxRing {}

impl RxRing {
    /// Maps the ring that `PACKET_RX_RING` just set up on `fd`:
    /// `block_count` blocks of `block_size` bytes (the values given to the
    /// kernel, which has checked them).
    pub(crate) fn map(
        fd: BorrowedFd<'_>,
        block_size: usize,
        block_count: usize,
    ) -> io::Result<Self> {
        let len = block_size
            .checked_mul(block_count)
            .filter(|&len| len > 0)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "ring size"))?;
        // SAFETY: asks for a fresh shared mapping of the socket's ring;
        // no existing memory is affected. The result is checked below.
        let addr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(addr.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null ring"))?;
        Ok(Self {
            base,
            block_size,
            block_count,
            next: 0,
        })
    }

    /// Number of blocks.
    pub(crate) fn block_count(&self) -> usize {
        self.block_count
    }

    /// The next block in ring order if the kernel has handed it to user
    /// space; it goes back to the kernel when the returned value drops.
    pub(crate) fn next_ready(&mut self) -> Option<ReadyBlock<'_>> {
        // SAFETY: `next < block_count`, so the block lies inside the
        // mapping, which lives as long as `self`.
        let block = unsafe { self.base.as_ptr().add(self.next * self.block_size) };
        // SAFETY: `block_status` is a 4-aligned u32 inside the block's
        // descriptor (blocks are page-aligned); the kernel and this
        // function access it only as a whole word, as the ring protocol
        // requires, and it stays mapped while `self` is borrowed.
        let status = unsafe { AtomicU32::from_ptr(block.add(desc::BLOCK_STATUS).cast()) };
        // Acquire pairs with the kernel's barrier before it set
        // TP_STATUS_USER: the frames it wrote are visible after this.
        if status.load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
            return None;
        }
        // SAFETY: the block is user-owned now (status above), so the
        // kernel no longer writes its descriptor; both fields are aligned
        // u32s inside the mapped block.
        let (num_packets, first_offset) = unsafe {
            (
                ptr::read(block.add(desc::NUM_PKTS).cast::<u32>()),
                ptr::read(block.add(desc::OFFSET_TO_FIRST_PKT).cast::<u32>()),
            )
        };
        self.next = (self.next + 1) % self.block_count;
        Some(ReadyBlock {
            block,
            block_size: self.block_size,
            num_packets,
            first_offset,
            _ring: PhantomData,
        })
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`; no reference
        // into it survives `self` (ReadyBlock borrows the ring).
        unsafe {
            libc::munmap(
                self.base.as_ptr().cast(),
                self.block_size * self.block_count,
            );
        }
    }
}

/// A block user space owns; handed back to the kernel on drop.
pub(crate) struct ReadyBlock<'a> {
    block: *mut u8,
    block_size: usize,
    num_packets: u32,
    first_offset: u32,
    _ring: PhantomData<&'a mut RxRing>,
}

impl ReadyBlock<'_> {
    /// `num_pkts` of the block descriptor.
    pub(crate) fn num_packets(&self) -> u32 {
        self.num_packets
    }

    /// `offset_to_first_pkt`, from the start of the block.
    pub(crate) fn first_offset(&self) -> u32 {
        self.first_offset
    }

    /// The block after its descriptor: byte `i` of this slice is byte
    /// `BLOCK_DESC_LEN + i` of the block. Frame offsets are read from it
    /// with bounds checks (`packet.rs`).
    pub(crate) fn body(&self) -> &[u8] {
        // SAFETY: the block is user-owned until `self` drops, so the
        // kernel does not write it; the range lies inside the mapping and
        // excludes the descriptor, whose status word `drop` stores to.
        // The slice borrows `self`, so it is gone before that store.
        unsafe {
            std::slice::from_raw_parts(
                self.block.add(BLOCK_DESC_LEN),
                self.block_size - BLOCK_DESC_LEN,
            )
        }
    }
}

impl Drop for ReadyBlock<'_> {
    fn drop(&mut self) {
        // SAFETY: as in `next_ready`: the aligned status word of a mapped
        // block, accessed atomically only.
        let status = unsafe { AtomicU32::from_ptr(self.block.add(desc::BLOCK_STATUS).cast()) };
        // Release: every read of the block happens before the kernel may
        // refill it.
        status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }
}

/// Preallocated message headers and iovecs for `sendmmsg` of frames on a
/// bound packet socket (no addresses, no control messages).
pub(crate) struct FrameScratch {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
}

// SAFETY: the raw pointers inside are written right before each system
// call and never read after it returns; between calls they are inert.
unsafe impl Send for FrameScratch {}
// SAFETY: as above; `&FrameScratch` allows nothing.
unsafe impl Sync for FrameScratch {}

impl FrameScratch {
    /// Room for `max` frames per call (at least one).
    pub(crate) fn new(max: usize) -> Self {
        let max = max.max(1);
        // SAFETY: `mmsghdr` is a C struct of integers and raw pointers,
        // for which all-zero bytes are a valid value.
        let hdr = unsafe { std::mem::zeroed::<libc::mmsghdr>() };
        let iov = libc::iovec {
            iov_base: ptr::null_mut(),
            iov_len: 0,
        };
        Self {
            hdrs: vec![hdr; max],
            iovs: vec![iov; max],
        }
    }

    /// Most frames per call.
    pub(crate) fn capacity(&self) -> usize {
        self.hdrs.len()
    }
}

/// Sends up to [`FrameScratch::capacity`] frames from `frames` with one
/// `sendmmsg` on a bound packet socket (each message one frame, the
/// binding's interface and protocol). Retries on `EINTR`. Returns how many
/// the kernel accepted; an error means the first one failed.
pub(crate) fn send_frames(
    fd: BorrowedFd<'_>,
    s: &mut FrameScratch,
    frames: &[&[u8]],
) -> io::Result<usize> {
    let n = frames.len().min(s.capacity());
    if n == 0 {
        return Ok(0);
    }
    for (i, frame) in frames.iter().take(n).enumerate() {
        // The kernel only reads through this pointer (sendmsg).
        s.iovs[i] = libc::iovec {
            iov_base: frame.as_ptr().cast_mut().cast(),
            iov_len: frame.len(),
        };
        let msg = &mut s.hdrs[i].msg_hdr;
        msg.msg_name = ptr::null_mut();
        msg.msg_namelen = 0;
        msg.msg_iov = ptr::from_mut(&mut s.iovs[i]);
        msg.msg_iovlen = 1;
        msg.msg_control = ptr::null_mut();
        msg.msg_controllen = 0;
        msg.msg_flags = 0;
        s.hdrs[i].msg_len = 0;
    }
    loop {
        // SAFETY: `hdrs[..n]` point at iovecs owned by `s`, which point at
        // frames borrowed for the duration of this call; no addresses or
        // control buffers. The kernel only reads them.
        let rc = unsafe { libc::sendmmsg(fd.as_raw_fd(), s.hdrs.as_mut_ptr(), n as u32, 0) };
        if let Ok(sent) = usize::try_from(rc) {
            return Ok(sent);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout `packet.rs` reads frames with, checked against the C
    /// structs as the `libc` crate declares them (linux/if_packet.h).
    #[test]
    fn ring_layout_matches_the_kernel_headers() {
        assert_eq!(BLOCK_DESC_LEN, 48);
        assert_eq!(
            (
                desc::BLOCK_STATUS,
                desc::NUM_PKTS,
                desc::OFFSET_TO_FIRST_PKT
            ),
            (8, 12, 16)
        );
        assert_eq!(size_of::<libc::tpacket3_hdr>(), 48);
        assert_eq!(libc::TPACKET3_HDRLEN, 48 + size_of::<libc::sockaddr_ll>());
    }

    #[test]
    fn scratch_is_never_empty() {
        assert_eq!(FrameScratch::new(0).capacity(), 1);
        assert_eq!(FrameScratch::new(64).capacity(), 64);
    }
}
