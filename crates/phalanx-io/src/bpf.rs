//! eBPF maps and programs through `bpf(2)`, without a loader library: what
//! a cluster node needs to refuse, in the kernel, the frames another node
//! processes before they are copied to its packet ring.
//!
//! - [`Map`]: a hash or array map (`BPF_MAP_CREATE`), its elements updated,
//!   looked up and deleted by system call;
//! - [`MappedArray`]: an array map created with `BPF_F_MMAPABLE` and mapped
//!   into the process, read and written with plain (atomic) memory accesses
//!   and no system call;
//! - [`Program`]: instructions built with [`asm::Assembler`], loaded with
//!   the verifier's log returned on refusal ([`LoadError`]), attached to a
//!   [`PacketSocket`] (`SO_ATTACH_BPF`) or run over test data
//!   (`BPF_PROG_TEST_RUN`, [`Program::test_run`]).
//!
//! Creating maps and loading programs needs `CAP_BPF` (or
//! `CAP_SYS_ADMIN`), or root: unprivileged BPF is usually disabled
//! (`kernel.unprivileged_bpf_disabled`). Using a mapping, attaching a
//! loaded program to one's own socket and closing them need nothing.
//! Every `unsafe` block is in `sys::bpf`.

pub mod asm;
#[cfg(test)]
mod tests;

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::packet::PacketSocket;
use crate::sys::bpf::{self as sys, MapCreateAttr, MapMemory, RawInsn};
use asm::Insn;

/// `BPF_MAP_TYPE_HASH`.
const MAP_TYPE_HASH: u32 = 1;
/// `BPF_MAP_TYPE_ARRAY`.
const MAP_TYPE_ARRAY: u32 = 2;
/// `BPF_MAP_TYPE_PERCPU_ARRAY`.
const MAP_TYPE_PERCPU_ARRAY: u32 = 6;
/// The kernel's list of the CPUs that can ever be online: per-CPU map
/// values come as one value per possible CPU.
const POSSIBLE_CPUS: &str = "/sys/devices/system/cpu/possible";
/// `BPF_F_MMAPABLE` (linux/bpf.h, Linux 5.5): the array can be mmap()ed.
const F_MMAPABLE: u32 = 1 << 10;
/// `BPF_ANY`: create or replace.
const UPDATE_ANY: u64 = 0;
/// Page size an mmapable array's mapping is rounded to.
const PAGE_SIZE: usize = 4096;
/// Verifier log room asked for when a load is refused.
const LOG_SIZE: usize = 1 << 20;

/// The kind of a program (`enum bpf_prog_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgramType(pub u32);

impl ProgramType {
    /// `BPF_PROG_TYPE_SOCKET_FILTER`: runs on every packet a socket would
    /// receive; returns how many octets to keep (0: drop it).
    pub const SOCKET_FILTER: ProgramType = ProgramType(1);
    /// `BPF_PROG_TYPE_XDP`: runs on every frame a device receives, before
    /// the kernel allocates anything for it; returns an `XDP_*` action.
    pub const XDP: ProgramType = ProgramType(6);
}

/// `XDP_DROP`, `XDP_PASS` (linux/bpf.h, `enum xdp_action`).
pub mod xdp_action {
    /// The frame is dropped by the driver.
    pub const DROP: u32 = 1;
    /// The frame goes on to the kernel's receive path.
    pub const PASS: u32 = 2;
}

/// Where an XDP program runs (linux/if_link.h, `XDP_FLAGS_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver, before an skb exists (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// In the generic receive path, on the skb, before the packet taps
    /// (`XDP_FLAGS_SKB_MODE`): for drivers without XDP support.
    Generic,
}

impl XdpMode {
    fn flags(self) -> u32 {
        match self {
            XdpMode::Native => 1 << 2,
            XdpMode::Generic => 1 << 1,
        }
    }

    /// `native` or `generic`.
    pub fn name(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }
}

/// An XDP program attached to an interface through a BPF link: detached
/// when this is dropped (or the process ends), so a daemon that dies
/// leaves no program behind.
#[derive(Debug)]
pub struct XdpLink {
    _fd: OwnedFd,
    mode: XdpMode,
    ifindex: u32,
}

impl XdpLink {
    /// Where the program runs.
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// The interface it is attached to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }
}

/// A BPF map with fixed-size keys and values. Freed when the last
/// descriptor (this one, or a program using it) closes.
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    key_size: usize,
    value_size: usize,
    max_entries: u32,
}

/// An object name for the kernel (`bpf_attr.map_name` / `prog_name`): at
/// most 15 octets of `[A-Za-z0-9_.]`, zero-terminated.
fn object_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    let usable = name
        .bytes()
        .filter(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.');
    for (slot, byte) in out.iter_mut().take(15).zip(usable) {
        *slot = byte;
    }
    out
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_owned())
}

impl Map {
    fn create(
        map_type: u32,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        flags: u32,
        name: &str,
    ) -> io::Result<Map> {
        let fd = sys::map_create(MapCreateAttr {
            map_type,
            key_size,
            value_size,
            max_entries,
            map_flags: flags,
            map_name: object_name(name),
            ..MapCreateAttr::default()
        })?;
        Ok(Map {
            fd,
            key_size: key_size as usize,
            value_size: value_size as usize,
            max_entries,
        })
    }

    /// A hash map (`BPF_MAP_TYPE_HASH`) of up to `max_entries` elements.
    pub fn hash(key_size: u32, value_size: u32, max_entries: u32, name: &str) -> io::Result<Map> {
        Map::create(MAP_TYPE_HASH, key_size, value_size, max_entries, 0, name)
    }

    /// An array map (`BPF_MAP_TYPE_ARRAY`, keys are u32 indices, every
    /// element exists, zeroed at creation).
    pub fn array(value_size: u32, max_entries: u32, name: &str) -> io::Result<Map> {
        Map::create(MAP_TYPE_ARRAY, 4, value_size, max_entries, 0, name)
    }

    /// A per-CPU array map (`BPF_MAP_TYPE_PERCPU_ARRAY`): each CPU has
    /// its own copy of every element, so a program updates it without
    /// atomics or shared cache lines. Read with
    /// [`sum_per_cpu_u64s`](Self::sum_per_cpu_u64s).
    pub fn per_cpu_array(value_size: u32, max_entries: u32, name: &str) -> io::Result<Map> {
        Map::create(MAP_TYPE_PERCPU_ARRAY, 4, value_size, max_entries, 0, name)
    }

    /// Element `index` of a per-CPU array whose value is u64 words: each
    /// word summed over the CPUs (`out` holds `value_size / 8` words).
    pub fn sum_per_cpu_u64s(&self, index: u32, out: &mut [u64]) -> io::Result<()> {
        if out.len() * 8 != self.value_size {
            return Err(invalid("bpf map: wrong value size"));
        }
        static CPUS: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
        let cpus = CPUS
            .get_or_init(|| {
                let list = std::fs::read_to_string(POSSIBLE_CPUS).ok()?;
                possible_cpus(&list)
            })
            .ok_or_else(|| invalid("bpf map: unreadable list of possible CPUs"))?;
        // The kernel copies each CPU's value rounded up to 8 octets.
        let stride = self.value_size.div_ceil(8) * 8;
        let mut all = vec![0u8; stride * cpus];
        if !sys::map_lookup(self.fd.as_fd(), &index.to_ne_bytes(), &mut all)? {
            return Err(invalid("bpf map: no such element"));
        }
        out.fill(0);
        for cpu in all.chunks_exact(stride) {
            for (sum, word) in out.iter_mut().zip(cpu.chunks_exact(8)) {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(word);
                *sum = sum.wrapping_add(u64::from_ne_bytes(bytes));
            }
        }
        Ok(())
    }

    /// Key size in octets.
    pub fn key_size(&self) -> usize {
        self.key_size
    }

    /// Value size in octets.
    pub fn value_size(&self) -> usize {
        self.value_size
    }

    /// Most elements.
    pub fn max_entries(&self) -> u32 {
        self.max_entries
    }

    fn check(&self, key: &[u8], value: Option<usize>) -> io::Result<()> {
        if key.len() != self.key_size {
            return Err(invalid("bpf map: wrong key size"));
        }
        if value.is_some_and(|len| len != self.value_size) {
            return Err(invalid("bpf map: wrong value size"));
        }
        Ok(())
    }

    /// Creates or replaces element `key` (`BPF_MAP_UPDATE_ELEM`, `BPF_ANY`).
    pub fn update(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.check(key, Some(value.len()))?;
        sys::map_update(self.fd.as_fd(), key, value, UPDATE_ANY)
    }

    /// Copies element `key` into `value`; false when there is none.
    pub fn lookup(&self, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
        self.check(key, Some(value.len()))?;
        sys::map_lookup(self.fd.as_fd(), key, value)
    }

    /// Deletes element `key`; false when there was none. (Array elements
    /// cannot be deleted: `EINVAL`.)
    pub fn delete(&self, key: &[u8]) -> io::Result<bool> {
        self.check(key, None)?;
        sys::map_delete(self.fd.as_fd(), key)
    }
}

/// How many CPUs a list like `0-3,8-11` or `0` names: the kernel's
/// `num_possible_cpus()` as per-CPU maps use it (highest + 1).
fn possible_cpus(list: &str) -> Option<usize> {
    let mut highest = None;
    for range in list.trim().split(',') {
        let last = range.rsplit('-').next()?;
        let last: usize = last.parse().ok()?;
        highest = highest.max(Some(last));
    }
    highest.map(|h| h + 1)
}

impl AsFd for Map {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// An array map created with `BPF_F_MMAPABLE` and mapped read-write into
/// the process: element `i` is the `value_size` octets at `i *
/// stride()`. Accesses are aligned atomic loads and stores of 32 or 64
/// bits, so a program running at the same time sees whole words.
pub struct MappedArray {
    // Field order is drop order: unmap before the map's fd closes.
    memory: MapMemory,
    map: Map,
    stride: usize,
}

impl fmt::Debug for MappedArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MappedArray")
            .field("map", &self.map)
            .field("stride", &self.stride)
            .finish()
    }
}

impl MappedArray {
    /// Creates the array (every element zero) and maps it.
    pub fn create(value_size: u32, max_entries: u32, name: &str) -> io::Result<MappedArray> {
        let map = Map::create(MAP_TYPE_ARRAY, 4, value_size, max_entries, F_MMAPABLE, name)?;
        // The kernel rounds each element to 8 octets (kernel/bpf/arraymap.c).
        let stride = (value_size as usize).next_multiple_of(8);
        let len = stride
            .checked_mul(max_entries as usize)
            .ok_or_else(|| invalid("bpf array too large"))?
            .next_multiple_of(PAGE_SIZE);
        let memory = MapMemory::map(map.as_fd(), len)?;
        Ok(MappedArray {
            memory,
            map,
            stride,
        })
    }

    /// The map (for programs, and element access by system call).
    pub fn map(&self) -> &Map {
        &self.map
    }

    /// Octets from one element to the next (`value_size` rounded up to 8).
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// Octet `at` of element `index`, if `width` octets fit the element.
    fn offset(&self, index: u32, at: usize, width: usize) -> Option<usize> {
        if index >= self.map.max_entries || at.checked_add(width)? > self.map.value_size {
            return None;
        }
        Some(index as usize * self.stride + at)
    }

    /// The u32 at octet `at` of element `index` (`None`: outside the
    /// element, or not 4-aligned).
    pub fn load_u32(&self, index: u32, at: usize) -> Option<u32> {
        self.memory.load32(self.offset(index, at, 4)?)
    }

    /// Stores the u32 at octet `at` of element `index`; false when outside
    /// or not aligned.
    pub fn store_u32(&self, index: u32, at: usize, value: u32) -> bool {
        self.offset(index, at, 4)
            .is_some_and(|o| self.memory.store32(o, value))
    }

    /// The u64 at octet `at` of element `index` (8-aligned).
    pub fn load_u64(&self, index: u32, at: usize) -> Option<u64> {
        self.memory.load64(self.offset(index, at, 8)?)
    }

    /// Stores the u64 at octet `at` of element `index`; false when outside
    /// or not aligned.
    pub fn store_u64(&self, index: u32, at: usize, value: u64) -> bool {
        self.offset(index, at, 8)
            .is_some_and(|o| self.memory.store64(o, value))
    }

    /// Copies `out.len()` consecutive u32s from octet `at` of element
    /// `index` into `out`; false (nothing copied) when they do not fit.
    pub fn read_u32s(&self, index: u32, at: usize, out: &mut [u32]) -> bool {
        let Some(first) = self.offset(index, at, out.len() * 4) else {
            return false;
        };
        for (i, slot) in out.iter_mut().enumerate() {
            match self.memory.load32(first + i * 4) {
                Some(v) => *slot = v,
                None => return false,
            }
        }
        true
    }

    /// Sets `count` consecutive u32s from octet `at` of element `index` to
    /// zero; false when they do not fit.
    pub fn zero_u32s(&self, index: u32, at: usize, count: usize) -> bool {
        let Some(first) = self.offset(index, at, count * 4) else {
            return false;
        };
        (0..count).all(|i| self.memory.store32(first + i * 4, 0))
    }
}

/// Why a program was not loaded.
#[derive(Debug)]
pub struct LoadError {
    /// The system call's error (`EACCES` / `EINVAL`: the verifier refused
    /// it; `EPERM`: no `CAP_BPF`).
    pub error: io::Error,
    /// The verifier's log of the refused program (empty when the kernel
    /// wrote none).
    pub log: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "loading the BPF program: {}", self.error)?;
        if !self.log.is_empty() {
            write!(f, "; verifier log:\n{}", self.log.trim_end())?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// A program's runs on live traffic, [`Program::run_stats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunStats {
    /// Runs counted.
    pub runs: u64,
    /// Their total time, nanoseconds.
    pub nanos: u64,
}

/// While held, the kernel times every run of every BPF program
/// (`BPF_ENABLE_STATS`, `BPF_STATS_RUN_TIME`; needs `CAP_SYS_ADMIN`).
/// It costs two clock reads per run, so hold it only to measure.
#[derive(Debug)]
pub struct RunTimeStats {
    _fd: OwnedFd,
}

impl RunTimeStats {
    /// Turns the timing on until the value is dropped.
    pub fn enable() -> io::Result<RunTimeStats> {
        Ok(RunTimeStats {
            _fd: sys::enable_run_time_stats()?,
        })
    }
}

/// What one [`Program::test_run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestRun {
    /// The program's return value (of the last run).
    pub retval: u32,
    /// The kernel's mean time per run, nanoseconds (its own clock around
    /// the repeated runs, `bpf_test_timer`).
    pub ns_per_run: u32,
}

/// A loaded program. Unloaded when the last descriptor closes (a socket
/// it is attached to holds one).
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
}

impl Program {
    /// Loads `insns` as a program of `kind` named `name`, under `license`
    /// (only GPL-only helpers care). A refusal comes with the verifier's
    /// log: the load is tried once without a log and, if refused, again
    /// with one.
    pub fn load(
        kind: ProgramType,
        insns: &[Insn],
        license: &str,
        name: &str,
    ) -> Result<Program, LoadError> {
        let raw: Vec<RawInsn> = insns.iter().map(|i| i.0).collect();
        let license = CString::new(license).map_err(|_| LoadError {
            error: invalid("license contains NUL"),
            log: String::new(),
        })?;
        let name = object_name(name);
        let error = match sys::prog_load(kind.0, &raw, &license, name, &mut []) {
            Ok(fd) => return Ok(Program { fd }),
            Err(e) => e,
        };
        let mut log = vec![0u8; LOG_SIZE];
        // The retry can only fail again; its error and log are reported.
        let error = match sys::prog_load(kind.0, &raw, &license, name, &mut log) {
            Ok(fd) => return Ok(Program { fd }),
            Err(again) if again.raw_os_error().is_some() => again,
            Err(_) => error,
        };
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        Err(LoadError {
            error,
            log: String::from_utf8_lossy(&log[..end]).into_owned(),
        })
    }

    /// Attaches the program to `socket` as its filter (`SO_ATTACH_BPF`,
    /// replacing any): frames it returns 0 for are dropped before they
    /// are copied to the ring, and are not counted by the ring's
    /// statistics.
    pub fn attach_to(&self, socket: &PacketSocket) -> io::Result<()> {
        sys::attach_socket_filter(socket.as_fd(), self.fd.as_fd())
    }

    /// Attaches this XDP program to interface `ifindex`, in the driver if
    /// it supports XDP, else in the generic receive path; the error of the
    /// generic attempt if both fail (`EPERM` without `CAP_NET_ADMIN` and
    /// `CAP_BPF`; `EBUSY` when the interface already has a program).
    pub fn attach_xdp(&self, ifindex: u32) -> io::Result<XdpLink> {
        let native = sys::link_create_xdp(self.fd.as_fd(), ifindex, XdpMode::Native.flags());
        let (fd, mode) = match native {
            Ok(fd) => (fd, XdpMode::Native),
            Err(_) => (
                sys::link_create_xdp(self.fd.as_fd(), ifindex, XdpMode::Generic.flags())?,
                XdpMode::Generic,
            ),
        };
        Ok(XdpLink {
            _fd: fd,
            mode,
            ifindex,
        })
    }

    /// Runs the program `repeat` times (at least once) over a packet
    /// holding `data` (`BPF_PROG_TEST_RUN`, at least 14 octets).
    ///
    /// The kernel takes the first 14 octets for an Ethernet header and,
    /// for every program type but tc's, starts the packet the program sees
    /// after it (net/bpf/test_run.c, `bpf_prog_test_run_skb`: only `is_l2`
    /// types get it pushed back). A socket filter on a `SOCK_RAW` packet
    /// socket sees the Ethernet header, so to run one over a frame as the
    /// socket would, put 14 octets of any Ethernet header in front of it.
    pub fn test_run(&self, data: &[u8], repeat: u32) -> io::Result<TestRun> {
        let (retval, ns_per_run) = sys::prog_test_run(self.fd.as_fd(), data, repeat.max(1))?;
        Ok(TestRun { retval, ns_per_run })
    }

    /// The kernel's count of this program's runs and their total time,
    /// accumulated while some [`RunTimeStats`] is held (`bpf_prog_info`'s
    /// `run_cnt`, `run_time_ns`): its cost on live traffic.
    pub fn run_stats(&self) -> io::Result<RunStats> {
        let (nanos, runs) = sys::prog_run_stats(self.fd.as_fd())?;
        Ok(RunStats { runs, nanos })
    }
}

impl AsFd for Program {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A map's descriptor number, for [`asm::Assembler::ld_map_fd`].
pub fn map_fd(map: &Map) -> i32 {
    map.fd.as_raw_fd()
}
