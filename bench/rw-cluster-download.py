#!/usr/bin/env python3
"""An End-User downloads 50 MB through the 3-node cluster while the node
serving it loses power (issue 18): does the download finish, how long does
it stall, and does the End-User renegotiate?

    hostA 10.1.0.10 (iperf3 -s) -- [br-lan] -- n1 n2 n3 (pool 10.3.0.0/24) -- [br-wan] -- gwB: charon (End-User)

Per repetition, a fresh cluster and End-User (tests/netns/cluster_rw.py):
strongSwan 5.9.8 at gwB gets a virtual IP and runs `iperf3 -R -n 50M`
(hostA sends, the End-User receives) at `--rate` (iperf3 -b; a real
End-User's link is rate-limited, and it keeps the failure mid-transfer),
reporting every 100 ms. In `kill` runs the node running the End-User's
IKE SA loses power (`Cluster.crash_node`: phalanxd and Corosync frozen,
cables cut at once) `--kill-at` seconds into the transfer; `none` runs
are the same without a failure, side by side in the same invocation.

Reported per run: whether all 50 MB arrived, the transfer's duration, the
longest stall (consecutive 100 ms intervals that received nothing, from
iperf3's own intervals), TCP retransmissions at the sender, and the
End-User's IKE_SA_INIT count after the failure (must not grow) and its
virtual IP before and after (must be the same).

    bench/rw-cluster-download.py [--reps 2] [--rate 100M] [--kill-at 1.5] [--results]

Needs root; builds nothing (PHX_BIN_DIR, default target/release).
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "netns"))
sys.path.insert(0, HERE)

import cluster as C  # noqa: E402
import ikegw  # noqa: E402
import ike_rekey  # noqa: E402
from cluster_ike import init_count, wait_runner, wait_swan_sa  # noqa: E402
from cluster_rw import start  # noqa: E402

SIZE = "50M"
SIZE_BYTES = 50 * 1024 * 1024


def one_run(rep, mode, args):
    cl = C.Cluster(prefix="phxrw{}r{}{}".format(os.getpid(), rep, mode[0]))
    try:
        cl.up()
        charon = start(cl, lease_len=args.lease_len)
        charon.initiate("net", ike="home", timeout=20)
        wait_swan_sa(charon)
        vip_before = charon.list_sas()[0].get("local-vips", [])
        owner, _ = wait_runner(cl, range(1, cl.nodes + 1))
        inits = init_count(charon)
        server = cl.popen("iperf3-s", "hostA", ["iperf3", "-s", "-1", "-B", C.HOSTA])
        time.sleep(0.5)
        out = os.path.join(cl.run_dir, "iperf3.json")
        argv = ["iperf3", "-c", C.HOSTA, "-R", "-n", SIZE, "-b", args.rate, "-i", "0.1", "-J",
                "--connect-timeout", "3000", "--logfile", out]
        client = cl.popen("iperf3-c", "gwB", argv)
        pings = int(args.timeout * 100)
        pinger = cl.popen("ping", "gwB", ["ping", "-i", "0.01", "-c", str(pings), "-W", "1", C.HOSTA])
        t0 = time.monotonic()
        if mode == "kill":
            time.sleep(args.kill_at)
            cl.crash_node(owner)
        deadline = t0 + args.timeout
        while client.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        finished = client.poll() is not None
        if not finished:
            cl.stop("iperf3-c")
        cl.stop("iperf3-s")
        pinger.send_signal(signal.SIGINT)  # ping prints its summary
        try:
            pinger.wait(5)
        except subprocess.TimeoutExpired:
            pass
        cl.stop("ping")
        row = {"rep": rep, "mode": mode, "owner": owner, "finished": finished}
        row.update(parse_iperf(out))
        row.update(parse_ping(cl.log_of("ping")))
        row["new_ike_sa_init"] = (init_count(charon) - inits) // 2
        row["no_lease"] = sum(no_lease(cl, i) for i in range(1, cl.nodes + 1) if i != owner or mode == "none")
        sas = charon.list_sas()
        row["vip_kept"] = bool(sas) and sas[0].get("local-vips", []) == vip_before
        return row
    finally:
        cl.down()


def parse_iperf(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return {"error": "iperf3 output unreadable: {}".format(e)}
    if "error" in doc and not doc.get("intervals"):
        return {"error": doc["error"]}
    received = doc.get("end", {}).get("sum_received", {})
    sent = doc.get("end", {}).get("sum_sent", {})
    longest, run = 0.0, 0.0
    for interval in doc.get("intervals", []):
        s = interval["sum"]
        if s["bytes"] == 0:
            run += s["seconds"]
            longest = max(longest, run)
        else:
            run = 0.0
    return {
        "bytes": received.get("bytes", 0),
        "complete": received.get("bytes", 0) >= SIZE_BYTES,
        "seconds": round(received.get("seconds", 0.0), 2),
        "longest_stall_s": round(longest, 2),
        "retransmits": sent.get("retransmits"),
    }


def no_lease(cl, i):
    """Outbound packets node i dropped for want of a sequence lease."""
    counters = ikegw.flatten_counters(cl.gateways["n{}".format(i)].ctl("counters"))
    return ikegw.counter(counters, "cluster_no_lease") or 0


def parse_ping(text):
    """Pings answered, lost, and the longest run of lost ones (10 ms
    each) among those sent before the interrupt."""
    seqs = sorted({int(m) for m in re.findall(r"icmp_seq=(\d+)", text)})
    sent = re.search(r"(\d+) packets transmitted", text)
    sent = int(sent.group(1)) if sent else (seqs[-1] if seqs else 0)
    gaps = [b - a - 1 for a, b in zip(seqs, seqs[1:])]
    return {"pings_lost": sent - len(seqs), "ping_gap_ms": 10 * max(gaps, default=0)}


def table(rows):
    lines = ["| rep | failure | IKE owner | 50 MB arrived | duration s | longest stall s | TCP retransmits "
             "| 10 ms pings lost | longest ping gap ms | cluster_no_lease drops | new IKE_SA_INIT | same virtual IP |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append("| {} | {} | n{} | error: {} | | | | | | | | |".format(r["rep"], r["mode"], r["owner"], r["error"]))
            continue
        lines.append("| {} | {} | n{} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            r["rep"], "owner killed" if r["mode"] == "kill" else "none", r["owner"],
            "yes" if r["complete"] else "NO ({} B)".format(r["bytes"]), r["seconds"], r["longest_stall_s"],
            r["retransmits"], r["pings_lost"], r["ping_gap_ms"], r["no_lease"], r["new_ike_sa_init"],
            "yes" if r["vip_kept"] else "NO"))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--rate", default="100M", help="iperf3 -b (default 100M)")
    ap.add_argument("--kill-at", type=float, default=1.5, help="seconds into the transfer")
    ap.add_argument("--timeout", type=float, default=60.0, help="per transfer")
    ap.add_argument("--lease-len", type=int, default=65536,
                    help="[cluster] lease_len (default 65536, phalanxd's default and bench/cluster-failover.sh's)")
    ap.add_argument("--results", action="store_true", help="add the table to bench/RESULTS.md")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("rw-cluster-download: needs root (network namespaces)")
    rows = []
    for rep in range(1, args.reps + 1):
        for mode in ("none", "kill"):
            row = one_run(rep, mode, args)
            ike_rekey.log(json.dumps(row))
            rows.append(row)
    text = table(rows)
    print(text)
    if args.results:
        command = "bench/rw-cluster-download.py --reps {} --rate {} --kill-at {} --lease-len {}".format(
            args.reps, args.rate, args.kill_at, args.lease_len)
        extra = ["topology: tests/netns/cluster.py, 3 nodes, packet-rr; End-User strongSwan 5.9.8 "
                 "(kernel-libipsec) at gwB with a virtual IP from the cluster's pool; iperf3 -R -n 50M "
                 "-b {} from hostA; `owner killed`: the node running the End-User's IKE SA loses power "
                 "{} s into the transfer; lease_len {}".format(args.rate, args.kill_at, args.lease_len),
                 "machine shared with a fuzzing campaign at nice 19 (both cores)"]
        entry = "\n".join(ike_rekey.header_lines(command, extra)) + "\n" + text + "\n"
        ike_rekey.insert_entry("End-User download across a node failure",
                               "A 50 MB download through the cluster while the node serving the End-User "
                               "loses power (bench/rw-cluster-download.py).", entry)
    failed = [r for r in rows if "error" in r or not r.get("complete") or r.get("new_ike_sa_init")
              or not r.get("vip_kept")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
