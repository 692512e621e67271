#!/usr/bin/env python3
"""IKE rekey benchmarks in the netns topology (tests/netns), called by
bench/rekey-under-load.sh and bench/rekey-slow-links.sh.

    hostA -- gwA (initiator, short lifetimes) === WAN (wan0, tc tbf) === gwB (responder) -- hostB

under-load: Child SAs rekey every ~10 s, the IKE SA every ~30 s (gwA's
    lifetimes; gwB's are hours) while hostA sends iperf3 UDP at a fixed
    rate and an ICMP echo every 10 ms to hostB for --seconds; counts the
    rekeys (distinct SPIs polled on gwA), lost pings and lost datagrams;
    one run per peer implementation on gwB.
slow-links: for each --rates value, tc tbf (rate, 16 KiB burst, --limit
    bytes of queue) on wan0 of both gateways while iperf3 TCP runs
    hostA -> hostB; gwA rekeys its Child SA every ~--child-rekey and its IKE
    SA every ~--ike-rekey. Each rekey's duration (request sent -> response
    processed): from charon's log when gwA is strongSwan
    (swan.rekey_durations); from `phalanxctl counters` (CREATE_CHILD_SA
    requests sent / responses received, polled every 0.1 s) and
    `phalanxctl ike` (a new IKE SPI pair = an IKE SA rekey) when gwA is
    phalanxd. Packets dropped for lack of an SA: phalanxd's
    `no_outbound_sa` and `unknown_spi` counters, charon's "could not find an
    outbound IPsec SA" / "inbound ESP packet does not belong to an installed
    SA" log lines (both gateways).

Both print a table and insert a dated entry into bench/RESULTS.md (under
their own section) unless --no-results. The implementation on gwA is
--dut (default: PHX_IKE_UNDER_TEST, else phalanx).
"""

import argparse
import datetime
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "netns"))

import ikegw  # noqa: E402
import phxnet  # noqa: E402
import rekeyload  # noqa: E402
import swan  # noqa: E402

RESULTS = os.path.join(HERE, "RESULTS.md")
SWAN_DEFAULT_RETRANSMITS = {"retransmit_timeout": 4.0, "retransmit_tries": 5}  # strongSwan's own defaults


def log(msg):
    print("[{}] {}".format(time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def on_signal(signum, _frame):
    raise KeyboardInterrupt("signal {}".format(signum))


def make_pair(topo, dut_impl, peer_impl, **kw):
    dut, peer = rekeyload.pair(topo, dut_impl, peer_impl, **kw)
    for g in (dut, peer):
        if g.impl == "strongswan":
            g.conf_args.update(SWAN_DEFAULT_RETRANSMITS)
    ikegw.start_all(peer, dut)
    dut.initiate(timeout=60)
    if not ikegw.wait_for(lambda: ikegw.established(dut) and ikegw.established(peer), 30):
        raise RuntimeError("tunnel not established: {} / {}".format(dut.view(), peer.view()))
    if not topo.wait_ping("hostA", phxnet.HOSTB_V4, 20):
        raise RuntimeError("no ping through the tunnel")
    return dut, peer


# ------------------------------------------------------------------ results
def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return "{} cores, {}, kernel {}".format(os.cpu_count(), model, os.uname().release)


def revision():
    def git(*args):
        return subprocess.run(["git", "-C", REPO] + list(args), capture_output=True, text=True).stdout.strip()
    rev = git("rev-parse", "--short", "HEAD") or "unknown"
    return rev + ("+dirty" if git("status", "--porcelain") else "")


def insert_entry(section, intro, entry):
    """Inserts `entry` at the end of `section` of RESULTS.md (created with
    `intro` when missing)."""
    text = open(RESULTS).read() if os.path.exists(RESULTS) else ""
    title = "## " + section
    if title not in text:
        text = text.rstrip("\n") + "\n\n" + title + "\n\n" + intro + "\n"
    start = text.index(title)
    nxt = text.find("\n## ", start + len(title))
    end = len(text) if nxt < 0 else nxt + 1
    body = text[:end].rstrip("\n") + "\n\n" + entry.rstrip("\n") + "\n"
    text = body + ("\n" + text[end:] if end < len(text) else "")
    with open(RESULTS, "w") as f:
        f.write(text)
    log("entry added to bench/RESULTS.md under '{}'".format(section))


def header_lines(command, extra):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return ["### {} — {}".format(now, revision()), "", "- machine: {}".format(machine()),
            "- command: `{}`".format(command)] + ["- " + e for e in extra] + [""]


# ------------------------------------------------------------------ under load
def under_load(args):
    rows = []
    for n, peer in enumerate(args.peers):
        topo = phxnet.Topology(prefix="phxrl{}p{}".format(os.getpid(), n))
        try:
            topo.up()
            offloads = topo.lib("phx_offload_summary").stdout.strip()
            dut, other = make_pair(topo, args.dut, peer)
            log("{} <-> {}: {} s of {} UDP + ping every 10 ms".format(dut.impl, other.impl, args.seconds, args.rate))
            r = rekeyload.run(topo, dut, other, args.seconds, args.rate)
            log(rekeyload.summary(r))
            rows.append(r)
        finally:
            topo.down()
    table = ["| gwA initiator | gwB responder | seconds | Child rekeys | IKE rekeys | pings sent | pings lost "
             "| iperf3 UDP datagrams | lost (%) | UDP rcvbuf overflows gwA / gwB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        table.append("| {dut} | {peer} | {seconds:.0f} | {child_rekeys} | {ike_rekeys} | {ping_sent} | **{ping_lost}** "
                     "| {udp_packets} | {udp_lost} ({pct}) | {a} / {b} |".format(
                         pct="{:.3f}".format(r["udp_lost_percent"] or 0), a=r["udp_rcvbuf_errors"]["gwA"],
                         b=r["udp_rcvbuf_errors"]["gwB"], **r))
    print("\n".join(table))
    if not args.no_results:
        extra = ["{}; gateway TUN MTU 1400".format(offloads),
                 "traffic: iperf3 -u -b {} -l 1200 hostA -> hostB plus one ICMP echo every 10 ms "
                 "(tests/netns/ikegw.PINGER), {} s per peer".format(args.rate, args.seconds),
                 "gwA: Child SA rekey_time 10s (jitter 1s), IKE SA rekey_time 30s (jitter 2s); gwB: 1h / 4h; "
                 "PSK, aes128gcm16-prfsha256-x25519, ESP aes128gcm16 (no ESN with strongSwan)",
                 "rekeys: distinct SPI pairs seen polling gwA every 0.5 s, minus one"]
        insert_entry("IKE rekeys under load (bench/rekey-under-load.sh)",
                     "Child SA rekeys every ~10 s and IKE SA rekeys every ~30 s initiated by gwA under constant "
                     "UDP load and a 10 ms ping; losses counted end to end. Newest entry last.",
                     "\n".join(header_lines(args.command, extra) + table))
    return 0 if all(r["ping_lost"] == 0 and not r["iperf_error"] for r in rows) else 1


# ------------------------------------------------------------------ slow links
class PhalanxRekeyPoller(threading.Thread):
    """Times phalanxd's CREATE_CHILD_SA exchanges from its counters: a
    request is sent when `requests_sent` grows, answered when
    `responses_received` grows; a new IKE SPI pair in the same poll makes
    it an IKE SA rekey."""

    def __init__(self, dut, interval=0.1):
        super().__init__(daemon=True)
        self.dut, self.interval = dut, interval
        self.done, self.errors, self.rekeys = threading.Event(), [], []

    @staticmethod
    def _exchange(flat, suffix):
        for path, value in flat.items():
            p = re.sub(r"[^a-z0-9]", "", path.lower())
            if "createchildsa" in p and p.endswith(suffix):
                return value
        return None

    def run(self):
        starts, last_req, last_resp, spis = [], None, None, None
        while not self.done.is_set():
            try:
                flat = self.dut.counters()
                now = time.monotonic()
                req, resp = self._exchange(flat, "requestssent"), self._exchange(flat, "responsesreceived")
                if req is None or resp is None:
                    raise RuntimeError("phalanxctl counters has no CREATE_CHILD_SA requests_sent / "
                                       "responses_received: {}".format(sorted(flat)[:60]))
                cur = {(sa["spi_i"], sa["spi_r"]) for sa in self.dut.view()}
                if last_req is not None:
                    starts += [now] * (req - last_req)
                    for _ in range(resp - last_resp):
                        if starts:
                            t0 = starts.pop(0)
                            kind = "ike" if spis is not None and cur - spis else "child"
                            self.rekeys.append({"kind": kind, "start": t0, "seconds": round(now - t0, 3),
                                                "retransmits": None})
                last_req, last_resp, spis = req, resp, cur
            except Exception as e:  # reported with the results
                self.errors.append(repr(e))
                if len(self.errors) > 20:
                    return
            self.done.wait(self.interval)


SWAN_NO_OUT = "could not find an outbound IPsec SA"
SWAN_NO_IN = "inbound ESP packet does not belong to an installed SA"


def drops(gws):
    """(no outbound SA, unknown SPI) summed over the gateways."""
    out_sa = in_spi = 0
    for g in gws:
        if g.impl == "phalanx":
            flat = g.counters()
            out_sa += ikegw.counter(flat, "no_outbound_sa") or 0
            in_spi += ikegw.counter(flat, "drops.unknown_spi") or 0
        else:
            text = g.log()
            out_sa += text.count(SWAN_NO_OUT)
            in_spi += text.count(SWAN_NO_IN)
    return out_sa, in_spi


def shape(topo, rate_mbit, limit, where):
    """tc tbf at `rate_mbit` with `limit` bytes of queue in both gateway
    namespaces. where="egress": on wan0 itself (the sending daemon's UDP
    socket buffer then bounds what waits in the qdisc: the backlog builds
    in its TUN queue instead); "ingress": on an ifb device fed from wan0's
    ingress, a queue that fills like a slow router's."""
    tbf = ["tbf", "rate", "{}mbit".format(rate_mbit), "burst", "16kb", "limit", str(limit)]
    for gw in ("gwA", "gwB"):
        if where == "egress":
            topo.run(gw, ["tc", "qdisc", "replace", "dev", "wan0", "root"] + tbf)
            continue
        topo.run(gw, ["ip", "link", "add", "ifb0", "type", "ifb"])
        topo.run(gw, ["ip", "link", "set", "ifb0", "up"])
        topo.run(gw, ["tc", "qdisc", "add", "dev", "ifb0", "root"] + tbf)
        topo.run(gw, ["tc", "qdisc", "add", "dev", "wan0", "handle", "ffff:", "ingress"])
        topo.run(gw, ["tc", "filter", "add", "dev", "wan0", "parent", "ffff:", "protocol", "all", "u32", "match",
                      "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", "ifb0"])


def retransmits(g, log_start):
    """IKE requests retransmitted by `g` so far (phalanxd: its counter;
    charon: "retransmit N of request" lines after log offset log_start)."""
    if g.impl == "phalanx":
        return ikegw.counter(g.counters(), "retransmits_sent", scope="ike") or 0
    return sum(1 for e in swan.log_exchanges(g.log()[log_start:]) if e["dir"] == "retransmit")


def rx_bytes(topo):
    return int(topo.run("hostB", ["cat", "/sys/class/net/eth0/statistics/rx_bytes"]).stdout)


def slow_link(args, n, rate):
    topo = phxnet.Topology(prefix="phxsl{}r{}".format(os.getpid(), n))
    try:
        topo.up()
        offloads = topo.lib("phx_offload_summary").stdout.strip()
        shape(topo, rate, args.limit, args.shape)
        dut, peer = make_pair(topo, args.dut, args.peer, child_rekey=args.child_rekey, ike_rekey=args.ike_rekey)
        drops0 = drops((dut, peer))
        retr0 = retransmits(dut, 0)
        log_start = len(dut.log()) if dut.impl == "strongswan" else 0
        poller = PhalanxRekeyPoller(dut) if dut.impl == "phalanx" else None
        if poller:
            poller.start()
        topo.lib("phx_iperf_server")
        log("{} Mbit/s: {} s of iperf3 TCP hostA -> hostB".format(rate, args.seconds))
        # Goodput from hostB's received bytes: a loaded userspace gateway
        # can hold seconds of data, and iperf3 would wait for all of it.
        rx0, t0 = rx_bytes(topo), time.monotonic()
        topo.popen("iperf-bulk", "hostA", ["iperf3", "-c", phxnet.HOSTB_V4, "-C", args.cc,
                                           "-t", str(args.seconds + 600)])
        time.sleep(args.seconds)
        goodput = (rx_bytes(topo) - rx0) * 8 / (time.monotonic() - t0) / 1e6
        if poller:
            poller.done.set()
            poller.join(5)
            rekeys, errors = poller.rekeys, poller.errors
        else:
            rekeys, errors = swan.rekey_durations(dut.log()[log_start:]), []
        drops1 = drops((dut, peer))
        retr = retransmits(dut, log_start) - retr0
        topo.stop("iperf-bulk")
        return {"rate": rate, "goodput": goodput, "rekeys": rekeys, "errors": errors[:3], "retransmits": retr,
                "no_outbound_sa": drops1[0] - drops0[0], "unknown_spi": drops1[1] - drops0[1],
                "offloads": offloads, "dut": dut.impl, "peer": peer.impl}
    finally:
        topo.down()


def _stats(values):
    if not values:
        return "-"
    return "{:.2f} ({:.2f}-{:.2f})".format(statistics.median(values), min(values), max(values))


def slow_links(args):
    rows = [slow_link(args, n, rate) for n, rate in enumerate(args.rates)]
    table = ["| link Mbit/s | goodput Mbit/s (hostB rx) | IKE rekeys | IKE rekey s: median (min-max) | Child rekeys "
             "| Child rekey s: median (min-max) | gwA IKE retransmits | dropped: no outbound SA / unknown SPI |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ike = [x["seconds"] for x in r["rekeys"] if x["kind"] == "ike"]
        child = [x["seconds"] for x in r["rekeys"] if x["kind"] == "child"]
        table.append("| {} | {:.2f} | {} | **{}** | {} | **{}** | {} | {} / {} |".format(
            r["rate"], r["goodput"], len(ike), _stats(ike), len(child), _stats(child),
            r["retransmits"], r["no_outbound_sa"], r["unknown_spi"]))
        if r["errors"]:
            log("{} Mbit/s: errors {}".format(r["rate"], r["errors"]))
    print("\n".join(table))
    ok = all(r["rekeys"] and not r["errors"] for r in rows)
    if not args.no_results and rows:
        how = ("charon log, request generated -> response parsed (ms timestamps)" if rows[0]["dut"] == "strongswan"
               else "phalanxctl counters polled every 0.1 s (CREATE_CHILD_SA requests sent -> responses received)")
        extra = ["{}; gateway TUN MTU 1400".format(rows[0]["offloads"]),
                 "gwA (initiator): {}; gwB (responder): {}; PSK, aes128gcm16-prfsha256-x25519, ESP aes128gcm16".format(
                     rows[0]["dut"], rows[0]["peer"]),
                 "WAN: `tbf rate R burst 16kb limit {}` in gwA and gwB, {}; iperf3 TCP hostA -> hostB, {} s per "
                 "rate".format(args.limit, "on wan0 (egress)" if args.shape == "egress" else
                               "on ifb0 fed from wan0's ingress (u32 + mirred)", args.seconds),
                 "bulk: `iperf3 -C {}` (this machine defaults to BBR, which keeps queues short)".format(args.cc),
                 "gwA rekey_time: Child SA {}, IKE SA {} (jitter 1 s / 2 s); strongSwan retransmits after 4 s "
                 "(x1.8, its defaults)".format(args.child_rekey, args.ike_rekey),
                 "rekey duration: {}".format(how),
                 "dropped: phalanxd `no_outbound_sa` and `unknown_spi` / charon log lines, both gateways"]
        if not ok:
            extra.append("incomplete: " + "; ".join("{} Mbit/s: {}".format(r["rate"], r["errors"] or "no rekey seen")
                                                    for r in rows if r["errors"] or not r["rekeys"]))
        insert_entry("IKE rekeys on slow links (bench/rekey-slow-links.sh)",
                     "Duration of IKE SA and Child SA rekeys on a shaped WAN carrying bulk TCP, and packets "
                     "dropped for lack of an SA. Published reference: IKE SA rekeying took 5.3 s at 1.5 Mbit/s "
                     "and 1.45 s at >= 6 Mbit/s, with 10 packets dropped. Newest entry last.",
                     "\n".join(header_lines(args.command, extra) + table))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    default_dut = os.environ.get("PHX_IKE_UNDER_TEST", "phalanx")
    u = sub.add_parser("under-load")
    u.add_argument("--seconds", type=int, default=300)
    u.add_argument("--rate", default="50M")
    u.add_argument("--peers", type=lambda s: s.split(","), default=["strongswan", "phalanx"])
    s = sub.add_parser("slow-links")
    s.add_argument("--rates", type=lambda v: [float(x) if "." in x else int(x) for x in v.split(",")],
                   default=[1.5, 4, 6, 8, 10])
    s.add_argument("--seconds", type=int, default=120)
    s.add_argument("--limit", type=int, default=1000000, help="tbf queue in bytes")
    s.add_argument("--shape", choices=("ingress", "egress"), default="ingress")
    s.add_argument("--cc", default="cubic", help="TCP congestion control of the bulk flow (iperf3 -C)")
    s.add_argument("--child-rekey", default="20s")
    s.add_argument("--ike-rekey", default="45s")
    s.add_argument("--peer", default="strongswan")
    for p in (u, s):
        p.add_argument("--dut", default=default_dut, choices=("phalanx", "strongswan"))
        p.add_argument("--no-results", action="store_true")
        p.add_argument("--command", default=" ".join(sys.argv))
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, on_signal)
    return under_load(args) if args.cmd == "under-load" else slow_links(args)


if __name__ == "__main__":
    sys.exit(main())
