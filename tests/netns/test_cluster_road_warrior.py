"""End-Users on the cluster (issue 18): a strongSwan 5.9.8 road-warrior
client asks the 3-node cluster of tests/netns/cluster.py for a virtual IP;
the lease travels in the replicated IKE SA state, so every node marks it
leased, and when the node serving the End-User loses power a survivor
carries the IKE SA, the Child SA and the address on: no renegotiation,
the same inner address, traffic again after the handover.

    hostA 10.1.0.10 -- [br-lan] -- n1 n2 n3 (VIP 192.0.2.1, pool 10.3.0.0/24) -- [br-wan] -- gwB: charon (End-User)

    End-User                              cluster (owner of its segment)
    IKE_SA_INIT, IKE_AUTH {IDi, AUTH, CP(CFG_REQUEST), SA, TSi(0/0), TSr} -->
                 <-- {IDr, AUTH, CP(CFG_REPLY: 10.3.0.n), SA, TSi(10.3.0.n), TSr(10.1.0.0/24)}
                                          IkeStateChanged {.., virtual_ips: 10.3.0.n} -> every node

Checks: the address is in the owner's share of the pool (node k of 3
hands out offsets k mod 3), every node's `phalanxctl pools` shows it
online; pings from the address reach hostA; the owner crashes; a survivor
runs the IKE SA with the same SPIs and virtual IP, the pings go on after
the handover, strongSwan's Child SA rekey and liveness checks are
answered, no second IKE_SA_INIT; survivors still show one lease online
and no conflict.
"""

import ipaddress
import os
import time

import cluster
import ikegw
import phxnet
import swan
from cluster_ike import ESP, SITE_A, SWAN_REPLAY_WINDOW, WAN, init_count, same_spi, wait_runner, wait_swan_sa
from test_cluster_ike import _cluster

import pytest

POOL = "10.3.0.0/24"
IDENTITY = "carol@example.com"


@pytest.fixture
def topo(request, binaries):
    with _cluster(request) as cl:
        yield cl


def cluster_conn():
    """The cluster's side: any End-User with the PSK, site A, the pool."""
    vip, _ = WAN["v4"]
    child = ikegw.Child(local_ts=[SITE_A], remote_ts=["0.0.0.0/0"], esp_proposals=ESP,
                        peer_replay_window=SWAN_REPLAY_WINDOW)
    conn = ikegw.Conn(local_addr=vip, remote_addr=None, local_id=vip, remote_id=None, children=[child],
                      initiator=False, dpd_delay="3s")
    conn.name = "rw"
    conn.pools = [("rw4", POOL)]
    return conn


def end_user_conn():
    """strongSwan at gwB as an End-User: PSK, asks for an address, site A."""
    vip, gwb = WAN["v4"]
    child = ikegw.Child(local_ts=["dynamic"], remote_ts=[SITE_A], esp_proposals=ESP)
    conn = ikegw.Conn(local_addr=gwb, remote_addr=vip, local_id=IDENTITY, remote_id=vip, children=[child],
                      dpd_delay="2s")
    conn.name = "home"
    conn.vips = ["0.0.0.0"]
    return conn


def start(cl):
    cl.config_paths = {}
    for i in range(1, cl.nodes + 1):
        d = cl.node_dir(i)
        text = ikegw.render_phalanx_toml(cluster_conn(), "A", d)
        text = text.replace(os.path.join(d, "gwA.sock"), os.path.join(d, "phalanxd.sock"))
        text += cluster.cluster_table(i, cl.nodes, "packet-rr", outside=WAN["v4"][0], inside=cl.vips_in)
        path = os.path.join(d, "phalanxd.toml")
        with open(path, "w") as f:
            f.write(text)
        cl.config_paths["n{}".format(i)] = path
    ids = list(range(1, cl.nodes + 1))
    for i in ids:
        cl.start_corosync(i)
    cl.wait_corosync(ids)
    charon = swan.Charon(cl, "gwB")
    charon.configure(end_user_conn(), retransmit_tries=5, retransmit_timeout=1.0, install_virtual_ip=True)
    charon.start()
    charon.load()
    for i in ids:
        cl.start_node(i)
        # The pool's addresses live behind the tunnel.
        cl._ip("-n", cl.ns["n{}".format(i)], "route", "replace", POOL, "dev", phxnet.TUN)
    cl.wait_cluster_view(ids)
    return charon


def leased(cl, i):
    """The virtual IPs of the IKE SAs node i runs."""
    return [ip for sa in cl.gateways["n{}".format(i)].ctl("ike") if sa["state"].upper() == "ESTABLISHED"
            for ip in sa.get("virtual_ips", [])]


def pool_online(gw):
    return {p["name"]: p["online"] for p in gw.ctl("pools")}


def ping_from_vip(cl, count=10, interval=0.05):
    proc = cl.run("gwB", ["ping", "-c", str(count), "-i", str(interval), "-W", "1", cluster.HOSTA], check=False)
    return proc


def test_virtual_ip_survives_the_serving_node(topo):
    cl = topo
    charon = start(cl)
    charon.initiate("net", ike="home", timeout=20)
    spi_i, spi_r, _ = wait_swan_sa(charon)
    sas = charon.list_sas()
    vips = sas[0].get("local-vips", [])
    assert len(vips) == 1, sas
    vip = ipaddress.ip_address(vips[0])
    assert vip in ipaddress.ip_network(POOL), vip
    owner, owned = wait_runner(cl, range(1, cl.nodes + 1))
    assert same_spi(owned[0]["spi_i"], spi_i), (owned, spi_i)
    assert leased(cl, owner) == [str(vip)], cl.gateways["n{}".format(owner)].ctl("ike")
    # The owner's share: node k (by id order, from 0) of 3 hands out
    # offsets k mod 3 of 10.3.0.1-10.3.0.254.
    offset = int(vip) - int(ipaddress.ip_address("10.3.0.1"))
    assert offset % cl.nodes == owner - 1, (vip, owner)
    for i in range(1, cl.nodes + 1):
        gw = cl.gateways["n{}".format(i)]
        assert ikegw.wait_for(lambda: pool_online(gw).get("rw4") == 1, 5), (i, gw.ctl("pools"))
    assert ping_from_vip(cl).returncode == 0, "the End-User cannot reach hostA"
    inits = init_count(charon)

    # The serving node loses power: a survivor runs the IKE SA on, with the
    # same address.
    cl.crash_node(owner)
    others = [i for i in range(1, cl.nodes + 1) if i != owner]
    successor, sas_after = wait_runner(cl, others, seconds=5)
    assert same_spi(sas_after[0]["spi_i"], spi_i) and same_spi(sas_after[0]["spi_r"], spi_r), sas_after
    assert leased(cl, successor) == [str(vip)], cl.gateways["n{}".format(successor)].ctl("ike")
    time.sleep(1.0)
    proc = ping_from_vip(cl, count=20)
    assert proc.returncode == 0, "no traffic after the handover:\n" + proc.stdout
    charon.rekey(child="net")
    assert ikegw.wait_for(lambda: ping_from_vip(cl, count=3).returncode == 0, 10)
    time.sleep(3.0)  # liveness checks (dpd 2 s) answered by the successor
    assert charon.list_sas(), "strongSwan lost its IKE SA"
    assert charon.list_sas()[0].get("local-vips") == [str(vip)]
    assert init_count(charon) == inits, "the End-User renegotiated"
    for i in others:
        gw = cl.gateways["n{}".format(i)]
        assert pool_online(gw).get("rw4") == 1, (i, gw.ctl("pools"))
        counters = ikegw.flatten_counters(gw.ctl("counters"))
        assert ikegw.counter(counters, "virtual_ip_conflicts") == 0, counters
