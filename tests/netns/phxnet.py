#!/usr/bin/env python3
"""Python side of the network-namespace tests, the demo and the race.

* `Topology`: the four namespaces of tests/netns/lib.sh (built and torn down
  by lib.sh itself, so bash and Python share one implementation), process
  bookkeeping in the same run directory, helpers to run commands inside.
* `gateway_configs`: a matching pair of phalanxd TOML files (gwA, gwB) for
  one algorithm and encapsulation, plus the SA table (SPIs, keys) that
  tshark and scapy need to check the wire independently.
* `Gateway`: a running phalanxd and its `phalanxctl --json` view.
* `tshark_decrypt`: tshark with an `esp_sa` UAT in a private config dir.

CLI (used by scripts/demo.sh and bench/throughput-race.sh):

    phxnet.py configs --alg aes128gcm16 --encap udp --run-dir DIR [--seed S]

writes DIR/gwA.toml, DIR/gwB.toml and DIR/sas.json.
"""

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
LIB = os.path.join(HERE, "lib.sh")
BIN_DIR = os.environ.get("PHX_BIN_DIR", os.path.join(REPO, "target", "release"))

# Addresses: the same as tests/netns/lib.sh.
HOSTA_V4, HOSTA_V6 = "10.1.0.2", "fd01::2"
HOSTB_V4, HOSTB_V6 = "10.2.0.2", "fd02::2"
GWA_WAN_V4, GWB_WAN_V4 = "192.0.2.1", "192.0.2.2"
GWA_WAN_V6, GWB_WAN_V6 = "2001:db8:f::1", "2001:db8:f::2"
# The tunnel endpoints (gwA, gwB) per WAN family.
WAN = {"v4": (GWA_WAN_V4, GWB_WAN_V4), "v6": (GWA_WAN_V6, GWB_WAN_V6)}
SITEA = ("10.1.0.0/24", "fd01::/64")
SITEB = ("10.2.0.0/24", "fd02::/64")
TUN = "phx0"
NATT_PORT = 4500

# Algorithm spec -> (encryption, integrity, encryption key bytes incl. salt,
# integrity key bytes, tshark encryption label, tshark auth label).
# Key lengths: RFC 4106 §8.1 / RFC 4543 §3.2 / RFC 7634 §2 (4-byte salt),
# RFC 3602 (AES-CBC), RFC 4868 §2.1.1 (HMAC key = hash output size).
# tshark 4.0 knows neither ChaCha20-Poly1305 nor AES-GMAC: None there.
ALGS = {
    "aes128gcm16": ("aes128gcm16", "none", 20, 0, "AES-GCM with 16 octet ICV [RFC4106]", "NULL"),
    "aes256gcm16": ("aes256gcm16", "none", 36, 0, "AES-GCM with 16 octet ICV [RFC4106]", "NULL"),
    "chacha20poly1305": ("chacha20poly1305", "none", 36, 0, None, None),
    "aes128gmac": ("aes128gmac", "none", 20, 0, None, None),
    "aes128-sha256": ("aes128", "sha256", 16, 32, "AES-CBC [RFC3602]", "HMAC-SHA-256-128 [RFC4868]"),
    "aes256-sha512": ("aes256", "sha512", 32, 64, "AES-CBC [RFC3602]", "HMAC-SHA-512-256 [RFC4868]"),
    "null-sha256": ("null", "sha256", 0, 32, "NULL", "HMAC-SHA-256-128 [RFC4868]"),
}

# IANA transform ids for tests/interop/phalanx_vectors.make_sa.
SCAPY_IDS = {
    "aes128gcm16": (20, 0), "aes256gcm16": (20, 0), "chacha20poly1305": (28, 0),
    "aes128gmac": (21, 0), "aes128-sha256": (12, 12), "aes256-sha512": (12, 14),
    "null-sha256": (11, 12),
}


def log(msg):
    print("[{}] {}".format(time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def derive(seed, label, length):
    """Deterministic key bytes (tests must be reproducible; keys are not secret)."""
    out = b""
    counter = 0
    while len(out) < length:
        out += hashlib.sha256("{}/{}/{}".format(seed, label, counter).encode()).digest()
        counter += 1
    return out[:length]


# ------------------------------------------------------------------ configs
def sa_table(alg, encap, seed, spi_base=0x1000, family="v4"):
    """The two SAs of the pair: A->B and B->A, with keys; tunnel endpoints
    of WAN `family` ("v4" or "v6", see `WAN`)."""
    enc, integ, klen, ilen, _, _ = ALGS[alg]
    gwa, gwb = WAN[family]
    sas = []
    for n, (name, src, dst) in enumerate(
        (("a-to-b", gwa, gwb), ("b-to-a", gwb, gwa))
    ):
        sas.append({
            "name": name,
            "spi": spi_base + 0x1000 * n + 1,
            "src": src,
            "dst": dst,
            "alg": alg,
            "encryption": enc,
            "integrity": integ,
            "key": derive(seed, name + "/enc", klen).hex(),
            "integrity_key": derive(seed, name + "/int", ilen).hex(),
            "encap": encap,
        })
    return sas


def _toml_sa(sa, direction, local, remote, selectors, replay_window=1024, peer_replay_window=None):
    lines = [
        "[[sa]]",
        'name = "{}"'.format(sa["name"]),
        'direction = "{}"'.format(direction),
        "spi = 0x{:x}".format(sa["spi"]),
        'encryption = "{}"'.format(sa["encryption"]),
        'integrity = "{}"'.format(sa["integrity"]),
    ]
    if sa["key"]:
        lines.append('key = "{}"'.format(sa["key"]))
    if sa["integrity_key"]:
        lines.append('integrity_key = "{}"'.format(sa["integrity_key"]))
    lines += [
        'mode = "tunnel"',
        'local = "{}"'.format(local),
        'remote = "{}"'.format(remote),
        'encap = "{}"'.format("udp" if sa["encap"] == "udp" else "none"),
        "replay_window = {}".format(replay_window),
    ]
    if peer_replay_window is not None and direction == "out":
        lines.append("peer_replay_window = {}".format(peer_replay_window))
    lines += [
        "selectors = [",
    ]
    lines += ['    {{ src = "{}", dst = "{}" }},'.format(s, d) for s, d in selectors]
    lines.append("]")
    return "\n".join(lines) + "\n"


def gateway_config(side, sas, run_dir, workers=0, extra_sas="", metrics_port=9180, comment="", family="v4",
                   peer_replay_window=None):
    """phalanxd TOML for gateway `side` ("A" or "B") from the pair's SA
    table; `[protected] local` and the SAs' endpoints of WAN `family`
    (the SA table's own family: see `sa_table`). `peer_replay_window`:
    the outbound SA's `peer_replay_window` (None: left out)."""
    out_sa, in_sa = (sas[0], sas[1]) if side == "A" else (sas[1], sas[0])
    gwa, gwb = WAN[family]
    local, remote = (gwa, gwb) if side == "A" else (gwb, gwa)
    mine, theirs = (SITEA, SITEB) if side == "A" else (SITEB, SITEA)
    text = "# phalanxd on gw{} ({}), written by tests/netns/phxnet.py{}\n".format(
        side, sas[0]["alg"], (": " + comment) if comment else "")
    text += """
[daemon]
workers = {workers}
control_socket = "{sock}"
metrics = "127.0.0.1:{mport}"
log = "info"

[clear]
tun = "{tun}"
mtu = 1400
offload = true

[protected]
local = "{local}"
udp_port = {port}
raw_esp = true

""".format(workers=workers, sock=os.path.join(run_dir, "gw{}.sock".format(side)), mport=metrics_port,
           tun=TUN, local=local, port=NATT_PORT)
    text += _toml_sa(out_sa, "out", local, remote, list(zip(mine, theirs)),
                     peer_replay_window=peer_replay_window) + "\n"
    text += _toml_sa(in_sa, "in", local, remote, list(zip(theirs, mine))) + "\n"
    text += extra_sas
    for n, (fam, (src, dst)) in enumerate(zip(("v4", "v6"), zip(mine, theirs))):
        text += """[[policy]]
name = "to-remote-{fam}"
priority = {prio}
src = "{src}"
dst = "{dst}"
action = "protect"
sa = "{sa}"

""".format(fam=fam, prio=10 + n, src=src, dst=dst, sa=out_sa["name"])
    return text


def gateway_configs(alg, encap, run_dir, seed="phalanx-netns", workers=0):
    """Writes gwA.toml, gwB.toml and sas.json into run_dir; returns the SA table."""
    sas = sa_table(alg, encap, seed)
    for side in ("A", "B"):
        with open(os.path.join(run_dir, "gw{}.toml".format(side)), "w") as f:
            f.write(gateway_config(side, sas, run_dir, workers=workers))
    with open(os.path.join(run_dir, "sas.json"), "w") as f:
        json.dump(sas, f, indent=1)
    return sas


# ---------------------------------------------------------------- topology
class Topology:
    """The four namespaces of lib.sh; every process started here is recorded
    in the run directory so that lib.sh's phx_cleanup removes it."""

    def __init__(self, prefix=None, run_dir=None):
        self.prefix = prefix or "phx{}".format(os.getpid())
        self.run_dir = run_dir or tempfile.mkdtemp(prefix=self.prefix + ".")
        self.ns = {n: "{}-{}".format(self.prefix, n) for n in ("hostA", "gwA", "gwB", "hostB")}
        self.procs = {}

    def lib(self, script, timeout=60, check=True):
        """Runs bash `script` with lib.sh sourced and this run's names."""
        full = "set -euo pipefail; source {}; phx_init {} {}; {}".format(
            shlex.quote(LIB), shlex.quote(self.prefix), shlex.quote(self.run_dir), script)
        proc = subprocess.run(["bash", "-c", full], capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise RuntimeError("lib.sh `{}` failed ({}):\n{}{}".format(
                script, proc.returncode, proc.stdout[-2000:], proc.stderr[-4000:]))
        return proc

    def up(self):
        self.lib("phx_topology_up")

    def down(self):
        # Stop and reap our own children first (a zombie still answers
        # kill -0, which would make phx_cleanup wait for it).
        for name in list(self.procs):
            self.stop(name)
        self.lib("phx_cleanup", timeout=120, check=False)

    def run(self, ns, argv, timeout=30, check=True, **kw):
        """Runs argv inside namespace `ns` (short name), bounded in time."""
        proc = subprocess.run(["ip", "netns", "exec", self.ns[ns]] + list(argv),
                              capture_output=True, text=True, timeout=timeout, **kw)
        if check and proc.returncode != 0:
            raise RuntimeError("{} in {} failed ({}):\n{}{}".format(
                argv, ns, proc.returncode, proc.stdout[-2000:], proc.stderr[-4000:]))
        return proc

    def popen(self, name, ns, argv, **kw):
        """Background process in `ns`, log in run_dir/NAME.log, PID recorded."""
        logf = open(os.path.join(self.run_dir, name + ".log"), "w")
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns[ns]] + list(argv),
                                stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kw)
        with open(os.path.join(self.run_dir, "pids"), "a") as f:
            f.write("{} {}\n".format(proc.pid, name))
        self.procs[name] = proc
        return proc

    def stop(self, name, timeout=5):
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc else None
        proc.terminate()
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(timeout)

    def log_of(self, name):
        try:
            with open(os.path.join(self.run_dir, name + ".log")) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def ping(self, ns, dest, count=3, interval=0.2, timeout=None):
        """True when all `count` pings are answered."""
        argv = ["ping", "-q", "-n", "-c", str(count), "-i", str(interval), "-W", "2", dest]
        proc = self.run(ns, argv, timeout=timeout or count * interval + 15, check=False)
        return proc.returncode == 0

    def wait_ping(self, ns, dest, seconds=10):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.run(ns, ["ping", "-q", "-n", "-c", "1", "-W", "1", dest], timeout=5, check=False).returncode == 0:
                return True
            time.sleep(0.3)
        return False

    def wait_dev(self, ns, dev, seconds=10):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if subprocess.run(["ip", "-n", self.ns[ns], "link", "show", dev],
                              capture_output=True).returncode == 0:
                return True
            time.sleep(0.1)
        return False

    def routes_via_tun(self, gw, dev=TUN):
        self.lib("phx_routes_via_dev $NS_{} {}".format("GWA" if gw == "gwA" else "GWB", dev))

    # ------------------------------------------------------------ phalanxd
    def start_gateway(self, side, config_path, wait=True):
        """phalanxd on gw<side> with config_path; waits for its TUN and
        control socket, routes the remote site into the TUN."""
        gw = "gw" + side
        name = "phalanxd-" + gw
        proc = self.popen(name, gw, [os.path.join(BIN_DIR, "phalanxd"), "--config", config_path, "--foreground"])
        g = Gateway(self, side, proc, os.path.join(self.run_dir, gw + ".sock"), config_path)
        if wait:
            if not self.wait_dev(gw, TUN, 15):
                raise RuntimeError("phalanxd on {} created no {}:\n{}".format(gw, TUN, self.log_of(name)[-4000:]))
            self.routes_via_tun(gw)
            g.wait_socket()
        return g


class Gateway:
    """A running phalanxd and its control socket."""

    def __init__(self, topo, side, proc, socket, config):
        self.topo, self.side, self.proc, self.socket, self.config = topo, side, proc, socket, config
        self.name = "phalanxd-gw" + side

    def alive(self):
        return self.proc.poll() is None

    def wait_socket(self, seconds=10):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if os.path.exists(self.socket) and self.ctl_raw("status").returncode == 0:
                return
            if not self.alive():
                break
            time.sleep(0.1)
        raise RuntimeError("phalanxd {} control socket not ready (alive={}):\n{}".format(
            self.name, self.alive(), self.topo.log_of(self.name)[-4000:]))

    def ctl_raw(self, *args, json_out=True, timeout=15):
        argv = [os.path.join(BIN_DIR, "phalanxctl"), "--socket", self.socket]
        if json_out:
            argv.append("--json")
        return subprocess.run(argv + list(args), capture_output=True, text=True, timeout=timeout)

    def ctl(self, *args):
        proc = self.ctl_raw(*args)
        if proc.returncode != 0:
            raise RuntimeError("phalanxctl {} failed ({}): {}{}".format(args, proc.returncode, proc.stdout, proc.stderr))
        return json.loads(proc.stdout)

    def counters(self):
        """{drop reason or daemon counter name: count}."""
        rep = self.ctl("counters")
        out = {d["reason"]: d["count"] for d in rep["drops"]}
        for c in rep["daemon"]:
            out["daemon." + c["name"]] = c["count"]
        return out

    def sas(self):
        return {s["name"]: s for s in self.ctl("sas")}


# ------------------------------------------------------------------ tshark
def esp_sa_uat(sas):
    """The esp_sa UAT file (Wireshark 4.0 columns: protocol, src, dst, SPI,
    encryption, key, authentication, key); keys as 0x-prefixed hex."""
    lines = []
    for sa in sas:
        _, _, _, _, enc_label, auth_label = ALGS[sa["alg"]]
        if enc_label is None:
            raise ValueError("tshark 4.0 cannot decrypt {}".format(sa["alg"]))
        lines.append('"{}","{}","{}","0x{:08x}","{}","{}","{}","{}"'.format(
            "IPv6" if ":" in sa["src"] else "IPv4", sa["src"], sa["dst"], sa["spi"], enc_label,
            ("0x" + sa["key"]) if sa["key"] else "", auth_label,
            ("0x" + sa["integrity_key"]) if sa["integrity_key"] else ""))
    return "\n".join(lines) + "\n"


TSHARK_FIELDS = ["frame.number", "esp.spi", "esp.sequence", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst",
                 "icmp.type", "icmpv6.type", "udp.dstport", "data.data", "esp.icv_good"]


def tshark_decrypt(pcap, sas, display_filter="esp"):
    """Decrypts `pcap` with the SA table; returns one dict per ESP packet
    with lists of field occurrences (outer first, then inner)."""
    with tempfile.TemporaryDirectory(prefix="phx-tshark-") as conf:
        with open(os.path.join(conf, "esp_sa"), "w") as f:
            f.write("# This file is automatically generated, DO NOT MODIFY.\n")
            f.write(esp_sa_uat(sas))
        argv = ["tshark", "-n", "-r", pcap, "-o", "esp.enable_encryption_decode:TRUE",
                "-o", "esp.enable_authentication_check:TRUE", "-Y", display_filter,
                "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=|"]
        for field in TSHARK_FIELDS:
            argv += ["-e", field]
        env = dict(os.environ, WIRESHARK_CONFIG_DIR=conf)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
        if proc.returncode != 0:
            raise RuntimeError("tshark failed: " + proc.stderr[-3000:])
    rows = []
    for line in proc.stdout.splitlines():
        cols = line.split("\t")
        rows.append({k: (v.split("|") if v else []) for k, v in zip(TSHARK_FIELDS, cols)})
    return rows


class Capture:
    """dumpcap on one interface of one namespace, bounded to `limit` seconds."""

    def __init__(self, topo, ns, iface, path, limit=60):
        self.topo, self.ns, self.iface, self.path, self.limit = topo, ns, iface, path, limit
        self.name = "dumpcap-{}-{}".format(ns, iface)

    def __enter__(self):
        self.proc = self.topo.popen(self.name, self.ns, ["dumpcap", "-i", self.iface, "-w", self.path,
                                                         "-a", "duration:{}".format(self.limit)])
        deadline = time.monotonic() + 10
        while "Capturing on" not in self.topo.log_of(self.name):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("dumpcap did not start: " + self.topo.log_of(self.name))
            time.sleep(0.05)
        time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        time.sleep(0.3)  # the last packets reach the ring buffer
        self.proc.send_signal(2)  # SIGINT: dumpcap writes the file and exits
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        return False


def scapy_decrypt(pcap, sas):
    """Decrypts the ESP packets of `pcap` with scapy's SecurityAssociation
    (python3-cryptography for AES-GMAC, see tests/interop/phalanx_vectors.py).
    Returns [(spi, seq, inner scapy packet)]; raises on an ICV failure."""
    sys.path.insert(0, os.path.join(REPO, "tests", "interop"))
    import phalanx_vectors as pv
    from scapy.all import ESP, IP, UDP, ICMP, raw, rdpcap

    by_spi = {}
    for sa in sas:
        encr, integ = SCAPY_IDS[sa["alg"]]
        vec = dict(spi=sa["spi"], seq=1, esn=False, integ=integ, integ_key=sa["integrity_key"],
                   protocol="esp", encr=encr, encr_key=sa["key"], mode="tunnel",
                   udp_encap={"sport": NATT_PORT, "dport": NATT_PORT} if sa["encap"] == "udp" else None,
                   tunnel_src=sa["src"], tunnel_dst=sa["dst"], inner=raw(IP() / ICMP()).hex())
        by_spi[sa["spi"]] = pv.make_sa(vec)
    out = []
    for frame in rdpcap(pcap):
        if IP not in frame:
            continue
        pkt = IP(raw(frame[IP]))
        if UDP in pkt and pkt[UDP].dport == NATT_PORT:
            if len(pkt[UDP].payload) < 8 or raw(pkt[UDP].payload)[:4] == b"\0\0\0\0":
                continue  # keepalive or IKE
            pkt = pv.strip_nat_t(pkt)
        if ESP not in pkt:
            continue
        spi, seq = pkt[ESP].spi, pkt[ESP].seq
        if spi not in by_spi:
            continue
        out.append((spi, seq, by_spi[spi].decrypt(pkt, verify=True)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("configs", help="write gwA.toml, gwB.toml, sas.json")
    c.add_argument("--alg", default="aes128gcm16", choices=sorted(ALGS))
    c.add_argument("--encap", default="udp", choices=("udp", "none"))
    c.add_argument("--run-dir", required=True)
    c.add_argument("--seed", default=None, help="key seed (default: random)")
    c.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()
    seed = args.seed or os.urandom(16).hex()
    gateway_configs(args.alg, args.encap, args.run_dir, seed=seed, workers=args.workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
