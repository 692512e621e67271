#!/usr/bin/env bash
# Soak: two phalanxd gateways over IKEv2, Child SAs rekeyed every ~10 s and
# the IKE SA every ~30 s, fixed-rate UDP and a 10 ms ping, for an hour by
# default; samples each phalanxd's RSS, descriptors, threads, SAs,
# policies and IKE SAs every 30 s and fails on RSS growth of 1 % or more
# after the warm-up, or on anything that accumulates (bench/soak.py).
# Adds a dated entry to bench/RESULTS.md (SOAK_NO_RESULTS=1: print only).
#
# Usage (root): bench/soak.sh
# Environment: SOAK_SECONDS (3600), SOAK_WARMUP (600), SOAK_RATE (20M),
# PHX_SKIP_BUILD=1, PHX_BIN_DIR, SOAK_OUT (the samples, series.json;
# default bench/out/soak-<time>).
set -euo pipefail
cd "$(dirname "$0")/.."
PHALANX_SETUP_GROUPS=netns source scripts/setup.sh
if [ "$(id -u)" -ne 0 ]; then
    echo "soak: needs root (network namespaces)" >&2
    exit 1
fi
seconds="${SOAK_SECONDS:-3600}"
warmup="${SOAK_WARMUP:-600}"
rate="${SOAK_RATE:-20M}"
if [ "${PHX_SKIP_BUILD:-0}" != 1 ]; then
    cargo build --release -q -p phalanxd -p phalanxctl
fi
command="bench/soak.sh (SOAK_SECONDS=$seconds SOAK_WARMUP=$warmup SOAK_RATE=$rate)"
out="${SOAK_OUT:-bench/out/soak-$(date -u +%Y%m%dT%H%M%SZ)}"
args=(--seconds "$seconds" --warmup "$warmup" --rate "$rate" --command "$command" --out "$out")
[ "${SOAK_NO_RESULTS:-0}" = 1 ] || args+=(--results)
exec /usr/bin/python3 bench/soak.py "${args[@]}"
