#!/usr/bin/env bash
# Installs what the demo and the tests need on a fresh Debian machine.
# Idempotent: packages already present are not fetched again.
set -euo pipefail

APT_PACKAGES=(
    python3-scapy        # independent ESP/AH implementation (interop vectors)
    python3-cryptography # AES-GMAC cross-check (scapy has no RFC 4543)
    python3-pytest       # runs tests/interop
    build-essential      # C compiler for aws-lc-rs
    cmake                # aws-lc-sys build fallback
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: missing Debian packages: ${missing[*]} (run as root, or: sudo apt-get install -y ${missing[*]})" >&2
        exit 1
    fi
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q "${missing[@]}"
fi

if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        echo "setup: no Rust toolchain: install rustup (stable, 1.85 or newer) and re-run" >&2
        exit 1
    fi
fi
