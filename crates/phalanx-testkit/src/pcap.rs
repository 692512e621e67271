//! A minimal pcap writer for captures taken in tests.
//!
//! Classic libpcap format (not pcapng): a 24-byte global header, then per
//! packet a 16-byte record header and the bytes. Link types carry raw IP
//! packets, which is what every Phalanx core produces, so no Ethernet
//! header is invented. Timestamps are passed in (sans-IO: tests run on
//! virtual time). Written little-endian; readers detect the byte order
//! from the magic number. Open the result with `tshark -r`.

use std::io::{self, Write};
use std::time::Duration;

/// Magic number of a microsecond-resolution classic pcap file.
const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Format version 2.4, the only one in use.
const VERSION: (u16, u16) = (2, 4);
/// Largest packet the header promises (captured bytes per record).
pub const SNAPLEN: u32 = 262_144;

/// The link-layer header type of every record (tcpdump.org "LINKTYPE_" values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LinkType(pub u32);

impl LinkType {
    /// LINKTYPE_RAW (101): raw IPv4 or IPv6, told apart by the version nibble.
    pub const RAW: LinkType = LinkType(101);
    /// LINKTYPE_IPV4 (228): raw IPv4 only.
    pub const IPV4: LinkType = LinkType(228);
    /// LINKTYPE_IPV6 (229): raw IPv6 only.
    pub const IPV6: LinkType = LinkType(229);
}

/// Writes pcap records to any [`Write`].
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    packets: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header and returns the writer.
    pub fn new(mut out: W, link: LinkType) -> io::Result<Self> {
        let mut header = [0u8; 24];
        header[0..4].copy_from_slice(&MAGIC_MICROS.to_le_bytes());
        header[4..6].copy_from_slice(&VERSION.0.to_le_bytes());
        header[6..8].copy_from_slice(&VERSION.1.to_le_bytes());
        // thiszone (8..12) and sigfigs (12..16) are zero.
        header[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        header[20..24].copy_from_slice(&link.0.to_le_bytes());
        out.write_all(&header)?;
        Ok(PcapWriter { out, packets: 0 })
    }

    /// Appends one packet captured at `timestamp` (since the epoch or since
    /// the start of the test: readers only show it). Packets longer than
    /// [`SNAPLEN`] are cut, as a capture would.
    pub fn write_packet(&mut self, timestamp: Duration, data: &[u8]) -> io::Result<()> {
        let captured = &data[..data.len().min(SNAPLEN as usize)];
        let seconds = u32::try_from(timestamp.as_secs()).unwrap_or(u32::MAX);
        let mut record = [0u8; 16];
        record[0..4].copy_from_slice(&seconds.to_le_bytes());
        record[4..8].copy_from_slice(&timestamp.subsec_micros().to_le_bytes());
        record[8..12].copy_from_slice(&len_u32(captured.len()).to_le_bytes());
        record[12..16].copy_from_slice(&len_u32(data.len()).to_le_bytes());
        self.out.write_all(&record)?;
        self.out.write_all(captured)?;
        self.packets += 1;
        Ok(())
    }

    /// Packets written so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Flushes and returns the underlying writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// A whole capture in memory: packets are stamped 1 ms apart from time 0.
pub fn capture(link: LinkType, packets: &[&[u8]]) -> Vec<u8> {
    let write_all = || -> io::Result<Vec<u8>> {
        let mut w = PcapWriter::new(Vec::new(), link)?;
        for (i, p) in packets.iter().enumerate() {
            w.write_packet(Duration::from_millis(i as u64), p)?;
        }
        w.into_inner()
    };
    // Writing to a Vec<u8> cannot fail.
    write_all().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_header_and_record_layout() {
        let pkt = [0x45u8, 0, 0, 20];
        let bytes = capture(LinkType::RAW, &[&pkt, &pkt]);
        assert_eq!(bytes.len(), 24 + 2 * (16 + 4));
        assert_eq!(&bytes[0..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(&bytes[4..8], &[2, 0, 4, 0]);
        assert_eq!(&bytes[20..24], &101u32.to_le_bytes());
        let second = &bytes[24 + 20..];
        assert_eq!(&second[0..4], &0u32.to_le_bytes());
        assert_eq!(
            &second[4..8],
            &1000u32.to_le_bytes(),
            "1 ms in microseconds"
        );
        assert_eq!(&second[8..12], &4u32.to_le_bytes());
        assert_eq!(&second[12..16], &4u32.to_le_bytes());
        assert_eq!(&second[16..], &pkt);
    }

    #[test]
    fn oversized_packets_are_cut_to_snaplen() {
        let big = vec![0u8; SNAPLEN as usize + 10];
        let mut w = PcapWriter::new(Vec::new(), LinkType::IPV6).unwrap();
        w.write_packet(Duration::from_secs(3), &big).unwrap();
        assert_eq!(w.packets(), 1);
        let out = w.into_inner().unwrap();
        assert_eq!(&out[24..28], &3u32.to_le_bytes());
        assert_eq!(&out[32..36], &SNAPLEN.to_le_bytes());
        assert_eq!(&out[36..40], &(SNAPLEN + 10).to_le_bytes());
        assert_eq!(out.len(), 24 + 16 + SNAPLEN as usize);
    }
}
