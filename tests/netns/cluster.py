#!/usr/bin/env python3
"""A three-node Phalanx cluster in network namespaces, with real Corosync.

    hostA 10.1.0.10 (eth0, default route -> 10.1.0.1)
      |
    [br-lan] ------------------+-------------------+                 switch namespace:
      | lan0 10.1.0.11         | lan0 10.1.0.12    | lan0 10.1.0.13    three bridges that
     n1                       n2                  n3                   flood every frame
      | wan0 192.0.2.11        | wan0 192.0.2.12   | wan0 192.0.2.13   (ageing_time 0)
    [br-wan] ------------------+-------------------+
      | wan0 192.0.2.2          (each node: cl0 10.99.0.11-13 on [br-cl]:
     gwB (host-mode phalanxd,    Corosync knet ring0 + Phalanx heartbeats)
      |   peer 192.0.2.1)
      | lan0 10.2.0.1
    hostB 10.2.0.10

    virtual addresses (configured on NO interface; answered by phalanxd):
      inside  10.1.0.1  / 02:00:5e:10:00:02   (hostA's gateway)
      outside 192.0.2.1 / 02:00:5e:10:00:01   (gwB's peer)

IPv6 (`Cluster(lan6=True, wan6=True)`, both off by default):

    lan6: hostA fd01::10 (default route -> fd01::1), nodes' lan0
          fd01::11-13, gwB lan0 fd02::1, hostB fd02::10 (default route
          -> fd02::1); the inside virtual addresses are 10.1.0.1 and
          fd01::1 (one MAC, answered by ARP and neighbour discovery)
    wan6: gwB wan0 2001:db8:f::2, nodes' wan0 2001:db8:f::11-13 (their
          IPv4 addresses stay); the outside virtual address is
          2001:db8:f::1 (gwB resolves it by neighbour discovery) and
          the tunnel runs over IPv6 (SA endpoints and `[protected] local`)

Every IPv6 address is added `nodad`, duplicate address detection is off
(link-local addresses too), routers are neither solicited nor listened to,
and the switch namespace has no IPv6 at all (its bridges stay silent):
only the hosts, the nodes and phalanxd speak neighbour discovery.

The bridges forget every address at once (`ageing_time 0`), so every frame
reaches every port: a switch that floods the virtual MAC as unknown unicast.
Each node's kernel has ip_forward=1 and a connected route to site A (it
forwards the packets phalanxd decrypts into its TUN) and routes site B into
the TUN. Veth offloads are off on every port (a capture on the bridge then
shows wire frames, one ESP packet per frame). hostA's MTU is 1400 (room for
ESP on the 1500-byte WAN, like the host-mode TUN's MTU).

Corosync: one instance per node namespace, each in its own mount namespace
with a private /run (tmpfs), /var/lib/corosync and /var/log/corosync (bind
mounts of the node's run directory), knet transport on the cluster link,
nodelist n1..n3 (nodeid 1..3). Token tuning: see `COROSYNC_TOTEM`.

Every name carries a per-run prefix (`pxc<pid>t<n>`): namespaces
`<prefix>-sw`, `-hostA`, `-n1`.. `-n3`, `-gwB`, `-hostB`. Bookkeeping in the
run directory uses tests/netns/lib.sh's format (`namespaces`, `pids`), so its
`phx_cleanup` removes exactly what this run created. Every wait is bounded.

CLI (used by bench/cluster-failover.sh):

    cluster.py failover --modes kill cut [stop] --reps N [--seconds S] [--tcp-rate R] [--peer phalanx|strongswan]

runs the failover measurement N times per mode and prints a markdown table
(modes: `FAILURES`; "kill" is a power loss, "stop" a clean stop).
`--peer strongswan`: gwB runs charon instead of phalanxd and the tunnel
comes from IKEv2 (tests/netns/cluster_ike.py).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import failover_analysis as fa  # noqa: E402
import phxnet  # noqa: E402

NODE_COUNT = 3
HOSTA, HOSTB = "10.1.0.10", "10.2.0.10"
GWB_LAN = "10.2.0.1"
VIP_IN, VMAC_IN = "10.1.0.1", "02:00:5e:10:00:02"
VIP_OUT, VMAC_OUT = phxnet.GWA_WAN_V4, "02:00:5e:10:00:01"   # 192.0.2.1
GWB_WAN = phxnet.GWB_WAN_V4                                   # 192.0.2.2
# IPv6 (Cluster(lan6=True) / Cluster(wan6=True)).
HOSTA6, HOSTB6 = "fd01::10", "fd02::10"
GWB_LAN6 = "fd02::1"
VIP_IN6 = "fd01::1"
VIP_OUT6 = phxnet.GWA_WAN_V6                                  # 2001:db8:f::1
GWB_WAN6 = phxnet.GWB_WAN_V6                                  # 2001:db8:f::2
HEARTBEAT_PORT = 7400
# gwB's replay window (phxnet's SAs): a Phalanx peer's default, large
# enough for the cluster to spread one SA over its nodes.
PEER_WINDOW = 1024
GWB_WAN_MAC = "02:00:00:02:00:fe"
HOSTA_MAC = "02:00:00:01:00:fa"
SITE_A_MTU = 1400

# Copies delivered twice up to this long after the failure belong to the
# takeover (asserted by test_cluster.py); later ones come from false
# suspicions of live nodes on a loaded machine, which last until the
# log's Rejoin (delayed while Corosync reforms after the real failure:
# 1.6 s of copies in a CI dry run of db1a562) and are reported only.
TAKEOVER_WINDOW_S = 0.5

# Corosync totem tuning (token 1000 ms without the per-node coefficient,
# so 1 s whatever the node count; consensus 1.2 x token, Corosync's own
# default ratio; knet pings every 200 ms, link down after 500 ms).
COROSYNC_TOTEM = {
    "token": 1000,
    "token_coefficient": 0,
    "consensus": 1200,
    "join": 50,
    "knet_ping_interval": 200,
    "knet_ping_timeout": 500,
    "knet_pong_count": 1,
}


def node_addr(i, side):
    """Address of node i (1-based) on `side` ("lan", "wan", "cl"; IPv6:
    "lan6", "wan6")."""
    return {"lan": "10.1.0.1{}", "wan": "192.0.2.1{}", "cl": "10.99.0.1{}", "lan6": "fd01::1{}",
            "wan6": "2001:db8:f::1{}"}[side].format(i)


def node_mac(i, side):
    """The fixed MAC of node i's veth on `side` (02:00:00:SS:00:0i)."""
    return "02:00:00:{:02x}:00:{:02x}".format({"lan": 1, "wan": 2, "cl": 3}[side], i)


# ------------------------------------------------------------------ configs
def corosync_conf(node_dir, nodes, totem=None):
    """corosync.conf for one node (knet, no crypto: the cluster link is
    the test's own bridge), logging into node_dir/log."""
    t = dict(COROSYNC_TOTEM, **(totem or {}))
    lines = ["totem {", "    version: 2", "    cluster_name: phalanx", "    transport: knet",
             "    crypto_cipher: none", "    crypto_hash: none"]
    lines += ["    {}: {}".format(k, v) for k, v in t.items()]
    lines += ["    interface {", "        linknumber: 0", "    }", "}",
              "logging {", "    to_stderr: yes", "    to_logfile: yes",
              "    logfile: {}".format(os.path.join(node_dir, "log", "corosync.log")),
              "    to_syslog: no", "    timestamp: hires", "    debug: off", "}",
              "quorum {", "    provider: corosync_votequorum", "}", "nodelist {"]
    for i in range(1, nodes + 1):
        lines += ["    node {", "        name: n{}".format(i), "        nodeid: {}".format(i),
                  "        ring0_addr: {}".format(node_addr(i, "cl")), "    }"]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _toml_addresses(addresses):
    """`address = ` of a cluster side: one string, or an array of one per family."""
    if isinstance(addresses, str):
        addresses = [addresses]
    quoted = ['"{}"'.format(a) for a in addresses]
    return quoted[0] if len(quoted) == 1 else "[" + ", ".join(quoted) + "]"


def cluster_table(i, nodes, scheme, lease_len=4096, checkpoint_every=1024,
                  heartbeat_interval_ms=5, suspect_after_ms=30, kernel_filter=True, inside=VIP_IN, outside=VIP_OUT):
    """The `[cluster]` part of node i's phalanxd config (config contract
    in crates/phalanxd/src/config/cluster.rs). `inside`: one virtual
    address or a list of one per family; `outside`: one address (the
    tunnel endpoint)."""
    text = """
[cluster]
node_id = {i}
scheme = "{scheme}"
group = "phalanx"
heartbeat_port = {port}
heartbeat_interval_ms = {hb}
suspect_after_ms = {suspect}
lease_len = {lease}
checkpoint_every = {cp}
kernel_filter = {kf}

[cluster.outside]
interface = "wan0"
address = {vip_out}
mac = "{vmac_out}"

[cluster.inside]
interface = "lan0"
address = {vip_in}
mac = "{vmac_in}"
""".format(i=i, scheme=scheme, port=HEARTBEAT_PORT, hb=heartbeat_interval_ms, suspect=suspect_after_ms,
           lease=lease_len, cp=checkpoint_every, kf="true" if kernel_filter else "false",
           vip_out=_toml_addresses(outside), vmac_out=VMAC_OUT, vip_in=_toml_addresses(inside), vmac_in=VMAC_IN)
    for j in range(1, nodes + 1):
        text += '\n[[cluster.node]]\nid = {}\naddress = "{}"\n'.format(j, node_addr(j, "cl"))
    return text


def node_config(i, nodes, sas, node_dir, scheme="packet-rr", family="v4", peer_replay_window=PEER_WINDOW,
                **cluster_kw):
    """phalanxd TOML for node i: gwA's static SAs and policies of
    phxnet (local 192.0.2.1 = the outside virtual address, peer gwB;
    2001:db8:f::1 and ::2 with `family` "v6") shared by every node, plus
    its own `[cluster]`. `peer_replay_window`: what the outbound SA's
    peer (gwB) uses, as the nodes are told (None: not told)."""
    text = phxnet.gateway_config("A", sas, node_dir, comment="cluster node n{}".format(i), family=family,
                                 peer_replay_window=peer_replay_window)
    text = text.replace(os.path.join(node_dir, "gwA.sock"), os.path.join(node_dir, "phalanxd.sock"))
    return text + cluster_table(i, nodes, scheme, **cluster_kw)


# ---------------------------------------------------------------- topology
class Cluster(phxnet.Topology):
    """The namespaces above, Corosync and phalanxd per node, gwB. Process
    and namespace bookkeeping as in phxnet.Topology (lib.sh's format).
    `lan6`: site A and site B dual-stack, the inside virtual addresses
    10.1.0.1 and fd01::1; `wan6`: the WAN and the tunnel over IPv6 (see
    the module doc)."""

    def __init__(self, prefix=None, run_dir=None, nodes=NODE_COUNT, lan6=False, wan6=False):
        super().__init__(prefix=prefix or "pxc{}".format(os.getpid()), run_dir=run_dir)
        self.nodes = nodes
        self.lan6, self.wan6 = lan6, wan6
        self.wan_family = "v6" if wan6 else "v4"
        self.vip_out = VIP_OUT6 if wan6 else VIP_OUT
        self.gwb_wan = GWB_WAN6 if wan6 else GWB_WAN
        self.vips_in = [VIP_IN, VIP_IN6] if lan6 else [VIP_IN]
        names = ["sw", "hostA", "gwB", "hostB"] + ["n{}".format(i) for i in range(1, nodes + 1)]
        self.ns = {n: "{}-{}".format(self.prefix, n) for n in names}
        self.gateways = {}        # "n1".. / "gwB" -> phxnet.Gateway
        self.sas = None
        self.powered_off = {}     # node -> its frozen processes (crash_node)

    # -------------------------------------------------------- building
    def _ip(self, *args):
        proc = subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=20)
        if proc.returncode != 0:
            raise RuntimeError("ip {} failed: {}".format(" ".join(args), proc.stderr.strip()))

    def _ns_add(self, short):
        name = self.ns[short]
        if name in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split():
            raise RuntimeError("namespace {} already exists: refusing to reuse it".format(name))
        with open(os.path.join(self.run_dir, "namespaces"), "a") as f:
            f.write(name + "\n")
        self._ip("netns", "add", name)
        self._ip("-n", name, "link", "set", "lo", "up")
        if self.lan6 or self.wan6:
            self._quiet_ipv6(short)

    def _quiet_ipv6(self, short):
        """Before any interface exists (they inherit `default`): no
        duplicate address detection, no router solicitation or
        advertisement; the switch gets no IPv6 at all."""
        if short == "sw":
            self._sysctl(short, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
            return
        self._sysctl(short, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
                     "net.ipv6.conf.all.accept_ra=0", "net.ipv6.conf.default.accept_ra=0",
                     "net.ipv6.conf.default.router_solicitations=0")

    def _addr6(self, short, dev, addr):
        self._ip("-n", self.ns[short], "-6", "addr", "add", addr, "dev", dev, "nodad")

    def _sysctl(self, short, *settings):
        self.run(short, ["sysctl", "-qw"] + list(settings))

    def _port(self, short, dev, bridge, sw_dev, mac, addr=None):
        """A veth from namespace `short` (DEV) to the switch (SW_DEV on BRIDGE)."""
        ns, sw = self.ns[short], self.ns["sw"]
        self._ip("-n", ns, "link", "add", dev, "address", mac, "type", "veth", "peer", "name", sw_dev, "netns", sw)
        self._ip("-n", sw, "link", "set", sw_dev, "master", bridge, "up")
        if addr:
            self._ip("-n", ns, "addr", "add", addr, "dev", dev)
        self._ip("-n", ns, "link", "set", dev, "up")
        self._offload_off(short, dev)
        self._offload_off("sw", sw_dev)

    def _offload_off(self, short, dev):
        subprocess.run(["ip", "netns", "exec", self.ns[short], "ethtool", "-K", dev, "tso", "off", "gso", "off",
                        "gro", "off", "tx", "off", "rx", "off"], capture_output=True, timeout=10)

    def up(self):
        for short in self.ns:
            self._ns_add(short)
        sw = self.ns["sw"]
        for br in ("br-lan", "br-wan", "br-cl"):
            # ageing_time 0: no learning, every frame floods to every port.
            self._ip("-n", sw, "link", "add", br, "type", "bridge", "ageing_time", "0", "stp_state", "0",
                     "forward_delay", "0", "mcast_snooping", "0")
            self._ip("-n", sw, "link", "set", br, "up")
        self._port("hostA", "eth0", "br-lan", "hA-lan", HOSTA_MAC, HOSTA + "/24")
        # Site A's MTU leaves room for ESP on the 1500-byte WAN, as the
        # host-mode TUN's 1400 does (cluster nodes take frames off the LAN
        # with AF_PACKET; there is no TUN MTU in front of them).
        self._ip("-n", self.ns["hostA"], "link", "set", "eth0", "mtu", str(SITE_A_MTU))
        self._ip("-n", self.ns["hostA"], "route", "add", "default", "via", VIP_IN)
        if self.lan6:
            self._addr6("hostA", "eth0", HOSTA6 + "/64")
            self._ip("-n", self.ns["hostA"], "-6", "route", "add", "default", "via", VIP_IN6)
        self._port("gwB", "wan0", "br-wan", "gB-wan", GWB_WAN_MAC, GWB_WAN + "/24")
        if self.wan6:
            self._addr6("gwB", "wan0", GWB_WAN6 + "/64")
        ns_gwb, ns_hostb = self.ns["gwB"], self.ns["hostB"]
        self._ip("-n", ns_gwb, "link", "add", "lan0", "type", "veth", "peer", "name", "eth0", "netns", ns_hostb)
        self._ip("-n", ns_gwb, "addr", "add", GWB_LAN + "/24", "dev", "lan0")
        self._ip("-n", ns_hostb, "addr", "add", HOSTB + "/24", "dev", "eth0")
        for short, dev in (("gwB", "lan0"), ("hostB", "eth0")):
            self._ip("-n", self.ns[short], "link", "set", dev, "up")
            self._offload_off(short, dev)
        self._ip("-n", ns_hostb, "route", "add", "default", "via", GWB_LAN)
        self._sysctl("gwB", "net.ipv4.ip_forward=1")
        if self.lan6:
            self._addr6("gwB", "lan0", GWB_LAN6 + "/64")
            self._addr6("hostB", "eth0", HOSTB6 + "/64")
            self._ip("-n", ns_hostb, "-6", "route", "add", "default", "via", GWB_LAN6)
            self._sysctl("gwB", "net.ipv6.conf.all.forwarding=1")
        for i in range(1, self.nodes + 1):
            self._node_up(i)

    def _node_up(self, i):
        short = "n{}".format(i)
        for side in ("lan", "wan", "cl"):
            self._port(short, side + "0", "br-" + side, "n{}-{}".format(i, side), node_mac(i, side),
                       node_addr(i, side) + "/24")
        # Forwarding for decrypted packets (TUN -> lan0); no reverse-path
        # filter (they arrive from the TUN with site B sources).
        self._sysctl(short, "net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0",
                     "net.ipv4.conf.default.rp_filter=0")
        if self.lan6:
            self._addr6(short, "lan0", node_addr(i, "lan6") + "/64")
            self._sysctl(short, "net.ipv6.conf.all.forwarding=1")
        if self.wan6:
            self._addr6(short, "wan0", node_addr(i, "wan6") + "/64")

    def node_dir(self, i):
        d = os.path.join(self.run_dir, "n{}".format(i))
        for sub in ("", "lib", "log"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        return d

    def set_links(self, i, state):
        """Cuts (state "down") or restores ("up") node i's three cables at
        the switch side, all three in one `ip -batch` (one process: a few
        microseconds apart, not one `ip` start-up apart)."""
        batch = "".join("link set n{}-{} {}\n".format(i, side, state) for side in ("cl", "lan", "wan"))
        proc = subprocess.run(["ip", "-n", self.ns["sw"], "-batch", "-"], input=batch, capture_output=True,
                              text=True, timeout=20)
        if proc.returncode != 0:
            raise RuntimeError("ip -batch ({}) failed: {}".format(batch.strip(), proc.stderr.strip()))

    # -------------------------------------------------------- Corosync
    def start_corosync(self, i, totem=None):
        """Corosync of node i in its own mount namespace; the PID recorded
        is corosync's own (ip netns exec, unshare and sh all exec)."""
        d = self.node_dir(i)
        conf = os.path.join(d, "corosync.conf")
        with open(conf, "w") as f:
            f.write(corosync_conf(d, self.nodes, totem))
        script = ("mount -t tmpfs tmpfs /run && mount --bind {lib} /var/lib/corosync && "
                  "mount --bind {log} /var/log/corosync && exec corosync -f -c {conf}").format(
            lib=os.path.join(d, "lib"), log=os.path.join(d, "log"), conf=conf)
        return self.popen("corosync-n{}".format(i), "n{}".format(i), ["unshare", "-m", "sh", "-c", script])

    def corosync_members(self, i):
        """Node ids in node i's current Corosync membership (queried inside
        its network and mount namespaces), or None when it does not answer."""
        proc = self.procs.get("corosync-n{}".format(i))
        if proc is None or proc.poll() is not None:
            return None
        try:
            out = subprocess.run(["nsenter", "-t", str(proc.pid), "-m", "-n", "corosync-quorumtool", "-l", "-p"],
                                 capture_output=True, text=True, timeout=5)
        except subprocess.TimeoutExpired:
            return None
        if out.returncode != 0:
            return None
        ids = [int(line.split()[0]) for line in out.stdout.splitlines() if line.strip()[:1].isdigit()]
        return sorted(ids)

    def wait_corosync(self, expected, nodes=None, seconds=20):
        """Waits until every node in `nodes` reports membership `expected`;
        returns the seconds it took. Raises after `seconds`."""
        nodes = nodes or list(expected)
        start = time.monotonic()
        while True:
            seen = {i: self.corosync_members(i) for i in nodes}
            if all(m == sorted(expected) for m in seen.values()):
                return time.monotonic() - start
            if time.monotonic() - start > seconds:
                raise RuntimeError("Corosync membership not {} after {} s: {}".format(expected, seconds, seen))
            time.sleep(0.02)

    def kill(self, name):
        """SIGKILL one recorded process by PID and reap it."""
        proc = self.procs.pop(name, None)
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)

    # -------------------------------------------------------- phalanxd
    def write_configs(self, alg="aes128gcm16", encap="udp", seed="cluster", scheme="packet-rr", peer_window=None,
                      tell_nodes=True, **cluster_kw):
        """Static SAs shared by every node and gwB's mirror; returns paths.
        `peer_window`: gwB's replay window (default phxnet's 1024), which
        the nodes' outbound SA states as `peer_replay_window` unless
        `tell_nodes` is False."""
        told = (peer_window or PEER_WINDOW) if tell_nodes else None
        self.sas = phxnet.sa_table(alg, encap, seed, family=self.wan_family)
        cluster_kw.setdefault("inside", self.vips_in)
        cluster_kw.setdefault("outside", self.vip_out)
        paths = {}
        for i in range(1, self.nodes + 1):
            d = self.node_dir(i)
            paths["n{}".format(i)] = os.path.join(d, "phalanxd.toml")
            with open(paths["n{}".format(i)], "w") as f:
                f.write(node_config(i, self.nodes, self.sas, d, scheme=scheme, family=self.wan_family,
                                    peer_replay_window=told, **cluster_kw))
        paths["gwB"] = os.path.join(self.run_dir, "gwB.toml")
        with open(paths["gwB"], "w") as f:
            text = phxnet.gateway_config("B", self.sas, self.run_dir, comment="site B peer of the cluster",
                                         family=self.wan_family)
            if peer_window is not None:
                text = text.replace("replay_window = 1024\n", "replay_window = {}\n".format(peer_window))
            f.write(text)
        with open(os.path.join(self.run_dir, "sas.json"), "w") as f:
            json.dump(self.sas, f, indent=1)
        self.config_paths = paths
        return paths

    def start_node(self, i, wait=True):
        """phalanxd on node i (its Corosync must run); waits for its TUN
        and control socket and routes site B into the TUN."""
        short = "n{}".format(i)
        name = "phalanxd-" + short
        proc = self.popen(name, short, [os.path.join(phxnet.BIN_DIR, "phalanxd"), "--config",
                                        self.config_paths[short], "--foreground"])
        g = phxnet.Gateway(self, short, proc, os.path.join(self.node_dir(i), "phalanxd.sock"),
                           self.config_paths[short])
        g.name = name
        self.gateways[short] = g
        if wait:
            if not self.wait_dev(short, phxnet.TUN, 15) or not g.alive():
                time.sleep(0.2)
                raise RuntimeError("phalanxd on {} created no {} (alive={}):\n{}".format(
                    short, phxnet.TUN, g.alive(), self.log_of(name)[-4000:]))
            self._ip("-n", self.ns[short], "link", "set", phxnet.TUN, "up")
            self._ip("-n", self.ns[short], "route", "replace", phxnet.SITEB[0], "dev", phxnet.TUN)
            if self.lan6:
                self._ip("-n", self.ns[short], "-6", "route", "replace", phxnet.SITEB[1], "dev", phxnet.TUN)
            g.wait_socket(15)
        return g

    def start_gwb(self):
        g = self.start_gateway("B", self.config_paths["gwB"])
        self.gateways["gwB"] = g
        return g

    def start_all(self, scheme="packet-rr", **kw):
        """Corosync on every node (membership formed), gwB, phalanxd on
        every node, and the cluster ready (all members in every view)."""
        self.write_configs(scheme=scheme, **kw)
        for i in range(1, self.nodes + 1):
            self.start_corosync(i)
        all_ids = list(range(1, self.nodes + 1))
        self.wait_corosync(all_ids)
        self.start_gwb()
        for i in all_ids:
            self.start_node(i)
        self.wait_cluster_view(all_ids)

    def cluster_status(self, short):
        return self.gateways[short].ctl("cluster")

    def watch_machine(self):
        """Starts the machine witness (MACHINE_WITNESS), one per CPU, once."""
        if getattr(self, "_witnesses", None):
            return
        self._witnesses = []
        for cpu in sorted(os.sched_getaffinity(0)):
            name = "witness-cpu{}".format(cpu)
            self.popen(name, "sw", ["taskset", "-c", str(cpu), "chrt", "-f", "1", "/usr/bin/python3", "-c",
                                    MACHINE_WITNESS, str(WITNESS_THRESHOLD_MS / 1000)])
            self._witnesses.append(name)
        deadline = time.monotonic() + 10
        for name in self._witnesses:
            while "ready" not in self.log_of(name):
                if time.monotonic() > deadline or self.procs[name].poll() is not None:
                    raise RuntimeError("machine witness {} did not start: {}".format(name, self.log_of(name)))
                time.sleep(0.05)

    def machine_stalls(self, t_from, t_to):
        """[start, ms] of every stall a witness saw that overlaps [t_from, t_to)."""
        out = []
        for name in getattr(self, "_witnesses", []):
            for line in self.log_of(name).splitlines()[1:]:
                start, ms = (float(x) for x in line.split())
                if start < t_to and start + ms / 1000 > t_from:
                    out.append([round(start, 3), ms])
        return sorted(out)

    def wait_cluster_view(self, expected, nodes=None, seconds=20):
        """Waits until every node in `nodes` has every one of `expected` in
        its dispatch view, ready; returns the seconds it took."""
        nodes = nodes or list(expected)
        start = time.monotonic()
        while True:
            seen = {}
            for i in nodes:
                try:
                    seen[i] = status_view(self.cluster_status("n{}".format(i)))
                except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
                    seen[i] = str(e)[:200]
            if all(v == sorted(expected) for v in seen.values()):
                return time.monotonic() - start
            if time.monotonic() - start > seconds:
                raise RuntimeError("cluster view not {} after {} s: {}".format(expected, seconds, seen))
            time.sleep(0.1)

    def neighbour(self, short, addr, dev):
        """(lladdr, states) of `addr` in the neighbour cache of `dev` in
        namespace `short` (`ip neigh show`), or None without an entry or
        without a link-layer address (INCOMPLETE, FAILED)."""
        out = self.run(short, ["ip", "neigh", "show", "to", addr, "dev", dev]).stdout.split()
        if "lladdr" not in out:
            return None
        at = out.index("lladdr")
        return out[at + 1].lower(), [w for w in out[at + 2:] if w.isupper()]

    def flush_neighbour(self, short, addr, dev):
        """Removes `addr` from the neighbour cache of `dev` in `short`: the
        next packet to it resolves it again."""
        self.run(short, ["ip", "neigh", "flush", "to", addr, "dev", dev], check=False)

    def leftovers(self):
        """Namespaces of this run still present, recorded processes still
        alive (both empty after `down`)."""
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
        ns = [n for n in names if n.startswith(self.prefix + "-")]
        alive = [name for name, proc in self.procs.items() if proc.poll() is None]
        return ns, alive

    def crash_node(self, i):
        """A power loss of node i (failure mode "kill"): its Corosync and
        phalanxd stop at the same instant (SIGSTOP to both PIDs, back to
        back, before anything else) and its three cables go dark in one
        `ip -batch`. Nothing leaves the node any more: no clean departure
        (Corosync's leave message, the closed CPG connection of a dead
        phalanxd that Corosync announces), and no ICMP port unreachable
        from a kernel whose sockets closed, which SIGKILL leaves behind.
        The frozen processes never run again: `power_on` or `down` kill
        them (only the PIDs this run started)."""
        procs = [self.procs[name] for name in ("corosync-n{}".format(i), "phalanxd-n{}".format(i))
                 if name in self.procs and self.procs[name].poll() is None]
        for proc in procs:
            os.kill(proc.pid, signal.SIGSTOP)
        self.set_links(i, "down")
        self.powered_off[i] = procs
        self.gateways.pop("n{}".format(i), None)

    def power_on(self, i):
        """Node i after `crash_node` comes back as from a reboot: its frozen
        processes are killed (SIGKILL, cables still down, so their end
        sends nothing), its cables restored; start Corosync and phalanxd
        afresh."""
        for proc in self.powered_off.pop(i, []):
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        for name in ("corosync-n{}".format(i), "phalanxd-n{}".format(i)):
            self.procs.pop(name, None)
        self.set_links(i, "up")

    def stop_node(self, i):
        """A clean stop of node i (failure mode "stop"): phalanxd stopped
        (SIGTERM, waited for), then Corosync (SIGTERM), which announces
        its departure to the others."""
        self.stop("phalanxd-n{}".format(i))
        self.stop("corosync-n{}".format(i))
        self.gateways.pop("n{}".format(i), None)

    def down(self):
        # Powered-off nodes' frozen processes cannot take a SIGTERM.
        for i in list(self.powered_off):
            for proc in self.powered_off.pop(i):
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(10)
        # phalanxd before Corosync (it logs a lost Corosync otherwise).
        for name in sorted(self.procs, key=lambda n: not n.startswith("phalanxd")):
            self.stop(name)
        super().down()

    def save_logs(self, dest):
        """Copies the run's logs and captures (the run directory goes with
        `down`) to `dest`: every *.log and *.pcap, each node's corosync.log
        and charon's log when there is one."""
        os.makedirs(dest, exist_ok=True)
        for name in os.listdir(self.run_dir):
            if name.endswith((".log", ".pcap", ".json")):
                shutil.copy(os.path.join(self.run_dir, name), dest)
        for sub in ["n{}/log/corosync.log".format(i) for i in range(1, self.nodes + 1)] + ["charon-gwB/charon.log"]:
            path = os.path.join(self.run_dir, sub)
            if os.path.exists(path):
                shutil.copy(path, os.path.join(dest, sub.replace("/log/", "-").replace("/", "-")))

    def dump_logs(self, stream=sys.stderr, tail=3000):
        for name in sorted(os.listdir(self.run_dir)):
            if name.endswith(".log"):
                stream.write("--- {} (tail)\n{}\n".format(name, self.log_of(name[:-4])[-tail:]))
        for i in range(1, self.nodes + 1):
            path = os.path.join(self.run_dir, "n{}".format(i), "log", "corosync.log")
            if os.path.exists(path):
                with open(path) as f:
                    stream.write("--- n{} corosync.log (tail)\n{}\n".format(i, f.read()[-tail:]))


# ----------------------------------------------------------------- traffic
UDP_SEND = r"""
import json, socket, struct, sys, time
dst, port, rate, secs, size = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
n, errors, pad = int(rate * secs), 0, b"x" * max(0, size - 24)
t0, wall0 = time.monotonic(), time.time()
for i in range(n):
    delay = t0 + i / rate - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    try:
        s.sendto(struct.pack("!Qdd", i, wall0, rate) + pad, (dst, port))
    except OSError:
        errors += 1
print(json.dumps({"sent": n, "errors": errors, "start": wall0, "rate": rate}), flush=True)
"""

# Counts each sequence number once; duplicates (a packet delivered twice:
# two nodes processed it, or a replay got through) are counted apart.
UDP_RECV = r"""
import json, socket, struct, sys, time
port, n, limit = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind(("0.0.0.0", port))
s.settimeout(0.2)
print("ready", flush=True)
seen, got, dups, start, rate, dup_list = bytearray(n), 0, 0, None, None, []
stop = time.monotonic() + limit
last_rx = time.monotonic()
while time.monotonic() < stop:
    try:
        data = s.recv(65535)
    except socket.timeout:
        if got and seen[n - 1] and time.monotonic() - last_rx > 0.5:
            break
        continue
    last_rx = time.monotonic()
    i, start, rate = struct.unpack("!Qdd", data[:24])
    if i >= n:
        continue
    if seen[i]:
        dups += 1
        if len(dup_list) < 10000:
            dup_list.append([i, time.time()])
    else:
        seen[i], got = 1, got + 1
runs, i = [], 0
while i < n:
    if not seen[i]:
        j = i
        while j + 1 < n and not seen[j + 1]:
            j += 1
        runs.append([i, j])
        i = j
    i += 1
print(json.dumps({"expected": n, "received": got, "duplicates": dups, "lost": n - got, "lost_runs": runs,
                  "dup_list": dup_list, "start": start, "rate": rate}), flush=True)
"""


class UdpStream:
    """A fixed-rate UDP stream (sequence-numbered datagrams) from `src` to
    `dst_addr` in namespace `dst`, with its receiver."""

    def __init__(self, cl, name, src, dst, dst_addr, port, rate, seconds, size=200):
        self.cl, self.name, self.src, self.dst = cl, name, src, dst
        self.dst_addr, self.port, self.rate, self.seconds, self.size = dst_addr, port, rate, seconds, size
        self.expected = int(rate * seconds)

    def start(self):
        rx = self.cl.popen(self.name + "-rx", self.dst, ["/usr/bin/python3", "-c", UDP_RECV, str(self.port),
                                                         str(self.expected), str(self.seconds + 15)])
        deadline = time.monotonic() + 10
        while "ready" not in self.cl.log_of(self.name + "-rx"):
            if time.monotonic() > deadline or rx.poll() is not None:
                raise RuntimeError("UDP receiver {} did not start".format(self.name))
            time.sleep(0.05)
        self.cl.popen(self.name + "-tx", self.src, ["/usr/bin/python3", "-c", UDP_SEND, self.dst_addr,
                                                    str(self.port), str(self.rate), str(self.seconds),
                                                    str(self.size)])
        return self

    def result(self, timeout=30):
        """{sent, expected, received, duplicates, lost, lost_runs, start, rate}."""
        for part in ("-tx", "-rx"):
            self.cl.procs[self.name + part].wait(timeout)
        tx = json.loads(self.cl.log_of(self.name + "-tx").strip().splitlines()[-1])
        rx = json.loads(self.cl.log_of(self.name + "-rx").strip().splitlines()[-1])
        rx["sent"], rx["send_errors"] = tx["sent"], tx["errors"]
        rx["start"], rx["rate"] = tx["start"], tx["rate"]
        return rx


# Records the times the machine itself stopped running a thread: a loop
# that sleeps 2 ms under SCHED_FIFO (no ordinary load delays it), pinned to
# one CPU, prints each wake-up that came more than THRESHOLD seconds after
# the last. Only the hypervisor taking the CPU away (steal) or a
# higher-priority real-time task delays it: what makes a node fall silent
# while its peers run, a suspicion the detector is right to raise.
MACHINE_WITNESS = r"""
import sys, time
threshold = float(sys.argv[1])
print("ready", flush=True)
last = time.monotonic()
while True:
    time.sleep(0.002)
    now = time.monotonic()
    if now - last > threshold:
        print("{:.6f} {:.1f}".format(time.time() - (now - last), (now - last) * 1000), flush=True)
    last = now
"""

WITNESS_THRESHOLD_MS = 10


DETECTOR_COUNTERS = ("suspicions", "heartbeat_gaps")


def detector_counts(cl, names):
    """Per node, its DETECTOR_COUNTERS."""
    out = {}
    for n in names:
        status = cl.cluster_status(n)
        out[n] = {c: status_counter(status, c) for c in DETECTOR_COUNTERS}
    return out


def lossless(cl, measure, names, suspect_after_ms, tries=4, own_gaps_explain=True):
    """Runs `measure()` -> (ok, detail) until an attempt is ok; returns
    that attempt's detail.

    A measurement of a cluster without failures must lose nothing. A
    failed attempt is void, and made again (at most `tries` in all), only
    when a stall explains it: some node suspected another during the
    attempt, and either the machine witness saw the machine stop a CPU
    for at least half of `suspect_after_ms`, or (`own_gaps_explain`) a
    node counted a gap of more than `suspect_after` between its own
    heartbeats while a node that suspected did not: that node stopped
    running alone, whatever stopped it. A node that silent is suspected
    by design, and the fence trades its share for loss (tests for that
    are the stall tests). Any other failed attempt fails at once, with
    what the counters, the witness and the nodes' logs saw."""
    cl.watch_machine()
    void = []
    for attempt in range(1, tries + 1):
        before, t0 = detector_counts(cl, names), time.time()
        ok, detail = measure()
        t1, after = time.time(), detector_counts(cl, names)
        if ok:
            if void:
                print("\n  {} void attempt(s) before this one: {}".format(len(void), void))
            return detail
        delta = {n: {c: after[n][c] - before[n][c] for c in DETECTOR_COUNTERS} for n in names}
        moved = {n: d["suspicions"] for n, d in delta.items() if d["suspicions"]}
        gapped = [n for n in names if delta[n]["heartbeat_gaps"]]
        stalls = cl.machine_stalls(t0, t1)
        long_stalls = [s for s in stalls if s[1] >= suspect_after_ms / 2]
        alone = own_gaps_explain and gapped and any(n not in gapped for n in moved)
        seen = "suspicions {}, own heartbeat gaps {}, machine stalls (start, ms) {}".format(
            moved or "none", {n: delta[n]["heartbeat_gaps"] for n in gapped} or "none", stalls or "none")
        if not (moved and (long_stalls or alone)):
            raise AssertionError("attempt {}: {}; {}; what the nodes logged of stalls and suspicions: {}".format(
                attempt, detail, seen, detector_log(cl, names)))
        void.append(seen)
        # A warning, so that the run's summary shows it even when the
        # next attempt passes (pytest keeps a passing test's output).
        warnings.warn("attempt {} void ({}): {}".format(attempt, seen, str(detail)[:300]))
        wait_view(cl, names)
    raise AssertionError("the machine stalled a CPU into a suspicion in every one of {} attempts: {}".format(
        tries, void))


DETECTOR_LINES = ("did not run for a while", "heartbeats stopped", "suspicion corrected")


def detector_log(cl, names, last=6):
    """Per node, the last `last` lines its phalanxd logged of its own stalls
    and of suspicions (ANSI colours and the message text left out)."""
    out = {}
    for n in names:
        lines = [line for line in cl.log_of("phalanxd-" + n).splitlines()
                 if any(k in line for k in DETECTOR_LINES)]
        out[n] = [" ".join(w for w in line.split() if "=" in w or w[:1].isdigit())[:160] for line in lines[-last:]]
    return out


def wait_view(cl, names, seconds=20):
    """Waits until every node in `names` dispatches over all of them again."""
    cl.wait_cluster_view([int(n[1:]) for n in names], seconds=seconds)


def lost_in(result, t_from, t_to):
    """Datagrams of a UdpStream result lost whose send time is in [t_from, t_to)."""
    n = 0
    for first, last in result["lost_runs"]:
        for i in range(first, last + 1):
            if t_from <= result["start"] + i / result["rate"] < t_to:
                n += 1
    return n


def unwrap_seq16(last, low):
    """The full count whose low 16 bits are `low`, nearest to `last` (the
    count of the previous reply): ping prints the echo's 16-bit sequence
    number (RFC 792), which wraps after 65,535 (655 s at 10 ms)."""
    delta = (low - last) & 0xFFFF
    return last + (delta - 0x10000 if delta >= 0x8000 else delta)


class Ping:
    """`ping -i 0.01` from hostA to hostB; result: sent, received, lost, lost
    seqs (counted past the 16-bit wrap: `unwrap_seq16`)."""

    def __init__(self, cl, seconds, interval=0.01, src="hostA", dst=HOSTB):
        self.cl, self.count, self.interval, self.src, self.dst = cl, int(seconds / interval), interval, src, dst

    def start(self):
        self.start_time = time.time()
        self.proc = self.cl.popen("ping", self.src, ["ping", "-D", "-n", "-i", str(self.interval), "-c",
                                                     str(self.count), "-W", "1", self.dst])
        return self

    def result(self, timeout=30):
        self.proc.wait(self.count * self.interval + timeout)
        return self.parse(self.cl.log_of("ping"))

    def parse(self, log):
        """The result from ping's output `log`."""
        first, dup_list = {}, []      # seq -> first reply time; [seq, time] of repeats
        seq = 0
        for line in log.splitlines():
            if "icmp_seq=" in line and "bytes from" in line and line.startswith("["):
                seq = unwrap_seq16(seq, int(line.split("icmp_seq=")[1].split()[0]))
                at = float(line[1:line.index("]")])
                if seq in first or "DUP!" in line:
                    dup_list.append([seq, at])
                else:
                    first[seq] = at
        lost = sorted(set(range(1, self.count + 1)) - set(first))
        return {"sent": self.count, "received": len(first), "lost": len(lost), "lost_seqs": lost[:50],
                "duplicates": len(dup_list), "dup_list": dup_list, "first": first}


def start_iperf_download(cl, seconds, rate=None, reverse=True):
    """iperf3 TCP hostB -> hostA (`-R`: the server in hostB sends), or
    hostA -> hostB with reverse=False."""
    cl.popen("iperf3-server", "hostB", ["iperf3", "-s", "-1", "-B", HOSTB])
    deadline = time.monotonic() + 10
    while ":5201 " not in cl.run("hostB", ["ss", "-ltn"], check=False).stdout:
        if time.monotonic() > deadline:
            raise RuntimeError("iperf3 server did not start")
        time.sleep(0.1)
    argv = ["iperf3", "-c", HOSTB, "-t", str(seconds), "-J"] + (["-R"] if reverse else [])
    if rate:
        argv += ["-b", str(rate)]
    return cl.popen("iperf3-client", "hostA", argv)


def iperf_result(cl, timeout=30):
    """Received Mbit/s of the transfer, or None when iperf3 failed."""
    proc = cl.procs.get("iperf3-client")
    if proc is None:
        return None
    try:
        proc.wait(timeout)
        rep = json.loads(cl.log_of("iperf3-client"))
        return rep["end"]["sum_received"]["bits_per_second"] / 1e6
    except (subprocess.TimeoutExpired, ValueError, KeyError):
        return None
    finally:
        cl.stop("iperf3-client")
        cl.stop("iperf3-server")


class WanCapture:
    """tcpdump on br-wan (or `iface`: "br-lan", "br-cl") in the switch
    namespace: every frame of the segment once (the bridge floods it to
    itself too: tcpdump makes it promiscuous). `snaplen` 96 keeps headers,
    SPI, sequence number and IV, over IPv4 and IPv6 (14 + 40 + 8 + 16)."""

    def __init__(self, cl, name, path, snaplen=96, bpf=None, immediate=False, iface="br-wan"):
        self.cl, self.name, self.path, self.snaplen, self.bpf = cl, name, path, snaplen, bpf
        self.immediate, self.iface = immediate, iface

    def __enter__(self):
        argv = ["tcpdump", "-i", self.iface, "-n", "-s", str(self.snaplen), "-B", "32768", "-U", "-w", self.path]
        if self.immediate:
            # Frames reach the file at once, not when libpcap's ring block
            # times out (up to 1 s later): the file is read while running.
            argv.insert(1, "--immediate-mode")
        if self.bpf:
            argv += self.bpf.split()
        proc = self.cl.popen(self.name, "sw", argv)
        deadline = time.monotonic() + 10
        while "listening on" not in self.cl.log_of(self.name):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("tcpdump did not start: " + self.cl.log_of(self.name))
            time.sleep(0.05)
        return self

    def stop(self):
        """Stops tcpdump (SIGINT); returns the packets it dropped."""
        proc = self.cl.procs.pop(self.name, None)
        if proc is not None and proc.poll() is None:
            time.sleep(0.2)
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        for line in self.cl.log_of(self.name).splitlines():
            if "dropped by kernel" in line:
                return int(line.split()[0])
        return None

    def __exit__(self, *exc):
        self.drops = self.stop()
        return False


# Reads hex frames up to a blank line, says "loaded", then writes them back
# to back on an AF_PACKET socket of gwB's WAN port when told "go": the
# re-sent frames must arrive within a few ms of the takeover (scapy's
# sendp took over a millisecond per frame here).
RESEND = r"""
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("wan0", 0))
print("ready", flush=True)
frames = []
for line in sys.stdin:
    if not line.strip():
        break
    frames.append(bytes.fromhex(line.strip()))
print("loaded", len(frames), flush=True)
sys.stdin.readline()
t0 = time.time()
sent = sum(1 for frame in frames if s.send(frame) == len(frame))
print("sent", sent, t0, time.time(), flush=True)
"""


class Resender:
    """Re-sends captured frames from gwB's WAN port (RESEND), started before
    it is needed; `load` hands it the frames, `go` sends them at once."""

    def __init__(self, cl):
        self.cl = cl
        self.log = os.path.join(cl.run_dir, "resend.log")
        with open(self.log, "w") as logf:
            self.proc = subprocess.Popen(["ip", "netns", "exec", cl.ns["gwB"], "/usr/bin/python3", "-c", RESEND],
                                         stdin=subprocess.PIPE, stdout=logf, stderr=subprocess.STDOUT, text=True)
        with open(os.path.join(cl.run_dir, "pids"), "a") as f:
            f.write("{} resend\n".format(self.proc.pid))
        cl.procs["resend"] = self.proc
        self._wait_for("ready", 20)

    def _wait_for(self, word, seconds):
        deadline = time.monotonic() + seconds
        while word not in self.cl.log_of("resend"):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("frame sender: no '{}': {}".format(word, self.cl.log_of("resend")))
            time.sleep(0.002)

    def load(self, frames):
        """Hands over captured frames (each to the outside virtual MAC) and
        waits until the sender holds them."""
        vmac = bytes.fromhex(VMAC_OUT.replace(":", ""))
        if any(frame[0:6] != vmac for _, frame in frames):
            raise ValueError("a frame not to the outside virtual MAC")
        self.proc.stdin.write("".join(frame.hex() + "\n" for _, frame in frames) + "\n")
        self.proc.stdin.flush()
        self._wait_for("loaded", 20)

    def go(self):
        """Sends what `load` handed over; returns (how many went out, the
        wall time the first was sent, when the last was)."""
        self.proc.communicate("go\n", timeout=60)
        self.cl.procs.pop("resend", None)
        line = [ln for ln in self.cl.log_of("resend").splitlines() if ln.startswith("sent ")][-1].split()
        return int(line[1]), float(line[2]), float(line[3])


# ------------------------------------------------------ status accessors
# `phalanxctl --json cluster` is phalanx-control's ClusterReport.
def status_view(status):
    """Sorted node ids of the live dispatch view (agreed, not suspected, ready)."""
    return sorted(m["node_id"] for m in status["members"] if m["live"])


def status_agreed(status):
    return sorted(m["node_id"] for m in status["members"] if m["agreed"])


def status_sa(status, spi, direction="out"):
    for sa in status["sas"]:
        if sa["spi"] == spi and sa["direction"] == direction:
            return sa
    raise KeyError("SA 0x{:x} ({}) not in the cluster status".format(spi, direction))


def takeover_range(status, spi, suspect):
    """(start, end) of the takeover block T(spi, suspect), or None."""
    for t in status_sa(status, spi)["takeover_blocks"]:
        if t["suspect"] == suspect:
            return t["block"]["start"], t["block"]["end"]
    return None


def status_counter(status, name):
    return sum(c["count"] for c in status["counters"] if c["name"] == name)


def udp_rcvbuf_errors(cl, ns):
    """UDP datagrams the kernel of namespace `ns` dropped for a full
    receive buffer (/proc/net/snmp Udp RcvbufErrors, IPv4)."""
    lines = [line.split() for line in cl.run(ns, ["cat", "/proc/net/snmp"]).stdout.splitlines()
             if line.startswith("Udp:")]
    return int(dict(zip(lines[0][1:], lines[1][1:]))["RcvbufErrors"])


def replay_drops(gw):
    """(replayed, too_old): inbound packets the replay window refused as a
    duplicate inside it, and as left of it (RFC 4303 §3.4.3)."""
    c = gw.counters()
    return c.get("replayed", 0), c.get("too_old", 0)


def replay_windows(gw):
    """{SPI: replay window size} of the node's inbound SAs."""
    return {sa["spi"]: sa["replay_window"] for sa in gw.ctl("sas") if sa["direction"] == "in"}


def not_owned_decided(gw):
    """(kernel, user space): inbound ESP another node owns, dropped by the
    kernel filter (socket filter or XDP), and decided by user space."""
    c = gw.counters()
    return (c.get("daemon.cluster_inbound_not_owned_kernel", 0), c.get("daemon.cluster_inbound_not_owned", 0))


def fenced_drops(gw):
    """Inbound packets a node dropped because another node may have
    processed them (phalanx_cluster::fence)."""
    return gw.counters().get("daemon.cluster_inbound_fenced", 0)


# ---------------------------------------------------------------- failover
def owned(gw):
    """Packets this node processed (owned), outbound and inbound."""
    c = gw.counters()
    return c.get("daemon.cluster_outbound_owned", 0) + c.get("daemon.cluster_inbound_owned", 0)


def _rejoin(cl, victim, mode, res):
    """Brings the failed node back (links up; or powered on, or after a
    clean stop, Corosync + phalanxd started afresh) and waits until every
    node has it in its view again."""
    t = time.time()
    if mode == "cut":
        cl.set_links(victim, "up")
    else:
        if mode == "kill":
            cl.power_on(victim)
        cl.start_corosync(victim)
    everyone = list(range(1, cl.nodes + 1))
    cl.wait_corosync(everyone, seconds=20)
    if mode != "cut":
        cl.start_node(victim)
    cl.wait_cluster_view(everyone, seconds=30)
    res.update(t_rejoin=t, rejoin_s=time.time() - t, owned_at_rejoin=owned(cl.gateways["n{}".format(victim)]))


# Re-sent frames: gwB's ESP of the last REPLAY_SPAN_S before the failure,
# each at most half its SA's replay window behind the newest number gwB had
# sent when they are chosen (the other half is the margin for what gwB
# sends until they arrive, a few ms later: with the TCP download of
# bench/cluster-failover.sh that is thousands of packets a second). Frames
# further back would be refused as `too_old` by any receiver, whether it
# carried the failed node's window over or not: the check could not fail.
REPLAY_SPAN_S = 0.05


def _replay_choice(frames, now, windows):
    """The frames to re-send (see REPLAY_SPAN_S), oldest first, of gwB's
    small frames `frames` captured up to `now`, the moment before the
    failure; `windows`: {SPI: the survivors' replay window}."""
    recent = [(ts, frame) for ts, frame in frames if ts >= now - REPLAY_SPAN_S]
    esp = [(ts, frame, fa.parse_esp(ts, frame)) for ts, frame in fa.select_frames(recent, src_mac=GWB_WAN_MAC)]
    esp = [(ts, frame, p) for ts, frame, p in esp if p is not None and p.spi in windows]
    newest = {}
    for _, _, p in esp:
        newest[p.spi] = max(newest.get(p.spi, 0), p.seq)
    return [(ts, frame) for ts, frame, p in esp if newest[p.spi] - p.seq < windows[p.spi] // 2]


def replay_arrivals(pcap, resent, t_replay, windows):
    """Where each re-sent frame arrived relative to its SA's replay window,
    from the WAN capture: [(spi, seq, seconds after t_replay, how far
    behind the newest number gwB had sent before it, inside the window)]."""
    todo = {(spi, seq) for spi, seq in resent}
    newest, out = {}, []
    for p in fa.read_esp(pcap):
        if p.src_mac != GWB_WAN_MAC:
            continue
        key = (p.spi, p.seq)
        if p.ts >= t_replay and key in todo:
            todo.discard(key)
            behind = newest.get(p.spi, p.seq) - p.seq
            out.append((p.spi, p.seq, p.ts - t_replay, behind, behind < windows.get(p.spi, 0)))
        else:
            newest[p.spi] = max(newest.get(p.spi, 0), p.seq)
    return out


def _replay(cl, res, t_taken_over, chosen, resender, windows, victim):
    """Sends the chosen frames (`Resender.load` already has them) and
    records what went out, for `_replay_verdicts`."""
    res["t_replay"] = time.time()
    sent, t_begin, t_end = resender.go()
    res["replays_sent"] = sent
    res["replay_resent"] = [(p.spi, p.seq) for p in (fa.parse_esp(ts, frame) for ts, frame in chosen)]
    res["replay_windows"] = windows
    res["replay_s"] = (t_begin - res["t_fail"], t_end - res["t_fail"])
    res["replay_after_takeover_ms"] = None if t_taken_over is None else (t_begin - t_taken_over) * 1000.0
    res["replay_sent_within_ms"] = (t_end - t_begin) * 1000.0
    # packet-rr inbound: owner = view[seq % n], view [1, 2, 3].
    res["replays_of_failed_share"] = sum(1 for _, seq in res["replay_resent"] if seq % cl.nodes == victim - 1)


def _replay_verdicts(cl, res, pcap):
    """From the WAN capture: which re-sent frames arrived inside their
    window, how far behind, how soon after the takeover."""
    arrivals = replay_arrivals(pcap, res["replay_resent"], res["t_replay"], res["replay_windows"])
    inside = [a for a in arrivals if a[4]]
    n = cl.nodes
    res["replays_seen_on_wire"] = len(arrivals)
    res["replays_in_window"] = len(inside)
    res["replays_in_window_of_failed_share"] = sum(1 for a in inside if a[1] % n == res["failed"] - 1)
    res["replay_behind"] = (min(a[3] for a in arrivals), max(a[3] for a in arrivals)) if arrivals else None
    res["replay_arrived_ms"] = ((min(a[2] for a in arrivals) * 1000.0, max(a[2] for a in arrivals) * 1000.0)
                                if arrivals else None)


class StaticPeer:
    """Site B for `failover_run`: a host-mode phalanxd with the static SAs
    of `Cluster.write_configs` (started by `Cluster.start_all`). The hooks
    let another peer (cluster_ike.StrongSwanPeer) add its own checks."""

    name = "phalanx"
    description = "host-mode phalanxd at gwB, static SAs"

    def __init__(self, cl):
        self.cl = cl

    def out_spi(self):
        """The SPI of the SA the cluster sends on (a-to-b)."""
        return self.cl.sas[0]["spi"]

    def victim(self, rep, mode):
        """The node that fails in repetition `rep` (1-based): n1, n2, n3, ..."""
        return (rep - 1) % self.cl.nodes + 1

    def victim_now(self, planned):
        """The node to fail, decided right before the failure (default: `planned`)."""
        return planned

    def before_failure(self, res):
        """Called just before the failure."""

    def after_traffic(self, res, t_fail, survivors):
        """Called when the traffic has ended, the WAN capture still running."""

    def analyse(self, res, pcap, t_fail):
        """Called with the finished WAN capture."""

    def columns(self):
        """Extra table columns: [(name, format)]."""
        return []

    def row(self, res):
        """Extra table cells for one run (may override the common ones)."""
        return {}


# How node `victim` fails, by mode.
FAILURES = {
    "kill": Cluster.crash_node,                            # a power loss
    "cut": lambda cl, i: cl.set_links(i, "down"),          # its three cables cut; it runs on, alone
    "stop": Cluster.stop_node,                             # phalanxd and Corosync stopped cleanly
}


def failover_run(cl, victim=3, mode="kill", seconds=10.0, udp_rate=500, tcp=False, tcp_rate=None,
                 replay=True, rejoin=False, out_dir=None, peer=None, stall=None):
    """The failover experiment on a running cluster: a WAN capture, a 10 ms
    ping, fixed-rate UDP both ways (and an iperf3 TCP download), node
    `victim` failing at 30 % of the run (FAILURES: mode "kill", a power
    loss: Corosync and phalanxd frozen at once and its cables dark; "cut":
    its three cables down at the switch, the node running on; "stop":
    phalanxd and Corosync stopped cleanly); captured ESP from gwB re-sent
    as soon as the survivors took over (REPLAY_SPAN_S); optionally the node
    brought back. `stall`: (node, seconds): that node's phalanxd is also
    stopped (SIGSTOP) for that long right after the failure, so that the
    others suspect it falsely while Corosync reforms. `peer`: site B's
    hooks (default StaticPeer). Returns a dict of everything measured."""
    out_dir = out_dir or cl.run_dir
    peer = peer or StaticPeer(cl)
    out_spi = peer.out_spi()            # what the cluster sends
    wan = WanCapture(cl, "tcpdump-wan", os.path.join(out_dir, "wan.pcap"))
    small = WanCapture(cl, "tcpdump-gwb", os.path.join(out_dir, "gwb-small.pcap"), snaplen=0,
                       bpf="ether src {} and less 400".format(GWB_WAN_MAC), immediate=True)
    resender = Resender(cl) if replay else None
    res = {"mode": mode, "failed": victim, "seconds": seconds, "udp_rate": udp_rate, "t_replay": float("inf")}
    owned_before = {i: owned(cl.gateways["n{}".format(i)]) for i in range(1, cl.nodes + 1)}
    with wan, small:
        streams = [UdpStream(cl, "udp-out", "hostA", "hostB", HOSTB, 5001, udp_rate, seconds).start(),
                   UdpStream(cl, "udp-in", "hostB", "hostA", HOSTA, 5002, udp_rate, seconds).start()]
        ping = Ping(cl, seconds).start()
        t_start = time.time()
        if tcp:
            start_iperf_download(cl, seconds, tcp_rate)
        time.sleep(max(0.0, t_start + seconds * 0.3 - time.time()))
        res["failed"] = victim = peer.victim_now(victim)
        survivors = [i for i in range(1, cl.nodes + 1) if i != victim]
        before = cl.cluster_status("n{}".format(survivors[0]))
        trange = takeover_range(before, out_spi, victim)
        replays_before = [replay_drops(cl.gateways["n{}".format(i)]) for i in survivors]
        fenced_before = sum(fenced_drops(cl.gateways["n{}".format(i)]) for i in survivors)
        decided_before = {i: not_owned_decided(cl.gateways["n{}".format(i)]) for i in survivors}
        windows = replay_windows(cl.gateways["n{}".format(survivors[0])]) if replay else {}
        if replay:
            # Chosen and handed to the sender right before the failure
            # (the capture is written as frames come: it lags by about a
            # millisecond), so that they can go as soon as the survivors
            # took over, however long the failure itself takes to inflict
            # (a clean stop waits for phalanxd to exit). The capture is
            # read ahead: its last moments then take a millisecond.
            small_tail = fa.PcapTail(small.path)
            recent = [f for f in small_tail.frames() if f[0] >= time.time() - 1.0]
            chosen = _replay_choice(recent + small_tail.read(), time.time(), windows)
            resender.load(chosen)
        peer.before_failure(res)
        res["t_fail"] = t_fail = time.time()
        FAILURES[mode](cl, victim)
        if stall:
            res["stall"] = _stall(cl, *stall)
        block, t_taken_over = _await_takeover(cl, survivors, out_spi, victim)
        trange = block or trange
        res["takeover_seen_s"] = None if t_taken_over is None else t_taken_over - t_fail
        if replay:
            _replay(cl, res, t_taken_over, chosen, resender, windows, victim)
        else:
            res["replays_sent"] = res["replays_of_failed_share"] = 0
        res["corosync_confirm_s"] = _confirm(cl, survivors, t_fail)
        # Counters are published every 100 ms: this covers the suspicion
        # up to Corosync's confirmation.
        time.sleep(0.15)
        res["not_owned_while_silent"] = {
            i: tuple(a - b for a, b in zip(not_owned_decided(cl.gateways["n{}".format(i)]), decided_before[i]))
            for i in survivors}
        time.sleep(0.2)
        after = {i: cl.cluster_status("n{}".format(i)) for i in survivors}
        replays_after = [replay_drops(cl.gateways["n{}".format(i)]) for i in survivors]
        res["replays_replayed"], res["replays_too_old"] = (
            sum(a[k] - b[k] for a, b in zip(replays_after, replays_before)) for k in (0, 1))
        res["replays_refused"] = res["replays_replayed"] + res["replays_too_old"]
        # Replays (and live packets) a survivor dropped while another one
        # may have processed them: refused too, by the fence.
        res["fenced_meanwhile"] = sum(fenced_drops(cl.gateways["n{}".format(i)]) for i in survivors) - fenced_before
        if rejoin:
            _rejoin(cl, victim, mode, res)
        res["udp_out"], res["udp_in"] = (st.result(seconds + 30) for st in streams)
        res["ping"] = ping.result()
        res["tcp_mbps"] = iperf_result(cl, seconds + 30) if tcp else None
        peer.after_traffic(res, t_fail, survivors)
    res["capture_drops"] = (wan.drops or 0) + (small.drops or 0)
    res["owned_delta"] = {i: owned(cl.gateways["n{}".format(i)]) - owned_before[i] for i in survivors}
    if rejoin:
        res["owned_since_rejoin"] = owned(cl.gateways["n{}".format(victim)]) - res["owned_at_rejoin"]
    # The takeovers of the failed node; a suspicion of it before the
    # failure that was corrected (a stall under load) is a false one, and
    # its handover must not pass for the failover's.
    res["failovers"] = {i: [f for f in st["failovers"] if _of_the_failure(f, victim)] for i, st in after.items()}
    # Suspicions of nodes that did not fail (heartbeats late under load).
    res["false_suspicions"] = {i: [f for f in st["failovers"] if not _of_the_failure(f, victim)]
                               for i, st in after.items()}
    res["counters_after"] = {i: {c["name"]: c["count"] for c in st["counters"]} for i, st in after.items()}
    res["takeover_range"] = trange
    res["final_counters"] = {}
    for name, gw in cl.gateways.items():
        try:
            res["final_counters"][name] = {k: v for k, v in gw.counters().items() if v}
        except (RuntimeError, subprocess.TimeoutExpired, ValueError):
            pass        # a node that is down or cut off
    _analyse(cl, res, wan.path, out_spi, victim, t_fail, trange)
    if replay:
        _replay_verdicts(cl, res, wan.path)
    peer.analyse(res, wan.path, t_fail)
    classify_duplicates(res)
    with open(os.path.join(out_dir, "result.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    return res


def _stall(cl, node, seconds):
    """Stops node's phalanxd for `seconds` (SIGSTOP, SIGCONT): its
    heartbeats stop, its ring keeps the frames. Returns (stopped, resumed)."""
    pid = cl.gateways["n{}".format(node)].proc.pid
    os.kill(pid, signal.SIGSTOP)
    stopped = time.time()
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)
    return stopped, time.time()


def _of_the_failure(failover, victim):
    """A failover record of `victim` not corrected since: an earlier false
    suspicion of the same node (a stall under load), handed back, is not
    the takeover of its failure."""
    return failover["suspect"] == victim and failover["outcome"] != "corrected"


def _took_over(status, victim):
    """Whether the node's latest failover of `victim` is of the failure
    and has its data path switched over."""
    mine = [f for f in status["failovers"] if f["suspect"] == victim]
    return bool(mine) and _of_the_failure(mine[-1], victim) and mine[-1].get("handover_ms") is not None


def _await_takeover(cl, survivors, spi, victim, seconds=1.0):
    """Polls the survivors right after the failure, before Corosync's
    membership moves everyone to fresh blocks, until every one of them
    recorded the takeover of `victim` with its data path switched over
    (`_took_over`), or (a clean stop) agreed it left. Returns ((start,
    end) of the block a survivor sends from once it took over (its view
    leaves `victim` out) or None, the wall time all had taken over or
    None after `seconds`)."""
    deadline, block, done = time.time() + seconds, None, set()
    while time.time() < deadline:
        for i in survivors:
            try:
                status = cl.cluster_status("n{}".format(i))
                sa_block = status_sa(status, spi)["block"]
            except (RuntimeError, KeyError, subprocess.TimeoutExpired):
                continue
            if block is None and sa_block and victim not in sa_block["view"]:
                block = sa_block["start"], sa_block["end"]
            if _took_over(status, victim) or victim not in status_agreed(status):
                done.add(i)
        if done == set(survivors):
            return block, time.time()
        time.sleep(0.002)
    return block, None


def _confirm(cl, survivors, t_fail):
    """Seconds from the failure until Corosync on every survivor agrees
    that only the survivors are left (None: not within 15 s)."""
    try:
        cl.wait_corosync(survivors, seconds=15)
    except RuntimeError:
        return None
    return time.time() - t_fail


def _analyse(cl, res, pcap, out_spi, victim, t_fail, trange):
    pkts = [p for p in fa.read_esp(pcap) if p.src == cl.vip_out]
    macs = {node_mac(i, "wan"): i for i in range(1, cl.nodes + 1)}
    res["wire"] = fa.wire_checks(pkts, macs)
    res["handover"] = fa.handover(pkts, out_spi, victim, t_fail, trange)
    ho = res["handover"]["handover"]
    res["handover_ms"] = None if ho is None else ho * 1000.0
    window = (t_fail - 0.1, t_fail + 1.5)
    res["lost_at_failover"] = {k: lost_in(res[k], *window) for k in ("udp_out", "udp_in")}
    if "t_rejoin" in res:
        w = (res["t_rejoin"], res["t_rejoin"] + res["rejoin_s"] + 1.0)
        res["lost_at_rejoin"] = {k: lost_in(res[k], *w) for k in ("udp_out", "udp_in")}
    hos = [f["handover_ms"] for fs in res["failovers"].values() for f in fs if f.get("handover_ms") is not None]
    res["phalanxd_handover_ms"] = max(hos) if hos else None


def classify_duplicates(res):
    """Splits the copies delivered twice into replays accepted (a copy
    that arrived after the re-sending began, of a packet sent before the
    failure: only a re-sent capture can deliver it then) and packets
    processed twice by the cluster (every other copy)."""
    t_fail, t_replay = res["t_fail"], res.get("t_replay", float("inf"))
    first = res["ping"]["first"]
    sent_at = {
        "udp_out": lambda seq: res["udp_out"]["start"] + seq / res["udp_out"]["rate"],
        "udp_in": lambda seq: res["udp_in"]["start"] + seq / res["udp_in"]["rate"],
        "ping": lambda seq: first.get(seq, float("inf")),
    }
    replayed, twice = 0, {}
    for k in ("udp_out", "udp_in", "ping"):
        twice[k] = []
        for seq, at in res[k]["dup_list"]:
            if k != "udp_out" and at >= t_replay and sent_at[k](seq) <= t_fail:
                replayed += 1
            else:
                twice[k].append(at)
    res["replays_accepted"] = replayed
    res["delivered_twice"] = sum(len(v) for v in twice.values())
    # Copies at the takeover itself (the survivors' detectors disagree for
    # a few milliseconds by design; the handover ends within 100 ms).
    res["twice_at_failover"] = {k: sum(1 for at in v if t_fail - 0.1 <= at < t_fail + TAKEOVER_WINDOW_S)
                                for k, v in twice.items()}


def replays_accepted(res):
    """Re-sent packets that came out on hostA again."""
    return res["replays_accepted"]


def table_row(run, res):
    """One row of failover_analysis.COLUMNS."""
    w = res["wire"]
    return {
        "run": run, "mode": res["mode"], "failed": res["failed"],
        "handover ms (WAN capture)": res["handover_ms"], "handover ms (phalanxd)": res["phalanxd_handover_ms"],
        "Corosync confirmed s": res["corosync_confirm_s"],
        "ping 10 ms lost": "{} / {}".format(res["ping"]["lost"], res["ping"]["sent"]),
        "UDP out lost / sent": "{} / {}".format(res["udp_out"]["lost"], res["udp_out"]["sent"]),
        "UDP in lost / sent": "{} / {}".format(res["udp_in"]["lost"], res["udp_in"]["sent"]),
        "TCP down Mbit/s": res["tcp_mbps"],
        "replays re-sent / in window / replayed / too old / accepted": "{} / {} / {} / {} / {}".format(
            res["replays_sent"], res.get("replays_in_window", "-"), res.get("replays_replayed", "-"),
            res.get("replays_too_old", "-"), replays_accepted(res)),
        "delivered twice": res["delivered_twice"],
        "dup (SPI, IV)": w["dup_spi_iv"], "dup (SPI, seq)": w["dup_spi_seq"],
        "capture drops": res["capture_drops"],
    }


def bench_header(args, peer):
    """The lines above the table: what ran, where, with which settings."""
    rev = subprocess.run(["git", "-C", phxnet.REPO, "describe", "--always", "--dirty=+dirty"],
                         capture_output=True, text=True).stdout.strip()
    kernel = os.uname().release
    return "\n".join([
        "### {} — {}".format(time.strftime("%Y-%m-%d"), rev or "unknown"),
        "",
        "- machine: {} cores, kernel {}; 3 nodes + gwB + hosts in network namespaces, bridges that flood "
        "(ageing_time 0), veth offloads off".format(os.cpu_count(), kernel),
        "- cluster: scheme {}, heartbeat 5 ms, suspect after 30 ms, lease {}; Corosync 3.1.7 knet, "
        "token {} ms (coefficient 0), consensus {} ms".format(args.scheme, args.lease_len, COROSYNC_TOTEM["token"],
                                                               COROSYNC_TOTEM["consensus"]),
        "- traffic for {} s: iperf3 TCP download hostB -> hostA (-R{}), ping every 10 ms hostA -> hostB, UDP "
        "{} pps each way (200 B); failure at 30 %".format(
            args.seconds, ", -b " + args.tcp_rate if args.tcp_rate else "", args.udp_rate),
        "- handover (WAN capture): last ESP packet from the failed node (node id = explicit IV >> 48) to the "
        "first ESP packet a survivor sends from the takeover lease T(SPI, failed); handover (phalanxd): the "
        "survivors' own record, last heartbeat -> takeover (the larger of the two survivors)",
        "- replays: gwB's ESP frames of the last {:.0f} ms before the failure, each at most half its SA's replay "
        "window behind gwB's newest number, re-sent (an AF_PACKET socket at gwB, to the virtual MAC) as soon as "
        "every survivor had taken over; in window = arrived less than the window behind gwB's newest number (WAN capture); "
        "replayed / too old = the survivors' counters; accepted = duplicates delivered to hostA".format(
            REPLAY_SPAN_S * 1000),
        "- site B: {}".format(peer.description),
        "- command: `{}bench/cluster-failover.sh {}` (modes {})".format(
            "" if peer.name == "phalanx" else "FAILOVER_PEER={} ".format(peer.name), args.reps, " ".join(args.modes)),
        "",
    ])


def start_peer(cl, args):
    """The cluster and site B of `args.peer`, started; returns the peer."""
    if args.peer == "strongswan":
        import cluster_ike      # imports this module: only when asked for
        return cluster_ike.StrongSwanPeer(cl, scheme=args.scheme, lease_len=args.lease_len)
    cl.start_all(scheme=args.scheme, lease_len=args.lease_len)
    return StaticPeer(cl)


def bench(args):
    rows, raw, peer = [], [], None
    out = args.out or tempfile.mkdtemp(prefix="cluster-failover.")
    os.makedirs(out, exist_ok=True)
    for rep in range(1, args.reps + 1):
        for mode in args.modes:
            cl = Cluster(prefix="pxc{}b{}{}".format(os.getpid(), rep, mode[0]))
            try:
                cl.up()
                peer = start_peer(cl, args)
                res = failover_run(cl, victim=peer.victim(rep, mode), mode=mode, seconds=args.seconds,
                                   udp_rate=args.udp_rate, tcp=True, tcp_rate=args.tcp_rate, out_dir=cl.run_dir,
                                   peer=peer)
                rows.append(dict(table_row(rep, res), **peer.row(res)))
                raw.append(res)
                phxnet.log("rep {} {}: handover {} ms".format(rep, mode, res["handover_ms"]))
            except Exception:
                cl.dump_logs()
                raise
            finally:
                cl.save_logs(os.path.join(out, "rep{}-{}".format(rep, mode)))
                cl.down()
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(raw, f, indent=1, default=str)
    text = (bench_header(args, peer) + fa.markdown_table(rows, fa.COLUMNS + peer.columns()) + "\n\n"
            + fa.summary(raw) + "\n")
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text)
    print(text)
    phxnet.log("raw results: {}".format(out))
    return 0


def corosync_only(args):
    for _ in range(args.reps):
        cl = Cluster()
        try:
            cl.up()
            for i in range(1, cl.nodes + 1):
                cl.start_corosync(i)
            formed = cl.wait_corosync([1, 2, 3])
            cl.kill("corosync-n3")
            left = cl.wait_corosync([1, 2], nodes=[1, 2])
            print("formed in {:.2f} s, n3 (kill -9) gone after {:.2f} s".format(formed, left))
        finally:
            cl.down()
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corosync", help="form a Corosync membership, kill -9 one, time the change")
    c.add_argument("--reps", type=int, default=1)
    f = sub.add_parser("failover", help="the failover measurement; prints a markdown table")
    f.add_argument("--reps", type=int, default=1)
    f.add_argument("--modes", nargs="+", choices=sorted(FAILURES), default=["kill", "cut"],
                   help="kill: power loss (Corosync and phalanxd frozen at once, cables dark); cut: cables cut, "
                        "the node runs on; stop: phalanxd and Corosync stopped cleanly")
    f.add_argument("--seconds", type=float, default=10.0)
    f.add_argument("--udp-rate", type=int, default=500)
    f.add_argument("--tcp-rate", default=None, help="iperf3 -b for the download (default: unlimited)")
    f.add_argument("--scheme", default="packet-rr")
    f.add_argument("--lease-len", type=int, default=65536, help="sequence numbers per lease block")
    f.add_argument("--out", default=None, help="directory for results.json and table.md")
    f.add_argument("--peer", choices=("phalanx", "strongswan"), default="phalanx",
                   help="site B: host-mode phalanxd with static SAs, or strongSwan with IKEv2")
    args = ap.parse_args()
    # A bounded caller (timeout) stops us with SIGTERM: unwind, so every
    # `finally` removes its namespaces and processes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if os.geteuid() != 0:
        print("cluster.py needs root (network namespaces)", file=sys.stderr)
        return 1
    return corosync_only(args) if args.cmd == "corosync" else bench(args)


if __name__ == "__main__":
    sys.exit(main())
