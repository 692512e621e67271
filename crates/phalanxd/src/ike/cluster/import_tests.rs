//! Two cluster nodes that both took one IKE SA over, fed the same agreed
//! log through their bridges: the rule of [`super::super::order`] run by
//! `ClusterIke::turn` on real endpoints. The IKE SA is negotiated by an
//! in-memory pair first (its side A's state is the failed owner's).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use phalanx_cluster::NodeId;
use phalanx_ike::config::EndpointConfig;
use phalanx_ike::ha::IkeSaState;
use phalanx_ike::SaEvent;
use phalanx_testkit::cluster_group::{ClusterHarness, HarnessConfig};
use phalanx_testkit::ike_pair::{IkePair, Side};

use super::super::bridge::{channel, ClusterEnd, FromCluster, ToCluster};
use super::super::{ClusterIke, ClusterIkeParts, Io};
use crate::ike::apply::Notes;
use crate::ike::sockets::{open_ike_socket, IkeSockets};
use crate::install::SaStore;

const X: NodeId = NodeId(1);
const Y: NodeId = NodeId(2);
const W: NodeId = NodeId(3);

/// The endpoint configuration of one side ("gw" from `local` to `remote`).
fn config(local: &str, remote: &str, nets: (u8, u8)) -> EndpointConfig {
    let file = format!(
        "[clear]\ntun = \"phx0\"\n[protected]\nlocal = \"{local}\"\n\
         [[connection]]\nname = \"gw\"\nremote_addr = \"{remote}\"\nauth = \"psk\"\n\
         psk = \"a long shared secret\"\nforce_encap = true\n\
         [[connection.child]]\nname = \"net\"\nlocal_ts = [\"10.{}.0.0/24\"]\n\
         remote_ts = [\"10.{}.0.0/24\"]\n",
        nets.0, nets.1
    );
    let config = crate::config::Config::parse("gw.toml", &file).unwrap();
    config.ike.unwrap().endpoint
}

/// The gateway's (side A) last replicated state of an established IKE SA.
fn negotiated() -> (IkePair, IkeSaState, EndpointConfig) {
    let gw = config("192.0.2.1", "192.0.2.2", (1, 2));
    let peer = config("192.0.2.2", "192.0.2.1", (2, 1));
    let addr = |s: &str| s.parse::<IpAddr>().unwrap();
    let mut p = IkePair::new(
        (gw.clone(), addr("192.0.2.1")),
        (peer, addr("192.0.2.2")),
        7,
    );
    p.with(Side::A, |e, now| {
        e.set_ha_replication(now, true);
        e.initiate(now, "gw").unwrap();
    });
    p.run_for(Duration::from_secs(2));
    let state = p
        .events(Side::A)
        .into_iter()
        .filter_map(|e| match e {
            SaEvent::IkeStateChanged { state } => Some((**state).clone()),
            _ => None,
        })
        .next_back()
        .expect("the IKE SA came up");
    (p, state, gw)
}

/// One cluster node: its cluster part, endpoint and I/O, and the cluster
/// thread's end of its bridge.
struct Member {
    cluster: ClusterIke,
    endpoint: phalanx_ike::Endpoint,
    sockets: IkeSockets,
    store: SaStore,
    notes: Notes,
    end: ClusterEnd,
}

impl Member {
    fn new(
        local: NodeId,
        harness: &ClusterHarness,
        config: &EndpointConfig,
        now: Instant,
    ) -> Member {
        let (bridge, end) = channel(64).unwrap();
        let shared = Arc::new(ArcSwap::new(harness.node(local).unwrap().shared()));
        let parts = ClusterIkeParts {
            local,
            shared,
            bridge,
            pool_partition: phalanx_ike::pool::Partition::default(),
        };
        let mut endpoint = crate::ike::build_endpoint(config.clone(), now).unwrap();
        endpoint.set_ha_replication(now, true);
        let bind = SocketAddr::from(([127, 0, 0, 1], 0));
        Member {
            cluster: ClusterIke::new(parts, config.clone(), Vec::new(), now),
            endpoint,
            sockets: IkeSockets::new(open_ike_socket(bind).unwrap(), None, 4500).unwrap(),
            store: SaStore::new(),
            notes: Notes::default(),
            end,
        }
    }

    fn step(&mut self, now: Instant, f: impl FnOnce(&mut ClusterIke, Instant, &mut Io<'_>)) {
        let peer = |_: &str| "peer".to_owned();
        let mut io = Io {
            endpoint: &mut self.endpoint,
            sockets: &mut self.sockets,
            store: &self.store,
            notes: &mut self.notes,
            peer: &peer,
        };
        f(&mut self.cluster, now, &mut io);
    }

    /// The log delivers `payload` from `from`; the node handles it.
    fn deliver(&mut self, now: Instant, from: NodeId, payload: &[u8]) {
        self.end.send(FromCluster::Delivered {
            from,
            payload: payload.to_vec(),
        });
        self.end.flush();
        self.step(now, |c, now, io| c.turn(now, io));
    }

    /// What the node multicast since the last call.
    fn multicast(&mut self) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| self.end.try_recv())
            .filter_map(|m| match m {
                ToCluster::Replicate { payload, .. } => Some(payload),
                _ => None,
            })
            .collect()
    }

    /// Takes the IKE SA over (its node left this node's view).
    fn take_over(&mut self, now: Instant, spis: ([u8; 8], [u8; 8])) {
        self.endpoint.take_over_ike_sa(now, spis.0, spis.1).unwrap();
        self.step(now, |c, now, io| c.flush(now, io, false));
    }

    /// Emits a new state of every IKE SA it runs.
    fn change(&mut self, now: Instant) {
        self.endpoint.set_ha_replication(now, false);
        self.endpoint.set_ha_replication(now, true);
        self.step(now, |c, now, io| c.flush(now, io, true));
    }
}

/// X and Y, both holding W's state in standby, both take the IKE SA over.
fn two_owners() -> (Member, Member, IkeSaState, Instant) {
    let (p, state, gw) = negotiated();
    let now = p.now;
    let mut harness = ClusterHarness::new(HarnessConfig {
        nodes: 3,
        ..HarnessConfig::default()
    });
    assert!(harness.run_until_ready(Duration::from_secs(2)));
    let (mut x, mut y) = (
        Member::new(X, &harness, &gw, now),
        Member::new(Y, &harness, &gw, now),
    );
    let from_w = super::super::wire::IkeAppMessage::State {
        owner: W,
        hold: 0,
        state: state.encode().to_vec(),
    }
    .encode();
    for m in [&mut x, &mut y] {
        // The first turn adopts the view {1, 2, 3}.
        m.step(now, |c, now, io| c.turn(now, io));
        m.deliver(now, W, &from_w);
        assert_eq!(m.cluster.counters().imported, 1);
        m.take_over(now, state.spis());
    }
    (x, y, state, now)
}

// log: S_X, S_Y -> Y runs it, X holds S_Y in standby.
#[test]
fn the_state_delivered_last_names_the_one_owner() {
    let (mut x, mut y, state, now) = two_owners();
    let (s_x, s_y) = (x.multicast(), y.multicast());
    assert_eq!((s_x.len(), s_y.len()), (1, 1));
    let log = [(X, &s_x[0]), (Y, &s_y[0])];
    for (from, payload) in log {
        x.deliver(now, from, payload);
        y.deliver(now, from, payload);
    }
    let (spi_i, spi_r) = state.spis();
    assert!(!x.endpoint.runs_ike_sa(spi_i, spi_r));
    assert!(y.endpoint.runs_ike_sa(spi_i, spi_r));
    assert_eq!(x.endpoint.imported_ike_sas().len(), 1);
    let (cx, cy) = (x.cluster.counters(), y.cluster.counters());
    assert_eq!((cx.owner_demotions, cx.owner_conflicts), (1, 0));
    assert_eq!((cy.owner_demotions, cy.owner_conflicts), (0, 1));
    // Standing down removed nothing from X's data plane.
    assert_eq!(x.notes.install_errors, 0);
    assert!(x.multicast().is_empty(), "no IkeStateRemoved");
}

// log: S_X, S_Y, S_X2 (X sent S_X2 before S_Y came) -> X runs it.
#[test]
fn a_later_own_state_on_its_way_keeps_the_ike_sa() {
    let (mut x, mut y, state, now) = two_owners();
    let (s_x, s_y) = (x.multicast(), y.multicast());
    x.deliver(now, X, &s_x[0]);
    x.change(now);
    let s_x2 = x.multicast();
    assert_eq!(s_x2.len(), 1);
    x.deliver(now, Y, &s_y[0]);
    x.deliver(now, X, &s_x2[0]);
    for (from, payload) in [(X, &s_x[0]), (Y, &s_y[0]), (X, &s_x2[0])] {
        y.deliver(now, from, payload);
    }
    let (spi_i, spi_r) = state.spis();
    assert!(x.endpoint.runs_ike_sa(spi_i, spi_r));
    assert!(!y.endpoint.runs_ike_sa(spi_i, spi_r));
    let (cx, cy) = (x.cluster.counters(), y.cluster.counters());
    assert_eq!((cx.owner_demotions, cx.owner_conflicts), (0, 1));
    assert_eq!((cy.owner_demotions, cy.owner_conflicts), (1, 1));
    assert_eq!(cy.stale_owner_states, 0);
}
