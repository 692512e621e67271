//! The responder's choice of connection by identity at IKE_AUTH (two-step
//! selection, as strongSwan does it; RFC 7296 §2.15): several connections
//! on one address, wildcard identities, the authentication kind.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use phalanx_ike::auth::Identity;
use phalanx_ike::config::{Connection, EndpointConfig, EndpointLimits, RemoteAuth};
use phalanx_ike::{Counter, IkeSaState};
use phalanx_testkit::ike_pair::{IkePair, Side};
use zeroize::Zeroizing;

/// B answers any peer with three connections, in this order: one for
/// `alice@example.com`, one for anyone `*@example.com`, one for the FQDN
/// `a.example`; each with its own PSK.
fn gateway() -> EndpointConfig {
    let responder = |name: &str, remote_id: &str, secret: &str| {
        let mut c = connection(Side::B, DEFAULT_IKE);
        c.name = name.to_owned();
        c.remote_addr = None;
        c.remote_id = Some(Identity::parse_config(remote_id).unwrap());
        c.remote_auth = RemoteAuth::Psk(Zeroizing::new(secret.as_bytes().to_vec()));
        c.local_auth =
            phalanx_ike::config::LocalAuth::Psk(Zeroizing::new(secret.as_bytes().to_vec()));
        c
    };
    EndpointConfig {
        connections: vec![
            responder("alice", "alice@example.com", "alice's own secret"),
            responder("example", "*@example.com", "the example.com secret"),
            responder("site", "a.example", "the site secret"),
        ],
        limits: EndpointLimits::default(),
        pools: Vec::new(),
    }
}

fn client(id: &str, secret: &str) -> Connection {
    let mut a = connection(Side::A, DEFAULT_IKE);
    a.local_id = Identity::parse_config(id).unwrap();
    a.remote_id = None;
    a.local_auth = phalanx_ike::config::LocalAuth::Psk(Zeroizing::new(secret.as_bytes().to_vec()));
    a.remote_auth = RemoteAuth::Psk(Zeroizing::new(secret.as_bytes().to_vec()));
    a
}

/// The connection B put the IKE SA under, once established.
fn chosen(id: &str, secret: &str, seed: u64) -> (IkePair, Option<String>) {
    let mut p = IkePair::new(
        (config(client(id, secret)), ip(ADDR_A)),
        (gateway(), ip(ADDR_B)),
        seed,
    );
    p.with(Side::A, |e, now| e.initiate(now, "gw").unwrap());
    p.run_for(Duration::from_secs(3));
    let name = p
        .endpoint_ref(Side::B)
        .ike_sas()
        .into_iter()
        .find(|s| s.state == IkeSaState::Established)
        .map(|s| s.connection);
    (p, name)
}

// HDR, SK {IDi(alice@example.com), AUTH(PSK), SAi2, TSi, TSr}  -->
//                        <--  HDR, SK {IDr, AUTH, SAr2, TSi, TSr}  (conn "alice")
#[test]
fn the_first_connection_whose_identity_matches_is_chosen() {
    let (p, name) = chosen("alice@example.com", "alice's own secret", 90);
    assert_eq!(name.as_deref(), Some("alice"));
    assert!(up(&p, 1));
    // Bob matches the wildcard connection, after alice's.
    let (_, name) = chosen("bob@example.com", "the example.com secret", 91);
    assert_eq!(name.as_deref(), Some("example"));
    // An FQDN peer gets the third.
    let (_, name) = chosen("a.example", "the site secret", 92);
    assert_eq!(name.as_deref(), Some("site"));
}

// HDR, SK {IDi(carol@other.org), AUTH, ...}  -->
//                        <--  HDR, SK {N(AUTHENTICATION_FAILED)}
#[test]
fn an_identity_that_matches_nothing_fails_and_leaves_no_state() {
    let (p, name) = chosen("carol@other.org", "the example.com secret", 93);
    assert_eq!(name, None);
    let b = p.endpoint_ref(Side::B);
    assert_eq!(b.counters().get(Counter::AuthFailed), 1);
    assert!(
        b.ike_sas().is_empty(),
        "state left behind: {:?}",
        b.ike_sas()
    );
    assert_eq!(p.installed(Side::B), (vec![], vec![]));
}

// The right connection, the wrong secret: AUTH does not verify.
#[test]
fn the_chosen_connections_secret_is_the_one_checked() {
    // Alice with the wildcard connection's secret: her own connection is
    // chosen (first match), and its secret refuses her AUTH.
    let (p, name) = chosen("alice@example.com", "the example.com secret", 94);
    assert_eq!(name, None);
    assert_eq!(
        p.endpoint_ref(Side::B).counters().get(Counter::AuthFailed),
        1
    );
}
