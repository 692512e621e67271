//! The inbound pre-filter (issue 5, "Scaling"): an eBPF socket filter on
//! the outside ring that drops, in the kernel, the ESP frames another node
//! owns, before they are copied to this node's ring, woken for, parsed
//! and observed. Both rings' filters also drop frames to other unicast
//! MACs (the other nodes' and hosts' traffic a flooding segment delivers),
//! which the classifier ignores anyway. Without it every node pays that per-packet cost for
//! every inbound packet of the cluster (`bench/RESULTS.md`, "Cluster:
//! per-packet cost of a node").
//!
//! What it decides is what the [`NodeDataPath`] would decide, for the
//! packets whose owner is a function of the packet ([`program`]): packet
//! round robin over non-ESN SAs (`seq % n`), and the hash schemes (the
//! whole SA, precomputed here for the SA's peer). SQF and session schemes
//! and ESN SAs are not registered: their packets all reach user space.
//! It decides ESP and ESP in UDP over IPv4 and over IPv6 (a 40-octet
//! header without extension headers), to whichever outside virtual
//! addresses it is given ([`FilterAddresses`]: the configuration gives
//! the outside side one, `protected.local`; a dual-stack side passes
//! both). With neither the outside ring gets only the other-MAC filter.
//!
//! With `kernel_filter_xdp` the same decision also runs as an XDP program
//! on the outside interface ([`KernelFilter::attach_xdp`],
//! [`program::Hook::Xdp`]), over the same maps: not-owned ESP is then
//! dropped in the driver, before the kernel allocates an skb, runs its
//! receive path and the packet tap (costs the socket filter cannot take
//! away, since it runs after them). The socket filter stays on the ring
//! and decides what XDP passes: frames to other MACs, runts, and the
//! frames the XDP program cannot copy. Both count in the same counters
//! and record in the same cells; a frame is counted by the one that
//! dropped it.
//!
//! Whole-SA slots hold the peer's full address, 16 octets, so an SA with
//! an IPv6 peer under a hash scheme is decided in the kernel as one with
//! an IPv4 peer is ([`SlotMode::WHOLE_SA_V6`]), rather than registered in
//! PASS mode with every packet left to user space: on an IPv6 WAN the
//! hash schemes' not-owned packets cost a node what they cost on an IPv4
//! one, and the filter is there to take that cost away. It costs 16 more
//! octets per slot (16 KiB at 1,024 slots) and, per packet of such an SA,
//! four word compares of the source instead of one.
//!
//! Every node must still *observe* every inbound number (the replay
//! windows continue from what every node observed, see
//! `phalanx_cluster::observer`): the program records each number it
//! drops in its SA's cells, and user space [`absorb`](KernelFilter::absorb)s
//! them into the observer before the takeover marks are drained, and
//! periodically ([`KernelFilter::absorb_all`]) so the replay checkpoints
//! this node sends carry them.
//!
//! The periodic absorb reads every registered SA's 4096 cells (16 KiB)
//! each stats interval (100 ms): about 2 µs per SA, 2 % of a core at
//! 1,024 SAs ([`program::MAX_SLOTS`]; SAs beyond it are not registered
//! and reach user space).
//!
//! Kept in step with the data path by [`KernelFilter::sync`] after every
//! adopted state: the inbound view and its silent suspects (one 64-bit
//! word, [`program::view_word`]: the base view and the view without the
//! silent ones, as `phalanx_cluster::InboundDispatcher` dispatches), the
//! registered SAs and, for whole-SA modes, their ownership (computed by
//! the same dispatcher). So the kernel keeps dropping what other nodes
//! own while a suspect is silent, until Corosync confirms or the suspect
//! is heard again. The takeover is by arrival time in user space; the
//! kernel takes a silent suspect's share from the moment the word is
//! written, after the suspicion and so after the arrival time it starts
//! at.
//!
//! Races, honestly:
//! - The kernel decides when a frame arrives, user space when it reads
//!   it: frames already in the ring at a view change were passed under
//!   the old view and are decided by user space under the new one (as
//!   without the filter). A frame the kernel dropped under the old view
//!   that the new view gives this node is **lost** (the peer's transport
//!   retransmits); it is never accepted twice: its number is in the cells
//!   and is marked in the replay window at the next drain.
//! - A cell keeps only the latest number that fell on it; an older one
//!   was then at least 4096 below, outside the observer's window.
//! - The numbers are unauthenticated, as the observer's are; a forged
//!   number far ahead moves the window as an observed one does.
//! - An SA deleted and added again with the same SPI between two syncs
//!   keeps its cells: their numbers are marked in the new SA's window,
//!   which refuses, never accepts, the packets that carry them.
//! - The IPv4 header checksum is not verified in the kernel: a corrupted
//!   header the user-space classifier would ignore is dropped and its
//!   number recorded. (IPv6 has no header checksum; neither version's UDP
//!   checksum is verified, by the program or by user space's dispatch.)

pub mod program;
#[cfg(test)]
pub(super) mod tests;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use phalanx_cluster::dispatch::{Direction, DispatchScheme, InboundDispatcher, PacketKey};
use phalanx_cluster::{NodeDataPath, NodeId, SaDescriptor, View};
use phalanx_io::bpf::{
    map_fd, LoadError, Map, MappedArray, Program, ProgramType, XdpLink, XdpMode,
};
use phalanx_io::packet::PacketSocket;
use phalanx_wire::ethernet::MacAddress;

use program::{
    bucket, global, slot, FilterTarget, Hook, SlotMode, CELLS, INDEX_BUCKETS, MAX_SLOTS, SLOT_BYTES,
};

/// The virtual MACs and the outside virtual addresses the programs are
/// built for.
#[derive(Clone, Copy, Debug)]
pub struct FilterAddresses {
    /// The outside virtual MAC.
    pub outside_mac: MacAddress,
    /// The outside virtual IPv4 address, if the side has one: ESP to it
    /// is decided.
    pub outside_v4: Option<Ipv4Addr>,
    /// The outside virtual IPv6 address, if the side has one: ESP to it
    /// is decided. With neither address the outside ring gets only the
    /// other-MAC filter.
    pub outside_v6: Option<Ipv6Addr>,
    /// The inside virtual MAC.
    pub inside_mac: MacAddress,
}

/// Why the filter could not be set up.
#[derive(Debug)]
pub enum FilterError {
    /// A map could not be created (`EPERM`: no `CAP_BPF`).
    Map(io::Error),
    /// The program did not assemble (a defect here).
    Assemble(phalanx_io::bpf::asm::AsmError),
    /// The kernel refused the program, with the verifier's log.
    Load(LoadError),
    /// `SO_ATTACH_BPF` failed.
    Attach(io::Error),
    /// The XDP program did not load, with the verifier's log.
    XdpLoad(LoadError),
    /// Attaching it to the interface failed, in the driver and in the
    /// generic path (`EBUSY`: another XDP program is there).
    XdpAttach(io::Error),
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilterError::Map(e) => write!(f, "creating the BPF maps: {e}"),
            FilterError::Assemble(e) => write!(f, "assembling the filter: {e}"),
            FilterError::Load(e) => e.fmt(f),
            FilterError::Attach(e) => write!(f, "attaching the filter: {e}"),
            FilterError::XdpLoad(e) => write!(f, "loading the XDP program: {e}"),
            FilterError::XdpAttach(e) => write!(f, "attaching the XDP program: {e}"),
        }
    }
}

impl std::error::Error for FilterError {}

/// The programs' drop counters since loading ([`program::counter`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropCounts {
    /// Not-owned ESP frames the outside program dropped.
    pub not_owned: u64,
    /// Frames to other unicast MACs both programs dropped.
    pub other_mac: u64,
}

/// One registered inbound SA.
#[derive(Clone, Copy, Debug)]
struct Registered {
    /// Its element in `slots` (1..=MAX_SLOTS).
    element: u32,
    /// Its `index` bucket.
    bucket: u32,
    mode: SlotMode,
    peer: IpAddr,
}

/// The loaded filter, its maps and what is registered. See the module
/// docs.
#[derive(Debug)]
pub struct KernelFilter {
    program: Program,
    /// The same decision as an XDP program, loaded on demand
    /// ([`attach_xdp`](Self::attach_xdp)).
    xdp_program: Option<Program>,
    /// Where it is attached; detached on drop.
    xdp: Option<XdpLink>,
    /// Attaching it was tried and failed.
    xdp_failed: bool,
    /// The outside target the programs were built for.
    target: FilterTarget,
    /// The inside ring's: other unicast MACs only.
    inside_program: Program,
    index: Map,
    slots: MappedArray,
    /// Per-CPU u64 counters ([`program::counter`]).
    counters: Map,
    /// Whether reading them failed (logged once).
    counters_unreadable: std::cell::Cell<bool>,
    scheme: DispatchScheme,
    local: NodeId,
    registered: HashMap<u32, Registered>,
    /// Bucket -> the SPI registered in it.
    buckets: HashMap<u32, u32>,
    /// SPIs not registered because their bucket is taken (logged once).
    shared_bucket: HashSet<u32>,
    free: Vec<u32>,
    /// The view and silent suspects last written (`None`: none yet).
    view: Option<(View, Vec<NodeId>)>,
    /// Scratch for one SA's cells.
    cells: Vec<u32>,
}

impl KernelFilter {
    /// Creates the maps and loads the programs for node `local` with
    /// `scheme`, ESP to `addresses` and ESP in UDP on `udp_port`. Needs
    /// `CAP_BPF` (or root); nothing after does.
    pub fn load(
        local: NodeId,
        scheme: DispatchScheme,
        addresses: FilterAddresses,
        udp_port: u16,
    ) -> Result<KernelFilter, FilterError> {
        let index = Map::array(4, INDEX_BUCKETS, "phx_index").map_err(FilterError::Map)?;
        let slots = MappedArray::create(SLOT_BYTES, MAX_SLOTS + 1, "phx_slots")
            .map_err(FilterError::Map)?;
        let counters = Map::per_cpu_array(program::counter::BYTES, 1, "phx_counters")
            .map_err(FilterError::Map)?;
        // Without an outside address only frames to other MACs are
        // dropped; all ESP reaches user space, which dispatches it.
        let target = FilterTarget {
            mac: addresses.outside_mac,
            ipv4: addresses.outside_v4,
            ipv6: addresses.outside_v6,
            udp_port,
            index_fd: map_fd(&index),
            slots_fd: map_fd(slots.map()),
            counters_fd: map_fd(&counters),
        };
        let insns = program::esp_filter(&target, Hook::Socket).map_err(FilterError::Assemble)?;
        let program = Program::load(ProgramType::SOCKET_FILTER, &insns, "GPL", "phx_esp_filter")
            .map_err(FilterError::Load)?;
        let insns = program::other_mac_filter(addresses.inside_mac, map_fd(&counters))
            .map_err(FilterError::Assemble)?;
        let inside_program =
            Program::load(ProgramType::SOCKET_FILTER, &insns, "GPL", "phx_mac_filter")
                .map_err(FilterError::Load)?;
        let filter = KernelFilter {
            program,
            xdp_program: None,
            xdp: None,
            xdp_failed: false,
            target,
            inside_program,
            index,
            slots,
            counters,
            counters_unreadable: std::cell::Cell::new(false),
            scheme,
            local,
            registered: HashMap::new(),
            buckets: HashMap::new(),
            shared_bucket: HashSet::new(),
            free: (1..=MAX_SLOTS).rev().collect(),
            view: None,
            cells: vec![0; CELLS],
        };
        filter.write_view(&View::default(), &[]);
        Ok(filter)
    }

    /// Filters what the outside ring receives from now on.
    pub fn attach(&self, ring: &PacketSocket) -> Result<(), FilterError> {
        self.program.attach_to(ring).map_err(FilterError::Attach)
    }

    /// Filters what the inside ring receives from now on (frames to other
    /// unicast MACs only).
    pub fn attach_inside(&self, ring: &PacketSocket) -> Result<(), FilterError> {
        self.inside_program
            .attach_to(ring)
            .map_err(FilterError::Attach)
    }

    /// Loads the outside decision as an XDP program over the same maps
    /// (once); needs `CAP_BPF`.
    pub fn load_xdp(&mut self) -> Result<&Program, FilterError> {
        if self.xdp_program.is_none() {
            let insns =
                program::esp_filter(&self.target, Hook::Xdp).map_err(FilterError::Assemble)?;
            let loaded = Program::load(ProgramType::XDP, &insns, "GPL", "phx_esp_xdp")
                .map_err(FilterError::XdpLoad)?;
            self.xdp_program = Some(loaded);
        }
        Ok(self.xdp_program.as_ref().expect("loaded above"))
    }

    /// Also decides the outside interface's frames in XDP
    /// ([`program::Hook::Xdp`]): not-owned ESP is then dropped in the
    /// driver, before the kernel allocates an skb, runs its receive path
    /// and the packet tap for it. The socket filter stays on the ring for
    /// everything XDP passes. Needs `CAP_NET_ADMIN` and `CAP_BPF`; the
    /// program is detached when this filter is dropped.
    pub fn attach_xdp(&mut self, ifindex: u32) -> Result<XdpMode, FilterError> {
        let attached = self
            .load_xdp()
            .and_then(|program| program.attach_xdp(ifindex).map_err(FilterError::XdpAttach));
        self.xdp_failed = attached.is_err();
        let link = attached?;
        let mode = link.mode();
        self.xdp = Some(link);
        Ok(mode)
    }

    /// The XDP program, once [`load_xdp`](Self::load_xdp)ed (test runs).
    pub fn xdp_program(&self) -> Option<&Program> {
        self.xdp_program.as_ref()
    }

    /// Where the XDP program runs, if it is attached.
    pub fn xdp_mode(&self) -> Option<XdpMode> {
        self.xdp.as_ref().map(XdpLink::mode)
    }

    /// Whether [`attach_xdp`](Self::attach_xdp) was tried and failed.
    pub fn xdp_failed(&self) -> bool {
        self.xdp_failed
    }

    /// The outside ring's program (test runs).
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The inside ring's program (test runs).
    pub fn inside_program(&self) -> &Program {
        &self.inside_program
    }

    /// Not-owned ESP frames the outside program dropped since loading.
    pub fn drops(&self) -> u64 {
        self.drop_counts().not_owned
    }

    /// Frames to other unicast MACs both programs dropped since loading.
    pub fn other_mac_drops(&self) -> u64 {
        self.drop_counts().other_mac
    }

    /// Both drop counters in one read of the per-CPU map; zeros if the
    /// kernel refuses the read (logged once: before Linux 6.5, with
    /// `kernel.unprivileged_bpf_disabled`, every `bpf(2)` command needs
    /// `CAP_BPF`, which the daemon has dropped).
    pub fn drop_counts(&self) -> DropCounts {
        let mut sums = [0u64; 2];
        if let Err(e) = self.counters.sum_per_cpu_u64s(0, &mut sums) {
            if !self.counters_unreadable.replace(true) {
                tracing::warn!(error = %e, "kernel filter: drop counters unreadable; they read 0");
            }
        }
        let [not_owned, other_mac] = sums;
        DropCounts {
            not_owned,
            other_mac,
        }
    }

    /// Inbound SAs with a slot.
    pub fn registered(&self) -> usize {
        self.registered.len()
    }

    /// The mode the program applies to an SA, under this filter's scheme:
    /// round robin needs only the SPI; a hash scheme's whole-SA mode is
    /// the one of its peer's IP version (the slot holds either peer).
    pub fn mode_of(&self, sa: &SaDescriptor) -> SlotMode {
        match (self.scheme, sa.peer) {
            (DispatchScheme::PacketRoundRobin, _) if !sa.esn => SlotMode::ROUND_ROBIN,
            (DispatchScheme::HashSegments { .. }, peer) if peer.is_unspecified() => SlotMode::PASS,
            (DispatchScheme::HashSegments { .. }, IpAddr::V4(_)) => SlotMode::WHOLE_SA_V4,
            (DispatchScheme::HashSegments { .. }, IpAddr::V6(_)) => SlotMode::WHOLE_SA_V6,
            _ => SlotMode::PASS,
        }
    }

    /// Brings the maps in line with the data path after it adopted a
    /// state: the inbound view and its silent suspects
    /// (`NodeDataPath::inbound_view`, `NodeDataPath::silent`), the
    /// inbound SAs `sas` (others ignored), the ownership of whole-SA
    /// slots. Cheap when nothing changed.
    pub fn sync<'a>(
        &mut self,
        view: &View,
        silent: &[NodeId],
        sas: impl Iterator<Item = &'a SaDescriptor>,
    ) {
        let view_changed = self
            .view
            .as_ref()
            .is_none_or(|(v, s)| v != view || s != silent);
        if view_changed {
            self.write_view(view, silent);
            self.view = Some((view.clone(), silent.to_vec()));
        }
        let inbound: Vec<&SaDescriptor> = sas
            .filter(|sa| sa.direction == Direction::Inbound)
            .collect();
        let seen: HashSet<u32> = inbound.iter().map(|sa| sa.spi).collect();
        // Gone first: their slots and buckets are free for the new ones.
        let gone: Vec<u32> = (self.registered.keys())
            .filter(|spi| !seen.contains(spi))
            .copied()
            .collect();
        for spi in gone {
            self.unregister(spi);
        }
        self.shared_bucket.retain(|spi| seen.contains(spi));
        for sa in inbound {
            if !self.registered.contains_key(&sa.spi) {
                self.register(sa, view, silent);
            }
        }
        if view_changed {
            self.update_ownership(view, silent);
        }
    }

    /// Writes `view` and its `silent` suspects as the round robin view
    /// word ([`program::view_word`]) in one store.
    fn write_view(&self, view: &View, silent: &[NodeId]) {
        let word = program::view_word(view, silent, self.local);
        self.slots.store_u64(0, global::VIEW, word);
        let generation = self.slots.load_u32(0, global::GENERATION).unwrap_or(0);
        self.slots
            .store_u32(0, global::GENERATION, generation.wrapping_add(1));
    }

    /// Whether this node owns every packet of SA `spi` from `peer` under
    /// `view` and `silent` (hash schemes: the inbound dispatcher's
    /// decision, which then depends only on the peer and the SPI).
    fn owns_whole_sa(&self, view: &View, silent: &[NodeId], spi: u32, peer: IpAddr) -> bool {
        let key = PacketKey::inbound_sa(spi, peer);
        InboundDispatcher::new(self.scheme, view.clone(), silent).owner(&key) == Some(self.local)
    }

    /// Gives `sa` a slot (cleared) unless its mode is PASS, no slot is
    /// free or another SA has its bucket; the bucket is published last,
    /// so the program never sees a half written slot.
    fn register(&mut self, sa: &SaDescriptor, view: &View, silent: &[NodeId]) {
        let mode = self.mode_of(sa);
        if mode == SlotMode::PASS {
            return;
        }
        let bucket = bucket(sa.spi);
        if let Some(&other) = self.buckets.get(&bucket) {
            if self.shared_bucket.insert(sa.spi) {
                tracing::info!(
                    spi = sa.spi,
                    other,
                    "kernel filter: SA shares its bucket; its packets all reach user space"
                );
            }
            return;
        }
        let Some(element) = self.free.pop() else {
            return;
        };
        let peer = sa.peer;
        let owned = is_whole_sa(mode) && self.owns_whole_sa(view, silent, sa.spi, peer);
        self.slots.zero_u32s(element, slot::CELLS, CELLS);
        self.slots.store_u32(element, slot::MODE, mode.0);
        self.slots.store_u32(element, slot::OWNED, u32::from(owned));
        for (word, at) in peer_words(peer).into_iter().zip((slot::PEER..).step_by(4)) {
            self.slots.store_u32(element, at, word);
        }
        self.slots.store_u32(element, slot::SPI, sa.spi);
        if let Err(e) = self
            .index
            .update(&bucket.to_ne_bytes(), &element.to_ne_bytes())
        {
            tracing::warn!(spi = sa.spi, error = %e, "kernel filter: SA not registered");
            self.free.push(element);
            return;
        }
        let registered = Registered {
            element,
            bucket,
            mode,
            peer,
        };
        self.buckets.insert(bucket, sa.spi);
        self.shared_bucket.remove(&sa.spi);
        self.registered.insert(sa.spi, registered);
    }

    /// Frees `spi`'s slot: the bucket is emptied first, so the program
    /// stops finding the slot before it can be reused.
    fn unregister(&mut self, spi: u32) {
        self.shared_bucket.remove(&spi);
        let Some(registered) = self.registered.remove(&spi) else {
            return;
        };
        self.buckets.remove(&registered.bucket);
        if let Err(e) = self
            .index
            .update(&registered.bucket.to_ne_bytes(), &0u32.to_ne_bytes())
        {
            tracing::warn!(spi, error = %e, "kernel filter: SA not unregistered; slot kept");
            return;
        }
        self.free.push(registered.element);
    }

    /// Whole-SA slots: ownership under the new view.
    fn update_ownership(&self, view: &View, silent: &[NodeId]) {
        for (&spi, r) in &self.registered {
            if is_whole_sa(r.mode) {
                let owned = self.owns_whole_sa(view, silent, spi, r.peer);
                self.slots
                    .store_u32(r.element, slot::OWNED, u32::from(owned));
            }
        }
    }

    /// The numbers the program dropped for `spi` join its observer (see
    /// the module docs); call it before draining its takeover marks.
    /// Returns how many were new.
    pub fn absorb(&mut self, datapath: &mut NodeDataPath, spi: u32) -> usize {
        let Some(r) = self.registered.get(&spi) else {
            return 0;
        };
        if !self
            .slots
            .read_u32s(r.element, slot::CELLS, &mut self.cells)
        {
            return 0;
        }
        datapath.absorb_observed(spi, &self.cells)
    }

    /// [`absorb`](Self::absorb) for every registered SA.
    pub fn absorb_all(&mut self, datapath: &mut NodeDataPath) -> usize {
        let spis: Vec<u32> = self.registered.keys().copied().collect();
        spis.into_iter().map(|spi| self.absorb(datapath, spi)).sum()
    }

    /// SA `spi`'s cells (tests and diagnostics); `None` if not registered.
    pub fn cells(&self, spi: u32) -> Option<Vec<u32>> {
        let r = self.registered.get(&spi)?;
        let mut cells = vec![0; CELLS];
        self.slots
            .read_u32s(r.element, slot::CELLS, &mut cells)
            .then_some(cells)
    }
}

/// Whether `mode` is one of the whole-SA modes (ownership precomputed
/// per view).
fn is_whole_sa(mode: SlotMode) -> bool {
    mode == SlotMode::WHOLE_SA_V4 || mode == SlotMode::WHOLE_SA_V6
}

/// `peer` as the slot's four peer words ([`slot::PEER`]): its octets in
/// network order, an IPv4 address followed by zeros. The program loads
/// them as it loads the copied source, so both are native-order words.
fn peer_words(peer: IpAddr) -> [u32; 4] {
    let octets = match peer {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            [a, b, c, d, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        }
        IpAddr::V6(v6) => v6.octets(),
    };
    let word =
        |i: usize| u32::from_ne_bytes([octets[i], octets[i + 1], octets[i + 2], octets[i + 3]]);
    [word(0), word(4), word(8), word(12)]
}
