#!/usr/bin/env bash
# The test suite: formatting and lints, unit/property/vector tests for every
# crate, a fuzz smoke pass, the interop tests against scapy, and the
# network-namespace integration tests (two phalanxd gateways; tshark and
# scapy on the wire; reload under traffic), which need root.
# Installs its own prerequisites (scripts/setup.sh, group netns).
set -euo pipefail
cd "$(dirname "$0")/.."
# Checked first: `cargo test` already runs privileged tests (bpf(2), packet
# sockets, namespaces, SCHED_FIFO) that fail without root, and the netns
# tests at the end need it too; better to say so now than after the build.
if [ "$(id -u)" -ne 0 ]; then
    echo "FAIL: scripts/test.sh needs root: cargo test runs privileged tests (bpf(2), packet sockets," \
         "network namespaces) and tests/netns needs network namespaces and TUN devices; run it as root" \
         "(e.g. sudo scripts/test.sh), as CI does" >&2
    exit 1
fi
# Each phase says how long it took, so a slow CI run shows where (CI must
# stay under 45 minutes).
phase_start=$SECONDS
phase() {
    echo "== $1 (previous phase $((SECONDS - phase_start)) s, $SECONDS s in all)"
    phase_start=$SECONDS
}

phase "setup"
PHALANX_SETUP_GROUPS=netns source scripts/setup.sh

# The builds the last phases need (phalanxd and phalanxctl in release for
# the netns tests, cargo-fuzz and its targets) run in the background beside
# the lints and unit tests: cargo locks each profile's directory apart, and
# on two cores one build alone leaves a core idle much of the time (a large
# crate compiling by itself, links). Their output shows if they fail.
background_log="$(mktemp)"
background=
stop_background() {
    # A failing phase ends the run: the background builds end with it.
    if [ -n "$background" ] && kill -0 "$background" 2>/dev/null; then
        pkill -TERM -P "$background" 2>/dev/null || true
        kill "$background" 2>/dev/null || true
    fi
    rm -f "$background_log"
}
trap stop_background EXIT
( cargo build --release -q -p phalanxd -p phalanxctl && scripts/fuzz-smoke.sh build ) >"$background_log" 2>&1 &
background=$!

phase "cargo fmt"
cargo fmt --all -- --check
phase "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
phase "cargo test"
cargo test --workspace
phase "interop: scapy"
/usr/bin/python3 -m pytest -q tests/interop
phase "waiting for the release and fuzz builds"
if ! wait "$background"; then
    echo "FAIL: the release build of phalanxd/phalanxctl or the fuzz targets' build failed:" >&2
    tail -n 200 "$background_log" >&2
    exit 1
fi
background=
phase "fuzz smoke"
scripts/fuzz-smoke.sh run
phase "netns: phalanxd gateways in network namespaces"
PHX_SKIP_BUILD=1 /usr/bin/python3 -m pytest -v -p no:cacheprovider --durations=25 tests/netns
phase done
