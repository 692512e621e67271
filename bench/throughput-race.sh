#!/usr/bin/env bash
# Throughput race: iperf3 TCP hostA -> hostB through two gateways, in one run:
#   (1) plain    the gateways route without IPsec (kernel forwarding)
#   (2) phalanx  phalanxd on both gateways, AES-128-GCM, ESP in UDP (4500)
#   (3) strongswan  strongSwan 5.9 charon with kernel-libipsec (its userspace
#       ESP; always UDP-encapsulated) on both gateways, IKEv2 by strongSwan,
#       esp_proposals aes128gcm16 (no-ESN and ESN offered)
# Each: TCP with 1 and 4 streams (-P 4), RACE_SECONDS (10) each, RACE_RUNS (3)
# runs each; then UDP with 64-byte payloads at full rate (iperf3 -u -l 64
# -b 0, RACE_PPS_SECONDS) for packets per second; and CPU per Gbit: CPU time
# of the gateway processes (phalanxd / charon, utime+stime from
# /proc/PID/stat), softirq and total busy time (from /proc/stat, whole
# machine, iperf3 included) over each TCP run, divided by Gbit received.
#
# Topology and offloads: tests/netns/lib.sh (veth offloads ON unless
# PHX_OFFLOAD=off). Prints a table and appends a dated entry to
# bench/RESULTS.md (RACE_NO_RESULTS=1: print only).
#
# Usage (root): bench/throughput-race.sh [plain] [phalanx] [strongswan]
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$(pwd)"
PHALANX_SETUP_GROUPS=netns source scripts/setup.sh
source tests/netns/lib.sh

if [ "$(id -u)" -ne 0 ]; then
    echo "throughput-race: needs root (network namespaces)" >&2
    exit 1
fi

SECONDS_PER_RUN="${RACE_SECONDS:-10}"
RUNS="${RACE_RUNS:-3}"
PPS_SECONDS="${RACE_PPS_SECONDS:-5}"
VARIANTS=("$@")
[ "${#VARIANTS[@]}" -gt 0 ] || VARIANTS=(plain phalanx strongswan)
COMMAND="bench/throughput-race.sh${*:+ $*} (RACE_SECONDS=$SECONDS_PER_RUN RACE_RUNS=$RUNS PHX_OFFLOAD=${PHX_OFFLOAD:-on})"

if [[ " ${VARIANTS[*]} " == *" phalanx "* ]] && [ "${PHX_SKIP_BUILD:-0}" != 1 ]; then
    echo "== cargo build --release -p phalanxd -p phalanxctl"
    cargo build --release -q -p phalanxd -p phalanxctl
fi

phx_init "phxrace$$"
phx_trap_cleanup
phx_topology_up
OFFLOADS="$(phx_offload_summary)"
RECORDS="$PHX_RUN_DIR/records.tsv"
: >"$RECORDS"
CLK_TCK="$(getconf CLK_TCK)"

# cpu_of PIDS...: utime+stime ticks summed over the processes (all threads).
cpu_of() {
    local total=0 pid stat rest
    for pid in "$@"; do
        stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || continue
        rest="${stat##*) }"
        # shellcheck disable=SC2086
        set -- $rest
        # after "pid (comm) ": field 3 is state, 14/15 are utime/stime -> $12 $13
        total=$((total + ${12} + ${13}))
    done
    echo "$total"
}

# machine_cpu: "softirq busy" ticks from /proc/stat (all CPUs).
machine_cpu() {
    awk '/^cpu / { busy = $2 + $3 + $4 + $7 + $8 + $9; print $8, busy }' /proc/stat
}

# measure VARIANT PIDS...: TCP 1 and 4 streams x RUNS, then UDP 64-byte pps.
measure() {
    local variant="$1"
    shift
    local pids=("$@") streams run json c0 c1 m0 m1 si0 si1 b0 b1
    echo "== $variant: warm-up"
    run_iperf "$NS_HOSTA" "$PHX_HOSTB_V4" 2 >/dev/null
    for streams in 1 4; do
        for ((run = 1; run <= RUNS; run++)); do
            c0="$(cpu_of "${pids[@]}")"
            read -r si0 b0 < <(machine_cpu)
            json="$(run_iperf "$NS_HOSTA" "$PHX_HOSTB_V4" "$SECONDS_PER_RUN" -P "$streams")"
            c1="$(cpu_of "${pids[@]}")"
            read -r si1 b1 < <(machine_cpu)
            echo "$json" >"$PHX_RUN_DIR/$variant-tcp-P$streams-$run.json"
            printf '%s\ttcp\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$variant" "$streams" "$run" \
                "$PHX_RUN_DIR/$variant-tcp-P$streams-$run.json" \
                "$(((c1 - c0)))" "$((si1 - si0))" "$((b1 - b0))" "$CLK_TCK" >>"$RECORDS"
            python3 - "$PHX_RUN_DIR/$variant-tcp-P$streams-$run.json" "$variant" "$streams" "$run" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
if "error" in d:
    sys.exit("iperf3: " + d["error"])
print("   {} -P {} run {}: {:.2f} Gbit/s".format(sys.argv[2], sys.argv[3], sys.argv[4],
      d["end"]["sum_received"]["bits_per_second"] / 1e9))
EOF
        done
    done
    c0="$(cpu_of "${pids[@]}")"
    read -r si0 b0 < <(machine_cpu)
    json="$(run_iperf "$NS_HOSTA" "$PHX_HOSTB_V4" "$PPS_SECONDS" -u -l 64 -b 0)"
    c1="$(cpu_of "${pids[@]}")"
    read -r si1 b1 < <(machine_cpu)
    echo "$json" >"$PHX_RUN_DIR/$variant-udp64.json"
    printf '%s\tudp64\t1\t1\t%s\t%s\t%s\t%s\t%s\n' "$variant" "$PHX_RUN_DIR/$variant-udp64.json" \
        "$((c1 - c0))" "$((si1 - si0))" "$((b1 - b0))" "$CLK_TCK" >>"$RECORDS"
}

variant_plain() {
    phx_routes_plain
    wait_ping "$NS_HOSTA" "$PHX_HOSTB_V4" 10 || { phx_log "plain: no ping"; return 1; }
    measure plain
    phx_routes_del "$NS_GWA"
    phx_routes_del "$NS_GWB"
}

variant_phalanx() {
    /usr/bin/python3 tests/netns/phxnet.py configs --alg aes128gcm16 --encap udp --run-dir "$PHX_RUN_DIR"
    start_phalanxd "$NS_GWA" "$PHX_RUN_DIR/gwA.toml" phalanxd-gwA >/dev/null
    start_phalanxd "$NS_GWB" "$PHX_RUN_DIR/gwB.toml" phalanxd-gwB >/dev/null
    wait_for_tun "$NS_GWA" phx0 15
    wait_for_tun "$NS_GWB" phx0 15
    phx_routes_via_dev "$NS_GWA" phx0
    phx_routes_via_dev "$NS_GWB" phx0
    if ! wait_ping "$NS_HOSTA" "$PHX_HOSTB_V4" 10; then
        phx_log "phalanx: no ping through the tunnel"
        tail -20 "$PHX_RUN_DIR/phalanxd-gwA.log" "$PHX_RUN_DIR/phalanxd-gwB.log" >&2
        return 1
    fi
    measure phalanx "$(phx_pid phalanxd-gwA)" "$(phx_pid phalanxd-gwB)"
    "$(phx_bin phalanxctl)" --socket "$PHX_RUN_DIR/gwA.sock" sas >"$PHX_RUN_DIR/phalanx-sas-gwA.txt" 2>&1 || true
    phx_stop phalanxd-gwA
    phx_stop phalanxd-gwB
    phx_routes_del "$NS_GWA"
    phx_routes_del "$NS_GWB"
}

variant_strongswan() {
    start_charon "$NS_GWA" charon-gwA
    start_charon "$NS_GWB" charon-gwB
    swanctl_in charon-gwA --initiate --child net --timeout 20 >"$PHX_RUN_DIR/charon-initiate.log" 2>&1 || {
        phx_log "strongswan: initiate failed"
        tail -30 "$PHX_RUN_DIR/charon-initiate.log" >&2
        return 1
    }
    grep -o 'selected proposal: ESP:[^ ]*' "$PHX_RUN_DIR/charon-initiate.log" || true
    if ! wait_ping "$NS_HOSTA" "$PHX_HOSTB_V4" 10; then
        phx_log "strongswan: no ping through the tunnel"
        return 1
    fi
    measure strongswan "$(phx_pid charon-gwA)" "$(phx_pid charon-gwB)"
    phx_stop charon-gwA
    phx_stop charon-gwB
}

for v in "${VARIANTS[@]}"; do
    case "$v" in
        plain | phalanx | strongswan) "variant_$v" ;;
        *) echo "unknown variant $v (plain, phalanx, strongswan)" >&2; exit 2 ;;
    esac
done

MACHINE="$(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), kernel $(uname -r)"
REV="$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "$REPO" status --porcelain 2>/dev/null | head -1)" ]; then REV="$REV+dirty"; fi
python3 - "$RECORDS" "$(date -u +%Y-%m-%d)" "$REV" "$MACHINE" "$OFFLOADS" "$COMMAND" \
    "${RACE_NO_RESULTS:-0}" "$REPO/bench/RESULTS.md" "$PPS_SECONDS" <<'EOF'
import json, statistics, sys
records, date, rev, machine, offloads, command, no_results, results_md, udp_seconds = sys.argv[1:]
tcp, udp = {}, {}
for line in open(records):
    variant, kind, streams, run, path, proc, softirq, busy, hz = line.rstrip("\n").split("\t")
    d = json.load(open(path))
    hz = float(hz)
    cpu = (int(proc) / hz, int(softirq) / hz, int(busy) / hz)
    if kind == "tcp":
        s = d["end"]["sum_received"]
        gbit = s["bytes"] * 8 / 1e9
        retr = d["end"]["sum_sent"].get("retransmits", 0)
        tcp.setdefault((variant, int(streams)), []).append((s["bits_per_second"] / 1e9, gbit, cpu, retr))
    else:
        s = d["end"]["sum"]
        received = s["packets"] - s["lost_packets"]
        udp[variant] = (received / s["seconds"], s["packets"] / s["seconds"], cpu)

variants = [v for v in ("plain", "phalanx", "strongswan") if (v, 1) in tcp]
def mean(v, p):
    return statistics.mean(r[0] for r in tcp[(v, p)])
lines = []
lines.append("| variant | TCP 1 stream Gbit/s (runs) | TCP 4 streams Gbit/s (runs) | TCP retransmits/run "
             "| UDP 64 B received pps (sent) | gateway CPU-s/Gbit | softirq CPU-s/Gbit | machine busy CPU-s/Gbit |")
lines.append("|---|---|---|---|---|---|---|---|")
for v in variants:
    cells = [v]
    for p in (1, 4):
        runs = tcp[(v, p)]
        cells.append("**{:.2f}** ({})".format(mean(v, p), ", ".join("{:.2f}".format(r[0]) for r in runs)))
    cells.append(" / ".join("{:.0f}".format(statistics.mean(r[3] for r in tcp[(v, p)])) for p in (1, 4)))
    if v in udp:
        cells.append("{:,.0f} ({:,.0f})".format(udp[v][0], udp[v][1]))
    else:
        cells.append("-")
    all_runs = tcp[(v, 1)] + tcp[(v, 4)]
    gbit = sum(r[1] for r in all_runs)
    for i in range(3):
        cells.append("{:.2f}".format(sum(r[2][i] for r in all_runs) / gbit) if gbit else "-")
    lines.append("| " + " | ".join(cells) + " |")
ratios = []
if "phalanx" in variants and "strongswan" in variants:
    for p in (1, 4):
        ratios.append("Phalanx / strongSwan, {} stream{}: {:.1f}x (target >= 5x)".format(
            p, "s" if p > 1 else "", mean("phalanx", p) / mean("strongswan", p)))
if "phalanx" in variants and "plain" in variants:
    for p in (1, 4):
        ratios.append("Phalanx / plain forwarding, {} stream{}: {:.2f}{}".format(
            p, "s" if p > 1 else "", mean("phalanx", p) / mean("plain", p),
            " (target >= 0.3)" if p == 1 else ""))
table = "\n".join(lines)
print()
print(table)
print()
for r in ratios:
    print(r)
if no_results != "1":
    entry = ["", "### {} — {}".format(date, rev), "",
             "- machine: {}".format(machine),
             "- {}; gateway TUN MTU 1400 (phx0 / strongSwan ipsec0)".format(offloads),
             "- command: `{}`".format(command),
             "- CPU-s/Gbit: summed over all TCP runs; gateway = utime+stime of phalanxd/charon on both gateways; "
             "softirq and machine busy from /proc/stat (whole machine, iperf3 included)",
             "- TCP retransmits/run: iperf3 sender retransmits, mean per run, 1 stream / 4 streams; "
             "UDP: iperf3 -u -l 64 -b 0 (64-byte payload), {} s, pps received by hostB (sent)".format(
                 udp_seconds),
             "", table, ""]
    entry += ["- " + r for r in ratios]
    import os
    header = ""
    if not os.path.exists(results_md) or "## Throughput race" not in open(results_md).read():
        header = ("\n## Throughput race (bench/throughput-race.sh)\n\n"
                  "iperf3 TCP hostA -> hostB through two gateways in network namespaces, 10 s per run, "
                  "3 runs each, 1 and 4 streams; plain forwarding vs Phalanx AES-128-GCM (ESP in UDP) vs "
                  "strongSwan 5.9 kernel-libipsec AES-128-GCM. Newest entry last.\n")
    with open(results_md, "a") as f:
        f.write(header + "\n".join(entry) + "\n")
    print("\nappended to bench/RESULTS.md")
EOF
