#!/usr/bin/env bash
# A long fuzzing campaign: every cargo-fuzz target for FUZZ_MINUTES (30) of
# its own, FUZZ_JOBS (the core count) at a time; then each corpus is
# minimised (`cargo fuzz cmin`) into fuzz/seeds/<target>/ (committed; the
# smoke pass in CI starts from it), line coverage is measured
# (`cargo fuzz coverage` + llvm-cov), and a dated entry with hours run,
# executions, corpus sizes, coverage and crashes goes to bench/RESULTS.md
# (section "Fuzzing campaigns"; FUZZ_NO_RESULTS=1: print only).
#
# A crash leaves its input in fuzz/artifacts/<target>/ and fails the run;
# reproduce it with `cargo fuzz run <target> fuzz/artifacts/<target>/<file>`.
#
# Usage: bench/fuzz-campaign.sh [TARGET...]      default: every target
# Environment: FUZZ_MINUTES (30; 0 = only minimise and measure coverage of
# the committed seeds), FUZZ_JOBS (nproc), FUZZ_RSS_MB (2048), FUZZ_OUT (an
# earlier campaign's bench/out/fuzz-* directory to finish: targets that
# already ended there, with their .rc, are not run again, their logs count).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${FUZZ_MINUTES:-30}"
jobs="${FUZZ_JOBS:-$(nproc)}"
rss="${FUZZ_RSS_MB:-2048}"
out="${FUZZ_OUT:-bench/out/fuzz-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-campaign: installing cargo-fuzz from crates.io"
    cargo install cargo-fuzz --locked
fi
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    toolchain=nightly
    fuzz=(cargo +nightly fuzz)
    sanitizer=address
else
    toolchain="$(rustup show active-toolchain | cut -d' ' -f1)"
    export RUSTC_BOOTSTRAP=1
    fuzz=(cargo fuzz)
    sanitizer=none
fi
sysroot="$(rustc +"$toolchain" --print sysroot)"
# Coverage needs llvm-cov / llvm-profdata of the toolchain that builds the
# targets.
rustup component add llvm-tools-preview --toolchain "$toolchain" >/dev/null 2>&1 || {
    echo "fuzz-campaign: rustup component add llvm-tools-preview --toolchain $toolchain failed (coverage needs it)" >&2
    exit 1
}
llvm_bin="$(ls -d "$sysroot"/lib/rustlib/*/bin | head -n 1)"

targets=("$@")
[ "${#targets[@]}" -gt 0 ] || mapfile -t targets < <("${fuzz[@]}" list)
echo "fuzz-campaign: ${#targets[@]} targets, $minutes min each, $jobs at a time, sanitizer $sanitizer"
"${fuzz[@]}" build -s "$sanitizer" -O

run_one() {
    local target="$1"
    mkdir -p "fuzz/corpus/$target" "fuzz/seeds/$target"
    if [ -f "$out/$target.rc" ]; then
        echo "fuzz-campaign: $target already ran in $out (rc $(cat "$out/$target.rc"))"
        return
    fi
    if [ "$minutes" = 0 ]; then
        # FUZZ_MINUTES=0: no fuzzing, only minimise and measure coverage of
        # what a previous campaign left (its seeds).
        cp -n "fuzz/seeds/$target"/* "fuzz/corpus/$target"/ 2>/dev/null || true
        echo 0 >"$out/$target.rc"
        return
    fi
    "${fuzz[@]}" run -s "$sanitizer" -O "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
        -max_total_time=$((minutes * 60)) -rss_limit_mb="$rss" -print_final_stats=1 \
        >"$out/$target.log" 2>&1
    echo $? >"$out/$target.rc"
}

running=0
for target in "${targets[@]}"; do
    run_one "$target" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait || true

rows=()
crashes=0
for target in "${targets[@]}"; do
    rc="$(cat "$out/$target.rc" 2>/dev/null || echo 1)"
    # No log with FUZZ_MINUTES=0 (nothing ran): executions "?".
    execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$target.log" 2>/dev/null | grep -o '[0-9]*$' | tail -n 1 || true)"
    # No artifacts directory when the target never ran or never crashed.
    found="$(find "fuzz/artifacts/$target" -type f -newer "$out" 2>/dev/null | wc -l || true)"
    crashes=$((crashes + found))
    # Minimise into the committed seeds (cmin keeps the inputs that add
    # coverage). libFuzzer writes only new inputs into the corpus
    # directory: the seeds it started from join it first, or cmin drops
    # them.
    cp -n "fuzz/seeds/$target"/* "fuzz/corpus/$target"/ 2>/dev/null || true
    rm -rf "$out/cmin-$target"
    mkdir -p "$out/cmin-$target"
    "${fuzz[@]}" cmin -s "$sanitizer" -O "$target" "fuzz/corpus/$target" -- "$out/cmin-$target" \
        >"$out/$target.cmin.log" 2>&1 || true
    if [ -n "$(ls -A "$out/cmin-$target" 2>/dev/null)" ]; then
        rm -rf "fuzz/seeds/$target"
        mv "$out/cmin-$target" "fuzz/seeds/$target"
    fi
    seeds="$(find "fuzz/seeds/$target" -type f | wc -l)"
    "${fuzz[@]}" coverage "$target" "fuzz/seeds/$target" >"$out/$target.cov.log" 2>&1 || true
    profdata="fuzz/coverage/$target/coverage.profdata"
    # cargo fuzz coverage builds into the workspace's target directory
    # (target/<triple>/coverage/...), not fuzz/target.
    bin="$(find target fuzz/target -path "*/coverage/*" -type f -name "$target" -perm -u+x 2>/dev/null | head -n 1)"
    cover="-"
    if [ -f "$profdata" ] && [ -n "$bin" ]; then
        cover="$("$llvm_bin/llvm-cov" report "$bin" -instr-profile="$profdata" \
            -ignore-filename-regex='(\.cargo|rustc|fuzz_targets)' 2>/dev/null | awk '/^TOTAL/ {print $10}')"
    fi
    rows+=("| $target | $minutes | ${execs:-?} | $seeds | ${cover:-?} | $found | $rc |")
    echo "fuzz-campaign: $target: rc=$rc executions=${execs:-?} seeds=$seeds line coverage=${cover:-?} crashes=$found"
done

hours="$(awk -v n="${#targets[@]}" -v m="$minutes" 'BEGIN { printf "%.1f", n * m / 60 }')"
if [ "${FUZZ_NO_RESULTS:-0}" != 1 ]; then
    {
        echo
        echo "### $(date -u '+%Y-%m-%d %H:%M UTC') — $(git rev-parse --short HEAD)$(git status --porcelain | grep -q . && echo +dirty)"
        echo
        echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
        echo "- command: \`bench/fuzz-campaign.sh ${*:-} (FUZZ_MINUTES=$minutes FUZZ_JOBS=$jobs)\`, sanitizer $sanitizer"
        echo "- $hours target-hours in all; line coverage by llvm-cov over the minimised seeds (fuzz/seeds): the share of all lines of the workspace code linked into the target (every crate it pulls in, not only the parser it aims at), fuzz targets' own files excluded"
        echo
        echo "| target | minutes | executions | seeds after cmin | line coverage | crashes | rc |"
        echo "|---|---|---|---|---|---|---|"
        printf '%s\n' "${rows[@]}"
    } >"$out/entry.md"
    /usr/bin/python3 - "$out/entry.md" <<'PY'
import sys
sys.path.insert(0, "bench")
import ike_rekey
ike_rekey.insert_entry("Fuzzing campaigns", "Every cargo-fuzz target run for a long time (bench/fuzz-campaign.sh).",
                       open(sys.argv[1]).read().strip("\n"))
PY
    echo "fuzz-campaign: entry added to bench/RESULTS.md; commit fuzz/seeds/ with it"
fi
echo "fuzz-campaign: $hours target-hours, $crashes crashes (logs in $out)"
[ "$crashes" -eq 0 ]
