#!/usr/bin/env python3
"""Soak: two phalanxd gateways over IKEv2 for a long time under rekeys and
traffic, watching for anything that accumulates.

    hostA --(iperf3 -u RATE, ICMP echo every 10 ms)--> gwA ==ESP/UDP==> gwB --> hostB
             gwA: initiator, Child SA rekey every ~10 s, IKE SA every ~30 s

Every --sample seconds, for both phalanxd processes: resident memory
(VmRSS), open descriptors, threads, installed SAs, policies and IKE SAs.
After --warmup seconds the run must show, per process:

* RSS growth below --max-growth percent from the first sample after the
  warm-up to the last (and the trend: the least-squares slope in KiB per
  hour over the samples after the warm-up, to tell "levels off" from
  "leaks");
* no descriptor, SA, policy or IKE SA accumulation: the counts after the
  warm-up stay within the range a rekey passes through (old and new SAs
  overlap for a moment).

Prints a table and a verdict; exits 1 when a check fails. With
--results, inserts a dated entry into bench/RESULTS.md (section "Soak").
Called by bench/soak.sh (one hour by default) and, at a small scale, by
tests/netns/test_soak.py.
"""

import argparse
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "netns"))
sys.path.insert(0, HERE)

import ike_rekey  # noqa: E402
import phxnet  # noqa: E402
import rekeyload  # noqa: E402


def proc_sample(pid):
    """(rss KiB, file-backed rss KiB, descriptors, threads) of a live
    process. The file-backed part is the binary's and libraries' pages:
    it grows as code runs for the first time (a rekey's, a DPD's), which
    is no leak."""
    rss = rss_file = threads = 0
    with open("/proc/{}/status".format(pid)) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("RssFile:"):
                rss_file = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    fds = len(os.listdir("/proc/{}/fd".format(pid)))
    return rss, rss_file, fds, threads


def memory_sample(pid):
    """Resident KiB of the process's [heap] (the main malloc arena) and of
    its other anonymous mappings (the other threads' malloc arenas and
    large allocations; stacks excluded), from /proc/PID/smaps: where RSS
    growth sits."""
    heap = anon = 0
    kind = None
    with open("/proc/{}/smaps".format(pid)) as f:
        for line in f:
            fields = line.split()
            if fields and "-" in fields[0] and not fields[0].endswith(":"):
                name = fields[5] if len(fields) > 5 else ""
                kind = "heap" if name == "[heap]" else ("anon" if name == "" else None)
            elif fields and fields[0] == "Rss:" and kind is not None:
                if kind == "heap":
                    heap += int(fields[1])
                else:
                    anon += int(fields[1])
    return heap, anon


def gateway_sample(g):
    """One sample of a PhalanxIke gateway."""
    rss, rss_file, fds, threads = proc_sample(g.gateway.proc.pid)
    heap, anon = memory_sample(g.gateway.proc.pid)
    return {
        "rss_kib": rss, "file_kib": rss_file, "heap_kib": heap, "anon_kib": anon, "fds": fds, "threads": threads,
        "sas": len(g.gateway.ctl("sas")), "policies": len(g.gateway.ctl("policies")),
        "ike_sas": len(g.gateway.ctl("ike")),
    }


class Sampler(threading.Thread):
    def __init__(self, gateways, every):
        super().__init__(daemon=True)
        self.gateways, self.every = gateways, every
        self.samples = []          # (seconds since start, {gw: sample})
        self.errors = []
        self.stop_event = threading.Event()
        self.t0 = time.monotonic()

    def run(self):
        while not self.stop_event.is_set():
            try:
                self.samples.append((time.monotonic() - self.t0,
                                     {g.gw: gateway_sample(g) for g in self.gateways}))
            except (OSError, RuntimeError, ValueError) as e:
                self.errors.append(str(e))
            self.stop_event.wait(self.every)

    def finish(self):
        self.stop_event.set()
        self.join(timeout=30)


def slope_per_hour(points):
    """Least-squares slope of (t seconds, value) in value per hour."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    if den == 0:
        return 0.0
    return sum((t - mt) * (v - mv) for t, v in points) / den * 3600


def verdict(samples, warmup, max_growth):
    """Per gateway: the figures and the failed checks."""
    out = {}
    after = [(t, s) for t, s in samples if t >= warmup]
    if len(after) < 2:
        return {"all": {"failures": ["fewer than 2 samples after the warm-up ({} in all)".format(len(samples))]}}
    for gw in after[0][1]:
        series = {k: [(t, s[gw][k]) for t, s in after] for k in after[0][1][gw]}
        rss = series["rss_kib"]
        growth = (rss[-1][1] - rss[0][1]) * 100.0 / rss[0][1]
        half = len(rss) // 2
        fig = {
            "rss_first_kib": rss[0][1], "rss_last_kib": rss[-1][1], "rss_max_kib": max(v for _, v in rss),
            "rss_growth_percent": round(growth, 2), "rss_slope_kib_per_hour": round(slope_per_hour(rss), 1),
            # Levelling off: the slope of each half of the run after the
            # warm-up (a leak keeps its slope; fragmentation flattens).
            "rss_slope_halves": [round(slope_per_hour(rss[:half + 1]), 1), round(slope_per_hour(rss[half:]), 1)],
            "heap_kib": "{} → {}".format(series["heap_kib"][0][1], series["heap_kib"][-1][1]),
            "file_kib": "{} → {}".format(series["file_kib"][0][1], series["file_kib"][-1][1]),
            "anon_kib": "{} → {}".format(series["anon_kib"][0][1], series["anon_kib"][-1][1]),
        }
        failures = []
        if growth >= max_growth:
            failures.append("RSS grew {:.2f} % (limit {} %)".format(growth, max_growth))
        for k in ("fds", "threads", "sas", "policies", "ike_sas"):
            values = [v for _, v in series[k]]
            fig[k] = "{}..{}".format(min(values), max(values))
            # A rekey overlaps old and new SAs for a moment: a count may
            # rise by what one rekey adds; a trend upwards is accumulation.
            first_half = values[: len(values) // 2] or values
            second_half = values[len(values) // 2:]
            if max(second_half) > max(first_half) + (2 if k in ("sas", "policies", "ike_sas") else 0):
                failures.append("{} accumulate: {} in the first half, up to {} in the second".format(
                    k, max(first_half), max(second_half)))
        fig["failures"] = failures
        out[gw] = fig
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--warmup", type=int, default=600)
    ap.add_argument("--sample", type=int, default=30)
    ap.add_argument("--rate", default="20M")
    ap.add_argument("--max-growth", type=float, default=1.0)
    ap.add_argument("--results", action="store_true", help="add an entry to bench/RESULTS.md")
    ap.add_argument("--command", default="bench/soak.py")
    ap.add_argument("--out", default=None, help="write the samples here (series.json)")
    args = ap.parse_args()
    topo = phxnet.Topology(prefix="phxsoak{}".format(os.getpid()))
    topo.up()
    try:
        dut, peer = ike_rekey.make_pair(topo, "phalanx", "phalanx")
        sampler = Sampler([dut, peer], args.sample)
        sampler.start()
        load = rekeyload.run(topo, dut, peer, args.seconds, rate=args.rate)
        sampler.finish()
        result = verdict(sampler.samples, args.warmup, args.max_growth)
    finally:
        topo.down()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "series.json"), "w") as f:
            json.dump(sampler.samples, f)
    print(rekeyload.summary(load))
    for gw, fig in sorted(result.items()):
        print("{}: {}".format(gw, fig))
    if sampler.errors:
        print("sampling errors: {}".format(sampler.errors[:5]))
    failed = [(gw, f) for gw, fig in result.items() for f in fig["failures"]]
    failed += [("traffic", "{} pings lost".format(load["ping_lost"]))] if load["ping_lost"] else []
    print("soak: {}".format("FAILED " + repr(failed) if failed else "passed"))
    if args.results:
        extra = ["{} s, warm-up {} s, a sample every {} s; {}".format(
            args.seconds, args.warmup, args.sample, rekeyload.summary(load))]
        lines = ike_rekey.header_lines(args.command, extra)
        lines += ["| gateway | RSS after warm-up → end (KiB) | growth | slope KiB/h (1st half, 2nd half) | "
                  "[heap] KiB | other anonymous KiB | file-backed KiB | fds | threads | SAs | policies | IKE SAs |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for gw, fig in sorted(result.items()):
            if "rss_first_kib" in fig:
                lines.append("| {} | {} → {} | {} % | {} ({}, {}) | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                    gw, fig["rss_first_kib"], fig["rss_last_kib"], fig["rss_growth_percent"],
                    fig["rss_slope_kib_per_hour"], fig["rss_slope_halves"][0], fig["rss_slope_halves"][1],
                    fig["heap_kib"], fig["anon_kib"], fig["file_kib"], fig["fds"], fig["threads"], fig["sas"], fig["policies"],
                    fig["ike_sas"]))
        lines.append("")
        lines.append("Verdict: " + ("FAILED: " + "; ".join("{} {}".format(g, f) for g, f in failed) if failed else "passed"))
        ike_rekey.insert_entry("Soak", "Long runs of two phalanxd gateways under rekeys and traffic "
                               "(bench/soak.sh): memory, descriptors, SAs over time.", "\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
