//! Corosync closed process groups (CPG) as the cluster's
//! [`GroupTransport`]: agreed membership and totally ordered delivery.
//!
//! The cluster thread owns one [`CpgTransport`]. It joins the group at
//! start, polls [`CpgTransport::fd`] and calls [`CpgTransport::dispatch`]
//! when it is readable; libcpg then runs the deliver and configuration
//! change callbacks on that same thread, inside `cpg_dispatch`. Those
//! callbacks are plain functions (no closure state), so they find their
//! transport's event queue through the handle's CPG context: a number
//! this module gives each transport and keys a process-wide table of
//! queues by. [`GroupTransport::poll`] drains the queue in delivery order.
//! Corosync's extended virtual synchrony delivers configuration changes in
//! the same order relative to messages on every member, which is what the
//! replicated log needs.
//!
//! Messages go out with `CPG_TYPE_AGREED` (total order). When Corosync's
//! IPC is congested it answers `CS_ERR_TRY_AGAIN`; the message is then
//! kept, in order, in a bounded backlog that every later multicast and
//! every [`CpgTransport::flush`] retries first: nothing is reordered, the
//! thread never sleeps, and every retry is counted.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError};

use phalanx_cluster::transport::{GroupEvent, GroupTransport, TransportError};
use phalanx_cluster::NodeId;
use rust_corosync::cpg::{self, Address, Guarantee, Handle, Model1Data, Model1Flags, ModelData};
use rust_corosync::{CsError, DispatchFlags};

/// Messages kept while Corosync answers `CS_ERR_TRY_AGAIN`; beyond this the
/// multicast fails (the replicated log would otherwise grow without end).
pub const MAX_BACKLOG: usize = 4096;

/// Immediate retries of a multicast that Corosync refused with
/// `CS_ERR_TRY_AGAIN` before it goes to the backlog.
const IMMEDIATE_RETRIES: u32 = 2;

/// Events delivered by the callbacks, per transport (by CPG context).
static QUEUES: LazyLock<Mutex<HashMap<u64, VecDeque<GroupEvent>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The next CPG context number.
static NEXT_CONTEXT: AtomicU64 = AtomicU64::new(1);

/// Appends `event` to the queue of the transport with `context`.
fn push(context: u64, event: GroupEvent) {
    // Every operation on the table is a single insert, push, drain or
    // remove: it stays consistent even if a holder panicked.
    let mut queues = QUEUES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(queue) = queues.get_mut(&context) {
        queue.push_back(event);
    }
}

/// `cpg_deliver_fn`: one message, in agreed order.
fn on_deliver(
    handle: &Handle,
    _group: String,
    nodeid: rust_corosync::NodeId,
    _pid: u32,
    message: &[u8],
    _len: usize,
) {
    if let Ok(context) = cpg::context_get(handle) {
        let from = NodeId(u32::from(nodeid));
        let message = message.to_vec();
        push(context, GroupEvent::Delivered { from, message });
    }
}

/// `cpg_confchg_fn`: the group's new membership (processes; a node is a
/// member while any of its processes is).
fn on_confchg(
    handle: &Handle,
    _group: &str,
    members: Vec<Address>,
    _left: Vec<Address>,
    _joined: Vec<Address>,
) {
    if let Ok(context) = cpg::context_get(handle) {
        let mut ids: Vec<NodeId> = members
            .iter()
            .map(|m| NodeId(u32::from(m.nodeid)))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        push(context, GroupEvent::Membership { members: ids });
    }
}

/// What went wrong talking to Corosync.
#[derive(Debug)]
pub struct CpgError {
    /// The libcpg call that failed.
    pub call: &'static str,
    /// What it returned.
    pub error: CsError,
}

impl fmt::Display for CpgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {}", self.call, self.error)?;
        if matches!(
            self.error,
            CsError::CsErrLibrary | CsError::CsErrBadHandle | CsError::CsErrAccess
        ) {
            f.write_str(" (is corosync running in this network namespace?)")?;
        }
        Ok(())
    }
}

impl std::error::Error for CpgError {}

impl From<CpgError> for io::Error {
    fn from(e: CpgError) -> io::Error {
        io::Error::other(e.to_string())
    }
}

/// What the transport counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpgStats {
    /// Messages handed to Corosync.
    pub sent: u64,
    /// Messages delivered (ours included).
    pub delivered: u64,
    /// Configuration changes delivered.
    pub confchgs: u64,
    /// `CS_ERR_TRY_AGAIN` answers to a multicast.
    pub try_again: u64,
    /// Messages that waited in the backlog.
    pub backlogged: u64,
    /// Multicasts refused because the backlog was full or Corosync failed.
    pub send_failures: u64,
    /// `cpg_dispatch` calls that failed.
    pub dispatch_failures: u64,
}

/// A member of one CPG group.
pub struct CpgTransport {
    handle: Handle,
    context: u64,
    local: NodeId,
    group: String,
    /// A duplicate of libcpg's descriptor to poll (see [`CpgTransport::fd`]).
    fd: Option<OwnedFd>,
    backlog: VecDeque<Vec<u8>>,
    stats: CpgStats,
}

impl fmt::Debug for CpgTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpgTransport")
            .field("context", &self.context)
            .field("local", &self.local)
            .field("group", &self.group)
            .field("backlog", &self.backlog.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl CpgTransport {
    /// Connects to the local Corosync and joins `group`. Fails with a
    /// message that says so when Corosync is not reachable.
    pub fn join(group: &str) -> Result<CpgTransport, CpgError> {
        let model = ModelData::ModelV1(Model1Data {
            flags: Model1Flags::None,
            deliver_fn: Some(on_deliver),
            confchg_fn: Some(on_confchg),
            totem_confchg_fn: None,
        });
        let context = NEXT_CONTEXT.fetch_add(1, Ordering::Relaxed);
        let fail = |call| move |error| CpgError { call, error };
        let handle = cpg::initialize(&model, context).map_err(fail("cpg_initialize"))?;
        // The binding hands libcpg a pointer rather than the value as the
        // initial context; set the number explicitly.
        cpg::context_set(&handle, context).map_err(fail("cpg_context_set"))?;
        let local = cpg::local_get(&handle).map_err(fail("cpg_local_get"))?;
        QUEUES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(context, VecDeque::new());
        let mut transport = CpgTransport {
            handle,
            context,
            local: NodeId(u32::from(local)),
            group: group.to_owned(),
            fd: None,
            backlog: VecDeque::new(),
            stats: CpgStats::default(),
        };
        transport.fd = transport.duplicate_fd();
        cpg::join(&transport.handle, group).map_err(fail("cpg_join"))?;
        Ok(transport)
    }

    /// A descriptor that is readable when [`dispatch`](Self::dispatch) has
    /// work, or `None` when it could not be had (the caller then
    /// dispatches on every wake-up, at least every heartbeat interval).
    ///
    /// libcpg owns its descriptor and hands out only the number; the
    /// transport polls a duplicate of it (the same socket, so the same
    /// readiness), owned here.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(AsFd::as_fd)
    }

    fn duplicate_fd(&self) -> Option<OwnedFd> {
        let raw = cpg::fd_get(&self.handle).ok()?;
        match phalanx_io::poll::duplicate_raw_fd(raw) {
            Ok(fd) => Some(fd),
            Err(e) => {
                tracing::warn!(error = %e, "cannot duplicate the CPG descriptor; dispatching on every wake-up");
                None
            }
        }
    }

    /// Runs the callbacks of everything Corosync has delivered
    /// (non-blocking); the events then come out of
    /// [`GroupTransport::poll`].
    pub fn dispatch(&mut self) -> Result<(), CpgError> {
        cpg::dispatch(&self.handle, DispatchFlags::All).map_err(|error| {
            self.stats.dispatch_failures += 1;
            CpgError {
                call: "cpg_dispatch",
                error,
            }
        })
    }

    /// Retries the backlog, oldest first, until it is empty or Corosync
    /// pushes back again. Call it on every wake-up.
    pub fn flush(&mut self) -> Result<(), CpgError> {
        while let Some(message) = self.backlog.front() {
            match cpg::mcast_joined(&self.handle, Guarantee::TypeAgreed, message) {
                Ok(()) => {
                    self.stats.sent += 1;
                    self.backlog.pop_front();
                }
                Err(CsError::CsErrTryAgain) => {
                    self.stats.try_again += 1;
                    return Ok(());
                }
                Err(error) => {
                    self.stats.send_failures += 1;
                    return Err(CpgError {
                        call: "cpg_mcast_joined",
                        error,
                    });
                }
            }
        }
        Ok(())
    }

    /// Messages waiting for Corosync to take them.
    pub fn backlog(&self) -> usize {
        self.backlog.len()
    }

    /// The group joined.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// What was counted so far.
    pub fn stats(&self) -> CpgStats {
        self.stats
    }

    /// Sends `message` now, retrying a congested Corosync briefly; `false`
    /// when it is still congested.
    fn send_now(&mut self, message: &[u8]) -> Result<bool, CpgError> {
        for _ in 0..=IMMEDIATE_RETRIES {
            match cpg::mcast_joined(&self.handle, Guarantee::TypeAgreed, message) {
                Ok(()) => {
                    self.stats.sent += 1;
                    return Ok(true);
                }
                Err(CsError::CsErrTryAgain) => {
                    self.stats.try_again += 1;
                    std::thread::yield_now();
                }
                Err(error) => {
                    self.stats.send_failures += 1;
                    return Err(CpgError {
                        call: "cpg_mcast_joined",
                        error,
                    });
                }
            }
        }
        Ok(false)
    }
}

impl GroupTransport for CpgTransport {
    fn local(&self) -> NodeId {
        self.local
    }

    fn multicast(&mut self, message: &[u8]) -> Result<(), TransportError> {
        let sent = match self.flush() {
            Ok(()) if self.backlog.is_empty() => self.send_now(message),
            Ok(()) => Ok(false),
            Err(e) => Err(e),
        };
        match sent {
            Ok(true) => Ok(()),
            Ok(false) if self.backlog.len() < MAX_BACKLOG => {
                self.stats.backlogged += 1;
                self.backlog.push_back(message.to_vec());
                Ok(())
            }
            Ok(false) => {
                self.stats.send_failures += 1;
                Err(TransportError::Congested)
            }
            Err(e) if matches!(e.error, CsError::CsErrTooBig) => Err(TransportError::TooLarge),
            Err(e) => {
                tracing::error!(error = %e, "Corosync refused a cluster message");
                Err(TransportError::Closed)
            }
        }
    }

    fn poll(&mut self) -> Option<GroupEvent> {
        let event = QUEUES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(&self.context)
            .and_then(VecDeque::pop_front)?;
        match event {
            GroupEvent::Delivered { .. } => self.stats.delivered += 1,
            GroupEvent::Membership { .. } => self.stats.confchgs += 1,
        }
        Some(event)
    }
}

impl Drop for CpgTransport {
    fn drop(&mut self) {
        // Leaving tells the other members at once (a confchg with reason
        // "leave") instead of after the token timeout. The handle itself
        // is finalized by its own Drop.
        if let Err(e) = cpg::leave(&self.handle, &self.group) {
            tracing::debug!(error = %e, "cpg_leave failed (Corosync gone?)");
        }
        QUEUES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.context);
    }
}
