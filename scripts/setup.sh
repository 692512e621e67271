#!/usr/bin/env bash
# Installs what the demo and the tests need on a fresh Debian machine.
# Idempotent: packages already present are not fetched again.
#
# Sourced by the other scripts. Optional package groups are selected with
# PHALANX_SETUP_GROUPS (space separated) before sourcing:
#   netns  network-namespace demo, integration tests and the throughput race:
#          iproute2, iperf3, ping, tshark, ethtool, nftables, strongSwan
#          (charon with kernel-libipsec, swanctl), Corosync, tcpdump
# e.g. `PHALANX_SETUP_GROUPS=netns source scripts/setup.sh`.
set -euo pipefail

APT_PACKAGES=(
    python3-scapy        # independent ESP/AH implementation (interop vectors)
    python3-cryptography # AES-GMAC cross-check (scapy has no RFC 4543)
    python3-pytest       # runs tests/interop and tests/netns
    build-essential      # C compiler for aws-lc-rs
    cmake                # aws-lc-sys build fallback
    # phalanxd links the Corosync client libraries (rust-corosync: cpg for
    # the cluster's ordered replication; the crate also links cfg, cmap,
    # quorum and votequorum).
    libcpg-dev libcfg-dev libcmap-dev libquorum-dev libvotequorum-dev libcorosync-common-dev
)

APT_GROUP_NETNS=(
    iproute2                 # ip netns, veth, routes
    iperf3                   # throughput (demo, race)
    iputils-ping             # ping
    tshark                   # decrypts captures of the WAN link (esp_sa UAT)
    ethtool                  # shows/toggles veth offloads
    nftables                 # packet counters and filters in the test namespaces
    procps                   # ps/pgrep for process bookkeeping in tests
    strongswan-charon        # /usr/lib/ipsec/charon (the race's reference gateway)
    strongswan-swanctl       # swanctl, vici
    libcharon-extra-plugins  # kernel-libipsec (userspace ESP: this kernel has no ESP)
    libcharon-extauth-plugins # eap-mschapv2 (strongSwan as an End-User client)
    libstrongswan-standard-plugins # gcm, openssl, ...
    libstrongswan-extra-plugins    # curve25519, chapoly
    corosync                 # cluster membership and agreed-order messages (one per node namespace)
    tcpdump                  # WAN captures in the cluster failover tests
    freeradius               # RADIUS servers for EAP pass-through and accounting (tests/netns/test_radius.py)
)

for group in ${PHALANX_SETUP_GROUPS:-}; do
    case "$group" in
        netns) APT_PACKAGES+=("${APT_GROUP_NETNS[@]}") ;;
        *) echo "setup: unknown package group '$group' (known: netns)" >&2; exit 1 ;;
    esac
done

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
    # tshark asks whether non-root users may capture: answer no, never prompt.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    apt-get update -q
    # Services of the installed packages (charon, iperf3) must not start here:
    # every instance the project runs lives in a namespace it created.
    policy_rc_d_created=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        policy_rc_d_created=1
    fi
    apt_rc=0
    apt-get install -y -q --no-install-recommends "${missing[@]}" || apt_rc=$?
    if [ "$policy_rc_d_created" -eq 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
    [ "$apt_rc" -eq 0 ] || { echo "setup: apt-get install failed ($apt_rc)" >&2; exit "$apt_rc"; }
fi

if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        echo "setup: no Rust toolchain: install rustup (stable, 1.85 or newer) and re-run" >&2
        exit 1
    fi
fi
