"""The cluster's outbound ESP against a peer with a small replay window,
no failure (issue 17; bench/small-window.py and test_small_window.py):
a fresh three-node cluster (cluster.py), site B's gateway strongSwan
(`strongswan`: kernel-libipsec, a fixed 128-packet window) or a host-mode
phalanxd with replay window W (`phalanx-W`); fixed-rate UDP hostA ->
hostB; what the peer refused as too old, what was lost end to end, and
from a WAN capture how far out of order the cluster's ESP arrived
(`failover_analysis.reorder`) and which nodes sent it."""

import os
import time

import cluster
import cluster_ike
import failover_analysis as fa
import phxnet

WINDOWS = (32, 64, 128, 1024)
# charon's log line (default level 1) for a packet its window refused.
REFUSED = "ESP sequence number verification failed"
UDP_PORT = 5301


def bring_up(cl, peer, scheme, told, **cluster_kw):
    """The cluster and site B's gateway up, the tunnel carrying a ping;
    `told`: the nodes' configuration states the peer's window
    (`peer_replay_window`; a build from before it knows no such key).
    Returns a function that reads the peer's too-old refusals so far."""
    if peer == "strongswan":
        cluster_ike.SWAN_REPLAY_WINDOW = 128 if told else None
        charon = cluster_ike.start(cl, scheme=scheme, **cluster_kw)
        charon.initiate(cluster_ike.CHILD, ike="site", timeout=20)
        cluster_ike.wait_swan_sa(charon)
        refused = lambda: charon.log().count(REFUSED)  # noqa: E731
    else:
        window = int(peer.split("-", 1)[1])
        cl.start_all(scheme=scheme, peer_window=window, tell_nodes=told, **cluster_kw)
        gwb = cl.gateways["gwB"]
        refused = lambda: cluster.replay_drops(gwb)[1]  # noqa: E731
    if not cl.wait_ping("hostA", cluster.HOSTB, 15):
        raise RuntimeError("no ping hostA -> hostB through the tunnel")
    return refused


def one_run(variant, peer, scheme, rate, seconds, k, keep_going=True, **cluster_kw):
    """One fresh cluster of `variant` = (name, binaries, told); returns a
    dict of what was measured (with `error` when something failed and
    `keep_going`; else it raises). `cluster_kw`: `[cluster]` settings."""
    name, bin_dir, told = variant
    phxnet.BIN_DIR = bin_dir
    cl = cluster.Cluster(prefix="pxw{}r{}".format(os.getpid(), k))
    res = {"build": name, "peer": peer, "scheme": scheme, "rate": rate, "seconds": seconds}
    try:
        cl.up()
        refused = bring_up(cl, peer, scheme, told, **cluster_kw)
        before = refused()
        full_before = {ns: cluster.udp_rcvbuf_errors(cl, ns) for ns in ("gwB", "hostB")}
        pcap = os.path.join(cl.run_dir, "wan.pcap")
        with cluster.WanCapture(cl, "wan-cap", pcap, bpf="dst host {}".format(cluster.GWB_WAN)) as cap:
            stream = cluster.UdpStream(cl, "udp", "hostA", "hostB", cluster.HOSTB, UDP_PORT, rate, seconds).start()
            udp = stream.result(timeout=seconds + 40)
            time.sleep(1.5)
        res["capture_drops"] = cap.drops
        res["peer_refused"] = refused() - before
        # Lost for a full socket buffer, not for the replay window: gwB's
        # ESP-in-UDP socket (charon's), hostB's receiver.
        res["rcvbuf_drops"] = {ns: cluster.udp_rcvbuf_errors(cl, ns) - n for ns, n in full_before.items()}
        res["udp_sent"], res["udp_lost"] = udp["sent"], udp["lost"]
        esp = [p for p in fa.read_esp(pcap) if p.dst == cluster.GWB_WAN]
        res["wire"] = fa.reorder(esp, WINDOWS)
        res["senders"] = sorted({fa.node_of(p) for p in esp if p.iv is not None})
        res["dup_spi_seq"] = fa.wire_checks(esp)["dup_spi_seq"]
        # What the nodes say of the outbound SAs (phalanxctl cluster): who
        # sends them (`spread`) and the peer window they were told.
        if told:
            status = cl.cluster_status("n1")
            res["reported"] = sorted({(sa.get("spread"), sa.get("peer_window"))
                                      for sa in status.get("sas", []) if sa.get("direction") == "out"},
                                     key=repr)
    except Exception as e:  # noqa: BLE001 - reported in the row, the other runs go on
        res["error"] = "{}: {}".format(type(e).__name__, e)
        cl.dump_logs(tail=1500)
        if not keep_going:
            raise
    finally:
        cl.down()
    ns, alive = cl.leftovers()
    if ns or alive:
        raise RuntimeError("left behind: namespaces {}, processes {}".format(ns, alive))
    return res
