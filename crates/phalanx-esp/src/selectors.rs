//! The inbound policy check (RFC 4301 §5.2 step 4): a decapsulated packet
//! must fall inside the selectors of the SA it arrived on, or a peer could
//! inject traffic for networks it was never granted.

use phalanx_sa::{FlowKey, InboundSa};
use phalanx_wire::flow_of;

use crate::drop::DropReason;

/// Checks `packet` (the inner IP packet) against the SA's selectors. An SA
/// without selectors accepts any packet, and then the packet is not even
/// parsed.
pub(crate) fn check(sa: &InboundSa, packet: &[u8]) -> Result<(), DropReason> {
    if sa.params.selectors.is_empty() {
        return Ok(());
    }
    let flow = flow_of(packet).map_err(|_| DropReason::InnerMalformed)?;
    let key = FlowKey {
        src: flow.src,
        dst: flow.dst,
        protocol: flow.protocol,
        src_port: flow.src_port,
        dst_port: flow.dst_port,
    };
    if sa.selectors_match(&key) {
        Ok(())
    } else {
        Err(DropReason::SelectorMismatch)
    }
}
