#!/usr/bin/env bash
# IKE SA and Child SA rekeys on slow links:
#
#   hostA --(iperf3 TCP bulk)--> gwA ==[tbf RATE]== WAN ==[tbf RATE]== gwB --> hostB
#                                gwA: initiator (PHX_IKE_UNDER_TEST, default phalanx),
#                                     Child SA rekey every ~20 s, IKE SA every ~45 s
#                                gwB: responder (SLOW_PEER, default strongswan)
#
# For each rate (Mbit/s) tc tbf shapes the WAN in both gateway namespaces
# (burst 16 KiB, SLOW_LIMIT bytes of queue) while iperf3 TCP runs
# hostA -> hostB; every rekey gwA initiates is timed (request sent ->
# response processed: charon's log for strongSwan, phalanxctl counters for
# phalanxd) and packets dropped for lack of an SA are counted (phalanxd
# no_outbound_sa / unknown_spi; charon's log lines). Prints a table and
# adds a dated entry to bench/RESULTS.md (SLOW_NO_RESULTS=1: print only).
# SLOW_SHAPE=ingress (default): the tbf sits on an ifb device fed from
# wan0's ingress, so the queue fills like a slow router's; SLOW_SHAPE=egress:
# on wan0's egress, where the sending daemon's UDP socket buffer bounds the
# qdisc's backlog (the backlog builds in the gateway's TUN queue, which IKE
# messages bypass).
# Reference (published): IKE SA rekeying took 5.3 s at 1.5 Mbit/s and
# 1.45 s at >= 6 Mbit/s, 10 packets dropped. Helper: bench/ike_rekey.py.
#
# Usage (root): bench/rekey-slow-links.sh [RATE...]      default: 1.5 4 6 8 10
# Environment: SLOW_SECONDS (120 per rate), SLOW_LIMIT (1000000), SLOW_CHILD_REKEY
# (20s), SLOW_IKE_REKEY (45s), SLOW_PEER (strongswan | phalanx), SLOW_SHAPE,
# SLOW_CC (TCP congestion control of the bulk flow, default cubic: this
# machine's default BBR keeps queues short), PHX_IKE_UNDER_TEST,
# PHX_SKIP_BUILD=1, PHX_BIN_DIR, PHX_OFFLOAD.
set -euo pipefail
cd "$(dirname "$0")/.."
PHALANX_SETUP_GROUPS=netns source scripts/setup.sh

if [ "$(id -u)" -ne 0 ]; then
    echo "rekey-slow-links: needs root (network namespaces)" >&2
    exit 1
fi

RATES=("$@")
[ "${#RATES[@]}" -gt 0 ] || RATES=(1.5 4 6 8 10)
DUT="${PHX_IKE_UNDER_TEST:-phalanx}"
PEER="${SLOW_PEER:-strongswan}"
SECS="${SLOW_SECONDS:-120}"
LIMIT="${SLOW_LIMIT:-1000000}"
CHILD="${SLOW_CHILD_REKEY:-20s}"
IKE="${SLOW_IKE_REKEY:-45s}"
SHAPE="${SLOW_SHAPE:-ingress}"
CC="${SLOW_CC:-cubic}"
RATE_LIST="$(IFS=,; echo "${RATES[*]}")"
COMMAND="bench/rekey-slow-links.sh ${RATES[*]} (SLOW_SECONDS=$SECS SLOW_LIMIT=$LIMIT SLOW_CHILD_REKEY=$CHILD SLOW_IKE_REKEY=$IKE SLOW_PEER=$PEER SLOW_SHAPE=$SHAPE SLOW_CC=$CC PHX_IKE_UNDER_TEST=$DUT PHX_OFFLOAD=${PHX_OFFLOAD:-on}${PHX_BIN_DIR:+ PHX_BIN_DIR=$PHX_BIN_DIR})"

if [[ "$DUT,$PEER" == *phalanx* ]] && [ "${PHX_SKIP_BUILD:-0}" != 1 ]; then
    echo "== cargo build --release -p phalanxd -p phalanxctl"
    cargo build --release -q -p phalanxd -p phalanxctl
fi

args=(slow-links --rates "$RATE_LIST" --seconds "$SECS" --limit "$LIMIT" --child-rekey "$CHILD"
    --ike-rekey "$IKE" --shape "$SHAPE" --cc "$CC" --peer "$PEER" --dut "$DUT" --command "$COMMAND")
[ "${SLOW_NO_RESULTS:-0}" = 1 ] && args+=(--no-results)
exec /usr/bin/python3 bench/ike_rekey.py "${args[@]}"
