#!/usr/bin/env bash
# Cluster failover, reproducing the published ClusterIP/strongSwan HA
# experiment (handover 1.63 s) with a three-node Phalanx cluster and real
# Corosync in network namespaces (topology: tests/netns/cluster.py):
#
#   hostA -- [br-lan] -- n1 n2 n3 (virtual 10.1.0.1 / 192.0.2.1) -- [br-wan] -- gwB -- hostB
#                                  cluster link [br-cl]: Corosync knet + Phalanx heartbeats
#
# Per run: iperf3 TCP download hostB -> hostA (-R), a ping every 10 ms
# and fixed-rate UDP both ways; at 30 % of the run one node is killed
# (`kill -9` of its phalanxd and Corosync) or, separately, its three cables
# are cut at the switch. From a capture on the WAN bridge: handover = last
# ESP packet of the failed node (node id = explicit IV >> 48) -> first ESP
# packet a survivor sends from the takeover lease; duplicate (SPI, IV)
# and (SPI, seq) pairs in the whole capture (must be 0). Also: packets
# lost, and replays accepted when gwB's ESP captured before the failure
# is re-sent after it (must be 0). Each run starts a fresh cluster; the
# victim rotates n1, n2, n3 over the repetitions.
#
# Prints a markdown table ready for bench/RESULTS.md (also written to
# OUT/table.md with the raw OUT/results.json).
#
# Usage (root): bench/cluster-failover.sh [REPS]        default 1 (about 1 min per rep)
# Environment: FAILOVER_MODES ("kill cut"), FAILOVER_SECONDS (10),
# FAILOVER_UDP_RATE (500 pps), FAILOVER_LEASE_LEN (65536), FAILOVER_TCP_RATE (iperf3 -b, default
# unlimited), FAILOVER_SCHEME (packet-rr), FAILOVER_OUT (a new temp dir),
# PHX_SKIP_BUILD=1, PHX_BIN_DIR (default target/release, or
# $CARGO_TARGET_DIR/release when that is set).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "cluster-failover: needs root (network namespaces)" >&2
    exit 1
fi
REPS="${1:-1}"
if ! [[ "$REPS" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: bench/cluster-failover.sh [REPS]" >&2
    exit 2
fi
for tool in corosync corosync-quorumtool tcpdump iperf3 nsenter; do
    command -v "$tool" >/dev/null || { echo "cluster-failover: $tool is missing" >&2; exit 1; }
done

if [ -z "${PHX_BIN_DIR:-}" ] && [ -n "${CARGO_TARGET_DIR:-}" ]; then
    export PHX_BIN_DIR="$CARGO_TARGET_DIR/release"
fi
if [ "${PHX_SKIP_BUILD:-0}" != 1 ]; then
    echo "== cargo build --release -p phalanxd -p phalanxctl" >&2
    cargo build --release -q -p phalanxd -p phalanxctl
fi

# shellcheck disable=SC2206
MODES=(${FAILOVER_MODES:-kill cut})
args=(failover --reps "$REPS" --modes "${MODES[@]}" --seconds "${FAILOVER_SECONDS:-10}"
      --udp-rate "${FAILOVER_UDP_RATE:-500}" --scheme "${FAILOVER_SCHEME:-packet-rr}"
      --lease-len "${FAILOVER_LEASE_LEN:-65536}")
[ -n "${FAILOVER_TCP_RATE:-}" ] && args+=(--tcp-rate "$FAILOVER_TCP_RATE")
[ -n "${FAILOVER_OUT:-}" ] && args+=(--out "$FAILOVER_OUT")
# Every run is bounded: the namespaces, processes and captures of each run
# are removed by cluster.py itself (also on failure); the whole command is
# bounded by 150 s per run.
limit=$((REPS * ${#MODES[@]} * 150))
exec timeout -k 10 "$limit" /usr/bin/python3 tests/netns/cluster.py "${args[@]}"
