#!/usr/bin/env bash
# Main job: two sites joined by two Phalanx gateways, on this machine.
#
#   hostA (10.1.0.2) -- gwA === WAN 192.0.2.1 <-> 192.0.2.2 === gwB -- hostB (10.2.0.2)
#
#  1. builds phalanxd and phalanxctl (release);
#  2. creates four network namespaces (tests/netns/lib.sh, names prefixed
#     phxdemo<pid>), veth links, forwarding;
#  3. writes a matching pair of gateway configs from
#     crates/phalanxd/examples/gateway-{a,b}-ike.toml: one IKEv2 connection
#     each (PSK, a fresh random one; IKE AES-GCM-128/PRF-SHA-256/X25519; ESP
#     AES-GCM-128 in UDP port 4500), and starts phalanxd on both gateways;
#  4. gwA negotiates the tunnel (`phalanxctl initiate site-b --wait`): IKE_SA_INIT
#     and IKE_AUTH, no static key anywhere; prints `phalanxctl ike` on both
#     gateways;
#  5. pings hostA -> hostB over IPv4 and IPv6 through the tunnel, runs a 5 s
#     iperf3 TCP test, prints `phalanxctl sas` on both gateways and the
#     non-zero counters;
#  6. removes everything it created (also on Ctrl-C or failure).
# Exits non-zero when traffic does not pass. Needs root; installs iproute2,
# iperf3, ping (scripts/setup.sh, group netns).
# DEMO_SECONDS sets the iperf3 duration; PHX_KEEP_RUN_DIR=1 keeps the logs.
set -euo pipefail
cd "$(dirname "$0")/.."
PHALANX_SETUP_GROUPS=netns source scripts/setup.sh
source tests/netns/lib.sh

if [ "$(id -u)" -ne 0 ]; then
    echo "demo: needs root (network namespaces, TUN devices)" >&2
    exit 1
fi

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "build (release): phalanxd, phalanxctl"
cargo build --release -q -p phalanxd -p phalanxctl
PHALANXCTL="$(phx_bin phalanxctl)"

step "topology: hostA -- gwA === WAN === gwB -- hostB"
phx_init "phxdemo$$"
phx_trap_cleanup
phx_topology_up
echo "namespaces: $NS_HOSTA $NS_GWA $NS_GWB $NS_HOSTB"
phx_offload_summary

step "gateway configs: IKEv2 with a PSK (random), AES-GCM-128, X25519, ESP in UDP/4500"
psk="0x$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
for gw in A B; do
    lower="$(echo "$gw" | tr AB ab)"
    # The example files, with this run's socket and PSK; gwB is started
    # first and gwA initiates once both are up (`phalanxctl initiate`).
    sed -e "s#^control_socket = .*#control_socket = \"$PHX_RUN_DIR/gw$gw.sock\"#" \
        -e "s#^psk = .*#psk = \"$psk\"#" \
        -e 's#^start_action = .*#start_action = "none"#' \
        "crates/phalanxd/examples/gateway-$lower-ike.toml" >"$PHX_RUN_DIR/gw$gw.toml"
done
grep -vE '^(psk) = |^#|^$' "$PHX_RUN_DIR/gwA.toml" | sed 's/^/  gwA.toml | /'

step "start phalanxd on gwB (responder) and gwA (initiator)"
start_phalanxd "$NS_GWB" "$PHX_RUN_DIR/gwB.toml" phalanxd-gwB >/dev/null
start_phalanxd "$NS_GWA" "$PHX_RUN_DIR/gwA.toml" phalanxd-gwA >/dev/null
fail() {
    echo "demo: FAILED: $*" >&2
    for gw in gwA gwB; do
        echo "--- phalanxd-$gw log (last lines)" >&2
        tail -15 "$PHX_RUN_DIR/phalanxd-$gw.log" >&2 || true
    done
    exit 1
}
wait_for_tun "$NS_GWA" phx0 15 || fail "phalanxd on gwA did not create phx0"
wait_for_tun "$NS_GWB" phx0 15 || fail "phalanxd on gwB did not create phx0"
phx_routes_via_dev "$NS_GWA" phx0
phx_routes_via_dev "$NS_GWB" phx0
for gw in gwA gwB; do
    for ((i = 0; i < 50; i++)); do
        "$PHALANXCTL" --socket "$PHX_RUN_DIR/$gw.sock" status >/dev/null 2>&1 && break
        sleep 0.1
    done
done
"$PHALANXCTL" --socket "$PHX_RUN_DIR/gwA.sock" status || fail "phalanxctl status on gwA"

step "IKEv2: gwA initiates site-b (IKE_SA_INIT, IKE_AUTH with the first Child SA)"
"$PHALANXCTL" --socket "$PHX_RUN_DIR/gwA.sock" initiate site-b --wait 20 ||
    fail "IKE did not bring the tunnel up"
for gw in gwA gwB; do
    step "phalanxctl ike ($gw)"
    "$PHALANXCTL" --socket "$PHX_RUN_DIR/$gw.sock" ike || fail "phalanxctl ike on $gw"
done

step "ping hostA -> hostB through the tunnel"
wait_ping "$NS_HOSTA" "$PHX_HOSTB_V4" 10 || fail "no IPv4 ping reply from hostB"
ip netns exec "$NS_HOSTA" ping -n -c 3 -i 0.2 -W 2 "$PHX_HOSTB_V4" || fail "IPv4 ping"
wait_ping "$NS_HOSTA" "$PHX_HOSTB_V6" 10 || fail "no IPv6 ping reply from hostB"
ip netns exec "$NS_HOSTA" ping -n -c 3 -i 0.2 -W 2 "$PHX_HOSTB_V6" || fail "IPv6 ping"

secs="${DEMO_SECONDS:-5}"
step "iperf3 TCP hostA -> hostB, ${secs} s ($(phx_offload_summary))"
phx_iperf_server
timeout -k 5 $((secs + 20)) ip netns exec "$NS_HOSTA" iperf3 -c "$PHX_HOSTB_V4" -t "$secs" -f g ||
    fail "iperf3 through the tunnel"

for gw in gwA gwB; do
    step "phalanxctl sas ($gw)"
    "$PHALANXCTL" --socket "$PHX_RUN_DIR/$gw.sock" sas || fail "phalanxctl sas on $gw"
done
step "phalanxctl counters (gwA; drop reasons and IKE counters with a zero count left out here)"
"$PHALANXCTL" --socket "$PHX_RUN_DIR/gwA.sock" counters |
    awk '/^(drops|IKE counters)/ { d = 1 } /^$/ { d = 0 } !(d && $2 == "0")'

for gw in gwA gwB; do
    phx_alive "phalanxd-$gw" || fail "phalanxd on $gw exited"
done
step "demo passed: removing the namespaces"
