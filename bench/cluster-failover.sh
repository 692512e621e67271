#!/usr/bin/env bash
# Cluster failover, reproducing the published ClusterIP/strongSwan HA
# experiment (handover 1.63 s) with a three-node Phalanx cluster and real
# Corosync in network namespaces (topology: tests/netns/cluster.py):
#
#   hostA -- [br-lan] -- n1 n2 n3 (virtual 10.1.0.1 / 192.0.2.1) -- [br-wan] -- gwB -- hostB
#                                  cluster link [br-cl]: Corosync knet + Phalanx heartbeats
#
# Per run: iperf3 TCP download hostB -> hostA (-R), a ping every 10 ms
# and fixed-rate UDP both ways; at 30 % of the run one node loses power
# (mode `kill`: its Corosync and phalanxd frozen with SIGSTOP at the same
# instant and its three cables cut in one step, so nothing leaves it: no
# clean Corosync/CPG departure, no ICMP from a kernel whose sockets
# closed), or, separately, its three cables are cut at the switch while it
# runs on (`cut`), or (`stop`, not in the default) its phalanxd and
# Corosync are stopped cleanly. From a capture on the WAN bridge: handover = last
# ESP packet of the failed node (node id = explicit IV >> 48) -> first ESP
# packet a survivor sends from the takeover lease; duplicate (SPI, IV)
# and (SPI, seq) pairs in the whole capture (must be 0). Also: packets
# lost, and what became of gwB's ESP of the last 50 ms before the failure
# re-sent as soon as the survivors took over (inside the replay window:
# refused as replayed; accepted must be 0). Each run starts a fresh cluster; the
# victim rotates n1, n2, n3 over the repetitions.
#
# FAILOVER_PEER=strongswan: gwB runs strongSwan (charon, kernel-libipsec)
# instead of a host-mode phalanxd, and the tunnel comes from IKEv2
# (strongSwan initiates; one node runs the IKE SA, the others hold it
# replicated; tests/netns/cluster_ike.py). The victim: for `cut` the IKE
# owner, for `kill` the IKE owner in odd repetitions and a node that does
# not run the IKE SA in even ones. Per run also: the IKE takeover time
# (the successor's log), the IKE SPIs in `swanctl --list-sas` before and
# after, IKE_SA_INIT after the start (charon's log and the capture: must
# be 0), and after the traffic a Child SA rekey (`swanctl --rekey
# --child`), a ping over the new Child SA and a strongSwan DPD, with the
# node that answered each from the capture (nodes send from their own MAC).
#
# Prints a markdown table ready for bench/RESULTS.md (also written to
# OUT/table.md with the raw OUT/results.json).
#
# Usage (root): bench/cluster-failover.sh [REPS]        default 1 (about 1 min per rep)
# Environment: FAILOVER_MODES ("kill cut"; "stop" too), FAILOVER_SECONDS (10),
# FAILOVER_UDP_RATE (500 pps), FAILOVER_LEASE_LEN (65536), FAILOVER_TCP_RATE (iperf3 -b, default
# unlimited), FAILOVER_SCHEME (packet-rr), FAILOVER_OUT (a new temp dir),
# FAILOVER_PEER (phalanx: host-mode phalanxd with static SAs; strongswan),
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
PEER="${FAILOVER_PEER:-phalanx}"
tools=(corosync corosync-quorumtool tcpdump iperf3 nsenter)
case "$PEER" in
    phalanx) ;;
    strongswan) tools+=(swanctl /usr/lib/ipsec/charon) ;;
    *) echo "cluster-failover: FAILOVER_PEER must be phalanx or strongswan, not $PEER" >&2; exit 2 ;;
esac
for tool in "${tools[@]}"; do
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
      --lease-len "${FAILOVER_LEASE_LEN:-65536}" --peer "$PEER")
[ -n "${FAILOVER_TCP_RATE:-}" ] && args+=(--tcp-rate "$FAILOVER_TCP_RATE")
[ -n "${FAILOVER_OUT:-}" ] && args+=(--out "$FAILOVER_OUT")
# Every run is bounded: the namespaces, processes and captures of each run
# are removed by cluster.py itself (also on failure); the whole command is
# bounded by 150 s per run (210 s with strongSwan: the rekey and DPD
# checks after the traffic).
per_run=150
[ "$PEER" = strongswan ] && per_run=210
limit=$((REPS * ${#MODES[@]} * per_run))
exec timeout -k 10 "$limit" /usr/bin/python3 tests/netns/cluster.py "${args[@]}"
