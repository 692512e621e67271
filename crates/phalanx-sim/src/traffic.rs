//! The offered traffic: packet sizes, the SAs, peers and inner flows they
//! belong to, and Poisson arrival times, generated once per seed and
//! replayed at the rate each cluster size is offered.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr};
use core::str::FromStr;

use phalanx_cluster::{flow_hash, Direction, PacketKey};
use phalanx_sa::FlowKey;
use phalanx_wire::IpProtocol;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The packet sizes offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeMix {
    /// Every packet has this many bytes.
    Fixed(u32),
    /// The "simple IMIX": 64, 576 and 1500 bytes in the ratio 7:4:1 by
    /// packet count.
    Imix,
}

/// IMIX sizes and their weights (out of 12).
const IMIX: [(u32, u32); 3] = [(64, 7), (576, 4), (1500, 1)];

impl SizeMix {
    /// `(size, probability)` of every size in the mix.
    pub fn distribution(self) -> Vec<(u32, f64)> {
        match self {
            SizeMix::Fixed(size) => vec![(size, 1.0)],
            SizeMix::Imix => {
                let total: u32 = IMIX.iter().map(|&(_, w)| w).sum();
                IMIX.iter()
                    .map(|&(s, w)| (s, f64::from(w) / f64::from(total)))
                    .collect()
            }
        }
    }

    /// The mean of `f(size)` over the mix.
    pub fn mean(self, f: impl Fn(u32) -> f64) -> f64 {
        self.distribution().into_iter().map(|(s, p)| p * f(s)).sum()
    }

    /// One size drawn from the mix.
    fn draw(self, rng: &mut ChaCha8Rng) -> u32 {
        match self {
            SizeMix::Fixed(size) => size,
            SizeMix::Imix => {
                let mut pick = rng.gen_range(0..12u32);
                for (size, weight) in IMIX {
                    if pick < weight {
                        return size;
                    }
                    pick -= weight;
                }
                IMIX[2].0
            }
        }
    }
}

impl FromStr for SizeMix {
    type Err = String;

    /// `imix` or a size in bytes from 20 to 65535 (`64`, `512`, `1500`).
    fn from_str(text: &str) -> Result<SizeMix, String> {
        if text == "imix" {
            return Ok(SizeMix::Imix);
        }
        match text.parse::<u32>() {
            Ok(size) if (20..=65_535).contains(&size) => Ok(SizeMix::Fixed(size)),
            _ => Err(format!(
                "size `{text}`: expected imix or bytes in 20..=65535"
            )),
        }
    }
}

impl fmt::Display for SizeMix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeMix::Fixed(size) => write!(f, "{size}"),
            SizeMix::Imix => f.write_str("imix"),
        }
    }
}

/// Who sends the traffic: how many SAs, peer gateways and inner flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrafficShape {
    /// The direction every packet travels (all SAs alike).
    pub direction: Direction,
    /// SAs (streams); SA `i` has SPI `0x1000 + i`.
    pub sas: u32,
    /// Peer gateways; SA `i` belongs to peer `i % peers`.
    pub peers: u32,
    /// Inner flows; flow `f` travels in SA `f % sas`. Each packet belongs
    /// to a flow drawn uniformly.
    pub flows: u32,
}

impl Default for TrafficShape {
    /// One outbound SA to one peer carrying 1,024 flows: a site-to-site
    /// tunnel.
    fn default() -> TrafficShape {
        TrafficShape {
            direction: Direction::Outbound,
            sas: 1,
            peers: 1,
            flows: 1024,
        }
    }
}

/// One offered packet.
#[derive(Clone, Copy, Debug)]
pub struct TracePacket {
    /// Arrival time in units of the mean gap between arrivals.
    pub arrival: f64,
    /// What every node's dispatcher is given.
    pub key: PacketKey,
}

/// A generated packet sequence, replayed for each cluster size.
#[derive(Clone, Debug)]
pub struct Trace {
    /// The packets in arrival order.
    pub packets: Vec<TracePacket>,
}

impl Trace {
    /// `count` packets of `shape` with sizes from `mix` and Poisson
    /// arrivals (exponential gaps of mean 1), from `seed` alone.
    pub fn generate(shape: TrafficShape, mix: SizeMix, count: usize, seed: u64) -> Trace {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (sas, peers, flows) = (shape.sas.max(1), shape.peers.max(1), shape.flows.max(1));
        let flow_ids: Vec<u64> = (0..flows).map(|f| flow_hash(&inner_flow(f))).collect();
        let mut counters = vec![0u64; sas as usize];
        let mut clock = 0.0;
        let packets = (0..count)
            .map(|_| {
                // Inverse transform: -ln(1 - u) is exponential with mean 1.
                clock += -(1.0 - rng.gen::<f64>()).ln();
                let flow = rng.gen_range(0..flows);
                let sa = flow % sas;
                let counter = &mut counters[sa as usize];
                *counter += 1;
                let outbound = shape.direction == Direction::Outbound;
                let key = PacketKey {
                    direction: shape.direction,
                    spi: 0x1000 + sa,
                    index: *counter,
                    len: mix.draw(&mut rng),
                    flow: if outbound { flow_ids[flow as usize] } else { 0 },
                    peer: peer_address(sa % peers),
                };
                TracePacket {
                    arrival: clock,
                    key,
                }
            })
            .collect();
        Trace { packets }
    }

    /// The last arrival, in mean gaps (0 for an empty trace).
    pub fn span(&self) -> f64 {
        self.packets.last().map_or(0.0, |p| p.arrival)
    }
}

/// Peer gateway `i`: 203.0.113.1 upwards.
fn peer_address(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(
        u32::from(Ipv4Addr::new(203, 0, 113, 1)).wrapping_add(i),
    ))
}

/// Inner flow `f`: a UDP flow from host 10.0.0.0 + f to 10.128.0.1:443.
fn inner_flow(f: u32) -> FlowKey {
    FlowKey {
        src: IpAddr::V4(Ipv4Addr::from(0x0a00_0000u32.wrapping_add(f))),
        dst: IpAddr::V4(Ipv4Addr::new(10, 128, 0, 1)),
        protocol: IpProtocol::UDP,
        src_port: 1024 + (f % 60_000) as u16,
        dst_port: 443,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imix_is_seven_four_one() {
        let mean = SizeMix::Imix.mean(f64::from);
        assert!((mean - (7.0 * 64.0 + 4.0 * 576.0 + 1500.0) / 12.0).abs() < 1e-9);
        let trace = Trace::generate(TrafficShape::default(), SizeMix::Imix, 12_000, 3);
        let small = trace.packets.iter().filter(|p| p.key.len == 64).count();
        assert!((6_500..7_500).contains(&small), "{small}");
    }

    #[test]
    fn same_seed_same_trace() {
        let shape = TrafficShape {
            sas: 3,
            peers: 2,
            flows: 10,
            ..TrafficShape::default()
        };
        let a = Trace::generate(shape, SizeMix::Imix, 500, 9);
        let b = Trace::generate(shape, SizeMix::Imix, 500, 9);
        let c = Trace::generate(shape, SizeMix::Imix, 500, 10);
        let keys = |t: &Trace| {
            t.packets
                .iter()
                .map(|p| (p.arrival, p.key))
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(&a), keys(&b));
        assert_ne!(keys(&a), keys(&c));
    }

    #[test]
    fn counters_are_per_sa_and_arrivals_average_one() {
        let shape = TrafficShape {
            sas: 4,
            ..TrafficShape::default()
        };
        let trace = Trace::generate(shape, SizeMix::Fixed(1500), 20_000, 1);
        for spi in 0x1000..0x1004 {
            let indices: Vec<u64> = trace
                .packets
                .iter()
                .filter(|p| p.key.spi == spi)
                .map(|p| p.key.index)
                .collect();
            assert_eq!(indices, (1..=indices.len() as u64).collect::<Vec<_>>());
        }
        let mean_gap = trace.span() / 20_000.0;
        assert!((mean_gap - 1.0).abs() < 0.03, "{mean_gap}");
    }

    #[test]
    fn sizes_parse() {
        assert_eq!("imix".parse(), Ok(SizeMix::Imix));
        assert_eq!("64".parse(), Ok(SizeMix::Fixed(64)));
        assert!("10".parse::<SizeMix>().is_err());
        assert!("jumbo".parse::<SizeMix>().is_err());
        assert_eq!(SizeMix::Fixed(512).to_string(), "512");
    }
}
