use super::*;

/// Builds a block body (the block after its 48-octet descriptor) holding
/// `frames`, laid out as the kernel does: each `tpacket3_hdr` 16-aligned,
/// the `sockaddr_ll` after it, the frame at `tp_mac`.
struct BlockBuilder {
    body: Vec<u8>,
    offsets: Vec<usize>,
}

/// `tp_mac` of an Ethernet frame with no reserve: TPACKET_ALIGN(68 + 16) - 14.
const MAC_OFFSET: usize = 82;

impl BlockBuilder {
    fn new() -> Self {
        Self {
            body: Vec::new(),
            offsets: Vec::new(),
        }
    }

    fn frame(mut self, data: &[u8], len: u32, pkttype: u8, status: u32, tci: u32) -> Self {
        let at = self.body.len();
        let total = (MAC_OFFSET + data.len()).next_multiple_of(16);
        self.body.resize(at + total, 0);
        let put32 = |body: &mut Vec<u8>, off: usize, v: u32| {
            body[at + off..at + off + 4].copy_from_slice(&v.to_ne_bytes())
        };
        put32(&mut self.body, frame::NEXT_OFFSET, total as u32);
        put32(&mut self.body, frame::SEC, 1_700_000_000);
        put32(&mut self.body, frame::NSEC, 5);
        put32(&mut self.body, frame::SNAPLEN, data.len() as u32);
        put32(&mut self.body, frame::LEN, len);
        put32(&mut self.body, frame::STATUS, status);
        put32(&mut self.body, frame::VLAN_TCI, tci);
        self.body[at + frame::MAC..at + frame::MAC + 2]
            .copy_from_slice(&(MAC_OFFSET as u16).to_ne_bytes());
        self.body[at + frame::PKTTYPE] = pkttype;
        self.body[at + MAC_OFFSET..at + MAC_OFFSET + data.len()].copy_from_slice(data);
        self.offsets.push(at);
        self
    }

    /// The body with the last frame's `tp_next_offset` zeroed, as the
    /// kernel closes a block.
    fn finish(mut self) -> Vec<u8> {
        if let Some(&last) = self.offsets.last() {
            self.body[last..last + 4].fill(0);
        }
        self.body.resize(self.body.len() + 64, 0xee);
        self.body
    }
}

fn collect(num: u32, first: u32, body: &[u8]) -> (Vec<(Vec<u8>, FrameMeta)>, BlockWalk) {
    let mut got = Vec::new();
    let walk = walk_block(num, first, body, &mut |d: &[u8], m| {
        got.push((d.to_vec(), m))
    });
    (got, walk)
}

const FIRST: u32 = BLOCK_DESC_LEN as u32;

#[test]
fn frames_are_read_in_place_with_their_meta() {
    let vlan_valid = libc::TP_STATUS_USER | libc::TP_STATUS_VLAN_VALID;
    let body = BlockBuilder::new()
        .frame(
            b"first frame",
            11,
            libc::PACKET_HOST,
            libc::TP_STATUS_USER,
            0,
        )
        .frame(b"second", 1500, libc::PACKET_OTHERHOST, vlan_valid, 0xb02a)
        .frame(
            b"third",
            5,
            libc::PACKET_BROADCAST,
            libc::TP_STATUS_CSUMNOTREADY | TP_STATUS_GSO_TCP,
            0,
        )
        .finish();
    let (got, walk) = collect(3, FIRST, &body);
    assert_eq!(
        walk,
        BlockWalk {
            frames: 3,
            truncated: 1,
            malformed: false
        }
    );
    assert_eq!(got[0].0, b"first frame");
    let first = got[0].1;
    assert_eq!(
        (first.packet_type, first.len, first.truncated, first.vlan),
        (PacketType::HOST, 11, false, None)
    );
    assert_eq!(first.timestamp, Duration::new(1_700_000_000, 5));
    assert!(!first.checksum_pending && !first.gso);
    let second = got[1].1;
    assert_eq!(
        (second.packet_type, second.len, second.truncated),
        (PacketType::OTHER_HOST, 1500, true)
    );
    assert_eq!(second.vlan, Some(0xb02a));
    let third = got[2].1;
    assert_eq!(third.packet_type, PacketType::BROADCAST);
    assert!(third.checksum_pending && third.gso);
}

#[test]
fn offsets_outside_the_block_stop_the_walk() {
    let body = BlockBuilder::new()
        .frame(b"one", 3, 0, 0, 0)
        .frame(b"two", 3, 0, 0, 0)
        .finish();
    // More frames announced than the chain holds: the last next offset is 0.
    let (got, walk) = collect(3, FIRST, &body);
    assert_eq!((got.len(), walk.malformed), (2, true));
    // A first offset inside the descriptor, or past the block.
    assert!(collect(1, FIRST - 1, &body).1.malformed);
    assert!(collect(1, FIRST + body.len() as u32, &body).1.malformed);
    // A snaplen past the block.
    let mut bad = body.clone();
    bad[frame::SNAPLEN..frame::SNAPLEN + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
    let (got, walk) = collect(2, FIRST, &bad);
    assert_eq!((got.len(), walk.malformed), (0, true));
    // A tp_mac past the block.
    let mut bad = body.clone();
    bad[frame::MAC..frame::MAC + 2].copy_from_slice(&u16::MAX.to_ne_bytes());
    assert!(collect(1, FIRST, &bad).1.malformed);
    // An empty block is fine.
    assert_eq!(collect(0, 0, &[]).1, BlockWalk::default());
}

/// Arbitrary descriptor values and block contents never panic and never
/// hand out more frames than announced (xorshift, fixed seed).
#[test]
fn arbitrary_blocks_never_panic() {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..2000 {
        let len = (next() % 600) as usize;
        let mut body: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if len > 100 && next() % 2 == 0 {
            // Plausible small offsets, so the walk goes past the first frame.
            body[frame::MAC..frame::MAC + 2].copy_from_slice(&82u16.to_ne_bytes());
            body[frame::SNAPLEN..frame::SNAPLEN + 4]
                .copy_from_slice(&((next() % 32) as u32).to_ne_bytes());
            body[..4].copy_from_slice(&((next() % 200) as u32).to_ne_bytes());
        }
        let num = (next() % 8) as u32;
        let first = if next() % 2 == 0 {
            FIRST
        } else {
            next() as u32
        };
        let (got, walk) = collect(num, first, &body);
        assert!(got.len() as u32 <= num);
        assert_eq!(walk.frames, got.len() as u64);
        assert!(walk.malformed || got.len() as u32 == num);
    }
}

#[test]
fn ring_requests_are_checked_before_the_kernel_sees_them() {
    let ok = PacketSocketConfig::new("eth0");
    let req = ok.ring_request().unwrap();
    assert_eq!(
        (req.tp_block_size, req.tp_block_nr, req.tp_frame_size),
        (256 << 10, 64, 2048)
    );
    assert_eq!((req.tp_frame_nr, req.tp_retire_blk_tov), (128 * 64, 2));
    assert!(ok.ignore_outgoing && !ok.promiscuous);
    let bad = |change: fn(&mut PacketSocketConfig)| {
        let mut c = PacketSocketConfig::new("eth0");
        change(&mut c);
        c.ring_request().unwrap_err().kind()
    };
    assert_eq!(bad(|c| c.block_size = 5000), io::ErrorKind::InvalidInput);
    assert_eq!(bad(|c| c.block_size = 0), io::ErrorKind::InvalidInput);
    assert_eq!(bad(|c| c.frame_size = 2050), io::ErrorKind::InvalidInput);
    assert_eq!(bad(|c| c.frame_size = 64), io::ErrorKind::InvalidInput);
    assert_eq!(bad(|c| c.frame_size = 1 << 20), io::ErrorKind::InvalidInput);
    assert_eq!(bad(|c| c.block_count = 0), io::ErrorKind::InvalidInput);
    assert_eq!(
        bad(|c| c.block_count = u32::MAX),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(
        bad(|c| c.block_timeout = Duration::from_micros(500)),
        io::ErrorKind::InvalidInput
    );
    let mut small = PacketSocketConfig::new("lo");
    small.frame_size = 80;
    small.block_size = 4096;
    assert_eq!(small.ring_request().unwrap().tp_frame_nr, 51 * 64);
}

#[test]
fn packet_type_names() {
    assert_eq!(format!("{:?}", PacketType::OTHER_HOST), "OTHER_HOST");
    assert_eq!(format!("{:?}", PacketType(9)), "PacketType(9)");
    assert_eq!(PacketType::HOST.name(), Some("HOST"));
}

#[test]
fn socket_errors_stop_a_batch_frame_errors_do_not() {
    assert!(is_socket_error(&io::Error::from_raw_os_error(libc::EAGAIN)));
    assert!(is_socket_error(&io::Error::from_raw_os_error(
        libc::ENOBUFS
    )));
    assert!(is_socket_error(&io::Error::from_raw_os_error(libc::EBADF)));
    assert!(!is_socket_error(&io::Error::from_raw_os_error(
        libc::EINVAL
    )));
    assert!(!is_socket_error(&io::Error::from_raw_os_error(
        libc::EMSGSIZE
    )));
    assert!(!is_socket_error(&io::Error::from_raw_os_error(
        libc::ENETDOWN
    )));
}

#[test]
fn unknown_interfaces_are_not_found() {
    let err = PacketSocket::open(&PacketSocketConfig::new("phx-no-such0")).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
}

/// A worker thread owns the socket; another may share it to send.
#[test]
fn sockets_move_between_threads() {
    fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<PacketSocket>();
}
