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

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "netns"))
sys.path.insert(0, HERE)

import ike_rekey  # noqa: E402
import phxnet  # noqa: E402
from small_window import WINDOWS, one_run  # noqa: E402

SCHEMES = ["packet-rr", "packet-sqf", "session-rr", "session-sqf", "hash-src", "hash-src-spi"]


def table(rows):
    head = ("| build | peer | scheme | UDP pps | sent | lost | refused by peer | full buffer gwB/hostB | max depth | "
            + " | ".join("depth ≥ {}".format(w) for w in WINDOWS) + " | nodes sending |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if "error" in r:
            lines.append("| {} | {} | {} | {} | error: {} |".format(r["build"], r["peer"], r["scheme"], r["rate"],
                                                                  r["error"][:120]))
            continue
        w = r["wire"]
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} |".format(
            r["build"], r["peer"], r["scheme"], r["rate"], r["udp_sent"], r["udp_lost"], r["peer_refused"],
            r["rcvbuf_drops"]["gwB"], r["rcvbuf_drops"]["hostB"], w["max_depth"],
            " | ".join(str(w["refused"][win]) for win in WINDOWS),
            ",".join("n{}".format(n) for n in r["senders"])))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", nargs="+", default=["strongswan", "phalanx-32"])
    ap.add_argument("--schemes", nargs="+", default=SCHEMES, choices=SCHEMES)
    ap.add_argument("--rates", nargs="+", type=int, default=[2000, 10000])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--lease-len", type=int, default=4096,
                    help="[cluster] lease_len (default 4096, the netns tests': a block boundary every "
                         "4,096 packets; the daemon's default is 65,536)")
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
                    r = one_run(variant, peer, scheme, rate, args.seconds, k, lease_len=args.lease_len)
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
                 "3-node cluster, lease_len {}, UDP hostA -> hostB of 200 octets for {:.0f} s, no failure; "
                 "depth: how many sequence numbers below the highest already seen a packet arrived on the "
                 "WAN (a window W refuses depth ≥ W); full buffer: UDP RcvbufErrors in gwB's and hostB's "
                 "namespaces (losses that are not the replay window's)".format(args.lease_len, args.seconds)]
        ike_rekey.insert_entry("Small replay windows",
                               "The cluster's outbound ESP against peers with small replay windows "
                               "(bench/small-window.py).",
                               "\n".join(ike_rekey.header_lines(command, extra)) + "\n" + text)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
