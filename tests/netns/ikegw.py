#!/usr/bin/env python3
"""IKEv2 gateways for the interop tests and the rekey benchmarks, one
interface over two implementations:

* `Conn` / `Child`: one side's connection, implementation-neutral (the
  fields of /work/briefs/ike-config-format.md; strongSwan syntax for
  proposals and identities).
* `PhalanxIke`: phalanxd with a `[[connection]]` TOML written from a
  `Conn`, driven with `phalanxctl initiate/terminate/ike/counters --json`.
* `SwanIke`: strongSwan's charon (tests/netns/swan.py).
* `view()` of either: the IKE SAs normalized to
  `{"spi_i", "spi_r", "algs", "local_id", "remote_id", "children": [...]}`
  with SPIs as lowercase hex and algorithms as strongSwan proposal keywords
  (`aes128gcm16`, `prfsha256`, `x25519`, ...), so both sides and the
  expected proposal compare directly.

`under_test()`: the implementation that plays "Phalanx" in the tests:
phalanxd, or strongSwan when PHX_IKE_UNDER_TEST=strongswan (harness
validation: the same tests with strongSwan on both gateways).
"""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import time
from typing import List, Optional

import phxnet
import swan

GW_ADDR = {"gwA": phxnet.GWA_WAN_V4, "gwB": phxnet.GWB_WAN_V4}
SITE = {"gwA": phxnet.SITEA, "gwB": phxnet.SITEB}
OTHER = {"gwA": "gwB", "gwB": "gwA"}
PSK = "phalanx-interop-psk-0123456789abcdef"


def under_test():
    """"phalanx" (default) or "strongswan" (PHX_IKE_UNDER_TEST)."""
    impl = os.environ.get("PHX_IKE_UNDER_TEST", "phalanx")
    if impl not in ("phalanx", "strongswan"):
        raise ValueError("PHX_IKE_UNDER_TEST must be phalanx or strongswan, not " + impl)
    return impl


@dataclasses.dataclass
class Child:
    """One child of a connection (tunnel mode between the two sites)."""
    local_ts: List[str]
    remote_ts: List[str]
    esp_proposals: List[str]
    name: str = "net"
    mode: str = "tunnel"
    rekey_time: str = "1h"
    rekey_jitter: Optional[str] = None
    lifetime: Optional[str] = None
    # The peer's replay window for this side's packets (phalanxd's
    # `peer_replay_window`); None: unknown.
    peer_replay_window: Optional[int] = None
    # AH instead of ESP (phalanxd's `ah_proposals`; esp_proposals unused).
    ah_proposals: Optional[List[str]] = None


@dataclasses.dataclass
class Conn:
    """One side's IKE connection."""
    local_addr: str
    remote_addr: Optional[str]
    local_id: str
    remote_id: Optional[str]
    children: List[Child]
    name: str = "site"
    initiator: bool = True
    auth: str = "psk"
    psk: str = PSK
    cert: Optional[str] = None
    key: Optional[str] = None
    ca: Optional[str] = None
    proposals: List[str] = dataclasses.field(default_factory=lambda: ["aes128gcm16-prfsha256-x25519"])
    remote_port: int = 500
    rekey_time: str = "4h"
    rekey_jitter: Optional[str] = None
    lifetime: Optional[str] = None
    dpd_delay: str = "0s"
    # strongSwan's kernel-libipsec only speaks ESP in UDP (RFC 3948), so
    # the interop tests force it; AH needs it off.
    force_encap: bool = True
    # An End-User client asks for these (strongSwan's `vips`).
    vips: Optional[List[str]] = None
    # strongSwan: MOBIKE (RFC 4555) on; the interop tests keep it off.
    mobike: bool = False
    # A gateway hands out addresses of these [[pool]]s: (name, addrs).
    pools: Optional[List[tuple]] = None
    # Signature schemes (phalanxd's local_signature / remote_signature,
    # strongSwan names such as "rsa/pss").
    local_signature: Optional[List[str]] = None
    remote_signature: Optional[List[str]] = None
    # A gateway authenticating its End-Users with EAP: phalanxd's
    # remote_auth ("eap-mschapv2", "eap-tls", "eap-radius") and
    # [[eap_secret]]s (identity, password).
    remote_auth: Optional[str] = None
    eap_secrets: Optional[List[tuple]] = None
    # A gateway with remote_auth = "eap-radius": its [radius] section as
    # TOML text.
    radius: Optional[str] = None
    # A gateway with remote_auth = "eap-tls": phalanxd's eap_tls13
    # ("rfc9190" or "pre-rfc9190"); None: not written (the default).
    eap_tls13: Optional[str] = None
    # strongSwan: the remote auth round as written (e.g.
    # "ike:rsa/pss-sha256" to require PSS); None: psk or pubkey.
    swan_remote_auth: Optional[str] = None


def site_conn(gw, initiator, ids=("ip", "ip"), auth="psk", pki_paths=None, proposals=None,
              esp_proposals=None):
    """The site-to-site connection of gateway `gw` (both sites, IPv4 and
    IPv6 selectors). ids: (kind of our identity, kind of the peer's), see
    pki.identity. pki_paths: pki.build's result for auth = "pubkey"."""
    import pki
    other = OTHER[gw]
    child = Child(local_ts=list(SITE[gw]), remote_ts=list(SITE[other]),
                  esp_proposals=esp_proposals or ["aes128gcm16-esn-noesn"])
    conn = Conn(local_addr=GW_ADDR[gw], remote_addr=GW_ADDR[other], local_id=pki.identity(gw, ids[0]),
                remote_id=pki.identity(other, ids[1]), children=[child], initiator=initiator, auth=auth)
    if proposals:
        conn.proposals = list(proposals)
    if auth == "pubkey":
        conn.cert, conn.key = pki_paths[gw]
        conn.ca = pki_paths["ca"]
    return conn


# ------------------------------------------------------------ algorithms
_ENCR = {"AES_GCM_16": "aes{}gcm16", "AES_GCM_12": "aes{}gcm12", "AES_GCM_8": "aes{}gcm8", "AES_CBC": "aes{}",
         "CHACHA20_POLY1305": "chacha20poly1305"}
_INTEG = {"HMAC_SHA2_256_128": "sha256", "HMAC_SHA2_384_192": "sha384", "HMAC_SHA2_512_256": "sha512",
          "HMAC_SHA1_96": "sha1"}
_PRF = {"PRF_HMAC_SHA2_256": "prfsha256", "PRF_HMAC_SHA2_384": "prfsha384", "PRF_HMAC_SHA2_512": "prfsha512",
        "PRF_HMAC_SHA1": "prfsha1"}
_DH = {"CURVE_25519": "x25519", "ECP_256": "ecp256", "ECP_384": "ecp384", "ECP_521": "ecp521",
       "MODP_2048": "modp2048", "MODP_3072": "modp3072", "MODP_4096": "modp4096"}


def expected_algs(proposal, ike):
    """The keyword set a negotiation of the single strongSwan proposal
    `proposal` yields: ESN tokens dropped; in IKE a proposal without a PRF
    uses the PRF of its integrity algorithm (strongSwan's proposal syntax)."""
    toks = [t for t in proposal.lower().split("-") if t not in ("esn", "noesn")]
    if ike and not any(t.startswith("prf") for t in toks):
        toks += ["prf" + t for t in toks if t in _INTEG.values()]
    return frozenset(toks)


def swan_algs(sa):
    """Keyword set of one `swanctl --list-sas` IKE or Child SA dict."""
    out = set()
    if sa.get("encr-alg"):
        out.add(_ENCR.get(sa["encr-alg"], sa["encr-alg"]).format(sa.get("encr-keysize", "")))
    for key, table in (("integ-alg", _INTEG), ("prf-alg", _PRF), ("dh-group", _DH)):
        if sa.get(key):
            out.add(table.get(sa[key], sa[key]))
    return frozenset(out)


_PHX_PATTERNS = [
    (re.compile(r"AES_GCM_(8|12|16)\D{0,3}(128|192|256)"), lambda m: "aes{}gcm{}".format(m.group(2), m.group(1))),
    (re.compile(r"AES_CBC\D{0,3}(128|192|256)"), lambda m: "aes" + m.group(1)),
    (re.compile(r"CHACHA20_?POLY1305"), lambda m: "chacha20poly1305"),
    (re.compile(r"PRF_HMAC_SHA2_(256|384|512)"), lambda m: "prfsha" + m.group(1)),
    (re.compile(r"(?<!PRF_)HMAC_SHA2_(256|384|512)"), lambda m: "sha" + m.group(1)),
    (re.compile(r"CURVE_?25519|X25519"), lambda m: "x25519"),
    (re.compile(r"ECP_?(256|384|521)"), lambda m: "ecp" + m.group(1)),
    (re.compile(r"MODP_?(\d{4})"), lambda m: "modp" + m.group(1)),
]


def phalanx_algs(text):
    """Keyword set of a phalanxctl algorithm string, either IANA-style
    ("AES_GCM_16_128/PRF_HMAC_SHA2_256/CURVE_25519") or strongSwan keywords
    ("aes128gcm16-prfsha256-x25519")."""
    if isinstance(text, (list, tuple)):
        text = "/".join(str(t) for t in text)
    if isinstance(text, dict):
        text = "/".join(str(v) for v in text.values() if v)
    if text == text.lower():
        return frozenset(t for t in re.split(r"[-/, ]+", text) if t and t not in ("esn", "noesn"))
    out = set()
    for pattern, kw in _PHX_PATTERNS:
        for m in pattern.finditer(text.upper()):
            out.add(kw(m))
    return frozenset(out)


# ------------------------------------------------------------ views
def _hex(value, width):
    if isinstance(value, int):
        return "{:0{}x}".format(value, width)
    s = str(value).lower().replace(":", "").replace("_", "")
    s = s[2:] if s.startswith("0x") else s
    return s.rjust(width, "0")


def swan_view(sas):
    """Normalized view of `Charon.list_sas()`."""
    out = []
    for sa in sas:
        children = []
        for child in (sa.get("child-sas") or {}).values():
            children.append({"name": child.get("name"), "state": child.get("state"),
                             "spi_in": _hex(child.get("spi-in", "0"), 8),
                             "spi_out": _hex(child.get("spi-out", "0"), 8),
                             "algs": swan_algs(child), "esn": child.get("esn") == "1",
                             "encap": child.get("encap") == "yes"})
        out.append({"name": sa.get("name"), "state": sa.get("state"),
                    "spi_i": _hex(sa.get("initiator-spi", "0"), 16), "spi_r": _hex(sa.get("responder-spi", "0"), 16),
                    "algs": swan_algs(sa), "local_id": sa.get("local-id"), "remote_id": sa.get("remote-id"),
                    "children": children})
    return out


def _pick(d, *keys, default=None):
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return default


class ViewError(RuntimeError):
    """phalanxctl's JSON lacks a field the tests need."""


def _need(d, key):
    if d.get(key) is None:
        raise ViewError("phalanxctl ike --json: no {} in {}".format(key, json.dumps(d)[:1500]))
    return d[key]


def _phalanx_child(c):
    return {"name": c.get("name"), "state": _need(c, "state"),
            "spi_in": _hex(_need(c, "spi_in"), 8), "spi_out": _hex(_need(c, "spi_out"), 8),
            "algs": phalanx_algs(_need(c, "algorithms")), "esn": bool(c.get("esn")),
            "encap": bool(c.get("encap"))}


def phalanx_view(doc):
    """Normalized view of `phalanxctl ike --json`: a list of IKE SAs with
    connection, state, spi_i, spi_r (hex), algorithms
    ("AES_GCM_16_128/PRF_HMAC_SHA2_256/CURVE25519"), local_id, remote_id and
    children (name, state, spi_in, spi_out (integers), algorithms, esn,
    encap)."""
    return [{"name": sa.get("connection"), "state": _need(sa, "state"),
             "spi_i": _hex(_need(sa, "spi_i"), 16), "spi_r": _hex(_need(sa, "spi_r"), 16),
             "algs": phalanx_algs(_need(sa, "algorithms")), "local_id": sa.get("local_id"),
             "remote_id": sa.get("remote_id"), "children": [_phalanx_child(c) for c in sa.get("children", [])]}
            for sa in doc]


def flatten_counters(doc, prefix=""):
    """Every integer in a JSON document, keyed by its path; list entries
    shaped {"name"/"reason": N, "count"/"value": V} become path.N."""
    out = {}
    if isinstance(doc, dict):
        name = _pick(doc, "name", "reason", "counter")
        value = _pick(doc, "count", "value")
        if isinstance(name, str) and isinstance(value, int):
            out[prefix + name] = value
            return out
        for k, v in doc.items():
            out.update(flatten_counters(v, prefix + str(k) + "."))
    elif isinstance(doc, list):
        for v in doc:
            out.update(flatten_counters(v, prefix))
    elif isinstance(doc, int) and not isinstance(doc, bool):
        out[prefix.rstrip(".")] = doc
    return out


def _norm(name):
    return re.sub(r"[^a-z0-9]", "", name.lower())


def counter(flat, *names, scope=None):
    """The counter whose path ends with one of `names` (case, `_`, `-` and
    `.` ignored), or None when phalanxctl has no such counter. scope="ike":
    prefer paths that mention IKE and never the data plane's `drops.` and
    `daemon.` (its `unknown_spi` is ESP's)."""
    wanted = [_norm(n) for n in names]
    paths = list(flat)
    if scope == "ike":
        paths = [p for p in paths if not p.startswith(("drops.", "daemon."))]
        paths.sort(key=lambda p: "ike" not in _norm(p))
    for path in paths:
        p = _norm(path)
        if any(p.endswith(w) for w in wanted):
            return flat[path]
    return None


# ------------------------------------------------------------ phalanxd
def _toml_str(s):
    return json.dumps(s)


def _toml_list(items):
    return "[" + ", ".join(_toml_str(i) for i in items) + "]"


def render_phalanx_toml(conn, side, run_dir, cert_dir="certs", ike=None, metrics_port=9180):
    """phalanxd TOML (ike-config-format.md) for `conn` on gw<side>;
    certificate paths relative to the config file. ike: [ike] settings."""
    text = """# phalanxd on gw{side} with IKE, written by tests/netns/ikegw.py
[daemon]
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

""".format(side=side, sock=os.path.join(run_dir, "gw{}.sock".format(side)), mport=metrics_port, tun=phxnet.TUN,
           local=conn.local_addr, port=phxnet.NATT_PORT)
    if ike:
        text += "[ike]\n" + "".join("{} = {}\n".format(k, _toml_str(v) if isinstance(v, str) else
                                                      ("true" if v is True else "false" if v is False else v))
                                    for k, v in ike.items()) + "\n"
    lines = ["[[connection]]", "name = " + _toml_str(conn.name)]
    if conn.remote_addr:
        lines.append("remote_addr = " + _toml_str(conn.remote_addr))
    lines += ["local_addr = " + _toml_str(conn.local_addr), "remote_port = {}".format(conn.remote_port),
              "local_id = " + _toml_str(conn.local_id)]
    if conn.remote_id:
        lines.append("remote_id = " + _toml_str(conn.remote_id))
    lines.append("auth = " + _toml_str(conn.auth))
    if conn.auth == "psk" or conn.remote_auth == "psk":
        lines.append("psk = " + _toml_str(conn.psk))
    if conn.auth != "psk":
        lines += ["certificate = " + _toml_str(os.path.join(cert_dir, "cert.pem")),
                  "private_key = " + _toml_str(os.path.join(cert_dir, "key.pem"))]
    if conn.auth != "psk" or conn.remote_auth == "pubkey":
        lines.append("ca = " + _toml_list([os.path.join(cert_dir, "ca.pem")]))
    lines += ["proposals = " + _toml_list(conn.proposals), 'start_action = "none"',
              "dpd_delay = " + _toml_str(conn.dpd_delay), "rekey_time = " + _toml_str(conn.rekey_time)]
    if conn.rekey_jitter is not None:
        lines.append("rekey_jitter = " + _toml_str(conn.rekey_jitter))
    if conn.lifetime is not None:
        lines.append("lifetime = " + _toml_str(conn.lifetime))
    lines += ["fragmentation = true", "force_encap = " + ("true" if conn.force_encap else "false")]
    if conn.pools:
        lines.append("pools = " + _toml_list([name for name, _ in conn.pools]))
    if conn.remote_auth:
        lines.append("remote_auth = " + _toml_str(conn.remote_auth))
    if conn.eap_tls13:
        lines.append("eap_tls13 = " + _toml_str(conn.eap_tls13))
    if conn.local_signature:
        lines.append("local_signature = " + _toml_list(conn.local_signature))
    if conn.remote_signature:
        lines.append("remote_signature = " + _toml_list(conn.remote_signature))
    lines.append("")
    for c in conn.children:
        proposals = ("ah_proposals = " + _toml_list(c.ah_proposals) if c.ah_proposals
                     else "esp_proposals = " + _toml_list(c.esp_proposals))
        lines += ["[[connection.child]]", "name = " + _toml_str(c.name), "local_ts = " + _toml_list(c.local_ts),
                  "remote_ts = " + _toml_list(c.remote_ts), proposals,
                  "mode = " + _toml_str(c.mode), "rekey_time = " + _toml_str(c.rekey_time)]
        if c.rekey_jitter is not None:
            lines.append("rekey_jitter = " + _toml_str(c.rekey_jitter))
        if c.lifetime is not None:
            lines.append("lifetime = " + _toml_str(c.lifetime))
        if c.peer_replay_window is not None:
            lines.append("peer_replay_window = {}".format(c.peer_replay_window))
        lines.append("")
    for name, addrs in conn.pools or []:
        lines += ["[[pool]]", "name = " + _toml_str(name), "addrs = " + _toml_str(addrs), ""]
    for identity, password in conn.eap_secrets or []:
        lines += ["[[eap_secret]]", "id = " + _toml_str(identity), "secret = " + _toml_str(password), ""]
    if conn.radius:
        lines.append(conn.radius)
    return text + "\n".join(lines) + "\n"


class PhalanxIke:
    """phalanxd with IKE on gateway `gw`."""
    impl = "phalanx"

    def __init__(self, topo, gw, conn, ike=None):
        self.topo, self.gw, self.conn, self.ike = topo, gw, conn, ike
        self.side = gw[-1]
        self.config = os.path.join(topo.run_dir, "{}-ike.toml".format(gw))
        self.gateway = None

    def start(self):
        cert_dir = os.path.join(self.topo.run_dir, self.gw + "-certs")
        if self.conn.auth == "pubkey":
            os.makedirs(cert_dir, exist_ok=True)
            for src, dst in ((self.conn.cert, "cert.pem"), (self.conn.key, "key.pem"), (self.conn.ca, "ca.pem")):
                shutil.copy(src, os.path.join(cert_dir, dst))
        with open(self.config, "w") as f:
            f.write(render_phalanx_toml(self.conn, self.side, self.topo.run_dir,
                                        cert_dir=os.path.basename(cert_dir), ike=self.ike))
        g = self.topo.start_gateway(self.side, self.config, wait=False)
        self.gateway = g
        # Like Topology.start_gateway's wait, but fails at once when
        # phalanxd exits (e.g. a config it refuses).
        up = wait_for(lambda: not g.alive() or subprocess.run(
            ["ip", "-n", self.topo.ns[self.gw], "link", "show", phxnet.TUN], capture_output=True).returncode == 0, 15)
        if not up or not g.alive():
            raise RuntimeError("phalanxd on {} created no {} (alive={}):\n{}".format(
                self.gw, phxnet.TUN, g.alive(), self.topo.log_of(self.name)[-4000:]))
        self.topo.routes_via_tun(self.gw)
        g.wait_socket()
        return self

    @property
    def name(self):
        return "phalanxd-" + self.gw

    def alive(self):
        return self.gateway is not None and self.gateway.alive()

    def initiate(self, timeout=20):
        self.gateway.ctl("initiate", self.conn.name, "--wait", str(timeout))

    def terminate(self):
        self.gateway.ctl("terminate", self.conn.name)

    def view(self):
        return phalanx_view(self.gateway.ctl("ike"))

    def counters(self):
        """Every counter `phalanxctl counters --json` shows, flattened."""
        return flatten_counters(self.gateway.ctl("counters"))

    def log(self):
        return self.topo.log_of(self.name)

    def stop(self):
        self.topo.stop(self.name)


class SwanIke:
    """strongSwan's charon on gateway `gw`."""
    impl = "strongswan"

    def __init__(self, topo, gw, conn, **conf_args):
        self.topo, self.gw, self.conn = topo, gw, conn
        self.charon = swan.Charon(topo, gw)
        self.conf_args = conf_args

    def start(self):
        self.charon.configure(self.conn, **self.conf_args)
        self.charon.start()
        self.charon.load()
        return self

    @property
    def name(self):
        return self.charon.name

    def alive(self):
        return self.charon.alive()

    def initiate(self, timeout=20):
        self.charon.initiate(self.conn.children[0].name, ike=self.conn.name, timeout=timeout)

    def terminate(self):
        self.charon.terminate(self.conn.name)

    def view(self):
        return swan_view(self.charon.list_sas())

    def counters(self):
        """charon has no counters plugin loaded here: empty."""
        return {}

    def log(self):
        return self.charon.log()

    def stop(self):
        self.charon.stop()


def make_gateway(impl, topo, gw, conn, **kw):
    """A PhalanxIke or SwanIke (not started)."""
    if impl == "phalanx":
        return PhalanxIke(topo, gw, conn, ike=kw.get("ike"))
    return SwanIke(topo, gw, conn, **{k: v for k, v in kw.items() if k != "ike"})


def wait_for(pred, seconds=10, interval=0.2):
    """Polls pred() until it is truthy (returns its value) or time is up
    (returns the last value)."""
    deadline = time.monotonic() + seconds
    while True:
        value = pred()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def established(gw_obj):
    """The view's IKE SAs that are established with at least one
    installed Child SA."""
    out = []
    for sa in gw_obj.view():
        state = str(sa.get("state") or "").upper()
        if state.startswith("ESTABLISHED") and any(
                str(c.get("state") or "").upper() in ("INSTALLED", "ESTABLISHED") for c in sa["children"]):
            out.append(sa)
    return out


class DaemonMissing(RuntimeError):
    """phalanxd did not start with an IKE configuration."""


def start_all(*gateways):
    """Starts the gateways in order (responders first); a phalanxd that
    refuses its IKE config raises DaemonMissing with its log."""
    for g in gateways:
        try:
            g.start()
        except RuntimeError as e:
            if g.impl == "phalanx":
                raise DaemonMissing("phalanxd on {} did not start with its [[connection]] config {} "
                                    "(is IKE in phalanxd yet?):\n{}".format(g.gw, getattr(g, "config", ""), e))
            raise
    return gateways


def current_spis(gw_obj):
    """(IKE SPI pair, [(child spi_in, spi_out)]) of the single established
    IKE SA of `gw_obj`, or None."""
    sas = [sa for sa in gw_obj.view() if str(sa.get("state") or "").upper().startswith("ESTABLISHED")]
    if len(sas) != 1:
        return None
    sa = sas[0]
    return (sa["spi_i"], sa["spi_r"]), sorted((c["spi_in"], c["spi_out"]) for c in sa["children"]
                                              if str(c.get("state") or "").upper() in ("INSTALLED", "ESTABLISHED"))


# ------------------------------------------------------------ pinger
# ICMP echo every INTERVAL seconds for COUNT packets on a fixed schedule
# (iputils ping slows down below its interval on a loaded 2-core machine),
# then waits GRACE seconds for late replies; prints a JSON summary. The
# echo's sequence number has 16 bits (RFC 792): echo n carries n % 65536
# on the wire, and everything else is kept by n, so a run past 65,536
# echoes (655 s at 10 ms) neither crashes nor counts a reply twice; a reply
# is the newest echo sent with its low 16 bits (the one before it was
# sent 65,536 intervals earlier, long given up).
PINGER = r"""
import json, os, select, socket, struct, sys, time
dst, interval, count, grace = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
ident = os.getpid() & 0xFFFF
def csum(b):
    if len(b) % 2: b += b"\0"
    t = sum(struct.unpack("!%dH" % (len(b) // 2), b)); t = (t >> 16) + (t & 0xFFFF); t += t >> 16
    return ~t & 0xFFFF
got, sent_at, rtts, newest, duplicates = set(), {}, [], {}, 0
start = time.monotonic(); start_wall = time.time()
def drain(until):
    global duplicates
    while True:
        left = until - time.monotonic()
        if left <= 0: return
        r, _, _ = select.select([s], [], [], left)
        if not r: return
        data = s.recv(2048)
        ihl = (data[0] & 0xF) * 4
        typ, _, _, rid, wire_seq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
        if typ != 0 or rid != ident or wire_seq not in newest: continue
        n = newest[wire_seq]
        if n in got:
            duplicates += 1
        else:
            got.add(n); rtts.append(time.monotonic() - sent_at[n])
for n in range(count):
    due = start + n * interval
    drain(due)
    body = struct.pack("!d", time.time()) + b"phalanx-rekey" * 3
    wire_seq = n & 0xFFFF
    hdr = struct.pack("!BBHHH", 8, 0, 0, ident, wire_seq)
    pkt = struct.pack("!BBHHH", 8, 0, csum(hdr + body), ident, wire_seq) + body
    sent_at[n], newest[wire_seq] = time.monotonic(), n
    s.sendto(pkt, (dst, 0))
drain(time.monotonic() + grace)
lost = sorted(set(range(count)) - got)
print(json.dumps({"sent": count, "received": len(got), "duplicates": duplicates, "lost_seqs": lost[:200],
                  "lost_at_s": [round(q * interval, 2) for q in lost[:200]],
                  "start_wall": start_wall, "duration_s": round(time.monotonic() - start, 2),
                  "rtt_max_ms": round(max(rtts) * 1000, 1) if rtts else None}))
"""


def start_pinger(topo, ns, dst, interval, count, grace=3.0, name="pinger"):
    """Background PINGER in namespace `ns`; its JSON goes to NAME.log."""
    return topo.popen(name, ns, ["/usr/bin/python3", "-c", PINGER, dst, str(interval), str(count), str(grace)])


def pinger_result(topo, proc, timeout, name="pinger"):
    """Waits for the pinger and returns its summary dict."""
    proc.wait(timeout=timeout)
    text = topo.log_of(name).strip().splitlines()
    if not text:
        raise RuntimeError("pinger printed nothing")
    return json.loads(text[-1])
