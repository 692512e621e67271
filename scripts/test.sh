#!/usr/bin/env bash
# The test suite: formatting and lints, unit/property/vector tests for every
# crate, a fuzz smoke pass, and the interop tests against scapy.
# Installs its own prerequisites (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

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
