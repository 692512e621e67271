#!/usr/bin/env python3
"""Rekeys under load, shared by tests/netns/test_ike_interop.py
(`test_rekey_under_load`, 65 s) and bench/rekey-under-load.sh (minutes).

    hostA --(iperf3 -u RATE [-R], ICMP echo every 10 ms)--> gwA ==ESP/UDP==> gwB --> hostB
             gwA: initiator, Child SA rekey every ~CHILD s, IKE SA every ~IKE s
             gwB: responder, lifetimes of hours (no rekey collisions)

`SpiWatcher` polls one gateway's SAs and records every IKE and Child SPI
pair seen (rekeys = distinct pairs - 1) with the time it first appeared;
`run` returns the counts, iperf3's and the pinger's losses.
"""

import json
import threading
import time

import ikegw
import phxnet
import swan


class SpiWatcher(threading.Thread):
    """Polls a gateway's SAs every `interval` seconds and records every IKE
    SPI pair and Child SPI pair seen (rekeys = distinct pairs - 1)."""

    def __init__(self, gw_obj, interval=0.5):
        super().__init__(daemon=True)
        self.gw_obj, self.interval = gw_obj, interval
        self.ike, self.child, self.errors, self.first_seen = set(), set(), [], {}
        self.stop_event = threading.Event()

    def run(self):
        while not self.stop_event.is_set():
            try:
                now = time.time()
                for sa in self.gw_obj.view():
                    self._see(self.ike, (sa["spi_i"], sa["spi_r"]), now)
                    for c in sa["children"]:
                        self._see(self.child, (c["spi_in"], c["spi_out"]), now)
            except Exception as e:  # recorded; callers assert there were none
                self.errors.append(repr(e))
            self.stop_event.wait(self.interval)

    def _see(self, seen, key, now):
        if key not in seen:
            seen.add(key)
            self.first_seen[key] = now

    def rekey_times(self, t0):
        """When new SPIs were first seen, in seconds after wall time t0."""
        return sorted(round(t - t0, 1) for t in self.first_seen.values() if t > t0)

    def finish(self):
        self.stop_event.set()
        self.join(10)


NAMESPACES = ("hostA", "gwA", "gwB", "hostB")

# Phalanx counters that are not lost traffic: keepalives and IKE messages on
# the encapsulation port, dummy packets (RFC 4303 §2.6).
NOT_LOSS = ("natt_keepalive", "ike_marker", "dummy")
# Phalanx daemon counters that count a dropped packet. Not no_policy and
# policy_discard: those are policy decisions (RFC 4301), and the kernel's
# own IPv6 router solicitations on the TUN device (one every few seconds,
# then backing off) match no policy; a rekey that lost its SA shows as
# no_outbound_sa.
DAEMON_LOSS = ("tun_malformed", "no_outbound_sa", "send_errors", "recv_errors", "io_dropped",
               "ike_queue_full")


def _snmp_udp(topo, ns):
    lines = [l.split() for l in topo.run(ns, ["cat", "/proc/net/snmp"]).stdout.splitlines() if l.startswith("Udp:")]
    return {k: int(v) for k, v in zip(lines[0][1:], lines[1][1:])}


def kernel_drops(topo):
    """Every place the kernel counts a dropped packet on this topology:
    per namespace its interfaces' rx/tx drops, its qdiscs' drops and its
    UDP receive-buffer overflows; machine-wide the backlog drops of
    /proc/net/softnet_stat (shared by all namespaces). {name: count}."""
    out = {}
    for ns in NAMESPACES:
        for link in json.loads(topo.run(ns, ["ip", "-s", "-j", "link", "show"]).stdout or "[]"):
            stats = link.get("stats64", {})
            for way in ("rx", "tx"):
                out["{}.{}.{}_dropped".format(ns, link["ifname"], way)] = stats.get(way, {}).get("dropped", 0)
        qdiscs = json.loads(topo.run(ns, ["tc", "-s", "-j", "qdisc", "show"]).stdout or "[]")
        for q in qdiscs:
            out["{}.{}.qdisc_{}_drops".format(ns, q.get("dev"), q.get("kind"))] = q.get("drops", 0)
        udp = _snmp_udp(topo, ns)
        out["{}.udp.RcvbufErrors".format(ns)] = udp["RcvbufErrors"]
        out["{}.udp.InErrors".format(ns)] = udp["InErrors"]
    with open("/proc/net/softnet_stat") as f:
        out["softnet.dropped"] = sum(int(line.split()[1], 16) for line in f if line.strip())
    return out


def phalanx_losses(flat):
    """The counters of `phalanxctl counters` (flattened) that count lost
    traffic: every ESP drop reason but keepalives, IKE and dummies, and
    the daemon's drop counters. {name: count}."""
    out = {}
    for name, value in flat.items():
        if name.startswith("drops.") and not name.endswith(NOT_LOSS):
            out[name] = value
        elif name.startswith("daemon.") and name.endswith(DAEMON_LOSS):
            out[name] = value
    return out


def _delta(before, after):
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) > 0}


def attribute_losses(r):
    """Why `r`'s pings may have been lost, or None when that is fine:
    every lost ping must be matched by drops counted outside the gateway
    under test, and the gateway under test (Phalanx's counters, and the
    kernel of its namespace) must have counted none. A loss nobody
    counted, or one the gateway under test counted, is a failure."""
    if r["ping_lost"] == 0:
        return None
    dut_ns = r["dut_ns"] + "."
    dut = {k: v for k, v in r["kernel_drops"].items() if k.startswith(dut_ns)}
    dut.update({"phalanx." + k: v for k, v in r["dut_losses"].items()})
    # The hosts' UDP overflows are iperf3's own socket: they drop no ping.
    elsewhere = {k: v for k, v in r["kernel_drops"].items()
                 if not k.startswith(dut_ns) and not k.startswith(("hostA.udp.", "hostB.udp."))}
    elsewhere.update({"peer." + k: v for k, v in r["peer_losses"].items()})
    if dut:
        return "the gateway under test dropped packets: {}".format(dut)
    if not elsewhere:
        return "no drop was counted anywhere (Phalanx, its peer, the kernel of any namespace)"
    return None


def _double(duration):
    return "{}s".format(int(2 * swan._seconds(duration)))


def pair(topo, dut_impl, peer_impl, child_rekey="10s", ike_rekey="30s", esp="aes128gcm16"):
    """(gwA initiator with short lifetimes, gwB responder with long ones),
    not started. strongSwan is configured without ESN (its userspace ESP
    has none), Phalanx offers ESN and no-ESN."""
    def esp_for(impl):
        return [esp + ("-noesn" if impl == "strongswan" else "-esn-noesn")]
    a = ikegw.site_conn("gwA", True, esp_proposals=esp_for(dut_impl))
    # Hard lifetimes twice the rekey times: a rekey that takes seconds on
    # a slow link must not meet the hard expiry (default rekey_time * 1.1).
    a.rekey_time, a.rekey_jitter, a.lifetime = ike_rekey, "2s", _double(ike_rekey)
    c = a.children[0]
    c.rekey_time, c.rekey_jitter, c.lifetime = child_rekey, "1s", _double(child_rekey)
    b = ikegw.site_conn("gwB", False, esp_proposals=esp_for(peer_impl))
    b.rekey_time, b.children[0].rekey_time = "4h", "1h"
    return ikegw.make_gateway(dut_impl, topo, "gwA", a), ikegw.make_gateway(peer_impl, topo, "gwB", b)


def run(topo, dut, other, seconds, rate="50M", interval=0.01, reverse=False):
    """Established pair -> traffic for `seconds` while watching rekeys on
    `dut`. reverse: the UDP bulk flows hostB -> hostA (iperf3 -R). Returns
    a dict of counts (see the keys below)."""
    watcher = SpiWatcher(dut)
    watcher.start()
    drops0 = kernel_drops(topo)
    dut0, peer0 = phalanx_losses(dut.counters()), phalanx_losses(other.counters())
    t0 = time.monotonic()
    pings = int(seconds / interval)
    pinger = ikegw.start_pinger(topo, "hostA", phxnet.HOSTB_V4, interval, pings)
    topo.lib("phx_iperf_server")
    iperf = topo.run("hostA", ["iperf3", "-c", phxnet.HOSTB_V4] + (["-R"] if reverse else []) +
                     ["-u", "-b", rate, "-l", "1200", "-t", str(seconds), "-J"], timeout=seconds + 30, check=False)
    ping = ikegw.pinger_result(topo, pinger, timeout=max(10, seconds + 20 - (time.monotonic() - t0)))
    watcher.finish()
    drops = _delta(drops0, kernel_drops(topo))
    dut_losses = _delta(dut0, phalanx_losses(dut.counters()))
    peer_losses = _delta(peer0, phalanx_losses(other.counters()))
    report = json.loads(iperf.stdout) if iperf.stdout.strip() else {"error": iperf.stderr[-2000:]}
    udp = report.get("end", {}).get("sum", {})
    return {
        "dut": dut.impl, "peer": other.impl, "seconds": round(time.monotonic() - t0, 1), "rate": rate,
        "direction": "hostB -> hostA" if reverse else "hostA -> hostB",
        "child_rekeys": len(watcher.child) - 1, "ike_rekeys": len(watcher.ike) - 1,
        "rekey_times": watcher.rekey_times(ping["start_wall"]), "watch_errors": watcher.errors[:5],
        "ping_sent": ping["sent"], "ping_lost": ping["sent"] - ping["received"], "ping_lost_at_s": ping["lost_at_s"],
        "iperf_error": report.get("error"), "udp_packets": udp.get("packets"), "udp_lost": udp.get("lost_packets"),
        "udp_lost_percent": udp.get("lost_percent"),
        "udp_rcvbuf_errors": {g: drops.get(g + ".udp.RcvbufErrors", 0) for g in ("gwA", "gwB")},
        "dut_ns": dut.gw, "kernel_drops": drops, "dut_losses": dut_losses, "peer_losses": peer_losses,
    }


def summary(r):
    """One line for logs and test output."""
    return ("rekey under load ({dut} <-> {peer}): {child_rekeys} child rekeys, {ike_rekeys} IKE rekeys in "
            "{seconds:.0f}s; ping {ping_sent} sent, {ping_lost} lost; iperf3 UDP {rate}bit/s {direction}: {udp_lost} of "
            "{udp_packets} datagrams lost ({pct} %); UDP receive buffer overflows {udp_rcvbuf_errors}; "
            "drops counted: kernel {kernel_drops}, {dut} under test {dut_losses}, peer {peer_losses}"
            ).format(pct="-" if r["udp_lost_percent"] is None else "{:.3f}".format(r["udp_lost_percent"]), **r)
