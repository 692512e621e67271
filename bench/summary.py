#!/usr/bin/env python3
"""Summarises the criterion results of the data-plane benchmarks.

Reads target/criterion/<group>/<function>/<parameter>/new/{estimates,benchmark}.json
written by `cargo bench -p phalanx-esp --bench esp` and
`cargo bench -p phalanx-sa --bench spd`, and prints:
  * ESP throughput as a ratio to the bare aws-lc-rs AEAD call on the same
    buffers in the same run (higher is better, 1.0 = no protocol overhead);
  * SPD lookups per second, classifier (cold) and flow cache (warm).
"""
import json
import pathlib
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")


def result(group, function, param):
    base = ROOT / group / function / str(param) / "new"
    try:
        est = json.loads((base / "estimates.json").read_text())
        meta = json.loads((base / "benchmark.json").read_text())
    except FileNotFoundError:
        return None
    ns = est["median"]["point_estimate"]
    throughput = meta.get("throughput") or {}
    return ns, throughput


def params(group, function):
    d = ROOT / group / function
    if not d.is_dir():
        return []
    found = [p.name for p in d.iterdir() if (p / "new").is_dir()]
    return sorted(found, key=lambda s: (len(s), s))


def esp_table():
    rows = []
    for direction in ("encrypt", "decrypt"):
        for size in params(direction, "esp"):
            esp = result(direction, "esp", size)
            bare = result(direction, "bare", size)
            if not esp or not bare:
                continue
            nbytes = esp[1].get("Bytes") or int(size)
            gbps = lambda ns: nbytes * 8 / ns  # bits per ns = Gbit/s
            rows.append((direction, int(size), gbps(esp[0]), gbps(bare[0]), bare[0] / esp[0]))
    if not rows:
        return False
    print("ESP AES-128-GCM, one core, tunnel mode IPv4 (ratio = Phalanx ESP / bare aws-lc-rs AEAD)")
    print(f"{'direction':<10}{'bytes':>7}{'ESP Gbit/s':>12}{'bare Gbit/s':>13}{'ratio':>8}")
    for d, size, e, b, r in rows:
        print(f"{d:<10}{size:>7}{e:>12.2f}{b:>13.2f}{r:>8.2f}")
    return True


def spd_table():
    rows = []
    for kind in ("cold_classifier", "warm_flow_cache"):
        for n in params("spd_lookup", kind):
            res = result("spd_lookup", kind, n)
            if not res:
                continue
            elements = res[1].get("Elements", 1)
            rows.append((kind, int(n), elements / res[0] * 1e3))  # per ns -> M/s
    if not rows:
        return False
    print("SPD lookups, one core, random 5-tuples (million lookups per second)")
    print(f"{'path':<18}{'policies':>10}{'M lookups/s':>14}")
    for kind, n, mps in rows:
        print(f"{kind:<18}{n:>10}{mps:>14.2f}")
    return True


if __name__ == "__main__":
    ok_esp = esp_table()
    print()
    ok_spd = spd_table()
    if not (ok_esp and ok_spd):
        sys.exit("summary: criterion results missing; run the benchmarks first")
