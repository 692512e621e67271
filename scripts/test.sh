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
PHALANX_SETUP_GROUPS=netns source scripts/setup.sh

echo "== cargo fmt"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace
echo "== fuzz smoke"
scripts/fuzz-smoke.sh
echo "== interop: scapy"
/usr/bin/python3 -m pytest -q tests/interop
echo "== netns: phalanxd gateways in network namespaces"
/usr/bin/python3 -m pytest -v -p no:cacheprovider tests/netns
