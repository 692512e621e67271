"""IKE in cluster mode (issue 5, "replicate IKE state too"): the 3-node
Phalanx cluster of tests/netns/cluster.py faces strongSwan (charon with
kernel-libipsec) at site B instead of a single Phalanx. No static SA: every
SA comes from IKEv2.

    hostA -- [br-lan] -- n1 n2 n3 (phalanxd + Corosync, VIP 192.0.2.1) -- [br-wan] -- gwB (charon) -- hostB

(a) strongSwan initiates; the IKE SA comes up with the cluster (one node
    runs it, the two others hold its replicated state); ping and UDP from
    hostA to hostB and back go through all three nodes (each node's owned
    packet counters grow).
(b) the node that runs the IKE SA loses power (cluster.Cluster.crash_node:
    its phalanxd and Corosync frozen at once, its cables dark):
    traffic goes on; then strongSwan rekeys the Child SA and sends
    liveness checks: the successor answers them — same IKE SPIs before and
    after, no new IKE_SA_INIT in charon's log, the new Child SA carries
    traffic. The node then powers on again: it learns the IKE SA's state
    after its state transfer, runs nothing, and carries traffic again.
(c) the cluster initiates to strongSwan (`start_action = "start"`): the
    owner of strongSwan's segment starts it once the view has settled.
(d) a falsely suspected owner (SIGSTOP) demotes its IKE SA on resuming.
(e) (a) and (b) over an IPv6 WAN (`Cluster(lan6=True, wan6=True)`): IKE
    and ESP between the outside virtual address 2001:db8:f::1 and gwB's
    2001:db8:f::2, one Child SA with both inner families (10.1.0.0/24,
    fd01::/64 <-> 10.2.0.0/24, fd02::/64). strongSwan initiates; its IKE
    SA runs to 2001:db8:f::1; 50 pings at 10 ms each way and family
    without loss; on the WAN every ESP packet is over IPv6, from
    2001:db8:f::1 or to it, none over IPv4, the cluster's from one node
    (strongSwan's replay window, 128, is too small for one SA spread over
    nodes: `peer_replay_window`) and no (SPI, IV) or (SPI, seq) twice;
    every node's cluster_inbound_owned grew, one node's
    cluster_outbound_owned. Then a power
    loss of the node that runs the IKE SA under UDP (IPv4) and ping -6
    traffic: it goes on, a survivor takes the IKE SA over with the same
    SPIs, strongSwan's Child SA rekey and liveness checks are answered,
    no new IKE_SA_INIT, pings of both families without loss again.

Run: PHX_SKIP_BUILD=1 PHX_BIN_DIR=/work/target-rel/release python3 -m pytest -x -s tests/netns/test_cluster_ike.py
"""

import contextlib
import itertools
import os
import signal
import time

import pytest

import cluster
from cluster_ike import SITE_A6, SITE_B6, exchanges_since, ike_counter, init_count, same_spi, start, \
    wait_child_rekeyed, wait_runner, wait_swan_sa
# IPv6 through the cluster: bounded pings without loss, per-node counters.
from test_cluster_ipv6 import _counters, _delta, _no_loss, check_esp_over_ipv6

_COUNTER = itertools.count()
UDP_RATE = 200


@contextlib.contextmanager
def _cluster(request, **kw):
    """A `cluster.Cluster(**kw)` up; torn down (logs on failure)."""
    cl = cluster.Cluster(prefix="pxi{}t{}".format(os.getpid(), next(_COUNTER)), **kw)
    try:
        cl.up()
        yield cl
    finally:
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.failed:
            cl.dump_logs()
            charon = os.path.join(cl.run_dir, "charon-gwB", "charon.log")
            if os.path.exists(charon):
                with open(charon) as f:
                    print("--- charon.log (tail)\n" + f.read()[-6000:])
        cl.down()
        ns, alive = cl.leftovers()
        assert not ns and not alive, "left behind: namespaces {}, processes {}".format(ns, alive)


@pytest.fixture
def topo(request, binaries):
    """The cluster's namespaces and bridges; torn down (logs on failure)."""
    with _cluster(request) as cl:
        yield cl


@pytest.fixture
def topo6(request, binaries):
    """`topo` with a dual-stack LAN and an IPv6 WAN (test (e))."""
    with _cluster(request, lan6=True, wan6=True) as cl:
        yield cl


def traffic(cl, seconds, name):
    """UDP both ways at UDP_RATE/s and a 10 ms ping, started."""
    return ([cluster.UdpStream(cl, name + "-out", "hostA", "hostB", cluster.HOSTB, 5001, UDP_RATE, seconds).start(),
             cluster.UdpStream(cl, name + "-in", "hostB", "hostA", cluster.HOSTA, 5002, UDP_RATE, seconds).start()])


def _established(cl):
    """strongSwan at gwB initiates to the cluster: its IKE SA and Child
    SA (`wait_swan_sa`), the node that runs the IKE SA with the same SPI
    and the others holding standby copies, one IKE_SA_INIT so far.
    Returns (charon, (spi_i, spi_r, children), (owner, others), inits)."""
    charon = start(cl)
    charon.initiate("net", ike="site", timeout=20)
    spi_i, spi_r, children = wait_swan_sa(charon)
    owner, sas = wait_runner(cl, range(1, cl.nodes + 1))
    assert same_spi(sas[0]["spi_i"], spi_i), (sas, spi_i)
    inits = init_count(charon)
    assert inits == 2, "one IKE_SA_INIT exchange: {}".format(inits)
    others = [i for i in range(1, cl.nodes + 1) if i != owner]
    for i in others:
        assert ike_counter(cl.gateways["n{}".format(i)], "imported") >= 1, "n{} holds no standby copy".format(i)
    return charon, (spi_i, spi_r, children), (owner, others), inits


def _kill_owner(cl, charon, nodes, sa):
    """A power loss of the node that runs the IKE SA (`nodes`: it and the
    others): one of the others takes it over with the same SPIs (`sa`:
    spi_i, spi_r, children), and a Child SA rekey strongSwan starts then
    keeps the IKE SA. Returns when the kill happened and the successor."""
    (owner, others), (spi_i, spi_r, children) = nodes, sa
    t_fail = time.time()
    cl.crash_node(owner)
    successor, sas = wait_runner(cl, others, seconds=5)
    print("owner n{} lost power; n{} took over the IKE SA".format(owner, successor))
    assert ike_counter(cl.gateways["n{}".format(successor)], "takeovers") == 1
    assert same_spi(sas[0]["spi_i"], spi_i) and same_spi(sas[0]["spi_r"], spi_r), (sas, spi_i, spi_r)
    time.sleep(1.0)
    charon.rekey(child="net")
    now_i, now_r, _ = wait_child_rekeyed(charon, children)
    assert (now_i, now_r) == (spi_i, spi_r), "the IKE SA changed"
    return t_fail, successor


def _check_survived(charon, results, window, inits):
    """After the IKE owner's kill at `window[0]` under `window[1]` seconds
    of UDP (`results`): at most 10 % of each stream lost, strongSwan's
    liveness checks (DPD every 2 s) answered after the kill, and no new
    IKE_SA_INIT (`inits` before)."""
    t_fail, seconds = window
    for r in results:
        lost_late = cluster.lost_in(r, t_fail + 0.5, r["start"] + seconds)
        print("udp: lost {} of {}, {} after the failover settled".format(r["lost"], r["expected"], lost_late))
        assert r["lost"] <= 0.1 * r["expected"], r
    deadline = time.monotonic() + 15
    while True:
        answered = [e for e in exchanges_since(charon, t_fail) if e["exchange"] == "INFORMATIONAL"
                    and e["dir"] == "parsed" and e["kind"] == "response"]
        if answered:
            break
        assert time.monotonic() < deadline, "no INFORMATIONAL answered after the failover"
        time.sleep(0.5)
    assert init_count(charon) == inits, "a new IKE_SA_INIT after the failover"


def test_strongswan_initiates_and_survives_the_owner(topo):
    """(a) and (b) of the module doc."""
    cl = topo
    charon, (spi_i, spi_r, children), (owner, others), inits = _established(cl)
    assert ike_counter(cl.gateways["n{}".format(owner)], "held") >= 1, "no write-ahead hold on the owner"

    # (a) traffic through every node.
    assert cl.wait_ping("hostA", cluster.HOSTB, 15), "ping hostA -> hostB through the IKE Child SA"
    before = {i: cluster.owned(cl.gateways["n{}".format(i)]) for i in range(1, cl.nodes + 1)}
    streams = traffic(cl, 3.0, "udp-a")
    ping = cluster.Ping(cl, 3.0).start()
    results = [s.result(40) for s in streams]
    pinged = ping.result()
    for r in results:
        assert r["received"] >= 0.98 * r["expected"], r
    assert pinged["received"] >= 0.95 * pinged["sent"], pinged
    for i in range(1, cl.nodes + 1):
        grown = cluster.owned(cl.gateways["n{}".format(i)]) - before[i]
        print("n{} owned {} packets of the IKE Child SAs".format(i, grown))
        assert grown > 0, "n{} processed nothing".format(i)

    # (b) the owner dies; traffic goes on; strongSwan's exchanges are
    # answered by the successor without a new IKE SA.
    seconds = 10.0
    streams = traffic(cl, seconds, "udp-b")
    time.sleep(2.0)
    t_fail, successor = _kill_owner(cl, charon, (owner, others), (spi_i, spi_r, children))
    results = [s.result(seconds + 40) for s in streams]
    _check_survived(charon, results, (t_fail, seconds), inits)
    assert cl.wait_ping("hostA", cluster.HOSTB, 10), "ping over the rekeyed Child SA"
    assert charon.alive()

    # The node powers on again: after its state transfer it gets the IKE
    # SA's state (re-sent for it), runs nothing (the IKE SA stays with the
    # successor) and carries its share of the Child SA's traffic.
    everyone = list(range(1, cl.nodes + 1))
    cl.power_on(owner)
    cl.start_corosync(owner)
    cl.wait_corosync(everyone, seconds=20)
    back = cl.start_node(owner)
    cl.wait_cluster_view(everyone, seconds=30)
    deadline = time.monotonic() + 10
    while ike_counter(back, "known_ike_sas") != 1:
        assert time.monotonic() < deadline, "the rejoined node learnt no IKE SA state"
        time.sleep(0.2)
    assert ike_counter(back, "imported") >= 1
    now = wait_runner(cl, everyone)[0]
    assert now != owner, "the IKE SA moved to the rejoined node"
    if now != successor:
        # Only a (false) suspicion of the successor moves it on: it then
        # demoted its copy (test (d)); heartbeats late on a loaded machine.
        assert ike_counter(cl.gateways["n{}".format(successor)], "demotions") >= 1, \
            "the IKE SA moved from n{} to n{} without a demotion".format(successor, now)
    owned_back = cluster.owned(back)
    for r in (s.result(40) for s in traffic(cl, 2.0, "udp-r")):
        assert r["received"] >= 0.98 * r["expected"], r
    assert cluster.owned(back) > owned_back, "the rejoined node processed nothing"
    assert init_count(charon) == inits
    for i in everyone:
        g = cl.gateways["n{}".format(i)]
        print("n{}: {}".format(i, {c["name"]: c["count"] for c in g.ctl("cluster")["counters"]
                                    if c["name"].startswith("cluster_ike_") and c["count"]}))


def test_cluster_initiates(topo):
    """(c) the cluster starts the connection: one node, once."""
    cl = topo
    charon = start(cl, start_action=True)
    wait_swan_sa(charon, seconds=30)
    owner, _ = wait_runner(cl, range(1, cl.nodes + 1))
    starts = {i: ike_counter(cl.gateways["n{}".format(i)], "starts") for i in range(1, cl.nodes + 1)}
    assert starts[owner] == 1 and sum(starts.values()) == 1, starts
    assert init_count(charon) == 2, "one IKE_SA_INIT exchange"
    assert cl.wait_ping("hostA", cluster.HOSTB, 15), "ping through the cluster-initiated Child SA"
    streams = traffic(cl, 2.0, "udp-c")
    for r in (s.result(40) for s in streams):
        assert r["received"] >= 0.98 * r["expected"], r


def test_falsely_suspected_owner_demotes(topo):
    """(d) the node that runs the IKE SA stops for a moment (SIGSTOP, longer
    than suspect_after): the others take it over; when it resumes it finds
    itself out of the view and demotes its IKE SA to a standby copy; it
    comes back into the view and the IKE SA stays with the successor.
    strongSwan sees one IKE SA throughout and rekeys its Child SA."""
    cl = topo
    charon = start(cl)
    charon.initiate("net", ike="site", timeout=20)
    spi_i, spi_r, children = wait_swan_sa(charon)
    everyone = list(range(1, cl.nodes + 1))
    owner, _ = wait_runner(cl, everyone)
    inits = init_count(charon)
    pid = cl.procs["phalanxd-n{}".format(owner)].pid
    os.kill(pid, signal.SIGSTOP)
    time.sleep(0.5)
    os.kill(pid, signal.SIGCONT)
    cl.wait_cluster_view(everyone, seconds=30)
    gw = cl.gateways["n{}".format(owner)]
    deadline = time.monotonic() + 10
    while ike_counter(gw, "demotions") < 1:
        assert time.monotonic() < deadline, "the suspected owner did not demote"
        time.sleep(0.2)
    successor, _ = wait_runner(cl, everyone)
    assert successor != owner
    print("n{} paused: demoted; n{} runs the IKE SA".format(owner, successor))
    charon.rekey(child="net")
    now_i, now_r, _ = wait_child_rekeyed(charon, children)
    assert (now_i, now_r) == (spi_i, spi_r)
    assert init_count(charon) == inits, "a new IKE_SA_INIT"
    assert cl.wait_ping("hostA", cluster.HOSTB, 10)
    for r in (s.result(40) for s in traffic(cl, 2.0, "udp-d")):
        assert r["received"] >= 0.95 * r["expected"], r


def test_strongswan_over_ipv6_survives_the_owner(topo6):
    """(e) of the module doc."""
    cl = topo6
    charon, (spi_i, spi_r, children), (owner, others), inits = _established(cl)
    sa = [sa for sa in charon.list_sas() if sa.get("state") == "ESTABLISHED"][0]
    assert (sa.get("local-host"), sa.get("remote-host")) == (cluster.GWB_WAN6, cluster.VIP_OUT6), sa
    child = [c for c in sa["child-sas"].values() if isinstance(c, dict) and c.get("state") == "INSTALLED"][0]
    assert SITE_B6 in child.get("local-ts", []) and SITE_A6 in child.get("remote-ts", []), child

    # Both inner families both ways, through every node, ESP over IPv6.
    pairs = [("hostA", cluster.HOSTB6), ("hostB", cluster.HOSTA6), ("hostA", cluster.HOSTB),
             ("hostB", cluster.HOSTA)]
    for src, dst in pairs:
        assert cl.wait_ping(src, dst, 15), "ping {} -> {} through the IKE Child SA".format(src, dst)
    before = _counters(cl)
    wan = cluster.WanCapture(cl, "tcpdump-wan", os.path.join(cl.run_dir, "wan6.pcap"), snaplen=128, immediate=True)
    with wan:
        for src, dst in pairs:
            _no_loss(cl, src, dst)
    after = _counters(cl)
    assert wan.drops == 0, "tcpdump dropped {} frames".format(wan.drops)
    # strongSwan's window (128) is too small for spreading one SA: one
    # node sends the Child SA, all three decrypt what strongSwan sends.
    out, back, w = check_esp_over_ipv6(cl, wan.path, len(pairs), one_sender=True)
    owned = {n: {d: _delta(before, after, n, "cluster_{}_owned".format(d)) for d in ("outbound", "inbound")}
             for n in before}
    print("ESP over IPv6: {} from {} (IVs per node {}), {} from gwB; owned per node (outbound, inbound): {}".format(
        len(out), cluster.VIP_OUT6, w["per_node"], len(back), owned))
    for n, o in owned.items():
        assert o["inbound"] > 0, "{} decrypted nothing: {}".format(n, owned)
    senders = [n for n, o in owned.items() if o["outbound"] > 0]
    assert len(senders) == 1, "outbound sent by {} (one node: strongSwan's window is 128): {}".format(
        senders, owned)

    # The owner dies under traffic (UDP over IPv4, ping over IPv6); the
    # successor answers strongSwan's exchanges without a new IKE SA.
    seconds = 10.0
    streams = traffic(cl, seconds, "udp-b")
    ping = cluster.Ping(cl, seconds, dst=cluster.HOSTB6).start()
    time.sleep(2.0)
    t_fail, _ = _kill_owner(cl, charon, (owner, others), (spi_i, spi_r, children))
    results = [s.result(seconds + 40) for s in streams]
    pinged = ping.result()
    print("ping -6: lost {} of {}".format(pinged["lost"], pinged["sent"]))
    assert pinged["lost"] <= 0.1 * pinged["sent"], pinged
    _check_survived(charon, results, (t_fail, seconds), inits)
    for src, dst in pairs:
        _no_loss(cl, src, dst)
    assert init_count(charon) == inits
    assert wait_swan_sa(charon)[:2] == (spi_i, spi_r)
    assert charon.alive()
