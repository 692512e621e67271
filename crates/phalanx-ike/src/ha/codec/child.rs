//! The Child SA part of the [`IkeSaState`](crate::ha::IkeSaState) codec.
//!
//! ```text
//!  name (str) | SPI in (4) | SPI out (4)
//!  ESP suite: encr (2), key bits (2), integ (2), AH (1)
//!  flags (1): ESN, transport, inbound installed, outbound installed,
//!             outbound held
//!  PFS group (opt 2) | status (1) | replaces (opt 4) | peer rekey (opt 4)
//!  nonces (opt: Ni bytes16, Nr bytes16)
//!  TSi, TSr (count16, each: protocol (1), start port (2), end port (2),
//!            start addr, end addr as addr families without ports)
//!  4 x key (bytes16) | age (duration) | rekey in, expire in, retire in
//!  (opt duration each) | jitter (duration)
//! ```

use phalanx_crypto::Suite;
use phalanx_wire::ike::iana::{EncrId, IntegId, KeId};
use phalanx_wire::ike::{TrafficSelector, TsAddresses};
use phalanx_wire::IpProtocol;

use super::{DecodeError, Reader, Writer};
use crate::ha::state::{ChildSaKeys, ChildSaState, ChildSaStatus};

/// Most traffic selectors on one side of a Child SA (RFC 7296 §3.13 puts
/// the count in one octet).
const MAX_SELECTORS: usize = 255;

impl Writer {
    pub(super) fn child(&mut self, c: &ChildSaState) {
        self.str(&c.name);
        self.u32(c.spi_in);
        self.u32(c.spi_out);
        self.u16(c.suite.encr.0);
        self.u16(c.suite.encr_key_bits);
        self.u16(c.suite.integ.0);
        self.u8(u8::from(c.suite.ah));
        self.flags(&[
            c.esn,
            c.transport,
            c.inbound_installed,
            c.outbound_installed,
            c.outbound_held,
        ]);
        self.opt(c.pfs, |w, g| w.u16(g.0));
        self.u8(match c.status {
            ChildSaStatus::Active => 1,
            ChildSaStatus::Rekeying => 2,
            ChildSaStatus::Rekeyed => 3,
            ChildSaStatus::Deleting => 4,
        });
        self.opt(c.replaces, Self::u32);
        self.opt(c.peer_rekey, Self::u32);
        self.opt(c.nonces.as_ref(), |w, (ni, nr)| {
            w.bytes16(ni);
            w.bytes16(nr);
        });
        self.selectors(&c.local_ts);
        self.selectors(&c.remote_ts);
        for key in c.keys.all() {
            self.bytes16(key);
        }
        self.duration(c.age);
        self.opt_duration(c.rekey_in);
        self.opt_duration(c.expire_in);
        self.opt_duration(c.retire_in);
        self.duration(c.lifetime_jitter);
    }

    fn selectors(&mut self, list: &[TrafficSelector]) {
        self.count(list.len());
        for ts in list {
            self.u8(ts.ip_protocol.0);
            self.u16(ts.start_port);
            self.u16(ts.end_port);
            match ts.addresses {
                TsAddresses::V4 { start, end } => {
                    self.ip(start.into());
                    self.ip(end.into());
                }
                TsAddresses::V6 { start, end } => {
                    self.ip(start.into());
                    self.ip(end.into());
                }
            }
        }
    }
}

impl Reader<'_> {
    pub(super) fn child(&mut self) -> Result<ChildSaState, DecodeError> {
        let name = self.str()?;
        let spi_in = self.u32()?;
        let spi_out = self.u32()?;
        let suite = Suite {
            encr: EncrId(self.u16()?),
            encr_key_bits: self.u16()?,
            integ: IntegId(self.u16()?),
            ah: self.bool()?,
        };
        let [esn, transport, inbound_installed, outbound_installed, outbound_held] =
            self.flags()?;
        Ok(ChildSaState {
            name,
            spi_in,
            spi_out,
            suite,
            esn,
            pfs: self.opt(|r| r.u16().map(KeId))?,
            transport,
            status: self.status()?,
            inbound_installed,
            outbound_installed,
            outbound_held,
            replaces: self.opt(Self::u32)?,
            peer_rekey: self.opt(Self::u32)?,
            nonces: self.opt(|r| Ok((r.bytes16()?.to_vec(), r.bytes16()?.to_vec())))?,
            local_ts: self.selectors()?,
            remote_ts: self.selectors()?,
            keys: ChildSaKeys {
                encr_in: self.secret()?,
                integ_in: self.secret()?,
                encr_out: self.secret()?,
                integ_out: self.secret()?,
            },
            age: self.duration()?,
            rekey_in: self.opt_duration()?,
            expire_in: self.opt_duration()?,
            retire_in: self.opt_duration()?,
            lifetime_jitter: self.duration()?,
        })
    }

    fn status(&mut self) -> Result<ChildSaStatus, DecodeError> {
        match self.u8()? {
            1 => Ok(ChildSaStatus::Active),
            2 => Ok(ChildSaStatus::Rekeying),
            3 => Ok(ChildSaStatus::Rekeyed),
            4 => Ok(ChildSaStatus::Deleting),
            _ => Err(DecodeError::Invalid("Child SA status")),
        }
    }

    fn selectors(&mut self) -> Result<Vec<TrafficSelector>, DecodeError> {
        self.list(MAX_SELECTORS, "traffic selectors", |r| {
            let ip_protocol = IpProtocol(r.u8()?);
            let start_port = r.u16()?;
            let end_port = r.u16()?;
            let addresses = match (r.ip()?, r.ip()?) {
                (core::net::IpAddr::V4(start), core::net::IpAddr::V4(end)) => {
                    TsAddresses::V4 { start, end }
                }
                (core::net::IpAddr::V6(start), core::net::IpAddr::V6(end)) => {
                    TsAddresses::V6 { start, end }
                }
                _ => return Err(DecodeError::Invalid("traffic selector")),
            };
            Ok(TrafficSelector {
                ip_protocol,
                start_port,
                end_port,
                addresses,
            })
        })
    }
}
