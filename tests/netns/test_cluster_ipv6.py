"""IPv6 through the three-node Phalanx cluster of tests/netns/cluster.py
(real Corosync, host-mode phalanxd at gwB), built with `Cluster(lan6=True)`
and `Cluster(wan6=True)`:

    hostA 10.1.0.10, fd01::10 (default routes -> 10.1.0.1, fd01::1)
      |
    [br-lan]   nodes' lan0 10.1.0.11-13, fd01::11-13
     n1 n2 n3  inside virtual 10.1.0.1 + fd01::1 / 02:00:5e:10:00:02
    [br-wan]   nodes' wan0 192.0.2.11-13 (+ 2001:db8:f::11-13 with wan6)
      |        outside virtual 192.0.2.1, or 2001:db8:f::1 with wan6
     gwB wan0 192.0.2.2 (+ 2001:db8:f::2), lan0 10.2.0.1, fd02::1
      |
    hostB 10.2.0.10, fd02::10

Only the view's first node answers neighbour solicitations for a virtual
IPv6 address (with the virtual MAC in the target link-layer option, from
its own MAC, as it does ARP); the others count them as not theirs. One SA
pair carries both inner families (phxnet's SPD protects fd01::/64 <->
fd02::/64 with the IPv4 SA).

1. Dual-stack LAN, IPv4 WAN (packet-rr): ping -6 both ways without loss,
   IPv4 still works; hostA caches the inside virtual MAC for fd01::1;
   only n1 answered (cluster_nd_replies), n2 and n3 saw the solicitations
   and left them (cluster_nd_not_owner); every node processed IPv6
   packets of both directions (cluster_{out,in}bound_owned grew under
   IPv6-only traffic); a capture on br-lan across two resolutions holds
   advertisements for fd01::1 from n1's MAC with the virtual MAC only (no
   node's kernel answered).
2. IPv6 WAN (and dual-stack LAN): the ESP tunnel runs over IPv6; inner
   IPv4 and IPv6 both ways without loss; the WAN capture shows ESP from
   2001:db8:f::1 (none over IPv4) with the node-partitioned IVs of all
   three nodes, no (SPI, IV) or (SPI, seq) twice, gwB's ESP to the outside
   virtual MAC; gwB resolved 2001:db8:f::1 to 02:00:5e:10:00:01, answered
   by n1 alone.
3. ND owner failover: n1 loses power (Corosync and phalanxd frozen at
   once, cables dark: cluster.Cluster.crash_node); once n2 and
   n3 agree on the view [2, 3], n2 (now the first) has sent an unsolicited
   advertisement (cluster_unsolicited_nas, RFC 4861 §7.2.6) and n3 none;
   once Corosync confirmed the failure, hostA's cache entry flushed, ping
   -6 works again without loss and n2 answered the new solicitation; on
   br-lan every advertisement for fd01::1 since the crash came from n2,
   the unsolicited one (S clear) and the answer (S set).
4. The capture readers on synthetic IPv6 frames (no namespaces): ESP and
   ESP in UDP over IPv6, a neighbour advertisement and its options.

Run as root (binaries from PHX_BIN_DIR):

    PHX_SKIP_BUILD=1 PHX_BIN_DIR=/work/t/release /usr/bin/python3 -m pytest -v tests/netns/test_cluster_ipv6.py
"""

import itertools
import os
import re
import socket
import struct
import subprocess
import time

import pytest

import cluster
import failover_analysis as fa
# The detector delay of the no-failure tests, and the pcap writer of the
# capture checker's own test.
from test_cluster import STEADY_SUSPECT_MS, _write_pcap

_COUNTER = itertools.count()
NODES = ("n1", "n2", "n3")
PING_COUNT = 50
PING_INTERVAL = 0.01
PUBLISH_S = 0.3          # counters are published every 100 ms


# ------------------------------------------------------------- fixtures
@pytest.fixture
def clusters(binaries, request):
    """`make(**kw)`: a `cluster.Cluster(**kw)` with its namespaces and
    bridges up, nothing started. Each is torn down after the test (logs
    dumped when it failed); nothing may be left behind."""
    made = []

    def make(**kw):
        if os.geteuid() != 0:
            pytest.fail("tests/netns needs root (network namespaces)", pytrace=False)
        cl = cluster.Cluster(prefix="pxv{}t{}".format(os.getpid(), next(_COUNTER)), **kw)
        made.append(cl)
        cl.up()
        return cl

    try:
        yield make
    finally:
        rep = getattr(request.node, "rep_call", None)
        failed = rep is not None and rep.failed
        left = []
        for cl in made:
            if failed:
                cl.dump_logs()
            cl.down()
            ns, alive = cl.leftovers()
            left += ns + alive
        assert not left, "left behind: {}".format(left)


def _started(clusters, **kw):
    """A cluster of `clusters(**kw)` running packet-rr (Corosync, gwB,
    phalanxd everywhere, the view complete)."""
    cl = clusters(**kw)
    cl.start_all(scheme="packet-rr", suspect_after_ms=STEADY_SUSPECT_MS)
    return cl


# -------------------------------------------------------------- helpers
def _ping(cl, src, dst, count=PING_COUNT, interval=PING_INTERVAL):
    """`ping -c count -i interval` from namespace `src` (family from
    `dst`); returns (transmitted, received, duplicates, ping's summary):
    a reply twice is a packet some two nodes both processed."""
    argv = ["ping", "-6" if ":" in dst else "-4", "-n", "-q", "-c", str(count), "-i", str(interval), "-W", "2", dst]
    proc = cl.run(src, argv, timeout=count * interval + 20, check=False)
    summary = (proc.stdout + proc.stderr).strip()
    m = re.search(r"(\d+) packets transmitted, (\d+) received(?:, \+(\d+) duplicates)?", proc.stdout)
    if not m:
        return 0, 0, 0, summary
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0), summary


def _no_loss(cl, src, dst, count=PING_COUNT):
    """`count` pings from `src` to `dst`: every one answered, once."""
    sent, received, dups, summary = _ping(cl, src, dst, count)
    assert (sent, received, dups) == (count, count, 0), "ping {} -> {}: {}\n{}".format(
        src, dst, summary, _detector_report(cl, [n for n in NODES if n in cl.gateways]))


def _first_ping(cl, src, dst):
    assert cl.wait_ping(src, dst, 10), "ping {} -> {} not answered within 10 s".format(src, dst)


def _counters(cl, nodes=NODES):
    """{node: its daemon counters}, read after the next publication."""
    time.sleep(PUBLISH_S)
    return {n: cl.gateways[n].counters() for n in nodes}


def _count(counters, name):
    """Daemon counter `name` of one node's counters; its absence fails
    (a phalanxd without it cannot pass the test)."""
    key = "daemon." + name
    assert key in counters, "phalanxd has no daemon counter {}".format(name)
    return counters[key]


def _delta(before, after, node, name):
    return _count(after[node], name) - _count(before[node], name)


def _nd_counts(counters):
    names = ("cluster_nd_replies", "cluster_nd_not_owner", "cluster_nd_ignored", "cluster_unsolicited_nas")
    return {n: {name[len("cluster_"):]: _count(c, name) for name in names} for n, c in counters.items()}


def _check_nd_owner(counters, owner):
    """Only `owner` answered solicitations; the others saw them and left them."""
    nd = _nd_counts(counters)
    assert nd[owner]["nd_replies"] > 0, "{} (the view's first) answered no solicitation: {}".format(owner, nd)
    for n in counters:
        if n == owner:
            continue
        assert nd[n]["nd_replies"] == 0, "{} answered a solicitation, not being the first: {}".format(n, nd)
        assert nd[n]["nd_not_owner"] > 0, "{} saw no solicitation for a virtual address: {}".format(n, nd)
    return nd


def _check_cached(cl, short, dev, addr, vmac):
    entry = cl.neighbour(short, addr, dev)
    assert entry is not None and entry[0] == vmac, "{}'s neighbour entry for {}: {} (expected lladdr {})".format(
        short, addr, entry, vmac)


def _advertisements(path, target, since=0.0):
    """The neighbour advertisements for `target` in the pcap, from `since` on."""
    return [a for a in fa.read_neighbor_advertisements(path) if a.target == target and a.ts >= since]


def _check_advertisements(nas, target, vmac, owner_mac):
    """At least one advertisement for `target`; each names the virtual MAC
    and comes from the owner's own MAC (no node's kernel answered, no
    other node did)."""
    assert nas, "no neighbour advertisement for {} in the capture".format(target)
    wrong = [a for a in nas if a.tlla != vmac or a.src_mac != owner_mac]
    assert not wrong, "advertisements for {} not (target LLA {}, from {}): {}".format(target, vmac, owner_mac, wrong)


def _detector_report(cl, nodes):
    """The failure detector's counters of `nodes` (suspicions of live
    nodes and stalls explain loss or copies on a loaded machine)."""
    names = ("suspicions", "takeovers", "corrected", "stalls", "quorum_losses")
    out = {}
    for n in nodes:
        try:
            st = cl.cluster_status(n)
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
            out[n] = str(e)[:200]
            continue
        out[n] = {name: cluster.status_counter(st, name) for name in names}
        out[n]["view"] = cluster.status_view(st)
    return "failure detector: {}".format(out)


def _check_capture(capture):
    assert capture.drops == 0, "tcpdump dropped {} frames: the checks would be blind".format(capture.drops)


# -------------------------------------------------- 1. dual-stack LAN
def test_dual_stack_lan(clusters):
    """(1) of the module doc."""
    cl = _started(clusters, lan6=True)
    lan = cluster.WanCapture(cl, "tcpdump-lan", os.path.join(cl.run_dir, "lan-icmp6.pcap"), snaplen=256,
                             bpf="icmp6", immediate=True, iface="br-lan")
    with lan:
        _first_ping(cl, "hostA", cluster.HOSTB6)
        # A second resolution: the entry removed, the next packet asks again.
        cl.flush_neighbour("hostA", cluster.VIP_IN6, "eth0")
        _first_ping(cl, "hostA", cluster.HOSTB6)
    _check_capture(lan)
    nas = _advertisements(lan.path, cluster.VIP_IN6)
    _check_advertisements(nas, cluster.VIP_IN6, cluster.VMAC_IN, cluster.node_mac(1, "lan"))

    before = _counters(cl)
    _no_loss(cl, "hostA", cluster.HOSTB6)
    _no_loss(cl, "hostB", cluster.HOSTA6)
    after = _counters(cl)
    owned = {n: {d: _delta(before, after, n, "cluster_{}_owned".format(d)) for d in ("outbound", "inbound")}
             for n in NODES}
    for n, o in owned.items():
        assert o["outbound"] > 0 and o["inbound"] > 0, "{} processed no IPv6 packet of a direction: {}".format(
            n, owned)
    total = sum(o["outbound"] for o in owned.values())
    assert total >= 2 * PING_COUNT, "outbound owned {} for {} IPv6 packets to site B".format(total, 2 * PING_COUNT)

    _first_ping(cl, "hostA", cluster.HOSTB)
    _no_loss(cl, "hostA", cluster.HOSTB, count=20)
    _no_loss(cl, "hostB", cluster.HOSTA, count=20)

    _check_cached(cl, "hostA", "eth0", cluster.VIP_IN6, cluster.VMAC_IN)
    nd = _check_nd_owner(_counters(cl), "n1")
    _check_resolver(cl, "n3", 1, {"inside": [cluster.VIP_IN, cluster.VIP_IN6], "outside": [cluster.VIP_OUT]})
    print("\nIPv6 owned per node (outbound, inbound): {}; ND: {}; advertisements for {} seen: {}".format(
        owned, nd, cluster.VIP_IN6, len(nas)))


def _check_resolver(cl, short, resolver, addresses):
    """`phalanxctl cluster` on node `short` names `resolver` as the node
    that answers for the virtual addresses, and lists them by side."""
    status = cl.cluster_status(short)
    assert status.get("resolver") == resolver, "{} says {} answers ARP and ND".format(short, status.get("resolver"))
    sides = {v["side"]: v["addresses"] for v in status.get("virtual_sides", [])}
    assert sides == addresses, "{}'s virtual addresses: {}".format(short, sides)


def check_esp_over_ipv6(cl, path, pairs, one_sender=False):
    """The WAN capture at `path` of `pairs` x PING_COUNT pings: ESP only
    over IPv6, at least one packet per ping each way between the outside
    virtual address and gwB, gwB's to the outside virtual MAC; the
    cluster's carries the IVs of every node (node-partitioned, matching
    the sender's MAC), or with `one_sender` (a peer whose replay window
    is too small for spreading: one node sends the SA) of exactly one
    node, no (SPI, IV) or (SPI, seq) twice. Returns the cluster's
    packets, gwB's, and the wire checks."""
    esp = fa.read_esp(path)
    over_v4 = [p for p in esp if ":" not in p.src]
    assert not over_v4, "{} ESP packets over IPv4 (the tunnel is IPv6): {}".format(len(over_v4), over_v4[:3])
    out = [p for p in esp if p.src == cluster.VIP_OUT6 and p.dst == cluster.GWB_WAN6]
    back = [p for p in esp if p.src == cluster.GWB_WAN6 and p.dst == cluster.VIP_OUT6]
    # Each ping is one packet each way (request, reply).
    sent = PING_COUNT * pairs
    assert len(out) >= sent and len(back) >= sent, "ESP from the cluster {}, from gwB {} (>= {} each)".format(
        len(out), len(back), sent)
    assert {p.dst_mac for p in back} == {cluster.VMAC_OUT}, "gwB's ESP to {}".format({p.dst_mac for p in back})
    w = fa.wire_checks(out, {cluster.node_mac(i, "wan"): i for i in range(1, cl.nodes + 1)})
    if one_sender:
        assert len(w["per_node"]) == 1, "node ids in the IVs from {}: {}".format(cluster.VIP_OUT6, w["per_node"])
    else:
        assert set(w["per_node"]) == set(range(1, cl.nodes + 1)), "node ids in the IVs from {}: {}".format(
            cluster.VIP_OUT6, w["per_node"])
    assert (w["dup_spi_iv"], w["dup_spi_seq"]) == (0, 0), w
    assert w["iv_mac_mismatch"] == 0 and w["iv_seq_mismatch"] == 0, w
    return out, back, w


# --------------------------------------------------------- 2. IPv6 WAN
def test_ipv6_wan(clusters):
    """(2) of the module doc."""
    cl = _started(clusters, lan6=True, wan6=True)
    # Immediate mode: the last pings' frames are in the file when tcpdump stops.
    wan = cluster.WanCapture(cl, "tcpdump-wan", os.path.join(cl.run_dir, "wan6.pcap"), snaplen=128, immediate=True)
    pairs = [("hostA", cluster.HOSTB6), ("hostB", cluster.HOSTA6), ("hostA", cluster.HOSTB),
             ("hostB", cluster.HOSTA)]
    with wan:
        # gwB resolves the outside virtual address inside the capture.
        cl.flush_neighbour("gwB", cluster.VIP_OUT6, "wan0")
        for src, dst in pairs:
            _first_ping(cl, src, dst)
        for src, dst in pairs:
            _no_loss(cl, src, dst)
    _check_capture(wan)

    out, _, w = check_esp_over_ipv6(cl, wan.path, len(pairs))

    nas = _advertisements(wan.path, cluster.VIP_OUT6)
    _check_advertisements(nas, cluster.VIP_OUT6, cluster.VMAC_OUT, cluster.node_mac(1, "wan"))
    _check_cached(cl, "gwB", "wan0", cluster.VIP_OUT6, cluster.VMAC_OUT)
    _check_cached(cl, "hostA", "eth0", cluster.VIP_IN6, cluster.VMAC_IN)
    nd = _check_nd_owner(_counters(cl), "n1")
    print("\nESP over IPv6 from {}: {} packets, per node {}; ND: {}".format(
        cluster.VIP_OUT6, len(out), w["per_node"], nd))


# ------------------------------------------------ 3. ND owner failover
def test_nd_owner_failover(clusters):
    """(3) of the module doc."""
    cl = _started(clusters, lan6=True)
    _first_ping(cl, "hostA", cluster.HOSTB6)
    survivors = ("n2", "n3")
    before = _counters(cl, survivors)
    lan = cluster.WanCapture(cl, "tcpdump-lan", os.path.join(cl.run_dir, "lan-icmp6.pcap"), snaplen=256,
                             bpf="icmp6", immediate=True, iface="br-lan")
    with lan:
        t_crash = time.time()
        cl.crash_node(1)
        cl.wait_cluster_view([2, 3], seconds=20)
        announced = _counters(cl, survivors)
        # The takeover settled: Corosync confirmed the failure too.
        cl.wait_corosync([2, 3], seconds=15)
        cl.flush_neighbour("hostA", cluster.VIP_IN6, "eth0")
        _first_ping(cl, "hostA", cluster.HOSTB6)
        _no_loss(cl, "hostA", cluster.HOSTB6)
    _check_capture(lan)
    after = _counters(cl, survivors)

    _check_resolver(cl, "n3", 2, {"inside": [cluster.VIP_IN, cluster.VIP_IN6], "outside": [cluster.VIP_OUT]})
    unsolicited = {n: _delta(before, announced, n, "cluster_unsolicited_nas") for n in survivors}
    assert unsolicited["n2"] >= 1, "n2 (now the first) sent no unsolicited advertisement: {}".format(unsolicited)
    assert unsolicited["n3"] == 0, "n3 (not the first) sent unsolicited advertisements: {}".format(unsolicited)
    replies = {n: _delta(before, after, n, "cluster_nd_replies") for n in survivors}
    assert replies["n2"] > 0 and replies["n3"] == 0, "solicitations answered since the crash: {}".format(replies)
    _check_cached(cl, "hostA", "eth0", cluster.VIP_IN6, cluster.VMAC_IN)

    nas = _advertisements(lan.path, cluster.VIP_IN6, since=t_crash)
    _check_advertisements(nas, cluster.VIP_IN6, cluster.VMAC_IN, cluster.node_mac(2, "lan"))
    # RFC 4861 §7.2.6: the announcement is unsolicited (S clear); the
    # answer to hostA's solicitation is solicited.
    assert any(not a.flags & fa.NA_SOLICITED for a in nas), "no unsolicited advertisement from n2: {}".format(nas)
    assert any(a.flags & fa.NA_SOLICITED for a in nas), "no solicited advertisement from n2: {}".format(nas)
    print("\nafter n1's crash: unsolicited advertisements {}, replies {}".format(unsolicited, replies))


# ------------------------------------------ 4. the readers on IPv6 frames
def _mac(text):
    return bytes.fromhex(text.replace(":", ""))


def _eth(dst_mac, src_mac, ethertype, payload):
    return _mac(dst_mac) + _mac(src_mac) + ethertype + payload


def _ipv6(src, dst, next_header, payload, hop_limit=64):
    """RFC 8200 §3: the fixed header, then `payload`."""
    head = struct.pack("!IHBB", 6 << 28, len(payload), next_header, hop_limit)
    return head + socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst) + payload


def _esp6_frame(node, spi, seq, udp):
    esp = struct.pack("!IIQ", spi, seq, (node << 48) | seq) + b"\0" * 32
    if udp:
        esp = struct.pack("!HHHH", 4500, 4500, 8 + len(esp), 0) + esp
    ip = _ipv6(cluster.VIP_OUT6, cluster.GWB_WAN6, 17 if udp else 50, esp)
    return _eth(cluster.GWB_WAN_MAC, cluster.node_mac(node, "wan"), fa.ETHERTYPE_IPV6, ip)


def _nd_frame(icmp_type, target, flags, option_mac, src_mac):
    """A neighbour solicitation (135) or advertisement (136) for `target`
    with one link-layer address option (type 1 source, 2 target)."""
    opt = struct.pack("!BB", 1 if icmp_type == 135 else 2, 1) + _mac(option_mac)
    icmp = struct.pack("!BBHB3x", icmp_type, 0, 0, flags) + socket.inet_pton(socket.AF_INET6, target) + opt
    ip = _ipv6("fd01::11", "fd01::10", 58, icmp, hop_limit=255)
    return _eth(cluster.HOSTA_MAC, src_mac, fa.ETHERTYPE_IPV6, ip)


def test_capture_readers_ipv6(tmp_path):
    """(4) of the module doc: ESP over IPv6 (in UDP 4500 and plain) and
    advertisements are read with their addresses, IV node, flags and
    target link-layer address; a solicitation is not an advertisement."""
    frames = [(10.0 + k * 0.001, _esp6_frame(k % 3 + 1, 0x1001, k + 1, udp=k % 2 == 0)) for k in range(6)]
    na = _nd_frame(136, cluster.VIP_IN6, fa.NA_ROUTER | fa.NA_SOLICITED | fa.NA_OVERRIDE, cluster.VMAC_IN,
                   cluster.node_mac(1, "lan"))
    ns = _nd_frame(135, cluster.VIP_IN6, 0, cluster.HOSTA_MAC, cluster.HOSTA_MAC)
    frames += [(11.0, na), (11.1, ns)]
    path = str(tmp_path / "ipv6.pcap")
    _write_pcap(path, frames)

    pkts = fa.read_esp(path)
    assert [(p.src, p.dst, p.seq, fa.node_of(p)) for p in pkts] == [
        (cluster.VIP_OUT6, cluster.GWB_WAN6, k + 1, k % 3 + 1) for k in range(6)], pkts
    assert pkts[0].length == 40 + 8 + 48 and pkts[1].length == 40 + 48, pkts[:2]
    w = fa.wire_checks(pkts, {cluster.node_mac(i, "wan"): i for i in (1, 2, 3)})
    assert w["per_node"] == {1: 2, 2: 2, 3: 2} and w["iv_mac_mismatch"] == 0 and w["iv_seq_mismatch"] == 0, w

    nas = fa.read_neighbor_advertisements(path)
    assert len(nas) == 1, nas
    a = nas[0]
    assert (a.target, a.tlla, a.src_mac, a.src) == (cluster.VIP_IN6, cluster.VMAC_IN, cluster.node_mac(1, "lan"),
                                                    "fd01::11"), a
    assert a.flags & fa.NA_ROUTER and a.flags & fa.NA_SOLICITED and a.flags & fa.NA_OVERRIDE, a
