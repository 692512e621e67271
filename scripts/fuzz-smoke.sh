#!/usr/bin/env bash
# Short smoke pass of every cargo-fuzz target: each runs for a bounded time
# (FUZZ_SECONDS, default 10) and must find no crash. Longer campaigns:
#   bench/fuzz-campaign.sh (every target for 30 minutes, coverage, minimised seeds)
#
#   scripts/fuzz-smoke.sh [build|run]   (default: both; scripts/test.sh
#                                        builds while other phases run)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-10}"
step="${1:-all}"
case "$step" in
    all | build | run) ;;
    *) echo "fuzz-smoke: unknown step $step (build, run, or nothing for both)" >&2; exit 2 ;;
esac

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
# `run` builds too, but finds nothing to do after `build`.
"${fuzz[@]}" build -s "$sanitizer" -O
[ "$step" != build ] || exit 0
# The targets run `nproc` at a time; each one's output goes to a log shown
# when it ends (interleaved output would be unreadable).
jobs="${FUZZ_JOBS:-$(nproc)}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
smoke_one() {
    local target="$1"
    mkdir -p "fuzz/corpus/$target" "fuzz/seeds/$target"
    # fuzz/seeds: the minimised corpus of the last long campaign
    # (bench/fuzz-campaign.sh), read only.
    if "${fuzz[@]}" run -s "$sanitizer" -O "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=0 >"$logs/$target" 2>&1; then
        echo "fuzz-smoke: $target ran ${seconds}s without a crash: $(grep -E '^(#[0-9]+|Done)' "$logs/$target" | tail -n 1)"
    else
        echo "fuzz-smoke: FAIL: $target (crash input in fuzz/artifacts/$target/):"
        tail -n 40 "$logs/$target"
        return 1
    fi
}
# Each target's verdict goes to a file: `wait -n` may reap a job whose
# status would otherwise be lost.
for target in $targets; do
    {
        rc=0
        smoke_one "$target" || rc=$?
        echo "$rc" >"$logs/$target.rc"
    } &
    if [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; then
        wait -n || true
    fi
done
wait
failed=0
count=0
for target in $targets; do
    count=$((count + 1))
    [ "$(cat "$logs/$target.rc" 2>/dev/null)" = 0 ] || failed=$((failed + 1))
done
[ "$failed" -eq 0 ] || { echo "fuzz-smoke: $failed of $count targets crashed or did not run" >&2; exit 1; }
echo "fuzz-smoke: $count targets ran without a crash"
