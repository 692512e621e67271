//! What the kernel dropped before any socket of ours saw it: the network
//! namespace's IP and UDP error counters (`/proc/net/snmp`,
//! `/proc/net/snmp6`, RFC 4293 / RFC 4113 MIB names). An operator reads
//! them beside phalanxd's own drops, so that a loss on the protected side
//! shows somewhere: malformed or truncated IP headers, failed reassembly,
//! UDP datagrams with a bad length or checksum, and UDP datagrams dropped
//! because a socket's receive buffer was full (`RcvbufErrors`; the
//! sockets' own share is [`SocketStats::kernel_rx_dropped`](crate::SocketStats)
//! when the socket reports it).
//!
//! The counters are the whole namespace's, not only phalanxd's sockets'.

use std::io;

/// The namespace's drop counters, monotonic since the namespace was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelDrops {
    /// `Ip: InHdrErrors`: IPv4 headers in error (checksum, version, length).
    pub ip_in_hdr_errors: u64,
    /// `Ip: InDiscards`: IPv4 packets discarded for lack of resources.
    pub ip_in_discards: u64,
    /// `Ip: ReasmFails`: IPv4 reassemblies that failed (timeouts included).
    pub ip_reasm_fails: u64,
    /// `Udp: InErrors`: UDP datagrams dropped on receive (length, checksum,
    /// buffer), over IPv4.
    pub udp_in_errors: u64,
    /// `Udp: RcvbufErrors`: UDP datagrams dropped because a receive buffer
    /// was full, over IPv4.
    pub udp_rcvbuf_errors: u64,
    /// `Udp: InCsumErrors`: UDP checksum errors, over IPv4.
    pub udp_in_csum_errors: u64,
    /// `Ip6InHdrErrors`.
    pub ip6_in_hdr_errors: u64,
    /// `Ip6InTruncatedPkts`: IPv6 packets shorter than their header says.
    pub ip6_in_truncated: u64,
    /// `Ip6InDiscards`.
    pub ip6_in_discards: u64,
    /// `Ip6ReasmFails`.
    pub ip6_reasm_fails: u64,
    /// `Udp6InErrors`.
    pub udp6_in_errors: u64,
    /// `Udp6RcvbufErrors`.
    pub udp6_rcvbuf_errors: u64,
    /// `Udp6InCsumErrors`.
    pub udp6_in_csum_errors: u64,
}

impl KernelDrops {
    /// Reads the calling thread's network namespace's counters.
    pub fn read() -> io::Result<KernelDrops> {
        let mut drops = KernelDrops::default();
        drops.parse_snmp(&std::fs::read_to_string("/proc/net/snmp")?);
        // A kernel without IPv6 has no snmp6: the IPv6 counters stay 0.
        if let Ok(text) = std::fs::read_to_string("/proc/net/snmp6") {
            drops.parse_snmp6(&text);
        }
        Ok(drops)
    }

    /// Every counter with its name (`kernel_` + the field name).
    pub fn named(&self) -> [(&'static str, u64); 13] {
        [
            ("kernel_ip_in_hdr_errors", self.ip_in_hdr_errors),
            ("kernel_ip_in_discards", self.ip_in_discards),
            ("kernel_ip_reasm_fails", self.ip_reasm_fails),
            ("kernel_udp_in_errors", self.udp_in_errors),
            ("kernel_udp_rcvbuf_errors", self.udp_rcvbuf_errors),
            ("kernel_udp_in_csum_errors", self.udp_in_csum_errors),
            ("kernel_ip6_in_hdr_errors", self.ip6_in_hdr_errors),
            ("kernel_ip6_in_truncated", self.ip6_in_truncated),
            ("kernel_ip6_in_discards", self.ip6_in_discards),
            ("kernel_ip6_reasm_fails", self.ip6_reasm_fails),
            ("kernel_udp6_in_errors", self.udp6_in_errors),
            ("kernel_udp6_rcvbuf_errors", self.udp6_rcvbuf_errors),
            ("kernel_udp6_in_csum_errors", self.udp6_in_csum_errors),
        ]
    }

    /// `/proc/net/snmp`: per protocol, a line of names then a line of
    /// values, both starting with `Proto:`.
    fn parse_snmp(&mut self, text: &str) {
        let mut lines = text.lines();
        while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
            let (Some((proto, names)), Some((_, values))) =
                (names.split_once(':'), values.split_once(':'))
            else {
                continue;
            };
            for (name, value) in names.split_whitespace().zip(values.split_whitespace()) {
                let value = value.parse().unwrap_or(0);
                if let Some(field) = self.field(proto, name) {
                    *field = value;
                }
            }
        }
    }

    /// `/proc/net/snmp6`: one `Name value` per line.
    fn parse_snmp6(&mut self, text: &str) {
        for line in text.lines() {
            let mut words = line.split_whitespace();
            if let (Some(name), Some(value)) = (words.next(), words.next()) {
                if let Some(field) = self.field("", name) {
                    *field = value.parse().unwrap_or(0);
                }
            }
        }
    }

    fn field(&mut self, proto: &str, name: &str) -> Option<&mut u64> {
        Some(match (proto, name) {
            ("Ip", "InHdrErrors") => &mut self.ip_in_hdr_errors,
            ("Ip", "InDiscards") => &mut self.ip_in_discards,
            ("Ip", "ReasmFails") => &mut self.ip_reasm_fails,
            ("Udp", "InErrors") => &mut self.udp_in_errors,
            ("Udp", "RcvbufErrors") => &mut self.udp_rcvbuf_errors,
            ("Udp", "InCsumErrors") => &mut self.udp_in_csum_errors,
            ("", "Ip6InHdrErrors") => &mut self.ip6_in_hdr_errors,
            ("", "Ip6InTruncatedPkts") => &mut self.ip6_in_truncated,
            ("", "Ip6InDiscards") => &mut self.ip6_in_discards,
            ("", "Ip6ReasmFails") => &mut self.ip6_reasm_fails,
            ("", "Udp6InErrors") => &mut self.udp6_in_errors,
            ("", "Udp6RcvbufErrors") => &mut self.udp6_rcvbuf_errors,
            ("", "Udp6InCsumErrors") => &mut self.udp6_in_csum_errors,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits
Ip: 2 64 5610 7 0 0 0 3 5610 4199 0 0 0 0 0 11 0 0 0 4199
Icmp: InMsgs InErrors
Icmp: 5 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 1160 0 9 1359 4 0 2 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 99 0 99 0 99 0 0
";

    const SNMP6: &str = "Ip6InReceives                   \t40
Ip6InHdrErrors                  \t1
Ip6InTruncatedPkts              \t2
Ip6InDiscards                   \t3
Ip6ReasmFails                   \t4
Udp6InErrors                    \t5
Udp6RcvbufErrors                \t6
Udp6InCsumErrors                \t7
";

    #[test]
    fn the_counters_are_read_by_name() {
        let mut d = KernelDrops::default();
        d.parse_snmp(SNMP);
        d.parse_snmp6(SNMP6);
        let expected = KernelDrops {
            ip_in_hdr_errors: 7,
            ip_in_discards: 3,
            ip_reasm_fails: 11,
            udp_in_errors: 9,
            udp_rcvbuf_errors: 4,
            udp_in_csum_errors: 2,
            ip6_in_hdr_errors: 1,
            ip6_in_truncated: 2,
            ip6_in_discards: 3,
            ip6_reasm_fails: 4,
            udp6_in_errors: 5,
            udp6_rcvbuf_errors: 6,
            udp6_in_csum_errors: 7,
        };
        assert_eq!(d, expected, "UdpLite's columns must not leak into Udp's");
    }

    #[test]
    fn garbage_reads_as_zero_and_never_panics() {
        let mut d = KernelDrops::default();
        d.parse_snmp("Ip: InHdrErrors\nIp: x\nno colon\n\nUdp:");
        d.parse_snmp6("Udp6InErrors\nUdp6RcvbufErrors notanumber\n");
        assert_eq!(d, KernelDrops::default());
    }

    #[test]
    fn this_namespace_has_the_files() {
        let d = KernelDrops::read().unwrap();
        assert_eq!(d.named().len(), 13);
    }
}
