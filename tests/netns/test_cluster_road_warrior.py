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
hands out offsets k mod 3); a second End-User (namespace gwC, 192.0.2.3)
gets another address; every node's `phalanxctl pools` shows both
online; pings from the address reach hostA; the owner crashes; a survivor
runs the IKE SA with the same SPIs and virtual IP, the pings go on after
the handover, strongSwan's Child SA rekey and liveness checks are
answered, no second IKE_SA_INIT; the second End-User keeps its tunnel and
address too; survivors still show both leases online and no conflict.
"""

import ipaddress
import time

import pytest

import cluster
import ikegw
import pki
import radius
import swan
from cluster_ike import init_count, runner, same_spi, wait_runner, wait_swan_sa
from cluster_rw import (EAP_USERS, POOL, RADIUS_SECRET, leased, ping_from_vip, pool_online, second_end_user,
                        start)
from test_cluster_ike import _cluster


@pytest.fixture
def topo(request, binaries):
    with _cluster(request) as cl:
        yield cl


def runner_of(cl, nodes, spi_i, spi_r, seconds=5):
    """The one node among `nodes` that runs the IKE SA of these SPIs."""
    deadline = time.monotonic() + seconds
    while True:
        found = [i for i, sas in runner(cl, nodes).items()
                 if any(same_spi(sa["spi_i"], spi_i) and same_spi(sa["spi_r"], spi_r) for sa in sas)]
        if len(found) == 1:
            return found[0]
        assert time.monotonic() < deadline, "not one runner of the IKE SA: {}".format(found)
        time.sleep(0.2)


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
    # A second End-User from another address: its own address, whichever
    # node serves it.
    dave = second_end_user(cl, "dave@example.com")
    dave.initiate("net", ike="home", timeout=20)
    dave_vips = dave.list_sas()[0].get("local-vips", [])
    assert len(dave_vips) == 1 and dave_vips != vips, (dave_vips, vips)
    assert ipaddress.ip_address(dave_vips[0]) in ipaddress.ip_network(POOL)
    # The owner's share: node k (by id order, from 0) of 3 hands out
    # offsets k mod 3 of 10.3.0.1-10.3.0.254.
    offset = int(vip) - int(ipaddress.ip_address("10.3.0.1"))
    assert offset % cl.nodes == owner - 1, (vip, owner)
    for i in range(1, cl.nodes + 1):
        gw = cl.gateways["n{}".format(i)]
        assert ikegw.wait_for(lambda: pool_online(gw).get("rw4") == 2, 5), (i, gw.ctl("pools"))
    assert ping_from_vip(cl).returncode == 0, "the End-User cannot reach hostA"
    assert ping_from_vip(cl, ns="gwC").returncode == 0, "the second End-User cannot reach hostA"
    inits = init_count(charon)
    dave_inits = init_count(dave)

    # The serving node loses power: a survivor runs the IKE SA on, with the
    # same address.
    cl.crash_node(owner)
    others = [i for i in range(1, cl.nodes + 1) if i != owner]
    successor = runner_of(cl, others, spi_i, spi_r)
    assert str(vip) in leased(cl, successor), cl.gateways["n{}".format(successor)].ctl("ike")
    time.sleep(1.0)
    proc = ping_from_vip(cl, count=20)
    assert proc.returncode == 0, "no traffic after the handover:\n" + proc.stdout
    charon.rekey(child="net")
    assert ikegw.wait_for(lambda: ping_from_vip(cl, count=3).returncode == 0, 10)
    time.sleep(3.0)  # liveness checks (dpd 2 s) answered by the successor
    assert charon.list_sas(), "strongSwan lost its IKE SA"
    assert charon.list_sas()[0].get("local-vips") == [str(vip)]
    assert init_count(charon) == inits, "the End-User renegotiated"
    assert ping_from_vip(cl, ns="gwC").returncode == 0, "the second End-User lost its tunnel"
    assert dave.list_sas()[0].get("local-vips") == dave_vips
    assert init_count(dave) == dave_inits, "the second End-User renegotiated"
    for i in others:
        gw = cl.gateways["n{}".format(i)]
        assert pool_online(gw).get("rw4") == 2, (i, gw.ctl("pools"))
        counters = ikegw.flatten_counters(gw.ctl("counters"))
        assert ikegw.counter(counters, "virtual_ip_conflicts") == 0, counters


def move(cl, ns, old, new):
    """The End-User's WAN address changes: `new` added, `old` removed."""
    cl.run(ns, ["sysctl", "-qw", "net.ipv4.conf.wan0.promote_secondaries=1"])
    cl.run(ns, ["ip", "addr", "add", new + "/24", "dev", "wan0"])
    cl.run(ns, ["ip", "addr", "del", old + "/24", "dev", "wan0"])


def node_state(cl, i):
    """Node i's SAs (direction, SPI, remote, encap port, packets) and the
    IKE and drop counters that moved, for failure messages."""
    gw = cl.gateways["n{}".format(i)]
    sas = [(s["direction"], hex(s["spi"]), s["remote"], s["encap"], s["packets"]) for s in gw.ctl("sas")]
    moved = {k: v for k, v in ikegw.flatten_counters(gw.ctl("counters")).items()
             if v and (k.startswith("drops.") or k.startswith("daemon.") or "mobike" in k or "moved" in k)}
    return "n{}: SAs {}; counters {}".format(i, sas, moved)


def remote_of(cl, i):
    clients = cl.gateways["n{}".format(i)].ctl("clients")
    return clients[0]["remote"] if clients else ""


def test_mobike_end_user_moves_and_a_successor_follows(topo):
    """MOBIKE on the cluster (RFC 4555): the End-User moves to another
    address under a 10 ms ping and a TCP download (iperf3 -R from hostA,
    20 Mbit/s, 5 s, which must finish) and sends UPDATE_SA_ADDRESSES; the
    node running its IKE SA follows (same SPIs, traffic from the new
    address after its return-routability check) and at most one ping sent
    after the announcement is lost. That node loses power; the successor,
    which knows MOBIKE was agreed from the replicated state, follows the
    End-User's next move too. No IKE_SA_INIT after the first."""
    cl = topo
    charon = start(cl, mobike=True)
    charon.initiate("net", ike="home", timeout=20)
    spi_i, spi_r, _ = wait_swan_sa(charon)
    owner, _ = wait_runner(cl, range(1, cl.nodes + 1))
    assert ping_from_vip(cl).returncode == 0
    inits = init_count(charon)
    # Not 192.0.2.1x: those are the nodes' own WAN addresses (cluster.py);
    # an End-User on n2's address got its replies answered by n2's kernel
    # (port unreachable) whenever n2 sent them.
    first, second = "192.0.2.52", "192.0.2.53"
    vip = leased(cl, owner)[0]
    traffic = swan.MoveTraffic(cl, "gwB", vip, "hostA", cluster.HOSTA)
    move(cl, "gwB", cluster.GWB_WAN, first)
    assert ikegw.wait_for(lambda: remote_of(cl, owner).startswith(first + ":"), 15), \
        (remote_of(cl, owner), charon.log()[-3000:])
    traffic.check(charon)
    assert ikegw.wait_for(lambda: ping_from_vip(cl, count=3).returncode == 0, 10), \
        "no traffic after the move: " + "; ".join(node_state(cl, i) for i in range(1, cl.nodes + 1))

    cl.crash_node(owner)
    others = [i for i in range(1, cl.nodes + 1) if i != owner]
    successor = runner_of(cl, others, spi_i, spi_r)
    assert remote_of(cl, successor).startswith(first + ":"), remote_of(cl, successor)
    assert ikegw.wait_for(lambda: ping_from_vip(cl, count=3).returncode == 0, 10), \
        "no traffic after the handover: " + "; ".join(node_state(cl, i) for i in others) + charon.log()[-5000:]
    move(cl, "gwB", first, second)
    assert ikegw.wait_for(lambda: remote_of(cl, successor).startswith(second + ":"), 15), \
        (remote_of(cl, successor), charon.log()[-3000:])
    assert ikegw.wait_for(lambda: ping_from_vip(cl, count=3).returncode == 0, 10), "no traffic after the second move"
    counters = ikegw.flatten_counters(cl.gateways["n{}".format(successor)].ctl("counters"))
    assert ikegw.counter(counters, "mobike_updates", scope="ike") >= 1, counters
    assert init_count(charon) == inits, "the End-User renegotiated"


def test_eap_end_user_on_the_cluster(topo):
    """EAP-MSCHAPv2 on the cluster (RFC 7296 §2.16): the node that owns
    the End-User's segment signs with the cluster's certificate and runs
    EAP against its [[eap_secret]]s; the End-User gets an address and
    reaches hostA (wrong passwords: test_road_warrior.py, the same code).
    Then the serving node loses power and the successor carries the
    established IKE SA on (EAP is over by then: nothing of it needs
    replicating)."""
    cl = topo
    paths = pki.build(cl.run_dir, "ecdsa-p256")
    charon = start(cl, eap_paths=paths)
    charon.initiate("net", ike="home", timeout=20)
    assert "EAP method EAP_MSCHAPV2 succeeded" in charon.log(), charon.log()[-3000:]
    spi_i, spi_r, _ = wait_swan_sa(charon)
    owner, _ = wait_runner(cl, range(1, cl.nodes + 1))
    assert ping_from_vip(cl).returncode == 0, "the End-User cannot reach hostA"
    clients = cl.gateways["n{}".format(owner)].ctl("clients")
    assert clients and clients[0]["auth"] == "eap-mschapv2", clients
    inits = init_count(charon)

    cl.crash_node(owner)
    others = [i for i in range(1, cl.nodes + 1) if i != owner]
    successor = runner_of(cl, others, spi_i, spi_r)
    assert ikegw.wait_for(lambda: ping_from_vip(cl, count=3).returncode == 0, 10), "no traffic after the handover"
    assert init_count(charon) == inits, "the End-User renegotiated"
    assert successor in others


def test_eap_through_radius_on_the_cluster(topo):
    """EAP-MSCHAPv2 relayed to FreeRADIUS 3.2 on the cluster (RFC 3579):
    the node that runs the End-User's IKE SA sends the Access-Requests from
    its own LAN address to the server in hostA and answers the End-User
    when the server does; the End-User gets an address and reaches hostA.
    Then that node loses power and the successor carries the established
    IKE SA on without asking RADIUS again. (Accounting is refused on a
    cluster node: acct_port = 0.)"""
    cl = topo
    server = radius.FreeRadius(cl, "hostA", "radius-a", cluster.HOSTA, RADIUS_SECRET, ["10.1.0.0/24"],
                               EAP_USERS).start()
    paths = pki.build(cl.run_dir, "ecdsa-p256")
    charon = start(cl, eap_paths=paths, radius=cluster.HOSTA)
    charon.initiate("net", ike="home", timeout=20)
    assert "EAP method EAP_MSCHAPV2 succeeded" in charon.log(), charon.log()[-3000:] + server.log()[-3000:]
    spi_i, spi_r, _ = wait_swan_sa(charon)
    owner, _ = wait_runner(cl, range(1, cl.nodes + 1))
    assert ping_from_vip(cl).returncode == 0, "the End-User cannot reach hostA"
    clients = cl.gateways["n{}".format(owner)].ctl("clients")
    assert clients and clients[0]["auth"] == "eap-radius", clients
    accepts = server.replies_sent("Access-Accept")
    assert accepts == 1, server.log()[-3000:]
    counters = ikegw.flatten_counters(cl.gateways["n{}".format(owner)].ctl("counters"))
    assert ikegw.counter(counters, "radius_accepts") == 1, counters
    inits = init_count(charon)

    cl.crash_node(owner)
    others = [i for i in range(1, cl.nodes + 1) if i != owner]
    runner_of(cl, others, spi_i, spi_r)
    assert ikegw.wait_for(lambda: ping_from_vip(cl, count=3).returncode == 0, 10), "no traffic after the handover"
    assert init_count(charon) == inits, "the End-User renegotiated"
    assert server.replies_sent("Access-Accept") == accepts, "RADIUS asked again after the handover"
