//! INFORMATIONAL (RFC 7296 §1.4): deletes, liveness checks and error
//! notifies.
//!
//! ```text
//! Initiator                         Responder
//! -------------------------------------------------------------------
//! HDR, SK {[N,] [D,] [CP,] ...}  -->
//!                                   <--  HDR, SK {[N,] [D,] [CP], ...}
//! ```
//!
//! Deleting a Child SA: the request names our inbound SPIs; the answer
//! names the peer's inbound SPIs of the same pairs (§1.4.1). We stop
//! sending on an SA when we ask for its deletion and stop receiving when
//! the answer comes. When both sides delete the same SA at once, each
//! removes its outbound SA on the request, its inbound SA on the answer,
//! and does not name the SA in its answer (§1.4.1). An empty request is a
//! liveness check (§1.4, "dead peer detection").
//!
//! Windows (§2.3): each side announces in IKE_AUTH, with
//! N(SET_WINDOW_SIZE), how many requests it accepts outstanding when that
//! is more than one; the announcement is honoured there and in
//! INFORMATIONAL requests. A rekeyed IKE SA keeps both windows.

use phalanx_sa::IpsecProtocol;
use phalanx_wire::ike::iana::{ExchangeType, NotifyType, ProtocolId};
use phalanx_wire::ike::{DeletePayload, Payload};

use crate::counters::Counter;
use crate::exchange::mobike::echo_cookie2;
use crate::exchange::{notify, Found};
use crate::ike_sa::{AfterSend, ChildStatus, Ctx, IkeSa, Pending, Reply, State, Task};
use crate::limits::NAT_KEEPALIVE_INTERVAL;
use crate::proposal::protocol_id;
use crate::timers::{after, IkeTimer};

impl IkeSa {
    /// N(SET_WINDOW_SIZE) with our window when it is above one (RFC 7296
    /// §2.3, §3.10.1: a four-octet count); from now on as many responses
    /// are kept for retransmitted requests.
    pub(crate) fn announce_window(&mut self, ctx: &Ctx<'_>) -> Option<Payload> {
        let size = ctx.limits.window_size;
        if size <= 1 {
            return None;
        }
        self.window.receive_window = self.window.receive_window.max(size);
        Some(notify(
            NotifyType::SET_WINDOW_SIZE,
            size.to_be_bytes().to_vec(),
        ))
    }

    /// Takes the peer's N(SET_WINDOW_SIZE), if any: up to that many of our
    /// requests may be outstanding (never more than our own window).
    pub(crate) fn learn_peer_window(&mut self, found: &Found<'_>) {
        let announced = found
            .notify(NotifyType::SET_WINDOW_SIZE)
            .and_then(|n| <[u8; 4]>::try_from(n.data.as_slice()).ok())
            .map(u32::from_be_bytes);
        // A window of zero would stop every request: not a window.
        if let Some(size) = announced.filter(|s| *s > 0) {
            self.window.peer_window = size;
        }
    }

    /// Starts deleting Child SAs by our inbound SPIs; those gone or
    /// already being deleted are skipped.
    pub(crate) fn start_delete_children(&mut self, ctx: &mut Ctx<'_>, spis: Vec<u32>) {
        let mut sending = Vec::new();
        let mut named = Vec::new();
        for spi in spis {
            let Some(idx) = self.children.iter().position(|c| c.spi_in == spi) else {
                continue;
            };
            if self.children[idx].status == ChildStatus::Deleting {
                continue;
            }
            // Make-before-break: what replaces it takes over outbound first.
            self.release_replacements(ctx, spi);
            let name = self.conn.name.clone();
            let child = &mut self.children[idx];
            child.status = ChildStatus::Deleting;
            child.timers = Default::default();
            child.remove_outbound(ctx, &name);
            sending.push(spi);
            named.push((child.protocol(), spi));
        }
        if sending.is_empty() {
            return;
        }
        let deletes = child_deletes(named);
        let pending = Pending::DeleteChildren(sending);
        if let Err(Pending::DeleteChildren(spis)) =
            self.send_request(ctx, ExchangeType::INFORMATIONAL, deletes, pending)
        {
            self.drop_children(ctx, &spis);
        }
    }

    /// Installs the held-back outbound SAs of the SAs that replace
    /// `old_spi` (a rekey whose old SA is now going away, §2.8).
    fn release_replacements(&mut self, ctx: &mut Ctx<'_>, old_spi: u32) {
        for child in &mut self.children {
            if child.replaces == Some(old_spi) {
                child.replaces = None;
                child.install_pending_outbound(ctx);
            }
        }
    }

    /// The answer to our Delete: stop receiving on those SAs.
    pub(crate) fn process_delete_children_response(
        &mut self,
        ctx: &mut Ctx<'_>,
        spis: &[u32],
        _payloads: &[Payload],
    ) {
        self.drop_children(ctx, spis);
    }

    /// Removes Child SAs (what is left of them) and forgets them.
    fn drop_children(&mut self, ctx: &mut Ctx<'_>, spis: &[u32]) {
        let name = self.conn.name.clone();
        let (gone, kept): (Vec<_>, Vec<_>) = self
            .children
            .drain(..)
            .partition(|c| spis.contains(&c.spi_in));
        self.children = kept;
        for mut child in gone {
            ctx.count(Counter::ChildSasDeleted);
            child.remove(ctx, &name);
        }
    }

    /// Starts deleting the IKE SA: its Child SAs are removed at once and
    /// `IkeSaDown` emitted; the Delete is retransmitted until answered.
    pub(crate) fn start_delete_ike(&mut self, ctx: &mut Ctx<'_>) {
        let live = match self.state {
            State::Established => true,
            State::Rekeyed => false,
            _ => return,
        };
        // A replaced SA normally holds no children (they moved on); any
        // left go with it.
        self.remove_children(ctx);
        if live {
            ctx.count(Counter::IkeSasDeleted);
            self.emit_down(ctx, "deleted");
        }
        self.transition(ctx, State::Deleting);
        self.timers = Default::default();
        let delete = Payload::Delete(DeletePayload {
            protocol_id: ProtocolId::IKE,
            spis: Vec::new(),
        });
        if self
            .send_request(
                ctx,
                ExchangeType::INFORMATIONAL,
                vec![delete],
                Pending::DeleteIke,
            )
            .is_err()
        {
            self.close(ctx);
        }
    }

    /// The answer to our Delete of the IKE SA.
    pub(crate) fn close_after_delete(&mut self, ctx: &mut Ctx<'_>) {
        self.close(ctx);
    }

    /// The DPD timer: check liveness if the peer has been quiet for the
    /// configured delay (RFC 7296 §1.4).
    pub(crate) fn dpd_due(&mut self, ctx: &mut Ctx<'_>) {
        let Some(delay) = self.conn.dpd_delay.filter(|d| !d.is_zero()) else {
            return;
        };
        if !self.is_established() {
            return;
        }
        let quiet_until = after(self.last_heard, delay);
        if ctx.now >= quiet_until {
            self.push_task(ctx, Task::Dpd);
            self.timers.set(IkeTimer::Dpd, after(ctx.now, delay));
        } else {
            self.timers.set(IkeTimer::Dpd, quiet_until);
        }
    }

    /// The NAT-keepalive timer: behind a NAT, send the one-octet keepalive
    /// from the NAT-T port every [`NAT_KEEPALIVE_INTERVAL`] so the mapping
    /// stays open while the tunnel is quiet (RFC 3948 §2.3, §4).
    pub(crate) fn send_nat_keepalive(&mut self, ctx: &mut Ctx<'_>) {
        if !self.local_behind_nat || !self.is_established() {
            return;
        }
        ctx.nat_keepalive(self.local, self.remote);
        self.timers.set(
            IkeTimer::NatKeepalive,
            after(ctx.now, NAT_KEEPALIVE_INTERVAL),
        );
    }

    /// Sends the liveness check: an empty INFORMATIONAL request.
    pub(crate) fn start_dpd(&mut self, ctx: &mut Ctx<'_>) {
        ctx.count(Counter::DpdSent);
        // Nothing to release on failure: the check is simply not sent.
        let _ = self.send_request(
            ctx,
            ExchangeType::INFORMATIONAL,
            Vec::new(),
            Pending::Informational,
        );
    }

    /// Responder: an INFORMATIONAL request.
    pub(crate) fn process_informational_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        payloads: &[Payload],
    ) -> Reply {
        let found = Found::scan(payloads);
        self.learn_peer_window(&found);
        if found.has(NotifyType::UPDATE_SA_ADDRESSES) && self.is_established() {
            let path = self.request_path;
            return Reply::of(self.update_sa_addresses(ctx, &found, path));
        }
        // §2.21.2: an initiator that could not authenticate us says so in
        // an INFORMATIONAL; the IKE SA is as good as deleted.
        let refused = found.has(NotifyType::AUTHENTICATION_FAILED);
        if refused
            || found
                .deletes
                .iter()
                .any(|d| d.protocol_id == ProtocolId::IKE)
        {
            if matches!(self.state, State::Eap(_)) {
                // An End-User that gave up on EAP (strongSwan does so on
                // an MSCHAPv2 Failure instead of answering it).
                return self.eap_abandoned(ctx, refused);
            }
            if refused {
                ctx.count(Counter::AuthRejectedByPeer);
            }
            return self.peer_deleted_ike(ctx);
        }
        let mut answer = Vec::new();
        for delete in &found.deletes {
            let protocol = match delete.protocol_id {
                ProtocolId::ESP => IpsecProtocol::Esp,
                ProtocolId::AH => IpsecProtocol::Ah,
                _ => continue,
            };
            answer.extend(self.peer_deleted_children(ctx, protocol, &delete.spis));
        }
        let mut payloads = child_deletes(answer);
        payloads.extend(echo_cookie2(&found));
        Reply::of(payloads)
    }

    /// The peer deletes Child SAs of `protocol` by its inbound SPIs (our
    /// outbound ones); returns our inbound SPIs to name in the answer
    /// (§1.4.1).
    fn peer_deleted_children(
        &mut self,
        ctx: &mut Ctx<'_>,
        protocol: IpsecProtocol,
        spis: &[u32],
    ) -> Vec<(IpsecProtocol, u32)> {
        let name = self.conn.name.clone();
        let mut ours = Vec::new();
        for &spi in spis {
            // §1.4.1: SPIs we do not know are ignored.
            let Some(idx) = self
                .children
                .iter()
                .position(|c| c.spi_out == spi && c.protocol() == protocol)
            else {
                continue;
            };
            if self.children[idx].status == ChildStatus::Deleting {
                // Crossed deletes: outbound went with our request, inbound
                // goes with its answer; not named here.
                self.children[idx].remove_outbound(ctx, &name);
                continue;
            }
            let spi_in = self.children[idx].spi_in;
            self.release_replacements(ctx, spi_in);
            let mut child = self.children.remove(idx);
            ctx.count(Counter::ChildSasDeleted);
            child.remove(ctx, &name);
            ours.push((protocol, spi_in));
        }
        ours
    }

    /// The peer deletes the IKE SA: every Child SA goes with it (§1.4.1).
    fn peer_deleted_ike(&mut self, ctx: &mut Ctx<'_>) -> Reply {
        if self.is_established() {
            ctx.count(Counter::IkeSasDeleted);
        }
        self.remove_children(ctx);
        if matches!(self.state, State::Established) {
            self.emit_down(ctx, "deleted by peer");
        }
        Reply {
            payloads: Vec::new(),
            after: vec![AfterSend::Close],
            deferred: false,
        }
    }
}

/// Delete payloads naming Child SAs, one per protocol (RFC 7296 §3.11: a
/// Delete payload names SPIs of a single protocol); none for no SPI.
fn child_deletes(spis: Vec<(IpsecProtocol, u32)>) -> Vec<Payload> {
    [IpsecProtocol::Esp, IpsecProtocol::Ah]
        .into_iter()
        .filter_map(|protocol| {
            let of: Vec<u32> = spis
                .iter()
                .filter(|(p, _)| *p == protocol)
                .map(|(_, spi)| *spi)
                .collect();
            (!of.is_empty()).then(|| {
                Payload::Delete(DeletePayload {
                    protocol_id: protocol_id(protocol),
                    spis: of,
                })
            })
        })
        .collect()
}
