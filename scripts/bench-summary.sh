#!/usr/bin/env bash
# Benchmark summary of the data-plane core (the main job before the gateway
# demo replaced it; scripts/demo.sh is the main job now):
#  1. ESP encrypt/decrypt with AES-128-GCM at 64, 512, 1420 and 8192 bytes,
#     as a ratio to the bare aws-lc-rs AEAD call in the same run;
#  2. SPD lookups per second with 100, 10,000 and 100,000 policies.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

measure="${MEASURE_SECONDS:-3}"
cargo bench -p phalanx-esp --bench esp -- --warm-up-time 1 --measurement-time "$measure"
cargo bench -p phalanx-sa --bench spd -- --warm-up-time 1 --measurement-time "$measure"
echo
python3 bench/summary.py target/criterion
