//! Fragmentation of an IPv4 packet (RFC 791 §3.2, "Fragmentation and
//! reassembly"; RFC 815 for the receiver's view).
//!
//! A gateway that must send an inner IPv4 packet without DF over a path
//! too small for its encapsulation fragments it before encryption
//! (RFC 4459 §3: "inner fragmentation"), so that the peer gateway
//! forwards fragments and the destination host reassembles them. Every
//! fragment but the last carries a multiple of 8 data octets; each keeps
//! the identification, protocol, addresses, TOS and TTL of the original;
//! the first keeps every option, later ones only the options whose copied
//! flag is set (RFC 791 §3.1, "Options"). A packet that was itself a
//! fragment is split within its own range: offsets add up, and its More
//! Fragments flag stays on its last piece.
//!
//! No allocation: [`Ipv4Fragments`] writes one fragment at a time into a
//! buffer the caller owns.

use super::{Ipv4Packet, HEADER_LEN as MIN_HEADER_LEN};
use crate::checksum;
use crate::error::{Error, Result};

/// Largest IPv4 header (IHL 15).
const MAX_HEADER_LEN: usize = 60;

/// Option type End of Option List (RFC 791).
const OPTION_END: u8 = 0;
/// Option type No Operation (RFC 791).
const OPTION_NOP: u8 = 1;
/// The copied flag in an option type octet (RFC 791 §3.1).
const OPTION_COPIED: u8 = 0x80;

/// The fragments of one IPv4 packet, written one at a time.
#[derive(Debug, Clone)]
pub struct Ipv4Fragments<'a> {
    packet: &'a [u8],
    header_len: usize,
    /// The header of every fragment after the first: fixed part and copied
    /// options, padded to a multiple of 4.
    later_header: [u8; MAX_HEADER_LEN],
    later_header_len: usize,
    /// The original's offset (in octets) and More Fragments flag.
    base_offset: usize,
    more_after: bool,
    /// Next data octet to send, from the start of the original's data.
    next: usize,
    /// Data octets per fragment but the last, for the first fragment and
    /// for the later ones (their headers may differ in length).
    first_step: usize,
    later_step: usize,
}

impl<'a> Ipv4Fragments<'a> {
    /// Plans the fragments of `packet` (a whole IPv4 packet whose header
    /// checks) so that none exceeds `mtu` octets. Refuses a packet with
    /// DF set ([`Error::Malformed`]: it must not be fragmented, RFC 791
    /// §3.1), an MTU that cannot carry a header and 8 data octets
    /// ([`Error::Truncated`]), and a malformed packet.
    pub fn new(packet: &'a [u8], mtu: usize) -> Result<Self> {
        let ip = Ipv4Packet::new_checked(packet)?;
        if ip.dont_frag() {
            return Err(Error::Malformed);
        }
        let header_len = ip.header_len();
        let total = usize::from(ip.total_len());
        let packet = &packet[..total];
        let (later_header, later_header_len) = later_header(&packet[..header_len]);
        let step = |header: usize| {
            mtu.checked_sub(header)
                .map(|room| room & !7)
                .filter(|&s| s > 0)
        };
        let first_step = step(header_len).ok_or(Error::Truncated)?;
        let later_step = step(later_header_len).ok_or(Error::Truncated)?;
        Ok(Ipv4Fragments {
            packet,
            header_len,
            later_header,
            later_header_len,
            base_offset: usize::from(ip.frag_offset()) * 8,
            more_after: ip.more_frags(),
            next: 0,
            first_step,
            later_step,
        })
    }

    /// Octets of data of the original (behind its header).
    fn data_len(&self) -> usize {
        self.packet.len() - self.header_len
    }

    /// How many fragments remain to be written.
    pub fn remaining(&self) -> usize {
        let left = self.data_len().saturating_sub(self.next);
        if left == 0 {
            return usize::from(self.next == 0);
        }
        if self.next == 0 {
            let rest = left.saturating_sub(self.first_step);
            1 + rest.div_ceil(self.later_step)
        } else {
            left.div_ceil(self.later_step)
        }
    }

    /// Writes the next fragment into `out`; returns its length, or `None`
    /// when every fragment was written or `out` is too short for it.
    pub fn write_next(&mut self, out: &mut [u8]) -> Option<usize> {
        if self.remaining() == 0 {
            return None;
        }
        let first = self.next == 0;
        let (header, step) = if first {
            (&self.packet[..self.header_len], self.first_step)
        } else {
            (&self.later_header[..self.later_header_len], self.later_step)
        };
        let left = self.data_len() - self.next;
        let take = left.min(step);
        let last = take == left;
        let len = header.len() + take;
        let out = out.get_mut(..len)?;
        out[..header.len()].copy_from_slice(header);
        let data_at = self.header_len + self.next;
        out[header.len()..].copy_from_slice(&self.packet[data_at..data_at + take]);
        let mut ip = Ipv4Packet::new_unchecked(&mut out[..]);
        ip.set_header_len(header.len());
        // Both fit 16 bits: a fragment is shorter than its original, and
        // the offsets stay within it.
        ip.set_total_len(len as u16);
        ip.clear_flags_frag();
        ip.set_more_frags(!last || self.more_after);
        ip.set_frag_offset(((self.base_offset + self.next) / 8) as u16);
        ip.set_checksum(0);
        let sum = checksum::checksum(&out[..header.len()]);
        Ipv4Packet::new_unchecked(&mut out[..]).set_checksum(sum);
        self.next += take;
        if take == 0 {
            // An empty original (header only) is one fragment: itself.
            self.next = usize::MAX / 2;
        }
        Some(len)
    }
}

/// The header of the later fragments: the fixed header and the options
/// with the copied flag, padded with End of Option List to 4 octets.
fn later_header(header: &[u8]) -> ([u8; MAX_HEADER_LEN], usize) {
    let mut out = [0u8; MAX_HEADER_LEN];
    out[..MIN_HEADER_LEN].copy_from_slice(&header[..MIN_HEADER_LEN]);
    let mut len = MIN_HEADER_LEN;
    let mut options = &header[MIN_HEADER_LEN..];
    while let Some(&kind) = options.first() {
        let size = match kind {
            OPTION_END => break,
            OPTION_NOP => 1,
            _ => match options.get(1) {
                Some(&n) if usize::from(n) >= 2 && usize::from(n) <= options.len() => {
                    usize::from(n)
                }
                // A malformed option ends the copying; the fixed header is
                // still a valid header.
                _ => break,
            },
        };
        if kind & OPTION_COPIED != 0 {
            out[len..len + size].copy_from_slice(&options[..size]);
            len += size;
        }
        options = &options[size..];
    }
    (out, len.next_multiple_of(4))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IpProtocol;
    use core::net::Ipv4Addr;

    fn packet(data: usize, options: &[u8], df: bool) -> alloc::vec::Vec<u8> {
        let header = MIN_HEADER_LEN + options.len();
        let mut p = alloc::vec![0u8; header + data];
        let mut ip = Ipv4Packet::new_unchecked(&mut p[..]);
        ip.set_version(4);
        ip.set_header_len(header);
        ip.set_dscp_ecn(0x28);
        ip.set_total_len((header + data) as u16);
        ip.set_ident(0x1234);
        ip.clear_flags_frag();
        ip.set_dont_frag(df);
        ip.set_ttl(63);
        ip.set_protocol(IpProtocol::UDP);
        ip.set_src_addr(Ipv4Addr::new(10, 1, 0, 2));
        ip.set_dst_addr(Ipv4Addr::new(10, 2, 0, 2));
        ip.options_mut().copy_from_slice(options);
        ip.fill_checksum();
        for (i, b) in p[header..].iter_mut().enumerate() {
            *b = i as u8;
        }
        p
    }

    fn all(p: &[u8], mtu: usize) -> alloc::vec::Vec<alloc::vec::Vec<u8>> {
        let mut f = Ipv4Fragments::new(p, mtu).unwrap();
        let expected = f.remaining();
        let mut out = alloc::vec::Vec::new();
        let mut buf = [0u8; 2048];
        while let Some(n) = f.write_next(&mut buf) {
            out.push(buf[..n].to_vec());
        }
        assert_eq!(out.len(), expected);
        out
    }

    /// Reassembles (RFC 815, simplified: in order, no holes).
    fn reassemble(frags: &[alloc::vec::Vec<u8>]) -> alloc::vec::Vec<u8> {
        let mut data = alloc::vec::Vec::new();
        for f in frags {
            let ip = Ipv4Packet::new_checked(&f[..]).unwrap();
            assert!(ip.verify_checksum());
            assert_eq!(usize::from(ip.frag_offset()) * 8, data.len());
            data.extend_from_slice(ip.payload());
        }
        data
    }

    #[test]
    fn fragments_fit_and_reassemble() {
        let p = packet(1400, &[], false);
        let frags = all(&p, 1000);
        assert_eq!(frags.len(), 2);
        assert_eq!(frags[0].len(), 20 + 976);
        assert!(frags.iter().all(|f| f.len() <= 1000));
        let first = Ipv4Packet::new_checked(&frags[0][..]).unwrap();
        assert!(first.more_frags() && first.ident() == 0x1234 && first.ttl() == 63);
        let last = Ipv4Packet::new_checked(&frags[1][..]).unwrap();
        assert!(!last.more_frags());
        assert_eq!(reassemble(&frags), p[20..]);
    }

    #[test]
    fn a_packet_that_fits_is_one_fragment_equal_to_itself() {
        let p = packet(100, &[], false);
        assert_eq!(all(&p, 1280), alloc::vec![p.clone()]);
    }

    #[test]
    fn only_copied_options_follow_the_first_fragment() {
        // Security (130, copied, 11 octets: RFC 1108 shape), then a
        // record route (7, not copied, 7 octets), NOP and END.
        let mut options = [0u8; 20];
        options[..11].copy_from_slice(&[130, 11, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        options[11..18].copy_from_slice(&[7, 7, 4, 0, 0, 0, 0]);
        options[18] = OPTION_NOP;
        let p = packet(600, &options, false);
        let frags = all(&p, 576);
        assert_eq!(&frags[0][20..40], &options[..]);
        let later = Ipv4Packet::new_checked(&frags[1][..]).unwrap();
        assert_eq!(later.header_len(), 32);
        assert_eq!(&later.options()[..11], &options[..11]);
        assert!(later.options()[11..].iter().all(|&b| b == 0));
        assert_eq!(reassemble(&frags), p[40..]);
    }

    #[test]
    fn a_fragment_is_split_within_its_range() {
        let mut p = packet(800, &[], false);
        let mut ip = Ipv4Packet::new_unchecked(&mut p[..]);
        ip.set_frag_offset(100);
        ip.set_more_frags(true);
        ip.fill_checksum();
        let frags = all(&p, 500);
        let offsets: alloc::vec::Vec<(u16, bool)> = frags
            .iter()
            .map(|f| {
                let ip = Ipv4Packet::new_checked(&f[..]).unwrap();
                (ip.frag_offset(), ip.more_frags())
            })
            .collect();
        assert_eq!(offsets, [(100, true), (160, true)]);
    }

    #[test]
    fn refusals() {
        assert_eq!(
            Ipv4Fragments::new(&packet(1400, &[], true), 1000).unwrap_err(),
            Error::Malformed
        );
        assert_eq!(
            Ipv4Fragments::new(&packet(1400, &[], false), 27).unwrap_err(),
            Error::Truncated
        );
        assert!(Ipv4Fragments::new(&[0x45, 0], 1000).is_err());
        let big = packet(1400, &[], false);
        let mut f = Ipv4Fragments::new(&big, 1000).unwrap();
        assert_eq!(f.write_next(&mut [0u8; 100]), None);
    }
}
