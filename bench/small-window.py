#!/usr/bin/env python3
"""The cluster's outbound ESP against peers with small replay windows, with
no failure (issue 17): a three-node cluster (tests/netns/cluster.py) sends
fixed-rate UDP from hostA to hostB; site B's gateway is

* `strongswan`: charon with kernel-libipsec, whose userspace ESP has a fixed
  128-packet replay window (the tunnel from IKEv2, strongSwan initiates);
* `phalanx-W`: a host-mode phalanxd with static SAs and replay window W
  (32 is Linux XFRM's default; 1024 Phalanx's).

Per dispatch scheme and rate: UDP datagrams lost end to end, what the peer
refused as too old (charon's "ESP sequence number verification failed"
lines; phalanxd's `too_old` counter), and, from a capture on the WAN
bridge, how far out of order the cluster's ESP arrived: the deepest packet
and how many packets a receiver with a window of 32, 64, 128 or 1024 would
have refused (`failover_analysis.reorder`), plus which nodes sent the SA's
packets. Each (peer, scheme, rate) is a fresh cluster.

Usage (root): bench/small-window.py [--peers strongswan phalanx-32 ...]
    [--schemes packet-rr ...] [--rates 2000 ...] [--seconds 10]
    [--bin-dir DIR] [--results]
With --results a dated entry goes to bench/RESULTS.md (section "Small
replay windows"). Offloads on (lib.sh default). Bounded: every run is one
fresh cluster, torn down by cluster.py (also on failure).
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "netns"))
sys.path.insert(0, HERE)

import cluster  # noqa: E402
import cluster_ike  # noqa: E402
import failover_analysis as fa  # noqa: E402
import ike_rekey  # noqa: E402
import phxnet  # noqa: E402

SCHEMES = ["packet-rr", "packet-sqf", "session-rr", "session-sqf", "hash-src", "hash-src-spi"]
WINDOWS = (32, 64, 128, 1024)
REFUSED = "ESP sequence number verification failed"
UDP_PORT = 5301


def bring_up(cl, peer, scheme, told):
    """The cluster and site B's gateway up, the tunnel carrying a ping;
    `told`: the nodes' configuration states the peer's window
    (`peer_replay_window`; a build from before it knows no such key).
    Returns a function that reads the peer's too-old refusals so far."""
    if peer == "strongswan":
        cluster_ike.SWAN_REPLAY_WINDOW = 128 if told else None
        charon = cluster_ike.start(cl, scheme=scheme)
        charon.initiate(cluster_ike.CHILD, ike="site", timeout=20)
        cluster_ike.wait_swan_sa(charon)
        refused = lambda: charon.log().count(REFUSED)  # noqa: E731
    else:
        window = int(peer.split("-", 1)[1])
        cl.start_all(scheme=scheme, peer_window=window, tell_nodes=told)
        gwb = cl.gateways["gwB"]
        refused = lambda: cluster.replay_drops(gwb)[1]  # noqa: E731
    if not cl.wait_ping("hostA", cluster.HOSTB, 15):
        raise RuntimeError("no ping hostA -> hostB through the tunnel")
    return refused


def one_run(variant, peer, scheme, rate, seconds, k):
    """One fresh cluster of `variant` = (name, binaries, told)."""
    name, bin_dir, told = variant
    phxnet.BIN_DIR = bin_dir
    cl = cluster.Cluster(prefix="pxw{}r{}".format(os.getpid(), k))
    res = {"build": name, "peer": peer, "scheme": scheme, "rate": rate, "seconds": seconds}
    try:
        cl.up()
        refused = bring_up(cl, peer, scheme, told)
        before = refused()
        pcap = os.path.join(cl.run_dir, "wan.pcap")
        with cluster.WanCapture(cl, "wan-cap", pcap, bpf="dst host {}".format(cluster.GWB_WAN)) as cap:
            stream = cluster.UdpStream(cl, "udp", "hostA", "hostB", cluster.HOSTB, UDP_PORT, rate, seconds).start()
            udp = stream.result(timeout=seconds + 40)
            time.sleep(1.5)
        res["capture_drops"] = cap.drops
        res["peer_refused"] = refused() - before
        res["udp_sent"], res["udp_lost"] = udp["sent"], udp["lost"]
        esp = [p for p in fa.read_esp(pcap) if p.dst == cluster.GWB_WAN]
        res["wire"] = fa.reorder(esp, WINDOWS)
        res["senders"] = sorted({fa.node_of(p) for p in esp if p.iv is not None})
        res["dup_spi_seq"] = fa.wire_checks(esp)["dup_spi_seq"]
    except Exception as e:  # noqa: BLE001 - reported in the row, the other runs go on
        res["error"] = "{}: {}".format(type(e).__name__, e)
        cl.dump_logs(tail=1500)
    finally:
        cl.down()
    ns, alive = cl.leftovers()
    if ns or alive:
        raise RuntimeError("left behind: namespaces {}, processes {}".format(ns, alive))
    return res


def table(rows):
    head = ("| build | peer | scheme | UDP pps | sent | lost | refused by peer | max depth | "
            + " | ".join("depth ≥ {}".format(w) for w in WINDOWS) + " | nodes sending |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if "error" in r:
            lines.append("| {} | {} | {} | {} | error: {} |".format(r["build"], r["peer"], r["scheme"], r["rate"],
                                                                  r["error"][:120]))
            continue
        w = r["wire"]
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            r["build"], r["peer"], r["scheme"], r["rate"], r["udp_sent"], r["udp_lost"], r["peer_refused"], w["max_depth"],
            " | ".join(str(w["refused"][win]) for win in WINDOWS),
            ",".join("n{}".format(n) for n in r["senders"])))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", nargs="+", default=["strongswan", "phalanx-32"])
    ap.add_argument("--schemes", nargs="+", default=SCHEMES, choices=SCHEMES)
    ap.add_argument("--rates", nargs="+", type=int, default=[2000, 10000])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--bin-dir", default=phxnet.BIN_DIR)
    ap.add_argument("--baseline-bin", default=None,
                    help="also run every case with the phalanxd in this directory (a build from before "
                         "peer_replay_window: its nodes are not told the peer's window), alternated")
    ap.add_argument("--out", default=None, help="write results.json and table.md here")
    ap.add_argument("--results", action="store_true", help="add a dated entry to bench/RESULTS.md")
    args = ap.parse_args()
    for peer in args.peers:
        if peer != "strongswan" and not (peer.startswith("phalanx-") and peer[8:].isdigit()):
            ap.error("peer {!r}: strongswan or phalanx-W (W the replay window)".format(peer))
    if os.geteuid() != 0:
        sys.exit("small-window: needs root (network namespaces)")
    variants = [("this", args.bin_dir, True)]
    if args.baseline_bin:
        variants.insert(0, ("baseline", args.baseline_bin, False))
    rows, k = [], 0
    for peer in args.peers:
        for scheme in args.schemes:
            for rate in args.rates:
                for variant in variants:
                    k += 1
                    r = one_run(variant, peer, scheme, rate, args.seconds, k)
                    print(json.dumps(r), flush=True)
                    rows.append(r)
    text = table(rows)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(rows, f, indent=1)
        with open(os.path.join(args.out, "table.md"), "w") as f:
            f.write(text + "\n")
    if args.results:
        command = "bench/small-window.py " + " ".join(sys.argv[1:])
        extra = ["binaries: `this` {}{}".format(args.bin_dir, ", `baseline` {}".format(args.baseline_bin)
                                                  if args.baseline_bin else ""),
                 "3-node cluster, UDP hostA -> hostB of 200 octets for {:.0f} s, no failure; depth: how many "
                 "sequence numbers below the highest already seen a packet arrived on the WAN (a window W "
                 "refuses depth ≥ W)".format(args.seconds)]
        ike_rekey.insert_entry("Small replay windows",
                               "The cluster's outbound ESP against peers with small replay windows "
                               "(bench/small-window.py).",
                               "\n".join(ike_rekey.header_lines(command, extra)) + "\n" + text)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
