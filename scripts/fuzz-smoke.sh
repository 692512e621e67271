#!/usr/bin/env bash
# Short smoke pass of every cargo-fuzz target: each runs for a bounded time
# (FUZZ_SECONDS, default 15) and must find no crash. Longer campaigns:
#   bench/fuzz-campaign.sh (every target for 30 minutes, coverage, minimised seeds)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-15}"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-smoke: installing cargo-fuzz from crates.io"
    cargo install cargo-fuzz --locked
fi

# cargo-fuzz needs nightly-only flags (sanitizers, -Z options). Use a
# nightly toolchain when rustup has one; otherwise let the stable compiler
# accept them (RUSTC_BOOTSTRAP) and fuzz without a sanitizer.
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    fuzz=(cargo +nightly fuzz)
    sanitizer=address
else
    export RUSTC_BOOTSTRAP=1
    fuzz=(cargo fuzz)
    sanitizer=none
fi

targets=$("${fuzz[@]}" list)
[ -n "$targets" ] || { echo "fuzz-smoke: no fuzz targets found" >&2; exit 1; }
"${fuzz[@]}" build -s "$sanitizer" -O
passed=0
for target in $targets; do
    mkdir -p "fuzz/corpus/$target" "fuzz/seeds/$target"
    echo "fuzz-smoke: $target for ${seconds}s"
    # fuzz/seeds: the minimised corpus of the last long campaign
    # (bench/fuzz-campaign.sh), read only.
    "${fuzz[@]}" run -s "$sanitizer" -O "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=0 2>&1 | tail -n 3
    passed=$((passed + 1))
done
echo "fuzz-smoke: $passed targets ran without a crash"
