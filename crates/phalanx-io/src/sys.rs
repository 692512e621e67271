//! The system calls that need `unsafe`: `recvmmsg(2)` and `sendmmsg(2)`
//! with their control messages (`UDP_GRO`, `UDP_SEGMENT`, `IP_PKTINFO`,
//! `IPV6_PKTINFO`, `IP_TOS`, `IPV6_TCLASS`, `SO_RXQ_OVFL`), socket-address
//! conversion, and the socket options neither nix nor socket2 offers
//! (`IP_MTU_DISCOVER` / `IPV6_MTU_DISCOVER`, the ICMP filters,
//! `IPV6_MTU`). Everything above this module is safe code.
//!
//! The message headers live in a [`MsgScratch`] allocated once per socket;
//! their pointers are rewritten before every call and point only at the
//! scratch itself and at buffers borrowed for the duration of that call.

use std::io;
use std::mem::{self, size_of};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr;

/// `AF_PACKET`: socket options, the `TPACKET_V3` ring, frame sends.
pub(crate) mod packet;

/// `bpf(2)`: maps, programs, test runs; mmapable maps; `SO_ATTACH_BPF`.
pub(crate) mod bpf;

/// Control-message space per message. The most a message carries is an
/// IPv4 datagram received on a dual-stack IPv6 socket with GRO: one
/// `UDP_GRO` (`CMSG_SPACE(4)` = 24 on LP64), one `SO_RXQ_OVFL`
/// (`CMSG_SPACE(4)` = 24), both `IPV6_PKTINFO` (`CMSG_SPACE(20)` = 40, with
/// the IPv4-mapped address) and `IP_PKTINFO` (`CMSG_SPACE(12)` = 32)
/// (udpv6_recvmsg reports both), and `IP_TOS` (`CMSG_SPACE(1)` = 24):
/// 144 bytes. (An IPv6 datagram: 24 + 24 + 40 + `IPV6_TCLASS` 24 = 112; a
/// send: `UDP_SEGMENT` 24 + `IPV6_PKTINFO` 40 + TOS 24 = 88.) A truncated
/// area loses the last messages silently, so there is a margin.
const CMSG_BUF_LEN: usize = 160;

/// A control-message buffer, aligned for `struct cmsghdr`.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct CmsgBuf([u8; CMSG_BUF_LEN]);

/// What the kernel reported about one received message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RecvInfo {
    /// Bytes written into the message's buffer.
    pub(crate) len: usize,
    /// Source address (`msg_name`).
    pub(crate) remote: Option<SocketAddr>,
    /// Destination address (`IP_PKTINFO` / `IPV6_PKTINFO`).
    pub(crate) local: Option<IpAddr>,
    /// Segment size of a GRO super-datagram (`UDP_GRO`), 0 if none.
    pub(crate) gro_size: usize,
    /// The outer TOS / Traffic Class octet (`IP_TOS` / `IPV6_TCLASS`,
    /// asked for with `IP_RECVTOS` / `IPV6_RECVTCLASS`), 0 if not reported.
    pub(crate) tos: u8,
    /// The socket's cumulative count of datagrams dropped for lack of
    /// receive-buffer room when this one was queued (`SO_RXQ_OVFL`,
    /// socket(7)); `None` when the kernel attached none (it does only once
    /// the count is not 0).
    pub(crate) kernel_drops: Option<u32>,
    /// The datagram did not fit the buffer (`MSG_TRUNC`).
    pub(crate) truncated: bool,
}

/// One message to send: packets `first..first + count` of the caller's
/// batch, one iovec each, to `remote`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OutMsg {
    /// Destination.
    pub(crate) remote: SocketAddr,
    /// Source address to use, sent as `IP_PKTINFO` / `IPV6_PKTINFO`.
    pub(crate) local: Option<IpAddr>,
    /// Index of the first packet.
    pub(crate) first: usize,
    /// Number of packets (iovecs).
    pub(crate) count: usize,
    /// `UDP_SEGMENT` size when `count > 1`; 0 sends no GSO control message.
    pub(crate) segment_size: u16,
    /// Outer TOS / Traffic Class of every packet of the message, sent as
    /// `IP_TOS` or `IPV6_TCLASS`; 0 sends no control message (the
    /// socket's default, 0, applies).
    pub(crate) tos: u8,
}

/// Preallocated `mmsghdr`s, iovecs, addresses and control buffers.
pub(crate) struct MsgScratch {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_storage>,
    cmsgs: Vec<CmsgBuf>,
}

// SAFETY: the raw pointers inside `hdrs` and `iovs` are written right before
// each system call and never read after it returns; between calls they are
// inert integers, so moving the scratch to another thread is sound.
unsafe impl Send for MsgScratch {}

impl MsgScratch {
    /// Room for `max_msgs` messages carrying `max_iovs` iovecs in all.
    pub(crate) fn new(max_msgs: usize, max_iovs: usize) -> Self {
        // SAFETY: `mmsghdr` and `sockaddr_storage` are C structs of integers
        // and raw pointers, for which all-zero bytes are a valid value.
        let (hdr, name) = unsafe {
            (
                mem::zeroed::<libc::mmsghdr>(),
                mem::zeroed::<libc::sockaddr_storage>(),
            )
        };
        let iov = libc::iovec {
            iov_base: ptr::null_mut(),
            iov_len: 0,
        };
        Self {
            hdrs: vec![hdr; max_msgs],
            iovs: vec![iov; max_iovs.max(max_msgs)],
            names: vec![name; max_msgs],
            cmsgs: vec![CmsgBuf([0; CMSG_BUF_LEN]); max_msgs],
        }
    }

    /// Most messages per call.
    pub(crate) fn max_msgs(&self) -> usize {
        self.hdrs.len()
    }

    /// Most iovecs per call, all messages together.
    pub(crate) fn max_iovs(&self) -> usize {
        self.iovs.len()
    }

    /// Points message `i` at its own address and control buffers and at
    /// `iovlen` iovecs starting at `iov_at`.
    fn link(&mut self, i: usize, iov_at: usize, iovlen: usize, namelen: u32, controllen: usize) {
        let hdr = &mut self.hdrs[i];
        hdr.msg_len = 0;
        let msg = &mut hdr.msg_hdr;
        msg.msg_name = ptr::from_mut(&mut self.names[i]).cast();
        msg.msg_namelen = namelen;
        msg.msg_iov = self.iovs[iov_at..].as_mut_ptr();
        msg.msg_iovlen = iovlen;
        msg.msg_control = if controllen == 0 {
            ptr::null_mut()
        } else {
            self.cmsgs[i].0.as_mut_ptr().cast()
        };
        msg.msg_controllen = controllen;
        msg.msg_flags = 0;
    }
}

/// Receives up to `out.len()` messages, one per buffer of `bufs`, with
/// `MSG_WAITFORONE` (blocks for the first only if the socket blocks and
/// `dont_wait` is false). Retries on `EINTR`. Returns the message count.
pub(crate) fn recv_mmsg<'a>(
    fd: BorrowedFd<'_>,
    s: &mut MsgScratch,
    bufs: impl Iterator<Item = &'a mut [u8]>,
    out: &mut [RecvInfo],
    dont_wait: bool,
) -> io::Result<usize> {
    let limit = out.len().min(s.max_msgs());
    let mut n = 0;
    for buf in bufs.take(limit) {
        s.iovs[n] = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        n += 1;
    }
    for i in 0..n {
        let namelen = size_of::<libc::sockaddr_storage>() as u32;
        s.link(i, i, 1, namelen, CMSG_BUF_LEN);
    }
    if n == 0 {
        return Ok(0);
    }
    let flags = libc::MSG_WAITFORONE | if dont_wait { libc::MSG_DONTWAIT } else { 0 };
    let got = loop {
        // SAFETY: `hdrs[..n]` point at `n` iovecs, addresses and control
        // buffers owned by `s`, and the iovecs at buffers borrowed for `'a`,
        // which outlives this call; each length tells the kernel how much it
        // may write. No timeout pointer is passed.
        let rc = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                s.hdrs.as_mut_ptr(),
                n as u32,
                flags,
                ptr::null_mut(),
            )
        };
        if let Ok(got) = usize::try_from(rc) {
            break got;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    };
    for (i, info) in out.iter_mut().enumerate().take(got) {
        *info = parse_recv(&s.hdrs[i], &s.names[i]);
    }
    Ok(got)
}

/// Reads what the kernel wrote into one received message header.
fn parse_recv(hdr: &libc::mmsghdr, name: &libc::sockaddr_storage) -> RecvInfo {
    let msg = &hdr.msg_hdr;
    let mut info = RecvInfo {
        len: hdr.msg_len as usize,
        remote: sockaddr_to_std(name, msg.msg_namelen),
        truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
        ..RecvInfo::default()
    };
    // SAFETY: `msg` is a header the kernel just filled: `msg_control` points
    // at this message's control buffer and `msg_controllen` is the number of
    // bytes of it the kernel used. CMSG_FIRSTHDR returns null when that is
    // too short for a header.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !cmsg.is_null() {
        // SAFETY: a non-null header returned by CMSG_FIRSTHDR/CMSG_NXTHDR lies
        // entirely inside the used part of the control buffer.
        let head = unsafe { ptr::read_unaligned(cmsg) };
        let offset = cmsg as usize - msg.msg_control as usize;
        if offset + head.cmsg_len > msg.msg_controllen {
            break;
        }
        // SAFETY: CMSG_LEN(0) is arithmetic on a constant.
        let data_len = head
            .cmsg_len
            .saturating_sub(unsafe { libc::CMSG_LEN(0) } as usize);
        // SAFETY: `cmsg` is a valid header (above) whose `data_len` data
        // bytes were just checked to lie inside the control buffer.
        unsafe { read_cmsg(&head, libc::CMSG_DATA(cmsg), data_len, &mut info) };
        // SAFETY: `msg` and `cmsg` are as above; CMSG_NXTHDR returns null
        // when the next header would pass `msg_controllen`.
        cmsg = unsafe { libc::CMSG_NXTHDR(msg, cmsg) };
    }
    info
}

/// Decodes the control messages this crate asks for.
///
/// # Safety
/// `data` must point at `data_len` readable bytes.
unsafe fn read_cmsg(head: &libc::cmsghdr, data: *const u8, data_len: usize, info: &mut RecvInfo) {
    match (head.cmsg_level, head.cmsg_type) {
        (libc::SOL_UDP, libc::UDP_GRO) if data_len >= size_of::<libc::c_int>() => {
            // SAFETY: the caller guarantees `data_len` readable bytes.
            let size = unsafe { ptr::read_unaligned(data.cast::<libc::c_int>()) };
            info.gro_size = usize::try_from(size).unwrap_or(0);
        }
        (libc::IPPROTO_IP, libc::IP_PKTINFO) if data_len >= size_of::<libc::in_pktinfo>() => {
            // SAFETY: as above.
            let pi = unsafe { ptr::read_unaligned(data.cast::<libc::in_pktinfo>()) };
            // ipi_addr is the header destination address (ip(7)).
            info.local = Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(pi.ipi_addr.s_addr))));
        }
        (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) if data_len >= size_of::<libc::in6_pktinfo>() => {
            // SAFETY: as above.
            let pi = unsafe { ptr::read_unaligned(data.cast::<libc::in6_pktinfo>()) };
            info.local = Some(IpAddr::V6(Ipv6Addr::from(pi.ipi6_addr.s6_addr)));
        }
        // ip(7): IP_TOS comes as one byte, the header's TOS field.
        (libc::IPPROTO_IP, libc::IP_TOS) if data_len >= 1 => {
            // SAFETY: as above.
            info.tos = unsafe { ptr::read(data) };
        }
        // socket(7): SO_RXQ_OVFL comes as a u32, the socket's drop count.
        (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) if data_len >= size_of::<u32>() => {
            // SAFETY: as above.
            info.kernel_drops = Some(unsafe { ptr::read_unaligned(data.cast::<u32>()) });
        }
        // ipv6(7) / RFC 3542 §6.5: IPV6_TCLASS comes as an int.
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) if data_len >= size_of::<libc::c_int>() => {
            // SAFETY: as above.
            let tclass = unsafe { ptr::read_unaligned(data.cast::<libc::c_int>()) };
            info.tos = u8::try_from(tclass).unwrap_or(0);
        }
        _ => {}
    }
}

/// Sends `msgs` (as many as fit the scratch) in one `sendmmsg`, the
/// payload of packet `k` being `packet(k)`. Retries on `EINTR`. Returns the
/// number of messages the kernel accepted; an error means the first one
/// failed.
pub(crate) fn send_mmsg<'a>(
    fd: BorrowedFd<'_>,
    s: &mut MsgScratch,
    msgs: &[OutMsg],
    packet: impl Fn(usize) -> &'a [u8],
) -> io::Result<usize> {
    let mut iov_at = 0;
    let mut n = 0;
    for m in msgs.iter().take(s.max_msgs()) {
        if iov_at + m.count > s.max_iovs() {
            break;
        }
        for k in 0..m.count {
            let p = packet(m.first + k);
            // The kernel only reads through this pointer (sendmsg).
            s.iovs[iov_at + k] = libc::iovec {
                iov_base: p.as_ptr().cast_mut().cast(),
                iov_len: p.len(),
            };
        }
        let namelen = write_sockaddr(&m.remote, &mut s.names[n]);
        let controllen = write_send_cmsgs(&mut s.cmsgs[n], m);
        s.link(n, iov_at, m.count, namelen, controllen);
        iov_at += m.count;
        n += 1;
    }
    if n == 0 {
        return Ok(0);
    }
    loop {
        // SAFETY: `hdrs[..n]` point at addresses, control buffers and iovecs
        // owned by `s`, and the iovecs at packets borrowed for `'a`, which
        // outlives this call; the kernel only reads them.
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

/// Writes the control messages of `m` into `buf`; returns the bytes used.
fn write_send_cmsgs(buf: &mut CmsgBuf, m: &OutMsg) -> usize {
    let mut at = 0;
    if m.segment_size > 0 && m.count > 1 {
        // udp(7): UDP_SEGMENT takes a u16 and the kernel insists on
        // cmsg_len == CMSG_LEN(sizeof(__u16)).
        at = put_cmsg(buf, at, libc::SOL_UDP, libc::UDP_SEGMENT, m.segment_size);
    }
    match m.local {
        Some(IpAddr::V4(src)) => {
            // ip(7): on send, ipi_spec_dst is the source address to use.
            let pi = libc::in_pktinfo {
                ipi_ifindex: 0,
                ipi_spec_dst: libc::in_addr {
                    s_addr: u32::from(src).to_be(),
                },
                ipi_addr: libc::in_addr { s_addr: 0 },
            };
            at = put_cmsg(buf, at, libc::IPPROTO_IP, libc::IP_PKTINFO, pi);
        }
        Some(IpAddr::V6(src)) => {
            // ipv6(7) / RFC 3542 §6.1: ipi6_addr is the source address.
            let pi = libc::in6_pktinfo {
                ipi6_addr: libc::in6_addr {
                    s6_addr: src.octets(),
                },
                ipi6_ifindex: 0,
            };
            at = put_cmsg(buf, at, libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, pi);
        }
        None => {}
    }
    if m.tos != 0 {
        at = put_tos_cmsg(buf, at, m);
    }
    at
}

/// Appends the TOS control message of `m`, chosen by the destination's
/// family: `IP_TOS` (ip(7), an int) for IPv4 and IPv4-mapped destinations
/// (a dual-stack socket sends those through the IPv4 path, which reads
/// only `SOL_IP` options), `IPV6_TCLASS` (RFC 3542 §6.5, an int) otherwise.
fn put_tos_cmsg(buf: &mut CmsgBuf, at: usize, m: &OutMsg) -> usize {
    let value = libc::c_int::from(m.tos);
    let v4 = match m.remote {
        SocketAddr::V4(_) => true,
        SocketAddr::V6(v6) => v6.ip().to_ipv4_mapped().is_some(),
    };
    if v4 {
        put_cmsg(buf, at, libc::IPPROTO_IP, libc::IP_TOS, value)
    } else {
        put_cmsg(buf, at, libc::IPPROTO_IPV6, libc::IPV6_TCLASS, value)
    }
}

/// Appends one control message at `at`; returns the new end, or `at`
/// unchanged if it does not fit (it always does: see [`CMSG_BUF_LEN`]).
fn put_cmsg<T: Copy>(buf: &mut CmsgBuf, at: usize, level: i32, ty: i32, value: T) -> usize {
    // SAFETY: CMSG_SPACE / CMSG_LEN are arithmetic on their argument.
    let (space, len, data_at) = unsafe {
        let size = size_of::<T>() as u32;
        (
            libc::CMSG_SPACE(size) as usize,
            libc::CMSG_LEN(size) as usize,
            libc::CMSG_LEN(0) as usize,
        )
    };
    let Some(room) = buf.0.get_mut(at..at + space) else {
        return at;
    };
    // SAFETY: all-zero bytes are a valid `cmsghdr` (integers only).
    let mut head: libc::cmsghdr = unsafe { mem::zeroed() };
    head.cmsg_len = len;
    head.cmsg_level = level;
    head.cmsg_type = ty;
    // SAFETY: `room` is `space` = CMSG_SPACE(size_of::<T>()) bytes, which
    // holds the header at 0 and the value at CMSG_LEN(0); unaligned writes
    // need no alignment.
    unsafe {
        ptr::write_unaligned(room.as_mut_ptr().cast::<libc::cmsghdr>(), head);
        ptr::write_unaligned(room.as_mut_ptr().add(data_at).cast::<T>(), value);
    }
    at + space
}

/// Converts a kernel-filled address; `None` for families other than
/// IPv4/IPv6 or a length too short for the family.
fn sockaddr_to_std(ss: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    match i32::from(ss.ss_family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: `sockaddr_storage` is big and aligned enough for every
            // address type, and its family says it holds a `sockaddr_in`.
            let sin = unsafe { &*ptr::from_ref(ss).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for `sockaddr_in6`.
            let sin6 = unsafe { &*ptr::from_ref(ss).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            let port = u16::from_be(sin6.sin6_port);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                port,
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Writes `addr` into `ss`; returns its length.
fn write_sockaddr(addr: &SocketAddr, ss: &mut libc::sockaddr_storage) -> libc::socklen_t {
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: `sockaddr_storage` is bigger than and at least as
            // aligned as `sockaddr_in`.
            unsafe { ptr::write(ptr::from_mut(ss).cast::<libc::sockaddr_in>(), sin) };
            size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for `sockaddr_in6`.
            unsafe { ptr::write(ptr::from_mut(ss).cast::<libc::sockaddr_in6>(), sin6) };
            size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

/// Sets `SO_NO_CHECK` (send UDP/IPv4 without checksum), which makes the
/// kernel refuse GSO with `EINVAL`: how the tests reach the GSO fallback.
#[cfg(test)]
pub(crate) fn set_no_check(fd: BorrowedFd<'_>) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: passes a pointer to a live c_int and its exact size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NO_CHECK,
            ptr::from_ref(&one).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The path-MTU discovery modes this crate uses, of ip(7)
/// `IP_MTU_DISCOVER` and ipv6(7) `IPV6_MTU_DISCOVER`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PmtuDiscovery {
    /// `IP_PMTUDISC_DO` / `IPV6_PMTUDISC_DO`: never fragment locally, set
    /// DF on IPv4; a packet larger than the path MTU fails with `EMSGSIZE`.
    Do,
    /// `IP_PMTUDISC_DONT` / `IPV6_PMTUDISC_DONT`: fragment locally to the
    /// path MTU, no DF on IPv4.
    Dont,
}

/// Sets the path-MTU discovery mode of `fd` at the IPv4 level (ip(7)
/// `IP_MTU_DISCOVER`, `ipv6_level` false) or the IPv6 level (ipv6(7)
/// `IPV6_MTU_DISCOVER`). Neither nix nor socket2 offers the option.
pub(crate) fn set_mtu_discover(
    fd: BorrowedFd<'_>,
    ipv6_level: bool,
    mode: PmtuDiscovery,
) -> io::Result<()> {
    let value: libc::c_int = match (ipv6_level, mode) {
        (false, PmtuDiscovery::Do) => libc::IP_PMTUDISC_DO,
        (false, PmtuDiscovery::Dont) => libc::IP_PMTUDISC_DONT,
        (true, PmtuDiscovery::Do) => libc::IPV6_PMTUDISC_DO,
        (true, PmtuDiscovery::Dont) => libc::IPV6_PMTUDISC_DONT,
    };
    if ipv6_level {
        packet::set_option(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, &value)
    } else {
        packet::set_option(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, &value)
    }
}

/// The path-MTU discovery mode of `fd` (ip(7) `IP_MTU_DISCOVER` or ipv6(7)
/// `IPV6_MTU_DISCOVER`), as the kernel's integer.
#[cfg(test)]
pub(crate) fn mtu_discover(fd: BorrowedFd<'_>, ipv6_level: bool) -> io::Result<libc::c_int> {
    let (level, name) = if ipv6_level {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER)
    };
    int_option(fd, level, name)
}

/// `getsockopt(fd, level, name)` of an option whose value is an int.
fn int_option(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live and `len` is `value`'s size; the
    // kernel writes at most that much.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            ptr::from_mut(&mut value).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Blocks every ICMP type from reaching a raw ICMP (`v6` false: raw(7)
/// `ICMP_FILTER`, a bit per type) or ICMPv6 socket (RFC 3542 §3.2
/// `ICMP6_FILTER`, all types blocked), so a send-only socket queues
/// nothing.
pub(crate) fn block_all_icmp(fd: BorrowedFd<'_>, v6: bool) -> io::Result<()> {
    /// raw(7): `ICMP_FILTER` at level `SOL_RAW`.
    const ICMP_FILTER: libc::c_int = 1;
    /// RFC 3542 §3.2: `ICMP6_FILTER` at level `IPPROTO_ICMPV6`.
    const ICMP6_FILTER: libc::c_int = 1;
    if v6 {
        // struct icmp6_filter: 256 bits, a set bit blocks the type.
        packet::set_option(fd, libc::IPPROTO_ICMPV6, ICMP6_FILTER, &[u32::MAX; 8])
    } else {
        packet::set_option(fd, libc::SOL_RAW, ICMP_FILTER, &u32::MAX)
    }
}

/// `getsockopt(IPV6_MTU)` on a connected IPv6 socket: the path MTU the
/// kernel knows for its peer (ipv6(7)).
pub(crate) fn ipv6_path_mtu(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mtu = int_option(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU)?;
    u32::try_from(mtu).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
}

/// Moves the calling thread to `SCHED_FIFO` at `priority` (1..=99).
pub(crate) fn set_fifo_priority(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 names the calling thread; `param` is a live
    // sched_param the kernel only reads.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, ptr::from_ref(&param)) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Moves the calling thread to `SCHED_OTHER` (priority 0).
pub(crate) fn set_normal_policy() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 names the calling thread; `param` is a live
    // sched_param the kernel only reads.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, ptr::from_ref(&param)) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's scheduling policy.
#[cfg(test)]
pub(crate) fn current_policy() -> i32 {
    // SAFETY: pid 0 names the calling thread; no pointer is passed.
    unsafe { libc::sched_getscheduler(0) }
}

/// A duplicate (close-on-exec) of descriptor `raw`, which someone else
/// owns (a C library that hands out only the number).
pub(crate) fn duplicate_raw_fd(raw: std::os::fd::RawFd) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: fcntl only reads its integer arguments; an fd that is not
    // open gives EBADF, never undefined behaviour.
    let dup = unsafe { libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `dup` was just created by this fcntl and nothing else owns it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(dup) })
}

/// `struct ethtool_value` (linux/ethtool.h): a command and one value.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// One `SIOCETHTOOL` request carrying an `ethtool_value` for `interface`
/// (in the calling thread's network namespace) through the datagram
/// socket `fd`; returns the value the kernel left (the answer of a get).
pub(crate) fn ethtool_value(
    fd: BorrowedFd<'_>,
    interface: &str,
    cmd: u32,
    data: u32,
) -> io::Result<u32> {
    let name = interface.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface name must be 1..15 octets without NUL",
        ));
    }
    let mut value = EthtoolValue { cmd, data };
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(name) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_data = ptr::from_mut(&mut value).cast();
    // SAFETY: `req` names a NUL-terminated interface (zeroed tail) and
    // points at `value`, a live ethtool_value the kernel reads and writes
    // for the duration of this call only.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL, ptr::from_mut(&mut req)) };
    if rc == 0 {
        Ok(value.data)
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockaddr_round_trips() {
        let mut ss = MsgScratch::new(1, 1).names[0];
        for addr in [
            "192.0.2.7:4500",
            "[2001:db8::1]:500",
            "[::ffff:192.0.2.1]:1",
        ] {
            let addr: SocketAddr = addr.parse().unwrap();
            let len = write_sockaddr(&addr, &mut ss);
            assert_eq!(sockaddr_to_std(&ss, len), Some(addr));
        }
        assert_eq!(sockaddr_to_std(&ss, 4), None, "too short for the family");
    }

    #[test]
    fn send_cmsgs_layout() {
        let mut buf = CmsgBuf([0xAA; CMSG_BUF_LEN]);
        let m = OutMsg {
            remote: "192.0.2.7:4500".parse().unwrap(),
            local: Some("2001:db8::2".parse().unwrap()),
            first: 0,
            count: 3,
            segment_size: 1400,
            tos: 0,
        };
        let used = write_send_cmsgs(&mut buf, &m);
        // CMSG_SPACE(2) + CMSG_SPACE(20) on LP64.
        assert_eq!(used, 24 + 40);
        assert_eq!(u16::from_ne_bytes([buf.0[16], buf.0[17]]), 1400);
        assert_eq!(
            &buf.0[24 + 16..24 + 32],
            &"2001:db8::2".parse::<Ipv6Addr>().unwrap().octets()
        );
        let single = OutMsg {
            count: 1,
            local: None,
            ..m
        };
        assert_eq!(
            write_send_cmsgs(&mut buf, &single),
            0,
            "no GSO for one packet"
        );
    }

    /// (level, type, value) of the one control message in `buf`.
    fn only_cmsg(buf: &CmsgBuf, used: usize) -> (i32, i32, i32) {
        assert_eq!(used, 24, "CMSG_SPACE(4) on LP64");
        // LP64 `cmsghdr`: cmsg_len (8 bytes), cmsg_level, cmsg_type, data.
        let int_at = |at: usize| {
            i32::from_ne_bytes([buf.0[at], buf.0[at + 1], buf.0[at + 2], buf.0[at + 3]])
        };
        (int_at(8), int_at(12), int_at(16))
    }

    #[test]
    fn tos_cmsg_follows_the_destination_family() {
        let mut buf = CmsgBuf([0; CMSG_BUF_LEN]);
        let m = |remote: &str, tos| OutMsg {
            remote: remote.parse().unwrap(),
            local: None,
            first: 0,
            count: 1,
            segment_size: 0,
            tos,
        };
        let v4 = write_send_cmsgs(&mut buf, &m("192.0.2.7:4500", 0xb8 | 2));
        assert_eq!(only_cmsg(&buf, v4), (libc::IPPROTO_IP, libc::IP_TOS, 0xba));
        // A dual-stack socket's IPv4-mapped destination takes the IPv4 path.
        let mapped = write_send_cmsgs(&mut buf, &m("[::ffff:192.0.2.7]:4500", 3));
        assert_eq!(only_cmsg(&buf, mapped), (libc::IPPROTO_IP, libc::IP_TOS, 3));
        let v6 = write_send_cmsgs(&mut buf, &m("[2001:db8::7]:4500", 1));
        assert_eq!(
            only_cmsg(&buf, v6),
            (libc::IPPROTO_IPV6, libc::IPV6_TCLASS, 1)
        );
        assert_eq!(write_send_cmsgs(&mut buf, &m("192.0.2.7:1", 0)), 0);
    }
}
