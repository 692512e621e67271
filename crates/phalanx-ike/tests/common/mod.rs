//! Configurations and checks shared by the endpoint-pair tests.
#![allow(dead_code, clippy::unwrap_used)]

use core::net::IpAddr;
use std::time::Duration;

use phalanx_ike::auth::Identity;
use phalanx_ike::config::{
    ChildConfig, ChildProposal, Connection, EndpointConfig, EndpointLimits, IkeProposal, LocalAuth,
    RemoteAuth, SaLifetimeConfig, StartAction,
};
use phalanx_ike::ts::ts_any_port;
use phalanx_ike::{IkeSaState, SaEvent};
use phalanx_sa::{IpPrefix, IpsecProtocol, SaMode};
use phalanx_testkit::ike_pair::{IkePair, Side};
use zeroize::Zeroizing;

pub(crate) const ADDR_A: &str = "192.0.2.1";
pub(crate) const ADDR_B: &str = "198.51.100.2";
pub(crate) const NET_A: &str = "10.1.0.0";
pub(crate) const NET_B: &str = "10.2.0.0";
pub(crate) const SECRET: &[u8] = b"correct horse battery staple";

pub(crate) fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

pub(crate) fn net(s: &str) -> phalanx_wire::ike::TrafficSelector {
    ts_any_port(IpPrefix::new(ip(s), 16).unwrap())
}

/// A tunnel child between the two /16s, from `local`'s point of view.
pub(crate) fn child(name: &str, local: &str, remote: &str) -> ChildConfig {
    ChildConfig {
        name: name.to_owned(),
        local_ts: vec![net(local)],
        remote_ts: vec![net(remote)],
        protocol: IpsecProtocol::Esp,
        proposals: ChildProposal::parse_list("aes256gcm16-esn-noesn,aes128-sha256").unwrap(),
        mode: SaMode::Tunnel {
            local: ip(ADDR_A),
            remote: ip(ADDR_B),
        },
        lifetime: SaLifetimeConfig::child_default(),
        replay_window: 64,
        peer_replay_window: 0,
    }
}

/// A PSK connection of side A (initiator, `Start` unless told) or B.
pub(crate) fn connection(side: Side, ike: &str) -> Connection {
    let (local, remote, local_id, remote_id, lnet, rnet) = match side {
        Side::A => (ADDR_A, ADDR_B, "a.example", "b.example", NET_A, NET_B),
        Side::B => (ADDR_B, ADDR_A, "b.example", "a.example", NET_B, NET_A),
    };
    Connection {
        name: "gw".to_owned(),
        local_addr: ip(local),
        remote_addr: Some(ip(remote)),
        local_port: 500,
        remote_port: 500,
        local_id: Identity::Fqdn(local_id.to_owned()),
        remote_id: Some(Identity::Fqdn(remote_id.to_owned())),
        local_auth: LocalAuth::Psk(Zeroizing::new(SECRET.to_vec())),
        remote_auth: RemoteAuth::Psk(Zeroizing::new(SECRET.to_vec())),
        ike_proposals: IkeProposal::parse_list(ike).unwrap(),
        children: vec![child("net", lnet, rnet)],
        start_action: StartAction::None,
        dpd_delay: None,
        ike_lifetime: SaLifetimeConfig::ike_default(),
        fragmentation: true,
        force_encap: false,
        send_certreq: false,
        send_cert: false,
        mobike: true,
        pools: Vec::new(),
        vips: Vec::new(),
        local_signatures: Vec::new(),
        remote_signatures: Vec::new(),
    }
}

pub(crate) fn config(conn: Connection) -> EndpointConfig {
    EndpointConfig {
        connections: vec![conn],
        limits: EndpointLimits::default(),
        pools: Vec::new(),
    }
}

pub(crate) fn pair_of(a: Connection, b: Connection, seed: u64) -> IkePair {
    IkePair::new((config(a), ip(ADDR_A)), (config(b), ip(ADDR_B)), seed)
}

/// A and B with the same IKE proposals; A initiates.
pub(crate) fn pair(ike: &str, seed: u64) -> IkePair {
    pair_of(connection(Side::A, ike), connection(Side::B, ike), seed)
}

pub(crate) const DEFAULT_IKE: &str = "aes256gcm16-prfsha256-x25519";

/// Whether both sides have an established IKE SA and `children` Child SAs
/// installed in both directions.
pub(crate) fn up(p: &IkePair, children: usize) -> bool {
    [Side::A, Side::B].iter().all(|&s| {
        let sas = p.endpoint_ref(s).ike_sas();
        let (inb, outb) = p.installed(s);
        sas.iter().any(|sa| sa.state == IkeSaState::Established)
            && inb.len() == children
            && outb.len() == children
    })
}

pub(crate) fn established(p: &mut IkePair) {
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    assert!(
        p.run_until(|p| up(p, 1), Duration::from_secs(5)),
        "not up: {:#?}",
        p.log()
    );
}

/// The names of a side's events, for sequence assertions.
pub(crate) fn kinds(p: &IkePair, side: Side) -> Vec<&'static str> {
    p.events(side).iter().map(|e| kind(e)).collect()
}

pub(crate) fn kind(e: &SaEvent) -> &'static str {
    match e {
        SaEvent::IkeSaUp { .. } => "IkeSaUp",
        SaEvent::IkeSaDown { .. } => "IkeSaDown",
        SaEvent::IkeSaFailed { .. } => "IkeSaFailed",
        SaEvent::IkeSaRekeyed { .. } => "IkeSaRekeyed",
        SaEvent::InstallInbound(_) => "InstallInbound",
        SaEvent::InstallOutbound(_) => "InstallOutbound",
        SaEvent::RemoveInbound { .. } => "RemoveInbound",
        SaEvent::RemoveOutbound { .. } => "RemoveOutbound",
        SaEvent::ChildSaFailed { .. } => "ChildSaFailed",
        SaEvent::PeerMoved { .. } => "PeerMoved",
        _ => "other",
    }
}

/// Terminates A's connection and waits for both sides to be empty.
pub(crate) fn teardown(p: &mut IkePair) {
    p.with(Side::A, |e, now| e.terminate(now, "gw").unwrap());
    let gone = |p: &IkePair| {
        [Side::A, Side::B]
            .iter()
            .all(|&s| p.endpoint_ref(s).ike_sas().is_empty() && p.installed(s) == (vec![], vec![]))
    };
    let deadline = p.elapsed() + Duration::from_secs(60);
    assert!(
        p.run_until(gone, deadline),
        "not torn down: {:#?}",
        p.endpoint_ref(Side::B).ike_sas()
    );
}

/// The keys a side installed, per (SPI, encryption key, integrity key),
/// inbound or outbound, sorted.
#[allow(dead_code)]
pub(crate) fn installed_keys(
    p: &IkePair,
    side: Side,
    inbound: bool,
) -> Vec<(u32, Vec<u8>, Vec<u8>)> {
    let mut out: Vec<_> = p
        .events(side)
        .into_iter()
        .filter_map(|e| match (e, inbound) {
            (SaEvent::InstallInbound(i), true) | (SaEvent::InstallOutbound(i), false) => {
                Some((i.spi, i.encr_key.to_vec(), i.integ_key.to_vec()))
            }
            _ => None,
        })
        .collect();
    out.sort();
    out
}
