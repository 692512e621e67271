#!/usr/bin/env bash
# Instructions per packet of the ESP data path (AES-128-GCM, tunnel mode
# IPv4) against the bare aws-lc-rs AEAD call, counted by callgrind.
#
# Instruction counts repeat to the instruction on a noisy shared machine,
# where criterion's wall-clock ratios wander by +-0.1. For each size and
# mode it runs `esp_icount MODE SIZE N` (crates/phalanx-esp/examples/
# esp_icount.rs: exactly the per-packet work of benches/esp.rs, frames of
# 32, the same buffer reuse) under valgrind for N = 0 and N = $N packets;
# the difference divided by N is the cost of one packet without the setup.
#
#   ratio = bare / esp instructions per packet (1.0 = no protocol overhead),
#   the same orientation as bench/summary.py's throughput ratio.
#
# Caveat: aws-lc picks its AES-GCM code path by CPUID, and under valgrind
# CPUID is valgrind's synthetic CPU, not the host's (on the AMD EPYC of
# bench/RESULTS.md aws-lc took its AES-NI + AVX `aesni_gcm` path under
# valgrind). The AEAD's instruction count here may therefore be that of
# another code path than in the criterion run: compare ratios and the
# ESP-minus-bare overhead, not absolute numbers with the criterion
# results. Instruction counts also ignore what instructions cost (a locked
# atomic counts as one). For wall-clock ratios on a noisy machine, see the
# `time-encrypt` / `time-decrypt` modes of esp_icount (ESP and bare
# interleaved every 256 packets).
# valgrind 3.19 runs aws-lc's code here as is. If a valgrind ever stops on
# an unhandled instruction in aws-lc, mask CPU features with
# OPENSSL_ia32cap, whose first word is CPUID.1 EDX (bits 0-31) and ECX
# (bits 32-63): e.g. OPENSSL_ia32cap='~0x1000000000000000' hides AVX
# (ECX bit 28), and say so with the results.
#
# Usage: bench/icount.sh [SIZE...]     (default sizes: 64 512 1420 8192)
# Env:   N (default 20000), BIN (skip the build and use this binary)
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-20000}
SIZES=("$@")
[ ${#SIZES[@]} -eq 0 ] && SIZES=(64 512 1420 8192)
if [ -z "${BIN:-}" ]; then
    cargo build -q --release -p phalanx-esp --example esp_icount
    BIN=target/release/examples/esp_icount
fi
command -v valgrind >/dev/null || { echo "icount: valgrind not found" >&2; exit 2; }

# Instructions collected by callgrind for one run.
collected() {
    local out
    out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" "$@" 2>&1) || {
        echo "icount: '$BIN $*' failed under valgrind:" >&2
        echo "$out" | tail -20 >&2
        exit 1
    }
    echo "$out" | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

# Instructions per packet of MODE at SIZE (two decimals).
per_packet() {
    local base full
    base=$(collected "$1" "$2" 0)
    full=$(collected "$1" "$2" "$N")
    echo "scale=2; ($full - $base) / $N" | bc
}

echo "ESP AES-128-GCM vs bare aws-lc-rs, instructions per packet (callgrind, N=$N)"
printf '%-10s%7s%12s%12s%11s%8s\n' direction bytes esp bare overhead ratio
for size in "${SIZES[@]}"; do
    for dir in encrypt decrypt; do
        esp=$(per_packet "esp-$dir" "$size")
        bare=$(per_packet "bare-$dir" "$size")
        over=$(echo "scale=2; $esp - $bare" | bc)
        ratio=$(echo "scale=4; $bare / $esp" | bc)
        printf '%-10s%7s%12.1f%12.1f%11.1f%8.3f\n' "$dir" "$size" "$esp" "$bare" "$over" "$ratio"
    done
done
