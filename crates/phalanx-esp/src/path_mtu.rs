//! What to do with an inner packet whose encapsulation does not fit the
//! SA's path MTU ([`DropReason::PathMtuExceeded`](crate::DropReason)), and
//! how often to say so.
//!
//! RFC 4301 §8.2.1 and RFC 4459: a gateway that silently drops such
//! packets makes a black hole (TCP never learns to send smaller segments).
//! [`too_big_action`] decides, from the inner packet alone:
//!
//! | inner packet | action |
//! |---|---|
//! | IPv4, DF set | ICMP Fragmentation Needed with the inner MTU that fits (RFC 1191) |
//! | IPv4, DF clear | fragment it before encryption (RFC 4459 §3, [`FragmentPolicy::Inner`], the default) or send the ESP packet fragmented ([`FragmentPolicy::Outer`]) |
//! | IPv6, the path carries 1280 inside | ICMPv6 Packet Too Big with the inner MTU (RFC 4443 §3.2, RFC 8201) |
//! | IPv6, the path carries less than 1280 inside | packets up to 1280 go as fragmented ESP packets (RFC 8200 §5: a link, and so a tunnel, that cannot carry 1280 octets fragments below IPv6); larger ones get Packet Too Big with 1280 |
//!
//! [`IcmpRateLimit`] bounds the ICMP errors a worker sends (RFC 1812
//! §4.3.2.8, RFC 4443 §2.4 (f)), as a token bucket on time the caller
//! hands in.

use std::time::{Duration, Instant};

use phalanx_wire::ip::IpVersion;
use phalanx_wire::Ipv4Packet;

use crate::limits::{ICMP_RATE_BURST, ICMP_RATE_PER_SECOND, IPV4_MIN_MTU, IPV6_MIN_MTU};

/// What to do with an IPv4 packet without DF that does not fit (the
/// `fragment` setting of the configuration).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FragmentPolicy {
    /// Fragment the inner packet, then protect each fragment (RFC 4459 §3):
    /// the peer gateway needs no reassembly, the destination host does it.
    #[default]
    Inner,
    /// Protect the whole packet and let the ESP packet be fragmented on
    /// the outside: the peer gateway reassembles before it decrypts.
    Outer,
}

/// The decision for one packet that does not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TooBigAction {
    /// Drop it and tell its source that packets of `mtu` octets fit:
    /// ICMP Fragmentation Needed (IPv4) or Packet Too Big (IPv6).
    Notify {
        /// The inner MTU to announce.
        mtu: u32,
    },
    /// Split it into IPv4 fragments of at most `mtu` octets and protect
    /// each.
    FragmentInner {
        /// The largest fragment.
        mtu: usize,
    },
    /// Protect it whole and send the ESP packet with fragmentation allowed.
    FragmentOuter,
    /// Not an IP packet this can decide for: drop it.
    Drop,
}

/// Decides for `inner` (an IP packet, tunnel or transport), given
/// `max_inner`, the largest inner packet the SA carries over its path
/// ([`max_inner_len`](crate::max_inner_len)).
pub fn too_big_action(inner: &[u8], max_inner: usize, policy: FragmentPolicy) -> TooBigAction {
    let mtu = u32::try_from(max_inner).unwrap_or(u32::MAX);
    match phalanx_wire::ip_version(inner) {
        Ok(IpVersion::V4) => {
            let Ok(ip) = Ipv4Packet::new_checked(inner) else {
                return TooBigAction::Drop;
            };
            if ip.dont_frag() {
                // RFC 1191 §4 lets the MTU go down to 68 (RFC 791); never
                // announce less.
                TooBigAction::Notify {
                    mtu: mtu.max(IPV4_MIN_MTU),
                }
            } else if policy == FragmentPolicy::Outer || max_inner < IPV4_MIN_MTU as usize {
                TooBigAction::FragmentOuter
            } else {
                TooBigAction::FragmentInner { mtu: max_inner }
            }
        }
        Ok(IpVersion::V6) if mtu >= IPV6_MIN_MTU => TooBigAction::Notify { mtu },
        Ok(IpVersion::V6) if inner.len() <= IPV6_MIN_MTU as usize => TooBigAction::FragmentOuter,
        Ok(IpVersion::V6) => TooBigAction::Notify { mtu: IPV6_MIN_MTU },
        _ => TooBigAction::Drop,
    }
}

/// A token bucket for the ICMP errors one worker sends.
#[derive(Clone, Debug)]
pub struct IcmpRateLimit {
    tokens: u32,
    burst: u32,
    interval: Duration,
    last: Option<Instant>,
}

impl Default for IcmpRateLimit {
    /// [`ICMP_RATE_PER_SECOND`] with bursts of [`ICMP_RATE_BURST`].
    fn default() -> Self {
        IcmpRateLimit::new(ICMP_RATE_PER_SECOND, ICMP_RATE_BURST)
    }
}

impl IcmpRateLimit {
    /// `per_second` messages on average (at least 1), bursts of `burst`.
    pub fn new(per_second: u32, burst: u32) -> Self {
        IcmpRateLimit {
            tokens: burst,
            burst,
            interval: Duration::from_secs(1) / per_second.max(1),
            last: None,
        }
    }

    /// Whether one more message may go at `now` (takes a token).
    pub fn allow(&mut self, now: Instant) -> bool {
        // `last`: the time up to which tokens were credited.
        let last = self.last.get_or_insert(now);
        let earned = now.saturating_duration_since(*last).as_nanos() / self.interval.as_nanos();
        if earned > 0 {
            let earned = u32::try_from(earned).unwrap_or(u32::MAX);
            self.tokens = self.tokens.saturating_add(earned).min(self.burst);
            *last = if self.tokens == self.burst {
                now
            } else {
                *last + self.interval * earned
            };
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(len: usize, df: bool) -> Vec<u8> {
        let mut p = vec![0u8; len];
        let mut ip = Ipv4Packet::new_unchecked(&mut p[..]);
        ip.set_version(4);
        ip.set_header_len(20);
        ip.set_total_len(len as u16);
        ip.set_dont_frag(df);
        ip.fill_checksum();
        p
    }

    fn v6(len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        p
    }

    #[test]
    fn the_table_of_the_module_doc() {
        use FragmentPolicy::*;
        use TooBigAction::*;
        assert_eq!(
            too_big_action(&v4(1400, true), 1218, Inner),
            Notify { mtu: 1218 }
        );
        assert_eq!(
            too_big_action(&v4(1400, false), 1218, Inner),
            FragmentInner { mtu: 1218 }
        );
        assert_eq!(too_big_action(&v4(1400, false), 1218, Outer), FragmentOuter);
        assert_eq!(too_big_action(&v6(1400), 1338, Inner), Notify { mtu: 1338 });
        assert_eq!(too_big_action(&v6(1280), 1218, Inner), FragmentOuter);
        assert_eq!(too_big_action(&v6(1400), 1218, Inner), Notify { mtu: 1280 });
        assert_eq!(too_big_action(&[0x45, 0, 0], 1218, Inner), Drop);
        assert_eq!(too_big_action(&[], 1218, Inner), Drop);
    }

    #[test]
    fn tiny_paths_never_announce_less_than_the_minimum() {
        use TooBigAction::*;
        assert_eq!(
            too_big_action(&v4(1400, true), 40, FragmentPolicy::Inner),
            Notify { mtu: 68 }
        );
        assert_eq!(
            too_big_action(&v4(1400, false), 40, FragmentPolicy::Inner),
            FragmentOuter
        );
    }

    #[test]
    fn the_rate_limit_allows_a_burst_then_the_rate() {
        let t0 = Instant::now();
        let mut limit = IcmpRateLimit::new(10, 3);
        assert_eq!((0..5).filter(|_| limit.allow(t0)).count(), 3);
        assert!(!limit.allow(t0 + Duration::from_millis(50)));
        assert!(limit.allow(t0 + Duration::from_millis(100)));
        assert!(!limit.allow(t0 + Duration::from_millis(150)));
        // A long silence refills the burst, no more.
        let later = t0 + Duration::from_secs(60);
        assert_eq!((0..5).filter(|_| limit.allow(later)).count(), 3);
        // A steady 1 s of asking yields about the rate.
        let start = later + Duration::from_secs(1);
        let allowed = (0..1000)
            .filter(|i| limit.allow(start + Duration::from_millis(*i)))
            .count();
        assert!((10..=13).contains(&allowed), "{allowed}");
    }
}
