#!/usr/bin/env bash
# The test suite: formatting and lints, unit/property/vector tests for every
# crate, a fuzz smoke pass, the interop tests against scapy, and the
# network-namespace integration tests (two phalanxd gateways; tshark and
# scapy on the wire; reload under traffic), which need root.
# Installs its own prerequisites (scripts/setup.sh, group netns).
set -euo pipefail
cd "$(dirname "$0")/.."
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
if [ "$(id -u)" -ne 0 ]; then
    echo "FAIL: tests/netns needs root (network namespaces, TUN devices); run scripts/test.sh as root" >&2
    exit 1
fi
/usr/bin/python3 -m pytest -v -p no:cacheprovider tests/netns
