//! The `unsafe` half of [`crate::bpf`]: the `bpf(2)` system call with the
//! parts of `union bpf_attr` each command reads (linux/bpf.h), the mapping
//! of an mmapable array map, and `SO_ATTACH_BPF`.
//!
//! Each command's attribute block is its own `#[repr(C)]` struct laid out
//! as the kernel's union member, passed with its own size: the kernel
//! reads `min(size, sizeof(union bpf_attr))` octets and treats the rest as
//! zero (kernel/bpf/syscall.c, `bpf_check_uarg_tail_zero`).

use std::ffi::CStr;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// `enum bpf_cmd` values used here.
mod cmd {
    pub(super) const MAP_CREATE: libc::c_int = 0;
    pub(super) const MAP_LOOKUP_ELEM: libc::c_int = 1;
    pub(super) const MAP_UPDATE_ELEM: libc::c_int = 2;
    pub(super) const MAP_DELETE_ELEM: libc::c_int = 3;
    pub(super) const PROG_LOAD: libc::c_int = 5;
    pub(super) const PROG_TEST_RUN: libc::c_int = 10;
    pub(super) const OBJ_GET_INFO_BY_FD: libc::c_int = 15;
    pub(super) const LINK_CREATE: libc::c_int = 28;
    pub(super) const ENABLE_STATS: libc::c_int = 32;
}

/// `BPF_XDP`, the attach type of a program on a device's receive path.
const ATTACH_XDP: u32 = 37;

/// `BPF_MAP_CREATE`'s attributes (the first anonymous struct of the union).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct MapCreateAttr {
    pub(crate) map_type: u32,
    pub(crate) key_size: u32,
    pub(crate) value_size: u32,
    pub(crate) max_entries: u32,
    pub(crate) map_flags: u32,
    pub(crate) inner_map_fd: u32,
    pub(crate) numa_node: u32,
    pub(crate) map_name: [u8; 16],
    pub(crate) map_ifindex: u32,
}

/// `BPF_MAP_*_ELEM`'s attributes: a map, a key, a value, flags.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `BPF_PROG_LOAD`'s attributes, up to `prog_name`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
}

/// `BPF_PROG_TEST_RUN`'s attributes (`attr.test`), up to `ctx_out`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
}

/// `BPF_OBJ_GET_INFO_BY_FD`'s attributes (`attr.info`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// `BPF_LINK_CREATE`'s attributes (`attr.link_create`), up to `flags`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// `BPF_ENABLE_STATS`'s attributes (`attr.enable_stats`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct EnableStatsAttr {
    stats_type: u32,
}

/// `BPF_STATS_RUN_TIME`.
const STATS_RUN_TIME: u32 = 0;
/// `struct bpf_prog_info` up to `run_cnt`, and the two fields' offsets.
const PROG_INFO_LEN: usize = 208;
const PROG_INFO_RUN_TIME_NS: usize = 192;
const PROG_INFO_RUN_CNT: usize = 200;

/// `bpf(cmd, attr, sizeof *attr)`; the result (an fd or 0) or `errno`.
fn bpf<T: Copy>(command: libc::c_int, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, writable `#[repr(C)]` value of the layout
    // the kernel expects for `command` (see the structs above), passed
    // with its exact size; pointers inside it were set by the callers to
    // buffers that outlive this call with the lengths given alongside.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            command,
            ptr::from_mut(attr),
            size_of::<T>() as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Wraps a descriptor the kernel just returned.
fn owned_fd(rc: libc::c_long) -> io::Result<OwnedFd> {
    let raw = libc::c_int::try_from(rc).map_err(|_| io::Error::other("bpf: fd out of range"))?;
    // SAFETY: `raw` is a fresh descriptor returned by the kernel to this
    // call alone; nothing else owns or closes it.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// `BPF_MAP_CREATE`.
pub(crate) fn map_create(mut attr: MapCreateAttr) -> io::Result<OwnedFd> {
    owned_fd(bpf(cmd::MAP_CREATE, &mut attr)?)
}

/// The attributes naming element `key` of `map` and a value buffer of
/// the map's value size (checked by the caller).
fn elem_attr(map: BorrowedFd<'_>, key: &[u8], value: *const u8, flags: u64) -> ElemAttr {
    ElemAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: key.as_ptr() as u64,
        value: value as u64,
        flags,
    }
}

/// `BPF_MAP_UPDATE_ELEM`; `key` and `value` have the map's sizes (checked
/// by the caller: the kernel reads exactly those many octets).
pub(crate) fn map_update(
    map: BorrowedFd<'_>,
    key: &[u8],
    value: &[u8],
    flags: u64,
) -> io::Result<()> {
    let mut attr = elem_attr(map, key, value.as_ptr(), flags);
    bpf(cmd::MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// `BPF_MAP_LOOKUP_ELEM` into `value` (the map's value size, checked by the
/// caller: the kernel writes exactly that many octets). False when absent.
pub(crate) fn map_lookup(map: BorrowedFd<'_>, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
    let mut attr = elem_attr(map, key, value.as_mut_ptr(), 0);
    match bpf(cmd::MAP_LOOKUP_ELEM, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `BPF_MAP_DELETE_ELEM`; false when there was no such key.
pub(crate) fn map_delete(map: BorrowedFd<'_>, key: &[u8]) -> io::Result<bool> {
    let mut attr = elem_attr(map, key, ptr::null(), 0);
    match bpf(cmd::MAP_DELETE_ELEM, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// One `struct bpf_insn` as the kernel reads it: opcode, destination
/// register in the low nibble and source register in the high nibble of
/// the second octet (little-endian bitfields), offset, immediate.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RawInsn {
    pub(crate) code: u8,
    pub(crate) regs: u8,
    pub(crate) off: i16,
    pub(crate) imm: i32,
}

/// `BPF_PROG_LOAD` of `insns`; with `log` non-empty the verifier writes its
/// log there (`log_level` 1).
pub(crate) fn prog_load(
    prog_type: u32,
    insns: &[RawInsn],
    license: &CStr,
    name: [u8; 16],
    log: &mut [u8],
) -> io::Result<OwnedFd> {
    let mut attr = ProgLoadAttr {
        prog_type,
        insn_cnt: u32::try_from(insns.len()).map_err(|_| io::Error::other("program too long"))?,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name,
        ..ProgLoadAttr::default()
    };
    if !log.is_empty() {
        attr.log_level = 1;
        attr.log_size = u32::try_from(log.len()).unwrap_or(u32::MAX);
        attr.log_buf = log.as_mut_ptr() as u64;
    }
    owned_fd(bpf(cmd::PROG_LOAD, &mut attr)?)
}

/// `BPF_PROG_TEST_RUN` of `prog` over `data`, `repeat` times: the return
/// value of the last run and the kernel's mean nanoseconds per run.
pub(crate) fn prog_test_run(
    prog: BorrowedFd<'_>,
    data: &[u8],
    repeat: u32,
) -> io::Result<(u32, u32)> {
    let mut attr = TestRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: u32::try_from(data.len()).map_err(|_| io::Error::other("data too long"))?,
        data_in: data.as_ptr() as u64,
        repeat,
        ..TestRunAttr::default()
    };
    bpf(cmd::PROG_TEST_RUN, &mut attr)?;
    Ok((attr.retval, attr.duration))
}

/// `BPF_ENABLE_STATS(BPF_STATS_RUN_TIME)`: the kernel times every run
/// of every program while the returned descriptor is open.
pub(crate) fn enable_run_time_stats() -> io::Result<OwnedFd> {
    let mut attr = EnableStatsAttr {
        stats_type: STATS_RUN_TIME,
    };
    owned_fd(bpf(cmd::ENABLE_STATS, &mut attr)?)
}

/// `BPF_OBJ_GET_INFO_BY_FD` of a program: its `run_time_ns` and
/// `run_cnt` (counted only while run-time stats are enabled).
pub(crate) fn prog_run_stats(prog: BorrowedFd<'_>) -> io::Result<(u64, u64)> {
    let mut info = [0u8; PROG_INFO_LEN];
    let mut attr = InfoAttr {
        bpf_fd: prog.as_raw_fd() as u32,
        info_len: PROG_INFO_LEN as u32,
        info: info.as_mut_ptr() as u64,
    };
    bpf(cmd::OBJ_GET_INFO_BY_FD, &mut attr)?;
    let word = |at: usize| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&info[at..at + 8]);
        u64::from_ne_bytes(bytes)
    };
    Ok((word(PROG_INFO_RUN_TIME_NS), word(PROG_INFO_RUN_CNT)))
}

/// `BPF_LINK_CREATE` of `prog` as the XDP program of interface
/// `ifindex` with `flags` (`XDP_FLAGS_DRV_MODE`, `XDP_FLAGS_SKB_MODE`,
/// linux/if_link.h): attached until the returned link's last descriptor
/// closes (Linux 5.9).
pub(crate) fn link_create_xdp(
    prog: BorrowedFd<'_>,
    ifindex: u32,
    flags: u32,
) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: ATTACH_XDP,
        flags,
    };
    owned_fd(bpf(cmd::LINK_CREATE, &mut attr)?)
}

/// `SO_ATTACH_BPF`: `prog` filters what `socket` receives.
pub(crate) fn attach_socket_filter(socket: BorrowedFd<'_>, prog: BorrowedFd<'_>) -> io::Result<()> {
    let fd: libc::c_int = prog.as_raw_fd();
    super::packet::set_option(socket, libc::SOL_SOCKET, libc::SO_ATTACH_BPF, &fd)
}

/// The shared mapping of an mmapable array map (`BPF_F_MMAPABLE`): its
/// values back to back, `len` octets. Unmapped on drop.
pub(crate) struct MapMemory {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by this value; it is only accessed through
// aligned atomic loads and stores (below), which any thread may do.
unsafe impl Send for MapMemory {}
// SAFETY: as above.
unsafe impl Sync for MapMemory {}

impl MapMemory {
    /// Maps `len` octets (a multiple of the page size) of the array map
    /// `map` read-write and shared with the kernel.
    pub(crate) fn map(map: BorrowedFd<'_>, len: usize) -> io::Result<Self> {
        // SAFETY: asks for a fresh shared mapping of the map's values; no
        // existing memory is affected. The result is checked below.
        let addr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(addr.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null map"))?;
        Ok(Self { base, len })
    }

    /// The 32-bit word at octet `at`, if it lies inside and is aligned.
    fn word32(&self, at: usize) -> Option<&AtomicU32> {
        if at % 4 != 0 || at.checked_add(4)? > self.len {
            return None;
        }
        // SAFETY: `at + 4 <= len` and `at` is 4-aligned (the mapping is
        // page-aligned), so the word lies in the live mapping, which the
        // returned reference borrows. The BPF program stores to it with
        // plain aligned 32-bit stores, which are single-copy atomic.
        Some(unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(at).cast()) })
    }

    /// The 64-bit word at octet `at`, if it lies inside and is aligned.
    fn word64(&self, at: usize) -> Option<&AtomicU64> {
        if at % 8 != 0 || at.checked_add(8)? > self.len {
            return None;
        }
        // SAFETY: as in `word32`, 8-aligned; the program updates it with
        // atomic adds only.
        Some(unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(at).cast()) })
    }

    /// Loads the u32 at `at` (`None`: outside or unaligned).
    pub(crate) fn load32(&self, at: usize) -> Option<u32> {
        self.word32(at).map(|w| w.load(Ordering::Acquire))
    }

    /// Stores the u32 at `at`; false when outside or unaligned.
    pub(crate) fn store32(&self, at: usize, value: u32) -> bool {
        self.word32(at)
            .map(|w| w.store(value, Ordering::Release))
            .is_some()
    }

    /// Loads the u64 at `at` (`None`: outside or unaligned).
    pub(crate) fn load64(&self, at: usize) -> Option<u64> {
        self.word64(at).map(|w| w.load(Ordering::Acquire))
    }

    /// Stores the u64 at `at`; false when outside or unaligned.
    pub(crate) fn store64(&self, at: usize, value: u64) -> bool {
        self.word64(at)
            .map(|w| w.store(value, Ordering::Release))
            .is_some()
    }
}

impl Drop for MapMemory {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`; the references
        // handed out borrow `self`, so none survives it.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attribute layouts against the offsets of linux/bpf.h.
    #[test]
    fn attribute_layouts_match_the_uapi() {
        use std::mem::offset_of;
        assert_eq!(offset_of!(MapCreateAttr, map_name), 28);
        assert_eq!(offset_of!(MapCreateAttr, map_ifindex), 44);
        assert_eq!(offset_of!(ElemAttr, key), 8);
        assert_eq!(offset_of!(ElemAttr, flags), 24);
        assert_eq!(offset_of!(ProgLoadAttr, log_buf), 32);
        assert_eq!(offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(offset_of!(TestRunAttr, repeat), 32);
        assert_eq!(offset_of!(TestRunAttr, duration), 36);
        assert_eq!(offset_of!(TestRunAttr, ctx_out), 56);
        assert_eq!(size_of::<RawInsn>(), 8);
        assert_eq!(offset_of!(InfoAttr, info), 8);
    }
}
