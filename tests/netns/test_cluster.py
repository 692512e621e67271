"""A three-node Phalanx cluster with real Corosync in front of site A, a
host-mode phalanxd at site B (topology: tests/netns/cluster.py).

1. Corosync alone: three instances (one per node namespace, each in its own
   mount namespace) form one membership; after `kill -9` of one the other
   two report two members (the time it took is printed).
2. The cluster (static SAs shared by all nodes, scheme packet-rr unless
   named): (a) ping, UDP and iperf3 between hostA and hostB; (b) every node
   processed packets of both directions; (c) `phalanxctl cluster` shows 3
   members, the leases and the takeover blocks; every scheme carries
   traffic; (d) a node's power lost (cluster.Cluster.crash_node: its
   Corosync and phalanxd frozen at the same instant, its cables dark; no
   clean departure reaches the others) under a 10 ms ping and 500 pps UDP
   each way: loss below 100 ms worth of packets, nothing delivered twice,
   the takeover from phalanxd's own heartbeat detector;
   (e) in the WAN capture no (SPI, IV) and no (SPI, seq) pair twice, every
   IV carries its sender's node id; (f) ESP from gwB of the last 50 ms
   before the failure, re-sent as soon as the survivors took over, arrives
   inside the replay window and is refused as `replayed` (a duplicate:
   the survivors carried the failed node's window over), none as
   `too_old`, none accepted; (g) the node powered on again (Corosync and
   phalanxd started afresh) rejoins with a state transfer and owns
   traffic again, loss still bounded; (h) the same with the node's cables
   cut instead (all three at once), the node running on; cables restored:
   the cut-off node (which stood down, having no quorum) yields to the
   others' state at the merge and rejoins; (i) a clean stop (phalanxd,
   then Corosync, stopped with SIGTERM): the others hear of it at once.
   strongSwan at site B, with IKE state replicated:
   tests/netns/test_cluster_ike.py; IPv6 (dual-stack LAN, IPv6 WAN,
   neighbour discovery): tests/netns/test_cluster_ipv6.py.
3. The capture checker itself on a synthetic capture (handover found, a
   repeated (SPI, IV) / (SPI, seq) and a wrong node id in an IV reported).

Loss bounds are behaviour bounds with margin (100 ms of traffic where the
design aims at a 30 ms suspicion), never timing micro-assertions; packets
delivered twice at the takeover (the survivors' detectors fire a few ms
apart) share that bound, copies at other moments (false suspicions of live
nodes on a loaded machine) are reported. The measured handover times,
losses and suspicions are printed (pytest -s) and recorded as properties.
"""

import itertools
import json
import os
import signal
import struct
import subprocess
import sys
import time

import pytest

import cluster
import failover_analysis as fa

_COUNTER = itertools.count()
BOUND_S = 0.100          # loss bound: 100 ms worth of packets
UDP_RATE = 500
# The tests without a failure assert no loss and no duplicate, so no live
# node may be suspected. On the CI's 2-core VM running this suite, single
# nodes stop for 20-45 ms several times a second (the stall guard logs
# every such gap; whole-machine stalls it already discounts): with the
# default 30 ms a stalled live node was suspected, which loses or doubles
# a few packets. These tests give the detector 60 ms; the failover
# experiments keep the default 30 ms and bound their losses.
STEADY_SUSPECT_MS = 60
NODES = ["n1", "n2", "n3"]


def _new_cluster(request):
    if os.geteuid() != 0:
        pytest.fail("tests/netns needs root (network namespaces)", pytrace=False)
    return cluster.Cluster(prefix="pxc{}t{}".format(os.getpid(), next(_COUNTER)))


def _teardown(cl, failed):
    if failed:
        cl.dump_logs()
    cl.down()
    ns, alive = cl.leftovers()
    assert not ns and not alive, "left behind: namespaces {}, processes {}".format(ns, alive)


@pytest.fixture
def topology(request):
    """The namespaces and bridges, nothing started."""
    cl = _new_cluster(request)
    try:
        cl.up()
        yield cl
    finally:
        rep = getattr(request.node, "rep_call", None)
        _teardown(cl, rep is not None and rep.failed)


@pytest.fixture(scope="module")
def steady(binaries, request):
    """A running cluster (packet-rr) shared by the no-failure tests."""
    cl = _new_cluster(request)
    failed_before = request.session.testsfailed
    try:
        cl.up()
        cl.start_all(scheme="packet-rr", suspect_after_ms=STEADY_SUSPECT_MS)
        yield cl
    except Exception:
        cl.dump_logs()
        raise
    finally:
        _teardown(cl, request.session.testsfailed > failed_before)


def _experiment(request, **kw):
    """A fresh cluster, one failover_run, torn down; returns its results."""
    cl = _new_cluster(request)
    try:
        cl.up()
        cl.start_all(scheme="packet-rr")
        res = cluster.failover_run(cl, **kw)
        res["nodes_alive_at_end"] = {n: g.alive() for n, g in cl.gateways.items()}
        return res
    except Exception:
        cl.dump_logs()
        raise
    finally:
        _teardown(cl, False)


def _report(record_property, name, res):
    line = ("{}: handover {} ms on the wire, {} ms by phalanxd; Corosync confirmed after {} s; ping lost {}/{}; "
            "UDP lost out {}/{} in {}/{}; replays re-sent {} (of the failed node's share {}), refused {} "
            "(replayed {}, too_old {}), accepted {}; delivered twice {}; wire dup (SPI,IV) {} (SPI,seq) {}").format(
        name, _ms(res["handover_ms"]), _ms(res["phalanxd_handover_ms"]), _s(res["corosync_confirm_s"]),
        res["ping"]["lost"], res["ping"]["sent"], res["udp_out"]["lost"], res["udp_out"]["sent"],
        res["udp_in"]["lost"], res["udp_in"]["sent"], res["replays_sent"], res["replays_of_failed_share"],
        res["replays_refused"], res.get("replays_replayed"), res.get("replays_too_old"), cluster.replays_accepted(res),
        res["delivered_twice"], res["wire"]["dup_spi_iv"],
        res["wire"]["dup_spi_seq"])
    if "rejoin_s" in res:
        line += "; rejoined in {:.2f} s, lost then out {} in {}".format(
            res["rejoin_s"], res["lost_at_rejoin"]["udp_out"], res["lost_at_rejoin"]["udp_in"])
    false = {n: [(f["suspect"], f["outcome"], f["age_seconds"]) for f in fs]
             for n, fs in res["false_suspicions"].items() if fs}
    if false:
        line += "\n  suspicions of live nodes (survivor: [(suspect, outcome, age s)]): {}".format(false)
    line += "\n  lost by 100 ms after the failure: out {} in {}; twice: out {} in {} ping {}".format(
        _timeline(res, "udp_out"), _timeline(res, "udp_in"), _dups(res, "udp_out"), _dups(res, "udp_in"),
        _dups(res, "ping"))
    line += "\n  the other survivors' inbound ESP, failure to confirmation, per survivor (kernel, user space): {}".format(
        res["not_owned_while_silent"])
    print("\n" + line)
    sys.stderr.write(line + "\n")
    record_property(name, line)


def _timeline(res, stream):
    """{100 ms slot relative to the failure: datagrams lost}, for messages."""
    r, slots = res[stream], {}
    for first, last in r["lost_runs"]:
        for i in range(first, last + 1):
            slot = round((r["start"] + i / r["rate"] - res["t_fail"]) * 10) / 10
            slots[slot] = slots.get(slot, 0) + 1
    return {k: slots[k] for k in sorted(slots)}


def _ms(v):
    return "n/a" if v is None else "{:.1f}".format(v)


def _s(v):
    return "n/a" if v is None else "{:.2f}".format(v)


def _check_loss(res, windows=1):
    """Loss across the whole run below `windows` x 100 ms of traffic, per stream."""
    ping_bound = windows * BOUND_S / 0.01
    udp_bound = windows * BOUND_S * res["udp_rate"]
    assert res["ping"]["lost"] < ping_bound, "ping lost {} (bound {}): {}".format(
        res["ping"]["lost"], ping_bound, res["ping"]["lost_seqs"])
    for k in ("udp_out", "udp_in"):
        r = res[k]
        assert r["send_errors"] == 0, "{}: {} send errors".format(k, r["send_errors"])
        assert r["lost"] < udp_bound, "{} lost {} of {} (bound {}): runs {}".format(
            k, r["lost"], r["sent"], udp_bound, r["lost_runs"][:10])
    assert res["lost_at_failover"]["udp_out"] < BOUND_S * res["udp_rate"], res["lost_at_failover"]
    assert res["lost_at_failover"]["udp_in"] < BOUND_S * res["udp_rate"], res["lost_at_failover"]
    # Two owners for a moment: the survivors' detectors fire a few ms
    # apart (by design), so a few packets may come out twice; bounded
    # like the loss. Copies outside the takeover (false suspicions of
    # live nodes under load) are reported, not asserted.
    twice = res["twice_at_failover"]
    assert twice["udp_out"] + twice["udp_in"] < BOUND_S * res["udp_rate"] and twice["ping"] < BOUND_S / 0.01, \
        "packets delivered twice at the takeover: {}; UDP out {} in {}, ping {}".format(
            twice, _dups(res, "udp_out"), _dups(res, "udp_in"), _dups(res, "ping"))


def _dups(res, stream):
    """How many copies came twice, and when (seconds after the failure)."""
    times = [at - res["t_fail"] for _, at in res[stream]["dup_list"]]
    return "{} ({})".format(len(times), "{:+.3f} s .. {:+.3f} s".format(min(times), max(times)) if times else "-")


def _check_wire(res, failed):
    w = res["wire"]
    assert res["capture_drops"] == 0, "tcpdump dropped {} frames: the checks would be blind".format(
        res["capture_drops"])
    assert w["packets"] > 1000, w
    assert w["dup_spi_iv"] == 0, "(SPI, IV) pairs sent twice: {}".format(w["dup_spi_iv_examples"])
    assert w["dup_spi_seq"] == 0, "(SPI, seq) pairs sent twice: {}".format(w["dup_spi_seq_examples"])
    assert w["iv_mac_mismatch"] == 0, "IV node id and source MAC disagree on {} packets".format(w["iv_mac_mismatch"])
    assert w["iv_seq_mismatch"] == 0, "{} IVs are not node << 48 | seq".format(w["iv_seq_mismatch"])
    assert set(w["per_node"]) == {1, 2, 3}, "senders on the wire: {}".format(w["per_node"])
    ho = res["handover"]
    assert ho["last_failed"] is not None, "no ESP from n{} in the capture before the failure".format(failed)
    assert ho["handover"] is not None, "no survivor sent from the takeover lease: {}".format(ho)
    assert ho["method"] == "range", "the takeover block was not in the status: {}".format(res["takeover_range"])


def _check_replays(res):
    """gwB's ESP of the last 50 ms before the failure, re-sent as soon as
    the survivors took over, arrives inside the replay window (the
    survivors' windows carry the failed node's share over: see
    phalanxd's dataplane/cluster/tests/replay.rs, where a survivor
    without it accepts the same frames): each one a survivor must refuse
    as `replayed`, a duplicate inside the window, not as `too_old`, which
    would refuse it whether the window was carried over or not. Frames
    the fence dropped (a survivor that stalled) are refused too, and
    counted apart."""
    sent, inside = res["replays_sent"], res["replays_in_window"]
    replayed, too_old, fenced = res["replays_replayed"], res["replays_too_old"], res.get("fenced_meanwhile", 0)
    arrived = res["replay_arrived_ms"] or (float("nan"), float("nan"))
    print("  replays: re-sent {} ({} of the failed node's share); every survivor's takeover seen {} ms after the "
          "failure (phalanxd: handover {} ms after the last heartbeat), first frame sent {} ms after that, all "
          "within {:.1f} ms, on the WAN {:.1f} .. {:.1f} ms after the failure; {} seen on the WAN, {} inside "
          "the window ({} of the failed node's share; {} .. {} behind gwB's newest number, window {}); refused "
          "as replayed {}, as too_old {}; fenced meanwhile {}; accepted {}".format(
              sent, res["replays_of_failed_share"], _ms(None if res["takeover_seen_s"] is None
                                                        else res["takeover_seen_s"] * 1000),
              _ms(res["phalanxd_handover_ms"]), _ms(res["replay_after_takeover_ms"]), res["replay_sent_within_ms"],
              (res["t_replay"] - res["t_fail"]) * 1000 + arrived[0], (res["t_replay"] - res["t_fail"]) * 1000 + arrived[1],
              res["replays_seen_on_wire"], inside,
              res["replays_in_window_of_failed_share"], *(res["replay_behind"] or ("-", "-")),
              sorted(set(res["replay_windows"].values())), replayed, too_old, fenced, cluster.replays_accepted(res)))
    assert sent > 0, "nothing captured to re-send"
    assert res["replay_after_takeover_ms"] is not None, "re-sent before every survivor had taken over"
    assert res["replays_seen_on_wire"] == sent, "re-sent {}, {} on the WAN capture".format(
        sent, res["replays_seen_on_wire"])
    assert res["replays_in_window_of_failed_share"] > 0, \
        "no re-sent frame of the failed node's share arrived inside the window: the check could not fail"
    assert cluster.replays_accepted(res) == 0, "replayed packets delivered to hostA"
    assert too_old == sent - inside, "too_old {}, but {} of {} re-sent arrived outside the window".format(
        too_old, sent - inside, sent)
    if fenced == 0:
        assert replayed == inside, "{} re-sent inside the window, {} refused as replayed".format(inside, replayed)
    else:
        assert replayed <= inside and replayed + fenced >= inside, \
            "{} re-sent inside the window, {} refused as replayed, {} fenced".format(inside, replayed, fenced)


def _check_takeover_recorded(res, failed):
    """A survivor's detector took over (a survivor that suspected another
    live node first may take over through the log and record nothing)."""
    assert any(res["failovers"].values()), "no survivor recorded a takeover of n{}: {}".format(
        failed, res["false_suspicions"])
    assert res["corosync_confirm_s"] is not None, "Corosync never confirmed the failure"


def _lossless(cl, measure):
    """cluster.lossless over the three nodes with the steady detector."""
    return cluster.lossless(cl, measure, NODES, STEADY_SUSPECT_MS)


def _clean_stream(cl, name, src, dst, addr, port, rate, seconds):
    """(nothing lost and nothing twice, the result) of one UdpStream."""
    r = cluster.UdpStream(cl, name, src, dst, addr, port, rate, seconds).start().result()
    return r["lost"] == 0 and r["duplicates"] == 0, "{}: {}".format(name, r)


# ------------------------------------------------------------- 1. Corosync
def test_corosync_membership_and_kill(topology, record_property):
    """Three Corosync instances form one membership; kill -9 of one leaves two."""
    for i in (1, 2, 3):
        topology.start_corosync(i)
    formed = topology.wait_corosync([1, 2, 3], seconds=20)
    for i in (1, 2, 3):
        pid = topology.procs["corosync-n{}".format(i)].pid
        out = subprocess.run(["nsenter", "-t", str(pid), "-m", "-n", "corosync-cfgtool", "-s"],
                             capture_output=True, text=True, timeout=10).stdout
        connected = [line for line in out.splitlines() if "connected" in line and "disconnected" not in line]
        assert len(connected) >= 2, "n{}: links not connected:\n{}".format(i, out)
    topology.kill("corosync-n3")
    left = topology.wait_corosync([1, 2], nodes=[1, 2], seconds=15)
    line = "Corosync: formed in {:.2f} s; kill -9 of n3 -> 2 members after {:.2f} s (token {} ms)".format(
        formed, left, cluster.COROSYNC_TOTEM["token"])
    print("\n" + line)
    record_property("corosync", line)


# ------------------------------------------------------- 2. steady cluster
def test_traffic_both_ways(steady):
    """(a) ping, UDP and iperf3 TCP hostA <-> hostB through the cluster."""
    assert steady.wait_ping("hostA", cluster.HOSTB, 10), "first ping hostA -> hostB not answered"
    for src, dst in (("hostA", cluster.HOSTB), ("hostB", cluster.HOSTA)):
        _lossless(steady, lambda: (steady.ping(src, dst, count=20, interval=0.05),
                                   "ping {} -> {} lost packets".format(src, dst)))
    for name, src, dst, addr in (("udp-a2b", "hostA", "hostB", cluster.HOSTB),
                                 ("udp-b2a", "hostB", "hostA", cluster.HOSTA)):
        _lossless(steady, lambda: _clean_stream(steady, name, src, dst, addr, 5003, 200, 2))
    for reverse in (False, True):
        rates = _iperf(steady, reverse)
        assert rates > 1.0, "iperf3 {}: {} Mbit/s".format("download" if reverse else "upload", rates)
        print("\niperf3 TCP {} through the cluster: {:.0f} Mbit/s".format(
            "hostB -> hostA" if reverse else "hostA -> hostB", rates))


def _iperf(cl, reverse):
    cluster.start_iperf_download(cl, 3, reverse=reverse)
    return cluster.iperf_result(cl, 40) or 0.0


def test_every_node_processes_packets(steady):
    """(b) packet round robin: each node owns a share of each direction."""
    before = {n: steady.gateways[n].counters() for n in ("n1", "n2", "n3")}
    _lossless(steady, lambda: _clean_stream(steady, "udp-share", "hostA", "hostB", cluster.HOSTB, 5004, 300, 2))
    _lossless(steady, lambda: (steady.ping("hostB", cluster.HOSTA, count=30, interval=0.02),
                               "ping hostB -> hostA lost packets"))
    time.sleep(0.3)  # counters are published every 100 ms
    shares, kernel = {}, {}
    for n in ("n1", "n2", "n3"):
        after = steady.gateways[n].counters()
        delta = lambda name: after.get("daemon." + name, 0) - before[n].get("daemon." + name, 0)
        shares[n] = {d: delta("cluster_{}_owned".format(d)) for d in ("outbound", "inbound")}
        not_owned = delta("cluster_outbound_not_owned")
        assert not_owned > 0, "{} saw no packet of the other nodes: every node must see every frame".format(n)
        # The kernel filter (on by default) drops the inbound ESP the other
        # nodes own before this node's ring: user space sees none of it.
        assert after.get("daemon.cluster_kernel_filter_unavailable", 0) == 0, "{}: no kernel filter".format(n)
        # Its XDP program (on by default) drops them in the veth's driver.
        assert after.get("daemon.cluster_kernel_filter_xdp_unavailable", 0) == 0, "{}: no XDP".format(n)
        kernel[n] = (delta("cluster_inbound_not_owned_kernel"), delta("cluster_inbound_not_owned"))
        assert kernel[n][0] > 0, "{}: the kernel filter dropped nothing: {}".format(n, kernel)
        assert kernel[n][1] <= 2, "{}: user space still decided not-owned ESP: {}".format(n, kernel)
    print("\nowned packets per node (outbound, inbound): {}".format(shares))
    print("inbound not owned per node (kernel filter, user space): {}".format(kernel))
    for n, s in shares.items():
        assert s["outbound"] > 50 and s["inbound"] > 5, "{} owned too little: {}".format(n, shares)
    total = sum(s["outbound"] for s in shares.values())
    assert total >= 600 + 30, "outbound owned {} for >= 630 packets sent".format(total)


def test_cluster_status_members_and_leases(steady):
    """(c) `phalanxctl cluster`: 3 members everywhere, leases, takeover blocks."""
    out_spi = steady.sas[0]["spi"]
    for i in (1, 2, 3):
        st = steady.cluster_status("n{}".format(i))
        assert st["node_id"] == i and st["ready"], st
        assert st["scheme"] == "packet-rr"
        assert st["quorum"] == {"policy": "majority", "quorate": True, "base": [1, 2, 3]}, st["quorum"]
        assert cluster.status_view(st) == [1, 2, 3] and cluster.status_agreed(st) == [1, 2, 3], st["members"]
        sa = cluster.status_sa(st, out_spi)
        block = sa["block"]
        assert block is not None and block["view"] == [1, 2, 3], sa
        assert sa["class"] == block["view"].index(i), sa
        # T(spi, X) for every other member X (a node never enters its own).
        takeovers = {t["suspect"]: t["block"] for t in sa["takeover_blocks"]}
        assert set(takeovers) >= {n for n in (1, 2, 3) if n != i}, sa
        ranges = [(block["start"], block["end"])] + [(b["start"], b["end"]) for b in takeovers.values()]
        ranges.sort()
        assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:])), "overlapping blocks: {}".format(ranges)
        for suspect, b in takeovers.items():
            assert b["view"] == [n for n in (1, 2, 3) if n != suspect], (suspect, b)
    text = steady.gateways["n1"].ctl_raw("cluster", json_out=False)
    assert text.returncode == 0 and "failovers" in text.stdout, text.stdout + text.stderr
    print("\n" + text.stdout)


def test_whole_cluster_pause_suspects_nobody(steady):
    """(d) Every node's phalanxd stops at once for 80 ms (SIGSTOP, then
    SIGCONT one after the other), five times, the first to wake rotating:
    what a loaded or overcommitted machine does when it runs none of them
    (CI's 2-core VM did; every node then suspected every peer). Silence
    a node did not watch must not count: no suspicion, no view change,
    each node counts the stalls, and streams both ways lose nothing (the
    rings hold the frames). Only a suspicion while the machine witness saw
    a CPU taken away for 30 ms or more voids an attempt (cluster.lossless):
    that silence was real."""
    # Every node has its own gaps here by design: only the witness may
    # explain a suspicion.
    cluster.lossless(steady, lambda: _pause_five_times(steady), NODES, STEADY_SUSPECT_MS,
                     own_gaps_explain=False)


def _pause_five_times(cl):
    names = NODES
    count = cluster.status_counter
    before = {n: cl.cluster_status(n) for n in names}
    streams = [cluster.UdpStream(cl, name, src, dst, addr, 5006, 200, 4).start()
               for name, src, dst, addr in (("udp-pause-a2b", "hostA", "hostB", cluster.HOSTB),
                                            ("udp-pause-b2a", "hostB", "hostA", cluster.HOSTA))]
    time.sleep(1.0)
    pids = [cl.gateways[n].proc.pid for n in names]
    for k in range(5):
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(0.08)
        for pid in pids[k % 3:] + pids[:k % 3]:
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.4)
    results = [s.result() for s in streams]
    after = {n: cl.cluster_status(n) for n in names}
    wrong = []
    for n in names:
        for name in ("suspicions", "quorum_losses", "corrected"):
            if count(after[n], name) != count(before[n], name):
                wrong.append("{}: {} {} -> {}".format(n, name, count(before[n], name), count(after[n], name)))
        stalls = count(after[n], "stalls") - count(before[n], "stalls")
        if stalls < 5:
            wrong.append("{} counted {} stalls for 5 pauses".format(n, stalls))
        if cluster.status_view(after[n]) != [1, 2, 3]:
            wrong.append("{}: members {}".format(n, after[n]["members"]))
    for s, r in zip(streams, results):
        if r["lost"] != 0 or r["duplicates"] != 0:
            wrong.append("{}: {}".format(s.name, r))
    return not wrong, wrong


@pytest.mark.parametrize("scheme", ["packet-sqf", "session-rr", "session-sqf", "hash-src", "hash-src-spi"])
def test_scheme_carries_traffic(binaries, topology, scheme):
    """Every dispatch scheme: pings and UDP both ways, nothing twice."""
    topology.start_all(scheme=scheme, suspect_after_ms=STEADY_SUSPECT_MS)
    assert topology.wait_ping("hostA", cluster.HOSTB, 10), "first ping not answered ({})".format(scheme)
    for name, src, dst, addr in (("udp-a2b", "hostA", "hostB", cluster.HOSTB),
                                 ("udp-b2a", "hostB", "hostA", cluster.HOSTA)):
        _lossless(topology, lambda: _clean_stream(topology, name, src, dst, addr, 5005, 200, 2))
    st = topology.cluster_status("n1")
    assert st["scheme"] == scheme
    time.sleep(0.3)  # counters are published every 100 ms
    counters = [topology.gateways["n{}".format(i)].counters() for i in (1, 2, 3)]
    dropped = [c.get("daemon.cluster_inbound_not_owned_kernel", 0) for c in counters]
    if scheme.startswith("hash"):
        # One node owns the inbound SA; the kernel filter of the others
        # drops its packets (every packet of the SA: its peer is gwB).
        assert sum(1 for d in dropped if d > 0) >= 1, "kernel filter drops per node: {}".format(dropped)
    else:
        assert dropped == [0, 0, 0], "{}: the filter passes everything: {}".format(scheme, dropped)
    if scheme.startswith("hash"):
        assert len(st["segment_owners"]) == 256 and set(st["segment_owners"]) <= {1, 2, 3}, st["segment_owners"]


# ------------------------------------------------------ 2d-f. power loss
@pytest.fixture(scope="module")
def kill_run(binaries, request):
    return _experiment(request, victim=3, mode="kill", seconds=8, udp_rate=UDP_RATE, replay=True)


def test_kill_traffic_continues(kill_run, record_property):
    """(d) n3 loses power under ping and UDP: loss bounded, the takeover
    recorded by the survivors' heartbeat detectors (nothing else tells
    them: Corosync confirms seconds later)."""
    _report(record_property, "power loss of n3", kill_run)
    _check_loss(kill_run)
    _check_takeover_recorded(kill_run, 3)
    assert all(kill_run["owned_delta"][i] > 0 for i in (1, 2)), kill_run["owned_delta"]
    # While n3 is silent (suspected, until Corosync confirms), the kernel
    # filter takes its share over as user space does: the survivors'
    # user space still sees almost none of the ESP the other one owns
    # (a ring's backlog at each change of the view word).
    silent = kill_run["not_owned_while_silent"]
    for i in (1, 2):
        kernel, user = silent[i]
        assert kernel > 0 and user <= 20, "n{}: kernel {}, user space {}".format(i, kernel, user)


def test_kill_no_nonce_or_sequence_reuse(kill_run):
    """(e) WAN capture: no (SPI, IV), no (SPI, seq) twice; IVs name their node."""
    _check_wire(kill_run, 3)


def test_kill_replays_refused(kill_run):
    """(f) ESP of the last 50 ms before the failure, re-sent right after
    the takeover: inside the window, every one refused as replayed."""
    _check_replays(kill_run)


def test_kill_with_a_stalled_survivor(binaries, request, record_property):
    """(d) n3 loses power, then n2's phalanxd stops for 100 ms (SIGSTOP):
    n1 suspects n2 too, falsely, and takes over its share of what arrives
    from n2's last heartbeat + suspect_after on; the log's Rejoin of n2
    comes only when Corosync has settled after the real failure (seconds
    here), but n1 hands the share back as soon as it hears n2 steadily
    again. When n2 resumes it finds in its ring what arrived while it was
    stopped: it fences (drops, counts) its share that arrived after its
    last heartbeat + suspect_after, which n1 took. So no inbound packet
    comes out twice at all, and no (SPI, IV) or (SPI, seq) is sent twice."""
    res = _experiment(request, victim=3, mode="kill", seconds=8, udp_rate=UDP_RATE, replay=False,
                      stall=(2, 0.1))
    _report(record_property, "power loss of n3, n2 stopped 100 ms", res)
    stopped, resumed = res["stall"]
    n2 = res["final_counters"].get("n2", {})
    print("  n2 stopped {:+.3f} s .. {:+.3f} s after the failure; Corosync confirmed after {} s; "
          "n2 fenced {} inbound packets ({} heartbeat gaps)".format(
              stopped - res["t_fail"], resumed - res["t_fail"], _s(res["corosync_confirm_s"]),
              n2.get("daemon.cluster_inbound_fenced", 0), res["counters_after"].get(2, {}).get("heartbeat_gaps")))
    assert any(f["suspect"] == 2 for f in res["false_suspicions"][1]), \
        "n1 never suspected the stopped n2: {}".format(res["false_suspicions"])
    twice = [at - res["t_fail"] for _, at in res["udp_in"]["dup_list"]]
    assert not twice, \
        "{} inbound packets delivered twice ({:+.3f} s .. {:+.3f} s after the failure; n2 resumed at {:+.3f} s)" \
        .format(len(twice), min(twice), max(twice), resumed - res["t_fail"])
    assert n2.get("daemon.cluster_inbound_fenced", 0) > 0, "n2 fenced nothing after its stall: {}".format(n2)
    w = res["wire"]
    assert res["capture_drops"] == 0 and w["packets"] > 1000, (res["capture_drops"], w["packets"])
    assert w["dup_spi_iv"] == 0, "(SPI, IV) pairs sent twice: {}".format(w["dup_spi_iv_examples"])
    assert w["dup_spi_seq"] == 0, "(SPI, seq) pairs sent twice: {}".format(w["dup_spi_seq_examples"])


# -------------------------------------------------------------- 2g. rejoin
def test_killed_node_rejoins(binaries, request, record_property):
    """(g) n2 loses power, then comes back (its frozen processes killed,
    cables restored, Corosync and phalanxd started afresh): it rejoins with
    a state transfer and owns traffic again; loss at the failure and at
    the rejoin stays bounded."""
    res = _experiment(request, victim=2, mode="kill", seconds=16, udp_rate=UDP_RATE, replay=False, rejoin=True)
    _report(record_property, "power loss of n2 + power on", res)
    _check_loss(res, windows=2)
    for k in ("udp_out", "udp_in"):
        assert res["lost_at_rejoin"][k] < BOUND_S * UDP_RATE, res["lost_at_rejoin"]
    assert res["owned_since_rejoin"] > 0, "the rejoined node owns nothing"
    _check_wire(res, 2)


# ---------------------------------------------------------- 2i. clean stop
def test_clean_stop(binaries, request, record_property):
    """(i) n2's phalanxd, then its Corosync, stopped cleanly (SIGTERM)
    under traffic: the others learn of it from the departure itself, not
    from a detector; loss bounded, nothing sent twice."""
    res = _experiment(request, victim=2, mode="stop", seconds=8, udp_rate=UDP_RATE, replay=False)
    _report(record_property, "clean stop of n2", res)
    _check_loss(res)
    _check_wire(res, 2)
    assert res["corosync_confirm_s"] is not None, "Corosync never confirmed the departure"


# ------------------------------------------------------------ 2h. link cut
def test_link_cut(binaries, request, record_property):
    """(h) n1's cables cut at the switch (n1 is the ARP owner: the view's
    first node) under traffic: the survivors take over within the bound,
    nothing is sent twice, replays are refused."""
    res = _experiment(request, victim=1, mode="cut", seconds=8, udp_rate=UDP_RATE, replay=True)
    _report(record_property, "links of n1 cut", res)
    _check_loss(res)
    _check_takeover_recorded(res, 1)
    _check_wire(res, 1)
    _check_replays(res)


def test_link_restored_rejoins(binaries, request, record_property):
    """(h) n3 cut off, then its cables restored: while cut off it stands
    down (one of three: no quorum); when Corosync merges [3] and [1, 2]
    again, n3's side (not quorate) yields, takes the others' state and
    owns traffic again; loss at the cut and at the return stays bounded."""
    res = _experiment(request, victim=3, mode="cut", seconds=16, udp_rate=UDP_RATE, replay=False, rejoin=True)
    _report(record_property, "links of n3 cut + restored", res)
    _check_loss(res, windows=2)
    assert res["owned_since_rejoin"] > 0, "n3 owns nothing after its links came back"
    _check_wire(res, 3)


def test_bridges_flood(topology):
    """The bench itself: a unicast frame between two nodes also reaches the
    third (the switch floods, as it will for the virtual MACs), and the
    virtual gateway address answers nothing while no phalanxd runs."""
    dump = topology.popen("tcpdump-n3", "n3", ["tcpdump", "-i", "cl0", "-n", "-c", "3", "-l",
                                              "icmp and host {}".format(cluster.node_addr(2, "cl"))])
    deadline = time.monotonic() + 10
    while "listening on" not in topology.log_of("tcpdump-n3"):
        assert time.monotonic() < deadline and dump.poll() is None, topology.log_of("tcpdump-n3")
        time.sleep(0.05)
    assert topology.run("n1", ["ping", "-c", "3", "-i", "0.2", "-W", "2", cluster.node_addr(2, "cl")],
                        check=False).returncode == 0
    dump.wait(10)
    assert "3 packets captured" in topology.log_of("tcpdump-n3"), topology.log_of("tcpdump-n3")
    assert topology.run("hostA", ["ping", "-c", "1", "-W", "1", cluster.VIP_IN], check=False).returncode != 0



def _gro(cl, short, dev):
    out = cl.run(short, ["ethtool", "-k", dev]).stdout
    return next(line.split(":")[1].strip() for line in out.splitlines()
                if line.startswith("generic-receive-offload:"))


def test_receive_coalescing_turned_off(topology, binaries):
    """GRO on as NICs ship it: phalanxd turns it off on the cluster
    interfaces before it opens their rings (a ring taps frames after GRO,
    so TCP would arrive as superframes), and TCP then goes through."""
    for dev in ("lan0", "wan0"):
        topology.run("n1", ["ethtool", "-K", dev, "gro", "on"])
        assert _gro(topology, "n1", dev) == "on"
    topology.start_all(scheme="packet-rr")
    for dev in ("lan0", "wan0"):
        assert _gro(topology, "n1", dev) == "off", "GRO still on on n1 {}".format(dev)
    assert _gro(topology, "n1", "cl0") == "off", "the cluster link has no ring: left as it was"
    assert topology.wait_ping("hostA", cluster.HOSTB, 10), "ping hostA -> hostB not answered"

def test_path_mtu_owner_answers_the_sender(topology, binaries):
    """Path MTU in cluster mode (issue 17): the WAN is 1280 (every node's
    and gwB's wan0), the LAN 1500. A DF-less 1400-octet UDP datagram from
    hostA arrives whole at hostB: its owner sends it as one fragmentable
    ESP packet with its one sequence number (`outer_fragmented`; inner
    fragments would take other nodes' numbers). Then hostA's DF pings of
    1400 octets: the node that owns each one answers hostA with ICMP
    Fragmentation Needed (RFC 4301 §8.2.1), from its own inside address,
    announcing 1218, and hostA's route learns it; no answer fails
    (`icmp_send_failed`)."""
    cl = topology
    for short in ["n{}".format(i) for i in range(1, cl.nodes + 1)] + ["gwB"]:
        cl.run(short, ["ip", "link", "set", "wan0", "mtu", "1280"])
    cl.start_all(scheme="packet-rr")
    assert cl.wait_ping("hostA", cluster.HOSTB, 10), "ping hostA -> hostB not answered"
    # The workers ask the kernel for the SAs' route MTUs every 100 ms.
    time.sleep(0.5)
    nodes = ["n{}".format(i) for i in range(1, cl.nodes + 1)]
    names = ("daemon.icmp_too_big_sent", "daemon.icmp_send_failed", "path_mtu_exceeded", "daemon.outer_fragmented")

    def totals():
        out = dict.fromkeys(names, 0)
        for short in nodes:
            c = cl.gateways[short].counters()
            for name in names:
                out[name] += c.get(name, 0)
        return out

    t0 = totals()
    receiver = cl.popen("udp1400-rx", "hostB", ["/usr/bin/python3", "-c", UDP_ONE, "5999"])
    deadline = time.monotonic() + 10
    while "ready" not in cl.log_of("udp1400-rx"):
        assert time.monotonic() < deadline and receiver.poll() is None, cl.log_of("udp1400-rx")
        time.sleep(0.05)
    for _ in range(5):
        cl.run("hostA", ["/usr/bin/python3", "-c", UDP_SEND_NO_DF, cluster.HOSTB, "5999"])
        time.sleep(0.1)
    receiver.wait(timeout=10)
    lengths = [int(x) for x in cl.log_of("udp1400-rx").split() if x.isdigit()]
    t1 = totals()
    d = {n: t1[n] - t0[n] for n in names}
    print("  DF-less 1400: received {}, counters {}".format(lengths, d))
    assert lengths == [1400] * 5, cl.log_of("udp1400-rx")
    assert d["daemon.outer_fragmented"] == 5, d

    cl.run("hostA", ["ping", "-n", "-c", "6", "-i", "0.2", "-W", "1", "-M", "do", "-s", "1372", cluster.HOSTB],
           check=False)
    route = cl.run("hostA", ["ip", "route", "get", cluster.HOSTB]).stdout
    t2 = totals()
    d = {n: t2[n] - t1[n] for n in names}
    print("  route:", route.strip(), "counters:", d)
    assert "mtu 1218" in route, route
    assert d["daemon.icmp_too_big_sent"] > 0 and d["daemon.icmp_send_failed"] == 0, d


# One UDP datagram of 1400 octets to hostB without DF (IP_PMTUDISC_DONT).
UDP_SEND_NO_DF = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, 10, 0)  # IP_MTU_DISCOVER = IP_PMTUDISC_DONT
s.sendto(b"x" * 1400, (sys.argv[1], int(sys.argv[2])))
"""

# Prints "ready", then the length of each datagram on the port for 3 s.
UDP_ONE = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.settimeout(0.2)
print("ready", flush=True)
end = time.monotonic() + 3
while time.monotonic() < end:
    try:
        data, _ = s.recvfrom(65535)
        print(len(data), flush=True)
    except socket.timeout:
        pass
"""


def _write_pcap(path, frames):
    """A classic pcap (microseconds, Ethernet) of [(ts, frame)]."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for ts, frame in frames:
            f.write(struct.pack("<IIII", int(ts), int(round((ts % 1) * 1e6)), len(frame), len(frame)))
            f.write(frame)


def _esp_frame(node, spi, seq, udp=True):
    """An Ethernet frame from node's WAN MAC: IPv4 192.0.2.1 -> .2, ESP (in
    UDP 4500 or plain) with a node-partitioned IV and a dummy payload."""
    esp = struct.pack("!IIQ", spi, seq, (node << 48) | seq) + b"\0" * 32
    if udp:
        esp = struct.pack("!HHHH", 4500, 4500, 8 + len(esp), 0) + esp
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(esp), 0, 0, 64, 17 if udp else 50, 0,
                     bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2]))
    mac = bytes.fromhex(cluster.node_mac(node, "wan").replace(":", ""))
    return bytes.fromhex(cluster.GWB_WAN_MAC.replace(":", "")) + mac + b"\x08\x00" + ip + esp


def test_failover_analysis_finds_handover_and_duplicates(tmp_path):
    """The capture checker itself (no namespaces): on a synthetic packet-rr
    capture where n3 stops at t=10.5 and n1/n2 continue from a takeover
    block at 8192, it finds the handover; a repeated (SPI, seq) or
    (SPI, IV) and an IV that names the wrong node are each reported."""
    frames, t = [], 10.0
    for seq in range(1, 301):                  # 3 nodes, class = (seq - 1) % 3
        frames.append((t, _esp_frame((seq - 1) % 3 + 1, 0x1001, seq, udp=seq % 2 == 0)))
        t += 0.002
    t_fail = t
    t += 0.035                                  # 35 ms without n3's share
    for k, seq in enumerate(range(8192, 8292)):  # T(spi, 3): view [1, 2]
        frames.append((t + k * 0.002, _esp_frame(k % 2 + 1, 0x1001, seq)))
    path = str(tmp_path / "synthetic.pcap")
    _write_pcap(path, frames)
    pkts = fa.read_esp(path)
    assert len(pkts) == 400
    macs = {cluster.node_mac(i, "wan"): i for i in (1, 2, 3)}
    w = fa.wire_checks(pkts, macs)
    assert (w["dup_spi_iv"], w["dup_spi_seq"], w["iv_mac_mismatch"], w["iv_seq_mismatch"]) == (0, 0, 0, 0), w
    assert w["per_node"] == {1: 150, 2: 150, 3: 100}, w
    last_n3 = max(ts for ts, f in frames[:300] if f[6:12] == bytes.fromhex("020000020003"))
    for trange in ((8192, 12287), None):
        ho = fa.handover(pkts, 0x1001, 3, t_fail, trange)
        assert ho["takeover_seq"] == 8192 and ho["takeover_node"] == 1, ho
        assert abs(ho["handover"] - (t + 0 - last_n3)) < 1e-5, ho
    # Negative controls: the same packet twice, and n2 sending n1's IV.
    dup = fa.wire_checks(pkts + [pkts[5]], macs)
    assert dup["dup_spi_iv"] == 1 and dup["dup_spi_seq"] == 1, dup
    forged = pkts[6]._replace(src_mac=cluster.node_mac(2, "wan"), iv=(1 << 48) | 7777)
    bad = fa.wire_checks(pkts + [forged], macs)
    assert bad["iv_mac_mismatch"] == 1 and bad["iv_seq_mismatch"] == 1, bad

