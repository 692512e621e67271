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

phase "cargo fmt"
cargo fmt --all -- --check
phase "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
phase "cargo test"
cargo test --workspace
phase "fuzz smoke"
scripts/fuzz-smoke.sh
phase "interop: scapy"
/usr/bin/python3 -m pytest -q tests/interop
phase "netns: phalanxd gateways in network namespaces"
/usr/bin/python3 -m pytest -v -p no:cacheprovider --durations=25 tests/netns
phase done
