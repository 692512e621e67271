#!/usr/bin/env bash
# IKE rekeys under load, the long variant of
# tests/netns/test_ike_interop.py::test_rekey_under_load:
#
#   hostA --(iperf3 -u RATE, ICMP echo every 10 ms)--> gwA ==ESP/UDP==> gwB --> hostB
#            gwA: phalanxd, initiator; Child SA rekey every ~10 s, IKE SA every ~30 s
#            gwB: PEER (strongswan: charon + kernel-libipsec, or phalanx), responder
#
# Counts Child SA and IKE SA rekeys (distinct SPIs polled on gwA), lost pings
# and iperf3's lost datagrams; prints a table and adds a dated entry to
# bench/RESULTS.md (REKEY_NO_RESULTS=1: print only). Helper: bench/ike_rekey.py.
#
# Usage (root): bench/rekey-under-load.sh [PEER...]      default: strongswan phalanx
# Environment: REKEY_SECONDS (300), REKEY_RATE (50M), PHX_IKE_UNDER_TEST
# (phalanx | strongswan: what runs on gwA), PHX_SKIP_BUILD=1, PHX_BIN_DIR,
# PHX_OFFLOAD (on | off).
set -euo pipefail
cd "$(dirname "$0")/.."
PHALANX_SETUP_GROUPS=netns source scripts/setup.sh

if [ "$(id -u)" -ne 0 ]; then
    echo "rekey-under-load: needs root (network namespaces)" >&2
    exit 1
fi

SECONDS_PER_PEER="${REKEY_SECONDS:-300}"
RATE="${REKEY_RATE:-50M}"
PEERS=("$@")
[ "${#PEERS[@]}" -gt 0 ] || PEERS=(strongswan phalanx)
DUT="${PHX_IKE_UNDER_TEST:-phalanx}"
PEER_LIST="$(IFS=,; echo "${PEERS[*]}")"
COMMAND="bench/rekey-under-load.sh ${PEERS[*]} (REKEY_SECONDS=$SECONDS_PER_PEER REKEY_RATE=$RATE PHX_IKE_UNDER_TEST=$DUT PHX_OFFLOAD=${PHX_OFFLOAD:-on}${PHX_BIN_DIR:+ PHX_BIN_DIR=$PHX_BIN_DIR})"

if [[ "$DUT,$PEER_LIST" == *phalanx* ]] && [ "${PHX_SKIP_BUILD:-0}" != 1 ]; then
    echo "== cargo build --release -p phalanxd -p phalanxctl"
    cargo build --release -q -p phalanxd -p phalanxctl
fi

args=(under-load --seconds "$SECONDS_PER_PEER" --rate "$RATE" --peers "$PEER_LIST" --dut "$DUT" --command "$COMMAND")
[ "${REKEY_NO_RESULTS:-0}" = 1 ] && args+=(--no-results)
exec /usr/bin/python3 bench/ike_rekey.py "${args[@]}"
