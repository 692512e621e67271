//! UDP over loopback: packets per second with batches of 1 and 64, GSO and
//! GRO off and on. A sender thread blasts 1400-byte datagrams (an ESP
//! packet on a 1500-byte path) at a receiver thread for a fixed time;
//! received packets per second is the figure of merit. Bounded: each case
//! runs `SECONDS` (default 1.5) plus a short drain.
//!
//! ```text
//! cargo run --release -p phalanx-io --example udp_loopback [SECONDS]
//! ```

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use phalanx_io::limits::DEFAULT_HEADROOM;
use phalanx_io::poll::{Interest, PollSet};
use phalanx_io::udp::{UdpConfig, UdpSocket};
use phalanx_io::{PacketBatch, PacketMeta, SocketStats};

const PAYLOAD: usize = 1400;

/// One measured configuration.
struct Case {
    name: &'static str,
    batch: usize,
    gso: bool,
    gro: bool,
}

const CASES: [Case; 5] = [
    Case {
        name: "batch 1,  GSO off, GRO off",
        batch: 1,
        gso: false,
        gro: false,
    },
    Case {
        name: "batch 64, GSO off, GRO off",
        batch: 64,
        gso: false,
        gro: false,
    },
    Case {
        name: "batch 64, GSO on,  GRO off",
        batch: 64,
        gso: true,
        gro: false,
    },
    Case {
        name: "batch 64, GSO off, GRO on ",
        batch: 64,
        gso: false,
        gro: true,
    },
    Case {
        name: "batch 64, GSO on,  GRO on ",
        batch: 64,
        gso: true,
        gro: true,
    },
];

/// What one run measured.
struct Outcome {
    seconds: f64,
    sent: SocketStats,
    received: SocketStats,
}

fn main() -> io::Result<()> {
    let seconds: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.5);
    let duration = Duration::from_secs_f64(seconds.clamp(0.1, 10.0));
    println!("UDP loopback, {PAYLOAD}-byte datagrams, {duration:?} per case");
    println!(
        "{:<28} {:>12} {:>12} {:>9} {:>8} {:>10} {:>10}",
        "case", "sent pkt/s", "recv pkt/s", "Gbit/s", "loss %", "pkts/send", "pkts/recv"
    );
    let mut baseline = None;
    for case in &CASES {
        let out = run(case, duration)?;
        let rate = out.received.packets_received as f64 / out.seconds;
        let base = *baseline.get_or_insert(rate);
        print_row(case, &out, rate / base);
    }
    Ok(())
}

fn print_row(case: &Case, out: &Outcome, ratio: f64) {
    let (sent, recv) = (
        out.sent.packets_sent as f64,
        out.received.packets_received as f64,
    );
    let per = |packets: f64, calls: u64| packets / calls.max(1) as f64;
    println!(
        "{:<28} {:>12.0} {:>12.0} {:>9.2} {:>8.1} {:>10.1} {:>10.1}   x{ratio:.1}",
        case.name,
        sent / out.seconds,
        recv / out.seconds,
        recv * (PAYLOAD * 8) as f64 / out.seconds / 1e9,
        100.0 * (sent - recv).max(0.0) / sent.max(1.0),
        per(sent, out.sent.send_calls),
        per(recv, out.received.recv_calls),
    );
}

fn socket(gro: bool, gso: bool) -> io::Result<UdpSocket> {
    let mut config = UdpConfig::new("127.0.0.1:0".parse().map_err(io::Error::other)?);
    config.gro = gro;
    config.gso = gso;
    config.nonblocking = true;
    config.recv_buffer = 32 << 20;
    UdpSocket::bind(&config)
}

fn run(case: &Case, duration: Duration) -> io::Result<Outcome> {
    let mut rx = socket(case.gro, false)?;
    let mut tx = socket(false, case.gso)?;
    let to = rx.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let receiver = {
        let (stop, size) = (Arc::clone(&stop), case.batch);
        std::thread::spawn(move || receive(&mut rx, size, &stop).map(|()| rx.stats()))
    };
    let mut batch = PacketBatch::new(case.batch, 2048, DEFAULT_HEADROOM);
    for i in 0..case.batch {
        batch.push(
            &[i as u8; PAYLOAD],
            PacketMeta {
                remote: to,
                ..PacketMeta::default()
            },
        );
    }
    let start = Instant::now();
    send_for(&mut tx, &batch, duration)?;
    let seconds = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let received = receiver
        .join()
        .map_err(|_| io::Error::other("receiver panicked"))??;
    Ok(Outcome {
        seconds,
        sent: tx.stats(),
        received,
    })
}

/// Sends `batch` over and over for `duration`, waiting when the socket
/// buffer is full.
fn send_for(tx: &mut UdpSocket, batch: &PacketBatch, duration: Duration) -> io::Result<()> {
    let deadline = Instant::now() + duration;
    while Instant::now() < deadline {
        let mut done = 0;
        while done < batch.len() {
            match tx.send_batch_from(batch, done) {
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait(tx, Interest::WRITE)?,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Receives into batches of `size` until `stop`.
fn receive(rx: &mut UdpSocket, size: usize, stop: &AtomicBool) -> io::Result<()> {
    let mut batch = PacketBatch::new(size, 2048, DEFAULT_HEADROOM);
    while !stop.load(Ordering::Relaxed) {
        batch.clear();
        match rx.recv_batch(&mut batch) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait(rx, Interest::READ)?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn wait(socket: &UdpSocket, interest: Interest) -> io::Result<()> {
    let mut set = PollSet::with_capacity(1);
    set.add(std::os::fd::AsFd::as_fd(socket), interest);
    set.wait(Some(Duration::from_millis(10))).map(|_| ())
}
