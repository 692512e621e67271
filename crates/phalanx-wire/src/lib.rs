//! Zero-copy views and builders for the headers an IPsec gateway touches,
//! from the Ethernet frame (and ARP, for cluster nodes) up to IKEv2.
//!
//! Contract: every view is constructed through `new_checked`, which verifies
//! that all fixed fields and all length fields lie inside the buffer; after
//! that, accessors never panic. No function in this crate panics on any
//! received input or performs I/O, and none allocates except the IKEv2
//! message codec in [`ike`] (control plane, `alloc::vec::Vec`). The only
//! documented panics are programming errors on the building side:
//! fixed-field accessors of a view made with `new_unchecked` over a buffer
//! shorter than the fixed header, and `emit` into such a buffer. Accessors
//! are named after the RFC fields.
//! Unknown IANA values are data ([`iana`]). The crate is `no_std`; the
//! `fuzzing` feature adds `phalanx_wire::fuzzing`, the (allocating)
//! harnesses behind the targets in `fuzz/`.
//!
//! Each codec has the same shape (after smoltcp's `wire`): a view
//! `XxxPacket<T: AsRef<[u8]>>` with `new_unchecked`, `new_checked`,
//! `check_len`, RFC-named getters and, for `T: AsMut<[u8]>`, setters; and an
//! `XxxRepr` with `parse(&packet)`, `emit(&self, &mut packet)` and
//! `buffer_len()`. Variable-length parts (options, payloads) are bounded by the
//! header's own length fields, never by the end of the buffer alone.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), no_std)]
// STYLE.md: `unwrap()` is fine in tests, where a panic is the failure report.
#![cfg_attr(test, allow(clippy::unwrap_used))]

// The IKEv2 codec (`ike`) is control plane and builds `Vec`s; nothing on the
// packet path allocates.
extern crate alloc;

mod field;

pub mod ah;
pub mod checksum;
pub mod error;
pub mod esp;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
#[macro_use]
pub mod iana;
// Link layer, for cluster nodes that read whole frames (after `iana`:
// they use its `open_enum!`).
pub mod arp;
pub mod ethernet;
pub mod icmp;
pub mod ike;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod natt;
pub mod ndp;
pub mod tcp;
pub mod udp;

pub use ah::{AhPacket, AhRepr};
pub use arp::{arp_reply, gratuitous_arp, ArpError, ArpOperation, ArpPacket, ArpRepr};
pub use error::{Error, Result};
pub use esp::{EspPacket, EspRepr, EspTrailer};
pub use ethernet::{EtherType, EthernetFrame, EthernetRepr, MacAddress, VlanTag};
pub use iana::{EncrId, IntegId, IpProtocol};
pub use ip::{flow_of, ip_version, Flow, IpVersion};
pub use ipv4::{Ipv4Fragments, Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use natt::UdpEncapPayload;
pub use tcp::TcpPacket;
pub use udp::{UdpPacket, UdpRepr};
