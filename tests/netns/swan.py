#!/usr/bin/env python3
"""strongSwan 5.9 (charon with kernel-libipsec) as an IKEv2 peer in the
network-namespace topology of tests/netns/lib.sh.

* `render_strongswan_conf`: charon settings from
  bench/strongswan/ike-strongswan.conf.in (vici socket and log in the
  instance directory, cookie thresholds, millisecond log timestamps).
* `render_swanctl_conf`: swanctl.conf for one `ikegw.Conn` (PSK or
  certificates, proposals, lifetimes, identities, one or more children).
* `Charon`: one charon per gateway namespace, in its own mount namespace
  with a private /run (charon 5.9 hard-codes /run/charon.pid), driven with
  `swanctl --uri unix://DIR/charon.vici`; credentials under DIR
  (SWANCTL_DIR: x509/, x509ca/, private/).
* `parse_pretty`, `parse_list_sas`: `swanctl --list-sas --pretty` as
  nested dicts (one key per line: values may hold spaces, e.g. DNs).
* `log_exchanges`, `rekey_durations`: the IKE messages charon generated
  and parsed, with their millisecond timestamps, from its log; the
  duration of each CREATE_CHILD_SA it initiated (request generated ->
  response parsed).

Facts (see /work/shared/INTEROP-NOTES.md): kernel-libipsec always
UDP-encapsulates ESP (port 4500), rejects ESN, routes the remote traffic
selectors into its TUN `ipsec0` (table 220); charon sends its certificate
only when asked by a CERTREQ unless `send_cert = always`.
"""

import json
import os
import re
import shutil
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
TEMPLATE = os.path.join(REPO, "bench", "strongswan", "ike-strongswan.conf.in")
CHARON = "/usr/lib/ipsec/charon"
TUN = "ipsec0"


# ------------------------------------------------------------------ configs
def render_strongswan_conf(directory, keylog=False, cookie_threshold=10, cookie_threshold_ip=3,
                           block_threshold=5, retransmit_tries=3, retransmit_timeout=2.0, rsa_pss=False,
                           install_virtual_ip=False, tls_version=None):
    """strongswan.conf text for an instance living in `directory`.
    keylog: log the IKE and CHILD_SA keys (tests only, INTEROP-NOTES.md).
    rsa_pss: sign IKE AUTH with RSASSA-PSS instead of PKCS#1 v1.5 (RFC 7427).
    install_virtual_ip: an End-User client installs the address it gets.
    tls_version: "1.2" or "1.3": EAP-TLS with that TLS version only
    (libtls' charon.tls.version_min/_max; 5.9.8 defaults to 1.2 only)."""
    values = {
        "DIR": directory,
        "KEYLOG": "chd = 4\n            ike = 4" if keylog else "",
        "COOKIE_THRESHOLD": str(cookie_threshold),
        "COOKIE_THRESHOLD_IP": str(cookie_threshold_ip),
        "BLOCK_THRESHOLD": str(block_threshold),
        "RETRANSMIT_TRIES": str(retransmit_tries),
        "RETRANSMIT_TIMEOUT": str(retransmit_timeout),
        "RSA_PSS": "yes" if rsa_pss else "no",
        "INSTALL_VIP": "yes" if install_virtual_ip else "no",
        "TLS": ("tls {{\n        version_min = {0}\n        version_max = {0}\n    }}".format(tls_version)
                if tls_version else ""),
    }
    with open(TEMPLATE) as f:
        text = f.read()
    for key, value in values.items():
        text = text.replace("@{}@".format(key), value)
    leftover = re.findall(r"@[A-Z_]{3,}@", text)
    if leftover:
        raise ValueError("unsubstituted template variables: {}".format(leftover))
    return text


def _seconds(duration):
    """'10s', '5m', '4h', '500ms' or a number -> seconds (float)."""
    if isinstance(duration, (int, float)):
        return float(duration)
    m = re.fullmatch(r"\s*([0-9.]+)\s*(ms|s|m|h|d)?\s*", duration)
    if not m:
        raise ValueError("bad duration " + repr(duration))
    scale = {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    return float(m.group(1)) * scale


def _swan_time(duration):
    """A duration in strongSwan's syntax (whole seconds)."""
    return "{}s".format(max(0, int(round(_seconds(duration)))))


def _lifetimes(rekey_time, jitter, lifetime, hard_key):
    """strongSwan's rekey/rand/over(life) settings. strongSwan's rand_time
    is subtracted from rekey_time at random, like the phalanxd contract's
    rekey_jitter; the hard limit is `lifetime` (default rekey_time * 1.1)."""
    rekey = _seconds(rekey_time)
    hard = _seconds(lifetime) if lifetime is not None else rekey * 1.1
    rand = _seconds(jitter) if jitter is not None else 0.0
    out = ["rekey_time = {}".format(_swan_time(rekey)), "rand_time = {}".format(_swan_time(rand))]
    if hard_key == "over_time":
        out.append("over_time = {}".format(_swan_time(max(1.0, hard - rekey))))
    else:
        out.append("life_time = {}".format(_swan_time(max(hard, rekey + 1.0))))
    return out


def _block(name, lines, indent):
    pad = "    " * indent
    body = "".join(l if l.endswith("\n") else pad + "    " + l + "\n" for l in lines)
    return "{pad}{name} {{\n{body}{pad}}}\n".format(pad=pad, name=name, body=body)


def _child_block(child):
    lines = [
        "local_ts = " + ",".join(child.local_ts),
        "remote_ts = " + ",".join(child.remote_ts),
        "mode = " + child.mode,
        "esp_proposals = " + ",".join(child.esp_proposals),
        "start_action = none",
        "dpd_action = clear",
        "close_action = none",
    ]
    lines += _lifetimes(child.rekey_time, child.rekey_jitter, child.lifetime, "life_time")
    return _block(child.name, lines, 3)


def render_swanctl_conf(conn, cert_names=None):
    """swanctl.conf text for `conn` (an ikegw.Conn). cert_names: the file
    names of our certificate and the CA under x509/ and x509ca/."""
    eap = conn.auth in ("eap-mschapv2", "eap-tls")
    local = ["auth = " + ("psk" if conn.auth == "psk" else conn.auth if eap else "pubkey"),
             "id = \"{}\"".format(conn.local_id)]
    if eap:
        # An End-User: EAP-MSCHAPv2 or EAP-TLS (its certificate, found by
        # the EAP identity) for itself, the gateway's certificate.
        local.append("eap_id = \"{}\"".format(conn.local_id))
    remote = ["auth = " + (conn.swan_remote_auth or ("psk" if conn.auth == "psk" else "pubkey"))]
    if conn.remote_id:
        remote.append("id = \"{}\"".format(conn.remote_id))
    if conn.auth in ("pubkey", "eap-tls"):
        local.append("certs = " + cert_names["cert"])
    if conn.auth in ("pubkey", "eap-mschapv2", "eap-tls") or conn.swan_remote_auth == "pubkey":
        remote.append("cacerts = " + cert_names["ca"])
    lines = [
        "version = 2",
        "local_addrs = " + conn.local_addr,
        "remote_addrs = " + (conn.remote_addr or "%any"),
        "local_port = 500",
        "remote_port = {}".format(conn.remote_port),
        "proposals = " + ",".join(conn.proposals),
        # kernel-libipsec has no plain ESP; UDP encapsulation is forced by
        # faking NAT detection (RFC 7296 §2.23).
        "encap = yes",
        "fragmentation = yes",
        "send_certreq = yes",
        "send_cert = always" if conn.auth == "pubkey" else "send_cert = ifasked",
        "reauth_time = 0",
        "dpd_delay = " + _swan_time(conn.dpd_delay),
        "unique = no",
        "mobike = " + ("yes" if conn.mobike else "no"),
    ]
    if conn.vips:
        lines.append("vips = " + ",".join(conn.vips))
    lines += _lifetimes(conn.rekey_time, conn.rekey_jitter, conn.lifetime, "over_time")
    lines.append(_block("local", local, 2))
    lines.append(_block("remote", remote, 2))
    lines.append(_block("children", [_child_block(c) for c in conn.children], 2))
    text = "connections {\n" + _block(conn.name, lines, 1) + "}\n"
    if conn.auth == "eap-mschapv2":
        secret = ["id = \"{}\"".format(conn.local_id), "secret = \"{}\"".format(conn.psk)]
        text += "\nsecrets {\n" + _block("eap-" + conn.name, secret, 1) + "}\n"
    if conn.auth == "psk":
        secret = ["id-1 = \"{}\"".format(conn.local_id)]
        if conn.remote_id:
            secret.append("id-2 = \"{}\"".format(conn.remote_id))
        secret.append("secret = \"{}\"".format(conn.psk))
        text += "\nsecrets {\n" + _block("ike-" + conn.name, secret, 1) + "}\n"
    return "# swanctl.conf written by tests/netns/swan.py\n" + text


# ------------------------------------------------------------------ parsing
def parse_pretty(text):
    """`swanctl --pretty` output -> list of (message name, dict). Sections
    `name {` ... `}` become dicts, lists `name = [` ... `]` lists of strings,
    `key = value` strings (the value is the rest of the line)."""
    messages = []
    stack = []
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line:
            continue
        if not stack:
            m = re.fullmatch(r"(.+?)\s*\{", line)
            if m:
                top = {}
                messages.append((m.group(1), top))
                stack.append(top)
            continue
        cur = stack[-1]
        if line in ("}", "]"):
            stack.pop()
            continue
        if isinstance(cur, list):
            cur.append(line)
            continue
        m = re.fullmatch(r"(\S+)\s*(?:=\s*)?\{", line)
        if m:
            cur[m.group(1)] = {}
            stack.append(cur[m.group(1)])
            continue
        m = re.fullmatch(r"(\S+)\s*(?:=\s*)?\[", line)
        if m:
            cur[m.group(1)] = []
            stack.append(cur[m.group(1)])
            continue
        m = re.fullmatch(r"(\S+)\s*=\s?(.*)", line)
        if m:
            cur[m.group(1)] = m.group(2)
    return messages


def parse_list_sas(text):
    """`swanctl --list-sas --pretty` -> list of IKE SA dicts (with the
    connection name under "name"; children under "child-sas")."""
    out = []
    for name, body in parse_pretty(text):
        if name != "list-sa event":
            continue
        for conn, sa in body.items():
            if isinstance(sa, dict):
                sa = dict(sa)
                sa["name"] = conn
                out.append(sa)
    return out


LOG_LINE = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) \S+ (?:<([^>]*)> )?"
                      r"(generating|parsed) (\S+) (request|response) (\d+) \[(.*)\]")
RETRANSMIT = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) \S+ (?:<([^>]*)> )?retransmit \d+ of request with "
                        r"message ID (\d+)")


def _log_seconds(m):
    h, mi, s, ms = (int(x) for x in m.group(1, 2, 3, 4))
    return h * 3600 + mi * 60 + s + ms / 1000.0


def log_exchanges(text):
    """charon log (filelog with time_add_ms and ike_name) -> list of dicts
    {t: seconds since midnight, sa: "conn|id", dir: "generating"|"parsed",
    exchange, kind: "request"|"response", id: message id, payloads: [...]}
    plus {dir: "retransmit", ...} entries for retransmitted requests."""
    out = []
    for line in text.splitlines():
        m = LOG_LINE.match(line)
        if m:
            out.append({"t": _log_seconds(m), "sa": m.group(5), "dir": m.group(6), "exchange": m.group(7),
                        "kind": m.group(8), "id": int(m.group(9)), "payloads": m.group(10).split()})
            continue
        m = RETRANSMIT.match(line)
        if m:
            out.append({"t": _log_seconds(m), "sa": m.group(5), "dir": "retransmit", "exchange": None,
                        "kind": "request", "id": int(m.group(6)), "payloads": []})
    return out


def rekey_durations(text):
    """Our CREATE_CHILD_SA exchanges from a charon log: list of dicts
    {kind: "ike"|"child", start, seconds, retransmits} (request generated ->
    response parsed; an IKE SA rekey carries KE and no TSi, RFC 7296 §1.3.2;
    a Child SA rekey N(REKEY_SA), §1.3.3)."""
    pending, out = {}, []
    for e in log_exchanges(text):
        key = (e["sa"], e["id"])
        if e["dir"] == "generating" and e["exchange"] == "CREATE_CHILD_SA" and e["kind"] == "request":
            kind = "ike" if "KE" in e["payloads"] and "TSi" not in e["payloads"] else "child"
            pending[key] = {"kind": kind, "start": e["t"], "retransmits": 0}
        elif e["dir"] == "retransmit" and key in pending:
            pending[key]["retransmits"] += 1
        elif e["dir"] == "parsed" and e["exchange"] == "CREATE_CHILD_SA" and e["kind"] == "response" \
                and key in pending:
            r = pending.pop(key)
            r["seconds"] = round(e["t"] - r["start"], 3)
            out.append(r)
    return out


# ------------------------------------------------------------------ charon
class Charon:
    """One charon instance in gateway namespace `gw` of `topo`
    (a phxnet.Topology); files under topo.run_dir/NAME/."""

    def __init__(self, topo, gw, name=None):
        self.topo, self.gw = topo, gw
        self.name = name or "charon-" + gw
        self.dir = os.path.join(topo.run_dir, self.name)
        self.vici = os.path.join(self.dir, "charon.vici")
        self.log_path = os.path.join(self.dir, "charon.log")
        self.proc = None
        for sub in ("run", "x509", "x509ca", "private"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)

    def env(self):
        return dict(os.environ, STRONGSWAN_CONF=os.path.join(self.dir, "strongswan.conf"), SWANCTL_DIR=self.dir)

    def configure(self, conn, **conf_args):
        """Writes strongswan.conf and swanctl.conf for `conn`, copies its
        certificate, key and CA into the swanctl directories."""
        with open(os.path.join(self.dir, "strongswan.conf"), "w") as f:
            f.write(render_strongswan_conf(self.dir, **conf_args))
        names = None
        if conn.auth == "eap-mschapv2" or (conn.auth == "psk" and conn.swan_remote_auth == "pubkey"):
            names = {"ca": "ca.pem"}
            shutil.copy(conn.ca, os.path.join(self.dir, "x509ca", names["ca"]))
        if conn.auth in ("pubkey", "eap-tls"):
            names = {"cert": self.gw + ".pem", "ca": "ca.pem"}
            shutil.copy(conn.cert, os.path.join(self.dir, "x509", names["cert"]))
            shutil.copy(conn.key, os.path.join(self.dir, "private", self.gw + ".key"))
            shutil.copy(conn.ca, os.path.join(self.dir, "x509ca", names["ca"]))
        with open(os.path.join(self.dir, "swanctl.conf"), "w") as f:
            f.write(render_swanctl_conf(conn, names))

    def start(self, seconds=10):
        """Starts charon (private /run) and waits for its vici socket."""
        script = "mount --bind '{}' /run && exec {}".format(os.path.join(self.dir, "run"), CHARON)
        self.proc = self.topo.popen(self.name, self.gw, ["unshare", "-m", "sh", "-c", script], env=self.env())
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if os.path.exists(self.vici) and self.swanctl("--stats", check=False).returncode == 0:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("charon {} did not start (alive={}):\n{}{}".format(
            self.name, self.alive(), self.topo.log_of(self.name)[-2000:], self.log()[-3000:]))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        self.topo.stop(self.name)

    def swanctl(self, *args, timeout=30, check=True):
        """swanctl ARGS --uri unix://DIR/charon.vici, inside the namespace."""
        argv = ["swanctl"] + list(args) + ["--uri", "unix://" + self.vici]
        proc = self.topo.run(self.gw, argv, timeout=timeout, check=False, env=self.env())
        if check and proc.returncode != 0:
            raise RuntimeError("swanctl {} on {} failed ({}):\n{}{}\n--- charon log\n{}".format(
                " ".join(args), self.name, proc.returncode, proc.stdout[-3000:], proc.stderr[-2000:],
                self.log()[-3000:]))
        return proc

    def load(self):
        return self.swanctl("--load-all", "--noprompt", "--file", os.path.join(self.dir, "swanctl.conf"))

    def initiate(self, child, ike=None, timeout=20, check=True):
        args = ["--initiate", "--child", child, "--timeout", str(timeout)]
        if ike:
            args += ["--ike", ike]
        return self.swanctl(*args, timeout=timeout + 10, check=check)

    def terminate(self, ike, timeout=10, check=True):
        return self.swanctl("--terminate", "--ike", ike, "--timeout", str(timeout), timeout=timeout + 10,
                            check=check)

    def rekey(self, ike=None, child=None, check=True):
        """swanctl --rekey for the IKE SA or the Child SA (by name)."""
        args = ["--rekey"] + (["--ike", ike] if ike else ["--child", child])
        return self.swanctl(*args, check=check)

    def list_sas(self):
        return parse_list_sas(self.swanctl("--list-sas", "--pretty").stdout)

    def log(self):
        try:
            with open(self.log_path) as f:
                return f.read()
        except FileNotFoundError:
            return ""


def log_time(line):
    """The wall-clock time (epoch seconds, today) of a charon log line
    ("HH:MM:SS.mmm 03[IKE] ...")."""
    stamp = line.split()[0]
    h, m, rest = stamp.split(":")
    now = time.time()
    midnight = now - (now % 86400)
    t = midnight + int(h) * 3600 + int(m) * 60 + float(rest)
    return t - 86400 if t > now + 60 else t


def lost_after(ping_log, t):
    """icmp_seq numbers sent after epoch time `t` with no reply, from
    `ping -D -i 0.01` output (sends are 10 ms apart from the first)."""
    replies = {}
    for m in re.finditer(r"^\[(\d+\.\d+)\].*icmp_seq=(\d+)", ping_log, re.M):
        replies[int(m.group(2))] = float(m.group(1))
    if not replies:
        return ["no reply at all"]
    first_seq = min(replies)
    t0 = replies[first_seq] - 0.002 - (first_seq - 1) * 0.01
    last = max(replies)
    return [seq for seq in range(1, last + 1)
            if seq not in replies and t0 + (seq - 1) * 0.01 > t]


class MoveTraffic:
    """A 10 ms ping from `vip` in `ns` to `server` (in `server_ns`) and a
    TCP download from it (iperf3 -R, 20 Mbit/s, 5 s) across an End-User's
    MOBIKE move: start it, move, then `check` the result."""

    def __init__(self, topo, ns, vip, server_ns, server):
        self.topo = topo
        self.pinger = topo.popen("ping-move", ns, ["ping", "-D", "-i", "0.01", "-c", "600", "-W", "1", "-I", vip,
                                                   server])
        topo.popen("iperf3-s", server_ns, ["iperf3", "-s", "-1", "-B", server])
        time.sleep(0.3)
        self.download = topo.popen("iperf3-c", ns, ["iperf3", "-c", server, "-B", vip, "-R", "-t", "5",
                                                    "-b", "20M", "-J"])
        time.sleep(1.0)

    def check(self, charon):
        """Waits for both; the download must complete and at most one ping
        sent after `charon` announced the move (UPDATE_SA_ADDRESSES) may
        go unanswered (one round trip here is under one 10 ms ping)."""
        self.pinger.wait(20)
        self.download.wait(30)
        report = json.loads(self.topo.log_of("iperf3-c") or "{}")
        received = report.get("end", {}).get("sum_received", {}).get("bytes", 0)
        assert self.download.returncode == 0 and received > 0, self.topo.log_of("iperf3-c")[-2000:]
        log = charon.log()
        announced = [line for line in log.splitlines() if "UPDATE_SA_ADDRESSES" in line or "UPD_SA_ADDR" in line]
        assert announced, log[-3000:]
        pings = self.topo.log_of("ping-move")
        lost = lost_after(pings, log_time(announced[0]))
        print("pings lost in all: {}; after the announcement: {}; downloaded {} bytes".format(
            len(lost_after(pings, 0)), lost, received))
        assert len(lost) <= 1, "pings lost after the move was announced: {}".format(lost)
