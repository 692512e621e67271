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


def udp_rcvbuf_errors(topo, ns):
    """Udp RcvbufErrors of namespace `ns` (/proc/net/snmp)."""
    lines = [l.split() for l in topo.run(ns, ["cat", "/proc/net/snmp"]).stdout.splitlines() if l.startswith("Udp:")]
    return int(dict(zip(lines[0], lines[1]))["RcvbufErrors"])


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
    t0 = time.monotonic()
    pings = int(seconds / interval)
    pinger = ikegw.start_pinger(topo, "hostA", phxnet.HOSTB_V4, interval, pings)
    topo.lib("phx_iperf_server")
    rcvbuf0 = {g: udp_rcvbuf_errors(topo, g) for g in ("gwA", "gwB")}
    iperf = topo.run("hostA", ["iperf3", "-c", phxnet.HOSTB_V4] + (["-R"] if reverse else []) +
                     ["-u", "-b", rate, "-l", "1200", "-t", str(seconds), "-J"], timeout=seconds + 30, check=False)
    ping = ikegw.pinger_result(topo, pinger, timeout=max(10, seconds + 20 - (time.monotonic() - t0)))
    watcher.finish()
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
        "udp_rcvbuf_errors": {g: udp_rcvbuf_errors(topo, g) - rcvbuf0[g] for g in ("gwA", "gwB")},
    }


def summary(r):
    """One line for logs and test output."""
    return ("rekey under load ({dut} <-> {peer}): {child_rekeys} child rekeys, {ike_rekeys} IKE rekeys in "
            "{seconds:.0f}s; ping {ping_sent} sent, {ping_lost} lost; iperf3 UDP {rate}bit/s {direction}: {udp_lost} of "
            "{udp_packets} datagrams lost ({pct} %); UDP receive buffer overflows {udp_rcvbuf_errors}"
            ).format(pct="-" if r["udp_lost_percent"] is None else "{:.3f}".format(r["udp_lost_percent"]), **r)
