#!/usr/bin/env python3
"""Per-packet CPU cost of a cluster node: Q(s) for a packet it does not own,
R(s) for one it processes, and a check of the model's accounting.

Every node of a Phalanx cluster receives every packet. The literature's
model (Shieh & Lai) charges a node R(s) for each packet it processes and
Q(s) for each one it only looks at and drops, so with n nodes and packet
round robin each node spends (R + (n-1)·Q)/n per cluster packet and the
cluster's throughput is mu(n, s) = n·P·s / (R(s) + (n-1)·Q(s)).

This script measures, on the cluster of tests/netns/cluster.py with 1..N
nodes (`packet-rr`, static SAs, real Corosync):

  cpu_i = owned_i · R(s) + not_owned_i · Q(s)     for every node i

where cpu_i is the phalanxd process's CPU time (sum of its threads'
/proc/PID/task/TID/schedstat run time) over a fixed-rate UDP stream of
s-byte IP packets, minus the same node's idle CPU over the same time, and
owned_i / not_owned_i are its `cluster_{outbound,inbound}_{owned,not_owned}`
counter deltas. R and Q are fitted (least squares) on the runs with
FIT_NODES nodes, then the model predicts every node's CPU time on the runs
with more nodes: the prediction error there is the check of the
accounting. The nodes share this machine's cores, so this validates the
accounting, not throughput (issue 5).

Not in the numbers: the kernel's work before the AF_PACKET ring (veth,
bridge flooding, the ring copy) runs in softirq context and is charged to
whatever process the CPU was running, not to phalanxd. Q here is the
userspace share of a not-owned packet.

--kernel-filter on|off|both: the nodes' `[cluster] kernel_filter` (an
eBPF socket filter that drops inbound ESP another node owns before the
ring; `both` measures off and on in the same run, one cluster each).
Inbound not-owned packets are then the user-space counter plus
`cluster_inbound_not_owned_kernel`, so Q with the filter on is phalanxd's
CPU per packet the kernel refused (expected ~0: the filter runs in
softirq, charged to no process here, and the ring never sees the frame).

--wan v4|v6|both: the tunnel over the IPv4 WAN (outside virtual address
192.0.2.1) or the IPv6 one (2001:db8:f::1, `Cluster(wan6=True)`); the
inner traffic is IPv4 either way. The kernel filter decides ESP over
either WAN (over IPv6: a 40-octet header whose Next Header is ESP or UDP;
extension headers reach user space).

    bench/cluster_cost.py [--nodes 1 2 3 4] [--fit-nodes 1 2] [--sizes 64 512 1400]
                          [--rate 8000] [--seconds 4] [--directions outbound inbound]
                          [--kernel-filter off|on|both] [--wan v4|v6|both] [--json out.json]
"""

import argparse
import json
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "netns"))

import cluster as C  # noqa: E402
import phxnet  # noqa: E402

IP_UDP_HEADERS = 28
IPERF_PORT = 5201


def task_cpu_ns(pid):
    """Run time of every thread of `pid`, in ns (schedstat's first field)."""
    total = 0
    task_dir = "/proc/{}/task".format(pid)
    for tid in os.listdir(task_dir):
        try:
            with open(os.path.join(task_dir, tid, "schedstat")) as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended between listdir and open
    return total


def node_pids(cl):
    return {i: cl.procs["phalanxd-n{}".format(i)].pid for i in range(1, cl.nodes + 1)}


def node_counts(cl, direction):
    out = {}
    for i in range(1, cl.nodes + 1):
        c = cl.gateways["n{}".format(i)].counters()
        not_owned = c.get("daemon.cluster_{}_not_owned".format(direction), 0)
        if direction == "inbound":
            # Dropped by the kernel filter before the ring (0 without it).
            not_owned += c.get("daemon.cluster_inbound_not_owned_kernel", 0)
        out[i] = (c.get("daemon.cluster_{}_owned".format(direction), 0), not_owned)
    return out


def sample(cl):
    pids = node_pids(cl)
    return {i: task_cpu_ns(pid) for i, pid in pids.items()}


def udp_stream(cl, size, rate, seconds, direction):
    """iperf3 UDP of `size`-byte IP packets at `rate` packets/s: hostA ->
    hostB (the cluster's outbound path) or hostB -> hostA (inbound, -R)."""
    payload = size - IP_UDP_HEADERS
    server = cl.popen("iperf3-server", "hostB", ["iperf3", "-s", "-1", "-B", C.HOSTB, "-p", str(IPERF_PORT)])
    deadline = time.monotonic() + 10
    while ":{} ".format(IPERF_PORT) not in cl.run("hostB", ["ss", "-lun"], check=False).stdout + \
            cl.run("hostB", ["ss", "-ltn"], check=False).stdout:
        if time.monotonic() > deadline or server.poll() is not None:
            raise RuntimeError("iperf3 server did not start")
        time.sleep(0.05)
    argv = ["iperf3", "-c", C.HOSTB, "-p", str(IPERF_PORT), "-u", "-l", str(payload), "-b",
            str(rate * payload * 8), "-t", str(seconds), "-J"]
    if direction == "inbound":
        argv.append("-R")
    client = cl.popen("iperf3-client", "hostA", argv)
    client.wait(seconds + 30)
    cl.stop("iperf3-server")
    cl.stop("iperf3-client")


def measure(cl, size, rate, seconds, direction):
    """Per node: (cpu_ns above idle, owned, not_owned) for one stream."""
    idle0 = sample(cl)
    time.sleep(seconds)
    idle1 = sample(cl)
    c0, t0 = node_counts(cl, direction), sample(cl)
    start = time.monotonic()
    udp_stream(cl, size, rate, seconds, direction)
    elapsed = time.monotonic() - start
    t1, c1 = sample(cl), node_counts(cl, direction)
    rows = {}
    for i in t0:
        idle_rate = (idle1[i] - idle0[i]) / seconds
        cpu = (t1[i] - t0[i]) - idle_rate * elapsed
        rows[i] = (cpu, c1[i][0] - c0[i][0], c1[i][1] - c0[i][1])
    return rows


def fit(rows):
    """Least squares of cpu = owned·R + not_owned·Q over `rows`; with only
    owned packets (one node) Q is undetermined and returned as None."""
    soo = sum(o * o for _, o, _ in rows)
    snn = sum(n * n for _, _, n in rows)
    son = sum(o * n for _, o, n in rows)
    sco = sum(c * o for c, o, _ in rows)
    scn = sum(c * n for c, _, n in rows)
    det = soo * snn - son * son
    if snn == 0 or det == 0:
        return (sco / soo if soo else None), None
    r = (sco * snn - scn * son) / det
    q = (soo * scn - son * sco) / det
    return r, q


def filter_modes(choice):
    return {"off": [False], "on": [True], "both": [False, True]}[choice]


def wan_modes(choice):
    return {"v4": ["v4"], "v6": ["v6"], "both": ["v4", "v6"]}[choice]


def run(args):
    # (size, direction, filter, wan) -> {n: {node: (cpu, owned, not_owned)}}
    results = {}
    for wan in wan_modes(args.wan):
        for kernel_filter in filter_modes(args.kernel_filter):
            for n in args.nodes:
                run_cluster(args, n, (kernel_filter, wan), results)
    return results


def run_cluster(args, n, mode, results):
    """One cluster of `n` nodes, every direction and size; `mode` is
    (kernel_filter, wan family)."""
    kernel_filter, wan = mode
    tag = ("f" if kernel_filter else "u") + ("6" if wan == "v6" else "")
    cl = C.Cluster(prefix="pxq{}{}{}".format(os.getpid() % 10000, tag, n), nodes=n, wan6=wan == "v6")
    try:
        cl.up()
        cl.start_all(scheme="packet-rr", kernel_filter=kernel_filter)
        for direction in args.directions:
            for size in args.sizes:
                rows = measure(cl, size, args.rate, args.seconds, direction)
                results.setdefault((size, direction, kernel_filter, wan), {})[n] = rows
                phxnet.log("n={} {} {} B filter={} wan={}: {}".format(n, direction, size, kernel_filter, wan,
                                                                      rows))
    except Exception:
        cl.dump_logs()
        raise
    finally:
        cl.down()


def report(args, results):
    lines = ["| WAN | direction | kernel filter | IP bytes | R(s) ns | Q(s) ns | Q/R | nodes checked | node CPU "
             "predicted vs measured (mean abs error) |", "|---|---|---|---|---|---|---|---|---|"]
    table = []
    for (size, direction, kernel_filter, wan), by_n in sorted(
            results.items(), key=lambda kv: (kv[0][3], kv[0][1], kv[0][2], kv[0][0])):
        fit_rows = [row for n in args.fit_nodes for row in by_n.get(n, {}).values()]
        r, q = fit(fit_rows)
        errors, checked = [], []
        for n, rows in by_n.items():
            if n in args.fit_nodes or r is None or q is None:
                continue
            checked.append(n)
            for cpu, o, nn in rows.values():
                predicted = o * r + nn * q
                if cpu > 0:
                    errors.append(abs(predicted - cpu) / cpu)
        mae = "{:.1f} %".format(100 * sum(errors) / len(errors)) if errors else "-"
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            wan, direction, "on" if kernel_filter else "off", size, "{:.0f}".format(r) if r else "-", "{:.0f}".format(q) if q else "-",
            "{:.3f}".format(q / r) if r and q else "-", ",".join(map(str, checked)) or "-", mae))
        table.append({"size": size, "direction": direction, "kernel_filter": kernel_filter, "wan": wan, "r_ns": r, "q_ns": q, "checked_nodes": checked,
                      "mean_abs_error": (sum(errors) / len(errors)) if errors else None,
                      "runs": {str(n): {str(k): v for k, v in rows.items()} for n, rows in by_n.items()}})
    text = "\n".join(lines)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3, 4])
    ap.add_argument("--fit-nodes", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 512, 1400])
    ap.add_argument("--rate", type=int, default=8000, help="packets per second (bounded load)")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--directions", nargs="+", choices=["outbound", "inbound"], default=["outbound", "inbound"])
    ap.add_argument("--kernel-filter", choices=["off", "on", "both"], default="both",
                    help="[cluster] kernel_filter of the nodes; both: off then on, same run")
    ap.add_argument("--wan", choices=["v4", "v6", "both"], default="v4",
                    help="the tunnel over the IPv4 or the IPv6 WAN; both: v4 then v6, same run")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("cluster_cost.py needs root (network namespaces)", file=sys.stderr)
        return 1
    if args.seconds > 30 or args.rate > 200000:
        print("bounded load only: --seconds <= 30, --rate <= 200000", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    report(args, run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
