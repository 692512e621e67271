#!/usr/bin/env bash
# Network-namespace topology for the Phalanx demo, integration tests and the
# throughput race. Source it; it defines functions and variables, runs nothing.
#
#   hostA (10.1.0.2/24, fd01::2/64)
#     | eth0
#     | lan0
#   gwA  [clear 10.1.0.1, fd01::1]  ---  TUN of the gateway (phalanxd / charon)
#     | wan0 192.0.2.1/24, 2001:db8:f::1/64
#     |                                   WAN (one veth pair)
#     | wan0 192.0.2.2/24, 2001:db8:f::2/64
#   gwB  [clear 10.2.0.1, fd02::1]  ---  TUN of the gateway
#     | lan0
#     | eth0
#   hostB (10.2.0.2/24, fd02::2/64)
#
#   hostA -- gwA === WAN 192.0.2.1 <-> 192.0.2.2 === gwB -- hostB
#
# Every name carries a per-run prefix (default `phx<pid>`): namespaces are
# `$PHX_PREFIX-hostA`, `-gwA`, `-gwB`, `-hostB`. The veth ends are created
# directly inside their namespaces, so nothing ever appears in the caller's
# namespace and no traffic leaves the four namespaces.
#
# Bookkeeping lives in $PHX_RUN_DIR: `namespaces` (created by this run),
# `pids` (processes started by this run), logs. `phx_cleanup` removes exactly
# those: it kills the recorded PIDs, then whatever still runs inside the
# namespaces this run created, then deletes the namespaces.
#
# Offloads: veth TSO/GSO/GRO and checksum offloads are ON by default
# (PHX_OFFLOAD=off turns them off); `phx_offload_summary` prints the setting
# for reports.
#
# Functions:
#   phx_init [PREFIX [RUN_DIR]]   names, run dir; does not install traps
#   phx_trap_cleanup              trap phx_cleanup on EXIT INT TERM
#   phx_topology_up               namespaces, veths, addresses, forwarding
#   phx_routes_plain              gateways route the remote site over the WAN
#   phx_routes_via_dev GW DEV     gateway GW routes the remote site into DEV
#   phx_routes_del GW             removes the remote-site routes of GW
#   phx_bg NAME NS CMD...         background process in NS, PID recorded, log
#   start_phalanxd NS CONFIG [NAME]
#   wait_for_tun NS DEV [SECONDS]
#   ping_ok FROM_NS DEST [COUNT]
#   run_iperf FROM_NS DEST SECONDS [IPERF3 ARGS...] (JSON on stdout)
#   phx_stop NAME                 SIGTERM one recorded process, wait, SIGKILL
#   phx_cleanup

PHX_LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PHX_REPO="$(cd "$PHX_LIB_DIR/../.." && pwd)"

# Addresses (shared with tests/netns/phxnet.py).
PHX_HOSTA_V4=10.1.0.2
PHX_HOSTA_V6=fd01::2
PHX_GWA_CLEAR_V4=10.1.0.1
PHX_GWA_CLEAR_V6=fd01::1
PHX_GWA_WAN_V4=192.0.2.1
PHX_GWA_WAN_V6=2001:db8:f::1
PHX_GWB_WAN_V4=192.0.2.2
PHX_GWB_WAN_V6=2001:db8:f::2
PHX_GWB_CLEAR_V4=10.2.0.1
PHX_GWB_CLEAR_V6=fd02::1
PHX_HOSTB_V4=10.2.0.2
PHX_HOSTB_V6=fd02::2
PHX_SITEA_V4=10.1.0.0/24
PHX_SITEA_V6=fd01::/64
PHX_SITEB_V4=10.2.0.0/24
PHX_SITEB_V6=fd02::/64

phx_log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# phx_init [PREFIX [RUN_DIR]]
phx_init() {
    PHX_PREFIX="${1:-${PHX_PREFIX:-phx$$}}"
    if [ -n "${2:-}" ]; then
        PHX_RUN_DIR="$2"
        mkdir -p "$PHX_RUN_DIR"
    else
        PHX_RUN_DIR="$(mktemp -d "/tmp/${PHX_PREFIX}.XXXXXX")"
    fi
    NS_HOSTA="$PHX_PREFIX-hostA"
    NS_GWA="$PHX_PREFIX-gwA"
    NS_GWB="$PHX_PREFIX-gwB"
    NS_HOSTB="$PHX_PREFIX-hostB"
    touch "$PHX_RUN_DIR/namespaces" "$PHX_RUN_DIR/pids"
    export PHX_PREFIX PHX_RUN_DIR NS_HOSTA NS_GWA NS_GWB NS_HOSTB
}

phx_trap_cleanup() {
    trap 'rc=$?; trap - EXIT INT TERM; phx_cleanup; exit $rc' EXIT
    trap 'trap - EXIT INT TERM; phx_log "interrupted"; phx_cleanup; exit 130' INT TERM
}

# phx_ns_add NS: creates NS (failing if it exists: never adopt someone else's).
phx_ns_add() {
    if ip netns list | awk '{print $1}' | grep -qx "$1"; then
        phx_log "namespace $1 already exists: refusing to reuse it"
        return 1
    fi
    ip netns add "$1"
    echo "$1" >>"$PHX_RUN_DIR/namespaces"
    ip -n "$1" link set lo up
}

# phx_veth NS_A DEV_A NS_B DEV_B: one veth pair, each end created in its namespace.
phx_veth() {
    ip -n "$1" link add "$2" type veth peer name "$4" netns "$3"
}

# phx_set_offload NS DEV on|off
phx_set_offload() {
    ip netns exec "$1" ethtool -K "$2" tso "$3" gso "$3" gro "$3" tx "$3" rx "$3" >/dev/null 2>&1 || true
}

phx_topology_up() {
    local ns
    for ns in "$NS_HOSTA" "$NS_GWA" "$NS_GWB" "$NS_HOSTB"; do
        phx_ns_add "$ns"
        # No duplicate address detection: addresses are usable at once.
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
    done
    phx_veth "$NS_HOSTA" eth0 "$NS_GWA" lan0
    phx_veth "$NS_GWA" wan0 "$NS_GWB" wan0
    phx_veth "$NS_GWB" lan0 "$NS_HOSTB" eth0

    ip -n "$NS_HOSTA" addr add "$PHX_HOSTA_V4/24" dev eth0
    ip -n "$NS_HOSTA" addr add "$PHX_HOSTA_V6/64" dev eth0 nodad
    ip -n "$NS_GWA" addr add "$PHX_GWA_CLEAR_V4/24" dev lan0
    ip -n "$NS_GWA" addr add "$PHX_GWA_CLEAR_V6/64" dev lan0 nodad
    ip -n "$NS_GWA" addr add "$PHX_GWA_WAN_V4/24" dev wan0
    ip -n "$NS_GWA" addr add "$PHX_GWA_WAN_V6/64" dev wan0 nodad
    ip -n "$NS_GWB" addr add "$PHX_GWB_WAN_V4/24" dev wan0
    ip -n "$NS_GWB" addr add "$PHX_GWB_WAN_V6/64" dev wan0 nodad
    ip -n "$NS_GWB" addr add "$PHX_GWB_CLEAR_V4/24" dev lan0
    ip -n "$NS_GWB" addr add "$PHX_GWB_CLEAR_V6/64" dev lan0 nodad
    ip -n "$NS_HOSTB" addr add "$PHX_HOSTB_V4/24" dev eth0
    ip -n "$NS_HOSTB" addr add "$PHX_HOSTB_V6/64" dev eth0 nodad

    local offload="${PHX_OFFLOAD:-on}"
    local pair
    for pair in "$NS_HOSTA eth0" "$NS_GWA lan0" "$NS_GWA wan0" "$NS_GWB wan0" "$NS_GWB lan0" "$NS_HOSTB eth0"; do
        # shellcheck disable=SC2086
        set -- $pair
        ip -n "$1" link set "$2" up
        phx_set_offload "$1" "$2" "$offload"
    done

    ip -n "$NS_HOSTA" route add default via "$PHX_GWA_CLEAR_V4"
    ip -n "$NS_HOSTA" -6 route add default via "$PHX_GWA_CLEAR_V6"
    ip -n "$NS_HOSTB" route add default via "$PHX_GWB_CLEAR_V4"
    ip -n "$NS_HOSTB" -6 route add default via "$PHX_GWB_CLEAR_V6"
    for ns in "$NS_GWA" "$NS_GWB"; do
        ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
    done
}

# Offload state of the WAN veth of gwA, for reports.
phx_offload_summary() {
    local feats
    feats="$(ip netns exec "$NS_GWA" ethtool -k wan0 2>/dev/null |
        awk -F': ' '/^(tcp-segmentation-offload|generic-segmentation-offload|generic-receive-offload|tx-checksumming|rx-checksumming):/ {
            n=$1; sub("tcp-segmentation-offload","tso",n); sub("generic-segmentation-offload","gso",n);
            sub("generic-receive-offload","gro",n); sub("tx-checksumming","tx-csum",n); sub("rx-checksumming","rx-csum",n);
            split($2,v," "); printf "%s=%s ", n, v[1] }')"
    echo "veth offloads ${PHX_OFFLOAD:-on} (${feats% })"
}

# phx_remote_of GW -> "v4prefix v6prefix" of the site behind the other gateway
phx_remote_of() {
    if [ "$1" = "$NS_GWA" ]; then echo "$PHX_SITEB_V4 $PHX_SITEB_V6"; else echo "$PHX_SITEA_V4 $PHX_SITEA_V6"; fi
}

phx_routes_plain() {
    ip -n "$NS_GWA" route replace "$PHX_SITEB_V4" via "$PHX_GWB_WAN_V4"
    ip -n "$NS_GWA" -6 route replace "$PHX_SITEB_V6" via "$PHX_GWB_WAN_V6"
    ip -n "$NS_GWB" route replace "$PHX_SITEA_V4" via "$PHX_GWA_WAN_V4"
    ip -n "$NS_GWB" -6 route replace "$PHX_SITEA_V6" via "$PHX_GWA_WAN_V6"
}

# phx_routes_via_dev GW DEV: brings DEV up, routes the remote site (v4, v6) into it
phx_routes_via_dev() {
    local v4 v6
    read -r v4 v6 < <(phx_remote_of "$1")
    ip -n "$1" link set "$2" up
    ip -n "$1" route replace "$v4" dev "$2"
    ip -n "$1" -6 route replace "$v6" dev "$2"
}

phx_routes_del() {
    local v4 v6
    read -r v4 v6 < <(phx_remote_of "$1")
    ip -n "$1" route del "$v4" 2>/dev/null || true
    ip -n "$1" -6 route del "$v6" 2>/dev/null || true
}

# phx_bg NAME NS CMD...: runs CMD in NS in the background, stdout+stderr to
# $PHX_RUN_DIR/NAME.log, records "PID NAME" in $PHX_RUN_DIR/pids.
# `ip netns exec` execs CMD, so the recorded PID is CMD's own.
phx_bg() {
    local name="$1" ns="$2"
    shift 2
    ip netns exec "$ns" "$@" >"$PHX_RUN_DIR/$name.log" 2>&1 </dev/null &
    local pid=$!
    echo "$pid $name" >>"$PHX_RUN_DIR/pids"
    echo "$pid"
}

# phx_pid NAME: the PID recorded for NAME (last one).
phx_pid() {
    awk -v n="$1" '$2 == n { p = $1 } END { if (p) print p }' "$PHX_RUN_DIR/pids"
}

# phx_alive NAME
phx_alive() {
    local pid
    pid="$(phx_pid "$1")"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# Path of the release binaries (PHX_BIN_DIR overrides).
phx_bin() {
    echo "${PHX_BIN_DIR:-$PHX_REPO/target/release}/$1"
}

# start_phalanxd NS CONFIG [NAME]: phalanxd in the foreground of a background
# job; log in $PHX_RUN_DIR/NAME.log; prints the PID.
start_phalanxd() {
    local ns="$1" config="$2" name="${3:-phalanxd-${1##*-}}"
    phx_bg "$name" "$ns" "$(phx_bin phalanxd)" --config "$config" --foreground
}

# wait_for_tun NS DEV [SECONDS]: waits until DEV exists in NS.
wait_for_tun() {
    local ns="$1" dev="$2" limit="${3:-10}" i
    for ((i = 0; i < limit * 10; i++)); do
        ip -n "$ns" link show "$dev" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    phx_log "no device $dev in $ns after ${limit}s"
    return 1
}

# ping_ok FROM_NS DEST [COUNT]: COUNT (default 3) pings, bounded in time;
# succeeds when all are answered.
ping_ok() {
    local ns="$1" dest="$2" count="${3:-3}"
    timeout $((count + 10)) ip netns exec "$ns" ping -q -n -c "$count" -i 0.2 -W 2 "$dest" >/dev/null 2>&1
}

# wait_ping FROM_NS DEST [SECONDS]: first answered ping within SECONDS.
wait_ping() {
    local ns="$1" dest="$2" limit="${3:-10}" i
    for ((i = 0; i < limit * 2; i++)); do
        timeout 3 ip netns exec "$ns" ping -q -n -c 1 -W 1 "$dest" >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    return 1
}

# iperf3 server in hostB (one per run; started on first use).
phx_iperf_server() {
    if ! phx_alive iperf3-server; then
        phx_bg iperf3-server "$NS_HOSTB" iperf3 -s -B "${PHX_HOSTB_V4}" >/dev/null
        local i
        for ((i = 0; i < 50; i++)); do
            ip netns exec "$NS_HOSTB" ss -ltn 2>/dev/null | grep -q ':5201 ' && return 0
            sleep 0.1
        done
        phx_log "iperf3 server did not start"
        return 1
    fi
}

# run_iperf FROM_NS DEST SECONDS [ARGS...]: iperf3 client, JSON on stdout,
# killed after SECONDS + 20.
run_iperf() {
    local ns="$1" dest="$2" secs="$3"
    shift 3
    phx_iperf_server
    timeout -k 5 $((secs + 20)) ip netns exec "$ns" iperf3 -c "$dest" -t "$secs" -J "$@"
}

# phx_kill_pid PID: TERM, wait up to 5 s, then KILL.
phx_kill_pid() {
    local pid="$1" i
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

# phx_stop NAME: stops the process recorded as NAME.
phx_stop() {
    local pid
    pid="$(phx_pid "$1")"
    [ -n "$pid" ] && phx_kill_pid "$pid"
    return 0
}

phx_cleanup() {
    [ -n "${PHX_RUN_DIR:-}" ] && [ -d "$PHX_RUN_DIR" ] || return 0
    local pid name ns
    if [ -f "$PHX_RUN_DIR/pids" ]; then
        while read -r pid name; do
            [ -n "$pid" ] && phx_kill_pid "$pid"
        done <"$PHX_RUN_DIR/pids"
    fi
    if [ -f "$PHX_RUN_DIR/namespaces" ]; then
        while read -r ns; do
            [ -n "$ns" ] || continue
            # Whatever still runs inside a namespace this run created was
            # started by this run (e.g. a child of a recorded process).
            for pid in $(ip netns pids "$ns" 2>/dev/null); do
                phx_kill_pid "$pid"
            done
            ip netns del "$ns" 2>/dev/null || true
        done <"$PHX_RUN_DIR/namespaces"
        : >"$PHX_RUN_DIR/namespaces"
    fi
    if [ "${PHX_KEEP_RUN_DIR:-0}" != 1 ]; then
        rm -rf "$PHX_RUN_DIR"
    else
        phx_log "logs kept in $PHX_RUN_DIR"
    fi
}

# ---------------------------------------------------------------- strongSwan
# start_charon GW NAME: charon (kernel-libipsec) in GW with its own
# strongswan.conf and a private /run (charon 5.9 hard-codes /run/charon.pid),
# rendered from bench/strongswan/*.in into $PHX_RUN_DIR/NAME/. Waits for its
# vici socket. Variables used in the templates: see render_strongswan.
phx_render() {
    local template="$1" out="$2"
    shift 2
    local sed_args=() kv
    for kv in "$@"; do
        sed_args+=(-e "s|@${kv%%=*}@|${kv#*=}|g")
    done
    sed "${sed_args[@]}" "$template" >"$out"
}

start_charon() {
    local gw="$1" name="$2" dir="$PHX_RUN_DIR/$2" local_wan remote_wan local_ts remote_ts
    mkdir -p "$dir/run"
    if [ "$gw" = "$NS_GWA" ]; then
        local_wan=$PHX_GWA_WAN_V4 remote_wan=$PHX_GWB_WAN_V4
        local_ts="$PHX_SITEA_V4,$PHX_SITEA_V6" remote_ts="$PHX_SITEB_V4,$PHX_SITEB_V6"
    else
        local_wan=$PHX_GWB_WAN_V4 remote_wan=$PHX_GWA_WAN_V4
        local_ts="$PHX_SITEB_V4,$PHX_SITEB_V6" remote_ts="$PHX_SITEA_V4,$PHX_SITEA_V6"
    fi
    local vars=("DIR=$dir" "LOCAL=$local_wan" "REMOTE=$remote_wan"
        "LOCAL_TS=$local_ts" "REMOTE_TS=$remote_ts"
        "ESP_PROPOSALS=${PHX_SWAN_ESP:-aes128gcm16-noesn-esn}"
        "IKE_PROPOSALS=${PHX_SWAN_IKE:-aes128gcm16-prfsha256-x25519}"
        "PSK=${PHX_SWAN_PSK:-phalanx-race-psk-0123456789abcdef}"
        "KEYLOG=${PHX_SWAN_KEYLOG:+chd = 4}")
    phx_render "$PHX_REPO/bench/strongswan/strongswan.conf.in" "$dir/strongswan.conf" "${vars[@]}"
    phx_render "$PHX_REPO/bench/strongswan/swanctl.conf.in" "$dir/swanctl.conf" "${vars[@]}"
    phx_bg "$name" "$gw" env STRONGSWAN_CONF="$dir/strongswan.conf" \
        unshare -m sh -c "mount --bind '$dir/run' /run && exec /usr/lib/ipsec/charon" >/dev/null
    local i
    for ((i = 0; i < 100; i++)); do
        [ -S "$dir/charon.vici" ] && break
        sleep 0.1
    done
    [ -S "$dir/charon.vici" ] || { phx_log "charon $name: no vici socket"; return 1; }
    timeout 20 ip netns exec "$gw" env STRONGSWAN_CONF="$dir/strongswan.conf" \
        swanctl --load-all --noprompt --uri "unix://$dir/charon.vici" --file "$dir/swanctl.conf" \
        >>"$dir/swanctl.log" 2>&1
}

# swanctl_in NAME ARGS...: swanctl against instance NAME.
swanctl_in() {
    local name="$1" dir="$PHX_RUN_DIR/$1"
    shift
    timeout 30 env STRONGSWAN_CONF="$dir/strongswan.conf" swanctl "$@" --uri "unix://$dir/charon.vici"
}
