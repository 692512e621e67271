#!/usr/bin/env python3
"""Bulk TCP through two phalanxd gateways over a WAN smaller than the TUN
MTU, side by side with a TUN MTU that fits (tests/netns topology):

    hostA --(iperf3 TCP, 1 stream)--> gwA ==== wan0 (MTU W) ==== gwB --> hostB

Variants, alternated in each repetition so the machine's noise hits all:

* `fits`: TUN MTU 1200 (its ESP-in-UDP packets, at most 1262 octets, fit a
  1280 WAN; over a 1000 WAN: 940): no packet is too big, the reference;
* `small-wan`: TUN MTU 1400, the default: gwA must answer with ICMP
  Fragmentation Needed (1218 / 938) and hostA's TCP shrink its segments;
* `baseline` (with --baseline-bin DIR): the same as `small-wan` with the
  phalanxd in DIR, e.g. a build from before path-MTU handling.

Reports Gbit/s per run and the ratio small-wan / fits (the issue's bar:
at least 0.8). With --results, adds a dated entry to bench/RESULTS.md
(section "Path MTU"). Offloads on (lib.sh default).
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "netns"))
sys.path.insert(0, HERE)

import ike_rekey  # noqa: E402
import phxnet  # noqa: E402


def one_run(wan_mtu, tun_mtu, seconds, bin_dir):
    phxnet.BIN_DIR = bin_dir
    topo = phxnet.Topology(prefix="phxpmtu{}".format(os.getpid()))
    topo.up()
    try:
        for gw in ("gwA", "gwB"):
            topo.run(gw, ["ip", "link", "set", "wan0", "mtu", str(wan_mtu)])
        phxnet.gateway_configs("aes128gcm16", "udp", topo.run_dir, seed="pmtu-bench")
        paths = [os.path.join(topo.run_dir, "gw{}.toml".format(s)) for s in "AB"]
        for path in paths:
            with open(path) as f:
                text = f.read()
            with open(path, "w") as f:
                f.write(text.replace("mtu = 1400\n", "mtu = {}\n".format(tun_mtu), 1))
        for side, path in zip("AB", paths):
            # A TUN MTU below 1280 has no IPv6 (RFC 8200 §5), so
            # start_gateway's IPv6 route would fail: IPv4 only here.
            g = topo.start_gateway(side, path, wait=False)
            gw = "gw" + side
            if not topo.wait_dev(gw, phxnet.TUN, 15):
                raise RuntimeError("phalanxd on {} created no TUN".format(gw))
            remote = phxnet.SITEB[0] if side == "A" else phxnet.SITEA[0]
            topo.run(gw, ["ip", "link", "set", phxnet.TUN, "up"])
            topo.run(gw, ["ip", "route", "replace", remote, "dev", phxnet.TUN])
            g.wait_socket()
        if not topo.wait_ping("hostA", phxnet.HOSTB_V4, 10):
            raise RuntimeError("no ping through the tunnel")
        time.sleep(0.5)
        out = topo.lib("run_iperf $NS_HOSTA {} {}".format(phxnet.HOSTB_V4, seconds), timeout=seconds + 60,
                       check=False)
        try:
            report = json.loads(out.stdout)
            return report["end"]["sum_received"]["bits_per_second"] / 1e9
        except (ValueError, KeyError):
            return 0.0
    finally:
        topo.down()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wan-mtu", type=int, default=1280)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--baseline-bin", default=None)
    ap.add_argument("--results", action="store_true")
    ap.add_argument("--command", default="bench/pmtu.py")
    args = ap.parse_args()
    fits_tun = args.wan_mtu - 80
    variants = [("fits", fits_tun, phxnet.BIN_DIR), ("small-wan", 1400, phxnet.BIN_DIR)]
    if args.baseline_bin:
        variants.append(("baseline", 1400, args.baseline_bin))
    runs = {name: [] for name, _, _ in variants}
    for rep in range(args.reps):
        for name, tun, bin_dir in variants:
            gbps = one_run(args.wan_mtu, tun, args.seconds, bin_dir)
            runs[name].append(gbps)
            print("rep {} {:10s} TUN {} WAN {}: {:.3f} Gbit/s".format(rep + 1, name, tun, args.wan_mtu, gbps),
                  flush=True)
    med = {name: statistics.median(v) for name, v in runs.items()}
    ratio = med["small-wan"] / med["fits"] if med["fits"] else 0.0
    print("median Gbit/s: {}; small-wan / fits = {:.2f}".format(
        {k: round(v, 3) for k, v in med.items()}, ratio))
    if args.results:
        lines = ike_rekey.header_lines(args.command, [
            "iperf3 TCP, one stream, hostA -> hostB, {} s per run, {} repetitions alternating the variants; "
            "AES-128-GCM, ESP in UDP; WAN veths at MTU {}".format(args.seconds, args.reps, args.wan_mtu)])
        lines += ["| variant | TUN MTU | Gbit/s per run | median |", "|---|---|---|---|"]
        for name, tun, _ in variants:
            lines.append("| {} | {} | {} | {:.3f} |".format(
                name, tun, ", ".join("{:.3f}".format(v) for v in runs[name]), med[name]))
        lines += ["", "small-wan / fits = **{:.2f}** (the bar: 0.8)".format(ratio)]
        ike_rekey.insert_entry("Path MTU", "Bulk TCP over a WAN smaller than the TUN MTU (bench/pmtu.py).",
                               "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
